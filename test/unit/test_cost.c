/*
 * The cost model read off schedules against the textbook formulas (p ranks,
 * n bytes, alpha latency, beta s/byte, gamma reduction s/byte), on counts
 * that divide evenly so the formulas are exact.
 */
#include "xccl_sched.h"
#include "xccl_build.h"
#include "xccl_cost.h"
#include "xccl_layout.h"

#include <check.h>
#include "check_main.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const xccl_cost_model_t model = { 2e-6, 1e-10, 3e-11, 0.0, 0.0, 0.0 };

static double rel_err(double got, double want)
{
    return fabs(got - want) / (want > 0 ? want : 1);
}

typedef int (*build_fn)(xccl_sched_t *s, int p, size_t n);

static double cost_of(build_fn build, int rank, int p, size_t n, size_t es)
{
    xccl_sched_t s;
    xccl_sched_init(&s, rank, p, es);
    ck_assert_int_eq(build(&s, p, n), 0);
    double c = xccl_sched_cost(&s, &model);
    xccl_sched_fini(&s);
    return c;
}

static int b_allreduce_ring(xccl_sched_t *s, int p, size_t n) { (void) p; return xccl_build_allreduce_ring(s, n / 4); }
static int b_allgather_ring(xccl_sched_t *s, int p, size_t n) { return xccl_build_allgather_ring(s, n / (size_t) p); }
static int b_alltoall_pairwise(xccl_sched_t *s, int p, size_t n) { return xccl_build_alltoall_pairwise(s, n / (size_t) p, 0); }
static int b_bcast_binomial(xccl_sched_t *s, int p, size_t n) { (void) p; return xccl_build_bcast_binomial(s, n, 0); }
static int b_reduce_scatter(xccl_sched_t *s, int p, size_t n,
                            int (*build)(xccl_sched_t *, const size_t *, int))
{
    size_t *c = malloc((size_t) p * sizeof(size_t));
    for (int i = 0; i < p; i++) {
        c[i] = n / 4 / (size_t) p;
    }
    int rc = build(s, c, 0);
    free(c);
    return rc;
}
static int b_reduce_scatter_ring(xccl_sched_t *s, int p, size_t n)
{
    return b_reduce_scatter(s, p, n, xccl_build_reduce_scatter_ring);
}
static int b_reduce_scatter_nhr(xccl_sched_t *s, int p, size_t n)
{
    return b_reduce_scatter(s, p, n, xccl_build_reduce_scatter_nhr);
}

START_TEST(ring_allreduce_matches_formula)
{
    const double a = model.alpha, b = model.beta, g = model.gamma;
    for (int p = 2; p <= 64; p *= 2) {
        size_t n = (size_t) p * 4 * 1024;   /* bytes, float elements */
        double want = 2 * (p - 1) * a + 2.0 * (p - 1) / p * (double) n * b + (double) (p - 1) / p * (double) n * g;
        for (int r = 0; r < p; r += p / 2) {
            double got = cost_of(b_allreduce_ring, r, p, n, 4);
            ck_assert_msg(rel_err(got, want) < 1e-9, "p=%d rank %d: %g vs %g", p, r, got, want);
        }
    }
}
END_TEST

START_TEST(ring_allgather_and_pairwise_alltoall_match_formula)
{
    const double a = model.alpha, b = model.beta;
    for (int p = 2; p <= 64; p++) {
        size_t n = (size_t) p * 1000;
        double want = (p - 1) * a + (double) (p - 1) / p * (double) n * b;
        double ag = cost_of(b_allgather_ring, p - 1, p, n, 1);
        double a2a = cost_of(b_alltoall_pairwise, 0, p, n, 1);
        ck_assert_msg(rel_err(ag, want) < 1e-9, "allgather p=%d: %g vs %g", p, ag, want);
        ck_assert_msg(rel_err(a2a, want) < 1e-9, "alltoall p=%d: %g vs %g", p, a2a, want);
    }
}
END_TEST

START_TEST(ring_reduce_scatter_matches_formula)
{
    const double a = model.alpha, b = model.beta, g = model.gamma;
    for (int p = 2; p <= 33; p++) {
        size_t n = (size_t) p * 4 * 256;
        double want = (p - 1) * a + (double) (p - 1) / p * (double) n * (b + g);
        double got = cost_of(b_reduce_scatter_ring, 0, p, n, 4);
        ck_assert_msg(rel_err(got, want) < 1e-9, "p=%d: %g vs %g", p, got, want);
        /* nhr: ceil(lg p) a for the same bytes, at rank 0 (no range wraps) */
        int lg = 0;
        while ((1 << lg) < p) {
            lg++;
        }
        want += (lg - (p - 1)) * a;
        got = cost_of(b_reduce_scatter_nhr, 0, p, n, 4);
        ck_assert_msg(rel_err(got, want) < 1e-9, "nhr p=%d: %g vs %g", p, got, want);
    }
}
END_TEST

START_TEST(binomial_bcast_root_matches_formula)
{
    const double a = model.alpha, b = model.beta;
    for (int p = 2; p <= 1024; p *= 2) {
        size_t n = 1 << 20;
        int lg = 0;
        while ((1 << lg) < p) {
            lg++;
        }
        double want = lg * (a + (double) n * b);
        double got = cost_of(b_bcast_binomial, 0, p, n, 1);
        ck_assert_msg(rel_err(got, want) < 1e-9, "p=%d: %g vs %g", p, got, want);
    }
}
END_TEST

/* The Bruck allgatherv and alltoallv (irregular builders of the two-level
 * stages) on regular sizes: ceil(lg p) a + ((p-1)/p) n b, and ceil(lg p) a
 * + (sum over steps of the blocks whose distance has that bit) block b;
 * model.delta is 0, so their copies cost nothing here. */
static size_t same_size(const void *ctx, int src, int dst)
{
    (void) src;
    (void) dst;
    return *(const size_t *) ctx;
}

START_TEST(bruck_v_builders_match_formula)
{
    const double a = model.alpha, b = model.beta;
    for (int p = 2; p <= 40; p++) {
        const size_t block = 1000;
        size_t *bytes = malloc((size_t) p * sizeof(size_t)), *displs = malloc((size_t) p * sizeof(size_t));
        for (int i = 0; i < p; i++) {
            bytes[i] = block;
            displs[i] = (size_t) i * block;
        }
        int lg = 0;
        size_t hops = 0;
        while ((1 << lg) < p) {
            for (int i = 1; i < p; i++) {
                hops += (size_t) ((i >> lg) & 1);
            }
            lg++;
        }
        for (int r = 0; r < p; r += p - 1) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, p, 1);
            ck_assert_int_eq(xccl_build_allgatherv_bruck(&s, bytes, displs, 0), 0);
            double want = lg * a + (double) (p - 1) * (double) block * b, got = xccl_sched_cost(&s, &model);
            ck_assert_msg(rel_err(got, want) < 1e-9, "allgatherv p=%d: %g vs %g", p, got, want);
            xccl_sched_fini(&s);
            xccl_sched_init(&s, r, p, 1);
            ck_assert_int_eq(xccl_build_alltoallv_bruck(&s, bytes, displs, bytes, displs, same_size, &block), 0);
            want = lg * a + (double) hops * (double) block * b;
            got = xccl_sched_cost(&s, &model);
            ck_assert_msg(rel_err(got, want) < 1e-9, "alltoallv p=%d: %g vs %g", p, got, want);
            xccl_sched_fini(&s);
        }
        free(bytes);
        free(displs);
    }
}
END_TEST

/* Gather and scatter at the root, blocks of `block` bytes: binomial
 * ceil(lg p) a + (p-1) block b, plus one a where a child's subtree wraps
 * past the end of the root's buffer (never at roots 0 and p-1; at root 1
 * where ranks p-1 and 0, relative p-2 and p-1, share the root's last
 * child's subtree [2^k, p): p >= 3 and p-1 not a power of two);
 * linear and the v forms with equal blocks (p-1)(a + block b).  A rank
 * off the root: one message of its block (linear, a leaf of the tree).
 * model.delta is 0: the own block's copy costs nothing here. */
START_TEST(rooted_gather_scatter_match_formula)
{
    const double a = model.alpha, b = model.beta;
    const size_t block = 1000;
    for (int p = 2; p <= 1024; p = p < 40 ? p + 1 : 2 * p) {
        int lg = 0;
        while ((1 << lg) < p) {
            lg++;
        }
        size_t *bytes = malloc((size_t) p * sizeof(size_t)), *displs = malloc((size_t) p * sizeof(size_t));
        for (int i = 0; i < p; i++) {
            bytes[i] = block;
            displs[i] = (size_t) (p - 1 - i) * block;
        }
        const int roots[] = { 0, 1, p - 1 };
        for (int ri = 0; ri < 3; ri++) {
            const int root = roots[ri], wrap = 1 == root && p >= 3 && 0 != ((p - 1) & (p - 2));
            const int leaf = (root + 1) % p;
            for (int scatter = 0; scatter < 2; scatter++) {
                const double tree = (lg + wrap) * a + (double) (p - 1) * (double) block * b;
                const double flat = (p - 1) * (a + (double) block * b), one = a + (double) block * b;
                for (int k = 0; k < 3; k++) {
                    for (int r = root; ; r = leaf) {
                        xccl_sched_t s;
                        xccl_sched_init(&s, r, p, 1);
                        int rc;
                        if (0 == k) {
                            rc = scatter ? xccl_build_scatter_binomial(&s, block, root, 0)
                                         : xccl_build_gather_binomial(&s, block, root, 0);
                        } else if (1 == k) {
                            rc = scatter ? xccl_build_scatter_linear(&s, block, root, 0)
                                         : xccl_build_gather_linear(&s, block, root, 0);
                        } else {
                            rc = scatter ? xccl_build_scatterv_linear(&s, bytes, displs, root, 0)
                                         : xccl_build_gatherv_linear(&s, bytes, displs, root, 0);
                        }
                        ck_assert_int_eq(rc, 0);
                        const double want = r != root ? one : 0 == k ? tree : flat, got = xccl_sched_cost(&s, &model);
                        ck_assert_msg(rel_err(got, want) < 1e-9, "%s p=%d root=%d rank %d form %d: %g vs %g",
                                      scatter ? "scatter" : "gather", p, root, r, k, got, want);
                        xccl_sched_fini(&s);
                        if (r == leaf) {
                            break;
                        }
                    }
                }
            }
        }
        free(bytes);
        free(displs);
    }
}
END_TEST

/* Local copies cost delta per byte: the ring allgather copies its own block
 * once (n/p bytes). */
START_TEST(copies_cost_delta)
{
    xccl_cost_model_t m = model;
    m.delta = 5e-11;
    const int p = 8;
    const size_t n = 8 * 1000;
    xccl_sched_t s;
    xccl_sched_init(&s, 0, p, 1);
    ck_assert_int_eq(xccl_build_allgather_ring(&s, n / p), 0);
    double want = (p - 1) * m.alpha + (double) (p - 1) / p * (double) n * m.beta +
                  (double) n / p * m.delta;
    double got = xccl_sched_cost(&s, &m);
    ck_assert_msg(rel_err(got, want) < 1e-9, "%g vs %g", got, want);
    xccl_sched_fini(&s);
}
END_TEST

START_TEST(empty_schedule_costs_nothing)
{
    ck_assert(cost_of(b_allreduce_ring, 0, 1, 4096, 4) == 0.0);
    ck_assert(cost_of(b_allreduce_ring, 0, 8, 0, 4) == 0.0);
}
END_TEST

/* A message smaller than the ring still waits for every round: with 2
 * elements on 64 ranks, each rank moves data in 4 steps but the ring has
 * 2(p-1) rounds. */
START_TEST(small_message_pays_every_round)
{
    const int p = 64;
    double got = cost_of(b_allreduce_ring, 0, p, 8, 4);
    double rounds_only = 2 * (p - 1) * model.alpha;
    ck_assert_msg(got >= rounds_only && got < rounds_only + 8 * 8 * (model.beta + model.gamma) + 1e-12,
                  "%g vs %g", got, rounds_only);
}
END_TEST

/* Auto's rule: the cheapest applicable algorithm, but the first (the
 * measured default) stays unless beaten by the margin. */
START_TEST(pick_keeps_default_within_margin)
{
    const double close[] = { 10.0, 8.0, -1.0 };      /* 20% better: not enough at 30% */
    const double far[] = { 10.0, 8.0, 6.0 };         /* 40% better */
    const double first_na[] = { -1.0, 9.0, 7.0 };    /* default n/a: plain cheapest */
    const double none[] = { -1.0, -1.0 };
    const double tie[] = { 10.0, 5.0, 5.0 };         /* first cheapest wins a tie */
    ck_assert_int_eq(xccl_pick(close, 3, 0.3), 0);
    ck_assert_int_eq(xccl_pick(close, 3, 0.1), 1);
    ck_assert_int_eq(xccl_pick(far, 3, 0.3), 2);
    ck_assert_int_eq(xccl_pick(first_na, 3, 0.3), 2);
    ck_assert_int_eq(xccl_pick(none, 2, 0.3), -1);
    ck_assert_int_eq(xccl_pick(tie, 3, 0.3), 1);
}
END_TEST

/* Cost files: every key lands in its own field, absent optional keys keep
 * their values, and every malformed file leaves the model untouched. */
START_TEST(cost_file_parses)
{
    char err[128];
    xccl_cost_model_t m = { 1, 2, 3, 4, 5, 6 };
    ck_assert_int_eq(xccl_cost_parse(" alpha=1e-6 beta=2.5e-10\ngamma=3e-10 delta=4e-10 flag=5e-8 "
                                     "peer=6e-11\n", &m, err, sizeof(err)), 0);
    ck_assert(m.alpha == 1e-6 && m.beta == 2.5e-10 && m.gamma == 3e-10 && m.delta == 4e-10 &&
              m.flag == 5e-8 && m.peer == 6e-11);
    /* the order is free; delta, flag, peer optional */
    xccl_cost_model_t o = { 1, 2, 3, 4, 5, 6 };
    ck_assert_int_eq(xccl_cost_parse("gamma=0 alpha=7 beta=8", &o, err, sizeof(err)), 0);
    ck_assert(o.alpha == 7 && o.beta == 8 && o.gamma == 0 && o.delta == 4 && o.flag == 5 &&
              o.peer == 6);
    static const char *const bad[] = {
        "",                                             /* alpha missing */
        "alpha=1 beta=2",                               /* gamma missing */
        "alpha=1 beta=2 gamma=3 flag=-1",               /* negative */
        "alpha=1 beta=2 gamma=3 peer=inf",              /* not finite */
        "alpha=1 beta=2 gamma=3 peer=nan",
        "alpha=1 beta=2 gamma=3 delta=",                /* no number */
        "alpha=1 beta=2 gamma=3 delta=4x",              /* trailing junk */
        "alpha=1 beta=2 gamma=3 alpha=4",               /* twice */
        "alpha=1 beta=2 gamma=3 epsilon=4",             /* unknown */
        "alpha=1 beta=2 gamma=3 flag",                  /* no '=' */
        "alpha=1 beta=2 gamma=3 alph=4",                /* a prefix of a key */
        "alpha=1 beta=2 gamma=3 alphaa=4",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        xccl_cost_model_t b = { 1, 2, 3, 4, 5, 6 };
        err[0] = '\0';
        ck_assert_msg(xccl_cost_parse(bad[i], &b, err, sizeof(err)) == -1, "accepted \"%s\"", bad[i]);
        ck_assert_msg(b.alpha == 1 && b.beta == 2 && b.gamma == 3 && b.delta == 4 && b.flag == 5 &&
                      b.peer == 6, "\"%s\" changed the model", bad[i]);
        ck_assert_msg(err[0] != '\0', "no reason for \"%s\"", bad[i]);
    }
}
END_TEST

/* Cost files from disk: read whole, parsed as above; a missing file or
 * one over XCCL_COST_FILE_MAX bytes is refused, the model untouched. */
START_TEST(cost_file_loads)
{
    char err[128], path[] = "/tmp/xccl_cost_XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fputs("alpha=1e-6 beta=2e-10 gamma=3e-10 peer=7e-11\n", f);
    fclose(f);
    xccl_cost_model_t m = { 1, 2, 3, 4, 5, 6 };
    ck_assert_int_eq(xccl_cost_load(path, &m, err, sizeof(err)), 0);
    ck_assert(m.alpha == 1e-6 && m.gamma == 3e-10 && m.delta == 4 && m.peer == 7e-11);
    f = fopen(path, "a");                       /* now too long, though white space */
    for (int i = 0; i <= XCCL_COST_FILE_MAX; i++) {
        fputc(' ', f);
    }
    fclose(f);
    xccl_cost_model_t b = { 1, 2, 3, 4, 5, 6 };
    ck_assert_int_eq(xccl_cost_load(path, &b, err, sizeof(err)), -1);
    ck_assert(b.alpha == 1 && b.peer == 6);
    unlink(path);
    ck_assert_int_eq(xccl_cost_load(path, &b, err, sizeof(err)), -1);
    ck_assert(b.alpha == 1 && b.peer == 6 && err[0] != '\0');
}
END_TEST

/* nhr and nb: Rabenseifner's bandwidth at any p in ceil(lg p) steps a
 * phase, (2 ceil(lg p) + extra) a + 2((p-1)/p) n b + ((p-1)/p) n g, exact
 * where no range is cut in two messages, at most `slack` a more elsewhere.
 *   nhr: extra 0; exact at rank 0, whose ranges never wrap past block
 *        p-1; slack 2 (its first and last step);
 *   nb:  extra 1 (the round that orders the blocks); exact at powers of
 *        two; slack ceil(lg p) (an allgather step may send around a
 *        missing block). */
static int b_allreduce_nhr(xccl_sched_t *s, int p, size_t n) { (void) p; return xccl_build_allreduce_nhr(s, n / 4); }
static int b_allreduce_nb(xccl_sched_t *s, int p, size_t n) { (void) p; return xccl_build_allreduce_nb(s, n / 4); }

static void lg_allreduce_formula(build_fn build, int extra, int nb)
{
    const double a = model.alpha, b = model.beta, g = model.gamma;
    const int ps[] = { 2, 3, 5, 6, 7, 8, 12, 64, 100 };
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        const int p = ps[i];
        int lg = 0;
        while ((1 << lg) < p) {
            lg++;
        }
        const size_t n = (size_t) p * 4 * 1024;
        const double want = (2 * lg + extra) * a + 2.0 * (p - 1) / p * (double) n * b + (double) (p - 1) / p * (double) n * g;
        for (int r = 0; r < p; r += p > 8 ? 7 : 1) {
            const double got = cost_of(build, r, p, n, 4);
            const int exact = nb ? 0 == (p & (p - 1)) : 0 == r;
            ck_assert_msg(exact ? rel_err(got, want) < 1e-9
                                : got > want * (1 - 1e-9) && got < want + (nb ? lg : 2) * a + 1e-12,
                          "p=%d rank %d: %g vs %g", p, r, got, want);
        }
    }
}

START_TEST(nhr_nb_allreduce_match_formula)
{
    lg_allreduce_formula(b_allreduce_nhr, 0, 0);
    lg_allreduce_formula(b_allreduce_nb, 1, 1);
}
END_TEST

/* bcast nhr and nb: halving scatter + the allgather, at the root
 * (reductions and copies priced 0): 2 ceil(lg p) a + 2((p-1)/p) n b, exact
 * for nhr at powers of two; elsewhere, and for nb, at most ceil(lg p) a
 * more (a range cut in two messages); no other rank costs more. */
static int b_bcast_nhr(xccl_sched_t *s, int p, size_t n) { (void) p; return xccl_build_bcast_nhr(s, n, 0); }
static int b_bcast_nb(xccl_sched_t *s, int p, size_t n) { (void) p; return xccl_build_bcast_nb(s, n, 0); }

START_TEST(nhr_nb_bcast_match_formula)
{
    const xccl_cost_model_t m = { model.alpha, model.beta, 0, 0, 0, 0 };
    const int ps[] = { 3, 4, 5, 7, 8, 12, 64, 100 };
    const build_fn fns[] = { b_bcast_nhr, b_bcast_nb };
    for (int f = 0; f < 2; f++) {
        for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
            const int p = ps[i];
            int lg = 0;
            while ((1 << lg) < p) {
                lg++;
            }
            const size_t n = (size_t) p * 1024;
            const double want = 2 * lg * m.alpha + 2.0 * (p - 1) / p * (double) n * m.beta;
            for (int r = 0; r < p; r += p > 8 ? 7 : 1) {
                xccl_sched_t s;
                xccl_sched_init(&s, r, p, 1);
                ck_assert_int_eq(fns[f](&s, p, n), 0);
                const double got = xccl_sched_cost(&s, &m);
                xccl_sched_fini(&s);
                /* the root sends (p-1)/p n in the scatter; the others
                 * receive less there */
                const int exact = 0 == f && 0 == (p & (p - 1)) && 0 == r;
                ck_assert_msg(exact ? rel_err(got, want) < 1e-9
                                    : got > (0 == r ? want * (1 - 1e-9) : 0) && got < want + lg * m.alpha + 1e-12,
                              "%s p=%d rank %d: %g vs %g", f ? "nb" : "nhr", p, r, got, want);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------ network */

/* One step: every rank exchanges n bytes with rank r + shift (mod p). */
typedef struct {
    int shift;
    size_t n;
} shift_arg_t;

static int b_shift(xccl_sched_t *s, void *arg)
{
    const shift_arg_t *a = arg;
    const int p = s->size, r = s->rank;
    xccl_sched_step(s);
    xccl_sched_send(s, (r + a->shift) % p, xccl_ref(XCCL_BUF_SEND, 0), a->n);
    xccl_sched_recv(s, (r - a->shift % p + p) % p, xccl_ref(XCCL_BUF_RECV, 0), a->n);
    return xccl_sched_finalize(s);
}

static const xccl_cost_model_t net_intra = { 1e-6, 1e-10, 0, 0, 0, 0 };
static const xccl_cost_model_t net_inter = { 1e-5, 1e-9, 0, 0, 0, 0 };

/* The step's inter-node bytes on network spec (NULL: none), as the
 * inter-node beta term's multiple of n: (t - alpha) / (beta n). */
static double net_bytes_factor(const char *layout_spec, int p, const char *spec, int shift)
{
    xccl_layout_t l;
    char err[128];
    ck_assert_int_eq(xccl_layout_parse(&l, layout_spec, p, err, sizeof(err)), 0);
    xccl_net_t net = { 0 };
    if (spec) {
        ck_assert_msg(0 == xccl_net_parse(&net, spec, err, sizeof(err)), "%s: %s", spec, err);
        ck_assert_int_eq(xccl_net_check(&net, &l, err, sizeof(err)), 0);
    }
    shift_arg_t a = { shift, 1 << 20 };
    const double t = xccl_predict_net(&l, &net, 1, b_shift, &a, NULL, 0, &net_intra, &net_inter);
    xccl_layout_fini(&l);
    ck_assert(t > 0);
    return (t - net_inter.alpha) / (net_inter.beta * (double) a.n);
}

/* Link sharing is priced: two flows on one link take twice as long on it,
 * and flows that share nothing cost what they cost without a network. */
START_TEST(net_prices_shared_links)
{
    static const struct {
        const char *layout;
        int p;
        const char *net;       /* NULL: none */
        int shift;
        double want;           /* the step's bytes, in n */
        const char *what;
    } cases[] = {
        /* no network: every rank its own beta, whatever the others do */
        { "block:1", 4, NULL, 2, 1.0, "none" },
        /* fat tree, leaves of 2 nodes: shift 2 crosses leaves, 2 flows
         * per leaf; at 1:1 the uplinks carry 2 NICs, at 2:1 one */
        { "block:1", 4, "fattree:2", 2, 1.0, "fattree 1:1, across leaves" },
        { "block:1", 4, "fattree:2:2", 2, 2.0, "fattree 2:1, across leaves" },
        { "block:1", 8, "fattree:4:4", 4, 4.0, "fattree 4:1, across leaves" },
        /* shift 1 on leaves of 2: one flow of each leaf leaves it */
        { "block:1", 4, "fattree:2:2", 1, 1.0, "fattree 2:1, one flow up" },
        /* inside a leaf the oversubscription costs nothing */
        { "block:1", 4, "fattree:4:4", 2, 1.0, "fattree, one leaf" },
        /* one NIC per node: the two ranks of a node both leave it (twice),
         * or one of them does (once); a NIC per rank (the default) shares
         * none */
        { "block:2", 4, "fattree:2,nics=1", 2, 2.0, "one NIC, two flows" },
        { "block:2", 4, "fattree:2,nics=1", 1, 1.0, "one NIC, one flow" },
        { "block:2", 4, "fattree:2", 2, 1.0, "a NIC per rank" },
        /* torus of 4x1 nodes: a shift by 1 node loads each link with one
         * flow, by 2 with two (every flow crosses two links) */
        { "block:1", 4, "torus:4x1", 1, 1.0, "torus, shift 1" },
        { "block:1", 4, "torus:4x1", 2, 2.0, "torus, shift 2" },
        /* 4x4: a shift by a row is one hop in y, by two rows two; by 5
         * ranks, (1, 1) but (1, 2) from the last column: two */
        { "block:1", 16, "torus:4x4", 4, 1.0, "torus 4x4, shift (0,1)" },
        { "block:1", 16, "torus:4x4", 8, 2.0, "torus 4x4, shift (0,2)" },
        { "block:1", 16, "torus:4x4", 5, 2.0, "torus 4x4, shift 5 ranks" },
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const double got = net_bytes_factor(cases[k].layout, cases[k].p, cases[k].net, cases[k].shift);
        ck_assert_msg(fabs(got - cases[k].want) < 1e-9, "%s: %g times the bytes, want %g", cases[k].what, got,
                      cases[k].want);
    }
}
END_TEST

/* A schedule with two flows per uplink in one step (ring's neighbours vs
 * recursive doubling's partners far away) is slower on an oversubscribed
 * fat tree than without one, exactly by its shared step. */
START_TEST(net_oversubscription_slows_far_flows)
{
    xccl_layout_t l;
    char err[128];
    ck_assert_int_eq(xccl_layout_parse(&l, "block:1", 8, err, sizeof(err)), 0);
    xccl_net_t none = { 0 }, tree;
    ck_assert_int_eq(xccl_net_parse(&tree, "fattree:4:2", err, sizeof(err)), 0);
    /* recursive doubling, 8 ranks: partners at 1, 2 (inside a leaf of 4),
     * then 4 (every rank of a leaf crosses: 4 flows on 2 NICs of uplink) */
    shift_arg_t a = { 4, 1 << 20 };
    const double t0 = xccl_predict_net(&l, &none, 1, b_shift, &a, NULL, 0, &net_intra, &net_inter);
    const double t1 = xccl_predict_net(&l, &tree, 1, b_shift, &a, NULL, 0, &net_intra, &net_inter);
    ck_assert_msg(fabs((t1 - net_inter.alpha) - 2 * (t0 - net_inter.alpha)) < 1e-12, "%g vs %g", t1, t0);
    /* the none network is xccl_predict_hier */
    ck_assert(t0 == xccl_predict_hier(&l, 1, b_shift, &a, NULL, 0, &net_intra, &net_inter));
    xccl_layout_fini(&l);
}
END_TEST

START_TEST(net_parses)
{
    char err[128], buf[64];
    xccl_net_t n = { 0 };
    ck_assert_int_eq(xccl_net_parse(&n, "fattree:16:4,nics=2", err, sizeof(err)), 0);
    ck_assert(XCCL_NET_FAT_TREE == n.kind && 16 == n.leaf_nodes && 4.0 == n.oversub && 2 == n.nics);
    xccl_net_format(&n, buf, sizeof(buf));
    ck_assert_str_eq(buf, "fattree:16:4,nics=2");
    ck_assert_int_eq(xccl_net_parse(&n, "torus:8x4", err, sizeof(err)), 0);
    ck_assert(XCCL_NET_TORUS == n.kind && 8 == n.x && 4 == n.y && 0 == n.nics);
    xccl_net_format(&n, buf, sizeof(buf));
    ck_assert_str_eq(buf, "torus:8x4");
    ck_assert_int_eq(xccl_net_parse(&n, "none", err, sizeof(err)), 0);
    ck_assert_int_eq(n.kind, XCCL_NET_NONE);
    static const char *const bad[] = { "", "fat", "fattree:", "fattree:0", "fattree:4:0.5", "fattree:4:x",
                                       "torus:4", "torus:4x", "torus:0x4", "torus:4x4,nics=0",
                                       "torus:4x4,nic=1", "none,nics=1", "fattree:4 " };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        xccl_net_t t = { 7, 7, 7, 7, 7, 7 };
        err[0] = '\0';
        ck_assert_msg(-1 == xccl_net_parse(&t, bad[i], err, sizeof(err)), "accepted \"%s\"", bad[i]);
        ck_assert_msg(7 == t.kind && err[0], "\"%s\": changed or no reason", bad[i]);
    }
    xccl_layout_t l;
    ck_assert_int_eq(xccl_layout_parse(&l, "block:1", 10, err, sizeof(err)), 0);
    ck_assert_int_eq(xccl_net_parse(&n, "torus:3x3", err, sizeof(err)), 0);
    ck_assert_int_eq(xccl_net_check(&n, &l, err, sizeof(err)), -1);
    xccl_layout_fini(&l);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("cost");
    TCase *tc = tcase_create("textbook");
    tcase_add_test(tc, ring_allreduce_matches_formula);
    tcase_add_test(tc, ring_allgather_and_pairwise_alltoall_match_formula);
    tcase_add_test(tc, ring_reduce_scatter_matches_formula);
    tcase_add_test(tc, binomial_bcast_root_matches_formula);
    tcase_add_test(tc, empty_schedule_costs_nothing);
    tcase_add_test(tc, pick_keeps_default_within_margin);
    tcase_add_test(tc, copies_cost_delta);
    tcase_add_test(tc, bruck_v_builders_match_formula);
    tcase_add_test(tc, rooted_gather_scatter_match_formula);
    tcase_add_test(tc, small_message_pays_every_round);
    tcase_add_test(tc, cost_file_parses);
    tcase_add_test(tc, cost_file_loads);
    tcase_add_test(tc, nhr_nb_allreduce_match_formula);
    tcase_add_test(tc, nhr_nb_bcast_match_formula);
    tcase_add_test(tc, net_prices_shared_links);
    tcase_add_test(tc, net_oversubscription_slows_far_flows);
    tcase_add_test(tc, net_parses);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
