/*
 * Reduce to one root through the node's shared segment (algos/shm_util.h
 * for the pipeline).  Whoever reduces an element reduces it in rank order,
 * ((x0 op x1) op x2) ... op x(p-1), so the root gets the same bits as
 * from every other rank-order reduction, for any op, floats included.
 * Only the root's RECV is named.  A slot of fewer than three elements is
 * refused, whatever the count.
 *
 * Sliced (three ranks or more, above SHM_REDUCE_ROOT_BYTES): per piece
 * three stages, the slot holding three buffers, a barrier among all ranks
 * after every step:
 *   copy the piece of SEND into the own slot, but for the own slice j,
 *      which only j reads
 *   -> rank j reduces slice j of the piece over every rank's slot, its
 *      own input straight from SEND, into slice j of its own slot; the
 *      root into its RECV (no copy out of its own slice)
 *   -> the root copies the other slices out of their owners' slots into
 *      RECV.
 *   cost per rank: n (p-1)/p copied in, n/p reduced p-1 times; the root
 *   n (p-1)/p copied out; pieces + 2 steps.
 * Root alone (at most SHM_REDUCE_ROOT_BYTES, or two ranks): per piece two
 * stages: every other rank copies the piece into its slot and posts; the
 * root waits for them all, reduces the piece over every slot (its own
 * input from SEND) into RECV and posts.  Nobody waits for anybody but the
 * root within the call: a rank writes a buffer again once the root's
 * flag says it is done with the piece there.  Where the slot has halves
 * (a slot of 8.5 KiB and up: shm_half), a call uses one half and the next
 * call the other (shm_rotate_room), in pieces of half a half, at most
 * SHM_REDUCE_MAX_PIECE, as many buffers as the half holds; else two
 * buffers of half the slot, the pieces as large.
 *   cost: n copied in per other rank, n reduced p-1 times at the root;
 *   one flag wait per piece (the root: p-1).
 * The rule: the sliced form's two extra barriers cost every rank p-1 flag
 * waits each, about what the root spends reducing 2 KiB p-1 times more
 * than its slice (xccl_cost.h: two flags per 2 KiB of gamma), so below
 * that the root reduces alone.  Of two ranks the root reduces alone at
 * every size: slicing would halve its reductions but add the copies of
 * half its input in and of the other half out, more than it saves.
 *
 * In place (the root's SEND is its RECV): a piece of RECV is written only
 * once its SEND has been read (copied in at an earlier step, or read by
 * the reduction that writes it), and pieces are disjoint.  The root
 * reduces into RECV, its own input read from SEND: the same range as the
 * result, which the first reduction may name (x0 op x1: the root 0 or 1)
 * but a later one may not, as the partial results have overwritten it by
 * then; a root of 2 or more in place copies its own input into its slot
 * with the rest and reads it there.
 *
 * How a call ends, so that the next one does not overwrite what the root
 * still reads:
 *   the root alone in the halves: no exit waits (shm_enter, shm_leave).
 *     Every rank first posts 0 ("entered this call: done with the calls
 *     before"), in a step of its own (a root that writes nothing too: its
 *     waits for the copies would hold the post back, which a writer's
 *     entry may be waiting for); a rank that writes its slot (all but
 *     the root, and a root that copies its own input in) then waits
 *     for every peer to have entered the call before (a flag of that call
 *     or a later one).  The last call before this one that used this
 *     call's half is the one before that, whose root (whoever it was)
 *     is done reading it once it entered the call after; the call before
 *     used the other half.  So a rank that gives its piece runs on into
 *     the next call while the root still reduces, up to a call ahead of
 *     the slowest peer, and within a call only the root waits for the
 *     others.  The root's flags rise from the entry's 0: 1, 2, ... (the
 *     others' waits for them are never met by the entry), and every rank
 *     posts SHM_DONE last ("done reading the peers' slots in this
 *     call"): a next call of another layout (the sliced form, another
 *     collective's regions) first waits for every peer's SHM_DONE, which
 *     the executor settles (xccl_exec_set_owed).  No deadlock: the
 *     entry's waits need a peer to have started an earlier call or this
 *     one, whose first step waits for nobody (so a peer whose previous
 *     call posted nothing meets them too), and every call before ends,
 *     by induction over the calls; within the call the others wait only
 *     for the root's flag of an earlier piece, the root only for the
 *     others' copies of this one;
 *   otherwise: the root's last flag comes after its last read of a
 *     peer's slot, and every other rank waits for it (the sliced form's
 *     last barrier is that wait alone: the peers' reads of the slots
 *     ended with the barrier before); the root's own slot, once the
 *     others are past their last barrier, is read by nobody but itself.
 */
#include "shm_util.h"
#include "xccl_build.h"

/* At most this many bytes, the root reduces alone (the rule above). */
#define SHM_REDUCE_ROOT_BYTES ((size_t) 2048)
/* Pieces of the root-alone form in the halves, at most this (as
 * algos/shm_gather.c's): the copies in and the reductions overlap from
 * the second piece on. */
#define SHM_REDUCE_MAX_PIECE ((size_t) 65536)

static int root_alone(xccl_sched_t *s, size_t bytes, int root, int own_in_slot)
{
    const int p = s->size, r = s->rank, writes = r != root || own_in_slot;
    const size_t es = s->elem_size, most = shm_half(s) / 2;
    /* pieces of half a half where the slot has halves (the same on every
     * rank: from the slot alone), else of half the slot */
    size_t buf = shm_floor(most < SHM_REDUCE_MAX_PIECE ? most : SHM_REDUCE_MAX_PIECE, es);
    if (0 == buf) {
        buf = shm_buffer(s, 2, 1, es);
    }
    const int halves = shm_halves(s, buf), depth = halves ? (int) (shm_room(s, buf) / buf) : 2;
    const size_t nchunks = (bytes + buf - 1) / buf;

    if (halves) {
        shm_enter(s, writes);
    }
    for (size_t t = 0; t < nchunks; t++) {
        size_t lo;
        const size_t len = shm_piece(bytes, buf, t, &lo), at = shm_buf_off(buf, t, depth);
        if (writes || !halves) {
            shm_use(s, at + len);
        }
        if (r != root) {
            if (t >= (size_t) depth) {
                xccl_sched_wait(s, root, (uint32_t) (t - (size_t) depth + 1));
            }
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_SEND, lo), len);
        } else {
            for (int k = 1; k < p; k++) {
                xccl_sched_wait(s, mod(r + k, p), (uint32_t) (t + 1));
            }
            xccl_ref_t own = xccl_ref(XCCL_BUF_SEND, lo);
            if (own_in_slot) {
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), own, len);
                own = xccl_ref(XCCL_BUF_SLOT, at);
            }
            shm_reduce_ranks(s, xccl_ref(XCCL_BUF_RECV, lo), own, at, len);
        }
        xccl_sched_post(s, (uint32_t) (t + 1));
        xccl_sched_step(s);
    }
    if (halves) {
        shm_leave(s);
    } else if (r != root) {
        xccl_sched_wait(s, root, (uint32_t) nchunks);
    }
    shm_rotate_room(s, buf);
    return xccl_sched_finalize(s);
}

static int sliced(xccl_sched_t *s, size_t count, int root, int own_in_slot)
{
    const int p = s->size, r = s->rank, depth = 3;
    const size_t es = s->elem_size, buf = shm_buffer(s, depth, 1, es), ce = buf / es;
    const size_t nchunks = (count + ce - 1) / ce;

    for (size_t t = 0; t < nchunks + 2; t++) {
        /* stage 0: piece t of SEND into the own slot, but the own slice */
        if (t < nchunks) {
            const size_t n = t + 1 < nchunks ? ce : count - t * ce;
            const size_t at = shm_buf_off(buf, t, depth);
            size_t first = n, len = 0;
            if (!own_in_slot) {
                len = xccl_build_shm_slice(n, p, es, r, &first);
            }
            const size_t rest = first + len;
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_SEND, t * ce * es), first * es);
            if (rest < n) {
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at + rest * es),
                                xccl_ref(XCCL_BUF_SEND, (t * ce + rest) * es), (n - rest) * es);
            }
            shm_use(s, at + n * es);
        }
        /* stage 1: the own slice of piece t - 1, into the own slot or
         * (the root) RECV */
        if (t >= 1 && t - 1 < nchunks) {
            const size_t c = t - 1, n = c + 1 < nchunks ? ce : count - c * ce;
            size_t first;
            const size_t len = xccl_build_shm_slice(n, p, es, r, &first) * es;
            const size_t at = shm_buf_off(buf, c, depth) + first * es, in = (c * ce + first) * es;
            const xccl_ref_t acc = r == root ? xccl_ref(XCCL_BUF_RECV, in) : xccl_ref(XCCL_BUF_SLOT, at);
            const xccl_ref_t own = own_in_slot ? xccl_ref(XCCL_BUF_SLOT, at) : xccl_ref(XCCL_BUF_SEND, in);
            shm_reduce_ranks(s, acc, own, at, len);
        }
        /* stage 2 (the root): the other slices of piece t - 2 */
        if (r == root && t >= 2) {
            const size_t c = t - 2, n = c + 1 < nchunks ? ce : count - c * ce;
            for (int k = 1; k < p; k++) {
                const int j = mod(r + k, p);
                size_t first;
                const size_t len = xccl_build_shm_slice(n, p, es, j, &first) * es;
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (c * ce + first) * es),
                                xccl_ref_peer(j, XCCL_BUF_SLOT, shm_buf_off(buf, c, depth) + first * es), len);
            }
        }
        /* a barrier after every step; the root alone then copies out the
         * last piece, and the others wait only for it to be done */
        if (t < nchunks || (t == nchunks && r == root)) {
            mesh_barrier(s, (uint32_t) (t + 1));
        } else if (t == nchunks) {
            xccl_sched_post(s, (uint32_t) (t + 1));
            xccl_sched_step(s);
            xccl_sched_wait(s, root, (uint32_t) (t + 2));
        } else if (r == root) {
            xccl_sched_post(s, (uint32_t) (t + 1));
        }
    }
    s->stream_recv = r == root && count * es >= XCCL_STREAM_BYTES;
    return xccl_sched_finalize(s);
}

int xccl_build_reduce_shm(xccl_sched_t *s, size_t count, int root, int in_place)
{
    const int p = s->size;
    const size_t es = s->elem_size, bytes = count * es;

    s->algo = "shm";
    if (0 == count) {
        return xccl_sched_finalize(s);
    }
    if (1 == p) {
        if (!in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
        }
        return xccl_sched_finalize(s);
    }
    if (0 == shm_buffer(s, 3, 1, es)) {
        return shm_fail(s);
    }
    const int own_in_slot = s->rank == root && in_place && root >= 2;
    if (2 == p || bytes <= SHM_REDUCE_ROOT_BYTES) {
        return root_alone(s, bytes, root, own_in_slot);
    }
    return sliced(s, count, root, own_in_slot);
}
