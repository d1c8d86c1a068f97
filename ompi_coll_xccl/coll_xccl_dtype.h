/*
 * Datatypes and ops (coll_xccl_dtype.c): argument checks, sizes and
 * layouts, the mapping onto xccl's types and ops, and how a reduction
 * runs on the host.
 */
#ifndef MCA_COLL_XCCL_DTYPE_H
#define MCA_COLL_XCCL_DTYPE_H

#include <limits.h>

#include "ompi/datatype/ompi_datatype.h"

#include "coll_xccl.h"

BEGIN_C_DECLS

/* How a reduction runs on the host (coll_xccl_dtype.c). */
typedef struct {
    xccl_reduce_fn_t kernel;         /* predefined op on a predefined type */
    int xdt, xop;                    /* its xccl_dtype_t and xccl_op_t (-1: a user op) */
    int gaps;                        /* a user op on a datatype with gaps (layout copies) */
    struct ompi_op_t *op;            /* otherwise a commutative user op */
    struct ompi_datatype_t *dtype;
} mca_coll_xccl_reduce_t;

/* The checks and layouts every call asks for, inline: as calls they took
 * 2.4 % of the samples of a stream of 8-byte bcasts at np 2 (perf, the
 * root changing every call), where all of the work outside the waits
 * took about a fifth. */
static inline int mca_coll_xccl_check_dtype(struct ompi_datatype_t *dt)
{
    if (NULL == dt || MPI_DATATYPE_NULL == dt || !ompi_datatype_is_committed(dt)) {
        return MPI_ERR_TYPE;
    }
    return MPI_SUCCESS;
}

static inline ptrdiff_t mca_coll_xccl_true_lb(struct ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_true_extent(dt, &lb, &extent);
    return lb;
}

/* NULL is an error where it would be dereferenced: count > 0 and the type
 * does not carry absolute addresses (MPI_BOTTOM use). */
static inline int mca_coll_xccl_check_buf(const void *buf, size_t count, struct ompi_datatype_t *dt)
{
    if (NULL == buf && count > 0 && 0 == mca_coll_xccl_true_lb(dt)) {
        return MPI_ERR_BUFFER;
    }
    return MPI_SUCCESS;
}

int mca_coll_xccl_check_op(struct ompi_op_t *op, struct ompi_datatype_t *dt, const char *fn);

static inline size_t mca_coll_xccl_dtype_size(struct ompi_datatype_t *dt)
{
    size_t size = 0;
    ompi_datatype_type_size(dt, &size);
    return size;
}

static inline size_t mca_coll_xccl_dtype_extent(struct ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    return (size_t) extent;
}

/* count elements laid out without gaps (data movement needs that). */
static inline int mca_coll_xccl_is_contiguous(struct ompi_datatype_t *dt, size_t count)
{
    return count <= INT_MAX && ompi_datatype_is_contiguous_memory_layout(dt, (int32_t) count) &&
           mca_coll_xccl_dtype_size(dt) == mca_coll_xccl_dtype_extent(dt);
}

/* Predefined type and op as xccl's: 0, or -1 (not one xccl knows). */
int mca_coll_xccl_map_dtype(struct ompi_datatype_t *dt, xccl_dtype_t *out);
int mca_coll_xccl_map_op(struct ompi_op_t *op, xccl_op_t *out);
/* Reductions the stock Open MPI built against gets wrong (coll_xccl_compat.h). */
int mca_coll_xccl_stock_gets_wrong(struct ompi_datatype_t *dt, struct ompi_op_t *op);
/* How a reduction of count elements runs: fills r and *es, or returns the
 * fallback reason. */
const char *mca_coll_xccl_plan_reduction(struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                         size_t count, mca_coll_xccl_reduce_t *r, size_t *es);
/* The executor's reduction callback on the host (ctx: mca_coll_xccl_reduce_t). */
int mca_coll_xccl_reduce_cb(void *ctx, void *dst, const void *a, const void *b, size_t count);

END_C_DECLS

#endif
