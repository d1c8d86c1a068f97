/*
 * Linear alltoall with a bounded number of transfers in flight: peers
 * r+1, r+2, ... in groups of at most m per step.
 *
 *   ceil((p-1)/m) rounds of m messages: (p-1) a + ((p-1)/p) n b
 *
 * In place a slot is both the block to send to a peer and the place where
 * that peer's block lands; only the slots that would be refilled before (or
 * while) they leave are copied aside first.
 */
#include "algo_util.h"
#include "xccl_build.h"

#include <stdlib.h>


int xccl_build_alltoall_linear(xccl_sched_t *s, size_t block, int in_place, int max_inflight)
{
    const int p = s->size, r = s->rank;
    const int m = max_inflight > 0 && max_inflight < p ? max_inflight : (p > 1 ? p - 1 : 1);
#define STEP_OF(k) (((k) - 1) / m)     /* step of peer offset k, 1 <= k < p */
    /* In place, slot r-j of RECV (received at offset j) is also the block
     * to send to r-j (sent at offset p-j).  It needs a copy only if it
     * arrives in the same step as or before it leaves: about p/2 + m slots.
     * staged[j] is its position in SCRATCH, or -1. */
    int *staged = NULL;
    s->algo = "linear";
    if (in_place && p > 1) {
        size_t nstaged = 0;
        staged = malloc((size_t) p * sizeof(int));
        if (NULL == staged) {
            return -1;
        }
        for (int j = 1; j < p; j++) {
            staged[j] = STEP_OF(j) <= STEP_OF(p - j) ? (int) nstaged++ : -1;
        }
        s->scratch_bytes = nstaged * block;
        for (int j = 1; j < p; j++) {
            if (staged[j] >= 0) {
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, (size_t) staged[j] * block),
                                xccl_ref(XCCL_BUF_RECV, (size_t) mod(r - j, p) * block), block);
            }
        }
    } else {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block),
                        xccl_ref(XCCL_BUF_SEND, (size_t) r * block), block);
    }
    /* Peers r+1, r+2, ... in groups of at most m per step. */
    for (int k = 1; k < p; k += m) {
        xccl_sched_step(s);
        for (int j = k; j < k + m && j < p; j++) {
            const int from = mod(r - j, p), to = mod(r + j, p);
            xccl_ref_t src = xccl_ref(XCCL_BUF_SEND, (size_t) to * block);
            if (in_place) {
                /* The block for r+j sits in slot r+j = r-(p-j). */
                src = staged[p - j] >= 0
                    ? xccl_ref(XCCL_BUF_SCRATCH, (size_t) staged[p - j] * block)
                    : xccl_ref(XCCL_BUF_RECV, (size_t) to * block);
            }
            xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_RECV, (size_t) from * block), block);
            xccl_sched_send(s, to, src, block);
        }
    }
#undef STEP_OF
    free(staged);
    return xccl_sched_finalize(s);
}
