/*
 * Topology of one node: its accelerators, NICs, where they sit (PCIe path,
 * NUMA node, package), the direct links between accelerators, and the
 * classification of the intra-node interconnect and of the inter-node
 * fabric that algorithm choice needs.  Filled by detection (hwloc, NVML
 * through dlopen, sysfs) or from a topology file.  Pure C: hwloc and libc,
 * no MPI, no UCX.
 *
 * The structure is fixed-size (no allocation) so it can be copied, kept in
 * a module, and compared in tests; the limits are generous for one node.
 *
 * Topology file format (xccl_topo_dump writes it, xccl_topo_load reads it):
 * line based, '#' starts a comment, fields separated by blanks, values are
 * single tokens, integers are decimal (vendor= is hexadecimal), "-1" means
 * unknown.
 *
 *   xccl_topo 1                         first non-comment line (format version)
 *   node NAME packages=P numa=N cores=C pus=U
 *   numa OSINDEX package=P cores=C pus=U                       (0 or more)
 *   device NAME kind=gpu|npu|accel vendor=HEX pci=BUSID numa=N package=P pcie=PATH
 *   nic NAME type=ib|roce|eth ports=K rate=GBPS pci=BUSID numa=N package=P pcie=PATH
 *   link DEV1 DEV2 nvlink|xgmi|hccs COUNT     COUNT direct links between two devices
 *   link DEV nvswitch nvlink COUNT            COUNT links from DEV to the NVSwitch fabric
 *
 * PATH is the PCIe path from the root: the host bridge, then every PCI
 * bridge down to the endpoint, joined by '/'; elements are opaque tokens
 * only compared for equality ("0000:00/0000:15:01.0/0000:16:00.0" when
 * detected, "hb0/sw1/p2" is as good in a hand-written file), "-" when
 * unknown.  BUSID is "dddd:bb:dd.f" or "-".  ports= counts active ports
 * (0: the NIC is down); rate= is the per-port rate in Gb/s (0: unknown).
 * devices and nics are referred to by NAME in link lines and must be
 * declared before them; "nvswitch" is reserved.  Devices and NICs keep
 * file order.  Keys may come in any order and may be left out (kind=gpu,
 * vendor=0, ports=1, rate=0, location unknown), except a nic's type=; an
 * unknown key, line or name, or a bad value is an error with its line.
 *
 * The intra-node class, the fabric, the NIC of each device (rails) and the
 * PCIe groups are not stored: they are derived from the rest
 * (xccl_topo_finalize), the same way after detection and after loading,
 * and dump writes them as comments.
 *
 * The classes: NVSWITCH when every device has links to the NVSwitch
 * fabric; FULL_MESH when every pair of devices (two or more) is directly
 * linked; PCIE for other nodes with devices (partial meshes included: the
 * links stay in the model); SHM without devices.  Fabric: IB if an active
 * InfiniBand port exists, else ROCE if an active RoCE port exists, else
 * TCP.
 */
#ifndef XCCL_TOPO_H
#define XCCL_TOPO_H

#include <stdio.h>

#define XCCL_TOPO_MAX_DEVS 32
#define XCCL_TOPO_MAX_NICS 32
#define XCCL_TOPO_MAX_NUMA 32
#define XCCL_TOPO_NAME_LEN 32
#define XCCL_TOPO_PCIE_LEN 160

/* Intra-node interconnect of the accelerators, best first in practice. */
typedef enum {
    XCCL_TOPO_INTRA_SHM = 0,     /* no accelerators: cores, packages, NUMA */
    XCCL_TOPO_INTRA_PCIE,        /* accelerators joined through PCIe/host only */
    XCCL_TOPO_INTRA_FULL_MESH,   /* every device pair directly linked */
    XCCL_TOPO_INTRA_NVSWITCH     /* every device linked to an NVSwitch fabric */
} xccl_topo_intra_t;

/* What joins this node to the others. */
typedef enum {
    XCCL_TOPO_FABRIC_TCP = 0,
    XCCL_TOPO_FABRIC_ROCE,
    XCCL_TOPO_FABRIC_IB
} xccl_topo_fabric_t;

typedef enum { XCCL_TOPO_DEV_GPU = 0, XCCL_TOPO_DEV_NPU, XCCL_TOPO_DEV_ACCEL } xccl_topo_dev_kind_t;
typedef enum { XCCL_TOPO_NIC_IB = 0, XCCL_TOPO_NIC_ROCE, XCCL_TOPO_NIC_ETH } xccl_topo_nic_type_t;
typedef enum { XCCL_TOPO_LINK_NVLINK = 0, XCCL_TOPO_LINK_XGMI, XCCL_TOPO_LINK_HCCS } xccl_topo_link_type_t;

/* How two endpoints (devices or NICs) reach each other, nearest first;
 * the names are those of nvidia-smi topo -m. */
typedef enum {
    XCCL_TOPO_PATH_SELF = 0,
    XCCL_TOPO_PATH_NV,      /* direct links (NV#) */
    XCCL_TOPO_PATH_SW,      /* both linked to the NVSwitch fabric */
    XCCL_TOPO_PATH_PIX,     /* under the same PCIe switch */
    XCCL_TOPO_PATH_PXB,     /* several PCIe switches, no host bridge */
    XCCL_TOPO_PATH_PHB,     /* through one PCIe host bridge */
    XCCL_TOPO_PATH_NODE,    /* host bridges of one NUMA node (or package) */
    XCCL_TOPO_PATH_SYS      /* across the inter-socket interconnect */
} xccl_topo_path_t;

/* Where an endpoint sits. */
typedef struct {
    char pci[16];                   /* "dddd:bb:dd.f", "" unknown */
    int numa;                       /* OS index of the NUMA node, -1 unknown */
    int package;                    /* logical index of the package, -1 unknown */
    char pcie[XCCL_TOPO_PCIE_LEN];  /* host bridge/bridge/..., "" unknown */
} xccl_topo_loc_t;

typedef struct {
    char name[XCCL_TOPO_NAME_LEN];
    xccl_topo_dev_kind_t kind;
    unsigned vendor;                /* PCI vendor id, 0 unknown */
    xccl_topo_loc_t loc;
    int switch_links;               /* links to the NVSwitch fabric */
    int nic;                        /* derived: nearest NIC (rails), -1 none */
    int pcie_group;                 /* derived: devices behind one PCIe switch
                                     * tree (PIX/PXB to each other) share it;
                                     * numbered 0.. in device order */
} xccl_topo_dev_t;

typedef struct {
    char name[XCCL_TOPO_NAME_LEN];
    xccl_topo_nic_type_t type;
    int ports;                      /* active ports; 0: down */
    double rate_gbps;               /* per active port, 0 unknown */
    xccl_topo_loc_t loc;
} xccl_topo_nic_t;

typedef struct {
    int os_index, package, cores, pus;
} xccl_topo_numa_t;

typedef struct {
    unsigned char type;             /* xccl_topo_link_type_t */
    unsigned char count;            /* 0: no direct link */
} xccl_topo_link_t;

typedef struct xccl_topo_s {
    char name[64];                  /* host name */
    int packages, numa_nodes, cores, pus;
    int nnuma;
    xccl_topo_numa_t numa[XCCL_TOPO_MAX_NUMA];
    int ndevs;
    xccl_topo_dev_t devs[XCCL_TOPO_MAX_DEVS];
    int nnics;
    xccl_topo_nic_t nics[XCCL_TOPO_MAX_NICS];
    xccl_topo_link_t links[XCCL_TOPO_MAX_DEVS][XCCL_TOPO_MAX_DEVS]; /* symmetric */
    xccl_topo_link_type_t switch_link_type;

    /* Derived by xccl_topo_finalize. */
    xccl_topo_intra_t intra;
    xccl_topo_fabric_t fabric;
    int fabric_links;               /* active ports of the fabric's NICs */
    double fabric_rate_gbps;        /* fastest such port, 0 unknown */
    double fabric_total_gbps;       /* sum over those ports */
    int pcie_groups;                /* number of distinct pcie_group values */
} xccl_topo_t;

/* NVLink answers, one link at a time.  The real table goes through NVML
 * loaded with dlopen; tests pass their own. */
typedef enum {
    XCCL_TOPO_REMOTE_GPU = 0,
    XCCL_TOPO_REMOTE_SWITCH,
    XCCL_TOPO_REMOTE_OTHER,
    XCCL_TOPO_REMOTE_UNKNOWN        /* the driver cannot tell: guessed from the peer */
} xccl_topo_remote_t;

typedef struct {
    int active;
    xccl_topo_remote_t remote;
    char remote_pci[32];            /* any "domain:bus:dev.fn" spelling */
} xccl_topo_nvlink_t;

typedef struct {
    void *ctx;
    /* 0 when NVLink can be queried; otherwise detection goes on without. */
    int (*open)(void *ctx);
    /* Link `link` of the GPU at PCI `busid`: 0 filled *out, anything else:
     * no such link (queries of this GPU stop). */
    int (*link)(void *ctx, const char *busid, unsigned link, xccl_topo_nvlink_t *out);
    void (*close)(void *ctx);
} xccl_topo_nvml_ops_t;

typedef struct {
    const char *hwloc_xml;                  /* NULL: this machine */
    const char *sysfs_root;                 /* NULL: "/sys" */
    const xccl_topo_nvml_ops_t *nvml;       /* NULL: NVML through dlopen */
    int no_nvml;                            /* 1: no NVLink queries at all */
    /* 1 (this machine only, no hwloc_xml): hwloc's I/O discovery, which
     * reads every PCI function's configuration space (about 1 ms each on
     * a VM), only where sysfs shows an accelerator (PCI class and vendor,
     * as detection counts them) or an RDMA device; elsewhere the Ethernet
     * NICs come from sysfs (<root>/class/net), located by their PCI
     * function's NUMA node, PCIe path unknown. */
    int io_if_needed;
} xccl_topo_detect_opts_t;

/* Empty topology: no devices, no NICs, SHM, TCP. */
void xccl_topo_init(xccl_topo_t *topo);

/* Fills *topo from hwloc, NVML and sysfs (opts may be NULL).  0, or -1
 * with a message in err.  A machine without accelerators, NVML or RDMA
 * NICs is not an error: it is SHM/TCP. */
int xccl_topo_detect(xccl_topo_t *topo, const xccl_topo_detect_opts_t *opts,
                     char *err, size_t errlen);

/* Recomputes the derived fields (intra, fabric, nearest NIC and PCIe
 * switch group of each device) from devices, links and NICs; detect and
 * load call it. */
void xccl_topo_finalize(xccl_topo_t *topo);

/* The real NVML table: dlopen of $XCCL_NVML_LIBRARY, else of
 * "libnvidia-ml.so.1", on open. */
const xccl_topo_nvml_ops_t *xccl_topo_nvml_default(void);

/* Topology file: see the format above.  load: 0, or -1 with
 * "path:line: message" in err; *topo is undefined after a failure. */
int xccl_topo_dump(const xccl_topo_t *topo, FILE *out);
int xccl_topo_load(const char *path, xccl_topo_t *topo, char *err, size_t errlen);
int xccl_topo_load_stream(FILE *in, const char *what, xccl_topo_t *topo,
                          char *err, size_t errlen);

/* Endpoints are numbered devices first (0..ndevs-1), then NICs. */
xccl_topo_path_t xccl_topo_path(const xccl_topo_t *topo, int a, int b);
const char *xccl_topo_path_name(xccl_topo_path_t p);

/* ------------------------------------------------------------ ring order
 * The order in which a ring inside the node should visit the devices, so
 * that it follows the wiring.  Pure functions of *topo (no detection); the
 * same topology gives the same order on every rank.
 *
 * xccl_topo_ring_order writes a permutation of 0..ndevs-1 to
 * order[0..ndevs) (room for XCCL_TOPO_MAX_DEVS is always enough) and
 * returns ndevs, or -1 (out of memory).  order[k] and order[k+1], and
 * order[ndevs-1] and order[0], are neighbours on the ring.
 *   NVSWITCH, FULL_MESH (and up to 3 devices): every ring is as good,
 *     the identity;
 *   otherwise (PCIe, and partial meshes such as the DGX-1 hybrid cube
 *     mesh): a ring over direct links (NVLink, xGMI, HCCS, NVSwitch) when
 *     one exists (preferring hops of as many links as the best pair);
 *     else the fewest hops without a direct link, and among those the
 *     fewest across sockets (a PCIe-only node of two sockets is crossed
 *     exactly twice), then between host bridges, then between PCIe
 *     switches (devices behind one switch adjacent).  Exact up to 16
 *     devices, a local search (nearest neighbour, 2-opt) above.  The ring
 *     starts at device 0.
 *
 * xccl_topo_rank_ring orders the local ranks of a node: dev_of_rank[r] is
 * the device index (0..ndevs-1) local rank r uses, repeated when ranks
 * share a device, -1 when unknown.  Writes a permutation of 0..nranks-1 to
 * order[0..nranks): devices in xccl_topo_ring_order's ring, started at
 * local rank 0's device (so local rank 0 stays first when it has one),
 * the ranks of one device adjacent in increasing rank order, then the
 * ranks without a device in rank order.  Returns nranks, or -1. */
int xccl_topo_ring_order(const xccl_topo_t *topo, int *order);
int xccl_topo_rank_ring(const xccl_topo_t *topo, const int *dev_of_rank, int nranks, int *order);

/* Device x device matrix in the style of nvidia-smi topo -m, NIC columns,
 * the legend and the NIC of every device. */
void xccl_topo_print_matrix(const xccl_topo_t *topo, FILE *out);
/* One line: "intra=NVSWITCH devices=8 fabric=IB nics=8 links=8x400Gb/s ...". */
void xccl_topo_summary(const xccl_topo_t *topo, char *buf, size_t len);

const char *xccl_topo_intra_name(xccl_topo_intra_t t);
const char *xccl_topo_fabric_name(xccl_topo_fabric_t f);
const char *xccl_topo_dev_kind_name(xccl_topo_dev_kind_t k);
const char *xccl_topo_nic_type_name(xccl_topo_nic_type_t t);
const char *xccl_topo_link_type_name(xccl_topo_link_type_t t);

/* ------------------------------------------------------------ placement
 * Where a process runs inside its node, as one int (its placement key), so
 * that the ranks of a communicator, having exchanged their keys, all order
 * the ranks of each node alike: rings inside a node then follow the GPU
 * wiring, or go socket by socket, instead of communicator order.
 *
 * xccl_topo_placement_key: with cuda_pci (the PCI bus id of the device of
 * the calling thread's current CUDA context; NULL: no context) naming a
 * device of topo: XCCL_TOPO_KEY_GPU + the device's position on
 * xccl_topo_ring_order's ring, so ranks on linked devices are neighbours
 * and ranks sharing a device adjacent.  Else package * 65536 + lowest CPU
 * of the calling thread's binding (package from
 * /sys/devices/system/cpu/cpu<N>/topology/physical_package_id, 0 if
 * unreadable), or XCCL_TOPO_KEY_UNBOUND when it is not bound to a strict
 * subset of the online CPUs (no order to follow); plus XCCL_TOPO_KEY_CUDA
 * when it has a CUDA context on a device topo does not know (topo may be
 * NULL).  Never negative.
 *
 * xccl_topo_placement_order: the order of the ranks of one node from their
 * keys.  keys[i] is the key of rank ranks[i] (negative: unknown, as
 * unbound).  Writes the ranks, sorted by key then rank, to order[0..n) and
 * returns XCCL_TOPO_ORDER_GPU (every key is a GPU key: ring order) or
 * XCCL_TOPO_ORDER_CPU (no GPU key, every rank bound: package then CPU);
 * else XCCL_TOPO_ORDER_KEEP (fewer than two ranks, a rank unbound, GPU
 * keys on some ranks only, out of memory), order untouched.  The same
 * keys give the same order on every rank. */
#define XCCL_TOPO_KEY_GPU (1 << 30)
#define XCCL_TOPO_KEY_CUDA (1 << 29)
#define XCCL_TOPO_KEY_UNBOUND (XCCL_TOPO_KEY_CUDA - 1)

enum { XCCL_TOPO_ORDER_KEEP = 0, XCCL_TOPO_ORDER_CPU, XCCL_TOPO_ORDER_GPU };

int xccl_topo_placement_key(const xccl_topo_t *topo, const char *cuda_pci);
int xccl_topo_placement_order(const int *keys, const int *ranks, int n, int *order);

/* Whether the process that computed key had a CUDA context. */
static inline int xccl_topo_key_has_cuda(int key)
{
    return key >= 0 && 0 != (key & (XCCL_TOPO_KEY_GPU | XCCL_TOPO_KEY_CUDA));
}

/* ------------------------------------------------------------ node summary
 * What the component logs at start-up: the detected topology in one line. */
typedef struct {
    int packages, numa_nodes, cores, pus;
    xccl_topo_intra_t intra;
    char summary[128];         /* one line for the log */
} xccl_topo_node_t;

/* Fills *node by detecting this machine; 0, or -1 (node->summary says why). */
int xccl_topo_detect_node(xccl_topo_node_t *node);

#endif
