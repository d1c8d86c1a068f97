/*
 * The shared-memory level's node set-up (coll_xccl_level.c has the whole
 * picture): the segments kept for reuse, the local part and the finish of
 * a communicator's set-up, and the level off for good, which gives a
 * segment back to the pool.
 */
#include "ompi_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/proc/proc.h"
#include "opal/runtime/opal_progress.h"

#include "coll_xccl_level_pool.h"

static void set_why(struct mca_coll_xccl_level *h, const char *what, int err)
{
    if (!h->why[0]) {
        snprintf(h->why, sizeof(h->why), "%s%s%s", what, err ? ": " : "", err ? strerror(-err) : "");
    }
}

/* ------------------------------------------------------------ the pool */

/*
 * Segments kept for the next communicator of the same processes:
 * creating, attaching, touching and unmapping a segment is much of what a
 * communicator created, used once and freed costs (figures:
 * docs/bench/churn.md).  When a communicator whose level was on goes,
 * each of its ranks releases the node's segment (xccl_segment_release) and
 * keeps it mapped here, under the set of its node's members.  The next
 * communicator with that set:
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
 * At most XCCL_LEVEL_POOL segments per process (the oldest is unmapped): an
 * idle segment costs the pages its calls touched (shared by the node).
 */
#define XCCL_LEVEL_POOL 4

typedef struct {
    xccl_segment_t *seg;             /* NULL: empty */
    uint64_t sig;                    /* the node's members as a set */
    int probe;                       /* -1 unknown, 0, 1: single copies to every node peer */
    uint64_t age;
} pool_entry_t;

static struct {
    pthread_mutex_t lock;
    pool_entry_t e[XCCL_LEVEL_POOL];
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
    for (int i = 0; i < XCCL_LEVEL_POOL; i++) {
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
    for (int i = 0; i < XCCL_LEVEL_POOL; i++) {
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

void mca_coll_xccl_level_pool_fini(void)
{
    pthread_mutex_lock(&pool.lock);
    for (int i = 0; i < XCCL_LEVEL_POOL; i++) {
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

/* A pooled segment this rank holds (a member's offer, or the segment its
 * leader claimed) in its agreement record: the descriptor into desc; the
 * flags' bits (mca_coll_xccl_level_local). */
static int pooled_record(struct mca_coll_xccl_level *h, const xccl_segment_t *seg, int probe,
                         int *desc)
{
    xccl_segment_desc_t d;
    h->probe = probe;
    xccl_segment_desc_of(seg, &d);
    memcpy(desc, d.bytes, XCCL_SEGMENT_DESC_BYTES);
    const int v = known_cma_vote(probe);
    return v < 0 ? 0 : (v + 1) << XCCL_AGREE_SHM_SHIFT;
}

int mca_coll_xccl_level_local(mca_coll_xccl_module_t *m, int nodes_ok, int *desc)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    memset(desc, 0, XCCL_SEGMENT_DESC_BYTES);
    if (XCCL_LEVEL_UNDECIDED != m->level_state) {
        return 0;
    }
    struct mca_coll_xccl_level *h = calloc(1, sizeof(*h));
    if (NULL == h || NULL == (h->local_of = malloc((size_t) m->size * sizeof(int)))) {
        free(h);
        return 0;                    /* m->level NULL: votes no */
    }
    m->level = h;
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
        return pooled_record(h, pooled, probe, desc);
    }
    /* A rank alone on its node gets a segment of its own too: the two-level
     * schedules give every rank's intra-node stage a slot. */
    if (NULL != pooled && 0 == xccl_segment_claim(pooled, h->local_of[m->rank])) {
        h->seg = pooled;
        return pooled_record(h, pooled, probe, desc);
    }
    if (NULL != pooled) {
        pool_put(pooled, h->sig, probe);      /* held elsewhere still */
    }
    int rc = xccl_segment_create((xccl_segment_kind_t) c->shm_kind, h->node_size,
                                 h->local_of[m->rank], c->shm_bytes, &h->seg, &d);
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

void mca_coll_xccl_level_finish(mca_coll_xccl_module_t *m, int nodes_ok, const int *all, int stride)
{
    struct mca_coll_xccl_level *h = m->level;
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
void mca_coll_xccl_level_disable(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_level *h = m->level;
    const int was_on = XCCL_LEVEL_ON == m->level_state;
    m->level_small = 0;
    m->level_trials = XCCL_TRIAL_OFF;
    m->level_lat_colls = 0;
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
        m->level = NULL;
    }
    __atomic_store_n(&m->level_state, XCCL_LEVEL_OFF, __ATOMIC_RELEASE);
}
