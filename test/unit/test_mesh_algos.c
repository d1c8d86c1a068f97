/*
 * Peer access ("mesh") algorithms on the simulator: schedules that read
 * and write the other ranks' buffers and synchronise through flags
 * (xccl_peer_t), run by the one executor.
 *
 *   - every p in 1..64: allgather, alltoall, allreduce, reduce_scatter and
 *     reduce_scatter_block (regular counts) in place and not, bcast from
 *     every root; counts 0, 1, around p, and a large one; every element
 *     kind of the harness, plus float sums whose bits depend on the order
 *     (the mesh reduces in rank order 0..p-1: compared bit for bit); the
 *     split bcast (the root writes a part of each reader's RECV) with
 *     copied peers (nothing mapped), also at sizes of whole 4 KiB parts;
 *   - the same jobs under many simulator seeds (interleavings) at a few p;
 *   - planted bugs: a schedule with one of its barriers removed fails on
 *     the simulator (wrong data, or a rank touching a buffer of a rank
 *     that has not entered the call or has left it), while the intact
 *     schedule passes under the same seeds (the split bcast: each of its
 *     four waits, on the root's side or the readers');
 *   - without peer access the executor refuses such a schedule;
 *   - the catalog: "mesh" applies only with peer access on one node, so
 *     the cost model never predicts it otherwise;
 *   - the same for the "leader" forms (algos/mesh_leader.c: one rank
 *     does the whole collective on everyone's buffers), where they apply
 *     (not in place for alltoall and reduce_scatter);
 *   - reduce, gather(v), scatter(v) and allgatherv in both forms (the
 *     CUDA IPC provider's, algos/reduce_mesh.c and the others): every p
 *     in 1..64, every root up to p = 8 (else five), in place and not;
 *     reduce on every element kind with counts 0, 1, around p and large,
 *     compared bit for bit with the rank-order fold; gather and scatter
 *     blocks of those sizes; the v forms with every count pattern (zeros
 *     among them), blocks in reverse order with gaps that must stay
 *     untouched, and off the root counts and displacements that a
 *     schedule must not read; buffers MPI lets be NULL are NULL; inputs
 *     unchanged; the same under many seeds, and each with a flag wait
 *     removed failing;
 *   - the collectives without such forms (barrier, alltoallv: not
 *     xccl_coll_mapped) have neither, and none of their algorithms names
 *     a peer's buffer even where peer access is offered (the level's shm
 *     barrier needs its slot).
 *
 * Expected values come from scalar references (sim_harness.h), not from
 * the algorithms; buffers have their exact size (ASan).
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 23
#define SIM_SEED_SALT 29u
#include "sim_harness.h"
#include "shm_sim.h"
#include "xccl_layout.h"
#include "xccl_build.h"
#include "xccl_cost.h"
#include "xccl_catalog.h"

#define SMALL_P 64                     /* every p in 1..SMALL_P */
#define LARGE 4099                     /* a large count / block, odd */

/* The form the allgather, alltoall and bcast runs build: 0 mesh, 1 leader. */
static int leader_form;
/* bcast only: 1 builds the split form (xccl_build_bcast_mesh_split: the
 * root writes a part of every reader's RECV), run with copied peers
 * (XCCL_PEER_COPY: read() and write(), nothing mapped); overrides
 * leader_form. */
static int bcast_split;

/* ------------------------------------------------------------------------ */
/* Allgather                                                                */
/* ------------------------------------------------------------------------ */

/* Builds, runs with seed, checks; returns 0 or a description in bad. */
static int run_allgather(int p, size_t b, int in_place, unsigned seed, char *bad, size_t badlen)
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

/* ------------------------------------------------------------------------ */
/* Alltoall                                                                 */
/* ------------------------------------------------------------------------ */

static int run_alltoall(int p, size_t b, int in_place, unsigned seed, char *bad, size_t badlen)
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

/* ------------------------------------------------------------------------ */
/* Bcast                                                                    */
/* ------------------------------------------------------------------------ */

/* planted (NULL: none): the schedules to run instead of the ones built */
static int run_bcast_planted(int p, size_t n, int root, unsigned seed, const xccl_sched_t *planted, char *bad,
                             size_t badlen)
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
        if (planted) {
            xccl_sched_fini(&j.sched[r]);
            j.sched[r] = planted[r];
        }
        job_fill_bcast(&j, r, n, root);
    }
    rc = job_try(&j, NULL, seed, what, bad, badlen);
    rc = 0 == rc ? job_check_bcast(&j, n, root, what, bad, badlen) : rc;
    if (planted) {
        for (int r = 0; r < p; r++) {
            memset(&j.sched[r], 0, sizeof(j.sched[r]));    /* the caller's */
        }
    }
    job_fini(&j);
    return rc;
}

static int run_bcast(int p, size_t n, int root, unsigned seed, char *bad, size_t badlen)
{
    return run_bcast_planted(p, n, root, seed, NULL, bad, badlen);
}

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

/* How the allreduce reaches the peers: mapped (xccl_build_allreduce_mesh),
 * or only by copies (xccl_build_allreduce_mesh_read, the simulator's peers
 * read-only) in pieces of two elements (many pieces, the last one short)
 * or of 64 KiB. */
enum { AR_MAPPED, AR_READ_2, AR_READ_64K, NAR, AR_LEADER = NAR };

static void build_allreduce(xccl_sched_t *s, int how, size_t count, int in_place)
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
static int run_allreduce(int p, int k, int how, size_t count, int in_place, unsigned seed,
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
        if (planted) {
            xccl_sched_fini(&j.sched[r]);
            j.sched[r] = planted[r];
        } else {
            build_allreduce(&j.sched[r], how, count, in_place);
        }
        job_fill_allreduce(&j, r, k, count, in_place);
    }
    rc = job_try(&j, kind_fn(k), seed, what, bad, badlen);
    rc = 0 == rc ? job_check_allreduce(&j, k, count, in_place, what, bad, badlen) : rc;
    if (planted) {
        for (int r = 0; r < p; r++) {
            memset(&j.sched[r], 0, sizeof(j.sched[r]));    /* the caller's */
        }
    }
    job_fini(&j);
    return rc;
}

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

/* The leader's reduce_scatter: the whole vector folded in scratch (0) or
 * block by block (1); both are tested at every p (the default picks by
 * size: xccl_build_reduce_scatter_leader). */
static int rs_by_block;

static void build_reduce_scatter(xccl_sched_t *s, int how, const size_t *counts, int in_place)
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

static int run_reduce_scatter(int p, int k, int how, const size_t *counts, size_t total, int in_place,
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
        if (planted) {
            xccl_sched_fini(&j.sched[r]);
            j.sched[r] = planted[r];
        } else {
            build_reduce_scatter(&j.sched[r], how, counts, in_place);
        }
        job_fill_reduce_scatter(&j, r, k, counts, total, in_place);
    }
    rc = job_try(&j, kind_fn(k), seed, what, bad, badlen);
    rc = 0 == rc ? job_check_reduce_scatter(&j, k, counts, total, in_place, what, bad, badlen) : rc;
    if (planted) {
        for (int r = 0; r < p; r++) {
            memset(&j.sched[r], 0, sizeof(j.sched[r]));
        }
    }
    job_fini(&j);
    return rc;
}

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
/* Reduce, gather(v), scatter(v), allgatherv                                */
/* ------------------------------------------------------------------------ */

/* One case of the further collectives' peer-access forms (mesh or leader,
 * as leader_form says). */
typedef struct {
    int coll;                  /* XCCL_COLL_REDUCE, _GATHER(V), _SCATTER(V) or _ALLGATHERV */
    int p;
    int k;                     /* reduce: element kind */
    size_t n;                  /* reduce: count; gather, scatter: block bytes */
    const size_t *bytes;       /* the v forms: bytes per rank */
    int root, in_place;        /* in place: the root's (rooted), every rank's (allgatherv) */
} fcase_t;

static const char *fcoll_name(int coll)
{
    return xccl_coll_name((xccl_coll_t) coll);
}

/* The v forms' blocks: bytes[q] at displs[q], in reverse rank order with a
 * one-byte gap before each and after the last (never to be written);
 * the span's bytes. */
static size_t v_layout(int p, const size_t *bytes, size_t *displs)
{
    size_t at = 0;
    for (int q = p - 1; q >= 0; q--) {
        displs[q] = ++at;
        at += bytes[q];
    }
    return at + 1;
}

/* Rank r's schedule.  Off the root of gatherv and scatterv only bytes[r]
 * is given: the other counts and every displacement hold values that
 * would send a schedule reading them out of its buffers. */
static void build_further(xccl_sched_t *s, const fcase_t *fc, const size_t *len, const size_t *at)
{
    const int r = s->rank, p = fc->p, root = fc->root;
    const int ip = fc->in_place && (XCCL_COLL_ALLGATHERV == fc->coll || r == root);
    size_t *v = xmalloc(2 * (size_t) p * sizeof(size_t));
    for (int q = 0; q < p; q++) {
        v[q] = len[q];
        v[p + q] = at[q];
        if ((XCCL_COLL_GATHERV == fc->coll || XCCL_COLL_SCATTERV == fc->coll) && r != root) {
            v[q] = q == r ? len[q] : 7777;
            v[p + q] = 12345;
        }
    }
    int rc = -1;
    switch (fc->coll) {
    case XCCL_COLL_REDUCE:
        rc = leader_form ? xccl_build_reduce_leader(s, fc->n, root, ip) : xccl_build_reduce_mesh(s, fc->n, root, ip);
        break;
    case XCCL_COLL_GATHER:
        rc = leader_form ? xccl_build_gather_leader(s, fc->n, root, ip) : xccl_build_gather_mesh(s, fc->n, root, ip);
        break;
    case XCCL_COLL_SCATTER:
        rc = leader_form ? xccl_build_scatter_leader(s, fc->n, root, ip) : xccl_build_scatter_mesh(s, fc->n, root, ip);
        break;
    case XCCL_COLL_GATHERV:
        rc = leader_form ? xccl_build_gatherv_leader(s, v, v + p, root, ip)
                         : xccl_build_gatherv_mesh(s, v, v + p, root, ip);
        break;
    case XCCL_COLL_SCATTERV:
        rc = leader_form ? xccl_build_scatterv_leader(s, v, v + p, root, ip)
                         : xccl_build_scatterv_mesh(s, v, v + p, root, ip);
        break;
    case XCCL_COLL_ALLGATHERV:
        rc = leader_form ? xccl_build_allgatherv_leader(s, v, v + p, ip) : xccl_build_allgatherv_mesh(s, v, v + p, ip);
        break;
    default: ck_abort_msg("collective %d", fc->coll);
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(s->algo, leader_form ? "leader" : "mesh");
    free(v);
}

/* The blocks' layout: len[q] bytes at at[q] of a span of bytes (reduce:
 * the count's bytes). */
static size_t further_layout(const fcase_t *fc, size_t *len, size_t *at)
{
    if (NULL != fc->bytes) {
        memcpy(len, fc->bytes, (size_t) fc->p * sizeof(size_t));
        return v_layout(fc->p, len, at);
    }
    for (int q = 0; q < fc->p; q++) {
        len[q] = XCCL_COLL_REDUCE == fc->coll ? fc->n * kind_es(fc->k) : fc->n;
        at[q] = XCCL_COLL_REDUCE == fc->coll ? 0 : (size_t) q * fc->n;
    }
    return XCCL_COLL_REDUCE == fc->coll ? len[0] : (size_t) fc->p * fc->n;
}

/* What a gathered span holds: block q (ag_pattern) at at[q], gap bytes
 * 0xEE elsewhere. */
static void gathered(int p, const size_t *len, const size_t *at, size_t span, unsigned char *out)
{
    memset(out, 0xEE, span);
    for (int q = 0; q < p; q++) {
        for (size_t i = 0; i < len[q]; i++) {
            out[at[q] + i] = ag_pattern(q, i);
        }
    }
}

/* The root's SEND of a scatter: block q (pattern(root, q, .)) at at[q],
 * poison 0x3C in the gaps (never to arrive anywhere). */
static void scattered(int p, int root, const size_t *len, const size_t *at, size_t span, unsigned char *out)
{
    memset(out, 0x3C, span);
    for (int q = 0; q < p; q++) {
        for (size_t i = 0; i < len[q]; i++) {
            out[at[q] + i] = pattern(root, q, i);
        }
    }
}

/* A rank's input as made for the case (gather, allgatherv: its block;
 * reduce: its elements; scatter, the root: every block). */
static void further_input(const fcase_t *fc, int r, const size_t *len, const size_t *at, size_t span,
                          unsigned char *out)
{
    if (XCCL_COLL_REDUCE == fc->coll) {
        kind_fill(fc->k, r, out, fc->n);
    } else if (XCCL_COLL_SCATTER == fc->coll || XCCL_COLL_SCATTERV == fc->coll) {
        scattered(fc->p, fc->root, len, at, span, out);
    } else {
        for (size_t i = 0; i < len[r]; i++) {
            out[i] = ag_pattern(r, i);
        }
    }
}

/* Rank r's buffers, each of its exact size; NULL where MPI lets it be
 * NULL (not significant, an empty block, in place). */
static void further_fill(job_t *j, const fcase_t *fc, int r, const size_t *len, const size_t *at, size_t span)
{
    const int root = fc->root, coll = fc->coll;
    const int scatter = XCCL_COLL_SCATTER == coll || XCCL_COLL_SCATTERV == coll;
    const int agv = XCCL_COLL_ALLGATHERV == coll, reduce = XCCL_COLL_REDUCE == coll;
    const int ip = fc->in_place && (agv || r == root);
    j->sbuf[r] = j->rbuf[r] = NULL;
    if (reduce) {
        if (r == root) {
            j->rbuf[r] = xmalloc(span);
            memset(j->rbuf[r], 0xEE, span);
        }
        unsigned char *in = ip ? j->rbuf[r] : (j->sbuf[r] = job_sbuf(j, r, span));
        further_input(fc, r, len, at, span, in);
    } else if (scatter) {
        if (r == root) {
            j->sbuf[r] = job_sbuf(j, r, span);
            further_input(fc, r, len, at, span, j->sbuf[r]);
        }
        if (!ip && len[r] > 0) {
            j->rbuf[r] = xmalloc(len[r]);
            memset(j->rbuf[r], 0xEE, len[r]);
        }
    } else {
        /* gather(v), allgatherv: RECV at the root (everywhere), SEND or,
         * in place, the block already in RECV */
        if (agv || r == root) {
            j->rbuf[r] = xmalloc(span);
            memset(j->rbuf[r], 0xEE, span);
        }
        if (ip) {
            further_input(fc, r, len, at, span, j->rbuf[r] + at[r]);
        } else if (len[r] > 0) {
            j->sbuf[r] = job_sbuf(j, r, len[r]);
            further_input(fc, r, len, at, span, j->sbuf[r]);
        }
    }
}

/* The first byte where buf differs from want, into bad. */
static int differs(const unsigned char *buf, const unsigned char *want, size_t n, const char *what, int r,
                   const char *which, char *bad, size_t badlen)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != want[i]) {
            snprintf(bad, badlen, "%s: rank %d %s byte %zu: 0x%02x, want 0x%02x", what, r, which, i, buf[i],
                     want[i]);
            return -1;
        }
    }
    return 0;
}

/* Results against references made here; every input unchanged. */
static int further_check(const job_t *j, const fcase_t *fc, const size_t *len, const size_t *at, size_t span,
                         const char *what, char *bad, size_t badlen)
{
    const int p = fc->p, root = fc->root, coll = fc->coll;
    const int scatter = XCCL_COLL_SCATTER == coll || XCCL_COLL_SCATTERV == coll;
    unsigned char *want = xmalloc(span);
    int rc = 0;
    for (int r = 0; 0 == rc && r < p; r++) {
        if (j->sbuf_owned[r]) {
            further_input(fc, r, len, at, span, want);
            rc = differs(j->sbuf[r], want, scatter ? span : XCCL_COLL_REDUCE == coll ? span : len[r], what, r,
                         "SEND", bad, badlen);
        }
        if (0 != rc || NULL == j->rbuf[r]) {
            continue;
        }
        if (XCCL_COLL_REDUCE == coll) {
            kind_reference(fc->k, p, want, fc->n);
            rc = differs(j->rbuf[r], want, span, what, r, "RECV (the rank-order reduction)", bad, badlen);
        } else if (scatter) {
            for (size_t i = 0; i < len[r]; i++) {
                want[i] = pattern(root, r, i);
            }
            rc = differs(j->rbuf[r], want, len[r], what, r, "RECV", bad, badlen);
        } else {
            gathered(p, len, at, span, want);
            rc = differs(j->rbuf[r], want, span, what, r, "RECV", bad, badlen);
        }
    }
    free(want);
    return rc;
}

static int run_further(const fcase_t *fc, unsigned seed, const xccl_sched_t *planted, char *bad, size_t badlen)
{
    const int p = fc->p;
    size_t *len = xmalloc((size_t) p * sizeof(size_t)), *at = xmalloc((size_t) p * sizeof(size_t));
    const size_t span = further_layout(fc, len, at);
    char what[200];
    job_t j;
    snprintf(what, sizeof(what), "%s %s p=%d kind=%d n=%zu%s root=%d in_place=%d%s", fcoll_name(fc->coll),
             leader_form ? "leader" : "mesh", p, fc->k, fc->n, fc->bytes ? " (v)" : "", fc->root, fc->in_place,
             planted ? " (planted)" : "");
    job_init(&j, p, XCCL_COLL_REDUCE == fc->coll ? kind_es(fc->k) : 1);
    for (int r = 0; r < p; r++) {
        if (planted) {
            xccl_sched_fini(&j.sched[r]);
            j.sched[r] = planted[r];
        } else {
            build_further(&j.sched[r], fc, len, at);
        }
        further_fill(&j, fc, r, len, at, span);
    }
    int rc = job_try(&j, XCCL_COLL_REDUCE == fc->coll ? kind_fn(fc->k) : NULL, seed, what, bad, badlen);
    rc = 0 == rc ? further_check(&j, fc, len, at, span, what, bad, badlen) : rc;
    if (planted) {
        for (int r = 0; r < p; r++) {
            memset(&j.sched[r], 0, sizeof(j.sched[r]));    /* the caller's */
        }
    }
    job_fini(&j);
    free(len);
    free(at);
    return rc;
}

/* Reduce: every element kind (float sums compared bit for bit with the
 * rank-order fold), counts 0, 1, around p and large, every root up to
 * p = 8 (else five), in place and not. */
START_TEST(reduce_mesh)
{
    const int p = (_i - 1) % SMALL_P + 1;
    leader_form = _i > SMALL_P;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    int roots[SMALL_P];
    const int nroots = pick_roots(p, 8, roots);
    char bad[512] = "";
    for (int k = 0; k < NKINDS; k++) {
        for (size_t c = 0; c < n; c++) {
            for (int ri = 0; ri < nroots; ri++) {
                for (int in_place = 0; in_place < 2; in_place++) {
                    const fcase_t fc = { XCCL_COLL_REDUCE, p, k, sz[c], NULL, roots[ri], in_place };
                    ck_assert_msg(0 == run_further(&fc, seed_of(p, 5 + (unsigned) ri), NULL, bad, sizeof(bad)),
                                  "%s", bad);
                }
            }
        }
    }
    leader_form = 0;
}
END_TEST

/* Gather and scatter (blocks 0, 1, around p, large), gatherv, scatterv
 * and allgatherv (every count pattern, bases 0, 1, 37, 1001), from every
 * root up to p = 8 (else five), in place and not. */
START_TEST(moves_mesh)
{
    const int p = (_i - 1) % SMALL_P + 1;
    leader_form = _i > SMALL_P;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    int roots[SMALL_P];
    const int nroots = pick_roots(p, 8, roots);
    const size_t bases[] = { 0, 1, 37, 1001 };
    size_t *counts = xmalloc((size_t) p * sizeof(size_t));
    char bad[512] = "";
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int ri = 0; ri < nroots; ri++) {
            const unsigned seed = seed_of(p, 6 + (unsigned) ri);
            for (size_t c = 0; c < n; c++) {
                const fcase_t g = { XCCL_COLL_GATHER, p, 0, sz[c], NULL, roots[ri], in_place };
                const fcase_t s = { XCCL_COLL_SCATTER, p, 0, sz[c], NULL, roots[ri], in_place };
                ck_assert_msg(0 == run_further(&g, seed, NULL, bad, sizeof(bad)), "%s", bad);
                ck_assert_msg(0 == run_further(&s, seed, NULL, bad, sizeof(bad)), "%s", bad);
            }
            for (int pat = 0; pat < NCNT; pat++) {
                for (size_t bi = 0; bi < sizeof(bases) / sizeof(bases[0]); bi++) {
                    make_counts(p, pat, bases[bi], counts);
                    const fcase_t gv = { XCCL_COLL_GATHERV, p, 0, 0, counts, roots[ri], in_place };
                    const fcase_t sv = { XCCL_COLL_SCATTERV, p, 0, 0, counts, roots[ri], in_place };
                    const fcase_t agv = { XCCL_COLL_ALLGATHERV, p, 0, 0, counts, 0, in_place };
                    ck_assert_msg(0 == run_further(&gv, seed, NULL, bad, sizeof(bad)), "%s", bad);
                    ck_assert_msg(0 == run_further(&sv, seed, NULL, bad, sizeof(bad)), "%s", bad);
                    if (0 == ri) {
                        ck_assert_msg(0 == run_further(&agv, seed, NULL, bad, sizeof(bad)), "%s", bad);
                    }
                }
            }
        }
    }
    free(counts);
    leader_form = 0;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Many interleavings                                                       */
/* ------------------------------------------------------------------------ */

static const int seed_ps[] = { 2, 3, 5, 8, 13, 31 };
#define NSEEDS 24

START_TEST(many_seeds)
{
    const int p = seed_ps[_i];
    size_t counts[31];
    char bad[512] = "";
    for (unsigned sd = 0; sd < NSEEDS; sd++) {
        const unsigned seed = seed_of(p, 100 + sd);
        for (int in_place = 0; in_place < 2; in_place++) {
            ck_assert_msg(0 == run_allgather(p, 7, in_place, seed, bad, sizeof(bad)), "%s", bad);
            ck_assert_msg(0 == run_alltoall(p, 7, in_place, seed, bad, sizeof(bad)), "%s", bad);
            for (int how = 0; how < NAR; how += AR_READ_64K) {
                ck_assert_msg(0 == run_allreduce(p, KIND_FLT_ORDER, how ? AR_READ_2 : AR_MAPPED,
                                                 (size_t) p * 3 + 1, in_place, seed, NULL, bad, sizeof(bad)),
                              "%s", bad);
            }
            const size_t total = make_counts(p, CNT_IRREGULAR, 5, counts);
            ck_assert_msg(0 == run_reduce_scatter(p, RED_I32_SUM, (int) (sd % 2) ? AR_READ_2 : AR_MAPPED,
                                                  counts, total, in_place, seed, NULL, bad,
                                                  sizeof(bad)),
                          "%s", bad);
        }
        ck_assert_msg(0 == run_bcast(p, 33, (int) (sd % (unsigned) p), seed, bad, sizeof(bad)), "%s", bad);
        bcast_split = 1;
        ck_assert_msg(0 == run_bcast(p, 33, (int) (sd % (unsigned) p), seed, bad, sizeof(bad)), "%s", bad);
        ck_assert_msg(0 == run_bcast(p, (size_t) p * 4096 + 1, (int) ((sd + 1) % (unsigned) p), seed, bad,
                                     sizeof(bad)),
                      "%s", bad);
        bcast_split = 0;
        /* the leader forms */
        leader_form = 1;
        ck_assert_msg(0 == run_allgather(p, 7, (int) (sd % 2), seed, bad, sizeof(bad)), "%s", bad);
        ck_assert_msg(0 == run_alltoall(p, 7, 0, seed, bad, sizeof(bad)), "%s", bad);
        ck_assert_msg(0 == run_bcast(p, 33, (int) (sd % (unsigned) p), seed, bad, sizeof(bad)), "%s", bad);
        ck_assert_msg(0 == run_allreduce(p, KIND_FLT_ORDER, AR_LEADER, (size_t) p * 3 + 1, (int) (sd % 2), seed,
                                         NULL, bad, sizeof(bad)),
                      "%s", bad);
        const size_t total = make_counts(p, CNT_IRREGULAR, 5, counts);
        ck_assert_msg(0 == run_reduce_scatter(p, RED_I32_SUM, AR_LEADER, counts, total, 0, seed, NULL, bad,
                                              sizeof(bad)),
                      "%s", bad);
        /* the further collectives, both forms */
        make_counts(p, CNT_IRREGULAR, 5, counts);
        for (leader_form = 0; leader_form < 2; leader_form++) {
            const int root = (int) (sd % (unsigned) p), in_place = (int) (sd / 2 % 2);
            const fcase_t fcs[] = {
                { XCCL_COLL_REDUCE, p, KIND_FLT_ORDER, (size_t) p * 3 + 1, NULL, root, in_place },
                { XCCL_COLL_GATHER, p, 0, 7, NULL, root, in_place },
                { XCCL_COLL_SCATTER, p, 0, 7, NULL, root, in_place },
                { XCCL_COLL_GATHERV, p, 0, 0, counts, root, in_place },
                { XCCL_COLL_SCATTERV, p, 0, 0, counts, root, in_place },
                { XCCL_COLL_ALLGATHERV, p, 0, 0, counts, 0, in_place },
            };
            for (size_t f = 0; f < sizeof(fcs) / sizeof(fcs[0]); f++) {
                ck_assert_msg(0 == run_further(&fcs[f], seed, NULL, bad, sizeof(bad)), "%s", bad);
            }
        }
        leader_form = 0;
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Planted bugs: a barrier removed                                          */
/* ------------------------------------------------------------------------ */

/* A copy of s without the flag waits for value val (the posts stay, so
 * later barriers still match). */
static void strip_waits(const xccl_sched_t *s, uint32_t val, xccl_sched_t *out)
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
    int caught = 0;
    size_t removed = 0;
    char bad[512];
    first_bad[0] = '\0';
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
    for (unsigned sd = 0; sd < NSEEDS; sd++) {
        const unsigned seed = seed_of(p, 1000 + sd);
        int rc = coll_rs ? run_reduce_scatter(p, k, how, counts, total, in_place, seed, NULL, bad, sizeof(bad))
                         : run_allreduce(p, k, how, count, in_place, seed, NULL, bad, sizeof(bad));
        ck_assert_msg(0 == rc, "intact schedule failed: %s", bad);
        rc = coll_rs ? run_reduce_scatter(p, k, how, counts, total, in_place, seed, cut, bad, sizeof(bad))
                     : run_allreduce(p, k, how, count, in_place, seed, cut, bad, sizeof(bad));
        if (0 != rc) {
            caught++;
            if ('\0' == first_bad[0]) {
                snprintf(first_bad, len, "%s", bad);
            }
        }
    }
    for (int r = 0; r < p; r++) {
        xccl_sched_fini(&cut[r]);
    }
    free(cut);
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

START_TEST(planted_split_bcast_fails)
{
    char bad[512], first[512];
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
        int caught = 0;
        first[0] = '\0';
        for (unsigned sd = 0; sd < NSEEDS; sd++) {
            const unsigned seed = seed_of(p, 2000 + sd);
            ck_assert_msg(0 == run_bcast(p, n, root, seed, bad, sizeof(bad)), "intact schedule failed: %s", bad);
            if (0 != run_bcast_planted(p, n, root, seed, cut, bad, sizeof(bad))) {
                caught++;
                if ('\0' == first[0]) {
                    snprintf(first, sizeof(first), "%s", bad);
                }
            }
        }
        fprintf(stderr, "planted split bcast (%s), p=%d: %d of %d seeds fail; first: %s\n", split_plants[_i].why,
                p, caught, NSEEDS, first);
        ck_assert_msg(caught > 0, "%s, p=%d: no seed caught it", split_plants[_i].why, p);
        for (int r = 0; r < p; r++) {
            xccl_sched_fini(&cut[r]);
        }
        free(cut);
    }
    bcast_split = 0;
}
END_TEST

/* The further collectives with one flag wait removed: val 1 (the root,
 * rank 0 of the leader allgatherv, every rank of the mesh one: touches
 * buffers of ranks that have not entered the call) or val 2 (ranks leave
 * while the root still reads or writes their buffers; the mesh
 * allgatherv: while peers still read their blocks).  Every plant fails
 * under some seed at p = 2 and 9, the intact schedules under none. */
static const struct {
    int coll, leader;
    uint32_t val;
} fplants[] = {
    { XCCL_COLL_REDUCE, 0, 1 },     { XCCL_COLL_REDUCE, 0, 2 },     { XCCL_COLL_REDUCE, 1, 1 },
    { XCCL_COLL_GATHER, 1, 2 },     { XCCL_COLL_GATHERV, 0, 1 },    { XCCL_COLL_GATHERV, 0, 2 },
    { XCCL_COLL_SCATTER, 1, 1 },    { XCCL_COLL_SCATTERV, 0, 1 },   { XCCL_COLL_SCATTERV, 0, 2 },
    { XCCL_COLL_ALLGATHERV, 0, 1 }, { XCCL_COLL_ALLGATHERV, 0, 2 }, { XCCL_COLL_ALLGATHERV, 1, 1 },
    { XCCL_COLL_ALLGATHERV, 1, 2 },
};

START_TEST(planted_further_fails)
{
    char bad[512], first[512];
    leader_form = fplants[_i].leader;
    for (int p = 2; p <= 9; p += 7) {
        size_t *counts = xmalloc((size_t) p * sizeof(size_t));
        size_t *len = xmalloc((size_t) p * sizeof(size_t)), *at = xmalloc((size_t) p * sizeof(size_t));
        make_counts(p, CNT_REGULAR, 5, counts);
        const int coll = fplants[_i].coll;
        const int v = XCCL_COLL_GATHERV == coll || XCCL_COLL_SCATTERV == coll || XCCL_COLL_ALLGATHERV == coll;
        const fcase_t fc = { coll, p, RED_I32_SUM, 5, v ? counts : NULL, p - 1, 0 };
        further_layout(&fc, len, at);
        xccl_sched_t *cut = xmalloc((size_t) p * sizeof(*cut));
        size_t removed = 0;
        for (int r = 0; r < p; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, p, XCCL_COLL_REDUCE == coll ? kind_es(RED_I32_SUM) : 1);
            build_further(&s, &fc, len, at);
            strip_waits(&s, fplants[_i].val, &cut[r]);
            removed += s.nacts - cut[r].nacts;
            xccl_sched_fini(&s);
        }
        ck_assert_uint_gt(removed, 0);
        int caught = 0;
        first[0] = '\0';
        for (unsigned sd = 0; sd < NSEEDS; sd++) {
            const unsigned seed = seed_of(p, 3000 + sd);
            ck_assert_msg(0 == run_further(&fc, seed, NULL, bad, sizeof(bad)), "intact schedule failed: %s", bad);
            if (0 != run_further(&fc, seed, cut, bad, sizeof(bad))) {
                caught++;
                if ('\0' == first[0]) {
                    snprintf(first, sizeof(first), "%s", bad);
                }
            }
        }
        fprintf(stderr, "planted %s %s wait for %u removed, p=%d: %d of %d seeds fail; first: %s\n",
                fcoll_name(coll), leader_form ? "leader" : "mesh", fplants[_i].val, p, caught, NSEEDS, first);
        ck_assert_msg(caught > 0, "%s wait for %u removed, p=%d: no seed caught it", fcoll_name(coll),
                      fplants[_i].val, p);
        for (int r = 0; r < p; r++) {
            xccl_sched_fini(&cut[r]);
        }
        free(cut);
        free(counts);
        free(len);
        free(at);
    }
    leader_form = 0;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Refused without peer access                                              */
/* ------------------------------------------------------------------------ */

START_TEST(refused_without_peer_access)
{
    const int p = 4;
    const size_t b = 16;
    xccl_sched_t s[4];
    xccl_exec_t e[4];
    unsigned char sbuf[4][16], rbuf[4][64];
    xccl_sim_t *sim = xccl_sim_create(p);
    for (int r = 0; r < p; r++) {
        xccl_sched_init(&s[r], r, p, 1);
        ck_assert_int_eq(xccl_build_allgather_mesh(&s[r], b), 0);
        ck_assert(s[r].peer_access);
        memset(sbuf[r], r, b);
        memset(rbuf[r], 0xEE, sizeof(rbuf[r]));
        void *bufs[XCCL_NBUF] = { sbuf[r], rbuf[r], NULL };
        ck_assert_int_eq(xccl_exec_init(&e[r], &s[r], xccl_sim_transport(sim, r), bufs, NULL, NULL, 1), 0);
    }
    /* No peer access at all, then one without flags: refused at once. */
    xccl_peer_t no_flags = *xccl_sim_peer(sim, 1);
    no_flags.test = NULL;
    xccl_exec_set_peer(&e[1], &no_flags);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_lt(xccl_exec_progress(&e[r]), 0);
        ck_assert_uint_eq(e[r].step, 0);
        for (size_t i = 0; i < sizeof(rbuf[r]); i++) {
            ck_assert_uint_eq(rbuf[r][i], 0xEE);
        }
    }
    /* One rank of p = 1 names only itself: no peer access needed. */
    xccl_sched_t one;
    xccl_sched_init(&one, 0, 1, 1);
    ck_assert_int_eq(xccl_build_allgather_mesh(&one, b), 0);
    ck_assert(!one.peer_access);
    xccl_sched_fini(&one);
    for (int r = 0; r < p; r++) {
        xccl_exec_fini(&e[r]);
        xccl_sched_fini(&s[r]);
    }
    xccl_sim_destroy(sim);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Catalog and selection                                                    */
/* ------------------------------------------------------------------------ */

typedef struct {
    const xccl_algo_t *algo;
    xccl_coll_args_t args;
} cat_job_t;

static int build_cat(xccl_sched_t *s, void *arg)
{
    const cat_job_t *j = arg;
    return j->algo->build(s, &j->args);
}

/* What the catalog tests share: p = 8 ranks, counts of 1000, the v
 * forms' vec (counts of 1000 bytes back to back, alltoallv's receive half
 * as its send half), a layout of one node and one of two. */
typedef struct {
    size_t counts[8];
    size_t vec[4 * 8];
    xccl_layout_t one, two;
} cat_env_t;

static void cat_env_init(cat_env_t *e)
{
    for (int r = 0; r < 8; r++) {
        e->counts[r] = 1000;
        e->vec[r] = e->vec[16 + r] = 1000;
        e->vec[8 + r] = e->vec[24 + r] = (size_t) r * 1000;
    }
    ck_assert_int_eq(xccl_layout_parse(&e->one, "block:8", 8, NULL, 0), 0);
    ck_assert_int_eq(xccl_layout_parse(&e->two, "block:4", 8, NULL, 0), 0);
}

/* Collective c's catalog (*algos, *n) and the index of `name` in it. */
static int cat_index(int c, const char *name, const xccl_algo_t **algos, int *n)
{
    int at = -1;
    *algos = xccl_coll_algos((xccl_coll_t) c, n);
    for (int i = 0; i < *n; i++) {
        at = 0 == strcmp((*algos)[i].name, name) ? i : at;
    }
    ck_assert_msg(at >= 0, "%s has no %s", xccl_coll_name((xccl_coll_t) c), name);
    return at;
}

START_TEST(catalog_mesh_needs_peer_access)
{
    const xccl_cost_model_t m = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA, 0, 0 };
    const int p = 8;
    cat_env_t env;
    cat_env_init(&env);
    size_t *counts = env.counts;
    xccl_layout_t one = env.one, two = env.two;
    for (int c = 0; c < XCCL_NCOLL; c++) {
        int n;
        const xccl_algo_t *algos;
        if (!xccl_coll_mapped((xccl_coll_t) c)) {
            continue;          /* no mesh: catalog_no_peer_forms */
        }
        const int mesh = cat_index(c, "mesh", &algos, &n);
        cat_job_t j = { &algos[mesh], { .count = 8000, .counts = counts, .block = 1000, .bytes = 8000,
                                         .root = 3, .vec = env.vec, .nvec = 4 * 8, .layout = &one } };
        /* Not applicable: no peer access (the default), or two nodes;
         * applicable with peer access on one node. */
        static const struct {
            int peer_access, two_nodes, rc;
        } cases[] = { { 0, 0, XCCL_NOT_APPLICABLE }, { 1, 1, XCCL_NOT_APPLICABLE }, { 0, 1, XCCL_NOT_APPLICABLE },
                      { 1, 0, 0 } };
        for (size_t v = 0; v < sizeof(cases) / sizeof(cases[0]); v++) {
            xccl_sched_t s;
            j.args.peer_access = cases[v].peer_access;
            j.args.layout = cases[v].two_nodes ? &two : &one;
            xccl_sched_init(&s, 0, p, 4);
            ck_assert_int_eq(algos[mesh].build(&s, &j.args), cases[v].rc);
            if (0 == cases[v].rc) {
                ck_assert_str_eq(s.algo, "mesh");
                ck_assert(s.peer_access);
            } else {
                ck_assert_uint_eq(s.nacts, 0);
            }
            xccl_sched_fini(&s);
        }
        /* The further collectives' mesh (the root writes or reduces the
         * peers' buffers in place) needs them mapped: not with copied
         * peers (the host paths' XCCL_PEER_COPY, which never offers them
         * these collectives anyway). */
        if (!xccl_coll_peer((xccl_coll_t) c)) {
            xccl_sched_t s;
            j.args.peer_access = XCCL_PEER_COPY;
            xccl_sched_init(&s, 0, p, 4);
            ck_assert_int_eq(algos[mesh].build(&s, &j.args), XCCL_NOT_APPLICABLE);
            xccl_sched_fini(&s);
        }
        /* The model: no prediction without peer access, so auto never
         * picks it; with it, a prediction. */
        double t[XCCL_CATALOG_MAX];
        j.args.layout = &one;
        for (int pa = 0; pa < 2; pa++) {
            j.args.peer_access = pa;
            for (int i = 0; i < n; i++) {
                cat_job_t ji = j;
                ji.algo = &algos[i];
                t[i] = xccl_predict_hier(&one, 4, build_cat, &ji, NULL, 0, &m, &m);
            }
            if (0 == pa) {
                ck_assert(t[mesh] < 0);
                ck_assert_int_ne(xccl_pick(t, n, XCCL_MODEL_MARGIN), mesh);
            } else {
                ck_assert(t[mesh] > 0);
            }
        }
    }
    xccl_layout_fini(&one);
    xccl_layout_fini(&two);
}
END_TEST

/* "leader" writes the peers' buffers: only with mapped peers (not with
 * peers that can only be read, not without peer access) on one node; not
 * in place for alltoall and reduce_scatter (in place for the further
 * collectives: the root's, or every rank's in allgatherv). */
START_TEST(catalog_leader_forms)
{
    const int p = 8;
    cat_env_t env;
    cat_env_init(&env);
    size_t *counts = env.counts;
    xccl_layout_t one = env.one, two = env.two;
    for (int c = 0; c < XCCL_NCOLL; c++) {
        int n;
        const xccl_algo_t *algos;
        if (!xccl_coll_mapped((xccl_coll_t) c)) {
            continue;          /* no leader: catalog_no_peer_forms */
        }
        const int leader = cat_index(c, "leader", &algos, &n);
        static const struct {
            int peer_access, two_nodes, in_place;
        } cases[] = { { XCCL_PEER_NONE, 0, 0 }, { XCCL_PEER_COPY, 0, 0 }, { XCCL_PEER_MAPPED, 1, 0 },
                      { XCCL_PEER_MAPPED, 0, 0 }, { XCCL_PEER_MAPPED, 0, 1 } };
        for (size_t v = 0; v < sizeof(cases) / sizeof(cases[0]); v++) {
            const int no_in_place = XCCL_COLL_ALLTOALL == c || XCCL_COLL_REDUCE_SCATTER == c ||
                                    XCCL_COLL_REDUCE_SCATTER_BLOCK == c;
            const int applies = XCCL_PEER_MAPPED == cases[v].peer_access && !cases[v].two_nodes &&
                                !(cases[v].in_place && no_in_place);
            xccl_coll_args_t a = { .count = 8000, .counts = counts, .block = 1000, .bytes = 8000, .root = 1,
                                   .vec = env.vec, .nvec = 4 * 8, .in_place = cases[v].in_place,
                                   .peer_access = cases[v].peer_access, .layout = cases[v].two_nodes ? &two : &one };
            xccl_sched_t s;
            xccl_sched_init(&s, 1, p, 4);
            ck_assert_int_eq(algos[leader].build(&s, &a), applies ? 0 : XCCL_NOT_APPLICABLE);
            if (applies) {
                ck_assert_str_eq(s.algo, "leader");
                ck_assert(s.peer_access);
            }
            xccl_sched_fini(&s);
        }
    }
    xccl_layout_fini(&one);
    xccl_layout_fini(&two);
}
END_TEST

/* The collectives without peer-access forms (barrier, alltoallv: not
 * xccl_coll_mapped): no "mesh" or
 * "leader" entry; with peer access offered (mapped, one node) and no
 * slot, every algorithm builds a schedule that names no peer's buffer and
 * gets a prediction, or (the level's "shm" forms, which need the slot,
 * and the two-level "hier" and "pipeline" ones, which need nodes) does
 * not apply.
 * Arguments as the tools give them: 1000 bytes a rank, root 3. */
START_TEST(catalog_no_peer_forms)
{
    const xccl_cost_model_t m = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA, 0, 0 };
    const int p = 8;
    cat_env_t env;
    cat_env_init(&env);
    int ncolls = 0;
    for (int c = 0; c < XCCL_NCOLL; c++) {
        int n;
        const xccl_algo_t *algos = xccl_coll_algos((xccl_coll_t) c, &n);
        if (xccl_coll_mapped((xccl_coll_t) c)) {
            continue;
        }
        ncolls++;
        ck_assert_int_gt(n, 0);
        for (int i = 0; i < n; i++) {
            const char *what = xccl_coll_name((xccl_coll_t) c);
            ck_assert_msg(0 != strcmp(algos[i].name, "mesh") && 0 != strcmp(algos[i].name, "leader"),
                          "%s has %s", what, algos[i].name);
            const int na = 0 == strncmp(algos[i].name, "shm", 3) || 0 == strncmp(algos[i].name, "hier", 4) ||
                           0 == strcmp(algos[i].name, "pipeline");
            cat_job_t j = { &algos[i], { .count = 250, .block = 1000, .bytes = 8000, .root = 3, .vec = env.vec,
                                         .nvec = 4 * 8, .layout = &env.one, .peer_access = XCCL_PEER_MAPPED } };
            for (int r = 0; r < p; r++) {
                xccl_sched_t s;
                xccl_sched_init(&s, r, p, XCCL_COLL_REDUCE == c ? 4 : 1);
                const int rc = algos[i].build(&s, &j.args);
                ck_assert_msg(rc == (na ? XCCL_NOT_APPLICABLE : 0), "%s %s rank %d: build returned %d", what,
                              algos[i].name, r, rc);
                ck_assert_msg(!s.peer_access, "%s %s rank %d names a peer's buffer", what, algos[i].name, r);
                xccl_sched_fini(&s);
            }
            const double t = xccl_predict_hier(&env.one, XCCL_COLL_REDUCE == c ? 4 : 1, build_cat, &j, NULL, 0,
                                               &m, &m);
            ck_assert_msg(na ? t < 0 : t > 0, "%s %s: predicted %g", what, algos[i].name, t);
        }
    }
    ck_assert_int_eq(ncolls, 2);    /* barrier, alltoallv */
    xccl_layout_fini(&env.one);
    xccl_layout_fini(&env.two);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Composition: a mesh stage appended on a sub-group                        */
/* ------------------------------------------------------------------------ */

/* p ranks in two halves (even and odd ranks); each half runs a mesh
 * allgather of its members' blocks into RECV, after a flag barrier of the
 * whole group (so that the child's flag values are offset).  Peers and
 * flags are translated to the parent's ranks. */
START_TEST(append_mesh_child)
{
    const int p = 7;
    const size_t b = 5;
    job_t j;
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        xccl_sched_t *s = &j.sched[r];
        int group[8], g = 0, me = -1;
        for (int q = r % 2; q < p; q += 2) {
            me = q == r ? g : me;
            group[g++] = q;
        }
        /* a whole-group barrier first: flag 1 */
        xccl_sched_post(s, 1);
        xccl_sched_step(s);
        for (int q = 0; q < p; q++) {
            if (q != r) {
                xccl_sched_wait(s, q, 1);
            }
        }
        xccl_sched_t child;
        xccl_sched_init(&child, me, g, 1);
        ck_assert_int_eq(xccl_build_allgather_mesh(&child, b), 0);
        xccl_buf_map_t map = { { xccl_ref(XCCL_BUF_SEND, 0), xccl_ref(XCCL_BUF_RECV, 0),
                                 xccl_ref(XCCL_BUF_SCRATCH, 0) } };
        ck_assert_int_eq(xccl_sched_append(s, &child, group, &map), 0);
        xccl_sched_fini(&child);
        ck_assert_int_eq(xccl_sched_finalize(s), 0);
        ck_assert_uint_eq(s->flag_top, 3);      /* 1, then the child's 1 and 2 */
        const size_t total = (size_t) g * b;
        j.rbuf[r] = xmalloc(total);
        memset(j.rbuf[r], 0xEE, total);
        j.sbuf[r] = job_sbuf(&j, r, b);
        for (size_t i = 0; i < b; i++) {
            j.sbuf[r][i] = ag_pattern(r, i);
        }
    }
    job_run(&j, NULL, "append mesh allgather");
    for (int r = 0; r < p; r++) {
        int g = 0;
        for (int q = r % 2; q < p; q += 2, g++) {
            for (size_t i = 0; i < b; i++) {
                ck_assert_uint_eq(j.rbuf[r][(size_t) g * b + i], ag_pattern(q, i));
            }
        }
    }
    job_fini(&j);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("mesh_algos");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, refused_without_peer_access);
    tcase_add_test(tc, catalog_mesh_needs_peer_access);
    tcase_add_test(tc, catalog_leader_forms);
    tcase_add_test(tc, catalog_no_peer_forms);
    tcase_add_test(tc, append_mesh_child);
    tcase_add_loop_test(tc, planted_missing_barrier_fails, 0, NPLANTS);
    tcase_add_loop_test(tc, many_seeds, 0, (int) (sizeof(seed_ps) / sizeof(seed_ps[0])));
    tcase_add_loop_test(tc, allgather_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_loop_test(tc, alltoall_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_loop_test(tc, planted_split_bcast_fails, 0, (int) (sizeof(split_plants) / sizeof(split_plants[0])));
    tcase_add_loop_test(tc, bcast_mesh, 1, 3 * SMALL_P + 1);  /* mesh, leader, then split */
    tcase_add_loop_test(tc, allreduce_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_test(tc, allreduce_mapped_fails_read_only);
    tcase_add_loop_test(tc, reduce_scatter_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_loop_test(tc, reduce_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_loop_test(tc, moves_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_loop_test(tc, planted_further_fails, 0, (int) (sizeof(fplants) / sizeof(fplants[0])));
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
