/*
 * xccl algorithms: pure C, no MPI, no UCX, no CUDA.
 *
 * A collective call becomes a schedule (xccl_sched_t): a list of steps, each
 * step a set of sends and receives between buffer regions plus local
 * reductions and copies.  One executor (xccl_exec_t) runs any schedule over a
 * small transport interface (xccl_transport_t); the in-memory simulated
 * transport (xccl_sim_*) runs N virtual ranks in one process for tests.
 *
 * Step semantics: the executor posts every receive and send of a step, waits
 * for all of them, then runs the step's local actions (copy, reduce) in
 * order, then moves to the next step.  A step with only local actions runs
 * at once.  Schedules never rely on message buffering: a send may complete
 * only when the matching receive is posted.
 */
#ifndef XCCL_ALGOS_H
#define XCCL_ALGOS_H

#include <stddef.h>
#include <stdint.h>

#include "base/xccl_base.h"        /* element types, ops, host kernels, collectives */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Schedules                                                                */
/* ------------------------------------------------------------------------ */

/* SLOT: this rank's slot of the node's shared segment (DESIGN 3a), the
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
} xccl_sched_t;

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
/* Algorithms (schedule builders).  Each returns 0 or -1 (out of memory).   */
/* Buffer conventions:                                                      */
/*   allreduce:      SEND count elements in, RECV count elements out.       */
/*                   In place: SEND and RECV are the same memory.           */
/*   reduce_scatter: SEND sum(counts) elements in, RECV counts[rank] out.   */
/*                   in_place: the input is RECV itself (SEND == RECV).     */
/*   allgather:      SEND block bytes, RECV size*block.  In place: SEND is  */
/*                   RECV + rank*block.                                     */
/*   alltoall:       SEND size*block, RECV size*block.  in_place: SEND is   */
/*                   RECV; blocks are exchanged through scratch.            */
/*   bcast:          RECV holds bytes; the root's data is sent.             */
/* ------------------------------------------------------------------------ */

int xccl_build_allreduce_ring(xccl_sched_t *s, size_t count);
/* The same with the reduce-scatter phase cut into segments of seg bytes
 * (0: none), each received and reduced in its own step. */
int xccl_build_allreduce_ring_segmented(xccl_sched_t *s, size_t count, size_t seg);
int xccl_build_reduce_scatter_ring(xccl_sched_t *s, const size_t *counts, int in_place);
int xccl_build_allgather_ring(xccl_sched_t *s, size_t block);
int xccl_build_alltoall_pairwise(xccl_sched_t *s, size_t block, int in_place);
int xccl_build_bcast_binomial(xccl_sched_t *s, size_t bytes, int root);

/* More algorithms (issue 3); same buffer conventions.  Names in comments
 * are the values of s->algo (and of the force parameters). */
/* "recursive_doubling": lg p steps exchanging the whole vector; non-powers
 * of two fold the extra ranks in and out. */
int xccl_build_allreduce_recursive_doubling(xccl_sched_t *s, size_t count);
/* "rabenseifner": recursive-halving reduce-scatter + recursive-doubling
 * allgather, extra ranks folded in and out. */
int xccl_build_allreduce_rabenseifner(xccl_sched_t *s, size_t count);
/* "swing": Swing (Sensi et al., NSDI 2024), bandwidth-optimal form: peer at
 * step k is r +/- rho(k), rho(k) = sum_{i<=k} (-2)^i. */
int xccl_build_allreduce_swing(xccl_sched_t *s, size_t count);
/* "recursive_halving" and "pairwise" reduce_scatter (irregular counts). */
int xccl_build_reduce_scatter_recursive_halving(xccl_sched_t *s, const size_t *counts, int in_place);
int xccl_build_reduce_scatter_pairwise(xccl_sched_t *s, const size_t *counts, int in_place);
/* "recursive_doubling" and "bruck" allgather. */
int xccl_build_allgather_recursive_doubling(xccl_sched_t *s, size_t block);
int xccl_build_allgather_bruck(xccl_sched_t *s, size_t block);
/* "bruck" alltoall (small blocks) and "linear": every pair at once, at
 * most max_inflight sends and receives posted per step (0: no bound). */
int xccl_build_alltoall_bruck(xccl_sched_t *s, size_t block, int in_place);
int xccl_build_alltoall_linear(xccl_sched_t *s, size_t block, int in_place, int max_inflight);
/* "scatter_allgather": binomial scatter + ring allgather; "chain": a
 * pipelined chain root -> root+1 -> ... in segments of seg bytes. */
int xccl_build_bcast_scatter_allgather(xccl_sched_t *s, size_t bytes, int root);
int xccl_build_bcast_chain(xccl_sched_t *s, size_t bytes, int root, size_t seg);

/* Peer-access ("mesh") algorithms: every rank reads (and reduces) straight
 * from the others' buffers, as the CUDA IPC collectives do; only for ranks
 * of one node with peer access (xccl_peer_t).  Flag barriers separate the
 * phases: on entry (the peers' inputs are there to read), between phases
 * (what a rank reads next has been written) and on exit (nobody leaves, and
 * lets its buffers be reused, while another still reads them).  Same buffer
 * conventions as above; s->algo is "mesh". */
/* Every rank copies each peer's block from the peer's SEND (in place that
 * is the peer's RECV + q * block, as for every allgather builder). */
int xccl_build_allgather_mesh(xccl_sched_t *s, size_t block);
/* Every rank reads its block from every peer's SEND; in place through
 * scratch (size * block), written back once every peer has read. */
int xccl_build_alltoall_mesh(xccl_sched_t *s, size_t block, int in_place);
/* Every rank copies the root's RECV. */
int xccl_build_bcast_mesh(xccl_sched_t *s, size_t bytes, int root);
/* Rank j reduces slice j (chunk j of count over size) over every rank's
 * input in rank order 0..P-1, ((x0 op x1) op x2) ..., into its RECV; the
 * others then copy it from there.  Every rank gets the same bits.  in_place
 * must be said (SEND and RECV the same memory): the partial sums go
 * through scratch then. */
int xccl_build_allreduce_mesh(xccl_sched_t *s, size_t count, int in_place);
/* The same where the peers' buffers can only be copied from
 * (XCCL_PEER_READ: process_vm_readv), not reduced from: each peer operand
 * comes into SCRATCH in pieces of `piece` bytes (rounded to elements)
 * first, and the piece is reduced there while it is in cache. */
int xccl_build_allreduce_mesh_read(xccl_sched_t *s, size_t count, int in_place, size_t piece);
/* Rank j reduces its block over every rank's input, in rank order. */
int xccl_build_reduce_scatter_mesh(xccl_sched_t *s, const size_t *counts, int in_place);
/* The same where the peers' buffers can only be copied from, as
 * xccl_build_allreduce_mesh_read. */
int xccl_build_reduce_scatter_mesh_read(xccl_sched_t *s, const size_t *counts, int in_place, size_t piece);

/* Shared-memory ("shm") algorithms: the mesh algorithms for ranks of one
 * node that reach each other only through the node's shared segment
 * (DESIGN 3a): every rank copies what its peers need into its own slot
 * (XCCL_BUF_SLOT) and reads theirs, so SEND and RECV are the caller's
 * own buffers and nothing is copied around the schedule.  The caller sets
 * s->slot_cap (the slot's size) before building; a message larger than
 * the slot goes through it in chunks, pipelined (a slot of 2 or 3 buffers,
 * one flag barrier per chunk; algos/shm_util.h).  No sends or receives.
 * Same buffer conventions as above; -1 also when the slot is too small:
 * allreduce 3 elements ("shm") or 2 ("shm_small"), reduce_scatter 2 p
 * elements, alltoall 2 p bytes, allgather and bcast 2 bytes.  Reductions
 * run in rank order on every element, as the mesh's: every rank gets the
 * same bits. */
/* "shm": per chunk copy in -> rank j reduces slice j over every slot ->
 * every rank copies the slices out of their owners' slots (large
 * messages: n/p reduced per rank).  In place needs no flag (SEND is read
 * only by the copy in). */
int xccl_build_allreduce_shm(xccl_sched_t *s, size_t count);
/* "shm_small": per chunk copy in -> every rank reduces the whole chunk
 * over every slot into RECV (latency: two barriers for one chunk; up to
 * 256 bytes in a slot of 4 KiB or more one barrier: two regions of the
 * slot used on alternate calls, slot_flip, instead of an exit barrier). */
int xccl_build_allreduce_shm_small(xccl_sched_t *s, size_t count);
/* "shm": rank j reduces piece after piece of its block over every slot. */
int xccl_build_reduce_scatter_shm(xccl_sched_t *s, const size_t *counts, int in_place);
/* "shm": each rank's block through its slot to every other rank. */
int xccl_build_allgather_shm(xccl_sched_t *s, size_t block);
int xccl_build_allgatherv_shm(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);
/* "shm": the blocks for every peer through the sender's slot. */
int xccl_build_alltoall_shm(xccl_sched_t *s, size_t block, int in_place);
/* "shm": the root's data through its slot; only the root waits for all. */
int xccl_build_bcast_shm(xccl_sched_t *s, size_t bytes, int root);

/* ------------------------------------------------------------------------ */
/* Cost model                                                               */
/* ------------------------------------------------------------------------ */

/* alpha-beta-gamma parameters of one link level. */
typedef struct {
    double alpha;              /* seconds per message (latency, per message a rank posts) */
    double beta;               /* seconds per byte on the wire */
    double gamma;              /* seconds per byte reduced */
    double delta;              /* seconds per byte copied locally */
    /* Peer access (the node's shared segment, DESIGN 3a).  0 keeps the
     * first reading, which suits CUDA IPC: a flag wait costs alpha like a
     * message received, a peer's buffer is read like a local one.  Set,
     * a flag wait costs flag (a peer's cache line, polled; not a message)
     * and every byte a copy or reduction reads from a peer's buffer costs
     * peer on top of delta or gamma (another core's cache or memory). */
    double flag;
    double peer;
} xccl_cost_model_t;

/* Predicted time of one rank's schedule: each step costs
 *   alpha * max(sends, receives) + beta * max(bytes sent, bytes received)
 *   + gamma * bytes reduced + delta * bytes copied,
 * i.e. a rank's messages of a step go out one after the other, sending and
 * receiving overlap (full duplex), and reductions follow the transfers.
 * Dependencies between ranks are modelled only through rounds: a rank that
 * moves any data pays alpha for every round of its algorithm, also for the
 * rounds whose transfers were empty (zero-length chunks of a small message:
 * the data still waits for the ranks before it, e.g. around a ring).  For
 * symmetric algorithms a rank's cost is the collective's; callers take the
 * max over a few ranks otherwise (e.g. the root and a leaf of a tree).
 * With m->flag or m->peer set (peer access), a step also costs
 *   flag * flag waits + peer * bytes read from peers' buffers
 * and flag waits are no receives. */
double xccl_sched_cost(const xccl_sched_t *s, const xccl_cost_model_t *m);

/* A cost file (xccl_calibrate writes one; coll_xccl_cost_file,
 * xccl_simulate -F): whitespace-separated key=value, keys alpha, beta,
 * gamma, delta, flag, peer (the fields above, seconds), each at most once;
 * alpha, beta and gamma must be there.  0 and *m updated with the values
 * given (the others keep theirs), or -1 with *m untouched and why in err:
 * an unknown key, a value that is no finite number >= 0, a key given
 * twice, a required key missing. */
int xccl_cost_parse(const char *text, xccl_cost_model_t *m, char *err, size_t errlen);
/* xccl_cost_parse of the file at path (at most XCCL_COST_FILE_MAX bytes):
 * 0, or -1 with *m untouched and why in err (also a file that cannot be
 * read, or a longer one). */
#define XCCL_COST_FILE_MAX 4095
int xccl_cost_load(const char *path, xccl_cost_model_t *m, char *err, size_t errlen);

/* Defaults (coll_xccl_cost_*, xccl_simulate, xccl_info): measured on the
 * development machine with xccl_calibrate plus xccl's per-message software
 * overhead; between nodes a 10 Gb/s Ethernet-class TCP link. */
#define XCCL_COST_ALPHA 1.5e-6
#define XCCL_COST_BETA 2.5e-10
#define XCCL_COST_GAMMA 2.0e-10
#define XCCL_COST_DELTA 1.3e-10            /* memcpy, one core, 64 MiB: ~7.7 GB/s */
/* The shared-memory level (flag, peer of the intra-node model): a flag
 * seen by a peer core of one socket plus the executor's poll; bytes from
 * another core's cache.  xccl_calibrate measures both (a cost file sets
 * them); on the development machine (Intel Xeon VM) it read flag
 * 0.15-0.20 us and peer 2.9-4.4e-11 s/B in five runs. */
#define XCCL_COST_SHM_FLAG 2.0e-7
#define XCCL_COST_SHM_PEER 5.0e-11
#define XCCL_COST_INTER_ALPHA 2.0e-5
#define XCCL_COST_INTER_BETA 9.0e-10
#define XCCL_MODEL_MARGIN 0.3
#define XCCL_RING_SEGMENT ((size_t) 256 * 1024)

/* Auto selection among n predicted times t[i] (negative: the algorithm
 * does not apply): the cheapest, except that algorithm 0, the measured
 * default, stays unless the cheapest beats it by the fraction margin.
 * Returns the index, or -1 if none applies. */
int xccl_pick(const double *t, int n, double margin);

/* ------------------------------------------------------------------------ */
/* Tuning file                                                              */
/* ------------------------------------------------------------------------ */

/* One rule per line, the first rule that matches a call wins:
 *
 *     # comment
 *     <collective> ranks=<lo>-<hi> bytes=<lo>-<hi> algo=<name>
 *
 * ranks: lo <= communicator size <= hi; bytes: lo <= bytes < hi; either
 * bound may be "*" (unbounded), a range may be "*" alone; sizes take K, M,
 * G suffixes (powers of 1024).  <name> is an algorithm of the collective,
 * or "fallback" (hand the call to Open MPI's module) or "auto" (cost model).
 * bytes counts as in the verbose line (allgather: total received). */
typedef struct {
    char coll[32];
    char algo[32];
    long min_ranks, max_ranks;         /* -1: unbounded */
    unsigned long long min_bytes, max_bytes;   /* max 0: unbounded */
    int line;
} xccl_tuning_rule_t;

typedef struct {
    xccl_tuning_rule_t *rules;
    size_t n;
} xccl_tuning_t;

/* Parses text (NUL-terminated).  0, or -1 with err describing the first bad
 * line ("line 3: ..."); *t is empty then. */
int xccl_tuning_parse(const char *text, xccl_tuning_t *t, char *err, size_t errlen);
/* The rule for this call, or NULL. */
const xccl_tuning_rule_t *xccl_tuning_lookup(const xccl_tuning_t *t, const char *coll, int ranks,
                                             unsigned long long bytes);
void xccl_tuning_free(xccl_tuning_t *t);

/* ------------------------------------------------------------------------ */
/* Transport interface and executor                                         */
/* ------------------------------------------------------------------------ */

/* A message is named by (sequence number of the collective call, index of
 * the message between the pair); the transport adds what it needs (its
 * communicator, the source) to make the wire tag unique. */
typedef struct {
    void *ctx;
    /* Post a transfer.  *req is set to NULL if it completed at once.
     * Return 0 or a negative error. */
    int (*isend)(void *ctx, int peer, const void *buf, size_t len,
                 uint32_t seq, uint32_t idx, void **req);
    int (*irecv)(void *ctx, int peer, void *buf, size_t len,
                 uint32_t seq, uint32_t idx, void **req);
    /* 1: complete (req released), 0: pending, <0: error (req released). */
    int (*test)(void *ctx, void *req);
    /* Make progress on outstanding transfers. */
    void (*progress)(void *ctx);
    /* Abandon a pending request (after an error elsewhere) and release it. */
    void (*cancel)(void *ctx, void *req);
} xccl_transport_t;

/* dst = a op b over count elements; 0 or a negative error. */
typedef int (*xccl_reduce_cb_t)(void *cbctx, void *dst, const void *a, const void *b, size_t count);
/* dst = src over len bytes (dst != src; the ranges may overlap); 0 or a
 * negative error. */
typedef int (*xccl_copy_cb_t)(void *cbctx, void *dst, const void *src, size_t len);
/* The executor's host copy (memmove semantics): memmove, except where the
 * destination is 1..63 bytes past the source modulo 4 KiB, in which case
 * glibc's `rep movsb` runs several times slower and the copy is made in
 * pieces instead (exec.c).  For copy callbacks that copy on the host. */
void xccl_memmove(void *dst, const void *src, size_t len);

#define XCCL_EXEC_INLINE_REQS 16

/* Optional hooks around the steps, for buffers whose contents arrive and
 * leave asynchronously (device memory staged through host copies, see
 * xccl_stage_plan), or whose local actions complete asynchronously (copies
 * and reductions queued on a device stream, xccl_exec_set_copy: the gate
 * then holds a step back until what earlier steps queued has run).  All
 * three may be NULL. */
typedef struct {
    void *ctx;
    /* Before step i is posted: 1 it may run (what it reads or writes is in
     * place), 0 ask again later, <0 error. */
    int (*step_ready)(void *ctx, size_t step);
    /* Step i is complete (transfers and local actions): 0 or <0. */
    int (*step_done)(void *ctx, size_t step);
    /* After the last step: 1 what the hooks started is finished, 0 ask
     * again later, <0 error.  The execution is done only then. */
    int (*drain)(void *ctx);
} xccl_gate_t;

/* Peer access: what a schedule needs to name other ranks' buffers and to
 * post and wait for flags (DESIGN 3a).  The component hands it CUDA IPC
 * mappings or the node's shared segment; the simulator, the other virtual
 * ranks' buffers and in-memory flags.  Flags live with the peers' buffers
 * rather than in xccl_transport_t: they are words in memory the peers
 * share (posting one is a store, not a message), which UCX or the PML
 * transport cannot offer; a schedule that uses them runs only where the
 * peers' memory is reachable anyway. */
typedef struct {
    void *ctx;
    /* Buffer id of group rank peer (never this rank), as this process
     * reaches it; NULL: not available (the execution fails). */
    void *(*buf)(void *ctx, int peer, xccl_buf_id_t id);
    /* This rank's flag becomes (seq, val): 0 or <0.  Called in order with
     * the copy callback (xccl_exec_set_copy): a provider whose copies
     * complete asynchronously orders the post after them. */
    int (*post)(void *ctx, uint32_t seq, uint32_t val);
    /* 1: peer's flag has reached (seq, val), i.e. the same call and at
     * least val, or a later call; 0: not yet; <0 error. */
    int (*test)(void *ctx, int peer, uint32_t seq, uint32_t val);
    /* Optional (NULL: none): copy len bytes at offset off of buffer id of
     * group rank peer into dst, this rank's memory, for a peer buffer
     * that buf() cannot map: cross-memory attach (process_vm_readv), a
     * single copy.  Used by COPY actions only (a reduction needs its
     * operands mapped).  0 or <0. */
    int (*read)(void *ctx, int peer, xccl_buf_id_t id, size_t off, void *dst, size_t len);
} xccl_peer_t;

typedef struct {
    const xccl_sched_t *s;
    const xccl_transport_t *tr;
    void *bufs[XCCL_NBUF];
    xccl_reduce_cb_t reduce;
    void *reduce_ctx;
    uint32_t seq;
    size_t step;
    int posted;                /* transfers of the current step are posted */
    int status;                /* 0 running, 1 done, <0 error */
    void **reqs;
    size_t nreqs;
    void *inline_reqs[XCCL_EXEC_INLINE_REQS];
    const xccl_gate_t *gate;   /* NULL: none */
    xccl_copy_cb_t copy;       /* NULL: memmove */
    void *copy_ctx;
    const xccl_peer_t *peer;   /* NULL: a schedule with peer access fails */
    size_t wait_at;            /* first action of the step whose flag wait may not be met */
} xccl_exec_t;

/* bufs[XCCL_BUF_SCRATCH] must hold s->scratch_bytes and bufs[XCCL_BUF_SLOT]
 * (this rank's slot, NULL when s->slot_bytes is 0) s->slot_bytes; a
 * schedule that uses a slot without one fails at its first progress call,
 * before it runs anything.  The schedule and the buffers must outlive the
 * execution.  Returns 0 or -1. */
int xccl_exec_init(xccl_exec_t *e, const xccl_sched_t *s, const xccl_transport_t *tr,
                   void *const bufs[XCCL_NBUF], xccl_reduce_cb_t reduce, void *reduce_ctx,
                   uint32_t seq);
/* Attach a gate (before the first progress call); it must outlive the
 * execution. */
static inline void xccl_exec_set_gate(xccl_exec_t *e, const xccl_gate_t *g)
{
    e->gate = g;
}
/* Run the schedule's local copies through copy (before the first progress
 * call), e.g. on a device stream; NULL: memmove. */
static inline void xccl_exec_set_copy(xccl_exec_t *e, xccl_copy_cb_t copy, void *ctx)
{
    e->copy = copy;
    e->copy_ctx = ctx;
}
/* Give the execution peer access (before the first progress call); it
 * must outlive the execution.  Without it (or without all three of its
 * functions) a schedule with peer_access fails at its first progress call
 * before it runs anything. */
static inline void xccl_exec_set_peer(xccl_exec_t *e, const xccl_peer_t *p)
{
    e->peer = p;
}
/* Advance as far as possible without blocking: 1 done, 0 pending, <0 error. */
int xccl_exec_progress(xccl_exec_t *e);
/* Releases the executor; requests still pending (after an error) are
 * cancelled through the transport. */
void xccl_exec_fini(xccl_exec_t *e);

/* ------------------------------------------------------------------------ */
/* Staging plan: copies in and out that overlap a schedule                  */
/* ------------------------------------------------------------------------ */

/* A schedule runs on host copies of device buffers (regions).  Instead of
 * copying a region whole before the schedule and whole after it, the plan
 * cuts each region into pieces and says
 *   - in which order to copy pieces in: the order the schedule first
 *     touches (reads or writes) them; a piece never touched is not copied;
 *   - how many of those copies must have arrived before step i runs
 *     (need_in[i], non-decreasing);
 *   - which pieces to copy out once step i is complete: those whose last
 *     write is step i; a piece never written is not copied out (the device
 *     copy is already right: the schedule did not change it).
 * Pieces are whole multiples of the piece size (the last one of a region
 * shorter); pieces that are adjacent and need the same moment are merged
 * into one copy. */
typedef struct {
    const void *base;          /* host copy */
    size_t len;
    int copy_in;               /* the schedule may read what the device holds */
    int copy_out;              /* what the schedule writes goes back */
} xccl_stage_region_t;

typedef struct {
    uint32_t region;
    size_t off, len;           /* bytes, in the region */
} xccl_stage_piece_t;

typedef struct {
    size_t piece;              /* piece size used */
    xccl_stage_piece_t *in;    /* copies in, in order */
    size_t nin;
    size_t *need_in;           /* [nsteps of the schedule] */
    xccl_stage_piece_t *out;   /* after step i: out[out_start[i] .. out_start[i+1]) */
    size_t nout;
    size_t *out_start;         /* [nsteps + 1] */
} xccl_stage_plan_t;

/* Plans the copies of s run on bufs (addresses map actions to regions;
 * memory outside every region, such as scratch, is ignored).  piece: bytes
 * per piece, raised so that no region has more than max_pieces (0: no
 * bound).  0, or -1 out of memory (*p is empty then). */
int xccl_stage_plan(xccl_stage_plan_t *p, const xccl_sched_t *s, void *const bufs[XCCL_NBUF],
                    const xccl_stage_region_t *regions, int nregions, size_t piece,
                    size_t max_pieces);
void xccl_stage_plan_fini(xccl_stage_plan_t *p);

/* ------------------------------------------------------------------------ */
/* Simulated transport: N virtual ranks in one process                      */
/* ------------------------------------------------------------------------ */

typedef struct xccl_sim xccl_sim_t;

xccl_sim_t *xccl_sim_create(int nranks);
void xccl_sim_destroy(xccl_sim_t *sim);
const xccl_transport_t *xccl_sim_transport(xccl_sim_t *sim, int rank);
/* Drive execs[0..n) (rank i's executor is execs[i]) until all are done.
 * Transfers complete only when matched (no buffering), in an order varied by
 * seed.  Returns 0, or -1 on deadlock, mismatch (same name, different
 * length) or a message left unmatched; sim_error() says which. */
int xccl_sim_run(xccl_sim_t *sim, xccl_exec_t *execs, int n, unsigned seed);
const char *xccl_sim_error(const xccl_sim_t *sim);
/* Peer access among the virtual ranks (xccl_exec_set_peer): a peer's
 * buffers are its executor's, flags are in memory.  A rank's buffers may
 * be touched by others only while it takes part in the call: after
 * xccl_sim_run first progressed it and before it finished; a touch
 * outside that window fails the run.  Each round of xccl_sim_run
 * progresses the ranks in a new random order, each as far as it can go
 * (past every flag already posted), so a schedule that reads a buffer
 * before its owner wrote it, or overwrites one a peer still has to read,
 * gets the wrong data under some seeds (missing synchronisation shows as
 * a data error; tests run several seeds). */
const xccl_peer_t *xccl_sim_peer(xccl_sim_t *sim, int rank);
/* From now on the peers' SEND, RECV and SCRATCH are only copied from
 * (read(), as process_vm_readv: XCCL_PEER_READ), never mapped (buf() gives
 * NULL, so a reduction that names one fails the run); slots stay mapped. */
void xccl_sim_peer_read_only(xccl_sim_t *sim, int on);

/* ------------------------------------------------------------------------ */
/* Hierarchy: node layout, composition, two-level algorithms (issue 4)      */
/* ------------------------------------------------------------------------ */

/* How the ranks of a communicator sit on nodes.  Nodes are numbered in the
 * order of their lowest rank; inside a node ranks keep communicator order
 * (they need not be contiguous: --map-by node) unless reordered with
 * xccl_layout_set_order.  The local rank of r is its index inside its node;
 * rail j is the ranks of local rank j, one per node that has more than j
 * ranks, in node order; the leader of a node is its local rank 0. */
typedef struct {
    int size;                  /* ranks */
    int nnodes;
    int *node_of;              /* [size] node of each rank, 0..nnodes-1 */
    int *local_rank;           /* [size] index of each rank inside its node */
    int *node_first;           /* [nnodes+1] node n is members[node_first[n] .. node_first[n+1]) */
    int *members;              /* [size] ranks grouped by node, in local rank order */
    int min_ppn, max_ppn;      /* fewest and most ranks on one node */
} xccl_layout_t;

/* node_id[r]: any non-negative identifier of rank r's node (equal ids, same
 * node).  0, or -1 (bad argument, out of memory). */
int xccl_layout_init(xccl_layout_t *l, int size, const int *node_id);
/* A synthetic layout: "block:K" (ranks [iK, iK+K) form node i, the last node
 * may be smaller), "cyclic:N" (rank r on node r % N) or an explicit list of
 * node ids, one per rank ("0,0,1,1,2").  size <= 0 takes the list's length
 * (block and cyclic need size > 0).  0, or -1 with err saying why. */
int xccl_layout_parse(xccl_layout_t *l, const char *spec, int size, char *err, size_t errlen);
void xccl_layout_fini(xccl_layout_t *l);
/* Reorders the members of node, e.g. to follow the wiring (the ring order
 * inside a node): order is a permutation of its ranks; local ranks, leader
 * and rails follow the new order.  0, or -1 if order is not a permutation. */
int xccl_layout_set_order(xccl_layout_t *l, int node, const int *order);
/* Rail j: writes its ranks (node order) to out[0..nnodes) and returns how
 * many there are (0 if no node has more than j ranks). */
int xccl_layout_rail(const xccl_layout_t *l, int j, int *out);

static inline int xccl_layout_node_size(const xccl_layout_t *l, int node)
{
    return l->node_first[node + 1] - l->node_first[node];
}

static inline const int *xccl_layout_node_members(const xccl_layout_t *l, int node)
{
    return l->members + l->node_first[node];
}

/* The rank at local index j of node, or -1 if the node is smaller. */
static inline int xccl_layout_rank_at(const xccl_layout_t *l, int node, int j)
{
    return j >= 0 && j < xccl_layout_node_size(l, node) ? l->members[l->node_first[node] + j] : -1;
}

static inline int xccl_layout_leader(const xccl_layout_t *l, int node)
{
    return l->members[l->node_first[node]];
}

/* Every node has the same number of ranks. */
static inline int xccl_layout_is_regular(const xccl_layout_t *l)
{
    return l->min_ppn == l->max_ppn;
}

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

/* Flat builders as values, so that a two-level builder takes the algorithm
 * of each stage as a parameter (the cost model chooses). */
typedef int (*xccl_allreduce_build_fn)(xccl_sched_t *s, size_t count);
typedef int (*xccl_reduce_scatter_build_fn)(xccl_sched_t *s, const size_t *counts, int in_place);
typedef int (*xccl_alltoall_build_fn)(xccl_sched_t *s, size_t block, int in_place);
typedef int (*xccl_bcast_build_fn)(xccl_sched_t *s, size_t bytes, int root);
/* allgatherv: rank i contributes bytes[i], placed at RECV + displs[i]; SEND
 * holds bytes[rank], or in_place: the block is already at RECV + displs[rank]. */
typedef int (*xccl_allgatherv_build_fn)(xccl_sched_t *s, const size_t *bytes, const size_t *displs,
                                        int in_place);

/* alltoallv: rank r sends sbytes[q] from SEND + sdispls[q] to q and
 * receives rbytes[q] at RECV + rdispls[q] from q; SEND and RECV do not
 * overlap.  pair(pair_ctx, src, dst) is the number of bytes src sends to
 * dst, for every pair of the group: algorithms that forward other ranks'
 * blocks need it to size their messages; the others take NULL.
 * "pairwise" (p-1 rounds), "direct" (one round) and "bruck" (ceil(lg p)
 * rounds, blocks forwarded through scratch; needs pair). */
typedef size_t (*xccl_pair_bytes_fn)(const void *ctx, int src, int dst);
typedef int (*xccl_alltoallv_build_fn)(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                       const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                                       const void *pair_ctx);
int xccl_build_alltoallv_pairwise(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                  const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                                  const void *pair_ctx);
int xccl_build_alltoallv_direct(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                                const void *pair_ctx);
int xccl_build_alltoallv_bruck(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                               const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                               const void *pair_ctx);

/* Flat allgatherv: "ring" (p-1 rounds), "direct" (one round, every pair
 * at once: for a node's switch or full mesh) and "bruck" (ceil(lg p)
 * rounds through scratch: many ranks, small blocks). */
int xccl_build_allgatherv_ring(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);
int xccl_build_allgatherv_direct(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);
int xccl_build_allgatherv_bruck(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);

/* Two-level builders (s->algo "hier").  s is initialised for (rank, size of
 * the communicator); l describes the same size.  Same buffer conventions as
 * the flat builders.  Return 0, -1 (out of memory, bad argument, a stage
 * failed) or XCCL_NOT_APPLICABLE: this layout needs a flat algorithm; s is
 * untouched then.  Reductions: every element is reduced in one place, in one
 * order, then copied, so every rank gets the same bits. */
#define XCCL_NOT_APPLICABLE 1

/* intra-node reduce-scatter of L = min ppn slices (local ranks >= L get
 * none) -> allreduce of slice j on rail j, all rails at once -> intra-node
 * allgather of the slices.  Any layout.  Unlike the flat allreduce builders
 * it must be told in_place (SEND and RECV are the same memory). */
int xccl_build_hier_allreduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int in_place,
                              xccl_reduce_scatter_build_fn intra_rs, xccl_allreduce_build_fn inter_ar,
                              xccl_allgatherv_build_fn intra_ag);
/* Blocks in communicator order (counts per rank, irregular).  Destination
 * ranks are grouped by local rank mod L (L = min ppn): intra-node
 * reduce-scatter of the groups -> reduce-scatter on rail j of group j's
 * blocks, per node -> on uneven nodes, rail ranks pass the blocks of the
 * ranks of local index >= L on.  Any layout. */
int xccl_build_hier_reduce_scatter(xccl_sched_t *s, const xccl_layout_t *l, const size_t *counts,
                                   int in_place, xccl_reduce_scatter_build_fn intra,
                                   xccl_reduce_scatter_build_fn inter);
/* Any layout, allgatherv on the rails and inside nodes.  Destination ranks
 * are grouped by local rank mod L (L = min ppn), local rank j < L carries
 * group j: on uneven nodes local ranks j+L, j+2L, ... first hand their block
 * to j -> allgatherv of group j on rail j -> intra-node allgatherv of the
 * groups -> blocks to communicator order. */
int xccl_build_hier_allgather_any(xccl_sched_t *s, const xccl_layout_t *l, size_t block,
                                  xccl_allgatherv_build_fn inter, xccl_allgatherv_build_fn intra);
/* intra-node alltoall regrouping by destination local rank -> alltoall on
 * each rail of everything for one destination node -> blocks to
 * communicator order.  Regular layouts only (else XCCL_NOT_APPLICABLE: use
 * xccl_build_hier_alltoall_any or a flat one).  The catalog prefers it on
 * regular layouts: with block placement the rail stage writes straight
 * into RECV, where the _any builder always copies the result once more,
 * and its stages are fixed-block alltoalls (flat Bruck needs no sizes). */
int xccl_build_hier_alltoall(xccl_sched_t *s, const xccl_layout_t *l, size_t block, int in_place,
                             xccl_alltoall_build_fn intra, xccl_alltoall_build_fn inter);
/* Any layout, alltoallv stages.  Destination ranks are grouped by local
 * rank mod L (L = min ppn), local rank j < L carries group j: intra-node
 * alltoallv of each rank's blocks for group j to local rank j -> alltoallv
 * on rail j, one message per node pair -> local rank j hands the ranks
 * j+L, j+2L, ... of its node their blocks (uneven nodes only). */
int xccl_build_hier_alltoall_any(xccl_sched_t *s, const xccl_layout_t *l, size_t block, int in_place,
                                 xccl_alltoallv_build_fn intra, xccl_alltoallv_build_fn inter);
/* root -> one rank per node (the root's rail, or the leader of a node too
 * small for it) -> inside each node.  Any layout. */
int xccl_build_hier_bcast(xccl_sched_t *s, const xccl_layout_t *l, size_t bytes, int root,
                          xccl_bcast_build_fn inter, xccl_bcast_build_fn intra);
/* Rail-parallel, for large messages: the root scatters L = min ppn pieces
 * inside its node -> piece j broadcast on rail j -> intra-node allgather of
 * the pieces.  Any layout. */
int xccl_build_hier_bcast_rails(xccl_sched_t *s, const xccl_layout_t *l, size_t bytes, int root,
                                xccl_bcast_build_fn inter, xccl_allgatherv_build_fn intra);

/* Cost with a link class per peer: a transfer between ranks of one node
 * costs intra's alpha and beta, between nodes inter's.  Per step the two
 * classes overlap (different links): max(intra time, inter time), each
 * alpha * max(sends, receives) + beta * max(bytes sent, received), then
 * intra's gamma and delta for local work.  Empty rounds cost the mean
 * alpha of the transfer steps.  With every peer on one node, or intra ==
 * inter and one class per step, this is xccl_sched_cost. */
double xccl_sched_cost_hier(const xccl_sched_t *s, const xccl_layout_t *l,
                            const xccl_cost_model_t *intra, const xccl_cost_model_t *inter);

/* Predicted time of a collective on layout l: the largest
 * xccl_sched_cost_hier over the schedules that build makes for the ranks
 * in ranks[0..n) (xccl_sched_init'ed with the rank, l->size, elem_size).
 * n = 0: every rank up to 64 ranks, else a fixed sample (first, middle and
 * last ranks, the first and last member of the first and last node).  The
 * answer depends only on the arguments, so ranks that choose an algorithm
 * from it choose the same.  Negative if a build fails or returns
 * XCCL_NOT_APPLICABLE. */
typedef int (*xccl_rank_build_fn)(xccl_sched_t *s, void *arg);
double xccl_predict_hier(const xccl_layout_t *l, size_t elem_size, xccl_rank_build_fn build, void *arg,
                         const int *ranks, int n, const xccl_cost_model_t *intra,
                         const xccl_cost_model_t *inter);

/* ------------------------------------------------------------------------ */
/* Catalog: the algorithms of each collective by name                       */
/* ------------------------------------------------------------------------ */

/* How a rank reaches its peers' buffers (xccl_coll_args_t.peer_access). */
enum { XCCL_PEER_NONE, XCCL_PEER_MAPPED, XCCL_PEER_READ };

/* What a builder needs; each collective reads its own fields. */
typedef struct {
    size_t count;                  /* allreduce: elements */
    const size_t *counts;          /* reduce_scatter(_block): elements per rank */
    size_t block;                  /* allgather, alltoall: bytes per rank */
    size_t bytes;                  /* bcast */
    int in_place, root;
    const xccl_layout_t *layout;   /* nodes of the ranks; NULL: no hierarchy */
    size_t segment;                /* ring allreduce pipelining segment, 0: none */
    int peer_access;               /* every rank reaches the others' buffers and flags
                                    * (xccl_peer_t): XCCL_PEER_MAPPED (reads them in place),
                                    * XCCL_PEER_READ (copies from them: process_vm_readv);
                                    * 0: the "mesh" algorithms do not apply */
    size_t shm_slot;               /* bytes of each rank's slot of its node's shared segment
                                    * (s->slot_cap); 0: none: the "shm" algorithms do not
                                    * apply and the two-level ones keep their intra-node
                                    * stages on the transport; else their intra-node
                                    * stages are the shm builders */
    int trial;                     /* selection only, no builder reads it: this call may
                                    * be one of a level trial's (blocking, peer_access,
                                    * at least 16 KiB: xccl_trial_t), XCCL_TRIAL_QUIET
                                    * or _NOISY; 0 (XCCL_TRIAL_OFF): not */
} xccl_coll_args_t;

typedef int (*xccl_coll_build_t)(xccl_sched_t *s, const xccl_coll_args_t *a);

typedef struct {
    const char *name;              /* as forced, in tuning files, after algo= */
    xccl_coll_build_t build;       /* 0, -1, or XCCL_NOT_APPLICABLE (hier on a flat layout,
                                    * mesh without peer access or on several nodes) */
} xccl_algo_t;

#define XCCL_CATALOG_MAX 9

/* The algorithms of c, its measured default first; *n of them. */
const xccl_algo_t *xccl_coll_algos(xccl_coll_t c, int *n);

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
typedef enum { XCCL_LEVEL_SHM_SMALL, XCCL_LEVEL_SHM, XCCL_LEVEL_NALGOS } xccl_level_algo_t;
int xccl_select_level_index(xccl_coll_t c, xccl_level_algo_t which);

/* Everything a choice depends on; the same on every rank of a job (the
 * component's parameters are registered for all ranks alike), so every
 * rank chooses alike. */
typedef struct {
    int forced[XCCL_NCOLL];            /* XCCL_SEL_AUTO, _FALLBACK or an algorithm */
    xccl_tuning_t tuning;              /* rules before the cost model */
    int small_bytes;                   /* auto: the fallback below this many bytes */
    xccl_cost_model_t intra, inter;    /* inside a node, between nodes */
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
extern const char xccl_select_why_forced[], xccl_select_why_tuning[], xccl_select_why_small[];

/* Whether a call goes to the fallback, from what every rank shares: the
 * reason ("forced", "tuning_file", "small_message"), or NULL.  keep_small:
 * the fallback would compute this call wrongly, so a small message stays.
 * Every call asks it, most go to the fallback: inline, no schedule, no
 * cost model, the rules read only when there are some. */
static inline const char *xccl_select_fallback(const xccl_select_policy_t *p, xccl_coll_t c,
                                               int ranks, size_t bytes, int keep_small)
{
    const int forced = p->forced[c];
    if (XCCL_SEL_FALLBACK == forced) {
        return xccl_select_why_forced;
    }
    if (XCCL_SEL_AUTO != forced) {
        return NULL;
    }
    const int tuned = p->tuning.n ? xccl_select_tuned(p, c, ranks, bytes) : XCCL_SEL_AUTO;
    if (XCCL_SEL_FALLBACK == tuned) {
        return xccl_select_why_tuning;
    }
    /* The cost model does not model the fallback: below this size (its
     * default measured with xccl_bench) the fallback's latency is lower. */
    return XCCL_SEL_AUTO == tuned && bytes < (size_t) p->small_bytes && !keep_small
               ? xccl_select_why_small : NULL;
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
 * the machine, not on the call: measured at np 2, mesh took 0.55-0.8x
 * shm's time from 64 KiB to 16 MiB on one Intel Xeon VM, 1.2-2.2x on an
 * AMD EPYC VM (docs/shm-level.md).  So where both apply (a blocking call
 * of at least 16 KiB, every peer readable: a->trial; the component runs
 * shm's smaller calls through its latency path), the first calls
 * of each collective and size class run both in turn and time them:
 *   calls 0 .. w-1    shm, mesh, shm, ...: untimed (schedules built,
 *                     pages touched; a process's first calls measured
 *                     2-5x slower than its later ones, either candidate);
 *   then blocks of XCCL_TRIAL_BLOCK calls, shm's, mesh's, shm's, ...,
 *                     each block's first call untimed, until each
 *                     candidate has n timed calls;
 *   w = 4 and n = the policy's trials; from XCCL_TRIAL_LARGE bytes, where
 *   a call lasts long enough to time well and a trial call of the slower
 *   candidate costs most, w = 2 and n at most 3; n rounded up to whole
 *   blocks.  Blocks, because a call that follows one of the same schedule
 *   runs as in a program's loop (shm's bcast root, for one, writes ahead
 *   into the slots while its peers still read): timed right after the
 *   other candidate, np 4 on 2 cores picked shm for alltoall at 256 KiB-16
 *   MiB and mesh for bcast at 1-16 MiB, both 1.2-1.8x slower in loops;
 *   in blocks of 3 the picks agreed with the loops' timings;
 * then each rank takes the median of each candidate, the ranks agree on
 * the slowest rank's medians (an allreduce MAX of integers, the same bits
 * everywhere: the caller's) and the faster candidate is the class's pick
 * from then on; a tie goes to shm.  Every rank makes the same calls in the
 * same order, so trials and picks are the same calls on every rank. */
#define XCCL_TRIAL_MAX 16              /* timed calls of each candidate, at most */
#define XCCL_TRIAL_BLOCK 3             /* calls of one candidate in a row: the first untimed */
#define XCCL_TRIAL_LARGE ((size_t) 1 << 20)
/* How a call's times read (a->trial), the same on every rank (voted):
 *   QUIET  every rank has a core of its own: as above;
 *   NOISY  a rank yields when idle (more ranks than cores): a call's time
 *          depends on the scheduler as much as on the algorithm, so
 *          2n+1 timed calls of each (from XCCL_TRIAL_LARGE at most
 *          XCCL_TRIAL_NOISY_LARGE).  Measured at np 4 on 2 cores (Intel
 *          Xeon VM, forced, ratio to tuned, shm / mesh): alltoall 256
 *          KiB-4 MiB 1.28-1.32 / 0.83-0.91, bcast 0.41-0.89 / 0.77-1.03,
 *          allgather within 0.1 of each other from 256 KiB; five timed
 *          calls picked either way there.  The lower median wins, as in
 *          QUIET: a margin the mesh had to beat (1/8 of its time, until
 *          this was measured) kept shm for alltoall at 16-64 MiB, where
 *          the mesh was faster by 9 % in the trial and 8-20 % in loops
 *          (three interleaved runs, np 4: 1.04-1.23 of tuned with the
 *          margin, 0.94-1.04 without; bcast, allgather, allreduce and
 *          reduce_scatter the same either way). */
enum { XCCL_TRIAL_OFF, XCCL_TRIAL_QUIET, XCCL_TRIAL_NOISY };
#define XCCL_TRIAL_NOISY_LARGE 5
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
    int noisy;                         /* XCCL_TRIAL_NOISY: longer */
    int cand[2];                       /* shm, mesh (algorithm indices) */
    int pick;                          /* the agreed one; 0 while trials run */
    uint32_t ns[2][XCCL_TRIAL_MAX];    /* this rank's times of each candidate */
} xccl_trial_t;

/* The candidate the next trial call runs. */
static inline int xccl_trial_next(const xccl_trial_t *t)
{
    const int i = t->calls - t->warm;
    return t->cand[i < 0 ? t->calls & 1 : (i / XCCL_TRIAL_BLOCK) & 1];
}
/* Records that the trial call just made (xccl_trial_next's) took ns on this
 * rank: 1 if it was the last (agree, then xccl_trial_decide), else 0. */
int xccl_trial_record(xccl_trial_t *t, uint64_t ns);
/* This rank's median time of each candidate, after the last call. */
void xccl_trial_medians(const xccl_trial_t *t, uint64_t med[2]);
/* The pick from the slowest rank's medians (the same on every rank). */
int xccl_trial_decide(xccl_trial_t *t, const uint64_t slowest[2]);

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
typedef enum { XCCL_BY_FORCE, XCCL_BY_TUNING, XCCL_BY_MODEL, XCCL_BY_LEVEL, XCCL_BY_TRIAL } xccl_select_by_t;

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
