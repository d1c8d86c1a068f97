/*
 * Device buffers straight to UCX (where UCX moves CUDA memory, and
 * coll_xccl_gpu_direct allows it): the schedule of a staged call runs on
 * the device buffers themselves instead of the host copies, over the
 * module's CUDA transport, which tells UCX that every buffer is device
 * memory (SEND, RECV and the device scratch).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_xccl_gpu_direct.h"
#include "gpu/xccl_gpu_kernels.h"

/* A schedule run on the device buffers themselves: UCX moves them, the
 * local copies and reductions are queued on the set's "in" stream, and an
 * event after each step's queued work holds the next step back until it
 * has run (the next step's sends read it, its receives may overwrite what
 * it reads).  A first event, recorded before anything, orders the call
 * after the application's work on the legacy default stream, as staging
 * does. */
struct mca_coll_xccl_gpu_direct {
    mca_coll_xccl_gpu_hooks_t h;
    int dt, op;                      /* the reduction's GPU kernel */
    int queued;                      /* work queued since the last event */
    int pending;                     /* the event may not have completed */
    size_t copies, reductions;
};

/* Only where UCX says it moves CUDA memory: a UCX without it takes a
 * device pointer for host memory (a crash on real device memory).  The
 * stand-in driver's tests play a UCX with CUDA through
 * test/gpu/fake_ucx_cuda.c, not through a switch here. */
int mca_coll_xccl_gpu_direct_wanted(void)
{
    return 0 != mca_coll_xccl_component.gpu_direct && xccl_ucx_cuda_memory();
}

const char *mca_coll_xccl_gpu_direct_refused(void)
{
    return 1 == mca_coll_xccl_component.gpu_direct && !xccl_ucx_cuda_memory()
               ? "ucx lacks cuda memory support: device buffers staged through host copies"
               : NULL;
}

static int direct_copy(void *ctx, void *dst, const void *src, size_t len)
{
    struct mca_coll_xccl_gpu_direct *d = ctx;
    const char *error = mca_coll_xccl_gpu_copy_in(d->h.ctx, dst, src, len,
                                                  XCCL_GPU_DEVICE_TO_DEVICE, d->h.set->in);
    d->queued = 1;
    d->copies++;
    return error ? mca_coll_xccl_gpu_hooks_fail(&d->h, error) : 0;
}

static int direct_reduce(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    struct mca_coll_xccl_gpu_direct *d = ctx;
    const char *error = mca_coll_xccl_gpu_reduce_in(d->h.ctx, d->dt, d->op, dst, a, b, count,
                                                    d->h.set->in);
    d->queued = 1;
    d->reductions++;
    return error ? mca_coll_xccl_gpu_hooks_fail(&d->h, error) : 0;
}

/* 1 once the last event has completed, 0 not yet, -1 error.  Before each
 * step, and at the drain. */
static int direct_wait(void *ctx, size_t step)
{
    struct mca_coll_xccl_gpu_direct *d = ctx;
    (void) step;
    int rc = d->pending ? mca_coll_xccl_gpu_hooks_done(&d->h, d->h.set->ev[0], NULL) : 1;
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
    if (0 != mca_coll_xccl_gpu_push(d->h.ctx)) {
        return mca_coll_xccl_gpu_hooks_fail(&d->h, "cuCtxPushCurrent failed");
    }
    xccl_curesult_t rc = cu->EventRecord(d->h.set->ev[0], d->h.set->in);
    mca_coll_xccl_gpu_pop();
    if (XCCL_CUDA_SUCCESS != rc) {
        return mca_coll_xccl_gpu_hooks_fail(&d->h, xccl_cu_error("cuEventRecord", rc));
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
    const char *why = NULL;
    if (0 != mca_coll_xccl_gpu_push(ctx)) {
        return "cuCtxPushCurrent failed";
    }
    if (0 != xccl_gpu_kernels_load(&why) && NULL == why) {
        why = "the kernels did not load";
    }
    mca_coll_xccl_gpu_pop();
    return why;
}

int mca_coll_xccl_gpu_direct_gate(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                       mca_coll_xccl_gpu_stage_t *st, const xccl_sched_t *s, int gpu_dt,
                       int gpu_op, mca_coll_xccl_exec_hooks_t *hooks)
{
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
    if (NULL == d) {
        return mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
    }
    d->h.ctx = st->ctx;
    d->h.set = st->set;
    d->h.what = "device buffers straight to ucx";
    d->dt = gpu_dt;
    d->op = gpu_op;
    if (0 != mca_coll_xccl_gpu_push(st->ctx)) {
        free(d);
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    if (0 == xccl_gpu_set_events(st->set, 1, &error) &&
        0 == xccl_gpu_set_scratch(st->set, s->scratch_bytes, &error)) {
        error = 0 == direct_record(d) ? NULL : d->h.error;
    }
    mca_coll_xccl_gpu_pop();
    /* From here on stage_out owns d (it waits for what was queued). */
    st->direct = d;
    if (error) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error);
    }
    d->h.gate = (xccl_gate_t) { d, direct_wait, direct_done, direct_drain };
    hooks->bufs[XCCL_BUF_SEND] = dev[0];
    hooks->bufs[XCCL_BUF_RECV] = dev[1];
    hooks->bufs[XCCL_BUF_SCRATCH] = s->scratch_bytes ? st->set->dev : NULL;
    /* SEND, RECV, and the scratch when the schedule has any (NULL: the
     * module's host scratch, of which it uses none): device memory. */
    hooks->transport = &m->transport_cuda;
    hooks->gate = &d->h.gate;
    hooks->copy = direct_copy;
    hooks->copy_ctx = d;
    hooks->reduce = direct_reduce;
    hooks->reduce_ctx = d;
    mca_coll_xccl_log(2, "%s comm=%u rank=%d: device buffers straight to ucx, copies and "
                      "reductions on the gpu, %zu steps, %zu bytes of device scratch, "
                      "memory_type=cuda", xccl_coll_name(coll), m->cid, m->world_rank, s->nsteps,
                      s->scratch_bytes);
    return MPI_SUCCESS;
}

const char *mca_coll_xccl_gpu_direct_end(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                         mca_coll_xccl_gpu_stage_t *st)
{
    struct mca_coll_xccl_gpu_direct *d = st->direct;
    /* The queued work must finish before the call returns (the caller
     * made st->ctx current). */
    const char *e1 = mca_coll_xccl_gpu_sync(xccl_cu(), st->set->in);
    static __thread char error[200];
    snprintf(error, sizeof(error), "%s", d->h.error[0] ? d->h.error : e1 ? e1 : "");
    mca_coll_xccl_log(3, "%s comm=%u rank=%d: on the gpu: %zu copies, %zu reductions",
                      xccl_coll_name(coll), m->cid, m->world_rank, d->copies, d->reductions);
    free(d);
    st->direct = NULL;
    return error[0] ? error : NULL;
}
