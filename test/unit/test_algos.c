/*
 * Every algorithm, on the simulated transport, several counts, every root
 * (up to p = 33; five roots beyond), in place and not.  Ring allreduce,
 * reduce_scatter and allgather, pairwise alltoall and binomial bcast run for
 * communicator sizes 1..64 and 127, 128, 129, 255, 1000 (fewer counts and
 * kinds at 1000, where a ring moves millions of messages); the others for
 * 1..33 here and for every size in their own test files.  Expected values come from
 * scalar references written here, not from the kernels under test.
 */
#include "xccl_algos.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

typedef enum { RED_I32_SUM, RED_U8_SUM, RED_DBL_MAX, RED_I64_BXOR, RED_NKINDS } red_kind_t;

static const struct {
    xccl_dtype_t dt;
    xccl_op_t op;
    size_t es;
} red_kinds[RED_NKINDS] = {
    { XCCL_DT_INT32, XCCL_OP_SUM, 4 },
    { XCCL_DT_UINT8, XCCL_OP_SUM, 1 },
    { XCCL_DT_DOUBLE, XCCL_OP_MAX, 8 },
    { XCCL_DT_INT64, XCCL_OP_BXOR, 8 },
};

/* Input element i of rank r, and the reference reduction over p ranks. */
static void fill_input(red_kind_t k, int r, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (k) {
        case RED_I32_SUM: ((int32_t *) buf)[i] = (int32_t) (r * 1000 + (int) (i % 977)) - 5000; break;
        case RED_U8_SUM: ((uint8_t *) buf)[i] = (uint8_t) (200 + r * 7 + i); break;
        case RED_DBL_MAX: ((double *) buf)[i] = (double) ((r * 7919 + (int) i * 31) % 1009) - 0.5; break;
        default: ((int64_t *) buf)[i] = (int64_t) (((uint64_t) r << 40) ^ (i * 0x9E3779B97F4A7C15ull)); break;
        }
    }
}

static void reference(red_kind_t k, int p, void *out, size_t n)
{
    void *tmp = malloc(n * red_kinds[k].es + 1);
    fill_input(k, 0, out, n);
    for (int r = 1; r < p; r++) {
        fill_input(k, r, tmp, n);
        for (size_t i = 0; i < n; i++) {
            switch (k) {
            case RED_I32_SUM: ((int32_t *) out)[i] += ((int32_t *) tmp)[i]; break;
            case RED_U8_SUM: ((uint8_t *) out)[i] = (uint8_t) (((uint8_t *) out)[i] + ((uint8_t *) tmp)[i]); break;
            case RED_DBL_MAX: {
                double a = ((double *) out)[i], b = ((double *) tmp)[i];
                ((double *) out)[i] = a > b ? a : b;
                break;
            }
            default: ((int64_t *) out)[i] ^= ((int64_t *) tmp)[i]; break;
            }
        }
    }
    free(tmp);
}

static int reduce_cb(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    xccl_reduce_fn_t fn = (xccl_reduce_fn_t) ctx;
    fn(dst, a, b, count);
    return 0;
}

/* One virtual job: schedules, buffers and executors of p ranks. */
typedef struct {
    int p;
    xccl_sched_t sched[MAX_P];
    void *sbuf[MAX_P], *rbuf[MAX_P], *scratch[MAX_P];
    xccl_exec_t exec[MAX_P];
} job_t;

static void run_job(job_t *j, xccl_reduce_fn_t fn, const char *what)
{
    xccl_sim_t *sim = xccl_sim_create(j->p);
    ck_assert_ptr_nonnull(sim);
    for (int r = 0; r < j->p; r++) {
        j->scratch[r] = malloc(j->sched[r].scratch_bytes + 1);
        void *bufs[XCCL_NBUF] = { j->sbuf[r], j->rbuf[r], j->scratch[r] };
        ck_assert_int_eq(xccl_exec_init(&j->exec[r], &j->sched[r], xccl_sim_transport(sim, r),
                                        bufs, reduce_cb, (void *) fn, 7), 0);
    }
    int rc = xccl_sim_run(sim, j->exec, j->p, (unsigned) j->p * 2654435761u);
    ck_assert_msg(0 == rc, "%s: %s", what, xccl_sim_error(sim));
    for (int r = 0; r < j->p; r++) {
        xccl_exec_fini(&j->exec[r]);
        free(j->scratch[r]);
    }
    xccl_sim_destroy(sim);
}

static void free_job(job_t *j, int shared)
{
    for (int r = 0; r < j->p; r++) {
        xccl_sched_fini(&j->sched[r]);
        if (!shared) {
            free(j->sbuf[r]);
        }
        free(j->rbuf[r]);
    }
}

static int nkinds(int p)
{
    return huge(p) ? 1 : RED_NKINDS;
}

static size_t test_counts(int p, size_t *c)
{
    size_t n = 0;
    if (huge(p)) {
        c[n++] = 1;
        c[n++] = 7;
        return n;
    }
    c[n++] = 0;
    c[n++] = 1;
    if (p > 2) {
        c[n++] = (size_t) p - 1;
    }
    if (p > 1) {
        c[n++] = (size_t) p;
    }
    c[n++] = (size_t) p + 1;
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
                job_t j = { .p = p };
                for (int r = 0; r < p; r++) {
                    xccl_sched_init(&j.sched[r], r, p, es);
                    if (build(&j.sched[r], n) != 0) {
                        ck_abort_msg("%s build failed", name);
                    }
                    j.rbuf[r] = malloc(n * es + 1);
                    j.sbuf[r] = in_place ? j.rbuf[r] : malloc(n * es + 1);
                    fill_input((red_kind_t) k, r, j.sbuf[r], n);
                }
                run_job(&j, fn, name);
                for (int r = 0; r < p; r++) {
                    ck_assert_msg(0 == memcmp(j.rbuf[r], want, n * es),
                                  "%s p=%d n=%zu kind=%d in_place=%d rank %d differs",
                                  name, p, n, k, in_place, r);
                }
                free_job(&j, in_place);
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
    job_t j = { .p = p };
    for (int r = 0; r < p; r++) {
        xccl_sched_init(&j.sched[r], r, p, sizeof(float));
        ck_assert_int_eq(build(&j.sched[r], n), 0);
        j.rbuf[r] = malloc(n * sizeof(float));
        j.sbuf[r] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            ((float *) j.sbuf[r])[i] = 0.1f * (float) (r + 1) + 1e-3f * (float) i + 1e7f * (float) (i % 3 == 0);
        }
    }
    run_job(&j, fn, name);
    for (int r = 1; r < p; r++) {
        ck_assert_msg(0 == memcmp(j.rbuf[r], j.rbuf[0], n * sizeof(float)),
                      "%s p=%d: rank %d's float sum differs from rank 0's", name, p, r);
    }
    free_job(&j, 0);
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
    size_t sent = 0;
    for (size_t i = 0; i < s.nacts; i++) {
        sent += XCCL_ACT_SEND == s.acts[i].kind ? s.acts[i].len : 0;
    }
    /* 2 (p-1)/p of the vector: 2 * 7/8 * 3200 bytes */
    ck_assert_uint_eq(sent, 5600);
    xccl_sched_fini(&s);
    /* Swing moves the same volume in the same number of rounds. */
    xccl_sched_init(&s, 3, 8, 4);
    ck_assert_int_eq(xccl_build_allreduce_swing(&s, 800), 0);
    ck_assert_uint_eq(s.rounds, 6);
    sent = 0;
    for (size_t i = 0; i < s.nacts; i++) {
        sent += XCCL_ACT_SEND == s.acts[i].kind ? s.acts[i].len : 0;
    }
    ck_assert_uint_eq(sent, 5600);
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
                job_t j = { .p = p };
                for (int r = 0; r < p; r++) {
                    xccl_sched_init(&j.sched[r], r, p, es);
                    ck_assert_int_eq(build(&j.sched[r], rc, in_place), 0);
                    j.rbuf[r] = malloc((in_place ? total : rc[r]) * es + 1);
                    j.sbuf[r] = in_place ? j.rbuf[r] : malloc(total * es + 1);
                    fill_input((red_kind_t) k, r, j.sbuf[r], total);
                }
                run_job(&j, fn, name);
                for (int r = 0; r < p; r++) {
                    ck_assert_msg(0 == memcmp(j.rbuf[r], want + first[r] * es, rc[r] * es),
                                  "%s p=%d block=%d base=%zu kind=%d in_place=%d rank %d differs",
                                  name, p, block, bases[bi], k, in_place, r);
                }
                free_job(&j, in_place);
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

static unsigned char pattern(int from, int to, size_t i)
{
    return (unsigned char) (from * 31 + to * 7 + i * 13 + 1);
}

typedef int (*ag_builder_t)(xccl_sched_t *s, size_t block);

static void check_allgather(int p, ag_builder_t build, const char *name)
{
    size_t counts[8], nc = test_counts(p, counts);
    for (size_t ci = 0; ci < nc; ci++) {
        size_t b = counts[ci] * 3;   /* odd byte sizes too */
        for (int in_place = 0; in_place < ninplace(p); in_place++) {
            job_t j = { .p = p };
            for (int r = 0; r < p; r++) {
                xccl_sched_init(&j.sched[r], r, p, 1);
                ck_assert_int_eq(build(&j.sched[r], b), 0);
                j.rbuf[r] = calloc((size_t) p * b + 1, 1);
                j.sbuf[r] = in_place ? (char *) j.rbuf[r] + (size_t) r * b : malloc(b + 1);
                for (size_t i = 0; i < b; i++) {
                    ((unsigned char *) j.sbuf[r])[i] = pattern(r, 0, i);
                }
            }
            run_job(&j, NULL, name);
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
            free_job(&j, in_place);
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
            job_t j = { .p = p };
            for (int r = 0; r < p; r++) {
                xccl_sched_init(&j.sched[r], r, p, 1);
                ck_assert_int_eq(build(&j.sched[r], b, in_place), 0);
                j.rbuf[r] = calloc((size_t) p * b + 1, 1);
                j.sbuf[r] = in_place ? j.rbuf[r] : malloc((size_t) p * b + 1);
                for (int to = 0; to < p; to++) {
                    for (size_t i = 0; i < b; i++) {
                        ((unsigned char *) j.sbuf[r])[(size_t) to * b + i] = pattern(r, to, i);
                    }
                }
            }
            run_job(&j, NULL, name);
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
            free_job(&j, in_place);
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
    int roots[NP_SMALL], nroots = 0;
    if (p <= NP_SMALL) {
        for (int r = 0; r < p; r++) {
            roots[nroots++] = r;
        }
    } else {
        roots[nroots++] = 0;
        roots[nroots++] = 1;
        roots[nroots++] = p / 2;
        roots[nroots++] = p - 1;
        roots[nroots++] = (2 * p) / 3 | 1;
    }
    for (int ri = 0; ri < nroots; ri++) {
        const int root = roots[ri];
        for (size_t ci = 0; ci < nc; ci++) {
            size_t b = counts[ci] * 5;
            job_t j = { .p = p };
            for (int r = 0; r < p; r++) {
                xccl_sched_init(&j.sched[r], r, p, 1);
                ck_assert_int_eq(build(&j.sched[r], b, root), 0);
                j.rbuf[r] = malloc(b + 1);
                j.sbuf[r] = NULL;
                for (size_t i = 0; i < b; i++) {
                    ((unsigned char *) j.rbuf[r])[i] = r == root ? pattern(root, 1, i) : 0xEE;
                }
            }
            run_job(&j, NULL, name);
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
            free_job(&j, 1);
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
    job_t j = { .p = 2 };
    char buf[2][8] = { { 0 } };
    /* Both ranks receive first, in a step of their own: a deadlock. */
    for (int r = 0; r < 2; r++) {
        xccl_sched_init(&j.sched[r], r, 2, 1);
        xccl_sched_step(&j.sched[r]);
        xccl_sched_recv(&j.sched[r], 1 - r, xccl_ref(XCCL_BUF_RECV, 0), 4);
        xccl_sched_step(&j.sched[r]);
        xccl_sched_send(&j.sched[r], 1 - r, xccl_ref(XCCL_BUF_RECV, 4), 4);
        ck_assert_int_eq(xccl_sched_finalize(&j.sched[r]), 0);
    }
    xccl_sim_t *sim = xccl_sim_create(2);
    for (int r = 0; r < 2; r++) {
        void *bufs[XCCL_NBUF] = { NULL, buf[r], NULL };
        xccl_exec_init(&j.exec[r], &j.sched[r], xccl_sim_transport(sim, r), bufs, NULL, NULL, 1);
    }
    ck_assert_int_eq(xccl_sim_run(sim, j.exec, 2, 1), -1);
    ck_assert_ptr_nonnull(strstr(xccl_sim_error(sim), "deadlock"));
    for (int r = 0; r < 2; r++) {
        xccl_exec_fini(&j.exec[r]);
        xccl_sched_fini(&j.sched[r]);
    }
    xccl_sim_destroy(sim);

    /* Lengths that disagree are an error, not a silent truncation. */
    for (int r = 0; r < 2; r++) {
        xccl_sched_init(&j.sched[r], r, 2, 1);
        if (0 == r) {
            xccl_sched_send(&j.sched[r], 1, xccl_ref(XCCL_BUF_RECV, 0), 4);
        } else {
            xccl_sched_recv(&j.sched[r], 0, xccl_ref(XCCL_BUF_RECV, 0), 3);
        }
        ck_assert_int_eq(xccl_sched_finalize(&j.sched[r]), 0);
    }
    sim = xccl_sim_create(2);
    for (int r = 0; r < 2; r++) {
        void *bufs[XCCL_NBUF] = { NULL, buf[r], NULL };
        xccl_exec_init(&j.exec[r], &j.sched[r], xccl_sim_transport(sim, r), bufs, NULL, NULL, 1);
    }
    ck_assert_int_eq(xccl_sim_run(sim, j.exec, 2, 1), -1);
    ck_assert_ptr_nonnull(strstr(xccl_sim_error(sim), "send 4 bytes, recv 3"));
    for (int r = 0; r < 2; r++) {
        xccl_exec_fini(&j.exec[r]);
        xccl_sched_fini(&j.sched[r]);
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
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
