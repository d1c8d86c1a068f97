/*
 * One intercepted call, described once, and what the glue files offer
 * each other to run it.  An entry point checks its arguments and fills a
 * call descriptor (coll_xccl_entry_*.c); mca_coll_xccl_call_run then takes
 * every call the same way:
 *
 *   decide (fallback or xccl: only from what every rank shares)
 *   -> device buffers (CUDA IPC peer access, else host copies)
 *   -> the fallback, or: buffers (packed copies) -> schedule (cached)
 *      -> execute (to completion, or as a request)
 */
#ifndef MCA_COLL_XCCL_CALL_H
#define MCA_COLL_XCCL_CALL_H

#include "opal/runtime/opal_progress.h"

#include "coll_xccl.h"

BEGIN_C_DECLS

/* ------------------------------------------------------------ reductions */

/* How a reduction runs on the host (coll_xccl_dtype.c). */
typedef struct {
    xccl_reduce_fn_t kernel;         /* predefined op on a predefined type */
    int xdt, xop;                    /* its xccl_dtype_t and xccl_op_t (-1: a user op) */
    int gaps;                        /* a user op on a datatype with gaps (layout copies) */
    struct ompi_op_t *op;            /* otherwise a commutative user op */
    struct ompi_datatype_t *dtype;
} mca_coll_xccl_reduce_t;

/* ------------------------------------------------------------ the call */

typedef struct mca_coll_xccl_call {
    mca_coll_xccl_module_t *m;
    xccl_coll_t coll;
    ompi_request_t **request;        /* nonblocking: where its request goes; NULL blocking */
    /* the user's arguments, as the fallback takes them (reductions and
     * bcast: one datatype, rdtype; count in rcount) */
    const void *sbuf;
    void *rbuf;
    int scount, rcount;
    const int *rcounts;              /* reduce_scatter */
    struct ompi_datatype_t *sdtype, *rdtype;
    struct ompi_op_t *op;
    int root;
    /* what the entry point derived */
    int in_place;
    int reduction;                   /* allreduce, reduce_scatter(_block) */
    size_t bytes;                    /* as in the verbose line */
    size_t sn, rn;                   /* elements of sdtype at sbuf (0: none), of rdtype at rbuf */
    size_t rout;                     /* elements of the result at rbuf (reductions) */
    int copy_r, copy_out;            /* device staging: RECV is read, RECV goes back */
    size_t total;                    /* reductions: elements reduced */
    size_t es;                       /* bytes per element of the schedule */
    xccl_coll_args_t args;           /* the builders' (layout set when it runs) */
    size_t *counts;                  /* args.counts, owned (reduce_scatter) */
    mca_coll_xccl_reduce_t red;      /* reductions, once planned (set by the run) */
} mca_coll_xccl_call_t;

/* What every entry point starts from; it sets the rest.  Field by field:
 * zeroing the whole descriptor (rep stos) was the largest single cost of
 * a call that goes to the fallback. */
static inline void mca_coll_xccl_call_init(mca_coll_xccl_call_t *c, mca_coll_xccl_module_t *m,
                                           xccl_coll_t coll, ompi_request_t **request,
                                           const void *sbuf, void *rbuf)
{
    c->m = m;
    c->coll = coll;
    c->request = request;
    c->sbuf = sbuf;
    c->rbuf = rbuf;
    c->scount = c->rcount = 0;
    c->rcounts = NULL;
    c->sdtype = c->rdtype = NULL;
    c->op = NULL;
    c->root = 0;
    c->in_place = MPI_IN_PLACE == sbuf;
    c->reduction = 0;
    c->bytes = c->sn = c->rn = c->rout = c->total = 0;
    c->copy_r = 0;
    c->copy_out = 1;
    c->es = 1;
    c->args = (xccl_coll_args_t) { .in_place = c->in_place };
    c->counts = NULL;
}

/* Runs the call an entry point described (coll_xccl_call.c): MPI_SUCCESS
 * or an MPI error code (logged).  Frees c->counts. */
int mca_coll_xccl_call_run(mca_coll_xccl_call_t *c);
/* An argument error of the call: logged, counted, returned. */
static inline int mca_coll_xccl_call_error(const mca_coll_xccl_call_t *c, int err, const char *what)
{
    return mca_coll_xccl_error(c->m, c->coll, err, what);
}

/* ------------------------------------------------------------ datatypes (coll_xccl_dtype.c) */

int mca_coll_xccl_check_dtype(struct ompi_datatype_t *dt);
/* NULL is an error where it would be dereferenced (count > 0, no MPI_BOTTOM). */
int mca_coll_xccl_check_buf(const void *buf, size_t count, struct ompi_datatype_t *dt);
int mca_coll_xccl_check_op(struct ompi_op_t *op, struct ompi_datatype_t *dt, const char *fn);
size_t mca_coll_xccl_dtype_size(struct ompi_datatype_t *dt);
size_t mca_coll_xccl_dtype_extent(struct ompi_datatype_t *dt);
ptrdiff_t mca_coll_xccl_true_lb(struct ompi_datatype_t *dt);
/* count elements laid out without gaps. */
int mca_coll_xccl_is_contiguous(struct ompi_datatype_t *dt, size_t count);
/* Predefined type and op as xccl's: 0, or -1 (not one xccl knows). */
int mca_coll_xccl_map_dtype(struct ompi_datatype_t *dt, xccl_dtype_t *out);
int mca_coll_xccl_map_op(struct ompi_op_t *op, xccl_op_t *out);
/* Reductions the stock Open MPI built against gets wrong (coll_xccl_compat.h). */
int mca_coll_xccl_stock_gets_wrong(struct ompi_datatype_t *dt, struct ompi_op_t *op);
/* How a reduction of count elements runs: fills r and *es, or returns the
 * fallback reason. */
const char *mca_coll_xccl_plan_reduction(struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                         size_t count, mca_coll_xccl_reduce_t *r, size_t *es);
/* The executor's reduction callback on the host (ctx: mca_coll_xccl_reduce_t). */
int mca_coll_xccl_reduce_cb(void *ctx, void *dst, const void *a, const void *b, size_t count);

/* ------------------------------------------------------------ packed copies (coll_xccl_pack.c) */

/* A rank's side of a call whose datatype has gaps: the schedule runs on
 * contiguous copies, packed before it starts and unpacked after it ends;
 * or, for a user op, on copies of the datatype's layout (layout). */
typedef struct {
    void *s, *r;                     /* the copies, or NULL */
    void *rbuf;                      /* where r goes back to, or NULL */
    size_t rcount, rbytes;
    struct ompi_datatype_t *rdt;
    int layout;                      /* r is in rdt's layout, not packed */
} mca_coll_xccl_packed_t;

struct mca_coll_xccl_gpu_stage;
/* The buffers the schedule of c runs on, from s and r (the user's, or host
 * copies of device buffers: stage, whose data is then copied in first
 * wherever packing reads it): *ws and *wr, copies in pk where the
 * datatypes have gaps.  MPI error codes (logged); pk is released then. */
int mca_coll_xccl_work_buffers(mca_coll_xccl_call_t *c, const void *s, void *r,
                               struct mca_coll_xccl_gpu_stage *stage, mca_coll_xccl_packed_t *pk,
                               char **ws, char **wr);
/* A nonblocking call keeps pk (its datatype retained). */
void mca_coll_xccl_packed_keep(mca_coll_xccl_packed_t *pk);
/* Unpacks what arrived (ok: the schedule succeeded), frees the copies;
 * kept: mca_coll_xccl_packed_keep was called. */
int mca_coll_xccl_packed_end(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                             mca_coll_xccl_packed_t *pk, int ok, int kept);
/* Open MPI's convertor between a datatype's layout and packed bytes: 0 or
 * an MPI error code. */
int mca_coll_xccl_pack(void *dst, size_t bytes, const void *buf, size_t count,
                       struct ompi_datatype_t *dt);
int mca_coll_xccl_unpack(void *buf, size_t count, struct ompi_datatype_t *dt, const void *src,
                         size_t bytes);

/* ------------------------------------------------------------ execution (coll_xccl_exec.c) */

/* How the executor runs a schedule: where (bufs: SEND, RECV, SCRATCH;
 * SCRATCH NULL: the module's host scratch), over which transport (NULL:
 * the module's, for host memory; &m->transport_cuda when every buffer
 * the transfers name is device memory), a gate, the local copies and
 * reductions (NULL: on the host), peer access (NULL: none). */
typedef struct {
    void *bufs[XCCL_NBUF];
    const xccl_transport_t *transport;
    const xccl_gate_t *gate;
    xccl_copy_cb_t copy;
    void *copy_ctx;
    xccl_reduce_cb_t reduce;
    void *reduce_ctx;
    const xccl_peer_t *peer;
} mca_coll_xccl_exec_hooks_t;

/* The slot and peer access of the communicator's shared-memory level, for
 * a schedule that uses it, on hooks->bufs SEND and RECV (coll_xccl_shm.c);
 * with publish (a schedule that reads the peers' own buffers: blocking
 * calls only) publishes those for the peers: 0 or <0. */
int mca_coll_xccl_shm_hooks(mca_coll_xccl_module_t *m, mca_coll_xccl_exec_hooks_t *hooks,
                            int publish);
/* Unmet flag tests between two calls of Open MPI's progress engine while a
 * call of the shared-memory level waits (no transfers to progress): own,
 * a few microseconds of tests, which cost far less than opal_progress
 * when every rank has a core of its own; 1 under mpi_yield_when_idle
 * (more ranks than cores: the peer may need this core, and opal_progress
 * yields it; measured at np 4 on 2 cores, an 8-byte allreduce of the
 * latency path took 10.5 us at 256 spins, 5.3 at 16, 3.6 at 1). */
static inline unsigned mca_coll_xccl_spins_per_progress(unsigned own)
{
    return opal_progress_yield_when_idle ? 1u : own;
}
/* After a call of a level trial (xccl_trial_t) that ran for ns on this
 * rank: records it; after the trial's last call the ranks agree on the
 * pick (an allreduce through the fallback, in this call on every rank),
 * logged at verbose 1 as
 *   xccl: trial <coll> comm=<cid> rank=<r> bytes=<lo>..<hi> shm=<us> mesh=<us> pick=<algo>
 * MPI_SUCCESS, or the agreement's error (then the pick is shm). */
int mca_coll_xccl_shm_trial_end(mca_coll_xccl_module_t *m, xccl_coll_t coll, size_t bytes,
                                xccl_trial_t *t, uint64_t ns);
/* Whether s is a schedule of the shared-memory level: it uses the own slot
 * or reaches the peers' memory (a bcast's non-root reads the root's slot
 * and has none of its own). */
static inline int mca_coll_xccl_sched_level(const xccl_sched_t *s)
{
    return s->slot_bytes > 0 || s->peer_access;
}
/* The level's turns (m->shm_ticket, m->shm_turn): whether the call holding
 * ticket may run its schedule now; its end passes the turn on. */
static inline int mca_coll_xccl_shm_my_turn(mca_coll_xccl_module_t *m, uint32_t ticket)
{
    return __atomic_load_n(&m->shm_turn, __ATOMIC_ACQUIRE) == ticket;
}
static inline void mca_coll_xccl_shm_pass_turn(mca_coll_xccl_module_t *m)
{
    __atomic_store_n(&m->shm_turn, m->shm_turn + 1u, __ATOMIC_RELEASE);
}
/* The latency path of the level (coll_xccl_shm.c): a blocking call of any
 * of the five collectives on one node whose every rank writes at most
 * XCCL_SHM_LAT_BYTES (mca_coll_xccl_shm_lat_bytes), without the executor:
 * each rank copies its part into its own small area, posts, and reads
 * what it needs from the peers' areas.  Reductions need red.kernel.  On
 * ws and wr, the call's work buffers (coll_xccl_pack.c): MPI error codes. */
#define XCCL_SHM_LAT_BYTES 16384
/* The level's trials (xccl_trial_t) between shm (the latency path where it
 * applies) and the mesh over single copies: blocking calls of every
 * collective of at least this many bytes (the call's size, the same on every
 * rank), where the vote allowed them.  Measured on an Intel Xeon VM, np 2:
 * an allgather of 16 KiB took 2.45 us with the mesh against the latency
 * path's 3.17, 32 KiB 3.39 against 5.37; at 4 KiB the mesh lost (2.07
 * against 1.10).  Calls of these sizes skip the entry's short way. */
#define XCCL_SHM_TRIAL_MIN_BYTES 16384
static inline int mca_coll_xccl_shm_trial_wanted(const mca_coll_xccl_module_t *m,
                                                 const mca_coll_xccl_call_t *c)
{
    return mca_coll_xccl_component.policy.trials > 0 && c->bytes >= XCCL_SHM_TRIAL_MIN_BYTES
               ? m->shm_trials : XCCL_TRIAL_OFF;
}
/* Bytes each rank writes for c (the same on every rank), once its
 * reduction is planned. */
size_t mca_coll_xccl_shm_lat_bytes(const mca_coll_xccl_call_t *c);
/* The level's algorithm whose small calls the latency path runs. */
static inline int mca_coll_xccl_shm_lat_algo(xccl_coll_t coll)
{
    return xccl_select_level_index(coll, XCCL_COLL_ALLREDUCE == coll ? XCCL_LEVEL_SHM_SMALL
                                                                     : XCCL_LEVEL_SHM);
}
int mca_coll_xccl_shm_latency(mca_coll_xccl_call_t *c, const char *ws, char *wr);
/* The latency path straight from the entry, where the rest of the call
 * path would take it too (m->shm_lat_colls, host buffers, contiguous data,
 * a reduction kernel): 1 and *rc, or 0 (the call goes the whole way, and
 * decides the same there from the same shared facts). */
int mca_coll_xccl_shm_latency_try(mca_coll_xccl_call_t *c, int *rc);

/* Sets e up to run s as h says, with red's host reductions where h has
 * none, on the module's transport: 0 or -1. */
int mca_coll_xccl_exec_init(xccl_exec_t *e, mca_coll_xccl_module_t *m, const xccl_sched_t *s,
                            const mca_coll_xccl_exec_hooks_t *h, mca_coll_xccl_reduce_t *red,
                            void *scratch, uint32_t seq);
/* Runs s to completion: MPI_SUCCESS or an error code (logged). */
int mca_coll_xccl_exec_run(mca_coll_xccl_module_t *m, xccl_coll_t coll, const xccl_sched_t *s,
                           const mca_coll_xccl_exec_hooks_t *h, mca_coll_xccl_reduce_t *red);
/* An execution that ended in an error: logged, MPI_ERR_INTERN. */
int mca_coll_xccl_exec_failed(mca_coll_xccl_module_t *m, xccl_coll_t coll);

/* ------------------------------------------------------------ peer access */

/* A way for the ranks of a node to reach each other's buffers and flags
 * (DESIGN 3a): CUDA IPC mappings of device buffers (coll_xccl_gpu_ipc.c);
 * the node's shared memory for host buffers plugs in the same way.  A call
 * a provider takes runs its collective's "mesh" schedule through the one
 * executor, with the provider's xccl_peer_t, copies and reductions.
 *  wanted  whether every rank tries: from what all ranks share only (the
 *          call's form and size, parameters), before the set-up;
 *  usable  once the communicator is set up: whether it can (alike on
 *          every rank);
 *  open    this rank's conditions (its buffers), then the ranks' agreement:
 *          *go alike on every rank.  With go, hooks hold the schedule's
 *          buffers, copies, reductions and peer access, and *state what
 *          close releases; without, nothing has moved;
 *  close   after the execution (rc): releases, returns the call's code. */
typedef struct {
    const char *name;                /* the verbose line's via= */
    int (*wanted)(const mca_coll_xccl_call_t *c);
    int (*usable)(const mca_coll_xccl_module_t *m);
    int (*open)(mca_coll_xccl_call_t *c, const xccl_sched_t *s,
                mca_coll_xccl_exec_hooks_t *hooks, void **state, int *go);
    int (*close)(mca_coll_xccl_call_t *c, void *state, int rc);
} mca_coll_xccl_peer_provider_t;

/* ------------------------------------------------------------ selection (coll_xccl_select.c) */

/* The algorithm and schedule for a call of coll with args a (layout set):
 * algo an index to run (the mesh of peer access), or -1 for the policy's
 * choice.  *used: the algorithm built; *predicted_us the model's (or
 * negative); *trial (where trial is not NULL): the level trial this call is
 * one of (time it: mca_coll_xccl_shm_trial_end), or NULL.  Put back with
 * xccl_select_put.  NULL: out of memory (logged). */
const xccl_sched_t *mca_coll_xccl_select_schedule(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                                  const xccl_coll_args_t *a, size_t bytes,
                                                  size_t es, int algo, int *used,
                                                  double *predicted_us, xccl_trial_t **trial);
void mca_coll_xccl_select_fini(mca_coll_xccl_module_t *m);

/* ------------------------------------------------------------ requests (coll_xccl_request.c) */

/* Starts s in the background (takes the schedule reference and pk); a
 * schedule of the shared-memory level (level) takes its turn first. */
int mca_coll_xccl_request_start(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                const xccl_sched_t *s, const mca_coll_xccl_exec_hooks_t *hooks,
                                const mca_coll_xccl_reduce_t *red, mca_coll_xccl_packed_t *pk,
                                int level, ompi_request_t **request);
/* Queues a call whose schedule is built once the communicator's set-up
 * agreement is in (copies the arguments; takes pk). */
int mca_coll_xccl_request_start_waiting(mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                        const mca_coll_xccl_exec_hooks_t *hooks,
                                        mca_coll_xccl_packed_t *pk);

/* A call on device buffers runs on host copies (coll_xccl_gpu.c); a
 * nonblocking one completes the copies back when the host call's request
 * (inner) completes.  Ends a staged call: blocking (request NULL) or
 * started (inner). */
struct mca_coll_xccl_staged;
int mca_coll_xccl_staged_finish(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                struct mca_coll_xccl_staged *st, int rc, ompi_request_t *inner,
                                ompi_request_t **request);

/* ------------------------------------------------------------ log (coll_xccl_log.c) */

/* The line of a call: algo (an index) or fallback (a reason); counts it
 * for the summary.  via: peer access, or NULL.  Nothing at verbose 0. */
void mca_coll_xccl_log_call_line(const mca_coll_xccl_module_t *m, xccl_coll_t coll, int nb,
                                 size_t bytes, int algo, double predicted_us,
                                 const char *fallback, const char *via);
static inline void mca_coll_xccl_log_call(const mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                          int nb, size_t bytes, int algo, double predicted_us,
                                          const char *fallback, const char *via)
{
    if (mca_coll_xccl_component.verbose >= 1) {
        mca_coll_xccl_log_call_line(m, coll, nb, bytes, algo, predicted_us, fallback, via);
    }
}

END_C_DECLS

#endif
