/*
 * The kernels of one instruction-set variant and their table: included by
 * reduce_kernels.c once per variant, with ISA_SUFFIX (KN appends it to a
 * name), ISA_ATTR (the variant's target attribute) and CPROD_ATTR (the
 * complex products': the same without FMA) defined.  Not a header of its
 * own: the macros it uses are reduce_kernels.c's.
 */
INT_KERNELS(int8, unsigned)
INT_KERNELS(uint8, unsigned)
INT_KERNELS(int16, unsigned)
INT_KERNELS(uint16, unsigned)
INT_KERNELS(int32, uint32_t)
INT_KERNELS(uint32, uint32_t)
INT_KERNELS(int64, uint64_t)
INT_KERNELS(uint64, uint64_t)

FLOAT_KERNELS(float)
FLOAT_KERNELS(double)
FLOAT_KERNELS(long_double)

KERNEL(k_float_complex_sum, u_float_complex, x + y)
KERNEL(k_double_complex_sum, u_double_complex, x + y)
KERNEL(k_long_double_complex_sum, u_long_double_complex, x + y)
/* Not KERNEL: no FMA for these (reduce_kernels.c says why). */
KERNEL_FN(KN(k_float_complex_prod), CPROD_ATTR, u_float_complex, x * y)
KERNEL_FN(KN(k_double_complex_prod), CPROD_ATTR, u_double_complex, x * y)
KERNEL_FN(KN(k_long_double_complex_prod), CPROD_ATTR, u_long_double_complex, x * y)

/* BOOL is read as a byte (any non-zero byte is true) and written as 0/1. */
KERNEL(k_bool_land, u_uint8, (uint8_t)((x != 0) & (y != 0)))
KERNEL(k_bool_lor, u_uint8, (uint8_t)((x != 0) | (y != 0)))
KERNEL(k_bool_lxor, u_uint8, (uint8_t)((x != 0) ^ (y != 0)))

KERNEL(k_byte_band, u_uint8, (uint8_t)(x & y))
KERNEL(k_byte_bor, u_uint8, (uint8_t)(x | y))
KERNEL(k_byte_bxor, u_uint8, (uint8_t)(x ^ y))

LOC_KERNELS(float_int)
LOC_KERNELS(double_int)
LOC_KERNELS(long_int)
LOC_KERNELS(2int)
LOC_KERNELS(short_int)
LOC_KERNELS(long_double_int)
LOC_KERNELS(2float)
LOC_KERNELS(2double)

static const xccl_reduce_fn_t KN(kernels)[XCCL_DT_COUNT][XCCL_OP_COUNT] = {
    [XCCL_DT_INT8] = ROW_INT(int8),
    [XCCL_DT_UINT8] = ROW_INT(uint8),
    [XCCL_DT_INT16] = ROW_INT(int16),
    [XCCL_DT_UINT16] = ROW_INT(uint16),
    [XCCL_DT_INT32] = ROW_INT(int32),
    [XCCL_DT_UINT32] = ROW_INT(uint32),
    [XCCL_DT_INT64] = ROW_INT(int64),
    [XCCL_DT_UINT64] = ROW_INT(uint64),
    [XCCL_DT_FLOAT] = ROW_FLOAT(float),
    [XCCL_DT_DOUBLE] = ROW_FLOAT(double),
    [XCCL_DT_LONG_DOUBLE] = ROW_FLOAT(long_double),
    [XCCL_DT_FLOAT_COMPLEX] = ROW_COMPLEX(float_complex),
    [XCCL_DT_DOUBLE_COMPLEX] = ROW_COMPLEX(double_complex),
    [XCCL_DT_LONG_DOUBLE_COMPLEX] = ROW_COMPLEX(long_double_complex),
    [XCCL_DT_BOOL] = { [XCCL_OP_LAND] = KN(k_bool_land), [XCCL_OP_LOR] = KN(k_bool_lor),
                       [XCCL_OP_LXOR] = KN(k_bool_lxor) },
    [XCCL_DT_BYTE] = { [XCCL_OP_BAND] = KN(k_byte_band), [XCCL_OP_BOR] = KN(k_byte_bor),
                       [XCCL_OP_BXOR] = KN(k_byte_bxor) },
    [XCCL_DT_FLOAT_INT] = ROW_LOC(float_int),
    [XCCL_DT_DOUBLE_INT] = ROW_LOC(double_int),
    [XCCL_DT_LONG_INT] = ROW_LOC(long_int),
    [XCCL_DT_2INT] = ROW_LOC(2int),
    [XCCL_DT_SHORT_INT] = ROW_LOC(short_int),
    [XCCL_DT_LONG_DOUBLE_INT] = ROW_LOC(long_double_int),
    [XCCL_DT_2FLOAT] = ROW_LOC(2float),
    [XCCL_DT_2DOUBLE] = ROW_LOC(2double),
};
