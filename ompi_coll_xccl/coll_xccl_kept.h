/*
 * Kept calls (coll_xccl_kept.c): a persistent request's call, run as the
 * path table would run it as a request, without a request of its own.
 */
#ifndef MCA_COLL_XCCL_KEPT_H
#define MCA_COLL_XCCL_KEPT_H

#include "coll_xccl_exec.h"
#include "coll_xccl_latency.h"
#include "coll_xccl_latency_v.h"

BEGIN_C_DECLS

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

/* Advances the kept calls in flight, each in its turn, and completes
 * the owners of those that ended: how many ended.  Called from
 * mca_coll_xccl_progress_requests. */
int mca_coll_xccl_kept_progress(void);
/* Whether a kept call is in flight (a racy read, as
 * mca_coll_xccl_requests_active). */
int mca_coll_xccl_kept_active(void);

END_C_DECLS

#endif
