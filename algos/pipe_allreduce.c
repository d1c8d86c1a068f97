/*
 * Pipelined two-level allreduce ("pipeline", after HCCL's
 * pipeline algorithm): hier's three stages (intra-node reduce-scatter of
 * L = min ppn slices, allreduce of slice j on rail j, intra-node
 * allgather) on K chunks of the vector, overlapped (algos/pipe_util.h):
 * in slot t the intra-node lane reduce-scatters chunk t and then gathers
 * chunk t-2 while the inter-node lane allreduces chunk t-1 on the rails.
 * K + 2 slots, each as long as its longer lane: about
 *   (K + 2) / K * max(intra time, inter time)
 * where hier takes their sum; slots of few rounds take smaller chunks
 * (pipe_slot_chunk).  Every element is reduced as hier reduces it (one
 * rank of each node, then the rail's algorithm, the same bits on every
 * rail member), and the allgather only copies: every rank ends with the
 * same bits.
 */
#include "pipe_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

/* The rounds of a slot's longer lane: the intra-node reduce-scatter and
 * allgather against the rail's allreduce.  Read off the largest node and
 * the rail of every node, not this rank's own groups, so that every rank
 * cuts the vector into the same chunks.  -1 if a stage fails to build. */
static int slot_rounds(const xccl_layout_t *l, size_t count, int in_place, size_t es,
                       xccl_reduce_scatter_build_fn intra_rs, xccl_allreduce_build_fn inter_ar,
                       xccl_allgatherv_build_fn intra_ag)
{
    const int g = l->max_ppn, L = l->min_ppn;
    hier_slices_t v;
    int intra = -1, inter = -1;
    xccl_sched_t c;

    if (0 == hier_slices_init(&v, count, L, g, es)) {
        xccl_sched_init(&c, 0, g, es);
        if (0 == intra_rs(&c, v.counts, in_place)) {
            intra = (int) c.rounds;
        }
        xccl_sched_fini(&c);
        xccl_sched_init(&c, 0, g, es);
        if (intra >= 0 && 0 == intra_ag(&c, v.bytes, v.displs, 1)) {
            intra += (int) c.rounds;
        } else {
            intra = -1;
        }
        xccl_sched_fini(&c);
        xccl_sched_init(&c, 0, l->nnodes, es);
        if (0 == inter_ar(&c, v.counts[0])) {
            inter = (int) c.rounds;
        }
        xccl_sched_fini(&c);
    }
    hier_slices_fini(&v);
    return intra < 0 || inter < 0 ? -1 : intra > inter ? intra : inter;
}

int xccl_build_pipe_allreduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int in_place,
                              size_t chunk, int max_chunks, xccl_reduce_scatter_build_fn intra_rs,
                              xccl_allreduce_build_fn inter_ar, xccl_allgatherv_build_fn intra_ag)
{
    if (NULL == l || l->size != s->size || NULL == intra_rs || NULL == inter_ar || NULL == intra_ag ||
        max_chunks < 1) {
        return -1;
    }
    const int r = s->rank, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node), N = l->nnodes;
    const int *members = xccl_layout_node_members(l, node);
    const size_t es = s->elem_size;
    const int rounds = slot_rounds(l, count, in_place, es, intra_rs, inter_ar, intra_ag);
    const int K = pipe_chunks(count, es, pipe_slot_chunk(chunk, rounds), max_chunks);
    const int on_rail = j < L && N > 1;
    hier_slices_t *v = pipe_slices(count, K, L, ln, es);    /* the slices of each chunk */
    int *rail = malloc((size_t) N * sizeof(int));
    pipe_t pp;
    int rc = -1, nr = 0;

    if (pipe_init(&pp, s, 3 * (size_t) K) < 0 || rounds < 0 || NULL == v || NULL == rail) {
        goto out;
    }
    s->algo = "pipeline";
    if (on_rail) {
        nr = xccl_layout_rail(l, j, rail);
    }
    const xccl_ref_t none = xccl_ref(XCCL_BUF_SCRATCH, 0);    /* placed by pipe_zip */
    for (int t = 0; t < K + 2; t++) {
        /* Intra lane: reduce-scatter chunk t (as hier: in place its slice
         * lands at RECV's start, then moves to its place), ... */
        if (t < K) {
            const size_t cb = chunk_first(count, K, t) * es;
            const size_t my_off = v[t].displs[j], my_len = v[t].bytes[j];
            xccl_sched_t *c = pipe_kid(&pp, members, ln);
            if (NULL == c) {
                goto out;
            }
            int brc = intra_rs(c, v[t].counts, in_place);
            if (0 == brc && in_place && my_off > 0) {
                xccl_sched_copy(c, xccl_ref(XCCL_BUF_RECV, my_off), xccl_ref(XCCL_BUF_RECV, 0), my_len);
            }
            xccl_buf_map_t map = in_place ? hier_map(xccl_ref(XCCL_BUF_RECV, cb), xccl_ref(XCCL_BUF_RECV, cb), none)
                                          : hier_map(xccl_ref(XCCL_BUF_SEND, cb), xccl_ref(XCCL_BUF_RECV, cb + my_off), none);
            if (pipe_add(&pp, brc, PIPE_INTRA, members, map) < 0) {
                goto out;
            }
        }
        /* ... while the inter lane allreduces chunk t-1 on the rail ... */
        if (on_rail && t >= 1 && t - 1 < K) {
            const size_t at = chunk_first(count, K, t - 1) * es + v[t - 1].displs[j];
            xccl_sched_t *c = pipe_kid(&pp, rail, nr);
            if (NULL == c ||
                pipe_add(&pp, inter_ar(c, v[t - 1].counts[j]), PIPE_INTER, rail,
                         hier_map(xccl_ref(XCCL_BUF_RECV, at), xccl_ref(XCCL_BUF_RECV, at), none)) < 0) {
                goto out;
            }
        }
        /* ... and the intra lane then gathers chunk t-2. */
        if (t >= 2) {
            const size_t cb = chunk_first(count, K, t - 2) * es;
            const hier_slices_t *w = &v[t - 2];
            xccl_sched_t *c = pipe_kid(&pp, members, ln);
            if (NULL == c ||
                pipe_add(&pp, intra_ag(c, w->bytes, w->displs, 1), PIPE_INTRA, members,
                         hier_map(xccl_ref(XCCL_BUF_RECV, cb + w->displs[j]), xccl_ref(XCCL_BUF_RECV, cb), none)) < 0) {
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
