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
#include <stdio.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"

#include "coll_xccl_gpu.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"

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

const char *mca_coll_xccl_gpu_sync(const xccl_cu_api_t *cu, xccl_custream_t stream)
{
    xccl_curesult_t rc = cu->StreamSynchronize(stream);
    return XCCL_CUDA_SUCCESS == rc ? NULL : xccl_cu_error("cuStreamSynchronize", rc);
}

const char *mca_coll_xccl_gpu_copy(const xccl_cu_api_t *cu, void *dst, const void *src,
                                   size_t bytes, xccl_custream_t stream)
{
    return copy(cu, dst, src, bytes, DEVICE_TO_DEVICE, stream);
}

/* ------------------------------------------------------------ where, host copies */

uintptr_t mca_coll_xccl_heap_lo = UINTPTR_MAX;     /* nothing is sure before init */

void mca_coll_xccl_gpu_init(void)
{
    /* start_brk is field 47 of /proc/self/stat (Linux >= 3.5), counted
     * after the command name, which may hold spaces: from its last ')'. */
    char buf[1024];
    unsigned long long lo = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 47; field++) {
        p = strchr(p + 1, ' ');
    }
    if (NULL == &__curbrk) {
        return;                        /* not glibc: nothing is sure */
    }
    if (p && 1 == sscanf(p + 1, "%llu", &lo) && lo > 0 && lo <= (uintptr_t) __curbrk) {
        mca_coll_xccl_heap_lo = (uintptr_t) lo;
    } else {
        mca_coll_xccl_heap_lo = (uintptr_t) __curbrk;  /* what grows from now on */
    }
}

void mca_coll_xccl_gpu_where(const mca_coll_xccl_call_t *c, mca_coll_xccl_where_t *w)
{
    const void *a = c->in_place ? NULL : c->sbuf, *b = c->rbuf;
    xccl_mem_info_t ia, ib;
    xccl_gpu_classify(a, &ia);
    xccl_gpu_classify(b, &ib);
    const int da = XCCL_MEM_DEVICE == ia.type, db = XCCL_MEM_DEVICE == ib.type;
    w->device = da || db;
    w->all = (da || NULL == a) && (db || NULL == b) && (!da || !db || ia.ctx == ib.ctx);
    w->ctx = da ? ia.ctx : ib.ctx;
}

/* RECV first, SEND 64-byte aligned after it; copy_r: RECV is read (in
 * place, or gaps that must survive the copy back); copy_out: RECV goes back
 * (not at a bcast root: its data has not changed). */
int mca_coll_xccl_gpu_stage_call(const mca_coll_xccl_call_t *c, const mca_coll_xccl_where_t *w,
                                 mca_coll_xccl_staged_t *staged)
{
    mca_coll_xccl_module_t *m = c->m;
    mca_coll_xccl_gpu_stage_t *st = &staged->gpu;
    const xccl_cu_api_t *cu = xccl_cu();
    const int has_send = NULL != c->sbuf && MPI_IN_PLACE != c->sbuf;
    ptrdiff_t sgap = 0, rgap = 0;
    const size_t sspan = has_send ? (size_t) opal_datatype_span(&c->sdtype->super, c->sn, &sgap) : 0;
    const size_t rspan = (size_t) opal_datatype_span(&c->rdtype->super, c->rn, &rgap);
    const size_t soff = (rspan + 63) & ~(size_t) 63;
    const char *error = NULL;
    xccl_cucontext_t popped;

    memset(st, 0, sizeof(*st));
    st->ctx = w->ctx;
    if (NULL == cu) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "device buffer without a cuda driver");
    }
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) w->ctx)) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    st->set = xccl_gpu_set_get((xccl_cucontext_t) w->ctx, soff + sspan,
                               mca_coll_xccl_component.gpu_pool_bytes, &error);
    cu->CtxPopCurrent(&popped);
    if (NULL == st->set) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, error);
    }
    st->hr = st->set->host;
    st->hs = st->hr + soff;
    st->sdev = has_send ? (const char *) c->sbuf + sgap : NULL;
    st->sspan = sspan;
    st->rdev = (char *) c->rbuf + rgap;
    st->rspan = rspan;
    st->copy_r = c->copy_r || c->in_place || !mca_coll_xccl_is_contiguous(c->rdtype, c->rn);
    st->copy_out = c->copy_out;
    st->all_device = w->all;
    staged->s = has_send ? (const char *) st->hs - sgap : c->sbuf;
    staged->r = st->hr - rgap;
    mca_coll_xccl_log(2, "%s comm=%u rank=%d: device buffers, host copies of %zu + %zu bytes "
                      "ready", xccl_coll_name(c->coll), m->cid, m->world_rank, sspan, rspan);
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
        error = mca_coll_xccl_gpu_sync(cu, st->set->in);
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
                          xccl_coll_name(coll), m->cid, m->world_rank, why);
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
                      xccl_coll_name(coll), m->cid, m->world_rank, s->nsteps,
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
                      "pieces of %zu bytes, %zu steps", xccl_coll_name(coll), m->cid,
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
        const char *e1 = mca_coll_xccl_gpu_sync(cu, st->set->in);
        error = d->h.error[0] ? d->h.error : e1;
        mca_coll_xccl_log(3, "%s comm=%u rank=%d: on the gpu: %zu copies, %zu reductions",
                          xccl_coll_name(coll), m->cid, m->world_rank, d->copies,
                          d->reductions);
    } else if (p) {
        /* What was queued must finish before the host memory is reused,
         * also after an error. */
        const char *e1 = mca_coll_xccl_gpu_sync(cu, st->set->in);
        const char *e2 = mca_coll_xccl_gpu_sync(cu, st->set->out);
        error = p->h.error[0] ? p->h.error : e1 ? e1 : e2;
    } else if (ok && st->filled && st->copy_out && st->rspan) {
        /* Filled for the fallback: all of RECV goes back.  (Never filled:
         * the host call touched no data, nothing to copy.) */
        error = copy(cu, st->rdev, st->hr, st->rspan, FROM_HOST, st->set->out);
        if (NULL == error) {
            error = mca_coll_xccl_gpu_sync(cu, st->set->out);
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
