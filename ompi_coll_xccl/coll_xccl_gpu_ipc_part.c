/*
 * CUDA IPC peer access: this rank's part at the start of a call, before
 * round 1 (coll_xccl_gpu_ipc_int.h): whether it can take part (its
 * buffers device memory of one context, contiguous, a GPU kernel for a
 * reduction) and the exports of the buffers its peers read or write.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <string.h>

#include "coll_xccl_gpu_ipc_int.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"

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

/* own_part of the further collectives (reduce, allgatherv, alltoallv,
 * gather(v), scatter(v); algos/xccl_build.h): the buffers this rank's
 * schedule touches (its own block's; at the root every block's side),
 * each device memory of one context, and those its peers reach: a rank
 * other than the root lends the root its SEND (reduce, gather(v)) or RECV
 * (scatter(v)); in allgatherv every rank lends its SEND ("mesh"; in
 * place its RECV, where its block is), or its SEND and RECV to rank 0
 * ("leader"); in alltoallv every rank with something to send lends its
 * SEND (and says in round 1 where each block lies: call->a2av).  A
 * buffer that is not significant here (NULL, MPI_IN_PLACE, an empty
 * block) is never looked at.  A rank that touches no buffer at all (an
 * empty block of a v form) takes the context of the communicator's flag
 * events or of its device, where known. */
static int further_part(const mca_coll_xccl_call_t *c, ipc_call_t *call, ipc_buf_t out[2], int leader,
                        char *dev[2])
{
    const int me = c->m->rank;
    const xccl_coll_t coll = c->coll;
    const int scatter = XCCL_COLL_SCATTER == coll || XCCL_COLL_SCATTERV == coll;
    const int agv = XCCL_COLL_ALLGATHERV == coll, a2av = XCCL_COLL_ALLTOALLV == coll;
    const int root = agv ? (leader >= 0 ? 0 : -1) : a2av ? -1 : c->root;
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
    } else if (a2av) {
        need_s = lend_s = c->sn > 0;   /* (never in place here: ipc_wanted) */
        need_r = c->rn > 0;
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
    call->a2av = a2av ? c->args.vec : NULL;
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
