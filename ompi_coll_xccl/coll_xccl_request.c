/*
 * Nonblocking calls in flight.  A request of xccl's owns its schedule (a
 * reference from the communicator's cache), executor and scratch, and is
 * progressed by xccl's progress callback.  One started before the
 * communicator's set-up agreement is in waits for it with its arguments,
 * then takes its schedule (its sequence number is taken when it starts,
 * like every call's, so it is the same on all ranks).  A schedule of the
 * shared-memory level waits for its turn (the level's calls before it, in
 * call order, are done: they share the slots and flags).  A small call of
 * the level runs its latency path (coll_xccl_latency.h) in its turn,
 * from progress, without a schedule.  A call on device buffers, or a
 * provider's, has a request that another party completes
 * (coll_xccl_promise.c).
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"

#include "coll_xccl_request.h"
#include "coll_xccl_kept.h"
#include "coll_xccl_select.h"
#include "coll_xccl_setup.h"
#include "coll_xccl_level.h"
#include "coll_xccl_latency.h"
#include "coll_xccl_latency_v.h"

/* ------------------------------------------------------------ schedules */

typedef struct xccl_request {
    ompi_coll_base_nbc_request_t super;   /* see mca_coll_xccl_request_init */
    struct xccl_request *next;       /* in the list of active requests */
    mca_coll_xccl_module_t *module;  /* retained while active */
    xccl_coll_t coll;
    uint32_t seq;
    int waiting;                     /* for the set-up: no schedule yet */
    int level;                       /* holds a ticket (m->level_ticket): runs and */
    uint32_t ticket;                 /* ends in its turn (a schedule of the level) */
    int err;                         /* building its schedule failed (logged) */
    int no_level;                    /* never a schedule of the level (c->no_level) */
    int reduction;                   /* red holds the call's plan (c->reduction) */
    int nb;                          /* the verbose line's kind (mca_coll_xccl_call_nb) */
    int lat, lat_algo, lat_begun;    /* the level's latency path, for its algorithm; begun */
    union {                          /* its state: the six's, or the v forms' */
        mca_coll_xccl_latency_t lat_st;            /* (mca_coll_xccl_latency_v_coll: gather, */
        mca_coll_xccl_latency_v_t lat_v_st;        /* scatter, reduce, allgatherv) */
    };
    xccl_coll_args_t args;           /* while waiting */
    size_t *counts;                  /* args.counts, owned */
    size_t *vec;                     /* args.vec, owned */
    size_t bytes, es;
    mca_coll_xccl_exec_hooks_t hooks;
    const xccl_sched_t *sched;       /* a reference (xccl_select_put) */
    xccl_exec_t exec;
    mca_coll_xccl_reduce_t red;
    mca_coll_xccl_packed_t pk;
    void *scratch;
} xccl_request_t;

static OBJ_CLASS_INSTANCE(xccl_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static xccl_request_t *active_requests;
static opal_mutex_t active_lock = OPAL_MUTEX_STATIC_INIT;
static int progressing;
/* Active requests whose schedule has transfers (or is not built yet). */
static int active_transfers;

/* Freed requests' memory, kept for the next requests.  A request is
 * larger than glibc's per-thread cache takes (1032 bytes), and freeing
 * it next to the top of the heap makes glibc consolidate its fast bins,
 * in every nonblocking call (docs/bench/single-copy-v.md, "Request
 * memory"). */
#define REQUEST_SPARES 16
static void *spares[REQUEST_SPARES];
static int nspares;
static opal_mutex_t spares_lock = OPAL_MUTEX_STATIC_INIT;

static xccl_request_t *request_alloc(void)
{
    void *mem = NULL;
    OPAL_THREAD_LOCK(&spares_lock);
    if (nspares > 0) {
        mem = spares[--nspares];
    }
    OPAL_THREAD_UNLOCK(&spares_lock);
    if (NULL == mem) {
        return OBJ_NEW(xccl_request_t);
    }
    xccl_request_t *req = (xccl_request_t *) mem;
    OBJ_CONSTRUCT(req, xccl_request_t);
    return req;
}

/* req's last reference: destructed, its memory kept where there is room. */
static void request_dealloc(xccl_request_t *req)
{
    opal_object_t *o = (opal_object_t *) req;
    if (1 == o->obj_reference_count) {
        OPAL_THREAD_LOCK(&spares_lock);
        const int keep = nspares < REQUEST_SPARES;
        if (keep) {
            OBJ_DESTRUCT(req);
            spares[nspares++] = req;
        }
        OPAL_THREAD_UNLOCK(&spares_lock);
        if (keep) {
            return;
        }
    }
    OBJ_RELEASE(req);
}

void mca_coll_xccl_requests_fini(void)
{
    OPAL_THREAD_LOCK(&spares_lock);
    while (nspares > 0) {
        free(spares[--nspares]);
    }
    OPAL_THREAD_UNLOCK(&spares_lock);
}

static int request_free(ompi_request_t **rptr)
{
    /* MPI forbids freeing an active collective request: it is complete. */
    xccl_request_t *req = (xccl_request_t *) *rptr;
    OMPI_REQUEST_FINI(&req->super.super);
    request_dealloc(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* Everything a request holds besides its module and packed copies. */
static void request_release(xccl_request_t *req)
{
    if (NULL != req->sched) {
        xccl_exec_fini(&req->exec);
        xccl_select_put(req->sched);
        req->sched = NULL;
    }
    free(req->scratch);
    free(req->counts);
    free(req->vec);
    req->scratch = NULL;
    req->counts = NULL;
    req->vec = NULL;
    if (req->red.op) {
        OBJ_RELEASE(req->red.op);
        OBJ_RELEASE(req->red.dtype);
        req->red.op = NULL;
    }
}

/* rc: 1 done, else the execution's error, or an MPI error code already
 * logged (err). */
static void request_finish(xccl_request_t *req, int rc, int err)
{
    mca_coll_xccl_module_t *m = req->module;
    request_release(req);
    if (MPI_SUCCESS != err) {
        req->super.super.req_status.MPI_ERROR = err;
    } else if (1 != rc) {
        req->super.super.req_status.MPI_ERROR = mca_coll_xccl_exec_failed(m, req->coll);
    }
    err = mca_coll_xccl_packed_end(m, req->coll, &req->pk, 1 == rc && MPI_SUCCESS == err, 1);
    if (MPI_SUCCESS == req->super.super.req_status.MPI_ERROR) {
        req->super.super.req_status.MPI_ERROR = err;
    }
    OBJ_RELEASE(m);
    ompi_request_complete(&req->super.super, true);
}

/* Scratch and executor of a request that has its schedule: 0 or -1. */
static int request_launch(xccl_request_t *req)
{
    const size_t need = req->sched->scratch_bytes;
    const int host_scratch = need && NULL == req->hooks.bufs[XCCL_BUF_SCRATCH];
    req->scratch = host_scratch ? malloc(need) : NULL;
    if (host_scratch && NULL == req->scratch) {
        return -1;
    }
    return mca_coll_xccl_exec_init(&req->exec, req->module, req->sched, &req->hooks, &req->red,
                                   req->scratch, req->seq);
}

/* A reduction's plan, NULL for the other collectives. */
static const mca_coll_xccl_reduce_t *request_red(const xccl_request_t *req)
{
    return req->reduction ? &req->red : NULL;
}

/* A waiting request whose communicator is set up now: its schedule, then
 * launch (or the latency path, where the level would run it there).
 * MPI_SUCCESS, or an error code (logged). */
static int request_build(xccl_request_t *req)
{
    mca_coll_xccl_module_t *m = req->module;
    double predicted_us;
    int algo;
    req->args.layout = &m->layout;
    req->args.shm_slot = XCCL_LEVEL_ON == m->level_state && !req->no_level
                             ? mca_coll_xccl_component.shm_bytes
                             : 0;
    req->args.peer_access = 0;
    req->args.trial = 0;
    req->sched = mca_coll_xccl_select_schedule(m, req->coll, &req->args, req->bytes, req->es, -1,
                                               &algo, &predicted_us, NULL);
    if (NULL == req->sched) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    req->waiting = 0;
    if (mca_coll_xccl_sched_level(req->sched) && req->level &&
        (mca_coll_xccl_latency_wanted(m, req->coll, algo, &req->args, req->es, request_red(req)) ||
         mca_coll_xccl_latency_v_nb_runs(m, req->coll, &req->args, req->bytes, algo, request_red(req)))) {
        xccl_select_put(req->sched);
        req->sched = NULL;
        req->lat = 1;
        req->lat_algo = algo;
        mca_coll_xccl_log_call(m, req->coll, req->nb, req->bytes, algo, -1.0, NULL, "latency_path");
        return MPI_SUCCESS;
    }
    mca_coll_xccl_log_call(m, req->coll, req->nb, req->bytes, algo, predicted_us, NULL, NULL);
    if (mca_coll_xccl_sched_level(req->sched) &&
        (!req->level || 0 != mca_coll_xccl_level_hooks(m, &req->hooks, 0, req->sched->slot_bytes))) {
        /* (a schedule of the level always has its turn: the level was
         * not off when the call was made) */
        return mca_coll_xccl_error(m, req->coll, MPI_ERR_INTERN, "no slot for a shared-memory schedule");
    }
    return 0 == request_launch(req)
               ? MPI_SUCCESS
               : mca_coll_xccl_error(m, req->coll, OMPI_ERR_OUT_OF_RESOURCE,
                                     "out of memory for a request");
}

int mca_coll_xccl_requests_active(int *transfers)
{
    *transfers = __atomic_load_n(&active_transfers, __ATOMIC_RELAXED) > 0;
    return NULL != __atomic_load_n(&active_requests, __ATOMIC_RELAXED) || mca_coll_xccl_kept_active();
}

/* Whether req may move data over the transport: counted while active. */
static int request_transfers(const xccl_request_t *req)
{
    return !req->lat && (NULL == req->sched || req->sched->max_xfers > 0);
}

/* A request of the latency path in its turn: its numbers first, then as
 * far as it gets in a few tests.  1 done (also in error: req->err), 0 not
 * yet. */
static int request_lat_progress(xccl_request_t *req)
{
    const unsigned spins = mca_coll_xccl_spins_per_progress(MCA_COLL_XCCL_REQUEST_SPINS);
    int rc;
    if (mca_coll_xccl_latency_v_coll(req->coll)) {
        const mca_coll_xccl_reduce_t *red = request_red(req);
        rc = req->lat_begun ? mca_coll_xccl_latency_v_run(&req->lat_v_st, spins)
                            : mca_coll_xccl_latency_v_begin(&req->lat_v_st, req->module, req->coll, &req->args,
                                                            req->es, NULL != red ? red->kernel : NULL,
                                                            req->hooks.bufs[XCCL_BUF_SEND],
                                                            req->hooks.bufs[XCCL_BUF_RECV], req->seq, spins);
        req->lat_begun = 1;
    } else if (!req->lat_begun) {
        mca_coll_xccl_latency_fix(&req->lat_st, req->module, req->coll, &req->args, req->es,
                                  request_red(req), req->hooks.bufs[XCCL_BUF_SEND],
                                  req->hooks.bufs[XCCL_BUF_RECV], req->lat_algo);
        req->lat_begun = 1;
        rc = mca_coll_xccl_latency_begin(&req->lat_st, spins);
    } else {
        rc = mca_coll_xccl_latency_run(&req->lat_st, spins);
    }
    if (rc < 0) {
        req->err = mca_coll_xccl_latency_failed(req->module, req->coll, rc);
        return 0;
    }
    return rc;
}

/* Called from Open MPI's progress loop (and from xccl's own waits). */
int mca_coll_xccl_progress_requests(void)
{
    xccl_request_t *done = NULL;
    int events = mca_coll_xccl_kept_progress();
    if (NULL == active_requests) {
        return events;
    }
    OPAL_THREAD_LOCK(&active_lock);
    if (progressing) {                 /* a reduction callback re-entered progress */
        OPAL_THREAD_UNLOCK(&active_lock);
        return events;
    }
    progressing = 1;
    for (xccl_request_t **pp = &active_requests; *pp;) {
        xccl_request_t *req = *pp;
        int rc = 0;
        if (MPI_SUCCESS == req->err && req->waiting && mca_coll_xccl_setup_test(req->module) &&
            mca_coll_xccl_level_ready(req->module)) {
            req->err = request_build(req);
            if ((NULL != req->sched || req->lat) && !request_transfers(req)) {
                __atomic_fetch_sub(&active_transfers, 1, __ATOMIC_RELAXED);   /* counted waiting */
            }
        }
        /* A request holding a ticket ends in its turn, also one that failed
         * (it passes the turn on). */
        const int turn = !req->level || mca_coll_xccl_level_my_turn(req->module, req->ticket);
        if (MPI_SUCCESS == req->err && !req->waiting && turn && req->lat) {
            rc = request_lat_progress(req);
        } else if (MPI_SUCCESS == req->err && !req->waiting && turn) {
            rc = xccl_exec_progress(&req->exec);
            /* A transfer-free schedule (the level's) waits on flags:
             * test them a few times before the rest of opal_progress. */
            const unsigned spins = 0 == req->sched->max_xfers
                                       ? mca_coll_xccl_spins_per_progress(MCA_COLL_XCCL_REQUEST_SPINS) : 1;
            for (unsigned k = 1; 0 == rc && k < spins; k++) {
                rc = xccl_exec_progress(&req->exec);
            }
        }
        if (!turn || (0 == rc && MPI_SUCCESS == req->err)) {
            pp = &req->next;
            continue;
        }
        if (req->level) {
            mca_coll_xccl_level_pass_turn(req->module);
        }
        if (request_transfers(req)) {
            __atomic_fetch_sub(&active_transfers, 1, __ATOMIC_RELAXED);
        }
        *pp = req->next;               /* unlink; complete outside the lock */
        req->exec.status = rc;
        req->super.super.req_status.MPI_ERROR = req->err;
        req->next = done;
        done = req;
        events++;
    }
    progressing = 0;
    OPAL_THREAD_UNLOCK(&active_lock);
    while (done) {
        xccl_request_t *req = done;
        done = req->next;
        request_finish(req, req->exec.status, req->super.super.req_status.MPI_ERROR);
    }
    return events;
}

/* A request for a call of m that runs as hooks say, with red's reduction
 * and pk's packed copies (both taken over). */
static xccl_request_t *request_new(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                   const mca_coll_xccl_exec_hooks_t *hooks,
                                   const mca_coll_xccl_reduce_t *red, mca_coll_xccl_packed_t *pk,
                                   int64_t seq)
{
    xccl_request_t *req = request_alloc();
    if (NULL == req) {
        return NULL;
    }
    mca_coll_xccl_request_init(&req->super.super, sizeof(*req), request_free, m);
    req->coll = coll;
    req->hooks = *hooks;
    if (red) {
        req->reduction = 1;
        req->red = *red;
        if (NULL == req->red.kernel) {
            /* A user op and its datatype may be freed before completion. */
            OBJ_RETAIN(req->red.op);
            OBJ_RETAIN(req->red.dtype);
        } else {
            req->red.op = NULL;
        }
    }
    req->pk = *pk;
    mca_coll_xccl_packed_keep(&req->pk);
    memset(pk, 0, sizeof(*pk));
    OBJ_RETAIN(m);
    req->module = m;
    req->seq = seq >= 0 ? (uint32_t) seq : m->seq++;
    return req;
}

static void request_enqueue(xccl_request_t *req, ompi_request_t **request)
{
    *request = &req->super.super;
    OPAL_THREAD_LOCK(&active_lock);
    req->next = active_requests;
    active_requests = req;
    if (request_transfers(req)) {
        __atomic_fetch_add(&active_transfers, 1, __ATOMIC_RELAXED);
    }
    OPAL_THREAD_UNLOCK(&active_lock);
    mca_coll_xccl_progress_requests();   /* post the first step now */
}

/* Undoes request_new for a request that never started. */
static int request_drop(xccl_request_t *req, int err)
{
    mca_coll_xccl_module_t *m = req->module;
    const xccl_coll_t coll = req->coll;
    request_release(req);
    mca_coll_xccl_packed_end(m, coll, &req->pk, 0, 1);
    request_dealloc(req);
    err = mca_coll_xccl_error(m, coll, err, "out of memory for a request");
    OBJ_RELEASE(m);
    return err;
}

int mca_coll_xccl_request_start(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                const xccl_sched_t *s, const mca_coll_xccl_exec_hooks_t *hooks,
                                const mca_coll_xccl_reduce_t *red, mca_coll_xccl_packed_t *pk,
                                int level, int64_t seq, ompi_request_t **request)
{
    xccl_request_t *req = request_new(m, coll, hooks, red, pk, seq);
    if (NULL == req) {
        xccl_select_put(s);
        mca_coll_xccl_packed_end(m, coll, pk, 0, 0);
        return mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for a request");
    }
    req->sched = s;
    if (0 != request_launch(req)) {
        return request_drop(req, OMPI_ERR_OUT_OF_RESOURCE);
    }
    if (level) {
        req->level = 1;
        req->ticket = m->level_ticket++;
    }
    request_enqueue(req, request);
    return MPI_SUCCESS;
}

/* A request for call c on the work buffers in hooks (takes pk), with a
 * copy of its arguments; NULL: out of memory (*err, logged; pk ended). */
static xccl_request_t *request_new_call(mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                        const mca_coll_xccl_exec_hooks_t *hooks,
                                        mca_coll_xccl_packed_t *pk, int *err)
{
    xccl_request_t *req = request_new(m, c->coll, hooks, c->reduction ? &c->red : NULL, pk,
                                      c->seq);
    if (NULL == req) {
        mca_coll_xccl_packed_end(m, c->coll, pk, 0, 0);
        *err = mca_coll_xccl_error(m, c->coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for a request");
        return NULL;
    }
    req->args = c->args;
    req->nb = mca_coll_xccl_call_nb(c);
    req->bytes = c->bytes;
    req->es = c->es;
    req->no_level = c->no_level;
    if (NULL != c->args.counts) {
        const size_t n = (size_t) m->size * sizeof(size_t);
        if (NULL == (req->counts = malloc(n))) {
            *err = request_drop(req, OMPI_ERR_OUT_OF_RESOURCE);
            return NULL;
        }
        memcpy(req->counts, c->args.counts, n);
        req->args.counts = req->counts;
    }
    if (0 != c->args.nvec) {
        const size_t n = c->args.nvec * sizeof(size_t);
        if (NULL == (req->vec = malloc(n))) {
            *err = request_drop(req, OMPI_ERR_OUT_OF_RESOURCE);
            return NULL;
        }
        memcpy(req->vec, c->args.vec, n);
        req->args.vec = req->vec;
    }
    return req;
}

int mca_coll_xccl_request_start_waiting(mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                        const mca_coll_xccl_exec_hooks_t *hooks,
                                        mca_coll_xccl_packed_t *pk)
{
    int err = MPI_SUCCESS;
    xccl_request_t *req = request_new_call(m, c, hooks, pk, &err);
    if (NULL == req) {
        return err;
    }
    req->waiting = 1;
    if (XCCL_LEVEL_OFF != m->level_state && !c->no_level) {
        /* it may run a schedule of the level: its turn, in call order */
        req->level = 1;
        req->ticket = m->level_ticket++;
    }
    mca_coll_xccl_log(2, "i%s comm=%u rank=%d: waits for the communicator's set-up",
                      xccl_coll_name(c->coll), m->cid, m->world_rank);
    request_enqueue(req, c->request);
    return MPI_SUCCESS;
}

int mca_coll_xccl_request_start_lat(mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                    const mca_coll_xccl_exec_hooks_t *hooks,
                                    mca_coll_xccl_packed_t *pk, int algo, ompi_request_t **request)
{
    int err = MPI_SUCCESS;
    xccl_request_t *req = request_new_call(m, c, hooks, pk, &err);
    if (NULL == req) {
        return err;
    }
    req->lat = 1;
    req->lat_algo = algo;
    req->level = 1;
    req->ticket = m->level_ticket++;
    request_enqueue(req, request);
    return MPI_SUCCESS;
}
