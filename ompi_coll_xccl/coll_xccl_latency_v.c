/*
 * The latency path of the v forms (coll_xccl_latency_v.h): small blocking
 * gatherv, scatterv and alltoallv calls on one node through the latency
 * lines and small areas, with the ring, numbers and waits of the latency
 * path (coll_xccl_latency.c), without the executor.
 *
 * The decision.  The six collectives' latency path takes a call where
 * every rank's part is small, which every rank computes alike from the
 * call's arguments.  A v form's rank knows its own sizes only (gatherv's
 * and scatterv's root: every rank's), so whether a call is small cannot be
 * decided before the ranks have told each other; a bound every rank could
 * compute (the call's whole size) does not exist.  So every blocking call
 * of these collectives on the level starts here, and the ranks agree in
 * the call's first post, with no round of its own:
 *   - each rank that sends writes, into its slot for each receiver, a
 *     header word (the call's number and whether the whole call may run
 *     here, as far as this rank knows) and, where it does, the block;
 *   - it posts the call's number in its latency line (release);
 *   - a receiver waits for the post of each rank it reads (acquire) and
 *     reads the header there: gatherv's and scatterv's root decides for
 *     all (it knows every size) and every other rank reads the root's
 *     word; alltoallv's ranks each read every peer's word for them and
 *     take the latency form only where all say so.
 * Every rank reads the same words, so all decide alike, and before any
 * byte reaches a result (an alltoallv in place still holds its input).
 * Where the answer is no, every rank returns with c->lat_v set and the
 * call goes on to the level's executor schedule (path_schedule), as it
 * would have without this path: the slots, flags and turns of the level
 * are untouched here, and the latency path's state (numbers, ring, flips)
 * moved alike on every rank, so both leave the segment as the next call
 * of either kind expects.  A header is read only after its writer's post
 * and the ring keeps the writer off those units until the reader posted a
 * later call, so a word is always the call's own (a number in the latency
 * line itself would not be: a rank runs ahead into later calls).
 *
 * The room.  Every rank reserves the same units in every such call: n - 1
 * slots of mca_coll_xccl_latency_v_slot(n) bytes (4160 up to 16 ranks),
 * rank q's slot for rank r at ((r - q - 1) mod n) slots into q's part
 * (gatherv's senders: the first; scatterv's and gatherv's root: the
 * header for r there, gatherv's one header for all in the first).  A
 * block fits where it has at most a slot less the header word; its first
 * 56 bytes share the header's line.  Blocks lie at their slot, not packed,
 * because a receiver knows only its own block's size.  The ring counts
 * the call like any other (a rank that writes nothing in its part records
 * nothing and waits for nothing first), so the latency path's calls of
 * every collective interleave in call order.
 *
 * What it costs against the executor: no schedule, one post per rank, a
 * copy in and a copy out per block.  gatherv's senders wait for the
 * root's post (its decision), which they would not need for the data;
 * alltoallv's ranks wait for every peer, as any of them may say no.
 * Nonblocking calls keep the executor (their turn in m->level_ticket);
 * this path, like the six's blocking one, first waits until none is in
 * flight (mca_coll_xccl_latency_idle).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"

#include "base/xccl_copy.h"

#include "coll_xccl_latency_v.h"
#include "coll_xccl_log.h"

/* The header word before a slot's block: number << 1 | "may run here". */
#define LATV_HEAD ((size_t) 8)

typedef struct {
    mca_coll_xccl_latency_t st;      /* the ring's numbers and units */
    const size_t *vec;               /* c->args.vec: sizes and displacements in bytes */
    size_t slot, cap;                /* a slot's bytes, a block's at most */
    int n, rank, root;               /* communicator ranks */
} latv_t;

static inline void copy(void *dst, const void *src, size_t len)
{
    if (len <= 64) {
        xccl_copy_small(dst, src, len);
    } else {
        xccl_memmove(dst, src, len);
    }
}

/* Rank q's slot for rank r (communicator ranks): in q's part of the call,
 * the start of its area (more than two ranks) or of the area of the pair
 * layout (coll_xccl_latency.c), the same placement as the six's calls. */
static inline unsigned char *slot_of(const latv_t *v, int q, int r)
{
    const mca_coll_xccl_latency_t *st = &v->st;
    const int s = st->m->level->local_of[q];
    const size_t d = r < 0 ? 0 : (size_t) ((r - q - 1 + v->n) % v->n);
    return st->m->level->small[st->pair ? s ^ st->flip : s] + st->at0 + d * v->slot;
}

static inline void head_put(unsigned char *at, uint64_t f, int ok)
{
    const uint64_t w = f << 1 | (uint64_t) (ok != 0);
    memcpy(at, &w, sizeof(w));
}

static inline int head_ok(const unsigned char *at)
{
    uint64_t w;
    memcpy(&w, at, sizeof(w));
    return (int) (w & 1);
}

/* Whether the peer q has posted this call (1), or is gone (-1). */
static inline int posted(latv_t *v, int q)
{
    return mca_coll_xccl_latency_wait(&v->st, v->st.m->level->local_of[q], v->st.f);
}

/* Each function below: 1 ran here, 0 the executor, -1 a rank is gone. */

/* Gatherv: a sender's block into its first slot, then the root's word;
 * the root decides, posts it, and copies every block out after its post. */
static int gatherv(latv_t *v, const char *ws, char *wr, int in_place)
{
    const size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int n = v->n, me = v->rank, root = v->root;
    int ok = 1;
    if (me != root) {
        if (bytes[me] > 0 && bytes[me] <= v->cap) {
            copy(slot_of(v, me, -1) + LATV_HEAD, ws, bytes[me]);
        }
        mca_coll_xccl_latency_post(&v->st);
        return 1 != posted(v, root) ? -1 : head_ok(slot_of(v, root, -1));
    }
    for (int q = 0; q < n; q++) {
        ok &= q == root || bytes[q] <= v->cap;
    }
    head_put(slot_of(v, root, -1), v->st.f, ok);
    mca_coll_xccl_latency_post(&v->st);
    if (!ok) {
        return 0;
    }
    if (!in_place && bytes[me] > 0) {
        copy(wr + displs[me], ws, bytes[me]);
    }
    for (int k = 1; k < n; k++) {
        const int q = (root + k) % n;
        if (bytes[q] > 0) {
            if (1 != posted(v, q)) {
                return -1;
            }
            copy(wr + displs[q], slot_of(v, q, -1) + LATV_HEAD, bytes[q]);
        }
    }
    return 1;
}

/* Scatterv: the root writes each rank's word and block into that rank's
 * slot, posts, and keeps its own block; a receiver reads its slot after
 * the root's post. */
static int scatterv(latv_t *v, const char *ws, char *wr, int in_place)
{
    const size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int n = v->n, me = v->rank, root = v->root;
    int ok = 1;
    if (me != root) {
        mca_coll_xccl_latency_post(&v->st);
        if (1 != posted(v, root)) {
            return -1;
        }
        const unsigned char *at = slot_of(v, root, me);
        if (!head_ok(at)) {
            return 0;
        }
        /* (a block past the slot: sizes that differ between the root and
         * this rank, an erroneous program; never read past the slot) */
        copy(wr, at + LATV_HEAD, bytes[me] <= v->cap ? bytes[me] : v->cap);
        return 1;
    }
    for (int q = 0; q < n; q++) {
        ok &= q == root || bytes[q] <= v->cap;
    }
    for (int k = 1; k < n; k++) {
        const int q = (root + k) % n;
        unsigned char *at = slot_of(v, root, q);
        head_put(at, v->st.f, ok);
        if (ok && bytes[q] > 0) {
            copy(at + LATV_HEAD, ws + displs[q], bytes[q]);
        }
    }
    mca_coll_xccl_latency_post(&v->st);
    if (ok && !in_place && bytes[me] > 0) {
        copy(wr, ws + displs[me], bytes[me]);
    }
    return ok;
}

/* Alltoallv: every rank writes its word and block into its slot for each
 * peer and posts; it reads every peer's word for it before it writes its
 * result (in place, the input), then the blocks. */
static int alltoallv(latv_t *v, const char *ws, char *wr)
{
    const int n = v->n, me = v->rank;
    const size_t *sc = v->vec, *sd = v->vec + n, *rc = v->vec + 2 * n, *rd = v->vec + 3 * n;
    int ok = 1;
    for (int r = 0; r < n; r++) {
        ok &= r == me || sc[r] <= v->cap;
    }
    for (int k = 1; k < n; k++) {
        const int r = (me + k) % n;
        unsigned char *at = slot_of(v, me, r);
        head_put(at, v->st.f, ok);
        if (ok && sc[r] > 0) {
            copy(at + LATV_HEAD, ws + sd[r], sc[r]);
        }
    }
    mca_coll_xccl_latency_post(&v->st);
    for (int k = 1; k < n; k++) {
        const int q = (me - k + n) % n;
        if (1 != posted(v, q)) {
            return -1;
        }
        ok &= head_ok(slot_of(v, q, me));
    }
    if (!ok) {
        return 0;
    }
    if (rc[me] > 0 && wr + rd[me] != ws + sd[me]) {
        copy(wr + rd[me], ws + sd[me], rc[me]);
    }
    for (int k = 1; k < n; k++) {
        const int q = (me - k + n) % n;
        if (rc[q] > 0) {
            copy(wr + rd[q], slot_of(v, q, me) + LATV_HEAD, rc[q] <= v->cap ? rc[q] : v->cap);
        }
    }
    return 1;
}

int mca_coll_xccl_latency_v_call(mca_coll_xccl_call_t *c, mca_coll_xccl_gpu_stage_t *stage, const char *ws,
                                 char *wr)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_level *h = m->level;
    latv_t v = { .vec = c->args.vec, .n = m->size, .rank = m->rank, .root = c->args.root };
    v.slot = mca_coll_xccl_latency_v_slot(v.n);
    v.cap = v.slot - LATV_HEAD;
    int r = stage ? mca_coll_xccl_gpu_stage_fill(m, c->coll, stage) : MPI_SUCCESS;
    if (MPI_SUCCESS != r) {
        return r;
    }
    /* after the level's nonblocking calls made before this one */
    while (!mca_coll_xccl_latency_idle(m)) {
        opal_progress();
    }
    /* whether this rank writes its part: the ring records (and its next
     * writes there wait for) only those calls */
    const int writes = XCCL_COLL_ALLTOALLV == c->coll || v.rank == v.root ||
                       (XCCL_COLL_GATHERV == c->coll && v.vec[v.rank] > 0 && v.vec[v.rank] <= v.cap);
    const int me = h->local_of[m->rank];
    v.st = (mca_coll_xccl_latency_t) { .m = m, .coll = c->coll, .len = (size_t) (v.n - 1) * v.slot,
                                       .me = me, .root = writes ? me : -1 };
    mca_coll_xccl_latency_place(&v.st);
    r = 1;
    if (writes && v.st.last > 0 && h->lat_seen <= v.st.last) {
        r = mca_coll_xccl_latency_wait(&v.st, -1, v.st.last + 1);
    }
    if (1 == r) {
        r = XCCL_COLL_GATHERV == c->coll    ? gatherv(&v, ws, wr, c->in_place)
            : XCCL_COLL_SCATTERV == c->coll ? scatterv(&v, ws, wr, c->in_place)
                                            : alltoallv(&v, ws, wr);
    }
    if (r < 0) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "a rank of this node is gone");
    }
    if (r) {
        m->seq++;                    /* a call number, as the executor's would take */
        mca_coll_xccl_log_call(m, c->coll, 0, c->bytes, xccl_select_level_index(c->coll, XCCL_LEVEL_SHM), -1.0,
                               NULL, "latency_path");
    } else {
        c->lat_v = 1;
    }
    return MPI_SUCCESS;
}
