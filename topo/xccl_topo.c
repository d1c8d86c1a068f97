/* Node description from hwloc. */
#include "xccl_topo.h"

#include <hwloc.h>
#include <stdio.h>

const char *xccl_topo_intra_name(xccl_topo_intra_t t)
{
    switch (t) {
    case XCCL_TOPO_INTRA_SHM: return "SHM";
    }
    return "?";
}

static int count(hwloc_topology_t t, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(t, type);
    return n > 0 ? n : 0;
}

int xccl_topo_detect_node(xccl_topo_node_t *node)
{
    hwloc_topology_t t;
    node->packages = node->numa_nodes = node->cores = node->pus = 0;
    node->intra = XCCL_TOPO_INTRA_SHM;
    if (hwloc_topology_init(&t) != 0) {
        snprintf(node->summary, sizeof(node->summary), "hwloc_topology_init failed");
        return -1;
    }
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        snprintf(node->summary, sizeof(node->summary), "hwloc_topology_load failed");
        return -1;
    }
    node->packages = count(t, HWLOC_OBJ_PACKAGE);
    node->numa_nodes = count(t, HWLOC_OBJ_NUMANODE);
    node->cores = count(t, HWLOC_OBJ_CORE);
    node->pus = count(t, HWLOC_OBJ_PU);
    hwloc_topology_destroy(t);
    snprintf(node->summary, sizeof(node->summary),
             "intra=%s packages=%d numa=%d cores=%d pus=%d",
             xccl_topo_intra_name(node->intra), node->packages, node->numa_nodes,
             node->cores, node->pus);
    return 0;
}
