/*
 * Nonblocking calls and their requests (coll_xccl_request.c).
 */
#ifndef MCA_COLL_XCCL_REQUEST_H
#define MCA_COLL_XCCL_REQUEST_H

#include "coll_xccl_call.h"
#include "coll_xccl_exec.h"
#include "coll_xccl_latency.h"
#include "coll_xccl_latency_v.h"
#include "coll_xccl_pack.h"
#include "coll_xccl_promise.h"

BEGIN_C_DECLS

/* Nonblocking collectives in flight (coll_xccl_request.c): advances them,
 * returns how many completed; whether any is in flight (a racy read: one
 * started on another thread is seen at the next progress call). */
int mca_coll_xccl_progress_requests(void);
int mca_coll_xccl_requests_active(int *transfers);
/* Frees the memory kept of freed requests (component close). */
void mca_coll_xccl_requests_fini(void);

/* Starts s in the background (takes the schedule reference and pk); a
 * schedule of the shared-memory level (level) takes its turn first.  seq:
 * the call number its transfers are tagged with (taken at the call, the
 * same on every rank), or -1: the communicator's next. */
int mca_coll_xccl_request_start(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                const xccl_sched_t *s, const mca_coll_xccl_exec_hooks_t *hooks,
                                const mca_coll_xccl_reduce_t *red, mca_coll_xccl_packed_t *pk,
                                int level, int64_t seq, ompi_request_t **request);
/* Queues a call whose schedule is built once the communicator's set-up
 * agreement is in (copies the arguments; takes pk). */
int mca_coll_xccl_request_start_waiting(mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                        const mca_coll_xccl_exec_hooks_t *hooks,
                                        mca_coll_xccl_packed_t *pk);

/* Queues a small call of the level for its latency path
 * (coll_xccl_latency.h), run from progress in its turn (copies the
 * arguments; takes pk); algo: the level's algorithm. */
int mca_coll_xccl_request_start_lat(mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                    const mca_coll_xccl_exec_hooks_t *hooks,
                                    mca_coll_xccl_packed_t *pk, int algo, ompi_request_t **request);

/* A call that its owner keeps from call to call (a persistent request's:
 * coll_xccl_persist.c), without a request of its own: no allocation, no
 * completion callback.  The owner sets it up once, as the path table
 * would run the call as a request: a call of the level's latency path
 * (sched NULL; st's fixed part: mca_coll_xccl_latency_fix), of the v
 * forms' latency path (sched NULL, v_args: mca_coll_xccl_kept_v), or a
 * schedule of the level without transfers (sched, hooks with the work
 * buffers, the slot and the peers, red, scratch). */
typedef struct mca_coll_xccl_kept {
    mca_coll_xccl_module_t *m;
    xccl_coll_t coll;
    ompi_request_t *owner;           /* completed, with the call's code, once it is done */
    const xccl_sched_t *sched;
    mca_coll_xccl_latency_t st;
    mca_coll_xccl_exec_hooks_t hooks;
    mca_coll_xccl_reduce_t *red;
    void *scratch;
    /* the v forms' latency path: each start begins on v_a, the owner's
     * v_args with its sizes copied (the steps change them) */
    const xccl_coll_args_t *v_args;
    xccl_coll_args_t v_a;
    size_t *v_vec;                   /* the copy: v_len entries (0: v_args' own, unchanged) */
    size_t v_len, v_es;
    const char *v_ws;
    char *v_wr;
    mca_coll_xccl_latency_v_t v;
    /* in flight */
    struct mca_coll_xccl_kept *next;
    xccl_exec_t e;
    uint32_t seq;                    /* its call number */
    uint32_t ticket;                 /* its turn on the level (m->level_ticket) */
    int begun;                       /* has its numbers and units (the latency path) or its
                                      * executor (a schedule) */
    int rc;                          /* how it ended (progress: until it is completed) */
} mca_coll_xccl_kept_t;

/* Starts k's call: its call number and the level's next turn; where that
 * turn has come (no call of the level in flight), the call runs at once
 * as far as it gets without waiting for a peer, and the rest runs from
 * progress, in its turn.  Completes k->owner once the call is done, maybe
 * before it returns; never waits for another rank.  MPI_SUCCESS (an
 * error is the owner's). */
int mca_coll_xccl_kept_start(mca_coll_xccl_kept_t *k);

/* Sets k up for a call of the v forms' latency path on the owner's a (which
 * stays), with work buffers ws, wr: 0, or -1 out of memory (k->v_vec then
 * NULL; free it with the owner). */
int mca_coll_xccl_kept_v(mca_coll_xccl_kept_t *k, int size, const xccl_coll_args_t *a, size_t es,
                         const char *ws, char *wr);

END_C_DECLS

#endif
