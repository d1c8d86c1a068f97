/*
 * The intra-node shared-memory level of a communicator (docs/shm-level.md):
 * one segment per node (ucx_glue/xccl_shm.h), its provider of peer access
 * (coll_xccl_shm_peer.h), and when the schedules may use it.
 *
 * Set-up rides on the communicator's set-up (coll_xccl_setup.c), never in
 * module_enable and never waiting for another rank there:
 *  - local part: the first rank of each node with two or more ranks creates
 *    the node's segment; its 64-byte descriptor goes into its agreement
 *    record;
 *  - finish: every other rank of the node attaches with its leader's
 *    descriptor (no waiting: the segment exists since the leader's local
 *    part);
 *  - vote: whether every rank attached must be known alike everywhere:
 *    each rank starts the vote as its set-up ends (over xccl's own
 *    transport, below), and every call reads the level's state only once
 *    the vote is over on its rank, so all calls decide alike.
 *
 * Which calls use it: blocking and nonblocking calls, one schedule at a
 * time in call order (they share each rank's slot and flag: m->shm_turn).
 * Small blocking messages (below coll_xccl_small_msg_bytes) that would go
 * to the fallback run xccl's shared-memory algorithms instead where the
 * whole communicator is one node and the level is on.
 */
#include "ompi_config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/op/op.h"
#include "opal/runtime/opal_progress.h"

#include "coll_xccl_call.h"
#include "coll_xccl_shm_peer.h"

/* The latency path's small areas in units of LAT_UNIT bytes (below). */
#define LAT_UNIT ((size_t) 256)
#define LAT_UNITS (XCCL_SHM_SMALL_BYTES / LAT_UNIT)

struct mca_coll_xccl_shm {
    xccl_shm_t *seg;                 /* this node's segment, NULL if none */
    xccl_shm_peer_t peer;
    int *local_of;                   /* communicator rank -> rank in its node's segment */
    int node_size;
    int leader;                      /* communicator rank that created this node's segment */
    int ok;                          /* this rank's vote: the node's segment is mapped here */
    uint64_t lat_seq;                /* calls through the latency path */
    uint64_t lat_seen;               /* every peer was seen to have posted this f or later */
    unsigned lat_pos;                /* the next unit of the small areas (the same on every rank) */
    uint64_t lat_wrote[LAT_UNITS];   /* the last call that wrote each unit of this rank's area */
    void **line;                     /* segment rank -> its latency line */
    unsigned char **small;           /* segment rank -> its small area */
    uint64_t *seen;                  /* segment rank -> the latest number read from its line */
    /* the last reduction planned for the latency path (a predefined
     * datatype and op: their objects live as long as the library) */
    struct ompi_datatype_t *plan_dt;
    struct ompi_op_t *plan_op;
    mca_coll_xccl_reduce_t plan;
    size_t plan_es;
    char why[160];                   /* why not, for the log */
};

void mca_coll_xccl_shm_init(mca_coll_xccl_module_t *m)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    m->shm_state = XCCL_SHM_OFF;
    if (c->shm_bytes > 0 && m->size > 1 && m->size <= XCCL_AGREE_MAX_KEYS) {
        m->shm_state = XCCL_SHM_UNDECIDED;
    }
    m->shm_small = XCCL_SHM_UNDECIDED == m->shm_state && c->shm_small;
}

static void set_why(struct mca_coll_xccl_shm *h, const char *what, int err)
{
    if (!h->why[0]) {
        snprintf(h->why, sizeof(h->why), "%s%s%s", what, err ? ": " : "", err ? strerror(-err) : "");
    }
}

void mca_coll_xccl_shm_local(mca_coll_xccl_module_t *m, int nodes_ok, int *desc)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    memset(desc, 0, XCCL_SHM_DESC_BYTES);
    if (XCCL_SHM_UNDECIDED != m->shm_state) {
        return;
    }
    struct mca_coll_xccl_shm *h = calloc(1, sizeof(*h));
    if (NULL == h || NULL == (h->local_of = malloc((size_t) m->size * sizeof(int)))) {
        free(h);
        return;                      /* m->shm NULL: votes no */
    }
    m->shm = h;
    if (!nodes_ok) {
        set_why(h, "the nodes of the ranks are unknown", 0);
        return;
    }
    /* Segment ranks: the order of the members before placement ordering
     * (the same on every rank; schedules name communicator ranks). */
    const int node = m->layout.node_of[m->rank];
    for (int n = 0; n < m->layout.nnodes; n++) {
        const int *mem = xccl_layout_node_members(&m->layout, n);
        for (int i = 0; i < xccl_layout_node_size(&m->layout, n); i++) {
            h->local_of[mem[i]] = i;
        }
    }
    h->node_size = xccl_layout_node_size(&m->layout, node);
    h->leader = xccl_layout_node_members(&m->layout, node)[0];
    /* A rank alone on its node gets a segment of its own too: the two-level
     * schedules give every rank's intra-node stage a slot. */
    if (h->leader != m->rank) {
        return;
    }
    xccl_shm_desc_t d;
    int rc = xccl_shm_create((xccl_shm_kind_t) c->shm_kind, h->node_size, 0, c->shm_bytes, &h->seg, &d);
    if (0 != rc) {
        set_why(h, "creating the node's segment failed", rc);
        return;
    }
    memcpy(desc, d.bytes, XCCL_SHM_DESC_BYTES);
}

void mca_coll_xccl_shm_finish(mca_coll_xccl_module_t *m, int nodes_ok, const int *all, int stride)
{
    struct mca_coll_xccl_shm *h = m->shm;
    if (NULL == h || h->why[0]) {
        return;
    }
    if (!nodes_ok) {
        set_why(h, "a rank does not know the nodes", 0);
        return;
    }
    if (h->leader == m->rank) {
        h->ok = NULL != h->seg;
    } else {
        xccl_shm_desc_t d;
        memcpy(d.bytes, all + (size_t) h->leader * (size_t) stride, XCCL_SHM_DESC_BYTES);
        int rc = xccl_shm_attach(&d, h->local_of[m->rank], &h->seg);
        if (0 != rc) {
            set_why(h, -EACCES == rc || -EPERM == rc
                           ? "attaching the node's memfd segment was refused (try coll_xccl_shm_kind sysv)"
                           : "attaching the node's segment failed", rc);
            h->seg = NULL;
        } else {
            h->ok = 1;
        }
    }
}

/* Off for good: what the level held goes. */
static void shm_off(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_shm *h = m->shm;
    m->shm_small = 0;
    m->shm_trials = XCCL_TRIAL_OFF;
    m->shm_lat_colls = 0;
    if (NULL != h) {
        if (NULL != h->seg) {
            xccl_shm_detach(h->seg);
        }
        free(h->local_of);
        free(h->line);
        free(h->small);
        free(h->seen);
        free(h);
        m->shm = NULL;
    }
    __atomic_store_n(&m->shm_state, XCCL_SHM_OFF, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------ the vote */

/*
 * Whether every rank attached must be known alike everywhere before any
 * call uses the level.  The vote is an allreduce (minimum) of one int over
 * the communicator's own transport (UCX or the PML, xccl's tags), started
 * by each rank as its set-up ends, so no call has to start it: nonblocking
 * calls never wait for it, and a program that makes only nonblocking calls
 * gets the level too.  It ends at a different time on each rank, so every
 * call reads the state only once it is settled: a call made before that
 * waits for it (a blocking one in place, a nonblocking one as a request
 * that builds its schedule afterwards; coll_xccl_call.c, _request.c).
 * Round 1 asks whether every rank attached; round 2, once all have
 * (and published their pids), whether each can read every node peer's
 * memory (process_vm_readv: single copies).  The rounds' sequence numbers
 * are the last two of the 16 bits in xccl's tags: no call of the
 * communicator takes them before the vote is over.
 */
#define VOTE_SEQ(round) (0xfffeu + (uint32_t) (round) - 1u)

static int vote_min(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    (void) ctx;
    for (size_t i = 0; i < count; i++) {
        const int x = ((const int *) a)[i], y = ((const int *) b)[i];
        ((int *) dst)[i] = x < y ? x : y;
    }
    return 0;
}

/* Starts round `round` with this rank's value: 0 or -1. */
static int vote_round(mca_coll_xccl_module_t *m, int round, int value)
{
    mca_coll_xccl_shm_vote_t *v = &m->shm_vote;
    void *bufs[XCCL_NBUF] = { &v->in, &v->out, &v->tmp, NULL };
    xccl_sched_fini(&v->s);
    xccl_sched_init(&v->s, m->rank, m->size, sizeof(int));
    v->in = value;
    v->out = 0;
    v->round = round;
    if (0 != xccl_build_allreduce_recursive_doubling(&v->s, 1) ||
        0 != xccl_exec_init(&v->e, &v->s, &m->transport, bufs, vote_min, NULL, VOTE_SEQ(round))) {
        return -1;
    }
    xccl_exec_progress(&v->e);           /* post the first messages now */
    return 0;
}

/* The vote is over: all (every rank attached), cma (the second round's
 * MIN, cma_vote: single copies, trials; 0 where it did not run). */
static void vote_end(mca_coll_xccl_module_t *m, int failed, int all, int cma)
{
    struct mca_coll_xccl_shm *h = m->shm;
    const int mine = NULL != h && h->ok;
    xccl_sched_fini(&m->shm_vote.s);
    m->shm_vote.round = 0;
    if (failed || !all) {
        mca_coll_xccl_log(!all && !mine ? 1 : 2, "comm comm=%u rank=%d: shared-memory level off: %s",
                          m->cid, m->world_rank,
                          failed ? "the vote failed"
                          : !mine ? (NULL != h && h->why[0] ? h->why : "out of memory")
                                  : "a rank of the communicator could not attach");
        shm_off(m);
        return;
    }
    xccl_shm_peer_init(&h->peer, h->seg, h->local_of, m->size);
    for (int s = 0; s < h->node_size; s++) {
        h->line[s] = xccl_shm_line(h->seg, s);
        h->small[s] = xccl_shm_small(h->seg, s);
    }
    xccl_shm_release_fd(h->seg);                 /* every rank has attached */
    m->shm_trials = 2 == cma ? XCCL_TRIAL_QUIET : 1 == cma ? XCCL_TRIAL_NOISY : XCCL_TRIAL_OFF;
    cma = cma >= 1;
    xccl_shm_peer_cma(&h->peer, cma);
    m->shm_cma = cma;
    m->shm_small = mca_coll_xccl_component.shm_small && 1 == m->layout.nnodes;
    /* The entry's short way to the latency path: where the whole way would
     * always reach it too (no forced algorithm and no tuning rules: the
     * level's rule chooses), and where it cannot meet CUDA IPC's agreement
     * (coll_xccl_gpu_ipc.c: calls from gpu_ipc_bytes). */
    const mca_coll_xccl_component_t *k = &mca_coll_xccl_component;
    unsigned colls = 0;
    for (int coll = 0; m->shm_small && coll < XCCL_NCOLL; coll++) {
        if (k->enable[coll] && XCCL_SEL_AUTO == k->policy.forced[coll] && 0 == k->policy.tuning.n) {
            colls |= 1u << coll;
        }
    }
    m->shm_lat_below = m->gpu_ipc && k->gpu_ipc_bytes > 0 ? k->gpu_ipc_bytes : SIZE_MAX;
    mca_coll_xccl_log(2, "comm comm=%u rank=%d: shared-memory level on (%s segment, %zu B slots, "
                      "%d ranks on this node, single copies %s)", m->cid, m->world_rank,
                      XCCL_SHM_SYSV == xccl_shm_kind(h->seg) ? "sysv" : "memfd",
                      mca_coll_xccl_component.shm_bytes, h->node_size,
                      !cma ? (!mca_coll_xccl_component.shm_cma ? "off (coll_xccl_shm_cma 0)"
                              : "off (process_vm_readv refused: see /proc/sys/kernel/yama/ptrace_scope)")
                      : k->policy.trials <= 0 ? "on (process_vm_readv), only where forced "
                                                "(coll_xccl_shm_trials 0)"
                      : XCCL_TRIAL_QUIET == m->shm_trials ? "on (process_vm_readv), chosen by trials"
                      : "on (process_vm_readv), chosen by long trials: a rank yields when idle "
                        "(oversubscribed)");
    __atomic_store_n(&m->shm_lat_colls, colls, __ATOMIC_RELAXED);
    __atomic_store_n(&m->shm_state, XCCL_SHM_ON, __ATOMIC_RELEASE);
}

/* Single copies: every node peer lets this rank read its memory (no Yama,
 * or ptrace_scope 0, or CAP_SYS_PTRACE). */
static int cma_probe(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_shm *h = m->shm;
    int ok = mca_coll_xccl_component.shm_cma;
    for (int r = 0; ok && r < xccl_shm_nranks(h->seg); r++) {
        const int p = xccl_shm_cma_probe(h->seg, r);
        ok = 1 == p;
        if (!ok) {
            mca_coll_xccl_log(2, "comm comm=%u rank=%d: process_vm_readv of node rank %d "
                              "(pid %d): %d", m->cid, m->world_rank, r,
                              (int) xccl_shm_pid(h->seg, r), p);
        }
    }
    return ok;
}

/* This rank's value in the second round (MIN over the ranks): 0 no single
 * copies; 1 single copies, long trials (XCCL_TRIAL_NOISY: this rank
 * yields when idle, mpi_yield_when_idle, more ranks than cores, where a
 * call's time depends on the scheduler as much as on the algorithm); 2
 * single copies, trials.  Voted, because the parameter is each rank's
 * own. */
static int cma_vote(mca_coll_xccl_module_t *m)
{
    return !cma_probe(m) ? 0 : opal_progress_yield_when_idle ? 1 : 2;
}

void mca_coll_xccl_shm_vote_start(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_shm *h = m->shm;
    if (XCCL_SHM_UNDECIDED != m->shm_state) {
        return;
    }
    if (m->layout.max_ppn < 2) {
        /* known alike everywhere: the layout is agreed */
        mca_coll_xccl_log(2, "comm comm=%u rank=%d: shared-memory level off: no two ranks share a "
                          "node", m->cid, m->world_rank);
        shm_off(m);
        return;
    }
    int mine = NULL != h && h->ok;
    if (mine && (NULL == (h->line = calloc((size_t) h->node_size, sizeof(*h->line))) ||
                 NULL == (h->small = calloc((size_t) h->node_size, sizeof(*h->small))) ||
                 NULL == (h->seen = calloc((size_t) h->node_size, sizeof(*h->seen))))) {
        set_why(h, "out of memory", 0);
        h->ok = mine = 0;
    }
    m->shm_state = XCCL_SHM_VOTING;
    if (0 != vote_round(m, 1, mine)) {
        /* Out of memory for one int's schedule: the peers' calls will wait
         * for this rank's vote; say why. */
        mca_coll_xccl_log(1, "comm comm=%u rank=%d: the shared-memory vote could not start (out of "
                          "memory)", m->cid, m->world_rank);
        vote_end(m, 1, 0, 0);
    }
}

/* Under the set-up lock, while VOTING. */
static void vote_progress(mca_coll_xccl_module_t *m)
{
    mca_coll_xccl_shm_vote_t *v = &m->shm_vote;
    const int rc = xccl_exec_progress(&v->e);
    if (0 == rc) {
        return;
    }
    xccl_exec_fini(&v->e);
    if (1 != rc) {
        vote_end(m, 1, 0, 0);
    } else if (1 == v->round && v->out && mca_coll_xccl_component.shm_cma) {
        if (0 != vote_round(m, 2, cma_vote(m))) {
            vote_end(m, 1, 0, 0);
        }
    } else {
        vote_end(m, 0, 1 == v->round ? v->out : 1, 2 == v->round ? v->out : 0);
    }
}

int mca_coll_xccl_shm_ready(mca_coll_xccl_module_t *m)
{
    if (XCCL_SHM_VOTING != __atomic_load_n(&m->shm_state, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    OPAL_THREAD_LOCK(&m->setup_lock);
    if (XCCL_SHM_VOTING == m->shm_state) {
        vote_progress(m);
    }
    const int done = XCCL_SHM_VOTING != m->shm_state;
    OPAL_THREAD_UNLOCK(&m->setup_lock);
    return done;
}

void mca_coll_xccl_shm_settle(mca_coll_xccl_module_t *m)
{
    if (XCCL_SETUP_NONE == m->setup) {
        return;                      /* the call sets up, then waits */
    }
    while (!mca_coll_xccl_setup_test(m) || !mca_coll_xccl_shm_ready(m)) {
        opal_progress();
    }
}

int mca_coll_xccl_shm_trial_end(mca_coll_xccl_module_t *m, xccl_coll_t coll, size_t bytes,
                                xccl_trial_t *t, uint64_t ns)
{
    if (!xccl_trial_record(t, ns)) {
        return MPI_SUCCESS;
    }
    uint64_t mine[2], slowest[2] = { 0, 0 };
    xccl_trial_medians(t, mine);
    int rc = m->prev.allreduce(mine, slowest, 2, MPI_UINT64_T, MPI_MAX, m->comm,
                               m->prev.allreduce_module);
    if (MPI_SUCCESS != rc) {
        slowest[0] = slowest[1] = 0;   /* a tie: shm */
    }
    const int pick = xccl_trial_decide(t, slowest);
    const int k = xccl_size_class(bytes);       /* [2^(k-1), 2^k) */
    const size_t lo = k ? (size_t) 1 << (k - 1) : 0;
    mca_coll_xccl_log(1, "trial %s comm=%u rank=%d bytes=%zu..%zu shm=%.1fus mesh=%.1fus pick=%s%s",
                      xccl_coll_name(coll), m->cid, m->world_rank, lo, lo ? 2 * lo - 1 : 0,
                      (double) slowest[0] / 1e3, (double) slowest[1] / 1e3,
                      xccl_select_name(coll, pick),
                      MPI_SUCCESS != rc ? " (the agreement failed: shm)" : "");
    return rc;
}

int mca_coll_xccl_shm_hooks(mca_coll_xccl_module_t *m, mca_coll_xccl_exec_hooks_t *hooks,
                            int publish)
{
    struct mca_coll_xccl_shm *h = m->shm;
    if (NULL == h || NULL == h->seg) {
        return 0;                    /* the executor refuses the schedule */
    }
    hooks->bufs[XCCL_BUF_SLOT] = xccl_shm_slot(h->seg, xccl_shm_rank(h->seg));
    hooks->peer = &h->peer.peer;
    if (!publish || !m->shm_cma) {
        return 0;
    }
    /* The peers read this call's SEND and RECV (the executor's seq is the
     * next call's number); schedules of these collectives read no scratch.
     * One publication per rank: only blocking calls get such schedules (a
     * later call's would replace one that waits for its turn). */
    void *bufs[XCCL_NBUF] = { hooks->bufs[XCCL_BUF_SEND], hooks->bufs[XCCL_BUF_RECV], NULL, NULL };
    return xccl_shm_peer_publish(&h->peer, m->seq, bufs);
}

void mca_coll_xccl_shm_fini(mca_coll_xccl_module_t *m)
{
    if (XCCL_SHM_VOTING == m->shm_state) {
        /* Freed while its vote runs (a program whose last call on it
         * returned before its peers voted): abandon the messages. */
        xccl_exec_fini(&m->shm_vote.e);
    }
    xccl_sched_fini(&m->shm_vote.s);
    shm_off(m);
}

/* ------------------------------------------------------------ latency path */

/*
 * Small blocking calls on one node without the executor.  Segment rank s
 * owns its latency line (xccl_shm_line: its sequence word) and its small
 * area (xccl_shm_small); only s writes them.  Every rank makes the same
 * calls through this path in the same order (the decision rests on what all
 * ranks share), numbered f = 1, 2, ..., and every rank gives the same
 * number of bytes in a call, so one ring placement, the same on every rank,
 * says where call f's parts go in each area: the next units of LAT_UNIT
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
 * (sharing one deadlocked: measured).  The ring is at least three of the
 * largest parts long: a part that starts the ring again (it did not fit
 * after the part before) ends before that part began, past two largest
 * parts from the start. */
_Static_assert(3 * XCCL_SHM_LAT_BYTES <= XCCL_SHM_SMALL_BYTES && XCCL_SHM_SMALL_BYTES % LAT_UNIT == 0,
               "latency units");

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

int mca_coll_xccl_shm_latency(mca_coll_xccl_call_t *c, const char *ws, char *wr)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_shm *h = m->shm;
    const int n = h->node_size, me = h->local_of[m->rank];
    const int *local_of = h->local_of;
    const size_t len = mca_coll_xccl_shm_lat_bytes(c);
    const uint64_t f = ++h->lat_seq;
    const int bcast = XCCL_COLL_BCAST == c->coll, root = bcast ? local_of[c->root] : me;
    lat_line_t *mine = h->line[me];
    /* this call's units: [u, u + units) of every area */
    const unsigned units = (unsigned) ((len + LAT_UNIT - 1) / LAT_UNIT);
    if (h->lat_pos + units > LAT_UNITS) {
        h->lat_pos = 0;
    }
    const unsigned u = h->lat_pos;
    const size_t at0 = (size_t) u * LAT_UNIT;
    h->lat_pos += units;

    if (root == me && len > 0) {
        uint64_t last = 0;
        for (unsigned k = u; k < u + units; k++) {
            last = h->lat_wrote[k] > last ? h->lat_wrote[k] : last;
            h->lat_wrote[k] = f;
        }
        if (last > 0 && h->lat_seen <= last && 0 != lat_wait_all(h, me, last + 1)) {
            goto gone;
        }
        lat_copy(h->small[me] + at0, bcast ? wr : ws, len);
        if (bcast && len <= LAT_INLINE) {
            lat_inline_put(mine, wr, len, f);
        }
    }
    atomic_store_explicit(&mine->seq, f, memory_order_release);

    switch (c->coll) {
    case XCCL_COLL_BCAST:
        if (root != me) {
            if (0 != lat_wait(h, root, f)) {
                goto gone;
            }
            if (len > LAT_INLINE || !lat_inline_get(h->line[root], wr, len, f)) {
                lat_copy(wr, h->small[root] + at0, len);
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
        if (count > 0 && 1 == n) {
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
    /* decide() (coll_xccl_call.c) hands the fallback the calls from
     * XCCL_SHM_LAT_BYTES up to small_msg_bytes */
    if (mca_coll_xccl_shm_lat_bytes(c) > XCCL_SHM_LAT_BYTES ||
        (c->bytes > XCCL_SHM_LAT_BYTES &&
         c->bytes < (size_t) mca_coll_xccl_component.policy.small_bytes)) {
        return 0;
    }
    /* the level's trials, or their pick, may choose the mesh instead */
    if (mca_coll_xccl_shm_trial_wanted(m, c)) {
        return 0;
    }
    m->seq++;                        /* a call number, as the executor's would take */
    mca_coll_xccl_log_call(m, c->coll, 0, c->bytes, mca_coll_xccl_shm_lat_algo(c->coll), -1.0,
                           NULL, "latency_path");
    *rc = mca_coll_xccl_shm_latency(c, ws, wr);
    return 1;
}
