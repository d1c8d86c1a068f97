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
 * The relative order lives in SCRATCH (rotated) so that every transfer
 * of the steps between is one message; the first step reads SEND and the
 * last one writes RECV, both in block order, where a range of blocks that
 * wraps past block p-1 travels as two messages (both sides cut it there),
 * so that only the half a rank already holds is copied out at the end.
 * Cost (n bytes): 2 ceil(lg p) a + 2((p-1)/p) nb + ((p-1)/p) ng + n/2 d,
 * plus at most 2a for the wrapped ranges.
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

/* Relative blocks [j0, j1) of rank r in block order: one or two byte
 * ranges (cut where they wrap past block p-1); returns how many. */
static int pieces(size_t count, int p, int r, int j0, int j1, size_t es, size_t off[2], size_t len[2])
{
    int a = r + j0, b = r + j1;
    if (a >= p) {
        a -= p;
        b -= p;
    }
    off[0] = chunk_first(count, p, a) * es;
    if (b <= p) {
        len[0] = chunk_first(count, p, b) * es - off[0];
        return 1;
    }
    len[0] = chunk_first(count, p, p) * es - off[0];
    off[1] = 0;
    len[1] = chunk_first(count, p, b - p) * es;
    return 2;
}

/* Relative blocks [j0, j1) of this rank to or from peer, cut as pieces()
 * cuts them (the peer's view of the same blocks cuts alike): in block
 * order in buffer buf, or (buf SCRATCH) one after the other from at. */
enum { SEND_TO, RECV_FROM };
static void move(xccl_sched_t *s, int dir, int peer, size_t count, int j0, int j1, xccl_buf_id_t buf,
                 size_t at)
{
    size_t off[2], len[2];
    const int n = pieces(count, s->size, s->rank, j0, j1, s->elem_size, off, len);
    for (int k = 0; k < n; k++) {
        const xccl_ref_t ref = xccl_ref(buf, XCCL_BUF_SCRATCH == buf ? at : off[k]);
        if (SEND_TO == dir) {
            xccl_sched_send(s, peer, ref, len[k]);
        } else {
            xccl_sched_recv(s, peer, ref, len[k]);
        }
        at += len[k];
    }
}

int xccl_build_allreduce_nhr(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size, bytes = count * es;
    int win[32], nsteps = 0;       /* the windows: p, ceil(p/2), ..., 2 */

    s->algo = "nhr";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
        return xccl_sched_finalize(s);
    }
    for (int m = p; m > 1; m = (m + 1) / 2) {
        win[nsteps++] = m;
    }
    const size_t recvd = bytes;    /* SCRATCH: the rotated vector, then what arrives */
    size_t scratch = bytes, off[2], len[2];

    /* The first step reads SEND in block order: the received part of the
     * window reduced into SCRATCH, the block in the middle of an odd window
     * copied. */
    {
        const int h = (p + 1) / 2;
        xccl_sched_step(s);
        move(s, RECV_FROM, mod(r - h, p), count, 0, p - h, XCCL_BUF_SCRATCH, recvd);
        move(s, SEND_TO, mod(r + h, p), count, h, p, XCCL_BUF_SEND, 0);
        size_t at = 0;
        const int n = pieces(count, p, r, 0, h, es, off, len);
        const size_t red = rel_off(count, p, r, p - h, es);
        for (int k = 0; k < n; k++) {
            const size_t rl = at >= red ? 0 : (red - at < len[k] ? red - at : len[k]);
            xccl_sched_reduce(s, xccl_ref(XCCL_BUF_SCRATCH, at), xccl_ref(XCCL_BUF_SEND, off[k]),
                              xccl_ref(XCCL_BUF_SCRATCH, recvd + at), rl);
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, at + rl), xccl_ref(XCCL_BUF_SEND, off[k] + rl), len[k] - rl);
            at += len[k];
        }
        scratch = bytes + red;
    }
    for (int i = 1; i < nsteps; i++) {
        const int m = win[i], h = (m + 1) / 2;
        const size_t give = rel_off(count, p, r, h, es), give_len = rel_off(count, p, r, m, es) - give;
        const size_t keep_len = rel_off(count, p, r, m - h, es);
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r - h, p), xccl_ref(XCCL_BUF_SCRATCH, recvd), keep_len);
        xccl_sched_send(s, mod(r + h, p), xccl_ref(XCCL_BUF_SCRATCH, give), give_len);
        xccl_sched_reduce(s, xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_SCRATCH, 0),
                          xccl_ref(XCCL_BUF_SCRATCH, recvd), keep_len);
    }
    for (int i = nsteps - 1; i > 0; i--) {
        const int m = win[i], h = (m + 1) / 2;
        const size_t at = rel_off(count, p, r, h, es);
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r + h, p), xccl_ref(XCCL_BUF_SCRATCH, at), rel_off(count, p, r, m, es) - at);
        xccl_sched_send(s, mod(r - h, p), xccl_ref(XCCL_BUF_SCRATCH, 0), rel_off(count, p, r, m - h, es));
    }
    /* The last step writes RECV in block order; the half held is copied
     * there after its transfers. */
    {
        const int h = (p + 1) / 2;
        xccl_sched_step(s);
        move(s, RECV_FROM, mod(r + h, p), count, h, p, XCCL_BUF_RECV, 0);
        move(s, SEND_TO, mod(r - h, p), count, 0, p - h, XCCL_BUF_SCRATCH, 0);
        size_t at = 0;
        const int n = pieces(count, p, r, 0, h, es, off, len);
        for (int k = 0; k < n; k++) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, off[k]), xccl_ref(XCCL_BUF_SCRATCH, at), len[k]);
            at += len[k];
        }
    }
    s->scratch_bytes = scratch;
    return xccl_sched_finalize(s);
}
