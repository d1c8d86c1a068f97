/*
 * The staging plan (xccl_stage_plan) and the executor's gate, without a
 * GPU: every rank's "device" buffers are plain arrays, the host copies the
 * schedule runs on start out poisoned, and the gate copies a piece in only
 * when the plan says the next step needs it (after first answering "not
 * yet"), and copies a piece out right after the step the plan names.
 * Every algorithm of every collective in the catalog runs this way on the
 * simulated transport, flat and two-level, in place and not; the "device"
 * results must equal references computed here.  A piece read before its
 * copy arrived reads poison, a piece copied out before its last write
 * leaves a stale value: either shows up as a wrong result (a planted
 * lagging plan proves it does).
 *
 * The same runs check the executor with asynchronous local actions (the
 * way device buffers run when the transport moves device memory): the
 * copies and reductions of a step are only queued, as on a stream, and
 * run when the gate is asked whether the next step may start (after first
 * answering "not yet") or at the drain.  A transfer that read or wrote a
 * buffer before the queued work got to it shows up as a wrong result (a
 * planted gate that never waits proves it does).
 */
#include "base/xccl_base.h"
#include "xccl_sched.h"
#include "xccl_layout.h"
#include "xccl_build.h"
#include "xccl_exec.h"
#include "xccl_stage.h"
#include "xccl_sim.h"
#include "xccl_catalog.h"

#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POISON 0xA5
#define UNTOUCHED 0x3C

typedef struct {
    xccl_stage_plan_t plan;
    const xccl_stage_region_t *regions;
    unsigned char *dev[2];     /* per region: the "device" memory */
    size_t arrived;            /* copies in done */
    int asked;                 /* step_ready said "not yet" once for this need */
    int lag;                   /* planted bug: copy in one step late */
    size_t copies_in, copies_out, bytes_in, bytes_out;
} gate_ctx_t;

static int g_ready(void *ctx, size_t step)
{
    gate_ctx_t *g = ctx;
    size_t need = g->plan.need_in[step];
    if (g->lag) {
        need = step > 0 ? g->plan.need_in[step - 1] : 0;
    }
    if (g->arrived >= need) {
        return 1;
    }
    if (!g->asked) {           /* as an event query: not yet, then done */
        g->asked = 1;
        return 0;
    }
    for (; g->arrived < need; g->arrived++) {
        const xccl_stage_piece_t *pc = &g->plan.in[g->arrived];
        memcpy((char *) g->regions[pc->region].base + pc->off, g->dev[pc->region] + pc->off,
               pc->len);
        g->copies_in++;
        g->bytes_in += pc->len;
    }
    g->asked = 0;
    return 1;
}

static int g_done(void *ctx, size_t step)
{
    gate_ctx_t *g = ctx;
    for (size_t i = g->plan.out_start[step]; i < g->plan.out_start[step + 1]; i++) {
        const xccl_stage_piece_t *pc = &g->plan.out[i];
        memcpy(g->dev[pc->region] + pc->off, (const char *) g->regions[pc->region].base + pc->off,
               pc->len);
        g->copies_out++;
        g->bytes_out += pc->len;
    }
    return 0;
}

static int g_drain(void *ctx)
{
    (void) ctx;
    return 1;
}

static int sum_u32(void *cbctx, void *dst, const void *a, const void *b, size_t count)
{
    (void) cbctx;
    uint32_t *d = dst;
    const uint32_t *x = a, *y = b;
    for (size_t i = 0; i < count; i++) {
        d[i] = x[i] + y[i];
    }
    return 0;
}

/* ---- asynchronous local actions: a queue per rank, run in order */

typedef struct {
    void *dst;
    const void *a, *b;         /* b NULL: a copy of len bytes */
    size_t len;                /* bytes (copy) or elements (reduce) */
} queued_t;

typedef struct {
    queued_t *q;
    size_t n, cap, done;       /* queued, room, run */
    size_t mark;               /* queued up to the end of the last finished step */
    int asked;
    int never_wait;            /* planted bug: steps start without waiting */
    size_t ops;
} stream_ctx_t;

static int enqueue(stream_ctx_t *st, void *dst, const void *a, const void *b, size_t len)
{
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 64;
        st->q = realloc(st->q, st->cap * sizeof(*st->q));
        ck_assert_ptr_nonnull(st->q);
    }
    st->q[st->n++] = (queued_t) { dst, a, b, len };
    st->ops++;
    return 0;
}

static int q_copy(void *ctx, void *dst, const void *src, size_t len)
{
    return enqueue(ctx, dst, src, NULL, len);
}

static int q_sum(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    return enqueue(ctx, dst, a, b, count);
}

static void flush(stream_ctx_t *st, size_t upto)
{
    for (; st->done < upto; st->done++) {
        const queued_t *o = &st->q[st->done];
        if (o->b) {
            sum_u32(NULL, o->dst, o->a, o->b, o->len);
        } else {
            memmove(o->dst, o->a, o->len);
        }
    }
}

/* As an event query: "not yet" once, then the queue up to the mark runs. */
static int s_wait(stream_ctx_t *st)
{
    if (st->done >= st->mark || st->never_wait) {
        return 1;
    }
    if (!st->asked) {
        st->asked = 1;
        return 0;
    }
    flush(st, st->mark);
    st->asked = 0;
    return 1;
}

static int s_ready(void *ctx, size_t step)
{
    (void) step;
    return s_wait(ctx);
}

static int s_done(void *ctx, size_t step)
{
    stream_ctx_t *st = ctx;
    (void) step;
    st->mark = st->n;          /* an event recorded after the step's work */
    return 0;
}

static int s_drain(void *ctx)
{
    stream_ctx_t *st = ctx;
    st->never_wait = 0;        /* the end of the call waits, bug or not */
    return s_wait(st);
}

static uint32_t input_word(int rank, size_t i)
{
    return (uint32_t) (rank + 1) * 2654435761u + (uint32_t) i * 40503u;
}

/* One rank's buffers: the host copies (regions), the device arrays. */
typedef struct {
    unsigned char *hs, *hr, *ds, *dr;
    size_t ns, nr;             /* bytes */
    xccl_stage_region_t reg[2];
    int nreg;
    gate_ctx_t g;
    stream_ctx_t st;
    xccl_gate_t gate;
    void *scratch;
} rank_bufs_t;

typedef struct {
    xccl_coll_t coll;
    int p, in_place, root;
    size_t n;                  /* elements (reductions) or bytes per block / bcast */
    const char *layout;        /* NULL: flat */
    int lag;                   /* planted bug (staging: the plan lags; async: no waits) */
    int async;                 /* no staging; local actions queued */
} case_t;

/* Runs every applicable catalog algorithm of c; returns the number of
 * (algorithm) runs whose results were wrong, and counts the runs. */
static int run_case(const case_t *c, int *runs, size_t *total_in, size_t *total_out,
                    size_t *whole_in)
{
    const int p = c->p;
    const int red = XCCL_COLL_ALLREDUCE == c->coll || XCCL_COLL_REDUCE_SCATTER == c->coll ||
                    XCCL_COLL_REDUCE_SCATTER_BLOCK == c->coll;
    const size_t es = red ? 4 : 1;
    xccl_layout_t layout, *lp = NULL;
    char err[128];
    if (c->layout) {
        ck_assert_msg(0 == xccl_layout_parse(&layout, c->layout, p, err, sizeof(err)), "%s", err);
        lp = &layout;
    }
    size_t *counts = malloc((size_t) p * sizeof(size_t)), total = 0;
    for (int r = 0; r < p; r++) {
        counts[r] = c->n + (size_t) (r % 3);   /* irregular */
        total += counts[r];
    }
    if (XCCL_COLL_REDUCE_SCATTER_BLOCK == c->coll) {
        for (int r = 0; r < p; r++) {
            counts[r] = c->n;
        }
        total = c->n * (size_t) p;
    }
    xccl_coll_args_t a = { .count = c->n, .counts = counts, .block = c->n, .bytes = c->n,
                           .in_place = c->in_place, .root = c->root, .layout = lp,
                           .segment = 96 };
    int nalgos, bad = 0;
    const xccl_algo_t *algos = xccl_coll_algos(c->coll, &nalgos);

    for (int ai = 0; ai < nalgos; ai++) {
        xccl_sched_t *s = calloc((size_t) p, sizeof(*s));
        rank_bufs_t *b = calloc((size_t) p, sizeof(*b));
        xccl_exec_t *e = calloc((size_t) p, sizeof(*e));
        int applicable = 1;
        for (int r = 0; r < p; r++) {
            xccl_sched_init(&s[r], r, p, es);
            int rc = algos[ai].build(&s[r], &a);
            ck_assert_msg(rc >= 0, "%s build failed", algos[ai].name);
            applicable &= XCCL_NOT_APPLICABLE != rc;
        }
        if (!applicable) {
            for (int r = 0; r < p; r++) {
                xccl_sched_fini(&s[r]);
            }
            free(s);
            free(b);
            free(e);
            continue;
        }
        xccl_sim_t *sim = xccl_sim_create(p);
        for (int r = 0; r < p; r++) {
            rank_bufs_t *rb = &b[r];
            /* sizes per the buffer conventions */
            switch (c->coll) {
            case XCCL_COLL_ALLREDUCE:
                rb->ns = rb->nr = c->n * es;
                break;
            case XCCL_COLL_REDUCE_SCATTER:
            case XCCL_COLL_REDUCE_SCATTER_BLOCK:
                rb->ns = total * es;
                rb->nr = (c->in_place ? total : counts[r]) * es;
                break;
            case XCCL_COLL_ALLGATHER:
                rb->ns = c->n;
                rb->nr = c->n * (size_t) p;
                break;
            case XCCL_COLL_ALLTOALL:
                rb->ns = rb->nr = c->n * (size_t) p;
                break;
            default:
                rb->ns = 0;
                rb->nr = c->n;
            }
            rb->hr = malloc(rb->nr + 1);
            rb->dr = malloc(rb->nr + 1);
            memset(rb->hr, POISON, rb->nr);
            memset(rb->dr, UNTOUCHED, rb->nr);
            int in_recv = c->in_place || (XCCL_COLL_BCAST == c->coll && r == c->root);
            unsigned char *input;
            if (c->in_place || XCCL_COLL_BCAST == c->coll) {
                rb->hs = XCCL_COLL_ALLGATHER == c->coll ? rb->hr + (size_t) r * c->n : rb->hr;
                input = XCCL_COLL_ALLGATHER == c->coll ? rb->dr + (size_t) r * c->n : rb->dr;
            } else {
                rb->hs = malloc(rb->ns + 1);
                rb->ds = malloc(rb->ns + 1);
                memset(rb->hs, POISON, rb->ns);
                input = rb->ds;
            }
            size_t nin = XCCL_COLL_BCAST == c->coll ? (r == c->root ? c->n : 0) : rb->ns;
            for (size_t i = 0; i < nin; i += es) {
                uint32_t w = input_word(r, i / es);
                memcpy(input + i, &w, es);
            }
            rb->scratch = malloc(s[r].scratch_bytes + 1);
            if (c->async) {
                /* The schedule runs on the "device" arrays themselves. */
                void *dbufs[XCCL_NBUF] = { c->in_place || XCCL_COLL_BCAST == c->coll ? NULL : rb->ds,
                                           rb->dr, rb->scratch };
                if (NULL == dbufs[0]) {
                    dbufs[0] = XCCL_COLL_ALLGATHER == c->coll ? rb->dr + (size_t) r * c->n : rb->dr;
                }
                memset(&rb->st, 0, sizeof(rb->st));
                rb->st.never_wait = c->lag;
                rb->gate = (xccl_gate_t) { &rb->st, s_ready, s_done, s_drain };
                ck_assert_int_eq(0, xccl_exec_init(&e[r], &s[r], xccl_sim_transport(sim, r), dbufs,
                                                   q_sum, &rb->st, 7));
                xccl_exec_set_gate(&e[r], &rb->gate);
                xccl_exec_set_copy(&e[r], q_copy, &rb->st);
                continue;
            }
            rb->nreg = 0;
            if (!c->in_place && XCCL_COLL_BCAST != c->coll) {
                rb->reg[rb->nreg] = (xccl_stage_region_t) { rb->hs, rb->ns, 1, 0 };
                rb->g.dev[rb->nreg++] = rb->ds;
            }
            rb->reg[rb->nreg] = (xccl_stage_region_t) {
                rb->hr, rb->nr, in_recv, !(XCCL_COLL_BCAST == c->coll && r == c->root) };
            rb->g.dev[rb->nreg++] = rb->dr;
            void *bufs[XCCL_NBUF] = { rb->hs, rb->hr, rb->scratch };
            ck_assert_int_eq(0, xccl_stage_plan(&rb->g.plan, &s[r], bufs, rb->reg, rb->nreg, 40, 0));
            rb->g.regions = rb->reg;
            rb->g.lag = c->lag;
            rb->gate = (xccl_gate_t) { &rb->g, g_ready, g_done, g_drain };
            ck_assert_int_eq(0, xccl_exec_init(&e[r], &s[r], xccl_sim_transport(sim, r), bufs,
                                               sum_u32, NULL, 7));
            xccl_exec_set_gate(&e[r], &rb->gate);
            for (int k = 0; k < rb->nreg; k++) {
                if (rb->reg[k].copy_in) {
                    *whole_in += rb->reg[k].len;
                }
            }
        }
        int rc = xccl_sim_run(sim, e, p, 12345u + (unsigned) ai);
        ck_assert_msg(0 == rc, "%s p=%d: %s", algos[ai].name, p, xccl_sim_error(sim));

        /* The device arrays against references. */
        int wrong = 0;
        for (int r = 0; r < p && !wrong; r++) {
            const rank_bufs_t *rb = &b[r];
            for (size_t i = 0; i < rb->nr && !wrong; i += es) {
                uint32_t want = 0, got = 0;
                size_t elem = i / es;
                switch (c->coll) {
                case XCCL_COLL_ALLREDUCE:
                    for (int q = 0; q < p; q++) {
                        want += input_word(q, elem);
                    }
                    break;
                case XCCL_COLL_REDUCE_SCATTER:
                case XCCL_COLL_REDUCE_SCATTER_BLOCK: {
                    size_t first = 0;
                    for (int q = 0; q < r; q++) {
                        first += counts[q];
                    }
                    if (elem >= counts[r]) {
                        /* in place: the result is the first counts[r]
                         * elements, the rest is undefined */
                        continue;
                    }
                    for (int q = 0; q < p; q++) {
                        want += input_word(q, first + elem);
                    }
                    break;
                }
                case XCCL_COLL_ALLGATHER:
                    want = (uint8_t) input_word((int) (i / c->n), i % c->n);
                    break;
                case XCCL_COLL_ALLTOALL:
                    want = (uint8_t) input_word((int) (i / c->n), (size_t) r * c->n + i % c->n);
                    break;
                default:
                    want = (uint8_t) input_word(c->root, i);
                }
                memcpy(&got, rb->dr + i, es);
                if (got != want) {
                    wrong = 1;
                    if (!c->lag) {
                        fprintf(stderr, "%s %s p=%d n=%zu in_place=%d root=%d layout=%s: rank %d "
                                "byte %zu: %#x, want %#x\n", xccl_coll_name(c->coll),
                                algos[ai].name, p, c->n, c->in_place, c->root,
                                c->layout ? c->layout : "flat", r, i, got, want);
                    }
                }
            }
        }
        bad += wrong;
        (*runs)++;
        for (int r = 0; r < p; r++) {
            rank_bufs_t *rb = &b[r];
            *total_in += c->async ? rb->st.ops : rb->g.bytes_in;
            *total_out += rb->g.bytes_out;
            xccl_exec_fini(&e[r]);
            if (c->async) {
                free(rb->st.q);
            } else {
                xccl_stage_plan_fini(&rb->g.plan);
            }
            xccl_sched_fini(&s[r]);
            if (!c->in_place && XCCL_COLL_BCAST != c->coll) {
                free(rb->hs);
                free(rb->ds);
            }
            free(rb->hr);
            free(rb->dr);
            free(rb->scratch);
        }
        xccl_sim_destroy(sim);
        free(s);
        free(b);
        free(e);
    }
    free(counts);
    if (lp) {
        xccl_layout_fini(lp);
    }
    return bad;
}

static const xccl_coll_t colls[] = { XCCL_COLL_ALLREDUCE, XCCL_COLL_REDUCE_SCATTER,
                                     XCCL_COLL_REDUCE_SCATTER_BLOCK, XCCL_COLL_ALLGATHER,
                                     XCCL_COLL_ALLTOALL, XCCL_COLL_BCAST };

/* Every algorithm of every collective, in every shape; returns the wrong
 * runs and counts the runs. */
static int run_all(int async, int *runs, size_t *in, size_t *out, size_t *whole)
{
    static const struct {
        int p;
        const char *layout;
    } shapes[] = { { 1, NULL }, { 2, NULL }, { 3, NULL }, { 4, NULL }, { 5, NULL }, { 8, NULL },
                   { 4, "block:2" }, { 6, "block:3" }, { 7, "block:3" }, { 6, "cyclic:2" } };
    static const size_t sizes[] = { 1, 37, 300 };
    int bad = 0;
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
        for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
            for (size_t ni = 0; ni < sizeof(sizes) / sizeof(sizes[0]); ni++) {
                for (int ip = 0; ip < 2; ip++) {
                    if (ip && XCCL_COLL_BCAST == colls[ci]) {
                        continue;
                    }
                    int roots = XCCL_COLL_BCAST == colls[ci] ? shapes[si].p : 1;
                    for (int root = 0; root < roots; root++) {
                        case_t c = { colls[ci], shapes[si].p, ip, root, sizes[ni],
                                     shapes[si].layout, 0, async };
                        bad += run_case(&c, runs, in, out, whole);
                    }
                }
            }
        }
    }
    return bad;
}

START_TEST(every_algorithm_through_the_gate)
{
    int runs = 0;
    size_t in = 0, out = 0, whole = 0;
    int bad = run_all(0, &runs, &in, &out, &whole);
    printf("stage plan: %d runs through the gate, %d wrong; copied in %zu of %zu bytes "
           "staged in, copied out %zu\n", runs, bad, in, whole, out);
    ck_assert_int_gt(runs, 1000);
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(every_algorithm_with_queued_local_actions)
{
    int runs = 0;
    size_t ops = 0, out = 0, whole = 0;
    int bad = run_all(1, &runs, &ops, &out, &whole);
    printf("queued local actions: %d runs, %d wrong; %zu copies and reductions queued\n", runs,
           bad, ops);
    ck_assert_int_gt(runs, 1000);
    ck_assert_uint_gt(ops, 10000);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* The planted bug: a gate that lets each step start at once, so queued
 * work runs only at the drain. */
START_TEST(a_gate_that_never_waits_is_caught)
{
    int runs = 0, bad = 0;
    size_t ops = 0, out = 0, whole = 0;
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
        case_t c = { colls[ci], 4, 0, 1, 300, NULL, 1, 1 };
        size_t before = ops;
        int b = run_case(&c, &runs, &ops, &out, &whole);
        if (XCCL_COLL_BCAST == colls[ci] && ops == before) {
            /* bcast schedules without local actions: nothing to wait for
             * (nhr and nb copy: with them bcast is caught too) */
            ck_assert_int_eq(b, 0);
            continue;
        }
        ck_assert_msg(b > 0, "%s: a gate that never waits went unnoticed",
                      xccl_coll_name(colls[ci]));
        bad += b;
    }
    printf("gate that never waits: %d of %d runs wrong\n", bad, runs);
}
END_TEST

/* The planted bug: copies arriving one step later than the plan asks. */
START_TEST(a_lagging_plan_is_caught)
{
    int runs = 0, bad = 0;
    size_t in = 0, out = 0, whole = 0;
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
        case_t c = { colls[ci], 4, 0, 1, 300, NULL, 1, 0 };
        int b = run_case(&c, &runs, &in, &out, &whole);
        ck_assert_msg(b > 0, "%s: a lagging plan went unnoticed", xccl_coll_name(colls[ci]));
        bad += b;
    }
    printf("lagging plan: %d of %d runs wrong\n", bad, runs);
}
END_TEST

/* What the plan buys: the ring allreduce needs 2 of 4 chunks of its input
 * before its first step, and sends the first finished chunk back before
 * the last step. */
START_TEST(ring_allreduce_overlaps)
{
    const int p = 4;
    const size_t count = 4096, es = 4;
    xccl_sched_t s;
    xccl_sched_init(&s, 1, p, es);
    ck_assert_int_eq(0, xccl_build_allreduce_ring(&s, count));
    unsigned char *hs = malloc(count * es), *hr = malloc(count * es), *scr = malloc(s.scratch_bytes);
    xccl_stage_region_t reg[2] = { { hs, count * es, 1, 0 }, { hr, count * es, 0, 1 } };
    void *bufs[XCCL_NBUF] = { hs, hr, scr };
    xccl_stage_plan_t pl;
    ck_assert_int_eq(0, xccl_stage_plan(&pl, &s, bufs, reg, 2, 1024, 0));
    size_t need0 = 0;
    for (size_t i = 0; i < pl.need_in[0]; i++) {
        need0 += pl.in[i].len;
    }
    ck_assert_uint_eq(need0, 2 * count * es / p);                 /* chunks r and r-1 */
    ck_assert_uint_eq(pl.need_in[s.nsteps - 1], pl.nin);
    size_t bytes_in = 0, bytes_out = 0;
    for (size_t i = 0; i < pl.nin; i++) {
        bytes_in += pl.in[i].len;
    }
    for (size_t i = 0; i < pl.nout; i++) {
        bytes_out += pl.out[i].len;
    }
    ck_assert_uint_eq(bytes_in, count * es);
    ck_assert_uint_eq(bytes_out, count * es);
    ck_assert_uint_gt(pl.out_start[s.nsteps - 1], 0);              /* before the last step */
    /* no region has more than max_pieces pieces */
    xccl_stage_plan_fini(&pl);
    ck_assert_int_eq(0, xccl_stage_plan(&pl, &s, bufs, reg, 2, 64, 8));
    ck_assert_uint_eq(pl.piece, count * es / 8);
    ck_assert_uint_le(pl.nin, 8);
    xccl_stage_plan_fini(&pl);
    xccl_sched_fini(&s);
    free(hs);
    free(hr);
    free(scr);
}
END_TEST

/* In-place allgather: the own block is read (sent), so it is copied in,
 * but never written, so never copied out.  The blocks received are copied
 * in too (a touched piece of a region read from the device is copied in
 * before its first touch, so that the copy never lands on a received
 * block; the same bytes as staging the whole region), each just before
 * the step that receives it. */
START_TEST(allgather_in_place_keeps_own_block)
{
    const int p = 4, r = 2;
    const size_t block = 256;
    xccl_sched_t s;
    xccl_sched_init(&s, r, p, 1);
    ck_assert_int_eq(0, xccl_build_allgather_ring(&s, block));
    unsigned char *hr = malloc(block * p), *scr = malloc(s.scratch_bytes + 1);
    xccl_stage_region_t reg = { hr, block * p, 1, 1 };
    void *bufs[XCCL_NBUF] = { hr + r * block, hr, scr };
    xccl_stage_plan_t pl;
    ck_assert_int_eq(0, xccl_stage_plan(&pl, &s, bufs, &reg, 1, block, 0));
    size_t bytes_in = 0;
    for (size_t i = 0; i < pl.nin; i++) {
        bytes_in += pl.in[i].len;
    }
    for (size_t i = 0; i < pl.nout; i++) {
        ck_assert(pl.out[i].off + pl.out[i].len <= r * block || pl.out[i].off >= (r + 1) * block);
    }
    ck_assert_uint_eq(bytes_in, block * p);
    /* the first step that touches the region: own block and block r-1 */
    size_t first = 0, need0 = 0;
    while (first < s.nsteps && 0 == pl.need_in[first]) {
        first++;
    }
    ck_assert_uint_lt(first, s.nsteps);
    for (size_t i = 0; i < pl.need_in[first]; i++) {
        need0 += pl.in[i].len;
    }
    ck_assert_uint_eq(need0, 2 * block);
    ck_assert_uint_gt(pl.nout, 0);
    xccl_stage_plan_fini(&pl);
    xccl_sched_fini(&s);
    free(hr);
    free(scr);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("stage_plan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, every_algorithm_through_the_gate);
    tcase_add_test(tc, a_lagging_plan_is_caught);
    tcase_add_test(tc, every_algorithm_with_queued_local_actions);
    tcase_add_test(tc, a_gate_that_never_waits_is_caught);
    tcase_add_test(tc, ring_allreduce_overlaps);
    tcase_add_test(tc, allgather_in_place_keeps_own_block);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
