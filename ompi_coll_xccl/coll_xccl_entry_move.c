/*
 * Entry points of the collectives that move data without reducing it:
 * MPI_(I)Allgather, MPI_(I)Alltoall, MPI_(I)Bcast.  Each checks its
 * arguments (an MPI error code before any data moves, also with
 * mpi_param_check 0), describes the call and hands it to
 * mca_coll_xccl_call_run.  Whether xccl runs the call rests on the bytes
 * alone, which type signatures make equal on every rank; a datatype with
 * gaps is packed (coll_xccl_pack.c).
 */
#include "ompi_config.h"

#include "coll_xccl_path.h"

#define XM(module) ((mca_coll_xccl_module_t *) (module))

/* ------------------------------------------------------------ allgather, alltoall */

/* Checks of the (send, recv) argument pairs. */
static int check_pair(mca_coll_xccl_call_t *c, size_t send_blocks)
{
    int err;
    const size_t P = (size_t) c->m->size;
    if (c->rcount < 0 || (!c->in_place && c->scount < 0)) {
        return mca_coll_xccl_call_error(c, MPI_ERR_COUNT, "negative count");
    }
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_dtype(c->rdtype)) ||
        (!c->in_place && MPI_SUCCESS != (err = mca_coll_xccl_check_dtype(c->sdtype)))) {
        return mca_coll_xccl_call_error(c, err, "invalid datatype");
    }
    if (MPI_IN_PLACE == c->rbuf) {
        return mca_coll_xccl_call_error(c, MPI_ERR_BUFFER, "MPI_IN_PLACE as the receive buffer");
    }
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_buf(c->rbuf, (size_t) c->rcount * P, c->rdtype)) ||
        (!c->in_place && MPI_SUCCESS != (err = mca_coll_xccl_check_buf(
                                             c->sbuf, (size_t) c->scount * send_blocks, c->sdtype)))) {
        return mca_coll_xccl_call_error(c, err, "NULL buffer with a nonzero count");
    }
    /* A correct program sends what every rank receives from it, in bytes
     * at least (type signatures match); anything else would leave some
     * ranks waiting, so it is this rank's error. */
    if (!c->in_place && (size_t) c->scount * mca_coll_xccl_dtype_size(c->sdtype) !=
                            (size_t) c->rcount * mca_coll_xccl_dtype_size(c->rdtype)) {
        return mca_coll_xccl_call_error(c, MPI_ERR_TRUNCATE,
                                        "the send and receive blocks differ in size (type "
                                        "signatures differ)");
    }
    return MPI_SUCCESS;
}

static int movement(xccl_coll_t coll, const void *sbuf, int scount,
                    struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                    struct ompi_datatype_t *rdtype, mca_coll_xccl_module_t *m,
                    ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    mca_coll_xccl_call_init(&c, m, coll, request, sbuf, rbuf);
    c.scount = scount;
    c.rcount = rcount;
    c.sdtype = sdtype;
    c.rdtype = rdtype;
    const size_t P = (size_t) m->size;
    const size_t send_blocks = XCCL_COLL_ALLTOALL == coll ? P : 1;
    int err = check_pair(&c, send_blocks);
    if (MPI_SUCCESS != err) {
        return err;
    }
    c.args.block = (size_t) rcount * mca_coll_xccl_dtype_size(rdtype);
    c.bytes = c.args.block * P;
    c.sn = c.in_place ? 0 : (size_t) scount * send_blocks;
    c.rn = (size_t) rcount * P;
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ bcast */

static int bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                 mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    mca_coll_xccl_call_init(&c, m, XCCL_COLL_BCAST, request, NULL, buf);
    c.rcount = count;
    c.sdtype = c.rdtype = dtype;
    c.root = root;
    int err;
    if (count < 0) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_COUNT, "negative count");
    }
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_dtype(dtype))) {
        return mca_coll_xccl_call_error(&c, err, "invalid datatype");
    }
    if (root < 0 || root >= m->size) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_ROOT, "root out of range");
    }
    if (MPI_IN_PLACE == buf) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_BUFFER, "MPI_IN_PLACE as the buffer");
    }
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_buf(buf, (size_t) count, dtype))) {
        return mca_coll_xccl_call_error(&c, err, "NULL buffer with a nonzero count");
    }
    c.bytes = (size_t) count * mca_coll_xccl_dtype_size(dtype);
    c.rn = (size_t) count;
    /* Device buffers: the root's data is read and does not change: copied
     * in, not out. */
    c.copy_r = m->rank == root;
    c.copy_out = m->rank != root;
    c.args.bytes = c.bytes;
    c.args.root = root;
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ entry points */

int mca_coll_xccl_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return movement(XCCL_COLL_ALLGATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype, XM(module),
                    NULL);
}

int mca_coll_xccl_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    (void) comm;
    return movement(XCCL_COLL_ALLGATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype, XM(module),
                    request);
}

int mca_coll_xccl_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return movement(XCCL_COLL_ALLTOALL, sbuf, scount, sdtype, rbuf, rcount, rdtype, XM(module),
                    NULL);
}

int mca_coll_xccl_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    (void) comm;
    return movement(XCCL_COLL_ALLTOALL, sbuf, scount, sdtype, rbuf, rcount, rdtype, XM(module),
                    request);
}

int mca_coll_xccl_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return bcast(buf, count, dtype, root, XM(module), NULL);
}

int mca_coll_xccl_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    (void) comm;
    return bcast(buf, count, dtype, root, XM(module), request);
}
