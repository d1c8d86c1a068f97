/*
 * The one function every intercepted call goes through.  An entry point
 * has checked the arguments and described the call; here, in order:
 *
 *  1. decide: the fallback or xccl, from what every rank shares only
 *     (parameters, communicator size, sizes), before any data moves, so
 *     that all ranks take the same path whatever their buffers;
 *  2. peer access (CUDA IPC inside a node): where every rank can, the
 *     collective's mesh schedule on the peers' mapped buffers; else device
 *     buffers (only where the process has loaded the CUDA driver) become
 *     host copies for whichever path the call takes;
 *  3. the fallback: the saved module's function, on the host copies if any;
 *  4. or xccl: the buffers (packed copies where a datatype has gaps), the
 *     schedule (from the communicator's cache), executed to completion or
 *     as a request.
 * Every call logs one line at verbose >= 1.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opal/runtime/opal_progress.h"

#include "coll_xccl_path.h"
#include "coll_xccl_exec.h"
#include "coll_xccl_gpu.h"
#include "coll_xccl_gpu_ipc.h"
#include "coll_xccl_pack.h"
#include "coll_xccl_request.h"
#include "coll_xccl_select.h"
#include "coll_xccl_setup.h"
#include "coll_xccl_shm.h"
#include "coll_xccl_shm_latency.h"
#include "coll_xccl_gpu.h"

/* The saved module's function for c, on buffers s and r (host copies of
 * device buffers, or the user's); request: where a nonblocking call's
 * request goes.  The one place that calls the fallback for a call. */
static __opal_attribute_noinline__ int call_previous(const mca_coll_xccl_call_t *c, const void *s, void *r,
                         ompi_request_t **request)
{
    const mca_coll_xccl_prev_t *p = &c->m->prev;
    struct ompi_communicator_t *comm = c->m->comm;
    switch (c->coll) {
    case XCCL_COLL_ALLREDUCE:
        return request ? p->iallreduce(s, r, c->rcount, c->rdtype, c->op, comm, request,
                                       p->iallreduce_module)
                       : p->allreduce(s, r, c->rcount, c->rdtype, c->op, comm, p->allreduce_module);
    case XCCL_COLL_REDUCE_SCATTER:
        return request ? p->ireduce_scatter(s, r, c->rcounts, c->rdtype, c->op, comm, request,
                                            p->ireduce_scatter_module)
                       : p->reduce_scatter(s, r, c->rcounts, c->rdtype, c->op, comm,
                                           p->reduce_scatter_module);
    case XCCL_COLL_REDUCE_SCATTER_BLOCK:
        return request ? p->ireduce_scatter_block(s, r, c->rcount, c->rdtype, c->op, comm, request,
                                                  p->ireduce_scatter_block_module)
                       : p->reduce_scatter_block(s, r, c->rcount, c->rdtype, c->op, comm,
                                                 p->reduce_scatter_block_module);
    case XCCL_COLL_ALLGATHER:
        return request ? p->iallgather(s, c->scount, c->sdtype, r, c->rcount, c->rdtype, comm,
                                       request, p->iallgather_module)
                       : p->allgather(s, c->scount, c->sdtype, r, c->rcount, c->rdtype, comm,
                                      p->allgather_module);
    case XCCL_COLL_ALLTOALL:
        return request ? p->ialltoall(s, c->scount, c->sdtype, r, c->rcount, c->rdtype, comm,
                                      request, p->ialltoall_module)
                       : p->alltoall(s, c->scount, c->sdtype, r, c->rcount, c->rdtype, comm,
                                     p->alltoall_module);
    case XCCL_COLL_BCAST:
        return request ? p->ibcast(r, c->rcount, c->rdtype, c->root, comm, request,
                                   p->ibcast_module)
                       : p->bcast(r, c->rcount, c->rdtype, c->root, comm, p->bcast_module);
    default:
        return MPI_ERR_INTERN;
    }
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The end of a call of a level trial (NULL: none) that began at t0 and
 * returned rc: every rank records it (in step also after an error, a
 * local one included, so that the agreement's allreduce is the same call
 * everywhere), and the call returns rc, else the agreement's error. */
static int trial_end(mca_coll_xccl_call_t *c, xccl_trial_t *trial, uint64_t t0, int rc)
{
    if (NULL == trial) {
        return rc;
    }
    const int rc2 = mca_coll_xccl_shm_trial_end(c->m, c->coll, c->bytes, trial, now_ns() - t0);
    return MPI_SUCCESS != rc ? rc : rc2;
}

/* Runs the schedule of c on s and r (host copies, stage; or the user's
 * buffers): to completion, or with a request in the background.  The
 * communicator is set up on first use here. */
static int run_schedule(mca_coll_xccl_call_t *c, const void *s, void *r,
                        mca_coll_xccl_gpu_stage_t *stage, ompi_request_t **request)
{
    mca_coll_xccl_module_t *m = c->m;
    mca_coll_xccl_packed_t pk;
    mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
    char *ws, *wr;
    double predicted_us;
    int algo;
    int rc = mca_coll_xccl_work_buffers(c, s, r, stage, &pk, &ws, &wr);
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    hooks.bufs[XCCL_BUF_SEND] = ws;
    hooks.bufs[XCCL_BUF_RECV] = wr;
    if (MPI_SUCCESS != (rc = mca_coll_xccl_setup(m, NULL == request))) {
        mca_coll_xccl_packed_end(m, c->coll, &pk, 0, 0);
        return mca_coll_xccl_error(m, c->coll, rc, "setting the communicator up failed");
    }
    if (NULL == request) {
        mca_coll_xccl_setup_settle(m);
    } else if (!mca_coll_xccl_setup_test(m) || !mca_coll_xccl_shm_ready(m)) {
        /* Nonblocking, before the agreement and the level's vote are in:
         * device data is copied in now, the schedule is chosen later. */
        if (stage && MPI_SUCCESS != (rc = mca_coll_xccl_gpu_stage_fill(m, c->coll, stage))) {
            mca_coll_xccl_packed_end(m, c->coll, &pk, 0, 0);
            return rc;
        }
        mca_coll_xccl_call_t waiting = *c;
        waiting.request = request;
        return mca_coll_xccl_request_start_waiting(m, &waiting, &hooks, &pk);
    }
    /* The shared-memory level, its vote over (the same state on every
     * rank).  Whether a call uses it never depends on its buffers (device
     * or host may differ between ranks): device data runs it on host
     * copies.  Its schedules take turns (m->shm_turn), nonblocking ones
     * too. */
    c->args.shm_slot = XCCL_SHM_ON == m->shm_state ? mca_coll_xccl_component.shm_bytes : 0;
    /* Single copies from the peers' own buffers (process_vm_readv): the
     * mesh schedules of every collective (the reductions reduce pieces
     * copied into scratch), in blocking calls
     * (mca_coll_xccl_shm_hooks: one publication per rank). */
    c->args.peer_access = NULL == request && c->args.shm_slot && m->shm_cma ? XCCL_PEER_READ
                                                                             : XCCL_PEER_NONE;
    c->args.layout = &m->layout;
    /* Where shm (or its latency path) and the mesh may both run, the
     * level's trials time them and keep the faster (xccl_trial_t). */
    c->args.trial = c->args.peer_access ? mca_coll_xccl_shm_trial_wanted(m, c) : XCCL_TRIAL_OFF;
    xccl_trial_t *trial;
    const xccl_sched_t *sched = mca_coll_xccl_select_schedule(m, c->coll, &c->args, c->bytes,
                                                              c->es, -1, &algo, &predicted_us,
                                                              &trial);
    c->args.peer_access = c->args.trial = 0;
    if (NULL == sched) {
        mca_coll_xccl_packed_end(m, c->coll, &pk, 0, 0);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    const int level = mca_coll_xccl_sched_level(sched);
    /* Small calls of the level: the latency path, no executor (the same
     * choice on every rank: collective, sizes, op and type, algorithm). */
    const int latency = NULL == request && level && m->shm_small &&
                        algo == mca_coll_xccl_shm_lat_algo(c->coll) &&
                        (!c->reduction || NULL != c->red.kernel) &&
                        mca_coll_xccl_shm_lat_bytes(c) <= XCCL_SHM_LAT_BYTES;
    mca_coll_xccl_log_call(m, c->coll, NULL != request, c->bytes, algo, predicted_us, NULL,
                           latency ? "latency_path" : NULL);
    /* Device data: ws and wr are host copies; the schedule runs on the
     * device buffers, or on the copies while they arrive and leave; a
     * schedule of the shared-memory level on the copies, filled first (its
     * peers read them). */
    if (stage) {
        rc = level ? mca_coll_xccl_gpu_stage_fill(m, c->coll, stage)
                   : mca_coll_xccl_gpu_stage_gate(m, c->coll, stage, sched,
                                                  c->reduction ? c->red.xdt : -1,
                                                  c->reduction ? c->red.xop : -1, &hooks);
        if (MPI_SUCCESS != rc) {
            xccl_select_put(sched);
            mca_coll_xccl_packed_end(m, c->coll, &pk, 0, 0);
            return trial_end(c, trial, now_ns(), rc);
        }
    }
    if (latency) {
        xccl_select_put(sched);
        m->seq++;                    /* a call number, as the executor's would take */
        const uint64_t t0 = NULL != trial ? now_ns() : 0;
        rc = trial_end(c, trial, t0, mca_coll_xccl_shm_latency(c, ws, wr));
        int rc2 = mca_coll_xccl_packed_end(m, c->coll, &pk, MPI_SUCCESS == rc, 0);
        return MPI_SUCCESS != rc ? rc : rc2;
    }
    if (level && 0 != mca_coll_xccl_shm_hooks(m, &hooks, sched->peer_access)) {
        xccl_select_put(sched);
        mca_coll_xccl_packed_end(m, c->coll, &pk, 0, 0);
        rc = mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "publishing buffers for the peers failed");
        return trial_end(c, trial, now_ns(), rc);
    }
    mca_coll_xccl_reduce_t *red = c->reduction ? &c->red : NULL;
    if (request) {
        return mca_coll_xccl_request_start(m, c->coll, sched, &hooks, red, &pk, level, request);
    }
    if (level) {
        /* after the level's nonblocking calls made before this one */
        const uint32_t ticket = m->shm_ticket++;
        while (!mca_coll_xccl_shm_my_turn(m, ticket)) {
            opal_progress();
        }
    }
    const uint64_t t0 = NULL != trial ? now_ns() : 0;
    rc = mca_coll_xccl_exec_run(m, c->coll, sched, &hooks, red);
    if (level) {
        mca_coll_xccl_shm_pass_turn(m);
    }
    xccl_select_put(sched);
    rc = trial_end(c, trial, t0, rc);
    int rc2 = mca_coll_xccl_packed_end(m, c->coll, &pk, MPI_SUCCESS == rc, 0);
    return MPI_SUCCESS != rc ? rc : rc2;
}

/* Providers of peer access, tried in order. */
static const mca_coll_xccl_peer_provider_t *const providers[] = {
    &mca_coll_xccl_gpu_ipc_provider,
};

/* A call xccl runs, through a provider of peer access where every rank
 * can: *done alike on every rank. */
static int run_peer_access(mca_coll_xccl_call_t *c, int *done)
{
    mca_coll_xccl_module_t *m = c->m;
    *done = 0;
    for (size_t i = 0; i < sizeof(providers) / sizeof(providers[0]); i++) {
        const mca_coll_xccl_peer_provider_t *pv = providers[i];
        mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
        void *state = NULL;
        double predicted_us;
        int rc, used, go = 0;
        if (!pv->wanted(c)) {
            continue;
        }
        /* Whether the communicator can is known once it is set up: such a
         * call (blocking, on every rank) sets it up first. */
        if (!mca_coll_xccl_setup_test(m) && MPI_SUCCESS != (rc = mca_coll_xccl_setup(m, 1))) {
            return mca_coll_xccl_error(m, c->coll, rc, "setting the communicator up failed");
        }
        if (!pv->usable(m)) {
            continue;
        }
        const int mesh = xccl_select_index(c->coll, "mesh");
        c->args.layout = &m->layout;
        c->args.peer_access = XCCL_PEER_MAPPED;
        const xccl_sched_t *s = mca_coll_xccl_select_schedule(m, c->coll, &c->args, c->bytes,
                                                              c->es, mesh, &used, &predicted_us,
                                                              NULL);
        c->args.peer_access = 0;
        if (NULL == s) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        rc = used == mesh ? pv->open(c, s, &hooks, &state, &go) : MPI_SUCCESS;
        if (go) {
            mca_coll_xccl_log_call(m, c->coll, 0, c->bytes, mesh, -1.0, NULL, pv->name);
            rc = mca_coll_xccl_exec_run(m, c->coll, s, &hooks, NULL);
            rc = pv->close(c, state, rc);
            *done = 1;
        }
        xccl_select_put(s);
        if (go || MPI_SUCCESS != rc) {
            return rc;
        }
    }
    return MPI_SUCCESS;
}

/* Steps 2 to 4 (see the top) once the decision is made: why, the fallback
 * reason, or NULL. */
static int run_decided(mca_coll_xccl_call_t *c, const char *why)
{
    mca_coll_xccl_module_t *m = c->m;
    mca_coll_xccl_where_t w;
    int rc;

    if (NULL == why) {
        int done;
        rc = run_peer_access(c, &done);
        if (done || MPI_SUCCESS != rc) {
            return rc;
        }
    }
    /* Device memory only outside the heap, and only where the process has
     * loaded the driver. */
    w.device = 0;
    if (!mca_coll_xccl_gpu_surely_host(c) && NULL != xccl_cu()) {
        mca_coll_xccl_gpu_where(c, &w);
    }
    if (!w.device) {
        if (NULL != why) {
            mca_coll_xccl_log_call(m, c->coll, NULL != c->request, c->bytes, -1, -1.0, why, NULL);
            return call_previous(c, c->sbuf, c->rbuf, c->request);
        }
        return run_schedule(c, c->sbuf, c->rbuf, NULL, c->request);
    }

    /* Device buffers: the same call on host copies.  A nonblocking one
     * completes its copies back when the host call's request (inner) does. */
    mca_coll_xccl_staged_t st;
    ompi_request_t *inner = NULL, **request = c->request ? &inner : NULL;
    if (MPI_SUCCESS != (rc = mca_coll_xccl_gpu_stage_call(c, &w, &st))) {
        return rc;
    }
    if (NULL != why) {
        mca_coll_xccl_log_call(m, c->coll, NULL != c->request, c->bytes, -1, -1.0, why, NULL);
        rc = mca_coll_xccl_gpu_stage_fill(m, c->coll, &st.gpu);
        if (MPI_SUCCESS == rc) {
            rc = call_previous(c, st.s, st.r, request);
        }
    } else {
        rc = run_schedule(c, st.s, st.r, &st.gpu, request);
    }
    return mca_coll_xccl_staged_finish(m, c->coll, &st, rc, inner, c->request);
}

/* Whether a small blocking call runs the level (m->shm_small): where the
 * vote may still run, once it is over (the same answer on every rank). */
static inline int small_level(mca_coll_xccl_module_t *m)
{
    if (m->shm_small && XCCL_SHM_ON != __atomic_load_n(&m->shm_state, __ATOMIC_ACQUIRE)) {
        mca_coll_xccl_setup_settle(m);
    }
    return m->shm_small;
}

/* Whether c goes to the fallback, from what every rank shares (enable,
 * forced, tuning rules, size): the reason, or NULL. */
static inline const char *decide(const mca_coll_xccl_call_t *c)
{
    const mca_coll_xccl_component_t *k = &mca_coll_xccl_component;
    if (!k->enable[c->coll]) {
        return "disabled";
    }
    const char *why = xccl_select_fallback(&k->policy, c->coll, c->m->size, c->bytes, 0);
    /* Small messages: a blocking call of at most XCCL_SHM_LAT_BYTES runs
     * xccl's shared-memory level (its latency path) where the level is, or
     * may be, on (measured faster than tuned and coll/sm: docs/shm-level.md).
     * The fallback would compute some reductions wrongly: xccl keeps them. */
    if (xccl_select_why_small == why &&
        ((NULL == c->request && c->bytes <= XCCL_SHM_LAT_BYTES && small_level(c->m)) ||
         (c->reduction && mca_coll_xccl_stock_gets_wrong(c->rdtype, c->op)))) {
        return NULL;
    }
    return why;
}

/* Everything but the common case of mca_coll_xccl_call_run. */
static __opal_attribute_noinline__ int run_call(mca_coll_xccl_call_t *c, const char *why)
{
    /* A reduction xccl would run needs a kernel (or a commutative op). */
    if (NULL == why && c->reduction) {
        why = mca_coll_xccl_plan_reduction(c->rdtype, c->op, c->total, &c->red, &c->es);
    }
    int rc = run_decided(c, why);
    free(c->counts);
    c->counts = NULL;
    return rc;
}

int mca_coll_xccl_call_run(mca_coll_xccl_call_t *c)
{
    /* Small blocking calls on one node with the level on: the latency path
     * with the fewest steps, where the whole way would end there too (host
     * buffers: in the heap, or any where the process has not loaded the
     * CUDA driver, as run_decided tells them). */
    mca_coll_xccl_module_t *m = c->m;
    int rc;
    if ((m->shm_lat_colls >> c->coll & 1u) && NULL == c->request && c->bytes < m->shm_lat_below &&
        (mca_coll_xccl_gpu_surely_host(c) || NULL == xccl_cu()) &&
        mca_coll_xccl_shm_latency_try(c, &rc)) {
        free(c->counts);
        c->counts = NULL;
        return rc;
    }
    const char *why = decide(c);
    /* The common case, with the fewest steps: a call for the fallback
     * (below coll_xccl_small_msg_bytes) on buffers in the heap. */
    if (NULL != why && NULL == c->counts && mca_coll_xccl_gpu_surely_host(c)) {
        mca_coll_xccl_log_call(c->m, c->coll, NULL != c->request, c->bytes, -1, -1.0, why, NULL);
        return call_previous(c, c->sbuf, c->rbuf, c->request);
    }
    return run_call(c, why);
}
