/*
 * xccl_info: the topology xccl sees on this node (or in a topology file),
 * as a summary and a device x device matrix in the style of
 * nvidia-smi topo -m, or as a topology file (--dump) to edit and load back
 * with --topo-file.  With -n RANKS it also prints, per collective and
 * size, the predicted time of every algorithm and the one xccl's auto
 * selection would take for a communicator of RANKS ranks laid out on nodes
 * like this one (--layout to say otherwise), from the component's algorithm
 * catalog and cost model (defaults of coll_xccl_cost_*).
 */
#include "topo/xccl_topo.h"
#include "xccl_choice.h"

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
            "  -n RANKS         also print xccl's algorithm choice for RANKS ranks\n"
            "  --layout SPEC    node of every rank: block:K, cyclic:N or a list (default:\n"
            "                   block:<devices of this node, or its cores>)\n"
            "  --sizes LIST     sizes for the choice table (default 8,4K,64K,1M,16M)\n"
            "  --inter-alpha S, --inter-beta S   cost between nodes (default 2e-5, 9e-10)\n"
            "  --net SPEC       the network between nodes: none, fattree:LEAF[:OVERSUB] or\n"
            "                   torus:XxY, [,nics=N] (as xccl_simulate -N)\n"
            "  -h, --help       this text\n"
            "Default: print the summary and the matrix.\n");
}

typedef struct {
    int ranks;                      /* 0: no choice table */
    const char *layout, *sizes;
    double inter_alpha, inter_beta;
    xccl_net_t net;                 /* --net: the links between nodes */
} choice_opts_t;

/* Algorithm choice per collective and size for the given ranks and node
 * layout.  Returns 0, or 2 after a bad argument. */
static int print_algorithm_choice(const xccl_topo_t *topo, const choice_opts_t *o)
{
    char spec[64], err[128];
    size_t sizes[32];
    xccl_layout_t layout;
    if (o->ranks <= 0) {
        return 0;
    }
    int nsizes = xccl_choice_parse_sizes(o->sizes, sizes, 32);
    if (nsizes <= 0) {
        fprintf(stderr, "xccl_info: bad --sizes %s\n", o->sizes);
        return 2;
    }
    if (o->layout) {
        snprintf(spec, sizeof(spec), "%s", o->layout);
    } else {
        int per_node = topo->ndevs > 0 ? topo->ndevs : (topo->cores > 0 ? topo->cores : 1);
        snprintf(spec, sizeof(spec), "block:%d", per_node);
    }
    if (0 != xccl_layout_parse(&layout, spec, o->ranks, err, sizeof(err))) {
        fprintf(stderr, "xccl_info: layout %s: %s\n", spec, err);
        return 2;
    }
    if (0 != xccl_net_check(&o->net, &layout, err, sizeof(err))) {
        fprintf(stderr, "xccl_info: --net: %s\n", err);
        xccl_layout_fini(&layout);
        return 2;
    }
    xccl_choice_t c = xccl_choice_defaults();
    c.layout = &layout;
    c.net = o->net;
    c.inter.alpha = o->inter_alpha;
    c.inter.beta = o->inter_beta;
    printf("\nxccl's choice for %d ranks, layout %s (%d nodes, %d..%d ranks each); predicted us "
           "(intra alpha %.3g beta %.3g, inter alpha %.3g beta %.3g)\n", o->ranks, spec,
           layout.nnodes, layout.min_ppn, layout.max_ppn, c.intra.alpha, c.intra.beta,
           c.inter.alpha, c.inter.beta);
    for (int i = 0; i < XCCL_NCOLL; i++) {
        c.coll = (xccl_coll_t) i;
        printf("%s\n", xccl_coll_name(c.coll));
        if (0 != xccl_choice_print(&c, sizes, nsizes, stdout)) {
            xccl_layout_fini(&layout);
            return 1;
        }
    }
    xccl_layout_fini(&layout);
    return 0;
}

int main(int argc, char **argv)
{
    const char *topo_file = NULL;
    int dump = 0;
    xccl_topo_detect_opts_t opts = { NULL, NULL, NULL, 0, 0 };     /* everything hwloc sees */
    choice_opts_t copts = { 0, NULL, "8,4K,64K,1M,16M", XCCL_COST_INTER_ALPHA, XCCL_COST_INTER_BETA, { 0 } };
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
        } else if (strcmp(a, "-n") == 0 && has_value) {
            copts.ranks = atoi(argv[++i]);
            if (copts.ranks <= 0) {
                fprintf(stderr, "xccl_info: -n needs a positive number of ranks\n");
                return 2;
            }
        } else if (strcmp(a, "--layout") == 0 && has_value) {
            copts.layout = argv[++i];
        } else if (strcmp(a, "--sizes") == 0 && has_value) {
            copts.sizes = argv[++i];
        } else if (strcmp(a, "--inter-alpha") == 0 && has_value) {
            copts.inter_alpha = atof(argv[++i]);
        } else if (strcmp(a, "--inter-beta") == 0 && has_value) {
            copts.inter_beta = atof(argv[++i]);
        } else if (strcmp(a, "--net") == 0 && has_value) {
            char err[160];
            if (0 != xccl_net_parse(&copts.net, argv[++i], err, sizeof(err))) {
                fprintf(stderr, "xccl_info: --net %s: %s\n", argv[i], err);
                return 2;
            }
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
        rc = xccl_topo_dump(topo, stdout) ? 1 : 0;
    } else {
        char summary[256];
        xccl_topo_summary(topo, summary, sizeof(summary));
        printf("node %s (%s): %s\n\n", topo->name, topo_file ? topo_file : "detected", summary);
        xccl_topo_print_matrix(topo, stdout);
        rc = print_algorithm_choice(topo, &copts);
    }
    free(topo);
    return rc;
}
