/*
 * Detection: hwloc for the node (packages, NUMA nodes, PCIe tree, the
 * accelerators and NICs as PCI devices), sysfs for the RDMA ports
 * (<root>/class/infiniband/<dev>/ports/<n>/{link_layer,state,rate}) and
 * Ethernet speeds, NVML (through the ops table) for NVLink.  Every source
 * may be missing: a machine without them is SHM/TCP, never an error.
 */
#include "xccl_topo.h"

#include <hwloc.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVLINK_MAX 64   /* NVML has 18 today; a bound, not a layout */

typedef struct {
    hwloc_topology_t hw;
    xccl_topo_t *topo;
    const char *sysfs;
    hwloc_obj_t nic_obj[XCCL_TOPO_MAX_NICS];   /* PCI function of each NIC */
} detect_t;

static void read_node(detect_t *d);
static void read_devices(detect_t *d);
static void read_rdma_nics(detect_t *d);
static void read_eth_nics(detect_t *d);
static void read_eth_nics_sysfs(detect_t *d);
static int io_needed(const detect_t *d);
static void read_nvlinks(detect_t *d, const xccl_topo_nvml_ops_t *ops);

int xccl_topo_detect(xccl_topo_t *topo, const xccl_topo_detect_opts_t *opts,
                     char *err, size_t errlen)
{
    static const xccl_topo_detect_opts_t none = { NULL, NULL, NULL, 0, 0 };
    detect_t d;
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
    const int io = !opts->io_if_needed || opts->hwloc_xml || io_needed(&d);
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
    read_rdma_nics(&d);
    if (io) {
        read_eth_nics(&d);
    } else {
        read_eth_nics_sysfs(&d);
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

static int count(hwloc_topology_t hw, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(hw, type);
    return n > 0 ? n : 0;
}

/* The one package whose cpus intersect set, or -1. */
static int package_of_cpuset(hwloc_topology_t hw, hwloc_const_cpuset_t set)
{
    int found = -1, n = count(hw, HWLOC_OBJ_PACKAGE);
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

static void read_node(detect_t *d)
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
    topo->packages = count(d->hw, HWLOC_OBJ_PACKAGE);
    topo->numa_nodes = count(d->hw, HWLOC_OBJ_NUMANODE);
    topo->cores = count(d->hw, HWLOC_OBJ_CORE);
    topo->pus = count(d->hw, HWLOC_OBJ_PU);
    for (int i = 0; i < topo->numa_nodes && topo->nnuma < XCCL_TOPO_MAX_NUMA; i++) {
        hwloc_obj_t n = hwloc_get_obj_by_type(d->hw, HWLOC_OBJ_NUMANODE, (unsigned) i);
        xccl_topo_numa_t *m = &topo->numa[topo->nnuma++];
        m->os_index = (int) n->os_index;
        m->package = package_of_cpuset(d->hw, n->cpuset);
        m->cores = n->cpuset ? hwloc_get_nbobjs_inside_cpuset_by_type(d->hw, n->cpuset, HWLOC_OBJ_CORE) : 0;
        m->pus = n->cpuset ? hwloc_get_nbobjs_inside_cpuset_by_type(d->hw, n->cpuset, HWLOC_OBJ_PU) : 0;
    }
}

/* ------------------------------------------------------------ locations */

static void busid_of(hwloc_obj_t pci, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
             pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

static void locate(detect_t *d, hwloc_obj_t pci, xccl_topo_loc_t *loc)
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
        int nn = count(d->hw, HWLOC_OBJ_NUMANODE), hits = 0;
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
    loc->package = package_of_cpuset(d->hw, cpu->cpuset);
}

/* ------------------------------------------------------------ accelerators */

/* Accelerators by PCI class and vendor: display / 3D controllers of the
 * GPU vendors and processing accelerators (class 0x12), never the BMC's
 * VGA or an NVSwitch (a bridge-class function). */
static int accel_kind_of(unsigned cls, unsigned vendor)
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

static int accel_kind(hwloc_obj_t o)
{
    return accel_kind_of(o->attr->pcidev.class_id, o->attr->pcidev.vendor_id);
}

static int by_busid(const void *a, const void *b)
{
    const struct hwloc_pcidev_attr_s *x = &(*(const hwloc_obj_t *) a)->attr->pcidev;
    const struct hwloc_pcidev_attr_s *y = &(*(const hwloc_obj_t *) b)->attr->pcidev;
    unsigned kx = ((unsigned) x->domain << 16) | (x->bus << 8) | (x->dev << 3) | x->func;
    unsigned ky = ((unsigned) y->domain << 16) | (y->bus << 8) | (y->dev << 3) | y->func;
    return kx < ky ? -1 : kx > ky;
}

static void read_devices(detect_t *d)
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
        locate(d, found[i], &dev->loc);
        topo->ndevs++;
    }
}

/* ------------------------------------------------------------ NICs */

static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    char *ok = fgets(buf, (int) len, f);
    fclose(f);
    if (ok == NULL) {
        return -1;
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

/* mlx5_2 before mlx5_10. */
static int natural_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *) a, *y = *(const char *const *) b;
    while (*x && *y) {
        if (*x >= '0' && *x <= '9' && *y >= '0' && *y <= '9') {
            char *ex, *ey;
            unsigned long vx = strtoul(x, &ex, 10), vy = strtoul(y, &ey, 10);
            if (vx != vy) {
                return vx < vy ? -1 : 1;
            }
            x = ex;
            y = ey;
        } else if (*x != *y) {
            return (unsigned char) *x - (unsigned char) *y;
        } else {
            x++;
            y++;
        }
    }
    return (unsigned char) *x - (unsigned char) *y;
}

/* Names of the entries of dir, sorted naturally; the caller frees. */
static int list_dir(const char *dir, char ***names)
{
    DIR *dh = opendir(dir);
    int n = 0, cap = 0;
    *names = NULL;
    if (dh == NULL) {
        return 0;
    }
    for (struct dirent *e = readdir(dh); e; e = readdir(dh)) {
        if (e->d_name[0] == '.') {
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(*names, (size_t) cap * sizeof(char *));
            if (grown == NULL) {
                break;
            }
            *names = grown;
        }
        if (((*names)[n] = strdup(e->d_name)) != NULL) {
            n++;
        }
    }
    closedir(dh);
    qsort(*names, (size_t) n, sizeof(char *), natural_cmp);
    return n;
}

static void free_list(char **names, int n)
{
    for (int i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
}

static hwloc_obj_t pci_parent(hwloc_obj_t o)
{
    while (o && o->type != HWLOC_OBJ_PCI_DEVICE) {
        o = o->parent;
    }
    return o;
}

/* The PCI function of an RDMA device: its OS device in hwloc, else the
 * target of the sysfs "device" link (…/0000:1a:00.0). */
static hwloc_obj_t rdma_pci(detect_t *d, const char *name)
{
    char path[PATH_MAX], target[PATH_MAX];
    for (hwloc_obj_t o = hwloc_get_next_osdev(d->hw, NULL); o; o = hwloc_get_next_osdev(d->hw, o)) {
        if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && o->name && strcmp(o->name, name) == 0) {
            return pci_parent(o);
        }
    }
    snprintf(path, sizeof(path), "%s/class/infiniband/%s/device", d->sysfs, name);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) {
        return NULL;
    }
    target[n] = '\0';
    const char *base = strrchr(target, '/');
    return hwloc_get_pcidev_by_busidstring(d->hw, base ? base + 1 : target);
}

static void read_rdma_ports(detect_t *d, const char *dev, xccl_topo_nic_t *nic)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], buf[128];
    char **ports;
    snprintf(dir, sizeof(dir), "%s/class/infiniband/%s/ports", d->sysfs, dev);
    int np = list_dir(dir, &ports);
    int any_ib = 0, active_ib = 0, active_eth = 0;
    double any_rate = 0;
    for (int p = 0; p < np; p++) {
        int eth = 0, active = 0;
        double rate = 0;
        snprintf(path, sizeof(path), "%s/%s/link_layer", dir, ports[p]);
        /* No link_layer file (old kernels): InfiniBand. */
        eth = read_line(path, buf, sizeof(buf)) == 0 && strcmp(buf, "Ethernet") == 0;
        snprintf(path, sizeof(path), "%s/%s/state", dir, ports[p]);
        active = read_line(path, buf, sizeof(buf)) == 0 && strstr(buf, "ACTIVE") != NULL;
        snprintf(path, sizeof(path), "%s/%s/rate", dir, ports[p]);
        if (read_line(path, buf, sizeof(buf)) == 0) {
            rate = strtod(buf, NULL);    /* "400 Gb/sec (4X NDR)" */
        }
        any_ib |= !eth;
        if (rate > any_rate) {
            any_rate = rate;
        }
        if (active) {
            nic->ports++;
            active_ib += !eth;
            active_eth += eth;
            if (rate > nic->rate_gbps) {
                nic->rate_gbps = rate;
            }
        }
    }
    free_list(ports, np);
    if (nic->ports > 0) {
        nic->type = active_ib ? XCCL_TOPO_NIC_IB : XCCL_TOPO_NIC_ROCE;
        /* A mixed device counts only the ports of its kind. */
        nic->ports = active_ib ? active_ib : active_eth;
    } else {
        nic->type = any_ib || np == 0 ? XCCL_TOPO_NIC_IB : XCCL_TOPO_NIC_ROCE;
        nic->rate_gbps = any_rate;
    }
}

static void read_rdma_nics(detect_t *d)
{
    char dir[PATH_MAX];
    char **devs;
    snprintf(dir, sizeof(dir), "%s/class/infiniband", d->sysfs);
    int n = list_dir(dir, &devs);
    for (int i = 0; i < n && d->topo->nnics < XCCL_TOPO_MAX_NICS; i++) {
        xccl_topo_nic_t *nic = &d->topo->nics[d->topo->nnics];
        if (strlen(devs[i]) >= sizeof(nic->name)) {
            continue;
        }
        memset(nic, 0, sizeof(*nic));
        snprintf(nic->name, sizeof(nic->name), "%s", devs[i]);
        read_rdma_ports(d, devs[i], nic);
        hwloc_obj_t pci = rdma_pci(d, devs[i]);
        locate(d, pci, &nic->loc);
        d->nic_obj[d->topo->nnics++] = pci;
    }
    free_list(devs, n);
}

/* The next NIC slot as Ethernet port `name` (shorter than
 * XCCL_TOPO_NAME_LEN): its state and speed from sysfs, its location for
 * the caller to fill. */
static xccl_topo_nic_t *eth_nic(detect_t *d, const char *name)
{
    char path[PATH_MAX], buf[64];
    xccl_topo_nic_t *nic = &d->topo->nics[d->topo->nnics];
    memset(nic, 0, sizeof(*nic));
    snprintf(nic->name, sizeof(nic->name), "%s", name);
    nic->type = XCCL_TOPO_NIC_ETH;
    /* Unknown state (no such file, e.g. under a fixture root): usable. */
    snprintf(path, sizeof(path), "%s/class/net/%s/operstate", d->sysfs, name);
    nic->ports = read_line(path, buf, sizeof(buf)) != 0 || strcmp(buf, "down") != 0;
    snprintf(path, sizeof(path), "%s/class/net/%s/speed", d->sysfs, name);
    if (read_line(path, buf, sizeof(buf)) == 0 && atol(buf) > 0) {
        nic->rate_gbps = atol(buf) / 1000.0;     /* Mb/s; -1 when unknown */
    }
    return nic;
}

/* Plain Ethernet ports (Ethernet-class PCI functions with no RDMA device
 * on them): the NICs of a TCP node.  IPoIB ports are not counted: an IB
 * controller is an RDMA NIC or nothing. */
static void read_eth_nics(detect_t *d)
{
    int nrdma = d->topo->nnics;
    for (hwloc_obj_t o = hwloc_get_next_osdev(d->hw, NULL); o && d->topo->nnics < XCCL_TOPO_MAX_NICS;
         o = hwloc_get_next_osdev(d->hw, o)) {
        hwloc_obj_t pci = pci_parent(o);
        if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || pci == NULL || o->name == NULL
            || strlen(o->name) >= XCCL_TOPO_NAME_LEN || pci->attr->pcidev.class_id != 0x0200) {
            continue;
        }
        int taken = 0;
        for (int i = 0; i < nrdma; i++) {
            taken |= d->nic_obj[i] == pci;
        }
        if (taken) {
            continue;
        }
        xccl_topo_nic_t *nic = eth_nic(d, o->name);
        locate(d, pci, &nic->loc);
        d->nic_obj[d->topo->nnics++] = pci;
    }
}

/* Whether hwloc's I/O discovery has anything to find that detection
 * uses: an accelerator among the PCI functions (their class and vendor
 * files: the kernel's copy, no configuration-space read) or an RDMA
 * device.  1 where the PCI functions cannot be listed (the safe side). */
static int io_needed(const detect_t *d)
{
    char dir[PATH_MAX], path[PATH_MAX + 64], buf[32];
    char **names;
    snprintf(dir, sizeof(dir), "%s/class/infiniband", d->sysfs);
    int n = list_dir(dir, &names), need = n > 0;
    free_list(names, n);
    snprintf(dir, sizeof(dir), "%s/bus/pci/devices", d->sysfs);
    n = list_dir(dir, &names);
    need |= n == 0;
    for (int i = 0; i < n && !need; i++) {
        unsigned long cls, vendor;
        snprintf(path, sizeof(path), "%s/%s/class", dir, names[i]);
        if (read_line(path, buf, sizeof(buf)) != 0) {
            continue;
        }
        cls = strtoul(buf, NULL, 0);
        snprintf(path, sizeof(path), "%s/%s/vendor", dir, names[i]);
        if (read_line(path, buf, sizeof(buf)) != 0) {
            continue;
        }
        vendor = strtoul(buf, NULL, 0);
        need = accel_kind_of((unsigned) (cls >> 8), (unsigned) vendor) >= 0;   /* 0xBBSSPP */
    }
    free_list(names, n);
    return need;
}

/* The PCI function a sysfs device path lies under: the length of path up
 * to and including its last "dddd:bb:dd.f" component, its bus id in
 * busid; 0 where there is none (a virtual device). */
static size_t pci_prefix(const char *path, char *busid, size_t len)
{
    size_t found = 0;
    for (const char *c = path; (c = strchr(c, '/')) != NULL; c++) {
        unsigned v[4];
        int used = 0;
        if (sscanf(c + 1, "%4x:%2x:%2x.%1x%n", &v[0], &v[1], &v[2], &v[3], &used) == 4 && used == 12 &&
            (c[1 + used] == '/' || c[1 + used] == '\0')) {
            found = (size_t) (c + 1 + used - path);
            snprintf(busid, len, "%.12s", c + 1);
        }
    }
    return found;
}

/* Plain Ethernet ports from sysfs, without hwloc's I/O objects (no RDMA
 * device on this machine, io_needed): interfaces under an Ethernet-class
 * PCI function, located by its NUMA node. */
static void read_eth_nics_sysfs(detect_t *d)
{
    char dir[PATH_MAX], path[PATH_MAX + 64], real[PATH_MAX], buf[64], busid[16];
    char **names;
    snprintf(dir, sizeof(dir), "%s/class/net", d->sysfs);
    int n = list_dir(dir, &names);
    for (int i = 0; i < n && d->topo->nnics < XCCL_TOPO_MAX_NICS; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        size_t at;
        if (strlen(names[i]) >= XCCL_TOPO_NAME_LEN || realpath(path, real) == NULL ||
            (at = pci_prefix(real, busid, sizeof(busid))) == 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%.*s/class", (int) at, real);
        if (read_line(path, buf, sizeof(buf)) != 0 || (strtoul(buf, NULL, 0) >> 8) != 0x0200) {
            continue;
        }
        xccl_topo_loc_t *loc = &eth_nic(d, names[i])->loc;
        loc->numa = loc->package = -1;         /* PCIe path unknown: "" */
        snprintf(loc->pci, sizeof(loc->pci), "%s", busid);
        /* the function's NUMA node; -1 (unknown) with one node: that one */
        long node = -1;
        snprintf(path, sizeof(path), "%.*s/numa_node", (int) at, real);
        if (read_line(path, buf, sizeof(buf)) == 0) {
            node = strtol(buf, NULL, 10);
        }
        hwloc_obj_t m = node >= 0 ? hwloc_get_numanode_obj_by_os_index(d->hw, (unsigned) node)
                        : count(d->hw, HWLOC_OBJ_NUMANODE) == 1 ? hwloc_get_obj_by_type(d->hw, HWLOC_OBJ_NUMANODE, 0)
                                                                : NULL;
        if (m != NULL) {
            loc->numa = (int) m->os_index;
            loc->package = package_of_cpuset(d->hw, m->cpuset);
        }
        d->nic_obj[d->topo->nnics++] = NULL;
    }
    free_list(names, n);
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

static void read_nvlinks(detect_t *d, const xccl_topo_nvml_ops_t *ops)
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
