/*
 * The topology model: what is derived from devices, links and NICs (the
 * intra-node class, the fabric, the nearest NIC of each device), paths
 * between endpoints, names, the one-line summary the component logs, and
 * the ring order of the devices that follows the wiring.  Pure functions
 * of a filled xccl_topo_t: it calls nothing in the other topo/ files,
 * which build on it (detection, files, printing, placement).
 */
#include "xccl_topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void xccl_topo_init(xccl_topo_t *topo)
{
    memset(topo, 0, sizeof(*topo));
    snprintf(topo->name, sizeof(topo->name), "localhost");
    topo->intra = XCCL_TOPO_INTRA_SHM;
    topo->fabric = XCCL_TOPO_FABRIC_TCP;
    topo->switch_link_type = XCCL_TOPO_LINK_NVLINK;
}

const char *xccl_topo_intra_name(xccl_topo_intra_t t)
{
    switch (t) {
    case XCCL_TOPO_INTRA_SHM: return "SHM";
    case XCCL_TOPO_INTRA_PCIE: return "PCIE";
    case XCCL_TOPO_INTRA_FULL_MESH: return "FULL_MESH";
    case XCCL_TOPO_INTRA_NVSWITCH: return "NVSWITCH";
    }
    return "?";
}

const char *xccl_topo_fabric_name(xccl_topo_fabric_t f)
{
    switch (f) {
    case XCCL_TOPO_FABRIC_TCP: return "TCP";
    case XCCL_TOPO_FABRIC_ROCE: return "ROCE";
    case XCCL_TOPO_FABRIC_IB: return "IB";
    }
    return "?";
}

const char *xccl_topo_dev_kind_name(xccl_topo_dev_kind_t k)
{
    switch (k) {
    case XCCL_TOPO_DEV_GPU: return "gpu";
    case XCCL_TOPO_DEV_NPU: return "npu";
    case XCCL_TOPO_DEV_ACCEL: return "accel";
    }
    return "?";
}

const char *xccl_topo_nic_type_name(xccl_topo_nic_type_t t)
{
    switch (t) {
    case XCCL_TOPO_NIC_IB: return "ib";
    case XCCL_TOPO_NIC_ROCE: return "roce";
    case XCCL_TOPO_NIC_ETH: return "eth";
    }
    return "?";
}

const char *xccl_topo_link_type_name(xccl_topo_link_type_t t)
{
    switch (t) {
    case XCCL_TOPO_LINK_NVLINK: return "nvlink";
    case XCCL_TOPO_LINK_XGMI: return "xgmi";
    case XCCL_TOPO_LINK_HCCS: return "hccs";
    }
    return "?";
}

const char *xccl_topo_path_name(xccl_topo_path_t p)
{
    switch (p) {
    case XCCL_TOPO_PATH_SELF: return "X";
    case XCCL_TOPO_PATH_NV: return "NV";
    case XCCL_TOPO_PATH_SW: return "SW";
    case XCCL_TOPO_PATH_PIX: return "PIX";
    case XCCL_TOPO_PATH_PXB: return "PXB";
    case XCCL_TOPO_PATH_PHB: return "PHB";
    case XCCL_TOPO_PATH_NODE: return "NODE";
    case XCCL_TOPO_PATH_SYS: return "SYS";
    }
    return "?";
}

/* ------------------------------------------------------------ paths */

static const xccl_topo_loc_t *loc_of(const xccl_topo_t *topo, int e)
{
    return e < topo->ndevs ? &topo->devs[e].loc : &topo->nics[e - topo->ndevs].loc;
}

/* Splits a PCIe path into its elements (pointers into buf). */
static int split_pcie(const char *path, char *buf, size_t len, char **elem, int max)
{
    int n = 0;
    snprintf(buf, len, "%s", path);
    for (char *save = NULL, *t = strtok_r(buf, "/", &save); t && n < max;
         t = strtok_r(NULL, "/", &save)) {
        elem[n++] = t;
    }
    return n;
}

static xccl_topo_path_t numa_path(const xccl_topo_loc_t *a, const xccl_topo_loc_t *b)
{
    if (a->numa >= 0 && a->numa == b->numa) {
        return XCCL_TOPO_PATH_NODE;
    }
    /* Same package with a NUMA node unknown on one side: still no socket
     * interconnect on the way. */
    if ((a->numa < 0 || b->numa < 0) && a->package >= 0 && a->package == b->package) {
        return XCCL_TOPO_PATH_NODE;
    }
    return XCCL_TOPO_PATH_SYS;
}

/* A switch shows up in hwloc as an upstream bridge with one downstream
 * bridge per port: two endpoints whose paths part at most one bridge below
 * their last common one hang off the same switch (PIX). */
static xccl_topo_path_t pcie_path(const xccl_topo_loc_t *a, const xccl_topo_loc_t *b)
{
    char ba[XCCL_TOPO_PCIE_LEN], bb[XCCL_TOPO_PCIE_LEN];
    char *ea[32], *eb[32];
    int na = split_pcie(a->pcie, ba, sizeof(ba), ea, 32);
    int nb = split_pcie(b->pcie, bb, sizeof(bb), eb, 32);
    if (na == 0 || nb == 0 || strcmp(ea[0], eb[0]) != 0) {
        return numa_path(a, b);
    }
    int k = 1;
    while (k < na && k < nb && strcmp(ea[k], eb[k]) == 0) {
        k++;
    }
    if (k == 1) {
        return XCCL_TOPO_PATH_PHB;
    }
    return (na - k <= 1 && nb - k <= 1) ? XCCL_TOPO_PATH_PIX : XCCL_TOPO_PATH_PXB;
}

xccl_topo_path_t xccl_topo_path(const xccl_topo_t *topo, int a, int b)
{
    if (a == b) {
        return XCCL_TOPO_PATH_SELF;
    }
    if (a < topo->ndevs && b < topo->ndevs) {
        if (topo->links[a][b].count > 0) {
            return XCCL_TOPO_PATH_NV;
        }
        if (topo->devs[a].switch_links > 0 && topo->devs[b].switch_links > 0) {
            return XCCL_TOPO_PATH_SW;
        }
    }
    return pcie_path(loc_of(topo, a), loc_of(topo, b));
}

/* ------------------------------------------------------------ derived fields */

static xccl_topo_intra_t classify_intra(const xccl_topo_t *topo)
{
    int n = topo->ndevs;
    if (n == 0) {
        return XCCL_TOPO_INTRA_SHM;
    }
    int all_switch = 1, all_pairs = n > 1;
    for (int i = 0; i < n; i++) {
        all_switch &= topo->devs[i].switch_links > 0;
        for (int j = 0; j < n; j++) {
            all_pairs &= i == j || topo->links[i][j].count > 0;
        }
    }
    if (all_switch) {
        return XCCL_TOPO_INTRA_NVSWITCH;
    }
    /* A partial mesh (some pairs linked) is PCIE for the class; the links
     * stay in the model for ring ordering. */
    return all_pairs ? XCCL_TOPO_INTRA_FULL_MESH : XCCL_TOPO_INTRA_PCIE;
}

static int nic_type_of_fabric(xccl_topo_fabric_t f)
{
    return f == XCCL_TOPO_FABRIC_IB ? XCCL_TOPO_NIC_IB
         : f == XCCL_TOPO_FABRIC_ROCE ? XCCL_TOPO_NIC_ROCE : XCCL_TOPO_NIC_ETH;
}

static void classify_fabric(xccl_topo_t *topo)
{
    int have[3] = { 0, 0, 0 };
    for (int i = 0; i < topo->nnics; i++) {
        if (topo->nics[i].ports > 0) {
            have[topo->nics[i].type] = 1;
        }
    }
    topo->fabric = have[XCCL_TOPO_NIC_IB] ? XCCL_TOPO_FABRIC_IB
                 : have[XCCL_TOPO_NIC_ROCE] ? XCCL_TOPO_FABRIC_ROCE : XCCL_TOPO_FABRIC_TCP;
    int type = nic_type_of_fabric(topo->fabric);
    topo->fabric_links = 0;
    topo->fabric_rate_gbps = topo->fabric_total_gbps = 0;
    for (int i = 0; i < topo->nnics; i++) {
        const xccl_topo_nic_t *nic = &topo->nics[i];
        if ((int) nic->type != type || nic->ports <= 0) {
            continue;
        }
        topo->fabric_links += nic->ports;
        topo->fabric_total_gbps += nic->ports * nic->rate_gbps;
        if (nic->rate_gbps > topo->fabric_rate_gbps) {
            topo->fabric_rate_gbps = nic->rate_gbps;
        }
    }
}

/* Rails: each device takes the nearest active NIC of the fabric (shared
 * PCIe switch, then host bridge, then NUMA node / package, then any).
 * Nearest pairs are settled first for all devices, so a device never takes
 * the NIC behind another device's switch while that device needs it; among
 * equally near NICs the least used wins (two GPUs behind one switch with
 * two NICs get one each). */
static void pair_nics(xccl_topo_t *topo)
{
    int used[XCCL_TOPO_MAX_NICS] = { 0 };
    int type = nic_type_of_fabric(topo->fabric);
    for (int d = 0; d < topo->ndevs; d++) {
        topo->devs[d].nic = -1;
    }
    for (int level = XCCL_TOPO_PATH_PIX; level <= XCCL_TOPO_PATH_SYS; level++) {
        for (int d = 0; d < topo->ndevs; d++) {
            int best = -1;
            if (topo->devs[d].nic >= 0) {
                continue;
            }
            for (int n = 0; n < topo->nnics; n++) {
                const xccl_topo_nic_t *nic = &topo->nics[n];
                if ((int) nic->type == type && nic->ports > 0
                    && (int) pcie_path(&topo->devs[d].loc, &nic->loc) == level
                    && (best < 0 || used[n] < used[best])) {
                    best = n;
                }
            }
            if (best >= 0) {
                topo->devs[d].nic = best;
                used[best]++;
            }
        }
    }
}

/* PCIE grouping: devices that reach each other without a host bridge
 * (PIX, PXB) form a group; with the package of each device that is the
 * switch / socket hierarchy of a PCIe node. */
static void group_pcie(xccl_topo_t *topo)
{
    topo->pcie_groups = 0;
    for (int d = 0; d < topo->ndevs; d++) {
        topo->devs[d].pcie_group = -1;
        for (int e = 0; e < d && topo->devs[d].pcie_group < 0; e++) {
            xccl_topo_path_t p = pcie_path(&topo->devs[d].loc, &topo->devs[e].loc);
            if (p == XCCL_TOPO_PATH_PIX || p == XCCL_TOPO_PATH_PXB) {
                topo->devs[d].pcie_group = topo->devs[e].pcie_group;
            }
        }
        if (topo->devs[d].pcie_group < 0) {
            topo->devs[d].pcie_group = topo->pcie_groups++;
        }
    }
}

void xccl_topo_finalize(xccl_topo_t *topo)
{
    topo->intra = classify_intra(topo);
    classify_fabric(topo);
    pair_nics(topo);
    group_pcie(topo);
}

void xccl_topo_summary(const xccl_topo_t *topo, char *buf, size_t len)
{
    char links[48];
    if (topo->fabric_links > 0 && topo->fabric_rate_gbps > 0) {
        snprintf(links, sizeof(links), " links=%dx%gGb/s", topo->fabric_links, topo->fabric_rate_gbps);
    } else {
        snprintf(links, sizeof(links), " links=%d", topo->fabric_links);
    }
    snprintf(buf, len, "intra=%s devices=%d fabric=%s%s packages=%d numa=%d cores=%d pus=%d",
             xccl_topo_intra_name(topo->intra), topo->ndevs,
             xccl_topo_fabric_name(topo->fabric), links, topo->packages,
             topo->numa_nodes, topo->cores, topo->pus);
}

/* ------------------------------------------------------------ ring order */

/* Cost of one ring hop.  A ring's cost is the sum over its hops, compared
 * lexicographically through powers of a base larger than any ring's number
 * of hops: first the hops without a direct link (NVLink, xGMI, HCCS, or
 * both on the NVSwitch fabric), then those across the socket interconnect,
 * between host bridges of one socket, through one host bridge, through
 * several PCIe switches, under one switch; last the direct hops with fewer
 * links than the node's best pair (a ring runs at its slowest hop: on a
 * DGX-1 there is a ring of double NVLinks only). */
#define RING_BASE 64LL

static long long hop_cost(const xccl_topo_t *topo, int a, int b, int max_links)
{
    long long w = 1;
    switch (xccl_topo_path(topo, a, b)) {
    case XCCL_TOPO_PATH_SELF:
    case XCCL_TOPO_PATH_SW: return 0;
    case XCCL_TOPO_PATH_NV: return topo->links[a][b].count < max_links ? 1 : 0;
    case XCCL_TOPO_PATH_SYS: w *= RING_BASE; /* fall through */
    case XCCL_TOPO_PATH_NODE: w *= RING_BASE; /* fall through */
    case XCCL_TOPO_PATH_PHB: w *= RING_BASE; /* fall through */
    case XCCL_TOPO_PATH_PXB: w *= RING_BASE; /* fall through */
    case XCCL_TOPO_PATH_PIX: w *= RING_BASE; break;
    }
    return RING_BASE * RING_BASE * RING_BASE * RING_BASE * RING_BASE * RING_BASE + w;   /* not linked */
}

/* Exact for n <= RING_EXACT_MAX (Held-Karp over subsets: the cheapest
 * path from device 0 through a set, ending at a given device, then closed
 * into a ring); ties go to lower device numbers, so the answer is the
 * same on every rank.  It finds a Hamiltonian cycle over direct links
 * whenever one exists (cost 0), else the fewest unlinked hops. */
#define RING_EXACT_MAX 16

typedef long long ring_cost_t[XCCL_TOPO_MAX_DEVS][XCCL_TOPO_MAX_DEVS];

static int ring_exact(ring_cost_t cost, int n, int *order)
{
    const size_t sets = (size_t) 1 << n;
    long long *best = malloc(sets * (size_t) n * sizeof(long long));
    signed char *prev = malloc(sets * (size_t) n);
    if (NULL == best || NULL == prev) {
        free(best);
        free(prev);
        return -1;
    }
    for (size_t i = 0; i < sets * (size_t) n; i++) {
        best[i] = -1;
    }
    /* best[S n + v]: cheapest path 0 -> ... -> v visiting exactly S (0 in S). */
    best[1 * (size_t) n + 0] = 0;
    prev[1 * (size_t) n + 0] = -1;
    for (size_t S = 1; S < sets; S += 2) {
        for (int v = 0; v < n; v++) {
            const long long c = best[S * (size_t) n + (size_t) v];
            if (c < 0) {
                continue;
            }
            for (int w = 1; w < n; w++) {
                if (S & ((size_t) 1 << w)) {
                    continue;
                }
                const size_t T = (S | ((size_t) 1 << w)) * (size_t) n + (size_t) w;
                const long long cw = c + cost[v][w];
                if (best[T] < 0 || cw < best[T]) {
                    best[T] = cw;
                    prev[T] = (signed char) v;
                }
            }
        }
    }
    const size_t full = sets - 1;
    int last = -1;
    long long total = -1;
    for (int v = 1; v < n; v++) {
        const long long c = best[full * (size_t) n + (size_t) v] + cost[v][0];
        if (total < 0 || c < total) {
            total = c;
            last = v;
        }
    }
    size_t S = full;
    for (int k = n - 1; k >= 0; k--) {
        order[k] = last;
        const int p = prev[S * (size_t) n + (size_t) last];
        S &= ~((size_t) 1 << last);
        last = p;
    }
    free(best);
    free(prev);
    return 0;
}

/* Larger nodes: nearest neighbour from device 0, then 2-opt (reverse a
 * stretch of the ring while that makes it cheaper). */
static void ring_heuristic(ring_cost_t cost, int n, int *order)
{
    int used[XCCL_TOPO_MAX_DEVS] = { 0 };
    order[0] = 0;
    used[0] = 1;
    for (int k = 1; k < n; k++) {
        int pick = -1;
        for (int w = 0; w < n; w++) {
            if (!used[w] && (pick < 0 || cost[order[k - 1]][w] < cost[order[k - 1]][pick])) {
                pick = w;
            }
        }
        order[k] = pick;
        used[pick] = 1;
    }
    for (int improved = 1, rounds = 0; improved && rounds < 100; rounds++) {
        improved = 0;
        for (int i = 1; i < n - 1; i++) {
            for (int j = i + 1; j < n; j++) {
                /* Hops (i-1, i) and (j, j+1) become (i-1, j) and (i, j+1). */
                const int a = order[i - 1], b = order[i], c = order[j], d = order[(j + 1) % n];
                if (cost[a][c] + cost[b][d] < cost[a][b] + cost[c][d]) {
                    for (int x = i, y = j; x < y; x++, y--) {
                        int t = order[x];
                        order[x] = order[y];
                        order[y] = t;
                    }
                    improved = 1;
                }
            }
        }
    }
}

int xccl_topo_ring_order(const xccl_topo_t *topo, int *order)
{
    const int n = topo->ndevs;
    if (n < 0 || n > XCCL_TOPO_MAX_DEVS) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        order[i] = i;
    }
    /* Every pair linked alike: any ring is as good as another. */
    if (n <= 3 || XCCL_TOPO_INTRA_NVSWITCH == topo->intra || XCCL_TOPO_INTRA_FULL_MESH == topo->intra) {
        return n;
    }
    /* The path classes once (xccl_topo_path compares PCIe paths). */
    ring_cost_t *cost = malloc(sizeof(ring_cost_t));
    int max_links = 0;
    if (NULL == cost) {
        return -1;
    }
    for (int a = 0; a < n; a++) {
        for (int b = 0; b < n; b++) {
            max_links = topo->links[a][b].count > max_links ? topo->links[a][b].count : max_links;
        }
    }
    for (int a = 0; a < n; a++) {
        for (int b = 0; b < n; b++) {
            (*cost)[a][b] = hop_cost(topo, a, b, max_links);
        }
    }
    int rc = n;
    if (n <= RING_EXACT_MAX) {
        rc = ring_exact(*cost, n, order) < 0 ? -1 : n;
    } else {
        ring_heuristic(*cost, n, order);
    }
    free(cost);
    return rc;
}

int xccl_topo_rank_ring(const xccl_topo_t *topo, const int *dev_of_rank, int nranks, int *order)
{
    int ring[XCCL_TOPO_MAX_DEVS];
    const int n = xccl_topo_ring_order(topo, ring);
    if (n < 0 || nranks < 0) {
        return -1;
    }
    /* Start the device ring at local rank 0's device, so that the node's
     * leader stays local rank 0 when it has a device. */
    int start = 0;
    for (int k = 0; k < n && nranks > 0; k++) {
        start = ring[k] == dev_of_rank[0] ? k : start;
    }
    int m = 0;
    for (int k = 0; k < n; k++) {
        const int dev = ring[(start + k) % n];
        for (int r = 0; r < nranks; r++) {
            if (dev_of_rank[r] == dev) {
                order[m++] = r;
            }
        }
    }
    /* Ranks without a known device keep their order, after the others. */
    for (int r = 0; r < nranks; r++) {
        if (dev_of_rank[r] < 0 || dev_of_rank[r] >= n) {
            order[m++] = r;
        }
    }
    return m;
}
