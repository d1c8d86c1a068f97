/*
 * xccl: Open MPI coll component.  This directory is Open MPI glue only:
 * component (MCA parameters, open/close, init and comm queries), module
 * (enable, saved fallbacks, endpoints) and the entry points of the
 * intercepted collectives.  Algorithms live in algos/, transport in ucx_glue/.
 */
#ifndef MCA_COLL_XCCL_H
#define MCA_COLL_XCCL_H

#include "ompi_config.h"

#include <stdbool.h>
#include <stdint.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/request/request.h"

#include "coll_xccl_compat.h"

#include "algos/xccl_algos.h"
#include "ucx_glue/xccl_ucx.h"

BEGIN_C_DECLS

/* The intercepted collectives: xccl_coll_t (algos/xccl_algos.h). */

/* Algorithms a collective may be forced to; index 0 is "auto" (let xccl
 * choose), index 1 "fallback" (always hand the call to the next module). */
#define XCCL_ALGO_AUTO 0
#define XCCL_ALGO_FALLBACK 1
#define XCCL_MAX_ALGOS 8

typedef struct {
    uint64_t calls, bytes, fallbacks, errors;
    uint64_t algo_calls[XCCL_MAX_ALGOS];
} xccl_coll_stats_t;

typedef struct {
    mca_coll_base_component_t super;

    /* MCA parameters */
    int priority;
    int verbose;
    bool enable[XCCL_NCOLL];
    char *algorithm[XCCL_NCOLL];     /* as given */
    int forced[XCCL_NCOLL];          /* parsed: XCCL_ALGO_* or an algorithm index */
    int small_bytes;                 /* auto: fall back below this size */
    size_t segment_bytes;            /* ring allreduce pipelining segment, 0: none */
    size_t gpu_pool_bytes;           /* device buffers: most pinned host memory per call */
    size_t gpu_ipc_bytes;            /* CUDA IPC from this many bytes per call (0: off) */
    size_t gpu_chunk_bytes;          /* staged copies overlap the schedule in pieces (0: off) */
    int gpu_direct;                  /* device pointers to UCX: -1 auto, 0 never, 1 always */
    double cost_alpha, cost_beta, cost_gamma, cost_delta;
    double model_margin;             /* other algorithms must win by this fraction */
    char *cost_file;
    xccl_cost_model_t cost;          /* what auto selection uses (inside a node) */
    double cost_inter_alpha, cost_inter_beta;
    xccl_cost_model_t cost_inter;    /* between nodes */
    char *node_layout;               /* synthetic layout, or NULL: host names */
    char *tuning_file;
    xccl_tuning_t tuning;            /* rules checked before the cost model */
    char *ucx_tls;
    char *ucx_rndv_scheme;
    char *ucx_rndv_thresh;

    /* state */
    int output;                      /* opal_output stream */
    int world_rank;                  /* for the log; -1 until known */
    bool ucx_ok;                     /* this process's UCP worker is up */
    bool progress_registered;        /* xccl's progress callback, from init to close */
    bool world_active;               /* xccl enabled on MPI_COMM_WORLD (MPI_T, read-only) */
    char ucx_error[256];
    char *topo_file, *topo_dump;
    struct xccl_topo_s *topo;        /* this node's, never NULL after init */
    char topo_summary[160];
    xccl_coll_stats_t stats[XCCL_NCOLL];
} mca_coll_xccl_component_t;

XCCL_COMPONENT_DECLSPEC extern mca_coll_xccl_component_t mca_coll_xccl_component;

/* Set-up of a communicator, on first use (coll_xccl_setup.c). */
enum {
    XCCL_SETUP_NONE,                 /* enabled: fallbacks saved, nothing else */
    XCCL_SETUP_PENDING,              /* agreement started by a nonblocking call */
    XCCL_SETUP_DONE                  /* layout ordered, transport chosen */
};

typedef struct {
    mca_coll_base_module_t super;

    ompi_communicator_t *comm;
    int rank, size, world_rank;
    volatile int setup;              /* XCCL_SETUP_*; DONE is written last */
    opal_mutex_t setup_lock;         /* one finisher of a pending agreement */
    struct ompi_request_t *agree_req;
    int agree_msg[2];                /* this rank's {flags, placement key} */
    int *agree_all;                  /* every rank's, while the agreement runs */
    bool ucx;                        /* transport: UCX, else Open MPI's PML */
    xccl_layout_t layout;            /* nodes of the ranks (host names or node_layout) */
    uint32_t cid;
    uint32_t seq;                    /* collective calls on this communicator */
    ucp_ep_h *eps;                   /* by communicator rank; NULL for self */
    uint64_t *ep_keys;
    xccl_transport_t transport;
    void *scratch;                   /* grows to the largest need seen */
    /* auto selection, cached per collective and power-of-two size class */
    int8_t choice[XCCL_NCOLL][65];
    float predicted_us[XCCL_NCOLL][65];
    size_t scratch_size;
    /* CUDA IPC inside a node: set when every rank had a CUDA context on a
     * known device when the communicator was created and all are on one
     * node; the peers' buffers mapped so far. */
    bool gpu_ipc;
    /* inside the host-copy call of a device call: its host copies */
    struct mca_coll_xccl_gpu_stage *stage;
    struct mca_coll_xccl_ipc *ipc;

    /* what Open MPI would have used */
    mca_coll_base_module_allreduce_fn_t prev_allreduce;
    mca_coll_base_module_t *prev_allreduce_module;
    mca_coll_base_module_allgather_fn_t prev_allgather;
    mca_coll_base_module_t *prev_allgather_module;
    mca_coll_base_module_reduce_scatter_fn_t prev_reduce_scatter;
    mca_coll_base_module_t *prev_reduce_scatter_module;
    mca_coll_base_module_reduce_scatter_block_fn_t prev_reduce_scatter_block;
    mca_coll_base_module_t *prev_reduce_scatter_block_module;
    mca_coll_base_module_alltoall_fn_t prev_alltoall;
    mca_coll_base_module_t *prev_alltoall_module;
    mca_coll_base_module_bcast_fn_t prev_bcast;
    mca_coll_base_module_t *prev_bcast_module;
    mca_coll_base_module_iallreduce_fn_t prev_iallreduce;
    mca_coll_base_module_t *prev_iallreduce_module;
    mca_coll_base_module_iallgather_fn_t prev_iallgather;
    mca_coll_base_module_t *prev_iallgather_module;
    mca_coll_base_module_ireduce_scatter_fn_t prev_ireduce_scatter;
    mca_coll_base_module_t *prev_ireduce_scatter_module;
    mca_coll_base_module_ireduce_scatter_block_fn_t prev_ireduce_scatter_block;
    mca_coll_base_module_t *prev_ireduce_scatter_block_module;
    mca_coll_base_module_ialltoall_fn_t prev_ialltoall;
    mca_coll_base_module_t *prev_ialltoall_module;
    mca_coll_base_module_ibcast_fn_t prev_ibcast;
    mca_coll_base_module_t *prev_ibcast_module;
} mca_coll_xccl_module_t;

OBJ_CLASS_DECLARATION(mca_coll_xccl_module_t);

/* component */
const char *mca_coll_xccl_coll_name(xccl_coll_t c);
/* Name of algorithm i of a collective (0 "auto", 1 "fallback", then the
 * algorithms), NULL past the last. */
const char *mca_coll_xccl_algo_name(xccl_coll_t c, int i);

/* module */
mca_coll_base_module_t *mca_coll_xccl_comm_query(struct ompi_communicator_t *comm, int *priority);

/* Set-up on first use (coll_xccl_setup.c).  A call that runs one of xccl's
 * schedules calls mca_coll_xccl_setup first: blocking (wait 1) it returns
 * with the set-up done; nonblocking (wait 0) it only starts the agreement
 * and never waits for another rank.  MPI error codes.  setup_test: 1 when
 * done (finishing a pending agreement that has arrived), never waits; safe
 * from Open MPI's progress engine. */
int mca_coll_xccl_setup(mca_coll_xccl_module_t *m, int wait);
int mca_coll_xccl_setup_test(mca_coll_xccl_module_t *m);
/* What set-up holds (endpoints, layout, agreement buffers), at destruction. */
void mca_coll_xccl_setup_fini(mca_coll_xccl_module_t *m);

/* Open MPI's convertor between a datatype's layout and packed bytes
 * (coll_xccl_pack.c): 0 or an MPI error code. */
int mca_coll_xccl_pack(void *dst, size_t bytes, const void *buf, size_t count,
                       struct ompi_datatype_t *dt);
int mca_coll_xccl_unpack(void *buf, size_t count, struct ompi_datatype_t *dt, const void *src,
                         size_t bytes);

/* entry points */
int mca_coll_xccl_allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                            struct ompi_op_t *op, struct ompi_communicator_t *comm,
                            mca_coll_base_module_t *module);
int mca_coll_xccl_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       mca_coll_base_module_t *module);
int mca_coll_xccl_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module);

int mca_coll_xccl_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                             struct ompi_op_t *op, struct ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_xccl_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module);
int mca_coll_xccl_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm, ompi_request_t **request,
                                  mca_coll_base_module_t *module);
int mca_coll_xccl_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                        struct ompi_communicator_t *comm,
                                        ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_xccl_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module);
int mca_coll_xccl_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module);
/* The algorithm index of a tuning rule for this call: XCCL_ALGO_AUTO when no
 * rule applies (or it says auto), XCCL_ALGO_FALLBACK, or an algorithm. */
int mca_coll_xccl_tuned_algo(xccl_coll_t coll, int ranks, size_t bytes);
/* Advances the nonblocking collectives in flight; returns the number completed. */
int mca_coll_xccl_progress_requests(void);
/* Whether any is in flight (a racy read: a request started on another
 * thread is seen at the next progress call). */
int mca_coll_xccl_requests_active(void);

/* Logs an error of a call (verbose >= 1), counts it, returns err. */
int mca_coll_xccl_error(mca_coll_xccl_module_t *m, xccl_coll_t coll, int err, const char *what);

/* Device buffers (coll_xccl_gpu.c): host copies of a call's buffers in
 * pinned memory of a staging set of CUDA context ctx.  stage_in takes the
 * host memory (*hs for sspan bytes at sdev when not NULL, *hr for rspan
 * bytes at rdev) and copies nothing yet.  Then the host call either runs a
 * schedule, or it does anything else (the fallback): stage_fill copies
 * everything in first.  A schedule goes through stage_gate, which either
 *  - runs it on the device buffers themselves (direct: UCX moves device
 *    memory, or coll_xccl_gpu_direct says to act as if it did), with the
 *    copies and reductions queued on the set's stream; or
 *  - plans the copies (the sspan bytes, and the rspan bytes when copy_r)
 *    so that each step waits only for the pieces it touches and each
 *    piece goes back to the device after its last write (when copy_out),
 *    overlapping the transfers.
 * stage_out completes the copies back (all of RECV when it was filled) or
 * the queued work, and gives the memory back.  MPI error codes, logged. */
struct mca_coll_xccl_gpu_pipe;
struct mca_coll_xccl_gpu_direct;
typedef struct mca_coll_xccl_gpu_stage {
    void *ctx;
    struct xccl_gpu_set *set;
    const char *sdev;
    char *rdev, *hs, *hr;
    size_t sspan, rspan;
    int copy_r, copy_out;
    int all_device;                  /* every buffer of the call is device memory of ctx */
    int filled;                      /* copied in (stage_fill) */
    struct mca_coll_xccl_gpu_pipe *pipe;   /* or pipelined (stage_gate) */
    struct mca_coll_xccl_gpu_direct *direct;   /* or run on the device buffers */
} mca_coll_xccl_gpu_stage_t;

/* How the executor runs a schedule: where (bufs: SEND, RECV, SCRATCH;
 * SCRATCH NULL: the caller's host scratch), a gate, and the local copies
 * and reductions (NULL: on the host). */
typedef struct {
    void *bufs[XCCL_NBUF];
    const xccl_gate_t *gate;
    xccl_copy_cb_t copy;
    void *copy_ctx;
    xccl_reduce_cb_t reduce;
    void *reduce_ctx;
} mca_coll_xccl_exec_hooks_t;

/* coll_xccl_gpu_direct and what UCX reports: device buffers straight to UCX. */
int mca_coll_xccl_gpu_direct_wanted(void);
int mca_coll_xccl_gpu_stage_in(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                               mca_coll_xccl_gpu_stage_t *st, void *ctx, const void *sdev,
                               size_t sspan, void **hs, void *rdev, size_t rspan, int copy_r,
                               int copy_out, void **hr);
int mca_coll_xccl_gpu_stage_fill(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                 mca_coll_xccl_gpu_stage_t *st);
/* How to run s, whose hooks->bufs are the host copies: straight on the
 * device buffers, or through a staging gate; or plain, when the copies are
 * already done (or planning them failed: then they are done now).  gpu_dt,
 * gpu_op: the xccl_dtype_t and xccl_op_t of a predefined reduction, -1
 * otherwise (then only a schedule without reductions runs direct). */
int mca_coll_xccl_gpu_stage_gate(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                 mca_coll_xccl_gpu_stage_t *st, const xccl_sched_t *s, int gpu_dt,
                                 int gpu_op, mca_coll_xccl_exec_hooks_t *hooks);
/* CUDA IPC inside a node for allgather, alltoall and bcast (blocking, with
 * m->gpu_ipc): every rank calls it with the same coll, block (bytes per
 * rank; bcast: all bytes) and root.  exp is what this rank's peers read
 * (allgather: its block; alltoall: its send buffer; bcast: the root's
 * buffer, NULL elsewhere), dst where it writes, contig whether its
 * datatypes are contiguous.  The ranks exchange IPC handles and agree; if
 * any rank cannot take part (host or non-contiguous buffers, a handle that
 * does not open), *done = 0 on every rank and nothing has moved. */
int mca_coll_xccl_gpu_ipc(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                          xccl_coll_t coll, const void *exp, void *dst, size_t block, int root,
                          int contig, int *done);
/* The same for allreduce (counts: the slice of each rank, in elements of
 * es bytes, summing to the count) and reduce_scatter(_block) (counts: the
 * blocks; not in place): rank j reduces slice j from every rank's src in
 * rank order with a GPU kernel (gpu_dt, gpu_op: xccl_dtype_t, xccl_op_t)
 * into dst, then (allreduce) every rank copies the other slices from their
 * owners' dst.  ok: this rank's own conditions (device buffers, a mapped
 * type and op). */
int mca_coll_xccl_gpu_ipc_reduce(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                                 xccl_coll_t coll, const void *src, void *dst, const size_t *counts,
                                 size_t es, int gpu_dt, int gpu_op, int ok, int *done);
void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m);
/* ok: the host call succeeded (else nothing more is copied back). */
int mca_coll_xccl_gpu_stage_out(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                mca_coll_xccl_gpu_stage_t *st, int ok);

/* One log line at verbosity >= level, prefixed "xccl: ". */
void mca_coll_xccl_log(int level, const char *fmt, ...) __opal_attribute_format__(__printf__, 2, 3);

END_C_DECLS

#endif
