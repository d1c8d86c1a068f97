/*
 * Alltoall (bruck, linear) and bcast (scatter_allgather, chain) on the
 * simulated transport: every communicator size 1..64 and a few large ones
 * (127, 128, 129, 255, 1000), block and message sizes around p, in place and
 * not, many roots; then the textbook shapes at a power of two.
 *
 * Checks are done with plain loops and one assertion per buffer: Check
 * writes to a pipe per assertion, which is slow inside per-byte loops.
 * Buffers are allocated at their exact size so that ASan catches a
 * schedule that strays past them.
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 11
#define SIM_SEED_SALT 17u
#include "sim_harness.h"
#include "xccl_build.h"

#define SMALL_P 64                     /* every p in 1..SMALL_P */
#define ALL_ROOTS_P 33                 /* every root up to this p */

static const int big_p[] = { 100, 127, 128, 129, 255, 1000 };
#define NBIG ((int) (sizeof(big_p) / sizeof(big_p[0])))

/* ------------------------------------------------------------------------ */
/* Alltoall                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    int (*build)(xccl_sched_t *s, size_t block, int in_place, int arg);
    int arg;
} a2a_algo_t;

static int a2a_bruck(xccl_sched_t *s, size_t b, int ip, int arg)
{
    (void) arg;
    return xccl_build_alltoall_bruck(s, b, ip);
}

static const a2a_algo_t a2a_algos[] = {
    { "bruck", a2a_bruck, 0 },
    { "linear/all", xccl_build_alltoall_linear, 0 },
    { "linear/1", xccl_build_alltoall_linear, 1 },
    { "linear/4", xccl_build_alltoall_linear, 4 },
};
#define NA2A ((int) (sizeof(a2a_algos) / sizeof(a2a_algos[0])))

static void check_alltoall(const a2a_algo_t *al, int p, size_t b, int in_place)
{
    char what[128];
    job_t j;
    snprintf(what, sizeof(what), "alltoall %s p=%d block=%zu in_place=%d", al->name, p, b, in_place);
    job_init(&j, p, 1);
    const size_t total = (size_t) p * b;
    for (int r = 0; r < p; r++) {
        ck_assert_msg(0 == al->build(&j.sched[r], b, in_place, al->arg), "%s: build failed", what);
        ck_assert_str_eq(j.sched[r].algo, 0 == strncmp(al->name, "linear", 6) ? "linear" : al->name);
        j.rbuf[r] = xmalloc(total);
        j.sbuf[r] = in_place ? j.rbuf[r] : job_sbuf(&j, r, total);
        if (!in_place) {
            memset(j.rbuf[r], 0xEE, total);
        }
        for (int to = 0; to < p; to++) {
            for (size_t i = 0; i < b; i++) {
                j.sbuf[r][(size_t) to * b + i] = pattern(r, to, i);
            }
        }
    }
    job_run(&j, NULL, what);
    for (int r = 0; r < p; r++) {
        long bad = -1;
        for (size_t x = 0; x < total && bad < 0; x++) {
            if (j.rbuf[r][x] != pattern((int) (x / b), r, x % b)) {
                bad = (long) x;
            }
        }
        /* The input survives (not in place). */
        for (size_t x = 0; x < total && bad < 0 && !in_place; x++) {
            if (j.sbuf[r][x] != pattern(r, (int) (x / b), x % b)) {
                bad = (long) (total + x);
            }
        }
        ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong (>= %zu: input changed)", what, r, bad,
                      total);
    }
    job_fini(&j);
}

START_TEST(alltoall_small_p)
{
    const int p = _i;
    const size_t blocks[] = { 0, 1, 3, 37 };
    for (int a = 0; a < NA2A; a++) {
        for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                check_alltoall(&a2a_algos[a], p, blocks[bi], in_place);
            }
        }
    }
}
END_TEST

START_TEST(alltoall_big_p)
{
    const int p = big_p[_i];
    /* 1000 ranks: one small odd block (a million messages for linear). */
    const size_t blocks[] = { 0, 1, 3, 37 };
    const size_t nb = p >= 1000 ? 1 : sizeof(blocks) / sizeof(blocks[0]);
    for (int a = 0; a < NA2A; a++) {
        for (size_t bi = 0; bi < nb; bi++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                check_alltoall(&a2a_algos[a], p, p >= 1000 ? 3 : blocks[bi], in_place);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bcast                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    int (*build)(xccl_sched_t *s, size_t bytes, int root, size_t arg);
    size_t arg;
} bcast_algo_t;

static int bc_sag(xccl_sched_t *s, size_t bytes, int root, size_t arg)
{
    (void) arg;
    return xccl_build_bcast_scatter_allgather(s, bytes, root);
}

static int bc_nhr(xccl_sched_t *s, size_t bytes, int root, size_t arg)
{
    (void) arg;
    return xccl_build_bcast_nhr(s, bytes, root);
}

static int bc_nb(xccl_sched_t *s, size_t bytes, int root, size_t arg)
{
    (void) arg;
    return xccl_build_bcast_nb(s, bytes, root);
}

static const bcast_algo_t bcast_algos[] = {
    { "scatter_allgather", bc_sag, 0 },
    { "nhr", bc_nhr, 0 },
    { "nb", bc_nb, 0 },
    { "chain/whole", xccl_build_bcast_chain, 0 },
    { "chain/1", xccl_build_bcast_chain, 1 },
    { "chain/7", xccl_build_bcast_chain, 7 },
    { "chain/64", xccl_build_bcast_chain, 64 },
};
#define NBCAST ((int) (sizeof(bcast_algos) / sizeof(bcast_algos[0])))

static void check_bcast(const bcast_algo_t *al, int p, size_t bytes, int root)
{
    char what[128];
    job_t j;
    snprintf(what, sizeof(what), "bcast %s p=%d bytes=%zu root=%d", al->name, p, bytes, root);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        ck_assert_msg(0 == al->build(&j.sched[r], bytes, root, al->arg), "%s: build failed", what);
        j.rbuf[r] = xmalloc(bytes);
        j.sbuf[r] = NULL;
        for (size_t i = 0; i < bytes; i++) {
            j.rbuf[r][i] = r == root ? pattern(root, 1, i) : 0xEE;
        }
    }
    job_run(&j, NULL, what);
    for (int r = 0; r < p; r++) {
        long bad = -1;
        for (size_t i = 0; i < bytes && bad < 0; i++) {
            if (j.rbuf[r][i] != pattern(root, 1, i)) {
                bad = (long) i;
            }
        }
        ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong", what, r, bad);
    }
    job_fini(&j);
}

static size_t bcast_sizes(int p, size_t *sz)
{
    size_t n = counts_around(p, sz);
    if (p + 1 != 1001) {
        sz[n++] = 1001;
    }
    return n;
}

static void check_bcast_roots(int p, const int *roots, int nroots)
{
    size_t sizes[8], ns = bcast_sizes(p, sizes);
    for (int a = 0; a < NBCAST; a++) {
        for (int ri = 0; ri < nroots; ri++) {
            for (size_t si = 0; si < ns; si++) {
                /* One-byte segments make rounds grow with the message: the
                 * large size with two roots is enough there. */
                if (1 == bcast_algos[a].arg && sizes[si] > (size_t) p + 1 && ri >= 2) {
                    continue;
                }
                check_bcast(&bcast_algos[a], p, sizes[si], roots[ri]);
            }
        }
    }
}

START_TEST(bcast_small_p)
{
    const int p = _i;
    int roots[SMALL_P];
    const int nroots = pick_roots(p, ALL_ROOTS_P, roots);
    check_bcast_roots(p, roots, nroots);
}
END_TEST

START_TEST(bcast_big_p)
{
    const int p = big_p[_i];
    const int roots[] = { 0, p / 2 + 1 };
    check_bcast_roots(p, roots, 2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Textbook shapes at a power of two                                        */
/* ------------------------------------------------------------------------ */

START_TEST(alltoall_structure)
{
    const int p = 16;
    const size_t b = 10;
    for (int r = 0; r < p; r += 5) {
        xccl_sched_t s;
        tally_t t;
        for (int in_place = 0; in_place < 2; in_place++) {
            /* Bruck: lg p rounds of one message each way, p/2 blocks each. */
            xccl_sched_init(&s, r, p, 1);
            ck_assert_int_eq(xccl_build_alltoall_bruck(&s, b, in_place), 0);
            t = tally(&s);
            ck_assert_uint_eq(s.rounds, 4);
            ck_assert_uint_eq(s.max_xfers, 2);
            ck_assert_uint_eq(t.sends, 4);
            ck_assert_uint_eq(t.recvs, 4);
            ck_assert_uint_eq(t.sent, 4 * (p / 2) * b);
            ck_assert_uint_eq(t.received, 4 * (p / 2) * b);
            ck_assert_uint_le(s.scratch_bytes, (size_t) p * b);
            xccl_sched_fini(&s);

            /* Linear: p-1 messages each way in ceil((p-1)/m) rounds of m. */
            const int ms[] = { 0, 1, 4, 100 };
            const size_t rounds[] = { 1, 15, 4, 1 }, xfers[] = { 30, 2, 8, 30 };
            for (int mi = 0; mi < 4; mi++) {
                xccl_sched_init(&s, r, p, 1);
                ck_assert_int_eq(xccl_build_alltoall_linear(&s, b, in_place, ms[mi]), 0);
                t = tally(&s);
                ck_assert_uint_eq(s.rounds, rounds[mi]);
                ck_assert_uint_eq(s.max_xfers, xfers[mi]);
                ck_assert_uint_eq(t.sends, p - 1);
                ck_assert_uint_eq(t.recvs, p - 1);
                ck_assert_uint_eq(t.sent, (size_t) (p - 1) * b);
                /* In place stages at most the first p/2 + m arrivals. */
                size_t m = ms[mi] > 0 && ms[mi] < p - 1 ? (size_t) ms[mi] : (size_t) p - 1;
                ck_assert_uint_le(s.scratch_bytes, in_place ? (p / 2 + m) * b : 0);
                xccl_sched_fini(&s);
            }
        }
    }
}
END_TEST

/* bcast nhr and nb, p = 8 and 7, root 3: 2 ceil(lg p) rounds; the root
 * sends (p-1)/p n in the scatter (n/2 + n/4 + ... at p = 8) and every rank
 * gets the n - n/p it lacks in the allgather (the root's own bytes come
 * back to it there); a leaf of the scatter receives n and sends its share
 * of the allgather; no rank moves more than twice n. */
START_TEST(bcast_nhr_nb_structure)
{
    const int root = 3;
    const size_t n = 8 * 7 * 10;
    for (int f = 0; f < 2; f++) {
        for (int p = 7; p <= 8; p++) {
            for (int r = 0; r < p; r++) {
                xccl_sched_t s;
                xccl_sched_init(&s, r, p, 1);
                ck_assert_int_eq(f ? xccl_build_bcast_nb(&s, n, root) : xccl_build_bcast_nhr(&s, n, root), 0);
                const tally_t t = tally(&s);
                ck_assert_uint_eq(s.rounds, 2 * 3);
                if (r == root) {
                    ck_assert_uint_eq(t.sent, 2 * (n - n / (size_t) p));
                    ck_assert_uint_eq(t.received, n - n / (size_t) p);
                } else if (8 == p && 1 == (r - root + p) % 2) {
                    /* a leaf of the scatter: its block, then the rest */
                    ck_assert_uint_eq(t.received, n);
                    ck_assert_uint_eq(t.sent, n - n / (size_t) p);
                } else {
                    ck_assert(t.received >= n && t.received <= 2 * n);
                    ck_assert(t.sent >= n - n / (size_t) p && t.sent <= 2 * n);
                }
                xccl_sched_fini(&s);
            }
        }
    }
}
END_TEST

START_TEST(bcast_structure)
{
    const int p = 8, root = 3;
    const size_t n = 800;
    size_t ring_msgs = 0;
    for (int r = 0; r < p; r++) {
        const int vr = (r - root + p) % p;
        xccl_sched_t s;
        tally_t t;
        /* scatter_allgather: lg p + p - 1 rounds; a rank with an odd vr gets
         * 1/p by the scatter and the other p-1 chunks around the ring. */
        xccl_sched_init(&s, r, p, 1);
        ck_assert_int_eq(xccl_build_bcast_scatter_allgather(&s, n, root), 0);
        t = tally(&s);
        ck_assert_uint_eq(s.rounds, 3 + p - 1);
        if (vr & 1) {
            ck_assert_uint_eq(t.recvs, 1 + (p - 1));
            ck_assert_uint_eq(t.received, n);
        }
        if (0 == vr) {
            ck_assert_uint_eq(t.recvs, 0);
            ck_assert_uint_eq(t.sends, 3 + (p - 1));
            ck_assert_uint_eq(t.sent, n / 2 + n / 4 + n / 8 + (p - 1) * n / p);
        }
        ring_msgs += t.recvs - (vr != 0);
        xccl_sched_fini(&s);

        /* chain, 4 segments: p - 1 + 4 - 1 rounds, every link carries 4. */
        xccl_sched_init(&s, r, p, 1);
        ck_assert_int_eq(xccl_build_bcast_chain(&s, n, root, n / 4), 0);
        t = tally(&s);
        ck_assert_uint_eq(s.rounds, p - 1 + 4 - 1);
        ck_assert_uint_eq(t.recvs, vr > 0 ? 4 : 0);
        ck_assert_uint_eq(t.sends, vr < p - 1 ? 4 : 0);
        ck_assert_uint_eq(s.max_xfers, vr > 0 && vr < p - 1 ? 2 : 1);
        xccl_sched_fini(&s);

        /* seg 0 and seg >= bytes: one segment, a plain chain. */
        xccl_sched_init(&s, r, p, 1);
        ck_assert_int_eq(xccl_build_bcast_chain(&s, n, root, 0), 0);
        ck_assert_uint_eq(s.rounds, p - 1);
        xccl_sched_fini(&s);
    }
    /* Ring messages: p(p-1) less the (p/2) lg p chunks receivers hold. */
    ck_assert_uint_eq(ring_msgs, p * (p - 1) - (p / 2) * 3);
}
END_TEST

/* A thousand ranks deadlocked with every receive pending: the table grows,
 * the error names the deadlock, and cancelling every request leaves
 * nothing behind (ASan). */
START_TEST(sim_large_deadlock)
{
    const int p = 1000;
    job_t j;
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        xccl_sched_t *s = &j.sched[r];
        j.rbuf[r] = xmalloc(8);
        xccl_sched_step(s);
        xccl_sched_recv(s, (r + 1) % p, xccl_ref(XCCL_BUF_RECV, 0), 4);
        xccl_sched_recv(s, (r + p - 1) % p, xccl_ref(XCCL_BUF_RECV, 4), 4);
        xccl_sched_step(s);
        xccl_sched_send(s, (r + 1) % p, xccl_ref(XCCL_BUF_RECV, 0), 4);
        ck_assert_int_eq(xccl_sched_finalize(s), 0);
    }
    xccl_sim_t *sim = xccl_sim_create(p);
    for (int r = 0; r < p; r++) {
        void *bufs[XCCL_NBUF] = { NULL, j.rbuf[r], NULL };
        ck_assert_int_eq(xccl_exec_init(&j.exec[r], &j.sched[r], xccl_sim_transport(sim, r), bufs,
                                        NULL, NULL, 1), 0);
    }
    ck_assert_int_eq(xccl_sim_run(sim, j.exec, p, 5), -1);
    ck_assert_ptr_nonnull(strstr(xccl_sim_error(sim), "deadlock"));
    for (int r = 0; r < p; r++) {
        xccl_exec_fini(&j.exec[r]);
    }
    xccl_sim_destroy(sim);
    job_fini(&j);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("a2a_bcast_algos");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, alltoall_small_p, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, alltoall_big_p, 0, NBIG);
    tcase_add_loop_test(tc, bcast_small_p, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, bcast_big_p, 0, NBIG);
    tcase_add_test(tc, alltoall_structure);
    tcase_add_test(tc, bcast_structure);
    tcase_add_test(tc, bcast_nhr_nb_structure);
    tcase_add_test(tc, sim_large_deadlock);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
