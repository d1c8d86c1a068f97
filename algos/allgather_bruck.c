/*
 * Bruck allgather: ceil(lg p) steps for any p.  Working buffer SCRATCH
 * (p blocks), where block i holds the block of rank r+i (mod p).  At the
 * step of distance d = 2^k a rank has blocks [0, d); it sends the first
 * min(d, p-d) of them to r-d and receives as many from r+d into [d, ...).
 * A final local rotation puts block i at RECV + ((r+i) mod p) * block.
 *
 * Cost (n = p * block bytes):
 *   ceil(lg p) a + ((p-1)/p) n b, plus n of local copies (rotation) and
 *   one block copied in.
 *
 * In place the own block is read (copied into SCRATCH) before anything is
 * written to RECV; the rotation's two copies read SCRATCH only and write
 * disjoint ranges of RECV, so they cannot overwrite each other's source.
 */
#include "algo_util.h"
#include "xccl_build.h"


int xccl_build_allgather_bruck(xccl_sched_t *s, size_t block)
{
    const int p = s->size, r = s->rank;

    s->algo = "bruck";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), block);
        return xccl_sched_finalize(s);
    }
    s->scratch_bytes = (size_t) p * block;
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_SEND, 0), block);
    for (int d = 1; d < p; d *= 2) {
        const size_t n = (size_t) (d < p - d ? d : p - d) * block;
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r + d, p), xccl_ref(XCCL_BUF_SCRATCH, (size_t) d * block), n);
        xccl_sched_send(s, mod(r - d, p), xccl_ref(XCCL_BUF_SCRATCH, 0), n);
    }
    /* Blocks [0, p-r) belong to ranks r..p-1, blocks [p-r, p) to 0..r-1;
     * these run after the last step's transfers. */
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block), xccl_ref(XCCL_BUF_SCRATCH, 0),
                    (size_t) (p - r) * block);
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, (size_t) (p - r) * block),
                    (size_t) r * block);
    return xccl_sched_finalize(s);
}
