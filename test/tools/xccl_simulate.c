/*
 * xccl_simulate: predicted time of every algorithm of a collective for a
 * machine that need not exist, from the same schedule builders and cost
 * model the component uses.  No MPI: it builds the schedules of a few
 * ranks (the root, its neighbours, the middle rank) and takes the worst.
 *
 *   xccl_simulate -c allreduce -n 100000 [-s 8,1K,1M,64M]
 *                 [-a alpha] [-b beta] [-g gamma] [-d delta]
 *
 * Sizes are bytes per rank as in xccl_bench (allgather: total received,
 * reduce_scatter/alltoall: total sent); elements are 4-byte floats.
 */
#include "xccl_algos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*build_fn)(xccl_sched_t *s, size_t bytes, int p);

static int ar_ring(xccl_sched_t *s, size_t b, int p) { (void) p; return xccl_build_allreduce_ring(s, b / 4); }
static int ar_rd(xccl_sched_t *s, size_t b, int p) { (void) p; return xccl_build_allreduce_recursive_doubling(s, b / 4); }
static int ar_rab(xccl_sched_t *s, size_t b, int p) { (void) p; return xccl_build_allreduce_rabenseifner(s, b / 4); }
static int ar_swing(xccl_sched_t *s, size_t b, int p) { (void) p; return xccl_build_allreduce_swing(s, b / 4); }
static int ag_ring(xccl_sched_t *s, size_t b, int p) { return xccl_build_allgather_ring(s, b / (size_t) p); }
static int ag_bruck(xccl_sched_t *s, size_t b, int p) { return xccl_build_allgather_bruck(s, b / (size_t) p); }
static int ag_rd(xccl_sched_t *s, size_t b, int p) { return xccl_build_allgather_recursive_doubling(s, b / (size_t) p); }
static int a2a_bruck(xccl_sched_t *s, size_t b, int p) { return xccl_build_alltoall_bruck(s, b / (size_t) p, 0); }
static int a2a_pw(xccl_sched_t *s, size_t b, int p) { return xccl_build_alltoall_pairwise(s, b / (size_t) p, 0); }
static int bc_binomial(xccl_sched_t *s, size_t b, int p) { (void) p; return xccl_build_bcast_binomial(s, b, 0); }
static int bc_sag(xccl_sched_t *s, size_t b, int p) { (void) p; return xccl_build_bcast_scatter_allgather(s, b, 0); }
static int bc_chain(xccl_sched_t *s, size_t b, int p) { (void) p; return xccl_build_bcast_chain(s, b, 0, 256 * 1024); }
static int a2a_linear(xccl_sched_t *s, size_t b, int p) { return xccl_build_alltoall_linear(s, b / (size_t) p, 0, 8); }

static int rs_with(xccl_sched_t *s, size_t b, int p,
                   int (*fn)(xccl_sched_t *, const size_t *, int))
{
    size_t *counts = malloc((size_t) p * sizeof(size_t));
    if (NULL == counts) {
        return -1;
    }
    for (int i = 0; i < p; i++) {
        counts[i] = b / 4 / (size_t) p;
    }
    int rc = fn(s, counts, 0);
    free(counts);
    return rc;
}
static int rs_ring(xccl_sched_t *s, size_t b, int p) { return rs_with(s, b, p, xccl_build_reduce_scatter_ring); }
static int rs_pw(xccl_sched_t *s, size_t b, int p) { return rs_with(s, b, p, xccl_build_reduce_scatter_pairwise); }
static int rs_rh(xccl_sched_t *s, size_t b, int p) { return rs_with(s, b, p, xccl_build_reduce_scatter_recursive_halving); }

static const struct {
    const char *coll;
    const char *algo;
    build_fn build;
    size_t elem;
} algos[] = {
    { "allreduce", "ring", ar_ring, 4 },
    { "allreduce", "recursive_doubling", ar_rd, 4 },
    { "allreduce", "rabenseifner", ar_rab, 4 },
    { "allreduce", "swing", ar_swing, 4 },
    { "allgather", "ring", ag_ring, 1 },
    { "allgather", "bruck", ag_bruck, 1 },
    { "allgather", "recursive_doubling", ag_rd, 1 },
    { "reduce_scatter", "ring", rs_ring, 4 },
    { "reduce_scatter", "pairwise", rs_pw, 4 },
    { "reduce_scatter", "recursive_halving", rs_rh, 4 },
    { "alltoall", "pairwise", a2a_pw, 1 },
    { "alltoall", "linear", a2a_linear, 1 },
    { "alltoall", "bruck", a2a_bruck, 1 },
    { "bcast", "binomial", bc_binomial, 1 },
    { "bcast", "scatter_allgather", bc_sag, 1 },
    { "bcast", "chain", bc_chain, 1 },
};
#define NALGOS (sizeof(algos) / sizeof(algos[0]))

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return (size_t) v;
}

static double predict(build_fn build, size_t elem, size_t bytes, int p,
                      const xccl_cost_model_t *m)
{
    const int ranks[4] = { 0, 1 % p, p - 1, p / 2 };
    double worst = -1;
    for (int k = 0; k < 4; k++) {
        xccl_sched_t s;
        xccl_sched_init(&s, ranks[k], p, elem);
        if (0 == build(&s, bytes, p)) {
            double t = xccl_sched_cost(&s, m);
            worst = t > worst ? t : worst;
        }
        xccl_sched_fini(&s);
    }
    return worst;
}

int main(int argc, char **argv)
{
    const char *coll = "allreduce";
    char sizes_arg[256] = "8,1K,64K,1M,16M,64M";
    int p = 64, opt;
    xccl_cost_model_t m = { 1.5e-6, 2.5e-10, 2.0e-10, 1.3e-10 };

    while ((opt = getopt(argc, argv, "c:n:s:a:b:g:d:h")) != -1) {
        switch (opt) {
        case 'c': coll = optarg; break;
        case 'n': p = atoi(optarg); break;
        case 's': snprintf(sizes_arg, sizeof(sizes_arg), "%s", optarg); break;
        case 'a': m.alpha = atof(optarg); break;
        case 'b': m.beta = atof(optarg); break;
        case 'g': m.gamma = atof(optarg); break;
        case 'd': m.delta = atof(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-c allreduce|allgather|reduce_scatter|alltoall|bcast] "
                    "[-n ranks] [-s sizes] [-a alpha] [-b beta] [-g gamma] [-d delta]\n", argv[0]);
            return 'h' == opt ? 0 : 2;
        }
    }
    if (p < 1) {
        fprintf(stderr, "xccl_simulate: -n must be >= 1\n");
        return 2;
    }
    printf("# %s, %d ranks, alpha %.3g s, beta %.3g s/B, gamma %.3g s/B, delta %.3g s/B; "
           "predicted us\n", coll, p, m.alpha, m.beta, m.gamma, m.delta);
    printf("# %12s", "size(B)");
    int found = 0;
    for (size_t i = 0; i < NALGOS; i++) {
        if (0 == strcmp(algos[i].coll, coll)) {
            printf(" %18s", algos[i].algo);
            found = 1;
        }
    }
    printf("  best\n");
    if (!found) {
        fprintf(stderr, "xccl_simulate: unknown collective %s\n", coll);
        return 2;
    }
    clock_t t0 = clock();
    for (char *tok = strtok(sizes_arg, ","); tok; tok = strtok(NULL, ",")) {
        size_t bytes = parse_size(tok);
        const char *best = "-";
        double best_t = -1;
        printf("  %12zu", bytes);
        for (size_t i = 0; i < NALGOS; i++) {
            if (strcmp(algos[i].coll, coll)) {
                continue;
            }
            double t = predict(algos[i].build, algos[i].elem, bytes, p, &m);
            if (t < 0) {
                printf(" %18s", "n/a");
                continue;
            }
            printf(" %18.1f", t * 1e6);
            if (best_t < 0 || t < best_t) {
                best_t = t;
                best = algos[i].algo;
            }
        }
        printf("  %s\n", best);
    }
    printf("# computed in %.2f s\n", (double) (clock() - t0) / CLOCKS_PER_SEC);
    return 0;
}
