/* See xccl_choice.h. */
#include "xccl_choice.h"
#include "algos/xccl_catalog.h"
#include "algos/xccl_select.h"

#include <stdlib.h>
#include <string.h>

static int is_reduction(xccl_coll_t c)
{
    return XCCL_COLL_ALLREDUCE == c || XCCL_COLL_REDUCE_SCATTER == c ||
           XCCL_COLL_REDUCE_SCATTER_BLOCK == c || XCCL_COLL_REDUCE == c;
}

/* The v forms' vec for blocks of block bytes: every count block, the
 * displacements back to back in rank order; alltoallv's receive half
 * the same as its send half. */
static void equal_vec(size_t *vec, int p, size_t block)
{
    for (int i = 0; i < p; i++) {
        vec[i] = vec[2 * p + i] = block;
        vec[p + i] = vec[3 * p + i] = (size_t) i * block;
    }
}

int xccl_choice_print(const xccl_choice_t *c, const size_t *sizes, int nsizes, FILE *out)
{
    const int p = c->layout->size;
    const size_t es = is_reduction(c->coll) ? 4 : 1;
    int n;
    const xccl_algo_t *algos = xccl_coll_algos(c->coll, &n);
    size_t *counts = malloc((size_t) p * sizeof(size_t));
    size_t *vec = malloc((size_t) p * 4 * sizeof(size_t));
    xccl_select_cache_t *cache = calloc(1, sizeof(*cache));
    xccl_select_policy_t policy;
    xccl_select_policy_defaults(&policy);
    policy.intra = c->intra;
    policy.inter = c->inter;
    policy.net = c->net;
    policy.margin = c->margin;
    if (NULL == counts || NULL == vec || NULL == cache) {
        free(counts);
        free(vec);
        free(cache);
        return -1;
    }
    fprintf(out, "# %-12s", "size(B)");
    for (int i = 0; i < n; i++) {
        fprintf(out, " %13s", algos[i].name);
    }
    fprintf(out, "  %-18s %s\n", "best", "auto");
    for (int k = 0; k < nsizes; k++) {
        const size_t bytes = sizes[k];
        xccl_coll_args_t args = { .layout = c->layout, .segment = c->segment,
                                  .shm_slot = c->shm_slot, .peer_access = c->peer_access };
        args.count = bytes / 4;
        for (int r = 0; r < p; r++) {
            counts[r] = bytes / 4 / (size_t) p;
        }
        args.counts = counts;
        args.block = bytes / (size_t) p;
        args.bytes = bytes;
        /* gather(v), scatter(v), allgatherv, alltoallv: blocks of
         * bytes / p (the total at the root, received, sent); reduce:
         * count elements to root 0; barrier: none */
        equal_vec(vec, p, args.block);
        args.vec = vec;
        args.nvec = (XCCL_COLL_ALLTOALLV == c->coll ? 4 : 2) * (size_t) p;
        double t[XCCL_CATALOG_MAX];
        int best_i = -1;
        /* The component's cost-model stage (algos/select.c), for every
         * algorithm's prediction; then its whole selection for auto. */
        (void) xccl_select_model(&policy, c->coll, &args, es, t, &n);
        const xccl_selection_t sel = xccl_select_algo(&policy, cache, c->coll, &args, p, bytes, es);
        const int chosen = sel.algo;
        fprintf(out, "  %-12zu", bytes);
        for (int i = 0; i < n; i++) {
            if (t[i] < 0) {
                fprintf(out, " %13s", "n/a");
                continue;
            }
            fprintf(out, " %13.1f", t[i] * 1e6);
            if (best_i < 0 || t[i] < t[best_i]) {
                best_i = i;
            }
        }
        fprintf(out, "  %-18s %s%s\n", best_i >= 0 ? algos[best_i].name : "-",
                chosen >= XCCL_SEL_FIRST ? xccl_select_name(c->coll, chosen) : "-",
                XCCL_BY_LEVEL == sel.by ? " (level)" : "");
    }
    xccl_select_cache_fini(cache);
    free(cache);
    free(counts);
    free(vec);
    return 0;
}

/* One size: a number with an optional K, M or G; *end past it, or -1. */
static int parse_one(const char *s, const char **end, double *v)
{
    char *e;
    *v = strtod(s, &e);
    if (e == s || *v < 0) {
        return -1;
    }
    if (e[-1] == '.' && e[0] == '.') {
        e--;                   /* "8..": 8, then the range */
    }
    switch (*e) {
    case 'k': case 'K': *v *= 1024; e++; break;
    case 'm': case 'M': *v *= 1024.0 * 1024; e++; break;
    case 'g': case 'G': *v *= 1024.0 * 1024 * 1024; e++; break;
    default: break;
    }
    *end = e;
    return 0;
}

int xccl_choice_parse_sizes(const char *list, size_t *sizes, int max)
{
    int n = 0;
    const char *s = list, *end;
    while (*s) {
        double v, hi;
        if (0 != parse_one(s, &end, &v)) {
            return -1;
        }
        hi = v;
        if ('.' == end[0] && '.' == end[1]) {
            /* A..B: A, 2A, 4A, ... up to B */
            if (0 != parse_one(end + 2, &end, &hi) || v < 1 || hi < v) {
                return -1;
            }
        }
        for (double x = v; x <= hi; x *= 2) {
            if (n == max) {
                return -1;
            }
            sizes[n++] = (size_t) x;
            if (v == hi) {
                break;
            }
        }
        if (*end != ',' && *end != '\0') {
            return -1;
        }
        s = *end ? end + 1 : end;
    }
    return n;
}
