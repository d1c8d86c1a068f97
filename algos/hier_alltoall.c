/*
 * Two-level alltoall (regular layouts: N nodes of L ranks):
 *   1. intra-node alltoall regrouping by destination local rank: local rank
 *      j gets everything its node sends to rail j (the input is packed by
 *      destination local rank, then node, unless it already is);
 *   2. that data reordered by destination node;
 *   3. alltoall on rail j: one message per node pair carries the L blocks
 *      of every sender of one node for one destination;
 *   4. blocks to communicator order (nothing to do when the ranks of a node
 *      are contiguous: block placement).
 * Between nodes a rank sends N-1 messages of L blocks instead of (N-1) L
 * messages of one block: for small blocks, latency bound.
 */
#include "hier_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

int xccl_build_hier_alltoall(xccl_sched_t *s, const xccl_layout_t *l, size_t block, int in_place,
                             xccl_alltoall_build_fn intra, xccl_alltoall_build_fn inter)
{
    if (NULL == l || l->size != s->size || NULL == inter || NULL == intra) {
        return -1;
    }
    if (!xccl_layout_is_regular(l)) {
        return XCCL_NOT_APPLICABLE;
    }
    const int p = s->size, r = s->rank, N = l->nnodes, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn;
    const int *members = xccl_layout_node_members(l, node);
    int *rail = malloc((size_t) N * sizeof(int));
    xccl_sched_t c;
    xccl_buf_map_t map;
    int rc = -1;

    if (NULL == rail) {
        return -1;
    }
    s->algo = "hier";
    int rail_major = 1, node_major = 1;
    for (int d = 0; d < p; d++) {
        rail_major &= d == l->local_rank[d] * N + l->node_of[d];
        node_major &= d == l->node_of[d] * L + l->local_rank[d];
    }
    const int transpose = N > 1 && L > 1;
    const size_t total = (size_t) p * block;
    const xccl_ref_t in = xccl_ref(in_place ? XCCL_BUF_RECV : XCCL_BUF_SEND, 0);
    /* Scratch: A (packed input, later the transposed data), B (stage 1's
     * output), C (stage 3's output unless it goes to RECV), children. */
    size_t at = 0, off_a = 0, off_b, off_t, off_c = 0;
    if (!rail_major || transpose) {
        at += hier_align(total);
    }
    off_b = at;
    at += hier_align(total);
    off_t = transpose ? off_a : off_b;
    if (!node_major) {
        off_c = at;
        at += hier_align(total);
    }
    if (s->scratch_bytes < at) {
        s->scratch_bytes = at;
    }
    const size_t off_child = at;

    /* Pack: A[(j' N + n') block] = input block for rank (n', j'). */
    xccl_ref_t packed = in;
    if (!rail_major) {
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (int jj = 0; jj < L; jj++) {
            for (int n = 0; n < N; n++) {
                int d = xccl_layout_rank_at(l, n, jj);
                hier_copy_add(&cp, xccl_ref(XCCL_BUF_SCRATCH, off_a + ((size_t) jj * N + (size_t) n) * block),
                              xccl_ref((xccl_buf_id_t) in.buf, (size_t) d * block), block);
            }
        }
        hier_copy_flush(&cp);
        packed = xccl_ref(XCCL_BUF_SCRATCH, off_a);
    }

    /* 1. B[(i N + n') block] = from (node, i) to (n', j). */
    if (hier_child_init(s, &c, members, L) < 0) {
        goto out;
    }
    map = hier_map(packed, xccl_ref(XCCL_BUF_SCRATCH, off_b), xccl_ref(XCCL_BUF_SCRATCH, off_child));
    if (hier_child_done(s, &c, members, &map, intra(&c, (size_t) N * block, 0)) < 0) {
        goto out;
    }

    /* 2. T[(n' L + i) block] = B[(i N + n') block]. */
    if (transpose) {
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (int n = 0; n < N; n++) {
            for (int i = 0; i < L; i++) {
                hier_copy_add(&cp, xccl_ref(XCCL_BUF_SCRATCH, off_t + ((size_t) n * L + (size_t) i) * block),
                              xccl_ref(XCCL_BUF_SCRATCH, off_b + ((size_t) i * N + (size_t) n) * block), block);
            }
        }
        hier_copy_flush(&cp);
    }

    /* 3. Alltoall on rail j: C[(n' L + i) block] = from (n', i) to me. */
    const xccl_ref_t out = node_major ? xccl_ref(XCCL_BUF_RECV, 0) : xccl_ref(XCCL_BUF_SCRATCH, off_c);
    int nr = xccl_layout_rail(l, j, rail);
    if (hier_child_init(s, &c, rail, nr) < 0) {
        goto out;
    }
    map = hier_map(xccl_ref(XCCL_BUF_SCRATCH, off_t), out, xccl_ref(XCCL_BUF_SCRATCH, off_child));
    if (hier_child_done(s, &c, rail, &map, inter(&c, (size_t) L * block, 0)) < 0) {
        goto out;
    }

    /* 4. Node order to communicator order. */
    if (!node_major) {
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (int d = 0; d < p; d++) {
            size_t from = ((size_t) l->node_of[d] * L + (size_t) l->local_rank[d]) * block;
            hier_copy_add(&cp, xccl_ref(XCCL_BUF_RECV, (size_t) d * block),
                          xccl_ref(XCCL_BUF_SCRATCH, off_c + from), block);
        }
        hier_copy_flush(&cp);
    }
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    free(rail);
    return rc;
}

/* Every pair's message size in the two alltoallv stages (for stage
 * algorithms that forward blocks): start[g N + n] is the staging index of
 * the first rank of group g on node n. */
typedef struct {
    const xccl_layout_t *l;
    const size_t *start;
    int N, L, g;
    size_t block;
} a2a_sizes_t;

/* Inside a node: every local rank sends carrier q < L its group-q blocks. */
static size_t intra_pair_bytes(const void *ctx, int src, int dst)
{
    const a2a_sizes_t *z = ctx;
    (void) src;
    return dst < z->L ? (z->start[(dst + 1) * z->N] - z->start[dst * z->N]) * z->block : 0;
}

/* On rail g (child rank = node): the blocks of every rank of node src for
 * the ranks of group g on node dst. */
static size_t rail_pair_bytes(const void *ctx, int src, int dst)
{
    const a2a_sizes_t *z = ctx;
    const size_t dn = z->start[z->g * z->N + dst + 1] - z->start[z->g * z->N + dst];
    return (size_t) xccl_layout_node_size(z->l, src) * dn * z->block;
}

/*
 * Any layout.  With L = min ppn, destination d belongs to group g(d) =
 * (local rank of d) mod L, carried on each node n by local rank g; D(g, n)
 * is the ranks of group g on node n, in local order (the carrier first).
 * Staging ("packed") order of destinations: group, node, local rank.
 *   1. intra-node alltoallv: every rank sends the carrier of group g its
 *      blocks for group g; the carrier holds B[source i][packed dest];
 *   2. B reordered to T[node n'][source i][dest in D(g, n')];
 *   3. alltoallv on rail g: node n' gets T[n'], one message per node pair;
 *      C[source rank, in node order][dest in D(g, n)];
 *   4. the carrier puts its own blocks in place, packs those of the other
 *      ranks of D(g, n) in source order and sends them (uneven nodes).
 */
int xccl_build_hier_alltoall_any(xccl_sched_t *s, const xccl_layout_t *l, size_t block, int in_place,
                                 xccl_alltoallv_build_fn intra, xccl_alltoallv_build_fn inter)
{
    if (NULL == l || l->size != s->size || NULL == inter || NULL == intra) {
        return -1;
    }
    const int p = s->size, r = s->rank, N = l->nnodes, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node), g = j % L, carrier = j < L;
    const int *members = xccl_layout_node_members(l, node);
    const int mx = ln > N ? ln : N;
    size_t *pos = malloc((size_t) p * sizeof(size_t));        /* packed index of each destination */
    size_t *start = malloc(((size_t) L * (size_t) N + 1) * sizeof(size_t));   /* of (group, node) */
    size_t *v = malloc(4 * (size_t) mx * sizeof(size_t));
    int *rail = malloc((size_t) N * sizeof(int));
    xccl_sched_t c;
    xccl_buf_map_t map;
    int rc = -1;

    if (NULL == pos || NULL == start || NULL == v || NULL == rail) {
        goto out;
    }
    size_t *sb = v, *sd = v + mx, *rb = v + 2 * mx, *rd = v + 3 * mx;
    s->algo = "hier";
    const int identity = hier_rail_order(l, L, pos, start);
#define GSIZE(gg) (start[((gg) + 1) * N] - start[(gg) * N])          /* ranks of group gg */
#define DSIZE(gg, n) (start[(gg) * N + (n) + 1] - start[(gg) * N + (n)])   /* of group gg on node n */
    const size_t mine = carrier ? DSIZE(g, node) : 0;             /* |D(g, node)| */
    const size_t gsz = carrier ? GSIZE(g) : 0;
    /* Scratch: A packed input, B, T, C, E (blocks for the others of D). */
    size_t at = 0;
    const size_t off_a = at;
    at += identity ? 0 : hier_align((size_t) p * block);
    const size_t off_b = at;
    at += hier_align((size_t) ln * gsz * block);
    const size_t off_t = at;
    at += hier_align((size_t) ln * gsz * block);
    const size_t off_c = at;
    at += hier_align((size_t) p * mine * block);
    const size_t off_e = at;
    at += hier_align((size_t) p * (mine > 0 ? mine - 1 : 0) * block);
    const xccl_ref_t child_scratch = xccl_ref(XCCL_BUF_SCRATCH, at);
    if (s->scratch_bytes < at) {
        s->scratch_bytes = at;
    }
    const xccl_ref_t in = xccl_ref(in_place ? XCCL_BUF_RECV : XCCL_BUF_SEND, 0);

    /* Pack the input by group, node, local rank. */
    if (!identity) {
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (int d = 0; d < p; d++) {
            hier_copy_add(&cp, xccl_ref(XCCL_BUF_SCRATCH, off_a + pos[d] * block),
                          xccl_ref((xccl_buf_id_t) in.buf, (size_t) d * block), block);
        }
        hier_copy_flush(&cp);
    }
    const xccl_ref_t packed = identity ? in : xccl_ref(XCCL_BUF_SCRATCH, off_a);

    /* 1. Group q's blocks to local rank q < L. */
    for (int i = 0; i < ln; i++) {
        sb[i] = i < L ? GSIZE(i) * block : 0;
        sd[i] = i < L ? start[i * N] * block : 0;
        rb[i] = gsz * block;
        rd[i] = (size_t) i * gsz * block;
    }
    a2a_sizes_t sizes = { l, start, N, L, g, block };
    map = hier_map(packed, xccl_ref(XCCL_BUF_SCRATCH, off_b), child_scratch);
    if (hier_child_init(s, &c, members, ln) < 0 ||
        hier_child_done(s, &c, members, &map, intra(&c, sb, sd, rb, rd, intra_pair_bytes, &sizes)) < 0) {
        goto out;
    }
    if (carrier) {
        /* 2. T[n'][i][t] = B[i][start(g, n') - start(g, 0) + t]. */
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (int n = 0; n < N; n++) {
            const size_t dn = DSIZE(g, n), noff = start[g * N + n] - start[g * N];
            for (int i = 0; i < ln; i++) {
                hier_copy_add(&cp, xccl_ref(XCCL_BUF_SCRATCH, off_t + ((size_t) ln * noff + (size_t) i * dn) * block),
                              xccl_ref(XCCL_BUF_SCRATCH, off_b + ((size_t) i * gsz + noff) * block), dn * block);
            }
        }
        hier_copy_flush(&cp);

        /* 3. Alltoallv on rail g. */
        int nr = xccl_layout_rail(l, j, rail);
        for (int n = 0; n < N; n++) {
            sb[n] = (size_t) ln * DSIZE(g, n) * block;
            sd[n] = (size_t) ln * (start[g * N + n] - start[g * N]) * block;
            rb[n] = (size_t) xccl_layout_node_size(l, n) * mine * block;
            rd[n] = (size_t) l->node_first[n] * mine * block;
        }
        map = hier_map(xccl_ref(XCCL_BUF_SCRATCH, off_t), xccl_ref(XCCL_BUF_SCRATCH, off_c), child_scratch);
        if (hier_child_init(s, &c, rail, nr) < 0 ||
            hier_child_done(s, &c, rail, &map, inter(&c, sb, sd, rb, rd, rail_pair_bytes, &sizes)) < 0) {
            goto out;
        }

        /* 4. C[(node_first(n') + i') |D| + t] is from (n', i') to D[t]. */
        hier_copier_t cq = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (size_t t = 0; t < mine; t++) {
            for (int src = 0; src < p; src++) {
                size_t from = ((size_t) l->node_first[l->node_of[src]] + (size_t) l->local_rank[src]) * mine + t;
                xccl_ref_t to = 0 == t ? xccl_ref(XCCL_BUF_RECV, (size_t) src * block)
                                       : xccl_ref(XCCL_BUF_SCRATCH, off_e + ((t - 1) * (size_t) p + (size_t) src) * block);
                hier_copy_add(&cq, to, xccl_ref(XCCL_BUF_SCRATCH, off_c + from * block), block);
            }
        }
        hier_copy_flush(&cq);
        if (mine > 1) {
            xccl_sched_step(s);
            for (size_t t = 1; t < mine; t++) {
                xccl_sched_send(s, members[j + (int) t * L],
                                xccl_ref(XCCL_BUF_SCRATCH, off_e + (t - 1) * (size_t) p * block), (size_t) p * block);
            }
        }
    } else {
        xccl_sched_step(s);
        xccl_sched_recv(s, members[g], xccl_ref(XCCL_BUF_RECV, 0), (size_t) p * block);
    }
#undef GSIZE
#undef DSIZE
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    free(pos);
    free(start);
    free(v);
    free(rail);
    return rc;
}
