/*
 * Gather and gatherv by peer access, as the CUDA IPC gathers do: the root
 * copies every rank's SEND into its block of its RECV (only the root
 * knows every block's size and place, in gatherv):
 *   others with a block: flag 1 (input there) -> wait for the root's
 *           flag 2 (it is done reading);
 *   root:   wait for flag 1 of every rank with a block -> the copies ->
 *           flag 2.
 * A rank without a block (gatherv) has nothing to do: none of its
 * buffers is read, and the root knows not to wait for it.  The same
 * schedule is the "mesh" and the "leader" form (the root does all the
 * work either way, in one context).  In place the root's block is
 * already in its RECV.
 *   cost: 2 flags; the root copies (p-1)/p of RECV, the others nothing.
 */
#include "mesh_util.h"
#include "xccl_build.h"

/* bytes, displs: the v form's; NULL: block bytes at q * block. */
static int gather_by_root(xccl_sched_t *s, size_t block, const size_t *bytes, const size_t *displs,
                          int root, int in_place, const char *name)
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
        if (q == r && !in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, at), xccl_ref(XCCL_BUF_SEND, 0), len);
        } else if (q != r) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, at), xccl_ref_peer(q, XCCL_BUF_SEND, 0), len);
        }
    }
    if (lenders > 0) {
        xccl_sched_post(s, 2);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_gather_mesh(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return gather_by_root(s, block, NULL, NULL, root, in_place, "mesh");
}

int xccl_build_gather_leader(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return gather_by_root(s, block, NULL, NULL, root, in_place, "leader");
}

int xccl_build_gatherv_mesh(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                            int in_place)
{
    return gather_by_root(s, 0, bytes, displs, root, in_place, "mesh");
}

int xccl_build_gatherv_leader(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                              int in_place)
{
    return gather_by_root(s, 0, bytes, displs, root, in_place, "leader");
}
