/*
 * Requests of xccl's that another party completes: a nonblocking call on
 * device buffers (staged: its host call's request runs on the host
 * copies, and that request's completion completes the copies back and
 * this request) and a provider's nonblocking call (a promise: the
 * provider completes it).  Neither is on the list that xccl's progress
 * advances (coll_xccl_request.c).
 */
#include "ompi_config.h"

#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"

#include "coll_xccl_promise.h"
#include "coll_xccl_gpu.h"
#include "coll_xccl_log.h"

/* ------------------------------------------------------------ staged */

/* A nonblocking call on device buffers: the host call's request (inner)
 * runs on the host copies; when it completes, its completion callback
 * completes the copies back and this request. */
typedef struct {
    ompi_coll_base_nbc_request_t super;   /* see mca_coll_xccl_request_init */
    ompi_request_t *inner;
    mca_coll_xccl_module_t *module;  /* retained while active */
    xccl_coll_t coll;
    mca_coll_xccl_staged_t st;
} staged_request_t;

static OBJ_CLASS_INSTANCE(staged_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static int staged_request_free(ompi_request_t **rptr)
{
    staged_request_t *req = (staged_request_t *) *rptr;
    if (req->inner) {
        ompi_request_free(&req->inner);
    }
    OMPI_REQUEST_FINI(&req->super.super);
    OBJ_RELEASE(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* Completes the copies back when the call succeeded. */
static int staged_end(mca_coll_xccl_module_t *m, xccl_coll_t coll, mca_coll_xccl_staged_t *st,
                      int rc)
{
    int rc2 = mca_coll_xccl_gpu_stage_out(m, coll, &st->gpu, MPI_SUCCESS == rc);
    return MPI_SUCCESS != rc ? rc : rc2;
}

static int staged_request_done(ompi_request_t *inner)
{
    staged_request_t *req = inner->req_complete_cb_data;
    int rc = staged_end(req->module, req->coll, &req->st, inner->req_status.MPI_ERROR);
    req->super.super.req_status.MPI_ERROR = rc;
    OBJ_RELEASE(req->module);
    ompi_request_complete(&req->super.super, true);
    return 0;
}

int mca_coll_xccl_staged_finish(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                mca_coll_xccl_staged_t *st, int rc, ompi_request_t *inner,
                                ompi_request_t **request)
{
    if (NULL == request || MPI_SUCCESS != rc) {
        return staged_end(m, coll, st, rc);
    }
    staged_request_t *req = OBJ_NEW(staged_request_t);
    if (NULL == req) {
        /* The host call runs already: finish it here rather than leak it. */
        ompi_request_wait(&inner, MPI_STATUS_IGNORE);
        staged_end(m, coll, st, MPI_SUCCESS);
        return mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for a request");
    }
    mca_coll_xccl_request_init(&req->super.super, sizeof(*req), staged_request_free, m);
    req->inner = inner;
    req->coll = coll;
    req->st = *st;
    OBJ_RETAIN(m);
    req->module = m;
    *request = &req->super.super;
    ompi_request_set_callback(inner, staged_request_done, req);
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------ promises */

/* A nonblocking call that a peer-access provider runs in the background
 * (coll_xccl_provider.h): the provider completes it. */
typedef struct {
    ompi_coll_base_nbc_request_t super;   /* see mca_coll_xccl_request_init */
    mca_coll_xccl_module_t *module;  /* retained while active */
} promise_t;

static OBJ_CLASS_INSTANCE(promise_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static int promise_free(ompi_request_t **rptr)
{
    promise_t *req = (promise_t *) *rptr;
    OMPI_REQUEST_FINI(&req->super.super);
    OBJ_RELEASE(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

ompi_request_t *mca_coll_xccl_promise_new(mca_coll_xccl_module_t *m)
{
    promise_t *req = OBJ_NEW(promise_t);
    if (NULL == req) {
        return NULL;
    }
    mca_coll_xccl_request_init(&req->super.super, sizeof(*req), promise_free, m);
    OBJ_RETAIN(m);
    req->module = m;
    return &req->super.super;
}

void mca_coll_xccl_promise_keep(ompi_request_t *r, int rc)
{
    promise_t *req = (promise_t *) r;
    req->super.super.req_status.MPI_ERROR = rc;
    OBJ_RELEASE(req->module);
    ompi_request_complete(&req->super.super, true);
}
