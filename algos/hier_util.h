/*
 * Internal helpers of the two-level builders (algos/hier_*.c): child
 * schedules on sub-groups, buffer maps, block copies merged into runs.
 * Not part of the public API (xccl_algos.h).
 */
#ifndef XCCL_HIER_UTIL_H
#define XCCL_HIER_UTIL_H

#include "algo_util.h"
#include "xccl_layout.h"

#include <stdlib.h>

/* Scratch regions start on this boundary, so reductions see aligned data. */
#define HIER_ALIGN ((size_t) 64)

static inline size_t hier_align(size_t n)
{
    return (n + HIER_ALIGN - 1) / HIER_ALIGN * HIER_ALIGN;
}

static inline xccl_buf_map_t hier_map(xccl_ref_t send, xccl_ref_t recv, xccl_ref_t scratch)
{
    xccl_buf_map_t m;
    m.base[XCCL_BUF_SEND] = send;
    m.base[XCCL_BUF_RECV] = recv;
    m.base[XCCL_BUF_SCRATCH] = scratch;
    m.base[XCCL_BUF_SLOT] = xccl_ref(XCCL_BUF_SLOT, 0);    /* not moved (xccl_sched_append) */
    return m;
}

/* A node's slices of a vector of count elements of es bytes in the
 * two-level reductions: the vector cut in L (min ppn) slices, local rank
 * i < L holds slice i (counts[i] elements, bytes[i] bytes from displs[i]
 * bytes), local ranks from L none; ln ranks on the node.  0, or -1 out
 * of memory; hier_slices_fini in both cases. */
typedef struct {
    size_t *counts, *bytes, *displs;
} hier_slices_t;

static inline int hier_slices_init(hier_slices_t *v, size_t count, int L, int ln, size_t es)
{
    v->counts = malloc((size_t) ln * sizeof(size_t));
    v->bytes = malloc((size_t) ln * sizeof(size_t));
    v->displs = malloc((size_t) ln * sizeof(size_t));
    if (NULL == v->counts || NULL == v->bytes || NULL == v->displs) {
        return -1;
    }
    for (int i = 0; i < ln; i++) {
        v->counts[i] = i < L ? chunk_count(count, L, i) : 0;
        v->bytes[i] = v->counts[i] * es;
        v->displs[i] = i < L ? chunk_first(count, L, i) * es : 0;
    }
    return 0;
}

static inline void hier_slices_fini(hier_slices_t *v)
{
    free(v->counts);
    free(v->bytes);
    free(v->displs);
}

/* Initialise child c for s's rank on group[0..g): -1 if s's rank is not in
 * the group. */
static inline int hier_child_init(const xccl_sched_t *s, xccl_sched_t *c, const int *group, int g)
{
    for (int i = 0; i < g; i++) {
        if (group[i] == s->rank) {
            xccl_sched_init(c, i, g, s->elem_size);
            c->slot_cap = s->slot_cap;     /* a shm stage pipelines through the parent's slot */
            return 0;
        }
    }
    return -1;
}

/* Append child c (built with result rc) to s and release it. */
static inline int hier_child_done(xccl_sched_t *s, xccl_sched_t *c, const int *group,
                                  const xccl_buf_map_t *map, int rc)
{
    if (0 == rc) {
        rc = xccl_sched_append(s, c, group, map);
    }
    xccl_sched_fini(c);
    if (rc != 0) {
        s->error = 1;
        return -1;
    }
    return 0;
}

/* Copies of blocks, adjacent ones merged into one action; a copy onto
 * itself is dropped. */
typedef struct {
    xccl_sched_t *s;
    xccl_ref_t dst, src;
    size_t len;
} hier_copier_t;

static inline void hier_copy_flush(hier_copier_t *c)
{
    if (c->len > 0 && (c->dst.buf != c->src.buf || c->dst.off != c->src.off ||
                       c->dst.peer_plus1 != c->src.peer_plus1)) {
        xccl_sched_copy(c->s, c->dst, c->src, c->len);
    }
    c->len = 0;
}

static inline void hier_copy_add(hier_copier_t *c, xccl_ref_t dst, xccl_ref_t src, size_t len)
{
    if (0 == len) {
        return;
    }
    if (c->len > 0 && c->dst.buf == dst.buf && c->src.buf == src.buf && c->dst.off + c->len == dst.off &&
        c->src.off + c->len == src.off && c->dst.peer_plus1 == dst.peer_plus1 &&
        c->src.peer_plus1 == src.peer_plus1) {
        c->len += len;
        return;
    }
    hier_copy_flush(c);
    c->dst = dst;
    c->src = src;
    c->len = len;
}

/* Ranks in rail-group order: group gg (local ranks gg, gg + L, ... of
 * every node) node by node.  pos[d]: rank d's index in that order;
 * start[gg * N + n]: the first index of group gg on node n (start[L * N]:
 * p).  Returns 1 when the order is the communicator's own (pos[d] = d). */
static inline int hier_rail_order(const xccl_layout_t *l, int L, size_t *pos, size_t *start)
{
    const int N = l->nnodes;
    size_t k = 0;
    int identity = 1;
    for (int gg = 0; gg < L; gg++) {
        for (int n = 0; n < N; n++) {
            start[gg * N + n] = k;
            for (int i = gg; i < xccl_layout_node_size(l, n); i += L) {
                const int d = xccl_layout_rank_at(l, n, i);
                identity &= (size_t) d == k;
                pos[d] = k++;
            }
        }
    }
    start[L * N] = k;
    return identity;
}

#endif
