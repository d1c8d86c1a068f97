/*
 * Shared by the peer-access ("mesh") builders: flag barriers among all the
 * ranks of the group, and a reference to any rank's buffer.  Not part of
 * the public API (xccl_algos.h).
 */
#ifndef XCCL_MESH_UTIL_H
#define XCCL_MESH_UTIL_H

#include "hier_util.h"

/* Buffer buf of rank q, from this rank's point of view (its own when q is
 * this rank: then it needs no peer access). */
static inline xccl_ref_t mesh_ref(const xccl_sched_t *s, int q, xccl_buf_id_t buf, size_t off)
{
    return q == s->rank ? xccl_ref(buf, off) : xccl_ref_peer(q, buf, off);
}

/* A barrier among all ranks: this rank's flag becomes val once the
 * current step's local actions have run; the next step's local actions
 * run only once every peer's flag has reached val.  Values rise by one
 * per barrier, the same on every rank.  One rank: nothing to wait for. */
static inline void mesh_barrier(xccl_sched_t *s, uint32_t val)
{
    if (s->size < 2) {
        return;
    }
    xccl_sched_post(s, val);
    xccl_sched_step(s);
    /* Peers from r+1 on: not all ranks poll the same flag first. */
    for (int k = 1; k < s->size; k++) {
        xccl_sched_wait(s, mod(s->rank + k, s->size), val);
    }
}

/* The rooted peer-access schedules (reduce, gather(v), scatter(v): the
 * root reads or writes every rank's buffer itself, in both forms, "mesh"
 * and "leader"): a rank other than the root that has a block posts flag 1
 * (its input is there, its RECV may be written) and waits for the root's
 * flag 2 (the root is done with its buffers) before it leaves. */
static inline void mesh_lend(xccl_sched_t *s, int root)
{
    xccl_sched_post(s, 1);
    xccl_sched_step(s);
    xccl_sched_wait(s, root, 2);
}

/* Bytes of a piece for mesh_reduce_copied: `piece` rounded down to whole
 * elements of es bytes, at least one, at most max(n, 1) elements. */
static inline size_t mesh_piece_bytes(size_t piece, size_t es, size_t n)
{
    size_t pc = piece / es;
    pc = pc ? pc : 1;
    return (pc > n && n > 0 ? n : pc) * es;
}

/* Where the peers' buffers can only be copied (XCCL_PEER_COPY), the
 * reduction of bytes [at, at + n) of every rank's SEND in rank order
 * 0..p-1, one piece of pc bytes at a time: operand q is this rank's own
 * SEND or a copy of rank q's in SCRATCH (x0 at 0, the others at pc: x0 and
 * x1 may both be peers').  Piece o's result goes to dst + o; partial
 * results (p > 2) to dst + o too, or, with acc_piece, to SCRATCH at 2 pc
 * (where dst + o holds this rank's own operand until its turn). */
static inline void mesh_reduce_copied(xccl_sched_t *s, size_t at, size_t n, size_t pc, xccl_ref_t dst,
                                      int acc_piece)
{
    const int p = s->size, r = s->rank;
    for (size_t o = 0; o < n; o += pc) {
        const size_t len = n - o < pc ? n - o : pc;
        const xccl_ref_t out = { dst.buf, dst.off + o, dst.peer_plus1 };
        const xccl_ref_t acc = acc_piece ? xccl_ref(XCCL_BUF_SCRATCH, 2 * pc) : out;
        xccl_ref_t x[2];
        for (int q = 0; q < p; q++) {
            const int t = q > 0;
            x[t] = xccl_ref(XCCL_BUF_SEND, at + o);
            if (q != r) {
                x[t] = xccl_ref(XCCL_BUF_SCRATCH, (size_t) t * pc);
                xccl_sched_copy(s, x[t], xccl_ref_peer(q, XCCL_BUF_SEND, at + o), len);
            }
            if (q > 0) {
                xccl_sched_reduce(s, q == p - 1 ? out : acc, 1 == q ? x[0] : acc, x[1], len);
            }
        }
    }
}

#endif
