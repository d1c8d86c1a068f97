/*
 * Pipelined two-level reduce ("pipeline"): hier's three stages
 * (algos/hier_reduce.c: intra-node reduce-scatter of L = min ppn slices,
 * reduce of slice j on rail j to the rail's rank on the root's node,
 * gather of the slices to the root inside its node) on K chunks of the
 * vector, overlapped (algos/pipe_util.h): in slot t the intra-node lane
 * reduce-scatters chunk t and then gathers chunk t-2 while the inter-node
 * lane reduces chunk t-1 on the rails.  K + 2 slots, each as long as its
 * longer lane, where hier takes the sum of the stages.  Every element is
 * reduced as hier reduces it (one rank of each node, then the rail's
 * algorithm in its tree's order): the same bits as hier, on any run.
 *
 * Buffers: the root's RECV is the only one named.  The slices of chunk t
 * live in SCRATCH at t slice-widths (K of them: about the vector's
 * n / L bytes, as hier's one slice), or are SEND itself on a node of one
 * rank; the rail's result lands on the root straight in RECV at the
 * slice's place, elsewhere on the slice.  The stages' own scratch comes
 * after the slices (pp.base).
 */
#include "pipe_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

/* The rounds of one stage built for a group of g ranks (rank 0), or -1. */
typedef struct {
    const hier_slices_t *v;
    int root;
    xccl_reduce_scatter_build_fn rs;
    xccl_reduce_build_fn rd;
    xccl_gatherv_build_fn gv;
} stages_t;

static int stage_rounds(int g, size_t es, const stages_t *st, int which)
{
    xccl_sched_t c;
    xccl_sched_init(&c, 0, g, es);
    const int rc = 0 == which   ? st->rs(&c, st->v->counts, 0)
                   : 1 == which ? st->gv(&c, st->v->bytes, st->v->displs, 0, 1)
                                : st->rd(&c, st->v->counts[0], 0, 0);
    const int rounds = 0 == rc ? (int) c.rounds : -1;
    xccl_sched_fini(&c);
    return rounds;
}

/* The rounds of a slot's longer lane: the intra-node reduce-scatter and
 * gather against the rail's reduce, read off the largest node and the
 * rail of every node (the same on every rank: every rank cuts the vector
 * into the same chunks).  -1 if a stage fails to build. */
static int slot_rounds(const xccl_layout_t *l, size_t count, size_t es, xccl_reduce_scatter_build_fn intra_rs,
                       xccl_reduce_build_fn inter, xccl_gatherv_build_fn intra_gv)
{
    hier_slices_t v;
    int rounds = -1;
    if (0 == hier_slices_init(&v, count, l->min_ppn, l->max_ppn, es)) {
        const stages_t st = { &v, 0, intra_rs, inter, intra_gv };
        const int rs = stage_rounds(l->max_ppn, es, &st, 0), gv = stage_rounds(l->max_ppn, es, &st, 1);
        const int rd = stage_rounds(l->nnodes, es, &st, 2);
        if (rs >= 0 && gv >= 0 && rd >= 0) {
            rounds = rs + gv > rd ? rs + gv : rd;
        }
    }
    hier_slices_fini(&v);
    return rounds;
}

int xccl_build_pipe_reduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int root, int in_place,
                           size_t chunk, int max_chunks, xccl_reduce_scatter_build_fn intra_rs,
                           xccl_reduce_build_fn inter, xccl_gatherv_build_fn intra_gv)
{
    if (NULL == l || l->size != s->size || root < 0 || root >= s->size || NULL == intra_rs || NULL == inter ||
        NULL == intra_gv || max_chunks < 1) {
        return -1;
    }
    if (l->nnodes < 2) {
        return XCCL_NOT_APPLICABLE;    /* no rail: hier's form */
    }
    const int r = s->rank, node = l->node_of[r], j = l->local_rank[r];
    const int rnode = l->node_of[root], rj = l->local_rank[root];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node), N = l->nnodes;
    const int *members = xccl_layout_node_members(l, node);
    const size_t es = s->elem_size;
    const int rounds = slot_rounds(l, count, es, intra_rs, inter, intra_gv);
    const int K = pipe_chunks(count, es, pipe_slot_chunk(chunk, rounds), max_chunks);
    const int whole = 1 == ln, is_root = r == root, on_rail = j < L, rail_root = node == rnode;
    /* SCRATCH: K slices of the largest (chunk 0's slice 0), then the
     * stages' scratch */
    const size_t width = hier_align(chunk_count(chunk_count(count, K, 0), L, 0) * es);
    hier_slices_t *v = pipe_slices(count, K, L, ln, es);    /* the slices of each chunk */
    int *rail = malloc((size_t) N * sizeof(int));
    pipe_t pp;
    int rc = -1, nr = 0;

    if (pipe_init(&pp, s, 3 * (size_t) K) < 0 || rounds < 0 || NULL == v || NULL == rail) {
        goto out;
    }
    if (on_rail) {
        nr = xccl_layout_rail(l, j, rail);
    }
    pp.base = whole ? 0 : (size_t) K * width;
    const xccl_ref_t none = xccl_ref(XCCL_BUF_SCRATCH, 0);    /* placed by pipe_zip */
    for (int t = 0; t < K + 2; t++) {
        /* Intra lane: reduce-scatter chunk t onto its slices, ... */
        if (t < K && !whole) {
            const size_t cb = chunk_first(count, K, t) * es;
            xccl_sched_t *c = pipe_kid(&pp, members, ln);
            if (NULL == c || pipe_add(&pp, intra_rs(c, v[t].counts, 0), PIPE_INTRA, members,
                                      hier_map(xccl_ref(XCCL_BUF_SEND, cb),
                                               xccl_ref(XCCL_BUF_SCRATCH, (size_t) t * width), none)) < 0) {
                goto out;
            }
        }
        /* ... while the inter lane reduces chunk t-1 on the rail, to the
         * root's place in RECV on the root, onto the slice elsewhere ... */
        if (on_rail && t >= 1 && t - 1 < K) {
            const int k = t - 1;
            const size_t cb = chunk_first(count, K, k) * es;
            const xccl_ref_t slice = whole ? xccl_ref(XCCL_BUF_SEND, cb)
                                           : xccl_ref(XCCL_BUF_SCRATCH, (size_t) k * width);
            const xccl_ref_t dst = is_root ? xccl_ref(XCCL_BUF_RECV, cb + v[k].displs[j]) : slice;
            /* the slice is the result's place: in place at the root (a
             * node of one rank), and on the root's node but the root */
            const int same = rail_root && ((whole && in_place) || (!is_root && !whole));
            xccl_sched_t *c = pipe_kid(&pp, rail, nr);
            if (NULL == c || pipe_add(&pp, inter(c, v[k].counts[j], rnode, same), PIPE_INTER, rail,
                                      hier_map(slice, rail_root ? dst : slice, none)) < 0) {
                goto out;
            }
        }
        /* ... and the intra lane then gathers chunk t-2's slices to the
         * root inside its node (the root's own is in place). */
        if (t >= 2 && rail_root && !whole) {
            const int k = t - 2;
            const size_t cb = chunk_first(count, K, k) * es;
            xccl_sched_t *c = pipe_kid(&pp, members, ln);
            if (NULL == c || pipe_add(&pp, intra_gv(c, v[k].bytes, v[k].displs, rj, 1), PIPE_INTRA, members,
                                      hier_map(xccl_ref(XCCL_BUF_SCRATCH, (size_t) k * width),
                                               xccl_ref(XCCL_BUF_RECV, cb), none)) < 0) {
                goto out;
            }
        }
        pipe_next_slot(&pp);
    }
    rc = 0;
out:
    rc = pipe_end(&pp, rc);
    pipe_slices_free(v, K);
    free(rail);
    return rc;
}
