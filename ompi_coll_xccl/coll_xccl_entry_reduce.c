/*
 * Entry points of the reductions: MPI_(I)Allreduce, MPI_(I)Reduce_scatter,
 * MPI_(I)Reduce_scatter_block, MPI_(I)Reduce.  Each checks its arguments (an MPI error
 * code before any data moves, also with mpi_param_check 0), describes the
 * call and hands it to mca_coll_xccl_call_run.
 */
#include "ompi_config.h"

#include <stdlib.h>

#include "coll_xccl_path.h"

#define XM(module) ((mca_coll_xccl_module_t *) (module))

/* Shared checks of the reductions: datatype, op, buffers (my_count the
 * result's elements, total the input's; the receive buffer is checked
 * where my_count is not 0 or the call is in place). */
static int check_reduction(mca_coll_xccl_call_t *c, size_t my_count, size_t total, const char *fn)
{
    int err;
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_dtype(c->rdtype))) {
        return mca_coll_xccl_call_error(c, err, "invalid datatype");
    }
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_op(c->op, c->rdtype, fn))) {
        return mca_coll_xccl_call_error(c, err, "invalid op for this datatype");
    }
    if (MPI_IN_PLACE == c->rbuf) {
        return mca_coll_xccl_call_error(c, MPI_ERR_BUFFER, "MPI_IN_PLACE as the receive buffer");
    }
    if (c->in_place) {
        err = mca_coll_xccl_check_buf(c->rbuf, total, c->rdtype);
    } else {
        err = mca_coll_xccl_check_buf(c->rbuf, my_count, c->rdtype);
        if (MPI_SUCCESS == err) {
            err = mca_coll_xccl_check_buf(c->sbuf, total, c->rdtype);
        }
    }
    if (MPI_SUCCESS != err) {
        return mca_coll_xccl_call_error(c, err, "NULL buffer with a nonzero count");
    }
    return MPI_SUCCESS;
}

/* The description every reduction shares. */
static void describe(mca_coll_xccl_call_t *c, mca_coll_xccl_module_t *m, xccl_coll_t coll,
                     const void *sbuf, void *rbuf, struct ompi_datatype_t *dtype,
                     struct ompi_op_t *op, ompi_request_t **request)
{
    mca_coll_xccl_call_init(c, m, coll, request, sbuf, rbuf);
    c->sdtype = c->rdtype = dtype;
    c->op = op;
    c->reduction = 1;
}

/* ------------------------------------------------------------ allreduce */

static int allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                     struct ompi_op_t *op, mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    describe(&c, m, XCCL_COLL_ALLREDUCE, sbuf, rbuf, dtype, op, request);
    c.rcount = count;
    if (count < 0) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_COUNT, "negative count");
    }
    int err = check_reduction(&c, (size_t) count, (size_t) count, "MPI_Allreduce");
    if (MPI_SUCCESS != err) {
        return err;
    }
    c.total = c.rout = c.rn = (size_t) count;
    c.sn = (size_t) count;
    c.bytes = (size_t) count * mca_coll_xccl_dtype_size(dtype);
    c.args.count = (size_t) count;
    c.args.segment = mca_coll_xccl_component.segment_bytes;
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ reduce_scatter (_block) */

/* Counts of up to this many ranks live on the stack. */
#define STACK_COUNTS 64

/* The rest of a reduce_scatter's description, from its counts (c->counts
 * is set when they were allocated). */
static int reduce_scatter_run(mca_coll_xccl_call_t *c, const size_t *counts, const char *fn)
{
    const int me = c->m->rank;
    size_t total = 0;
    for (int i = 0; i < c->m->size; i++) {
        total += counts[i];
    }
    int err = check_reduction(c, counts[me], total, fn);
    if (MPI_SUCCESS != err) {
        free(c->counts);
        return err;
    }
    c->total = c->sn = total;
    c->rout = counts[me];
    c->rn = c->in_place ? total : counts[me];
    c->bytes = total * mca_coll_xccl_dtype_size(c->rdtype);
    c->args.counts = counts;
    return mca_coll_xccl_call_run(c);
}

static size_t *counts_buffer(mca_coll_xccl_call_t *c, size_t *stack)
{
    if (c->m->size <= STACK_COUNTS) {
        return stack;
    }
    c->counts = malloc((size_t) c->m->size * sizeof(size_t));
    return c->counts;
}

static int reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                          struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                          mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    size_t stack[STACK_COUNTS];
    describe(&c, m, XCCL_COLL_REDUCE_SCATTER, sbuf, rbuf, dtype, op, request);
    c.rcounts = rcounts;
    if (NULL == rcounts) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_ARG, "recvcounts is NULL");
    }
    size_t *counts = counts_buffer(&c, stack);
    if (NULL == counts) {
        return mca_coll_xccl_call_error(&c, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
    }
    for (int i = 0; i < m->size; i++) {
        if (rcounts[i] < 0) {
            free(c.counts);
            return mca_coll_xccl_call_error(&c, MPI_ERR_COUNT, "negative recvcount");
        }
        counts[i] = (size_t) rcounts[i];
    }
    return reduce_scatter_run(&c, counts, "MPI_Reduce_scatter");
}

static int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    size_t stack[STACK_COUNTS];
    describe(&c, m, XCCL_COLL_REDUCE_SCATTER_BLOCK, sbuf, rbuf, dtype, op, request);
    c.rcount = rcount;
    if (rcount < 0) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_COUNT, "negative recvcount");
    }
    size_t *counts = counts_buffer(&c, stack);
    if (NULL == counts) {
        return mca_coll_xccl_call_error(&c, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
    }
    for (int i = 0; i < m->size; i++) {
        counts[i] = (size_t) rcount;
    }
    return reduce_scatter_run(&c, counts, "MPI_Reduce_scatter_block");
}

/* ------------------------------------------------------------ reduce */

/* The result at the root only: elsewhere the receive buffer is not
 * significant (it may be NULL) and is never touched. */
static int reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                  struct ompi_op_t *op, int root, mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    const int is_root = m->rank == root;
    describe(&c, m, XCCL_COLL_REDUCE, sbuf, is_root ? rbuf : NULL, dtype, op, request);
    c.rcount = count;
    c.root = root;
    if (count < 0) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_COUNT, "negative count");
    }
    if (root < 0 || root >= m->size) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_ROOT, "root out of range");
    }
    if (c.in_place && !is_root) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_BUFFER, "MPI_IN_PLACE off the root");
    }
    int err = check_reduction(&c, is_root ? (size_t) count : 0, (size_t) count, "MPI_Reduce");
    if (MPI_SUCCESS != err) {
        return err;
    }
    c.total = c.sn = (size_t) count;
    c.rout = c.rn = is_root ? (size_t) count : 0;
    c.bytes = (size_t) count * mca_coll_xccl_dtype_size(dtype);
    c.args.count = (size_t) count;
    c.args.root = root;
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ entry points */

int mca_coll_xccl_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module)
{
    (void) comm;
    return reduce(sbuf, rbuf, count, dtype, op, root, XM(module), NULL);
}

int mca_coll_xccl_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                          struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void) comm;
    return reduce(sbuf, rbuf, count, dtype, op, root, XM(module), request);
}

int mca_coll_xccl_allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                            struct ompi_op_t *op, struct ompi_communicator_t *comm,
                            mca_coll_base_module_t *module)
{
    (void) comm;
    return allreduce(sbuf, rbuf, count, dtype, op, XM(module), NULL);
}

int mca_coll_xccl_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                             struct ompi_op_t *op, struct ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void) comm;
    return allreduce(sbuf, rbuf, count, dtype, op, XM(module), request);
}

int mca_coll_xccl_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return reduce_scatter(sbuf, rbuf, rcounts, dtype, op, XM(module), NULL);
}

int mca_coll_xccl_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm, ompi_request_t **request,
                                  mca_coll_base_module_t *module)
{
    (void) comm;
    return reduce_scatter(sbuf, rbuf, rcounts, dtype, op, XM(module), request);
}

int mca_coll_xccl_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       mca_coll_base_module_t *module)
{
    (void) comm;
    return reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, XM(module), NULL);
}

int mca_coll_xccl_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                        struct ompi_communicator_t *comm,
                                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void) comm;
    return reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, XM(module), request);
}
