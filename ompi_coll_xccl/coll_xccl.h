/*
 * xccl: Open MPI coll component.  This directory is Open MPI glue only:
 * component (MCA parameters, open/close, init and comm queries), module
 * (enable, saved fallbacks, endpoints) and the entry points of the
 * intercepted collectives.  Algorithms and their selection live in
 * algos/, UCX in ucx_glue/, the node segment in segment/.
 *
 * Files, each one concern with the header of its name declaring what it
 * owns; includes and calls go down this list, never up
 * (test/component_layers.sh; docs/design.md has the whole order):
 *   coll_xccl_component.c   parameters, init, close
 *   coll_xccl_module.c      query, enable (saving the fallbacks), teardown
 *   coll_xccl_entry_*.c     entry points per family: check, describe the call
 *   coll_xccl_path.[ch]     the road of a call: fast ways, the path table
 *   coll_xccl_request.c     nonblocking calls in flight
 *   coll_xccl_kept.c        persistent requests' calls kept from start to start
 *   coll_xccl_latency.c     the shared-memory level's latency path
 *   coll_xccl_latency_v*.c  the v forms' latency path: its steps, a rank's
 *                           part (coll_xccl_latency_v_part.c), a blocking call
 *   coll_xccl_gpu*.c        device buffers: host copies and their staging,
 *                           device pointers to UCX, CUDA IPC peer access
 *                           (coll_xccl_gpu_ipc*.c)
 *   coll_xccl_setup.c       the communicator's set-up on first use
 *   coll_xccl_transport.c   the executor's transports: UCX, Open MPI's PML
 *   coll_xccl_level*.c      the shared-memory level: state and hooks, the
 *                           node segment's pool, the vote, the trials, peer
 *                           access over the segment (coll_xccl_level_peer.c)
 *   coll_xccl_pack.c        packed copies
 *   coll_xccl_select.c      fallback or algorithm, cached schedules
 *   coll_xccl_exec.c        a schedule on the communicator's transport
 *   coll_xccl_call.h        the call descriptor
 *   coll_xccl_dtype.c       datatypes, ops, host reductions
 *   coll_xccl_log.c         log lines, per-collective counts
 *   coll_xccl.h (this)      the module and component types, the entry points
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

#include "algos/xccl_exec.h"
#include "algos/xccl_layout.h"
#include "algos/xccl_sched.h"
#include "algos/xccl_select.h"
#include "ucx_glue/xccl_ucx.h"

BEGIN_C_DECLS

/* The intercepted entry points, one line each: Open MPI's name (its
 * coll_<name> and mca_coll_base_module_<name>_fn_t), the collective,
 * nonblocking.  Installing, saving, releasing and declining them are
 * generated from this list; nothing else spells them out. */
#define MCA_COLL_XCCL_ENTRIES(X)                                  \
    X(allreduce, XCCL_COLL_ALLREDUCE, 0)                          \
    X(allgather, XCCL_COLL_ALLGATHER, 0)                          \
    X(reduce_scatter, XCCL_COLL_REDUCE_SCATTER, 0)                \
    X(reduce_scatter_block, XCCL_COLL_REDUCE_SCATTER_BLOCK, 0)    \
    X(alltoall, XCCL_COLL_ALLTOALL, 0)                            \
    X(bcast, XCCL_COLL_BCAST, 0)                                  \
    X(iallreduce, XCCL_COLL_ALLREDUCE, 1)                         \
    X(iallgather, XCCL_COLL_ALLGATHER, 1)                         \
    X(ireduce_scatter, XCCL_COLL_REDUCE_SCATTER, 1)               \
    X(ireduce_scatter_block, XCCL_COLL_REDUCE_SCATTER_BLOCK, 1)   \
    X(ialltoall, XCCL_COLL_ALLTOALL, 1)                           \
    X(ibcast, XCCL_COLL_BCAST, 1)                                 \
    X(reduce, XCCL_COLL_REDUCE, 0)                                \
    X(barrier, XCCL_COLL_BARRIER, 0)                              \
    X(allgatherv, XCCL_COLL_ALLGATHERV, 0)                        \
    X(alltoallv, XCCL_COLL_ALLTOALLV, 0)                          \
    X(gather, XCCL_COLL_GATHER, 0)                                \
    X(gatherv, XCCL_COLL_GATHERV, 0)                              \
    X(scatter, XCCL_COLL_SCATTER, 0)                              \
    X(scatterv, XCCL_COLL_SCATTERV, 0)                            \
    X(ireduce, XCCL_COLL_REDUCE, 1)                               \
    X(ibarrier, XCCL_COLL_BARRIER, 1)                             \
    X(iallgatherv, XCCL_COLL_ALLGATHERV, 1)                       \
    X(ialltoallv, XCCL_COLL_ALLTOALLV, 1)                         \
    X(igather, XCCL_COLL_GATHER, 1)                               \
    X(igatherv, XCCL_COLL_GATHERV, 1)                             \
    X(iscatter, XCCL_COLL_SCATTER, 1)                             \
    X(iscatterv, XCCL_COLL_SCATTERV, 1)

/* The persistent forms (coll_<name>_init), one per collective: xccl's own
 * requests (coll_xccl_persist.c), whose starts run the nonblocking entry
 * points above; installed and declined with them. */
#define MCA_COLL_XCCL_INIT_ENTRIES(X)                                  \
    X(allreduce) X(allgather) X(reduce_scatter) X(reduce_scatter_block) \
    X(alltoall) X(bcast) X(reduce) X(barrier) X(allgatherv) X(alltoallv) \
    X(gather) X(gatherv) X(scatter) X(scatterv)

/* What Open MPI would have used: each entry's function and module. */
typedef struct {
#define MCA_COLL_XCCL_PREV_FIELD(name, coll, nb) \
    mca_coll_base_module_##name##_fn_t name;     \
    mca_coll_base_module_t *name##_module;
    MCA_COLL_XCCL_ENTRIES(MCA_COLL_XCCL_PREV_FIELD)
#undef MCA_COLL_XCCL_PREV_FIELD
} mca_coll_xccl_prev_t;

/* What Open MPI would have used for the persistent forms (NULL where no
 * module has them): a collective xccl leaves to the fallback hands its
 * whole persistent request there (coll_xccl_persist.c). */
typedef struct {
#define MCA_COLL_XCCL_PREV_INIT_FIELD(name)       \
    mca_coll_base_module_##name##_init_fn_t name; \
    mca_coll_base_module_t *name##_module;
    MCA_COLL_XCCL_INIT_ENTRIES(MCA_COLL_XCCL_PREV_INIT_FIELD)
#undef MCA_COLL_XCCL_PREV_INIT_FIELD
} mca_coll_xccl_prev_init_t;

typedef struct {
    uint64_t calls, bytes, fallbacks, errors;
    uint64_t algo_calls[XCCL_SEL_MAX];
} xccl_coll_stats_t;

typedef struct {
    mca_coll_base_component_t super;

    /* MCA parameters */
    int priority;
    int verbose;
    bool enable[XCCL_NCOLL];
    char *algorithm[XCCL_NCOLL];     /* as given; parsed into policy.forced */
    xccl_select_policy_t policy;     /* forced, tuning rules, small_msg_bytes, cost model */
    size_t segment_bytes;            /* ring allreduce pipelining segment, 0: none */
    size_t gpu_pool_bytes;           /* device buffers: most pinned host memory per call */
    size_t gpu_ipc_bytes;            /* CUDA IPC from this many bytes per call (0: off) */
    size_t gpu_chunk_bytes;          /* staged copies overlap the schedule in pieces (0: off) */
    int gpu_direct;                  /* device pointers to UCX: -1 auto, 0 never, 1 always */
    double cost_alpha, cost_beta, cost_gamma, cost_delta;
    double cost_inter_alpha, cost_inter_beta;
    char *net;                       /* coll_xccl_net as given; parsed into policy.net */
    char *cost_file;
    bool cost_from_file;               /* the intra-node model came from cost_file */
    char *node_layout;               /* synthetic layout, or NULL: host names */
    char *tuning_file;
    char *picks_file;                /* coll_xccl_picks_file as given */
    int picks_days;                  /* its lines older than this are dropped (0: none) */
    char *picks_path;                /* the file it names, NULL: none */
    char *ucx_tls;
    char *ucx_rndv_scheme;
    char *ucx_rndv_thresh;
    size_t shm_bytes;                /* shared-memory level: each rank's slot (0: off) */
    int shm_kind;                    /* xccl_segment_kind_t: auto, memfd, sysv */
    bool shm_small;                  /* small messages on one node run the level, not the fallback */
    bool shm_cma;                    /* single copies (process_vm_readv) where the kernel allows */

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
    xccl_coll_stats_t stats[XCCL_NCOLL];   /* counted at verbose >= 1 (the summary) */
} mca_coll_xccl_component_t;

XCCL_COMPONENT_DECLSPEC extern mca_coll_xccl_component_t mca_coll_xccl_component;

/* Set-up of a communicator, on first use (coll_xccl_setup.c). */
enum {
    XCCL_SETUP_NONE,                 /* enabled: fallbacks saved, nothing else */
    XCCL_SETUP_AGREEING,             /* inside the fallback's agreement call: a call
                                      * made from there goes to the fallback */
    XCCL_SETUP_PENDING,              /* agreement started by a nonblocking call */
    XCCL_SETUP_DONE                  /* layout ordered, transport chosen */
};

/* Placement keys and shared-memory descriptors travel with the set-up
 * agreement up to this many ranks (the answers grow as size^2 over all
 * ranks); larger communicators agree on the flags alone, keep communicator
 * order inside the nodes and have no shared-memory level. */
#define XCCL_AGREE_MAX_KEYS 4096
/* The agreement record of a rank: flags, placement key, the descriptor of
 * its node's shared segment (node leaders: the segment; the others: the
 * pooled segment they would rejoin, or zeros). */
#define XCCL_AGREE_FLAGS 0
#define XCCL_AGREE_KEY 1
#define XCCL_AGREE_DESC 2
#define XCCL_AGREE_INTS (2 + 64 / (int) sizeof(int))

/* The shared-memory level of a communicator (coll_xccl_level*.c).  The vote
 * ends at a different time on each rank: a call reads the state only once
 * it is settled (mca_coll_xccl_level_ready), and then it is the same on
 * every rank. */
enum {
    XCCL_LEVEL_OFF,                  /* off for good (parameter, size, a rank could not) */
    XCCL_LEVEL_UNDECIDED,            /* before the set-up's end */
    XCCL_LEVEL_VOTING,               /* the vote runs (started at the set-up's end) */
    XCCL_LEVEL_ON
};

/* The level's vote: an allreduce (minimum) of one int over the
 * communicator's own transport, in two rounds (coll_xccl_level_vote.c). */
typedef struct {
    xccl_sched_t s;
    xccl_exec_t e;
    int in, out, tmp;
    int round;                       /* 1: did every rank attach?  2: single copies everywhere? */
    int gen;                         /* which pair of tags (coll_xccl_level_vote.c VOTE_SEQ) */
} mca_coll_xccl_level_vote_t;

typedef struct {
    mca_coll_base_module_t super;

    ompi_communicator_t *comm;
    int rank, size, world_rank;
    volatile int setup;              /* XCCL_SETUP_*; DONE is written last */
    opal_mutex_t setup_lock;         /* one finisher of a pending agreement */
    struct ompi_request_t *agree_req;
    int agree_msg[XCCL_AGREE_INTS];  /* this rank's {flags, placement key, segment} */
    int *agree_all;                  /* every rank's, while the agreement runs */
    bool ucx;                        /* transport: UCX, else Open MPI's PML */
    xccl_layout_t layout;            /* nodes of the ranks (host names or node_layout) */
    uint32_t cid;
    uint32_t seq;                    /* collective calls on this communicator */
    ucp_ep_h *eps;                   /* by communicator rank; NULL for self */
    uint64_t *ep_keys;
    xccl_transport_t transport;      /* host buffers */
    xccl_transport_t transport_cuda; /* device buffers (UCX only: direct calls) */
    void *scratch;                   /* grows to the largest need seen */
    size_t scratch_size;
    /* choices and schedules (algos/select.c), created by the first call
     * that runs a schedule; the lock: progress builds too */
    xccl_select_cache_t *cache;
    opal_mutex_t cache_lock;
    /* CUDA IPC inside a node: set when every rank had a CUDA context on a
     * known device when the communicator was created and all are on one
     * node; the state of the peer access (coll_xccl_gpu_ipc.c) */
    bool gpu_ipc;
    struct mca_coll_xccl_ipc *ipc;
    /* The shared-memory level (coll_xccl_level*.c): XCCL_LEVEL_*; whether a
     * small blocking call runs xccl (the level is, or may be, on and the
     * communicator is one node) instead of the fallback. */
    int level_state;                 /* written with release once the vote is over */
    mca_coll_xccl_level_vote_t level_vote;
    int level_small;
    /* Whether a small nonblocking call runs xccl: fixed at enable from
     * what every member sees alike (the level may run, all members are of
     * this job and on this node), since a nonblocking call cannot wait
     * for the vote, which ends at different calls on different ranks. */
    int level_small_nb;
    /* The level may run and every member is of this job and on this node:
     * fixed at enable, alike on every rank (the vote may still turn the
     * level off; the call then runs over the transport). */
    int level_local;
    int persistent;                  /* a persistent request's start runs its call
                                      * (coll_xccl_persist.c): the verbose line says so */
    int level_cma;                   /* every rank reads its node peers' memory (process_vm_readv) */
    int level_trials;                /* level_cma: the level's trials time shm against mesh
                                      * (xccl_trial_t), XCCL_TRIAL_QUIET, or _NOISY where a
                                      * rank yields when idle; else XCCL_TRIAL_OFF */
    int quiet;                       /* a call xccl makes for itself (a trial's agreement):
                                      * no verbose line, not counted */
    /* The level on, one node: bit coll set where a small blocking call may
     * go to the latency path straight from the entry (no forced algorithm,
     * no tuning rules; on a CUDA IPC communicator it says so to the CUDA
     * IPC agreement: mca_coll_xccl_gpu_ipc_pass). */
    unsigned level_lat_colls;
    /* The level's schedules (one slot and one flag per rank) run one at a
     * time, in the order the calls were made, blocking and nonblocking
     * alike: a call takes ticket level_ticket++ and runs once level_turn
     * (read and written atomically: any thread may complete a request)
     * equals it; its end passes the turn on. */
    uint32_t level_ticket;
    uint32_t level_turn;
    struct mca_coll_xccl_level *level;

    mca_coll_xccl_prev_t prev;
    unsigned prev_two_level;         /* bit c: the blocking fallback of collective c is
                                      * Open MPI's han (two levels of its own) */
    unsigned prev_two_level_nb;      /* bit c: so is its nonblocking fallback */
    int nodes_settled;               /* a blocking call of every member's sequence
                                      * finished the set-up before its decision
                                      * (coll_xccl_decide.c, settle_nodes): later
                                      * nonblocking calls may read the layout too */
    mca_coll_xccl_prev_init_t prev_init;
} mca_coll_xccl_module_t;

OBJ_CLASS_DECLARATION(mca_coll_xccl_module_t);

/* module */
mca_coll_base_module_t *mca_coll_xccl_comm_query(struct ompi_communicator_t *comm, int *priority);

/* entry points (coll_xccl_entry_reduce.c, coll_xccl_entry_move.c,
 * coll_xccl_entry_vector.c) */
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

int mca_coll_xccl_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module);
int mca_coll_xccl_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                          struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                          ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_xccl_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module);
int mca_coll_xccl_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                         void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module);
int mca_coll_xccl_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module);
int mca_coll_xccl_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, const int *rcounts, const int *displs,
                             struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                             mca_coll_base_module_t *module);
int mca_coll_xccl_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, const int *rcounts, const int *displs,
                              struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                              ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_xccl_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                            struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                            const int *rdispls, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                             struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                             const int *rdispls, struct ompi_datatype_t *rdtype,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module);
int mca_coll_xccl_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, const int *rcounts, const int *displs,
                          struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, const int *rcounts, const int *displs,
                           struct ompi_datatype_t *rdtype, int root,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module);
int mca_coll_xccl_scatterv(const void *sbuf, const int *scounts, const int *displs,
                           struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                           struct ompi_datatype_t *rdtype, int root,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_xccl_iscatterv(const void *sbuf, const int *scounts, const int *displs,
                            struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                            struct ompi_datatype_t *rdtype, int root,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module);

END_C_DECLS

#endif
