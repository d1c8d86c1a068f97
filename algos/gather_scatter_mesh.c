/*
 * Gather(v) and scatter(v) by peer access, as the CUDA IPC forms do: the
 * root does every copy, between its own buffer and the other ranks'.
 *   gather:  the root copies every rank's SEND into its block of its RECV
 *            (only the root knows every block's size and place, in
 *            gatherv); in place the root's block is already in its RECV.
 *   scatter: the root writes each rank's block from its SEND into that
 *            rank's RECV, rather than each rank reading its block: in
 *            scatterv only the root knows where a block lies in its SEND;
 *            in place the root's block stays in its SEND.
 * Either way:
 *   others with a block: flag 1 (SEND there, or RECV may be written) ->
 *           wait for the root's flag 2 (it is done with their buffer);
 *   root:   wait for flag 1 of every rank with a block -> the copies ->
 *           flag 2.
 * A rank without a block (the v forms) has nothing to do: none of its
 * buffers is touched, and the root knows not to wait for it.  The same
 * schedule is the "mesh" and the "leader" form (the root does all the
 * work either way, in one context: on one GPU no context switches).
 *   cost: 2 flags; the root copies (p-1)/p of its RECV (gather) or SEND
 *   (scatter), the others nothing.
 */
#include "mesh_util.h"
#include "xccl_build.h"

/* bytes, displs: the v form's; NULL: block bytes at q * block.  scatter:
 * block q moves from the root's SEND to rank q's RECV, else from rank q's
 * SEND to the root's RECV. */
static int by_root(xccl_sched_t *s, size_t block, const size_t *bytes, const size_t *displs, int root,
                   int in_place, const char *name, int scatter)
{
    const int p = s->size, r = s->rank;

    s->algo = name;
    if (r != root) {
        if ((bytes ? bytes[r] : block) > 0) {
            mesh_lend(s, root);
        }
        return xccl_sched_finalize(s);
    }
    int lenders = 0;
    for (int k = 1; k < p; k++) {
        const int q = mod(r + k, p);
        if ((bytes ? bytes[q] : block) > 0) {
            xccl_sched_wait(s, q, 1);
            lenders++;
        }
    }
    for (int k = 0; k < p; k++) {
        const int q = mod(r + k, p);
        const size_t len = bytes ? bytes[q] : block, at = bytes ? displs[q] : (size_t) q * block;
        if (q == r && in_place) {
            continue;
        }
        const xccl_ref_t mine = xccl_ref(scatter ? XCCL_BUF_SEND : XCCL_BUF_RECV, at);
        const xccl_ref_t its = q == r ? xccl_ref(scatter ? XCCL_BUF_RECV : XCCL_BUF_SEND, 0)
                                      : xccl_ref_peer(q, scatter ? XCCL_BUF_RECV : XCCL_BUF_SEND, 0);
        if (scatter) {
            xccl_sched_copy(s, its, mine, len);
        } else {
            xccl_sched_copy(s, mine, its, len);
        }
    }
    if (lenders > 0) {
        xccl_sched_post(s, 2);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_gather_mesh(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return by_root(s, block, NULL, NULL, root, in_place, "mesh", 0);
}

int xccl_build_gather_leader(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return by_root(s, block, NULL, NULL, root, in_place, "leader", 0);
}

int xccl_build_scatter_mesh(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return by_root(s, block, NULL, NULL, root, in_place, "mesh", 1);
}

int xccl_build_scatter_leader(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return by_root(s, block, NULL, NULL, root, in_place, "leader", 1);
}

int xccl_build_gatherv_mesh(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                            int in_place)
{
    return by_root(s, 0, bytes, displs, root, in_place, "mesh", 0);
}

int xccl_build_gatherv_leader(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                              int in_place)
{
    return by_root(s, 0, bytes, displs, root, in_place, "leader", 0);
}

int xccl_build_scatterv_mesh(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                             int in_place)
{
    return by_root(s, 0, bytes, displs, root, in_place, "mesh", 1);
}

int xccl_build_scatterv_leader(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                               int in_place)
{
    return by_root(s, 0, bytes, displs, root, in_place, "leader", 1);
}
