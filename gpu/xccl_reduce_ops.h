/*
 * The element operations of xccl's GPU reduction kernels, written once for
 * both compilers: nvcc compiles them into the kernels (gpu/xccl_kernels.cu,
 * as __device__ functions), a C compiler into test_gpu_kernels (as host
 * functions, checked there against base/reduce_kernels.c without a GPU).
 * Each is the very expression of base/reduce_kernels.c (integer
 * wrap-around through an unsigned type, MAXLOC/MINLOC keep the lower index
 * on ties, floats: plain IEEE operations, built without contraction), and
 * complex products follow GCC's (C99 Annex G): the plain formula, and
 * libgcc's __mulsc3/__muldc3 when both parts come out NaN.
 *
 * XCCL_GPU_PAIRS(X) lists every (dtype, op) pair that has a GPU kernel:
 *   X(XCCL_DT_..., dtype name, element type, op name, XCCL_OP_...)
 * The kernel of a pair is the extern "C" function xccl_reduce_<dtype>_<op>
 * (dtype and op names as xccl_dtype_name and xccl_op_name spell them).
 * Not listed (no GPU kernel; callers fall back to the host): long double,
 * long double complex and long double + int (no such type on the device).
 */
#ifndef XCCL_REDUCE_OPS_H
#define XCCL_REDUCE_OPS_H

#include <stdint.h>

#ifdef __CUDACC__
#define XCCL_OPS_FN static __device__ __forceinline__
#define XCCL_ISNAN(x) isnan(x)
#define XCCL_ISINF(x) isinf(x)
#define XCCL_INFF __int_as_float(0x7f800000)
#define XCCL_INF __longlong_as_double(0x7ff0000000000000LL)
#else
#include <math.h>
#define XCCL_OPS_FN static inline
#define XCCL_ISNAN(x) isnan(x)
#define XCCL_ISINF(x) isinf(x)
#define XCCL_INFF ((float) INFINITY)
#define XCCL_INF ((double) INFINITY)
#endif

/* Sources per kernel launch (xccl_gpu_reduce chains launches for more). */
#define XCCL_GPU_MAX_SRCS 16

/* The kernels' second parameter, passed by value: source device pointers. */
typedef struct {
    unsigned long long p[XCCL_GPU_MAX_SRCS];
} xccl_gpu_srcs_t;

/* xccl_copy_batch's parameter, by value: n independent copies (no copy's
 * destination overlaps another copy's source or destination), run by one
 * launch. */
#define XCCL_GPU_MAX_COPIES 32
typedef struct {
    unsigned long long dst[XCCL_GPU_MAX_COPIES], src[XCCL_GPU_MAX_COPIES], len[XCCL_GPU_MAX_COPIES];
    int n, pad;
} xccl_gpu_copies_t;

/* Element types: the C layouts of base/reduce_kernels.c (long is 64 bits
 * on every platform xccl builds for; test_gpu_kernels checks the sizes). */
typedef struct { float re, im; } xccl_gpu_cfloat_t;          /* float _Complex */
typedef struct { double re, im; } xccl_gpu_cdouble_t;        /* double _Complex */
typedef struct { float v; int32_t i; } xccl_gpu_float_int_t;
typedef struct { double v; int32_t i; } xccl_gpu_double_int_t;
typedef struct { int64_t v; int32_t i; } xccl_gpu_long_int_t;
typedef struct { int32_t v; int32_t i; } xccl_gpu_2int_t;
typedef struct { int16_t v; int32_t i; } xccl_gpu_short_int_t;
typedef struct { float v; float i; } xccl_gpu_2float_t;
typedef struct { double v; double i; } xccl_gpu_2double_t;

/* ------------------------------------------------------------------ integers */
/* W: an unsigned type at least as wide as int and T (as the host kernels). */
#define XCCL_OPS_INT(tn, T, W)                                                              \
    XCCL_OPS_FN T xccl_op_##tn##_sum(T x, T y) { return (T)((W)x + (W)y); }                 \
    XCCL_OPS_FN T xccl_op_##tn##_prod(T x, T y) { return (T)((W)x * (W)y); }                \
    XCCL_OPS_FN T xccl_op_##tn##_max(T x, T y) { return x > y ? x : y; }                    \
    XCCL_OPS_FN T xccl_op_##tn##_min(T x, T y) { return x < y ? x : y; }                    \
    XCCL_OPS_FN T xccl_op_##tn##_land(T x, T y) { return (T)((x != 0) & (y != 0)); }        \
    XCCL_OPS_FN T xccl_op_##tn##_lor(T x, T y) { return (T)((x != 0) | (y != 0)); }         \
    XCCL_OPS_FN T xccl_op_##tn##_lxor(T x, T y) { return (T)((x != 0) ^ (y != 0)); }        \
    XCCL_OPS_FN T xccl_op_##tn##_band(T x, T y) { return (T)(x & y); }                      \
    XCCL_OPS_FN T xccl_op_##tn##_bor(T x, T y) { return (T)(x | y); }                       \
    XCCL_OPS_FN T xccl_op_##tn##_bxor(T x, T y) { return (T)(x ^ y); }

XCCL_OPS_INT(int8, int8_t, unsigned)
XCCL_OPS_INT(uint8, uint8_t, unsigned)
XCCL_OPS_INT(int16, int16_t, unsigned)
XCCL_OPS_INT(uint16, uint16_t, unsigned)
XCCL_OPS_INT(int32, int32_t, uint32_t)
XCCL_OPS_INT(uint32, uint32_t, uint32_t)
XCCL_OPS_INT(int64, int64_t, uint64_t)
XCCL_OPS_INT(uint64, uint64_t, uint64_t)

/* ------------------------------------------------------------------ floating point */
#define XCCL_OPS_FLOAT(tn, T)                                                               \
    XCCL_OPS_FN T xccl_op_##tn##_sum(T x, T y) { return x + y; }                            \
    XCCL_OPS_FN T xccl_op_##tn##_prod(T x, T y) { return x * y; }                           \
    XCCL_OPS_FN T xccl_op_##tn##_max(T x, T y) { return x > y ? x : y; }                    \
    XCCL_OPS_FN T xccl_op_##tn##_min(T x, T y) { return x < y ? x : y; }

XCCL_OPS_FLOAT(float, float)
XCCL_OPS_FLOAT(double, double)

/* Complex: SUM part by part; PROD as GCC compiles x * y: the plain formula,
 * then, when both parts are NaN, libgcc's recovery of infinities (C99
 * Annex G, __mulsc3/__muldc3).  CT complex type, T part type, CS copysign. */
#define XCCL_OPS_COMPLEX(tn, CT, T, CS, INF)                                                \
    XCCL_OPS_FN CT xccl_op_##tn##_sum(CT x, CT y)                                           \
    {                                                                                       \
        CT r;                                                                               \
        r.re = x.re + y.re;                                                                 \
        r.im = x.im + y.im;                                                                 \
        return r;                                                                           \
    }                                                                                       \
    XCCL_OPS_FN CT xccl_op_##tn##_prod(CT x, CT y)                                          \
    {                                                                                       \
        T a = x.re, b = x.im, c = y.re, d = y.im;                                           \
        T ac = a * c, bd = b * d, ad = a * d, bc = b * c;                                   \
        CT r;                                                                               \
        r.re = ac - bd;                                                                     \
        r.im = ad + bc;                                                                     \
        if (XCCL_ISNAN(r.re) && XCCL_ISNAN(r.im)) {                                         \
            int recalc = 0;                                                                 \
            if (XCCL_ISINF(a) || XCCL_ISINF(b)) {                                           \
                a = CS(XCCL_ISINF(a) ? (T)1 : (T)0, a);                                     \
                b = CS(XCCL_ISINF(b) ? (T)1 : (T)0, b);                                     \
                if (XCCL_ISNAN(c)) c = CS((T)0, c);                                         \
                if (XCCL_ISNAN(d)) d = CS((T)0, d);                                         \
                recalc = 1;                                                                 \
            }                                                                               \
            if (XCCL_ISINF(c) || XCCL_ISINF(d)) {                                           \
                c = CS(XCCL_ISINF(c) ? (T)1 : (T)0, c);                                     \
                d = CS(XCCL_ISINF(d) ? (T)1 : (T)0, d);                                     \
                if (XCCL_ISNAN(a)) a = CS((T)0, a);                                         \
                if (XCCL_ISNAN(b)) b = CS((T)0, b);                                         \
                recalc = 1;                                                                 \
            }                                                                               \
            if (!recalc && (XCCL_ISINF(ac) || XCCL_ISINF(bd) || XCCL_ISINF(ad) || XCCL_ISINF(bc))) { \
                if (XCCL_ISNAN(a)) a = CS((T)0, a);                                         \
                if (XCCL_ISNAN(b)) b = CS((T)0, b);                                         \
                if (XCCL_ISNAN(c)) c = CS((T)0, c);                                         \
                if (XCCL_ISNAN(d)) d = CS((T)0, d);                                         \
                recalc = 1;                                                                 \
            }                                                                               \
            if (recalc) {                                                                   \
                r.re = INF * (a * c - b * d);                                               \
                r.im = INF * (a * d + b * c);                                               \
            }                                                                               \
        }                                                                                   \
        return r;                                                                           \
    }

XCCL_OPS_COMPLEX(float_complex, xccl_gpu_cfloat_t, float, copysignf, XCCL_INFF)
XCCL_OPS_COMPLEX(double_complex, xccl_gpu_cdouble_t, double, copysign, XCCL_INF)

/* ------------------------------------------------------------------ bool, byte */
/* BOOL is read as a byte (any non-zero byte is true) and written as 0/1. */
XCCL_OPS_FN uint8_t xccl_op_bool_land(uint8_t x, uint8_t y) { return (uint8_t)((x != 0) & (y != 0)); }
XCCL_OPS_FN uint8_t xccl_op_bool_lor(uint8_t x, uint8_t y) { return (uint8_t)((x != 0) | (y != 0)); }
XCCL_OPS_FN uint8_t xccl_op_bool_lxor(uint8_t x, uint8_t y) { return (uint8_t)((x != 0) ^ (y != 0)); }
XCCL_OPS_FN uint8_t xccl_op_byte_band(uint8_t x, uint8_t y) { return (uint8_t)(x & y); }
XCCL_OPS_FN uint8_t xccl_op_byte_bor(uint8_t x, uint8_t y) { return (uint8_t)(x | y); }
XCCL_OPS_FN uint8_t xccl_op_byte_bxor(uint8_t x, uint8_t y) { return (uint8_t)(x ^ y); }

/* ------------------------------------------------------------------ MAXLOC, MINLOC */
/* The better value wins; equal values (and values that compare neither way,
 * NaN) keep the first value with the lower index. */
#define XCCL_OPS_LOC(tn, T)                                                                 \
    XCCL_OPS_FN T xccl_op_##tn##_maxloc(T x, T y)                                           \
    {                                                                                       \
        if (x.v > y.v) return x;                                                            \
        if (y.v > x.v) return y;                                                            \
        if (y.i < x.i) x.i = y.i;                                                           \
        return x;                                                                           \
    }                                                                                       \
    XCCL_OPS_FN T xccl_op_##tn##_minloc(T x, T y)                                           \
    {                                                                                       \
        if (x.v < y.v) return x;                                                            \
        if (y.v < x.v) return y;                                                            \
        if (y.i < x.i) x.i = y.i;                                                           \
        return x;                                                                           \
    }

XCCL_OPS_LOC(float_int, xccl_gpu_float_int_t)
XCCL_OPS_LOC(double_int, xccl_gpu_double_int_t)
XCCL_OPS_LOC(long_int, xccl_gpu_long_int_t)
XCCL_OPS_LOC(2int, xccl_gpu_2int_t)
XCCL_OPS_LOC(short_int, xccl_gpu_short_int_t)
XCCL_OPS_LOC(2float, xccl_gpu_2float_t)
XCCL_OPS_LOC(2double, xccl_gpu_2double_t)

/* ------------------------------------------------------------------ the pairs */
#define XCCL_GPU_PAIRS_INT(X, DT, tn, T)                                                    \
    X(DT, tn, T, sum, XCCL_OP_SUM) X(DT, tn, T, prod, XCCL_OP_PROD)                         \
    X(DT, tn, T, max, XCCL_OP_MAX) X(DT, tn, T, min, XCCL_OP_MIN)                           \
    X(DT, tn, T, land, XCCL_OP_LAND) X(DT, tn, T, lor, XCCL_OP_LOR)                         \
    X(DT, tn, T, lxor, XCCL_OP_LXOR) X(DT, tn, T, band, XCCL_OP_BAND)                       \
    X(DT, tn, T, bor, XCCL_OP_BOR) X(DT, tn, T, bxor, XCCL_OP_BXOR)
#define XCCL_GPU_PAIRS_FLOAT(X, DT, tn, T)                                                  \
    X(DT, tn, T, sum, XCCL_OP_SUM) X(DT, tn, T, prod, XCCL_OP_PROD)                         \
    X(DT, tn, T, max, XCCL_OP_MAX) X(DT, tn, T, min, XCCL_OP_MIN)
#define XCCL_GPU_PAIRS_COMPLEX(X, DT, tn, T)                                                \
    X(DT, tn, T, sum, XCCL_OP_SUM) X(DT, tn, T, prod, XCCL_OP_PROD)
#define XCCL_GPU_PAIRS_LOC(X, DT, tn, T)                                                    \
    X(DT, tn, T, maxloc, XCCL_OP_MAXLOC) X(DT, tn, T, minloc, XCCL_OP_MINLOC)

#define XCCL_GPU_PAIRS(X)                                                                   \
    XCCL_GPU_PAIRS_INT(X, XCCL_DT_INT8, int8, int8_t)                                       \
    XCCL_GPU_PAIRS_INT(X, XCCL_DT_UINT8, uint8, uint8_t)                                    \
    XCCL_GPU_PAIRS_INT(X, XCCL_DT_INT16, int16, int16_t)                                    \
    XCCL_GPU_PAIRS_INT(X, XCCL_DT_UINT16, uint16, uint16_t)                                 \
    XCCL_GPU_PAIRS_INT(X, XCCL_DT_INT32, int32, int32_t)                                    \
    XCCL_GPU_PAIRS_INT(X, XCCL_DT_UINT32, uint32, uint32_t)                                 \
    XCCL_GPU_PAIRS_INT(X, XCCL_DT_INT64, int64, int64_t)                                    \
    XCCL_GPU_PAIRS_INT(X, XCCL_DT_UINT64, uint64, uint64_t)                                 \
    XCCL_GPU_PAIRS_FLOAT(X, XCCL_DT_FLOAT, float, float)                                    \
    XCCL_GPU_PAIRS_FLOAT(X, XCCL_DT_DOUBLE, double, double)                                 \
    XCCL_GPU_PAIRS_COMPLEX(X, XCCL_DT_FLOAT_COMPLEX, float_complex, xccl_gpu_cfloat_t)      \
    XCCL_GPU_PAIRS_COMPLEX(X, XCCL_DT_DOUBLE_COMPLEX, double_complex, xccl_gpu_cdouble_t)   \
    X(XCCL_DT_BOOL, bool, uint8_t, land, XCCL_OP_LAND)                                      \
    X(XCCL_DT_BOOL, bool, uint8_t, lor, XCCL_OP_LOR)                                        \
    X(XCCL_DT_BOOL, bool, uint8_t, lxor, XCCL_OP_LXOR)                                      \
    X(XCCL_DT_BYTE, byte, uint8_t, band, XCCL_OP_BAND)                                      \
    X(XCCL_DT_BYTE, byte, uint8_t, bor, XCCL_OP_BOR)                                        \
    X(XCCL_DT_BYTE, byte, uint8_t, bxor, XCCL_OP_BXOR)                                      \
    XCCL_GPU_PAIRS_LOC(X, XCCL_DT_FLOAT_INT, float_int, xccl_gpu_float_int_t)               \
    XCCL_GPU_PAIRS_LOC(X, XCCL_DT_DOUBLE_INT, double_int, xccl_gpu_double_int_t)            \
    XCCL_GPU_PAIRS_LOC(X, XCCL_DT_LONG_INT, long_int, xccl_gpu_long_int_t)                  \
    XCCL_GPU_PAIRS_LOC(X, XCCL_DT_2INT, 2int, xccl_gpu_2int_t)                              \
    XCCL_GPU_PAIRS_LOC(X, XCCL_DT_SHORT_INT, short_int, xccl_gpu_short_int_t)               \
    XCCL_GPU_PAIRS_LOC(X, XCCL_DT_2FLOAT, 2float, xccl_gpu_2float_t)                        \
    XCCL_GPU_PAIRS_LOC(X, XCCL_DT_2DOUBLE, 2double, xccl_gpu_2double_t)

#endif
