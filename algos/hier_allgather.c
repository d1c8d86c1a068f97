/*
 * Two-level allgather, any layout: allgatherv on the rails, then inside
 * each node.  Between nodes a rank sends (N-1) blocks instead of (p-1).
 *
 * There is no separate builder for regular layouts: on them this one does
 * exactly its work (staging in rail order, in RECV itself when that is
 * communicator order, e.g. cyclic placement; one reordering copy
 * otherwise), and the rail stage may be any allgatherv (ring, or Bruck for
 * many nodes).
 */
#include "hier_util.h"
#include "xccl_build.h"
#include "xccl_hier.h"

#include <stdlib.h>

/*
 * Any layout, with allgatherv stages.  With L = min ppn, rank d belongs to
 * group (local rank of d) mod L, carried by local rank j = group of each
 * node:
 *   0. on uneven nodes, local ranks j+L, j+2L, ... hand their block to j;
 *   1. allgatherv on rail j of each node's group-j blocks;
 *   2. intra-node allgatherv of the groups;
 *   3. blocks to communicator order, unless already in it.
 * The staging order is group, node, local rank.
 */
int xccl_build_hier_allgather_any(xccl_sched_t *s, const xccl_layout_t *l, size_t block,
                                  xccl_allgatherv_build_fn inter, xccl_allgatherv_build_fn intra)
{
    if (NULL == l || l->size != s->size || NULL == inter || NULL == intra) {
        return -1;
    }
    const int p = s->size, r = s->rank, N = l->nnodes, node = l->node_of[r], j = l->local_rank[r];
    const int L = l->min_ppn, ln = xccl_layout_node_size(l, node), g = j % L, carrier = j < L;
    const int *members = xccl_layout_node_members(l, node);
    size_t *pos = malloc((size_t) p * sizeof(size_t));        /* staging index of each rank */
    size_t *start = malloc(((size_t) L * (size_t) N + 1) * sizeof(size_t));   /* of (group, node) */
    size_t *bytes = malloc((size_t) (ln > N ? ln : N) * sizeof(size_t));
    size_t *displs = malloc((size_t) (ln > N ? ln : N) * sizeof(size_t));
    int *rail = malloc((size_t) N * sizeof(int));
    xccl_sched_t c;
    xccl_buf_map_t map;
    int rc = -1;

    if (NULL == pos || NULL == start || NULL == bytes || NULL == displs || NULL == rail) {
        goto out;
    }
    s->algo = "hier";
    const int identity = hier_rail_order(l, L, pos, start);
    const xccl_ref_t stage = identity ? xccl_ref(XCCL_BUF_RECV, 0) : xccl_ref(XCCL_BUF_SCRATCH, 0);
#define AT(idx) xccl_ref((xccl_buf_id_t) stage.buf, stage.off + (size_t) (idx) * block)
    if (!identity && s->scratch_bytes < hier_align((size_t) p * block)) {
        s->scratch_bytes = hier_align((size_t) p * block);
    }
    const xccl_ref_t child_scratch = xccl_ref(XCCL_BUF_SCRATCH, identity ? 0 : hier_align((size_t) p * block));

    /* 0. Own block to its staging place; the blocks of j+L, j+2L, ... to j. */
    xccl_sched_copy(s, AT(pos[r]), xccl_ref(XCCL_BUF_SEND, 0), block);
    if (carrier && j + L < ln) {
        xccl_sched_step(s);
        for (int i = j + L; i < ln; i += L) {
            xccl_sched_recv(s, members[i], AT(pos[members[i]]), block);
        }
    } else if (!carrier) {
        xccl_sched_step(s);
        xccl_sched_send(s, members[g], xccl_ref(XCCL_BUF_SEND, 0), block);
    }

    /* 1. Group g between nodes, on rail g. */
    if (carrier && N > 1) {
        int nr = xccl_layout_rail(l, j, rail);
        for (int n = 0; n < N; n++) {
            bytes[n] = (start[g * N + n + 1] - start[g * N + n]) * block;
            displs[n] = (start[g * N + n] - start[g * N]) * block;
        }
        map = hier_map(AT(start[g * N + node]), AT(start[g * N]), child_scratch);
        if (hier_child_init(s, &c, rail, nr) < 0 ||
            hier_child_done(s, &c, rail, &map, inter(&c, bytes, displs, 1)) < 0) {
            goto out;
        }
    }

    /* 2. The groups inside the node. */
    if (ln > 1) {
        for (int i = 0; i < ln; i++) {
            bytes[i] = i < L ? (start[(i + 1) * N] - start[i * N]) * block : 0;
            displs[i] = i < L ? start[i * N] * block : 0;
        }
        map = hier_map(AT(start[g * N]), stage, child_scratch);
        if (hier_child_init(s, &c, members, ln) < 0 ||
            hier_child_done(s, &c, members, &map, intra(&c, bytes, displs, 1)) < 0) {
            goto out;
        }
    }

    /* 3. Staging order to communicator order. */
    if (!identity) {
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (int d = 0; d < p; d++) {
            hier_copy_add(&cp, xccl_ref(XCCL_BUF_RECV, (size_t) d * block), AT(pos[d]), block);
        }
        hier_copy_flush(&cp);
    }
#undef AT
    s->algo = "hier";
    rc = xccl_sched_finalize(s);
out:
    free(pos);
    free(start);
    free(bytes);
    free(displs);
    free(rail);
    return rc;
}
