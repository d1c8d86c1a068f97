/*
 * Bcast by peer access ("mesh"): every rank copies the root's RECV, as the
 * CUDA IPC bcast does.  Only the root is waited for and waits:
 *   root:   flag 1 (its data is there), then waits for every rank's flag 2
 *           (nobody reads its buffer any more) before it leaves;
 *   others: wait for the root's flag 1, copy, flag 2.
 * The other ranks do not wait for each other: none reads their buffers.
 */
#include "mesh_util.h"
#include "xccl_build.h"

int xccl_build_bcast_mesh(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, r = s->rank;

    s->algo = "mesh";
    if (0 == bytes || 1 == p) {
        return xccl_sched_finalize(s);
    }
    if (r == root) {
        xccl_sched_post(s, 1);
        xccl_sched_step(s);
        for (int k = 1; k < p; k++) {
            xccl_sched_wait(s, mod(r + k, p), 2);
        }
    } else {
        xccl_sched_wait(s, root, 1);
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref_peer(root, XCCL_BUF_RECV, 0), bytes);
        xccl_sched_post(s, 2);
    }
    return xccl_sched_finalize(s);
}
