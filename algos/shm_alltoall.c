/*
 * Alltoall through the node's shared segment (algos/shm_util.h): each rank
 * copies what it sends into its slot, every rank reads its blocks from the
 * others' slots.  Two stages per chunk, two buffers in the slot:
 *   copy piece t of every block for a peer into the own slot (the block
 *   for q at ((q - r - 1) mod p) * pc: of two ranks both at 0, where the
 *   slots trading places finds them, shm_swap; SEND in two copies, less
 *   the own block, when it fits)
 *   -> copy piece t of the block for this rank from every peer's slot.
 * In place (SEND is RECV): piece t - 1 of block q of RECV is written in
 * step t, after it was copied in (step t - 1); step t copies in piece t
 * first.  The own block stays (in place) or goes straight to RECV, piece
 * t after the barrier that posted step t's pieces, while the peers read
 * them (figures: docs/bench/select-figures.md).
 *   cost per rank: (p-1)/p n copied in and out; chunks + 1 barriers.
 * A whole schedule of two ranks swaps the slots from call to call
 * (shm_swap); of more, where its slot holds the buffers twice or more, it
 * moves through them (shm_rotate, algos/shm_util.h).  Of one chunk, it
 * then has no exit barrier (shm_no_exit).
 */
#include "shm_util.h"
#include "xccl_build.h"

static int build(xccl_sched_t *s, size_t block, int in_place, int rotate)
{
    const int p = s->size, r = s->rank, depth = 2;

    s->algo = "shm";
    if (0 == block || 1 == p) {
        if (!in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block),
                            xccl_ref(XCCL_BUF_SEND, (size_t) r * block), block);
        }
        return xccl_sched_finalize(s);
    }
    const size_t whole = shm_floor(shm_cap(s) / (size_t) depth, 1);
    const size_t pc = (size_t) p * block <= whole ? block : shm_buffer(s, depth, p, 1) / (size_t) p;
    if (0 == pc) {
        return shm_fail(s);
    }
    const size_t buf = pc * (size_t) p, nchunks = (block + pc - 1) / pc;
    if (rotate) {
        shm_swap(s);                       /* two ranks; more move through regions */
        if (!s->slot_swap) {
            shm_rotate(s, (nchunks < (size_t) depth ? nchunks : (size_t) depth) * buf);
        }
        shm_no_exit(s, nchunks);
        s->stream_recv = (size_t) p * block >= XCCL_STREAM_BYTES;
    }
    for (size_t t = 0; t < nchunks + 1; t++) {
        if (t < nchunks) {
            const size_t at = shm_buf_off(buf, t, depth);
            hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
            for (int q = 0; q < p; q++) {
                size_t lo;
                const size_t len = q == r ? 0 : shm_piece(block, pc, t, &lo);
                const size_t to = at + (size_t) mod(q - r - 1, p) * pc;
                hier_copy_add(&cp, xccl_ref(XCCL_BUF_SLOT, to), xccl_ref(XCCL_BUF_SEND, (size_t) q * block + lo),
                              len);
                if (len) {
                    shm_use(s, to + len);
                }
            }
            hier_copy_flush(&cp);
        }
        if (t >= 1) {
            const size_t at = shm_buf_off(buf, t - 1, depth);
            for (int k = 1; k < p; k++) {
                const int q = mod(r + k, p);
                size_t lo;
                const size_t len = shm_piece(block, pc, t - 1, &lo);
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) q * block + lo),
                                xccl_ref_peer(q, XCCL_BUF_SLOT, at + (size_t) mod(r - q - 1, p) * pc), len);
            }
        }
        shm_step_barrier(s, t, nchunks);
        /* piece t of the own block, while the peers read step t's pieces */
        if (!in_place && t < nchunks) {
            size_t lo;
            const size_t len = shm_piece(block, pc, t, &lo);
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block + lo),
                            xccl_ref(XCCL_BUF_SEND, (size_t) r * block + lo), len);
        }
    }
    return xccl_sched_finalize(s);
}

int xccl_build_alltoall_shm(xccl_sched_t *s, size_t block, int in_place)
{
    return build(s, block, in_place, 0);
}

int xccl_build_alltoall_shm_whole(xccl_sched_t *s, size_t block, int in_place)
{
    return build(s, block, in_place, 1);
}
