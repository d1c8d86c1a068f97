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
 * Decided block by block instead, nothing needs agreeing: a block's size
 * is known to both of its ends, so both know whether it is small (at most
 * a slot).  So, in every blocking call of these collectives on the level,
 * each rank:
 *   1. (where it writes its part) waits until every peer posted past the
 *      last call that wrote its units, as the six's calls do;
 *   2. copies each small block it sends into its slot for the receiver,
 *      and posts the call's number in its latency line (release), also
 *      where it sends nothing: "in this call, done with every call before";
 *   3. copies its own block straight from SEND to RECV, and each small
 *      block it receives out of the sender's slot once the sender posted
 *      (acquire);
 *   4. where it sends or receives a large block: runs the collective's
 *      level schedule (shm) of the large blocks alone (the small ones and
 *      its own set to zero bytes in the call's counts), in its turn;
 *      both ends of each large block run it, and those schedules wait
 *      only for the ranks they trade bytes with; else it posts its
 *      executor flag at (this call, LATV_DONE) and takes the call
 *      number the executor would have taken.
 * That post keeps the executor's flags in step: the schedules of a call
 * wait for every peer to have entered the call before (shm_enter) and a
 * later call of another layout for every peer's done flag of one without
 * an exit barrier (the executor's settlement); a rank that ran no
 * schedule in a call says, with the highest value, that it is done with
 * it and every call before, which it is.  The latency path's state (ring,
 * numbers, flips) moves alike on every rank, the slots and flags only in
 * the ranks that run schedules, as in any call of the level.
 *
 * The room.  Every rank reserves the same units in every such call: n - 1
 * slots of mca_coll_xccl_latency_v_slot(n) bytes (gatherv: one, its
 * senders' only block), rank q's slot for rank r at ((r - q - 1) mod n)
 * slots into q's part, because a receiver knows only its own block's
 * size, not where the sender's other blocks end.  A rank that writes
 * nothing in its part records nothing in the ring and waits for nothing
 * first.  The ring of these calls is the whole small area (st.wide) where
 * the six's would be LAT_RING_MIN: a sender waits for its slowest
 * receiver once it is as many calls ahead as the ring holds, 48 of
 * gatherv's, 16 of scatterv's at np 4 (in LAT_RING_MIN, 4 of either at np
 * 4 with 4 ranks on 2 cores took 2-5 and 1.2-2 times as long at 8 B - 4
 * KiB: docs/bench/latency-path.md); a small block's call touches a line
 * per slot.
 *
 * Nonblocking calls keep the executor (their turn in m->level_ticket);
 * this path, like the six's blocking one, first waits until none is in
 * flight (mca_coll_xccl_latency_idle).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"

#include "base/xccl_copy.h"

#include "coll_xccl_exec.h"
#include "coll_xccl_latency_v.h"
#include "coll_xccl_log.h"
#include "coll_xccl_select.h"

/* The executor flag of a rank that ran no schedule in a call: it meets
 * every wait on that call's flags (values stay below UINT32_MAX). */
#define LATV_DONE (UINT32_MAX - 1)

typedef struct {
    mca_coll_xccl_latency_t st;      /* the ring's numbers and units */
    size_t *vec;                     /* c->args.vec: sizes and displacements in bytes */
    size_t slot;                     /* a slot's bytes: a small block's most */
    int n, rank, root;               /* communicator ranks */
    int large;                       /* this rank sends or receives a large block */
} latv_t;

static inline void copy(void *dst, const void *src, size_t len)
{
    if (len <= 64) {
        xccl_copy_small(dst, src, len);
    } else {
        xccl_memmove(dst, src, len);
    }
}

/* Rank q's slot for rank r (communicator ranks; r < 0: the first) in q's
 * part of the call: at the start of its area (more than two ranks) or of
 * the area of the pair layout (coll_xccl_latency.c), as the six's calls. */
static inline unsigned char *slot_of(const latv_t *v, int q, int r)
{
    const mca_coll_xccl_latency_t *st = &v->st;
    const int s = st->m->level->local_of[q];
    const size_t d = r < 0 ? 0 : (size_t) ((r - q - 1 + v->n) % v->n);
    return st->m->level->small[st->pair ? s ^ st->flip : s] + st->at0 + d * v->slot;
}

static inline int small(const latv_t *v, size_t len)
{
    return len > 0 && len <= v->slot;
}

/* Receives q's small block of len bytes at dst from q's slot for this
 * rank (r < 0: its first): 1, or -1 q is gone. */
static inline int take(latv_t *v, int q, int r, char *dst, size_t len)
{
    if (1 != mca_coll_xccl_latency_wait(&v->st, v->st.m->level->local_of[q], v->st.f)) {
        return -1;
    }
    copy(dst, slot_of(v, q, r), len);
    return 1;
}

/* Steps 2 and 3 of each collective (the top of the file): 1, or -1 a
 * rank is gone; v->large set, and the counts of the blocks moved here
 * set to zero where a large one is left for the executor. */

static int gatherv(latv_t *v, const char *ws, char *wr, int in_place)
{
    size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int n = v->n, me = v->rank, root = v->root;
    if (me != root) {
        if (small(v, bytes[me])) {
            copy(slot_of(v, me, -1), ws, bytes[me]);
        }
        mca_coll_xccl_latency_post(&v->st);
        v->large = bytes[me] > v->slot;
        return 1;
    }
    mca_coll_xccl_latency_post(&v->st);
    if (!in_place && bytes[me] > 0) {
        copy(wr + displs[me], ws, bytes[me]);
    }
    for (int k = 1; k < n; k++) {
        const int q = (root + k) % n;
        if (small(v, bytes[q]) && 1 != take(v, q, -1, wr + displs[q], bytes[q])) {
            return -1;
        }
        v->large |= bytes[q] > v->slot;
    }
    for (int q = 0; v->large && q < n; q++) {
        bytes[q] = bytes[q] > v->slot && q != root ? bytes[q] : 0;
    }
    return 1;
}

static int scatterv(latv_t *v, const char *ws, char *wr, int in_place)
{
    size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int n = v->n, me = v->rank, root = v->root;
    if (me != root) {
        mca_coll_xccl_latency_post(&v->st);
        v->large = bytes[me] > v->slot;
        return small(v, bytes[me]) ? take(v, root, me, wr, bytes[me]) : 1;
    }
    for (int k = 1; k < n; k++) {
        const int q = (root + k) % n;
        if (small(v, bytes[q])) {
            copy(slot_of(v, me, q), ws + displs[q], bytes[q]);
        }
        v->large |= bytes[q] > v->slot;
    }
    mca_coll_xccl_latency_post(&v->st);
    if (!in_place && bytes[me] > 0) {
        copy(wr, ws + displs[me], bytes[me]);
    }
    for (int q = 0; v->large && q < n; q++) {
        bytes[q] = bytes[q] > v->slot && q != root ? bytes[q] : 0;
    }
    return 1;
}

static int alltoallv(latv_t *v, const char *ws, char *wr)
{
    const int n = v->n, me = v->rank;
    size_t *sc = v->vec, *sd = v->vec + n, *rc = v->vec + 2 * n, *rd = v->vec + 3 * n;
    for (int k = 1; k < n; k++) {
        const int r = (me + k) % n;
        if (small(v, sc[r])) {
            copy(slot_of(v, me, r), ws + sd[r], sc[r]);
        }
    }
    mca_coll_xccl_latency_post(&v->st);
    if (rc[me] > 0 && wr + rd[me] != ws + sd[me]) {
        copy(wr + rd[me], ws + sd[me], rc[me]);
    }
    for (int k = 1; k < n; k++) {
        const int q = (me - k + n) % n;
        if (small(v, rc[q]) && 1 != take(v, q, me, wr + rd[q], rc[q])) {
            return -1;
        }
        v->large |= rc[q] > v->slot || sc[q] > v->slot;
    }
    for (int q = 0; v->large && q < n; q++) {
        sc[q] = sc[q] > v->slot && q != me ? sc[q] : 0;
        rc[q] = rc[q] > v->slot && q != me ? rc[q] : 0;
    }
    return 1;
}

/* Step 4 where this rank has a large block: the level's schedule of the
 * call's counts as the steps above left them, in its turn (as
 * path_schedule runs one), logged as the executor's. */
static int executor(mca_coll_xccl_call_t *c, const char *ws, char *wr)
{
    mca_coll_xccl_module_t *m = c->m;
    mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
    int used, rc;
    double us;
    c->args.layout = &m->layout;
    c->args.shm_slot = mca_coll_xccl_component.shm_bytes;
    const xccl_sched_t *s = mca_coll_xccl_select_schedule(m, c->coll, &c->args, c->bytes, c->es,
                                                          xccl_select_level_index(c->coll, XCCL_LEVEL_SHM),
                                                          &used, &us, NULL);
    if (NULL == s) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    mca_coll_xccl_log_call(m, c->coll, 0, c->bytes, used, us, NULL, NULL);
    hooks.bufs[XCCL_BUF_SEND] = (void *) ws;
    hooks.bufs[XCCL_BUF_RECV] = wr;
    if (0 != mca_coll_xccl_level_hooks(m, &hooks, s->peer_access)) {
        rc = mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "publishing buffers for the peers failed");
    } else {
        const uint32_t ticket = m->level_ticket++;
        while (!mca_coll_xccl_level_my_turn(m, ticket)) {
            opal_progress();
        }
        rc = mca_coll_xccl_exec_run(m, c->coll, s, &hooks, NULL);
        mca_coll_xccl_level_pass_turn(m);
    }
    xccl_select_put(s);
    return rc;
}

int mca_coll_xccl_latency_v_call(mca_coll_xccl_call_t *c, mca_coll_xccl_gpu_stage_t *stage, const char *ws,
                                 char *wr)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_level *h = m->level;
    latv_t v = { .vec = (size_t *) c->args.vec, .n = m->size, .rank = m->rank, .root = c->args.root };
    v.slot = mca_coll_xccl_latency_v_slot(v.n);
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
    int writes = 0;
    for (int q = 0; q < v.n && !writes; q++) {
        writes = XCCL_COLL_ALLTOALLV == c->coll ? q != v.rank && small(&v, v.vec[q])
                 : XCCL_COLL_GATHERV == c->coll ? q == v.rank && v.rank != v.root && small(&v, v.vec[q])
                                                : q != v.rank && v.rank == v.root && small(&v, v.vec[q]);
    }
    const int me = h->local_of[m->rank];
    v.st = (mca_coll_xccl_latency_t) { .m = m, .coll = c->coll,
                                       .len = XCCL_COLL_GATHERV == c->coll ? v.slot : (size_t) (v.n - 1) * v.slot,
                                       .me = me, .root = writes ? me : -1, .wide = 1 };
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
    if (v.large) {
        return executor(c, ws, wr);
    }
    (void) xccl_segment_flag_post(h->seg, (uint32_t) m->seq++, LATV_DONE);
    mca_coll_xccl_log_call(m, c->coll, 0, c->bytes, xccl_select_level_index(c->coll, XCCL_LEVEL_SHM), -1.0, NULL,
                           "latency_path");
    return MPI_SUCCESS;
}
