/*
 * Node layout of a communicator: node of each rank, members of each node in
 * communicator order, local ranks, rails.  Built from any per-rank node
 * identifier (the mapping code in topo/ passes what it detected) or parsed
 * from a synthetic description for tests and experiments.
 */
#include "xccl_layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_int(const char *p, const char **end, long *v);

/* qsort key: (node id, rank). */
typedef struct {
    int id, rank;
} id_rank_t;

static int cmp_id_rank(const void *a, const void *b)
{
    const id_rank_t *x = a, *y = b;
    if (x->id != y->id) {
        return x->id < y->id ? -1 : 1;
    }
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *) a, y = *(const int *) b;
    return (x > y) - (x < y);
}

int xccl_layout_init(xccl_layout_t *l, int size, const int *node_id)
{
    memset(l, 0, sizeof(*l));
    if (size <= 0 || NULL == node_id) {
        return -1;
    }
    for (int r = 0; r < size; r++) {
        if (node_id[r] < 0) {
            return -1;
        }
    }
    l->size = size;
    l->node_of = malloc((size_t) size * sizeof(int));
    l->local_rank = malloc((size_t) size * sizeof(int));
    l->members = malloc((size_t) size * sizeof(int));
    l->node_first = calloc((size_t) size + 1, sizeof(int));
    id_rank_t *byid = malloc((size_t) size * sizeof(*byid));
    int *lowest = malloc((size_t) size * sizeof(int));   /* lowest rank of each distinct id */
    if (NULL == l->node_of || NULL == l->local_rank || NULL == l->members || NULL == l->node_first ||
        NULL == byid || NULL == lowest) {
        free(byid);
        free(lowest);
        xccl_layout_fini(l);
        return -1;
    }
    /* Nodes are numbered by their lowest rank: sort by (id, rank), take the
     * lowest rank of each id, sort those; O(size log size) for the
     * simulator's 100 000-rank layouts. */
    for (int r = 0; r < size; r++) {
        byid[r].id = node_id[r];
        byid[r].rank = r;
    }
    qsort(byid, (size_t) size, sizeof(*byid), cmp_id_rank);
    int nnodes = 0;
    for (int i = 0; i < size; i++) {
        if (0 == i || byid[i].id != byid[i - 1].id) {
            lowest[nnodes++] = byid[i].rank;
        }
    }
    qsort(lowest, (size_t) nnodes, sizeof(int), cmp_int);
    /* node_of of each lowest rank, then of the others of its id. */
    for (int n = 0; n < nnodes; n++) {
        l->node_of[lowest[n]] = n;
    }
    for (int i = 0, first = 0; i < size; i++) {
        if (0 == i || byid[i].id != byid[i - 1].id) {
            first = byid[i].rank;      /* the lowest rank of this id */
        }
        l->node_of[byid[i].rank] = l->node_of[first];
    }
    free(byid);
    free(lowest);
    l->nnodes = nnodes;
    /* Counting sort by node keeps communicator order inside a node. */
    for (int r = 0; r < size; r++) {
        l->node_first[l->node_of[r] + 1]++;
    }
    for (int n = 0; n < nnodes; n++) {
        l->node_first[n + 1] += l->node_first[n];
    }
    int *fill = calloc((size_t) nnodes, sizeof(int));
    if (NULL == fill) {
        xccl_layout_fini(l);
        return -1;
    }
    l->min_ppn = size;
    l->max_ppn = 0;
    for (int r = 0; r < size; r++) {
        int n = l->node_of[r];
        l->local_rank[r] = fill[n];
        l->members[l->node_first[n] + fill[n]++] = r;
    }
    for (int n = 0; n < nnodes; n++) {
        l->min_ppn = fill[n] < l->min_ppn ? fill[n] : l->min_ppn;
        l->max_ppn = fill[n] > l->max_ppn ? fill[n] : l->max_ppn;
    }
    free(fill);
    return 0;
}

void xccl_layout_fini(xccl_layout_t *l)
{
    free(l->node_of);
    free(l->local_rank);
    free(l->members);
    free(l->node_first);
    memset(l, 0, sizeof(*l));
}

int xccl_layout_rail(const xccl_layout_t *l, int j, int *out)
{
    int k = 0;
    for (int n = 0; n < l->nnodes; n++) {
        int r = xccl_layout_rank_at(l, n, j);
        if (r >= 0) {
            out[k++] = r;
        }
    }
    return k;
}

int xccl_layout_set_order(xccl_layout_t *l, int node, const int *order)
{
    if (node < 0 || node >= l->nnodes) {
        return -1;
    }
    const int ln = xccl_layout_node_size(l, node);
    int *m = l->members + l->node_first[node];
    /* A permutation of the node's ranks: each belongs and appears once. */
    for (int i = 0; i < ln; i++) {
        int r = order[i];
        if (r < 0 || r >= l->size || l->node_of[r] != node) {
            return -1;
        }
        for (int k = 0; k < i; k++) {
            if (order[k] == r) {
                return -1;
            }
        }
    }
    for (int i = 0; i < ln; i++) {
        m[i] = order[i];
        l->local_rank[order[i]] = i;
    }
    return 0;
}

int xccl_layout_parse(xccl_layout_t *l, const char *spec, int size, char *err, size_t errlen)
{
    int *ids = NULL;
    long v;
    const char *end;
    int rc = -1;

    memset(l, 0, sizeof(*l));
    if (NULL == spec) {
        snprintf(err, errlen, "no layout");
        return -1;
    }
    int is_block = 0 == strncmp(spec, "block:", 6), is_cyclic = 0 == strncmp(spec, "cyclic:", 7);
    if (is_block || is_cyclic) {
        if (size <= 0) {
            snprintf(err, errlen, "'%s' needs the number of ranks", spec);
            return -1;
        }
        if (parse_int(spec + (is_block ? 6 : 7), &end, &v) < 0 || '\0' != *end || v <= 0 ||
            v > 1000000000L) {
            snprintf(err, errlen, "'%s': expected a positive integer after ':'", spec);
            return -1;
        }
        ids = malloc((size_t) size * sizeof(int));
        if (NULL == ids) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        for (int r = 0; r < size; r++) {
            ids[r] = is_block ? (int) (r / v) : (int) (r % v);
        }
    } else {
        /* Explicit list: count the entries first. */
        int n = 1;
        for (const char *p = spec; *p; p++) {
            n += ',' == *p;
        }
        ids = malloc((size_t) n * sizeof(int));
        if (NULL == ids) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        const char *p = spec;
        for (int i = 0; i < n; i++) {
            if (parse_int(p, &end, &v) < 0 || v < 0 || v > 1000000000L ||
                (i + 1 < n ? ',' != *end : '\0' != *end)) {
                snprintf(err, errlen, "'%s': entry %d is not a non-negative integer", spec, i + 1);
                goto out;
            }
            ids[i] = (int) v;
            p = end + 1;
        }
        if (size > 0 && n != size) {
            snprintf(err, errlen, "'%s': %d entries for %d ranks", spec, n, size);
            goto out;
        }
        size = n;
    }
    rc = xccl_layout_init(l, size, ids);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
    }
out:
    free(ids);
    return rc;
}

/* Decimal integer with optional surrounding blanks; -1 if none. */
static int parse_int(const char *p, const char **end, long *v)
{
    char *e;
    while (' ' == *p) {
        p++;
    }
    if (*p < '0' || *p > '9') {
        return -1;
    }
    errno = 0;
    *v = strtol(p, &e, 10);
    if (errno) {
        return -1;
    }
    while (' ' == *e) {
        e++;
    }
    *end = e;
    return 0;
}
