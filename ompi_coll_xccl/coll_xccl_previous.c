/*
 * The fallback of a call: the saved module's function (Open MPI's own
 * collective) on the call's arguments, the one place that calls it.
 */
#include "ompi_config.h"

#include "coll_xccl_previous.h"

/* A v form's buffer as the user gave it: moved back by lo elements of dt
 * (coll_xccl_entry_vector.c moved it to its span's base). */
static void *unmoved(const void *buf, ptrdiff_t lo, struct ompi_datatype_t *dt)
{
    return NULL == buf || MPI_IN_PLACE == buf || 0 == lo
               ? (void *) buf
               : (char *) buf - lo * (ptrdiff_t) mca_coll_xccl_dtype_extent(dt);
}

/* The rooted and v forms, and barrier (mca_coll_xccl_call_previous). */
static int call_previous_more(const mca_coll_xccl_call_t *c, const void *s, void *r,
                              ompi_request_t **request)
{
    const mca_coll_xccl_prev_t *p = &c->m->prev;
    struct ompi_communicator_t *comm = c->m->comm;
    const int root = c->root;
    s = unmoved(s, c->slo, c->sdtype);
    r = unmoved(r, c->rlo, c->rdtype);
    /* scatter in place: the root's receive buffer is MPI_IN_PLACE */
    void *rs = c->in_place ? MPI_IN_PLACE : r;
    switch (c->coll) {
    case XCCL_COLL_REDUCE:
        return request ? p->ireduce(s, r, c->rcount, c->rdtype, c->op, root, comm, request,
                                    p->ireduce_module)
                       : p->reduce(s, r, c->rcount, c->rdtype, c->op, root, comm, p->reduce_module);
    case XCCL_COLL_BARRIER:
        return request ? p->ibarrier(comm, request, p->ibarrier_module)
                       : p->barrier(comm, p->barrier_module);
    case XCCL_COLL_ALLGATHERV:
        return request ? p->iallgatherv(s, c->scount, c->sdtype, r, c->rcounts, c->rdispls, c->rdtype,
                                        comm, request, p->iallgatherv_module)
                       : p->allgatherv(s, c->scount, c->sdtype, r, c->rcounts, c->rdispls, c->rdtype,
                                       comm, p->allgatherv_module);
    case XCCL_COLL_ALLTOALLV:
        return request ? p->ialltoallv(s, c->scounts, c->sdispls, c->sdtype, r, c->rcounts, c->rdispls,
                                       c->rdtype, comm, request, p->ialltoallv_module)
                       : p->alltoallv(s, c->scounts, c->sdispls, c->sdtype, r, c->rcounts, c->rdispls,
                                      c->rdtype, comm, p->alltoallv_module);
    case XCCL_COLL_GATHER:
        return request ? p->igather(s, c->scount, c->sdtype, r, c->rcount, c->rdtype, root, comm,
                                    request, p->igather_module)
                       : p->gather(s, c->scount, c->sdtype, r, c->rcount, c->rdtype, root, comm,
                                   p->gather_module);
    case XCCL_COLL_GATHERV:
        return request ? p->igatherv(s, c->scount, c->sdtype, r, c->rcounts, c->rdispls, c->rdtype,
                                     root, comm, request, p->igatherv_module)
                       : p->gatherv(s, c->scount, c->sdtype, r, c->rcounts, c->rdispls, c->rdtype,
                                    root, comm, p->gatherv_module);
    case XCCL_COLL_SCATTER:
        return request ? p->iscatter(s, c->scount, c->sdtype, rs, c->rcount, c->rdtype, root, comm,
                                     request, p->iscatter_module)
                       : p->scatter(s, c->scount, c->sdtype, rs, c->rcount, c->rdtype, root, comm,
                                    p->scatter_module);
    case XCCL_COLL_SCATTERV:
        return request ? p->iscatterv(s, c->scounts, c->sdispls, c->sdtype, rs, c->rcount, c->rdtype,
                                      root, comm, request, p->iscatterv_module)
                       : p->scatterv(s, c->scounts, c->sdispls, c->sdtype, rs, c->rcount, c->rdtype,
                                     root, comm, p->scatterv_module);
    default:
        return MPI_ERR_INTERN;
    }
}

int mca_coll_xccl_call_previous(const mca_coll_xccl_call_t *c, const void *s, void *r,
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
        return call_previous_more(c, s, r, request);
    }
}
