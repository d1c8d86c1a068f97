/*
 * What the files of the CUDA IPC provider share (coll_xccl_gpu_ipc.h is
 * its interface for the rest of the component): its types, the slots'
 * agreement and turn, a call's driver helpers, and the functions one of
 * its files calls in another.  The files, from the bottom:
 *   coll_xccl_gpu_ipc_setup.c  the communicator's slots and flag events
 *                              (set up by its first call that tries), the
 *                              schedules' form;
 *   coll_xccl_gpu_ipc_part.c   this rank's part of a call: whether it can
 *                              take part, the exports of its buffers;
 *   coll_xccl_gpu_ipc_peer.c   a call's xccl_peer_t on a CUDA stream, the
 *                              peers' mappings;
 *   coll_xccl_gpu_ipc_nb.c     nonblocking calls, advanced from progress;
 *   coll_xccl_gpu_ipc.c        the provider: blocking calls.
 *
 * Each rank owns one slot of shared memory (a POSIX segment that its peers
 * map once per communicator, at the first call that tries): its flag, and
 * what it tells its peers at the start of a call.  A call then agrees in
 * two rounds through the slots, no message and no collective:
 *   1. each rank writes whether it can take part (device buffers of one
 *      context, contiguous, a GPU kernel for a reduction) and the IPC
 *      handles of the buffers its peers read (in alltoallv also where in
 *      its SEND the block for each rank lies, and its size: only the
 *      sender knows); one that cannot goes on at once (nobody can take the
 *      call: a host-buffer call pays one store), one that can waits for
 *      all;
 *   2. if every rank can, each maps what its schedule reads of the others;
 *      each writes whether that worked and waits for all.
 * Every rank reads the same slots, so all decide alike: the schedule
 * on every rank, or nothing moved and the call goes on as any other (host
 * copies).  Round 2 is also what keeps a slot stable until every peer has
 * read it: nobody starts its next call's round 1 before all finished this
 * call's reading.
 *
 * Calls that want CUDA IPC are numbered in call order (epoch, alike on
 * every rank) and use the slots one at a time, in that order (turn).
 *
 * The agreement's steps and the call's driver helpers below are static
 * inline: every call of the latency path's fast way on a CUDA IPC
 * communicator publishes a word (mca_coll_xccl_gpu_ipc_pass), and the
 * peer hooks run them per flag.
 */
#ifndef MCA_COLL_XCCL_GPU_IPC_INT_H
#define MCA_COLL_XCCL_GPU_IPC_INT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll_xccl_gpu_hooks.h"
#include "coll_xccl_provider.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_queue.h"
#include "gpu/xccl_ipc_cache.h"

BEGIN_C_DECLS

/* Flag values with an interprocess event each (1..XCCL_IPC_EVENTS): the
 * peer-access schedules use 1..3. */
#define XCCL_IPC_EVENTS 3
/* A nonblocking call's flags posted on the GPU and not yet seen done (at
 * most; the schedules post up to 3 per call): events of its set 1..PEND,
 * the user's work before the call 0, its end PEND + 1. */
#define XCCL_IPC_PEND 4
#define XCCL_IPC_SET_EVENTS (XCCL_IPC_PEND + 2)

/* One exported buffer. */
typedef struct {
    xccl_cuipc_handle_t handle;
    uint64_t buffer_id, offset;
    int32_t valid, pad;
} ipc_buf_t;

/* Alltoallv: a block of a rank's SEND, as the rank it is for reads it. */
typedef struct {
    uint64_t off, bytes;             /* from the exported SEND */
} ipc_block_t;

/* A rank's slot, written by that rank only. */
typedef struct {
    uint64_t flag;                   /* the schedule's flag: seq << 32 | value */
    char pad0[56];
    uint64_t agree;                  /* the agreement: 4 * epoch + stage (XCCL_IPC_STAGE_*) */
    int32_t mapped;                  /* round 2: it mapped what it reads */
    int32_t pad1;
    ipc_buf_t buf[2];                /* round 1: its SEND and RECV, as its peers read them */
    ipc_block_t sent[];              /* round 1 of alltoallv: its block for each rank (size entries) */
} ipc_slot_t;

/* A call's driver work and peer access (blocking: ipc->call; nonblocking:
 * its job's; one holds the slots at a time). */
typedef struct {
    mca_coll_xccl_module_t *m;
    struct mca_coll_xccl_ipc *ipc;
    const xccl_cu_api_t *cu;
    void *ctx;                       /* the context of this rank's buffers */
    xccl_gpu_set_t *set;             /* its stream and device scratch */
    xccl_dtype_t dt;
    xccl_op_t op;
    /* Alltoallv: the call's sizes and displacements (xccl_coll_args_t.vec:
     * sbytes, sdispls, rbytes, rdispls, size entries each); NULL else. */
    const size_t *a2av;
    char error[200];                 /* the first driver error ("": none) */
    int pushed;                      /* ctx is current from the go to close */
    /* A nonblocking call (async) never synchronises: a flag it posts is
     * an event recorded on its stream, written to its slot once a query
     * says the work before it is done (in order; pend[] the flag words). */
    int async;
    int npend, pend_head;
    uint64_t pend[XCCL_IPC_PEND];
    xccl_gpu_queue_t q;              /* the schedule's copies and reductions, coalesced */
    xccl_peer_t peer;
} ipc_call_t;

struct mca_coll_xccl_ipc {
    xccl_ipc_cache_t maps;
    xccl_ipc_exports_t exports;
    int up;                          /* 1 slots mapped, -1 never (all ranks alike), 0 not tried */
    int one_device;                  /* every rank's current device was the same GPU at set-up */
    int no_batch;                    /* xccl_copy_batch did not launch here: copies one by one */
    char pci[32];                    /* that device ("" none) */
    void *device_ctx;                /* a context found on it (buffers elsewhere: no cuda ipc) */
    /* Flags the GPUs wait for (every rank alike; ranks on several GPUs):
     * flag value v of rank j is also an interprocess event, recorded on
     * j's stream where j posts it, waited for by the streams of the ranks
     * that wait for the flag: no host synchronisation but the call's last.
     * NULL: host flags only, each posted after a synchronisation. */
    xccl_cuevent_t *ev;              /* [size * XCCL_IPC_EVENTS], this rank's own and its peers' opened */
    void *ev_ctx;                    /* the context they belong to (calls elsewhere: no cuda ipc) */
    ipc_slot_t **slot;               /* [size] every rank's, this rank's too */
    size_t slot_bytes;
    /* Calls that want CUDA IPC are numbered (epoch) in call order, the
     * same on every rank; their agreements and schedules use the slots one
     * at a time, in that order: turn is the number whose turn it is (a
     * blocking call waits for its turn, progressing the nonblocking calls
     * made before it).  Written by the thread that holds the turn. */
    uint64_t epoch;                  /* the next call's number */
    uint64_t turn;
    char **mapped;                   /* [2 * size] the call's peer buffers (SEND, RECV) */
    ipc_call_t call;
};

/* ------------------------------------------------------------ the agreement and the turn */

/* A rank's agreement word for call (epoch) e: 4 e + stage.  Call numbers
 * rise by one per call that wants CUDA IPC, on every rank alike. */
enum {
    XCCL_IPC_STAGE_OUT = 0,          /* round 1: cannot take part (and went on) */
    XCCL_IPC_STAGE_IN = 1,           /* round 1: can */
    XCCL_IPC_STAGE_MAPPED = 2        /* round 2 done (`mapped` says how) */
};

static inline void mca_coll_xccl_gpu_ipc_publish(mca_coll_xccl_module_t *m,
                                                 struct mca_coll_xccl_ipc *ipc, uint64_t e,
                                                 int stage)
{
    __atomic_store_n(&ipc->slot[m->rank]->agree, 4 * e + (uint64_t) stage, __ATOMIC_RELEASE);
}

/* Whether every rank's word for call e has reached stage. */
static inline int mca_coll_xccl_gpu_ipc_reached(const mca_coll_xccl_module_t *m,
                                                const struct mca_coll_xccl_ipc *ipc, uint64_t e,
                                                int stage)
{
    for (int j = 0; j < m->size; j++) {
        if (__atomic_load_n(&ipc->slot[j]->agree, __ATOMIC_ACQUIRE) < 4 * e + (uint64_t) stage) {
            return 0;
        }
    }
    return 1;
}

/* Round 1, once reached(e, XCCL_IPC_STAGE_OUT): whether every rank said it
 * can.  A rank already past this call (a word of a later one) cannot have
 * taken part: it would be waiting for this one. */
static inline int mca_coll_xccl_gpu_ipc_round1_in(const mca_coll_xccl_module_t *m,
                                                  const struct mca_coll_xccl_ipc *ipc, uint64_t e)
{
    int all = 1;
    for (int j = 0; j < m->size; j++) {
        const uint64_t w = __atomic_load_n(&ipc->slot[j]->agree, __ATOMIC_ACQUIRE);
        all = all && (4 * e + XCCL_IPC_STAGE_IN == w || 4 * e + XCCL_IPC_STAGE_MAPPED == w);
    }
    return all;
}

/* Round 2, once reached(e, XCCL_IPC_STAGE_MAPPED): whether every rank
 * mapped what it reads.  Nobody passes this call before all published
 * round 2, and `mapped` changes only in a later round 2, which needs this
 * rank: it is stable here. */
static inline int mca_coll_xccl_gpu_ipc_round2_mapped(const mca_coll_xccl_module_t *m,
                                                      const struct mca_coll_xccl_ipc *ipc)
{
    int all = 1;
    for (int j = 0; j < m->size; j++) {
        all = all && ipc->slot[j]->mapped;
    }
    return all;
}

static inline int mca_coll_xccl_gpu_ipc_my_turn(const struct mca_coll_xccl_ipc *ipc, uint64_t e)
{
    return e == __atomic_load_n(&ipc->turn, __ATOMIC_ACQUIRE);
}

/* The call holding the turn is done with the slots. */
static inline void mca_coll_xccl_gpu_ipc_pass_turn(struct mca_coll_xccl_ipc *ipc)
{
    __atomic_store_n(&ipc->turn, ipc->turn + 1, __ATOMIC_RELEASE);
}

/* The rank that does a call's work in the "leader" form (every rank on
 * one GPU): the root of bcast and of the rooted collectives, else rank 0;
 * -1 in the "mesh" form. */
static inline int mca_coll_xccl_gpu_ipc_leader(const struct mca_coll_xccl_ipc *ipc,
                                               const mca_coll_xccl_call_t *c)
{
    return !ipc->one_device || XCCL_COLL_ALLTOALLV == c->coll ? -1   /* (mesh only) */
           : XCCL_COLL_BCAST == c->coll || xccl_coll_rooted(c->coll) ? c->root
                                                                      : 0;
}

/* Round 1's words of this rank, before it says it can: the exports, and
 * in alltoallv where each rank's block lies in its SEND (a receiver reads
 * its own entry in round 2: mca_coll_xccl_gpu_ipc_map_peers). */
static inline void mca_coll_xccl_gpu_ipc_lend(const mca_coll_xccl_module_t *m,
                                              struct mca_coll_xccl_ipc *ipc, const ipc_call_t *call,
                                              const ipc_buf_t bufs[2])
{
    ipc_slot_t *mine = ipc->slot[m->rank];
    memcpy(mine->buf, bufs, 2 * sizeof(*bufs));
    for (int q = 0; NULL != call->a2av && q < m->size; q++) {
        mine->sent[q].off = call->a2av[m->size + q];
        mine->sent[q].bytes = call->a2av[q];
    }
}

/* ------------------------------------------------------------ a call's driver helpers */

/* The call's first driver error is kept (and logged). */
static inline void mca_coll_xccl_gpu_ipc_fail(ipc_call_t *c, const char *error)
{
    if ('\0' == c->error[0]) {
        snprintf(c->error, sizeof(c->error), "%s", error);
        mca_coll_xccl_log(1, "cuda ipc: %s", error);
    }
}

/* The call's driver work, with its context current (pushed from the go
 * to close: one thread runs a blocking call). */

/* Everything the schedule's actions asked for so far, queued in order; a
 * failure is the call's (its flags are still posted). */
static inline void mca_coll_xccl_gpu_ipc_flush(ipc_call_t *c)
{
    xccl_gpu_queue_flush(&c->q);
    if ('\0' != c->q.error[0]) {
        mca_coll_xccl_gpu_ipc_fail(c, c->q.error);
    }
}

/* What this rank queued must be done before a peer may read it (or, past
 * the last flag, reuse its buffers): one synchronisation, where anything
 * was queued since the last. */
static inline void mca_coll_xccl_gpu_ipc_sync(ipc_call_t *c)
{
    mca_coll_xccl_gpu_ipc_flush(c);
    if (c->q.queued) {
        const char *error = mca_coll_xccl_gpu_sync(c->cu, c->set->in);
        if (error) {
            mca_coll_xccl_gpu_ipc_fail(c, error);
        }
        c->q.queued = 0;
    }
}

/* A nonblocking call's flags whose work is done, written in order (all of
 * them at once with now: the call failed, no peer may wait forever): 1
 * when none is left. */
static inline int mca_coll_xccl_gpu_ipc_drain_posts(ipc_call_t *c, int now)
{
    while (c->npend > 0) {
        const xccl_curesult_t rc = now ? XCCL_CUDA_SUCCESS
                                       : c->cu->EventQuery(c->set->ev[1 + c->pend_head]);
        if (XCCL_CUDA_ERROR_NOT_READY == rc) {
            return 0;
        }
        if (XCCL_CUDA_SUCCESS != rc) {
            /* the flag still goes up */
            mca_coll_xccl_gpu_ipc_fail(c, xccl_cu_error("cuEventQuery", rc));
        }
        __atomic_store_n(&c->ipc->slot[c->m->rank]->flag, c->pend[c->pend_head], __ATOMIC_RELEASE);
        c->pend_head = (c->pend_head + 1) % XCCL_IPC_PEND;
        c->npend--;
    }
    return 1;
}

/* ------------------------------------------------------------ set-up (coll_xccl_gpu_ipc_setup.c) */

/* The communicator's slots, set up by its first call that tries (on every
 * rank), and the schedules' form: "leader" where every rank is on one
 * device, else "mesh"; NULL where the slots did not map (on every rank).
 * The provider's form. */
const char *mca_coll_xccl_gpu_ipc_form(mca_coll_xccl_call_t *c, int *rc);

/* At the module's destruction: the flag events (with their context
 * current, if it is still there) and the peers' slots. */
void mca_coll_xccl_gpu_ipc_drop_events(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc);
void mca_coll_xccl_gpu_ipc_unmap_slots(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc);

/* ------------------------------------------------------------ this rank's part (coll_xccl_gpu_ipc_part.c) */

/* The buffers of the schedule (SEND, RECV) at dev[], and whether this rank
 * can take part; exports what its peers read or write into out[] (leader
 * >= 0: the "leader" form, with that rank doing the work). */
int mca_coll_xccl_gpu_ipc_own_part(const mca_coll_xccl_call_t *c, ipc_call_t *call,
                                   ipc_buf_t out[2], int leader, char *dev[2]);

/* ------------------------------------------------------------ a call's peer (coll_xccl_gpu_ipc_peer.c) */

/* The call's stream and device scratch (its context current): 1, or 0. */
int mca_coll_xccl_gpu_ipc_take_set(ipc_call_t *call, size_t scratch);

/* An event after the application's work so far (its context current):
 * 1, or 0 (the call's error). */
int mca_coll_xccl_gpu_ipc_mark_user_work(ipc_call_t *call);

/* Round 2's part: maps every peer buffer schedule s names, and takes the
 * stream (and device scratch) of the call: 1, or 0. */
int mca_coll_xccl_gpu_ipc_map_peers(mca_coll_xccl_module_t *m, ipc_call_t *call,
                                    const xccl_sched_t *s);

/* The call's stream set back (bad: after an error), if it holds one. */
void mca_coll_xccl_gpu_ipc_release_set(ipc_call_t *call, int bad);

/* The executor's hooks of a call that runs schedule s on the buffers at
 * dev[] (SEND, RECV): its xccl_peer_t, copies and reductions. */
void mca_coll_xccl_gpu_ipc_set_hooks(ipc_call_t *call, char *const dev[2], const xccl_sched_t *s,
                                     mca_coll_xccl_exec_hooks_t *hooks);

/* ------------------------------------------------------------ nonblocking calls (coll_xccl_gpu_ipc_nb.c) */

/* The provider's start and progress. */
int mca_coll_xccl_gpu_ipc_start(mca_coll_xccl_call_t *c, const xccl_sched_t *s, int algo,
                                mca_coll_xccl_host_fn_t host);
int mca_coll_xccl_gpu_ipc_progress(void);

END_C_DECLS

#endif
