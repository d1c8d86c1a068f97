/*
 * CUDA IPC peer access: one call's peer.  Its xccl_peer_t (the peers'
 * buffers are CUDA IPC mappings, the flags words of the slots, with an
 * interprocess event each where the ranks are on several GPUs), its
 * copies and reductions queued on a stream of the buffers' CUDA context,
 * and round 2's mappings of the peers' buffers (coll_xccl_gpu_ipc_int.h
 * says what the rounds are; this rank's part at the start of a call is
 * coll_xccl_gpu_ipc_part.c).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <string.h>

#include "coll_xccl_gpu_ipc_int.h"
#include "gpu/xccl_gpu.h"

/* ------------------------------------------------------------ xccl_peer_t */

static void *peer_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    ipc_call_t *c = ctx;
    return id <= XCCL_BUF_RECV ? c->ipc->mapped[2 * peer + id] : NULL;
}

/* Flag value val of rank j as an event, or NULL (host flags only). */
static xccl_cuevent_t flag_event(const ipc_call_t *c, int j, uint32_t val)
{
    return NULL != c->ipc->ev && val >= 1 && val <= XCCL_IPC_EVENTS
               ? c->ipc->ev[(size_t) j * XCCL_IPC_EVENTS + val - 1]
               : NULL;
}

/* A nonblocking call's flag: an event after the work queued so far, the
 * flag written once it is done (mca_coll_xccl_gpu_ipc_drain_posts); 0, or
 * -1 when it must go up now (no event: after a synchronisation). */
static int post_later(ipc_call_t *c, uint64_t word)
{
    xccl_curesult_t rc;
    if (XCCL_IPC_PEND == c->npend) {
        mca_coll_xccl_gpu_ipc_sync(c);   /* (more flags than events: no schedule posts as many) */
        mca_coll_xccl_gpu_ipc_drain_posts(c, 0);
    }
    const int k = (c->pend_head + c->npend) % XCCL_IPC_PEND;
    if (XCCL_CUDA_SUCCESS != (rc = c->cu->EventRecord(c->set->ev[1 + k], c->set->in))) {
        mca_coll_xccl_gpu_ipc_fail(c, xccl_cu_error("cuEventRecord", rc));
        mca_coll_xccl_gpu_ipc_sync(c);
        return -1;
    }
    c->pend[k] = word;
    c->npend++;
    return 0;
}

/* The flag goes up once what this rank queued before it is done: with
 * events, on the GPU (the event recorded after that work; the host flag
 * says it is recorded); in a nonblocking call, once a query says that
 * work is done; else after a synchronisation.  A failed step
 * still posts its flags: no peer waits forever; the error is this rank's
 * call's.  An event is recorded again only in a later call, once every
 * peer that waits for it has queued its wait: the schedules' later flags
 * (and the call's end) need every such peer. */
static int peer_post(void *ctx, uint32_t seq, uint32_t val)
{
    ipc_call_t *c = ctx;
    xccl_cuevent_t ev = flag_event(c, c->m->rank, val);
    xccl_curesult_t rc;
    if (NULL == ev && c->async) {
        mca_coll_xccl_gpu_ipc_flush(c);
        if (0 == post_later(c, ((uint64_t) seq << 32) | val)) {
            return 0;
        }
    } else if (NULL == ev) {
        mca_coll_xccl_gpu_ipc_sync(c);
    } else {
        mca_coll_xccl_gpu_ipc_flush(c);
        if (XCCL_CUDA_SUCCESS != (rc = c->cu->EventRecord(ev, c->set->in))) {
            mca_coll_xccl_gpu_ipc_fail(c, xccl_cu_error("cuEventRecord", rc));
            mca_coll_xccl_gpu_ipc_sync(c);   /* the flag must not come early */
        }
        c->q.queued = 1;
    }
    __atomic_store_n(&c->ipc->slot[c->m->rank]->flag, ((uint64_t) seq << 32) | val,
                     __ATOMIC_RELEASE);
    return 0;
}

/* Once the peer's flag is up: with events, the call's stream waits for
 * the peer's work before it (what the step queues next follows). */
static int peer_test(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    ipc_call_t *c = ctx;
    if (c->npend > 0) {
        mca_coll_xccl_gpu_ipc_drain_posts(c, 0);
    }
    const uint64_t f = __atomic_load_n(&c->ipc->slot[peer]->flag, __ATOMIC_ACQUIRE);
    const uint32_t fseq = (uint32_t) (f >> 32), fval = (uint32_t) f;
    if (!((int32_t) (fseq - seq) > 0 || (fseq == seq && fval >= val))) {
        return 0;
    }
    xccl_cuevent_t ev = flag_event(c, peer, val);
    xccl_curesult_t rc;
    if (NULL != ev) {
        mca_coll_xccl_gpu_ipc_flush(c);   /* the earlier steps' work need not wait */
        if (XCCL_CUDA_SUCCESS != (rc = c->cu->StreamWaitEvent(c->set->in, ev, 0))) {
            mca_coll_xccl_gpu_ipc_fail(c, xccl_cu_error("cuStreamWaitEvent", rc));
        }
        c->q.queued = 1;
    }
    return 1;
}

/* The schedule's copies and reductions, coalesced on the call's stream
 * (gpu/xccl_gpu_queue.h). */
static int call_copy(void *ctx, void *dst, const void *src, size_t len)
{
    xccl_gpu_queue_copy(&((ipc_call_t *) ctx)->q, dst, src, len);
    return 0;
}

static int call_reduce(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    xccl_gpu_queue_reduce(&((ipc_call_t *) ctx)->q, dst, a, b, count);
    return 0;
}

void mca_coll_xccl_gpu_ipc_set_hooks(ipc_call_t *call, char *const dev[2], const xccl_sched_t *s,
                                     mca_coll_xccl_exec_hooks_t *hooks)
{
    call->peer = (xccl_peer_t) { .ctx = call, .buf = peer_buf, .post = peer_post, .test = peer_test };
    hooks->bufs[XCCL_BUF_SEND] = dev[XCCL_BUF_SEND];
    hooks->bufs[XCCL_BUF_RECV] = dev[XCCL_BUF_RECV];
    hooks->bufs[XCCL_BUF_SCRATCH] = s->scratch_bytes ? call->set->dev : NULL;
    hooks->copy = call_copy;
    hooks->copy_ctx = call;
    hooks->reduce = call_reduce;
    hooks->reduce_ctx = call;
    hooks->peer = &call->peer;
}

/* ------------------------------------------------------------ the call's stream and mappings */

/* The peers read this rank's buffers on their own streams, which know
 * nothing of this process's work: what the application queued before the
 * call (a fill on the legacy default stream - even cuMemcpyHtoD from
 * pageable memory may return before its data is on the device - or on a
 * blocking stream) must have run before the first flag says "inputs
 * there".  An event on the legacy default stream follows all of it; the
 * call's stream waits for that event, and the first flag's
 * synchronisation of the call's stream (peer_post) so waits for it too.
 * (Work on the application's non-blocking streams must be complete before
 * the call, as with any CUDA-aware MPI.)  With the context current. */
int mca_coll_xccl_gpu_ipc_mark_user_work(ipc_call_t *call)
{
    const char *error = NULL;
    xccl_curesult_t rc;
    if (0 != xccl_gpu_set_events(call->set, call->async ? XCCL_IPC_SET_EVENTS : 1, &error)) {
        mca_coll_xccl_gpu_ipc_fail(call, error);
    } else if (XCCL_CUDA_SUCCESS != (rc = call->cu->EventRecord(call->set->ev[0], XCCL_CU_STREAM_LEGACY))) {
        mca_coll_xccl_gpu_ipc_fail(call, xccl_cu_error("cuEventRecord", rc));
    }
    return '\0' == call->error[0];
}

static int after_user_work(ipc_call_t *call)
{
    xccl_curesult_t rc;
    if (XCCL_CUDA_SUCCESS != (rc = call->cu->StreamWaitEvent(call->set->in, call->set->ev[0], 0))) {
        mca_coll_xccl_gpu_ipc_fail(call, xccl_cu_error("cuStreamWaitEvent", rc));
    }
    call->q.queued = 1;                /* the first flag synchronises */
    return '\0' == call->error[0];
}

/* The call's stream and device scratch (a set of its context, which is
 * current), for a schedule needing scratch bytes: 1, or 0. */
int mca_coll_xccl_gpu_ipc_take_set(ipc_call_t *call, size_t scratch)
{
    const char *error = NULL;
    call->set = xccl_gpu_set_get((xccl_cucontext_t) call->ctx, 0,
                                 mca_coll_xccl_component.gpu_pool_bytes, &error);
    if (NULL == call->set || (scratch && 0 != xccl_gpu_set_scratch(call->set, scratch, &error))) {
        mca_coll_xccl_gpu_ipc_fail(call, error ? error : "no stream set");
        return 0;
    }
    return 1;
}

/* Round 2's part: maps every peer buffer the schedule names, and takes the
 * stream (and device scratch) of the call.  In alltoallv a peer's SEND is
 * mapped where its block for this rank begins, as the peer published it
 * in round 1 (xccl_build_alltoallv_mesh), and the block's size there must
 * be what this rank receives (else no rank takes the call). */
int mca_coll_xccl_gpu_ipc_map_peers(mca_coll_xccl_module_t *m, ipc_call_t *call,
                                    const xccl_sched_t *s)
{
    struct mca_coll_xccl_ipc *ipc = call->ipc;
    int ok = 1;
    memset(ipc->mapped, 0, 2 * (size_t) m->size * sizeof(char *));
    if (0 != mca_coll_xccl_gpu_push(call->ctx)) {
        return 0;
    }
    xccl_ipc_cache_begin(&ipc->maps);    /* this call's mappings stay */
    for (size_t i = 0; ok && i < s->nacts; i++) {
        const xccl_ref_t refs[3] = { s->acts[i].a, s->acts[i].b, s->acts[i].dst };
        for (int k = 0; ok && k < 3; k++) {
            const int q = xccl_ref_owner(refs[k]);
            if (q < 0 || q == m->rank || refs[k].buf > XCCL_BUF_RECV ||
                NULL != ipc->mapped[2 * q + refs[k].buf]) {
                continue;
            }
            const ipc_buf_t *b = &ipc->slot[q]->buf[refs[k].buf];
            char *base = b->valid ? xccl_ipc_cache_get(&ipc->maps, q, b->buffer_id, &b->handle,
                                                       call->ctx)
                                  : NULL;
            size_t at = b->offset;
            if (NULL != call->a2av && XCCL_BUF_SEND == refs[k].buf) {
                const ipc_block_t *blk = &ipc->slot[q]->sent[m->rank];
                at += blk->off;
                base = blk->bytes == call->a2av[2 * (size_t) m->size + (size_t) q] ? base : NULL;
            }
            ok = NULL != base;
            ipc->mapped[2 * q + refs[k].buf] = ok ? base + at : NULL;
        }
    }
    if (ok && NULL == call->set) {     /* (a nonblocking call took its set at the start) */
        ok = mca_coll_xccl_gpu_ipc_take_set(call, s->scratch_bytes) &&
             mca_coll_xccl_gpu_ipc_mark_user_work(call);
    }
    if (ok) {
        xccl_gpu_queue_init(&call->q, call->set->in, call->dt, call->op,
                            s->scratch_bytes ? call->set->dev : NULL, call->set->dev_bytes,
                            call->ipc->no_batch);
        ok = after_user_work(call);
    }
    mca_coll_xccl_gpu_pop();
    return ok;
}

void mca_coll_xccl_gpu_ipc_release_set(ipc_call_t *call, int bad)
{
    if (NULL == call->set) {
        return;
    }
    int pushed = 0 == mca_coll_xccl_gpu_push(call->ctx);
    xccl_gpu_set_put(call->set, bad);
    if (pushed) {
        mca_coll_xccl_gpu_pop();
    }
    call->set = NULL;
}
