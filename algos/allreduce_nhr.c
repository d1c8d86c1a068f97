/*
 * Allreduce by nonuniform halving on a ring ("nhr", issue 31): a
 * reduce-scatter and an allgather of ceil(lg p) steps each for any p, with
 * no fold and no extra traffic: every rank sends (p-1)/p n bytes in each
 * phase, as the ring does, in lg p steps instead of p-1.  Our construction
 * after the properties HCCL documents for its NHR (Nonuniform Hierarchical
 * Ring): logarithmic steps whatever the number of ranks, without the extra
 * traffic recursive halving-doubling pays when p is no power of two.
 *
 * Rank r owns block r of the vector (p blocks, the first count % p one
 * element longer).  It works on its blocks in ring order from its own,
 * r, r+1, ..., r-1 (mod p): relative block j is block r+j.  The
 * reduce-scatter keeps a window of m relative blocks, m = p first; a step
 * with window m keeps h = ceil(m/2) of them: rank r sends its relative
 * blocks [h, m) to rank r+h, to whom they are relative blocks [0, m-h), and
 * reduces the same range of rank r-h into its own [0, m-h).  The window
 * shrinks to h until it is 1: block r, summed over every rank.  (By
 * induction, relative block j of rank r then holds the ranks r-t, t in a
 * set T_m(j), and T_1(0) is every rank once: the windows halve the ring
 * like a balanced tree of uneven halves.)  The allgather runs the same
 * steps backwards: with window m from h, rank r sends [0, m-h) to r-h and
 * receives r+h's [0, m-h) as its [h, m).
 *
 * The relative order lives in SCRATCH (rotated: a copy in, a copy out) so
 * that every transfer is one message; received pieces land in SCRATCH
 * after it.  Cost (n bytes): 2 ceil(lg p) a + 2((p-1)/p) nb + ((p-1)/p) ng
 * + 2 n d, plus a for the copy round.
 *
 * Every block is reduced once per combine and its final value computed by
 * its owner alone, then copied to all: bitwise identical results
 * everywhere.  A combine puts the owner's partial sum on the left.
 */
#include "algo_util.h"
#include "xccl_build.h"

/* Byte offset of relative block j of rank r in the rotated vector. */
static size_t rel_off(size_t count, int p, int r, int j, size_t es)
{
    const size_t base = chunk_first(count, p, r);
    return (r + j <= p ? chunk_first(count, p, r + j) - base
                       : chunk_first(count, p, p) - base + chunk_first(count, p, r + j - p)) * es;
}

int xccl_build_allreduce_nhr(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size, bytes = count * es;
    const size_t head = chunk_first(count, p, r) * es;    /* SEND bytes before block r */
    int win[32], nsteps = 0;       /* the windows: p, ceil(p/2), ..., 2 */

    s->algo = "nhr";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
        return xccl_sched_finalize(s);
    }
    for (int m = p; m > 1; m = (m + 1) / 2) {
        win[nsteps++] = m;
    }
    const xccl_ref_t recvd = xccl_ref(XCCL_BUF_SCRATCH, bytes);
    size_t scratch = bytes;

    /* Rotate: relative block 0 (block r) first. */
    xccl_sched_step(s);
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_SEND, head), bytes - head);
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, bytes - head), xccl_ref(XCCL_BUF_SEND, 0), head);

    for (int i = 0; i < nsteps; i++) {
        const int m = win[i], h = (m + 1) / 2;
        const size_t give = rel_off(count, p, r, h, es), give_len = rel_off(count, p, r, m, es) - give;
        const size_t keep_len = rel_off(count, p, r, m - h, es);
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r - h, p), recvd, keep_len);
        xccl_sched_send(s, mod(r + h, p), xccl_ref(XCCL_BUF_SCRATCH, give), give_len);
        xccl_sched_reduce(s, xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_SCRATCH, 0), recvd, keep_len);
        scratch = bytes + keep_len > scratch ? bytes + keep_len : scratch;
    }
    for (int i = nsteps - 1; i >= 0; i--) {
        const int m = win[i], h = (m + 1) / 2;
        const size_t off = rel_off(count, p, r, h, es);
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r + h, p), xccl_ref(XCCL_BUF_SCRATCH, off), rel_off(count, p, r, m, es) - off);
        xccl_sched_send(s, mod(r - h, p), xccl_ref(XCCL_BUF_SCRATCH, 0), rel_off(count, p, r, m - h, es));
    }
    /* Rotate back, after the last transfers. */
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, head), xccl_ref(XCCL_BUF_SCRATCH, 0), bytes - head);
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, bytes - head), head);
    s->scratch_bytes = scratch;
    return xccl_sched_finalize(s);
}
