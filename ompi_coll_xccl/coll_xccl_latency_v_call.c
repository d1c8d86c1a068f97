/*
 * The entries of the v forms' latency path (coll_xccl_latency_v.h): a
 * blocking call, with step 4 where this rank has a large block; the
 * steps, and the requests' begin and run, are in coll_xccl_latency_v.c.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>

#include "opal/runtime/opal_progress.h"

#include "coll_xccl_exec.h"
#include "coll_xccl_latency_v_call.h"
#include "coll_xccl_log.h"
#include "coll_xccl_select.h"

/* Step 4 where this rank has a large block: the level's schedule of the
 * call's counts as the steps (coll_xccl_latency_v.c) left them, in its
 * turn (as path_schedule runs one), logged as the executor's. */
static int executor(mca_coll_xccl_call_t *c, const char *ws, char *wr)
{
    mca_coll_xccl_module_t *m = c->m;
    mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
    int used, rc;
    double us;
    c->args.layout = &m->layout;
    c->args.shm_slot = mca_coll_xccl_component.shm_bytes;
    const xccl_sched_t *s = mca_coll_xccl_select_schedule(m, c->coll, &c->args, c->bytes, c->es,
                                                          xccl_select_level_index(c->coll, XCCL_LEVEL_SHM),
                                                          &used, &us, NULL);
    if (NULL == s) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    mca_coll_xccl_log_call(m, c->coll, 0, c->bytes, used, us, NULL, NULL);
    hooks.bufs[XCCL_BUF_SEND] = (void *) ws;
    hooks.bufs[XCCL_BUF_RECV] = wr;
    if (0 != mca_coll_xccl_level_hooks(m, &hooks, s->peer_access, s->slot_bytes)) {
        rc = mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "publishing buffers for the peers failed");
    } else {
        const uint32_t ticket = m->level_ticket++;
        while (!mca_coll_xccl_level_my_turn(m, ticket)) {
            opal_progress();
        }
        rc = mca_coll_xccl_exec_run(m, c->coll, s, &hooks, NULL);
        mca_coll_xccl_level_pass_turn(m);
    }
    xccl_select_put(s);
    return rc;
}

int mca_coll_xccl_latency_v_call(mca_coll_xccl_call_t *c, mca_coll_xccl_gpu_stage_t *stage, const char *ws,
                                 char *wr, int algo)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_level *h = m->level;
    const xccl_coll_t coll = c->coll;
    /* set field by field (mca_coll_xccl_latency_v_place): zeroing it all
     * costs a call more */
    mca_coll_xccl_latency_v_t v;
    v.vec = (size_t *) c->args.vec;
    int r = stage ? mca_coll_xccl_gpu_stage_fill(m, coll, stage) : MPI_SUCCESS;
    if (MPI_SUCCESS != r) {
        return r;
    }
    size_t even[128];
    if (XCCL_COLL_GATHER == coll || XCCL_COLL_SCATTER == coll) {
        const int n = m->size;
        v.vec = 2 * (size_t) n <= sizeof(even) / sizeof(even[0]) ? even : malloc(2 * (size_t) n * sizeof(size_t));
        if (NULL == v.vec) {
            return mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for the counts");
        }
        mca_coll_xccl_latency_v_even(v.vec, n, c->args.block);
    }
    /* after the level's nonblocking calls made before this one */
    while (!mca_coll_xccl_latency_idle(m)) {
        opal_progress();
    }
    v.direct = !m->level_cma                                  ? 0
               : mca_coll_xccl_latency_v_even_direct(m, coll) ? XCCL_LATENCY_V_DIRECT_ALL
               : XCCL_COLL_ALLTOALLV == coll                  ? XCCL_LATENCY_V_DIRECT_ALLTOALLV
               : XCCL_COLL_SCATTERV == coll                   ? XCCL_LATENCY_V_DIRECT_SCATTERV
               : XCCL_COLL_GATHERV == coll && m->size <= XCCL_LATENCY_V_DIRECT_RANKS ? XCCL_LATENCY_V_DIRECT_GATHERV
                                                              : 0;
    mca_coll_xccl_latency_v_place(&v, m, coll, &c->args, c->es, c->reduction ? c->red.kernel : NULL, ws, wr);
    r = mca_coll_xccl_latency_v_steps(&v, 1);
    if (NULL != v.vec && v.vec != even && v.vec != c->args.vec) {
        free(v.vec);
    }
    if (r < 0) {
        return mca_coll_xccl_latency_failed(m, coll, r);
    }
    const uint32_t seq = (uint32_t) m->seq;   /* this call's executor flags */
    if (v.large) {
        /* (gather, scatter: never, all of them fit or go by single copies) */
        r = executor(c, ws, wr);
    } else {
        (void) xccl_segment_flag_post(h->seg, (uint32_t) m->seq++, LATV_DONE);
        mca_coll_xccl_log_call(m, coll, 0, c->bytes, algo, -1.0, NULL,
                               v.readers || v.took ? "latency_path+single_copy" : "latency_path");
        r = MPI_SUCCESS;
    }
    if (v.readers && MPI_SUCCESS == r && 1 != mca_coll_xccl_latency_v_readers_done(&v, seq, 1)) {
        r = mca_coll_xccl_latency_failed(m, coll, -1);
    }
    return r;
}
