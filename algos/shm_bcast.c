/*
 * Bcast through the node's shared segment (algos/shm_util.h): the root
 * copies its RECV into its slot, piece by piece (depth buffers), the
 * others copy each piece out.  Only the root is waited for, and waits:
 *   root, step t: (t >= depth: every rank posted t - depth + 2, i.e.
 *     finished reading piece t - depth from the buffer piece t reuses)
 *     copy piece t in, flag t + 1; at the end it waits for every rank's
 *     last flag (nobody reads its slot any more) before it leaves;
 *   others, step t >= 1: wait for the root's flag t, copy piece t - 1 out,
 *     flag t + 1.
 *   cost: the root copies n in; the others n out; pieces + 1 flag waits.
 * Pieces of about sqrt(4 KiB x n) bytes (a power of two from 8 KiB, at
 * most half the slot), as many buffers as the slot holds: the others copy
 * piece t out while the root copies piece t + 1 in, and a piece costs a
 * flag, about what 4 KiB cost to copy.  (One piece of half the slot, as
 * before, left the copies of a message up to 512 KiB one after the other.)
 * A whole schedule whose slot holds the pieces of a call twice or more
 * moves through them from call to call (shm_rotate, algos/shm_util.h; the
 * root leaves only after every reader is done with its slot, so any region
 * is free at the next call); of two ranks the slots also trade places on
 * odd calls (shm_swap: the rank that reads a call is the only one that may
 * start the next before the root leaves, and it is done).
 */
#include "shm_util.h"
#include "xccl_build.h"

#define BCAST_MIN_PIECE ((size_t) 8192)

/* The piece size for a message of n bytes, pieces of at most max. */
static size_t bcast_piece(size_t n, size_t max)
{
    size_t pc = BCAST_MIN_PIECE;
    while (pc < max / 2 && pc < n && pc * pc < n * (size_t) 4096) {
        pc *= 2;
    }
    return pc < max ? pc : max;
}

static int build(xccl_sched_t *s, size_t bytes, int root, int rotate)
{
    const int p = s->size, r = s->rank;

    s->algo = "shm";
    if (0 == bytes || 1 == p) {
        return xccl_sched_finalize(s);
    }
    const size_t pc = bcast_piece(bytes, shm_buffer(s, 2, 1, 1));
    if (0 == pc) {
        return shm_fail(s);
    }
    const int depth = (int) (shm_cap(s) / pc);
    const size_t nchunks = (bytes + pc - 1) / pc;
    for (size_t t = 0; t < nchunks + 1; t++) {
        size_t lo;
        if (r == root && t < nchunks) {
            if (t >= (size_t) depth) {
                for (int k = 1; k < p; k++) {
                    xccl_sched_wait(s, mod(r + k, p), (uint32_t) (t - (size_t) depth + 2));
                }
            }
            const size_t len = shm_piece(bytes, pc, t, &lo), at = shm_buf_off(pc, t, depth);
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_RECV, lo), len);
            shm_use(s, at + len);
            xccl_sched_post(s, (uint32_t) (t + 1));
            xccl_sched_step(s);
        } else if (r != root && t >= 1) {
            xccl_sched_wait(s, root, (uint32_t) t);
            const size_t len = shm_piece(bytes, pc, t - 1, &lo);
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, lo), xccl_ref_peer(root, XCCL_BUF_SLOT,
                                                                         shm_buf_off(pc, t - 1, depth)), len);
            xccl_sched_post(s, (uint32_t) (t + 1));
            xccl_sched_step(s);
        }
    }
    if (r == root) {
        for (int k = 1; k < p; k++) {
            xccl_sched_wait(s, mod(r + k, p), (uint32_t) (nchunks + 1));
        }
    }
    if (rotate) {
        shm_swap(s);
        shm_rotate(s, (nchunks < (size_t) depth ? nchunks : (size_t) depth) * pc);
        s->stream_recv = bytes >= XCCL_STREAM_BYTES;
    }
    return xccl_sched_finalize(s);
}

int xccl_build_bcast_shm(xccl_sched_t *s, size_t bytes, int root)
{
    return build(s, bytes, root, 0);
}

int xccl_build_bcast_shm_whole(xccl_sched_t *s, size_t bytes, int root)
{
    return build(s, bytes, root, 1);
}
