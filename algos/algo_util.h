/*
 * Index arithmetic shared by the schedule builders of algos/: rank
 * arithmetic modulo p, cutting n items into p nearly equal chunks, and the
 * fold of a non-power-of-two group onto its largest power-of-two core.
 * Not part of the public API (xccl_algos.h).
 */
#ifndef XCCL_ALGO_UTIL_H
#define XCCL_ALGO_UTIL_H

#include "xccl_sched.h"

static inline int mod(int a, int p)
{
    return ((a % p) + p) % p;
}

/* A group of one rank: its input is the result, copied from SEND to RECV
 * (bytes 0 where it is in place).  Returns 1 if so (finalize then). */
static inline int one_rank_copy(xccl_sched_t *s, size_t bytes)
{
    if (1 != s->size) {
        return 0;
    }
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
    return 1;
}

/* n items cut into p chunks, the first n % p one larger: chunk c holds
 * [chunk_first(n, p, c), chunk_first(n, p, c + 1)); c == p gives n. */
static inline size_t chunk_count(size_t n, int p, int c)
{
    return n / (size_t) p + ((size_t) c < n % (size_t) p ? 1 : 0);
}

static inline size_t chunk_first(size_t n, int p, int c)
{
    size_t rem = n % (size_t) p;
    return (size_t) c * (n / (size_t) p) + ((size_t) c < rem ? (size_t) c : rem);
}

/* bcast's "nhr" and "nb" on at most two ranks: the root's bytes to the
 * other rank in one message.  Returns 1 if so (finalize then). */
static inline int bcast_pair(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, r = s->rank;
    if (p > 2) {
        return 0;
    }
    xccl_sched_step(s);
    if (2 == p && r == root) {
        xccl_sched_send(s, 1 - r, xccl_ref(XCCL_BUF_RECV, 0), bytes);
    } else if (2 == p) {
        xccl_sched_recv(s, 1 - r, xccl_ref(XCCL_BUF_RECV, 0), bytes);
    }
    return 1;
}

/* The first half of bcast's "nhr" and "nb": the root's bytes in
 * RECV cut in p blocks (block b: chunk b, at its place), scattered so that
 * rank b ends with block b.  Relative ranks (rank - root) split their
 * range in uneven halves, [a, a+w) -> [a, a+h) kept, [a+h, a+w) sent to
 * a+h (h = ceil(w/2)): ceil(lg p) rounds for any p, every rank steps in
 * every one (the cost model sees the depth), (p-1)/p n bytes from the
 * root.  A range that wraps past block p-1 travels as two messages. */
static inline void halving_scatter(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, v = mod(s->rank - root, p);
    int a = 0, w = p;
    for (int span = 1; span < p; span *= 2) {
        const int h = (w + 1) / 2;
        xccl_sched_step(s);
        if (w > 1 && (v == a || v == a + h)) {
            const int b0 = mod(root + a + h, p), n = w - h, wrap = b0 + n > p;
            const size_t o[2] = { chunk_first(bytes, p, b0), 0 };
            const size_t l[2] = { chunk_first(bytes, p, wrap ? p : b0 + n) - o[0],
                                  wrap ? chunk_first(bytes, p, b0 + n - p) : 0 };
            for (int k = 0; k < 1 + wrap; k++) {
                if (v == a) {
                    xccl_sched_send(s, mod(root + a + h, p), xccl_ref(XCCL_BUF_RECV, o[k]), l[k]);
                } else {
                    xccl_sched_recv(s, mod(root + a, p), xccl_ref(XCCL_BUF_RECV, o[k]), l[k]);
                }
            }
        }
        if (v >= a + h) {
            a += h;
            w -= h;
        } else {
            w = h;
        }
    }
}

/* The fold: p2 is the largest power of two <= p, extra = p - p2.  Of each
 * pair (2i, 2i+1), i < extra, the odd rank hands its vector to the even one
 * and sits out (vr = -1); the others are virtual ranks 0..p2-1 of the core. */
typedef struct {
    int p2;
    int extra;
    int vr;
} fold_t;

static inline fold_t fold_layout(int p, int r)
{
    fold_t f;
    f.p2 = 1;
    while (f.p2 <= p / 2) {
        f.p2 *= 2;
    }
    f.extra = p - f.p2;
    f.vr = r < 2 * f.extra ? ((r & 1) ? -1 : r / 2) : r - f.extra;
    return f;
}

/* The communicator rank of core rank vr. */
static inline int fold_real_rank(const fold_t *f, int vr)
{
    return vr < f->extra ? 2 * vr : vr + f->extra;
}

/* Fold in (one round, taken by every rank: the core waits for it): the odd
 * rank sends SEND, the even one receives it into SCRATCH at 0 and reduces
 * RECV = SEND op SCRATCH (lower rank's data on the left).  Returns 1 when
 * this rank's vector is now in RECV. */
static inline int fold_in(xccl_sched_t *s, const fold_t *f, size_t bytes)
{
    const int r = s->rank;
    if (0 == f->extra) {
        return 0;
    }
    xccl_sched_step(s);
    if (r >= 2 * f->extra) {
        return 0;
    }
    if (r & 1) {
        xccl_sched_send(s, r - 1, xccl_ref(XCCL_BUF_SEND, 0), bytes);
        return 0;
    }
    xccl_sched_recv(s, r + 1, xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
    xccl_sched_reduce(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0),
                      xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
    return 1;
}

/* Fold out (one round): the even partner hands the result in RECV back. */
static inline void fold_out(xccl_sched_t *s, const fold_t *f, size_t bytes)
{
    const int r = s->rank;
    if (0 == f->extra) {
        return;
    }
    xccl_sched_step(s);
    if (r < 2 * f->extra && (r & 1)) {
        xccl_sched_recv(s, r - 1, xccl_ref(XCCL_BUF_RECV, 0), bytes);
    } else if (r < 2 * f->extra) {
        xccl_sched_send(s, r + 1, xccl_ref(XCCL_BUF_RECV, 0), bytes);
    }
}

/* The start of the builders that run on the core (Rabenseifner, Swing):
 * the fold in (this rank's vector then in RECV: *cur, and SCRATCH holds
 * bytes), and a rank folded out counts the 2 * steps rounds it waits
 * through (the cost model).  Returns 1 for a rank of the core. */
static inline int fold_core_begin(xccl_sched_t *s, const fold_t *f, size_t bytes, int steps,
                                  xccl_buf_id_t *cur, size_t *scratch)
{
    if (fold_in(s, f, bytes)) {
        *cur = XCCL_BUF_RECV;
        *scratch = bytes;
    }
    if (f->vr >= 0) {
        return 1;
    }
    for (int k = 0; k < 2 * steps; k++) {
        xccl_sched_step(s);
    }
    return 0;
}

/* The byte range of blocks [b, b + n) of count elements cut into f->p2
 * chunks: *off, returns the length. */
static inline size_t fold_blocks(const xccl_sched_t *s, const fold_t *f, size_t count, int b, int n,
                                 size_t *off)
{
    *off = chunk_first(count, f->p2, b) * s->elem_size;
    return chunk_first(count, f->p2, b + n) * s->elem_size - *off;
}

/* One exchange of a reduce-scatter by halving among the core's virtual
 * ranks (Rabenseifner, Swing): in a new step, send blocks [give, give + n)
 * of cur to core rank pv, receive its part of blocks [keep, keep + n) into
 * SCRATCH and reduce them into RECV, the lower virtual rank's operand on
 * the left (the same order on both sides).  Returns the bytes kept, which
 * SCRATCH must hold. */
static inline size_t fold_halving_exchange(xccl_sched_t *s, const fold_t *f, int pv, xccl_buf_id_t cur,
                                           size_t count, int keep, int give, int n)
{
    const int peer = fold_real_rank(f, pv);
    size_t koff, goff;
    const size_t klen = fold_blocks(s, f, count, keep, n, &koff);
    const size_t glen = fold_blocks(s, f, count, give, n, &goff);
    const xccl_ref_t mine = xccl_ref(cur, koff), theirs = xccl_ref(XCCL_BUF_SCRATCH, 0);

    xccl_sched_step(s);
    xccl_sched_recv(s, peer, theirs, klen);
    xccl_sched_send(s, peer, xccl_ref(cur, goff), glen);
    xccl_sched_reduce(s, xccl_ref(XCCL_BUF_RECV, koff), f->vr < pv ? mine : theirs,
                      f->vr < pv ? theirs : mine, klen);
    return klen;
}

/* One exchange of an allgather by doubling, the mirror of the above: in a
 * new step, send blocks [mine, mine + n) of RECV to core rank pv and
 * receive its blocks [theirs, theirs + n) straight into place. */
static inline void fold_doubling_exchange(xccl_sched_t *s, const fold_t *f, int pv, size_t count,
                                          int mine, int theirs, int n)
{
    const int peer = fold_real_rank(f, pv);
    size_t moff, toff;
    const size_t mlen = fold_blocks(s, f, count, mine, n, &moff);
    const size_t tlen = fold_blocks(s, f, count, theirs, n, &toff);

    xccl_sched_step(s);
    xccl_sched_recv(s, peer, xccl_ref(XCCL_BUF_RECV, toff), tlen);
    xccl_sched_send(s, peer, xccl_ref(XCCL_BUF_RECV, moff), mlen);
}

#endif
