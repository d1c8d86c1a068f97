/*
 * The latency path of the shared-memory level (coll_xccl_latency.h):
 * small calls on one node without the executor, in the node segment's
 * latency lines and small areas.  The figures behind its constants:
 * docs/bench/latency-path.md.
 */
#include "ompi_config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/op/op.h"
#include "opal/runtime/opal_progress.h"

#include "base/xccl_copy.h"
#include "xccl_build.h"

#include "coll_xccl_exec.h"
#include "coll_xccl_log.h"
#include "coll_xccl_pack.h"
#include "coll_xccl_level.h"
#include "coll_xccl_latency.h"
#include "coll_xccl_latency_line.h"

/*
 * Small blocking calls on one node without the executor.  Segment rank s
 * owns its latency line (xccl_segment_line: its sequence word) and its small
 * area (xccl_segment_small); only s writes them.  Every rank makes the same
 * calls through this path in the same order (the decision rests on what all
 * ranks share), numbered f = 1, 2, ..., and every rank gives the same
 * number of bytes in a call, so one ring placement, the same on every rank,
 * says where call f's parts go in each area: the next units of XCCL_LATENCY_UNIT
 * bytes, from the start again where they would not fit (of two ranks, a
 * bcast after one from the other root may take its units: lat_begin).
 * In call f:
 *   1. a rank with data to give (all but the non-roots of bcast) waits
 *      until every peer has finished the last call that wrote any of the
 *      units it is about to overwrite (its own record: it is their only
 *      writer), i.e. has posted a later number; a ring of many units lets
 *      a rank run many small calls ahead (a bcast root waits for nobody)
 *      before it waits;
 *   2. copies its part there and posts f (release): "in call f, done with
 *      every call before";
 *   3. waits until each rank it reads has posted f or later (acquire) and
 *      reads that rank's units, which stay until that rank's step 1 sees
 *      this rank's post of f + 1 or later.
 * Reductions run in segment rank order: every rank gets the same bits.
 * Nothing here touches the slots or the executor's flags, so executor
 * calls of the level and this path interleave freely.
 *
 * Two ranks (the pair layout): a rank writes only lines it was the last
 * to read.  A line the peer has just read is in the peer's cache (an AMD
 * core that reads a line another core modified takes it over), and
 * writing it again first pulls it back: with every rank writing its own
 * area, each line crosses between the cores twice per call
 * (test/bench/lat_pair.c measures both layouts).  So in each call
 * segment rank s writes its part at the start of area s ^ flip, where
 * flip is kept per unit (lat_flip, the same on every rank: it follows
 * from the calls alone) so that s writes over what its peer wrote and s
 * read.  A part is only what the other
 * rank needs (alltoall: its block; reduce_scatter: its block; the sliced
 * allreduce: its piece, whose reduced values its reducer writes back in
 * place, where the giver reads them and next writes); a rank's own share
 * of a reduction comes from ws.  The ring protects the units of both
 * areas (lat_wrote: a rank that writes nothing in a call is its only
 * reader).  With more ranks every rank writes its own area, in the
 * layout of its ws (the image layout).
 */
/* A bcast of at most LAT_INLINE bytes also travels in the root's line
 * (coll_xccl_latency_line.h). */
#define LAT_INLINE XCCL_LATENCY_INLINE
/* A bcast of more than LAT_PIECE bytes goes in pieces of LAT_PIECE (the
 * last shorter), each posted with a number of its own: the readers copy
 * piece k out while the root copies piece k + 1 in, instead of waiting for
 * the whole part. */
#define LAT_PIECE ((size_t) 16384)
typedef mca_coll_xccl_latency_line_t lat_line_t;

/* The steps below and their helpers, inlined into the blocking call
 * (wait 1; as functions they cost a small call 15-20 % more) and into
 * mca_coll_xccl_latency_run for the requests. */
#define LAT_FN static inline __attribute__((always_inline))

/* The copies of the latency path: glibc's memcpy of a few KiB between a
 * page-aligned region and a user buffer 1..63 bytes apart modulo 4 KiB
 * runs several times slower (xccl_memmove avoids that). */
LAT_FN void lat_copy(void *dst, const void *src, size_t len)
{
    if (len <= 64) {
        xccl_copy_small(dst, src, len);
    } else {
        xccl_memmove(dst, src, len);
    }
}

#define lat_inline_put mca_coll_xccl_latency_line_put
#define lat_inline_get mca_coll_xccl_latency_line_get
/* Consecutive calls never share a unit (but for the chain below), so step
 * 1 of call f waits for f - 1 at most, which every peer posts without
 * waiting for this rank's f (a shared unit would deadlock).  A call's
 * ring is three times the larger of its part and the part of the call
 * before (at most the whole area, which holds three of the largest
 * parts): a part that starts the ring again (it did not fit after the
 * part before) ends before that part began, which lies past two such
 * parts from the start.  A ring no longer than that keeps the calls in
 * lines the caches hold (one ring of the whole area would write lines no
 * cache holds).  The ring is never shorter than LAT_RING_MIN (below). */
_Static_assert(3 * XCCL_LATENCY_BYTES <= XCCL_SEGMENT_SMALL_BYTES && XCCL_SEGMENT_SMALL_BYTES % XCCL_LATENCY_UNIT == 0,
               "latency units");
/* The shortest ring, 48 KiB: a bcast root runs up to 192 one-unit calls
 * ahead before it reads its readers' lines (with a ring of three units it
 * would read them every third call). */
#define LAT_RING_MIN 192u
_Static_assert(LAT_RING_MIN <= XCCL_LATENCY_UNITS, "latency ring");

/* Spins (each with a pause: the peer's store gets its line sooner)
 * between two calls of Open MPI's progress engine while a latency-path
 * call waits, on cores of their own (mca_coll_xccl_spins_per_progress). */
#define LAT_SPINS 256u
/* Progress calls between two checks that the peer still lives. */
#define LAT_LIVENESS_POLLS 256u

/* Whether segment rank s has posted f or later: 1, 0 not yet, -1 its
 * process is gone.  wait: until it has (or is gone), spinning with Open
 * MPI's progress engine between.  A number once read stays true (they
 * only grow), so a rank that has run ahead (a bcast root) is not asked
 * again: its line, which it rewrites every call, costs a cache-line
 * transfer per read. */
LAT_FN int lat_posted(mca_coll_xccl_latency_t *st, int s, uint64_t f, int wait)
{
    struct mca_coll_xccl_level *h = st->m->level;
    if (h->seen[s] >= f) {
        return 1;
    }
    const lat_line_t *l = h->line[s];
    const unsigned every = wait ? mca_coll_xccl_spins_per_progress(LAT_SPINS) : 1;
    unsigned spins = 0;
    uint64_t v;
    while ((v = atomic_load_explicit(&l->seq, memory_order_acquire)) < f) {
        if (!wait) {
            /* a request's test: the peer's process (a system call) after
             * as many unmet tests as a blocking wait spins between two
             * such checks, not every LAT_LIVENESS_POLLS tests */
            if (++st->polls >= LAT_LIVENESS_POLLS * LAT_SPINS) {
                st->polls = 0;
                if (0 == xccl_segment_peer_alive(h->seg, s)) {
                    return -1;
                }
            }
            return 0;
        }
        if (++spins >= every) {
            spins = 0;
            if (++st->polls >= LAT_LIVENESS_POLLS) {
                st->polls = 0;
                if (0 == xccl_segment_peer_alive(h->seg, s)) {
                    return -1;
                }
            }
            opal_progress();
        }
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
    h->seen[s] = v;
    return 1;
}

/* The same for every segment rank but this one. */
LAT_FN int lat_posted_all(mca_coll_xccl_latency_t *st, uint64_t f, int wait)
{
    struct mca_coll_xccl_level *h = st->m->level;
    for (int s = 0; s < h->node_size; s++) {
        const int r = s != st->me ? lat_posted(st, s, f, wait) : 1;
        if (1 != r) {
            return r;
        }
    }
    h->lat_seen = f > h->lat_seen ? f : h->lat_seen;
    return 1;
}

/* The call's numbers and units, in call order (its fixed part set:
 * mca_coll_xccl_latency_fix). */
LAT_FN void lat_place(mca_coll_xccl_latency_t *st)
{
    struct mca_coll_xccl_level *h = st->m->level;
    const size_t len = st->len;
    const int bcast = XCCL_COLL_BCAST == st->coll;
    st->k = st->last = 0;
    st->flip = st->phase = 0;
    st->polls = 0;
    st->f = ++h->lat_seq;
    /* the sliced allreduce posts twice: f with its vector in its area, f2
     * with its reduced piece there too; a bcast in pieces takes a number a
     * piece, f .. f + pieces - 1 = f2.  A peer that posted past f2 is done
     * with this call: the ring below counts the call as f2 */
    st->pieces = bcast && len > LAT_PIECE ? (len + LAT_PIECE - 1) / LAT_PIECE : 1;
    st->piece = st->pieces > 1 ? LAT_PIECE : len;
    st->f2 = st->sliced ? ++h->lat_seq : (h->lat_seq += st->pieces - 1);
    /* this call's units: [u, u + units) of every area */
    const unsigned units = (unsigned) ((len + XCCL_LATENCY_UNIT - 1) / XCCL_LATENCY_UNIT);
    /* the ring: three of the larger of this call's and the last call's
     * parts, at least LAT_RING_MIN units, at most the whole area */
    const unsigned big = units > h->lat_last ? units : h->lat_last;
    const unsigned ring = 3 * big < LAT_RING_MIN ? (st->wide ? XCCL_LATENCY_UNITS : LAT_RING_MIN)
                          : 3 * big < XCCL_LATENCY_UNITS ? 3 * big : XCCL_LATENCY_UNITS;
    st->pair = 2 == h->node_size;
    /* The chain: of two ranks, a bcast of more than LAT_INLINE bytes after
     * one of as many units from the other root takes the same units.  Its
     * root is the other call's only reader, done with it, and writes over
     * the lines it has just read (lat_flip sends it to the area its peer
     * wrote), which its core holds: in the ring's next units it wrote
     * lines the peer had read last.  The ring's waits stay as they are:
     * the root's own record of the units (below) is of a call before the
     * other root's, whose post every peer makes without waiting for this
     * call.  A payload in the root's line (LAT_INLINE) leaves the area
     * unread: there the next units as before. */
    unsigned u;
    if (st->pair && bcast && len > LAT_INLINE && units == h->lat_last && h->lat_last_root >= 0 &&
        h->lat_last_root != st->root) {
        u = h->lat_pos - units;
    } else {
        if (h->lat_pos + units > ring) {
            h->lat_pos = 0;
        }
        u = h->lat_pos;
        h->lat_pos += units;
    }
    st->at0 = (size_t) u * XCCL_LATENCY_UNIT;
    h->lat_last = units;
    h->lat_last_root = bcast ? st->root : -1;
    if (st->pair && units > 0) {
        /* s writes where 1 - s wrote last; after the sliced allreduce
         * the reducer (the peer) wrote last, in place, so the next call
         * keeps the flip (0 at first: every rank its own area, the pages
         * it made) */
        st->flip = h->lat_flip[u];
        const unsigned char next = st->sliced ? st->flip : !st->flip;
        if (1 == units) {
            h->lat_flip[u] = next;       /* the common case, without a call */
        } else {
            memset(h->lat_flip + u, next, units);
        }
    }
    /* a rank records (and later waits for) only the calls it gives in:
     * with more ranks nobody else writes its area; of two ranks, a call it
     * gives nothing in (a bcast it reads) had it as its only reader */
    if (st->root == st->me && len > 0) {
        const unsigned end = u + (st->wrote ? (unsigned) ((st->wrote + XCCL_LATENCY_UNIT - 1) / XCCL_LATENCY_UNIT)
                                            : units);
        for (unsigned k = u; k < end; k++) {
            st->last = h->lat_wrote[k] > st->last ? h->lat_wrote[k] : st->last;
            h->lat_wrote[k] = st->f2;
        }
    }
}

LAT_FN void lat_begin(mca_coll_xccl_latency_t *st, mca_coll_xccl_module_t *m, xccl_coll_t coll,
                      const xccl_coll_args_t *args, size_t es, const mca_coll_xccl_reduce_t *red,
                      const char *ws, char *wr, int algo)
{
    mca_coll_xccl_latency_fix(st, m, coll, args, es, red, ws, wr, algo);
    lat_place(st);
}

/* Where segment rank s's part of the call lies: the start of its area
 * (image layout) or of area s ^ flip (pair layout). */
LAT_FN unsigned char *lat_part(const mca_coll_xccl_latency_t *st, int s)
{
    return st->m->level->small[st->pair ? s ^ st->flip : s] + st->at0;
}

/* Pair layout: the part this rank gives for a reduction, the other
 * rank's share of ws: its piece (sliced allreduce, pieces by segment
 * rank), its block (reduce_scatter, by communicator rank) or all
 * (whole allreduce); its bytes in *bytes. */
LAT_FN const char *lat_pair_share(const mca_coll_xccl_latency_t *st, size_t *bytes)
{
    size_t at = 0, n = st->count;
    if (st->sliced) {
        n = xccl_build_shm_slice(st->count, 2, st->es, 1 - st->me, &at);
    } else if (XCCL_COLL_ALLREDUCE != st->coll) {
        const size_t mine_at = st->at / st->es;    /* elements before this rank's block */
        at = 0 == st->m->rank ? st->count : 0;
        n = 0 == st->m->rank ? st->len / st->es - st->count : mine_at;
    }
    *bytes = n * st->es;
    return st->ws + at * st->es;
}

/* Step 1 and 2 of the call: the own part into its area (once every
 * peer is done with the last call that wrote there), and the post. */
LAT_FN int lat_give(mca_coll_xccl_latency_t *st, int wait)
{
    struct mca_coll_xccl_level *h = st->m->level;
    lat_line_t *mine = h->line[st->me];
    unsigned char *area = lat_part(st, st->me);
    const size_t len = st->len;
    if (st->root == st->me && len > 0) {
        if (st->last > 0 && h->lat_seen <= st->last) {
            const int r = lat_posted_all(st, st->last + 1, wait);
            if (1 != r) {
                return r;
            }
        }
        if (XCCL_COLL_ALLTOALL == st->coll && st->pair) {
            /* the other rank's block */
            lat_copy(area, st->ws + (size_t) (1 - st->m->rank) * st->block, st->block);
        } else if (XCCL_COLL_ALLTOALL == st->coll) {
            /* all but the own block, which goes straight to wr */
            const size_t b = st->block, mine_at = (size_t) st->m->rank * b;
            lat_copy(area, st->ws, mine_at);
            lat_copy(area + mine_at + b, st->ws + mine_at + b, len - mine_at - b);
        } else if (NULL != st->kernel && st->pair) {
            size_t bytes;
            const char *share = lat_pair_share(st, &bytes);
            lat_copy(area, share, bytes);
        } else {
            const char *src = XCCL_COLL_BCAST == st->coll ? st->wr : st->ws;
            for (size_t k = 0, lo = 0; k < st->pieces; k++, lo += st->piece) {
                lat_copy(area + lo, src + lo, len - lo < st->piece ? len - lo : st->piece);
                if (st->pieces > 1) {
                    atomic_store_explicit(&mine->seq, st->f + k, memory_order_release);
                }
            }
        }
        if (XCCL_COLL_BCAST == st->coll && len <= LAT_INLINE) {
            lat_inline_put(mine, st->wr, len, st->f);
        }
    }
    /* the root of a bcast in pieces has posted them all (f2); the others
     * post f: entered this call, done reading the calls before */
    atomic_store_explicit(&mine->seq, st->root == st->me && st->pieces > 1 ? st->f2 : st->f,
                          memory_order_release);
    if (XCCL_COLL_ALLGATHER == st->coll || XCCL_COLL_ALLTOALL == st->coll) {
        /* the own block straight from ws, while the peers still copy in
         * (in place, an allgather's is already there) */
        const size_t b = st->block, at = XCCL_COLL_ALLTOALL == st->coll ? (size_t) st->m->rank * b : 0;
        char *own = st->wr + (size_t) st->m->rank * b;
        if (own != st->ws + at) {
            lat_copy(own, st->ws + at, b);
        }
    }
    return 1;
}

/* Step 3 of a bcast: each piece after its post (one piece: the whole
 * part, or the payload in the root's line). */
LAT_FN int lat_bcast_read(mca_coll_xccl_latency_t *st, int wait)
{
    struct mca_coll_xccl_level *h = st->m->level;
    const size_t len = st->len;
    for (; st->root != st->me && st->k < st->pieces; st->k++) {
        const size_t lo = st->k * st->piece;
        const int r = lat_posted(st, st->root, st->f + st->k, wait);
        if (1 != r) {
            return r;
        }
        if (len > LAT_INLINE || !lat_inline_get(h->line[st->root], st->wr, len, st->f)) {
            lat_copy(st->wr + lo, lat_part(st, st->root) + lo,
                     len - lo < st->piece ? len - lo : st->piece);
        }
    }
    return 1;
}

/* Step 3 of a reduction of two ranks (pair layout): this rank's share
 * (the whole vector, its block, or its piece when sliced) from its ws
 * and the part the other gave, in segment rank order.  Sliced, it then
 * writes the reduced piece back over that part (the lines it has just
 * read, where their giver reads them next), posts f2 (phase 2) and
 * copies the other piece out of the part it gave itself. */
LAT_FN int lat_reduce_pair(mca_coll_xccl_latency_t *st, int wait)
{
    const size_t es = st->es;
    size_t p_at = 0, p_n = st->count;
    if (1 == st->phase) {
        const int r = lat_posted_all(st, st->f, wait);
        if (1 != r) {
            return r;
        }
        unsigned char *other = lat_part(st, 1 - st->me);
        if (st->sliced) {
            p_n = xccl_build_shm_slice(st->count, 2, es, st->me, &p_at);
        }
        char *d = st->wr + p_at * es;
        const char *own = st->ws + st->at + p_at * es;
        if (own != d && own < d + p_n * es && d < own + p_n * es) {
            /* an in-place reduce_scatter's own block overlaps its result
             * at another offset: from a copy past the part given, in
             * this call's units of the own area, which nobody reads */
            size_t given;
            (void) lat_pair_share(st, &given);
            unsigned char *copy = lat_part(st, st->me) + given;
            lat_copy(copy, own, p_n * es);
            own = (const char *) copy;
        }
        if (p_n > 0) {
            st->kernel(d, 0 == st->me ? own : (const char *) other, 0 == st->me ? (const char *) other : own,
                       p_n);
        }
        if (!st->sliced) {
            return 1;
        }
        if (p_n > 0) {
            lat_copy(other, d, p_n * es);
        }
        atomic_store_explicit(&((lat_line_t *) st->m->level->line[st->me])->seq, st->f2, memory_order_release);
        st->phase = 2;
    }
    const int r = lat_posted_all(st, st->f2, wait);
    if (1 != r) {
        return r;
    }
    p_n = xccl_build_shm_slice(st->count, 2, es, 1 - st->me, &p_at);
    if (p_n > 0) {
        lat_copy(st->wr + p_at * es, lat_part(st, st->me), p_n * es);
    }
    return 1;
}

/* Step 3 of a reduction: in segment rank order, the same on every rank.
 * Sliced: rank s reduces piece s into wr and over its own copy of piece
 * s in its area (no peer reads that one), posts f2 (phase 2), then copies
 * the peers' reduced pieces out of their areas.  (The own piece is copied
 * in rather than read from ws: user buffers off the 64-byte line split the
 * vector loads.)  Whole:
 * the first reduction writes wr from two areas (no copy first). */
LAT_FN int lat_reduce(mca_coll_xccl_latency_t *st, int wait)
{
    struct mca_coll_xccl_level *h = st->m->level;
    const int n = h->node_size;
    const size_t es = st->es, count = st->count;
    const size_t o = st->at0 + st->at;
    size_t p_at, p_n;
    if (st->pair) {
        return lat_reduce_pair(st, wait);
    }
    if (1 == st->phase) {
        const int r = lat_posted_all(st, st->f, wait);
        if (1 != r) {
            return r;
        }
        if (!st->sliced) {
            if (count > 0 && 1 == n) {
                lat_copy(st->wr, h->small[0] + o, count * es);
            } else if (count > 0) {
                st->kernel(st->wr, h->small[0] + o, h->small[1] + o, count);
                for (int s = 2; s < n; s++) {
                    st->kernel(st->wr, st->wr, h->small[s] + o, count);
                }
            }
            return 1;
        }
        p_n = xccl_build_shm_slice(count, n, es, st->me, &p_at);
        if (p_n > 0) {
            char *d = st->wr + p_at * es;
            const size_t po = st->at0 + p_at * es;
            st->kernel(d, h->small[0] + po, h->small[1] + po, p_n);
            for (int s = 2; s < n; s++) {
                st->kernel(d, d, h->small[s] + po, p_n);
            }
            lat_copy(h->small[st->me] + po, d, p_n * es);
        }
        atomic_store_explicit(&((lat_line_t *) h->line[st->me])->seq, st->f2, memory_order_release);
        st->phase = 2;
    }
    const int r = lat_posted_all(st, st->f2, wait);
    if (1 != r) {
        return r;
    }
    for (int s = 0; s < n; s++) {
        p_n = xccl_build_shm_slice(count, n, es, s, &p_at);
        if (s != st->me && p_n > 0) {
            lat_copy(st->wr + p_at * es, h->small[s] + st->at0 + p_at * es, p_n * es);
        }
    }
    return 1;
}

LAT_FN int lat_run(mca_coll_xccl_latency_t *st, int wait)
{
    struct mca_coll_xccl_level *h = st->m->level;
    if (0 == st->phase) {
        const int r = lat_give(st, wait);
        if (1 != r) {
            return r;
        }
        st->phase = 1;
    }
    switch (st->coll) {
    case XCCL_COLL_BCAST:
        return lat_bcast_read(st, wait);
    case XCCL_COLL_BARRIER:
        /* every rank has posted this call: every rank has entered it */
        return lat_posted_all(st, st->f, wait);
    case XCCL_COLL_ALLGATHER:
    case XCCL_COLL_ALLTOALL: {
        const int r = lat_posted_all(st, st->f, wait);
        if (1 != r) {
            return r;
        }
        const size_t b = st->block;
        const size_t at = XCCL_COLL_ALLTOALL == st->coll && !st->pair ? (size_t) st->m->rank * b : 0;
        for (int j = 0; j < st->m->size; j++) {
            if (j != st->m->rank) {
                lat_copy(st->wr + (size_t) j * b, lat_part(st, h->local_of[j]) + at, b);
            }
        }
        return 1;
    }
    default:
        return lat_reduce(st, wait);
    }
}

int mca_coll_xccl_latency_run(mca_coll_xccl_latency_t *st, unsigned tries)
{
    int rc = lat_run(st, 0);
    for (unsigned k = 1; 0 == rc && k < tries; k++) {
#if defined(__x86_64__)
        __builtin_ia32_pause();      /* as lat_posted's waits: the peer's store lands sooner */
#endif
        rc = lat_run(st, 0);
    }
    return rc;
}

int mca_coll_xccl_latency_begin(mca_coll_xccl_latency_t *st, unsigned tries)
{
    lat_place(st);
    return mca_coll_xccl_latency_run(st, tries);
}

void mca_coll_xccl_latency_place(mca_coll_xccl_latency_t *st) { lat_place(st); }
int mca_coll_xccl_latency_wait(mca_coll_xccl_latency_t *st, int s, uint64_t f, int wait)
{
    return s < 0 ? lat_posted_all(st, f, wait) : lat_posted(st, s, f, wait);
}
void mca_coll_xccl_latency_post(mca_coll_xccl_latency_t *st)
{
    atomic_store_explicit(&((lat_line_t *) st->m->level->line[st->me])->seq, st->f, memory_order_release);
}

int mca_coll_xccl_latency_call(mca_coll_xccl_call_t *c, const char *ws, char *wr, int algo)
{
    mca_coll_xccl_module_t *m = c->m;
    mca_coll_xccl_latency_t st;
    /* after the level's nonblocking calls made before this one */
    while (!mca_coll_xccl_latency_idle(m)) {
        opal_progress();
    }
    lat_begin(&st, m, c->coll, &c->args, c->es, c->reduction ? &c->red : NULL, ws, wr, algo);
    if (1 != lat_run(&st, 1)) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "a rank of this node is gone");
    }
    return MPI_SUCCESS;
}
