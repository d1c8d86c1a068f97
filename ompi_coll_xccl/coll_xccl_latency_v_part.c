/*
 * A rank's part in a call of the latency path of the v forms
 * (coll_xccl_latency_v.c): the room every rank reserves, how each block
 * goes (in the part, by its address, or large), the blocks given and
 * taken, and step 5's wait for the readers of single copies.
 *
 * The room.  Every rank reserves the same units in every such call: its
 * part, a directory of n entries (scatter(v), alltoallv) and
 * XCCL_LATENCY_V_BLOCK bytes of blocks (gather, scatter, reduce and
 * allgatherv, whose sizes every rank knows: what the call's largest part
 * holds, room below), packed in the order of the ranks after the sender,
 * 16 bytes apart at least (so that tiny blocks share the directory's
 * line).  A sender fills it block by block while a block fits; a
 * receiver does not know where the sender's other blocks end, hence the
 * directory.  A rank that writes nothing in its part records nothing in
 * the ring and waits for nothing first.  The ring of these calls is the
 * whole small area (st.wide) where the six's would be LAT_RING_MIN: a
 * sender waits for its slowest receiver once it is as many calls ahead
 * as the ring holds, 45 at up to 16 ranks (48 of gatherv's; of a gather
 * of 256 bytes or less, 768).  That depth matters with more ranks than
 * cores, where a waiting rank yields: at np 4 on 2 cores, slots of 4 KiB
 * per peer (16 calls in the whole area) took scatterv 1.6 times as long
 * at 8 B as slots of 1 KiB (64 calls), and in LAT_RING_MIN (4 calls)
 * gatherv and scatterv took 2-5 and 1.2-2 times as long as in the whole
 * area (docs/bench/latency-path.md).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"

#include "segment/xccl_cma.h"

#include "coll_xccl_exec.h"
#include "coll_xccl_latency_v_part.h"
#include "coll_xccl_log.h"

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

void mca_coll_xccl_latency_v_give(latv_t *v, const char *ws, size_t *bytes, size_t *displs)
{
    unsigned char *part = latv_part_of(v, v->rank);
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
            latv_copy(part + at, ws + displs[r], len);
            if (2 == v->n) {
                latv_put_inline(v, ws + displs[r], len);
            }
            dir[r] = (uint32_t) at;
            at += (len + LATV_ALIGN - 1) / LATV_ALIGN * LATV_ALIGN;
            bytes[r] = 0;
            break;
        case LATV_BY_ADDRESS:
            latv_put_address(part + at, ws + displs[r]);
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

int mca_coll_xccl_latency_v_take(latv_t *v, int q, char *dst, size_t *len, int wait)
{
    const int r = latv_posted(v, q, wait);
    if (1 != r) {
        return r;
    }
    if (2 == v->n && latv_get_inline(v, q, dst, *len)) {
        *len = 0;
        return 1;
    }
    const unsigned char *part = latv_part_of(v, q);
    const uint32_t at = ((const uint32_t *) part)[v->rank];
    if (LATV_LARGE == at) {
        v->large = 1;
    } else if (at & LATV_DIRECT) {
        if (0 != read_direct(v, q, dst, part + (at & ~LATV_DIRECT), *len)) {
            return -3;
        }
        *len = 0;
    } else {
        latv_copy(dst, part + at, *len);
        *len = 0;
    }
    return 1;
}

_Static_assert(XCCL_LATENCY_V_DIRECT_RANKS * sizeof(uint64_t) <= XCCL_LATENCY_V_BLOCK, "gatherv's addresses");
/* The bytes of the root's addresses in its part (v->direct: at most
 * XCCL_LATENCY_V_DIRECT_RANKS ranks): 0 where no block is written by its
 * sender. */
static size_t addresses(const latv_t *v)
{
    for (int q = 0; q < v->n; q++) {
        if (q != v->root && latv_written(v, v->vec[q])) {
            return (size_t) v->n * sizeof(uint64_t);
        }
    }
    return 0;
}

/* The room for blocks in a rank's part of a call.  Where every rank
 * knows every size and all of the call fits (gather, scatter, reduce,
 * allgatherv: mca_coll_xccl_latency_v_fits_args, alike on every rank):
 * what the largest part of the call holds, at least LATV_ALIGN, so that
 * a small call takes few units and the ring holds many calls
 * (docs/bench/single-copy-v.md, "The room of a small call"); else
 * XCCL_LATENCY_V_BLOCK, since only a block's two ends know its size. */
static size_t room(const latv_t *v, xccl_coll_t coll, const xccl_coll_args_t *a, size_t es)
{
    size_t most = 0;
    if (xccl_coll_sizes_local(coll) || !mca_coll_xccl_latency_v_fits_args(coll, a, a->count * es, v->n)) {
        return XCCL_LATENCY_V_BLOCK;
    }
    switch (coll) {
    case XCCL_COLL_GATHER:
        most = a->block;
        break;
    case XCCL_COLL_SCATTER:
        most = (size_t) (v->n - 1) * ((a->block + LATV_ALIGN - 1) / LATV_ALIGN * LATV_ALIGN);
        break;
    case XCCL_COLL_REDUCE:
        most = a->count * es;
        break;
    default:                         /* allgatherv */
        for (int q = 0; q < v->n; q++) {
            most = v->vec[q] > most ? v->vec[q] : most;
        }
    }
    return most > LATV_ALIGN ? most : LATV_ALIGN;
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
    v->part = (dir ? mca_coll_xccl_latency_v_dir(v->n) : 0) + room(v, coll, a, es);
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
