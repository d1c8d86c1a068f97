/*
 * Detection of the NICs: RDMA devices from sysfs
 * (<root>/class/infiniband/<dev>/ports/<n>/{link_layer,state,rate}),
 * located by hwloc; plain Ethernet ports from hwloc's I/O objects, or from
 * sysfs alone (<root>/class/net) where hwloc's I/O discovery is off; and
 * whether that discovery has anything to find (topo_int.h).
 */
#include "topo_int.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ sysfs */

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

/* ------------------------------------------------------------ RDMA devices */

static hwloc_obj_t pci_parent(hwloc_obj_t o)
{
    while (o && o->type != HWLOC_OBJ_PCI_DEVICE) {
        o = o->parent;
    }
    return o;
}

/* The PCI function of an RDMA device: its OS device in hwloc, else the
 * target of the sysfs "device" link (…/0000:1a:00.0). */
static hwloc_obj_t rdma_pci(topo_detect_t *d, const char *name)
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

static void read_rdma_ports(topo_detect_t *d, const char *dev, xccl_topo_nic_t *nic)
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

void topo_read_rdma_nics(topo_detect_t *d)
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
        topo_locate(d, pci, &nic->loc);
        d->nic_obj[d->topo->nnics++] = pci;
    }
    free_list(devs, n);
}

/* ------------------------------------------------------------ Ethernet */

/* The next NIC slot as Ethernet port `name` (shorter than
 * XCCL_TOPO_NAME_LEN): its state and speed from sysfs, its location for
 * the caller to fill. */
static xccl_topo_nic_t *eth_nic(topo_detect_t *d, const char *name)
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
void topo_read_eth_nics(topo_detect_t *d)
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
        topo_locate(d, pci, &nic->loc);
        d->nic_obj[d->topo->nnics++] = pci;
    }
}

/* Whether hwloc's I/O discovery has anything to find that detection
 * uses: an accelerator among the PCI functions (their class and vendor
 * files: the kernel's copy, no configuration-space read) or an RDMA
 * device.  1 where the PCI functions cannot be listed (the safe side). */
int topo_io_needed(const topo_detect_t *d)
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
        need = topo_accel_kind_of((unsigned) (cls >> 8), (unsigned) vendor) >= 0;   /* 0xBBSSPP */
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
void topo_read_eth_nics_sysfs(topo_detect_t *d)
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
                        : topo_count(d->hw, HWLOC_OBJ_NUMANODE) == 1 ? hwloc_get_obj_by_type(d->hw, HWLOC_OBJ_NUMANODE, 0)
                                                                : NULL;
        if (m != NULL) {
            loc->numa = (int) m->os_index;
            loc->package = topo_package_of_cpuset(d->hw, m->cpuset);
        }
        d->nic_obj[d->topo->nnics++] = NULL;
    }
    free_list(names, n);
}
