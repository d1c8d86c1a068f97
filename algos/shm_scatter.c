/*
 * Scatter and scatterv through the node's shared segment
 * (algos/shm_util.h): the root copies the blocks for the others into its
 * slot, piece by piece, and each rank copies its own out.  The root's slot
 * holds `depth` buffers, each cut into p - 1 parts of one piece, the part
 * of rank q at ((q - root - 1) mod p) pieces.  Pieces are of at most
 * SCATTER_MAX_PIECE and follow from p and the slot's size alone (the same
 * on every rank, for scatterv's ranks know only their own block): a
 * quarter of the slot over p - 1 where that is SHM_ALIGN or more, so that
 * the buffers fill one half of the slot, and the next call the other
 * (shm_halves); else half the slot over p - 1, the buffers over all of
 * it.  Rank q's block has n_q pieces; the root's steps follow the longest:
 *   root, piece t: for every q with a piece t, (t >= depth: wait for q's
 *     flag t - depth + 1, i.e. q read piece t - depth from the part piece
 *     t reuses) copy piece t into q's part (a step each: one slow reader
 *     does not hold up the others' parts), then flag t + 1;
 *   rank q != root, piece t < n_q: wait for the root's flag t + 1, copy
 *     piece t out of its part, flag t + 1.
 * What keeps a call from overwriting what the readers of an earlier one
 * still read:
 *   halves: no exit wait.  Every rank first posts 0 in a step of its own
 *     (shm_enter); the writer (the root, where another block has a byte
 *     or more) then waits for every peer to have entered the call before,
 *     i.e. to have finished the call before that: the last one that used
 *     this call's half.  The readers write no slot and wait for nobody at
 *     entry.  Every rank ends with SHM_DONE (shm_leave): the root leaves
 *     once its last pieces are in and runs up to a call ahead of its
 *     slowest reader, instead of waiting for every reader each call; a
 *     next call of another layout first waits for every peer's SHM_DONE
 *     (the executor's settlement, xccl_exec_set_owed), and this one for
 *     what one of another layout before it left owed.  The flags of the
 *     call rise from 1 after the entry's 0.  Nothing waits in a cycle: the
 *     entry waits are for flags of earlier calls, which every peer posts
 *     before it waits for anything of this call (its entry post comes
 *     first, in a step of its own, also after a call that posted
 *     nothing), and within the call the readers wait only for the root
 *     and the root for the readers of earlier pieces;
 *   whole slot (small slots): at the end the root waits for every q's
 *     last flag n_q (nobody reads its slot any more) before it leaves.
 * A rank waits only for the root and the root only for the ranks whose
 * block has the piece: no rank's schedule depends on a size only another
 * rank knows.  The root's own block goes straight from SEND to RECV last
 * (or stays in SEND, in place: RECV is not written), while the others copy
 * their last pieces out.  SEND is not touched off the root; zero-byte
 * blocks take no step; a block of XCCL_STREAM_BYTES or more is written
 * past the caches (stream_recv).  A slot under 2 (p - 1) bytes is refused
 * by every rank alike, whatever the sizes (scatter's block of 0 bytes,
 * which every rank knows, needs none).
 *   cost: the root copies the others' blocks in, each rank its own out;
 *   rank q waits for n_q flags, the root for at most one per piece of
 *   each other block (and, halves, every peer's entry).
 */
#include "shm_util.h"
#include "xccl_build.h"

/* A piece costs a flag, about what 4 KiB cost to copy (algos/shm_bcast.c):
 * pieces of 64 KiB keep that small and the pipeline's fill short. */
#define SCATTER_MAX_PIECE ((size_t) 65536)

static size_t pieces(size_t n, size_t pc)
{
    return (n + pc - 1) / pc;
}

static int build(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root, int in_place)
{
    const int p = s->size, r = s->rank;
    const xccl_ref_t own = xccl_ref(XCCL_BUF_RECV, 0);

    s->algo = "shm";
    if (1 == p) {
        if (!in_place) {
            xccl_sched_copy(s, own, xccl_ref(XCCL_BUF_SEND, displs[r]), bytes[r]);
        }
        return xccl_sched_finalize(s);
    }
    const size_t parts = (size_t) p - 1;
    size_t pc = shm_floor(shm_half(s) / 2 / parts, 1);
    if (pc < SHM_ALIGN) {
        pc = shm_buffer(s, 2, p - 1, 1) / parts;
    }
    if (0 == pc) {
        return shm_fail(s);
    }
    pc = pc < SCATTER_MAX_PIECE ? pc : SCATTER_MAX_PIECE;
    const int halves = shm_halves(s, parts * pc), depth = (int) (shm_room(s, parts * pc) / (parts * pc));
    size_t most = 0;
    for (int q = 0; r == root && q < p; q++) {
        if (q != r && pieces(bytes[q], pc) > most) {
            most = pieces(bytes[q], pc);
        }
    }
    if (halves) {
        shm_enter(s, r == root && most > 0);       /* the writer: the root, of the others' blocks */
    }
    if (r != root) {
        const size_t n = pieces(bytes[r], pc);
        const size_t part = (size_t) (mod(r - root, p) - 1) * pc;
        for (size_t t = 0; t < n; t++) {
            size_t lo;
            const size_t len = shm_piece(bytes[r], pc, t, &lo);
            if (t > 0) {
                xccl_sched_step(s);
            }
            xccl_sched_wait(s, root, (uint32_t) (t + 1));
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, lo),
                            xccl_ref_peer(root, XCCL_BUF_SLOT, shm_buf_off(parts * pc, t, depth) + part), len);
            xccl_sched_post(s, (uint32_t) (t + 1));
        }
        s->stream_recv = bytes[r] >= XCCL_STREAM_BYTES;
    } else {
        for (size_t t = 0; t < most; t++) {
            for (int k = 1; k < p; k++) {
                const int q = mod(r + k, p);
                size_t lo;
                const size_t len = shm_piece(bytes[q], pc, t, &lo);
                const size_t at = shm_buf_off(parts * pc, t, depth) + (size_t) (k - 1) * pc;
                if (len > 0) {
                    xccl_sched_step(s);
                    if (t >= (size_t) depth) {
                        xccl_sched_wait(s, q, (uint32_t) (t - (size_t) depth + 1));
                    }
                    xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_SEND, displs[q] + lo), len);
                    shm_use(s, at + len);
                }
            }
            xccl_sched_post(s, (uint32_t) (t + 1));    /* with the last copy of piece t */
        }
        if (!in_place) {
            xccl_sched_copy(s, own, xccl_ref(XCCL_BUF_SEND, displs[r]), bytes[r]);
        }
        if (!halves) {
            /* the exit waits: every reader has read its last piece */
            xccl_sched_step(s);
            for (int k = 1; k < p; k++) {
                const int q = mod(r + k, p);
                if (bytes[q] > 0) {
                    xccl_sched_wait(s, q, (uint32_t) pieces(bytes[q], pc));
                }
            }
        }
    }
    shm_rotate_room(s, parts * pc);
    if (halves) {
        shm_leave(s);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_scatterv_shm(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root, int in_place)
{
    return build(s, bytes, displs, root, in_place);
}

int xccl_build_scatter_shm(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return shm_rooted_even(s, block, root, in_place, build);
}
