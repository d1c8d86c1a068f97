/*
 * xccl algorithms, schedules: the data structure every algorithm builds
 * (xccl_sched_t), the calls that build one, buffer references, and
 * composition (a child schedule appended to a parent).  Section of the
 * algos API; algos/xccl_algos.h includes every section.
 *
 * Step semantics: the executor posts every receive and send of a step,
 * waits for all of them, then runs the step's local actions (copy, reduce)
 * in order, then moves to the next step.  A step with only local actions
 * runs at once.  Schedules never rely on message buffering: a send may
 * complete only when the matching receive is posted.
 */
#ifndef XCCL_SCHED_H
#define XCCL_SCHED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Schedules                                                                */
/* ------------------------------------------------------------------------ */

/* SLOT: this rank's slot of the node's shared segment, the
 * buffer its peers on the node read (xccl_ref_peer(q, XCCL_BUF_SLOT, off):
 * rank q's slot).  Only the shared-memory builders (algos/shm_*.c) use it;
 * a schedule's slot_bytes says how much of it. */
typedef enum {
    XCCL_BUF_SEND = 0, XCCL_BUF_RECV = 1, XCCL_BUF_SCRATCH = 2, XCCL_BUF_SLOT = 3, XCCL_NBUF
} xccl_buf_id_t;

/* POST and WAIT are flags (peer access, see xccl_peer_t): each rank has one
 * flag, a counter only it raises.  POST runs in order with the step's local
 * actions (so after the copies before it); a step's WAITs, like its
 * receives, must all be satisfied before its local actions run. */
typedef enum {
    XCCL_ACT_SEND, XCCL_ACT_RECV, XCCL_ACT_COPY, XCCL_ACT_REDUCE,
    XCCL_ACT_POST,             /* raise this rank's flag to idx */
    XCCL_ACT_WAIT              /* wait until peer's flag has reached idx */
} xccl_act_kind_t;

/* A region: this rank's buffer, or (peer access) a buffer of group rank q:
 * a CUDA IPC mapping, a slot of the node's shared segment...  peer_plus1
 * is 0 for this rank's own buffer, so that every zero-initialised or
 * two-field { buf, off } reference keeps meaning what it always meant. */
typedef struct {
    uint8_t buf;               /* xccl_buf_id_t */
    size_t off;                /* bytes */
    int32_t peer_plus1;        /* 0: own buffer; q + 1: group rank q's buffer */
} xccl_ref_t;

typedef struct {
    uint8_t kind;              /* xccl_act_kind_t */
    int32_t peer;              /* SEND/RECV/WAIT: rank in the group */
    uint32_t idx;              /* SEND/RECV: index of this message between the pair, in order;
                                * POST/WAIT: the flag value */
    size_t len;                /* bytes (POST: 0; WAIT: how many calls back its value is
                                * of: 0 this call, 1 the previous, xccl_sched_wait_before) */
    xccl_ref_t a;              /* SEND source, COPY source, REDUCE left operand */
    xccl_ref_t b;              /* REDUCE right operand */
    xccl_ref_t dst;            /* RECV target, COPY target, REDUCE result */
} xccl_action_t;

typedef struct {
    xccl_action_t *acts;
    size_t nacts, acts_cap;
    size_t *step_start;        /* step i = acts[step_start[i] .. step_start[i+1]) */
    size_t nsteps, steps_cap;
    size_t rounds;             /* xccl_sched_step calls, empty steps included (cost model) */
    size_t *step_round;        /* step i began at round step_round[i] (the value of rounds
                                * then): lines steps of different ranks up (xccl_sched_zip) */
    size_t max_xfers;          /* largest number of sends+recvs in one step */
    size_t scratch_bytes;
    size_t elem_size;          /* bytes per reduction element (1 if none) */
    int rank, size;
    const char *algo;          /* name, as accepted by the force parameters */
    int error;                 /* sticky: allocation failure while building */
    int peer_access;           /* names another rank's buffer or a flag: needs xccl_peer_t */
    uint32_t flag_top;         /* highest flag value posted */
    /* Shared-memory level: slot_cap is an input, set by the caller before
     * building (0 after xccl_sched_init: no segment): the bytes of this
     * rank's slot a builder may use; the shm builders pipeline through it.
     * slot_bytes is what the schedule uses (<= slot_cap): bufs[XCCL_BUF_SLOT]
     * must hold that much, and so must every peer's slot. */
    size_t slot_cap;
    size_t slot_bytes;
    /* 0, or the schedule alternates between two regions of its slot from
     * call to call: on odd calls (executor seq) every slot offset is
     * slot_flip bytes further (algos/shm_util.h: the latency path, which
     * needs no exit barrier).  A schedule with slot_flip is not appended. */
    size_t slot_flip;
    /* 0, or a rotation for a whole schedule: call
     * seq uses the slot's region seq % slot_nalt, every slot offset
     * (seq % slot_nalt) * slot_alt bytes further, so that a call does not
     * write the lines its peers read in the last slot_nalt - 1 calls (they
     * may still hold them; algos/shm_allgather.c).  Where it keeps its
     * exit barrier nothing else changes (no peer reads a slot after it),
     * so the simulator checks it as strictly as any; one without (no_exit)
     * is checked across calls by test_shm_algos.  A schedule with slot_alt
     * is not appended. */
    size_t slot_alt;
    unsigned slot_nalt;
    /* 0, or (two ranks, a whole schedule) on odd
     * calls the two ranks' slots trade places: every slot reference names
     * the other rank's slot.  A line a core has just read is in its cache,
     * perhaps its alone (some CPUs take a line over on such a read), so
     * a rank writes the lines it read in the last call instead of pulling
     * back the ones its peer read (algos/shm_util.h, shm_swap).  Nothing else
     * changes; a schedule with slot_swap is not appended. */
    int slot_swap;
    /* A whole schedule without an exit barrier (algos/shm_util.h,
     * shm_no_exit): its last step posts flag_top ("done reading the
     * peers' slots in this call") and waits for nobody, and it moves
     * through two or more places of the slot from call to call (slot_nalt
     * >= 2, or slot_swap).  Whoever runs such schedules settles what a
     * call leaves owed before the next one that writes the slot
     * (xccl_exec_set_owed).  A schedule with no_exit is not appended. */
    int no_exit;
    /* With no_exit, the rooted and v forms' way (algos/shm_util.h,
     * shm_enter): every rank posts first, and one that writes its slot
     * then waits for every peer to have entered the call before
     * (xccl_sched_wait_before): done with the call before that, the last
     * to use this call's half of the slot.  Consecutive calls of this way
     * need no settlement; a call of another layout settles with them as
     * with any. */
    int entry_waits;
    /* Copies into this rank's RECV go to memory past the caches
     * (non-temporal stores; xccl_copy_stream): set by builders whose RECV
     * is larger than the caches and not read again in the call. */
    int stream_recv;
} xccl_sched_t;

/* The shm builders of whole schedules set stream_recv for a RECV of at
 * least this many bytes. */
#define XCCL_STREAM_BYTES ((size_t) 8 << 20)

void xccl_sched_init(xccl_sched_t *s, int rank, int size, size_t elem_size);
void xccl_sched_fini(xccl_sched_t *s);
/* Start a new step; later actions belong to it. */
void xccl_sched_step(xccl_sched_t *s);
/* Append actions to the current step.  Zero-length actions are dropped, on
 * both sides of a transfer alike, so builders need not special-case them. */
void xccl_sched_send(xccl_sched_t *s, int peer, xccl_ref_t src, size_t len);
void xccl_sched_recv(xccl_sched_t *s, int peer, xccl_ref_t dst, size_t len);
void xccl_sched_copy(xccl_sched_t *s, xccl_ref_t dst, xccl_ref_t src, size_t len);
void xccl_sched_reduce(xccl_sched_t *s, xccl_ref_t dst, xccl_ref_t a, xccl_ref_t b, size_t len);
/* Flags (peer access).  post: this rank's flag becomes val once the local
 * actions before it in the step have run; values a rank posts never
 * decrease (finalize fails otherwise).  wait: the current step's local
 * actions run only once peer's flag is at least val.  A wait names a flag
 * value, not an event: flags are per call (the executor's seq), so a value
 * of an earlier call never satisfies a wait. */
void xccl_sched_post(xccl_sched_t *s, uint32_t val);
void xccl_sched_wait(xccl_sched_t *s, int peer, uint32_t val);
/* Wait until peer is done with everything before this schedule: with the
 * peer's flag of the previous call or a later one (val 0, one call back),
 * i.e. the peer has finished the call before the previous one.  Appended
 * after phases that posted flags (xccl_sched_append), it becomes a wait
 * for the peer's last flag of those phases in this call.  A schedule that
 * waits so posts (value 0) in an earlier step first, so that a peer whose
 * previous call posted nothing still lets the wait be met. */
void xccl_sched_wait_before(xccl_sched_t *s, int peer);
/* Number the messages of each peer pair and compute max_xfers.
 * Returns 0, or -1 if building failed. */
int xccl_sched_finalize(xccl_sched_t *s);

static inline xccl_ref_t xccl_ref(xccl_buf_id_t buf, size_t off)
{
    xccl_ref_t r = { (uint8_t) buf, off, 0 };
    return r;
}

/* Buffer buf of group rank peer (peer access).  A schedule may name its
 * own rank this way: it is then its own buffer and needs no peer access. */
static inline xccl_ref_t xccl_ref_peer(int peer, xccl_buf_id_t buf, size_t off)
{
    xccl_ref_t r = { (uint8_t) buf, off, peer + 1 };
    return r;
}

/* The group rank whose buffer r names, or -1 for the schedule's own. */
static inline int xccl_ref_owner(xccl_ref_t r)
{
    return r.peer_plus1 - 1;
}

/* ------------------------------------------------------------------------ */
/* Composition                                                              */
/* ------------------------------------------------------------------------ */

/* Composition.  A child schedule is built for a sub-group (child rank i is
 * parent rank group[i]) and appended to its parent: every child step becomes
 * a new parent step (same step semantics), peers are translated to parent
 * ranks and each child buffer is placed in a parent buffer: child buffer b at
 * offset o is parent buffer map->base[b].buf at offset map->base[b].off + o.
 * Parent scratch grows to hold what the child uses in the regions mapped to
 * scratch.  The slot is not placed: a child's slot is the parent's (the
 * rank's one slot of the node segment, map->base[XCCL_BUF_SLOT] unused) and
 * the parent's slot_bytes grows to the child's.  Actions added to the
 * parent after an append go to the child's
 * last step and so run after its transfers.  Messages are numbered per peer
 * pair by xccl_sched_finalize in schedule order: phases appended in the same
 * order on every rank match one to one.  0, or -1 (child failed or does not
 * fit: size, rank, peers, element size; the parent is marked failed). */
typedef struct {
    xccl_ref_t base[XCCL_NBUF];
} xccl_buf_map_t;

int xccl_sched_append(xccl_sched_t *parent, const xccl_sched_t *child, const int *group,
                      const xccl_buf_map_t *map);

/* Pipelined composition: several children side by side, so that
 * their transfers overlap.  Part i's child step that began at round k (its
 * step_round) joins the parent step of round at + k, counted from the
 * parent's rounds before the call; parts that land on one round share a
 * parent step, in the order of parts[] (all transfers of the step, then
 * the local actions of part 0, part 1, ...).  Peers, buffers and scratch
 * are placed as xccl_sched_append places them (group NULL: the child's
 * ranks are the parent's).  The parent's rounds grow by the last round
 * used.
 *
 * The caller keeps it right: parts sharing a round touch disjoint regions
 * and never name one peer pair (message order per pair is then each
 * part's own), and every rank zips the same parts at the same rounds
 * relative to what its peers in them do.  Deadlock-free when every part
 * is round-synchronous (a message's two ends at the same round of their
 * schedules, as in ring, nhr, Bruck): then both ends of a message land on
 * the same parent round.  Children with flags (peer access) or a slot
 * are refused.  0, or -1 (the parent is marked failed). */
typedef struct {
    const xccl_sched_t *child;
    const int *group;          /* child rank i is parent rank group[i]; NULL: the same */
    xccl_buf_map_t map;
    size_t at;                 /* first parent round (relative) of the child's round 0 */
} xccl_zip_part_t;

int xccl_sched_zip(xccl_sched_t *parent, const xccl_zip_part_t *parts, size_t n);

#ifdef __cplusplus
}
#endif

#endif
