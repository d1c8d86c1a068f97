/*
 * The intra-node shared-memory level of a communicator (docs/shm-level.md):
 * one segment per node (segment/xccl_segment.h), its provider of peer access
 * (coll_xccl_shm_peer.h), and when the schedules may use it.
 *
 * Set-up rides on the communicator's set-up (coll_xccl_setup.c), never in
 * module_enable and never waiting for another rank there:
 *  - local part: the first rank of each node with two or more ranks creates
 *    the node's segment, or claims one a communicator of the same
 *    processes left (the pool, below); its 64-byte descriptor goes into
 *    its agreement record (the other ranks': the pooled segment they hold);
 *  - finish: every other rank of the node attaches with its leader's
 *    descriptor (no waiting: the segment exists since the leader's local
 *    part), or rejoins it where it holds it;
 *  - vote: whether every rank attached must be known alike everywhere:
 *    each rank starts the vote as its set-up ends (over xccl's own
 *    transport, below), and every call reads the level's state only once
 *    the vote is over on its rank, so all calls decide alike; skipped
 *    where the agreed records already say how it would end (the pool).
 *
 * Which calls use it: blocking and nonblocking calls, one schedule at a
 * time in call order (they share each rank's slot and flag: m->shm_turn).
 * Small blocking messages (below coll_xccl_small_msg_bytes) that would go
 * to the fallback run xccl's shared-memory algorithms instead where the
 * whole communicator is one node and the level is on.
 */
#include "ompi_config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/op/op.h"
#include "ompi/proc/proc.h"
#include "opal/runtime/opal_progress.h"

#include "algos/xccl_build.h"
#include "coll_xccl_shm.h"
#include "segment/xccl_cma.h"


void mca_coll_xccl_shm_init(mca_coll_xccl_module_t *m)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    m->shm_state = XCCL_SHM_OFF;
    if (c->shm_bytes > 0 && m->size > 1 && m->size <= XCCL_AGREE_MAX_KEYS) {
        m->shm_state = XCCL_SHM_UNDECIDED;
    }
    m->shm_small = XCCL_SHM_UNDECIDED == m->shm_state && c->shm_small;
    m->shm_small_nb = m->shm_small && (NULL == c->node_layout || !c->node_layout[0]);
    const ompi_proc_t *me = ompi_proc_local();
    for (int i = 0; m->shm_small_nb && i < m->size; i++) {
        const ompi_proc_t *proc = ompi_comm_peer_lookup(m->comm, i);
        m->shm_small_nb = proc->super.proc_name.jobid == me->super.proc_name.jobid &&
                          OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags);
    }
}

static void set_why(struct mca_coll_xccl_shm *h, const char *what, int err)
{
    if (!h->why[0]) {
        snprintf(h->why, sizeof(h->why), "%s%s%s", what, err ? ": " : "", err ? strerror(-err) : "");
    }
}

/* ------------------------------------------------------------ the pool */

/*
 * Segments kept for the next communicator of the same processes (issue
 * 30: creating, attaching, touching and unmapping a segment was half of
 * what a communicator created, used once and freed cost).  When a
 * communicator whose level was on goes, each of its ranks releases the
 * node's segment (xccl_segment_release) and keeps it mapped here, under the
 * set of its node's members.  The next communicator with that set:
 *  - its node leader takes a pooled segment of that set and claims it
 *    (xccl_segment_claim: only where every earlier user released it, so no
 *    call of the old communicator still reads it; it is reset as if new)
 *    and sends its descriptor in the agreement as if it had created it;
 *  - every other member offers, in its own agreement record, the pooled
 *    segment it holds for that set (taken from the pool until its finish);
 *  - finish: a member whose offer names the leader's segment rejoins it
 *    (no system call), the others attach as before;
 *  - where the records show that on every node every member offered the
 *    leader's segment and every rank knows what it votes on single copies
 *    (the flags' XCCL_AGREE_SHM bits), every rank knows the vote's outcome
 *    without running it: all attach, and the second round is the minimum
 *    of those bits.  The decision reads only the agreed records, so every
 *    rank takes it alike.
 * At most XCCL_SHM_POOL segments per process (the oldest is unmapped): an
 * idle segment costs the pages its calls touched (shared by the node).
 */
#define XCCL_SHM_POOL 4

typedef struct {
    xccl_segment_t *seg;             /* NULL: empty */
    uint64_t sig;                    /* the node's members as a set */
    int probe;                       /* -1 unknown, 0, 1: single copies to every node peer */
    uint64_t age;
} pool_entry_t;

static struct {
    pthread_mutex_t lock;
    pool_entry_t e[XCCL_SHM_POOL];
    uint64_t clock;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int pool_fits(const xccl_segment_t *seg, int nranks)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    return xccl_segment_nranks(seg) == nranks && xccl_segment_slot_bytes(seg) == c->shm_bytes &&
           (XCCL_SEGMENT_AUTO == c->shm_kind || (int) xccl_segment_kind(seg) == c->shm_kind);
}

/* The newest pooled segment of sig with nranks slots of today's size and
 * kind, taken out of the pool; NULL if none. */
static xccl_segment_t *pool_take(uint64_t sig, int nranks, int *probe)
{
    xccl_segment_t *seg = NULL;
    pthread_mutex_lock(&pool.lock);
    pool_entry_t *best = NULL;
    for (int i = 0; i < XCCL_SHM_POOL; i++) {
        pool_entry_t *e = &pool.e[i];
        if (NULL != e->seg && e->sig == sig && pool_fits(e->seg, nranks) &&
            (NULL == best || e->age > best->age)) {
            best = e;
        }
    }
    if (NULL != best) {
        seg = best->seg;
        *probe = best->probe;
        best->seg = NULL;
    }
    pthread_mutex_unlock(&pool.lock);
    return seg;
}

/* Keeps seg mapped for a later communicator of sig; the oldest goes when
 * the pool is full. */
static void pool_put(xccl_segment_t *seg, uint64_t sig, int probe)
{
    xccl_segment_t *out = NULL;
    pthread_mutex_lock(&pool.lock);
    pool_entry_t *slot = &pool.e[0];
    for (int i = 0; i < XCCL_SHM_POOL; i++) {
        pool_entry_t *e = &pool.e[i];
        if (NULL == e->seg) {
            slot = e;
            break;
        }
        if (e->age < slot->age) {
            slot = e;
        }
    }
    out = slot->seg;
    slot->seg = seg;
    slot->sig = sig;
    slot->probe = probe;
    slot->age = ++pool.clock;
    pthread_mutex_unlock(&pool.lock);
    if (NULL != out) {
        xccl_segment_detach(out);
    }
}

void mca_coll_xccl_shm_pool_fini(void)
{
    pthread_mutex_lock(&pool.lock);
    for (int i = 0; i < XCCL_SHM_POOL; i++) {
        if (NULL != pool.e[i].seg) {
            xccl_segment_detach(pool.e[i].seg);
            pool.e[i].seg = NULL;
        }
    }
    pthread_mutex_unlock(&pool.lock);
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

/* The processes of node n as a set (their names sorted, mixed); the same
 * on every rank.  0 where out of memory (never offered). */
static uint64_t node_sig(mca_coll_xccl_module_t *m, int n)
{
    const int ln = xccl_layout_node_size(&m->layout, n);
    const int *mem = xccl_layout_node_members(&m->layout, n);
    uint64_t *names = malloc((size_t) ln * sizeof(uint64_t)), sig = 0x9E3779B97F4A7C15ull;
    if (NULL == names) {
        return 0;
    }
    for (int i = 0; i < ln; i++) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(m->comm, mem[i]);
        const opal_process_name_t name = proc->super.proc_name;
        names[i] = ((uint64_t) name.jobid << 32) | name.vpid;
    }
    qsort(names, (size_t) ln, sizeof(uint64_t), cmp_u64);
    for (int i = 0; i < ln; i++) {
        sig ^= names[i] + 0x9E3779B97F4A7C15ull + (sig << 6) + (sig >> 2);
        sig *= 0xBF58476D1CE4E5B9ull;
        sig ^= sig >> 31;
    }
    free(names);
    return sig ? sig : 1;
}

/* What this rank votes in the second round (cma_vote) from what it knows
 * of its node peers; -1 where it does not know. */
static int known_cma_vote(int probe)
{
    if (!mca_coll_xccl_component.shm_cma) {
        return 0;                    /* no second round: single copies off */
    }
    return probe < 0 ? -1 : !probe ? 0 : opal_progress_yield_when_idle ? 1 : 2;
}

int mca_coll_xccl_shm_local(mca_coll_xccl_module_t *m, int nodes_ok, int *desc)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    memset(desc, 0, XCCL_SEGMENT_DESC_BYTES);
    if (XCCL_SHM_UNDECIDED != m->shm_state) {
        return 0;
    }
    struct mca_coll_xccl_shm *h = calloc(1, sizeof(*h));
    if (NULL == h || NULL == (h->local_of = malloc((size_t) m->size * sizeof(int)))) {
        free(h);
        return 0;                    /* m->shm NULL: votes no */
    }
    m->shm = h;
    h->probe = -1;
    h->lat_last_root = -1;
    if (!nodes_ok) {
        set_why(h, "the nodes of the ranks are unknown", 0);
        return 0;
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
    /* The latency path's views, here rather than at the vote: a rank that
     * could not have them must say so before the agreement (no hint). */
    if (NULL == (h->line = calloc((size_t) h->node_size, sizeof(*h->line))) ||
        NULL == (h->small = calloc((size_t) h->node_size, sizeof(*h->small))) ||
        NULL == (h->seen = calloc((size_t) h->node_size, sizeof(*h->seen)))) {
        set_why(h, "out of memory", 0);
        return 0;
    }
    h->sig = node_sig(m, node);
    int probe = -1;
    xccl_segment_t *pooled = 0 != h->sig ? pool_take(h->sig, h->node_size, &probe) : NULL;
    xccl_segment_desc_t d;
    if (h->leader != m->rank) {
        if (NULL == pooled) {
            return 0;
        }
        /* the offer: the segment it would rejoin */
        h->hint = pooled;
        h->probe = probe;
        xccl_segment_desc_of(pooled, &d);
        memcpy(desc, d.bytes, XCCL_SEGMENT_DESC_BYTES);
        const int v = known_cma_vote(probe);
        return v < 0 ? 0 : (v + 1) << XCCL_AGREE_SHM_SHIFT;
    }
    /* A rank alone on its node gets a segment of its own too: the two-level
     * schedules give every rank's intra-node stage a slot. */
    if (NULL != pooled && 0 == xccl_segment_claim(pooled, h->local_of[m->rank])) {
        h->seg = pooled;
        h->probe = probe;
        xccl_segment_desc_of(pooled, &d);
        memcpy(desc, d.bytes, XCCL_SEGMENT_DESC_BYTES);
        const int v = known_cma_vote(probe);
        return v < 0 ? 0 : (v + 1) << XCCL_AGREE_SHM_SHIFT;
    }
    if (NULL != pooled) {
        pool_put(pooled, h->sig, probe);      /* held elsewhere still */
    }
    int rc = xccl_segment_create((xccl_segment_kind_t) c->shm_kind, h->node_size, h->local_of[m->rank],
                             c->shm_bytes, &h->seg, &d);
    if (0 != rc) {
        set_why(h, "creating the node's segment failed", rc);
        return 0;
    }
    memcpy(desc, d.bytes, XCCL_SEGMENT_DESC_BYTES);
    return 0;
}

/* Whether every rank can skip the vote (the pool's comment): from the
 * agreed records alone, so the same answer everywhere; *cma the second
 * round's outcome then. */
static int vote_known(mca_coll_xccl_module_t *m, const int *all, int stride, int *cma)
{
    *cma = 2;
    for (int i = 0; i < m->size; i++) {
        const int v = (all[(size_t) i * stride + XCCL_AGREE_FLAGS] >> XCCL_AGREE_SHM_SHIFT) &
                      XCCL_AGREE_SHM_MASK;
        if (0 == v) {
            return 0;
        }
        *cma = v - 1 < *cma ? v - 1 : *cma;
    }
    for (int n = 0; n < m->layout.nnodes; n++) {
        const int *mem = xccl_layout_node_members(&m->layout, n);
        xccl_segment_desc_t lead, other;
        memcpy(lead.bytes, all + (size_t) mem[0] * stride + XCCL_AGREE_DESC, XCCL_SEGMENT_DESC_BYTES);
        for (int i = 1; i < xccl_layout_node_size(&m->layout, n); i++) {
            memcpy(other.bytes, all + (size_t) mem[i] * stride + XCCL_AGREE_DESC,
                   XCCL_SEGMENT_DESC_BYTES);
            if (!xccl_segment_desc_same(&lead, &other)) {
                return 0;
            }
        }
    }
    return 1;
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
    /* Where every rank offered (its flags' bits), every rank has its
     * views and a segment to rejoin, or created, claimed: none failed. */
    h->fast = vote_known(m, all, stride, &h->fast_cma);
    if (h->leader == m->rank) {
        h->ok = NULL != h->seg;
    } else {
        xccl_segment_desc_t d;
        memcpy(d.bytes, all + (size_t) h->leader * (size_t) stride + XCCL_AGREE_DESC,
               XCCL_SEGMENT_DESC_BYTES);
        if (NULL != h->hint && xccl_segment_desc_names(&d, h->hint) &&
            0 == xccl_segment_rejoin(h->hint, h->local_of[m->rank])) {
            h->seg = h->hint;
            h->hint = NULL;
            h->ok = 1;
            return;
        }
        if (NULL != h->hint) {
            pool_put(h->hint, h->sig, h->probe);     /* not the leader's: back */
            h->hint = NULL;
            h->probe = -1;
        }
        int rc = xccl_segment_attach(&d, h->local_of[m->rank], &h->seg);
        if (0 != rc) {
            set_why(h, -EACCES == rc || -EPERM == rc
                           ? "attaching the node's memfd segment was refused (try coll_xccl_shm_kind sysv)"
                           : "attaching the node's segment failed", rc);
            h->seg = NULL;
        } else {
            h->ok = 1;
        }
    }
    /* the own small area's pages, before this rank votes (a rejoined
     * segment has them): the peers map them once the vote is over */
    if (h->ok) {
        (void) xccl_segment_prefault_small(h->seg, h->local_of[m->rank]);
    }
}

/* Off for good: what the level held goes; a segment of a level that was
 * on (every rank attached, and each releases it) to the pool. */
static void shm_off(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_shm *h = m->shm;
    const int was_on = XCCL_SHM_ON == m->shm_state;
    m->shm_small = 0;
    m->shm_trials = XCCL_TRIAL_OFF;
    m->shm_lat_colls = 0;
    if (NULL != h) {
        if (NULL != h->hint) {
            pool_put(h->hint, h->sig, h->probe);     /* offered, never used */
        }
        if (NULL != h->seg && was_on && 0 != h->sig) {
            xccl_segment_release(h->seg);
            pool_put(h->seg, h->sig, h->probe);
        } else if (NULL != h->seg) {
            xccl_segment_detach(h->seg);
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
 * that builds its schedule afterwards; coll_xccl_path.c, _request.c).
 * Round 1 asks whether every rank attached; round 2, once all have
 * (and published their pids), whether each can read every node peer's
 * memory (process_vm_readv: single copies).  The rounds' sequence numbers
 * are the last two of the 16 bits in xccl's tags: no call of the
 * communicator takes them before the vote is over.
 */
#define VOTE_SEQ(gen, round) (0xfffeu - 2u * (uint32_t) (gen) + (uint32_t) (round) - 1u)

/*
 * A communicator freed while its vote runs cancels its receives: what its
 * peers sent it stays in the worker's queue of unexpected messages, under
 * the vote's tags of that context id, and Open MPI gives the id to a later
 * communicator, whose vote would take those messages for its own (a stale
 * "attached" against a peer that failed to attach: ranks that disagree on
 * the level, a hang or wrong data).  So the process remembers, per context
 * id, the first pair of tags not left behind (vote_gen: 0, or one past the
 * pair of the vote it abandoned), every rank puts its number in the set-up
 * agreement, and the vote takes the largest: a pair no member left
 * messages under.  Where all pairs are spent (XCCL_AGREE_VOTE_MASK: 15
 * votes abandoned on one id in one process) the level stays off for
 * communicators of that id that need a vote.  The pairs sit below the 16-bit
 * sequence numbers' end, which no call reaches before its vote is over.
 */
static uint8_t vote_gen[XCCL_UCX_MAX_CID + 1];

int mca_coll_xccl_shm_vote_gen(uint32_t cid)
{
    return __atomic_load_n(&vote_gen[cid & XCCL_UCX_MAX_CID], __ATOMIC_RELAXED);
}

static void vote_abandoned(mca_coll_xccl_module_t *m)
{
    const int next = m->shm_vote.gen + 1 < XCCL_AGREE_VOTE_MASK ? m->shm_vote.gen + 1
                                                                 : XCCL_AGREE_VOTE_MASK;
    uint8_t *g = &vote_gen[m->cid & XCCL_UCX_MAX_CID], old = __atomic_load_n(g, __ATOMIC_RELAXED);
    while (old < next && !__atomic_compare_exchange_n(g, &old, (uint8_t) next, false,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    mca_coll_xccl_log(2, "comm comm=%u rank=%d: freed while its shared-memory vote ran (round %d, "
                      "tags %d): later votes on this context id take tags %d or later", m->cid,
                      m->world_rank, m->shm_vote.round, m->shm_vote.gen, next);
}

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
        0 != xccl_exec_init(&v->e, &v->s, &m->transport, bufs, vote_min, NULL,
                           VOTE_SEQ(v->gen, round))) {
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
        h->line[s] = xccl_segment_line(h->seg, s);
        h->small[s] = xccl_segment_small(h->seg, s);
        /* the peers' small areas mapped now (each rank made its own before
         * it voted): the latency path's first calls took page faults, 2-10x
         * their later time, and the level's trials time a size class's
         * first calls: with 64 KiB bcasts they picked the mesh (14.5 us a
         * call in the loops after) over the latency path (2.9 us) */
        if (s != h->local_of[m->rank]) {
            (void) xccl_segment_prefault_small(h->seg, s);
        }
    }
    xccl_segment_release_fd(h->seg);             /* every rank has attached */
    m->shm_trials = 2 == cma ? XCCL_TRIAL_QUIET : 1 == cma ? XCCL_TRIAL_NOISY : XCCL_TRIAL_OFF;
    cma = cma >= 1;
    xccl_shm_peer_cma(&h->peer, cma);
    m->shm_cma = cma;
    m->shm_small = mca_coll_xccl_component.shm_small && 1 == m->layout.nnodes;
    /* The entry's short way to the latency path: where the whole way would
     * always reach it too (no forced algorithm and no tuning rules: the
     * level's rule chooses). */
    const mca_coll_xccl_component_t *k = &mca_coll_xccl_component;
    unsigned colls = 0;
    for (int coll = 0; m->shm_small && coll < XCCL_NCOLL; coll++) {
        if (k->enable[coll] && XCCL_SEL_AUTO == k->policy.forced[coll] && 0 == k->policy.tuning.n) {
            colls |= 1u << coll;
        }
    }
    mca_coll_xccl_log(2, "comm comm=%u rank=%d: shared-memory level on (%s segment%s, %zu B slots, "
                      "%d ranks on this node, single copies %s)", m->cid, m->world_rank,
                      XCCL_SEGMENT_SYSV == xccl_segment_kind(h->seg) ? "sysv" : "memfd",
                      h->fast ? " reused, no vote" : "",
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
    for (int r = 0; ok && r < xccl_segment_nranks(h->seg); r++) {
        const int p = xccl_cma_probe(h->seg, r);
        ok = 1 == p;
        if (!ok) {
            mca_coll_xccl_log(2, "comm comm=%u rank=%d: process_vm_readv of node rank %d "
                              "(pid %d): %d", m->cid, m->world_rank, r,
                              (int) xccl_segment_pid(h->seg, r), p);
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
    if (NULL != h && h->fast) {
        /* every rank holds its node's segment and said what it votes */
        m->shm_state = XCCL_SHM_VOTING;
        vote_end(m, 0, 1, h->fast_cma);
        return;
    }
    if (XCCL_AGREE_VOTE_MASK == m->shm_vote.gen) {
        /* known alike everywhere: the largest of the agreed numbers */
        mca_coll_xccl_log(1, "comm comm=%u rank=%d: shared-memory level off: every pair of vote "
                          "tags of this context id was left behind by a communicator freed while "
                          "voting", m->cid, m->world_rank);
        shm_off(m);
        return;
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
        const int mine = cma_vote(m);
        m->shm->probe = mine > 0;
        if (0 != vote_round(m, 2, mine)) {
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

int mca_coll_xccl_shm_trial_end(mca_coll_xccl_module_t *m, xccl_coll_t coll, size_t bytes,
                                xccl_trial_t *t, uint64_t t0, uint64_t t1)
{
    if (!xccl_trial_record(t, t0, t1)) {
        return MPI_SUCCESS;
    }
    /* every timed call's last start and last end (xccl_trial_t) */
    uint64_t last[2][2][XCCL_TRIAL_MAX];
    uint64_t med[2] = { 0, 0 };                 /* a tie: shm */
    int rc = m->prev.allreduce(t->at, last, 2 * 2 * XCCL_TRIAL_MAX, MPI_UINT64_T, MPI_MAX,
                               m->comm, m->prev.allreduce_module);
    if (MPI_SUCCESS == rc) {
        xccl_trial_medians(t, last, med);
    }
    const int pick = xccl_trial_decide(t, med);
    const int k = xccl_size_class(bytes);       /* [2^(k-1), 2^k) */
    if (pick == t->cand[0] && NULL != m->shm && k < 64) {
        m->shm->lat_picked[coll] |= (uint64_t) 1 << k;
    }
    const size_t lo = k ? (size_t) 1 << (k - 1) : 0;
    if (mca_coll_xccl_component.verbose >= 2) {
        char line[2][XCCL_TRIAL_MAX * 12 + 1];
        for (int j = 0; j < 2; j++) {
            size_t at = 0;
            line[j][0] = '\0';
            for (int i = 0; i < t->samples && at < sizeof(line[j]); i++) {
                at += (size_t) snprintf(line[j] + at, sizeof(line[j]) - at, " %.1f",
                                        (double) (t->at[1][j][i] - t->at[0][j][i]) / 1e3);
            }
        }
        mca_coll_xccl_log(2, "trial times %s comm=%u rank=%d bytes=%zu..%zu, this rank's us: "
                          "shm%s; mesh%s", xccl_coll_name(coll), m->cid, m->world_rank, lo,
                          lo ? 2 * lo - 1 : 0, line[0], line[1]);
        /* the readings themselves (ns), a line for each candidate:
         * run_mpi_tests.sh checks them against the calls' own clocks and
         * the agreed medians against them */
        for (int j = 0; j < 2; j++) {
            char clock[XCCL_TRIAL_MAX * 42 + 1];
            size_t at = 0;
            clock[0] = '\0';
            for (int i = 0; i < t->samples && at < sizeof(clock); i++) {
                at += (size_t) snprintf(clock + at, sizeof(clock) - at, " %" PRIu64 "-%" PRIu64,
                                        t->at[0][j][i], t->at[1][j][i]);
            }
            mca_coll_xccl_log(2, "trial clock %s comm=%u rank=%d bytes=%zu..%zu %s:%s",
                              xccl_coll_name(coll), m->cid, m->world_rank, lo, lo ? 2 * lo - 1 : 0,
                              j ? "mesh" : "shm", clock);
        }
    }
    mca_coll_xccl_log(1, "trial %s comm=%u rank=%d bytes=%zu..%zu shm=%.1fus mesh=%.1fus pick=%s%s",
                      xccl_coll_name(coll), m->cid, m->world_rank, lo, lo ? 2 * lo - 1 : 0,
                      (double) med[0] / 1e3, (double) med[1] / 1e3,
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
    hooks->bufs[XCCL_BUF_SLOT] = xccl_segment_slot(h->seg, xccl_segment_rank(h->seg));
    hooks->peer = &h->peer.peer;
    hooks->owed = &h->exit_owed;
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
         * returned before its peers voted): abandon the messages, and
         * their tags (vote_gen). */
        xccl_exec_fini(&m->shm_vote.e);
        vote_abandoned(m);
    }
    xccl_sched_fini(&m->shm_vote.s);
    shm_off(m);
}
