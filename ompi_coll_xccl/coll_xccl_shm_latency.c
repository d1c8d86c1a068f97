/*
 * The shared-memory level's latency path (coll_xccl_shm_latency.h): small
 * blocking calls on one node without the executor, in the level's segment
 * (coll_xccl_shm.c sets it up).
 */
#include "ompi_config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/op/op.h"
#include "opal/runtime/opal_progress.h"

#include "xccl_build.h"

#include "coll_xccl_exec.h"
#include "coll_xccl_pack.h"
#include "coll_xccl_shm.h"
#include "coll_xccl_shm_latency.h"

/*
 * Small blocking calls on one node without the executor.  Segment rank s
 * owns its latency line (xccl_shm_line: its sequence word) and its small
 * area (xccl_shm_small); only s writes them.  Every rank makes the same
 * calls through this path in the same order (the decision rests on what all
 * ranks share), numbered f = 1, 2, ..., and every rank gives the same
 * number of bytes in a call, so one ring placement, the same on every rank,
 * says where call f's parts go in each area: the next units of XCCL_SHM_LAT_UNIT
 * bytes, from the start again where they would not fit.  In call f:
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
 */
/* A bcast of at most LAT_INLINE bytes also travels in the root's line,
 * next to its sequence word, so that a reader whose root has not moved on
 * gets both with one cache-line transfer (reading the sequence word and
 * then the small area took two: measured on an Intel Xeon VM, an 8-byte
 * bcast at np 2 cost 0.24 us against tuned's 0.17).  tag says which call's
 * payload the line holds, 0 while the root rewrites it: a reader takes the
 * payload only where tag reads f before and after it (a seqlock), else the
 * copy in the small area, which the ring protects as before. */
#define LAT_INLINE 48
/* A bcast of more than LAT_PIECE bytes goes in pieces of LAT_PIECE (the
 * last shorter), each posted with a number of its own: the readers copy
 * piece k out while the root copies piece k + 1 in, instead of waiting for
 * the whole part.  (One post: np 2, each call timed alone, the executor's
 * pipeline did a 64 KiB bcast in 0.88x the time, with the root changing
 * on every call 0.81x.) */
#define LAT_PIECE ((size_t) 16384)
typedef struct {
    _Atomic uint64_t seq;
    _Atomic uint64_t tag;
    _Atomic uint64_t inl[LAT_INLINE / 8];
} lat_line_t;
_Static_assert(sizeof(lat_line_t) <= XCCL_SHM_LINE_BYTES, "latency line");

/* The root's side: the payload of call f into its line. */
static void lat_inline_put(lat_line_t *l, const void *src, size_t len, uint64_t f)
{
    uint64_t w[LAT_INLINE / 8] = { 0 };
    memcpy(w, src, len);
    atomic_store_explicit(&l->tag, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (size_t i = 0; i < (len + 7) / 8; i++) {
        atomic_store_explicit(&l->inl[i], w[i], memory_order_relaxed);
    }
    atomic_store_explicit(&l->tag, f, memory_order_release);
}

/* A reader's side: 1 and the payload of call f in dst, or 0 (the root has
 * moved on, or is rewriting the line: read the small area). */
static int lat_inline_get(const lat_line_t *l, void *dst, size_t len, uint64_t f)
{
    uint64_t w[LAT_INLINE / 8];
    if (atomic_load_explicit(&l->tag, memory_order_acquire) != f) {
        return 0;
    }
    for (size_t i = 0; i < (len + 7) / 8; i++) {
        w[i] = atomic_load_explicit(&l->inl[i], memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&l->tag, memory_order_relaxed) != f) {
        return 0;
    }
    memcpy(dst, w, len);
    return 1;
}
/* Consecutive calls never share a unit, so step 1 of call f waits for
 * f - 1 at most, which every peer posts without waiting for this rank's f
 * (sharing one deadlocked: measured).  A call's ring is three times the
 * larger of its part and the part of the call before (at most the whole
 * area, which holds three of the largest parts): a part that starts the
 * ring again (it did not fit after the part before) ends before that part
 * began, which lies past two such parts from the start.  (One ring of the
 * whole area made a stream of 32 KiB allgathers at np 2 3.3x slower once
 * the area grew to 192 KiB: every call wrote lines no cache held.)  The
 * ring is never shorter than LAT_RING_MIN (below). */
_Static_assert(3 * XCCL_SHM_LAT_BYTES <= XCCL_SHM_SMALL_BYTES && XCCL_SHM_SMALL_BYTES % XCCL_SHM_LAT_UNIT == 0,
               "latency units");
/* The shortest ring, 48 KiB: small calls cycle through it as through the
 * whole area before it grew, so a bcast root runs up to 192 one-unit calls
 * ahead before it reads its readers' lines (a ring of three units made
 * an 8-byte bcast at np 2 1.6x slower: the root read them every third
 * call). */
#define LAT_RING_MIN 192u
_Static_assert(LAT_RING_MIN <= XCCL_SHM_LAT_UNITS, "latency ring");

size_t mca_coll_xccl_shm_lat_bytes(const mca_coll_xccl_call_t *c)
{
    switch (c->coll) {
    case XCCL_COLL_ALLREDUCE:
        return c->args.count * c->es;
    case XCCL_COLL_REDUCE_SCATTER:
    case XCCL_COLL_REDUCE_SCATTER_BLOCK:
        return c->total * c->es;
    case XCCL_COLL_ALLGATHER:
        return c->args.block;
    case XCCL_COLL_ALLTOALL:
        return c->args.block * (size_t) c->m->size;
    case XCCL_COLL_BCAST:
        return c->bytes;
    default:
        return SIZE_MAX;
    }
}

/* The copies of the latency path: glibc's memcpy of a few KiB between a
 * page-aligned region and a user buffer 1..63 bytes apart modulo 4 KiB
 * runs several times slower (xccl_memmove avoids that). */
static inline void lat_copy(void *dst, const void *src, size_t len)
{
    if (len <= 64) {
        memcpy(dst, src, len);
    } else {
        xccl_memmove(dst, src, len);
    }
}

/* Spins (each with a pause: the peer's store gets its line sooner)
 * between two calls of Open MPI's progress engine while a latency-path
 * call waits, on cores of their own (mca_coll_xccl_spins_per_progress). */
#define LAT_SPINS 256u
/* Progress calls between two checks that the peer still lives. */
#define LAT_LIVENESS_POLLS 256u

/* Waits until segment rank s has posted f or later: 0, or -1 once its
 * process is gone.  A number once read stays true (they only grow), so a
 * rank that has run ahead (a bcast root) is not asked again: its line,
 * which it rewrites every call, costs a cache-line transfer per read. */
static int lat_wait(struct mca_coll_xccl_shm *h, int s, uint64_t f)
{
    if (h->seen[s] >= f) {
        return 0;
    }
    const lat_line_t *l = h->line[s];
    const unsigned every = mca_coll_xccl_spins_per_progress(LAT_SPINS);
    unsigned spins = 0, polls = 0;
    uint64_t v;
    while ((v = atomic_load_explicit(&l->seq, memory_order_acquire)) < f) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
        if (++spins >= every) {
            spins = 0;
            opal_progress();
            if (++polls == LAT_LIVENESS_POLLS) {
                polls = 0;
                if (0 == xccl_shm_peer_alive(h->seg, s)) {
                    return -1;
                }
            }
        }
    }
    h->seen[s] = v;
    return 0;
}

/* Waits until every segment rank but this one has posted f or later. */
static int lat_wait_all(struct mca_coll_xccl_shm *h, int me, uint64_t f)
{
    for (int s = 0; s < h->node_size; s++) {
        if (s != me && 0 != lat_wait(h, s, f)) {
            return -1;
        }
    }
    h->lat_seen = f > h->lat_seen ? f : h->lat_seen;
    return 0;
}

int mca_coll_xccl_shm_latency(mca_coll_xccl_call_t *c, const char *ws, char *wr, int algo)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_shm *h = m->shm;
    const int n = h->node_size, me = h->local_of[m->rank];
    const int *local_of = h->local_of;
    const size_t len = mca_coll_xccl_shm_lat_bytes(c);
    const uint64_t f = ++h->lat_seq;
    /* the sliced allreduce posts twice: f with its vector in its area,
     * f2 with its reduced piece there too (a peer that posted past f2 is
     * done with this call: the ring below counts the call as f2) */
    const int sliced = XCCL_COLL_ALLREDUCE == c->coll && n > 1 &&
                       algo == xccl_select_level_index(c->coll, XCCL_LEVEL_SHM);
    const int bcast = XCCL_COLL_BCAST == c->coll, root = bcast ? local_of[c->root] : me;
    /* a bcast in pieces takes a number a piece: f .. f + pieces - 1, the
     * last of which the ring counts the call as, like the sliced
     * allreduce's f2 */
    const size_t pieces = bcast && len > LAT_PIECE ? (len + LAT_PIECE - 1) / LAT_PIECE : 1;
    const size_t piece = pieces > 1 ? LAT_PIECE : len;
    const uint64_t f2 = sliced ? ++h->lat_seq : (h->lat_seq += pieces - 1);
    lat_line_t *mine = h->line[me];
    /* this call's units: [u, u + units) of every area */
    const unsigned units = (unsigned) ((len + XCCL_SHM_LAT_UNIT - 1) / XCCL_SHM_LAT_UNIT);
    /* the ring: three of the larger of this call's and the last call's
     * parts, at least LAT_RING_MIN units, at most the whole area */
    const unsigned big = units > h->lat_last ? units : h->lat_last;
    const unsigned ring = 3 * big < LAT_RING_MIN ? LAT_RING_MIN
                          : 3 * big < XCCL_SHM_LAT_UNITS ? 3 * big : XCCL_SHM_LAT_UNITS;
    if (h->lat_pos + units > ring) {
        h->lat_pos = 0;
    }
    const unsigned u = h->lat_pos;
    const size_t at0 = (size_t) u * XCCL_SHM_LAT_UNIT;
    h->lat_pos += units;
    h->lat_last = units;

    if (root == me && len > 0) {
        uint64_t last = 0;
        for (unsigned k = u; k < u + units; k++) {
            last = h->lat_wrote[k] > last ? h->lat_wrote[k] : last;
            h->lat_wrote[k] = f2;
        }
        if (last > 0 && h->lat_seen <= last && 0 != lat_wait_all(h, me, last + 1)) {
            goto gone;
        }
        if (XCCL_COLL_ALLTOALL == c->coll) {
            /* all but the own block, which goes straight to wr below */
            const size_t b = c->args.block, mine_at = (size_t) m->rank * b;
            lat_copy(h->small[me] + at0, ws, mine_at);
            lat_copy(h->small[me] + at0 + mine_at + b, ws + mine_at + b, len - mine_at - b);
        } else {
            const char *src = bcast ? wr : ws;
            for (size_t k = 0, lo = 0; k < pieces; k++, lo += piece) {
                lat_copy(h->small[me] + at0 + lo, src + lo, len - lo < piece ? len - lo : piece);
                if (pieces > 1) {
                    atomic_store_explicit(&mine->seq, f + k, memory_order_release);
                }
            }
        }
        if (bcast && len <= LAT_INLINE) {
            lat_inline_put(mine, wr, len, f);
        }
    }
    /* the root of a bcast in pieces has posted them all (f2); the others
     * post f: entered this call, done reading the calls before */
    atomic_store_explicit(&mine->seq, root == me && pieces > 1 ? f2 : f, memory_order_release);

    switch (c->coll) {
    case XCCL_COLL_BCAST:
        /* each piece after its post (one piece: the whole part, or the
         * payload in the root's line) */
        for (size_t k = 0, lo = 0; root != me && k < pieces; k++, lo += piece) {
            if (0 != lat_wait(h, root, f + k)) {
                goto gone;
            }
            if (len > LAT_INLINE || !lat_inline_get(h->line[root], wr, len, f)) {
                lat_copy(wr + lo, h->small[root] + at0 + lo, len - lo < piece ? len - lo : piece);
            }
        }
        break;
    case XCCL_COLL_ALLGATHER:
    case XCCL_COLL_ALLTOALL: {
        const size_t b = c->args.block;
        const size_t at = XCCL_COLL_ALLTOALL == c->coll ? (size_t) m->rank * b : 0;
        /* the own block straight from ws, while the peers still copy in
         * (in place, an allgather's is already there) */
        char *own = wr + (size_t) m->rank * b;
        if (own != ws + at) {
            lat_copy(own, ws + at, b);
        }
        if (0 != lat_wait_all(h, me, f)) {
            goto gone;
        }
        for (int j = 0; j < m->size; j++) {
            if (j != m->rank) {
                lat_copy(wr + (size_t) j * b, h->small[local_of[j]] + at0 + at, b);
            }
        }
        break;
    }
    case XCCL_COLL_ALLREDUCE:
    case XCCL_COLL_REDUCE_SCATTER:
    case XCCL_COLL_REDUCE_SCATTER_BLOCK: {
        /* allreduce: every element; reduce_scatter: this rank's block */
        size_t count = c->args.count, at = 0;
        if (XCCL_COLL_ALLREDUCE != c->coll) {
            for (int j = 0; j < m->rank; j++) {
                at += c->args.counts[j];
            }
            count = c->args.counts[m->rank];
            at *= c->es;
        }
        if (0 != lat_wait_all(h, me, f)) {
            goto gone;
        }
        if (sliced) {
            /* rank s reduces piece s, in segment rank order (the bits of
             * the whole form), into wr and over its own copy of piece s
             * in its area (no peer reads that one), posts f2, and copies
             * the peers' reduced pieces out of their areas.  (Reading the
             * own piece from ws instead of copying it in was slower:
             * 64 KiB at np 2 1.10x, user buffers off the 64-byte line
             * split the vector loads.) */
            size_t p_at;
            size_t p_n = xccl_build_shm_slice(count, n, c->es, me, &p_at);
            if (p_n > 0) {
                char *d = wr + p_at * c->es;
                const size_t o = at0 + p_at * c->es;
                c->red.kernel(d, h->small[0] + o, h->small[1] + o, p_n);
                for (int s = 2; s < n; s++) {
                    c->red.kernel(d, d, h->small[s] + o, p_n);
                }
                lat_copy(h->small[me] + o, d, p_n * c->es);
            }
            atomic_store_explicit(&mine->seq, f2, memory_order_release);
            if (0 != lat_wait_all(h, me, f2)) {
                goto gone;
            }
            for (int s = 0; s < n; s++) {
                p_n = xccl_build_shm_slice(count, n, c->es, s, &p_at);
                if (s != me && p_n > 0) {
                    lat_copy(wr + p_at * c->es, h->small[s] + at0 + p_at * c->es, p_n * c->es);
                }
            }
        } else if (count > 0 && 1 == n) {
            lat_copy(wr, h->small[0] + at0 + at, count * c->es);
        } else if (count > 0) {
            /* in segment rank order, the same on every rank; the first
             * reduction writes wr from two areas (no copy first) */
            c->red.kernel(wr, h->small[0] + at0 + at, h->small[1] + at0 + at, count);
            for (int s = 2; s < n; s++) {
                c->red.kernel(wr, wr, h->small[s] + at0 + at, count);
            }
        }
        break;
    }
    default:
        return MPI_ERR_INTERN;
    }
    return MPI_SUCCESS;

gone:
    return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "a rank of this node is gone");
}

int mca_coll_xccl_shm_latency_try(mca_coll_xccl_call_t *c, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_shm *h = m->shm;
    char *ws, *wr = (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
    /* the work buffers as coll_xccl_pack.c makes them where nothing needs
     * packing; anything else goes the whole way */
    if (c->reduction) {
        if (c->rdtype != h->plan_dt || c->op != h->plan_op) {
            mca_coll_xccl_reduce_t red;
            size_t es = 1;
            if (NULL != mca_coll_xccl_plan_reduction(c->rdtype, c->op, c->total, &red, &es) ||
                NULL == red.kernel) {
                return 0;
            }
            h->plan = red;
            h->plan_es = es;
            h->plan_dt = c->rdtype;
            h->plan_op = c->op;
        }
        c->red = h->plan;
        c->es = h->plan_es;
        ws = c->in_place ? wr : (char *) c->sbuf + mca_coll_xccl_true_lb(c->rdtype);
    } else if (!mca_coll_xccl_is_contiguous(c->rdtype, c->rn)) {
        return 0;
    } else if (XCCL_COLL_BCAST == c->coll) {
        ws = NULL;
    } else if (c->in_place) {
        ws = XCCL_COLL_ALLGATHER == c->coll ? wr + (size_t) m->rank * c->args.block : wr;
    } else if (mca_coll_xccl_is_contiguous(c->sdtype, c->sn)) {
        ws = (char *) c->sbuf + mca_coll_xccl_true_lb(c->sdtype);
    } else {
        return 0;
    }
    /* decide() (coll_xccl_path.c) hands the fallback the calls from
     * XCCL_SHM_LAT_BYTES up to small_msg_bytes */
    if (mca_coll_xccl_shm_lat_bytes(c) > XCCL_SHM_LAT_BYTES ||
        (c->bytes > XCCL_SHM_LAT_BYTES &&
         c->bytes < (size_t) mca_coll_xccl_component.policy.small_bytes)) {
        return 0;
    }
    /* the level's algorithm, as its rule picks it: shm, or for allreduce
     * shm_small (the whole vector on every rank) up to
     * xccl_select_whole_max */
    const int algo = xccl_select_level_index(c->coll, XCCL_COLL_ALLREDUCE == c->coll &&
                                                          c->bytes <= xccl_select_whole_max(m->size)
                                                          ? XCCL_LEVEL_SHM_SMALL
                                                          : XCCL_LEVEL_SHM);
    /* the level's trials, or their pick, may choose the mesh instead: the
     * whole way runs the trials; once they picked shm for the call's size
     * class, the short way (before that, every call of 16-64 KiB went the
     * whole way: 4 % of a 16 KiB bcast's reader in path_peer_access) */
    if (mca_coll_xccl_shm_trial_wanted(m, c) &&
        !(h->lat_picked[c->coll] >> xccl_size_class(c->bytes) & 1u)) {
        return 0;
    }
    m->seq++;                        /* a call number, as the executor's would take */
    mca_coll_xccl_log_call(m, c->coll, 0, c->bytes, algo, -1.0, NULL, "latency_path");
    *rc = mca_coll_xccl_shm_latency(c, ws, wr, algo);
    return 1;
}
