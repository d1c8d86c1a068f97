/*
 * The road of a call.  An entry point checks the arguments, describes the
 * call (mca_coll_xccl_call_t) and hands it to mca_coll_xccl_call_run,
 * which takes, in order:
 *
 *   1. the latency path's fast way (below): a small call on one node whose
 *      way the entry already knows ends in the latency path;
 *   2. decide (coll_xccl_decide.c): the fallback or xccl, from what every
 *      rank shares only, before any data moves;
 *   3. the fallback's fast way: a call for the fallback on heap buffers;
 *   4. the path table (coll_xccl_path.c): each path takes the call or
 *      hands it on to the next.
 *
 * Each fast way is the way the path table would take for the call, with
 * fewer steps; its rule is written once, here or in coll_xccl_path.c.
 */
#ifndef MCA_COLL_XCCL_PATH_H
#define MCA_COLL_XCCL_PATH_H

#include <stdlib.h>

#include "coll_xccl_call.h"
#include "coll_xccl_decide.h"
#include "coll_xccl_peers.h"
#include "coll_xccl_gpu.h"
#include "coll_xccl_gpu_ipc.h"
#include "coll_xccl_latency.h"
#include "coll_xccl_latency_v_call.h"
#include "coll_xccl_request.h"
#include "coll_xccl_level.h"

BEGIN_C_DECLS

/* Steps 2 to 4 of the road: MPI_SUCCESS or an MPI error code (logged).
 * Frees c->counts. */
int mca_coll_xccl_call_route(mca_coll_xccl_call_t *c);

/* Whether a blocking call of c's size still goes to the level's trials
 * (the whole way): its size class has not yet picked shm. */
static inline int mca_coll_xccl_trial_first(const mca_coll_xccl_module_t *m,
                                            const mca_coll_xccl_call_t *c)
{
    return NULL == c->request && mca_coll_xccl_level_trial_wanted(m, c) &&
           !(m->level->lat_picked[c->coll] >> xccl_size_class(c->bytes) & 1u);
}

/* The work buffers of a latency-path call, as coll_xccl_pack.c makes them
 * where nothing needs packing, and the level's algorithm as its rule picks
 * it: 1, or 0 where the call must go the whole way (packing, no reduction
 * kernel, the size between XCCL_LATENCY_BYTES and small_msg_bytes, which
 * decide hands the fallback, or the level's trials still to run). */
static inline int mca_coll_xccl_latency_buffers(mca_coll_xccl_call_t *c, const char **ws_out,
                                                char **wr_out, int *algo_out)
{
    mca_coll_xccl_module_t *m = c->m;
    char *ws, *wr = (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
    if (c->reduction) {
        if (!mca_coll_xccl_latency_plan(c)) {
            return 0;
        }
        ws = c->in_place ? wr : (char *) c->sbuf + mca_coll_xccl_true_lb(c->rdtype);
    } else if (!mca_coll_xccl_is_contiguous(c->rdtype, c->rn)) {
        return 0;
    } else if (XCCL_COLL_BCAST == c->coll) {
        ws = NULL;
    } else if (c->in_place) {
        ws = XCCL_COLL_ALLGATHER == c->coll ? wr + (size_t) m->rank * c->args.block : wr;
    } else if (mca_coll_xccl_is_contiguous(c->sdtype, c->sn)) {
        ws = (char *) c->sbuf + mca_coll_xccl_true_lb(c->sdtype);
    } else {
        return 0;
    }
    if (mca_coll_xccl_latency_len(c->coll, &c->args, c->es, m->size) > XCCL_LATENCY_BYTES ||
        (c->bytes > XCCL_LATENCY_BYTES &&
         c->bytes < (size_t) mca_coll_xccl_component.policy.small_bytes)) {
        return 0;
    }
    /* shm, or for allreduce shm_small (the whole vector on every rank) up
     * to xccl_select_whole_max */
    const int algo = xccl_select_level_index(c->coll, XCCL_COLL_ALLREDUCE == c->coll &&
                                                          c->bytes <= xccl_select_whole_max(m->size)
                                                          ? XCCL_LEVEL_SHM_SMALL
                                                          : XCCL_LEVEL_SHM);
    if (mca_coll_xccl_trial_first(m, c)) {
        return 0;
    }
    *ws_out = ws;
    *wr_out = wr;
    *algo_out = algo;
    return 1;
}

/* Step 1, the latency path's fast way.  Its rule: a blocking call, or a
 * nonblocking one where the level takes small nonblocking calls
 * (m->level_small_nb) and CUDA IPC, whose providers see every nonblocking
 * call first, is not set up; a collective the level runs on the latency
 * path (m->level_lat_colls: set once the level is on; the collective
 * still enabled, which MPI_T may change at run time); host buffers (in
 * the heap, or any where the process has not loaded the CUDA driver); and
 * the work buffers without packing (mca_coll_xccl_latency_buffers).  Where
 * CUDA IPC is set up, the call first tells its agreement that it skips it
 * (mca_coll_xccl_gpu_ipc_pass), or goes the whole way where that cannot
 * be told yet.  1 with the call's result in *rc, or 0: nothing done. */
static inline int mca_coll_xccl_fast_latency(mca_coll_xccl_call_t *c, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    const char *ws;
    char *wr;
    int algo;
    if (mca_coll_xccl_latency_v_coll(c->coll)) {
        return mca_coll_xccl_fast_latency_v(c, rc);    /* the v forms, gather, scatter, reduce */
    }
    if (!((NULL == c->request || (m->level_small_nb && !m->gpu_ipc)) &&
          (m->level_lat_colls >> c->coll & 1u) && mca_coll_xccl_component.enable[c->coll] &&
          (NULL == xccl_cu() || mca_coll_xccl_gpu_surely_host(c)))) {
        return 0;
    }
    if (m->gpu_ipc && !mca_coll_xccl_gpu_ipc_pass(c)) {
        return 0;
    }
    if (!mca_coll_xccl_latency_buffers(c, &ws, &wr, &algo)) {
        return 0;
    }
    mca_coll_xccl_log_call(m, c->coll, mca_coll_xccl_call_nb(c), c->bytes, algo, -1.0, NULL, "latency_path");
    if (NULL != c->request) {
        /* a request in its turn, as the path table would start it */
        mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
        mca_coll_xccl_packed_t none = { .s = NULL };   /* nothing packed */
        hooks.bufs[XCCL_BUF_SEND] = (void *) ws;
        hooks.bufs[XCCL_BUF_RECV] = wr;
        *rc = mca_coll_xccl_request_start_lat(m, c, &hooks, &none, algo, c->request);
    } else {
        m->seq++;                    /* a call number, as the executor's would take */
        *rc = mca_coll_xccl_latency_call(c, ws, wr, algo);
    }
    if (NULL != c->counts) {         /* free(NULL) is a call too */
        free(c->counts);
        c->counts = NULL;
    }
    return 1;
}

/* A persistent request's init describes its call once
 * (coll_xccl_persist.c): while m->persistent is XCCL_CALL_DESCRIBE, the
 * entry point checks the arguments and fills the descriptor as for a
 * call, and mca_coll_xccl_call_run keeps it where
 * mca_coll_xccl_call_keep_to said (this thread's last word) instead of
 * running it.  The kept descriptor owns c->counts, which then holds
 * args.counts or args.vec (copied where they lay on the entry's stack). */
#define XCCL_CALL_DESCRIBE 2
void mca_coll_xccl_call_keep_to(mca_coll_xccl_call_t *to);
int mca_coll_xccl_call_keep(mca_coll_xccl_call_t *c) __attribute__((cold));

/* Runs the call an entry point described: MPI_SUCCESS or an MPI error
 * code (logged).  Frees c->counts. */
static inline int mca_coll_xccl_call_run(mca_coll_xccl_call_t *c)
{
    int rc;
    if (__builtin_expect(XCCL_CALL_DESCRIBE == c->persistent, 0)) {
        return mca_coll_xccl_call_keep(c);
    }
    if (mca_coll_xccl_fast_latency(c, &rc)) {
        return rc;
    }
    return mca_coll_xccl_call_route(c);
}

END_C_DECLS

#endif
