/*
 * Topology of the node this process runs on, from hwloc.  The foundation
 * only needs a description for the log; the hierarchy model (nodes, rails,
 * device wiring, topology files) grows here.  No MPI, no UCX.
 */
#ifndef XCCL_TOPO_H
#define XCCL_TOPO_H

typedef enum { XCCL_TOPO_INTRA_SHM = 0 } xccl_topo_intra_t;

typedef struct {
    int packages, numa_nodes, cores, pus;
    xccl_topo_intra_t intra;
    char summary[128];         /* one line for the log */
} xccl_topo_node_t;

/* Fills *node from hwloc; 0, or -1 (node->summary says why). */
int xccl_topo_detect_node(xccl_topo_node_t *node);
const char *xccl_topo_intra_name(xccl_topo_intra_t t);

#endif
