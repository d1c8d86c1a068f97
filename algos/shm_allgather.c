/*
 * Allgather(v) through the node's shared segment (algos/shm_util.h): each
 * rank copies its block into its slot, every rank copies the others'
 * blocks out of their slots.  Two stages per chunk (piece t of every
 * block), two buffers in the slot:
 *   copy piece t of the own block into the own slot
 *   -> copy piece t of every peer's block from its slot into RECV.
 * The own block goes straight from SEND to RECV (not in place), piece t
 * right after it was copied in (still in cache: a large block is read from
 * memory once, not twice; figures: docs/bench/select-figures.md).
 *   cost per rank: own block copied in and out, the others' copied out;
 *   chunks + 1 barriers.
 * A flat allgather whose slot holds its buffers twice or more moves
 * through them from call to call (shm_rotate): a rank then does not write
 * the lines its peers read in the last calls and may still hold, which
 * costs a probe of their caches per line (figures:
 * docs/bench/select-figures.md).  Not as a stage of a two-level schedule
 * (those are appended).  Of one chunk, it then has no exit barrier
 * (shm_no_exit).
 */
#include "shm_util.h"
#include "xccl_build.h"

#include <stdlib.h>

static int build(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place, int alternate)
{
    const int p = s->size, r = s->rank, depth = 2;
    size_t longest = 0;

    s->algo = "shm";
    for (int q = 0; q < p; q++) {
        longest = bytes[q] > longest ? bytes[q] : longest;
    }
    /* SEND holds the own block, or in place it is at RECV + displs[r] */
    const xccl_ref_t mine = in_place ? xccl_ref(XCCL_BUF_RECV, displs[r]) : xccl_ref(XCCL_BUF_SEND, 0);
    if (0 == longest || 1 == p) {
        if (!in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[r]), mine, bytes[r]);
        }
        return xccl_sched_finalize(s);    /* nothing to read from a peer */
    }
    const size_t pc = shm_buffer(s, depth, 1, 1);
    if (0 == pc) {
        return shm_fail(s);
    }
    const size_t nchunks = (longest + pc - 1) / pc;
    if (alternate) {
        shm_swap(s);                       /* two ranks; more move through regions */
        if (!s->slot_swap) {
            shm_rotate(s, 1 == nchunks ? longest : (size_t) depth * pc);
        }
        shm_no_exit(s, nchunks);
        s->stream_recv = displs[p - 1] + bytes[p - 1] >= XCCL_STREAM_BYTES;
    }
    for (size_t t = 0; t < nchunks + 1; t++) {
        if (t < nchunks) {
            size_t lo;
            const size_t len = shm_piece(bytes[r], pc, t, &lo), at = shm_buf_off(pc, t, depth);
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref((xccl_buf_id_t) mine.buf, mine.off + lo), len);
            if (len) {
                shm_use(s, at + len);
            }
            if (!in_place) {
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[r] + lo), xccl_ref(XCCL_BUF_SEND, lo), len);
            }
        }
        if (t >= 1) {
            for (int k = 1; k < p; k++) {
                const int q = mod(r + k, p);
                size_t lo;
                const size_t len = shm_piece(bytes[q], pc, t - 1, &lo);
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[q] + lo),
                                xccl_ref_peer(q, XCCL_BUF_SLOT, shm_buf_off(pc, t - 1, depth)), len);
            }
        }
        shm_step_barrier(s, t, nchunks);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_allgatherv_shm(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place)
{
    return build(s, bytes, displs, in_place, 0);
}

/* In place SEND is RECV + r * block: the copy of the own block is then
 * onto itself, which the executor skips. */
int xccl_build_allgather_shm(xccl_sched_t *s, size_t block)
{
    const int p = s->size;
    size_t *v = malloc(2 * (size_t) p * sizeof(size_t));
    if (NULL == v) {
        s->algo = "shm";
        return shm_fail(s);
    }
    for (int q = 0; q < p; q++) {
        v[q] = block;
        v[p + q] = (size_t) q * block;
    }
    int rc = build(s, v, v + p, 0, 1);
    free(v);
    return rc;
}
