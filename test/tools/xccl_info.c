/*
 * xccl_info: the topology xccl sees on this node (or in a topology file),
 * as a summary and a device x device matrix in the style of
 * nvidia-smi topo -m, or as a topology file (--dump) to edit and load back
 * with --topo-file.
 */
#include "topo/xccl_topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: xccl_info [options]\n"
            "  --topo-file F    load topology file F instead of detecting\n"
            "  --dump           write the topology file to stdout\n"
            "  --hwloc-xml F    detect from hwloc XML file F instead of this machine\n"
            "  --sysfs-root D   read /sys/class/{infiniband,net} under D (default /sys)\n"
            "  --no-nvml        do not query NVLink through NVML\n"
            "  -h, --help       this text\n"
            "Default: print the summary and the matrix.\n");
}

/* Algorithm choice per collective and size class for a given number of
 * ranks and node layout goes here (issue 4, part 6): it takes the
 * topology printed above and the cost model of algos/. */
static void print_algorithm_choice(const xccl_topo_t *topo)
{
    (void) topo;
}

int main(int argc, char **argv)
{
    const char *topo_file = NULL;
    int dump = 0;
    xccl_topo_detect_opts_t opts = { NULL, NULL, NULL, 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--topo-file") == 0 && has_value) {
            topo_file = argv[++i];
        } else if (strcmp(a, "--hwloc-xml") == 0 && has_value) {
            opts.hwloc_xml = argv[++i];
        } else if (strcmp(a, "--sysfs-root") == 0 && has_value) {
            opts.sysfs_root = argv[++i];
        } else if (strcmp(a, "--no-nvml") == 0) {
            opts.no_nvml = 1;
        } else if (strcmp(a, "--dump") == 0) {
            dump = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "xccl_info: bad argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }

    xccl_topo_t *topo = malloc(sizeof(*topo));
    char err[512];
    if (topo == NULL) {
        fprintf(stderr, "xccl_info: out of memory\n");
        return 1;
    }
    int rc = topo_file ? xccl_topo_load(topo_file, topo, err, sizeof(err))
                       : xccl_topo_detect(topo, &opts, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "xccl_info: %s\n", err);
        free(topo);
        return 1;
    }
    if (dump) {
        rc = xccl_topo_dump(topo, stdout);
    } else {
        char summary[256];
        xccl_topo_summary(topo, summary, sizeof(summary));
        printf("node %s (%s): %s\n\n", topo->name, topo_file ? topo_file : "detected", summary);
        xccl_topo_print_matrix(topo, stdout);
        print_algorithm_choice(topo);
    }
    free(topo);
    return rc == 0 ? 0 : 1;
}
