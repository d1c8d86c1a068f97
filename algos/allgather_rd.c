/*
 * Recursive-doubling allgather.  The exchanges run over the largest power
 * of two p' <= p; the p - p' extra ranks fold in first: of each pair
 * (2i, 2i+1), i < p - p', the odd rank sends its block to the even one,
 * which stands for both blocks and at the end sends the odd rank the whole
 * result.  Participant q owns a contiguous run of blocks (two for a folded
 * pair, one otherwise), so at the step of distance m partners q and q ^ m
 * swap the contiguous ranges of their groups of m participants, straight
 * into place in RECV: no scratch, no copies besides the own block.
 *
 * Cost (n = p * block bytes):
 *   p power of two:  lg p a + ((p-1)/p) n b
 *   otherwise add    2a + (1/p + 1) n b  (one block in, the result out)
 */
#include "xccl_sched.h"
#include "xccl_build.h"

static size_t run_first(int q, int rem);

int xccl_build_allgather_recursive_doubling(xccl_sched_t *s, size_t block)
{
    const int p = s->size, r = s->rank;
    int p2 = 1;

    s->algo = "recursive_doubling";
    while (2 * p2 <= p) {
        p2 *= 2;
    }
    const int rem = p - p2, folded = r < 2 * rem;
    if (folded && (r & 1)) {
        /* The whole result comes back at the end, own block included. */
        xccl_sched_step(s);
        xccl_sched_send(s, r - 1, xccl_ref(XCCL_BUF_SEND, 0), block);
        xccl_sched_step(s);
        xccl_sched_recv(s, r - 1, xccl_ref(XCCL_BUF_RECV, 0), (size_t) p * block);
        return xccl_sched_finalize(s);
    }
    /* In place the own block is already there (the executor skips a copy
     * onto itself). */
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block), xccl_ref(XCCL_BUF_SEND, 0), block);
    if (folded) {
        xccl_sched_step(s);
        xccl_sched_recv(s, r + 1, xccl_ref(XCCL_BUF_RECV, (size_t) (r + 1) * block), block);
    }
    const int q = folded ? r / 2 : r - rem;
    for (int m = 1; m < p2; m <<= 1) {
        const int partner = q ^ m, peer = (int) run_first(partner, rem);
        /* Blocks of the aligned groups of m participants of q and of its partner. */
        const size_t mine = run_first(q & ~(m - 1), rem), mine_end = run_first((q & ~(m - 1)) + m, rem);
        const size_t theirs = run_first(partner & ~(m - 1), rem);
        const size_t theirs_end = run_first((partner & ~(m - 1)) + m, rem);
        xccl_sched_step(s);
        xccl_sched_recv(s, peer, xccl_ref(XCCL_BUF_RECV, theirs * block), (theirs_end - theirs) * block);
        xccl_sched_send(s, peer, xccl_ref(XCCL_BUF_RECV, mine * block), (mine_end - mine) * block);
    }
    if (folded) {
        xccl_sched_step(s);
        xccl_sched_send(s, r + 1, xccl_ref(XCCL_BUF_RECV, 0), (size_t) p * block);
    }
    return xccl_sched_finalize(s);
}

/* First block of participant q's run (also its rank); q = p' gives p. */
static size_t run_first(int q, int rem)
{
    return (size_t) (q < rem ? 2 * q : q + rem);
}
