/*
 * Every algorithm, on the simulated transport, several counts, every root
 * (up to p = 33; five roots beyond), in place and not.  Ring allreduce,
 * reduce_scatter and allgather, pairwise alltoall and binomial bcast run for
 * communicator sizes 1..64 and 127, 128, 129, 255, 1000 (fewer counts and
 * kinds at 1000, where a ring moves millions of messages); the others for
 * 1..33 here and for every size in their own test files.  Expected values come from
 * scalar references written here, not from the kernels under test.
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

#define MAX_P 1000
#define NP_ALL 69                      /* 1..64, then the spot sizes */
#define NP_SMALL 33

static int p_of(int i)
{
    static const int spot[] = { 127, 128, 129, 255, 1000 };
    return i < 64 ? i + 1 : spot[i - 64];
}

/* Fewer cases where p is huge. */
static int huge(int p)
{
    return p >= 1000;
}


static int ninplace(int p)
{
    return huge(p) ? 1 : 2;
}

static int nkinds(int p)
{
    return huge(p) ? 1 : RED_NKINDS_NO_FLT;
}

static size_t test_counts(int p, size_t *c)
{
    size_t n = 0;
    if (huge(p)) {
        c[n++] = 1;
        c[n++] = 7;
        return n;
    }
    n = counts_around(p, c);
    c[n++] = 1001;
    return n;
}

/* ---------------------------------------------------------------- */

typedef int (*allreduce_builder_t)(xccl_sched_t *s, size_t count);

static void check_allreduce(int p, allreduce_builder_t build, const char *name)
{
    size_t counts[8], nc = test_counts(p, counts);
    if (huge(p)) {
        counts[nc++] = 1001;           /* every chunk non-empty */
    }
    for (int k = 0; k < nkinds(p); k++) {
        size_t es = red_kinds[k].es;
        xccl_reduce_fn_t fn = xccl_reduce_kernel(red_kinds[k].dt, red_kinds[k].op);
        ck_assert_ptr_nonnull(fn);
        for (size_t ci = 0; ci < nc; ci++) {
            size_t n = counts[ci];
            void *want = malloc(n * es + 1);
            reference((red_kind_t) k, p, want, n);
            for (int in_place = 0; in_place < ninplace(p); in_place++) {
                job_t j;
                job_init(&j, p, es);
                for (int r = 0; r < p; r++) {
                    if (build(&j.sched[r], n) != 0) {
                        ck_abort_msg("%s build failed", name);
                    }
                    j.rbuf[r] = malloc(n * es + 1);
                    j.sbuf[r] = in_place ? j.rbuf[r] : job_sbuf(&j, r, n * es + 1);
                    fill_input((red_kind_t) k, r, j.sbuf[r], n);
                }
                job_run(&j, fn, name);
                for (int r = 0; r < p; r++) {
                    ck_assert_msg(0 == memcmp(j.rbuf[r], want, n * es),
                                  "%s p=%d n=%zu kind=%d in_place=%d rank %d differs",
                                  name, p, n, k, in_place, r);
                }
                job_fini(&j);
            }
            free(want);
        }
    }
}

/* Float sums of inexact values depend on the order of the additions: every
 * rank must still end with the same bits (each element computed once, or
 * by both partners of an exchange in the same operand order). */
static void check_allreduce_identical(int p, allreduce_builder_t build, const char *name)
{
    const size_t n = 1001;
    xccl_reduce_fn_t fn = xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM);
    job_t j;
    job_init(&j, p, sizeof(float));
    for (int r = 0; r < p; r++) {
        ck_assert_int_eq(build(&j.sched[r], n), 0);
        j.rbuf[r] = malloc(n * sizeof(float));
        j.sbuf[r] = job_sbuf(&j, r, n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            ((float *) j.sbuf[r])[i] = 0.1f * (float) (r + 1) + 1e-3f * (float) i + 1e7f * (float) (i % 3 == 0);
        }
    }
    job_run(&j, fn, name);
    for (int r = 1; r < p; r++) {
        ck_assert_msg(0 == memcmp(j.rbuf[r], j.rbuf[0], n * sizeof(float)),
                      "%s p=%d: rank %d's float sum differs from rank 0's", name, p, r);
    }
    job_fini(&j);
}

START_TEST(allreduce_ring)
{
    check_allreduce(p_of(_i), xccl_build_allreduce_ring, "ring");
    check_allreduce_identical(p_of(_i), xccl_build_allreduce_ring, "ring");
}
END_TEST

START_TEST(allreduce_recursive_doubling)
{
    check_allreduce(p_of(_i), xccl_build_allreduce_recursive_doubling, "recursive_doubling");
    check_allreduce_identical(p_of(_i), xccl_build_allreduce_recursive_doubling, "recursive_doubling");
}
END_TEST

START_TEST(allreduce_rabenseifner)
{
    check_allreduce(p_of(_i), xccl_build_allreduce_rabenseifner, "rabenseifner");
    check_allreduce_identical(p_of(_i), xccl_build_allreduce_rabenseifner, "rabenseifner");
}
END_TEST

START_TEST(allreduce_swing)
{
    check_allreduce(p_of(_i), xccl_build_allreduce_swing, "swing");
    check_allreduce_identical(p_of(_i), xccl_build_allreduce_swing, "swing");
}
END_TEST

/* Textbook shapes at a power of two. */
START_TEST(halving_doubling_structure)
{
    xccl_sched_t s;
    xccl_sched_init(&s, 3, 8, 4);
    ck_assert_int_eq(xccl_build_allreduce_recursive_doubling(&s, 800), 0);
    ck_assert_uint_eq(s.rounds, 3);
    ck_assert_uint_eq(s.max_xfers, 2);
    xccl_sched_fini(&s);
    xccl_sched_init(&s, 3, 8, 4);
    ck_assert_int_eq(xccl_build_allreduce_rabenseifner(&s, 800), 0);
    ck_assert_uint_eq(s.rounds, 6);
    /* 2 (p-1)/p of the vector: 2 * 7/8 * 3200 bytes */
    ck_assert_uint_eq(tally(&s).sent, 5600);
    xccl_sched_fini(&s);
    /* Swing moves the same volume in the same number of rounds. */
    xccl_sched_init(&s, 3, 8, 4);
    ck_assert_int_eq(xccl_build_allreduce_swing(&s, 800), 0);
    ck_assert_uint_eq(s.rounds, 6);
    ck_assert_uint_eq(tally(&s).sent, 5600);
    xccl_sched_fini(&s);
}
END_TEST

/* Irregular counts: some zero, some larger than others. */
static void rs_counts(int p, size_t base, size_t *rc)
{
    for (int r = 0; r < p; r++) {
        rc[r] = (r % 3 == 1) ? 0 : base + (size_t) (r % 4);
    }
}

typedef int (*rs_builder_t)(xccl_sched_t *s, const size_t *counts, int in_place);

static void check_reduce_scatter(int p, int block, rs_builder_t build, const char *name)
{
    size_t bases[3] = { 0, 1, 37 };
    for (int k = 0; k < nkinds(p); k++) {
        size_t es = red_kinds[k].es;
        xccl_reduce_fn_t fn = xccl_reduce_kernel(red_kinds[k].dt, red_kinds[k].op);
        for (int bi = huge(p) ? 1 : 0; bi < (huge(p) ? 2 : 3); bi++) {
            size_t rc[MAX_P], total = 0, first[MAX_P];
            if (block) {
                for (int r = 0; r < p; r++) {
                    rc[r] = bases[bi];
                }
            } else {
                rs_counts(p, bases[bi], rc);
            }
            for (int r = 0; r < p; r++) {
                first[r] = total;
                total += rc[r];
            }
            char *want = malloc(total * es + 1);
            reference((red_kind_t) k, p, want, total);
            for (int in_place = 0; in_place < ninplace(p); in_place++) {
                job_t j;
                job_init(&j, p, es);
                for (int r = 0; r < p; r++) {
                    ck_assert_int_eq(build(&j.sched[r], rc, in_place), 0);
                    j.rbuf[r] = malloc((in_place ? total : rc[r]) * es + 1);
                    j.sbuf[r] = in_place ? j.rbuf[r] : job_sbuf(&j, r, total * es + 1);
                    fill_input((red_kind_t) k, r, j.sbuf[r], total);
                }
                job_run(&j, fn, name);
                for (int r = 0; r < p; r++) {
                    ck_assert_msg(0 == memcmp(j.rbuf[r], want + first[r] * es, rc[r] * es),
                                  "%s p=%d block=%d base=%zu kind=%d in_place=%d rank %d differs",
                                  name, p, block, bases[bi], k, in_place, r);
                }
                job_fini(&j);
            }
            free(want);
        }
    }
}

START_TEST(reduce_scatter_ring)
{
    check_reduce_scatter(p_of(_i), 0, xccl_build_reduce_scatter_ring, "ring");
}
END_TEST

START_TEST(reduce_scatter_block_ring)
{
    check_reduce_scatter(p_of(_i), 1, xccl_build_reduce_scatter_ring, "ring");
}
END_TEST

START_TEST(reduce_scatter_pairwise)
{
    check_reduce_scatter(p_of(_i), 0, xccl_build_reduce_scatter_pairwise, "pairwise");
    check_reduce_scatter(p_of(_i), 1, xccl_build_reduce_scatter_pairwise, "pairwise");
}
END_TEST

typedef int (*ag_builder_t)(xccl_sched_t *s, size_t block);

static void check_allgather(int p, ag_builder_t build, const char *name)
{
    size_t counts[8], nc = test_counts(p, counts);
    for (size_t ci = 0; ci < nc; ci++) {
        size_t b = counts[ci] * 3;   /* odd byte sizes too */
        for (int in_place = 0; in_place < ninplace(p); in_place++) {
            job_t j;
            job_init(&j, p, 1);
            for (int r = 0; r < p; r++) {
                ck_assert_int_eq(build(&j.sched[r], b), 0);
                j.rbuf[r] = calloc((size_t) p * b + 1, 1);
                j.sbuf[r] = in_place ? j.rbuf[r] + (size_t) r * b : job_sbuf(&j, r, b + 1);
                for (size_t i = 0; i < b; i++) {
                    ((unsigned char *) j.sbuf[r])[i] = pattern(r, 0, i);
                }
            }
            job_run(&j, NULL, name);
            for (int r = 0; r < p; r++) {
                long bad = -1;
                for (int q = 0; q < p && bad < 0; q++) {
                    for (size_t i = 0; i < b; i++) {
                        if (((unsigned char *) j.rbuf[r])[(size_t) q * b + i] != pattern(q, 0, i)) {
                            bad = (long) ((size_t) q * b + i);
                            break;
                        }
                    }
                }
                ck_assert_msg(bad < 0, "allgather %s p=%d b=%zu in_place=%d rank %d: byte %ld wrong",
                              name, p, b, in_place, r, bad);
            }
            job_fini(&j);
        }
    }
}

START_TEST(allgather_ring)
{
    check_allgather(p_of(_i), xccl_build_allgather_ring, "ring");
}
END_TEST

START_TEST(allgather_bruck)
{
    check_allgather(p_of(_i), xccl_build_allgather_bruck, "bruck");
}
END_TEST

typedef int (*a2a_builder_t)(xccl_sched_t *s, size_t block, int in_place);

static void check_alltoall(int p, a2a_builder_t build, const char *name)
{
    size_t counts[8], nc = test_counts(p, counts);
    for (size_t ci = 0; ci < nc; ci++) {
        size_t b = counts[ci] * 3 + (ci & 1);
        for (int in_place = 0; in_place < ninplace(p); in_place++) {
            job_t j;
            job_init(&j, p, 1);
            for (int r = 0; r < p; r++) {
                ck_assert_int_eq(build(&j.sched[r], b, in_place), 0);
                j.rbuf[r] = calloc((size_t) p * b + 1, 1);
                j.sbuf[r] = in_place ? j.rbuf[r] : job_sbuf(&j, r, (size_t) p * b + 1);
                for (int to = 0; to < p; to++) {
                    for (size_t i = 0; i < b; i++) {
                        ((unsigned char *) j.sbuf[r])[(size_t) to * b + i] = pattern(r, to, i);
                    }
                }
            }
            job_run(&j, NULL, name);
            for (int r = 0; r < p; r++) {
                long bad = -1;
                for (int from = 0; from < p && bad < 0; from++) {
                    for (size_t i = 0; i < b; i++) {
                        if (((unsigned char *) j.rbuf[r])[(size_t) from * b + i] != pattern(from, r, i)) {
                            bad = (long) ((size_t) from * b + i);
                            break;
                        }
                    }
                }
                ck_assert_msg(bad < 0, "alltoall %s p=%d b=%zu in_place=%d rank %d: byte %ld wrong",
                              name, p, b, in_place, r, bad);
            }
            job_fini(&j);
        }
    }
}

static int a2a_linear1(xccl_sched_t *s, size_t b, int ip) { return xccl_build_alltoall_linear(s, b, ip, 1); }
static int a2a_linear4(xccl_sched_t *s, size_t b, int ip) { return xccl_build_alltoall_linear(s, b, ip, 4); }
static int a2a_linear0(xccl_sched_t *s, size_t b, int ip) { return xccl_build_alltoall_linear(s, b, ip, 0); }

START_TEST(alltoall_pairwise)
{
    check_alltoall(p_of(_i), xccl_build_alltoall_pairwise, "pairwise");
}
END_TEST

START_TEST(alltoall_linear)
{
    check_alltoall(p_of(_i), a2a_linear1, "linear/1");
    check_alltoall(p_of(_i), a2a_linear4, "linear/4");
    check_alltoall(p_of(_i), a2a_linear0, "linear/all");
}
END_TEST

typedef int (*bcast_builder_t)(xccl_sched_t *s, size_t bytes, int root);

static void check_bcast(int p, bcast_builder_t build, const char *name)
{
    size_t counts[8], nc = test_counts(p, counts);
    int roots[NP_SMALL];
    const int nroots = pick_roots(p, NP_SMALL, roots);
    for (int ri = 0; ri < nroots; ri++) {
        const int root = roots[ri];
        for (size_t ci = 0; ci < nc; ci++) {
            size_t b = counts[ci] * 5;
            job_t j;
            job_init(&j, p, 1);
            for (int r = 0; r < p; r++) {
                ck_assert_int_eq(build(&j.sched[r], b, root), 0);
                j.rbuf[r] = malloc(b + 1);
                j.sbuf[r] = NULL;
                for (size_t i = 0; i < b; i++) {
                    ((unsigned char *) j.rbuf[r])[i] = r == root ? pattern(root, 1, i) : 0xEE;
                }
            }
            job_run(&j, NULL, name);
            for (int r = 0; r < p; r++) {
                long bad = -1;
                for (size_t i = 0; i < b && bad < 0; i++) {
                    if (((unsigned char *) j.rbuf[r])[i] != pattern(root, 1, i)) {
                        bad = (long) i;
                    }
                }
                ck_assert_msg(bad < 0, "bcast %s p=%d b=%zu root=%d rank %d: byte %ld wrong", name, p, b,
                              root, r, bad);
            }
            job_fini(&j);
        }
    }
}

START_TEST(bcast_binomial)
{
    check_bcast(p_of(_i), xccl_build_bcast_binomial, "binomial");
}
END_TEST

static int bc_chain1(xccl_sched_t *s, size_t b, int root) { return xccl_build_bcast_chain(s, b, root, 1); }
static int bc_chain7(xccl_sched_t *s, size_t b, int root) { return xccl_build_bcast_chain(s, b, root, 7); }
static int bc_chain0(xccl_sched_t *s, size_t b, int root) { return xccl_build_bcast_chain(s, b, root, 0); }

START_TEST(bcast_chain)
{
    check_bcast(p_of(_i), bc_chain0, "chain/whole");
    check_bcast(p_of(_i), bc_chain7, "chain/7");
    if (_i <= 8) {
        check_bcast(p_of(_i), bc_chain1, "chain/1");   /* one segment per byte: many rounds */
    }
}
END_TEST

START_TEST(bcast_scatter_allgather)
{
    check_bcast(p_of(_i), xccl_build_bcast_scatter_allgather, "scatter_allgather");
}
END_TEST

/* The harness itself must catch broken schedules. */
START_TEST(sim_detects_deadlock_and_mismatch)
{
    xccl_sched_t sched[2];
    xccl_exec_t exec[2];
    char buf[2][8] = { { 0 } };
    /* Both ranks receive first, in a step of their own: a deadlock. */
    for (int r = 0; r < 2; r++) {
        xccl_sched_init(&sched[r], r, 2, 1);
        xccl_sched_step(&sched[r]);
        xccl_sched_recv(&sched[r], 1 - r, xccl_ref(XCCL_BUF_RECV, 0), 4);
        xccl_sched_step(&sched[r]);
        xccl_sched_send(&sched[r], 1 - r, xccl_ref(XCCL_BUF_RECV, 4), 4);
        ck_assert_int_eq(xccl_sched_finalize(&sched[r]), 0);
    }
    xccl_sim_t *sim = xccl_sim_create(2);
    for (int r = 0; r < 2; r++) {
        void *bufs[XCCL_NBUF] = { NULL, buf[r], NULL };
        xccl_exec_init(&exec[r], &sched[r], xccl_sim_transport(sim, r), bufs, NULL, NULL, 1);
    }
    ck_assert_int_eq(xccl_sim_run(sim, exec, 2, 1), -1);
    ck_assert_ptr_nonnull(strstr(xccl_sim_error(sim), "deadlock"));
    for (int r = 0; r < 2; r++) {
        xccl_exec_fini(&exec[r]);
        xccl_sched_fini(&sched[r]);
    }
    xccl_sim_destroy(sim);

    /* Lengths that disagree are an error, not a silent truncation. */
    for (int r = 0; r < 2; r++) {
        xccl_sched_init(&sched[r], r, 2, 1);
        if (0 == r) {
            xccl_sched_send(&sched[r], 1, xccl_ref(XCCL_BUF_RECV, 0), 4);
        } else {
            xccl_sched_recv(&sched[r], 0, xccl_ref(XCCL_BUF_RECV, 0), 3);
        }
        ck_assert_int_eq(xccl_sched_finalize(&sched[r]), 0);
    }
    sim = xccl_sim_create(2);
    for (int r = 0; r < 2; r++) {
        void *bufs[XCCL_NBUF] = { NULL, buf[r], NULL };
        xccl_exec_init(&exec[r], &sched[r], xccl_sim_transport(sim, r), bufs, NULL, NULL, 1);
    }
    ck_assert_int_eq(xccl_sim_run(sim, exec, 2, 1), -1);
    ck_assert_ptr_nonnull(strstr(xccl_sim_error(sim), "send 4 bytes, recv 3"));
    for (int r = 0; r < 2; r++) {
        xccl_exec_fini(&exec[r]);
        xccl_sched_fini(&sched[r]);
    }
    xccl_sim_destroy(sim);
}
END_TEST

/* Messages between a pair are numbered in order on both sides. */
START_TEST(sched_numbers_pair_messages)
{
    xccl_sched_t s;
    xccl_sched_init(&s, 0, 4, 1);
    xccl_sched_send(&s, 1, xccl_ref(XCCL_BUF_SEND, 0), 1);
    xccl_sched_send(&s, 2, xccl_ref(XCCL_BUF_SEND, 0), 1);
    xccl_sched_step(&s);
    xccl_sched_send(&s, 1, xccl_ref(XCCL_BUF_SEND, 0), 1);
    xccl_sched_recv(&s, 1, xccl_ref(XCCL_BUF_RECV, 0), 1);
    xccl_sched_send(&s, 3, xccl_ref(XCCL_BUF_SEND, 0), 0);   /* dropped */
    ck_assert_int_eq(xccl_sched_finalize(&s), 0);
    ck_assert_uint_eq(s.nacts, 4);
    ck_assert_uint_eq(s.nsteps, 2);
    ck_assert_uint_eq(s.acts[0].idx, 0);
    ck_assert_uint_eq(s.acts[1].idx, 0);
    ck_assert_uint_eq(s.acts[2].idx, 1);
    ck_assert_uint_eq(s.acts[3].idx, 0);
    ck_assert_uint_eq(s.max_xfers, 2);
    xccl_sched_fini(&s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("algos");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, allreduce_ring, 0, NP_ALL);
    tcase_add_loop_test(tc, allreduce_recursive_doubling, 0, NP_SMALL);
    tcase_add_loop_test(tc, allreduce_rabenseifner, 0, NP_SMALL);
    tcase_add_loop_test(tc, allreduce_swing, 0, NP_SMALL);
    tcase_add_test(tc, halving_doubling_structure);
    tcase_add_loop_test(tc, reduce_scatter_ring, 0, NP_ALL);
    tcase_add_loop_test(tc, reduce_scatter_block_ring, 0, NP_ALL);
    tcase_add_loop_test(tc, allgather_ring, 0, NP_ALL);
    tcase_add_loop_test(tc, allgather_bruck, 0, NP_SMALL);
    tcase_add_loop_test(tc, reduce_scatter_pairwise, 0, NP_SMALL);
    tcase_add_loop_test(tc, alltoall_pairwise, 0, NP_ALL);
    tcase_add_loop_test(tc, alltoall_linear, 0, NP_SMALL);
    tcase_add_loop_test(tc, bcast_binomial, 0, NP_ALL);
    tcase_add_loop_test(tc, bcast_scatter_allgather, 0, NP_SMALL);
    tcase_add_loop_test(tc, bcast_chain, 0, NP_SMALL);
    tcase_add_test(tc, sim_detects_deadlock_and_mismatch);
    tcase_add_test(tc, sched_numbers_pair_messages);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
