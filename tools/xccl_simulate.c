/*
 * xccl_simulate: predicted time of every algorithm of a collective for a
 * machine that need not exist, from the same algorithm catalog, schedule
 * builders and cost model the component uses, and the algorithm its auto
 * selection would take.  No MPI.
 *
 *   xccl_simulate -c allreduce -n 100000 [-s 8,1K,1M,64M] [-l block:8]
 *                 [-a alpha] [-b beta] [-g gamma] [-d delta]
 *                 [-A inter_alpha] [-B inter_beta] [-m margin]
 *                 [-S slot_bytes] [-P read|mapped] [-F cost_file]
 *                 [-N none|fattree:LEAF[:OVERSUB]|torus:XxY[,nics=N]]
 *
 * -N: the network between the nodes (xccl_net_t, algos/xccl_cost.h): a
 * two-tier fat tree of LEAF nodes per leaf switch whose uplinks are
 * oversubscribed OVERSUB:1, or a 2D torus of X by Y nodes; nics=N NICs per
 * node (default one per rank).  Flows that share a link then share its
 * bandwidth (the selection policy's net: the component prices the same).
 * -F: the intra-node model from a cost file (xccl_calibrate's, as
 * coll_xccl_cost_file); options after it override its values.
 * -S: the shared-memory level of a one-node communicator with slots of
 * that many bytes (the shm algorithms apply, auto takes the level's rule);
 * -P: peer access, the mesh algorithms apply: read (single copies, as the
 * level's process_vm_readv: the reductions copy pieces first) or mapped
 * (CUDA IPC).
 * -n and -s take lists, and A..B for every power of two times A up to B:
 * -n 8..65536 -s 8..1G prints a table per rank count (a sweep across scale).
 * -l gives the node of every rank (block:K, cyclic:N or a list, as
 * coll_xccl_node_layout); without it all ranks share one node.  Sizes are
 * bytes per rank as in xccl_bench (allgather: total received,
 * reduce_scatter/alltoall: total sent); elements are 4-byte floats.  The
 * further collectives: reduce as allreduce, to root 0; gather, scatter and
 * their v forms the total at root 0, allgatherv as allgather, alltoallv as
 * alltoall, the v forms with equal blocks back to back; barrier moves no
 * data (every size the same).
 */
#include "xccl_choice.h"
#include "algos/xccl_catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f, const char *argv0)
{
    fprintf(f, "usage: %s [-c allreduce|allgather|reduce_scatter|reduce_scatter_block|alltoall|bcast|reduce|"
            "barrier|allgatherv|alltoallv|gather|gatherv|scatter|scatterv] [-n ranks] [-s sizes] [-l layout] [-a alpha] [-b beta] [-g gamma] [-d delta] "
            "[-A inter_alpha] [-B inter_beta] [-m margin] [-S slot_bytes] [-P read|mapped] [-F cost_file] "
            "[-N none|fattree:LEAF[:OVERSUB]|torus:XxY[,nics=N]]\n", argv0);
}

static int simulate(xccl_choice_t *c, const char *coll_name, int p, const char *spec, const size_t *sizes,
                    int nsizes);

int main(int argc, char **argv)
{
    const char *coll_name = "allreduce", *spec = NULL;
    char sizes_arg[256] = "8,1K,64K,1M,16M,64M";
    char ranks_arg[256] = "64";
    int opt;
    /* The component's defaults (coll_xccl_cost_*). */
    xccl_choice_t c = xccl_choice_defaults();

    while ((opt = getopt(argc, argv, "c:n:s:l:a:b:g:d:A:B:m:S:P:F:N:h")) != -1) {
        switch (opt) {
        case 'c': coll_name = optarg; break;
        case 'n': snprintf(ranks_arg, sizeof(ranks_arg), "%s", optarg); break;
        case 's': snprintf(sizes_arg, sizeof(sizes_arg), "%s", optarg); break;
        case 'l': spec = optarg; break;
        case 'a': c.intra.alpha = atof(optarg); break;
        case 'b': c.intra.beta = atof(optarg); break;
        case 'g': c.intra.gamma = c.inter.gamma = atof(optarg); break;
        case 'd': c.intra.delta = c.inter.delta = atof(optarg); break;
        case 'A': c.inter.alpha = atof(optarg); break;
        case 'B': c.inter.beta = atof(optarg); break;
        case 'm': c.margin = atof(optarg); break;
        case 'S': {
            size_t slot;
            if (1 != xccl_choice_parse_sizes(optarg, &slot, 1) || 0 == slot) {
                fprintf(stderr, "xccl_simulate: bad slot size %s\n", optarg);
                return 2;
            }
            c.shm_slot = slot;
            break;
        }
        case 'P':
            if (0 == strcmp(optarg, "read")) {
                c.peer_access = XCCL_PEER_COPY;
            } else if (0 == strcmp(optarg, "mapped")) {
                c.peer_access = XCCL_PEER_MAPPED;
            } else {
                fprintf(stderr, "xccl_simulate: -P takes read or mapped, not %s\n", optarg);
                return 2;
            }
            break;
        case 'N': {
            char err[160];
            if (0 != xccl_net_parse(&c.net, optarg, err, sizeof(err))) {
                fprintf(stderr, "xccl_simulate: -N %s: %s\n", optarg, err);
                return 2;
            }
            break;
        }
        case 'F': {
            char err[160];
            if (0 != xccl_cost_load(optarg, &c.intra, err, sizeof(err))) {
                fprintf(stderr, "xccl_simulate: %s: %s\n", optarg, err);
                return 2;
            }
            break;
        }
        default:
            usage('h' == opt ? stdout : stderr, argv[0]);
            return 'h' == opt ? 0 : 2;
        }
    }
    int coll = -1;
    for (int i = 0; i < XCCL_NCOLL; i++) {
        if (0 == strcmp(coll_name, xccl_coll_name((xccl_coll_t) i))) {
            coll = i;
        }
    }
    if (coll < 0) {
        fprintf(stderr, "xccl_simulate: unknown collective %s\n", coll_name);
        return 2;
    }
    size_t plist[64];
    const int np = xccl_choice_parse_sizes(ranks_arg, plist, 64);
    if (np <= 0) {
        fprintf(stderr, "xccl_simulate: bad rank list %s\n", ranks_arg);
        return 2;
    }
    for (int i = 0; i < np; i++) {
        if (plist[i] < 1 || plist[i] > (1u << 24)) {
            fprintf(stderr, "xccl_simulate: -n must be >= 1\n");
            return 2;
        }
    }
    size_t sizes[64];
    int nsizes = xccl_choice_parse_sizes(sizes_arg, sizes, 64);
    if (nsizes <= 0) {
        fprintf(stderr, "xccl_simulate: bad size list %s\n", sizes_arg);
        return 2;
    }
    c.coll = (xccl_coll_t) coll;
    int rc = 0;
    for (int i = 0; i < np && 0 == rc; i++) {
        rc = simulate(&c, coll_name, (int) plist[i], spec, sizes, nsizes);
    }
    return rc;
}

/* One table: p ranks on layout spec (NULL: one node).  0, 1 (memory) or 2
 * (a bad layout or network). */
static int simulate(xccl_choice_t *c, const char *coll_name, int p, const char *spec, const size_t *sizes,
                    int nsizes)
{
    xccl_layout_t layout;
    char err[128];
    if (spec) {
        if (0 != xccl_layout_parse(&layout, spec, p, err, sizeof(err))) {
            fprintf(stderr, "xccl_simulate: layout %s: %s\n", spec, err);
            return 2;
        }
    } else {
        int *ids = calloc((size_t) p, sizeof(int));
        if (NULL == ids || 0 != xccl_layout_init(&layout, p, ids)) {
            free(ids);
            fprintf(stderr, "xccl_simulate: out of memory\n");
            return 1;
        }
        free(ids);
    }
    if (0 != xccl_net_check(&c->net, &layout, err, sizeof(err))) {
        fprintf(stderr, "xccl_simulate: -N: %s\n", err);
        xccl_layout_fini(&layout);
        return 2;
    }
    c->layout = &layout;
    char net[64];
    xccl_net_format(&c->net, net, sizeof(net));
    printf("# %s, %d ranks on %d node(s) (%d..%d per node); intra alpha %.3g s beta %.3g s/B, "
           "inter alpha %.3g s beta %.3g s/B, gamma %.3g s/B, delta %.3g s/B, shm flag %.3g s "
           "peer %.3g s/B; network %s; predicted us\n",
           coll_name, p, layout.nnodes, layout.min_ppn, layout.max_ppn, c->intra.alpha, c->intra.beta,
           c->inter.alpha, c->inter.beta, c->intra.gamma, c->intra.delta, c->intra.flag, c->intra.peer, net);
    clock_t t0 = clock();
    int rc = xccl_choice_print(c, sizes, nsizes, stdout);
    printf("# computed in %.2f s\n", (double) (clock() - t0) / CLOCKS_PER_SEC);
    xccl_layout_fini(&layout);
    return rc ? 1 : 0;
}
