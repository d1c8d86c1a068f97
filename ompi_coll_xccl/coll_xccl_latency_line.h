/*
 * A rank's latency line (the latency path's sequence word, in the node
 * segment: xccl_segment_line) and the payload it may carry: a bcast's of
 * at most XCCL_LATENCY_INLINE bytes (coll_xccl_latency.c), a v form's
 * small block (coll_xccl_latency_v.c), next to the number, so that a
 * reader whose writer has not moved on gets both with one cache-line
 * transfer instead of two.  tag says which call's payload the line holds,
 * 0 while the writer rewrites it: a reader takes the payload only where
 * tag reads f before and after it (a seqlock), else the copy in the
 * writer's small area, which the latency path's ring protects.
 */
#ifndef MCA_COLL_XCCL_LATENCY_LINE_H
#define MCA_COLL_XCCL_LATENCY_LINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/xccl_copy.h"
#include "segment/xccl_segment.h"

#define XCCL_LATENCY_INLINE 48

typedef struct {
    _Atomic uint64_t seq;
    _Atomic uint64_t tag;
    _Atomic uint64_t inl[XCCL_LATENCY_INLINE / 8];
} mca_coll_xccl_latency_line_t;
_Static_assert(sizeof(mca_coll_xccl_latency_line_t) <= XCCL_SEGMENT_LINE_BYTES, "latency line");

/* The writer's side: the payload of call f (len bytes of src) into its
 * line, before it posts f. */
static inline __attribute__((always_inline)) void
mca_coll_xccl_latency_line_put(mca_coll_xccl_latency_line_t *l, const void *src, size_t len, uint64_t f)
{
    uint64_t w[XCCL_LATENCY_INLINE / 8] = { 0 };
    xccl_copy_small(w, src, len);
    atomic_store_explicit(&l->tag, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (size_t i = 0; i < (len + 7) / 8; i++) {
        atomic_store_explicit(&l->inl[i], w[i], memory_order_relaxed);
    }
    atomic_store_explicit(&l->tag, f, memory_order_release);
}

/* A reader's side, once the writer posted f: 1 and the payload of call f
 * in dst, or 0 (the writer has moved on, or is rewriting the line: read
 * its small area). */
static inline __attribute__((always_inline)) int
mca_coll_xccl_latency_line_get(const mca_coll_xccl_latency_line_t *l, void *dst, size_t len, uint64_t f)
{
    uint64_t w[XCCL_LATENCY_INLINE / 8];
    if (atomic_load_explicit(&l->tag, memory_order_acquire) != f) {
        return 0;
    }
    for (size_t i = 0; i < (len + 7) / 8; i++) {
        w[i] = atomic_load_explicit(&l->inl[i], memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&l->tag, memory_order_relaxed) != f) {
        return 0;
    }
    xccl_copy_small(dst, w, len);
    return 1;
}

#endif
