/*
 * Pipelined two-level reduce_scatter ("pipeline"): hier's stages
 * (algos/hier_reduce_scatter.c: intra-node reduce-scatter by group,
 * reduce-scatter on the rails, on uneven nodes the blocks passed on) on K
 * chunks, overlapped (algos/pipe_util.h).  Chunk c of the call is chunk c
 * of every destination block (blocks cut alike: chunk_first(counts[d], K,
 * c)).  The input is first packed, chunk by chunk, in hier's order (group,
 * node, local rank), so that every stage reads one contiguous region and
 * an in-place call may write RECV at once.  In slot t the intra-node lane
 * reduce-scatters chunk t and then passes chunk t-2 on (uneven nodes
 * only) while the inter-node lane reduce-scatters chunk t-1 on the rails.
 * Reductions as hier's: one place, one order, the same bits everywhere.
 */
#include "pipe_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

int xccl_build_pipe_reduce_scatter(xccl_sched_t *s, const xccl_layout_t *l, const size_t *counts, int in_place,
                                   size_t chunk, int max_chunks, xccl_reduce_scatter_build_fn intra,
                                   xccl_reduce_scatter_build_fn inter)
{
    if (NULL == l || l->size != s->size || NULL == intra || NULL == inter || max_chunks < 1) {
        return -1;
    }
    const int p = s->size, r = s->rank, N = l->nnodes, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node), g = j % L;
    const int carrier = j < L, single = carrier && j + L >= ln;
    const int *members = xccl_layout_node_members(l, node);
    const size_t es = s->elem_size;
    size_t total = 0;
    for (int d = 0; d < p; d++) {
        total += counts[d];
    }
    const int K = pipe_chunks(total, es, chunk, max_chunks);
    int *order = malloc((size_t) p * sizeof(int)), *rail = malloc((size_t) N * sizeof(int));
    size_t *first = malloc(((size_t) p + 1) * sizeof(size_t));
    size_t *seg = calloc((size_t) K * (size_t) N, sizeof(size_t));   /* (chunk, node) of my group */
    size_t *gtotal = calloc((size_t) K * (size_t) L, sizeof(size_t));             /* (chunk, group) */
    size_t *ctotal = calloc((size_t) K + 1, sizeof(size_t));                      /* chunk starts, packed */
    size_t *cc = malloc(((size_t) (ln > N ? ln : N)) * sizeof(size_t));
    size_t *boff = calloc(2 * ((size_t) K + 1), sizeof(size_t)), *coff = boff + K + 1;   /* B, C by chunk */
    pipe_t pp;
    int rc = -1, nr = 0;

    if (pipe_init(&pp, s, 3 * (size_t) K) < 0 || NULL == order || NULL == rail || NULL == first || NULL == seg ||
        NULL == gtotal || NULL == ctotal || NULL == cc || NULL == boff) {
        goto out;
    }
    s->algo = "pipeline";
    first[0] = 0;
    for (int d = 0; d < p; d++) {
        first[d + 1] = first[d] + counts[d];
    }
#define SUB(d, c) chunk_count(counts[d], K, c)
    int k = 0, identity = 1;
    for (int gg = 0; gg < L; gg++) {
        for (int n = 0; n < N; n++) {
            for (int i = gg; i < xccl_layout_node_size(l, n); i += L) {
                const int d = xccl_layout_rank_at(l, n, i);
                identity &= d == k;
                order[k++] = d;
                for (int c = 0; c < K; c++) {
                    seg[(size_t) c * N + n] += gg == g ? SUB(d, c) : 0;
                    gtotal[(size_t) c * L + gg] += SUB(d, c);
                }
            }
        }
    }
    for (int c = 0; c < K; c++) {
        ctotal[c + 1] = ctotal[c];
        for (int gg = 0; gg < L; gg++) {
            ctotal[c + 1] += gtotal[(size_t) c * L + gg];
        }
    }
    /* Scratch: A the packed input, B the node's partial sums of my group
     * (chunk by chunk), C my group's blocks of my node (uneven nodes),
     * then the lanes' children. */
    const int packed = !(1 == K && identity);
    for (int c = 0; c < K; c++) {
        boff[c + 1] = boff[c] + (carrier ? gtotal[(size_t) c * L + g] * es : 0);
        coff[c + 1] = coff[c] + (carrier && !single ? seg[(size_t) c * N + node] * es : 0);
    }
    const size_t off_b = packed ? hier_align(total * es) : 0, off_c = off_b + hier_align(boff[K]);
    const size_t off_child = off_c + hier_align(coff[K]);
    if (s->scratch_bytes < off_child) {
        s->scratch_bytes = off_child;
    }
    pp.base = off_child;
    const xccl_ref_t in = xccl_ref(in_place ? XCCL_BUF_RECV : XCCL_BUF_SEND, 0);
    if (packed) {
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        size_t at = 0;
        for (int c = 0; c < K; c++) {
            for (k = 0; k < p; k++) {
                const int d = order[k];
                hier_copy_add(&cp, xccl_ref(XCCL_BUF_SCRATCH, at * es),
                              xccl_ref((xccl_buf_id_t) in.buf, (first[d] + chunk_first(counts[d], K, c)) * es),
                              SUB(d, c) * es);
                at += SUB(d, c);
            }
        }
        hier_copy_flush(&cp);
    }
    if (carrier && N > 1) {
        nr = xccl_layout_rail(l, j, rail);
    }
    const xccl_ref_t none = xccl_ref(XCCL_BUF_SCRATCH, 0);    /* placed by pipe_zip */
    for (int t = 0; t < K + 2; t++) {
        /* Intra lane: reduce-scatter chunk t by group into B. */
        if (t < K) {
            for (int i = 0; i < ln; i++) {
                cc[i] = i < L ? gtotal[(size_t) t * L + i] : 0;
            }
            xccl_sched_t *c = pipe_kid(&pp, members, ln);
            const xccl_ref_t src = packed ? xccl_ref(XCCL_BUF_SCRATCH, ctotal[t] * es) : in;
            if (NULL == c ||
                pipe_add(&pp, intra(c, cc, 0), PIPE_INTRA, members,
                         hier_map(src, xccl_ref(XCCL_BUF_SCRATCH, off_b + boff[t]), none)) < 0) {
                goto out;
            }
        }
        /* Inter lane: chunk t-1's share of my group reduce-scattered on the
         * rail: my own blocks straight to RECV, or my node's to C. */
        const int c1 = t - 1;
        if (carrier && N > 1 && c1 >= 0 && c1 < K) {
            for (int n = 0; n < N; n++) {
                cc[n] = seg[(size_t) c1 * N + n];
            }
            const xccl_ref_t out = single ? xccl_ref(XCCL_BUF_RECV, chunk_first(counts[r], K, c1) * es)
                                          : xccl_ref(XCCL_BUF_SCRATCH, off_c + coff[c1]);
            xccl_sched_t *c = pipe_kid(&pp, rail, nr);
            if (NULL == c ||
                pipe_add(&pp, inter(c, cc, 0), PIPE_INTER, rail,
                         hier_map(xccl_ref(XCCL_BUF_SCRATCH, off_b + boff[c1]), out, none)) < 0) {
                goto out;
            }
        }
        /* Intra lane: chunk t-2's blocks to their ranks, from C (or, on one
         * node, from B) where a carrier holds more than its own. */
        const int c2 = t - 2;
        if (c2 >= 0 && (1 == N || !single)) {
            const size_t mine = chunk_first(counts[r], K, c2) * es;
            xccl_sched_t *c = pipe_kid(&pp, members, ln);
            if (NULL == c) {
                goto out;
            }
            xccl_sched_step(c);
            if (carrier) {
                size_t at = SUB(r, c2) * es;
                for (int i = j + L; i < ln; i += L) {
                    xccl_sched_send(c, i, xccl_ref(XCCL_BUF_SEND, at), SUB(members[i], c2) * es);
                    at += SUB(members[i], c2) * es;
                }
                xccl_sched_copy(c, xccl_ref(XCCL_BUF_RECV, mine), xccl_ref(XCCL_BUF_SEND, 0), SUB(r, c2) * es);
            } else {
                xccl_sched_recv(c, g, xccl_ref(XCCL_BUF_RECV, mine), SUB(r, c2) * es);
            }
            const size_t held = 1 == N ? off_b + boff[c2] : off_c + coff[c2];
            if (pipe_add(&pp, xccl_sched_finalize(c), PIPE_INTRA, members,
                         hier_map(xccl_ref(XCCL_BUF_SCRATCH, held), xccl_ref(XCCL_BUF_RECV, 0), none)) < 0) {
                goto out;
            }
        }
        pipe_next_slot(&pp);
    }
    rc = 0;
out:
#undef SUB
    rc = pipe_end(&pp, rc);
    free(order);
    free(rail);
    free(first);
    free(seg);
    free(gtotal);
    free(ctotal);
    free(cc);
    free(boff);
    return rc;
}
