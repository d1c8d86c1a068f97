/*
 * Allreduce by nonuniform halving on a ring ("nhr"): a
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
 * The reduce-scatter alone is reduce_scatter's "nhr", with the blocks of
 * counts[] and block r copied to RECV at the end; the allgather alone is
 * allgather's "nhr" (its first step sends SEND and copies it to SCRATCH);
 * bcast's "nhr" is the root's blocks scattered by uneven halves
 * (halving_scatter, algo_util.h) and then this allgather:
 * 2 ceil(lg p) a + 2((p-1)/p) nb for any p, as HCCL's NHR bcast.  All
 * four are here: they share every step.
 *
 * Every block is reduced once per combine and its final value computed by
 * its owner alone, then copied to all: bitwise identical results
 * everywhere.  A combine puts the owner's partial sum on the left.
 */
#include "algo_util.h"
#include "xccl_build.h"

#include <stdlib.h>

/* The blocks: block b is bytes [at[b], at[b+1]) of the vector, at[p] its
 * length; this rank r of p. */
typedef struct {
    size_t *at;
    int p, r;
} nhr_t;

/* Byte offset of relative block j in the rotated vector. */
static size_t rel_off(const nhr_t *o, int j)
{
    const int b = o->r + j;
    return b <= o->p ? o->at[b] - o->at[o->r] : o->at[o->p] - o->at[o->r] + o->at[b - o->p];
}

/* Relative blocks [j0, j1) in block order: one or two byte ranges (cut
 * where they wrap past block p-1); returns how many. */
static int pieces(const nhr_t *o, int j0, int j1, size_t off[2], size_t len[2])
{
    int a = o->r + j0, b = o->r + j1;
    if (a >= o->p) {
        a -= o->p;
        b -= o->p;
    }
    off[0] = o->at[a];
    if (b <= o->p) {
        len[0] = o->at[b] - off[0];
        return 1;
    }
    len[0] = o->at[o->p] - off[0];
    off[1] = 0;
    len[1] = o->at[b - o->p];
    return 2;
}

/* Relative blocks [j0, j1) to or from peer, cut as pieces() cuts them (the
 * peer's view of the same blocks cuts alike): in block order in buf, or
 * (buf SCRATCH) one after the other from at. */
enum { SEND_TO, RECV_FROM };
static void move(xccl_sched_t *s, const nhr_t *o, int dir, int peer, int j0, int j1, xccl_buf_id_t buf,
                 size_t at)
{
    size_t off[2], len[2];
    const int n = pieces(o, j0, j1, off, len);
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

/* The windows p, ceil(p/2), ..., 2 into win; returns how many. */
static int windows(int p, int win[32])
{
    int n = 0;
    for (int m = p; m > 1; m = (m + 1) / 2) {
        win[n++] = m;
    }
    return n;
}

/* The reduce-scatter, from the vector in buffer in (block order): block r,
 * reduced over every rank, ends at SCRATCH 0.  Returns the SCRATCH bytes. */
static size_t nhr_reduce_scatter(xccl_sched_t *s, const nhr_t *o, xccl_buf_id_t in)
{
    const int p = o->p, r = o->r;
    const size_t bytes = o->at[p], recvd = bytes;   /* SCRATCH: the rotated vector, then what arrives */
    int win[32];
    const int nsteps = windows(p, win);
    size_t off[2], len[2];

    /* The first step reads the input in block order: the received part of
     * the window reduced into SCRATCH, the block in the middle of an odd
     * window copied. */
    const int h0 = (p + 1) / 2;
    xccl_sched_step(s);
    move(s, o, RECV_FROM, mod(r - h0, p), 0, p - h0, XCCL_BUF_SCRATCH, recvd);
    move(s, o, SEND_TO, mod(r + h0, p), h0, p, in, 0);
    size_t at = 0;
    const int n = pieces(o, 0, h0, off, len);
    const size_t red = rel_off(o, p - h0);
    for (int k = 0; k < n; k++) {
        const size_t rl = at >= red ? 0 : (red - at < len[k] ? red - at : len[k]);
        xccl_sched_reduce(s, xccl_ref(XCCL_BUF_SCRATCH, at), xccl_ref(in, off[k]), xccl_ref(XCCL_BUF_SCRATCH, recvd + at),
                          rl);
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, at + rl), xccl_ref(in, off[k] + rl), len[k] - rl);
        at += len[k];
    }
    for (int i = 1; i < nsteps; i++) {
        const int m = win[i], h = (m + 1) / 2;
        const size_t give = rel_off(o, h), keep_len = rel_off(o, m - h);
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r - h, p), xccl_ref(XCCL_BUF_SCRATCH, recvd), keep_len);
        xccl_sched_send(s, mod(r + h, p), xccl_ref(XCCL_BUF_SCRATCH, give), rel_off(o, m) - give);
        xccl_sched_reduce(s, xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_SCRATCH, 0),
                          xccl_ref(XCCL_BUF_SCRATCH, recvd), keep_len);
    }
    return bytes + red;
}

/* o->at from per-block counts of unit bytes (counts NULL: count cut into
 * p chunks).  0, or -1 out of memory (then s is marked failed). */
static int nhr_init(nhr_t *o, xccl_sched_t *s, size_t count, const size_t *counts, size_t unit)
{
    o->p = s->size;
    o->r = s->rank;
    o->at = malloc(((size_t) o->p + 1) * sizeof(size_t));
    if (NULL == o->at) {
        s->error = 1;
        return -1;
    }
    o->at[0] = 0;
    for (int b = 0; b < o->p; b++) {
        o->at[b + 1] = o->at[b] + (counts ? counts[b] : chunk_count(count, o->p, b)) * unit;
    }
    return 0;
}

/* The allgather: block r (relative block 0) at own, which is SCRATCH 0
 * or (allgather: p >= 3) a buffer that the first step copies there; every
 * block ends in RECV, in block order. */
static void nhr_allgather(xccl_sched_t *s, const nhr_t *o, xccl_ref_t own)
{
    const int p = o->p, r = o->r;
    int win[32];
    const int nsteps = windows(p, win);
    for (int i = nsteps - 1; i > 0; i--) {
        const int m = win[i], h = (m + 1) / 2;
        const size_t at = rel_off(o, h);
        const int first = nsteps - 1 == i;
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r + h, p), xccl_ref(XCCL_BUF_SCRATCH, at), rel_off(o, m) - at);
        xccl_sched_send(s, mod(r - h, p), first ? own : xccl_ref(XCCL_BUF_SCRATCH, 0), rel_off(o, m - h));
        if (first && XCCL_BUF_SCRATCH != own.buf) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, 0), own, rel_off(o, 1));
        }
    }
    /* The last step writes RECV in block order; the half held is copied
     * there after its transfers. */
    const int h = (p + 1) / 2;
    size_t off[2], len[2], at = 0;
    xccl_sched_step(s);
    move(s, o, RECV_FROM, mod(r + h, p), h, p, XCCL_BUF_RECV, 0);
    move(s, o, SEND_TO, mod(r - h, p), 0, p - h, XCCL_BUF_SCRATCH, 0);
    const int n = pieces(o, 0, h, off, len);
    for (int k = 0; k < n; k++) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, off[k]), xccl_ref(XCCL_BUF_SCRATCH, at), len[k]);
        at += len[k];
    }
}

int xccl_build_allreduce_nhr(xccl_sched_t *s, size_t count)
{
    const size_t bytes = count * s->elem_size;
    nhr_t o;

    s->algo = "nhr";
    if (one_rank_copy(s, bytes)) {
        return xccl_sched_finalize(s);
    }
    if (0 != nhr_init(&o, s, count, NULL, s->elem_size)) {
        return xccl_sched_finalize(s);
    }
    s->scratch_bytes = nhr_reduce_scatter(s, &o, XCCL_BUF_SEND);
    nhr_allgather(s, &o, xccl_ref(XCCL_BUF_SCRATCH, 0));
    free(o.at);
    return xccl_sched_finalize(s);
}

/* Blocks of block bytes (the rank's own first in SEND; in place SEND is
 * RECV + rank * block).  p = 2 is one exchange. */
int xccl_build_allgather_nhr(xccl_sched_t *s, size_t block)
{
    const int p = s->size, r = s->rank;
    nhr_t o;

    s->algo = "nhr";
    if (p <= 2) {
        xccl_sched_step(s);
        xccl_sched_recv(s, 1 - r, xccl_ref(XCCL_BUF_RECV, (size_t) (1 - r) * block), 2 == p ? block : 0);
        xccl_sched_send(s, 1 - r, xccl_ref(XCCL_BUF_SEND, 0), 2 == p ? block : 0);
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block), xccl_ref(XCCL_BUF_SEND, 0), block);
        return xccl_sched_finalize(s);
    }
    if (0 != nhr_init(&o, s, (size_t) p, NULL, block)) {
        return xccl_sched_finalize(s);
    }
    nhr_allgather(s, &o, xccl_ref(XCCL_BUF_SEND, 0));
    s->scratch_bytes = rel_off(&o, (p + 1) / 2);
    free(o.at);
    return xccl_sched_finalize(s);
}

int xccl_build_reduce_scatter_nhr(xccl_sched_t *s, const size_t *counts, int in_place)
{
    const xccl_buf_id_t in = in_place ? XCCL_BUF_RECV : XCCL_BUF_SEND;
    nhr_t o;

    s->algo = "nhr";
    if (one_rank_copy(s, in_place ? 0 : counts[0] * s->elem_size)) {
        return xccl_sched_finalize(s);
    }
    if (0 != nhr_init(&o, s, 0, counts, s->elem_size)) {
        return xccl_sched_finalize(s);
    }
    s->scratch_bytes = nhr_reduce_scatter(s, &o, in);
    /* block r, after the last step's reduction */
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, 0), counts[s->rank] * s->elem_size);
    free(o.at);
    return xccl_sched_finalize(s);
}

int xccl_build_bcast_nhr(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, r = s->rank;
    nhr_t o;

    s->algo = "nhr";
    if (bcast_pair(s, bytes, root)) {
        return xccl_sched_finalize(s);
    }
    if (0 != nhr_init(&o, s, bytes, NULL, 1)) {
        return xccl_sched_finalize(s);
    }
    halving_scatter(s, bytes, root);
    nhr_allgather(s, &o, xccl_ref(XCCL_BUF_RECV, o.at[r]));
    s->scratch_bytes = rel_off(&o, (p + 1) / 2);
    free(o.at);
    return xccl_sched_finalize(s);
}
