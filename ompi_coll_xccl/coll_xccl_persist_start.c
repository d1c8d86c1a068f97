/*
 * A persistent request of xccl's: its making, its starts and its free
 * (the inits that make one, on the collectives' arguments:
 * coll_xccl_persist.c).  Each MPI_Start takes one of three ways:
 *
 *   the road      a copy of the descriptor through mca_coll_xccl_call_run,
 *                 as MPI_I<coll> would run it (device buffers, the level,
 *                 the fallback), without the checks; the request completes
 *                 when that call's request does;
 *   the kept      a call the road runs as a schedule of the level without
 *   call          transfers, or (small ones) as the level's latency path,
 *                 on host buffers: the call straight
 *                 (mca_coll_xccl_kept_start, coll_xccl_request.h) with the
 *                 schedule, work buffers and algorithm chosen once, no
 *                 request of its own; it runs as far as it gets without
 *                 waiting for a peer, the rest from progress, which
 *                 completes the persistent request itself;
 *   the fallback  a call the road hands to the fallback, on host buffers:
 *                 the fallback's own persistent request, made at the init
 *                 (KEEP_FALLBACK), started.
 *
 * Which way is decided once, the way the path table takes a nonblocking
 * call of the descriptor (mca_coll_xccl_call_level_plan): at the init, or
 * where the communicator's set-up or the level's vote still runs then, at
 * the first start after they are over (until then the road).  A rank that
 * decided while another still takes the road makes the same call: the
 * road's request builds the same schedule (or ends in the latency path),
 * in the same call order.  A collective disabled at run time (MPI_T)
 * takes the road, which hands it to the fallback.
 *
 * MPI_Wait and MPI_Test leave the request inactive (Open MPI's request
 * layer does that for persistent requests); MPI_Request_free frees an
 * inactive one, started or not, also after its communicator was freed
 * (the request holds the module).  Each start logs its call as a
 * nonblocking call does, with the word persistent, and counts in the
 * summary with the calls.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/request/request.h"

#include "coll_xccl_persist_start.h"
#include "coll_xccl_path.h"

static OBJ_CLASS_INSTANCE(persist_t, ompi_coll_base_nbc_request_t, NULL, NULL);

/* ------------------------------------------------------------ start */

/* The collective's nonblocking entry point on the saved arguments. */
int mca_coll_xccl_persist_call(persist_t *p, ompi_request_t **in)
{
    mca_coll_base_module_t *module = &p->m->super;
    struct ompi_communicator_t *comm = p->m->comm;
    switch (p->coll) {
    case XCCL_COLL_ALLREDUCE:
        return mca_coll_xccl_iallreduce(p->sbuf, p->rbuf, p->rcount, p->rdtype, p->op, comm, in, module);
    case XCCL_COLL_ALLGATHER:
        return mca_coll_xccl_iallgather(p->sbuf, p->scount, p->sdtype, p->rbuf, p->rcount, p->rdtype, comm,
                                        in, module);
    case XCCL_COLL_REDUCE_SCATTER:
        return mca_coll_xccl_ireduce_scatter(p->sbuf, p->rbuf, p->rcounts, p->rdtype, p->op, comm, in,
                                             module);
    case XCCL_COLL_REDUCE_SCATTER_BLOCK:
        return mca_coll_xccl_ireduce_scatter_block(p->sbuf, p->rbuf, p->rcount, p->rdtype, p->op, comm, in,
                                                   module);
    case XCCL_COLL_ALLTOALL:
        return mca_coll_xccl_ialltoall(p->sbuf, p->scount, p->sdtype, p->rbuf, p->rcount, p->rdtype, comm,
                                       in, module);
    case XCCL_COLL_BCAST:
        return mca_coll_xccl_ibcast(p->rbuf, p->rcount, p->rdtype, p->root, comm, in, module);
    case XCCL_COLL_REDUCE:
        return mca_coll_xccl_ireduce(p->sbuf, p->rbuf, p->rcount, p->rdtype, p->op, p->root, comm, in,
                                     module);
    case XCCL_COLL_BARRIER:
        return mca_coll_xccl_ibarrier(comm, in, module);
    case XCCL_COLL_ALLGATHERV:
        return mca_coll_xccl_iallgatherv(p->sbuf, p->scount, p->sdtype, p->rbuf, p->rcounts, p->rdispls,
                                         p->rdtype, comm, in, module);
    case XCCL_COLL_ALLTOALLV:
        return mca_coll_xccl_ialltoallv(p->sbuf, p->scounts, p->sdispls, p->sdtype, p->rbuf, p->rcounts,
                                        p->rdispls, p->rdtype, comm, in, module);
    case XCCL_COLL_GATHER:
        return mca_coll_xccl_igather(p->sbuf, p->scount, p->sdtype, p->rbuf, p->rcount, p->rdtype, p->root,
                                     comm, in, module);
    case XCCL_COLL_GATHERV:
        return mca_coll_xccl_igatherv(p->sbuf, p->scount, p->sdtype, p->rbuf, p->rcounts, p->rdispls,
                                      p->rdtype, p->root, comm, in, module);
    case XCCL_COLL_SCATTER:
        return mca_coll_xccl_iscatter(p->sbuf, p->scount, p->sdtype, p->rbuf, p->rcount, p->rdtype, p->root,
                                      comm, in, module);
    case XCCL_COLL_SCATTERV:
        return mca_coll_xccl_iscatterv(p->sbuf, p->scounts, p->sdispls, p->sdtype, p->rbuf, p->rcount,
                                       p->rdtype, p->root, comm, in, module);
    default:
        return MPI_ERR_INTERN;
    }
}

/* The way of p's starts (WAY_OPEN: ask again at the next start): the
 * way the path table takes a nonblocking call of its descriptor
 * (mca_coll_xccl_call_level_plan), kept where that is a schedule of the
 * level or its latency path on host buffers; else the road.  Every input
 * is fixed for the request's life once the communicator is set up and the
 * level's vote is over (the collective's enable is asked at each start). */
int mca_coll_xccl_persist_way(persist_t *p)
{
    mca_coll_xccl_module_t *m = p->m;
    mca_coll_xccl_where_t w = { .device = 0 };
    mca_coll_xccl_level_plan_t plan;
    if (NULL == p->call.m) {
        return WAY_ROAD;
    }
    mca_coll_xccl_call_t c = p->call;
    const int rc = mca_coll_xccl_call_level_plan(&c, &plan);
    if (rc <= 0) {
        return rc < 0 ? WAY_OPEN : WAY_ROAD;
    }
    if (NULL != xccl_cu() && !mca_coll_xccl_gpu_surely_host(&c)) {
        mca_coll_xccl_gpu_where(&c, &w);
    }
    if (w.device) {
        xccl_select_put(plan.sched);
        return WAY_ROAD;
    }
    mca_coll_xccl_kept_t *k = &p->kept;
    p->call.red = c.red;             /* a reduction's plan (es too) */
    p->call.es = c.es;
    p->call.args.shm_slot = c.args.shm_slot;
    p->call.args.layout = c.args.layout;
    p->algo = plan.algo;
    p->predicted_us = plan.latency || plan.latency_v ? -1.0 : plan.predicted_us;
    k->m = m;
    k->coll = c.coll;
    k->owner = &p->super.super;
    k->red = c.reduction ? &p->call.red : NULL;
    if (plan.latency) {
        xccl_select_put(plan.sched);
        mca_coll_xccl_latency_fix(&k->st, m, c.coll, &p->call.args, c.es, k->red, plan.ws, plan.wr, plan.algo);
        return WAY_KEPT;
    }
    if (plan.latency_v) {
        xccl_select_put(plan.sched);
        return 0 == mca_coll_xccl_kept_v(k, m->size, &p->call.args, c.es, plan.ws, plan.wr) ? WAY_KEPT : WAY_ROAD;
    }
    k->hooks = (mca_coll_xccl_exec_hooks_t) { .bufs = { NULL } };
    k->hooks.bufs[XCCL_BUF_SEND] = plan.ws;
    k->hooks.bufs[XCCL_BUF_RECV] = plan.wr;
    const size_t need = plan.sched->scratch_bytes;
    if (0 != mca_coll_xccl_level_hooks(m, &k->hooks, 0, plan.sched->slot_bytes) || (need && NULL == (k->scratch = malloc(need)))) {
        xccl_select_put(plan.sched);
        return WAY_ROAD;
    }
    k->sched = plan.sched;
    return WAY_KEPT;
}

static void complete(persist_t *p, int err)
{
    p->super.super.req_status.MPI_ERROR = err;
    ompi_request_complete(&p->super.super, true);
}

/* The start's call completed (from its completion, in progress): so
 * does the persistent request.  The call's request is freed at the next
 * start or with the persistent request (not here: it is not complete
 * yet while its callback runs). */
static int inner_done(ompi_request_t *in)
{
    complete((persist_t *) in->req_complete_cb_data, in->req_status.MPI_ERROR);
    return 0;
}

/* The road: a copy of the described call (which keeps its counts), or
 * the entry point where the init could not describe it. */
static int start_road(persist_t *p, ompi_request_t **in)
{
    if (NULL == p->call.m) {
        p->m->persistent = 1;
        const int err = mca_coll_xccl_persist_call(p, in);
        p->m->persistent = 0;
        return err;
    }
    mca_coll_xccl_call_t c = p->call;
    c.request = in;
    c.persistent = 1;
    c.counts = NULL;
    return mca_coll_xccl_call_run(&c);
}

/* The fallback's persistent request completed: so does p. */
static int fallback_done(ompi_request_t *fb)
{
    complete((persist_t *) fb->req_complete_cb_data, fb->req_status.MPI_ERROR);
    return 0;
}

/* A start of the fallback's persistent request (complete since p is; the
 * wait, which returns at once, leaves it inactive for its next start), as
 * MPI_Start would start it: a request that does nothing (libnbc's where
 * nothing moves: one rank, no data) completes at once. */
static int start_fallback(persist_t *p)
{
    mca_coll_xccl_log_call(p->m, p->coll, 2, p->call.bytes, -1, -1.0, p->fb_why, NULL);
    if (OMPI_REQUEST_NOOP == p->fb->req_type) {
        complete(p, MPI_SUCCESS);
        return MPI_SUCCESS;
    }
    if ((OMPI_REQUEST_COLL != p->fb->req_type && OMPI_REQUEST_PML != p->fb->req_type) ||
        NULL == p->fb->req_start) {
        return MPI_ERR_REQUEST;
    }
    if (p->fb_started) {
        (void) ompi_request_wait(&p->fb, MPI_STATUS_IGNORE);
        p->fb_started = 0;
    }
    const int err = p->fb->req_start(1, &p->fb);
    if (MPI_SUCCESS != err) {
        return err;
    }
    p->fb_started = 1;
    ompi_request_set_callback(p->fb, fallback_done, p);
    return MPI_SUCCESS;
}

/* MPI_Start and MPI_Startall. */
static __opal_attribute_noinline__ int start_all(size_t count, ompi_request_t **requests)
{
    int rc = MPI_SUCCESS;
    for (size_t i = 0; i < count; i++) {
        persist_t *p = (persist_t *) requests[i];
        ompi_request_t *r = &p->super.super, *in = MPI_REQUEST_NULL;
        if (OMPI_REQUEST_ACTIVE == r->req_state) {
            rc = MPI_ERR_REQUEST;    /* started twice (Open MPI 4.1 does not check) */
            continue;
        }
        if (MPI_REQUEST_NULL != p->inner) {
            ompi_request_free(&p->inner);
        }
        /* (the status's other fields stay ompi_status_empty's from the init) */
        r->req_status.MPI_ERROR = MPI_SUCCESS;
        r->req_complete = REQUEST_PENDING;
        r->req_state = OMPI_REQUEST_ACTIVE;
        if (WAY_OPEN == p->way) {
            p->way = mca_coll_xccl_persist_way(p);
        }
        if (WAY_KEPT == p->way && mca_coll_xccl_component.enable[p->coll]) {
            mca_coll_xccl_log_call(p->m, p->coll, 2, p->call.bytes, p->algo, p->predicted_us, NULL,
                                   NULL == p->kept.sched ? "latency_path" : NULL);
            mca_coll_xccl_kept_start(&p->kept);
            continue;
        }
        const int fallback = MPI_REQUEST_NULL != p->fb;
        const int err = fallback ? start_fallback(p) : start_road(p, &in);
        if (MPI_SUCCESS != err) {
            /* nothing runs: the request stays inactive, the error is the start's */
            r->req_status.MPI_ERROR = err;
            r->req_complete = REQUEST_COMPLETED;
            r->req_state = OMPI_REQUEST_INACTIVE;
            rc = err;
            continue;
        }
        if (fallback) {
            continue;                /* its completion completes p */
        }
        if (REQUEST_COMPLETE(in)) {
            complete(p, in->req_status.MPI_ERROR);
            ompi_request_free(&in);
        } else {
            p->inner = in;
            ompi_request_set_callback(in, inner_done, p);
        }
    }
    return rc;
}

/* The common case first, in the fewest steps: one request (MPI_Start)
 * whose way is kept, the collective enabled, no road call's request to
 * free (start_all does the same). */
static int persist_start(size_t count, ompi_request_t **requests)
{
    persist_t *p = 1 == count ? (persist_t *) requests[0] : NULL;
    ompi_request_t *r = NULL != p ? &p->super.super : NULL;
    if (NULL == p || WAY_KEPT != p->way || OMPI_REQUEST_ACTIVE == r->req_state ||
        MPI_REQUEST_NULL != p->inner || !mca_coll_xccl_component.enable[p->coll]) {
        return start_all(count, requests);
    }
    r->req_status.MPI_ERROR = MPI_SUCCESS;
    r->req_complete = REQUEST_PENDING;
    r->req_state = OMPI_REQUEST_ACTIVE;
    mca_coll_xccl_log_call(p->m, p->coll, 2, p->call.bytes, p->algo, p->predicted_us, NULL,
                           NULL == p->kept.sched ? "latency_path" : NULL);
    return mca_coll_xccl_kept_start(&p->kept);
}

/* ------------------------------------------------------------ free */

int mca_coll_xccl_persist_free(ompi_request_t **rptr)
{
    persist_t *p = (persist_t *) *rptr;
    if (!REQUEST_COMPLETE(&p->super.super)) {
        return MPI_ERR_REQUEST;      /* an active collective request may not be freed */
    }
    if (MPI_REQUEST_NULL != p->inner) {
        ompi_request_free(&p->inner);
    }
    if (NULL != p->call.m) {
        free(p->call.counts);
    }
    if (NULL != p->kept.sched) {
        xccl_select_put(p->kept.sched);
    }
    free(p->kept.scratch);
    free(p->kept.v_vec);
    if (MPI_REQUEST_NULL != p->fb) {
        if (p->fb_started) {
            (void) ompi_request_wait(&p->fb, MPI_STATUS_IGNORE);
        }
        ompi_request_free(&p->fb);
    }
    free(p->arrays);
    OBJ_RELEASE(p->m);
    OMPI_REQUEST_FINI(&p->super.super);
    OBJ_RELEASE(p);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int persist_cancel(ompi_request_t *r, int flag)
{
    (void) r;
    (void) flag;
    return MPI_ERR_REQUEST;
}

/* ------------------------------------------------------------ new */

/* An inactive persistent request of coll on m (complete: a wait before
 * the first start returns at once); NULL: out of memory. */
persist_t *mca_coll_xccl_persist_new(mca_coll_xccl_module_t *m, xccl_coll_t coll)
{
    persist_t *p = OBJ_NEW(persist_t);
    if (NULL == p) {
        return NULL;
    }
    ompi_request_t *r = &p->super.super;
    memset((char *) p + sizeof(*r), 0, sizeof(*p) - sizeof(*r));
    OMPI_REQUEST_INIT(r, true);
    r->req_type = OMPI_REQUEST_COLL;
    r->req_start = persist_start;
    r->req_free = mca_coll_xccl_persist_free;
    r->req_cancel = persist_cancel;
    r->req_mpi_object.comm = m->comm;
    r->req_status = ompi_status_empty;
    p->inner = MPI_REQUEST_NULL;
    p->fb = MPI_REQUEST_NULL;
    p->coll = coll;
    OBJ_RETAIN(m);
    p->m = m;
    return p;
}
