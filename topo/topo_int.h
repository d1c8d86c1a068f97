/*
 * Shared by the detection files of topo/ (topo_detect.c: the node, the
 * accelerators, NVLink; topo_nic.c: the NICs): the state of one
 * detection and the hwloc helpers both use (topo_hwloc.c).  Not part of xccl_topo.h: nothing
 * outside topo/ sees hwloc.
 */
#ifndef XCCL_TOPO_INT_H
#define XCCL_TOPO_INT_H

#include "xccl_topo.h"

#include <hwloc.h>

/* One detection: hwloc's view, the topology being filled, the sysfs
 * root, and the PCI function of each NIC found so far (NULL where only
 * sysfs located it). */
typedef struct {
    hwloc_topology_t hw;
    xccl_topo_t *topo;
    const char *sysfs;
    hwloc_obj_t nic_obj[XCCL_TOPO_MAX_NICS];   /* PCI function of each NIC */
} topo_detect_t;

/* ---- topo_hwloc.c */

/* The number of hwloc objects of type (0 where hwloc has none). */
int topo_count(hwloc_topology_t hw, hwloc_obj_type_t type);
/* The one package whose cpus intersect set, or -1. */
int topo_package_of_cpuset(hwloc_topology_t hw, hwloc_const_cpuset_t set);
/* The location of PCI function pci (NULL: unknown): its bus id, PCIe path,
 * NUMA node and package. */
void topo_locate(topo_detect_t *d, hwloc_obj_t pci, xccl_topo_loc_t *loc);
/* The device kind (xccl_topo_dev_kind_t) of a PCI function of class cls
 * (0xBBSS) and vendor, or -1 where it is no accelerator. */
int topo_accel_kind_of(unsigned cls, unsigned vendor);

/* ---- topo_nic.c */

/* RDMA devices (<sysfs>/class/infiniband): NICs of type IB or RoCE. */
void topo_read_rdma_nics(topo_detect_t *d);
/* Plain Ethernet ports from hwloc's I/O objects. */
void topo_read_eth_nics(topo_detect_t *d);
/* Plain Ethernet ports from sysfs alone (hwloc's I/O discovery off). */
void topo_read_eth_nics_sysfs(topo_detect_t *d);
/* Whether hwloc's I/O discovery has anything to find that detection uses. */
int topo_io_needed(const topo_detect_t *d);

#endif
