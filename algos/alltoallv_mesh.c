/*
 * Alltoallv by peer access, as the CUDA IPC alltoallv does ("mesh"; it
 * has no "leader" form): every rank copies its block from each peer's
 * SEND straight into its RECV at rdispls[q]:
 *   barrier 1 (every SEND is there) -> the copies -> barrier 2 (nobody
 *   leaves while a peer still reads its SEND).
 * Only rank q knows where in its SEND its block for this rank lies (its
 * sdispls): the schedule names rank q's SEND at offset 0 for that block,
 * and whoever provides the peer access resolves rank q's SEND, for this
 * rank, to where q's block for it begins (the CUDA IPC provider reads q's
 * displacement for this rank from q's slot; xccl_build.h).  Each block's
 * size is known on both sides (rbytes[q] here is sbytes[r] there), so a
 * rank reads exactly its rbytes[q] and never a gap.
 * Every rank waits in both barriers, those without a block too: a rank
 * knows only its own sizes, so nothing that every rank must do alike
 * rests on them.  Not in place: there a peer's block for this rank is in
 * the peer's RECV, which the peer overwrites with the blocks it receives;
 * the provider stages in-place calls (as alltoall's).
 *   cost: 2 barriers; each rank copies what it receives.
 */
#include "mesh_util.h"
#include "xccl_build.h"

int xccl_build_alltoallv_mesh(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                              const size_t *rbytes, const size_t *rdispls)
{
    const int p = s->size, r = s->rank;

    s->algo = "mesh";
    (void) sbytes;                     /* a block's size is rbytes[q] here, sbytes[r] at q */
    mesh_barrier(s, 1);
    /* Own block first, then the peers from r+1 on: not every rank reads
     * rank 0 first. */
    for (int k = 0; k < p; k++) {
        const int q = mod(r + k, p);
        if (rbytes[q] > 0) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, rdispls[q]),
                            q == r ? xccl_ref(XCCL_BUF_SEND, sdispls[r]) : xccl_ref_peer(q, XCCL_BUF_SEND, 0),
                            rbytes[q]);
        }
    }
    mesh_barrier(s, 2);
    return xccl_sched_finalize(s);
}
