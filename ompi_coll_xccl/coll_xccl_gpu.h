/*
 * Device buffers in the call path (coll_xccl_gpu.c): where a call's
 * buffers live, host copies and their staging (straight to UCX:
 * coll_xccl_gpu_direct.h; CUDA IPC: coll_xccl_gpu_ipc.h).
 */
#ifndef MCA_COLL_XCCL_GPU_H
#define MCA_COLL_XCCL_GPU_H

#include <stdint.h>

#include "coll_xccl_call.h"
#include "coll_xccl_exec.h"
#include "coll_xccl_gpu_hooks.h"

BEGIN_C_DECLS

/* Where a call's buffers live.  Device buffers never change which path a
 * call takes (xccl or the fallback): that decision must be the same on
 * every rank, and another rank may use host buffers.  xccl stages device
 * data through host memory on either path. */
typedef struct {
    int device;                      /* a buffer is device (or managed) memory */
    int all;                         /* every buffer given is, of one context */
    void *ctx;                       /* its CUDA context */
    xccl_mem_info_t mem[2];          /* sbuf's, rbuf's (what mca_coll_xccl_call_t.mem
                                      * keeps for a persistent request's starts) */
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

/* Classifies c's buffers (one driver query each; none where c->mem holds
 * them already).  Only a process that has loaded the driver (xccl_cu())
 * can hold device memory: callers ask nothing without it. */
void mca_coll_xccl_gpu_where(const mca_coll_xccl_call_t *c, mca_coll_xccl_where_t *w);

/* A call on device buffers runs as the same call on host copies of the
 * buffers' spans (gaps of a derived datatype included): s and r are the
 * copies, shifted like the user's pointers (MPI_IN_PLACE stays). */
typedef struct mca_coll_xccl_staged {
    const void *s;
    void *r;
    mca_coll_xccl_gpu_stage_t gpu;
} mca_coll_xccl_staged_t;

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

/* What the device-buffer checks need once, at init (coll_xccl_gpu.c). */
void mca_coll_xccl_gpu_init(void);

END_C_DECLS

#endif
