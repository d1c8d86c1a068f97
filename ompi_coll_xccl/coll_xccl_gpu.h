/*
 * Device buffers in the call path (coll_xccl_gpu.c: where a call's
 * buffers live, host copies and their staging; coll_xccl_gpu_ipc.c: CUDA
 * IPC peer access inside a node).
 */
#ifndef MCA_COLL_XCCL_GPU_H
#define MCA_COLL_XCCL_GPU_H

#include <stdint.h>

#include "coll_xccl_call.h"
#include <stdio.h>
#include <string.h>

#include "gpu/xccl_cuda.h"
#include "gpu/xccl_gpu.h"

BEGIN_C_DECLS

/* Where a call's buffers live.  Device buffers never change which path a
 * call takes (xccl or the fallback): that decision must be the same on
 * every rank, and another rank may use host buffers.  xccl stages device
 * data through host memory on either path. */
typedef struct {
    int device;                      /* a buffer is device (or managed) memory */
    int all;                         /* every buffer given is, of one context */
    void *ctx;                       /* its CUDA context */
} mca_coll_xccl_where_t;

/* Memory that is host memory whatever the driver says: the process's brk
 * heap, [mca_coll_xccl_heap_lo, current break), one mapping that neither
 * the driver nor anything else can place device memory in.  Small buffers
 * mostly live there (malloc of the main thread), so most calls that go to
 * the fallback skip the driver (and its probe) altogether.  The break is
 * glibc's own record of it, __curbrk (exported since glibc 2.2.5; where it
 * is missing, nothing is sure): sbrk(0) is no cheaper way, UCX's memory
 * hooks turn it into a system call.  glibc's malloc moves the break, and
 * keeps __curbrk, itself; a break moved behind its back makes __curbrk
 * lower than the heap's top at worst (heaps shrink only through malloc),
 * and then less is sure. */
extern uintptr_t mca_coll_xccl_heap_lo;    /* set by mca_coll_xccl_gpu_init */
extern void *__curbrk __attribute__((weak));
static inline int mca_coll_xccl_gpu_surely_host(const mca_coll_xccl_call_t *c)
{
    const uintptr_t s = (uintptr_t) c->sbuf, r = (uintptr_t) c->rbuf;
    const uintptr_t lo = mca_coll_xccl_heap_lo, hi = NULL != &__curbrk ? (uintptr_t) __curbrk : 0;
    return (NULL == c->sbuf || MPI_IN_PLACE == c->sbuf || (s >= lo && s < hi)) &&
           (NULL == c->rbuf || (r >= lo && r < hi));
}

/* Classifies c's buffers (one driver query each).  Only a process that
 * has loaded the driver (xccl_cu()) can hold device memory: callers ask
 * nothing without it. */
void mca_coll_xccl_gpu_where(const mca_coll_xccl_call_t *c, mca_coll_xccl_where_t *w);

/* Host copies of a call's buffers in pinned memory of a staging set of
 * CUDA context ctx.  The host call either runs a schedule, or it does
 * anything else (the fallback): stage_fill copies everything in first.  A
 * schedule goes through stage_gate, which either
 *  - runs it on the device buffers themselves (direct: UCX moves device
 *    memory, or coll_xccl_gpu_direct says to act as if it did), with the
 *    copies and reductions queued on the set's stream; or
 *  - plans the copies (the sspan bytes, and the rspan bytes when copy_r)
 *    so that each step waits only for the pieces it touches and each
 *    piece goes back to the device after its last write (when copy_out),
 *    overlapping the transfers.
 * stage_out completes the copies back (all of RECV when it was filled) or
 * the queued work, and gives the memory back.  MPI error codes, logged. */
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

/* A call on device buffers runs as the same call on host copies of the
 * buffers' spans (gaps of a derived datatype included): s and r are the
 * copies, shifted like the user's pointers (MPI_IN_PLACE stays). */
typedef struct mca_coll_xccl_staged {
    const void *s;
    void *r;
    mca_coll_xccl_gpu_stage_t gpu;
} mca_coll_xccl_staged_t;

/* Takes the host memory of c's staging (nothing is copied yet). */
int mca_coll_xccl_gpu_stage_call(const mca_coll_xccl_call_t *c, const mca_coll_xccl_where_t *w,
                                 mca_coll_xccl_staged_t *st);
int mca_coll_xccl_gpu_stage_fill(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                 mca_coll_xccl_gpu_stage_t *st);
/* How to run s, whose hooks->bufs are the host copies: straight on the
 * device buffers, or through a staging gate; or plain, when the copies are
 * already done (or planning them failed: then they are done now).  gpu_dt,
 * gpu_op: the xccl_dtype_t and xccl_op_t of a predefined reduction, -1
 * otherwise (then only a schedule without reductions runs direct). */
int mca_coll_xccl_gpu_stage_gate(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                 mca_coll_xccl_gpu_stage_t *st, const xccl_sched_t *s, int gpu_dt,
                                 int gpu_op, mca_coll_xccl_exec_hooks_t *hooks);
/* ok: the host call succeeded (else nothing more is copied back). */
int mca_coll_xccl_gpu_stage_out(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                mca_coll_xccl_gpu_stage_t *st, int ok);

/* ------------------------------------------------------------ driver helpers */

/* Shared by staging, device pointers straight to UCX
 * (coll_xccl_gpu_direct.c) and CUDA IPC: an asynchronous copy on stream
 * (UNIFIED addressing: the driver tells device, managed and host memory
 * apart) and a stream synchronisation; NULL or the driver's error text. */
enum { MCA_COLL_XCCL_TO_HOST, MCA_COLL_XCCL_FROM_HOST, MCA_COLL_XCCL_DEVICE_TO_DEVICE };

static inline const char *mca_coll_xccl_gpu_copy(const xccl_cu_api_t *cu, void *dst,
                                                 const void *src, size_t bytes, int dir,
                                                 xccl_custream_t stream)
{
    xccl_cu_memcpy2d_t d;
    memset(&d, 0, sizeof(d));
    if (MCA_COLL_XCCL_DEVICE_TO_DEVICE == dir) {
        d.srcMemoryType = d.dstMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.srcDevice = (xccl_cudeviceptr_t) (uintptr_t) src;
        d.dstDevice = (xccl_cudeviceptr_t) (uintptr_t) dst;
    } else if (MCA_COLL_XCCL_TO_HOST == dir) {
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

static inline const char *mca_coll_xccl_gpu_sync(const xccl_cu_api_t *cu, xccl_custream_t stream)
{
    xccl_curesult_t rc = cu->StreamSynchronize(stream);
    return XCCL_CUDA_SUCCESS == rc ? NULL : xccl_cu_error("cuStreamSynchronize", rc);
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
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) h->ctx)) {
        return mca_coll_xccl_gpu_hooks_fail(h, "cuCtxPushCurrent failed");
    }
    xccl_curesult_t rc = ev ? cu->EventQuery(ev) : cu->StreamQuery(stream);
    cu->CtxPopCurrent(&popped);
    if (XCCL_CUDA_SUCCESS == rc) {
        return 1;
    }
    return XCCL_CUDA_ERROR_NOT_READY == rc
               ? 0
               : mca_coll_xccl_gpu_hooks_fail(h, xccl_cu_error(ev ? "cuEventQuery" : "cuStreamQuery",
                                                               rc));
}

/* Device pointers straight to UCX (coll_xccl_gpu_direct.c): runs s on the
 * device buffers (st->direct set, hooks filled), or leaves st alone with
 * the reason logged (the caller stages instead); direct_end completes the
 * queued work and frees what direct_gate took: NULL or the first error. */
int mca_coll_xccl_gpu_direct_gate(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                  mca_coll_xccl_gpu_stage_t *st, const xccl_sched_t *s,
                                  int gpu_dt, int gpu_op, mca_coll_xccl_exec_hooks_t *hooks);
const char *mca_coll_xccl_gpu_direct_end(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                         mca_coll_xccl_gpu_stage_t *st);

/* CUDA IPC peer access inside a node (coll_xccl_gpu_ipc.c). */
extern const mca_coll_xccl_peer_provider_t mca_coll_xccl_gpu_ipc_provider;

END_C_DECLS

#endif
