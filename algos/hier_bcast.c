/*
 * Two-level bcast, any layout.
 *
 * xccl_build_hier_bcast: the root sends to one rank per node (the rank of
 * the root's local index, or the leader of a node too small for it), then
 * each of them inside its node.  Between nodes: one bcast of n bytes.
 *
 * xccl_build_hier_bcast_rails, for large messages: the root cuts the data
 * in L = min ppn pieces and sends piece j to local rank j of its node; piece
 * j is broadcast on rail j, all rails at once; an intra-node allgather puts
 * the pieces together.  Between nodes each rail moves n/L bytes.
 */
#include "hier_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

int xccl_build_hier_bcast(xccl_sched_t *s, const xccl_layout_t *l, size_t bytes, int root,
                          xccl_bcast_build_fn inter, xccl_bcast_build_fn intra)
{
    if (NULL == l || l->size != s->size || NULL == inter || NULL == intra || root < 0 || root >= s->size) {
        return -1;
    }
    const int r = s->rank, N = l->nnodes, node = l->node_of[r];
    const int rnode = l->node_of[root], rj = l->local_rank[root];
    int *reps = malloc((size_t) N * sizeof(int));
    xccl_sched_t c;
    const xccl_buf_map_t map = hier_map(xccl_ref(XCCL_BUF_SEND, 0), xccl_ref(XCCL_BUF_RECV, 0),
                                        xccl_ref(XCCL_BUF_SCRATCH, 0));
    int rc = -1;

    if (NULL == reps) {
        return -1;
    }
    s->algo = "hier";
    /* The representative of each node: the root on its own node. */
    for (int n = 0; n < N; n++) {
        int x = xccl_layout_rank_at(l, n, rj);
        reps[n] = n == rnode ? root : x >= 0 ? x : xccl_layout_leader(l, n);
    }
    if (N > 1 && reps[node] == r) {
        if (hier_child_init(s, &c, reps, N) < 0 ||
            hier_child_done(s, &c, reps, &map, inter(&c, bytes, rnode)) < 0) {
            goto out;
        }
    }
    const int ln = xccl_layout_node_size(l, node);
    if (ln > 1) {
        const int *members = xccl_layout_node_members(l, node);
        if (hier_child_init(s, &c, members, ln) < 0 ||
            hier_child_done(s, &c, members, &map, intra(&c, bytes, l->local_rank[reps[node]])) < 0) {
            goto out;
        }
    }
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    free(reps);
    return rc;
}

int xccl_build_hier_bcast_rails(xccl_sched_t *s, const xccl_layout_t *l, size_t bytes, int root,
                                xccl_bcast_build_fn inter, xccl_allgatherv_build_fn intra)
{
    if (NULL == l || l->size != s->size || NULL == inter || NULL == intra || root < 0 || root >= s->size) {
        return -1;
    }
    const int r = s->rank, N = l->nnodes, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node), rnode = l->node_of[root];
    const int *members = xccl_layout_node_members(l, node);
    size_t *len = malloc((size_t) ln * sizeof(size_t)), *displs = malloc((size_t) ln * sizeof(size_t));
    int *rail = malloc((size_t) N * sizeof(int));
    xccl_sched_t c;
    xccl_buf_map_t map;
    int rc = -1;

    if (NULL == len || NULL == displs || NULL == rail) {
        goto out;
    }
    s->algo = "hier";
    for (int i = 0; i < ln; i++) {
        len[i] = i < L ? chunk_count(bytes, L, i) : 0;
        displs[i] = i < L ? chunk_first(bytes, L, i) : 0;
    }
    /* 1. The root sends piece i to local rank i of its node. */
    if (node == rnode && ln > 1) {
        if (r == root) {
            xccl_sched_step(s);
            for (int i = 0; i < L; i++) {
                if (members[i] != root) {
                    xccl_sched_send(s, members[i], xccl_ref(XCCL_BUF_RECV, displs[i]), len[i]);
                }
            }
        } else if (j < L) {
            xccl_sched_step(s);
            xccl_sched_recv(s, root, xccl_ref(XCCL_BUF_RECV, displs[j]), len[j]);
        }
    }
    /* 2. Piece j on rail j, from the root's node. */
    if (j < L && N > 1) {
        int nr = xccl_layout_rail(l, j, rail);
        map = hier_map(xccl_ref(XCCL_BUF_RECV, displs[j]), xccl_ref(XCCL_BUF_RECV, displs[j]),
                       xccl_ref(XCCL_BUF_SCRATCH, 0));
        if (hier_child_init(s, &c, rail, nr) < 0 ||
            hier_child_done(s, &c, rail, &map, inter(&c, len[j], rnode)) < 0) {
            goto out;
        }
    }
    /* 3. The pieces put together inside each node. */
    if (ln > 1) {
        map = hier_map(xccl_ref(XCCL_BUF_RECV, displs[j]), xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, 0));
        if (hier_child_init(s, &c, members, ln) < 0 ||
            hier_child_done(s, &c, members, &map, intra(&c, len, displs, 1)) < 0) {
            goto out;
        }
    }
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    free(len);
    free(displs);
    free(rail);
    return rc;
}
