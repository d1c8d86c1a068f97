/*
 * Alltoallv through the node's shared segment (algos/shm_util.h): each
 * rank copies what it sends into its slot, every rank copies its blocks
 * out of the senders' slots.  A rank knows only its own sbytes and rbytes,
 * so the ranks disagree on how many pieces there are: no barrier among
 * all, only flags of the ranks a rank trades bytes with.
 *
 * Buffers of p - 1 regions of pc bytes each (from slot_cap and p alone:
 * the same on every rank); the region of destination q in rank r's slot
 * is (q - r - 1) mod p.  Where pieces of SHM_ALIGN or more let each half
 * of the slot hold two buffers (shm_halves), a call uses one half and the
 * next call the other (shm_rotate_room), D = half / buffer buffers in it;
 * else D = 2 buffers over the whole slot.  Piece t of the block r sends
 * to q (bytes [t pc, (t + 1) pc)) goes through region q of buffer t % D.
 * The receiver knows the piece count of each pair from rbytes, the sender
 * from sbytes.  Each rank's flag (one counter) says:
 *   2t + 1  "wrote my pieces t"        2t + 2  "read my pieces t".
 * Rank r, for t = 0 .. (its most pieces sent or received) - 1:
 *   A (if it sends a piece t): for every q it sends piece t to, with
 *     t >= D, wait for q's 2(t - D) + 2 (q has read piece t - D from the
 *     region piece t overwrites); copy the pieces t in; post 2t + 1.
 *   B (if it receives a piece t): for every q it receives piece t from,
 *     one step each: wait for q's 2t + 1, copy piece t out of q's slot;
 *     then post 2t + 2.
 * A wait is always for a value its peer posts: r waits for q's "wrote t"
 * only where q sends piece t to r (sbytes of q = rbytes of r), for "read
 * t" only where q receives piece t from r.  A flag that already passed a
 * value means the same: q posts its values in rising order, 2t + 1 after
 * its pieces t are in the slot, 2t + 2 after it read its pieces t.
 * The own block goes from SEND to RECV directly, after the first post
 * (while the peers read).
 *
 * How a call ends, so that the next one does not overwrite what a peer
 * still reads:
 *   in the halves: no exit waits (shm_enter, shm_leave).  Every rank
 *     first posts 0 ("entered this call: done with the calls before"), in
 *     a step that waits for nobody (a reader's waits come in later
 *     steps); a rank that sends pieces then waits for every
 *     peer to have entered the call before (a flag of that call or a
 *     later one).  The last call before this one that used this call's
 *     half is the one before that, and a peer that entered the call
 *     after it is done reading it; the call before used the other half.
 *     A rank so runs up to a call ahead of a slow reader instead of
 *     waiting for its readers at the end of every call.  Last, every rank
 *     posts SHM_DONE ("done reading the peers' slots in this call"): a
 *     next call of another layout (another collective's regions, the
 *     whole slot) first waits for every peer's SHM_DONE, which the
 *     executor settles (xccl_exec_set_owed; entry_waits tells this way
 *     from the no_exit schedules of the barrier's way);
 *   else: before it leaves, a rank waits for 2 n(q) from every q it sent
 *     n(q) > 0 pieces: nobody reads its slot any more, which the next
 *     call writes.
 * Flags of a call in the halves rise from the entry's 0: 1, 2, ... (a
 * wait for 2t + 1 or 2t + 2 is never met by the entry), SHM_DONE last.
 *
 * No deadlock: order each rank's phases entry < (0, A) < (0, B) < (1, A)
 * < ... and its exit last.  The entry's waits need a peer to have started
 * an earlier call, or this one, whose first step waits for nobody (so a
 * peer whose previous call posted nothing meets them too): every call
 * before ends (by induction over the calls, the settlement's waits
 * included: they name earlier calls' done flags), so they end.  A wait in
 * phase (t, A) needs the peer's phase (t - D, B) done, one in (t, B) the
 * peer's (t, A), the exit the peer's (n - 1, B): always a phase strictly
 * before the waiting one.  Take the earliest phase X in which some rank
 * waits forever, for a peer's phase Y < X: the peer runs its phases in
 * order and every one up to Y waits only for phases before Y < X, which
 * all end; so it reaches Y and posts.  A contradiction.
 *   cost per rank: what it sends copied in, what it receives copied out;
 *   a flag per piece and peer; in the halves a flag test per peer at the
 *   entry (a writer), none at the exit.
 * The ranks end on different flag values (each on its own count of
 * pieces), so no phase with flags may follow it in one schedule
 * (xccl_sched_append continues the values from there): a whole schedule,
 * or the last phase; one in the halves is never appended.
 */
#include "shm_util.h"
#include "xccl_build.h"

/* Pieces of at most this (algos/shm_gather.c): a call's copies in and
 * out overlap from the second piece on. */
#define A2AV_MAX_PIECE ((size_t) 65536)

static size_t npieces(size_t n, size_t pc)
{
    return (n + pc - 1) / pc;
}

/* Phase A of step t: rank r's pieces t into buffer t % depth of its slot. */
static void write_pieces(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls, size_t pc, int depth,
                         size_t t)
{
    const int p = s->size, r = s->rank;
    const size_t at = shm_buf_off(pc * (size_t) (p - 1), t, depth);
    if (t > 0) {
        xccl_sched_step(s);
    }
    for (int k = 1; k < p && t >= (size_t) depth; k++) {
        const int q = mod(r + k, p);
        if (npieces(sbytes[q], pc) > t) {
            xccl_sched_wait(s, q, (uint32_t) (2 * (t - (size_t) depth) + 2));
        }
    }
    hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
    for (int k = 1; k < p; k++) {
        const int q = mod(r + k, p);
        size_t lo;
        const size_t len = shm_piece(sbytes[q], pc, t, &lo), to = at + (size_t) (k - 1) * pc;
        hier_copy_add(&cp, xccl_ref(XCCL_BUF_SLOT, to), xccl_ref(XCCL_BUF_SEND, sdispls[q] + lo), len);
        if (len) {
            shm_use(s, to + len);
        }
    }
    hier_copy_flush(&cp);
    xccl_sched_post(s, (uint32_t) (2 * t + 1));
}

/* Phase B of step t: piece t of every block for rank r out of its
 * sender's slot, a step per sender (the copies from the ready ones run
 * while the others still write), then the "read" flag. */
static void read_pieces(xccl_sched_t *s, const size_t *rbytes, const size_t *rdispls, size_t pc, int depth,
                        size_t t)
{
    const int p = s->size, r = s->rank;
    const size_t at = shm_buf_off(pc * (size_t) (p - 1), t, depth);
    for (int k = 1; k < p; k++) {
        const int q = mod(r + k, p);
        size_t lo;
        const size_t len = shm_piece(rbytes[q], pc, t, &lo);
        if (0 == len) {
            continue;
        }
        xccl_sched_step(s);
        xccl_sched_wait(s, q, (uint32_t) (2 * t + 1));
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, rdispls[q] + lo),
                        xccl_ref_peer(q, XCCL_BUF_SLOT, at + (size_t) mod(r - q - 1, p) * pc), len);
    }
    xccl_sched_post(s, (uint32_t) (2 * t + 2));
}

int xccl_build_alltoallv_shm(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                             const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                             const void *pair_ctx)
{
    const int p = s->size, r = s->rank;
    const xccl_ref_t own_to = xccl_ref(XCCL_BUF_RECV, rdispls[r]), own_from = xccl_ref(XCCL_BUF_SEND, sdispls[r]);

    (void) pair;
    (void) pair_ctx;
    s->algo = "shm";
    if (1 == p) {
        xccl_sched_copy(s, own_to, own_from, rbytes[r]);
        return xccl_sched_finalize(s);
    }
    /* From slot_cap and p only: every rank refuses alike, whatever it
     * trades, and every rank takes the same form.  Two buffers in each
     * half of the slot where pieces of SHM_ALIGN or more fit there, else
     * two over the whole slot. */
    size_t pc = shm_floor(shm_half(s) / 2 / (size_t) (p - 1), 1);
    if (pc < SHM_ALIGN) {
        pc = shm_buffer(s, 2, p - 1, 1) / (size_t) (p - 1);
    }
    if (0 == pc) {
        return shm_fail(s);
    }
    pc = pc < A2AV_MAX_PIECE ? pc : A2AV_MAX_PIECE;
    const size_t buf = pc * (size_t) (p - 1);
    const int halves = shm_halves(s, buf), depth = (int) (shm_room(s, buf) / buf);
    size_t nsend = 0, nrecv = 0;
    for (int q = 0; q < p; q++) {
        if (q != r) {
            nsend = npieces(sbytes[q], pc) > nsend ? npieces(sbytes[q], pc) : nsend;
            nrecv = npieces(rbytes[q], pc) > nrecv ? npieces(rbytes[q], pc) : nrecv;
        }
    }
    const size_t nsteps = nsend > nrecv ? nsend : nrecv;
    if (halves) {
        /* a reader's waits come in steps after this one */
        shm_enter(s, nsend > 0);
    }
    if (0 == nsend) {
        xccl_sched_copy(s, own_to, own_from, rbytes[r]);
    }
    for (size_t t = 0; t < nsteps; t++) {
        if (t < nsend) {
            write_pieces(s, sbytes, sdispls, pc, depth, t);
            if (0 == t) {
                xccl_sched_copy(s, own_to, own_from, rbytes[r]);
            }
        }
        if (t < nrecv) {
            read_pieces(s, rbytes, rdispls, pc, depth, t);
        }
    }
    if (halves) {
        shm_leave(s);
    } else if (nsend > 0) {
        /* the exit: every reader of this slot has read its last piece */
        xccl_sched_step(s);
        for (int k = 1; k < p; k++) {
            const int q = mod(r + k, p);
            const size_t n = npieces(sbytes[q], pc);
            if (n > 0) {
                xccl_sched_wait(s, q, (uint32_t) (2 * n));
            }
        }
    }
    shm_rotate_room(s, buf);
    return xccl_sched_finalize(s);
}
