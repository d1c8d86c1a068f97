/*
 * One collective call of a forked rank on the node segment (shm_call.h):
 * the schedule built by the level's builders, run through the executor
 * with the shm peer provider (ompi_coll_xccl/coll_xccl_level_peer.h) and a
 * transport that fails any send or receive (one node: the schedules need
 * none), its inputs made from the call's number and checked bit-exact
 * against scalar references.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "shm_call.h"

#include "base/xccl_base.h"
#include "xccl_build.h"
#include "xccl_exec.h"
#include "ompi_coll_xccl/coll_xccl_level_peer.h"

/* For sched_drop (shm_sim.h), which plants the missing entry barrier; the
 * simulator's sequence base and seed salt go unused here. */
#define SIM_EXEC_SEQ 0
#define SIM_SEED_SALT 0u
#include "sim_harness.h"
#include "shm_sim.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Executing a schedule on the segment                                      */
/* ------------------------------------------------------------------------ */

/* One node: any send or receive is an error (and counted). */
static int xfers;
static int no_isend(void *ctx, int peer, const void *buf, size_t len, uint32_t seq, uint32_t idx, void **req)
{
    (void) ctx, (void) peer, (void) buf, (void) len, (void) seq, (void) idx, (void) req;
    xfers++;
    return -1;
}
static int no_irecv(void *ctx, int peer, void *buf, size_t len, uint32_t seq, uint32_t idx, void **req)
{
    (void) ctx, (void) peer, (void) buf, (void) len, (void) seq, (void) idx, (void) req;
    xfers++;
    return -1;
}
static int no_test(void *ctx, void *req)
{
    (void) ctx, (void) req;
    return -1;
}
static void no_progress(void *ctx)
{
    (void) ctx;
}
static void no_cancel(void *ctx, void *req)
{
    (void) ctx, (void) req;
}
static const xccl_transport_t no_transport = { NULL, no_isend, no_irecv, no_test, no_progress, no_cancel };

typedef struct {
    xccl_reduce_fn_t fn;
} red_t;

static int red_cb(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    red_t *r = ctx;
    if (NULL == r->fn) {
        return -1;
    }
    r->fn(dst, a, b, count);
    return 0;
}

/* Copies through a callback that is slow for copies into the own slot on
 * the slow rank (the planted "post before copy" bug shows then). */
typedef struct {
    char *slot;
    size_t slot_bytes;
    int slow;
} copy_ctx_t;

static int slow_copy(void *ctx, void *dst, const void *src, size_t len)
{
    copy_ctx_t *c = ctx;
    if (c->slow && (char *) dst >= c->slot && (char *) dst < c->slot + c->slot_bytes) {
        usleep(30000);
    }
    memmove(dst, src, len);
    return 0;
}

/* Wraps the provider: tests flags without their sequence number (the
 * previous call's flag satisfies a wait): a planted bug. */
typedef struct {
    xccl_peer_t peer;
    xccl_level_peer_t *real;
} seqless_t;

static int seqless_test(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    seqless_t *w = ctx;
    (void) seq;
    /* the flag of the call before satisfies it as if it were this one's */
    return w->real->peer.test(w->real->peer.ctx, peer, seq - 1, val) ||
           w->real->peer.test(w->real->peer.ctx, peer, seq, val);
}

static void *seqless_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    seqless_t *w = ctx;
    return w->real->peer.buf(w->real->peer.ctx, peer, id);
}

static int seqless_post(void *ctx, uint32_t seq, uint32_t val)
{
    seqless_t *w = ctx;
    return w->real->peer.post(w->real->peer.ctx, seq, val);
}

/* What this rank's last call without an exit barrier left owed (each rank
 * is a process of its own, forked per test): its calls settle it in
 * order, as the component's level does. */
static xccl_exit_owed_t owed;

/* Runs s to the end: 0, or <0 (an action failed, a peer is gone). */
static int exec_sched(const xccl_sched_t *s, void *const bufs[XCCL_NBUF], const xccl_peer_t *peer, uint32_t seq,
                      xccl_reduce_fn_t fn, copy_ctx_t *slow)
{
    xccl_exec_t e;
    red_t red = { fn };
    if (0 != xccl_exec_init(&e, s, &no_transport, bufs, red_cb, &red, seq)) {
        return -1;
    }
    xccl_exec_set_peer(&e, peer);
    xccl_exec_set_owed(&e, &owed);
    if (slow) {
        xccl_exec_set_copy(&e, slow_copy, slow);
    }
    int rc;
    while (0 == (rc = xccl_exec_progress(&e))) {
        sched_yield();         /* 8 ranks on 2 cores: let the peers run */
    }
    xccl_exec_fini(&e);
    return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------------------ */
/* Inputs and references                                                    */
/* ------------------------------------------------------------------------ */

static int32_t in_i32(unsigned call, int r, size_t i)
{
    return (int32_t) (call * 7919u + (unsigned) r * 1000003u + (unsigned) i * 31u) - 77777;
}

/* floats whose sums depend on the order */
static float in_flt(unsigned call, int r, size_t i)
{
    return 0.1f * (float) (r + 1) + 1e-3f * (float) ((i + call) % 1000) + (0 == (r * 7 + i + call) % 5 ? 1e7f : 0.0f);
}

static unsigned char in_byte(unsigned call, int from, int to, size_t i)
{
    return (unsigned char) (call * 17 + (unsigned) from * 31 + (unsigned) to * 7 + i * 13 + 1 + (i >> 8));
}


static size_t ek_size(int ek)
{
    return EK_I32 == ek ? sizeof(int32_t) : sizeof(float);
}

static xccl_reduce_fn_t ek_fn(int ek)
{
    return xccl_reduce_kernel(EK_I32 == ek ? XCCL_DT_INT32 : XCCL_DT_FLOAT, XCCL_OP_SUM);
}

static void ek_fill(int ek, unsigned call, int r, void *buf, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (EK_I32 == ek) {
            ((int32_t *) buf)[i] = in_i32(call, r, off + i);
        } else {
            ((float *) buf)[i] = in_flt(call, r, off + i);
        }
    }
}

/* Element off+i of the reduction over ranks 0..p-1 in rank order. */
static void ek_reference(int ek, unsigned call, int p, void *out, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (EK_I32 == ek) {
            uint32_t acc = (uint32_t) in_i32(call, 0, off + i);
            for (int r = 1; r < p; r++) {
                acc += (uint32_t) in_i32(call, r, off + i);
            }
            ((int32_t *) out)[i] = (int32_t) acc;
        } else {
            float acc = in_flt(call, 0, off + i);
            for (int r = 1; r < p; r++) {
                acc = acc + in_flt(call, r, off + i);
            }
            ((float *) out)[i] = acc;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* One collective call on a rank                                            */
/* ------------------------------------------------------------------------ */

const char *const coll_names[NC] = { "allreduce", "allreduce_small", "reduce_scatter", "allgather", "alltoall",
                                     "bcast" };


/* Moves the first post of s before the local actions of its step (after
 * the step's waits): a flag that says "my data is in the slot" before it
 * is. */
static void post_first(xccl_sched_t *s)
{
    for (size_t st = 0; st < s->nsteps; st++) {
        const size_t begin = s->step_start[st];
        const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        for (size_t i = begin; i < end; i++) {
            if (XCCL_ACT_POST == s->acts[i].kind) {
                size_t to = begin;
                while (to < i && XCCL_ACT_WAIT == s->acts[to].kind) {
                    to++;
                }
                const xccl_action_t post = s->acts[i];
                memmove(&s->acts[to + 1], &s->acts[to], (i - to) * sizeof(post));
                s->acts[to] = post;
                return;
            }
        }
    }
}

/* A wait for flag 1, for sched_drop: the entry barrier of the schedules
 * planted_bugs_fail runs (each rank posts 1 once its data is in its slot;
 * they wait for this call's flags, len 0, so drop_entry_wait finds none). */
static int drop_flag1_wait(const xccl_sched_t *s, size_t st, const xccl_action_t *a, void *ctx)
{
    (void) s, (void) st, (void) ctx;
    return XCCL_ACT_WAIT == a->kind && 1 == a->idx;
}

/* Sizes of SEND and RECV of a call at p, in bytes. */
static void call_bytes(const call_t *k, int p, size_t *sb, size_t *rb)
{
    const size_t es = ek_size(k->ek);
    switch (k->coll) {
    case C_AR: case C_AR_SMALL: *sb = *rb = k->n * es; break;
    case C_RS: *sb = (size_t) p * k->n * es; *rb = k->in_place ? *sb : k->n * es; break;
    case C_AG: *sb = k->n; *rb = (size_t) p * k->n; break;
    case C_A2A: *sb = *rb = (size_t) p * k->n; break;
    default: *sb = 0; *rb = k->n; break;
    }
}

static int build(const call_t *k, xccl_sched_t *s, int r, int p, size_t slot)
{
    const size_t es = ek_size(k->ek);
    size_t counts[MAXR];
    for (int q = 0; q < p; q++) {
        counts[q] = k->n;
    }
    xccl_sched_init(s, r, p, C_AR == k->coll || C_AR_SMALL == k->coll || C_RS == k->coll ? es : 1);
    s->slot_cap = slot;
    switch (k->coll) {
    case C_AR: return k->mesh ? xccl_build_allreduce_mesh(s, k->n, k->in_place) : xccl_build_allreduce_shm(s, k->n);
    case C_AR_SMALL: return xccl_build_allreduce_shm_small(s, k->n);
    case C_RS: return k->mesh ? xccl_build_reduce_scatter_mesh(s, counts, k->in_place)
                              : xccl_build_reduce_scatter_shm(s, counts, k->in_place);
    case C_AG: return k->mesh ? xccl_build_allgather_mesh(s, k->n) : xccl_build_allgather_shm(s, k->n);
    case C_A2A: return k->mesh ? xccl_build_alltoall_mesh(s, k->n, k->in_place)
                               : xccl_build_alltoall_shm(s, k->n, k->in_place);
    default:
        /* over CMA both forms the component runs (the plain mesh below 8
         * MiB, the split from there: the root writes a share of each
         * reader's RECV), by the parity of size + root (every root
         * meets both) */
        if (USE_MESH_CMA == k->mesh && (k->n + (size_t) k->root) % 2) {
            return xccl_build_bcast_mesh_split(s, k->n, k->root);
        }
        return k->mesh ? xccl_build_bcast_mesh(s, k->n, k->root) : xccl_build_bcast_shm(s, k->n, k->root);
    }
}

/* Fills the user buffers of rank r for call k. */
static void fill(const call_t *k, int r, int p, unsigned char *sbuf, unsigned char *rbuf, size_t rb)
{
    memset(rbuf, 0xEE, rb);
    switch (k->coll) {
    case C_AR: case C_AR_SMALL: ek_fill(k->ek, k->call, r, sbuf, 0, k->n); break;
    case C_RS: ek_fill(k->ek, k->call, r, sbuf, 0, (size_t) p * k->n); break;
    case C_AG:
        for (size_t i = 0; i < k->n; i++) {
            sbuf[i] = in_byte(k->call, r, 0, i);
        }
        break;
    case C_A2A:
        for (int to = 0; to < p; to++) {
            for (size_t i = 0; i < k->n; i++) {
                sbuf[(size_t) to * k->n + i] = in_byte(k->call, r, to, i);
            }
        }
        break;
    default:
        for (size_t i = 0; r == k->root && i < k->n; i++) {
            rbuf[i] = in_byte(k->call, k->root, 0, i);
        }
        break;
    }
}

/* 0 if rank r's result is right, else 1 with a message. */
static int verify(ctl_t *c, const call_t *k, int r, int p, const unsigned char *rbuf, const char *what)
{
    const size_t es = ek_size(k->ek);
    switch (k->coll) {
    case C_AR: case C_AR_SMALL: case C_RS: {
        const size_t n = k->n, off = C_RS == k->coll ? (size_t) r * n : 0;
        unsigned char *want = malloc(n * es + 1);
        ek_reference(k->ek, k->call, p, want, off, n);
        const int bad = 0 != memcmp(want, rbuf, n * es);
        free(want);
        return bad ? failf(c, r, "%s: wrong result", what) : 0;
    }
    case C_AG:
        for (int q = 0; q < p; q++) {
            for (size_t i = 0; i < k->n; i++) {
                if (rbuf[(size_t) q * k->n + i] != in_byte(k->call, q, 0, i)) {
                    return failf(c, r, "%s: block %d byte %zu wrong", what, q, i);
                }
            }
        }
        return 0;
    case C_A2A:
        for (int q = 0; q < p; q++) {
            for (size_t i = 0; i < k->n; i++) {
                if (rbuf[(size_t) q * k->n + i] != in_byte(k->call, q, r, i)) {
                    return failf(c, r, "%s: block from %d byte %zu wrong", what, q, i);
                }
            }
        }
        return 0;
    default:
        for (size_t i = 0; i < k->n; i++) {
            if (rbuf[i] != in_byte(k->call, k->root, 0, i)) {
                return failf(c, r, "%s: byte %zu wrong", what, i);
            }
        }
        return 0;
    }
}

int run_call(ctl_t *c, xccl_segment_t *seg, int r, int p, const call_t *k, bug_t bug, int slow)
{
    char what[160];
    static const char *const use[] = { "shm", "mesh(mirror)", "mesh(cma)" };
    snprintf(what, sizeof(what), "%s %s p=%d n=%zu in_place=%d root=%d ek=%d call=%u", coll_names[k->coll],
             use[k->mesh], p, k->n, k->in_place, k->root, k->ek, k->call);
    size_t sb, rb;
    call_bytes(k, p, &sb, &rb);
    unsigned char *sbuf = malloc(sb + 1), *rbuf = malloc(rb + 1);
    xccl_sched_t s;
    const size_t slot = xccl_segment_slot_bytes(seg);
    if (0 != build(k, &s, r, p, slot)) {
        return failf(c, r, "%s: build failed", what);
    }
    if (!k->mesh && (s.max_xfers != 0 || s.slot_bytes > slot)) {
        return failf(c, r, "%s: %zu transfers, slot %zu of %zu", what, s.max_xfers, s.slot_bytes, slot);
    }
    if (BUG_NO_ENTRY_WAIT == bug) {
        (void) sched_drop(&s, drop_flag1_wait, NULL);
    } else if (BUG_POST_BEFORE_COPY == bug && slow) {
        post_first(&s);
    }
    fill(k, r, p, sbuf, rbuf, rb);
    if (k->in_place && (C_AR == k->coll || C_AR_SMALL == k->coll || C_RS == k->coll || C_A2A == k->coll)) {
        memcpy(rbuf, sbuf, sb);
    } else if (k->in_place && C_AG == k->coll) {
        memcpy(rbuf + (size_t) r * k->n, sbuf, sb);
    }

    xccl_level_peer_t sp;
    xccl_level_peer_init(&sp, seg, NULL, p);
    void *bufs[XCCL_NBUF] = { k->in_place ? (void *) rbuf : sbuf, rbuf, NULL, xccl_segment_slot(seg, r) };
    void *scratch = NULL;
    if (USE_MESH_MIRROR == k->mesh) {
        /* mirror: SEND, RECV, SCRATCH at fixed offsets of every slot */
        const size_t ab = (sb + 63) / 64 * 64, rbb = (rb + 63) / 64 * 64;
        const size_t roff = k->in_place ? 0 : ab, xoff = roff + rbb;
        if (xoff + s.scratch_bytes > slot || 0 != xccl_level_peer_map(&sp, XCCL_BUF_SEND, 0, k->in_place ? rbb : ab) ||
            0 != xccl_level_peer_map(&sp, XCCL_BUF_RECV, roff, rbb) ||
            0 != xccl_level_peer_map(&sp, XCCL_BUF_SCRATCH, xoff, s.scratch_bytes)) {
            return failf(c, r, "%s: does not fit the slot in mirror mode", what);
        }
        for (int b = 0; b < XCCL_BUF_SLOT; b++) {
            bufs[b] = xccl_level_peer_own(&sp, (xccl_buf_id_t) b);
        }
    } else {
        scratch = malloc(s.scratch_bytes + 1);
        bufs[XCCL_BUF_SCRATCH] = scratch;
    }
    if (slow) {
        usleep(40000);         /* the others reach their waits first */
    }
    /* mirror mode: copy in before the call (the exit barrier of the call
     * before guarantees nobody still reads this slot) */
    if (USE_MESH_MIRROR == k->mesh) {
        /* (a call before without its exit barrier: the peers done with it
         * first, as xccl_exec_set_owed's settlement would wait) */
        for (int q = 0; owed.open && q < p; q++) {
            while (q != r && 1 != sp.peer.test(sp.peer.ctx, q, owed.seq, owed.val)) {
                sched_yield();
            }
        }
        owed.open = 0;
        memcpy(bufs[XCCL_BUF_SEND], k->in_place ? rbuf : sbuf, k->in_place ? rb : sb);
        if (C_BC == k->coll && r == k->root) {
            memcpy(bufs[XCCL_BUF_RECV], rbuf, rb);
        }
    }
    seqless_t wrap = { { NULL, seqless_buf, seqless_post, seqless_test, NULL, NULL }, &sp };
    wrap.peer.ctx = &wrap;
    copy_ctx_t cc = { xccl_segment_slot(seg, r), slot, slow && BUG_POST_BEFORE_COPY == bug };
    const xccl_peer_t *peer = BUG_SEQLESS == bug ? &wrap.peer : &sp.peer;
    const int before = xfers;
    if (USE_MESH_CMA == k->mesh) {
        /* the peers read this rank's own buffers: publish them first */
        if (C_AG == k->coll && k->in_place) {
            bufs[XCCL_BUF_SEND] = rbuf + (size_t) r * k->n;
        }
        xccl_level_peer_cma(&sp, 1);
        xccl_level_peer_publish(&sp, 1000u + k->call, bufs);
    }
    int rc = exec_sched(&s, bufs, peer, 1000u + k->call, ek_fn(k->ek), BUG_POST_BEFORE_COPY == bug ? &cc : NULL);
    if (USE_MESH_MIRROR == k->mesh && 0 == rc) {
        memcpy(rbuf, bufs[XCCL_BUF_RECV], rb);    /* copy out */
    }
    int bad = 0;
    if (rc < 0) {
        bad = failf(c, r, "%s: execution failed (%d)", what, rc);
    } else if (xfers != before) {
        bad = failf(c, r, "%s: %d sends/receives on one node", what, xfers - before);
    } else {
        bad = verify(c, k, r, p, rbuf, what);
    }
    xccl_sched_fini(&s);
    free(sbuf);
    free(rbuf);
    free(scratch);
    return bad;
}
