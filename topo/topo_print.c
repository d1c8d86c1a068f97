/*
 * The topology as nvidia-smi topo -m prints it: one row per device and per
 * NIC, one column per device and per NIC, the NUMA node and the NIC of each
 * device (rails), then a legend.
 */
#include "xccl_topo.h"

#include <stdio.h>
#include <string.h>

static void cell(const xccl_topo_t *topo, int a, int b, char *buf, size_t len)
{
    static const char *const prefix[] = { "NV", "XG", "HC" };   /* by link type */
    xccl_topo_path_t p = xccl_topo_path(topo, a, b);
    if (p == XCCL_TOPO_PATH_NV) {
        snprintf(buf, len, "%s%d", prefix[topo->links[a][b].type % 3], topo->links[a][b].count);
    } else if (p == XCCL_TOPO_PATH_SW) {
        int na = topo->devs[a].switch_links, nb = topo->devs[b].switch_links;
        snprintf(buf, len, "SW%d", na < nb ? na : nb);
    } else {
        snprintf(buf, len, "%s", xccl_topo_path_name(p));
    }
}

static const char *endpoint_name(const xccl_topo_t *topo, int e)
{
    return e < topo->ndevs ? topo->devs[e].name : topo->nics[e - topo->ndevs].name;
}

void xccl_topo_print_matrix(const xccl_topo_t *topo, FILE *out)
{
    int n = topo->ndevs + topo->nnics, w = 6;
    char buf[32];
    for (int e = 0; e < n; e++) {
        int l = (int) strlen(endpoint_name(topo, e)) + 2;
        w = l > w ? l : w;
    }
    if (n > 0) {
        fprintf(out, "%-*s", w, "");
        for (int e = 0; e < n; e++) {
            fprintf(out, "%-*s", w, endpoint_name(topo, e));
        }
        fprintf(out, "%-6s%s\n", "NUMA", topo->ndevs ? "NIC" : "");
        for (int a = 0; a < n; a++) {
            const xccl_topo_loc_t *loc = a < topo->ndevs ? &topo->devs[a].loc : &topo->nics[a - topo->ndevs].loc;
            fprintf(out, "%-*s", w, endpoint_name(topo, a));
            for (int b = 0; b < n; b++) {
                cell(topo, a, b, buf, sizeof(buf));
                fprintf(out, "%-*s", w, buf);
            }
            snprintf(buf, sizeof(buf), "%d", loc->numa);
            fprintf(out, "%-6s", loc->numa >= 0 ? buf : "N/A");
            if (a < topo->ndevs) {
                int nic = topo->devs[a].nic;
                fprintf(out, "%s", nic >= 0 ? topo->nics[nic].name : "-");
            }
            fputc('\n', out);
        }
        fprintf(out, "\nLegend:\n"
                "  X    = self\n"
                "  NV#  = # direct NVLinks (XG#: xGMI links, HC#: HCCS links)\n"
                "  SW#  = through the NVSwitch fabric, # links from each device (the fewer of the two)\n"
                "  PIX  = under one PCIe switch\n"
                "  PXB  = through several PCIe switches, no host bridge\n"
                "  PHB  = through a PCIe host bridge (the CPU)\n"
                "  NODE = between PCIe host bridges of one NUMA node\n"
                "  SYS  = across the interconnect between NUMA nodes (sockets)\n");
    }
    if (topo->ndevs > 0) {
        fprintf(out, "\nNIC of each device (rails, %s):\n", xccl_topo_fabric_name(topo->fabric));
        for (int d = 0; d < topo->ndevs; d++) {
            int nic = topo->devs[d].nic;
            if (nic < 0) {
                fprintf(out, "  %-8s -> none\n", topo->devs[d].name);
                continue;
            }
            const xccl_topo_nic_t *x = &topo->nics[nic];
            fprintf(out, "  %-8s -> %-10s %-4s %s x%d %g Gb/s\n", topo->devs[d].name, x->name,
                    xccl_topo_path_name(xccl_topo_path(topo, d, topo->ndevs + nic)),
                    xccl_topo_nic_type_name(x->type), x->ports, x->rate_gbps);
        }
    }
    if (topo->nnuma > 0) {
        fprintf(out, "\nNUMA nodes:\n");
        for (int i = 0; i < topo->nnuma; i++) {
            const xccl_topo_numa_t *m = &topo->numa[i];
            fprintf(out, "  numa%-3d package %d, %d cores, %d pus\n", m->os_index, m->package, m->cores, m->pus);
        }
    }
}
