/*
 * Two-level allreduce, rail-parallel:
 *   1. intra-node reduce-scatter: the vector is cut in L = min ppn slices;
 *      local rank j (< L) of every node gets the node's partial sum of
 *      slice j (local ranks >= L of bigger nodes get an empty slice);
 *   2. inter-node allreduce of slice j on rail j, all rails at once;
 *   3. intra-node allgather of the slices.
 * Each rank sends 2 (N-1)/N n/L bytes between nodes (ring or Rabenseifner
 * on the rails) instead of 2 (p-1)/p n.  Every element is reduced by one
 * rank of each node in stage 1 and by the rail's algorithm in stage 2,
 * whose result is the same bits on every rail member; stage 3 only copies,
 * so every rank ends with the same bits.
 */
#include "hier_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

int xccl_build_hier_allreduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int in_place,
                              xccl_reduce_scatter_build_fn intra_rs, xccl_allreduce_build_fn inter_ar,
                              xccl_allgatherv_build_fn intra_ag)
{
    if (NULL == l || l->size != s->size || NULL == intra_rs || NULL == inter_ar || NULL == intra_ag) {
        return -1;
    }
    const int r = s->rank, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node);
    const int *members = xccl_layout_node_members(l, node);
    const size_t es = s->elem_size;
    hier_slices_t v;
    int *rail = malloc((size_t) l->nnodes * sizeof(int));
    xccl_sched_t c;
    xccl_buf_map_t map;
    int rc = -1;

    if (0 != hier_slices_init(&v, count, L, ln, es) || NULL == rail) {
        goto out;
    }
    const size_t *counts = v.counts, *bytes = v.bytes, *displs = v.displs;
    s->algo = "hier";
    const size_t my_off = displs[j], my_len = bytes[j];

    /* 1. Reduce-scatter inside the node.  Not in place, slice j lands at its
     * place in RECV.  In place the child's output is RECV[0..), moved to its
     * place afterwards: slice j starts at or after the end of slice 0, the
     * largest, so the two ranges never overlap. */
    if (hier_child_init(s, &c, members, ln) < 0) {
        goto out;
    }
    map = in_place ? hier_map(xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, 0))
                   : hier_map(xccl_ref(XCCL_BUF_SEND, 0), xccl_ref(XCCL_BUF_RECV, my_off),
                              xccl_ref(XCCL_BUF_SCRATCH, 0));
    if (hier_child_done(s, &c, members, &map, intra_rs(&c, counts, in_place)) < 0) {
        goto out;
    }
    if (in_place && my_off > 0) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, my_off), xccl_ref(XCCL_BUF_RECV, 0), my_len);
    }

    /* 2. Allreduce of slice j on rail j, in place. */
    if (j < L && l->nnodes > 1) {
        int nr = xccl_layout_rail(l, j, rail);
        if (hier_child_init(s, &c, rail, nr) < 0) {
            goto out;
        }
        map = hier_map(xccl_ref(XCCL_BUF_RECV, my_off), xccl_ref(XCCL_BUF_RECV, my_off),
                       xccl_ref(XCCL_BUF_SCRATCH, 0));
        if (hier_child_done(s, &c, rail, &map, inter_ar(&c, counts[j])) < 0) {
            goto out;
        }
    }

    /* 3. Allgather of the slices inside the node, in place. */
    if (hier_child_init(s, &c, members, ln) < 0) {
        goto out;
    }
    map = hier_map(xccl_ref(XCCL_BUF_RECV, my_off), xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, 0));
    if (hier_child_done(s, &c, members, &map, intra_ag(&c, bytes, displs, 1)) < 0) {
        goto out;
    }
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    hier_slices_fini(&v);
    free(rail);
    return rc;
}
