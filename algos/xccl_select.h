/*
 * xccl algorithms, selection: forced -> tuning rule -> level (rule or
 * trials) -> cost model, the level trials, and the per-communicator cache
 * of choices and schedules.  Section of the algos API; algos/xccl_algos.h
 * includes every section.
 */
#ifndef XCCL_SELECT_H
#define XCCL_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "base/xccl_base.h"          /* xccl_coll_t, XCCL_NCOLL */
#include "xccl_catalog.h"
#include "xccl_cost.h"
#include "xccl_sched.h"
#include "xccl_tuning.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Selection (algos/select.c): forced -> tuning rule -> cost model           */
/* ------------------------------------------------------------------------ */

/* Algorithm indices as the force parameters, the tuning file and the
 * verbose line count them: 0 "auto" (let xccl choose), 1 "fallback" (the
 * next module), then the catalog's algorithms of the collective in order. */
#define XCCL_SEL_AUTO 0
#define XCCL_SEL_FALLBACK 1
#define XCCL_SEL_FIRST 2
#define XCCL_SEL_MAX (XCCL_SEL_FIRST + XCCL_CATALOG_MAX)

/* Name of index i of collective c ("auto", "fallback", an algorithm), NULL
 * past the last; the index of a name, -1 if c has no such algorithm. */
const char *xccl_select_name(xccl_coll_t c, int i);
int xccl_select_index(xccl_coll_t c, const char *name);
/* The catalog index of an algorithm of the shared-memory level, looked up
 * once (no string compares on a call's path). */
typedef enum { XCCL_LEVEL_SHM_SMALL, XCCL_LEVEL_SHM, XCCL_LEVEL_MESH, XCCL_LEVEL_NALGOS } xccl_level_algo_t;
extern int xccl_select_level_cache[XCCL_NCOLL][XCCL_LEVEL_NALGOS];   /* 0: not looked up yet */
int xccl_select_level_lookup(xccl_coll_t c, xccl_level_algo_t which);
static inline int xccl_select_level_index(xccl_coll_t c, xccl_level_algo_t which)
{
    const int i = __atomic_load_n(&xccl_select_level_cache[c][which], __ATOMIC_RELAXED);
    return 0 != i ? i : xccl_select_level_lookup(c, which);
}
/* The largest allreduce (bytes per rank) that the level runs in a form
 * where every rank reduces the whole vector (shm_small, the latency path)
 * on a node of `ranks`; shm (reduce-scatter, allgather) above. */
size_t xccl_select_whole_max(int ranks);

/* Everything a choice depends on; the same on every rank of a job (the
 * component's parameters are registered for all ranks alike), so every
 * rank chooses alike. */
typedef struct {
    int forced[XCCL_NCOLL];            /* XCCL_SEL_AUTO, _FALLBACK or an algorithm */
    xccl_tuning_t tuning;              /* rules before the cost model */
    int small_bytes;                   /* auto: the fallback below this many bytes */
    xccl_cost_model_t intra, inter;    /* inside a node, between nodes */
    xccl_net_t net;                    /* the links between nodes; zeroed: none */
    double margin;                     /* see xccl_pick */
    int trials;                        /* level trials: timed calls of each candidate
                                        * (xccl_trial_t); 0: the level's rule alone */
} xccl_select_policy_t;

/* The component's defaults: auto everywhere, no rules, XCCL_COST_*. */
void xccl_select_policy_defaults(xccl_select_policy_t *p);

/* 0 if every rule of t names a collective and one of its algorithms (or
 * auto, fallback); else -1 and err says which line. */
int xccl_select_check_tuning(const xccl_tuning_t *t, char *err, size_t errlen);
/* The index the first matching rule gives, XCCL_SEL_AUTO when none. */
int xccl_select_tuned(const xccl_select_policy_t *p, xccl_coll_t c, int ranks, size_t bytes);

/* The reasons xccl_select_fallback gives: the verbose line's fallback=
 * values; callers may compare the pointers. */
extern const char xccl_select_why_forced[], xccl_select_why_tuning[], xccl_select_why_small[],
    xccl_select_why_slower[];

/* Whether a call goes to the fallback, from what every rank shares: the
 * reason ("forced", "tuning_file", "not_faster", "small_message"), or
 * NULL.  fallback_wrong: the fallback would compute this call wrongly, so
 * it stays with xccl where only speed sent it away.  Every call asks it,
 * most go to the fallback: inline, no schedule, no cost model, the rules
 * read only when there are some. */
static inline const char *xccl_select_fallback(const xccl_select_policy_t *p, xccl_coll_t c,
                                               int ranks, size_t bytes, int fallback_wrong)
{
    const int forced = p->forced[c];
    if (XCCL_SEL_FALLBACK == forced) {
        return xccl_select_why_forced;
    }
    if (XCCL_SEL_AUTO != forced) {
        return NULL;
    }
    /* Not a size every rank knows: no rule may read bytes (below). */
    const int tuned = p->tuning.n && !xccl_coll_sizes_local(c) ? xccl_select_tuned(p, c, ranks, bytes)
                                                               : XCCL_SEL_AUTO;
    if (XCCL_SEL_FALLBACK == tuned) {
        return xccl_select_why_tuning;
    }
    if (XCCL_SEL_AUTO != tuned || fallback_wrong) {
        return NULL;
    }
    /* The collectives without a form of the shared-memory level or of peer
     * access: inside a node the fallback's algorithms are faster than
     * xccl's schedules over the transport (figures:
     * docs/bench/more-collectives.md); device buffers reach the fallback
     * as host copies. */
    if (!xccl_coll_level(c)) {
        return xccl_select_why_slower;
    }
    /* The cost model does not model the fallback: below this size (its
     * default measured with xccl_bench) the fallback's latency is lower. */
    return bytes < (size_t) p->small_bytes ? xccl_select_why_small : NULL;
}

/* Where xccl keeps a collective of the fallback's (above: not faster)
 * on a communicator spanning nodes with more than one rank on some node:
 * its two-level schedules ("hier") send each node's data over the network
 * once, where the fallback's flat ones (tuned's) send it once per rank.
 * Measured faster than tuned from these sizes (bytes as in
 * xccl_select_fallback: allgatherv the total received, reduce the vector;
 * figures: docs/bench/two-node.md, "Reduce and allgatherv"), allgatherv
 * also under han (which has none).  fallback_two_level: the fallback is
 * itself two-level (Open MPI's han, the default between nodes from Open
 * MPI 5): reduce stays there, hier's is not faster than han's. */
#define XCCL_NODES_ALLGATHERV_MIN ((size_t) 256 << 10)
#define XCCL_NODES_REDUCE_MIN ((size_t) 1 << 20)
static inline int xccl_select_across_nodes(xccl_coll_t c, size_t bytes, int fallback_two_level)
{
    return (XCCL_COLL_ALLGATHERV == c && bytes >= XCCL_NODES_ALLGATHERV_MIN) ||
           (XCCL_COLL_REDUCE == c && !fallback_two_level && bytes >= XCCL_NODES_REDUCE_MIN);
}

/* The cost model: t[i] the predicted seconds of algorithm XCCL_SEL_FIRST+i
 * for a (negative: it does not apply), *n of them; returns auto's pick
 * (xccl_pick with the policy's margin) as an index >= XCCL_SEL_FIRST, or
 * -1 if none applies.  a->layout must be set.  es: bytes per element.
 * The component, xccl_simulate and xccl_info all choose with this. */
int xccl_select_model(const xccl_select_policy_t *p, xccl_coll_t c, const xccl_coll_args_t *a,
                      size_t es, double t[XCCL_CATALOG_MAX], int *n);

/* Level trials.  Inside the shared-memory level every collective has two
 * candidates: shm (the level's rule: two copies per byte through the
 * slots, pipelined in cache-sized pieces) and mesh (one copy per byte,
 * read from the peer's own buffer with process_vm_readv; the reductions
 * reduce pieces copied into scratch).  Which is faster depends on
 * the machine, not on the call (docs/shm-level.md).  So where both apply
 * (a blocking call of at least 16 KiB, every peer readable: a->trial; the
 * component runs shm's smaller calls through its latency path), the first
 * calls of each collective and size class run both in turn and time them:
 *   calls 0 .. w-1    shm, mesh, shm, ...: untimed (schedules built,
 *                     pages touched: a process's first calls are slower
 *                     than its later ones, either candidate);
 *   then blocks of b calls, shm's, mesh's, shm's, ..., each block's
 *                     first u calls untimed, until each candidate has n
 *                     timed calls;
 *   w = 4, b = 3, u = 1 and n = the policy's trials; from XCCL_TRIAL_LARGE
 *   bytes, where a call lasts long enough to time well and a trial call
 *   of the slower candidate costs most, w = 2, b = 4, u = 2 and n at most
 *   3; n rounded up to whole blocks.  Two untimed there, because the
 *   second call after a switch still pays for the switch.
 *   Blocks, because a call that follows one of the same schedule
 *   runs as in a program's loop (shm's bcast root, for one, writes ahead
 *   into the slots while its peers still read); a call timed right after
 *   the other candidate does not, and picks against the loop's timings;
 * then the ranks agree on when every timed call began on its last rank
 * and ended on its last rank (an allreduce MAX of each rank's clock
 * readings, element by element, the same bits everywhere: the caller's;
 * the ranks of a node read one clock, CLOCK_MONOTONIC), and the candidate
 * with the lower median of those spans (last start to last end) is the
 * class's pick from then on; a tie goes to shm.  The span, because a rank
 * that comes late to the calls (descheduled, busy between calls) makes
 * every other rank wait whichever candidate runs, so the slowest rank's
 * own times measure the late rank, not the algorithm; and a rank that
 * finishes early (the late one, which waits least) is no measure of an
 * algorithm whose ranks finish apart (a bcast's readers of one root): the
 * span counts the last one.  Every rank makes the same calls in the same
 * order, so trials and picks are the same calls on every rank.
 *   A pick may come from the process's earlier communicators instead
 * (mca_coll_xccl_level_trial_end): after the first call, where every rank
 * kept the same one, the trial ends with it (xccl_trial_t.pick).
 *   A clear case ends early (QUIET trials): where more blocks follow, the
 * ranks agree once more after the first block of each candidate, and
 * where every span of one candidate there is at least XCCL_TRIAL_CLEAR
 * times every span of the other, the faster is the pick from then on;
 * else the trial goes on to its end, and its last agreement takes every
 * timed call.  (NOISY trials are long because a few calls pick either
 * way: they run to their end.)  Figures behind each rule:
 * docs/bench/select-figures.md. */
#define XCCL_TRIAL_MAX 16              /* timed calls of each candidate, at most */
#define XCCL_TRIAL_BLOCK 3             /* calls of one candidate in a row ... */
#define XCCL_TRIAL_UNTIMED 1           /* ... the first of them untimed */
#define XCCL_TRIAL_LARGE_BLOCK 4       /* from XCCL_TRIAL_LARGE */
#define XCCL_TRIAL_LARGE_UNTIMED 2
#define XCCL_TRIAL_LARGE ((size_t) 1 << 20)
/* How a call's times read (a->trial), the same on every rank (voted):
 *   QUIET  every rank has a core of its own: as above;
 *   NOISY  a rank yields when idle (more ranks than cores): a call's time
 *          depends on the scheduler as much as on the algorithm, so
 *          2n+1 timed calls of each (from XCCL_TRIAL_LARGE at most
 *          XCCL_TRIAL_NOISY_LARGE), as five timed calls pick either
 *          way.  The lower median wins, as in QUIET, with no margin for the
 *          mesh to beat: a margin keeps shm where the mesh is faster
 *          (figures: docs/bench/select-figures.md). */
enum { XCCL_TRIAL_OFF, XCCL_TRIAL_QUIET, XCCL_TRIAL_NOISY };
#define XCCL_TRIAL_NOISY_LARGE 5
#define XCCL_TRIAL_CLEAR 1.5           /* an early pick: every span this much slower */
/* The log2 size class of a call of `bytes` (trials and choices are kept
 * per class): 0 for 0 bytes, k for [2^(k-1), 2^k). */
static inline int xccl_size_class(size_t bytes)
{
    return bytes ? 64 - __builtin_clzll((unsigned long long) bytes) : 0;
}
typedef struct xccl_trial {
    int calls;                         /* trial calls recorded */
    int warm;                          /* untimed calls first */
    int samples;                       /* timed calls of each candidate */
    int block, untimed;                /* calls in a block, the untimed ones first */
    int noisy;                         /* XCCL_TRIAL_NOISY: longer */
    int have;                          /* timed calls of each at the latest agreement */
    int cand[2];                       /* shm, mesh (algorithm indices) */
    int pick;                          /* the agreed one; 0 while trials run */
    uint64_t at[2][2][XCCL_TRIAL_MAX]; /* [0 start, 1 end][candidate][timed call]:
                                        * this rank's clock (ns) */
} xccl_trial_t;

/* The candidate the next trial call runs. */
static inline int xccl_trial_next(const xccl_trial_t *t)
{
    const int i = t->calls - t->warm;
    return t->cand[i < 0 ? t->calls & 1 : (i / t->block) & 1];
}
/* Records that the trial call just made (xccl_trial_next's) ran from t0 to
 * t1 (ns, CLOCK_MONOTONIC) on this rank: 1 if the ranks agree now (the
 * trial's last call, or its early check: t->have < t->samples; then
 * xccl_trial_medians and xccl_trial_decide), else 0. */
int xccl_trial_record(xccl_trial_t *t, uint64_t t0, uint64_t t1);
/* The median over each candidate's timed calls so far (t->have) of
 * at[1][j][i] - at[0][j][i] (0 where negative), at an agreement: the
 * agreed readings (every rank's MAX: last start, last end), or t->at,
 * this rank's own. */
void xccl_trial_medians(const xccl_trial_t *t, const uint64_t at[2][2][XCCL_TRIAL_MAX],
                        uint64_t med[2]);
/* Whether the early check may pick: every span of one candidate so far at
 * least XCCL_TRIAL_CLEAR times every span of the other, in the agreed
 * readings. */
int xccl_trial_clear(const xccl_trial_t *t, const uint64_t at[2][2][XCCL_TRIAL_MAX]);
/* The pick from the agreed medians (the same on every rank). */
int xccl_trial_decide(xccl_trial_t *t, const uint64_t med[2]);

/* Per communicator: the choices made so far, by (collective, size class,
 * layout of the call), the level trials, and the schedules built for the
 * latest argument sets.  Zeroed memory is an empty cache. */
#define XCCL_SEL_VARIANTS 8            /* in place, root 0 or not, shared-memory level */
#define XCCL_SEL_SCHEDS 8
struct xccl_sched_entry;
typedef struct {
    int8_t algo[XCCL_NCOLL][65][XCCL_SEL_VARIANTS];
    float predicted_us[XCCL_NCOLL][65][XCCL_SEL_VARIANTS];
    xccl_trial_t *trial[XCCL_NCOLL][65];               /* by size class, made on first use */
    struct xccl_sched_entry *sched[XCCL_SEL_SCHEDS];   /* most recently used first */
    unsigned long long hits, builds;   /* schedules reused, built */
} xccl_select_cache_t;

/* How a choice was made. */
/* XCCL_BY_FIRST: a collective whose sizes are local to each rank
 * (xccl_coll_sizes_local): its first algorithm, which no size decides. */
typedef enum { XCCL_BY_FORCE, XCCL_BY_TUNING, XCCL_BY_MODEL, XCCL_BY_LEVEL, XCCL_BY_TRIAL,
               XCCL_BY_FIRST } xccl_select_by_t;

typedef struct {
    int algo;                          /* index >= XCCL_SEL_FIRST */
    xccl_select_by_t by;
    float predicted_us;                /* the model's, negative otherwise */
    int fresh;                         /* the model decided now (not from the cache) */
    xccl_trial_t *trial;               /* a trial call: time it (xccl_trial_record) */
} xccl_selection_t;

/* The algorithm for a call xccl runs: forced, else the tuning rule's, else
 * the level's (its rule, or its trials: xccl_trial_t), else the cost
 * model's (decided once per size class and layout, kept in c).
 * ranks: the communicator size; bytes as in xccl_select_fallback. */
xccl_selection_t xccl_select_algo(const xccl_select_policy_t *p, xccl_select_cache_t *c,
                               xccl_coll_t coll, const xccl_coll_args_t *a, int ranks,
                               size_t bytes, size_t es);

/* The schedule of algorithm algo of coll for a, for rank of size: built
 * now, or the one built for the same arguments before (training loops
 * repeat their calls).  An algorithm that does not apply here (two-level
 * on one node, mesh without peer access) is replaced by the collective's
 * first; *used says which ran.  NULL: out of memory.  The schedule stays
 * valid until xccl_select_put, whatever the cache does meanwhile.  c may
 * be NULL: built, never kept. */
const xccl_sched_t *xccl_select_schedule(xccl_select_cache_t *c, xccl_coll_t coll, int algo,
                                         const xccl_coll_args_t *a, int rank, int size,
                                         size_t es, int *used);
/* Gives back a schedule of xccl_select_schedule (any thread). */
void xccl_select_put(const xccl_sched_t *s);
/* Drops the cached schedules (those in use stay until their put) and the
 * trials. */
void xccl_select_cache_fini(xccl_select_cache_t *c);

#ifdef __cplusplus
}
#endif

#endif
