/*
 * Device buffers.  Where the transport moves host memory only (Debian's
 * UCX has no CUDA support): host copies of the buffers' spans, in pinned
 * memory of a staging set of the buffer's CUDA context.  Where UCX moves
 * CUDA memory: the device pointers themselves, with the schedule's copies
 * and reductions on the GPU.
 *
 * The call on the host copies is exactly the call a rank with host buffers
 * makes (same path, same algorithm, same schedule), so ranks may mix device
 * and host buffers, and direct and staged ranks.  When that call runs a
 * schedule, the copies overlap it (xccl_stage_plan): each step waits only
 * for the pieces it touches, each piece goes back once the schedule has
 * written it for the last time.  The waits are local (a copy completes
 * whatever the peers do), so they cannot deadlock against ranks that do
 * not stage.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <string.h>

#include "coll_xccl.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"
#include "gpu/xccl_ipc_cache.h"

enum { TO_HOST, FROM_HOST, DEVICE_TO_DEVICE };

static const char *copy(const xccl_cu_api_t *cu, void *dst, const void *src, size_t bytes,
                        int dir, xccl_custream_t stream)
{
    xccl_cu_memcpy2d_t d;
    memset(&d, 0, sizeof(d));
    /* UNIFIED: the driver tells device, managed and host memory apart, so a
     * host buffer mixed with a device one works too. */
    if (DEVICE_TO_DEVICE == dir) {
        d.srcMemoryType = d.dstMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.srcDevice = (xccl_cudeviceptr_t) (uintptr_t) src;
        d.dstDevice = (xccl_cudeviceptr_t) (uintptr_t) dst;
    } else if (TO_HOST == dir) {
        d.srcMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.srcDevice = (xccl_cudeviceptr_t) (uintptr_t) src;
        d.dstMemoryType = XCCL_CU_MEMORYTYPE_HOST;
        d.dstHost = dst;
    } else {
        d.srcMemoryType = XCCL_CU_MEMORYTYPE_HOST;
        d.srcHost = src;
        d.dstMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.dstDevice = (xccl_cudeviceptr_t) (uintptr_t) dst;
    }
    d.srcPitch = d.dstPitch = d.WidthInBytes = bytes;
    d.Height = 1;
    xccl_curesult_t rc = cu->Memcpy2DAsync(&d, stream);
    return XCCL_CUDA_SUCCESS == rc ? NULL : xccl_cu_error("cuMemcpy2DAsync", rc);
}

static const char *sync_stream(const xccl_cu_api_t *cu, xccl_custream_t stream)
{
    xccl_curesult_t rc = cu->StreamSynchronize(stream);
    return XCCL_CUDA_SUCCESS == rc ? NULL : xccl_cu_error("cuStreamSynchronize", rc);
}

int mca_coll_xccl_gpu_stage_in(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                               mca_coll_xccl_gpu_stage_t *st, void *ctx, const void *sdev,
                               size_t sspan, void **hs, void *rdev, size_t rspan, int copy_r,
                               int copy_out, void **hr)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const size_t soff = (rspan + 63) & ~(size_t) 63;    /* RECV first, SEND 64-byte aligned */
    const char *error = NULL;
    xccl_cucontext_t popped;

    memset(st, 0, sizeof(*st));
    st->ctx = ctx;
    if (NULL == cu) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "device buffer without a cuda driver");
    }
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) ctx)) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    st->set = xccl_gpu_set_get((xccl_cucontext_t) ctx, soff + sspan,
                               mca_coll_xccl_component.gpu_pool_bytes, &error);
    cu->CtxPopCurrent(&popped);
    if (NULL == st->set) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error);
    }
    st->hr = st->set->host;
    st->hs = st->hr + soff;
    st->sdev = sdev;
    st->sspan = sdev ? sspan : 0;
    st->rdev = rdev;
    st->rspan = rspan;
    st->copy_r = copy_r;
    st->copy_out = copy_out;
    *hr = st->hr;
    *hs = st->hs;
    return MPI_SUCCESS;
}

int mca_coll_xccl_gpu_stage_fill(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                 mca_coll_xccl_gpu_stage_t *st)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const char *error = NULL;
    xccl_cucontext_t popped;
    if (NULL == st->set || st->filled || st->pipe || st->direct) {
        return MPI_SUCCESS;
    }
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) st->ctx)) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    /* A blocking stream: after the application's work on the legacy
     * default stream.  Work on its own non-blocking streams must be
     * complete before the call, as with any CUDA-aware MPI. */
    if (st->sspan) {
        error = copy(cu, st->hs, st->sdev, st->sspan, TO_HOST, st->set->in);
    }
    if (NULL == error && st->copy_r && st->rspan) {
        error = copy(cu, st->hr, st->rdev, st->rspan, TO_HOST, st->set->in);
    }
    if (NULL == error) {
        error = sync_stream(cu, st->set->in);
    }
    cu->CtxPopCurrent(&popped);
    st->filled = NULL == error;
    return error ? mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error) : MPI_SUCCESS;
}

/* ------------------------------------------------------------ a call's executor hooks */

/* What the executor's hooks of one call share (pipelined staging, and a
 * schedule run on the device buffers): the stage's context and set (the
 * stage itself may be copied: a nonblocking call keeps it in its
 * request), the gate, and the first driver error.  The hooks push the
 * context around their driver calls: they run from whatever progresses
 * the call (another thread, for a nonblocking one), so the error text is
 * copied. */
typedef struct {
    void *ctx;
    xccl_gpu_set_t *set;
    const char *what;                /* names the hooks in the log */
    xccl_gate_t gate;
    char error[200];                 /* the first driver error ("": none) */
} call_hooks_t;

static int hooks_fail(call_hooks_t *h, const char *error)
{
    if ('\0' == h->error[0]) {
        snprintf(h->error, sizeof(h->error), "%s", error);
        mca_coll_xccl_log(1, "%s: %s", h->what, error);
    }
    return -1;
}

/* 1 once ev has completed (ev NULL: all work queued on stream), 0 not
 * yet, -1 error (kept). */
static int hooks_done(call_hooks_t *h, xccl_cuevent_t ev, xccl_custream_t stream)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) h->ctx)) {
        return hooks_fail(h, "cuCtxPushCurrent failed");
    }
    xccl_curesult_t rc = ev ? cu->EventQuery(ev) : cu->StreamQuery(stream);
    cu->CtxPopCurrent(&popped);
    if (XCCL_CUDA_SUCCESS == rc) {
        return 1;
    }
    return XCCL_CUDA_ERROR_NOT_READY == rc
               ? 0 : hooks_fail(h, xccl_cu_error(ev ? "cuEventQuery" : "cuStreamQuery", rc));
}

/* ------------------------------------------------------------ pipelined staging */

/* The copies of one staged call that runs a schedule: in pieces on the
 * set's "in" stream, all queued at once in the order the schedule first
 * touches them, an event after each; a step runs once the event of the
 * last piece it needs has completed.  Pieces go back on the "out" stream
 * after the step that last writes them. */
enum { REG_SEND, REG_RECV };

struct mca_coll_xccl_gpu_pipe {
    call_hooks_t h;
    xccl_stage_plan_t plan;
    xccl_stage_region_t reg[2];
    const char *dev[2];              /* device address of each region */
    size_t arrived;                  /* copies in known complete */
};

static int pipe_ready(void *ctx, size_t step)
{
    struct mca_coll_xccl_gpu_pipe *p = ctx;
    const size_t need = p->plan.need_in[step];
    if (p->arrived >= need) {
        return 1;
    }
    int rc = hooks_done(&p->h, p->h.set->ev[need - 1], NULL);
    if (1 == rc) {
        p->arrived = need;             /* one stream: everything before it too */
    }
    return rc;
}

static int pipe_done(void *ctx, size_t step)
{
    struct mca_coll_xccl_gpu_pipe *p = ctx;
    const size_t first = p->plan.out_start[step], last = p->plan.out_start[step + 1];
    if (first == last) {
        return 0;
    }
    const xccl_cu_api_t *cu = xccl_cu();
    const char *error = NULL;
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) p->h.ctx)) {
        return hooks_fail(&p->h, "cuCtxPushCurrent failed");
    }
    for (size_t i = first; i < last && NULL == error; i++) {
        const xccl_stage_piece_t *pc = &p->plan.out[i];
        error = copy(cu, (char *) p->dev[pc->region] + pc->off,
                     (const char *) p->reg[pc->region].base + pc->off, pc->len, FROM_HOST,
                     p->h.set->out);
    }
    cu->CtxPopCurrent(&popped);
    return error ? hooks_fail(&p->h, error) : 0;
}

static int pipe_drain(void *ctx)
{
    struct mca_coll_xccl_gpu_pipe *p = ctx;
    return hooks_done(&p->h, NULL, p->h.set->out);
}

/* Max pieces per region: bounds the events and copies of one call. */
#define XCCL_STAGE_MAX_PIECES 256

/* ------------------------------------------------------------ device pointers to UCX */

/* A schedule run on the device buffers themselves: UCX moves them, the
 * local copies and reductions are queued on the set's "in" stream, and an
 * event after each step's queued work holds the next step back until it
 * has run (the next step's sends read it, its receives may overwrite what
 * it reads).  A first event, recorded before anything, orders the call
 * after the application's work on the legacy default stream, as staging
 * does. */
struct mca_coll_xccl_gpu_direct {
    call_hooks_t h;
    int dt, op;                      /* the reduction's GPU kernel */
    int queued;                      /* work queued since the last event */
    int pending;                     /* the event may not have completed */
    size_t copies, reductions;
};

int mca_coll_xccl_gpu_direct_wanted(void)
{
    const int d = mca_coll_xccl_component.gpu_direct;
    return 1 == d || (d < 0 && xccl_ucx_cuda_memory());
}

static int direct_copy(void *ctx, void *dst, const void *src, size_t len)
{
    struct mca_coll_xccl_gpu_direct *d = ctx;
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) d->h.ctx)) {
        return hooks_fail(&d->h, "cuCtxPushCurrent failed");
    }
    const char *error = copy(cu, dst, src, len, DEVICE_TO_DEVICE, d->h.set->in);
    cu->CtxPopCurrent(&popped);
    d->queued = 1;
    d->copies++;
    return error ? hooks_fail(&d->h, error) : 0;
}

static int direct_reduce(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    struct mca_coll_xccl_gpu_direct *d = ctx;
    const xccl_cu_api_t *cu = xccl_cu();
    const void *srcs[2] = { a, b };
    const char *error = NULL;
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) d->h.ctx)) {
        return hooks_fail(&d->h, "cuCtxPushCurrent failed");
    }
    int rc = xccl_gpu_reduce((xccl_dtype_t) d->dt, (xccl_op_t) d->op, dst, srcs, 2, count,
                             d->h.set->in, &error);
    cu->CtxPopCurrent(&popped);
    d->queued = 1;
    d->reductions++;
    return 0 == rc ? 0 : hooks_fail(&d->h, error ? error : "xccl_gpu_reduce failed");
}

/* 1 once the last event has completed, 0 not yet, -1 error.  Before each
 * step, and at the drain. */
static int direct_wait(void *ctx, size_t step)
{
    struct mca_coll_xccl_gpu_direct *d = ctx;
    (void) step;
    int rc = d->pending ? hooks_done(&d->h, d->h.set->ev[0], NULL) : 1;
    if (1 == rc) {
        d->pending = 0;
    }
    return rc;
}

static int direct_drain(void *ctx)
{
    return direct_wait(ctx, 0);
}

/* Records the event after what is queued. */
static int direct_record(struct mca_coll_xccl_gpu_direct *d)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) d->h.ctx)) {
        return hooks_fail(&d->h, "cuCtxPushCurrent failed");
    }
    xccl_curesult_t rc = cu->EventRecord(d->h.set->ev[0], d->h.set->in);
    cu->CtxPopCurrent(&popped);
    if (XCCL_CUDA_SUCCESS != rc) {
        return hooks_fail(&d->h, xccl_cu_error("cuEventRecord", rc));
    }
    d->queued = 0;
    d->pending = 1;
    return 0;
}

static int direct_done(void *ctx, size_t step)
{
    struct mca_coll_xccl_gpu_direct *d = ctx;
    (void) step;
    return d->queued ? direct_record(d) : 0;
}

/* Where host copy c lies in the span of host bytes at host, the same
 * place at dev; NULL if it is outside (or there is no such buffer). */
static void *span_to_device(const char *c, const char *host, size_t span, const char *dev)
{
    return NULL != dev && c >= host && c <= host + span ? (char *) dev + (c - host) : NULL;
}

/* The device address of host copy p, looked up first in the SEND copy
 * (is_send) or the RECV copy (a zero-length span may end where the other
 * begins); 0, or -1 if p is in neither.  NULL stays NULL. */
static int to_device(const mca_coll_xccl_gpu_stage_t *st, const void *p, int is_send, void **out)
{
    if (NULL == p) {
        *out = NULL;
        return 0;
    }
    void *s = span_to_device(p, st->hs, st->sspan, st->sdev);
    void *r = span_to_device(p, st->hr, st->rspan, st->rdev);
    *out = is_send ? (s ? s : r) : (r ? r : s);
    return NULL != *out ? 0 : -1;
}

/* Loads the GPU kernels into ctx: NULL, or why not. */
static const char *load_kernels(void *ctx)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const char *why = NULL;
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) ctx)) {
        return "cuCtxPushCurrent failed";
    }
    if (0 != xccl_gpu_kernels_load(&why) && NULL == why) {
        why = "the kernels did not load";
    }
    cu->CtxPopCurrent(&popped);
    return why;
}

/* Runs s on the device buffers (st->direct set), or leaves st alone with
 * the reason logged (the caller stages instead). */
static int direct_gate(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                       mca_coll_xccl_gpu_stage_t *st, const xccl_sched_t *s, int gpu_dt,
                       int gpu_op, mca_coll_xccl_exec_hooks_t *hooks)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const char *why = NULL, *error = NULL;
    void *dev[2] = { NULL, NULL };
    int reduces = 0;
    for (size_t i = 0; i < s->nacts && !reduces; i++) {
        reduces = XCCL_ACT_REDUCE == s->acts[i].kind;
    }
    if (!st->all_device) {
        why = "a buffer of the call is host memory";
    } else if (0 != to_device(st, hooks->bufs[XCCL_BUF_SEND], 1, &dev[0]) ||
               0 != to_device(st, hooks->bufs[XCCL_BUF_RECV], 0, &dev[1])) {
        why = "a buffer outside the staged spans";
    } else if (reduces && (gpu_dt < 0 || gpu_op < 0 ||
                           !xccl_gpu_reduce_supported((xccl_dtype_t) gpu_dt, (xccl_op_t) gpu_op))) {
        why = "no GPU kernel for this type and op";
    } else if (reduces && (((uintptr_t) dev[0] | (uintptr_t) dev[1]) &
                           (xccl_gpu_reduce_align((xccl_dtype_t) gpu_dt) - 1))) {
        why = "a buffer not aligned to its element type";
    } else if (reduces) {
        why = load_kernels(st->ctx);
    }
    if (why) {
        mca_coll_xccl_log(2, "%s comm=%u rank=%d: device buffers staged, not straight to ucx: %s",
                          mca_coll_xccl_coll_name(coll), m->cid, m->world_rank, why);
        return MPI_SUCCESS;
    }

    struct mca_coll_xccl_gpu_direct *d = calloc(1, sizeof(*d));
    xccl_cucontext_t popped;
    if (NULL == d) {
        return mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
    }
    d->h.ctx = st->ctx;
    d->h.set = st->set;
    d->h.what = "device buffers straight to ucx";
    d->dt = gpu_dt;
    d->op = gpu_op;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) st->ctx)) {
        free(d);
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    if (0 == xccl_gpu_set_events(st->set, 1, &error) &&
        0 == xccl_gpu_set_scratch(st->set, s->scratch_bytes, &error)) {
        error = 0 == direct_record(d) ? NULL : d->h.error;
    }
    cu->CtxPopCurrent(&popped);
    /* From here on stage_out owns d (it waits for what was queued). */
    st->direct = d;
    if (error) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error);
    }
    d->h.gate = (xccl_gate_t) { d, direct_wait, direct_done, direct_drain };
    hooks->bufs[XCCL_BUF_SEND] = dev[0];
    hooks->bufs[XCCL_BUF_RECV] = dev[1];
    hooks->bufs[XCCL_BUF_SCRATCH] = s->scratch_bytes ? st->set->dev : NULL;
    hooks->gate = &d->h.gate;
    hooks->copy = direct_copy;
    hooks->copy_ctx = d;
    hooks->reduce = direct_reduce;
    hooks->reduce_ctx = d;
    mca_coll_xccl_log(2, "%s comm=%u rank=%d: device buffers straight to ucx, copies and "
                      "reductions on the gpu, %zu steps, %zu bytes of device scratch",
                      mca_coll_xccl_coll_name(coll), m->cid, m->world_rank, s->nsteps,
                      s->scratch_bytes);
    return MPI_SUCCESS;
}

int mca_coll_xccl_gpu_stage_gate(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                 mca_coll_xccl_gpu_stage_t *st, const xccl_sched_t *s, int gpu_dt,
                                 int gpu_op, mca_coll_xccl_exec_hooks_t *hooks)
{
    void *const *bufs = hooks->bufs;
    if (NULL == st->set || st->filled || st->pipe || st->direct) {
        return MPI_SUCCESS;
    }
    /* Only UCX moves device memory; the PML transport runs on the copies. */
    if (m->ucx && mca_coll_xccl_gpu_direct_wanted()) {
        int rc = direct_gate(m, coll, st, s, gpu_dt, gpu_op, hooks);
        if (MPI_SUCCESS != rc || NULL != st->direct) {
            return rc;
        }
    }
    if (0 == mca_coll_xccl_component.gpu_chunk_bytes) {
        return mca_coll_xccl_gpu_stage_fill(m, coll, st);
    }
    struct mca_coll_xccl_gpu_pipe *p = calloc(1, sizeof(*p));
    if (NULL == p) {
        return mca_coll_xccl_gpu_stage_fill(m, coll, st);
    }
    p->h.ctx = st->ctx;
    p->h.set = st->set;
    p->h.what = "staging pipeline";
    p->reg[REG_SEND] = (xccl_stage_region_t) { st->hs, st->sspan, 1, 0 };
    p->reg[REG_RECV] = (xccl_stage_region_t) { st->hr, st->rspan, st->copy_r, st->copy_out };
    p->dev[REG_SEND] = st->sdev;
    p->dev[REG_RECV] = st->rdev;
    if (0 != xccl_stage_plan(&p->plan, s, bufs, p->reg, 2, mca_coll_xccl_component.gpu_chunk_bytes,
                             XCCL_STAGE_MAX_PIECES)) {
        free(p);
        return mca_coll_xccl_gpu_stage_fill(m, coll, st);
    }

    const xccl_cu_api_t *cu = xccl_cu();
    const char *error = NULL;
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) st->ctx)) {
        xccl_stage_plan_fini(&p->plan);
        free(p);
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    if (0 == xccl_gpu_set_events(st->set, p->plan.nin, &error)) {
        for (size_t i = 0; i < p->plan.nin && NULL == error; i++) {
            const xccl_stage_piece_t *pc = &p->plan.in[i];
            error = copy(cu, (char *) p->reg[pc->region].base + pc->off,
                         p->dev[pc->region] + pc->off, pc->len, TO_HOST, st->set->in);
            xccl_curesult_t rc;
            if (NULL == error &&
                XCCL_CUDA_SUCCESS != (rc = cu->EventRecord(st->set->ev[i], st->set->in))) {
                error = xccl_cu_error("cuEventRecord", rc);
            }
        }
    }
    cu->CtxPopCurrent(&popped);
    /* From here on stage_out owns p (it waits for what was queued). */
    st->pipe = p;
    if (error) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error);
    }
    p->h.gate = (xccl_gate_t) { p, pipe_ready, pipe_done, pipe_drain };
    hooks->gate = &p->h.gate;
    mca_coll_xccl_log(2, "%s comm=%u rank=%d: staging pipelined: %zu copies in, %zu out, "
                      "pieces of %zu bytes, %zu steps", mca_coll_xccl_coll_name(coll), m->cid,
                      m->world_rank, p->plan.nin, p->plan.nout, p->plan.piece, s->nsteps);
    return MPI_SUCCESS;
}

int mca_coll_xccl_gpu_stage_out(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                mca_coll_xccl_gpu_stage_t *st, int ok)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const char *error = NULL;
    xccl_cucontext_t popped;
    int rc = MPI_SUCCESS;
    if (NULL == st->set) {
        return MPI_SUCCESS;
    }
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) st->ctx)) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    struct mca_coll_xccl_gpu_pipe *p = st->pipe;
    struct mca_coll_xccl_gpu_direct *d = st->direct;
    if (d) {
        /* The queued work must finish before the call returns. */
        const char *e1 = sync_stream(cu, st->set->in);
        error = d->h.error[0] ? d->h.error : e1;
        mca_coll_xccl_log(3, "%s comm=%u rank=%d: on the gpu: %zu copies, %zu reductions",
                          mca_coll_xccl_coll_name(coll), m->cid, m->world_rank, d->copies,
                          d->reductions);
    } else if (p) {
        /* What was queued must finish before the host memory is reused,
         * also after an error. */
        const char *e1 = sync_stream(cu, st->set->in);
        const char *e2 = sync_stream(cu, st->set->out);
        error = p->h.error[0] ? p->h.error : e1 ? e1 : e2;
    } else if (ok && st->filled && st->copy_out && st->rspan) {
        /* Filled for the fallback: all of RECV goes back.  (Never filled:
         * the host call touched no data, nothing to copy.) */
        error = copy(cu, st->rdev, st->hr, st->rspan, FROM_HOST, st->set->out);
        if (NULL == error) {
            error = sync_stream(cu, st->set->out);
        }
    }                          /* (stage_fill waited for its copies) */
    if (error) {
        rc = mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error);
    }
    if (p) {
        xccl_stage_plan_fini(&p->plan);
        free(p);
        st->pipe = NULL;
    }
    free(d);
    st->direct = NULL;
    xccl_gpu_set_put(st->set, NULL != error);
    st->set = NULL;
    cu->CtxPopCurrent(&popped);
    return rc;
}

/* ------------------------------------------------------------ CUDA IPC inside a node */

/* The peers' buffers this process has mapped and its own exported handles
 * (gpu/xccl_ipc_cache.h): at least 32 mappings kept between calls. */
#define XCCL_IPC_MAPS 32

struct mca_coll_xccl_ipc {
    xccl_ipc_cache_t maps;
    xccl_ipc_exports_t exports;
};

/* One exported buffer. */
typedef struct {
    xccl_cuipc_handle_t handle;
    uint64_t buffer_id, offset;
    int32_t valid, pad;
} ipc_buf_t;

/* What each rank sends the others: whether it can take part, and up to two
 * buffers its peers read (0: input, 1: output). */
typedef struct {
    ipc_buf_t buf[2];
    int32_t ok, pad;
} ipc_rec_t;

/* The state of one call on this rank. */
typedef struct {
    mca_coll_xccl_module_t *m;
    struct ompi_communicator_t *comm;
    xccl_coll_t coll;
    const xccl_cu_api_t *cu;
    void *ctx;                       /* the context of this rank's device buffers */
    ipc_rec_t mine, *recs;
    char **peer[2];                  /* peers' buffers, mapped (NULL: not needed) */
    xccl_gpu_set_t *set;             /* its stream */
    const char *error;
} ipc_call_t;

static char *ipc_open(void *cbctx, const xccl_cuipc_handle_t *handle, void *ctx)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cudeviceptr_t p = 0;
    (void) cbctx, (void) ctx;  /* ctx is current (the caller pushed it) */
    if (XCCL_CUDA_SUCCESS != cu->IpcOpenMemHandle(&p, *handle,
                                                   XCCL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
        return NULL;
    }
    return (char *) (uintptr_t) p;
}

static void ipc_close(void *cbctx, char *ptr, void *ctx)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cucontext_t popped;
    (void) cbctx;
    if (NULL != cu && XCCL_CUDA_SUCCESS == cu->CtxPushCurrent((xccl_cucontext_t) ctx)) {
        cu->IpcCloseMemHandle((xccl_cudeviceptr_t) (uintptr_t) ptr);
        cu->CtxPopCurrent(&popped);
    }
}

/* The module's caches, created on first use. */
static struct mca_coll_xccl_ipc *ipc_state(mca_coll_xccl_module_t *m)
{
    if (NULL == m->ipc && NULL != (m->ipc = calloc(1, sizeof(*m->ipc)))) {
        xccl_ipc_cache_init(&m->ipc->maps, XCCL_IPC_MAPS, ipc_open, ipc_close, NULL);
    }
    return m->ipc;
}

/* The peer's buffer mapped here (current context ctx), or NULL. */
static char *map_peer(mca_coll_xccl_module_t *m, const ipc_buf_t *b, int peer, void *ctx)
{
    struct mca_coll_xccl_ipc *ipc = ipc_state(m);
    char *base = ipc ? xccl_ipc_cache_get(&ipc->maps, peer, b->buffer_id, &b->handle, ctx) : NULL;
    return base ? base + b->offset : NULL;
}

void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m)
{
    if (NULL != m->ipc) {
        xccl_ipc_cache_fini(&m->ipc->maps);
    }
    free(m->ipc);
    m->ipc = NULL;
}

/* This rank takes part if its device buffers dst and (when not NULL) exp
 * share one context (the caller checked the rest); exp is exported as
 * buffer k.  ctx: that context. */
static int export_buf(ipc_call_t *c, const void *p, int k)
{
    xccl_mem_info_t info;
    xccl_cucontext_t popped;
    xccl_gpu_classify(p, &info);
    if (XCCL_MEM_DEVICE != info.type || (NULL != c->ctx && info.ctx != c->ctx)) {
        return 0;
    }
    c->ctx = info.ctx;
    ipc_buf_t *b = &c->mine.buf[k];
    struct mca_coll_xccl_ipc *ipc = ipc_state(c->m);
    if (NULL == ipc) {
        return 0;
    }
    b->buffer_id = info.buffer_id;
    const xccl_cuipc_handle_t *known = xccl_ipc_exports_find(&ipc->exports, info.base,
                                                             info.buffer_id);
    if (known) {
        b->handle = *known;
        b->valid = 1;
    } else {
        if (XCCL_CUDA_SUCCESS != c->cu->CtxPushCurrent(info.ctx)) {
            return 0;
        }
        b->valid = XCCL_CUDA_SUCCESS ==
                   c->cu->IpcGetMemHandle(&b->handle, (xccl_cudeviceptr_t) (uintptr_t) info.base);
        c->cu->CtxPopCurrent(&popped);
        if (b->valid) {
            xccl_ipc_exports_add(&ipc->exports, info.base, info.buffer_id, &b->handle);
        }
    }
    b->offset = (uint64_t) ((const char *) p - (const char *) info.base);
    return b->valid;
}

static int agree(ipc_call_t *c, int ok, int *all)
{
    *all = ok;
    return c->m->prev_allreduce(MPI_IN_PLACE, all, 1, MPI_INT, MPI_MIN, c->comm,
                                c->m->prev_allreduce_module);
}

static void call_init(ipc_call_t *c, mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                      xccl_coll_t coll)
{
    memset(c, 0, sizeof(*c));
    c->m = m;
    c->comm = comm;
    c->coll = coll;
    c->cu = xccl_cu();
}

static void call_fini(ipc_call_t *c)
{
    free(c->recs);
    free(c->peer[0]);
    free(c->peer[1]);
}

/* Rounds 1 and 2: exchange the records, then map what this rank reads
 * (need[k][j]: buffer k of peer j), then agree.  *go on every rank alike. */
static int ipc_setup(ipc_call_t *c, int ok, int need_mask, int (*need)(ipc_call_t *, int k, int j),
                     int *go)
{
    mca_coll_xccl_module_t *m = c->m;
    const int P = m->size;
    int rc;
    *go = 0;
    c->mine.ok = ok;
    c->recs = malloc((size_t) P * sizeof(*c->recs));
    c->peer[0] = calloc((size_t) P, sizeof(char *));
    c->peer[1] = calloc((size_t) P, sizeof(char *));
    if (NULL == c->recs || NULL == c->peer[0] || NULL == c->peer[1]) {
        return mca_coll_xccl_error(m, c->coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory (ipc)");
    }
    rc = m->prev_allgather(&c->mine, sizeof(c->mine), MPI_BYTE, c->recs, sizeof(c->mine),
                           MPI_BYTE, c->comm, m->prev_allgather_module);
    if (MPI_SUCCESS != rc) {
        return mca_coll_xccl_error(m, c->coll, rc, "ipc exchange");
    }
    for (int j = 0; j < P; j++) {
        ok = ok && c->recs[j].ok;
    }
    if (ok && NULL != c->ctx && NULL == ipc_state(m)) {
        ok = 0;
    }
    if (ok && NULL != c->ctx) {
        xccl_cucontext_t popped;
        xccl_ipc_cache_begin(&m->ipc->maps);    /* this call's mappings stay */
        ok = XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx);
        for (int k = 0; ok && k < 2; k++) {
            for (int j = 0; ok && j < P; j++) {
                if ((need_mask & (1 << k)) && j != m->rank && need(c, k, j)) {
                    ok = c->recs[j].buf[k].valid &&
                         NULL != (c->peer[k][j] = map_peer(m, &c->recs[j].buf[k], j, c->ctx));
                }
            }
        }
        if (ok) {
            c->set = xccl_gpu_set_get((xccl_cucontext_t) c->ctx, 0,
                                      mca_coll_xccl_component.gpu_pool_bytes, &c->error);
            ok = NULL != c->set;
            c->error = NULL;
        }
        c->cu->CtxPopCurrent(&popped);
    }
    if (MPI_SUCCESS != (rc = agree(c, ok, go))) {
        *go = 0;
    }
    if (!*go && NULL != c->set) {
        xccl_gpu_set_put(c->set, 0);
        c->set = NULL;
    }
    return MPI_SUCCESS == rc ? MPI_SUCCESS : mca_coll_xccl_error(m, c->coll, rc, "ipc agreement");
}

/* Waits for this rank's work, then a barrier: no rank goes on (reusing its
 * buffers) while another still reads them.  A failed step still reaches
 * the barrier, so that no rank waits forever. */
static int ipc_step_end(ipc_call_t *c)
{
    if (NULL == c->error && NULL != c->set) {
        xccl_cucontext_t popped;
        if (XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx)) {
            c->error = sync_stream(c->cu, c->set->in);
            c->cu->CtxPopCurrent(&popped);
        } else {
            c->error = "cuCtxPushCurrent failed";
        }
    }
    return c->comm->c_coll->coll_barrier(c->comm, c->comm->c_coll->coll_barrier_module);
}

static int ipc_finish(ipc_call_t *c, int rc, size_t bytes)
{
    mca_coll_xccl_module_t *m = c->m;
    if (NULL != c->set) {
        xccl_cucontext_t popped;
        int pushed = XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx);
        xccl_gpu_set_put(c->set, NULL != c->error);
        if (pushed) {
            c->cu->CtxPopCurrent(&popped);
        }
    }
    call_fini(c);
    if (c->error) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, c->error);
    }
    if (MPI_SUCCESS != rc) {
        return mca_coll_xccl_error(m, c->coll, rc, "barrier after cuda ipc");
    }
    mca_coll_xccl_log(1, "%s comm=%u rank=%d bytes=%zu algo=cuda_ipc size=%d",
                      mca_coll_xccl_coll_name(c->coll), m->cid, m->world_rank, bytes, m->size);
    return MPI_SUCCESS;
}

/* Enqueues a device-to-device copy on the call's stream (its context current). */
static void ipc_copy(ipc_call_t *c, void *dst, const void *src, size_t n)
{
    if (NULL == c->error && n && dst != src) {
        c->error = copy(c->cu, dst, src, n, DEVICE_TO_DEVICE, c->set->in);
    }
}

/* ---- allgather, alltoall, bcast: every rank reads what it needs */

typedef struct {
    ipc_call_t c;
    int root;
    size_t block;
} move_call_t;

/* Where this rank reads from peer j: offset in j's exported buffer and in
 * its own dst, and how many bytes (0: nothing from j). */
static size_t pull(xccl_coll_t coll, int me, int j, int root, size_t block, size_t *src_off,
                   size_t *dst_off)
{
    *src_off = 0;
    *dst_off = (size_t) j * block;
    switch (coll) {
    case XCCL_COLL_ALLGATHER:
        return block;
    case XCCL_COLL_ALLTOALL:
        *src_off = (size_t) me * block;
        return block;
    default:                          /* bcast */
        *dst_off = 0;
        return j == root && me != root ? block : 0;
    }
}

static int move_needs(ipc_call_t *c, int k, int j)
{
    move_call_t *mc = (move_call_t *) c;
    size_t so, dof;
    (void) k;
    return 0 != pull(c->coll, c->m->rank, j, mc->root, mc->block, &so, &dof);
}

int mca_coll_xccl_gpu_ipc(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                          xccl_coll_t coll, const void *exp, void *dst, size_t block, int root,
                          int contig, int *done)
{
    move_call_t mc = { .root = root, .block = block };
    ipc_call_t *c = &mc.c;
    call_init(c, m, comm, coll);
    const int P = m->size, me = m->rank;
    const int needs_dst = XCCL_COLL_BCAST != coll || me != root;
    int go, rc;

    *done = 0;
    int ok = NULL != c->cu && contig;
    if (ok && needs_dst) {
        xccl_mem_info_t di;
        xccl_gpu_classify(dst, &di);
        ok = XCCL_MEM_DEVICE == di.type;
        c->ctx = di.ctx;
    }
    if (ok && NULL != exp) {
        ok = export_buf(c, exp, 0);
    }
    rc = ipc_setup(c, ok, 1, move_needs, &go);
    if (MPI_SUCCESS != rc || !go) {
        call_fini(c);
        return rc;
    }

    /* Every rank takes this path now. */
    *done = 1;
    if (needs_dst) {
        xccl_cucontext_t popped;
        if (XCCL_CUDA_SUCCESS != c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx)) {
            c->error = "cuCtxPushCurrent failed";
        } else {
            for (int j = 0; j < P; j++) {
                size_t so, dof, n = pull(coll, me, j, root, block, &so, &dof);
                const char *from = j == me ? (const char *) exp : c->peer[0][j];
                if (n) {
                    ipc_copy(c, (char *) dst + dof, from + so, n);
                }
            }
            c->cu->CtxPopCurrent(&popped);
        }
    }
    rc = ipc_step_end(c);
    return ipc_finish(c, rc, XCCL_COLL_BCAST == coll ? block : block * (size_t) P);
}

/* ---- allreduce, reduce_scatter_block: each rank reduces its slice from all */

typedef struct {
    ipc_call_t c;
    int allreduce;
} red_call_t;

static int red_needs(ipc_call_t *c, int k, int j)
{
    (void) j;
    return 0 == k || ((red_call_t *) c)->allreduce;
}

int mca_coll_xccl_gpu_ipc_reduce(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                                 xccl_coll_t coll, const void *src, void *dst, const size_t *counts,
                                 size_t es, int gpu_dt, int gpu_op, int ok, int *done)
{
    red_call_t rcall = { .allreduce = XCCL_COLL_ALLREDUCE == coll };
    ipc_call_t *c = &rcall.c;
    call_init(c, m, comm, coll);
    const int P = m->size, me = m->rank;
    int go, rc;
    size_t displ = 0, total = 0;

    *done = 0;
    ok = ok && NULL != c->cu && P <= XCCL_GPU_MAX_SRCS &&
         xccl_gpu_reduce_supported((xccl_dtype_t) gpu_dt, (xccl_op_t) gpu_op);
    ok = ok && export_buf(c, src, 0);
    if (ok && rcall.allreduce) {
        ok = export_buf(c, dst, 1);
    } else if (ok) {
        xccl_mem_info_t di;
        xccl_gpu_classify(dst, &di);
        ok = XCCL_MEM_DEVICE == di.type && di.ctx == c->ctx;
    }
    if (ok) {
        /* The kernels load into this context (once), or this rank is out. */
        xccl_cucontext_t popped;
        const char *why = NULL;
        ok = XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx);
        if (ok) {
            ok = 0 == xccl_gpu_kernels_load(&why);
            c->cu->CtxPopCurrent(&popped);
        }
        if (!ok) {
            mca_coll_xccl_log(2, "%s comm=%u rank=%d: no cuda ipc reduction: %s",
                              mca_coll_xccl_coll_name(coll), m->cid, m->world_rank,
                              why ? why : "cuCtxPushCurrent failed");
        }
    }
    rc = ipc_setup(c, ok, rcall.allreduce ? 3 : 1, red_needs, &go);
    if (MPI_SUCCESS != rc || !go) {
        call_fini(c);
        return rc;
    }

    *done = 1;
    for (int j = 0; j < P; j++) {
        displ += j < me ? counts[j] : 0;
        total += counts[j];
    }
    xccl_cucontext_t popped;
    const int pushed = XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx);
    if (!pushed) {
        c->error = "cuCtxPushCurrent failed";
    }
    /* Phase 1: my slice, folded over the ranks in rank order (the same bits
     * wherever it is read later). */
    if (NULL == c->error && counts[me]) {
        const void *srcs[XCCL_GPU_MAX_SRCS];
        for (int j = 0; j < P; j++) {
            srcs[j] = (j == me ? (const char *) src : c->peer[0][j]) + displ * es;
        }
        char *out = (char *) dst + (rcall.allreduce ? displ * es : 0);
        if (0 != xccl_gpu_reduce((xccl_dtype_t) gpu_dt, (xccl_op_t) gpu_op, out, srcs, P,
                                 counts[me], c->set->in, &c->error)) {
            c->error = c->error ? c->error : "xccl_gpu_reduce failed";
        }
    }
    if (pushed) {
        c->cu->CtxPopCurrent(&popped);
    }
    rc = ipc_step_end(c);
    /* Phase 2 (allreduce): the other slices from their owners. */
    if (rcall.allreduce && MPI_SUCCESS == rc) {
        if (XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx)) {
            size_t off = 0;
            for (int j = 0; j < P; j++) {
                if (j != me) {
                    ipc_copy(c, (char *) dst + off * es, c->peer[1][j] + off * es, counts[j] * es);
                }
                off += counts[j];
            }
            c->cu->CtxPopCurrent(&popped);
        } else if (NULL == c->error) {
            c->error = "cuCtxPushCurrent failed";
        }
        rc = ipc_step_end(c);
    }
    return ipc_finish(c, rc, total * es);
}
