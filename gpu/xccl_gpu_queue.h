/*
 * A call's device work in the order its schedule asks for it, coalesced
 * (gpu/xccl_gpu_queue.c): consecutive independent copies go as one
 * xccl_copy_batch launch (a single copy to the copy engine), and a chain
 * of two-operand reductions folding into one place (x0 op x1, then that op
 * x2, ...) as one xccl_gpu_reduce over all its sources - the same fold
 * order, the same bits.  On one GPU shared by several processes a leader
 * moves p^2 blocks per allgather: as copy-engine operations each block pays
 * an operation's fixed cost (microseconds), as one launch they share one.
 *
 * Pure driver work on one stream, in the calling thread's current context
 * (the stream's).  Nothing is queued until a flush or an action that does
 * not fit the pending one; queued work is asynchronous as always.
 */
#ifndef XCCL_GPU_QUEUE_H
#define XCCL_GPU_QUEUE_H

#include <stddef.h>

#include "xccl_cuda.h"
#include "xccl_gpu_kernels.h"     /* xccl_gpu_copies_t, XCCL_GPU_MAX_SRCS */

typedef struct {
    xccl_custream_t stream;
    xccl_dtype_t dt;                 /* of the reductions */
    xccl_op_t op;
    /* Where partial results are private to the caller (its scratch): a
     * chain whose result moves out of there skips writing them. */
    const char *scratch;
    size_t scratch_bytes;
    int one_by_one;                  /* copies one by one (the batch kernel did not launch) */
    int queued;                      /* set when work was queued; the caller clears it */
    char error[200];                 /* the first error, "" none (the work goes on) */
    struct {                         /* a chain not yet queued: dst = srcs[0] op ... */
        void *dst;
        const void *srcs[XCCL_GPU_MAX_SRCS];
        int n;
        size_t count;
    } chain;
    xccl_gpu_copies_t batch;         /* copies not yet queued (never both pending) */
} xccl_gpu_queue_t;

void xccl_gpu_queue_init(xccl_gpu_queue_t *q, xccl_custream_t stream, xccl_dtype_t dt, xccl_op_t op,
                         const void *scratch, size_t scratch_bytes, int one_by_one);
/* len bytes from src to dst (device memory, or mapped peers'). */
void xccl_gpu_queue_copy(xccl_gpu_queue_t *q, void *dst, const void *src, size_t len);
/* dst = a op b, count elements: the next link of the pending chain where a
 * is the chain's result and dst stays, or leaves the scratch (the in-place
 * mesh allreduce folds in scratch and writes the last link elsewhere);
 * else a new chain.  A partial result in scratch is then never written:
 * only a schedule that read it again would notice. */
void xccl_gpu_queue_reduce(xccl_gpu_queue_t *q, void *dst, const void *a, const void *b, size_t count);
/* Queues what is pending. */
void xccl_gpu_queue_flush(xccl_gpu_queue_t *q);

#endif
