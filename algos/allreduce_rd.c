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
#include "xccl_algos.h"

/* The power-of-two core: virtual rank vr of each participant, -1 for the
 * ranks folded out. */
typedef struct {
    int p2;
    int extra;                 /* p - p2 */
    int vr;
} rd_fold_t;

static rd_fold_t rd_fold_layout(int p, int r);
static int rd_real_rank(const rd_fold_t *f, int vr);
static void rd_combine(xccl_sched_t *s, int me_lower, xccl_ref_t mine, xccl_ref_t theirs, size_t len);

int xccl_build_allreduce_recursive_doubling(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank;
    const size_t bytes = count * s->elem_size;
    const rd_fold_t f = rd_fold_layout(p, r);
    /* Where this rank's current vector is: the input until the first
     * reduction has written RECV. */
    xccl_buf_id_t cur = XCCL_BUF_SEND;

    s->algo = "recursive_doubling";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
        return xccl_sched_finalize(s);
    }
    s->scratch_bytes = (f.vr >= 0) ? bytes : 0;

    /* Fold in.  Every rank counts the round: the core waits for it. */
    if (f.extra > 0) {
        xccl_sched_step(s);
        if (r < 2 * f.extra && (r & 1)) {
            xccl_sched_send(s, r - 1, xccl_ref(XCCL_BUF_SEND, 0), bytes);
        } else if (r < 2 * f.extra) {
            xccl_sched_recv(s, r + 1, xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
            rd_combine(s, 1, xccl_ref(XCCL_BUF_SEND, 0), xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
            cur = XCCL_BUF_RECV;
        }
    }

    /* Core: exchange the whole vector with vr ^ mask; the result goes to
     * RECV (in place, the reduction's destination aliases its operand).
     * Folded-out ranks count the rounds they wait through (cost model). */
    for (int mask = 1; mask < f.p2; mask <<= 1) {
        xccl_sched_step(s);
        if (f.vr < 0) {
            continue;
        }
        int pv = f.vr ^ mask, peer = rd_real_rank(&f, pv);
        xccl_sched_recv(s, peer, xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
        xccl_sched_send(s, peer, xccl_ref(cur, 0), bytes);
        rd_combine(s, f.vr < pv, xccl_ref(cur, 0), xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
        cur = XCCL_BUF_RECV;
    }

    /* Fold out: the even partner hands the result back. */
    if (f.extra > 0) {
        xccl_sched_step(s);
        if (r < 2 * f.extra && (r & 1)) {
            xccl_sched_recv(s, r - 1, xccl_ref(XCCL_BUF_RECV, 0), bytes);
        } else if (r < 2 * f.extra) {
            xccl_sched_send(s, r + 1, xccl_ref(XCCL_BUF_RECV, 0), bytes);
        }
    }
    return xccl_sched_finalize(s);
}

static rd_fold_t rd_fold_layout(int p, int r)
{
    rd_fold_t f;
    f.p2 = 1;
    while (f.p2 <= p / 2) {
        f.p2 *= 2;
    }
    f.extra = p - f.p2;
    if (r < 2 * f.extra) {
        f.vr = (r & 1) ? -1 : r / 2;
    } else {
        f.vr = r - f.extra;
    }
    return f;
}

static int rd_real_rank(const rd_fold_t *f, int vr)
{
    return vr < f->extra ? 2 * vr : vr + f->extra;
}

/* RECV = lower op higher; "mine" may be RECV itself (exact alias). */
static void rd_combine(xccl_sched_t *s, int me_lower, xccl_ref_t mine, xccl_ref_t theirs, size_t len)
{
    xccl_sched_reduce(s, xccl_ref(XCCL_BUF_RECV, mine.off), me_lower ? mine : theirs,
                      me_lower ? theirs : mine, len);
}
