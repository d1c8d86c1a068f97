/*
 * Two-level allgatherv, the shape of the two-level allgather
 * (hier_allgather.c) with a size per rank.  With L = min ppn, rank d
 * belongs to group (local rank of d) mod L, carried by local rank
 * j = group of each node:
 *   0. on uneven nodes, local ranks j+L, j+2L, ... hand their block to j;
 *   1. allgatherv on rail j of each node's group-j blocks;
 *   2. intra-node allgatherv of the groups;
 *   3. blocks to their places in RECV, unless already there.
 * Between nodes a rank sends its group's blocks of its node once per
 * other node's carrier instead of every block of every rank.  The
 * staging order is group, node, local rank, the blocks packed.  Where
 * the displacements place the blocks packed in that order (block
 * placement with the usual displacements, or cyclic placement with the
 * group order's), RECV itself is the staging area and nothing is copied
 * after the stages; else SCRATCH is, and step 3 copies each block out,
 * so that the bytes between blocks are never written.
 */
#include "hier_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

int xccl_build_hier_allgatherv(xccl_sched_t *s, const xccl_layout_t *l, const size_t *rbytes,
                               const size_t *rdispls, int in_place, xccl_allgatherv_build_fn inter,
                               xccl_allgatherv_build_fn intra)
{
    if (NULL == l || l->size != s->size || NULL == rbytes || NULL == rdispls || NULL == inter || NULL == intra) {
        return -1;
    }
    const int p = s->size, r = s->rank, N = l->nnodes, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node), g = j % L, carrier = j < L;
    const int *members = xccl_layout_node_members(l, node);
    size_t *pos = malloc((size_t) p * sizeof(size_t));        /* staging index of each rank */
    size_t *start = malloc(((size_t) L * (size_t) N + 1) * sizeof(size_t));   /* of (group, node) */
    size_t *order = calloc((size_t) p, sizeof(size_t));       /* rank at each staging index */
    size_t *at = malloc(((size_t) p + 1) * sizeof(size_t));   /* staging offset of each index */
    size_t *bytes = malloc((size_t) (ln > N ? ln : N) * sizeof(size_t));
    size_t *displs = malloc((size_t) (ln > N ? ln : N) * sizeof(size_t));
    int *rail = malloc((size_t) N * sizeof(int));
    xccl_sched_t c;
    xccl_buf_map_t map;
    int rc = -1;

    if (NULL == pos || NULL == start || NULL == order || NULL == at || NULL == bytes || NULL == displs ||
        NULL == rail) {
        goto out;
    }
    s->algo = "hier";
    hier_rail_order(l, L, pos, start);
    for (int d = 0; d < p; d++) {
        order[pos[d]] = (size_t) d;
    }
    /* Packed offsets in staging order, from the first block's place in
     * RECV: in RECV itself when every block is where they put it. */
    int in_recv = 1, k0 = 0;
    while (k0 < p - 1 && 0 == rbytes[order[k0]]) {
        k0++;                              /* an empty block has no place */
    }
    at[0] = rdispls[order[k0]];
    for (int k = 0; k < p; k++) {
        in_recv &= 0 == rbytes[order[k]] || rdispls[order[k]] == at[k];
        at[k + 1] = at[k] + rbytes[order[k]];
    }
    if (!in_recv) {
        for (int k = p; k >= 0; k--) {
            at[k] -= at[0];
        }
    }
    const size_t total = at[p] - at[0];
    const xccl_buf_id_t stage = in_recv ? XCCL_BUF_RECV : XCCL_BUF_SCRATCH;
#define AT(idx) xccl_ref(stage, at[idx])
    if (!in_recv && s->scratch_bytes < hier_align(total)) {
        s->scratch_bytes = hier_align(total);
    }
    const xccl_ref_t child_scratch = xccl_ref(XCCL_BUF_SCRATCH, in_recv ? 0 : hier_align(total));
    const xccl_ref_t mine = in_place ? xccl_ref(XCCL_BUF_RECV, rdispls[r]) : xccl_ref(XCCL_BUF_SEND, 0);

    /* 0. Own block to its staging place; the blocks of j+L, j+2L, ... to j. */
    hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
    hier_copy_add(&cp, AT(pos[r]), mine, rbytes[r]);
    hier_copy_flush(&cp);
    if (carrier && j + L < ln) {
        xccl_sched_step(s);
        for (int i = j + L; i < ln; i += L) {
            xccl_sched_recv(s, members[i], AT(pos[members[i]]), rbytes[members[i]]);
        }
    } else if (!carrier) {
        xccl_sched_step(s);
        xccl_sched_send(s, members[g], mine, rbytes[r]);
    }

    /* 1. Group g between nodes, on rail g. */
    if (carrier && N > 1) {
        const int nr = xccl_layout_rail(l, j, rail);
        const size_t first = start[g * N];
        for (int n = 0; n < N; n++) {
            bytes[n] = at[start[g * N + n + 1]] - at[start[g * N + n]];
            displs[n] = at[start[g * N + n]] - at[first];
        }
        map = hier_map(AT(start[g * N + node]), AT(first), child_scratch);
        if (hier_child_init(s, &c, rail, nr) < 0 ||
            hier_child_done(s, &c, rail, &map, inter(&c, bytes, displs, 1)) < 0) {
            goto out;
        }
    }

    /* 2. The groups inside the node. */
    if (ln > 1) {
        for (int i = 0; i < ln; i++) {
            bytes[i] = i < L ? at[start[(i + 1) * N]] - at[start[i * N]] : 0;
            displs[i] = i < L ? at[start[i * N]] - at[0] : 0;
        }
        map = hier_map(AT(start[g * N]), AT(0), child_scratch);
        if (hier_child_init(s, &c, members, ln) < 0 ||
            hier_child_done(s, &c, members, &map, intra(&c, bytes, displs, 1)) < 0) {
            goto out;
        }
    }

    /* 3. Staging order to the blocks' places. */
    if (!in_recv) {
        for (int d = 0; d < p; d++) {
            hier_copy_add(&cp, xccl_ref(XCCL_BUF_RECV, rdispls[d]), AT(pos[d]), rbytes[d]);
        }
        hier_copy_flush(&cp);
    }
#undef AT
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    free(pos);
    free(start);
    free(order);
    free(at);
    free(bytes);
    free(displs);
    free(rail);
    return rc;
}
