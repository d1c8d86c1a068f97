/*
 * Rabenseifner's allreduce: recursive-halving reduce-scatter, then
 * recursive-doubling allgather, over the largest power of two p' <= p.  The
 * vector is cut into p' blocks (the first count % p' one element longer, so
 * any count works, 0 included); virtual rank v ends the reduce-scatter
 * owning block v.  The p - p' extra ranks fold in first (odd rank
 * r < 2(p-p') hands its vector to r-1, which reduces) and receive the result
 * at the end.
 *
 * Cost (n bytes): 2 lg p' a + 2((p'-1)/p') nb + ((p'-1)/p') ng, plus
 * 2(a + nb) + ng when p is not a power of two.  Bandwidth-optimal with
 * lg p' latency: for large messages.
 *
 * Every element is reduced once per combine, in one place, and its final
 * value is computed by one rank and then copied to all: bitwise identical
 * results everywhere.  Combines still put the lower rank's data on the
 * left, so a schedule's arithmetic does not depend on who computes it.
 */
#include "algo_util.h"
#include "xccl_build.h"

int xccl_build_allreduce_rabenseifner(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size, bytes = count * es;
    const fold_t f = fold_layout(p, r);
    xccl_buf_id_t cur = XCCL_BUF_SEND;     /* where this rank's partial data is */
    size_t scratch = 0;
    int steps = 0;             /* lg p2 */

    s->algo = "rabenseifner";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
        return xccl_sched_finalize(s);
    }
    while ((1 << steps) < f.p2) {
        steps++;
    }

    if (fold_core_begin(s, &f, bytes, steps, &cur, &scratch)) {
        /* Reduce-scatter by halving: [lo, lo + 2 mask) are the blocks this
         * rank holds partial sums of; keep the half that contains block vr,
         * send the other half to vr ^ mask, which keeps it. */
        int lo = 0;
        for (int mask = f.p2 / 2; mask > 0; mask /= 2) {
            const int pv = f.vr ^ mask;
            const int keep = (f.vr & mask) ? lo + mask : lo, give = (f.vr & mask) ? lo : lo + mask;
            const size_t klen = fold_halving_exchange(s, &f, pv, cur, count, keep, give, mask);
            scratch = klen > scratch ? klen : scratch;
            cur = XCCL_BUF_RECV;
            lo = keep;
        }
        /* Allgather by doubling: the owned range (mask blocks, aligned)
         * doubles each step; received blocks go straight into place. */
        for (int mask = 1; mask < f.p2; mask *= 2) {
            const int pv = f.vr ^ mask;
            fold_doubling_exchange(s, &f, pv, count, f.vr & ~(mask - 1), pv & ~(mask - 1), mask);
        }
    }

    fold_out(s, &f, bytes);
    s->scratch_bytes = scratch;
    return xccl_sched_finalize(s);
}
