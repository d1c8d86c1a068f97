/*
 * The entries of the v forms' latency path that run a blocking call
 * (coll_xccl_latency_v_call.c): the call, with the executor's step for a
 * rank's large blocks, and its fast way from the entry (coll_xccl_path.h).
 * The steps and the requests' entries are coll_xccl_latency_v.h's.
 */
#ifndef MCA_COLL_XCCL_LATENCY_V_CALL_H
#define MCA_COLL_XCCL_LATENCY_V_CALL_H

#include "coll_xccl_call.h"
#include "coll_xccl_gpu.h"
#include "coll_xccl_gpu_ipc.h"
#include "coll_xccl_latency_v.h"
#include "coll_xccl_request.h"

BEGIN_C_DECLS

/* One blocking call c on its work buffers ws, wr (the user's where
 * nothing needs packing, coll_xccl_pack.c's otherwise; NULL where the
 * rank has none; alltoallv's SEND apart from RECV where a block may be
 * large), host copies of device buffers where stage (filled first: the
 * peers read them); algo the call's (the level's shm, or gather's and
 * scatter's mesh: mca_coll_xccl_latency_v_wanted).  Logs one line:
 * algo and via=latency_path where this rank moved no large block, else
 * the executor's (algo=shm).  MPI_SUCCESS or an MPI error code (logged). */
int mca_coll_xccl_latency_v_call(mca_coll_xccl_call_t *c, mca_coll_xccl_gpu_stage_t *stage, const char *ws,
                                 char *wr, int algo);

/* The user's buffers as work buffers, where contiguous: 1, else 0 (also
 * for alltoallv in place, whose executor part needs SEND as a copy:
 * coll_xccl_pack.c makes it). */
static inline int mca_coll_xccl_latency_v_buffers(const mca_coll_xccl_call_t *c, const char **ws, char **wr)
{
    *ws = NULL;
    *wr = NULL;
    if (NULL != c->rbuf) {           /* none off gatherv's root and on scatterv's root in place */
        if (!mca_coll_xccl_is_contiguous(c->rdtype, c->rn)) {
            return 0;
        }
        *wr = (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
    }
    if (mca_coll_xccl_send_in_place(c)) {
        *ws = *wr;                   /* gatherv's root: its block in place */
        return XCCL_COLL_ALLTOALLV != c->coll;
    }
    if (NULL != c->sbuf) {
        if (!mca_coll_xccl_is_contiguous(c->sdtype, c->sn)) {
            return 0;
        }
        *ws = (const char *) c->sbuf + mca_coll_xccl_true_lb(c->sdtype);
    }
    return 1;
}

/* The fast way of a call that comes here (coll_xccl_path.h), the path
 * table's rule (path_latency) with fewer steps: where the whole way would
 * reach mca_coll_xccl_latency_v_wanted (blocking) or _nb_wanted
 * (nonblocking: where the level takes small nonblocking calls,
 * m->level_small_nb, and CUDA IPC, whose providers see every nonblocking
 * call first, is not set up) on every rank (the level on with its fast
 * way, m->level_lat_colls; one node of this job, which decide keeps; the
 * collective enabled and not forced: the level's shm; what fits; a
 * reduction's kernel) and the buffers are the host's and need no
 * packing.  A nonblocking call starts its request in its turn, as
 * path_latency would.  1 with the call's result in *rc, or 0: the whole
 * way. */
static inline int mca_coll_xccl_fast_latency_v(mca_coll_xccl_call_t *c, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    const mca_coll_xccl_component_t *k = &mca_coll_xccl_component;
    const int algo = xccl_select_level_index(c->coll, XCCL_LEVEL_SHM);
    const char *ws;
    char *wr;
    if (!((NULL == c->request || (m->level_small_nb && !m->gpu_ipc)) && m->level_local &&
          0 != __atomic_load_n(&m->level_lat_colls, __ATOMIC_RELAXED) && k->enable[c->coll] &&
          XCCL_SEL_AUTO == k->policy.forced[c->coll] && m->size >= 2 && m->size <= XCCL_LATENCY_V_RANKS &&
          (NULL == xccl_cu() || mca_coll_xccl_gpu_surely_host(c)) &&
          (!c->reduction || mca_coll_xccl_latency_plan(c)))) {
        return 0;
    }
    if (NULL == c->request) {
        if (!mca_coll_xccl_latency_v_fits(c) || !mca_coll_xccl_latency_v_buffers(c, &ws, &wr)) {
            return 0;
        }
        if (m->gpu_ipc && !mca_coll_xccl_gpu_ipc_pass(c)) {
            return 0;                /* CUDA IPC's agreement cannot be told yet: the whole way */
        }
        *rc = mca_coll_xccl_latency_v_call(c, NULL, ws, wr, algo);
    } else {
        c->args.shm_slot = k->shm_bytes;   /* as the whole way sets it */
        if (!mca_coll_xccl_latency_v_nb_wanted(m, c, algo) || !mca_coll_xccl_latency_v_buffers(c, &ws, &wr)) {
            return 0;
        }
        mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
        mca_coll_xccl_packed_t none = { .s = NULL };   /* nothing packed */
        hooks.bufs[XCCL_BUF_SEND] = (void *) ws;
        hooks.bufs[XCCL_BUF_RECV] = wr;
        mca_coll_xccl_log_call(m, c->coll, mca_coll_xccl_call_nb(c), c->bytes, algo, -1.0, NULL, "latency_path");
        *rc = mca_coll_xccl_request_start_lat(m, c, &hooks, &none, algo, c->request);
    }
    if (NULL != c->counts) {         /* (a blocking call's are on the entry's stack; a request copied them) */
        free(c->counts);
        c->counts = NULL;
    }
    return 1;
}

END_C_DECLS

#endif
