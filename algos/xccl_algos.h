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

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Element types and reduction operations                                   */
/* ------------------------------------------------------------------------ */

typedef enum {
    XCCL_DT_INT8, XCCL_DT_UINT8, XCCL_DT_INT16, XCCL_DT_UINT16,
    XCCL_DT_INT32, XCCL_DT_UINT32, XCCL_DT_INT64, XCCL_DT_UINT64,
    XCCL_DT_FLOAT, XCCL_DT_DOUBLE, XCCL_DT_LONG_DOUBLE,
    XCCL_DT_FLOAT_COMPLEX, XCCL_DT_DOUBLE_COMPLEX, XCCL_DT_LONG_DOUBLE_COMPLEX,
    XCCL_DT_BOOL,              /* C _Bool, 1 byte */
    XCCL_DT_BYTE,              /* opaque byte: bitwise ops only */
    /* value/index pairs for MINLOC/MAXLOC, laid out as the C structs */
    XCCL_DT_FLOAT_INT,         /* struct { float v; int i; } */
    XCCL_DT_DOUBLE_INT,        /* struct { double v; int i; } */
    XCCL_DT_LONG_INT,          /* struct { long v; int i; } */
    XCCL_DT_2INT,              /* struct { int v; int i; } */
    XCCL_DT_SHORT_INT,         /* struct { short v; int i; } */
    XCCL_DT_LONG_DOUBLE_INT,   /* struct { long double v; int i; } */
    XCCL_DT_2FLOAT,            /* struct { float v; float i; }   (MPI_2REAL) */
    XCCL_DT_2DOUBLE,           /* struct { double v; double i; } (MPI_2DOUBLE_PRECISION) */
    XCCL_DT_COUNT
} xccl_dtype_t;

typedef enum {
    XCCL_OP_SUM, XCCL_OP_PROD, XCCL_OP_MAX, XCCL_OP_MIN,
    XCCL_OP_LAND, XCCL_OP_LOR, XCCL_OP_LXOR,
    XCCL_OP_BAND, XCCL_OP_BOR, XCCL_OP_BXOR,
    XCCL_OP_MAXLOC, XCCL_OP_MINLOC,
    XCCL_OP_COUNT
} xccl_op_t;

/* out[i] = a[i] op b[i] for i < count.  out may be exactly a or exactly b;
 * otherwise the three ranges do not overlap.  MAXLOC/MINLOC keep the lower
 * index on ties (MPI semantics). */
typedef void (*xccl_reduce_fn_t)(void *out, const void *a, const void *b, size_t count);

/* The kernel for (dtype, op), or NULL where the pair is not defined. */
xccl_reduce_fn_t xccl_reduce_kernel(xccl_dtype_t dtype, xccl_op_t op);
size_t xccl_dtype_size(xccl_dtype_t dtype);
const char *xccl_dtype_name(xccl_dtype_t dtype);
const char *xccl_op_name(xccl_op_t op);

/* ------------------------------------------------------------------------ */
/* Schedules                                                                */
/* ------------------------------------------------------------------------ */

typedef enum { XCCL_BUF_SEND = 0, XCCL_BUF_RECV = 1, XCCL_BUF_SCRATCH = 2, XCCL_NBUF } xccl_buf_id_t;

typedef enum { XCCL_ACT_SEND, XCCL_ACT_RECV, XCCL_ACT_COPY, XCCL_ACT_REDUCE } xccl_act_kind_t;

typedef struct {
    uint8_t buf;               /* xccl_buf_id_t */
    size_t off;                /* bytes */
} xccl_ref_t;

typedef struct {
    uint8_t kind;              /* xccl_act_kind_t */
    int32_t peer;              /* SEND/RECV: rank in the group */
    uint32_t idx;              /* SEND/RECV: index of this message between the pair, in order */
    size_t len;                /* bytes */
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
/* Number the messages of each peer pair and compute max_xfers.
 * Returns 0, or -1 if building failed. */
int xccl_sched_finalize(xccl_sched_t *s);

static inline xccl_ref_t xccl_ref(xccl_buf_id_t buf, size_t off)
{
    xccl_ref_t r = { (uint8_t) buf, off };
    return r;
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

/* ------------------------------------------------------------------------ */
/* Cost model                                                               */
/* ------------------------------------------------------------------------ */

/* alpha-beta-gamma parameters of one link level. */
typedef struct {
    double alpha;              /* seconds per message (latency, per message a rank posts) */
    double beta;               /* seconds per byte on the wire */
    double gamma;              /* seconds per byte reduced */
    double delta;              /* seconds per byte copied locally */
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
 * max over a few ranks otherwise (e.g. the root and a leaf of a tree). */
double xccl_sched_cost(const xccl_sched_t *s, const xccl_cost_model_t *m);

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

#define XCCL_EXEC_INLINE_REQS 16

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
} xccl_exec_t;

/* bufs[XCCL_BUF_SCRATCH] must hold s->scratch_bytes.  The schedule and the
 * buffers must outlive the execution.  Returns 0 or -1. */
int xccl_exec_init(xccl_exec_t *e, const xccl_sched_t *s, const xccl_transport_t *tr,
                   void *const bufs[XCCL_NBUF], xccl_reduce_cb_t reduce, void *reduce_ctx,
                   uint32_t seq);
/* Advance as far as possible without blocking: 1 done, 0 pending, <0 error. */
int xccl_exec_progress(xccl_exec_t *e);
/* Releases the executor; requests still pending (after an error) are
 * cancelled through the transport. */
void xccl_exec_fini(xccl_exec_t *e);

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

#ifdef __cplusplus
}
#endif

#endif
