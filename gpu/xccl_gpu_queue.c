/* A call's device work, coalesced (gpu/xccl_gpu_queue.h). */
#include "xccl_gpu_queue.h"
#include "xccl_gpu.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void fail(xccl_gpu_queue_t *q, const char *error)
{
    if ('\0' == q->error[0]) {
        snprintf(q->error, sizeof(q->error), "%s", error ? error : "?");
    }
}

void xccl_gpu_queue_init(xccl_gpu_queue_t *q, xccl_custream_t stream, xccl_dtype_t dt, xccl_op_t op,
                         const void *scratch, size_t scratch_bytes, int one_by_one)
{
    memset(q, 0, sizeof(*q));
    q->stream = stream;
    q->dt = dt;
    q->op = op;
    q->scratch = scratch;
    q->scratch_bytes = scratch ? scratch_bytes : 0;
    q->one_by_one = one_by_one;
}

static void chain_queue(xccl_gpu_queue_t *q)
{
    const char *error = NULL;
    if (0 == q->chain.n) {
        return;
    }
    if (0 != xccl_gpu_reduce(q->dt, q->op, q->chain.dst, q->chain.srcs, q->chain.n, q->chain.count,
                             q->stream, &error)) {
        fail(q, error ? error : "xccl_gpu_reduce failed");
    }
    q->chain.n = 0;
    q->queued = 1;
}

static void batch_queue(xccl_gpu_queue_t *q)
{
    xccl_gpu_copies_t *b = &q->batch;
    const char *error = NULL;
    if (b->n > 1 && !q->one_by_one) {
        if (0 == xccl_gpu_copy_batch(b, q->stream, &error)) {
            b->n = 0;
            q->queued = 1;
            return;
        }
        q->one_by_one = 1;            /* not built with kernels, or no module here */
    }
    for (int e = 0; e < b->n; e++) {
        if (NULL != (error = xccl_gpu_copy((void *) (uintptr_t) b->dst[e], (const void *) (uintptr_t) b->src[e],
                                           (size_t) b->len[e], XCCL_GPU_DEVICE_TO_DEVICE, q->stream))) {
            fail(q, error);
            break;
        }
    }
    q->queued |= b->n > 0;
    b->n = 0;
}

void xccl_gpu_queue_flush(xccl_gpu_queue_t *q)
{
    chain_queue(q);
    batch_queue(q);
}

static int overlap(unsigned long long a, unsigned long long an, uintptr_t b, size_t bn)
{
    return an && bn && a < b + bn && b < a + an;
}

void xccl_gpu_queue_copy(xccl_gpu_queue_t *q, void *dst, const void *src, size_t len)
{
    xccl_gpu_copies_t *b = &q->batch;
    chain_queue(q);
    /* it joins the batch unless it touches a pending copy (copies run in
     * order: the batch goes first) */
    int clash = b->n >= XCCL_GPU_MAX_COPIES;
    for (int e = 0; !clash && e < b->n; e++) {
        clash = overlap(b->dst[e], b->len[e], (uintptr_t) dst, len) ||
                overlap(b->src[e], b->len[e], (uintptr_t) dst, len) ||
                overlap(b->dst[e], b->len[e], (uintptr_t) src, len);
    }
    if (clash) {
        batch_queue(q);
    }
    if (len > 0 && dst != src) {
        b->dst[b->n] = (uintptr_t) dst;
        b->src[b->n] = (uintptr_t) src;
        b->len[b->n] = len;
        b->n++;
    }
}

static int in_scratch(const xccl_gpu_queue_t *q, const void *p)
{
    return NULL != q->scratch && (const char *) p >= q->scratch &&
           (const char *) p < q->scratch + q->scratch_bytes;
}

void xccl_gpu_queue_reduce(xccl_gpu_queue_t *q, void *dst, const void *a, const void *b, size_t count)
{
    if (q->chain.n > 0 && a == q->chain.dst && count == q->chain.count && q->chain.n < XCCL_GPU_MAX_SRCS &&
        (dst == q->chain.dst || in_scratch(q, q->chain.dst))) {
        q->chain.srcs[q->chain.n++] = b;
        q->chain.dst = dst;
        return;
    }
    xccl_gpu_queue_flush(q);
    q->chain.dst = dst;
    q->chain.srcs[0] = a;
    q->chain.srcs[1] = b;
    q->chain.n = 2;
    q->chain.count = count;
}
