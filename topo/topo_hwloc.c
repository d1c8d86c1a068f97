/*
 * The hwloc queries both detection files use (topo_detect.c, topo_nic.c):
 * counts, the package of a cpuset, the location of a PCI function, the
 * accelerator kind of a PCI class.  Below both: it calls neither.
 */
#include "topo_int.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ counts */

int topo_count(hwloc_topology_t hw, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(hw, type);
    return n > 0 ? n : 0;
}

int topo_package_of_cpuset(hwloc_topology_t hw, hwloc_const_cpuset_t set)
{
    int found = -1, n = topo_count(hw, HWLOC_OBJ_PACKAGE);
    if (set == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        hwloc_obj_t p = hwloc_get_obj_by_type(hw, HWLOC_OBJ_PACKAGE, (unsigned) i);
        if (p->cpuset && hwloc_bitmap_intersects(p->cpuset, set)) {
            if (found >= 0) {
                return -1;
            }
            found = (int) p->logical_index;
        }
    }
    return found;
}

/* ------------------------------------------------------------ locations */

static void busid_of(hwloc_obj_t pci, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
             pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

void topo_locate(topo_detect_t *d, hwloc_obj_t pci, xccl_topo_loc_t *loc)
{
    char elem[16][24];
    int n = 0;
    loc->numa = loc->package = -1;
    loc->pci[0] = loc->pcie[0] = '\0';
    if (pci == NULL) {
        return;
    }
    busid_of(pci, loc->pci, sizeof(loc->pci));
    /* Bridges from the endpoint up to its host bridge, then reversed. */
    for (hwloc_obj_t o = pci->parent; o && o->type == HWLOC_OBJ_BRIDGE && n < 16; o = o->parent) {
        if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
            snprintf(elem[n++], sizeof(elem[0]), "%04x:%02x", o->attr->bridge.downstream.pci.domain,
                     o->attr->bridge.downstream.pci.secondary_bus);
            break;
        }
        busid_of(o, elem[n++], sizeof(elem[0]));
    }
    for (int i = n - 1; i >= 0; i--) {
        size_t used = strlen(loc->pcie);
        snprintf(loc->pcie + used, sizeof(loc->pcie) - used, "%s%s", i == n - 1 ? "" : "/", elem[i]);
    }
    hwloc_obj_t cpu = hwloc_get_non_io_ancestor_obj(d->hw, pci);
    if (cpu == NULL) {
        return;
    }
    if (cpu->nodeset) {
        int nn = topo_count(d->hw, HWLOC_OBJ_NUMANODE), hits = 0;
        for (int i = 0; i < nn; i++) {
            hwloc_obj_t m = hwloc_get_obj_by_type(d->hw, HWLOC_OBJ_NUMANODE, (unsigned) i);
            if (hwloc_bitmap_isset(cpu->nodeset, m->os_index)) {
                hits++;
                loc->numa = (int) m->os_index;
            }
        }
        if (hits != 1) {
            loc->numa = -1;   /* attached above several NUMA nodes */
        }
    }
    loc->package = topo_package_of_cpuset(d->hw, cpu->cpuset);
}

/* Accelerators by PCI class and vendor: display / 3D controllers of the
 * GPU vendors and processing accelerators (class 0x12), never the BMC's
 * VGA or an NVSwitch (a bridge-class function). */
int topo_accel_kind_of(unsigned cls, unsigned vendor)
{
    const unsigned base = cls >> 8;
    switch (vendor) {
    case 0x10de:                            /* NVIDIA */
        return base == 0x03 ? XCCL_TOPO_DEV_GPU : -1;
    case 0x1002:                            /* AMD */
        return base == 0x03 || base == 0x12 ? XCCL_TOPO_DEV_GPU : -1;
    case 0x19e5:                            /* Huawei (Ascend) */
        return base == 0x12 ? XCCL_TOPO_DEV_NPU : -1;
    case 0x8086:                            /* Intel: data-centre GPUs only */
        return cls == 0x0380 || base == 0x12 ? XCCL_TOPO_DEV_GPU : -1;
    default:
        return base == 0x12 ? XCCL_TOPO_DEV_ACCEL : -1;
    }
}
