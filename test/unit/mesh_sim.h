/*
 * What the peer access ("mesh") suites share (test_mesh_algos,
 * test_mesh_rooted, test_mesh_catalog), on top of sim_harness.h and
 * shm_sim.h (included here, with the suites' executor sequence base and
 * seed salt):
 *
 *   - the form the runs build (mesh or leader, the split bcast, the
 *     leader's reduce_scatter whole or block by block);
 *   - one run each of allgather, alltoall, bcast, allreduce and
 *     reduce_scatter: built (or planted), filled, run under a seed and
 *     checked against the scalar references;
 *   - planted bugs: a schedule's flag waits for one value removed, and
 *     the seeds that catch it while the intact schedule passes.
 */
#ifndef XCCL_TEST_MESH_SIM_H
#define XCCL_TEST_MESH_SIM_H

#define SIM_EXEC_SEQ 23
#define SIM_SEED_SALT 29u
#include "sim_harness.h"
#include "shm_sim.h"

#define SMALL_P 64                     /* every p in 1..SMALL_P */
#define LARGE 4099                     /* a large count / block, odd */
#define NSEEDS 24                      /* seeds of the many-interleavings and planted runs */

/* The form the allgather, alltoall and bcast runs build: 0 mesh, 1 leader. */
static int leader_form;
/* bcast only: 1 builds the split form (xccl_build_bcast_mesh_split: the
 * root writes a part of every reader's RECV), run with copied peers
 * (XCCL_PEER_COPY: read() and write(), nothing mapped); overrides
 * leader_form. */
static int bcast_split;

/* Rank r of j runs planted[r] instead of the schedule built (planted NULL:
 * the one built).  Returns whether it does. */
static inline int job_plant(job_t *j, int r, const xccl_sched_t *planted)
{
    if (NULL == planted) {
        return 0;
    }
    xccl_sched_fini(&j->sched[r]);
    j->sched[r] = planted[r];
    return 1;
}

/* Gives the planted schedules back to their caller before job_fini. */
static inline void job_unplant(job_t *j, const xccl_sched_t *planted)
{
    for (int r = 0; NULL != planted && r < j->p; r++) {
        memset(&j->sched[r], 0, sizeof(j->sched[r]));
    }
}

/* ------------------------------------------------------------------------ */
/* Allgather                                                                */
/* ------------------------------------------------------------------------ */

/* Builds, runs with seed, checks; returns 0 or a description in bad. */
static inline int run_allgather(int p, size_t b, int in_place, unsigned seed, char *bad, size_t badlen)
{
    const size_t total = (size_t) p * b;
    char what[128];
    job_t j;
    int rc = 0;
    snprintf(what, sizeof(what), "allgather %s p=%d block=%zu in_place=%d", leader_form ? "leader" : "mesh",
             p, b, in_place);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        ck_assert_int_eq(leader_form ? xccl_build_allgather_leader(&j.sched[r], b)
                                     : xccl_build_allgather_mesh(&j.sched[r], b), 0);
        ck_assert_str_eq(j.sched[r].algo, leader_form ? "leader" : "mesh");
        job_fill_allgather(&j, r, b, NULL, total, in_place);
    }
    rc = job_try(&j, NULL, seed, what, bad, badlen);
    rc = 0 == rc ? job_check_allgather(&j, b, NULL, what, bad, badlen) : rc;
    job_fini(&j);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Alltoall                                                                 */
/* ------------------------------------------------------------------------ */

static inline int run_alltoall(int p, size_t b, int in_place, unsigned seed, char *bad, size_t badlen)
{
    char what[128];
    job_t j;
    int rc = 0;
    if (leader_form && in_place && p > 1) {
        return 0;                        /* not applicable (catalog_leader_forms) */
    }
    snprintf(what, sizeof(what), "alltoall %s p=%d block=%zu in_place=%d", leader_form ? "leader" : "mesh",
             p, b, in_place);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        ck_assert_int_eq(leader_form ? xccl_build_alltoall_leader(&j.sched[r], b, in_place)
                                     : xccl_build_alltoall_mesh(&j.sched[r], b, in_place), 0);
        job_fill_alltoall(&j, r, b, in_place);
    }
    rc = job_try(&j, NULL, seed, what, bad, badlen);
    rc = 0 == rc ? job_check_alltoall(&j, b, in_place, what, bad, badlen) : rc;
    job_fini(&j);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Bcast                                                                    */
/* ------------------------------------------------------------------------ */

/* planted (NULL: none): the schedules to run instead of the ones built */
static inline int run_bcast_planted(int p, size_t n, int root, unsigned seed, const xccl_sched_t *planted,
                                    char *bad, size_t badlen)
{
    char what[160];
    job_t j;
    int rc = 0;
    snprintf(what, sizeof(what), "bcast %s p=%d bytes=%zu root=%d%s",
             bcast_split ? "mesh_split" : leader_form ? "leader" : "mesh", p, n, root, planted ? " (planted)" : "");
    job_init(&j, p, 1);
    j.read_only = bcast_split;
    for (int r = 0; r < p; r++) {
        ck_assert_int_eq(bcast_split   ? xccl_build_bcast_mesh_split(&j.sched[r], n, root)
                         : leader_form ? xccl_build_bcast_leader(&j.sched[r], n, root)
                                       : xccl_build_bcast_mesh(&j.sched[r], n, root), 0);
        job_plant(&j, r, planted);
        job_fill_bcast(&j, r, n, root);
    }
    rc = job_try(&j, NULL, seed, what, bad, badlen);
    rc = 0 == rc ? job_check_bcast(&j, n, root, what, bad, badlen) : rc;
    job_unplant(&j, planted);
    job_fini(&j);
    return rc;
}

static inline int run_bcast(int p, size_t n, int root, unsigned seed, char *bad, size_t badlen)
{
    return run_bcast_planted(p, n, root, seed, NULL, bad, badlen);
}

/* ------------------------------------------------------------------------ */
/* Allreduce and reduce_scatter                                             */
/* ------------------------------------------------------------------------ */

/* How the allreduce reaches the peers: mapped (xccl_build_allreduce_mesh),
 * or only by copies (xccl_build_allreduce_mesh_read, the simulator's peers
 * read-only) in pieces of two elements (many pieces, the last one short)
 * or of 64 KiB. */
enum { AR_MAPPED, AR_READ_2, AR_READ_64K, NAR, AR_LEADER = NAR };

static inline void build_allreduce(xccl_sched_t *s, int how, size_t count, int in_place)
{
    const size_t piece = AR_READ_2 == how ? 2 * s->elem_size : (size_t) 64 << 10;
    if (AR_LEADER == how) {
        ck_assert_int_eq(xccl_build_allreduce_leader(s, count), 0);
        ck_assert_str_eq(s->algo, "leader");
        return;
    }
    ck_assert_int_eq(AR_MAPPED == how ? xccl_build_allreduce_mesh(s, count, in_place)
                                      : xccl_build_allreduce_mesh_read(s, count, in_place, piece), 0);
    ck_assert_str_eq(s->algo, "mesh");
}

/* Allreduce: every rank's RECV equals the reference bit for bit (so the
 * ranks are identical); not in place the input survives. */
static inline int run_allreduce(int p, int k, int how, size_t count, int in_place, unsigned seed,
                                const xccl_sched_t *planted, char *bad, size_t badlen)
{
    const size_t es = kind_es(k);
    char what[160];
    job_t j;
    int rc = 0;
    snprintf(what, sizeof(what), "allreduce %s%s p=%d kind=%d count=%zu in_place=%d%s",
             AR_LEADER == how ? "leader" : "mesh",
             AR_MAPPED == how || AR_LEADER == how ? "" : AR_READ_2 == how ? " (read, 2-element pieces)" : " (read)", p, k,
             count, in_place, planted ? " (planted)" : "");
    job_init(&j, p, es);
    j.read_only = AR_MAPPED != how && AR_LEADER != how;
    for (int r = 0; r < p; r++) {
        if (!job_plant(&j, r, planted)) {
            build_allreduce(&j.sched[r], how, count, in_place);
        }
        job_fill_allreduce(&j, r, k, count, in_place);
    }
    rc = job_try(&j, kind_fn(k), seed, what, bad, badlen);
    rc = 0 == rc ? job_check_allreduce(&j, k, count, in_place, what, bad, badlen) : rc;
    job_unplant(&j, planted);
    job_fini(&j);
    return rc;
}

/* The leader's reduce_scatter: the whole vector folded in scratch (0) or
 * block by block (1); both are tested at every p (the default picks by
 * size: xccl_build_reduce_scatter_leader). */
static int rs_by_block;

static inline void build_reduce_scatter(xccl_sched_t *s, int how, const size_t *counts, int in_place)
{
    const size_t piece = AR_READ_2 == how ? 2 * s->elem_size : (size_t) 64 << 10;
    if (AR_LEADER == how) {
        ck_assert_int_eq(xccl_build_reduce_scatter_leader_at(s, counts, in_place,
                                                              rs_by_block ? 0 : SIZE_MAX), 0);
        ck_assert_str_eq(s->algo, "leader");
        return;
    }
    ck_assert_int_eq(AR_MAPPED == how ? xccl_build_reduce_scatter_mesh(s, counts, in_place)
                                      : xccl_build_reduce_scatter_mesh_read(s, counts, in_place, piece), 0);
    ck_assert_str_eq(s->algo, "mesh");
}

static inline int run_reduce_scatter(int p, int k, int how, const size_t *counts, size_t total, int in_place,
                                     unsigned seed, const xccl_sched_t *planted, char *bad, size_t badlen)
{
    const size_t es = kind_es(k);
    char what[160];
    job_t j;
    int rc = 0;
    if (AR_LEADER == how && in_place && p > 1) {
        return 0;                        /* not applicable (catalog_leader_forms) */
    }
    snprintf(what, sizeof(what), "reduce_scatter %s%s p=%d kind=%d total=%zu in_place=%d%s",
             AR_LEADER == how ? (rs_by_block ? "leader (block by block)" : "leader (whole)") : "mesh",
             AR_MAPPED == how || AR_LEADER == how ? "" : AR_READ_2 == how ? " (read, 2-element pieces)" : " (read)", p, k,
             total, in_place, planted ? " (planted)" : "");
    job_init(&j, p, es);
    j.read_only = AR_MAPPED != how && AR_LEADER != how;
    for (int r = 0; r < p; r++) {
        if (!job_plant(&j, r, planted)) {
            build_reduce_scatter(&j.sched[r], how, counts, in_place);
        }
        job_fill_reduce_scatter(&j, r, k, counts, total, in_place);
    }
    rc = job_try(&j, kind_fn(k), seed, what, bad, badlen);
    rc = 0 == rc ? job_check_reduce_scatter(&j, k, counts, total, in_place, what, bad, badlen) : rc;
    job_unplant(&j, planted);
    job_fini(&j);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Planted bugs: a barrier removed                                          */
/* ------------------------------------------------------------------------ */

/* A copy of s without the flag waits for value val (the posts stay, so
 * later barriers still match). */
static inline void strip_waits(const xccl_sched_t *s, uint32_t val, xccl_sched_t *out)
{
    xccl_sched_init(out, s->rank, s->size, s->elem_size);
    out->algo = s->algo;
    out->scratch_bytes = s->scratch_bytes;
    for (size_t st = 0; st < s->nsteps; st++) {
        const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        xccl_sched_step(out);
        for (size_t i = s->step_start[st]; i < end; i++) {
            const xccl_action_t *a = &s->acts[i];
            switch (a->kind) {
            case XCCL_ACT_COPY: xccl_sched_copy(out, a->dst, a->a, a->len); break;
            case XCCL_ACT_REDUCE: xccl_sched_reduce(out, a->dst, a->a, a->b, a->len); break;
            case XCCL_ACT_POST: xccl_sched_post(out, a->idx); break;
            case XCCL_ACT_WAIT:
                if (a->idx != val) {
                    xccl_sched_wait(out, a->peer, a->idx);
                }
                break;
            default: ck_abort_msg("unexpected action %d", a->kind);
            }
        }
    }
    ck_assert_int_eq(xccl_sched_finalize(out), 0);
}

/* One job of a case, run under seed with the schedules planted (NULL: the
 * ones built); 0, or -1 with a description in bad. */
typedef int (*mesh_run_fn)(const void *c, unsigned seed, const xccl_sched_t *planted, char *bad, size_t badlen);

/* Runs case c intact and with the schedules cut under NSEEDS seeds
 * (seed_of(p, salt + i)); the intact schedules must pass under all of
 * them.  Returns how many seeds caught the cut, the first report in
 * first. */
static inline int planted_caught(mesh_run_fn run, const void *c, int p, unsigned salt, const xccl_sched_t *cut,
                                 char *first, size_t len)
{
    char bad[512];
    int caught = 0;
    first[0] = '\0';
    for (unsigned sd = 0; sd < NSEEDS; sd++) {
        const unsigned seed = seed_of(p, salt + sd);
        ck_assert_msg(0 == run(c, seed, NULL, bad, sizeof(bad)), "intact schedule failed: %s", bad);
        if (0 != run(c, seed, cut, bad, sizeof(bad))) {
            caught++;
            if ('\0' == first[0]) {
                snprintf(first, len, "%s", bad);
            }
        }
    }
    return caught;
}

/* The suite `name` (into *su) and its one test case, "sim", 600 s a test;
 * xccl_check_run (check_main.h) runs it. */
static inline TCase *mesh_tcase(const char *name, Suite **su)
{
    TCase *tc = tcase_create("sim");
    *su = suite_create(name);
    tcase_set_timeout(tc, 600);
    suite_add_tcase(*su, tc);
    return tc;
}

/* Frees the p schedules of a cut and the array. */
static inline void cut_free(xccl_sched_t *cut, int p)
{
    for (int r = 0; r < p; r++) {
        xccl_sched_fini(&cut[r]);
    }
    free(cut);
}

#endif
