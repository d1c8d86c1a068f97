/*
 * The harness shared by the suites that run schedules on the simulated
 * transport (test_algos, test_allreduce_algos, test_rs_ag_algos,
 * test_a2a_bcast_algos, test_hier_algos): one virtual job of p ranks, the
 * reduction callback that checks the kernels' aliasing contract, input
 * patterns, the scalar references and a schedule's tally.
 *
 * Each suite keeps the executor sequence base and the simulator seed salt
 * it always had: it defines SIM_EXEC_SEQ and SIM_SEED_SALT before
 * including this file.  A suite whose element kinds differ in meaning
 * defines SIM_HARNESS_OWN_KINDS and brings its own red_kind_t,
 * fill_input and reference.
 *
 * Buffers have their exact size (no spare byte) so that ASan catches a
 * schedule that strays past them.
 */
#ifndef XCCL_TEST_SIM_HARNESS_H
#define XCCL_TEST_SIM_HARNESS_H

#include "base/xccl_base.h"
#include "xccl_sched.h"
#include "xccl_exec.h"
#include "xccl_sim.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(SIM_EXEC_SEQ) || !defined(SIM_SEED_SALT)
#error "define SIM_EXEC_SEQ and SIM_SEED_SALT before including sim_harness.h"
#endif

/* ------------------------------------------------------------------------ */
/* One virtual job of p ranks                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
    int p;
    xccl_sched_t *sched;
    unsigned char **sbuf, **rbuf;
    int *sbuf_owned;           /* sbuf is its own allocation (not RECV or inside it) */
    void **scratch;
    void **slot;               /* the simulated node segment: rank r's slot (s->slot_bytes) */
    xccl_exec_t *exec;
    int read_only;             /* peers' buffers only copied (xccl_sim_peer_read_only) */
} job_t;

static inline void *xmalloc(size_t n)
{
    void *ptr = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(ptr);
    return ptr;
}

/* Every rank's schedule initialised with elements of es bytes, no buffers. */
static inline void job_init(job_t *j, int p, size_t es)
{
    j->p = p;
    j->read_only = 0;
    j->sched = xmalloc((size_t) p * sizeof(*j->sched));
    j->sbuf = xmalloc((size_t) p * sizeof(*j->sbuf));
    j->rbuf = xmalloc((size_t) p * sizeof(*j->rbuf));
    j->sbuf_owned = xmalloc((size_t) p * sizeof(int));
    j->scratch = xmalloc((size_t) p * sizeof(*j->scratch));
    j->slot = xmalloc((size_t) p * sizeof(*j->slot));
    j->exec = xmalloc((size_t) p * sizeof(*j->exec));
    for (int r = 0; r < p; r++) {
        xccl_sched_init(&j->sched[r], r, p, es);
        j->sbuf[r] = j->rbuf[r] = NULL;
        j->sbuf_owned[r] = 0;
    }
}

/* A send buffer of n bytes of rank r's own, freed by job_fini. */
static inline unsigned char *job_sbuf(job_t *j, int r, size_t n)
{
    j->sbuf_owned[r] = 1;
    return xmalloc(n);
}

static inline void job_fini(job_t *j)
{
    for (int r = 0; r < j->p; r++) {
        xccl_sched_fini(&j->sched[r]);
        if (j->sbuf_owned[r]) {
            free(j->sbuf[r]);
        }
        free(j->rbuf[r]);
    }
    free(j->sched);
    free(j->sbuf);
    free(j->rbuf);
    free(j->sbuf_owned);
    free(j->scratch);
    free(j->slot);
    free(j->exec);
}

/* The reduction callback also checks the kernels' aliasing contract: the
 * result may be exactly one operand, otherwise no two ranges overlap (a
 * partial overlap may happen to work on the CPU, not on a device).  A
 * reduction in a job run without a kernel is an error. */
typedef struct {
    xccl_reduce_fn_t fn;
    size_t es;
    int bad_alias;
} red_ctx_t;

static inline int overlap(const void *x, const void *y, size_t n)
{
    const char *p = x, *q = y;
    return n > 0 && p < q + n && q < p + n;
}

static inline int reduce_cb(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    red_ctx_t *c = ctx;
    const size_t n = count * c->es;
    if (NULL == c->fn) {
        return -1;
    }
    if ((dst != a && overlap(dst, a, n)) || (dst != b && overlap(dst, b, n)) || overlap(a, b, n)) {
        c->bad_alias = 1;
    }
    c->fn(dst, a, b, count);
    return 0;
}

/* Runs the job on the simulator with this seed (fn NULL: no reductions),
 * every rank with the simulator's peer access (schedules without peer
 * references or flags never use it).  Returns xccl_sim_run's answer, its
 * error in err; asserts only what is no part of the answer (set-up, the
 * aliasing contract). */
static inline int job_exec(job_t *j, xccl_reduce_fn_t fn, unsigned seed, const char *what, char *err,
                           size_t errlen)
{
    xccl_sim_t *sim = xccl_sim_create(j->p);
    red_ctx_t rctx = { fn, j->sched[0].elem_size, 0 };
    int init_failed = 0;
    ck_assert_ptr_nonnull(sim);
    xccl_sim_peer_read_only(sim, j->read_only);
    for (int r = 0; r < j->p; r++) {
        j->scratch[r] = xmalloc(j->sched[r].scratch_bytes);
        /* A slot holds stale bytes, as a real one does from earlier calls. */
        j->slot[r] = j->sched[r].slot_bytes ? xmalloc(j->sched[r].slot_bytes) : NULL;
        if (j->slot[r]) {
            memset(j->slot[r], 0xA5, j->sched[r].slot_bytes);
        }
        void *bufs[XCCL_NBUF] = { j->sbuf[r], j->rbuf[r], j->scratch[r], j->slot[r] };
        init_failed |= 0 != xccl_exec_init(&j->exec[r], &j->sched[r], xccl_sim_transport(sim, r), bufs,
                                           reduce_cb, &rctx, SIM_EXEC_SEQ);
        xccl_exec_set_peer(&j->exec[r], xccl_sim_peer(sim, r));
    }
    ck_assert_msg(!init_failed, "%s: exec_init failed", what);
    int rc = xccl_sim_run(sim, j->exec, j->p, seed);
    if (err && errlen) {
        snprintf(err, errlen, "%s", xccl_sim_error(sim));
    }
    ck_assert_msg(!rctx.bad_alias, "%s: a reduction's ranges overlap partially", what);
    for (int r = 0; r < j->p; r++) {
        xccl_exec_fini(&j->exec[r]);
        free(j->scratch[r]);
        free(j->slot[r]);
    }
    xccl_sim_destroy(sim);
    return rc;
}

/* Runs the job to completion on the simulator (fn NULL: no reductions). */
static inline void job_run(job_t *j, xccl_reduce_fn_t fn, const char *what)
{
    char err[256];
    int rc = job_exec(j, fn, (unsigned) j->p * 2654435761u + SIM_SEED_SALT, what, err, sizeof(err));
    ck_assert_msg(0 == rc, "%s: %s", what, err);
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */

/* Byte i of what rank from sends to rank to. */
static inline unsigned char pattern(int from, int to, size_t i)
{
    return (unsigned char) (from * 31 + to * 7 + i * 13 + 1);
}

/* Byte i of rank from's block in an allgather. */
static inline unsigned char ag_pattern(int from, size_t i)
{
    return (unsigned char) (from * 31 + i * 13 + 1 + (i >> 8));
}

/* Float inputs whose sums depend on the order of the additions. */
static inline float float_input(int r, size_t i)
{
    return 0.1f * (float) (r + 1) + 1e-3f * (float) i + (0 == (r * 7 + i) % 5 ? 1e7f : 0.0f);
}

/* Roots to try at p: every one up to all_up_to, else first, second,
 * middle, last and one odd one.  Returns how many (at most max(5, p)). */
static inline int pick_roots(int p, int all_up_to, int *roots)
{
    int n = 0;
    if (p <= all_up_to) {
        for (int r = 0; r < p; r++) {
            roots[n++] = r;
        }
    } else {
        roots[n++] = 0;
        roots[n++] = 1;
        roots[n++] = p / 2;
        roots[n++] = p - 1;
        roots[n++] = (p * 2) / 3 | 1;
    }
    return n;
}

/* Counts around p: 0, 1, p - 1, p, p + 1 (without repeats).  Returns how
 * many (at most 5). */
static inline size_t counts_around(int p, size_t *c)
{
    size_t n = 0;
    c[n++] = 0;
    c[n++] = 1;
    if (p > 2) {
        c[n++] = (size_t) p - 1;
    }
    if (p > 1) {
        c[n++] = (size_t) p;
    }
    c[n++] = (size_t) p + 1;
    return n;
}

#ifndef SIM_HARNESS_OWN_KINDS

/* ------------------------------------------------------------------------ */
/* Element kinds and scalar references                                      */
/* ------------------------------------------------------------------------ */

typedef enum { RED_I32_SUM, RED_U8_SUM, RED_DBL_MAX, RED_I64_BXOR, RED_FLT_SUM, RED_NKINDS } red_kind_t;
#define RED_NKINDS_NO_FLT RED_FLT_SUM  /* the first four kinds */

static const struct {
    xccl_dtype_t dt;
    xccl_op_t op;
    size_t es;
} red_kinds[RED_NKINDS] = {
    { XCCL_DT_INT32, XCCL_OP_SUM, 4 },
    { XCCL_DT_UINT8, XCCL_OP_SUM, 1 },
    { XCCL_DT_DOUBLE, XCCL_OP_MAX, 8 },
    { XCCL_DT_INT64, XCCL_OP_BXOR, 8 },
    { XCCL_DT_FLOAT, XCCL_OP_SUM, 4 },    /* small integers: every order is exact */
};

/* Input element i of rank r. */
static inline void fill_input(red_kind_t k, int r, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (k) {
        case RED_I32_SUM: ((int32_t *) buf)[i] = (int32_t) (r * 1000 + (int) (i % 977)) - 5000; break;
        case RED_U8_SUM: ((uint8_t *) buf)[i] = (uint8_t) (200 + r * 7 + i); break;
        case RED_DBL_MAX: ((double *) buf)[i] = (double) ((r * 7919 + (int) i * 31) % 1009) - 0.5; break;
        case RED_I64_BXOR: ((int64_t *) buf)[i] = (int64_t) (((uint64_t) r << 40) ^ (i * 0x9E3779B97F4A7C15ull)); break;
        default: ((float *) buf)[i] = (float) ((r * 13 + (int) (i % 61)) % 201 - 100); break;
        }
    }
}

/* The reduction over ranks 0..p-1 of n elements, one rank at a time. */
static inline void reference(red_kind_t k, int p, void *out, size_t n)
{
    void *tmp = xmalloc(n * red_kinds[k].es);
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
            case RED_I64_BXOR: ((int64_t *) out)[i] ^= ((int64_t *) tmp)[i]; break;
            default: ((float *) out)[i] += ((float *) tmp)[i]; break;
            }
        }
    }
    free(tmp);
}

/* The kinds above, then one more: float sums of inputs whose sum depends
 * on the order (float_input), reduced in rank order 0..p-1 - the order of
 * the mesh and shared-memory reductions. */
#define KIND_FLT_ORDER RED_NKINDS
#define NKINDS (RED_NKINDS + 1)

static inline size_t kind_es(int k)
{
    return KIND_FLT_ORDER == k ? sizeof(float) : red_kinds[k].es;
}

static inline xccl_reduce_fn_t kind_fn(int k)
{
    return KIND_FLT_ORDER == k ? xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM)
                               : xccl_reduce_kernel(red_kinds[k].dt, red_kinds[k].op);
}

static inline void kind_fill(int k, int r, void *buf, size_t n)
{
    if (KIND_FLT_ORDER == k) {
        for (size_t i = 0; i < n; i++) {
            ((float *) buf)[i] = float_input(r, i);
        }
    } else {
        fill_input((red_kind_t) k, r, buf, n);
    }
}

/* The reduction of n elements over ranks 0..p-1, one rank at a time in
 * rank order. */
static inline void kind_reference(int k, int p, void *out, size_t n)
{
    if (KIND_FLT_ORDER != k) {
        reference((red_kind_t) k, p, out, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float acc = float_input(0, i);
        for (int r = 1; r < p; r++) {
            acc = acc + float_input(r, i);
        }
        ((float *) out)[i] = acc;
    }
}

#endif /* SIM_HARNESS_OWN_KINDS */

/* ------------------------------------------------------------------------ */
/* A schedule's tally                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
    size_t sends, recvs, sent, received, reduced, copies;
    int one_each_way;          /* every step with transfers has one send and one receive */
} tally_t;

static inline tally_t tally(const xccl_sched_t *s)
{
    tally_t t = { 0, 0, 0, 0, 0, 0, 1 };
    for (size_t st = 0; st < s->nsteps; st++) {
        size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts, ns = 0, nr = 0;
        for (size_t i = s->step_start[st]; i < end; i++) {
            const xccl_action_t *x = &s->acts[i];
            switch (x->kind) {
            case XCCL_ACT_SEND: t.sends++; ns++; t.sent += x->len; break;
            case XCCL_ACT_RECV: t.recvs++; nr++; t.received += x->len; break;
            case XCCL_ACT_REDUCE: t.reduced += x->len; break;
            default: t.copies++; break;
            }
        }
        if ((ns || nr) && (ns != 1 || nr != 1)) {
            t.one_each_way = 0;
        }
    }
    return t;
}

/* Whether s names RECV in any action (the rooted collectives: a non-root
 * rank's receive buffer is not significant, its schedule must not touch
 * it). */
static inline int sched_names_recv(const xccl_sched_t *s)
{
    for (size_t i = 0; i < s->nacts; i++) {
        const xccl_action_t *a = &s->acts[i];
        const int used[3] = { XCCL_ACT_RECV != a->kind, XCCL_ACT_REDUCE == a->kind, XCCL_ACT_SEND != a->kind };
        const xccl_ref_t *refs[3] = { &a->a, &a->b, &a->dst };
        for (int k = 0; k < 3; k++) {
            if (used[k] && XCCL_BUF_RECV == refs[k]->buf) {
                return 1;
            }
        }
    }
    return 0;
}

#endif /* XCCL_TEST_SIM_HARNESS_H */
