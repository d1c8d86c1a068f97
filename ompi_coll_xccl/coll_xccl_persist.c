/*
 * Persistent collectives (MPI-4 MPI_<Coll>_init; MPIX_<Coll>_init through
 * Open MPI 4.1's pcollreq extension) of the fourteen collectives xccl
 * carries.  The init runs the collective's nonblocking entry point once to
 * describe the call (mca_coll_xccl_call_run keeps the descriptor:
 * coll_xccl_path.h): the arguments are checked there, once, and an
 * invalid one is the init's error.  The request it makes, and the ways
 * its starts take: coll_xccl_persist_start.c.  A collective xccl is told
 * to leave alone (disabled, or forced to the fallback) gets the fallback's
 * persistent request from the start, where the fallback has one.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/request/request.h"

#include "coll_xccl_persist.h"
#include "coll_xccl_persist_start.h"
#include "coll_xccl_path.h"

#define XM(module) ((mca_coll_xccl_module_t *) (module))

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
    mca_coll_xccl_persist_free(&r);
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
    const int err = mca_coll_xccl_persist_call(p, &unused);
    m->persistent = 0;
    mca_coll_xccl_call_keep_to(NULL);
    if (MPI_SUCCESS != err) {
        p->call.m = NULL;
        return persist_fail(p, err);
    }
    if (NULL != p->call.m) {
        p->call.request = &p->inner; /* (any: a call with a request) */
        /* Where the buffers live, asked once: the starts (their copies of
         * the descriptor) read it, not the driver. */
        mca_coll_xccl_where_t w = { .device = 0 };
        if (NULL != xccl_cu() && !mca_coll_xccl_gpu_surely_host(&p->call)) {
            mca_coll_xccl_gpu_where(&p->call, &w);
        }
        p->mem[0] = w.mem[0];
        p->mem[1] = w.mem[1];
        p->call.mem = p->mem;
    }
    p->way = mca_coll_xccl_persist_way(p);
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
    persist_t *p = mca_coll_xccl_persist_new(XM(module), coll);
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
    persist_t *p = mca_coll_xccl_persist_new(XM(module), coll);
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
    persist_t *p = mca_coll_xccl_persist_new(XM(module), XCCL_COLL_REDUCE_SCATTER);
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
    const int rc = persist_out(mca_coll_xccl_persist_new(XM(module), XCCL_COLL_BARRIER), request);
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
    persist_t *p = mca_coll_xccl_persist_new(XM(module), XCCL_COLL_ALLGATHERV);
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
    persist_t *p = mca_coll_xccl_persist_new(XM(module), XCCL_COLL_ALLTOALLV);
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
    persist_t *p = mca_coll_xccl_persist_new(XM(module), XCCL_COLL_GATHERV);
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
    persist_t *p = mca_coll_xccl_persist_new(XM(module), XCCL_COLL_SCATTERV);
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
