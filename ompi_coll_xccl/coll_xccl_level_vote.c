/*
 * The shared-memory level's vote (coll_xccl_level.c has the whole
 * picture): whether every rank attached to its node's segment and, in a
 * second round, whether every rank can read its node peers' memory
 * (the probe of single copies); and the level's end, which abandons a
 * vote still in flight.
 */
#include "ompi_config.h"

#include <stdlib.h>

#include "opal/runtime/opal_progress.h"

#include "algos/xccl_build.h"
#include "coll_xccl_level_pool.h"
#include "segment/xccl_cma.h"

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

int mca_coll_xccl_level_vote_gen(uint32_t cid)
{
    return __atomic_load_n(&vote_gen[cid & XCCL_UCX_MAX_CID], __ATOMIC_RELAXED);
}

static void vote_abandoned(mca_coll_xccl_module_t *m)
{
    const int next = m->level_vote.gen + 1 < XCCL_AGREE_VOTE_MASK ? m->level_vote.gen + 1
                                                                 : XCCL_AGREE_VOTE_MASK;
    uint8_t *g = &vote_gen[m->cid & XCCL_UCX_MAX_CID], old = __atomic_load_n(g, __ATOMIC_RELAXED);
    while (old < next && !__atomic_compare_exchange_n(g, &old, (uint8_t) next, false,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    mca_coll_xccl_log(2, "comm comm=%u rank=%d: freed while its shared-memory vote ran (round %d, "
                      "tags %d): later votes on this context id take tags %d or later", m->cid,
                      m->world_rank, m->level_vote.round, m->level_vote.gen, next);
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
    mca_coll_xccl_level_vote_t *v = &m->level_vote;
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
    struct mca_coll_xccl_level *h = m->level;
    const int mine = NULL != h && h->ok;
    xccl_sched_fini(&m->level_vote.s);
    m->level_vote.round = 0;
    if (failed || !all) {
        mca_coll_xccl_log(!all && !mine ? 1 : 2, "comm comm=%u rank=%d: shared-memory level off: %s",
                          m->cid, m->world_rank,
                          failed ? "the vote failed"
                          : !mine ? (NULL != h && h->why[0] ? h->why : "out of memory")
                                  : "a rank of the communicator could not attach");
        mca_coll_xccl_level_disable(m);
        return;
    }
    xccl_level_peer_init(&h->peer, h->seg, h->local_of, m->size);
    for (int s = 0; s < h->node_size; s++) {
        h->line[s] = xccl_segment_line(h->seg, s);
        h->small[s] = xccl_segment_small(h->seg, s);
        /* the peers' small areas mapped now (each rank made its own before
         * it voted): else the latency path's first calls take the page
         * faults, and the level's trials, which time a size class's first
         * calls, would judge it by them (figures: docs/shm-level.md) */
        if (s != h->local_of[m->rank]) {
            (void) xccl_segment_prefault_small(h->seg, s);
        }
    }
    xccl_segment_release_fd(h->seg);             /* every rank has attached */
    m->level_trials = 2 == cma ? XCCL_TRIAL_QUIET : 1 == cma ? XCCL_TRIAL_NOISY : XCCL_TRIAL_OFF;
    cma = cma >= 1;
    xccl_level_peer_cma(&h->peer, cma);
    m->level_cma = cma;
    m->level_small = mca_coll_xccl_component.shm_small && 1 == m->layout.nnodes;
    /* The latency path's fast way (coll_xccl_path.h): where the path table
     * would always reach the latency path too (no forced algorithm and no tuning rules: the
     * level's rule chooses). */
    const mca_coll_xccl_component_t *k = &mca_coll_xccl_component;
    unsigned colls = 0;
    for (int coll = 0; m->level_small && coll < XCCL_NCOLL; coll++) {
        if (xccl_coll_level((xccl_coll_t) coll) && k->enable[coll] && XCCL_SEL_AUTO == k->policy.forced[coll] &&
            0 == k->policy.tuning.n) {
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
                      : XCCL_TRIAL_QUIET == m->level_trials ? "on (process_vm_readv), chosen by trials"
                      : "on (process_vm_readv), chosen by long trials: a rank yields when idle "
                        "(oversubscribed)");
    __atomic_store_n(&m->level_lat_colls, colls, __ATOMIC_RELAXED);
    __atomic_store_n(&m->level_state, XCCL_LEVEL_ON, __ATOMIC_RELEASE);
}

/* Single copies: every node peer lets this rank read its memory (no Yama,
 * or ptrace_scope 0, or CAP_SYS_PTRACE). */
static int cma_probe(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_level *h = m->level;
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

void mca_coll_xccl_level_vote_start(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_level *h = m->level;
    if (XCCL_LEVEL_UNDECIDED != m->level_state) {
        return;
    }
    if (m->layout.max_ppn < 2) {
        /* known alike everywhere: the layout is agreed */
        mca_coll_xccl_log(2, "comm comm=%u rank=%d: shared-memory level off: no two ranks share a "
                          "node", m->cid, m->world_rank);
        mca_coll_xccl_level_disable(m);
        return;
    }
    int mine = NULL != h && h->ok;
    if (NULL != h && h->fast) {
        /* every rank holds its node's segment and said what it votes */
        m->level_state = XCCL_LEVEL_VOTING;
        vote_end(m, 0, 1, h->fast_cma);
        return;
    }
    if (XCCL_AGREE_VOTE_MASK == m->level_vote.gen) {
        /* known alike everywhere: the largest of the agreed numbers */
        mca_coll_xccl_log(1, "comm comm=%u rank=%d: shared-memory level off: every pair of vote "
                          "tags of this context id was left behind by a communicator freed while "
                          "voting", m->cid, m->world_rank);
        mca_coll_xccl_level_disable(m);
        return;
    }
    m->level_state = XCCL_LEVEL_VOTING;
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
    mca_coll_xccl_level_vote_t *v = &m->level_vote;
    const int rc = xccl_exec_progress(&v->e);
    if (0 == rc) {
        return;
    }
    xccl_exec_fini(&v->e);
    if (1 != rc) {
        vote_end(m, 1, 0, 0);
    } else if (1 == v->round && v->out && mca_coll_xccl_component.shm_cma) {
        const int mine = cma_vote(m);
        m->level->probe = mine > 0;
        if (0 != vote_round(m, 2, mine)) {
            vote_end(m, 1, 0, 0);
        }
    } else {
        vote_end(m, 0, 1 == v->round ? v->out : 1, 2 == v->round ? v->out : 0);
    }
}

int mca_coll_xccl_level_ready(mca_coll_xccl_module_t *m)
{
    if (XCCL_LEVEL_VOTING != __atomic_load_n(&m->level_state, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    OPAL_THREAD_LOCK(&m->setup_lock);
    if (XCCL_LEVEL_VOTING == m->level_state) {
        vote_progress(m);
    }
    const int done = XCCL_LEVEL_VOTING != m->level_state;
    OPAL_THREAD_UNLOCK(&m->setup_lock);
    return done;
}

void mca_coll_xccl_level_fini(mca_coll_xccl_module_t *m)
{
    if (XCCL_LEVEL_VOTING == m->level_state) {
        /* Freed while its vote runs (a program whose last call on it
         * returned before its peers voted): abandon the messages, and
         * their tags (vote_gen). */
        xccl_exec_fini(&m->level_vote.e);
        vote_abandoned(m);
    }
    xccl_sched_fini(&m->level_vote.s);
    mca_coll_xccl_level_disable(m);
}
