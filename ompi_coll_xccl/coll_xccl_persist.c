/*
 * Persistent collectives (MPI-4 MPI_<Coll>_init; MPIX_<Coll>_init through
 * Open MPI 4.1's pcollreq extension) of the fourteen collectives xccl
 * carries.  The init runs the collective's nonblocking entry point once to
 * describe the call (mca_coll_xccl_call_run keeps the descriptor:
 * coll_xccl_path.h): the arguments are checked there, once, and an
 * invalid one is the init's error.  Each MPI_Start then takes one of
 * three ways:
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
 * summary with the calls.  A collective xccl is told to leave alone
 * (disabled, or forced to the fallback) gets the fallback's persistent
 * request from the start, where the fallback has one.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"

#include "coll_xccl_persist.h"
#include "coll_xccl_path.h"

#define XM(module) ((mca_coll_xccl_module_t *) (module))

typedef struct {
    ompi_coll_base_nbc_request_t super;   /* Open MPI's init casts the request to it */
    mca_coll_xccl_module_t *m;       /* retained until the request is freed */
    xccl_coll_t coll;
    ompi_request_t *inner;           /* the last start's call; complete once this is */
    /* the arguments, as MPI_I<coll> takes them (the v forms' arrays copied) */
    const void *sbuf;
    void *rbuf;
    int scount, rcount, root;
    int *scounts, *sdispls, *rcounts, *rdispls;   /* NULL: not given */
    int *arrays;                     /* the copies' one allocation */
    struct ompi_datatype_t *sdtype, *rdtype;
    struct ompi_op_t *op;
    /* the call described at the init (call.m NULL: not described, each
     * start runs the entry point), and the way its starts take */
    mca_coll_xccl_call_t call;
    int way;                         /* WAY_* */
    int algo;                        /* WAY_KEPT: the level's algorithm (the verbose line's) */
    double predicted_us;
    mca_coll_xccl_kept_t kept;       /* WAY_KEPT: the call */
    /* a call of the road that goes to the fallback: the fallback's own
     * persistent request (MPI_REQUEST_NULL: none), the reason */
    ompi_request_t *fb;
    const char *fb_why;
    int fb_started;                  /* fb was started since it was last waited for */
} persist_t;

enum {
    WAY_OPEN,                        /* not decided yet: the set-up or the level's vote runs */
    WAY_ROAD,                        /* mca_coll_xccl_call_run on a copy of call */
    WAY_KEPT                         /* the call straight, kept (mca_coll_xccl_kept_start) */
};

static OBJ_CLASS_INSTANCE(persist_t, ompi_coll_base_nbc_request_t, NULL, NULL);

/* ------------------------------------------------------------ start */

/* The collective's nonblocking entry point on the saved arguments. */
static int start_call(persist_t *p, ompi_request_t **in)
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
static int decide_way(persist_t *p)
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
    p->predicted_us = plan.latency ? -1.0 : plan.predicted_us;
    k->m = m;
    k->coll = c.coll;
    k->owner = &p->super.super;
    k->red = c.reduction ? &p->call.red : NULL;
    if (plan.latency) {
        xccl_select_put(plan.sched);
        mca_coll_xccl_latency_fix(&k->st, m, c.coll, &p->call.args, c.es, k->red, plan.ws, plan.wr, plan.algo);
        return WAY_KEPT;
    }
    k->hooks = (mca_coll_xccl_exec_hooks_t) { .bufs = { NULL } };
    k->hooks.bufs[XCCL_BUF_SEND] = plan.ws;
    k->hooks.bufs[XCCL_BUF_RECV] = plan.wr;
    const size_t need = plan.sched->scratch_bytes;
    if (0 != mca_coll_xccl_level_hooks(m, &k->hooks, 0) || (need && NULL == (k->scratch = malloc(need)))) {
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
        const int err = start_call(p, in);
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
            p->way = decide_way(p);
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

static int persist_free(ompi_request_t **rptr)
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

/* ------------------------------------------------------------ init */

/* An inactive persistent request of coll on m (complete: a wait before
 * the first start returns at once); NULL: out of memory. */
static persist_t *persist_new(mca_coll_xccl_module_t *m, xccl_coll_t coll)
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
    r->req_free = persist_free;
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

/* The v forms' arrays, copied (one allocation, p->arrays, freed with the
 * request): four arrays of size ints; NULL ones stay NULL. */
static int copy_arrays(persist_t *p, int size, const int *a, const int *b, const int *c, const int *d)
{
    const int *src[4] = { a, b, c, d };
    int **dst[4] = { &p->scounts, &p->sdispls, &p->rcounts, &p->rdispls };
    p->arrays = malloc(4 * (size_t) (size > 0 ? size : 1) * sizeof(int));
    if (NULL == p->arrays) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    for (int k = 0; k < 4; k++) {
        if (NULL != src[k]) {
            *dst[k] = p->arrays + (size_t) k * (size_t) size;
            memcpy(*dst[k], src[k], (size_t) size * sizeof(int));
        }
    }
    return MPI_SUCCESS;
}

static const char *fallback_why(persist_t *p);

static int persist_fail(persist_t *p, int rc)
{
    ompi_request_t *r = &p->super.super;
    persist_free(&r);
    return rc;
}

/* The init's end: the call described (its arguments checked: an error
 * is the init's, and no request is made) and its way decided where it
 * can be already. */
static int persist_out(persist_t *p, ompi_request_t **request)
{
    if (NULL == p) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    mca_coll_xccl_module_t *m = p->m;
    ompi_request_t *unused = MPI_REQUEST_NULL;
    mca_coll_xccl_call_keep_to(&p->call);
    m->persistent = XCCL_CALL_DESCRIBE;
    const int err = start_call(p, &unused);
    m->persistent = 0;
    mca_coll_xccl_call_keep_to(NULL);
    if (MPI_SUCCESS != err) {
        p->call.m = NULL;
        return persist_fail(p, err);
    }
    if (NULL != p->call.m) {
        p->call.request = &p->inner; /* (any: a call with a request) */
    }
    p->way = decide_way(p);
    p->fb_why = WAY_ROAD == p->way ? fallback_why(p) : NULL;
    *request = &p->super.super;
    return MPI_SUCCESS;
}

/* Where every start of p goes to the fallback (KEEP_FALLBACK makes the
 * fallback's persistent request then): the reason, or NULL.  Only on host
 * buffers (device data needs the road's staging) and without CUDA IPC
 * (whose provider takes a call once the communicator is set up: the
 * answer could change with it), so that the answer holds for the
 * request's life and on every rank alike. */
static const char *fallback_why(persist_t *p)
{
    mca_coll_xccl_where_t w = { .device = 0 };
    if (NULL == p->call.m || p->m->gpu_ipc) {
        return NULL;
    }
    if (NULL != xccl_cu() && !mca_coll_xccl_gpu_surely_host(&p->call)) {
        mca_coll_xccl_gpu_where(&p->call, &w);
    }
    return w.device ? NULL : mca_coll_xccl_call_fallback(&p->call);
}

/* A collective xccl is told to leave alone (coll_xccl_<coll>_enable false,
 * or its algorithm forced to fallback: the same on every rank) goes to
 * the fallback's persistent form whole, where there is one. */
static int handed_on(xccl_coll_t coll)
{
    const mca_coll_xccl_component_t *k = &mca_coll_xccl_component;
    return !k->enable[coll] || XCCL_SEL_FALLBACK == k->policy.forced[coll];
}
#define HAND_ON(name, coll, ...)                                                                  \
    do {                                                                                          \
        const mca_coll_xccl_prev_init_t *pi = &XM(module)->prev_init;                             \
        if (NULL != pi->name && handed_on(coll)) {                                                \
            return pi->name(__VA_ARGS__, comm, info, request, pi->name##_module);                 \
        }                                                                                         \
    } while (0)

/* A request whose every start goes to the fallback (persist_out found
 * p->fb_why) keeps the fallback's own persistent request, made here on
 * the user's arguments, where the fallback has one: its starts then skip
 * what the fallback's nonblocking call builds at every call (libnbc's
 * schedule); each start is still logged.  Without it, the road. */
#define KEEP_FALLBACK(name, rc, ...)                                                              \
    do {                                                                                          \
        const mca_coll_xccl_prev_init_t *pi = &XM(module)->prev_init;                             \
        persist_t *kp = MPI_SUCCESS == (rc) ? (persist_t *) *request : NULL;                      \
        if (NULL != kp && NULL != kp->fb_why && NULL != pi->name &&                                \
            MPI_SUCCESS != pi->name(__VA_ARGS__, comm, info, &kp->fb, pi->name##_module)) {        \
            kp->fb = MPI_REQUEST_NULL;                                                            \
        }                                                                                         \
    } while (0)

/* The arguments of the reductions without arrays (allreduce,
 * reduce_scatter_block, reduce) and of the collectives of blocks
 * (allgather, alltoall, bcast, gather, scatter). */
static persist_t *persist_reduction(mca_coll_base_module_t *module, xccl_coll_t coll, const void *sbuf,
                                    void *rbuf, int count, struct ompi_datatype_t *dtype,
                                    struct ompi_op_t *op, int root)
{
    persist_t *p = persist_new(XM(module), coll);
    if (p) {
        p->sbuf = sbuf;
        p->rbuf = rbuf;
        p->rcount = count;
        p->rdtype = dtype;
        p->op = op;
        p->root = root;
    }
    return p;
}

static persist_t *persist_blocks(mca_coll_base_module_t *module, xccl_coll_t coll, const void *sbuf,
                                 int scount, struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                 struct ompi_datatype_t *rdtype, int root)
{
    persist_t *p = persist_new(XM(module), coll);
    if (p) {
        p->sbuf = sbuf;
        p->scount = scount;
        p->sdtype = sdtype;
        p->rbuf = rbuf;
        p->rcount = rcount;
        p->rdtype = rdtype;
        p->root = root;
    }
    return p;
}

int mca_coll_xccl_allreduce_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                                 struct ompi_op_t *op, struct ompi_communicator_t *comm,
                                 struct ompi_info_t *info, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    HAND_ON(allreduce, XCCL_COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op);
    const int rc = persist_out(persist_reduction(module, XCCL_COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op, 0),
                       request);
    KEEP_FALLBACK(allreduce, rc, sbuf, rbuf, count, dtype, op);
    return rc;
}

int mca_coll_xccl_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                                 int rcount, struct ompi_datatype_t *rdtype,
                                 struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                 ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(allgather, XCCL_COLL_ALLGATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype);
    const int rc = persist_out(persist_blocks(module, XCCL_COLL_ALLGATHER, sbuf, scount, sdtype, rbuf, rcount,
                                      rdtype, 0),
                       request);
    KEEP_FALLBACK(allgather, rc, sbuf, scount, sdtype, rbuf, rcount, rdtype);
    return rc;
}

int mca_coll_xccl_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                                      struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(reduce_scatter, XCCL_COLL_REDUCE_SCATTER, sbuf, rbuf, rcounts, dtype, op);
    persist_t *p = persist_new(XM(module), XCCL_COLL_REDUCE_SCATTER);
    if (p) {
        p->sbuf = sbuf;
        p->rbuf = rbuf;
        p->rdtype = dtype;
        p->op = op;
        if (MPI_SUCCESS != copy_arrays(p, NULL != rcounts ? p->m->size : 0, NULL, NULL, rcounts, NULL)) {
            return persist_fail(p, OMPI_ERR_OUT_OF_RESOURCE);
        }
    }
    const int rc = persist_out(p, request);
    KEEP_FALLBACK(reduce_scatter, rc, sbuf, rbuf, rcounts, dtype, op);
    return rc;
}

int mca_coll_xccl_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount,
                                            struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                            struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                            ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(reduce_scatter_block, XCCL_COLL_REDUCE_SCATTER_BLOCK, sbuf, rbuf, rcount, dtype, op);
    const int rc = persist_out(persist_reduction(module, XCCL_COLL_REDUCE_SCATTER_BLOCK, sbuf, rbuf, rcount, dtype,
                                         op, 0),
                       request);
    KEEP_FALLBACK(reduce_scatter_block, rc, sbuf, rbuf, rcount, dtype, op);
    return rc;
}

int mca_coll_xccl_alltoall_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                                int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(alltoall, XCCL_COLL_ALLTOALL, sbuf, scount, sdtype, rbuf, rcount, rdtype);
    const int rc = persist_out(persist_blocks(module, XCCL_COLL_ALLTOALL, sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                      0),
                       request);
    KEEP_FALLBACK(alltoall, rc, sbuf, scount, sdtype, rbuf, rcount, rdtype);
    return rc;
}

int mca_coll_xccl_bcast_init(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(bcast, XCCL_COLL_BCAST, buf, count, dtype, root);
    const int rc = persist_out(persist_blocks(module, XCCL_COLL_BCAST, NULL, 0, NULL, buf, count, dtype, root),
                       request);
    KEEP_FALLBACK(bcast, rc, buf, count, dtype, root);
    return rc;
}

int mca_coll_xccl_reduce_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                              struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                              struct ompi_info_t *info, ompi_request_t **request,
                              mca_coll_base_module_t *module)
{
    HAND_ON(reduce, XCCL_COLL_REDUCE, sbuf, rbuf, count, dtype, op, root);
    const int rc = persist_out(persist_reduction(module, XCCL_COLL_REDUCE, sbuf, rbuf, count, dtype, op, root),
                       request);
    KEEP_FALLBACK(reduce, rc, sbuf, rbuf, count, dtype, op, root);
    return rc;
}

int mca_coll_xccl_barrier_init(struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    const mca_coll_xccl_prev_init_t *pi = &XM(module)->prev_init;
    if (NULL != pi->barrier && handed_on(XCCL_COLL_BARRIER)) {
        return pi->barrier(comm, info, request, pi->barrier_module);
    }
    const int rc = persist_out(persist_new(XM(module), XCCL_COLL_BARRIER), request);
    persist_t *kp = MPI_SUCCESS == rc ? (persist_t *) *request : NULL;
    if (NULL != kp && NULL != kp->fb_why && NULL != pi->barrier &&
        MPI_SUCCESS != pi->barrier(comm, info, &kp->fb, pi->barrier_module)) {
        kp->fb = MPI_REQUEST_NULL;     /* (KEEP_FALLBACK without arguments) */
    }
    return rc;
}

int mca_coll_xccl_allgatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                                  const int *rcounts, const int *displs, struct ompi_datatype_t *rdtype,
                                  struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                  ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(allgatherv, XCCL_COLL_ALLGATHERV, sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype);
    persist_t *p = persist_new(XM(module), XCCL_COLL_ALLGATHERV);
    if (p) {
        p->sbuf = sbuf;
        p->scount = scount;
        p->sdtype = sdtype;
        p->rbuf = rbuf;
        p->rdtype = rdtype;
        if (MPI_SUCCESS != copy_arrays(p, p->m->size, NULL, NULL, rcounts, displs)) {
            return persist_fail(p, OMPI_ERR_OUT_OF_RESOURCE);
        }
    }
    const int rc = persist_out(p, request);
    KEEP_FALLBACK(allgatherv, rc, sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype);
    return rc;
}

int mca_coll_xccl_alltoallv_init(const void *sbuf, const int *scounts, const int *sdispls,
                                 struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                                 const int *rdispls, struct ompi_datatype_t *rdtype,
                                 struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                 ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(alltoallv, XCCL_COLL_ALLTOALLV, sbuf, scounts, sdispls, sdtype, rbuf, rcounts, rdispls, rdtype);
    persist_t *p = persist_new(XM(module), XCCL_COLL_ALLTOALLV);
    if (p) {
        p->sbuf = sbuf;
        p->sdtype = sdtype;
        p->rbuf = rbuf;
        p->rdtype = rdtype;
        /* in place: the send arrays are not significant */
        const int in_place = MPI_IN_PLACE == sbuf;
        if (MPI_SUCCESS != copy_arrays(p, p->m->size, in_place ? NULL : scounts, in_place ? NULL : sdispls,
                                       rcounts, rdispls)) {
            return persist_fail(p, OMPI_ERR_OUT_OF_RESOURCE);
        }
    }
    const int rc = persist_out(p, request);
    KEEP_FALLBACK(alltoallv, rc, sbuf, scounts, sdispls, sdtype, rbuf, rcounts, rdispls, rdtype);
    return rc;
}

int mca_coll_xccl_gather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                              int rcount, struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(gather, XCCL_COLL_GATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype, root);
    const int rc = persist_out(persist_blocks(module, XCCL_COLL_GATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                      root),
                       request);
    KEEP_FALLBACK(gather, rc, sbuf, scount, sdtype, rbuf, rcount, rdtype, root);
    return rc;
}

int mca_coll_xccl_gatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                               const int *rcounts, const int *displs, struct ompi_datatype_t *rdtype,
                               int root, struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(gatherv, XCCL_COLL_GATHERV, sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype, root);
    persist_t *p = persist_new(XM(module), XCCL_COLL_GATHERV);
    if (p) {
        p->sbuf = sbuf;
        p->scount = scount;
        p->sdtype = sdtype;
        p->rbuf = rbuf;
        p->rdtype = rdtype;
        p->root = root;
        /* significant at the root only (elsewhere they may be NULL) */
        const int is_root = p->m->rank == root;
        if (MPI_SUCCESS != copy_arrays(p, p->m->size, NULL, NULL, is_root ? rcounts : NULL,
                                       is_root ? displs : NULL)) {
            return persist_fail(p, OMPI_ERR_OUT_OF_RESOURCE);
        }
    }
    const int rc = persist_out(p, request);
    KEEP_FALLBACK(gatherv, rc, sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype, root);
    return rc;
}

int mca_coll_xccl_scatter_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                               int rcount, struct ompi_datatype_t *rdtype, int root,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(scatter, XCCL_COLL_SCATTER, sbuf, scount, sdtype, rbuf, rcount, rdtype, root);
    const int rc = persist_out(persist_blocks(module, XCCL_COLL_SCATTER, sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                      root),
                       request);
    KEEP_FALLBACK(scatter, rc, sbuf, scount, sdtype, rbuf, rcount, rdtype, root);
    return rc;
}

int mca_coll_xccl_scatterv_init(const void *sbuf, const int *scounts, const int *displs,
                                struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                struct ompi_datatype_t *rdtype, int root,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    HAND_ON(scatterv, XCCL_COLL_SCATTERV, sbuf, scounts, displs, sdtype, rbuf, rcount, rdtype, root);
    persist_t *p = persist_new(XM(module), XCCL_COLL_SCATTERV);
    if (p) {
        p->sbuf = sbuf;
        p->sdtype = sdtype;
        p->rbuf = rbuf;
        p->rcount = rcount;
        p->rdtype = rdtype;
        p->root = root;
        const int is_root = p->m->rank == root;
        if (MPI_SUCCESS != copy_arrays(p, p->m->size, is_root ? scounts : NULL, is_root ? displs : NULL,
                                       NULL, NULL)) {
            return persist_fail(p, OMPI_ERR_OUT_OF_RESOURCE);
        }
    }
    const int rc = persist_out(p, request);
    KEEP_FALLBACK(scatterv, rc, sbuf, scounts, displs, sdtype, rbuf, rcount, rdtype, root);
    return rc;
}
