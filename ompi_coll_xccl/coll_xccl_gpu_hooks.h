/*
 * What the device-buffer paths share (staging, straight to UCX, CUDA
 * IPC): a call's staging state, the driver's copy and synchronisation,
 * and the executor hooks of one call.  Header only.
 */
#ifndef MCA_COLL_XCCL_GPU_HOOKS_H
#define MCA_COLL_XCCL_GPU_HOOKS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpu/xccl_cuda.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"

#include "coll_xccl_log.h"

BEGIN_C_DECLS

/* A call's staging (coll_xccl_gpu.h says how it is used). */
struct mca_coll_xccl_gpu_pipe;
struct mca_coll_xccl_gpu_direct;
typedef struct mca_coll_xccl_gpu_stage {
    void *ctx;
    struct xccl_gpu_set *set;
    const char *sdev;
    char *rdev, *hs, *hr;
    size_t sspan, rspan;
    int copy_r, copy_out;
    int all_device;                  /* every buffer of the call is device memory of ctx */
    int filled;                      /* copied in (stage_fill) */
    struct mca_coll_xccl_gpu_pipe *pipe;       /* or pipelined (stage_gate) */
    struct mca_coll_xccl_gpu_direct *direct;   /* or run on the device buffers */
} mca_coll_xccl_gpu_stage_t;


/* ------------------------------------------------------------ driver helpers */

/* Every driver call of the device paths runs with the buffers' CUDA
 * context current: pushed on top of the caller's before, popped after
 * (the caller's current context stays; the hooks run from whatever thread
 * progresses a call).  push: 0, or -1 when ctx cannot be made current. */
static inline int mca_coll_xccl_gpu_push(void *ctx)
{
    return XCCL_CUDA_SUCCESS == xccl_cu()->CtxPushCurrent((xccl_cucontext_t) ctx) ? 0 : -1;
}

static inline void mca_coll_xccl_gpu_pop(void)
{
    xccl_cucontext_t popped;
    xccl_cu()->CtxPopCurrent(&popped);
}

/* Shared by staging, device pointers straight to UCX
 * (coll_xccl_gpu_direct.c) and CUDA IPC: a stream synchronisation (the
 * copies are gpu/xccl_gpu.h's xccl_gpu_copy); NULL or the driver's error
 * text. */
static inline const char *mca_coll_xccl_gpu_sync(const xccl_cu_api_t *cu, xccl_custream_t stream)
{
    xccl_curesult_t rc = cu->StreamSynchronize(stream);
    return XCCL_CUDA_SUCCESS == rc ? NULL : xccl_cu_error("cuStreamSynchronize", rc);
}

/* A copy (xccl_gpu_copy) and a reduction with context ctx current around
 * each (pushed, then popped: the caller's current context stays), as the
 * executor's hooks of the direct path run them from whatever thread
 * progresses the call: NULL or the error text ("cuCtxPushCurrent failed"
 * when ctx cannot be made current). */
static inline const char *mca_coll_xccl_gpu_copy_in(void *ctx, void *dst, const void *src,
                                                    size_t bytes, xccl_gpu_copy_dir_t dir,
                                                    xccl_custream_t stream)
{
    if (0 != mca_coll_xccl_gpu_push(ctx)) {
        return "cuCtxPushCurrent failed";
    }
    const char *error = xccl_gpu_copy(dst, src, bytes, dir, stream);
    mca_coll_xccl_gpu_pop();
    return error;
}

/* dst = a op b, count elements of dt, by xccl's GPU kernel on stream. */
static inline const char *mca_coll_xccl_gpu_reduce_in(void *ctx, int dt, int op, void *dst,
                                                      const void *a, const void *b, size_t count,
                                                      xccl_custream_t stream)
{
    const void *srcs[2] = { a, b };
    const char *error = NULL;
    if (0 != mca_coll_xccl_gpu_push(ctx)) {
        return "cuCtxPushCurrent failed";
    }
    if (0 != xccl_gpu_reduce((xccl_dtype_t) dt, (xccl_op_t) op, dst, srcs, 2, count, stream, &error)) {
        error = error ? error : "xccl_gpu_reduce failed";
    }
    mca_coll_xccl_gpu_pop();
    return error;
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
} mca_coll_xccl_gpu_hooks_t;

static inline int mca_coll_xccl_gpu_hooks_fail(mca_coll_xccl_gpu_hooks_t *h, const char *error)
{
    if ('\0' == h->error[0]) {
        snprintf(h->error, sizeof(h->error), "%s", error);
        mca_coll_xccl_log(1, "%s: %s", h->what, error);
    }
    return -1;
}

/* 1 once ev has completed (ev NULL: all work queued on stream), 0 not
 * yet, -1 error (kept). */
static inline int mca_coll_xccl_gpu_hooks_done(mca_coll_xccl_gpu_hooks_t *h, xccl_cuevent_t ev,
                                               xccl_custream_t stream)
{
    const xccl_cu_api_t *cu = xccl_cu();
    if (0 != mca_coll_xccl_gpu_push(h->ctx)) {
        return mca_coll_xccl_gpu_hooks_fail(h, "cuCtxPushCurrent failed");
    }
    xccl_curesult_t rc = ev ? cu->EventQuery(ev) : cu->StreamQuery(stream);
    mca_coll_xccl_gpu_pop();
    if (XCCL_CUDA_SUCCESS == rc) {
        return 1;
    }
    return XCCL_CUDA_ERROR_NOT_READY == rc
               ? 0
               : mca_coll_xccl_gpu_hooks_fail(h, xccl_cu_error(ev ? "cuEventQuery" : "cuStreamQuery",
                                                               rc));
}

END_C_DECLS

#endif
