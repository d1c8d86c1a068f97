/*
 * Scatter and scatterv by peer access, as the CUDA IPC scatters do: the
 * root writes each rank's block from its SEND into that rank's RECV.  The
 * root writes rather than each rank reading its block: in scatterv only
 * the root knows where a block lies in its SEND, and on one GPU (the
 * "leader" form) one process doing all the copies saves the context
 * switches; so the same schedule is both forms.
 *   others with a block: flag 1 (RECV may be written) -> wait for the
 *           root's flag 2 (its block is written);
 *   root:   wait for flag 1 of every rank with a block -> the copies ->
 *           flag 2.
 * A rank without a block (scatterv) has nothing to do.  In place the
 * root's block stays in its SEND.
 *   cost: 2 flags; the root copies (p-1)/p of SEND, the others nothing.
 */
#include "mesh_util.h"
#include "xccl_build.h"

/* bytes, displs: the v form's; NULL: block bytes at q * block. */
static int scatter_by_root(xccl_sched_t *s, size_t block, const size_t *bytes, const size_t *displs,
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
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, at), len);
        } else if (q != r) {
            xccl_sched_copy(s, xccl_ref_peer(q, XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, at), len);
        }
    }
    if (lenders > 0) {
        xccl_sched_post(s, 2);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_scatter_mesh(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return scatter_by_root(s, block, NULL, NULL, root, in_place, "mesh");
}

int xccl_build_scatter_leader(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return scatter_by_root(s, block, NULL, NULL, root, in_place, "leader");
}

int xccl_build_scatterv_mesh(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                             int in_place)
{
    return scatter_by_root(s, 0, bytes, displs, root, in_place, "mesh");
}

int xccl_build_scatterv_leader(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                               int in_place)
{
    return scatter_by_root(s, 0, bytes, displs, root, in_place, "leader");
}
