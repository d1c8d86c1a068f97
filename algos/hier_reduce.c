/*
 * Two-level reduce, rail-parallel, the shape of the two-level allreduce
 * with its last stage turned into a gather to the root:
 *   1. intra-node reduce-scatter: the vector is cut in L = min ppn slices;
 *      local rank j (< L) of every node gets the node's partial sum of
 *      slice j (local ranks >= L of bigger nodes get an empty slice);
 *   2. reduce of slice j on rail j to the rail's rank on the root's node,
 *      all rails at once;
 *   3. gather of the L slices inside the root's node to the root.
 * Each rank sends about n/L bytes between nodes instead of the n of one
 * leader per node.  The leader form (binomial reduce to a leader, then
 * between the leaders) is what the flat binomial tree already does on
 * block placement, and the model prices it alike: the flat tree stays
 * for small vectors; from some 64 KiB on several nodes the model prices
 * this shape ahead of every flat one.
 *
 * Every element is reduced by the intra-node stage's schedule inside each
 * node, then by the rail's reduce in its tree's order: the order depends
 * on the layout and the count alone, so every run gives the same bits.
 *
 * Buffers: only the root's RECV is named.  A slice lives in SCRATCH at 0
 * (the root not in place: straight in RECV at the slice's place), or is
 * SEND itself on a node of one rank (no reduce-scatter there); the
 * stages' own scratch follows it.
 */
#include "hier_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

int xccl_build_hier_reduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int root, int in_place,
                           xccl_reduce_scatter_build_fn intra_rs, xccl_reduce_build_fn inter,
                           xccl_gatherv_build_fn intra_gv)
{
    if (NULL == l || l->size != s->size || root < 0 || root >= s->size || NULL == intra_rs || NULL == inter ||
        NULL == intra_gv) {
        return -1;
    }
    const int r = s->rank, node = l->node_of[r], j = l->local_rank[r];
    const int rnode = l->node_of[root], rj = l->local_rank[root];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node);
    const int *members = xccl_layout_node_members(l, node);
    const size_t es = s->elem_size, slice0 = chunk_count(count, L, 0) * es;
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
    /* (from the slices' rule, not the arrays: j < ln, which the compiler
     * cannot see) */
    const size_t my_off = j < L ? chunk_first(count, L, j) * es : 0;
    const size_t my_len = j < L ? chunk_count(count, L, j) * es : 0;
    const int is_root = r == root;
    /* Where this rank's slice is after stage 1, and the stages' scratch. */
    const int whole = 1 == ln;             /* the slice is the whole SEND */
    const int direct = is_root && !in_place && !whole;
    const xccl_ref_t slice = whole    ? xccl_ref(XCCL_BUF_SEND, 0)
                             : direct ? xccl_ref(XCCL_BUF_RECV, my_off)
                                      : xccl_ref(XCCL_BUF_SCRATCH, 0);
    const size_t below = whole || direct ? 0 : hier_align(slice0);
    const xccl_ref_t child_scratch = xccl_ref(XCCL_BUF_SCRATCH, below);
    if (s->scratch_bytes < below) {
        s->scratch_bytes = below;
    }

    /* 1. Reduce-scatter inside the node, SEND to the slice.  At the root
     * in place SEND is RECV, which only stage 3 writes. */
    if (!whole) {
        if (hier_child_init(s, &c, members, ln) < 0) {
            goto out;
        }
        map = hier_map(xccl_ref(XCCL_BUF_SEND, 0), slice, child_scratch);
        if (hier_child_done(s, &c, members, &map, intra_rs(&c, counts, 0)) < 0) {
            goto out;
        }
    }

    /* 2. Reduce of slice j on rail j to the rail's rank on the root's node
     * (rail position rnode: rails list one rank per node, in node order).
     * There the result goes to RECV at the slice's place on the root, else
     * onto the slice in SCRATCH. */
    if (j < L && l->nnodes > 1) {
        const int nr = xccl_layout_rail(l, j, rail);
        const xccl_ref_t dst = is_root ? xccl_ref(XCCL_BUF_RECV, my_off) : xccl_ref(XCCL_BUF_SCRATCH, 0);
        const int rail_root = node == rnode;
        const int same = rail_root && (direct || (whole && in_place) || (!is_root && !whole));
        if (hier_child_init(s, &c, rail, nr) < 0) {
            goto out;
        }
        map = hier_map(slice, rail_root ? dst : slice, child_scratch);
        if (hier_child_done(s, &c, rail, &map, inter(&c, counts[j], rnode, same)) < 0) {
            goto out;
        }
    } else if (is_root && !direct && !(whole && in_place) && my_len > 0) {
        /* one node: the root's own slice to its place */
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, my_off), slice, my_len);
    }

    /* 3. The slices to the root inside its node; the root's own slice is
     * in place (local ranks >= L hold none). */
    if (node == rnode && ln > 1) {
        if (hier_child_init(s, &c, members, ln) < 0) {
            goto out;
        }
        map = hier_map(xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_RECV, 0), child_scratch);
        if (hier_child_done(s, &c, members, &map, intra_gv(&c, bytes, displs, rj, 1)) < 0) {
            goto out;
        }
    }
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    hier_slices_fini(&v);
    free(rail);
    return rc;
}
