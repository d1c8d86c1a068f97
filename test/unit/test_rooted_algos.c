/*
 * Reduce (binomial, rabenseifner, chain in several segment sizes) and
 * barrier (dissemination, shm) on the simulated transport.
 *
 * Reduce: p = 1..17 with every root, 32, 33 and 64 with five roots; counts
 * 0, 1, p - 1, p + 1 and a larger one no power of two divides; in place at
 * the root and not; sums of int64 and of doubles (multiples of 1/4 small
 * enough that every order of the additions is exact), different on every
 * rank and element.  The root's RECV must equal a reference computed here;
 * every SEND but the root's in place must be unchanged; a non-root's RECV
 * is NULL or a guard pattern that must stay (and no non-root schedule names
 * RECV at all).  Buffers and scratch have their exact sizes (ASan).
 *
 * Barrier: every p in 1..33 runs to completion; then, for every rank h,
 * the others are progressed with h held back (never started): none may
 * finish, and all finish once h starts; the same on the schedules alone
 * with sends that complete at once (an eager transport).  Plus the
 * textbook shapes.
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 23
#define SIM_SEED_SALT 29u
#define SIM_HARNESS_OWN_KINDS
#include "sim_harness.h"
#include "xccl_build.h"

#define ALL_ROOTS_P 17                 /* every p and root up to this */

static const int big_p[] = { 32, 33, 64 };
#define NBIG ((int) (sizeof(big_p) / sizeof(big_p[0])))

/* ------------------------------------------------------------------------ */
/* Element kinds                                                            */
/* ------------------------------------------------------------------------ */

typedef enum { KIND_I64, KIND_DBL, NKINDS } kind_t;

static const struct {
    const char *name;
    xccl_dtype_t dt;
} kinds[NKINDS] = { { "int64", XCCL_DT_INT64 }, { "double", XCCL_DT_DOUBLE } };

#define ES 8                           /* both kinds */

/* Element i of rank r's input: up to 2^40 in magnitude (int64), or a
 * multiple of 1/4 below 2^15 (double): no sum of 64 of them overflows or
 * rounds, in any order. */
static int64_t i64_input(int r, size_t i)
{
    const uint64_t x = (uint64_t) (r + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t) (i + 1) * 0xC2B2AE3D27D4EB4Full;
    return (int64_t) (x >> 24) - ((int64_t) 1 << 39);
}

static double dbl_input(int r, size_t i)
{
    return (double) ((long) ((r * 7919 + (long) i * 131 + (long) (i * i) % 977) % 100003) - 50000) * 0.25;
}

static void fill(kind_t k, int r, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (KIND_I64 == k) {
            ((int64_t *) buf)[i] = i64_input(r, i);
        } else {
            ((double *) buf)[i] = dbl_input(r, i);
        }
    }
}

/* The sum over ranks 0..p-1, one rank at a time. */
static void reference_sum(kind_t k, int p, void *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t a = 0;
        double d = 0.0;
        for (int r = 0; r < p; r++) {
            a += i64_input(r, i);
            d += dbl_input(r, i);
        }
        if (KIND_I64 == k) {
            ((int64_t *) out)[i] = a;
        } else {
            ((double *) out)[i] = d;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Reduce                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *name;          /* "algo/variant"; s->algo is the part before '/' */
    int (*build)(xccl_sched_t *s, size_t count, int root, int in_place, size_t arg);
    size_t arg;
} reduce_algo_t;

static int rd_binomial(xccl_sched_t *s, size_t count, int root, int in_place, size_t arg)
{
    (void) arg;
    return xccl_build_reduce_binomial(s, count, root, in_place);
}

static int rd_rab(xccl_sched_t *s, size_t count, int root, int in_place, size_t arg)
{
    (void) arg;
    return xccl_build_reduce_rabenseifner(s, count, root, in_place);
}

static const reduce_algo_t reduce_algos[] = {
    { "binomial", rd_binomial, 0 },
    { "rabenseifner", rd_rab, 0 },
    { "chain/whole", xccl_build_reduce_chain, 0 },
    { "chain/3", xccl_build_reduce_chain, 3 },     /* below an element: one element */
    { "chain/8", xccl_build_reduce_chain, 8 },     /* one element */
    { "chain/20", xccl_build_reduce_chain, 20 },   /* rounded down to two */
    { "chain/40", xccl_build_reduce_chain, 40 },   /* five */
};
#define NREDUCE ((int) (sizeof(reduce_algos) / sizeof(reduce_algos[0])))

#define GUARD 0xEE

/* First byte where buf differs from want, or -1. */
static long first_diff(const unsigned char *buf, const unsigned char *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != want[i]) {
            return (long) i;
        }
    }
    return -1;
}

/* One reduce: non-root RECV NULL, or (guard) a buffer of guard bytes. */
static void check_reduce(const reduce_algo_t *al, int p, size_t count, int root, int in_place, kind_t k,
                         int guard)
{
    char what[160];
    const size_t bytes = count * ES;
    job_t j;
    snprintf(what, sizeof(what), "reduce %s p=%d count=%zu root=%d in_place=%d %s guard=%d", al->name, p,
             count, root, in_place, kinds[k].name, guard);
    job_init(&j, p, ES);
    unsigned char *want = xmalloc(bytes), *input = xmalloc(bytes), *guards = xmalloc(bytes);
    memset(guards, GUARD, bytes);
    const size_t alen = strcspn(al->name, "/");
    int failed = -1, misnamed = -1, recv_named = -1;
    for (int r = 0; r < p; r++) {
        xccl_sched_t *s = &j.sched[r];
        if (0 != al->build(s, count, root, in_place, al->arg)) {
            failed = r;
        } else if (NULL == s->algo || strlen(s->algo) != alen || 0 != strncmp(s->algo, al->name, alen)) {
            misnamed = r;
        } else if (r != root && sched_names_recv(s)) {
            recv_named = r;
        }
        if (r == root) {
            j.rbuf[r] = xmalloc(bytes);
            j.sbuf[r] = in_place ? j.rbuf[r] : job_sbuf(&j, r, bytes);
            if (!in_place) {
                memcpy(j.rbuf[r], guards, bytes);
            }
        } else {
            j.rbuf[r] = guard ? xmalloc(bytes) : NULL;
            if (guard) {
                memcpy(j.rbuf[r], guards, bytes);
            }
            j.sbuf[r] = job_sbuf(&j, r, bytes);
        }
        fill(k, r, j.sbuf[r], count);
    }
    ck_assert_msg(failed < 0, "%s: build failed on rank %d", what, failed);
    ck_assert_msg(misnamed < 0, "%s: rank %d's algo is %s", what, misnamed,
                  misnamed < 0 ? "" : j.sched[misnamed].algo ? j.sched[misnamed].algo : "(null)");
    ck_assert_msg(recv_named < 0, "%s: rank %d names RECV", what, recv_named);
    job_run(&j, xccl_reduce_kernel(kinds[k].dt, XCCL_OP_SUM), what);

    reference_sum(k, p, want, count);
    long bad = first_diff(j.rbuf[root], want, bytes);
    ck_assert_msg(bad < 0, "%s: root's result wrong at byte %ld", what, bad);
    int bad_recv = -1, bad_send = -1;
    for (int r = 0; r < p; r++) {
        if (r != root && guard && first_diff(j.rbuf[r], guards, bytes) >= 0) {
            bad_recv = r;
        }
        if (r != root || !in_place) {
            fill(k, r, input, count);
            bad_send = first_diff(j.sbuf[r], input, bytes) >= 0 ? r : bad_send;
        }
    }
    ck_assert_msg(bad_recv < 0, "%s: rank %d's RECV written", what, bad_recv);
    ck_assert_msg(bad_send < 0, "%s: rank %d's SEND changed", what, bad_send);
    free(want);
    free(input);
    free(guards);
    job_fini(&j);
}

static void check_reduce_roots(int p, const int *roots, int nroots)
{
    size_t counts[5], nc = 0;
    counts[nc++] = 0;
    counts[nc++] = 1;
    if (p > 2) {
        counts[nc++] = (size_t) p - 1;
    }
    counts[nc++] = (size_t) p + 1;
    counts[nc++] = 37 * (size_t) p + 5;
    for (int a = 0; a < NREDUCE; a++) {
        for (int ri = 0; ri < nroots; ri++) {
            for (size_t ci = 0; ci < nc; ci++) {
                for (int ip = 0; ip < 2; ip++) {
                    for (int k = 0; k < NKINDS; k++) {
                        check_reduce(&reduce_algos[a], p, counts[ci], roots[ri], ip, (kind_t) k,
                                     (roots[ri] + (int) ci + k) & 1);
                    }
                }
            }
        }
    }
}

START_TEST(reduce_small_p)
{
    const int p = _i;
    int roots[ALL_ROOTS_P];
    const int nroots = pick_roots(p, ALL_ROOTS_P, roots);
    check_reduce_roots(p, roots, nroots);
}
END_TEST

START_TEST(reduce_big_p)
{
    const int p = big_p[_i];
    int roots[8];
    const int nroots = pick_roots(p, ALL_ROOTS_P, roots);
    check_reduce_roots(p, roots, nroots);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Barrier                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    int (*build)(xccl_sched_t *s);
} barrier_algo_t;

static const barrier_algo_t barrier_algos[] = {
    { "dissemination", xccl_build_barrier_dissemination },
    { "shm", xccl_build_barrier_shm },
};
#define NBARRIER ((int) (sizeof(barrier_algos) / sizeof(barrier_algos[0])))

static void barrier_job(job_t *j, const barrier_algo_t *al, int p, const char *what)
{
    job_init(j, p, 1);
    int bad = -1;
    for (int r = 0; r < p; r++) {
        if (0 != al->build(&j->sched[r]) || NULL == j->sched[r].algo || 0 != strcmp(j->sched[r].algo, al->name)) {
            bad = r;
        }
    }
    ck_assert_msg(bad < 0, "%s: build failed or misnamed on rank %d", what, bad);
}

START_TEST(barrier_runs)
{
    const int p = _i;
    for (int a = 0; a < NBARRIER; a++) {
        char what[96];
        job_t j;
        snprintf(what, sizeof(what), "barrier %s p=%d", barrier_algos[a].name, p);
        barrier_job(&j, &barrier_algos[a], p, what);
        job_run(&j, NULL, what);
        job_fini(&j);
    }
}
END_TEST

/* Progresses every rank but held (-1: none) until nothing moves; returns
 * how many ranks are done.  Fails the test on an error. */
static int drive(xccl_exec_t *ex, int p, int held, const char *what)
{
    int done = 0, failed = -1;
    for (int round = 0; round < 4 * p + 8; round++) {
        done = 0;
        for (int r = 0; r < p; r++) {
            if (r == held) {
                continue;
            }
            const int st = xccl_exec_progress(&ex[r]);
            failed = st < 0 ? r : failed;
            done += st > 0;
        }
    }
    ck_assert_msg(failed < 0, "%s: rank %d failed", what, failed);
    return done;
}

/* With rank h never started, no rank may leave the barrier. */
static void check_held_back(const barrier_algo_t *al, int p, int h)
{
    char what[96];
    job_t j;
    snprintf(what, sizeof(what), "barrier %s p=%d rank %d held back", al->name, p, h);
    barrier_job(&j, al, p, what);
    xccl_sim_t *sim = xccl_sim_create(p);
    ck_assert_ptr_nonnull(sim);
    int init_failed = 0;
    for (int r = 0; r < p; r++) {
        j.scratch[r] = xmalloc(j.sched[r].scratch_bytes);
        void *bufs[XCCL_NBUF] = { NULL, NULL, j.scratch[r], NULL };
        init_failed |= 0 != xccl_exec_init(&j.exec[r], &j.sched[r], xccl_sim_transport(sim, r), bufs, NULL, NULL,
                                           SIM_EXEC_SEQ);
        xccl_exec_set_peer(&j.exec[r], xccl_sim_peer(sim, r));
    }
    ck_assert_msg(!init_failed, "%s: exec_init failed", what);
    const int early = drive(j.exec, p, h, what);
    ck_assert_msg(0 == early, "%s: %d ranks left early", what, early);
    const int all = drive(j.exec, p, -1, what);
    ck_assert_msg(p == all, "%s: only %d ranks finished", what, all);
    for (int r = 0; r < p; r++) {
        xccl_exec_fini(&j.exec[r]);
        free(j.scratch[r]);
    }
    xccl_sim_destroy(sim);
    job_fini(&j);
}

/* The same on the schedules alone, with sends that complete at once (an
 * eager transport; the simulator's rendezvous also holds back a rank
 * that only sends to the held one): a step completes once the messages
 * it receives have been sent and the flags it waits for posted; then its
 * posts take effect.  Returns how many ranks but held finish. */
static int eager_finish(const xccl_sched_t *sc, int p, int held)
{
    size_t *step = calloc((size_t) p, sizeof(size_t));
    uint32_t *flag = calloc((size_t) p, sizeof(uint32_t));
    uint32_t *sent = calloc((size_t) p * (size_t) p, sizeof(uint32_t));   /* [src * p + dst] */
    char *posted = calloc((size_t) p, 1);
    ck_assert(step && flag && sent && posted);
    for (int moved = 1; moved;) {
        moved = 0;
        for (int r = 0; r < p; r++) {
            const xccl_sched_t *s = &sc[r];
            if (r == held || step[r] >= s->nsteps) {
                continue;
            }
            const size_t b = s->step_start[step[r]];
            const size_t e = step[r] + 1 < s->nsteps ? s->step_start[step[r] + 1] : s->nacts;
            int ready = 1;
            for (size_t i = b; i < e; i++) {
                const xccl_action_t *a = &s->acts[i];
                if (XCCL_ACT_SEND == a->kind && !posted[r]) {
                    sent[(size_t) r * (size_t) p + (size_t) a->peer] = a->idx + 1;
                } else if (XCCL_ACT_RECV == a->kind) {
                    ready &= sent[(size_t) a->peer * (size_t) p + (size_t) r] > a->idx;
                } else if (XCCL_ACT_WAIT == a->kind && 0 == a->len) {
                    ready &= flag[a->peer] >= a->idx;
                }
            }
            moved |= !posted[r];
            posted[r] = 1;
            if (ready) {
                for (size_t i = b; i < e; i++) {
                    if (XCCL_ACT_POST == s->acts[i].kind) {
                        flag[r] = s->acts[i].idx;
                    }
                }
                step[r]++;
                posted[r] = 0;
                moved = 1;
            }
        }
    }
    int done = 0;
    for (int r = 0; r < p; r++) {
        done += r != held && step[r] >= sc[r].nsteps;
    }
    free(step);
    free(flag);
    free(sent);
    free(posted);
    return done;
}

START_TEST(barrier_waits_for_all)
{
    const int p = _i;
    for (int a = 0; a < NBARRIER; a++) {
        char what[96];
        job_t j;
        snprintf(what, sizeof(what), "barrier %s p=%d", barrier_algos[a].name, p);
        barrier_job(&j, &barrier_algos[a], p, what);
        ck_assert_msg(p == eager_finish(j.sched, p, -1), "%s: does not finish (eager)", what);
        int early = -1;
        for (int h = 0; h < p; h++) {
            early = eager_finish(j.sched, p, h) > 0 ? h : early;
        }
        ck_assert_msg(early < 0, "%s: ranks leave without rank %d (eager)", what, early);
        job_fini(&j);
        for (int h = 0; h < p; h++) {
            check_held_back(&barrier_algos[a], p, h);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Textbook shapes                                                          */
/* ------------------------------------------------------------------------ */

START_TEST(shapes)
{
    const int p = 16;
    const size_t count = 1600, n = count * ES;
    for (int root = 0; root < p; root += 5) {
        for (int r = 0; r < p; r++) {
            const int v = (r - root + p) % p;
            xccl_sched_t s;
            tally_t t;

            /* binomial: lg p rounds (a rank leaves once it sent); the root
             * receives lg p vectors and reduces them, a leaf sends its
             * vector in the first round */
            xccl_sched_init(&s, r, p, ES);
            ck_assert_int_eq(xccl_build_reduce_binomial(&s, count, root, 0), 0);
            t = tally(&s);
            ck_assert_uint_le(s.rounds, 4);
            ck_assert_uint_eq(t.sends, 0 == v ? 0 : 1);
            if (0 == v) {
                ck_assert_uint_eq(s.rounds, 4);
                ck_assert_uint_eq(t.recvs, 4);
                ck_assert_uint_eq(t.reduced, 4 * n);
            } else if (v & 1) {
                ck_assert_uint_eq(t.recvs + t.reduced + s.scratch_bytes, 0);
            }
            xccl_sched_fini(&s);

            /* rabenseifner: 2 lg p rounds; (p-1)/p n received by halving
             * and reduced, the root gathers (p-1)/p n more */
            xccl_sched_init(&s, r, p, ES);
            ck_assert_int_eq(xccl_build_reduce_rabenseifner(&s, count, root, 0), 0);
            t = tally(&s);
            ck_assert_uint_le(s.rounds, 8);
            ck_assert_uint_eq(t.reduced, n / p * (p - 1));
            if (0 == v) {
                ck_assert_uint_eq(s.rounds, 8);
                ck_assert_uint_eq(t.received, 2 * (n / p * (p - 1)));
                ck_assert_uint_eq(t.sent, n / p * (p - 1));
            }
            xccl_sched_fini(&s);

            /* chain in 10 segments: p - 2 + 10 rounds, every rank but the
             * root sends n, every rank but root + 1 receives and reduces n */
            xccl_sched_init(&s, r, p, ES);
            ck_assert_int_eq(xccl_build_reduce_chain(&s, count, root, 0, n / 10), 0);
            t = tally(&s);
            ck_assert_uint_eq(s.rounds, (size_t) p - 2 + 10);
            ck_assert_uint_eq(t.sent, 0 == v ? 0 : n);
            ck_assert_uint_eq(t.sends, 0 == v ? 0 : 10);
            ck_assert_uint_eq(t.received, 1 == v ? 0 : n);
            ck_assert_uint_eq(t.reduced, 1 == v ? 0 : n);
            xccl_sched_fini(&s);
        }
    }
    /* dissemination: ceil(lg p) rounds of one byte each way */
    for (int q = 1; q <= 33; q++) {
        size_t lg = 0;
        while (((size_t) 1 << lg) < (size_t) q) {
            lg++;
        }
        for (int r = 0; r < q; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, q, 1);
            ck_assert_int_eq(xccl_build_barrier_dissemination(&s), 0);
            const tally_t t = tally(&s);
            ck_assert_uint_eq(s.rounds, lg);
            ck_assert_uint_eq(t.sends, lg);
            ck_assert_uint_eq(t.recvs, lg);
            ck_assert(t.one_each_way);
            xccl_sched_fini(&s);
        }
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("rooted_algos");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, reduce_small_p, 1, ALL_ROOTS_P + 1);
    tcase_add_loop_test(tc, reduce_big_p, 0, NBIG);
    tcase_add_loop_test(tc, barrier_runs, 1, 34);
    tcase_add_loop_test(tc, barrier_waits_for_all, 2, 34);
    tcase_add_test(tc, shapes);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
