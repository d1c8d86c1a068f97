/*
 * CUDA IPC peer access: one call's peer.  Its xccl_peer_t (the peers'
 * buffers are CUDA IPC mappings, the flags words of the slots, with an
 * interprocess event each where the ranks are on several GPUs), its
 * copies and reductions queued on a stream of the buffers' CUDA context;
 * this rank's part at the start of a call (whether it can take part, the
 * exports of what its peers read), and round 2's mappings of the peers'
 * buffers (coll_xccl_gpu_ipc_int.h says what the rounds are).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll_xccl_gpu_ipc_int.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"

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

/* ------------------------------------------------------------ this rank's part */

/* Exports device buffer p (its handle, once per allocation) as what the
 * peers read for buffer k; 0 if p is not device memory of c->ctx.  mem:
 * p's allocation as classified already (a persistent request's), or NULL
 * (the driver is asked). */
static int export_buf(ipc_call_t *c, ipc_buf_t out[2], const void *p, int k,
                      const xccl_mem_info_t *mem)
{
    xccl_mem_info_t info;
    ipc_buf_t *b = &out[k];
    if (NULL != mem) {
        info = *mem;
    } else {
        xccl_gpu_classify(p, &info);
    }
    if (XCCL_MEM_DEVICE != info.type || info.ctx != c->ctx) {
        return 0;
    }
    const xccl_cuipc_handle_t *known = xccl_ipc_exports_find(&c->ipc->exports, info.base,
                                                             info.buffer_id);
    if (known) {
        b->handle = *known;
    } else if (0 != mca_coll_xccl_gpu_push(info.ctx)) {
        return 0;
    } else {
        int got = XCCL_CUDA_SUCCESS ==
                  c->cu->IpcGetMemHandle(&b->handle, (xccl_cudeviceptr_t) (uintptr_t) info.base);
        mca_coll_xccl_gpu_pop();
        if (!got) {
            return 0;
        }
        xccl_ipc_exports_add(&c->ipc->exports, info.base, info.buffer_id, &b->handle);
    }
    b->buffer_id = info.buffer_id;
    b->offset = (uint64_t) ((const char *) p - (const char *) info.base);
    b->valid = 1;
    return 1;
}

/* Whether ctx is a context of the communicator's one device. */
static int on_the_device(struct mca_coll_xccl_ipc *ipc, void *ctx)
{
    char pci[sizeof(ipc->pci)];
    if (ctx == ipc->device_ctx) {
        return 1;
    }
    if (0 != mca_coll_xccl_gpu_push(ctx)) {
        return 0;
    }
    const int same = 0 == xccl_gpu_current_pci(pci, sizeof(pci)) && 0 == strcmp(pci, ipc->pci);
    mca_coll_xccl_gpu_pop();
    if (same) {
        ipc->device_ctx = ctx;
    }
    return same;
}

/* Buffer p (mem: as classified already, or NULL) is device memory of
 * call->ctx, which the first such buffer sets: 1, or 0. */
static int in_call_ctx(ipc_call_t *call, const void *p, const xccl_mem_info_t *mem)
{
    xccl_mem_info_t info;
    if (NULL != mem) {
        info = *mem;
    } else {
        xccl_gpu_classify(p, &info);
    }
    if (XCCL_MEM_DEVICE != info.type || (NULL != call->ctx && info.ctx != call->ctx)) {
        return 0;
    }
    call->ctx = info.ctx;
    return 1;
}

/* The reduction kernels load into the call's context (once), or this
 * rank is out (said at verbose 2). */
static int kernels_loaded(const mca_coll_xccl_call_t *c, const ipc_call_t *call)
{
    const char *why = NULL;
    int ok = 0 == mca_coll_xccl_gpu_push(call->ctx);
    if (ok) {
        ok = 0 == xccl_gpu_kernels_load(&why);
        mca_coll_xccl_gpu_pop();
    }
    if (!ok) {
        mca_coll_xccl_log(2, "%s comm=%u rank=%d: no cuda ipc reduction: %s", xccl_coll_name(c->coll),
                          c->m->cid, c->m->world_rank, why ? why : "cuCtxPushCurrent failed");
    }
    return ok;
}

/* Whether the GPU reduces c's type and op on these buffers (aligned for
 * its kernel); sets call's type and op. */
static int reduction_on_device(const mca_coll_xccl_call_t *c, ipc_call_t *call, char *const dev[2])
{
    if (NULL == c->red.kernel ||
        !xccl_gpu_reduce_supported((xccl_dtype_t) c->red.xdt, (xccl_op_t) c->red.xop)) {
        return 0;
    }
    call->dt = (xccl_dtype_t) c->red.xdt;
    call->op = (xccl_op_t) c->red.xop;
    return 0 == (((uintptr_t) dev[0] | (uintptr_t) dev[1]) & (xccl_gpu_reduce_align(call->dt) - 1));
}

/* own_part of the further collectives (reduce, allgatherv, gather(v),
 * scatter(v); algos/xccl_build.h): the buffers this rank's schedule
 * touches (its own block's; at the root every block's side), each device
 * memory of one context, and those its peers reach: a rank other than
 * the root lends the root its SEND (reduce, gather(v)) or RECV
 * (scatter(v)); in allgatherv every rank lends its SEND ("mesh"; in
 * place its RECV, where its block is), or its SEND and RECV to rank 0
 * ("leader").  A buffer that is not significant here (NULL, MPI_IN_PLACE,
 * an empty block) is never looked at.  A rank that touches no buffer at
 * all (an empty block of a v form) takes the context of the
 * communicator's flag events or of its device, where known. */
static int further_part(const mca_coll_xccl_call_t *c, ipc_call_t *call, ipc_buf_t out[2], int leader,
                        char *dev[2])
{
    const int me = c->m->rank;
    const xccl_coll_t coll = c->coll;
    const int scatter = XCCL_COLL_SCATTER == coll || XCCL_COLL_SCATTERV == coll;
    const int agv = XCCL_COLL_ALLGATHERV == coll;
    const int root = agv ? (leader >= 0 ? 0 : -1) : c->root;
    const size_t own = XCCL_COLL_REDUCE == coll ? c->bytes
                       : XCCL_COLL_GATHER == coll || XCCL_COLL_SCATTER == coll ? c->args.block
                                                                                : c->args.vec[me];
    char *s = NULL == c->sbuf || MPI_IN_PLACE == c->sbuf
                  ? NULL : (char *) c->sbuf + mca_coll_xccl_true_lb(c->sdtype);
    char *r = NULL == c->rbuf || MPI_IN_PLACE == c->rbuf
                  ? NULL : (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
    /* SEND lies in rbuf where it is RECV (in place); c->mem: sbuf's and
     * rbuf's allocations, classified at a persistent request's init */
    const int s_in_r = c->in_place && !scatter;
    dev[XCCL_BUF_SEND] = !s_in_r ? s : XCCL_COLL_REDUCE == coll ? r : NULL;
    dev[XCCL_BUF_RECV] = r;
    const xccl_mem_info_t *mem_r = NULL != c->mem ? &c->mem[1] : NULL;
    const xccl_mem_info_t *mem_s = NULL == c->mem ? NULL : s_in_r ? mem_r : &c->mem[0];
    int need_s, need_r, lend_s = 0, lend_r = 0;
    if (me == root) {
        need_s = scatter ? c->sn > 0 : !c->in_place && own > 0;
        need_r = scatter ? !c->in_place && own > 0 : c->rn > 0;
    } else if (agv) {
        need_s = lend_s = own > 0 && !c->in_place;
        need_r = c->rn > 0;
        lend_r = need_r && (leader >= 0 || (c->in_place && own > 0));   /* (in place: its block) */
    } else {
        need_s = lend_s = !scatter && own > 0;
        need_r = lend_r = scatter && own > 0;
    }
    memset(out, 0, 2 * sizeof(*out));
    call->ctx = NULL;
    if (NULL == call->cu) {
        return 0;
    }
    if (c->reduction) {
        if (!reduction_on_device(c, call, dev)) {
            return 0;
        }
    } else if ((need_s && !mca_coll_xccl_is_contiguous(c->sdtype, c->sn)) ||
               (need_r && !mca_coll_xccl_is_contiguous(c->rdtype, c->rn))) {
        return 0;
    }
    if ((need_r && !in_call_ctx(call, r, mem_r)) || (need_s && !in_call_ctx(call, dev[XCCL_BUF_SEND], mem_s))) {
        return 0;
    }
    if (NULL == call->ctx) {
        call->ctx = NULL != call->ipc->ev ? call->ipc->ev_ctx : call->ipc->device_ctx;
        if (NULL == call->ctx) {
            return 0;
        }
    }
    if ((leader >= 0 && !on_the_device(call->ipc, call->ctx)) ||
        (NULL != call->ipc->ev && call->ctx != call->ipc->ev_ctx)) {
        return 0;
    }
    if ((lend_s && !export_buf(call, out, dev[XCCL_BUF_SEND], XCCL_BUF_SEND, mem_s)) ||
        (lend_r && !export_buf(call, out, r, XCCL_BUF_RECV, mem_r))) {
        return 0;
    }
    if (c->reduction && me == root && !kernels_loaded(c, call)) {
        return 0;
    }
    return 1;
}

/* The buffers of the schedule (SEND, RECV; see algos/xccl_build.h) at
 * dev[], in the device memory of one context, and whether this rank can
 * take part: every buffer of one context (in the leader form, on the one
 * device), contiguous, a GPU kernel for a reduction (loaded, buffers
 * aligned).  Exports what its peers read or write: in the mesh form the
 * inputs, allreduce's reduced slices and the bcast root's buffer; in the
 * leader form (leader >= 0) every buffer of the others. */
int mca_coll_xccl_gpu_ipc_own_part(const mca_coll_xccl_call_t *c, ipc_call_t *call,
                                   ipc_buf_t out[2], int leader, char *dev[2])
{
    xccl_mem_info_t info;
    const int me = c->m->rank;
    if (!xccl_coll_peer(c->coll)) {
        return further_part(c, call, out, leader, dev);
    }
    char *r = (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
    dev[XCCL_BUF_RECV] = r;
    if (XCCL_COLL_BCAST == c->coll) {
        dev[XCCL_BUF_SEND] = r;
    } else if (c->in_place) {
        dev[XCCL_BUF_SEND] = XCCL_COLL_ALLGATHER == c->coll ? r + (size_t) me * c->args.block : r;
    } else {
        dev[XCCL_BUF_SEND] = (char *) c->sbuf + mca_coll_xccl_true_lb(c->sdtype);
    }
    memset(out, 0, 2 * sizeof(*out));
    if (NULL == call->cu) {
        return 0;
    }
    if (c->reduction) {
        if (!reduction_on_device(c, call, dev)) {
            return 0;
        }
    } else if (!mca_coll_xccl_is_contiguous(c->rdtype, c->rn) ||
               (XCCL_COLL_BCAST != c->coll && !c->in_place &&
                !mca_coll_xccl_is_contiguous(c->sdtype, c->sn))) {
        return 0;
    }
    /* c->mem: sbuf's and rbuf's allocations, classified at a persistent
     * request's init; SEND lies in rbuf's where it is RECV or in place */
    const xccl_mem_info_t *mem_r = NULL, *mem_s = NULL;
    if (NULL != c->mem) {
        mem_r = &c->mem[1];
        mem_s = XCCL_COLL_BCAST == c->coll || c->in_place ? mem_r : &c->mem[0];
        info = *mem_r;
    } else {
        xccl_gpu_classify(r, &info);
    }
    if (XCCL_MEM_DEVICE != info.type) {
        return 0;
    }
    call->ctx = info.ctx;
    if ((leader >= 0 && !on_the_device(call->ipc, call->ctx)) ||
        (NULL != call->ipc->ev && call->ctx != call->ipc->ev_ctx)) {
        return 0;
    }
    int ok = 1;
    const int send = leader >= 0 ? me != leader : 1,
              recv = leader >= 0 ? me != leader
                                 : XCCL_COLL_ALLREDUCE == c->coll || (XCCL_COLL_BCAST == c->coll && me == c->root);
    if (XCCL_COLL_BCAST != c->coll && send) {
        ok = export_buf(call, out, dev[XCCL_BUF_SEND], XCCL_BUF_SEND, mem_s);
    }
    if (ok && recv) {
        ok = export_buf(call, out, r, XCCL_BUF_RECV, mem_r);
    }
    if (ok && c->reduction && (leader < 0 || me == leader)) {
        ok = kernels_loaded(c, call);
    }
    return ok;
}

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
 * stream (and device scratch) of the call. */
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
            ok = NULL != base;
            ipc->mapped[2 * q + refs[k].buf] = ok ? base + b->offset : NULL;
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
