/*
 * Recursive doubling allreduce: lg p' exchanges of the whole vector over the
 * largest power of two p' <= p.  The p - p' extra ranks fold in first (odd
 * rank r < 2(p-p') hands its vector to r-1, which reduces) and receive the
 * result at the end.
 *
 * Cost (n bytes): lg p'(a + nb + ng), plus 2(a + nb) + ng when p is not a
 * power of two.  Latency-optimal: for small messages.
 *
 * Both partners of an exchange compute the same combine, so each computes
 * (lower rank's data) op (higher rank's data): the same bits on both sides,
 * hence on every rank, also for commutative but non-associative ops
 * (floating point).
 */
#include "algo_util.h"
#include "xccl_build.h"

static void rd_combine(xccl_sched_t *s, int me_lower, xccl_ref_t mine, xccl_ref_t theirs, size_t len);

int xccl_build_allreduce_recursive_doubling(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank;
    const size_t bytes = count * s->elem_size;
    const fold_t f = fold_layout(p, r);
    /* Where this rank's current vector is: the input until the first
     * reduction has written RECV. */
    xccl_buf_id_t cur = XCCL_BUF_SEND;

    s->algo = "recursive_doubling";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
        return xccl_sched_finalize(s);
    }
    s->scratch_bytes = (f.vr >= 0) ? bytes : 0;

    if (fold_in(s, &f, bytes)) {
        cur = XCCL_BUF_RECV;
    }

    /* Core: exchange the whole vector with vr ^ mask; the result goes to
     * RECV (in place, the reduction's destination aliases its operand).
     * Folded-out ranks count the rounds they wait through (cost model). */
    for (int mask = 1; mask < f.p2; mask <<= 1) {
        xccl_sched_step(s);
        if (f.vr < 0) {
            continue;
        }
        int pv = f.vr ^ mask, peer = fold_real_rank(&f, pv);
        xccl_sched_recv(s, peer, xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
        xccl_sched_send(s, peer, xccl_ref(cur, 0), bytes);
        rd_combine(s, f.vr < pv, xccl_ref(cur, 0), xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
        cur = XCCL_BUF_RECV;
    }

    fold_out(s, &f, bytes);
    return xccl_sched_finalize(s);
}



/* RECV = lower op higher; "mine" may be RECV itself (exact alias). */
static void rd_combine(xccl_sched_t *s, int me_lower, xccl_ref_t mine, xccl_ref_t theirs, size_t len)
{
    xccl_sched_reduce(s, xccl_ref(XCCL_BUF_RECV, mine.off), me_lower ? mine : theirs,
                      me_lower ? theirs : mine, len);
}
