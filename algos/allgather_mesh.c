/*
 * Allgather by peer access ("mesh"): every rank copies each peer's block
 * straight from the peer's SEND, as the CUDA IPC allgather does.
 *   barrier 1 (every block is in place) -> p copies -> barrier 2 (nobody
 *   leaves while a peer still reads its block).
 * In place SEND is RECV + q * block on every rank q, so the peer's SEND is
 * the block to read either way.
 */
#include "mesh_util.h"
#include "xccl_build.h"

int xccl_build_allgather_mesh(xccl_sched_t *s, size_t block)
{
    const int p = s->size, r = s->rank;

    s->algo = "mesh";
    if (0 == block) {
        return xccl_sched_finalize(s);    /* nothing read: nothing to wait for */
    }
    mesh_barrier(s, 1);
    /* Own block first (a copy onto itself in place: skipped), then peers
     * from r+1 on, so that not every rank reads rank 0 first. */
    for (int k = 0; k < p; k++) {
        const int q = mod(r + k, p);
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) q * block), mesh_ref(s, q, XCCL_BUF_SEND, 0),
                        block);
    }
    mesh_barrier(s, 2);
    return xccl_sched_finalize(s);
}
