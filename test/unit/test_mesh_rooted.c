/*
 * Peer access ("mesh") algorithms on the simulator, the rooted and v
 * collectives: reduce, gather(v), scatter(v) and allgatherv in both forms
 * (the CUDA IPC provider's, algos/reduce_mesh.c and the others; mesh and
 * leader), and every peer-access collective under many seeds.
 *
 *   - every p in 1..64, every root up to p = 8 (else five), in place and
 *     not (gather, scatter and allgatherv's mesh also on copied peers,
 *     as the host paths run it); reduce on every element kind with counts 0, 1, around p and
 *     large, compared bit for bit with the rank-order fold; gather and
 *     scatter blocks of those sizes; the v forms with every count pattern
 *     (zeros among them), blocks in reverse order with gaps that must stay
 *     untouched, and off the root counts and displacements that a
 *     schedule must not read; buffers MPI lets be NULL are NULL; inputs
 *     unchanged;
 *   - these and the jobs of test_mesh_algos (allgather, alltoall, bcast,
 *     the split bcast, allreduce, reduce_scatter) under many simulator
 *     seeds (interleavings) at a few p;
 *   - planted bugs: each with a flag wait removed fails under some seed,
 *     the intact schedule under none.
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

#include "mesh_sim.h"

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

/* The mesh of gather, scatter and allgatherv on copied peers (the host
 * paths' process_vm_readv / writev, xccl_sim_peer_read_only): peers'
 * buffers only copied from and to, never mapped. */
static int copied_form;

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
             leader_form ? "leader" : copied_form ? "mesh (copied peers)" : "mesh", p, fc->k, fc->n, fc->bytes ? " (v)" : "", fc->root, fc->in_place,
             planted ? " (planted)" : "");
    job_init(&j, p, XCCL_COLL_REDUCE == fc->coll ? kind_es(fc->k) : 1);
    j.read_only = copied_form;
    for (int r = 0; r < p; r++) {
        if (!job_plant(&j, r, planted)) {
            build_further(&j.sched[r], fc, len, at);
        }
        further_fill(&j, fc, r, len, at, span);
    }
    int rc = job_try(&j, XCCL_COLL_REDUCE == fc->coll ? kind_fn(fc->k) : NULL, seed, what, bad, badlen);
    rc = 0 == rc ? further_check(&j, fc, len, at, span, what, bad, badlen) : rc;
    job_unplant(&j, planted);
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
 * root up to p = 8 (else five), in place and not: mesh, leader, then the
 * mesh of gather, scatter and allgatherv on copied peers. */
START_TEST(moves_mesh)
{
    const int p = (_i - 1) % SMALL_P + 1;
    leader_form = _i > SMALL_P && _i <= 2 * SMALL_P;
    copied_form = _i > 2 * SMALL_P;
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
                    if (!copied_form) {
                        ck_assert_msg(0 == run_further(&gv, seed, NULL, bad, sizeof(bad)), "%s", bad);
                        ck_assert_msg(0 == run_further(&sv, seed, NULL, bad, sizeof(bad)), "%s", bad);
                    }
                    if (0 == ri) {
                        ck_assert_msg(0 == run_further(&agv, seed, NULL, bad, sizeof(bad)), "%s", bad);
                    }
                }
            }
        }
    }
    free(counts);
    leader_form = copied_form = 0;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Many interleavings                                                       */
/* ------------------------------------------------------------------------ */

static const int seed_ps[] = { 2, 3, 5, 8, 13, 31 };

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
/* Planted bugs: a flag wait removed                                        */
/* ------------------------------------------------------------------------ */

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
    /* leader 2: the mesh on copied peers */
    { XCCL_COLL_GATHER, 2, 1 },     { XCCL_COLL_GATHER, 2, 2 },     { XCCL_COLL_SCATTER, 2, 1 },
    { XCCL_COLL_SCATTER, 2, 2 },    { XCCL_COLL_ALLGATHERV, 2, 1 }, { XCCL_COLL_ALLGATHERV, 2, 2 },
};

static int run_fcase(const void *c, unsigned seed, const xccl_sched_t *planted, char *bad, size_t badlen)
{
    return run_further(c, seed, planted, bad, badlen);
}

START_TEST(planted_further_fails)
{
    char first[512];
    leader_form = 1 == fplants[_i].leader;
    copied_form = 2 == fplants[_i].leader;
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
        const int caught = planted_caught(run_fcase, &fc, p, 3000, cut, first, sizeof(first));
        fprintf(stderr, "planted %s %s wait for %u removed, p=%d: %d of %d seeds fail; first: %s\n",
                fcoll_name(coll), leader_form ? "leader" : copied_form ? "mesh (copied peers)" : "mesh",
                fplants[_i].val, p, caught, NSEEDS, first);
        ck_assert_msg(caught > 0, "%s wait for %u removed, p=%d: no seed caught it", fcoll_name(coll),
                      fplants[_i].val, p);
        cut_free(cut, p);
        free(counts);
        free(len);
        free(at);
    }
    leader_form = copied_form = 0;
}
END_TEST

int main(void)
{
    Suite *su;
    TCase *tc = mesh_tcase("mesh_rooted", &su);
    tcase_add_loop_test(tc, many_seeds, 0, (int) (sizeof(seed_ps) / sizeof(seed_ps[0])));
    tcase_add_loop_test(tc, reduce_mesh, 1, 2 * SMALL_P + 1);  /* mesh, then leader */
    tcase_add_loop_test(tc, moves_mesh, 1, 3 * SMALL_P + 1);  /* mesh, leader, copied mesh */
    tcase_add_loop_test(tc, planted_further_fails, 0, (int) (sizeof(fplants) / sizeof(fplants[0])));
    return xccl_check_run(su);
}
