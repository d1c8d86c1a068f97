/*
 * xccl algorithms, node layout: how the ranks of a communicator sit on
 * nodes (local ranks, leaders, rails).  Section of the algos API;
 * algos/xccl_algos.h includes every section.
 */
#ifndef XCCL_LAYOUT_H
#define XCCL_LAYOUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Node layout                                                              */
/* ------------------------------------------------------------------------ */

/* How the ranks of a communicator sit on nodes.  Nodes are numbered in the
 * order of their lowest rank; inside a node ranks keep communicator order
 * (they need not be contiguous: --map-by node) unless reordered with
 * xccl_layout_set_order.  The local rank of r is its index inside its node;
 * rail j is the ranks of local rank j, one per node that has more than j
 * ranks, in node order; the leader of a node is its local rank 0. */
typedef struct {
    int size;                  /* ranks */
    int nnodes;
    int *node_of;              /* [size] node of each rank, 0..nnodes-1 */
    int *local_rank;           /* [size] index of each rank inside its node */
    int *node_first;           /* [nnodes+1] node n is members[node_first[n] .. node_first[n+1]) */
    int *members;              /* [size] ranks grouped by node, in local rank order */
    int min_ppn, max_ppn;      /* fewest and most ranks on one node */
} xccl_layout_t;

/* node_id[r]: any non-negative identifier of rank r's node (equal ids, same
 * node).  0, or -1 (bad argument, out of memory). */
int xccl_layout_init(xccl_layout_t *l, int size, const int *node_id);
/* A synthetic layout: "block:K" (ranks [iK, iK+K) form node i, the last node
 * may be smaller), "cyclic:N" (rank r on node r % N) or an explicit list of
 * node ids, one per rank ("0,0,1,1,2").  size <= 0 takes the list's length
 * (block and cyclic need size > 0).  0, or -1 with err saying why. */
int xccl_layout_parse(xccl_layout_t *l, const char *spec, int size, char *err, size_t errlen);
void xccl_layout_fini(xccl_layout_t *l);
/* Reorders the members of node, e.g. to follow the wiring (the ring order
 * inside a node): order is a permutation of its ranks; local ranks, leader
 * and rails follow the new order.  0, or -1 if order is not a permutation. */
int xccl_layout_set_order(xccl_layout_t *l, int node, const int *order);
/* Rail j: writes its ranks (node order) to out[0..nnodes) and returns how
 * many there are (0 if no node has more than j ranks). */
int xccl_layout_rail(const xccl_layout_t *l, int j, int *out);

static inline int xccl_layout_node_size(const xccl_layout_t *l, int node)
{
    return l->node_first[node + 1] - l->node_first[node];
}

static inline const int *xccl_layout_node_members(const xccl_layout_t *l, int node)
{
    return l->members + l->node_first[node];
}

/* The rank at local index j of node, or -1 if the node is smaller. */
static inline int xccl_layout_rank_at(const xccl_layout_t *l, int node, int j)
{
    return j >= 0 && j < xccl_layout_node_size(l, node) ? l->members[l->node_first[node] + j] : -1;
}

static inline int xccl_layout_leader(const xccl_layout_t *l, int node)
{
    return l->members[l->node_first[node]];
}

/* Every node has the same number of ranks. */
static inline int xccl_layout_is_regular(const xccl_layout_t *l)
{
    return l->min_ppn == l->max_ppn;
}

#ifdef __cplusplus
}
#endif

#endif
