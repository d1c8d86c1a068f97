/*
 * The intra-node shared-memory level of a communicator: its state and
 * hooks (coll_xccl_level.c), its turns (below), its set-up and pool
 * (coll_xccl_level_pool.c), its vote (coll_xccl_level_vote.c) and its
 * trials (coll_xccl_level_trials.c).
 */
#ifndef MCA_COLL_XCCL_LEVEL_H
#define MCA_COLL_XCCL_LEVEL_H

#include "coll_xccl_call.h"
#include "coll_xccl_exec.h"
#include "coll_xccl_level_peer.h"

BEGIN_C_DECLS

/* The level's state of a communicator (m->level), shared by its set-up
 * (coll_xccl_level*.c) and its latency path (coll_xccl_latency.c). */
/* The latency path's small areas in units of XCCL_LATENCY_UNIT bytes (below). */
#define XCCL_LATENCY_UNIT ((size_t) 256)
#define XCCL_LATENCY_UNITS (XCCL_SEGMENT_SMALL_BYTES / XCCL_LATENCY_UNIT)

struct mca_coll_xccl_level {
    xccl_segment_t *seg;             /* this node's segment, NULL if none */
    xccl_level_peer_t peer;
    int *local_of;                   /* communicator rank -> rank in its node's segment */
    int node_size;
    int leader;                      /* communicator rank that created (or claimed) this node's segment */
    int ok;                          /* this rank's vote: the node's segment is mapped here */
    /* Reuse (the pool of coll_xccl_level_pool.c): the node's members as a set;
     * a pooled segment this rank offered as a member (taken from the pool
     * until the finish); whether it can read every node peer's memory (-1
     * unknown: not probed); the vote skipped (the agreement showed that
     * every rank holds a pooled segment of its node and what it votes). */
    uint64_t sig;
    xccl_segment_t *hint;
    int probe;
    int fast, fast_cma;
    /* what the level's last call without an exit barrier left owed
     * (algos/xccl_exec.h: its executors settle it in call order) */
    xccl_exit_owed_t exit_owed;
    uint64_t lat_seq;                /* calls through the latency path */
    uint64_t lat_seen;               /* every peer was seen to have posted this f or later */
    unsigned lat_pos;                /* the next unit of the small areas (the same on every rank) */
    unsigned lat_last;               /* the units of the call before (the same on every rank) */
    int lat_last_root;               /* its root, where it was a bcast (else -1) */
    uint64_t lat_wrote[XCCL_LATENCY_UNITS];   /* the last call in which this rank wrote each unit
                                               * (of its area; two ranks: of either area) */
    unsigned char lat_flip[XCCL_LATENCY_UNITS]; /* two ranks: the next call on each unit has
                                                 * segment rank s write area s ^ lat_flip */
    /* by collective, the size classes (xccl_size_class of the call's
     * bytes) whose level trial picked shm: their calls take the latency
     * path's fast way, as the whole way would (the pick is agreed, so the
     * same on every rank) */
    uint64_t lat_picked[XCCL_NCOLL];
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


/* State at enable; the local part
 * of set-up (node leaders create the segment, desc: XCCL_SEGMENT_DESC_BYTES of
 * the agreement record); finish (the others attach with their leader's
 * record in all, stride ints per rank); the vote, started as set-up ends;
 * the end. */
void mca_coll_xccl_level_init(mca_coll_xccl_module_t *m);
int mca_coll_xccl_level_local(mca_coll_xccl_module_t *m, int nodes_ok, int *desc);
void mca_coll_xccl_level_finish(mca_coll_xccl_module_t *m, int nodes_ok, const int *all, int stride);
/* The bits of the agreement's flags (record int XCCL_AGREE_FLAGS) that
 * mca_coll_xccl_level_local returns: 0, or 1 + what this rank would vote
 * in the level's second round (single copies) where it holds a pooled
 * segment and knows. */
#define XCCL_AGREE_SHM_SHIFT 2
#define XCCL_AGREE_SHM_MASK 3
/* The bits of the agreement's flags that say which pair of tags this
 * rank's process needs the vote to use on this context id (0 until a
 * vote on it was abandoned here: mca_coll_xccl_level_vote_gen); the vote
 * takes the largest of every rank's (level_vote.gen), and the level stays
 * off where that is XCCL_AGREE_VOTE_MASK (all pairs spent). */
#define XCCL_AGREE_VOTE_SHIFT 8
#define XCCL_AGREE_VOTE_MASK 15
int mca_coll_xccl_level_vote_gen(uint32_t cid);
/* The segments kept for reuse, unmapped (component close). */
void mca_coll_xccl_level_pool_fini(void);
/* Starts the vote, at the end of the set-up (under its lock). */
void mca_coll_xccl_level_vote_start(mca_coll_xccl_module_t *m);
/* 1 when the level's state is settled (the vote is over, progressing it
 * otherwise; never waits), else 0. */
int mca_coll_xccl_level_ready(mca_coll_xccl_module_t *m);
void mca_coll_xccl_level_fini(mca_coll_xccl_module_t *m);


/* The slot and peer access of the communicator's shared-memory level, for
 * a schedule that uses it, on hooks->bufs SEND and RECV (coll_xccl_level.c);
 * the first slot_bytes of this rank's slot mapped first (once:
 * xccl_segment_prefault_slots); with publish (a schedule that reads the
 * peers' own buffers: blocking calls only) publishes those for the
 * peers: 0 or <0. */
int mca_coll_xccl_level_hooks(mca_coll_xccl_module_t *m, mca_coll_xccl_exec_hooks_t *hooks,
                            int publish, size_t slot_bytes);

/* After a call of a level trial (xccl_trial_t) that ran from t0 to t1 on
 * this rank (ns, CLOCK_MONOTONIC): records it; after the trial's last
 * call the ranks agree on the
 * pick (an allreduce through the fallback, in this call on every rank),
 * logged at verbose 1 as
 *   xccl: trial <coll> comm=<cid> rank=<r> bytes=<lo>..<hi> shm=<us> mesh=<us> pick=<algo>
 * (the medians of each call's span from its last rank's start to its
 * last rank's end: xccl_trial_t), at
 * verbose 2 after this rank's own times:
 *   xccl: trial times <coll> comm=<cid> rank=<r> bytes=<lo>..<hi>, this rank's us: shm <t>...; mesh <t>...
 *   xccl: trial clock <coll> comm=<cid> rank=<r> bytes=<lo>..<hi> <shm|mesh>: <start>-<end>...
 * (the same calls' readings, ns, a line for each candidate),
 * MPI_SUCCESS, or the agreement's error (then the pick is shm).  After
 * the trial's first call the ranks agree whether every one kept the same
 * pick from an earlier communicator or process of the same shape
 * (coll_xccl_picks.h; then the trial ends with it, logged at verbose 1 as
 *   xccl: trial <coll> comm=<cid> rank=<r> bytes=<lo>..<hi> kept from earlier communicators of <n> ranks, no calls timed: pick=<algo>
 * or "kept from earlier processes (coll_xccl_picks_file)" where this
 * rank's came from the file); every agreed pick is kept for the process's
 * later communicators and the file. */
int mca_coll_xccl_level_trial_end(mca_coll_xccl_module_t *m, xccl_coll_t coll, size_t bytes,
                                xccl_trial_t *t, uint64_t t0, uint64_t t1);
/* Whether s is a schedule of the shared-memory level: it uses the own slot
 * or reaches the peers' memory (a bcast's non-root reads the root's slot
 * and has none of its own). */
static inline int mca_coll_xccl_sched_level(const xccl_sched_t *s)
{
    return s->slot_bytes > 0 || s->peer_access;
}
/* The level's turns (m->level_ticket, m->level_turn): whether the call holding
 * ticket may run its schedule now; its end passes the turn on. */
static inline int mca_coll_xccl_level_my_turn(mca_coll_xccl_module_t *m, uint32_t ticket)
{
    return __atomic_load_n(&m->level_turn, __ATOMIC_ACQUIRE) == ticket;
}
static inline void mca_coll_xccl_level_pass_turn(mca_coll_xccl_module_t *m)
{
    __atomic_store_n(&m->level_turn, m->level_turn + 1u, __ATOMIC_RELEASE);
}

/* The level's trials (xccl_trial_t) between shm (the latency path where it
 * applies) and the mesh over single copies: blocking calls of every
 * collective of at least this many bytes (the call's size, the same on every
 * rank), where the vote allowed them: below it the latency path won
 * (figures: docs/shm-level.md, "Trials between shm and the mesh").  Calls
 * of these sizes skip the latency path's fast way until then. */
#define XCCL_LEVEL_TRIAL_MIN_BYTES 16384
static inline int mca_coll_xccl_level_trial_wanted(const mca_coll_xccl_module_t *m,
                                                 const mca_coll_xccl_call_t *c)
{
    return mca_coll_xccl_component.policy.trials > 0 && c->bytes >= XCCL_LEVEL_TRIAL_MIN_BYTES
               ? m->level_trials : XCCL_TRIAL_OFF;
}

END_C_DECLS

#endif
