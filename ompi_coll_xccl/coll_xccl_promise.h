/*
 * Requests of xccl's that another party completes (coll_xccl_promise.c),
 * outside the progress of xccl's own requests: a provider's nonblocking
 * call, which the provider completes, and a nonblocking call on device
 * buffers, which its host call's request completes.  And the start that
 * every request of xccl's shares (mca_coll_xccl_request_init).
 */
#ifndef MCA_COLL_XCCL_PROMISE_H
#define MCA_COLL_XCCL_PROMISE_H

#include <string.h>

#include "coll_xccl.h"

BEGIN_C_DECLS

/* An active collective request of xccl's: the ompi_request_t at the start
 * of an object of `whole` bytes.  It must be an ompi_coll_base_nbc_request_t
 * first: for a derived datatype or a user op, Open MPI's MPI layer keeps
 * them alive through the request it got back (ompi_coll_base_retain_op,
 * _datatypes), writing into that struct's fields, which overwrote xccl's
 * own and crashed the progress of MPI_Iallreduce / MPI_Ibcast with derived
 * datatypes.  Zeroed past the ompi_request_t, as that constructor leaves
 * the rest. */
static inline void mca_coll_xccl_request_init(ompi_request_t *r, size_t whole,
                                              ompi_request_free_fn_t free_fn, mca_coll_xccl_module_t *m)
{
    memset((char *) r + sizeof(*r), 0, whole - sizeof(*r));
    OMPI_REQUEST_INIT(r, false);
    r->req_type = OMPI_REQUEST_COLL;
    /* A request that completes in error goes to its communicator's error
     * handler (ompi_errhandler_request_invoke reads this; Open MPI 5
     * crashed in MPI_Wait on a NULL one). */
    r->req_mpi_object.comm = m->comm;
    r->req_state = OMPI_REQUEST_ACTIVE;
    r->req_free = free_fn;
    r->req_status.MPI_ERROR = MPI_SUCCESS;
    r->req_status._cancelled = 0;
}

/* A request its owner completes (a provider's nonblocking call,
 * coll_xccl_provider.h): new (NULL: out of memory), then keep once with
 * the call's code. */
ompi_request_t *mca_coll_xccl_promise_new(mca_coll_xccl_module_t *m);
void mca_coll_xccl_promise_keep(ompi_request_t *r, int rc);

/* A call on device buffers runs on host copies (coll_xccl_gpu.c); a
 * nonblocking one completes the copies back when the host call's request
 * (inner) completes.  Ends a staged call: blocking (request NULL) or
 * started (inner). */
struct mca_coll_xccl_staged;
int mca_coll_xccl_staged_finish(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                struct mca_coll_xccl_staged *st, int rc, ompi_request_t *inner,
                                ompi_request_t **request);

END_C_DECLS

#endif
