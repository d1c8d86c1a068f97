/*
 * Peer access ("mesh") algorithms of allgather, alltoall, bcast, allreduce
 * and reduce_scatter on the simulator: schedules that read and write the
 * other ranks' buffers and synchronise through flags (xccl_peer_t), run by
 * the one executor.
 *
 *   - every p in 1..64: allgather, alltoall, allreduce, reduce_scatter and
 *     reduce_scatter_block (regular counts) in place and not, bcast from
 *     every root; counts 0, 1, around p, and a large one; every element
 *     kind of the harness, plus float sums whose bits depend on the order
 *     (the mesh reduces in rank order 0..p-1: compared bit for bit); the
 *     split bcast (the root writes a part of each reader's RECV) with
 *     copied peers (nothing mapped), also at sizes of whole 4 KiB parts;
 *   - the same for the "leader" forms (algos/mesh_leader.c: one rank
 *     does the whole collective on everyone's buffers), where they apply
 *     (not in place for alltoall and reduce_scatter);
 *   - the mapped allreduce fails where the peers can only be copied from;
 *   - planted bugs: a schedule with one of its barriers removed fails on
 *     the simulator (wrong data, or a rank touching a buffer of a rank
 *     that has not entered the call or has left it), while the intact
 *     schedule passes under the same seeds (the split bcast: each of its
 *     four waits, on the root's side or the readers').
 *
 * The same jobs under many seeds, and the further collectives, are in
 * test_mesh_rooted; the catalog and the executor's refusals in
 * test_mesh_catalog.  Expected values come from scalar references
 * (sim_harness.h), not from the algorithms; buffers have their exact size
 * (ASan).
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh_sim.h"

/* ------------------------------------------------------------------------ */
/* Allgather, alltoall, bcast                                               */
/* ------------------------------------------------------------------------ */

START_TEST(allgather_mesh)
{
    const int p = (_i - 1) % SMALL_P + 1;
    leader_form = _i > SMALL_P;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    char bad[512] = "";
    for (size_t k = 0; k < n; k++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            ck_assert_msg(0 == run_allgather(p, sz[k], in_place, seed_of(p, 0), bad, sizeof(bad)), "%s", bad);
        }
    }
}
END_TEST

START_TEST(alltoall_mesh)
{
    const int p = (_i - 1) % SMALL_P + 1;
    leader_form = _i > SMALL_P;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    char bad[512] = "";
    for (size_t k = 0; k < n; k++) {
        /* LARGE blocks: p * p * LARGE bytes; keep the largest p cheaper */
        const size_t b = LARGE == sz[k] && p > 32 ? 1031 : sz[k];
        for (int in_place = 0; in_place < 2; in_place++) {
            ck_assert_msg(0 == run_alltoall(p, b, in_place, seed_of(p, 1), bad, sizeof(bad)), "%s", bad);
        }
    }
}
END_TEST

START_TEST(bcast_mesh)
{
    const int p = (_i - 1) % SMALL_P + 1;
    leader_form = _i > SMALL_P;
    bcast_split = _i > 2 * SMALL_P;
    size_t sz[9], n = sizes_at(p, LARGE, sz);
    if (bcast_split) {
        /* parts of whole 4 KiB units, and one unit more than p of them */
        sz[n++] = (size_t) p * 8192 + 4099;
    }
    int roots[SMALL_P];
    const int nroots = pick_roots(p, SMALL_P, roots);     /* every root */
    char bad[512] = "";
    for (size_t k = 0; k < n; k++) {
        for (int ri = 0; ri < nroots; ri++) {
            /* LARGE (and larger) from every root up to p = 16, else from five roots */
            if (sz[k] >= LARGE && p > 16 && ri % (p / 5 + 1) != 0 && ri != p - 1) {
                continue;
            }
            ck_assert_msg(0 == run_bcast(p, sz[k], roots[ri], seed_of(p, 2 + (unsigned) ri), bad, sizeof(bad)),
                          "%s", bad);
        }
    }
    leader_form = bcast_split = 0;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allreduce and reduce_scatter                                             */
/* ------------------------------------------------------------------------ */

START_TEST(allreduce_mesh)
{
    const int p = (_i - 1) % SMALL_P + 1;
    leader_form = _i > SMALL_P;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    char bad[512] = "";
    for (int k = 0; k < NKINDS; k++) {
        for (size_t c = 0; c < n; c++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                for (int how = leader_form ? AR_LEADER : 0; how < (leader_form ? AR_LEADER + 1 : NAR); how++) {
                    ck_assert_msg(0 == run_allreduce(p, k, how, sz[c], in_place, seed_of(p, 3), NULL, bad,
                                                     sizeof(bad)),
                                  "%s", bad);
                }
            }
        }
    }
}
END_TEST

/* Where the peers' buffers can only be copied from, the mapped builder's
 * reductions over a peer's SEND fail the run: the read-only simulator
 * would catch a read builder that reduced from a peer directly. */
START_TEST(allreduce_mapped_fails_read_only)
{
    enum { P = 3, N = 12 };
    job_t j;
    job_init(&j, P, sizeof(int32_t));
    j.read_only = 1;
    for (int r = 0; r < P; r++) {
        ck_assert_int_eq(xccl_build_allreduce_mesh(&j.sched[r], N, 0), 0);
        j.rbuf[r] = xmalloc(N * sizeof(int32_t));
        j.sbuf[r] = job_sbuf(&j, r, N * sizeof(int32_t));
        kind_fill(RED_I32_SUM, r, j.sbuf[r], N);
    }
    char err[256];
    ck_assert_int_ne(job_exec(&j, kind_fn(RED_I32_SUM), 7, "mapped allreduce, read-only peers", err,
                              sizeof(err)), 0);
    job_fini(&j);
}
END_TEST

START_TEST(reduce_scatter_mesh)
{
    const int p = (_i - 1) % SMALL_P + 1;
    leader_form = _i > SMALL_P;
    const size_t bases[] = { 0, 1, 37, 1001 };
    size_t *counts = xmalloc((size_t) p * sizeof(size_t));
    char bad[512] = "";
    for (int pat = 0; pat < NCNT; pat++) {
        for (size_t bi = 0; bi < sizeof(bases) / sizeof(bases[0]); bi++) {
            const size_t total = make_counts(p, pat, bases[bi], counts);
            for (int k = 0; k < NKINDS; k++) {
                for (int in_place = 0; in_place < 2; in_place++) {
                    /* pieces of 2 elements: small blocks only (schedules grow with
                     * blocks / 2 x p actions per rank) */
                    for (int how = leader_form ? AR_LEADER : 0; how < (leader_form ? AR_LEADER + 1 : NAR);
                         how += bases[bi] > 37 && AR_MAPPED == how ? 2 : 1) {
                        for (rs_by_block = 0; rs_by_block < (AR_LEADER == how ? 2 : 1); rs_by_block++) {
                            ck_assert_msg(0 == run_reduce_scatter(p, k, how, counts, total, in_place,
                                                                  seed_of(p, 4), NULL, bad, sizeof(bad)),
                                          "%s", bad);
                        }
                    }
                    rs_by_block = 0;
                }
            }
        }
    }
    free(counts);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Planted bugs: a barrier removed                                          */
/* ------------------------------------------------------------------------ */

/* An allreduce (rs 0) or reduce_scatter (rs 1) job of planted_failures. */
typedef struct {
    int rs, p, k, how, in_place;
    size_t count, total;
    const size_t *counts;
} ar_case_t;

static int run_ar_case(const void *c, unsigned seed, const xccl_sched_t *planted, char *bad, size_t badlen)
{
    const ar_case_t *a = c;
    return a->rs ? run_reduce_scatter(a->p, a->k, a->how, a->counts, a->total, a->in_place, seed, planted, bad,
                                      badlen)
                 : run_allreduce(a->p, a->k, a->how, a->count, a->in_place, seed, planted, bad, badlen);
}

/* Runs the allreduce (or reduce_scatter) with barrier `val` removed under
 * NSEEDS seeds; the intact schedule must pass under all of them.  Returns
 * how many seeds caught the bug; the first report in first_bad. */
static int planted_failures(int coll, int p, size_t count, int in_place, uint32_t val, char *first_bad,
                            size_t len)
{
    const int k = RED_I32_SUM, coll_rs = coll % 2,
              how = coll >= 4 ? AR_LEADER : coll >= 2 ? AR_READ_2 : AR_MAPPED;
    size_t *counts = xmalloc((size_t) p * sizeof(size_t));
    const size_t total = make_counts(p, CNT_REGULAR, count, counts);
    xccl_sched_t *cut = xmalloc((size_t) p * sizeof(*cut));
    size_t removed = 0;
    for (int r = 0; r < p; r++) {
        xccl_sched_t s;
        xccl_sched_init(&s, r, p, kind_es(k));
        if (coll_rs) {
            build_reduce_scatter(&s, how, counts, in_place);
        } else {
            build_allreduce(&s, how, count, in_place);
        }
        strip_waits(&s, val, &cut[r]);
        removed += s.nacts - cut[r].nacts;
        xccl_sched_fini(&s);
    }
    ck_assert_uint_gt(removed, 0);                          /* something was removed */
    const ar_case_t c = { coll_rs, p, k, how, in_place, count, total, counts };
    const int caught = planted_caught(run_ar_case, &c, p, 1000, cut, first_bad, len);
    cut_free(cut, p);
    free(counts);
    return caught;
}

static const struct {
    int rs;                    /* 0 allreduce, 1 reduce_scatter, 2 allreduce (read), 3 reduce_scatter (read),
                                * 4 allreduce (leader), 5 reduce_scatter (leader) */
    int in_place;
    uint32_t val;              /* the barrier removed */
    const char *why;
} plants[] = {
    { 0, 0, 1, "entry: reads inputs of ranks that have not entered" },
    { 0, 0, 2, "middle: copies slices before their owners reduced them" },
    { 0, 1, 2, "middle, in place: also overwrites inputs an owner still reads" },
    { 0, 0, 3, "exit: leaves while peers still read its slice" },
    { 1, 1, 2, "in place: overwrites RECV that peers still read as input" },
    { 1, 0, 2, "exit: leaves while peers still read its input" },
    { 2, 0, 1, "entry: reads inputs of ranks that have not entered" },
    { 2, 1, 2, "middle, in place: copies slices before their owners reduced them" },
    { 2, 0, 3, "exit: leaves while peers still read its slice" },
    { 3, 1, 2, "in place: overwrites RECV that peers still read as input" },
    { 3, 0, 2, "exit: leaves while peers still read its input" },
    { 4, 0, 1, "leader: reads inputs of ranks that have not entered" },
    { 4, 1, 1, "leader, in place: writes RECV of ranks that have not entered" },
    { 4, 0, 2, "leader: the others leave before their result is written" },
    { 5, 0, 1, "leader: reads inputs of ranks that have not entered" },
    { 5, 0, 2, "leader: the others leave before their result is written" },
};
#define NPLANTS ((int) (sizeof(plants) / sizeof(plants[0])))

START_TEST(planted_missing_barrier_fails)
{
    char first[512];
    for (int p = 2; p <= 9; p += 7) {
        const int caught = planted_failures(plants[_i].rs, p, 5, plants[_i].in_place, plants[_i].val, first,
                                            sizeof(first));
        fprintf(stderr, "planted %s barrier %u removed (%s), p=%d: %d of %d seeds fail; first: %s\n",
                (const char *[]){ "allreduce", "reduce_scatter", "allreduce (read)", "reduce_scatter (read)",
                                  "allreduce (leader)", "reduce_scatter (leader)" }[plants[_i].rs], plants[_i].val, plants[_i].why, p, caught, NSEEDS,
                first);
        ck_assert_msg(caught > 0, "barrier %u removed, p=%d: no seed caught it", plants[_i].val, p);
    }
}
END_TEST

/* The split bcast with one of its waits removed: on the root (val 1: it
 * writes a reader's RECV before the reader entered; val 2: it leaves while
 * readers still read its RECV) or on the readers (val 1: they read the
 * root's RECV before it entered; val 0: each reader's last wait, for the
 * root's 1 + k: it leaves before its part is written).  Every plant must
 * fail under some seed at p = 2 and 9, the intact schedule under none. */
static const struct {
    int on_root;
    uint32_t val;
    const char *why;
} split_plants[] = {
    { 1, 1, "root writes a reader's RECV before the reader entered" },
    { 1, 2, "root leaves while readers read its RECV" },
    { 0, 1, "readers read the root's RECV before it entered" },
    { 0, 0, "a reader leaves before the root wrote its part" },
};

/* A bcast job of planted_split_bcast_fails. */
typedef struct {
    int p;
    size_t n;
    int root;
} bcast_case_t;

static int run_bcast_case(const void *c, unsigned seed, const xccl_sched_t *planted, char *bad, size_t badlen)
{
    const bcast_case_t *b = c;
    return run_bcast_planted(b->p, b->n, b->root, seed, planted, bad, badlen);
}

START_TEST(planted_split_bcast_fails)
{
    char first[512];
    bcast_split = 1;
    for (int p = 2; p <= 9; p += 7) {
        const int root = p - 1;
        const size_t n = (size_t) p * 4096 + 77;
        xccl_sched_t *cut = xmalloc((size_t) p * sizeof(*cut));
        size_t removed = 0;
        for (int r = 0; r < p; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, p, 1);
            ck_assert_int_eq(xccl_build_bcast_mesh_split(&s, n, root), 0);
            const int k = ((r - root) % p + p) % p;
            const uint32_t val = split_plants[_i].val ? split_plants[_i].val : (uint32_t) (1 + k);
            if ((r == root) == split_plants[_i].on_root) {
                strip_waits(&s, val, &cut[r]);
            } else {
                strip_waits(&s, UINT32_MAX, &cut[r]);
            }
            removed += s.nacts - cut[r].nacts;
            xccl_sched_fini(&s);
        }
        ck_assert_uint_gt(removed, 0);
        const bcast_case_t bc = { p, n, root };
        const int caught = planted_caught(run_bcast_case, &bc, p, 2000, cut, first, sizeof(first));
        fprintf(stderr, "planted split bcast (%s), p=%d: %d of %d seeds fail; first: %s\n", split_plants[_i].why,
                p, caught, NSEEDS, first);
        ck_assert_msg(caught > 0, "%s, p=%d: no seed caught it", split_plants[_i].why, p);
        cut_free(cut, p);
    }
    bcast_split = 0;
}
END_TEST

int main(void)
{
    Suite *su;
    TCase *tc = mesh_tcase("mesh_algos", &su);
    tcase_add_loop_test(tc, planted_missing_barrier_fails, 0, NPLANTS);
    tcase_add_loop_test(tc, allgather_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_loop_test(tc, alltoall_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_loop_test(tc, planted_split_bcast_fails, 0, (int) (sizeof(split_plants) / sizeof(split_plants[0])));
    tcase_add_loop_test(tc, bcast_mesh, 1, 3 * SMALL_P + 1);  /* mesh, leader, then split */
    tcase_add_loop_test(tc, allreduce_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_test(tc, allreduce_mapped_fails_read_only);
    tcase_add_loop_test(tc, reduce_scatter_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    return xccl_check_run(su);
}
