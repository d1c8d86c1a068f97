/*
 * Allreduce by recursive doubling, Rabenseifner, Swing, nonuniform halving
 * on a ring (nhr) and nonuniform Bruck (nb; their shapes below), the
 * double binary tree (dbt, also on its own below: p = 1..64, 100, 127, 1000, its trees and
 * its float order) and the segmented
 * ring on the simulated transport: p = 1..64, 100, 127, 128, 129, 255 and 1000, counts around p (0, 1,
 * p-1, p, p+1) and a large odd count, in place and not, five reduction
 * kinds.  Expected values come from scalar references written here, not
 * from the kernels under test; every rank's result must be bitwise
 * identical to every other's and to the reference.  Plus the textbook
 * shapes (steps, messages, bytes) at powers of two.
 *
 * Checks compare whole buffers with plain loops and assert once per case:
 * an assertion per element costs a pipe write each under Check.
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 7
#define SIM_SEED_SALT 0u
#include "sim_harness.h"
#include "xccl_build.h"

typedef int (*allreduce_builder_t)(xccl_sched_t *s, size_t count);

/* Ring allreduce with its reduce-scatter pipelined in small segments. */
static int ring_seg12(xccl_sched_t *s, size_t count)
{
    return xccl_build_allreduce_ring_segmented(s, count, 12);
}

/* The double binary tree pipelined in small chunks. */
static int dbt_chunk24(xccl_sched_t *s, size_t count)
{
    return xccl_build_allreduce_dbt(s, count, 24);
}

static const struct {
    allreduce_builder_t build;
    const char *name;
} builders[] = {
    { xccl_build_allreduce_recursive_doubling, "recursive_doubling" },
    { xccl_build_allreduce_rabenseifner, "rabenseifner" },
    { xccl_build_allreduce_swing, "swing" },
    { dbt_chunk24, "dbt" },            /* chunks of 6 ints, 3 doubles */
    { xccl_build_allreduce_nhr, "nhr" },
    { xccl_build_allreduce_nb, "nb" },
    { ring_seg12, "ring" },            /* segments of 3 ints, 1.5 doubles: rounded down */
};
#define NBUILDERS ((int) (sizeof(builders) / sizeof(builders[0])))

/* Builds every rank's schedule and buffers, inputs filled for kind k. */
static job_t *setup_job(int p, allreduce_builder_t build, const char *name, size_t n, size_t es,
                        int in_place, red_kind_t k)
{
    job_t *j = xmalloc(sizeof(*j));
    job_init(j, p, es);
    for (int r = 0; r < p; r++) {
        if (build(&j->sched[r], n) != 0) {
            ck_abort_msg("%s: build failed, p=%d n=%zu rank %d", name, p, n, r);
        }
        j->rbuf[r] = malloc(n * es + 1);
        j->sbuf[r] = in_place ? j->rbuf[r] : job_sbuf(j, r, n * es + 1);
        fill_input(k, r, j->sbuf[r], n);
    }
    return j;
}

/* First rank whose result differs from rank 0's, or -1. */
static int first_differing_rank(const job_t *j, size_t bytes)
{
    for (int r = 1; r < j->p; r++) {
        if (memcmp(j->rbuf[r], j->rbuf[0], bytes) != 0) {
            return r;
        }
    }
    return -1;
}

/* First element of got that differs from want, or -1. */
static long first_mismatch(const void *got, const void *want, size_t n, size_t es)
{
    for (size_t i = 0; i < n; i++) {
        if (memcmp((const char *) got + i * es, (const char *) want + i * es, es) != 0) {
            return (long) i;
        }
    }
    return -1;
}

static void check_case(int p, int b, red_kind_t k, size_t n, int in_place, const void *want)
{
    const size_t es = red_kinds[k].es;
    const char *name = builders[b].name;
    xccl_reduce_fn_t fn = xccl_reduce_kernel(red_kinds[k].dt, red_kinds[k].op);
    ck_assert_ptr_nonnull(fn);

    job_t *j = setup_job(p, builders[b].build, name, n, es, in_place, k);
    job_run(j, fn, name);
    int bad_rank = first_differing_rank(j, n * es);
    long bad = first_mismatch(j->rbuf[0], want, n, es);
    ck_assert_msg(bad_rank < 0 && bad < 0,
                  "%s p=%d n=%zu kind=%d in_place=%d: rank %d differs from rank 0; "
                  "rank 0 differs from the reference at element %ld",
                  name, p, n, (int) k, in_place, bad_rank, bad);
    job_fini(j);
    free(j);
}

static void check_allreduce(int p, int b, const size_t *counts, size_t nc, int nkinds)
{
    for (int k = 0; k < nkinds; k++) {
        for (size_t ci = 0; ci < nc; ci++) {
            size_t n = counts[ci];
            void *want = malloc(n * red_kinds[k].es + 1);
            reference((red_kind_t) k, p, want, n);
            for (int in_place = 0; in_place < 2; in_place++) {
                check_case(p, b, (red_kind_t) k, n, in_place, want);
            }
            free(want);
        }
    }
}

/* Results that depend on the order of the combines must still be bitwise
 * identical on every rank (each element computed once, or by both partners
 * of an exchange in the same operand order):
 *   - float sums of inexact values (associativity);
 *   - double MAX over +0.0 and -0.0: "a > b ? a : b" returns b on a tie,
 *     so the sign of the zero depends on the operand order (commutativity
 *     is only up to ==, not bits). */
static void fill_order_sensitive(int zeros, int r, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (zeros) {
            ((double *) buf)[i] = ((size_t) r * 7 + i * 3) % 5 < 2 ? -0.0 : 0.0;
        } else {
            ((float *) buf)[i] = 0.1f * (float) (r + 1) + 1e-3f * (float) i + 1e7f * (float) (i % 3 == 0);
        }
    }
}

static void check_identical(int p, int b, size_t n)
{
    for (int zeros = 0; zeros < 2; zeros++) {
        const size_t es = zeros ? sizeof(double) : sizeof(float);
        xccl_reduce_fn_t fn = zeros ? xccl_reduce_kernel(XCCL_DT_DOUBLE, XCCL_OP_MAX)
                                    : xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM);
        for (int in_place = 0; in_place < 2; in_place++) {
            job_t *j = xmalloc(sizeof(*j));
            job_init(j, p, es);
            for (int r = 0; r < p; r++) {
                ck_assert_int_eq(builders[b].build(&j->sched[r], n), 0);
                j->rbuf[r] = malloc(n * es + 1);
                j->sbuf[r] = in_place ? j->rbuf[r] : job_sbuf(j, r, n * es + 1);
                fill_order_sensitive(zeros, r, j->sbuf[r], n);
            }
            job_run(j, fn, builders[b].name);
            int bad_rank = first_differing_rank(j, n * es);
            ck_assert_msg(bad_rank < 0, "%s p=%d n=%zu in_place=%d: rank %d's %s differs from rank 0's",
                          builders[b].name, p, n, in_place, bad_rank,
                          zeros ? "max of signed zeros" : "float sum");
            job_fini(j);
            free(j);
        }
    }
}

/* ---------------------------------------------------------------- */

/* _i = builder * 64 + p - 1, for p = 1..64. */
START_TEST(allreduce_small_p)
{
    const int b = _i / 64, p = _i % 64 + 1;
    size_t counts[6], nc = counts_around(p, counts);
    counts[nc++] = 1001;
    check_allreduce(p, b, counts, nc, RED_NKINDS);
    check_identical(p, b, 1001);
}
END_TEST

static const int big_ps[] = { 100, 127, 128, 129, 255 };
#define NBIG ((int) (sizeof(big_ps) / sizeof(big_ps[0])))

/* _i = builder * NBIG + index into big_ps. */
START_TEST(allreduce_big_p)
{
    const int b = _i / NBIG, p = big_ps[_i % NBIG];
    const size_t counts[] = { 1, (size_t) p - 1, 1001 };
    check_allreduce(p, b, counts, 3, RED_NKINDS);
    check_identical(p, b, 1001);
}
END_TEST

/* p = 1000 (p' = 512, 488 ranks folded): a count below p', one above. */
START_TEST(allreduce_p1000)
{
    const size_t counts[] = { 5, 1001 };
    check_allreduce(1000, _i, counts, 1, RED_NKINDS);
    check_allreduce(1000, _i, counts + 1, 1, 1);
    check_identical(1000, _i, 1001);
}
END_TEST

/* ---------------------------------------------------------------- */
/* Shapes                                                            */
/* ---------------------------------------------------------------- */

typedef struct {
    size_t sends, recvs, send_bytes, recv_bytes;
    int send_peer, recv_peer;  /* of the last send / recv */
    size_t reduces, copies;
} step_info_t;

static step_info_t step_info(const xccl_sched_t *s, size_t st)
{
    step_info_t si = { 0, 0, 0, 0, -1, -1, 0, 0 };
    size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
    for (size_t i = s->step_start[st]; i < end; i++) {
        const xccl_action_t *a = &s->acts[i];
        switch (a->kind) {
        case XCCL_ACT_SEND: si.sends++; si.send_bytes += a->len; si.send_peer = a->peer; break;
        case XCCL_ACT_RECV: si.recvs++; si.recv_bytes += a->len; si.recv_peer = a->peer; break;
        case XCCL_ACT_REDUCE: si.reduces++; break;
        default: si.copies++; break;
        }
    }
    return si;
}

/* Swing's peer, written from the paper's sum rather than the closed form. */
static int swing_peer_ref(int r, int k, int p)
{
    long long rho = 0, pw = 1;
    for (int i = 0; i <= k; i++) {
        rho += pw;
        pw *= -2;
    }
    long long q = (r % 2 == 0) ? r + rho : r - rho;
    return (int) (((q % p) + p) % p);
}

/* Recursive doubling at p = 8: 3 steps, each one send and one receive of
 * the whole vector with r ^ 2^k, then one reduction. */
START_TEST(shape_recursive_doubling)
{
    const int p = 8;
    const size_t n = 800, bytes = n * 4;
    for (int r = 0; r < p; r++) {
        xccl_sched_t s;
        xccl_sched_init(&s, r, p, 4);
        ck_assert_int_eq(xccl_build_allreduce_recursive_doubling(&s, n), 0);
        ck_assert_str_eq(s.algo, "recursive_doubling");
        ck_assert_uint_eq(s.nsteps, 3);
        ck_assert_uint_eq(s.rounds, 3);
        ck_assert_uint_eq(s.max_xfers, 2);
        ck_assert_uint_eq(s.scratch_bytes, bytes);
        for (size_t st = 0; st < 3; st++) {
            step_info_t si = step_info(&s, st);
            int peer = r ^ (1 << st);
            ck_assert_msg(1 == si.sends && 1 == si.recvs && si.send_bytes == bytes &&
                              si.recv_bytes == bytes && peer == si.send_peer && peer == si.recv_peer &&
                              1 == si.reduces && 0 == si.copies,
                          "rank %d step %zu: %zu sends %zu recvs to %d/%d", r, st, si.sends, si.recvs,
                          si.send_peer, si.recv_peer);
        }
        xccl_sched_fini(&s);
    }
    /* p = 6: p' = 4 plus a fold round on each side. */
    xccl_sched_t s;
    xccl_sched_init(&s, 1, 6, 4);
    ck_assert_int_eq(xccl_build_allreduce_recursive_doubling(&s, n), 0);
    ck_assert_uint_eq(s.rounds, 4);
    ck_assert_uint_eq(s.nsteps, 2);        /* rank 1 is folded out: send, then receive */
    xccl_sched_fini(&s);
    xccl_sched_init(&s, 0, 6, 4);
    ck_assert_int_eq(xccl_build_allreduce_recursive_doubling(&s, n), 0);
    ck_assert_uint_eq(s.rounds, 4);
    ck_assert_uint_eq(s.nsteps, 4);
    xccl_sched_fini(&s);
}
END_TEST

/* Halving-doubling at p = 8: 6 transfer steps, one message each way per
 * step, peers r ^ 4, r ^ 2, r ^ 1, then r ^ 1, r ^ 2, r ^ 4; 2(p-1)/p of the
 * vector sent in all.  Swing: the same counts, with Swing's peers. */
START_TEST(shape_rabenseifner_swing)
{
    const int p = 8;
    const size_t n = 800, bytes = n * 4;
    for (int b = 1; b <= 2; b++) {     /* rabenseifner, swing */
        for (int r = 0; r < p; r++) {
            xccl_sched_t s;
            size_t sent = 0, recvd = 0;
            xccl_sched_init(&s, r, p, 4);
            ck_assert_int_eq(builders[b].build(&s, n), 0);
            ck_assert_str_eq(s.algo, builders[b].name);
            ck_assert_uint_eq(s.nsteps, 6);
            ck_assert_uint_eq(s.rounds, 6);
            ck_assert_uint_eq(s.max_xfers, 2);
            ck_assert_uint_eq(s.scratch_bytes, bytes / 2);
            for (size_t st = 0; st < 6; st++) {
                step_info_t si = step_info(&s, st);
                int k = st < 3 ? (int) st : 5 - (int) st;
                int peer = 1 == b ? r ^ (4 >> k) : swing_peer_ref(r, k, p);
                /* Halving: p/2, p/4, p/8 blocks; doubling back. */
                size_t want = bytes >> (k + 1);
                ck_assert_msg(1 == si.sends && 1 == si.recvs && peer == si.send_peer &&
                                  peer == si.recv_peer && want == si.send_bytes && want == si.recv_bytes &&
                                  (st < 3 ? 1u : 0u) == si.reduces,
                              "%s rank %d step %zu: %zu sends (%zu B, to %d), %zu recvs (%zu B, from %d), "
                              "want peer %d, %zu B",
                              builders[b].name, r, st, si.sends, si.send_bytes, si.send_peer, si.recvs,
                              si.recv_bytes, si.recv_peer, peer, want);
                sent += si.send_bytes;
                recvd += si.recv_bytes;
            }
            ck_assert_uint_eq(sent, 2 * (p - 1) * bytes / p);
            ck_assert_uint_eq(recvd, 2 * (p - 1) * bytes / p);
            xccl_sched_fini(&s);
        }
    }
}
END_TEST

/* Swing's block layout keeps every step one contiguous message each way
 * with the bandwidth-optimal volume, for every power of two up to 1024.
 * (Data correctness is proven on the sim up to p' = 512 above.) */
START_TEST(shape_swing_contiguous)
{
    for (int p = 2; p <= 1024; p *= 2) {
        int lg = 0;
        while ((1 << lg) < p) {
            lg++;
        }
        const size_t n = (size_t) p * 3;
        for (int r = 0; r < p; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, p, 1);
            ck_assert_int_eq(xccl_build_allreduce_swing(&s, n), 0);
            int ok = s.nsteps == (size_t) (2 * lg) && s.max_xfers == 2;
            size_t sent = 0;
            for (size_t st = 0; ok && st < s.nsteps; st++) {
                step_info_t si = step_info(&s, st);
                int k = (int) st < lg ? (int) st : 2 * lg - 1 - (int) st;
                int peer = swing_peer_ref(r, k, p);
                ok = 1 == si.sends && 1 == si.recvs && peer == si.send_peer && peer == si.recv_peer &&
                     si.send_bytes == n >> (k + 1) && si.recv_bytes == n >> (k + 1);
                sent += si.send_bytes;
            }
            ok = ok && sent == 2 * (size_t) (p - 1) * 3;
            ck_assert_msg(ok, "swing p=%d rank %d: not one message of the expected size per step", p, r);
            xccl_sched_fini(&s);
        }
    }
}
END_TEST

/* p = 1: a copy unless in place, nothing sent. */
START_TEST(shape_single_rank)
{
    for (int b = 0; b < NBUILDERS; b++) {
        xccl_sched_t s;
        xccl_sched_init(&s, 0, 1, 8);
        ck_assert_int_eq(builders[b].build(&s, 10), 0);
        ck_assert_uint_eq(s.nacts, 1);
        ck_assert_int_eq(s.acts[0].kind, XCCL_ACT_COPY);
        ck_assert_uint_eq(s.acts[0].len, 80);
        ck_assert_uint_eq(s.max_xfers, 0);
        ck_assert_uint_eq(s.scratch_bytes, 0);
        xccl_sched_fini(&s);
    }
}
END_TEST


/* ---------------------------------------------------------------- */
/* Double binary tree                                                */
/* ---------------------------------------------------------------- */

static int lg_ceil(int p)
{
    int d = 0;
    while ((1 << d) < p) {
        d++;
    }
    return d;
}

/* Depth of r in tree t, walking parents; -1 if the walk does not reach a
 * root within p steps (a cycle). */
static int dbt_depth(int p, int t, int r)
{
    int d = 0, parent, child[2];
    for (;;) {
        xccl_dbt_tree(p, t, r, &parent, child);
        if (parent < 0) {
            return d;
        }
        if (++d > p) {
            return -1;
        }
        r = parent;
    }
}

/* The reduction of element i of tree t's subtree under r, float_input's
 * values, in the tree's own order: (lower child op own) op higher child. */
static float dbt_tree_sum(int p, int t, int r, size_t i)
{
    int parent, child[2];
    xccl_dbt_tree(p, t, r, &parent, child);
    float acc = float_input(r, i);
    if (child[0] >= 0) {
        acc = dbt_tree_sum(p, t, child[0], i) + acc;
    }
    if (child[1] >= 0) {
        acc = acc + dbt_tree_sum(p, t, child[1], i);
    }
    return acc;
}

static const int dbt_big_ps[] = { 100, 127, 1000 };
#define DBT_NBIG ((int) (sizeof(dbt_big_ps) / sizeof(dbt_big_ps[0])))
#define DBT_NP (64 + DBT_NBIG)

static int dbt_p(int i)
{
    return i < 64 ? i + 1 : dbt_big_ps[i - 64];
}

/* The trees: links agree both ways, one root, no cycle, depth at most
 * ceil(lg p), a child below and one above each node, every subtree a
 * contiguous range of ranks, and every leaf of tree 0 an inner node or the
 * root of tree 1. */
START_TEST(dbt_trees)
{
    const int p = dbt_p(_i), D = lg_ceil(p);
    int *lo = xmalloc((size_t) p * sizeof(int)), *hi = xmalloc((size_t) p * sizeof(int));
    for (int t = 0; t < 2; t++) {
        int roots = 0;
        for (int r = 0; r < p; r++) {
            int parent, child[2];
            xccl_dbt_tree(p, t, r, &parent, child);
            roots += parent < 0;
            const int d = dbt_depth(p, t, r);
            ck_assert_msg(d >= 0 && d <= D, "p=%d tree %d rank %d: depth %d, bound %d", p, t, r, d, D);
            ck_assert(child[0] < r && (child[1] < 0 || child[1] > r));
            for (int k = 0; k < 2; k++) {
                if (child[k] >= 0) {
                    int pp, cc[2];
                    ck_assert_int_lt(child[k], p);
                    xccl_dbt_tree(p, t, child[k], &pp, cc);
                    ck_assert_msg(pp == r, "p=%d tree %d: %d's child %d has parent %d", p, t, r, child[k], pp);
                }
            }
            if (parent >= 0) {
                int pp, cc[2];
                xccl_dbt_tree(p, t, parent, &pp, cc);
                ck_assert_msg(cc[0] == r || cc[1] == r, "p=%d tree %d: %d's parent %d does not list it", p, t,
                              r, parent);
            }
            lo[r] = hi[r] = r;
        }
        ck_assert_int_eq(roots, 1);
        /* Ranges, leaves first: a node's range is its children's and itself,
         * adjacent (deepest first, so children are done before parents). */
        for (int d = D; d >= 0; d--) {
            for (int r = 0; r < p; r++) {
                int parent, child[2];
                if (dbt_depth(p, t, r) != d) {
                    continue;
                }
                xccl_dbt_tree(p, t, r, &parent, child);
                if (child[0] >= 0) {
                    ck_assert_int_eq(hi[child[0]], r - 1);
                    lo[r] = lo[child[0]];
                }
                if (child[1] >= 0) {
                    ck_assert_int_eq(lo[child[1]], r + 1);
                    hi[r] = hi[child[1]];
                }
                if (parent < 0) {
                    ck_assert(lo[r] == 0 && hi[r] == p - 1);
                }
            }
        }
    }
    for (int r = 0; r < p && p > 1; r++) {
        int p0, c0[2], p1, c1[2];
        xccl_dbt_tree(p, 0, r, &p0, c0);
        xccl_dbt_tree(p, 1, r, &p1, c1);
        if (c0[0] < 0 && c0[1] < 0) {
            ck_assert_msg(c1[0] >= 0 || c1[1] >= 0 || p1 < 0, "p=%d: rank %d is a leaf of both trees", p, r);
        }
    }
    free(lo);
    free(hi);
}
END_TEST

/* One run of dbt (chunk bytes) at p, n elements of kind k: every rank's
 * result bitwise identical to rank 0's and to the reference (float kinds
 * whose sums depend on the order: the trees' own orders). */
static void dbt_case(int p, int k, size_t n, size_t chunk, int in_place)
{
    const size_t es = kind_es(k);
    xccl_reduce_fn_t fn = kind_fn(k);
    char what[96];
    snprintf(what, sizeof(what), "dbt p=%d n=%zu kind=%d chunk=%zu in_place=%d", p, n, k, chunk, in_place);
    void *want = xmalloc(n * es);
    if (KIND_FLT_ORDER == k) {
        int root[2];
        for (int t = 0; t < 2; t++) {
            root[t] = 0;
            for (int r = 0; r < p; r++) {
                int parent, child[2];
                xccl_dbt_tree(p, t, r, &parent, child);
                root[t] = parent < 0 ? r : root[t];
            }
        }
        for (size_t i = 0; i < n; i++) {
            const int t = i < (n + 1) / 2 ? 0 : 1;
            ((float *) want)[i] = dbt_tree_sum(p, t, root[t], i);
        }
    } else {
        kind_reference(k, p, want, n);
    }
    job_t *j = xmalloc(sizeof(*j));
    job_init(j, p, es);
    for (int r = 0; r < p; r++) {
        ck_assert_msg(0 == xccl_build_allreduce_dbt(&j->sched[r], n, chunk), "%s: build failed", what);
        j->rbuf[r] = xmalloc(n * es);
        j->sbuf[r] = in_place ? j->rbuf[r] : job_sbuf(j, r, n * es);
        kind_fill(k, r, j->sbuf[r], n);
    }
    job_run(j, fn, what);
    const int bad_rank = first_differing_rank(j, n * es);
    const long bad = first_mismatch(j->rbuf[0], want, n, es);
    ck_assert_msg(bad_rank < 0 && bad < 0, "%s: rank %d differs from rank 0; rank 0 differs from the reference at %ld",
                  what, bad_rank, bad);
    job_fini(j);
    free(j);
    free(want);
}

/* Every kind (KIND_FLT_ORDER included), counts 0, 1, 7, around p and
 * 1001, in place and not, pipelined in chunks of 12 bytes (many chunks,
 * capped: uneven last ones) and of 40 bytes, and unpipelined. */
START_TEST(dbt_allreduce)
{
    const int p = dbt_p(_i);
    size_t counts[8], nc = counts_around(p, counts);
    const size_t chunks[] = { 12, 40, 0 };
    counts[nc++] = 7;
    counts[nc++] = 1001;
    for (int k = 0; k < NKINDS; k++) {
        for (size_t ci = 0; ci < nc; ci++) {
            for (int c = 0; c < 3; c++) {
                /* p = 1000: the unpipelined trees, and the kinds past the
                 * first two, on the larger counts only */
                if (p >= 1000 && (c == 1 || (k >= 2 && k != KIND_FLT_ORDER && counts[ci] < 999))) {
                    continue;
                }
                for (int in_place = 0; in_place < 2; in_place++) {
                    dbt_case(p, k, counts[ci], chunks[c], in_place);
                }
            }
        }
    }
}
END_TEST

/* Steps: C + 2 ceil(lg p) - 1, far fewer than the ring's 2(p-1) at
 * p = 1000; every rank sends and receives about 2n bytes (the ring's
 * 2(p-1)/p n), at most 8 transfers a step. */
START_TEST(dbt_shape)
{
    const int ps[] = { 2, 3, 8, 64, 100, 1000 };
    const size_t count = 1 << 20, es = 4, bytes = count * es, chunk = 64 * 1024;
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        const int p = ps[i];
        const size_t C = (bytes / 2 + chunk - 1) / chunk > XCCL_DBT_MAX_CHUNKS ? XCCL_DBT_MAX_CHUNKS
                                                                             : (bytes / 2 + chunk - 1) / chunk;
        for (int r = 0; r < p; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, p, es);
            ck_assert_int_eq(xccl_build_allreduce_dbt(&s, count, chunk), 0);
            ck_assert_uint_eq(s.rounds, C + 2 * (size_t) lg_ceil(p) - 1);
            const tally_t t = tally(&s);
            ck_assert_msg(t.sent <= 2 * bytes && t.received <= 2 * bytes && t.sent >= bytes / 2,
                          "p=%d rank %d: sent %zu received %zu", p, r, t.sent, t.received);
            ck_assert_uint_le(s.max_xfers, 8);
            ck_assert_uint_le(s.scratch_bytes, 4 * (bytes / 2 / C + es));
            if (0 == r) {
                xccl_sched_t ring, rab;
                xccl_sched_init(&ring, r, p, es);
                xccl_sched_init(&rab, r, p, es);
                ck_assert_int_eq(xccl_build_allreduce_ring(&ring, count), 0);
                ck_assert_int_eq(xccl_build_allreduce_rabenseifner(&rab, count), 0);
                printf("dbt steps p=%d: dbt %zu (C=%zu), ring %zu, rabenseifner %zu\n", p, s.rounds, C,
                       ring.rounds, rab.rounds);
                if (p >= 1000) {
                    ck_assert_uint_lt(s.rounds * 10, ring.rounds);
                }
                xccl_sched_fini(&ring);
                xccl_sched_fini(&rab);
            }
            xccl_sched_fini(&s);
        }
    }
}
END_TEST

/* The shape tests of the logarithmic builders at any p: each case's
 * schedule (count = 64 p floats, a sample of ranks) to check, after the
 * checks they share: every rank sends and receives exactly the ring's
 * 2(p-1)/p n bytes (no fold: Rabenseifner's folded ranks send n more,
 * checked at rank 0 where p is no power of two). */
typedef void (*shape_check_t)(const xccl_sched_t *s, int p, int r, size_t bytes);

static void shape_cases(allreduce_builder_t build, shape_check_t check)
{
    const int ps[] = { 2, 3, 5, 6, 7, 8, 100, 127, 1000 };
    const size_t es = 4;
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        const int p = ps[i];
        const size_t count = (size_t) p * 64, bytes = count * es, block = bytes / (size_t) p;
        for (int r = 0; r < p; r += p > 8 ? p / 7 : 1) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, p, es);
            ck_assert_int_eq(build(&s, count), 0);
            const tally_t t = tally(&s);
            ck_assert_msg(t.sent == 2 * (bytes - block) && t.received == t.sent,
                          "%s p=%d rank %d: sent %zu received %zu, want %zu", s.algo, p, r, t.sent, t.received,
                          2 * (bytes - block));
            ck_assert_uint_le(s.scratch_bytes, bytes + bytes / 2 + block);
            if (0 == r && p & (p - 1)) {
                xccl_sched_t rab;
                xccl_sched_init(&rab, r, p, es);
                ck_assert_int_eq(xccl_build_allreduce_rabenseifner(&rab, count), 0);
                ck_assert_uint_gt(tally(&rab).sent, t.sent);
                xccl_sched_fini(&rab);
            }
            check(&s, p, r, bytes);
            xccl_sched_fini(&s);
        }
    }
}

/* nhr: 2 ceil(lg p) rounds for any p, one message each way per step (two
 * where the first and the last step's ranges wrap past block p-1); the
 * peers are r +/- ceil(m/2), m the halving window, half the ring away
 * first; at most half the vector copied. */
static void nhr_check(const xccl_sched_t *s, int p, int r, size_t bytes)
{
    ck_assert_uint_eq(s->rounds, 2 * (size_t) lg_ceil(p));
    for (size_t st = 0; st < s->nsteps; st++) {
        const step_info_t si = step_info(s, st);
        const int ends = 0 == st || st + 1 == s->nsteps;
        ck_assert_msg(si.sends <= (ends ? 2u : 1u) && si.recvs <= (ends ? 2u : 1u),
                      "p=%d rank %d step %zu: %zu sends, %zu receives", p, r, st, si.sends, si.recvs);
    }
    size_t copied = 0;
    for (size_t a = 0; a < s->nacts; a++) {
        copied += XCCL_ACT_COPY == s->acts[a].kind ? s->acts[a].len : 0;
    }
    ck_assert_uint_le(copied, bytes / 2 + 2 * bytes / (size_t) p);
    const step_info_t si = step_info(s, 0);
    ck_assert_int_eq(si.send_peer, (r + (p + 1) / 2) % p);
    ck_assert_int_eq(si.recv_peer, ((r - (p + 1) / 2) % p + p) % p);
}

START_TEST(nhr_shape)
{
    shape_cases(xccl_build_allreduce_nhr, nhr_check);
}
END_TEST

/* nb: 2 ceil(lg p) + 1 rounds (the copy into bit-reversed order, then
 * the two phases) for any p; in the reduce-scatter one message each way
 * per step, the stride doubling (1, 2, 4, ...) and the bytes halving: half
 * the vector to the next rank first; two messages at most in the
 * allgather, which sends what the reduce-scatter received. */
static void nb_check(const xccl_sched_t *s, int p, int r, size_t bytes)
{
    const int K = lg_ceil(p);
    const size_t block = bytes / (size_t) p;
    ck_assert_uint_eq(s->rounds, 2 * (size_t) K + 1);
    for (int k = 0; k < K; k++) {
        const step_info_t rs = step_info(s, 1 + (size_t) k), ag = step_info(s, 1 + (size_t) (2 * K - 1 - k));
        const int d = 1 << k;
        ck_assert_msg(rs.sends == 1 && rs.recvs == 1 && rs.send_peer == (r + d) % p &&
                      rs.recv_peer == ((r - d) % p + p) % p,
                      "p=%d rank %d reduce-scatter step %d: %zu sends to %d, %zu receives from %d", p, r, k,
                      rs.sends, rs.send_peer, rs.recvs, rs.recv_peer);
        /* the blocks whose lowest set bit is k */
        ck_assert_uint_eq(rs.send_bytes, (size_t) ((p - d + 2 * d - 1) / (2 * d)) * block);
        ck_assert(ag.sends <= 2 && ag.recvs <= 2 && ag.send_bytes == rs.recv_bytes && ag.recv_bytes == rs.send_bytes);
    }
}

START_TEST(nb_shape)
{
    shape_cases(xccl_build_allreduce_nb, nb_check);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("allreduce_algos");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, allreduce_small_p, 0, NBUILDERS * 64);
    tcase_add_loop_test(tc, allreduce_big_p, 0, NBUILDERS * NBIG);
    /* Not the segmented rings (the last builder): 2 x 999 steps of 1000
     * ranks in 12-byte segments would take most of the suite's time; they
     * run up to p = 255. */
    tcase_add_loop_test(tc, allreduce_p1000, 0, NBUILDERS - 1);
    tcase_add_test(tc, shape_recursive_doubling);
    tcase_add_test(tc, shape_rabenseifner_swing);
    tcase_add_test(tc, shape_swing_contiguous);
    tcase_add_test(tc, shape_single_rank);
    tcase_add_loop_test(tc, dbt_trees, 0, DBT_NP);
    tcase_add_loop_test(tc, dbt_allreduce, 0, DBT_NP);
    tcase_add_test(tc, dbt_shape);
    tcase_add_test(tc, nhr_shape);
    tcase_add_test(tc, nb_shape);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
