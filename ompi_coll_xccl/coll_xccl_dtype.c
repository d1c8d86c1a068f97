/*
 * Datatypes and ops: Open MPI's predefined ones as xccl's (the host and
 * GPU kernels), the argument checks every entry point makes, and how a
 * reduction runs (a kernel, or Open MPI's op for a commutative user op).
 */
#include "ompi_config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"

#include "coll_xccl_dtype.h"
#include "coll_xccl_log.h"

/* ------------------------------------------------------------ datatype and op maps */

#define SINT(T) (sizeof(T) == 1 ? XCCL_DT_INT8 : sizeof(T) == 2 ? XCCL_DT_INT16 \
                 : sizeof(T) == 4 ? XCCL_DT_INT32 : XCCL_DT_INT64)
#define UINT(T) (sizeof(T) == 1 ? XCCL_DT_UINT8 : sizeof(T) == 2 ? XCCL_DT_UINT16 \
                 : sizeof(T) == 4 ? XCCL_DT_UINT32 : XCCL_DT_UINT64)

static const struct {
    struct ompi_datatype_t *mpi;
    xccl_dtype_t x;
} dtype_map[] = {
    { MPI_CHAR, ((char) -1 < 0) ? XCCL_DT_INT8 : XCCL_DT_UINT8 },
    { MPI_SIGNED_CHAR, XCCL_DT_INT8 },
    { MPI_UNSIGNED_CHAR, XCCL_DT_UINT8 },
    { MPI_SHORT, SINT(short) },
    { MPI_UNSIGNED_SHORT, UINT(unsigned short) },
    { MPI_INT, SINT(int) },
    { MPI_UNSIGNED, UINT(unsigned) },
    { MPI_LONG, SINT(long) },
    { MPI_UNSIGNED_LONG, UINT(unsigned long) },
    { MPI_LONG_LONG_INT, SINT(long long) },
    { MPI_UNSIGNED_LONG_LONG, UINT(unsigned long long) },
    { MPI_INT8_T, XCCL_DT_INT8 },
    { MPI_UINT8_T, XCCL_DT_UINT8 },
    { MPI_INT16_T, XCCL_DT_INT16 },
    { MPI_UINT16_T, XCCL_DT_UINT16 },
    { MPI_INT32_T, XCCL_DT_INT32 },
    { MPI_UINT32_T, XCCL_DT_UINT32 },
    { MPI_INT64_T, XCCL_DT_INT64 },
    { MPI_UINT64_T, XCCL_DT_UINT64 },
    { MPI_AINT, SINT(MPI_Aint) },
    { MPI_OFFSET, SINT(MPI_Offset) },
    { MPI_COUNT, SINT(MPI_Count) },
    { MPI_FLOAT, XCCL_DT_FLOAT },
    { MPI_DOUBLE, XCCL_DT_DOUBLE },
    { MPI_LONG_DOUBLE, XCCL_DT_LONG_DOUBLE },
    { MPI_C_FLOAT_COMPLEX, XCCL_DT_FLOAT_COMPLEX },
    { MPI_C_DOUBLE_COMPLEX, XCCL_DT_DOUBLE_COMPLEX },
    { MPI_C_LONG_DOUBLE_COMPLEX, XCCL_DT_LONG_DOUBLE_COMPLEX },
    { MPI_C_BOOL, XCCL_DT_BOOL },
    { MPI_BYTE, XCCL_DT_BYTE },
    { MPI_FLOAT_INT, XCCL_DT_FLOAT_INT },
    { MPI_DOUBLE_INT, XCCL_DT_DOUBLE_INT },
    { MPI_LONG_INT, XCCL_DT_LONG_INT },
    { MPI_2INT, XCCL_DT_2INT },
    { MPI_SHORT_INT, XCCL_DT_SHORT_INT },
    { MPI_LONG_DOUBLE_INT, XCCL_DT_LONG_DOUBLE_INT },
    /* Fortran types with C equivalents (MPI_LOGICAL is not one: its truth
     * values are the compiler's, so it goes to the fallback) */
    { MPI_INTEGER, XCCL_DT_INT32 },
    { MPI_REAL, XCCL_DT_FLOAT },
    { MPI_DOUBLE_PRECISION, XCCL_DT_DOUBLE },
    { MPI_COMPLEX, XCCL_DT_FLOAT_COMPLEX },
    { MPI_DOUBLE_COMPLEX, XCCL_DT_DOUBLE_COMPLEX },
    { MPI_2INTEGER, XCCL_DT_2INT },
    { MPI_2REAL, XCCL_DT_2FLOAT },
    { MPI_2DOUBLE_PRECISION, XCCL_DT_2DOUBLE },
};

static const struct {
    struct ompi_op_t *mpi;
    xccl_op_t x;
} op_map[] = {
    { MPI_SUM, XCCL_OP_SUM }, { MPI_PROD, XCCL_OP_PROD },
    { MPI_MAX, XCCL_OP_MAX }, { MPI_MIN, XCCL_OP_MIN },
    { MPI_LAND, XCCL_OP_LAND }, { MPI_LOR, XCCL_OP_LOR }, { MPI_LXOR, XCCL_OP_LXOR },
    { MPI_BAND, XCCL_OP_BAND }, { MPI_BOR, XCCL_OP_BOR }, { MPI_BXOR, XCCL_OP_BXOR },
    { MPI_MAXLOC, XCCL_OP_MAXLOC }, { MPI_MINLOC, XCCL_OP_MINLOC },
};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

int mca_coll_xccl_map_dtype(struct ompi_datatype_t *dt, xccl_dtype_t *out)
{
    for (size_t i = 0; i < NELEMS(dtype_map); i++) {
        if (dtype_map[i].mpi == dt) {
            ptrdiff_t lb, extent;
            ompi_datatype_get_extent(dt, &lb, &extent);
            /* The kernels assume the C layout; check it is Open MPI's. */
            if (0 != lb || (size_t) extent != xccl_dtype_size(dtype_map[i].x)) {
                return -1;
            }
            *out = dtype_map[i].x;
            return 0;
        }
    }
    return -1;
}

int mca_coll_xccl_map_op(struct ompi_op_t *op, xccl_op_t *out)
{
    for (size_t i = 0; i < NELEMS(op_map); i++) {
        if (op_map[i].mpi == op) {
            *out = op_map[i].x;
            return 0;
        }
    }
    return -1;
}


/* ------------------------------------------------------------ checks */

int mca_coll_xccl_check_op(struct ompi_op_t *op, struct ompi_datatype_t *dt, const char *fn)
{
    char *msg = NULL;
    if (NULL == op || MPI_OP_NULL == op) {
        return MPI_ERR_OP;
    }
    if (!ompi_op_is_valid(op, dt, &msg, fn)) {
        free(msg);
        return MPI_ERR_OP;
    }
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------ reductions */

/* Reductions that the stock Open MPI built against gets wrong (measured per
 * version, coll_xccl_compat.h): MAX/MIN on MPI_UNSIGNED_LONG compare as
 * signed (ompi#10525); op/avx saturates 8- and 16-bit integer sums instead
 * of wrapping (ompi#8045).  xccl runs these itself even where it would
 * hand a small message to the fallback. */
int mca_coll_xccl_stock_gets_wrong(struct ompi_datatype_t *dt, struct ompi_op_t *op)
{
    /* Every small reduction asks: the common answer first. */
    if (&ompi_mpi_op_sum.op == op ? dt->super.size > 2
                                  : &ompi_mpi_op_max.op != op && &ompi_mpi_op_min.op != op) {
        return 0;
    }
    if (XCCL_STOCK_UL_MAXMIN_SIGNED &&
        (&ompi_mpi_op_max.op == op || &ompi_mpi_op_min.op == op) &&
        &ompi_mpi_unsigned_long.dt == dt) {
        return 1;
    }
    return XCCL_STOCK_SUM_SATURATES && &ompi_mpi_op_sum.op == op &&
           (&ompi_mpi_char.dt == dt || &ompi_mpi_signed_char.dt == dt ||
            &ompi_mpi_unsigned_char.dt == dt || &ompi_mpi_int8_t.dt == dt ||
            &ompi_mpi_uint8_t.dt == dt || &ompi_mpi_short.dt == dt ||
            &ompi_mpi_unsigned_short.dt == dt || &ompi_mpi_int16_t.dt == dt ||
            &ompi_mpi_uint16_t.dt == dt);
}

const char *mca_coll_xccl_plan_reduction(struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                         size_t count, mca_coll_xccl_reduce_t *r, size_t *es)
{
    xccl_dtype_t xdt;
    xccl_op_t xop;
    r->kernel = NULL;
    r->xdt = r->xop = -1;
    r->gaps = 0;
    r->op = op;
    r->dtype = dt;
    if (ompi_op_is_intrinsic(op)) {
        if (0 != mca_coll_xccl_map_dtype(dt, &xdt)) {
            return "unsupported_datatype";
        }
        if (0 != mca_coll_xccl_map_op(op, &xop) || NULL == (r->kernel = xccl_reduce_kernel(xdt, xop))) {
            return "unsupported_op";
        }
        r->xdt = (int) xdt;
        r->xop = (int) xop;
        *es = xccl_dtype_size(xdt);
        return NULL;
    }
    if (!ompi_op_is_commute(op)) {
        return "noncommutative_op";
    }
    /* A user op reads the datatype's own layout: one with gaps runs on
     * copies of that layout, element i at i * extent. */
    ptrdiff_t lb, extent, tlb, textent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &tlb, &textent);
    if (extent <= 0) {
        return "empty_datatype";
    }
    if (textent > extent) {
        return "overlapping_datatype";   /* elements overlap: no slices */
    }
    *es = (size_t) extent;
    r->gaps = !mca_coll_xccl_is_contiguous(dt, count ? count : 1);
    return NULL;
}

int mca_coll_xccl_reduce_cb(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    mca_coll_xccl_reduce_t *r = ctx;
    if (r->kernel) {
        r->kernel(dst, a, b, count);
        return 0;
    }
    /* ompi_op_reduce computes target = source op target.  The op is
     * commutative, so either operand may be the target. */
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(r->dtype, &lb, &extent);
    if (dst == b) {
        ompi_op_reduce(r->op, (void *) a, dst, count, r->dtype);
    } else {
        if (dst != a) {
            memcpy(dst, a, count * (size_t) extent);
        }
        ompi_op_reduce(r->op, (void *) b, dst, count, r->dtype);
    }
    return 0;
}
