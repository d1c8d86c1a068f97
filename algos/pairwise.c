/*
 * Pairwise-exchange alltoall: p-1 steps of one send and one receive.
 * Cost: (p-1)a + ((p-1)/p)nb.
 */
#include "algo_util.h"
#include "xccl_build.h"


int xccl_build_alltoall_pairwise(xccl_sched_t *s, size_t block, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "pairwise";
    if (!in_place) {
        /* Step k sends to r+k and receives from r-k. */
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block),
                        xccl_ref(XCCL_BUF_SEND, (size_t) r * block), block);
        for (int k = 1; k < p; k++) {
            int to = mod(r + k, p), from = mod(r - k, p);
            xccl_sched_step(s);
            xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_RECV, (size_t) from * block), block);
            xccl_sched_send(s, to, xccl_ref(XCCL_BUF_SEND, (size_t) to * block), block);
        }
        return xccl_sched_finalize(s);
    }
    /* In place, block j must leave before block j arrives, so each step
     * pairs ranks symmetrically: at step k, r exchanges with k-r (every pair
     * meets once in p steps) and the arriving block goes through scratch. */
    s->scratch_bytes = block;
    for (int k = 0; k < p; k++) {
        int peer = mod(k - r, p);
        if (peer == r) {
            continue;
        }
        xccl_sched_step(s);
        xccl_sched_recv(s, peer, xccl_ref(XCCL_BUF_SCRATCH, 0), block);
        xccl_sched_send(s, peer, xccl_ref(XCCL_BUF_RECV, (size_t) peer * block), block);
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) peer * block),
                        xccl_ref(XCCL_BUF_SCRATCH, 0), block);
    }
    return xccl_sched_finalize(s);
}
