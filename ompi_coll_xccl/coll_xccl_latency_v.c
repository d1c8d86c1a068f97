/*
 * The latency path of the v forms (coll_xccl_latency_v.h): gatherv,
 * scatterv and alltoallv blocking calls on one node, their small blocks
 * through the latency lines and small areas with the ring, numbers and
 * waits of the latency path (coll_xccl_latency.c), their large blocks,
 * where there are any, through the level's executor.
 *
 * The decision.  The six collectives' latency path takes a call where
 * every rank's part is small, which every rank computes alike from the
 * call's arguments.  A v form's rank knows its own sizes only (gatherv's
 * and scatterv's root: every rank's), so whether a whole call is small is
 * known to no rank before the ranks have told each other, and no bound
 * every rank could compute exists.  An agreement in the call (each rank
 * posting whether its part fits, every rank reading every post before
 * any data moves) was the first form of this file; it makes every rank
 * wait for the ones whose word it needs (gatherv's senders for the root,
 * where tuned's run ahead: 1.5 times tuned's time at np 2, 8 and 64 B).
 * Decided block by block instead, nothing needs agreeing: both ends of a
 * block know which way it goes, gatherv's by its size (at most
 * XCCL_LATENCY_V_BLOCK: small), scatterv's and alltoallv's by the word
 * the sender writes for it in its directory, which the receiver reads
 * where it reads the block, after the sender's post, which it waits for
 * anyway.  In every blocking call of these collectives on the level, each
 * rank:
 *   1. (where it writes its part) waits until every peer posted past the
 *      last call that wrote its units, as the six's calls do;
 *   2. copies each block it sends that fits into its part, with its entry
 *      in the directory (the others' entries: large), and posts the
 *      call's number in its latency line (release), also where it sends
 *      nothing: "in this call, done with every call before";
 *   3. copies its own block straight from SEND to RECV, and each block it
 *      receives out of the sender's part once the sender posted (acquire),
 *      where the sender's entry says it lies there;
 *   4. where it sends or receives a large block: runs the collective's
 *      level schedule (shm) of the large blocks alone (the small ones and
 *      its own set to zero bytes in the call's counts), in its turn;
 *      both ends of each large block run it, and those schedules wait
 *      only for the ranks they trade bytes with; else it posts its
 *      executor flag at (this call, LATV_DONE) and takes the call
 *      number the executor would have taken;
 *   5. where it gave blocks by single copies (below): waits until each of
 *      their readers posted its executor flag of this call (step 4's
 *      LATV_DONE or its schedule's first post, both after its step 3).
 * Single copies.  Where the level reads its peers' memory (m->level_cma,
 * alike on every rank), a blocking alltoallv's or scatterv's block of at
 * least v->direct bytes (XCCL_LATENCY_V_DIRECT_*) that does not fit the
 * part goes by one process_vm_readv from the sender's buffer instead of
 * the executor's two copies: the sender writes the block's address in its
 * part where its directory entry says (marked LATV_DIRECT), the receiver
 * reads it in step 3 and the block after it.  Step 5 keeps the sender's
 * buffer until then; a reader posts its flag without waiting for the
 * sender, so step 5 ends.  Gatherv's blocks that do not fit go the other
 * way, each by one process_vm_writev by its sender into the root's
 * receive buffer: the root writes the addresses in its part in step 2
 * (recorded in the ring as any part's bytes), a sender waits for the
 * root's post, writes, then posts, and the root's step 3 waits for that
 * post; so the senders' copies run beside each other and beside the
 * root's own, where the root's reads would run one after the other
 * (docs/bench/single-copy-v.md, "Gatherv: each sender writes").  A request (nonblocking
 * gatherv, scatterv, alltoallv) has no executor step: there every block that does
 * not fit goes by a single copy (XCCL_LATENCY_V_DIRECT_ALL), a sender
 * keeps room for the addresses of the blocks it has still to place, and
 * its request ends once every peer posted its flag of the call (step 5).
 * That post keeps the executor's flags in step: the schedules of a call
 * wait for every peer to have entered the call before (shm_enter) and a
 * later call of another layout for every peer's done flag of one without
 * an exit barrier (the executor's settlement); a rank that ran no
 * schedule in a call says, with the highest value, that it is done with
 * it and every call before, which it is.  The latency path's state (ring,
 * numbers, flips) moves alike on every rank, the slots and flags only in
 * the ranks that run schedules, as in any call of the level.
 *
 * The room.  Every rank reserves the same units in every such call: its
 * part, a directory of n entries (scatterv, alltoallv) and
 * XCCL_LATENCY_V_BLOCK bytes of blocks, packed in the order of the ranks
 * after the sender, 16 bytes apart at least (so that tiny blocks share
 * the directory's line).  A sender fills it block by block while a block
 * fits; a receiver does not know where the sender's other blocks end,
 * hence the directory.  A rank that writes nothing in its part records
 * nothing in the ring and waits for nothing first.  The ring of these
 * calls is the whole small area (st.wide) where the six's would be
 * LAT_RING_MIN: a sender waits for its slowest receiver once it is as
 * many calls ahead as the ring holds, 45 at up to 16 ranks (48 of
 * gatherv's).  That depth matters with more ranks than cores, where a
 * waiting rank yields: at np 4 on 2 cores, slots of 4 KiB per peer (16
 * calls in the whole area) took scatterv 1.6 times as long at 8 B as
 * slots of 1 KiB (64 calls), and in LAT_RING_MIN (4 calls) gatherv and
 * scatterv took 2-5 and 1.2-2 times as long as in the whole area
 * (docs/bench/latency-path.md).
 *
 * Gather, scatter, reduce and allgatherv know their sizes on every rank
 * and come here where all of a call fits (mca_coll_xccl_latency_v_fits,
 * the same answer everywhere): gather and scatter as gatherv and scatterv
 * of even blocks, reduce as a gather of the vectors that the root reduces
 * in rank order (with a kernel of ours), allgatherv as every rank's block
 * in its part, read by all.  None has a large block, so for them the
 * executor never runs from here; decide (coll_xccl_path.c) keeps them
 * from the fallback below the small-message size.
 *
 * Nonblocking calls of those four, where all of a call fits, and of
 * the v forms where the level reads its peers' memory, run the same steps as
 * requests in their turn (m->level_ticket; each step as far as the peers'
 * posts let it, from progress); the other nonblocking calls keep the
 * executor.  A blocking call first waits until no nonblocking
 * call of the level is in flight (mca_coll_xccl_latency_idle).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"

#include "base/xccl_copy.h"
#include "segment/xccl_cma.h"

#include "coll_xccl_exec.h"
#include "coll_xccl_latency_line.h"
#include "coll_xccl_latency_v.h"
#include "coll_xccl_log.h"

/* A directory entry: the block is large (the executor's); else where it
 * lies in the part, or with LATV_DIRECT where the part holds the block's
 * address in the sender's process (a single copy). */
#define LATV_LARGE UINT32_MAX
#define LATV_DIRECT ((uint32_t) 1 << 31)
/* The displacement give leaves for such a block: the entries of blocks of
 * 0 bytes are not written, so the directory alone may hold an earlier
 * call's. */
#define LATV_GAVE SIZE_MAX
#define LATV_ALIGN XCCL_LATENCY_V_ALIGN

typedef mca_coll_xccl_latency_v_t latv_t;

static inline void copy(void *dst, const void *src, size_t len)
{
    if (len <= 64) {
        xccl_copy_small(dst, src, len);
    } else {
        xccl_memmove(dst, src, len);
    }
}

/* Rank q's part of the call (a communicator rank): at the start of its
 * area (more than two ranks) or of the area of the pair layout
 * (coll_xccl_latency.c), as the six's calls. */
static inline unsigned char *part_of(const latv_t *v, int q)
{
    const mca_coll_xccl_latency_t *st = &v->st;
    const int s = st->m->level->local_of[q];
    return st->m->level->small[st->pair ? s ^ st->flip : s] + st->at0;
}

/* Whether q posted this call, waiting for it where wait says: 1, 0 not
 * yet (only without wait), or -1 q is gone. */
static inline int posted(latv_t *v, int q, int wait)
{
    return mca_coll_xccl_latency_wait(&v->st, v->st.m->level->local_of[q], v->st.f, wait);
}

/* Small blocks travel in the sender's latency line too (as the six's
 * bcast: XCCL_LATENCY_INLINE), where both ends know the block's place
 * there: a rank's own block (gather(v), allgatherv), or of two
 * ranks the one block for the other (scatter(v), alltoallv).  A reader
 * whose sender has not moved on then gets the post and the block in one
 * cache-line transfer instead of two or three; else it copies the block
 * from the sender's part, which the ring protects as before (figures:
 * docs/bench/latency-path.md). */
static inline int inline_fits(size_t len)
{
    return len > 0 && len <= XCCL_LATENCY_INLINE;
}

static inline void put_inline(latv_t *v, const void *src, size_t len)
{
    if (inline_fits(len)) {
        mca_coll_xccl_latency_line_put(v->st.m->level->line[v->st.me], src, len, v->st.f);
    }
}

/* q's block of len bytes to dst from q's line, after q's post: 1, or 0
 * (copy it from q's part). */
static inline int get_inline(latv_t *v, int q, void *dst, size_t len)
{
    return inline_fits(len) &&
           mca_coll_xccl_latency_line_get(v->st.m->level->line[v->st.m->level->local_of[q]], dst, len, v->st.f);
}

/* Whether a block of len bytes that does not fit at `at` goes by a single
 * copy (its address at `at`), both ends alike: the sender's give and
 * packed, the receiver's take by the sender's entry. */
static inline int direct(const latv_t *v, size_t len, size_t at)
{
    return v->direct && len >= v->direct && LATV_ALIGN <= v->part - at;
}

/* How a sender's block of len > 0 bytes goes that would lie at `at` in its
 * part, with `later` blocks of more than 0 bytes after it: in the part,
 * by its address there (a single copy), or large (the executor's).  With
 * every block that does not fit by a single copy
 * (XCCL_LATENCY_V_DIRECT_ALL), room stays for the later blocks' addresses:
 * room and that reserve are multiples of LATV_ALIGN, so there is always
 * room for this block's address (XCCL_LATENCY_V_DIRECT_RANKS). */
enum { LATV_IN_PART, LATV_BY_ADDRESS, LATV_IS_LARGE };
static inline int way(const latv_t *v, size_t len, size_t at, int later)
{
    const size_t room = v->part - at;
    const size_t keep = XCCL_LATENCY_V_DIRECT_ALL == v->direct ? (size_t) later * LATV_ALIGN : 0;
    if (keep <= room && len <= room - keep) {
        return LATV_IN_PART;
    }
    return direct(v, len, at) ? LATV_BY_ADDRESS : LATV_IS_LARGE;
}

/* The blocks of more than 0 bytes a sender sends to other ranks, where
 * way keeps room for them (else 0: a blocking call need not count). */
static int later_blocks(const latv_t *v, const size_t *bytes)
{
    int nz = 0;
    if (XCCL_LATENCY_V_DIRECT_ALL != v->direct) {
        return 0;
    }
    for (int k = 1; k < v->n; k++) {
        nz += bytes[(v->rank + k) % v->n] > 0;
    }
    return nz;
}

/* Where a sender's blocks end in its part (give, below, fills it so), 0
 * where it sends none to another rank (and writes no directory entry). */
static size_t packed(const latv_t *v, const size_t *bytes)
{
    size_t at = mca_coll_xccl_latency_v_dir(v->n);
    int later = later_blocks(v, bytes), any = 0;
    for (int k = 1; k < v->n; k++) {
        const size_t len = bytes[(v->rank + k) % v->n];
        if (0 == len) {
            continue;
        }
        any = 1;
        switch (way(v, len, at, --later)) {
        case LATV_IN_PART:
            at += (len + LATV_ALIGN - 1) / LATV_ALIGN * LATV_ALIGN;
            break;
        case LATV_BY_ADDRESS:
            at += LATV_ALIGN;
            break;
        }
    }
    return any ? at : 0;
}

/* A block's address in the sender's process, where the part says so. */
static inline void put_address(unsigned char *where, const void *block)
{
    const uint64_t addr = (uint64_t) (uintptr_t) block;
    memcpy(where, &addr, sizeof(addr));
}

/* A sender's blocks (scatterv's root, alltoallv): each block for another
 * rank, in the order of the ranks after this one, into the part after its
 * directory while it fits (its entry: where), else its address there
 * where it goes by a single copy (direct; its entry: where | LATV_DIRECT,
 * v->readers set, displs[r] then LATV_GAVE), else the entry says large;
 * bytes[r] then 0 for the first two kinds. */
static void give(latv_t *v, const char *ws, size_t *bytes, size_t *displs)
{
    unsigned char *part = part_of(v, v->rank);
    uint32_t *dir = (uint32_t *) part;
    size_t at = mca_coll_xccl_latency_v_dir(v->n);
    int later = later_blocks(v, bytes);
    for (int k = 1; k < v->n; k++) {
        const int r = (v->rank + k) % v->n;
        const size_t len = bytes[r];
        if (0 == len) {
            continue;
        }
        switch (way(v, len, at, --later)) {
        case LATV_IN_PART:
            copy(part + at, ws + displs[r], len);
            if (2 == v->n) {
                put_inline(v, ws + displs[r], len);
            }
            dir[r] = (uint32_t) at;
            at += (len + LATV_ALIGN - 1) / LATV_ALIGN * LATV_ALIGN;
            bytes[r] = 0;
            break;
        case LATV_BY_ADDRESS:
            put_address(part + at, ws + displs[r]);
            dir[r] = (uint32_t) at | LATV_DIRECT;
            at += LATV_ALIGN;
            bytes[r] = 0;
            displs[r] = LATV_GAVE;
            v->readers = 1;
            break;
        default:
            dir[r] = LATV_LARGE;
            v->large = 1;
        }
    }
}

/* Whether this rank gave its block for q by a single copy (give's mark). */
static inline int gave_direct(const latv_t *v, int q)
{
    return LATV_GAVE == v->vec[v->n + q];
}

int mca_coll_xccl_latency_v_readers_done(const mca_coll_xccl_latency_v_t *v, uint32_t seq, int wait)
{
    const struct mca_coll_xccl_level *h = v->st.m->level;
    const unsigned every = mca_coll_xccl_spins_per_progress(256);
    for (int k = 1; k < v->n; k++) {
        const int q = (v->rank + k) % v->n;
        if (!gave_direct(v, q)) {
            continue;
        }
        unsigned spins = 0;
        int t;
        while (0 == (t = h->peer.peer.test(h->peer.peer.ctx, q, seq, 0)) && wait) {
            if (++spins >= every) {
                spins = 0;
                opal_progress();
            }
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        }
        if (1 != t) {
            return t < 0 ? -1 : 0;
        }
    }
    return 1;
}

/* A single copy: len bytes from q's buffer at the address that lies at
 * where in q's part, to dst (v->took set).  0 or -errno. */
static int read_direct(latv_t *v, int q, void *dst, const unsigned char *where, size_t len)
{
    const struct mca_coll_xccl_level *h = v->st.m->level;
    uint64_t addr;
    memcpy(&addr, where, sizeof(addr));
    v->took = 1;
    return xccl_cma_read(xccl_segment_pid(h->seg, h->local_of[q]), dst, (const void *) (uintptr_t) addr, len);
}

/* A receiver's block of len bytes from q at dst, once q posted: copied
 * from q's part, or from q's buffer at the address in q's part (a single
 * copy), where q's directory says so (*len then 0), else left for the
 * executor.  1, 0 q has not posted (only without wait), -1 q is gone, or
 * -3 the single copy failed. */
static int take(latv_t *v, int q, char *dst, size_t *len, int wait)
{
    const int r = posted(v, q, wait);
    if (1 != r) {
        return r;
    }
    if (2 == v->n && get_inline(v, q, dst, *len)) {
        *len = 0;
        return 1;
    }
    const unsigned char *part = part_of(v, q);
    const uint32_t at = ((const uint32_t *) part)[v->rank];
    if (LATV_LARGE == at) {
        v->large = 1;
    } else if (at & LATV_DIRECT) {
        if (0 != read_direct(v, q, dst, part + (at & ~LATV_DIRECT), *len)) {
            return -3;
        }
        *len = 0;
    } else {
        copy(dst, part + at, *len);
        *len = 0;
    }
    return 1;
}

/* Steps 2 and 3 of each collective (the top of the file): 1, or -1 a
 * rank is gone; v->large set, and the counts of the blocks moved here
 * (and the own one's) set to zero, which leaves the executor's.  Without
 * wait (a request), 0 where a peer has not posted yet: the next run goes
 * on from there (v->given: step 2 done; v->k: the peers read). */

/* Gatherv: a sender's block that fits goes in its part, where the root
 * copies it out.  One that does not is large (the executor's), or, with
 * v->direct, written by its sender straight into the root's receive
 * buffer (process_vm_writev) at the address the root's part holds for it
 * (8 bytes a rank, at the part's start): the sender waits for the root's
 * post, writes, then posts, and the root's wait for that post is its wait
 * for the block.  The sender's copy runs on its own core, beside the
 * others' and the root's own (figures: docs/bench/single-copy-v.md). */
static inline int written(const latv_t *v, size_t len)
{
    return v->direct && len > v->part && len >= v->direct;
}

_Static_assert(XCCL_LATENCY_V_DIRECT_RANKS * sizeof(uint64_t) <= XCCL_LATENCY_V_BLOCK, "gatherv's addresses");
/* The bytes of the root's addresses in its part (v->direct: at most
 * XCCL_LATENCY_V_DIRECT_RANKS ranks): 0 where no block is written by its
 * sender. */
static size_t addresses(const latv_t *v)
{
    for (int q = 0; q < v->n; q++) {
        if (q != v->root && written(v, v->vec[q])) {
            return (size_t) v->n * sizeof(uint64_t);
        }
    }
    return 0;
}

static int gatherv(latv_t *v, int wait)
{
    size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int n = v->n, me = v->rank, root = v->root;
    const char *ws = v->ws;
    char *wr = v->wr;
    if (me != root && !v->given && written(v, bytes[me])) {
        const int r = posted(v, root, wait);
        if (1 != r) {
            return r;
        }
        const struct mca_coll_xccl_level *h = v->st.m->level;
        uint64_t addr;
        memcpy(&addr, part_of(v, root) + (size_t) me * sizeof(addr), sizeof(addr));
        if (0 != xccl_cma_write(xccl_segment_pid(h->seg, h->local_of[root]), (void *) (uintptr_t) addr, ws,
                                bytes[me])) {
            return -3;
        }
        v->took = 1;
        v->given = 1;
        bytes[me] = 0;
        mca_coll_xccl_latency_post(&v->st);
        return 1;
    }
    if (!v->given) {
        v->given = 1;
        if (me != root) {
            if (bytes[me] <= v->part) {
                copy(part_of(v, me), ws, bytes[me]);
                put_inline(v, ws, bytes[me]);
            }
            mca_coll_xccl_latency_post(&v->st);
            v->large = bytes[me] > v->part;
            return 1;
        }
        if (v->st.wrote) {
            unsigned char *part = part_of(v, me);
            for (int q = 0; q < n; q++) {
                if (q != root && written(v, bytes[q])) {
                    put_address(part + (size_t) q * sizeof(uint64_t), wr + displs[q]);
                }
            }
        }
        mca_coll_xccl_latency_post(&v->st);
        if (!v->in_place && bytes[me] > 0) {
            copy(wr + displs[me], ws, bytes[me]);
        }
        bytes[me] = 0;
        v->k = 1;
    }
    for (; v->k < n; v->k++) {
        const int q = (root + v->k) % n;
        if (written(v, bytes[q])) {
            const int r = posted(v, q, wait);
            if (1 != r) {
                return r;
            }
            v->took = 1;
            bytes[q] = 0;
        } else if (bytes[q] > v->part) {
            v->large = 1;
        } else if (bytes[q] > 0) {
            const int r = posted(v, q, wait);
            if (1 != r) {
                return r;
            }
            if (!get_inline(v, q, wr + displs[q], bytes[q])) {
                copy(wr + displs[q], part_of(v, q), bytes[q]);
            }
            bytes[q] = 0;
        }
    }
    return 1;
}

static int scatterv(latv_t *v, int wait)
{
    size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int me = v->rank, root = v->root;
    if (me != root) {
        if (!v->given) {
            v->given = 1;
            mca_coll_xccl_latency_post(&v->st);
        }
        return bytes[me] > 0 ? take(v, root, v->wr, &bytes[me], wait) : 1;
    }
    give(v, v->ws, bytes, displs);
    mca_coll_xccl_latency_post(&v->st);
    if (!v->in_place && bytes[me] > 0) {
        copy(v->wr, v->ws + displs[me], bytes[me]);
    }
    bytes[me] = 0;
    return 1;
}

static int alltoallv(latv_t *v, int wait)
{
    const int n = v->n, me = v->rank;
    size_t *sc = v->vec, *sd = v->vec + n, *rc = v->vec + 2 * n, *rd = v->vec + 3 * n;
    const char *ws = v->ws;
    char *wr = v->wr;
    if (!v->given) {
        v->given = 1;
        give(v, ws, sc, sd);
        mca_coll_xccl_latency_post(&v->st);
        if (rc[me] > 0 && wr + rd[me] != ws + sd[me]) {
            copy(wr + rd[me], ws + sd[me], rc[me]);
        }
        sc[me] = rc[me] = 0;
        v->k = 1;
    }
    for (; v->k < n; v->k++) {
        const int q = (me - v->k + n) % n;
        const int r = rc[q] > 0 ? take(v, q, wr + rd[q], &rc[q], wait) : 1;
        if (1 != r) {
            return r;
        }
    }
    return 1;
}

/* Reduce (all of it fits): every rank but an in-place root's gives its
 * vector in its part; the root reduces them in rank order into RECV (its
 * own from SEND, or in place from the copy in its part). */
static int reduce(latv_t *v, int wait)
{
    const int n = v->n, me = v->rank, root = v->root;
    const size_t count = v->count, len = count * v->es;
    if (!v->given) {
        v->given = 1;
        if (me != root || v->in_place) {
            copy(part_of(v, me), v->ws, len);
        }
        mca_coll_xccl_latency_post(&v->st);
        if (me != root || 0 == count) {
            return 1;
        }
        v->k = 0;
    }
    for (; v->k < n; v->k++) {
        const int q = v->k;
        const int r = q != me ? posted(v, q, wait) : 1;
        if (1 != r) {
            return r;
        }
        const char *src = q == me && !v->in_place ? v->ws : (const char *) part_of(v, q);
        if (0 == q) {
            v->first = src;
        } else {
            v->kernel(v->wr, 1 == q ? v->first : v->wr, src, count);
        }
    }
    return 1;
}

/* Allgatherv (all of it fits): every rank gives its block in its part
 * and copies every other rank's out after its post. */
static int allgatherv(latv_t *v, int wait)
{
    const size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int n = v->n, me = v->rank;
    char *wr = v->wr;
    if (!v->given) {
        v->given = 1;
        const char *own = v->in_place ? wr + displs[me] : v->ws;
        copy(part_of(v, me), own, bytes[me]);
        put_inline(v, own, bytes[me]);
        mca_coll_xccl_latency_post(&v->st);
        if (!v->in_place) {
            copy(wr + displs[me], own, bytes[me]);
        }
        v->k = 1;
    }
    for (; v->k < n; v->k++) {
        const int q = (me - v->k + n) % n;
        if (bytes[q] > 0) {
            const int r = posted(v, q, wait);
            if (1 != r) {
                return r;
            }
            if (!get_inline(v, q, wr + displs[q], bytes[q])) {
                copy(wr + displs[q], part_of(v, q), bytes[q]);
            }
        }
    }
    return 1;
}

void mca_coll_xccl_latency_v_place(mca_coll_xccl_latency_v_t *v, mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                   const xccl_coll_args_t *a, size_t es, xccl_reduce_fn_t kernel,
                                   const char *ws, char *wr)
{
    struct mca_coll_xccl_level *h = m->level;
    v->n = m->size;
    v->rank = m->rank;
    v->root = a->root;
    v->large = 0;
    v->readers = 0;
    v->took = 0;
    v->given = 0;
    v->stepped = 0;
    v->k = 0;
    v->ws = ws;
    v->wr = wr;
    v->in_place = a->in_place;
    v->count = a->count;
    v->es = es;
    v->kernel = kernel;
    const int dir = XCCL_COLL_SCATTERV == coll || XCCL_COLL_SCATTER == coll || XCCL_COLL_ALLTOALLV == coll;
    v->part = (dir ? mca_coll_xccl_latency_v_dir(v->n) : 0) + XCCL_LATENCY_V_BLOCK;
    /* the bytes this rank writes at the start of its part (its blocks, a
     * directory): the ring records (and its next writes there wait for)
     * only those */
    size_t wrote = 0;
    if (XCCL_COLL_REDUCE == coll) {
        wrote = v->rank != v->root || a->in_place ? a->count * es : 0;
    } else if (XCCL_COLL_ALLGATHERV == coll) {
        wrote = v->vec[v->rank];
    } else if (!dir) {
        /* gather(v): a sender's block that fits, or the root's addresses */
        wrote = v->rank == v->root                ? addresses(v)
                : v->vec[v->rank] <= v->part ? v->vec[v->rank]
                                             : 0;
    } else if (XCCL_COLL_ALLTOALLV == coll || v->rank == v->root) {
        wrote = packed(v, v->vec);
    }
    /* what mca_coll_xccl_latency_place reads; it sets the rest */
    v->st.m = m;
    v->st.coll = coll;
    v->st.len = v->part;
    v->st.me = h->local_of[m->rank];
    v->st.root = wrote ? v->st.me : -1;
    v->st.sliced = 0;
    v->st.wide = 1;
    v->st.wrote = wrote;
    mca_coll_xccl_latency_place(&v->st);
    /* Every peer past the last call that wrote these units; where that
     * takes a wait, past the call halfway from there to this one: the
     * next calls' units, written after it, then need none, and a sender
     * that runs a ring ahead waits once in many calls instead of reading
     * its receivers' lines every call (a number below f is one every peer
     * posts without this rank). */
    v->ring = wrote && v->st.last > 0 && h->lat_seen <= v->st.last
                  ? v->st.last + 1 + (v->st.f - 1 - v->st.last) / 2 : 0;
}

int mca_coll_xccl_latency_v_steps(mca_coll_xccl_latency_v_t *v, int wait)
{
    if (v->ring) {
        const int r = mca_coll_xccl_latency_wait(&v->st, -1, v->ring, wait);
        if (1 != r) {
            return r;
        }
        v->ring = 0;
    }
    switch (v->st.coll) {
    case XCCL_COLL_GATHER:
    case XCCL_COLL_GATHERV:
        return gatherv(v, wait);
    case XCCL_COLL_SCATTER:
    case XCCL_COLL_SCATTERV:
        return scatterv(v, wait);
    case XCCL_COLL_REDUCE:
        return reduce(v, wait);
    case XCCL_COLL_ALLGATHERV:
        return allgatherv(v, wait);
    default:
        return alltoallv(v, wait);
    }
}

/* ------------------------------------------------------------ requests */

int mca_coll_xccl_latency_v_begin(mca_coll_xccl_latency_v_t *v, mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                  const xccl_coll_args_t *a, size_t es, xccl_reduce_fn_t kernel,
                                  const char *ws, char *wr, uint32_t seq, unsigned tries)
{
    v->own = NULL;
    v->vec = (size_t *) a->vec;
    if ((XCCL_COLL_GATHER == coll || XCCL_COLL_SCATTER == coll) && NULL == v->vec) {
        if (NULL == (v->own = malloc(2 * (size_t) m->size * sizeof(size_t)))) {
            return -2;
        }
        v->vec = v->own;
        mca_coll_xccl_latency_v_even(v->vec, m->size, a->block);
    }
    v->seq = seq;
    /* (no large block comes here: scatterv's and alltoallv's go by single
     * copies) */
    v->direct = xccl_coll_sizes_local(coll) || mca_coll_xccl_latency_v_even_direct(m, coll)
                    ? XCCL_LATENCY_V_DIRECT_ALL
                    : 0;
    mca_coll_xccl_latency_v_place(v, m, coll, a, es, kernel, ws, wr);
    return mca_coll_xccl_latency_v_run(v, tries);
}

/* One try: the steps, until done, then the flag; then step 5. */
static int run_once(latv_t *v)
{
    if (!v->stepped) {
        const int r = mca_coll_xccl_latency_v_steps(v, 0);
        if (1 != r) {
            return r;
        }
        v->stepped = 1;
        (void) xccl_segment_flag_post(v->st.m->level->seg, v->seq, LATV_DONE);
    }
    return v->readers ? mca_coll_xccl_latency_v_readers_done(v, v->seq, 0) : 1;
}

int mca_coll_xccl_latency_v_run(mca_coll_xccl_latency_v_t *v, unsigned tries)
{
    int r = run_once(v);
    for (unsigned k = 1; 0 == r && k < tries; k++) {
#if defined(__x86_64__)
        __builtin_ia32_pause();      /* as the latency path's waits: the peer's store lands sooner */
#endif
        r = run_once(v);
    }
    if (0 != r) {
        free(v->own);
        v->own = NULL;
    }
    return r;
}
