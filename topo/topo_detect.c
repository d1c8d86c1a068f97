/*
 * Detection: hwloc for the node (packages, NUMA nodes, PCIe tree, the
 * accelerators as PCI devices, the locations of devices and NICs), the
 * NICs from sysfs and hwloc (topo_nic.c), NVML (through the ops table)
 * for NVLink.  Every source may be missing: a machine without them is
 * SHM/TCP, never an error.
 */
#include "topo_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVLINK_MAX 64   /* NVML has 18 today; a bound, not a layout */

static void read_node(topo_detect_t *d);
static void read_devices(topo_detect_t *d);
static void read_nvlinks(topo_detect_t *d, const xccl_topo_nvml_ops_t *ops);

int xccl_topo_detect(xccl_topo_t *topo, const xccl_topo_detect_opts_t *opts,
                     char *err, size_t errlen)
{
    static const xccl_topo_detect_opts_t none = { NULL, NULL, NULL, 0, 0 };
    topo_detect_t d;
    if (opts == NULL) {
        opts = &none;
    }
    xccl_topo_init(topo);
    memset(&d, 0, sizeof(d));
    d.topo = topo;
    d.sysfs = opts->sysfs_root ? opts->sysfs_root : "/sys";
    if (hwloc_topology_init(&d.hw) != 0) {
        snprintf(err, errlen, "hwloc_topology_init failed");
        return -1;
    }
    /* Bridges, accelerators, NICs and their OS devices; not every PCI
     * function of the machine.  None where nothing needs them (opts). */
    const int io = !opts->io_if_needed || opts->hwloc_xml || topo_io_needed(&d);
    hwloc_topology_set_io_types_filter(d.hw, io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_NONE);
    if (opts->hwloc_xml && hwloc_topology_set_xml(d.hw, opts->hwloc_xml) != 0) {
        snprintf(err, errlen, "%s: cannot use as hwloc XML: %s", opts->hwloc_xml, strerror(errno));
        hwloc_topology_destroy(d.hw);
        return -1;
    }
    if (hwloc_topology_load(d.hw) != 0) {
        snprintf(err, errlen, "hwloc_topology_load failed%s%s", opts->hwloc_xml ? " for " : "",
                 opts->hwloc_xml ? opts->hwloc_xml : "");
        hwloc_topology_destroy(d.hw);
        return -1;
    }
    read_node(&d);
    read_devices(&d);
    topo_read_rdma_nics(&d);
    if (io) {
        topo_read_eth_nics(&d);
    } else {
        topo_read_eth_nics_sysfs(&d);
    }
    if (!opts->no_nvml) {
        read_nvlinks(&d, opts->nvml ? opts->nvml : xccl_topo_nvml_default());
    }
    hwloc_topology_destroy(d.hw);
    xccl_topo_finalize(topo);
    return 0;
}

/* ------------------------------------------------------------ node summary */

/* Detection plus the model's summary: the detected machine in one line.
 * Here, not in xccl_topo.c, so that the model never calls detection. */
int xccl_topo_detect_node(xccl_topo_node_t *node)
{
    char err[96];
    node->packages = node->numa_nodes = node->cores = node->pus = 0;
    node->intra = XCCL_TOPO_INTRA_SHM;
    /* Some 20 KiB: kept off the stack of whatever thread calls. */
    xccl_topo_t *topo = malloc(sizeof(*topo));
    if (topo == NULL) {
        snprintf(node->summary, sizeof(node->summary), "out of memory");
        return -1;
    }
    int rc = xccl_topo_detect(topo, NULL, err, sizeof(err));
    if (rc == 0) {
        node->packages = topo->packages;
        node->numa_nodes = topo->numa_nodes;
        node->cores = topo->cores;
        node->pus = topo->pus;
        node->intra = topo->intra;
        xccl_topo_summary(topo, node->summary, sizeof(node->summary));
    } else {
        snprintf(node->summary, sizeof(node->summary), "%s", err);
    }
    free(topo);
    return rc;
}

/* ------------------------------------------------------------ node */

static void read_node(topo_detect_t *d)
{
    xccl_topo_t *topo = d->topo;
    hwloc_obj_t root = hwloc_get_root_obj(d->hw);
    const char *host = hwloc_obj_get_info_by_name(root, "HostName");
    if (host && *host) {
        snprintf(topo->name, sizeof(topo->name), "%s", host);
    }
    /* The name is one token in topology files. */
    for (char *c = topo->name; *c; c++) {
        if (*c == ' ' || *c == '\t' || *c == '#') {
            *c = '_';
        }
    }
    topo->packages = topo_count(d->hw, HWLOC_OBJ_PACKAGE);
    topo->numa_nodes = topo_count(d->hw, HWLOC_OBJ_NUMANODE);
    topo->cores = topo_count(d->hw, HWLOC_OBJ_CORE);
    topo->pus = topo_count(d->hw, HWLOC_OBJ_PU);
    for (int i = 0; i < topo->numa_nodes && topo->nnuma < XCCL_TOPO_MAX_NUMA; i++) {
        hwloc_obj_t n = hwloc_get_obj_by_type(d->hw, HWLOC_OBJ_NUMANODE, (unsigned) i);
        xccl_topo_numa_t *m = &topo->numa[topo->nnuma++];
        m->os_index = (int) n->os_index;
        m->package = topo_package_of_cpuset(d->hw, n->cpuset);
        m->cores = n->cpuset ? hwloc_get_nbobjs_inside_cpuset_by_type(d->hw, n->cpuset, HWLOC_OBJ_CORE) : 0;
        m->pus = n->cpuset ? hwloc_get_nbobjs_inside_cpuset_by_type(d->hw, n->cpuset, HWLOC_OBJ_PU) : 0;
    }
}

/* ------------------------------------------------------------ accelerators */

static int accel_kind(hwloc_obj_t o)
{
    return topo_accel_kind_of(o->attr->pcidev.class_id, o->attr->pcidev.vendor_id);
}

static int by_busid(const void *a, const void *b)
{
    const struct hwloc_pcidev_attr_s *x = &(*(const hwloc_obj_t *) a)->attr->pcidev;
    const struct hwloc_pcidev_attr_s *y = &(*(const hwloc_obj_t *) b)->attr->pcidev;
    unsigned kx = ((unsigned) x->domain << 16) | (x->bus << 8) | (x->dev << 3) | x->func;
    unsigned ky = ((unsigned) y->domain << 16) | (y->bus << 8) | (y->dev << 3) | y->func;
    return kx < ky ? -1 : kx > ky;
}

static void read_devices(topo_detect_t *d)
{
    xccl_topo_t *topo = d->topo;
    hwloc_obj_t found[XCCL_TOPO_MAX_DEVS];
    int n = 0, per_kind[3] = { 0, 0, 0 };
    for (hwloc_obj_t o = hwloc_get_next_pcidev(d->hw, NULL); o && n < XCCL_TOPO_MAX_DEVS;
         o = hwloc_get_next_pcidev(d->hw, o)) {
        if (accel_kind(o) >= 0) {
            found[n++] = o;
        }
    }
    /* PCI order is the order of CUDA_DEVICE_ORDER=PCI_BUS_ID and NVML. */
    qsort(found, (size_t) n, sizeof(found[0]), by_busid);
    for (int i = 0; i < n; i++) {
        xccl_topo_dev_t *dev = &topo->devs[topo->ndevs];
        int kind = accel_kind(found[i]);
        dev->kind = (xccl_topo_dev_kind_t) kind;
        dev->vendor = found[i]->attr->pcidev.vendor_id;
        dev->nic = -1;
        snprintf(dev->name, sizeof(dev->name), "%s%d", xccl_topo_dev_kind_name(dev->kind), per_kind[kind]++);
        topo_locate(d, found[i], &dev->loc);
        topo->ndevs++;
    }
}


/* ------------------------------------------------------------ NVLink */

static int parse_busid(const char *s, unsigned v[4])
{
    return sscanf(s, "%x:%x:%x.%x", &v[0], &v[1], &v[2], &v[3]) == 4 ? 0 : -1;
}

static int dev_at(const xccl_topo_t *topo, const char *busid)
{
    unsigned want[4], have[4];
    if (parse_busid(busid, want) != 0) {
        return -1;
    }
    for (int i = 0; i < topo->ndevs; i++) {
        if (parse_busid(topo->devs[i].loc.pci, have) == 0 && memcmp(want, have, sizeof(want)) == 0) {
            return i;
        }
    }
    return -1;
}

static void read_nvlinks(topo_detect_t *d, const xccl_topo_nvml_ops_t *ops)
{
    xccl_topo_t *topo = d->topo;
    int nvidia = 0;
    for (int i = 0; i < topo->ndevs; i++) {
        nvidia |= topo->devs[i].vendor == 0x10de;
    }
    /* No NVIDIA device: do not even load the library. */
    if (!nvidia || ops == NULL || ops->open(ops->ctx) != 0) {
        return;
    }
    int count[XCCL_TOPO_MAX_DEVS][XCCL_TOPO_MAX_DEVS];
    memset(count, 0, sizeof(count));
    for (int i = 0; i < topo->ndevs; i++) {
        if (topo->devs[i].vendor != 0x10de) {
            continue;
        }
        for (unsigned l = 0; l < NVLINK_MAX; l++) {
            xccl_topo_nvlink_t link;
            memset(&link, 0, sizeof(link));
            if (ops->link(ops->ctx, topo->devs[i].loc.pci, l, &link) != 0) {
                break;
            }
            if (!link.active) {
                continue;
            }
            link.remote_pci[sizeof(link.remote_pci) - 1] = '\0';
            int peer = link.remote == XCCL_TOPO_REMOTE_SWITCH ? -1 : dev_at(topo, link.remote_pci);
            if (peer >= 0 && peer != i) {
                count[i][peer]++;
            } else if (link.remote == XCCL_TOPO_REMOTE_SWITCH || link.remote == XCCL_TOPO_REMOTE_UNKNOWN) {
                /* An unknown peer that is none of our GPUs: an NVSwitch
                 * (they are not PCI devices of the node on HGX boards). */
                topo->devs[i].switch_links++;
            }
        }
    }
    ops->close(ops->ctx);
    for (int i = 0; i < topo->ndevs; i++) {
        for (int j = 0; j < topo->ndevs; j++) {
            int c = count[i][j] > count[j][i] ? count[i][j] : count[j][i];
            topo->links[i][j].type = XCCL_TOPO_LINK_NVLINK;
            topo->links[i][j].count = (unsigned char) (c > 255 ? 255 : c);
        }
    }
    topo->switch_link_type = XCCL_TOPO_LINK_NVLINK;
}
