/*
 * Two-level reduce_scatter (irregular counts, blocks in communicator order).
 *
 * With L = min ppn, destination rank d belongs to group (local rank of d)
 * mod L; on a regular layout group j is rail j.  Local rank j < L of every
 * node carries group j:
 *   1. intra-node reduce-scatter: local rank j gets the node's partial sums
 *      of every block of group j, ordered by node, then by local rank (the
 *      input is packed into that order first, unless it already is: e.g.
 *      cyclic placement);
 *   2. inter-node reduce-scatter on rail j: rank (node n, j) gets the blocks
 *      of group j that live on node n, fully reduced;
 *   3. on uneven layouts only: rank (n, j) passes the blocks of local ranks
 *      j+L, j+2L, ... of its node on.
 * Between nodes a rank sends (N-1)/N of n/L bytes (n the whole input).
 */
#include "hier_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

int xccl_build_hier_reduce_scatter(xccl_sched_t *s, const xccl_layout_t *l, const size_t *counts,
                                   int in_place, xccl_reduce_scatter_build_fn intra,
                                   xccl_reduce_scatter_build_fn inter)
{
    if (NULL == l || l->size != s->size || NULL == intra || NULL == inter) {
        return -1;
    }
    const int p = s->size, r = s->rank, N = l->nnodes, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node);
    const int *members = xccl_layout_node_members(l, node);
    const size_t es = s->elem_size;
    int *order = malloc((size_t) p * sizeof(int)), *rail = malloc((size_t) N * sizeof(int));
    size_t *first = malloc(((size_t) p + 1) * sizeof(size_t));
    size_t *seg = calloc((size_t) L * (size_t) N, sizeof(size_t));   /* elements of (group, node) */
    size_t *gtotal = calloc((size_t) L, sizeof(size_t));
    size_t *cc = malloc(((size_t) (ln > N ? ln : N)) * sizeof(size_t));
    xccl_sched_t c;
    xccl_buf_map_t map;
    int rc = -1;

    if (NULL == order || NULL == rail || NULL == first || NULL == seg || NULL == gtotal || NULL == cc) {
        goto out;
    }
    s->algo = "hier";
    first[0] = 0;
    for (int d = 0; d < p; d++) {
        first[d + 1] = first[d] + counts[d];
    }
    /* Packed order: group, node, local rank. */
    int k = 0, identity = 1;
    for (int g = 0; g < L; g++) {
        for (int n = 0; n < N; n++) {
            for (int i = g; i < xccl_layout_node_size(l, n); i += L) {
                int d = xccl_layout_rank_at(l, n, i);
                identity &= d == k;
                order[k++] = d;
                seg[g * N + n] += counts[d];
                gtotal[g] += counts[d];
            }
        }
    }
    const int g = j % L;                       /* my group */
    const int carrier = j < L;                 /* I carry my group between nodes */
    const int single = carrier && j + L >= ln; /* ... and it has no other rank on my node */
    const xccl_ref_t in = xccl_ref(in_place ? XCCL_BUF_RECV : XCCL_BUF_SEND, 0);
    size_t off_a = 0, off_b = 0, off_c = 0, off_child = 0;
    {
        size_t at = 0;
        if (!identity) {
            at = hier_align(first[p] * es);    /* A: packed input */
        }
        off_b = at;                            /* B: node partial sums of my group */
        at += hier_align(carrier ? gtotal[g] * es : 0);
        off_c = at;                            /* C: my group's blocks of my node */
        at += hier_align(carrier && !single ? seg[g * N + node] * es : 0);
        off_child = at;
    }
    const xccl_ref_t out = !carrier || single ? xccl_ref(XCCL_BUF_RECV, 0) : xccl_ref(XCCL_BUF_SCRATCH, off_c);
    if (s->scratch_bytes < off_child) {
        s->scratch_bytes = off_child;
    }

    /* Pack the input by group, node, local rank. */
    if (!identity) {
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        size_t at = 0;
        for (k = 0; k < p; k++) {
            int d = order[k];
            hier_copy_add(&cp, xccl_ref(XCCL_BUF_SCRATCH, off_a + at * es),
                          xccl_ref((xccl_buf_id_t) in.buf, first[d] * es), counts[d] * es);
            at += counts[d];
        }
        hier_copy_flush(&cp);
    }
    const xccl_ref_t packed = identity ? in : xccl_ref(XCCL_BUF_SCRATCH, off_a);

    /* 1. Reduce-scatter inside the node: group i to local rank i < L. */
    for (int i = 0; i < ln; i++) {
        cc[i] = i < L ? gtotal[i] : 0;
    }
    if (hier_child_init(s, &c, members, ln) < 0) {
        goto out;
    }
    map = hier_map(packed, 1 == N ? out : xccl_ref(XCCL_BUF_SCRATCH, off_b),
                   xccl_ref(XCCL_BUF_SCRATCH, off_child));
    /* One node, in place, input not packed, output to RECV: the child's own
     * in-place case (input is its RECV, output at its start). */
    const int child_in_place = 1 == N && in_place && identity && XCCL_BUF_RECV == out.buf;
    if (hier_child_done(s, &c, members, &map, intra(&c, cc, child_in_place)) < 0) {
        goto out;
    }

    /* 2. Reduce-scatter on rail j: node n gets its share of group j. */
    if (carrier && N > 1) {
        int nr = xccl_layout_rail(l, j, rail);
        for (int n = 0; n < N; n++) {
            cc[n] = seg[g * N + n];
        }
        if (hier_child_init(s, &c, rail, nr) < 0) {
            goto out;
        }
        map = hier_map(xccl_ref(XCCL_BUF_SCRATCH, off_b), out, xccl_ref(XCCL_BUF_SCRATCH, off_child));
        if (hier_child_done(s, &c, rail, &map, inter(&c, cc, 0)) < 0) {
            goto out;
        }
    }

    /* 3. Uneven nodes: local rank j < L holds the blocks of j, j+L, ... */
    if (carrier && !single) {
        size_t at = counts[r];
        xccl_sched_step(s);
        for (int i = j + L; i < ln; i += L) {
            int d = members[i];
            xccl_sched_send(s, d, xccl_ref(XCCL_BUF_SCRATCH, off_c + at * es), counts[d] * es);
            at += counts[d];
        }
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), out, counts[r] * es);
    } else if (!carrier) {
        xccl_sched_step(s);
        xccl_sched_recv(s, members[j % L], xccl_ref(XCCL_BUF_RECV, 0), counts[r] * es);
    }
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    free(order);
    free(rail);
    free(first);
    free(seg);
    free(gtotal);
    free(cc);
    return rc;
}
