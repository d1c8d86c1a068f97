/*
 * Entry points of the collectives that move data without reducing it:
 * MPI_(I)Allgather, MPI_(I)Alltoall, MPI_(I)Bcast, MPI_(I)Gather,
 * MPI_(I)Scatter, and MPI_(I)Barrier, which moves none.  Each checks its
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

/* ------------------------------------------------------------ gather, scatter */

/* The rooted blocks: gather (scatter: 0) of blocks of the root's side
 * (rbuf, rcount, rdtype for gather) from every rank's own side.  In
 * place at the root: gather's send buffer, scatter's receive buffer is
 * MPI_IN_PLACE (its block stays where it is).  The root's side is not
 * significant elsewhere (it may be NULL) and is never touched. */
static int rooted(xccl_coll_t coll, const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                  void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                  mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    const int gather = XCCL_COLL_GATHER == coll, is_root = m->rank == root;
    const size_t P = (size_t) m->size;
    const int in_place = is_root && (gather ? MPI_IN_PLACE == sbuf : MPI_IN_PLACE == rbuf);
    mca_coll_xccl_call_init(&c, m, coll, request, gather || is_root ? sbuf : NULL,
                            !gather || is_root ? (in_place && !gather ? NULL : rbuf) : NULL);
    c.in_place = c.args.in_place = in_place;
    c.scount = scount;
    c.rcount = rcount;
    c.sdtype = sdtype;
    c.rdtype = rdtype;
    c.root = root;
    int err;
    if (root < 0 || root >= m->size) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_ROOT, "root out of range");
    }
    if (!is_root && (MPI_IN_PLACE == sbuf || MPI_IN_PLACE == rbuf)) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_BUFFER, "MPI_IN_PLACE off the root");
    }
    /* The sides this rank uses: its own block, and at the root the
     * blocks of all (gather: the receive side, scatter: the send side). */
    const int own_s = gather ? !in_place : 0, own_r = gather ? 0 : !in_place;
    const int all_r = gather && is_root, all_s = !gather && is_root;
    if (((own_s || all_s) && scount < 0) || ((own_r || all_r) && rcount < 0)) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_COUNT, "negative count");
    }
    if (((own_s || all_s) && MPI_SUCCESS != (err = mca_coll_xccl_check_dtype(sdtype))) ||
        ((own_r || all_r) && MPI_SUCCESS != (err = mca_coll_xccl_check_dtype(rdtype)))) {
        return mca_coll_xccl_call_error(&c, err, "invalid datatype");
    }
    /* A side that is MPI_IN_PLACE or not significant here is described
     * by the other one (its datatype may be anything) */
    if (!own_s && !all_s) {
        c.sdtype = rdtype;
    } else if (!own_r && !all_r) {
        c.rdtype = sdtype;
    }
    c.sn = own_s ? (size_t) scount : all_s ? (size_t) scount * P : 0;
    c.rn = own_r ? (size_t) rcount : all_r ? (size_t) rcount * P : 0;
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_buf(c.sbuf, c.sn, c.sdtype)) ||
        MPI_SUCCESS != (err = mca_coll_xccl_check_buf(c.rbuf, c.rn, c.rdtype))) {
        return mca_coll_xccl_call_error(&c, err, "NULL buffer with a nonzero count");
    }
    /* The block: every rank's own side; the root's blocks must match it
     * (type signatures). */
    const size_t sblock = own_s || all_s ? (size_t) scount * mca_coll_xccl_dtype_size(sdtype) : 0;
    const size_t rblock = own_r || all_r ? (size_t) rcount * mca_coll_xccl_dtype_size(rdtype) : 0;
    if (is_root && !in_place && sblock != rblock) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_TRUNCATE,
                                        "the send and receive blocks differ in size (type "
                                        "signatures differ)");
    }
    c.args.block = gather ? (own_s ? sblock : rblock) : (own_r ? rblock : sblock);
    c.args.root = root;
    c.bytes = c.args.block * P;
    c.copy_r = gather && in_place;   /* device staging: the root's own block is read */
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ barrier */

static int barrier(mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    mca_coll_xccl_call_init(&c, m, XCCL_COLL_BARRIER, request, NULL, NULL);
    /* no data: empty sides of bytes, which every path takes as such */
    c.sdtype = c.rdtype = MPI_BYTE;
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ entry points */

int mca_coll_xccl_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                         void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return rooted(XCCL_COLL_GATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype, root, XM(module), NULL);
}

int mca_coll_xccl_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    (void) comm;
    return rooted(XCCL_COLL_GATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype, root, XM(module),
                  request);
}

int mca_coll_xccl_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return rooted(XCCL_COLL_SCATTER, sbuf, scount, sdtype, rbuf, rcount, rdtype, root, XM(module), NULL);
}

int mca_coll_xccl_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    (void) comm;
    return rooted(XCCL_COLL_SCATTER, sbuf, scount, sdtype, rbuf, rcount, rdtype, root, XM(module),
                  request);
}

int mca_coll_xccl_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return barrier(XM(module), NULL);
}

int mca_coll_xccl_ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    (void) comm;
    return barrier(XM(module), request);
}


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
