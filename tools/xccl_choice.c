/* See xccl_choice.h. */
#include "xccl_choice.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const xccl_algo_t *algo;
    xccl_coll_args_t args;
} job_t;

static int build_one(xccl_sched_t *s, void *arg)
{
    const job_t *j = arg;
    return j->algo->build(s, &j->args);
}

static int is_reduction(xccl_coll_t c)
{
    return XCCL_COLL_ALLREDUCE == c || XCCL_COLL_REDUCE_SCATTER == c ||
           XCCL_COLL_REDUCE_SCATTER_BLOCK == c;
}

int xccl_choice_print(const xccl_choice_t *c, const size_t *sizes, int nsizes, FILE *out)
{
    const int p = c->layout->size;
    const size_t es = is_reduction(c->coll) ? 4 : 1;
    int n;
    const xccl_algo_t *algos = xccl_coll_algos(c->coll, &n);
    size_t *counts = malloc((size_t) p * sizeof(size_t));
    if (NULL == counts) {
        return -1;
    }
    fprintf(out, "# %-12s", "size(B)");
    for (int i = 0; i < n; i++) {
        fprintf(out, " %13s", algos[i].name);
    }
    fprintf(out, "  %-18s %s\n", "best", "auto");
    for (int k = 0; k < nsizes; k++) {
        const size_t bytes = sizes[k];
        job_t j = { .args = { .layout = c->layout, .segment = c->segment } };
        j.args.count = bytes / 4;
        for (int r = 0; r < p; r++) {
            counts[r] = bytes / 4 / (size_t) p;
        }
        j.args.counts = counts;
        j.args.block = bytes / (size_t) p;
        j.args.bytes = bytes;
        double t[XCCL_CATALOG_MAX];
        int best_i = -1;
        fprintf(out, "  %-12zu", bytes);
        for (int i = 0; i < n; i++) {
            j.algo = &algos[i];
            t[i] = xccl_predict_hier(c->layout, es, build_one, &j, NULL, 0, &c->intra, &c->inter);
            if (t[i] < 0) {
                fprintf(out, " %13s", "n/a");
                continue;
            }
            fprintf(out, " %13.1f", t[i] * 1e6);
            if (best_i < 0 || t[i] < t[best_i]) {
                best_i = i;
            }
        }
        /* The component's rule. */
        int chosen = xccl_pick(t, n, c->margin);
        fprintf(out, "  %-18s %s\n", best_i >= 0 ? algos[best_i].name : "-",
                chosen >= 0 ? algos[chosen].name : "-");
    }
    free(counts);
    return 0;
}

int xccl_choice_parse_sizes(const char *list, size_t *sizes, int max)
{
    int n = 0;
    const char *s = list;
    while (*s && n < max) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || v < 0) {
            return -1;
        }
        switch (*end) {
        case 'k': case 'K': v *= 1024; end++; break;
        case 'm': case 'M': v *= 1024.0 * 1024; end++; break;
        case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
        default: break;
        }
        if (*end != ',' && *end != '\0') {
            return -1;
        }
        sizes[n++] = (size_t) v;
        s = *end ? end + 1 : end;
    }
    return n;
}
