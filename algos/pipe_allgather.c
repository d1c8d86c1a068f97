/*
 * Pipelined two-level allgather ("pipeline"): hier's stages
 * (algos/hier_allgather.c: allgatherv on the rails, then inside each node,
 * in the staging order group, node, local rank) on K chunks of every
 * block, overlapped (algos/pipe_util.h): in slot t the inter-node lane
 * gathers chunk t on the rails while the intra-node lane gathers chunk
 * t-1 inside the node and copies it to communicator order.  Chunk c of
 * every block is staged in its own region (p chunks of one size), so the
 * stages of different chunks never touch one region.  Only copies: every
 * rank ends with the same bytes.
 */
#include "pipe_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

int xccl_build_pipe_allgather(xccl_sched_t *s, const xccl_layout_t *l, size_t block, size_t chunk, int max_chunks,
                              xccl_allgatherv_build_fn inter, xccl_allgatherv_build_fn intra)
{
    if (NULL == l || l->size != s->size || NULL == inter || NULL == intra || max_chunks < 1) {
        return -1;
    }
    const int p = s->size, r = s->rank, N = l->nnodes, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node), g = j % L, carrier = j < L;
    const int *members = xccl_layout_node_members(l, node);
    /* chunks of every block cut alike: chunk c of a block is
     * [chunk_first(block, K, c), +chunk_count(block, K, c)) */
    const int K = pipe_chunks(block, (size_t) p, chunk, max_chunks);
    size_t *pos = malloc((size_t) p * sizeof(size_t));
    size_t *start = malloc(((size_t) L * (size_t) N + 1) * sizeof(size_t));
    size_t *bytes = malloc((size_t) (ln > N ? ln : N) * sizeof(size_t));
    size_t *displs = malloc((size_t) (ln > N ? ln : N) * sizeof(size_t));
    int *rail = malloc((size_t) N * sizeof(int));
    pipe_t pp;
    int rc = -1, nr = 0;

    if (pipe_init(&pp, s, 3 * (size_t) K) < 0 || NULL == pos || NULL == start || NULL == bytes ||
        NULL == displs || NULL == rail) {
        goto out;
    }
    s->algo = "pipeline";
    const int identity = hier_rail_order(l, L, pos, start);
    /* Staging: chunk c's region at p * chunk_first(block, K, c), in RECV
     * itself when that is communicator order (one chunk, e.g. cyclic
     * placement), else in SCRATCH. */
    const int direct = 1 == K && identity;
    const xccl_buf_id_t sb = direct ? XCCL_BUF_RECV : XCCL_BUF_SCRATCH;
    const size_t off_child = direct ? 0 : hier_align((size_t) p * block);
    if (s->scratch_bytes < off_child) {
        s->scratch_bytes = off_child;
    }
    pp.base = off_child;
#define CB(c) chunk_count(block, K, c)
#define AT(c, idx) xccl_ref(sb, (size_t) p * chunk_first(block, K, c) + (size_t) (idx) * CB(c))

    /* Prologue: own block's chunks to their staging places; on uneven
     * nodes the blocks of j+L, j+2L, ... to j. */
    {
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (int c = 0; c < K; c++) {
            hier_copy_add(&cp, AT(c, pos[r]), xccl_ref(XCCL_BUF_SEND, chunk_first(block, K, c)), CB(c));
        }
        hier_copy_flush(&cp);
    }
    if (carrier && j + L < ln) {
        xccl_sched_step(s);
        for (int i = j + L; i < ln; i += L) {
            for (int c = 0; c < K; c++) {
                xccl_sched_recv(s, members[i], AT(c, pos[members[i]]), CB(c));
            }
        }
    } else if (!carrier) {
        xccl_sched_step(s);
        for (int c = 0; c < K; c++) {
            xccl_sched_send(s, members[g], xccl_ref(XCCL_BUF_SEND, chunk_first(block, K, c)), CB(c));
        }
    }
    if (carrier && N > 1) {
        nr = xccl_layout_rail(l, j, rail);
    }
    const xccl_ref_t none = xccl_ref(XCCL_BUF_SCRATCH, 0);    /* placed by pipe_zip */
    for (int t = 0; t < K + 1; t++) {
        /* Inter lane: chunk t of group g between nodes, on rail g. */
        if (carrier && N > 1 && t < K) {
            for (int n = 0; n < N; n++) {
                bytes[n] = (start[g * N + n + 1] - start[g * N + n]) * CB(t);
                displs[n] = (start[g * N + n] - start[g * N]) * CB(t);
            }
            xccl_sched_t *c = pipe_kid(&pp, rail, nr);
            if (NULL == c || pipe_add(&pp, inter(c, bytes, displs, 1), PIPE_INTER, rail,
                                      hier_map(AT(t, start[g * N + node]), AT(t, start[g * N]), none)) < 0) {
                goto out;
            }
        }
        /* Intra lane: chunk t-1's groups inside the node, then to
         * communicator order (a child of copies only, after the gather). */
        const int c1 = t - 1;
        if (c1 >= 0 && ln > 1) {
            for (int i = 0; i < ln; i++) {
                bytes[i] = i < L ? (start[(i + 1) * N] - start[i * N]) * CB(c1) : 0;
                displs[i] = i < L ? start[i * N] * CB(c1) : 0;
            }
            xccl_sched_t *c = pipe_kid(&pp, members, ln);
            if (NULL == c || pipe_add(&pp, intra(c, bytes, displs, 1), PIPE_INTRA, members,
                                      hier_map(AT(c1, start[g * N]), AT(c1, 0), none)) < 0) {
                goto out;
            }
        }
        if (c1 >= 0 && !direct) {
            xccl_sched_t *c = pipe_kid(&pp, members, ln);
            if (NULL == c) {
                goto out;
            }
            hier_copier_t cp = { c, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
            for (int d = 0; d < p; d++) {
                hier_copy_add(&cp, xccl_ref(XCCL_BUF_RECV, (size_t) d * block + chunk_first(block, K, c1)),
                              xccl_ref(XCCL_BUF_SEND, pos[d] * CB(c1)), CB(c1));
            }
            hier_copy_flush(&cp);
            if (pipe_add(&pp, xccl_sched_finalize(c), PIPE_INTRA, members,
                         hier_map(AT(c1, 0), xccl_ref(XCCL_BUF_RECV, 0), none)) < 0) {
                goto out;
            }
        }
        pipe_next_slot(&pp);
    }
#undef AT
#undef CB
    rc = 0;
out:
    rc = pipe_end(&pp, rc);
    free(pos);
    free(start);
    free(bytes);
    free(displs);
    free(rail);
    return rc;
}
