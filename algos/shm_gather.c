/*
 * Gather and gatherv through the node's shared segment (algos/shm_util.h):
 * each rank copies its block into its own slot, piece by piece, and the
 * root copies the pieces out of the slots into its RECV.  Pieces are of
 * at most GATHER_MAX_PIECE and follow from the slot's size alone (the
 * same on every rank, for gatherv's ranks know only their own block): a
 * quarter of the slot where that is SHM_ALIGN or more, so that a rank's
 * `depth` buffers of one piece each fill one half of its slot, and the
 * next call the other (shm_halves); else half the slot, the buffers over
 * all of it.  Rank q's block has n_q pieces; the root's steps follow the
 * longest:
 *   rank q != root, piece t < n_q: (t >= depth: the root posted
 *     t - depth + 1, i.e. read piece t - depth from the buffer piece t
 *     reuses) copy piece t into its slot, flag t + 1;
 *   root, piece t: for every q with a piece t, wait for q's flag t + 1 and
 *     copy the piece out (a step each: one slow rank does not hold up the
 *     copies from the others), then flag t + 1.
 * What keeps a call from overwriting what the root of an earlier one
 * still reads:
 *   halves: no exit wait.  Every rank first posts 0 in a step of its own
 *     (shm_enter); a writer (a rank other than the root with a block of a
 *     byte or more) then waits for every peer to have entered the call
 *     before, i.e. to have finished the call before that: the last one
 *     that used this call's half.  The root and the ranks with nothing
 *     to write write no slot and wait for nobody.  Every rank ends with
 *     SHM_DONE (shm_leave): a rank leaves once its last piece is in and
 *     runs up to a call ahead of its slowest peer, instead of waiting for
 *     the root each call; a next call of another layout first waits for
 *     every peer's SHM_DONE (the executor's settlement,
 *     xccl_exec_set_owed), and this one for what one of another layout
 *     before it left owed.  The flags of the call rise from 1 after the
 *     entry's 0.  Nothing waits in a cycle: the entry waits are for flags
 *     of earlier calls, which every peer posts before it waits for
 *     anything of this call (its entry post comes first, in a step of its
 *     own, also after a call that posted nothing), and within the call
 *     ranks wait only for the root and the root for the writers;
 *   whole slot (small slots): at the end a rank other than the root waits
 *     for the root's flag n_q (the root read its last piece) before it
 *     leaves: nobody overwrites its slot in the next call while the root
 *     reads it.
 * A rank waits only for the root and the root only for the ranks whose
 * block has the piece: no rank's schedule depends on a size only another
 * rank knows.  The root's own block goes straight from SEND to RECV
 * first (or stays there, in place), while the others copy their first
 * pieces in.  RECV is not touched off the root; zero-byte blocks take no
 * step; bytes in the gaps of RECV are never written; a RECV of
 * XCCL_STREAM_BYTES or more is written past the caches (stream_recv).  A
 * slot under 2 bytes is refused by every rank alike, whatever the sizes
 * (gather's block of 0 bytes, which every rank knows, needs none).
 *   cost: each rank copies its block in, the root the others' out; rank
 *   q waits for at most n_q flags (and, halves, every peer's entry), the
 *   root for one per piece of each other block.
 */
#include "shm_util.h"
#include "xccl_build.h"

/* A piece costs a flag, about what 4 KiB cost to copy (algos/shm_bcast.c):
 * pieces of 64 KiB keep that small and the pipeline's fill short. */
#define GATHER_MAX_PIECE ((size_t) 65536)

static size_t pieces(size_t n, size_t pc)
{
    return (n + pc - 1) / pc;
}

static int build(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "shm";
    if (1 == p) {
        if (!in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[r]), xccl_ref(XCCL_BUF_SEND, 0), bytes[r]);
        }
        return xccl_sched_finalize(s);
    }
    size_t pc = shm_floor(shm_half(s) / 2, 1);
    if (pc < SHM_ALIGN) {
        pc = shm_floor(shm_cap(s) / 2, 1);
    }
    if (0 == pc) {
        return shm_fail(s);
    }
    pc = pc < GATHER_MAX_PIECE ? pc : GATHER_MAX_PIECE;
    const int halves = shm_halves(s, pc), depth = (int) (shm_room(s, pc) / pc);
    if (halves) {
        shm_enter(s, r != root && bytes[r] > 0);    /* the writers: the others, of their blocks */
    }
    if (r == root && !in_place) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[r]), xccl_ref(XCCL_BUF_SEND, 0), bytes[r]);
    }
    if (r != root) {
        const size_t n = pieces(bytes[r], pc);
        for (size_t t = 0; t < n; t++) {
            size_t lo;
            const size_t len = shm_piece(bytes[r], pc, t, &lo), at = shm_buf_off(pc, t, depth);
            if (t > 0) {
                xccl_sched_step(s);
            }
            if (t >= (size_t) depth) {
                xccl_sched_wait(s, root, (uint32_t) (t - (size_t) depth + 1));
            }
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_SEND, lo), len);
            shm_use(s, at + len);
            xccl_sched_post(s, (uint32_t) (t + 1));
        }
        if (!halves && n > 0) {
            xccl_sched_step(s);
            xccl_sched_wait(s, root, (uint32_t) n);    /* the exit wait */
        }
    } else {
        size_t most = 0;
        for (int q = 0; q < p; q++) {
            if (q != r && pieces(bytes[q], pc) > most) {
                most = pieces(bytes[q], pc);
            }
        }
        for (size_t t = 0; t < most; t++) {
            for (int k = 1; k < p; k++) {
                const int q = mod(r + k, p);
                size_t lo;
                const size_t len = shm_piece(bytes[q], pc, t, &lo);
                if (len > 0) {
                    xccl_sched_step(s);
                    xccl_sched_wait(s, q, (uint32_t) (t + 1));
                    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[q] + lo),
                                    xccl_ref_peer(q, XCCL_BUF_SLOT, shm_buf_off(pc, t, depth)), len);
                }
            }
            xccl_sched_post(s, (uint32_t) (t + 1));    /* with the last copy of piece t */
        }
        size_t end = 0;
        for (int q = 0; q < p; q++) {
            end = bytes[q] && displs[q] + bytes[q] > end ? displs[q] + bytes[q] : end;
        }
        s->stream_recv = end >= XCCL_STREAM_BYTES;
    }
    shm_rotate_room(s, pc);
    if (halves) {
        shm_leave(s);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_gatherv_shm(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root, int in_place)
{
    return build(s, bytes, displs, root, in_place);
}

int xccl_build_gather_shm(xccl_sched_t *s, size_t block, int root, int in_place)
{
    return shm_rooted_even(s, block, root, in_place, build);
}
