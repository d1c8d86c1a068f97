/*
 * Alltoallv: rank r sends sbytes[q] from SEND + sdispls[q] to every q and
 * receives rbytes[q] at RECV + rdispls[q] from every q (sbytes[q] on r must
 * equal rbytes[r] on q).  SEND and RECV must not overlap.  The two-level
 * alltoall of uneven layouts uses it.
 *   pairwise: p-1 rounds, round k sends to r+k and receives from r-k;
 *   direct:   one round, every pair at once.
 */
#include "algo_util.h"


static int alltoallv(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls, const size_t *rbytes,
                     const size_t *rdispls, int one_round)
{
    const int p = s->size, r = s->rank;
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, rdispls[r]), xccl_ref(XCCL_BUF_SEND, sdispls[r]), rbytes[r]);
    for (int k = 1; k < p; k++) {
        int to = mod(r + k, p), from = mod(r - k, p);
        if (!one_round || 1 == k) {
            xccl_sched_step(s);
        }
        xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_RECV, rdispls[from]), rbytes[from]);
        xccl_sched_send(s, to, xccl_ref(XCCL_BUF_SEND, sdispls[to]), sbytes[to]);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_alltoallv_pairwise(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                  const size_t *rbytes, const size_t *rdispls)
{
    s->algo = "pairwise";
    return alltoallv(s, sbytes, sdispls, rbytes, rdispls, 0);
}

int xccl_build_alltoallv_direct(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                const size_t *rbytes, const size_t *rdispls)
{
    s->algo = "direct";
    return alltoallv(s, sbytes, sdispls, rbytes, rdispls, 1);
}
