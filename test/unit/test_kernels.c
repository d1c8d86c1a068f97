/*
 * Unit test of the reduction kernels (base/reduce_kernels.c).
 *
 * Every valid (dtype, op) pair of every instruction-set variant of the
 * kernels (xccl_reduce_kernel_isa: x86-64-v4, avx2, baseline on x86-64) is
 * checked against a scalar reference written here, bit for bit, element by
 * element, over many lengths, element- and byte-misaligned buffers and the
 * aliasing cases out == a, out == b, out == a == b.  The ranks of one job may
 * run different variants and must get identical bits, so no tolerance, not
 * even for complex products; this file is built with -ffp-contract=off so
 * that the reference rounds every operation on its own.  A variant this CPU
 * cannot run is skipped, with a line saying so, and not counted as passed.
 * Guard bytes around the output catch overruns; inputs are checked to be
 * unchanged.  A few deliberately wrong kernels (among them a complex product
 * with fused multiply-adds, one bit off) check that the harness does catch
 * errors.
 */
#include <check.h>
#include "check_main.h"
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xccl_base.h"
#include "base/xccl_copy.h"

/* The test's own copies of the pair layouts documented in base/xccl_base.h. */
typedef struct { float v; int i; } t_float_int;
typedef struct { double v; int i; } t_double_int;
typedef struct { long v; int i; } t_long_int;
typedef struct { int v; int i; } t_2int;
typedef struct { short v; int i; } t_short_int;
typedef struct { long double v; int i; } t_long_double_int;
typedef struct { float v; float i; } t_2float;
typedef struct { double v; double i; } t_2double;

/* Significant bytes of a long double (x87: 80 bits; the rest is padding). */
#define LD_BYTES (LDBL_MANT_DIG == 64 ? (size_t)10 : sizeof(long double))

#define MAX_LEN 1023
static const size_t lens[] = { 0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 100, 1000, 1023 };
#define NLENS (sizeof(lens) / sizeof(lens[0]))

/* ------------------------------------------------------------------------ */
/* Pseudo-random numbers (splitmix64)                                       */
/* ------------------------------------------------------------------------ */

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------------------ */
/* Type classes and the expected set of valid pairs                         */
/* ------------------------------------------------------------------------ */

enum { K_INT, K_FLOAT, K_COMPLEX, K_BOOL, K_BYTE, K_PAIR };

static int kind_of(xccl_dtype_t dt)
{
    switch (dt) {
    case XCCL_DT_INT8: case XCCL_DT_UINT8: case XCCL_DT_INT16: case XCCL_DT_UINT16:
    case XCCL_DT_INT32: case XCCL_DT_UINT32: case XCCL_DT_INT64: case XCCL_DT_UINT64:
        return K_INT;
    case XCCL_DT_FLOAT: case XCCL_DT_DOUBLE: case XCCL_DT_LONG_DOUBLE:
        return K_FLOAT;
    case XCCL_DT_FLOAT_COMPLEX: case XCCL_DT_DOUBLE_COMPLEX: case XCCL_DT_LONG_DOUBLE_COMPLEX:
        return K_COMPLEX;
    case XCCL_DT_BOOL:
        return K_BOOL;
    case XCCL_DT_BYTE:
        return K_BYTE;
    default:
        return K_PAIR;
    }
}

static int expect_valid(xccl_dtype_t dt, xccl_op_t op)
{
    int k = kind_of(dt);
    switch (op) {
    case XCCL_OP_SUM: case XCCL_OP_PROD:
        return k == K_INT || k == K_FLOAT || k == K_COMPLEX;
    case XCCL_OP_MAX: case XCCL_OP_MIN:
        return k == K_INT || k == K_FLOAT;
    case XCCL_OP_LAND: case XCCL_OP_LOR: case XCCL_OP_LXOR:
        return k == K_INT || k == K_BOOL;
    case XCCL_OP_BAND: case XCCL_OP_BOR: case XCCL_OP_BXOR:
        return k == K_INT || k == K_BYTE;
    case XCCL_OP_MAXLOC: case XCCL_OP_MINLOC:
        return k == K_PAIR;
    default:
        return 0;
    }
}

/* The test's own element sizes. */
static size_t tsize(xccl_dtype_t dt)
{
    switch (dt) {
    case XCCL_DT_INT8: return sizeof(int8_t);
    case XCCL_DT_UINT8: return sizeof(uint8_t);
    case XCCL_DT_INT16: return sizeof(int16_t);
    case XCCL_DT_UINT16: return sizeof(uint16_t);
    case XCCL_DT_INT32: return sizeof(int32_t);
    case XCCL_DT_UINT32: return sizeof(uint32_t);
    case XCCL_DT_INT64: return sizeof(int64_t);
    case XCCL_DT_UINT64: return sizeof(uint64_t);
    case XCCL_DT_FLOAT: return sizeof(float);
    case XCCL_DT_DOUBLE: return sizeof(double);
    case XCCL_DT_LONG_DOUBLE: return sizeof(long double);
    case XCCL_DT_FLOAT_COMPLEX: return sizeof(float _Complex);
    case XCCL_DT_DOUBLE_COMPLEX: return sizeof(double _Complex);
    case XCCL_DT_LONG_DOUBLE_COMPLEX: return sizeof(long double _Complex);
    case XCCL_DT_BOOL: return sizeof(_Bool);
    case XCCL_DT_BYTE: return 1;
    case XCCL_DT_FLOAT_INT: return sizeof(t_float_int);
    case XCCL_DT_DOUBLE_INT: return sizeof(t_double_int);
    case XCCL_DT_LONG_INT: return sizeof(t_long_int);
    case XCCL_DT_2INT: return sizeof(t_2int);
    case XCCL_DT_SHORT_INT: return sizeof(t_short_int);
    case XCCL_DT_LONG_DOUBLE_INT: return sizeof(t_long_double_int);
    case XCCL_DT_2FLOAT: return sizeof(t_2float);
    case XCCL_DT_2DOUBLE: return sizeof(t_2double);
    default: return 0;
    }
}

static int int_signed(xccl_dtype_t dt)
{
    return dt == XCCL_DT_INT8 || dt == XCCL_DT_INT16 || dt == XCCL_DT_INT32 ||
           dt == XCCL_DT_INT64;
}

/* ------------------------------------------------------------------------ */
/* Integers: values held as uint64_t (sign-extended for signed types),      */
/* arithmetic mod 2^64, stored back by truncation to the element width.     */
/* ------------------------------------------------------------------------ */

static uint64_t int_load(xccl_dtype_t dt, const void *p)
{
    size_t sz = tsize(dt);
    int sg = int_signed(dt);
    if (sz == 1) { uint8_t u; memcpy(&u, p, 1); return sg ? (uint64_t)(int64_t)(int8_t)u : u; }
    if (sz == 2) { uint16_t u; memcpy(&u, p, 2); return sg ? (uint64_t)(int64_t)(int16_t)u : u; }
    if (sz == 4) { uint32_t u; memcpy(&u, p, 4); return sg ? (uint64_t)(int64_t)(int32_t)u : u; }
    uint64_t u;
    memcpy(&u, p, 8);
    return u;
}

static void int_store(xccl_dtype_t dt, void *p, uint64_t v)
{
    switch (tsize(dt)) {
    case 1: { uint8_t u = (uint8_t)v; memcpy(p, &u, 1); break; }
    case 2: { uint16_t u = (uint16_t)v; memcpy(p, &u, 2); break; }
    case 4: { uint32_t u = (uint32_t)v; memcpy(p, &u, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static void ref_int(xccl_dtype_t dt, xccl_op_t op, void *r, const void *pa, const void *pb)
{
    uint64_t x = int_load(dt, pa), y = int_load(dt, pb), v = 0;
    int gt = int_signed(dt) ? (int64_t)x > (int64_t)y : x > y;
    int lt = int_signed(dt) ? (int64_t)x < (int64_t)y : x < y;
    switch (op) {
    case XCCL_OP_SUM: v = x + y; break;
    case XCCL_OP_PROD: v = x * y; break;
    case XCCL_OP_MAX: v = gt ? x : y; break;
    case XCCL_OP_MIN: v = lt ? x : y; break;
    case XCCL_OP_LAND: v = x != 0 && y != 0; break;
    case XCCL_OP_LOR: v = x != 0 || y != 0; break;
    case XCCL_OP_LXOR: v = (x != 0) != (y != 0); break;
    case XCCL_OP_BAND: v = x & y; break;
    case XCCL_OP_BOR: v = x | y; break;
    case XCCL_OP_BXOR: v = x ^ y; break;
    default: break;
    }
    int_store(dt, r, v);
}

static void gen_int(xccl_dtype_t dt, void *p, uint64_t *s)
{
    static const uint64_t patterns[] = {
        0x7F7F7F7F7F7F7F7Full, 0x8080808080808080ull, 0xFFFFFFFFFFFFFFFFull,
        0x4040404040404040ull, 0xC0C0C0C0C0C0C0C0ull, 0x7FFFFFFFFFFFFFFFull,
        0x8000000000000000ull, 0x0000000100010101ull,
    };
    uint64_t r = rnd(s);
    uint64_t v;
    switch (r % 8) {
    case 0: v = 0; break;                                     /* zeros for logical ops */
    case 1: v = (uint64_t)((int64_t)((r >> 8) % 7) - 3); break; /* small, negatives */
    case 2: v = patterns[(r >> 8) % 8]; break;                /* extremes: wrap */
    default: v = rnd(s); break;                               /* full width */
    }
    int_store(dt, p, v);
}

/* ------------------------------------------------------------------------ */
/* Floating point                                                           */
/* ------------------------------------------------------------------------ */

#define REF_REAL(T)                                                           \
    do {                                                                      \
        T x, y, v = 0;                                                        \
        memcpy(&x, pa, sizeof x);                                             \
        memcpy(&y, pb, sizeof y);                                             \
        switch (op) {                                                         \
        case XCCL_OP_SUM: v = x + y; break;                                   \
        case XCCL_OP_PROD: v = x * y; break;                                  \
        case XCCL_OP_MAX: v = x > y ? x : y; break;                           \
        case XCCL_OP_MIN: v = x < y ? x : y; break;                           \
        default: break;                                                       \
        }                                                                     \
        memcpy(r, &v, sizeof v);                                              \
    } while (0)

static void ref_real(xccl_dtype_t dt, xccl_op_t op, void *r, const void *pa, const void *pb)
{
    if (dt == XCCL_DT_FLOAT)
        REF_REAL(float);
    else if (dt == XCCL_DT_DOUBLE)
        REF_REAL(double);
    else
        REF_REAL(long double);
}

/* A random sign and 64 random significant bits, magnitude 2^-20 .. 2^20:
 * rounded to the element type, every bit of its mantissa is random, so
 * products and sums round (and a fused multiply-add shows). */
static long double rnd_mant(uint64_t *s)
{
    uint64_t r = rnd(s), m = rnd(s) | 1ull << 63;
    long double v = ldexpl((long double)m, (int)(r % 41) - 20 - 63);
    return (r >> 8) & 1 ? -v : v;
}

/* A mix of ordinary values and specials (signed zeros, infinities, one NaN
 * bit pattern only, denormals, huge values that overflow). */
#define GEN_REAL(T, MAXV, MINV)                                               \
    do {                                                                      \
        uint64_t r_ = rnd(s);                                                 \
        T v_;                                                                 \
        switch (r_ % 16) {                                                    \
        case 0: v_ = 0; break;                                                \
        case 1: v_ = -(T)0; break;                                            \
        case 2: v_ = (T)INFINITY; break;                                      \
        case 3: v_ = -(T)INFINITY; break;                                     \
        case 4: v_ = (T)NAN; break;                                           \
        case 5: v_ = (MINV) / 4; break;                                       \
        case 6: v_ = ((r_ >> 8) & 1) ? (MAXV) / 2 : -(MAXV) / 2; break;       \
        case 7: case 8: v_ = (T)rnd_mant(s); break;                           \
        default:                                                              \
            v_ = (T)((int64_t)((r_ >> 8) % 2000001) - 1000000) / (T)7;        \
            break;                                                            \
        }                                                                     \
        memcpy(p, &v_, sizeof v_);                                            \
    } while (0)

static void gen_real(xccl_dtype_t dt, void *p, uint64_t *s)
{
    if (dt == XCCL_DT_FLOAT)
        GEN_REAL(float, FLT_MAX, FLT_MIN);
    else if (dt == XCCL_DT_DOUBLE)
        GEN_REAL(double, DBL_MAX, DBL_MIN);
    else
        GEN_REAL(long double, LDBL_MAX, LDBL_MIN);
}

static int real_eq(xccl_dtype_t dt, const void *g, const void *e)
{
    return memcmp(g, e, dt == XCCL_DT_LONG_DOUBLE ? LD_BYTES : tsize(dt)) == 0;
}

/* Complex numbers as two reals (C11 6.2.5p13); generated in long double and
 * rounded to the part type. */
static size_t cpart(xccl_dtype_t dt)
{
    return dt == XCCL_DT_FLOAT_COMPLEX ? sizeof(float)
         : dt == XCCL_DT_DOUBLE_COMPLEX ? sizeof(double) : sizeof(long double);
}

static void cset(xccl_dtype_t dt, void *p, int k, long double v)
{
    char *q = (char *)p + k * cpart(dt);
    if (dt == XCCL_DT_FLOAT_COMPLEX) { float f = (float)v; memcpy(q, &f, sizeof f); }
    else if (dt == XCCL_DT_DOUBLE_COMPLEX) { double d = (double)v; memcpy(q, &d, sizeof d); }
    else memcpy(q, &v, sizeof v);
}

/* SUM: one addition per part.  PROD: as C99 Annex G and GCC define x * y:
 * re = ac - bd, im = ad + bc, every operation rounded on its own, and only
 * when both parts come out NaN the recovery of infinities, which is libgcc's
 * __mulsc3/__muldc3/__mulxc3 (reached here through the compiler's own
 * complex multiplication; this file is built for the baseline ISA). */
#define REF_CPLX(T)                                                           \
    do {                                                                      \
        T x[2], y[2], v[2];                                                   \
        memcpy(x, pa, sizeof x);                                              \
        memcpy(y, pb, sizeof y);                                              \
        if (op == XCCL_OP_SUM) {                                              \
            v[0] = x[0] + y[0];                                               \
            v[1] = x[1] + y[1];                                               \
        } else {                                                              \
            T ac = x[0] * y[0], bd = x[1] * y[1];                             \
            T ad = x[0] * y[1], bc = x[1] * y[0];                             \
            v[0] = ac - bd;                                                   \
            v[1] = ad + bc;                                                   \
            if (isnan(v[0]) && isnan(v[1])) {                                 \
                T _Complex cx, cy, cv;                                        \
                memcpy(&cx, pa, sizeof cx);                                   \
                memcpy(&cy, pb, sizeof cy);                                   \
                cv = cx * cy;                                                 \
                memcpy(v, &cv, sizeof v);                                     \
            }                                                                 \
        }                                                                     \
        memcpy(r, v, sizeof v);                                               \
    } while (0)

static void ref_complex(xccl_dtype_t dt, xccl_op_t op, void *r, const void *pa, const void *pb)
{
    if (dt == XCCL_DT_FLOAT_COMPLEX)
        REF_CPLX(float);
    else if (dt == XCCL_DT_DOUBLE_COMPLEX)
        REF_CPLX(double);
    else
        REF_CPLX(long double);
}

/* Parts: mostly random mantissas (rounding everywhere), some ordinary
 * thirds, some zeros, infinities and NaNs (the Annex G recovery). */
static void gen_complex(xccl_dtype_t dt, void *p, uint64_t *s)
{
    for (int k = 0; k < 2; k++) {
        uint64_t r = rnd(s);
        long double v;
        switch (r % 32) {
        case 0: v = 0.0L; break;
        case 1: v = -0.0L; break;
        case 2: v = INFINITY; break;
        case 3: v = -INFINITY; break;
        case 4: v = NAN; break;
        case 5: case 6: case 7: case 8:
            v = (long double)((int64_t)((r >> 8) % 2000001) - 1000000) / 3.0L;
            break;
        default: v = rnd_mant(s); break;
        }
        cset(dt, p, k, v);
    }
}

static int complex_eq(xccl_dtype_t dt, const void *g, const void *e)
{
    size_t part = cpart(dt);
    size_t sig = dt == XCCL_DT_LONG_DOUBLE_COMPLEX ? LD_BYTES : part;
    return memcmp(g, e, sig) == 0 && memcmp((const char *)g + part, (const char *)e + part, sig) == 0;
}

/* ------------------------------------------------------------------------ */
/* BOOL and BYTE                                                            */
/* ------------------------------------------------------------------------ */

static void ref_byte(xccl_dtype_t dt, xccl_op_t op, void *r, const void *pa, const void *pb)
{
    unsigned char x = *(const unsigned char *)pa, y = *(const unsigned char *)pb, v = 0;
    (void)dt;
    switch (op) {
    case XCCL_OP_LAND: v = x && y; break;
    case XCCL_OP_LOR: v = x || y; break;
    case XCCL_OP_LXOR: v = !x != !y; break;
    case XCCL_OP_BAND: v = x & y; break;
    case XCCL_OP_BOR: v = x | y; break;
    case XCCL_OP_BXOR: v = x ^ y; break;
    default: break;
    }
    *(unsigned char *)r = v;
}

/* ------------------------------------------------------------------------ */
/* Value/index pairs                                                        */
/* ------------------------------------------------------------------------ */

#define REF_PAIR(T)                                                           \
    do {                                                                      \
        T x, y, v;                                                            \
        memcpy(&x, pa, sizeof x);                                             \
        memcpy(&y, pb, sizeof y);                                             \
        memcpy(&v, pa, sizeof v);                                             \
        if (x.v == y.v) {                                                     \
            if (y.i < x.i)                                                    \
                v.i = y.i;                                                    \
        } else if (op == XCCL_OP_MAXLOC ? y.v > x.v : y.v < x.v) {            \
            v.v = y.v;                                                        \
            v.i = y.i;                                                        \
        }                                                                     \
        memcpy(r, &v, sizeof v);                                              \
    } while (0)

/* Values from a small set (many ties), signed zeros, extremes; indices from
 * a small set (equal values with equal and with different indices). */
#define GEN_PAIR(T, VT, IT, BIG)                                              \
    do {                                                                      \
        T e_;                                                                 \
        uint64_t r_ = rnd(s);                                                 \
        memset(&e_, 0, sizeof e_);                                            \
        switch (r_ % 8) {                                                     \
        case 0: e_.v = (VT)(BIG); break;                                      \
        case 1: e_.v = (VT)-(BIG); break;                                     \
        case 2: e_.v = (VT)0 * (VT)-1; break;                                 \
        default: e_.v = (VT)((int)((r_ >> 8) % 5) - 2); break;                \
        }                                                                     \
        e_.i = (IT)((r_ >> 16) % 6);                                          \
        memcpy(p, &e_, sizeof e_);                                            \
    } while (0)

#define PAIR_CASES(X)                                                         \
    X(XCCL_DT_FLOAT_INT, t_float_int, float, int, FLT_MAX)                    \
    X(XCCL_DT_DOUBLE_INT, t_double_int, double, int, DBL_MAX)                 \
    X(XCCL_DT_LONG_INT, t_long_int, long, int, LONG_MAX)                      \
    X(XCCL_DT_2INT, t_2int, int, int, INT_MAX)                                \
    X(XCCL_DT_SHORT_INT, t_short_int, short, int, SHRT_MAX)                   \
    X(XCCL_DT_LONG_DOUBLE_INT, t_long_double_int, long double, int, LDBL_MAX) \
    X(XCCL_DT_2FLOAT, t_2float, float, float, FLT_MAX)                        \
    X(XCCL_DT_2DOUBLE, t_2double, double, double, DBL_MAX)

static void ref_pair(xccl_dtype_t dt, xccl_op_t op, void *r, const void *pa, const void *pb)
{
    switch (dt) {
#define X(DT, T, VT, IT, BIG) case DT: REF_PAIR(T); break;
    PAIR_CASES(X)
#undef X
    default: break;
    }
}

static void gen_pair(xccl_dtype_t dt, void *p, uint64_t *s)
{
    switch (dt) {
#define X(DT, T, VT, IT, BIG) case DT: GEN_PAIR(T, VT, IT, BIG); break;
    PAIR_CASES(X)
#undef X
    default: break;
    }
}

/* Compare the value (significant bytes) and the index, not the padding. */
static int pair_eq(xccl_dtype_t dt, const void *g, const void *e)
{
    size_t vsz = 0, ioff = 0, isz = 0;
    switch (dt) {
#define X(DT, T, VT, IT, BIG)                                                 \
    case DT: vsz = sizeof(VT); ioff = offsetof(T, i); isz = sizeof(IT); break;
    PAIR_CASES(X)
#undef X
    default: break;
    }
    if (dt == XCCL_DT_LONG_DOUBLE_INT)
        vsz = LD_BYTES;
    return memcmp(g, e, vsz) == 0 &&
           memcmp((const char *)g + ioff, (const char *)e + ioff, isz) == 0;
}

/* ------------------------------------------------------------------------ */
/* Dispatch by type class                                                   */
/* ------------------------------------------------------------------------ */

static void ref_elem(xccl_dtype_t dt, xccl_op_t op, void *r, const void *a, const void *b)
{
    switch (kind_of(dt)) {
    case K_INT: ref_int(dt, op, r, a, b); break;
    case K_FLOAT: ref_real(dt, op, r, a, b); break;
    case K_COMPLEX: ref_complex(dt, op, r, a, b); break;
    case K_BOOL: case K_BYTE: ref_byte(dt, op, r, a, b); break;
    default: ref_pair(dt, op, r, a, b); break;
    }
}

static void gen_elem(xccl_dtype_t dt, void *p, uint64_t *s)
{
    switch (kind_of(dt)) {
    case K_INT: gen_int(dt, p, s); break;
    case K_FLOAT: gen_real(dt, p, s); break;
    case K_COMPLEX: gen_complex(dt, p, s); break;
    case K_BOOL: *(unsigned char *)p = rnd(s) % 3 == 0; break;
    case K_BYTE: *(unsigned char *)p = (unsigned char)rnd(s); break;
    default: gen_pair(dt, p, s); break;
    }
}

static int elem_eq(xccl_dtype_t dt, const void *g, const void *e)
{
    switch (kind_of(dt)) {
    case K_FLOAT: return real_eq(dt, g, e);
    case K_COMPLEX: return complex_eq(dt, g, e);
    case K_PAIR: return pair_eq(dt, g, e);
    default: return memcmp(g, e, tsize(dt)) == 0;
    }
}

/* ------------------------------------------------------------------------ */
/* Harness                                                                  */
/* ------------------------------------------------------------------------ */

enum { AL_NONE, AL_OUT_A, AL_OUT_B, AL_ALL };

typedef struct {
    int alias;
    int bytes;              /* offsets in bytes (else in elements) */
    size_t off_o, off_a, off_b;
    const char *name;
} variant_t;

static const variant_t variants[] = {
    { AL_NONE, 0, 0, 0, 0, "separate, aligned" },
    { AL_NONE, 0, 1, 1, 1, "separate, +1 element each" },
    { AL_NONE, 0, 1, 0, 3, "separate, +1/+0/+3 elements" },
    { AL_NONE, 1, 1, 3, 5, "separate, +1/+3/+5 bytes" },
    { AL_NONE, 1, 7, 2, 0, "separate, +7/+2/+0 bytes" },
    { AL_OUT_A, 0, 0, 0, 0, "out == a" },
    { AL_OUT_B, 0, 0, 0, 0, "out == b" },
    { AL_ALL, 0, 0, 0, 0, "out == a == b" },
    { AL_OUT_A, 0, 1, 1, 2, "out == a, +1 element" },
    { AL_OUT_B, 1, 3, 1, 3, "out == b, +3 bytes" },
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

#define SLACK 128           /* bytes of guard before and after each region */
#define GUARD 0xA5

typedef struct {
    char msg[512];
    int fails;
} result_t;

static void note_fail(result_t *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_fail(result_t *res, const char *fmt, ...)
{
    if (res->fails++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->msg, sizeof res->msg, fmt, ap);
        va_end(ap);
    }
}

static void hex(char *dst, size_t dlen, const void *p, size_t n)
{
    const unsigned char *q = p;
    size_t k = 0;
    dst[0] = 0;
    for (size_t j = 0; j < n && k + 3 < dlen; j++, k += 2)
        snprintf(dst + k, dlen - k, "%02x", q[j]);
}

/* 64-byte aligned; C11 aligned_alloc wants a multiple of the alignment. */
static void *alloc64(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Runs fn over all lengths and variants; returns the number of failures and
 * describes the first in res->msg. */
static int check_kernel(xccl_dtype_t dt, xccl_op_t op, xccl_reduce_fn_t fn, result_t *res)
{
    const size_t sz = tsize(dt);
    const size_t cap = (MAX_LEN + 8) * sz + 2 * SLACK;
    unsigned char *A = alloc64(MAX_LEN * sz + 64);
    unsigned char *B = alloc64(MAX_LEN * sz + 64);
    unsigned char *E = alloc64(MAX_LEN * sz + 64);
    unsigned char *G = alloc64(MAX_LEN * sz + 64);
    unsigned char *arena[3], *save[3];
    for (int k = 0; k < 3; k++) {
        arena[k] = alloc64(cap);
        save[k] = alloc64(cap);
    }
    res->fails = 0;
    res->msg[0] = 0;

    for (size_t li = 0; li < NLENS; li++) {
        const size_t n = lens[li];
        uint64_t seed = 0x1234567ull * (dt + 1) + 0x9876ull * (op + 1) + n;
        for (size_t i = 0; i < n; i++) {
            gen_elem(dt, A + i * sz, &seed);
            gen_elem(dt, B + i * sz, &seed);
            if (rnd(&seed) % 5 == 0)          /* exact ties */
                memcpy(B + i * sz, A + i * sz, sz);
        }
        for (size_t vi = 0; vi < NVARIANTS; vi++) {
            const variant_t *v = &variants[vi];
            const size_t unit = v->bytes ? 1 : sz;
            const unsigned char *ea = A, *eb = v->alias == AL_ALL ? A : B;
            for (size_t i = 0; i < n; i++)
                ref_elem(dt, op, E + i * sz, ea + i * sz, eb + i * sz);

            for (int k = 0; k < 3; k++)
                memset(arena[k], GUARD, cap);
            unsigned char *po = arena[0] + SLACK + v->off_o * unit;
            unsigned char *pa = arena[1] + SLACK + v->off_a * unit;
            unsigned char *pb = arena[2] + SLACK + v->off_b * unit;
            memcpy(pa, A, n * sz);
            memcpy(pb, eb, n * sz);
            if (v->alias == AL_OUT_A || v->alias == AL_ALL)
                po = pa;
            if (v->alias == AL_ALL)
                pb = pa;
            if (v->alias == AL_OUT_B)
                po = pb;
            for (int k = 0; k < 3; k++)
                memcpy(save[k], arena[k], cap);

            fn(po, pa, pb, n);

            memcpy(G, po, n * sz);
            for (size_t i = 0; i < n; i++) {
                if (!elem_eq(dt, G + i * sz, E + i * sz)) {
                    char h[5][80];
                    hex(h[0], sizeof h[0], ea + i * sz, sz);
                    hex(h[1], sizeof h[1], eb + i * sz, sz);
                    hex(h[2], sizeof h[2], G + i * sz, sz);
                    hex(h[3], sizeof h[3], E + i * sz, sz);
                    note_fail(res, "%s %s n=%zu [%s] i=%zu: a=%s b=%s got=%s want=%s",
                              xccl_dtype_name(dt), xccl_op_name(op), n, v->name, i,
                              h[0], h[1], h[2], h[3]);
                }
            }
            /* Nothing outside the output range may change. */
            for (int k = 0; k < 3; k++) {
                for (size_t j = 0; j < cap; j++) {
                    uintptr_t p = (uintptr_t)(arena[k] + j), o = (uintptr_t)po;
                    if (p >= o && p < o + n * sz)
                        continue;
                    if (arena[k][j] != save[k][j]) {
                        note_fail(res, "%s %s n=%zu [%s]: byte %zu of buffer %d changed outside out",
                                  xccl_dtype_name(dt), xccl_op_name(op), n, v->name, j, k);
                        break;
                    }
                }
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        free(arena[k]);
        free(save[k]);
    }
    free(A); free(B); free(E); free(G);
    return res->fails;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

static int valid_pairs[XCCL_DT_COUNT * XCCL_OP_COUNT][2];
static int n_valid;
/* The variants this CPU runs (the others are skipped, see main). */
static int usable_isas[16];
static int n_usable;

/* Test _i: pair _i % n_valid of variant usable_isas[_i / n_valid]. */
START_TEST(test_kernel_matches_reference)
{
    const int isa = usable_isas[_i / n_valid];
    xccl_dtype_t dt = (xccl_dtype_t)valid_pairs[_i % n_valid][0];
    xccl_op_t op = (xccl_op_t)valid_pairs[_i % n_valid][1];
    xccl_reduce_fn_t fn = xccl_reduce_kernel_isa(isa, dt, op);
    result_t res;
    ck_assert_msg(fn != NULL, "%s: no kernel for %s %s", xccl_reduce_isa_name(isa),
                  xccl_dtype_name(dt), xccl_op_name(op));
    int f = check_kernel(dt, op, fn, &res);
    ck_assert_msg(f == 0, "variant %s: %d mismatches; first: %s", xccl_reduce_isa_name(isa), f,
                  res.msg);
}
END_TEST

/* Every variant has the same set of kernels; xccl_reduce_kernel hands out
 * those of the best usable variant.  Only pointers are looked at here, so
 * variants this CPU cannot run are checked too. */
START_TEST(test_isa_tables)
{
    const int n = xccl_reduce_isa_count(), best = xccl_reduce_isa_best();
    ck_assert_int_ge(n, 1);
    ck_assert_int_lt(n, (int)(sizeof usable_isas / sizeof usable_isas[0]));
    ck_assert_msg(xccl_reduce_isa_usable(n - 1), "the last variant (%s) must run anywhere",
                  xccl_reduce_isa_name(n - 1));
    ck_assert(best >= 0 && best < n && xccl_reduce_isa_usable(best));
    for (int isa = 0; isa < best; isa++)
        ck_assert(!xccl_reduce_isa_usable(isa));
    for (int isa = 0; isa < n; isa++) {
        ck_assert_ptr_nonnull(xccl_reduce_isa_name(isa));
        for (int other = 0; other < isa; other++)
            ck_assert_str_ne(xccl_reduce_isa_name(isa), xccl_reduce_isa_name(other));
        for (int d = 0; d < XCCL_DT_COUNT; d++)
            for (int o = 0; o < XCCL_OP_COUNT; o++) {
                xccl_reduce_fn_t fn = xccl_reduce_kernel_isa(isa, (xccl_dtype_t)d, (xccl_op_t)o);
                ck_assert_msg((fn != NULL) == expect_valid((xccl_dtype_t)d, (xccl_op_t)o),
                              "%s: %s %s: kernel %s", xccl_reduce_isa_name(isa),
                              xccl_dtype_name((xccl_dtype_t)d), xccl_op_name((xccl_op_t)o),
                              fn ? "present" : "missing");
                if (isa == best)
                    ck_assert(fn == xccl_reduce_kernel((xccl_dtype_t)d, (xccl_op_t)o));
            }
    }
    ck_assert_ptr_null(xccl_reduce_isa_name(n));
    ck_assert_ptr_null(xccl_reduce_isa_name(-1));
    ck_assert(!xccl_reduce_isa_usable(n));
    ck_assert(xccl_reduce_kernel_isa(n, XCCL_DT_INT32, XCCL_OP_SUM) == NULL);
    ck_assert(xccl_reduce_kernel_isa(-1, XCCL_DT_INT32, XCCL_OP_SUM) == NULL);
    ck_assert(xccl_reduce_kernel_isa(best, XCCL_DT_COUNT, XCCL_OP_SUM) == NULL);
    ck_assert(xccl_reduce_kernel_isa(best, XCCL_DT_INT32, XCCL_OP_COUNT) == NULL);
}
END_TEST

START_TEST(test_valid_set)
{
    for (int d = 0; d < XCCL_DT_COUNT; d++)
        for (int o = 0; o < XCCL_OP_COUNT; o++) {
            int have = xccl_reduce_kernel((xccl_dtype_t)d, (xccl_op_t)o) != NULL;
            ck_assert_msg(have == expect_valid((xccl_dtype_t)d, (xccl_op_t)o),
                          "%s %s: kernel %s", xccl_dtype_name((xccl_dtype_t)d),
                          xccl_op_name((xccl_op_t)o), have ? "present" : "missing");
        }
    ck_assert_int_eq(n_valid, 120);
}
END_TEST

START_TEST(test_invalid_pairs)
{
    static const int bad[][2] = {
        { XCCL_DT_BYTE, XCCL_OP_SUM }, { XCCL_DT_FLOAT, XCCL_OP_BAND },
        { XCCL_DT_FLOAT_INT, XCCL_OP_SUM }, { XCCL_DT_INT32, XCCL_OP_MAXLOC },
        { XCCL_DT_BOOL, XCCL_OP_SUM }, { XCCL_DT_BOOL, XCCL_OP_BAND },
        { XCCL_DT_BYTE, XCCL_OP_LAND }, { XCCL_DT_BYTE, XCCL_OP_MAX },
        { XCCL_DT_DOUBLE_COMPLEX, XCCL_OP_MAX }, { XCCL_DT_LONG_DOUBLE, XCCL_OP_LOR },
        { XCCL_DT_DOUBLE, XCCL_OP_BXOR }, { XCCL_DT_2INT, XCCL_OP_MAX },
        { XCCL_DT_FLOAT, XCCL_OP_MINLOC }, { XCCL_DT_BOOL, XCCL_OP_MINLOC },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        ck_assert_msg(xccl_reduce_kernel((xccl_dtype_t)bad[k][0], (xccl_op_t)bad[k][1]) == NULL,
                      "case %zu not NULL", k);
    /* Out-of-range enum values. */
    const int out_dt[] = { XCCL_DT_COUNT, XCCL_DT_COUNT + 1, 1000, -1, INT_MIN, INT_MAX };
    const int out_op[] = { XCCL_OP_COUNT, XCCL_OP_COUNT + 1, 1000, -1, INT_MIN, INT_MAX };
    for (size_t k = 0; k < sizeof out_dt / sizeof out_dt[0]; k++) {
        ck_assert(xccl_reduce_kernel((xccl_dtype_t)out_dt[k], XCCL_OP_SUM) == NULL);
        ck_assert(xccl_reduce_kernel(XCCL_DT_INT32, (xccl_op_t)out_op[k]) == NULL);
        ck_assert(xccl_reduce_kernel((xccl_dtype_t)out_dt[k], (xccl_op_t)out_op[k]) == NULL);
        ck_assert_uint_eq(xccl_dtype_size((xccl_dtype_t)out_dt[k]), 0);
        ck_assert_str_eq(xccl_dtype_name((xccl_dtype_t)out_dt[k]), "?");
        ck_assert_str_eq(xccl_op_name((xccl_op_t)out_op[k]), "?");
    }
}
END_TEST

START_TEST(test_sizes)
{
    for (int d = 0; d < XCCL_DT_COUNT; d++)
        ck_assert_msg(xccl_dtype_size((xccl_dtype_t)d) == tsize((xccl_dtype_t)d),
                      "%s: %zu != %zu", xccl_dtype_name((xccl_dtype_t)d),
                      xccl_dtype_size((xccl_dtype_t)d), tsize((xccl_dtype_t)d));
    ck_assert_uint_eq(xccl_dtype_size(XCCL_DT_INT16), 2);
    ck_assert_uint_eq(xccl_dtype_size(XCCL_DT_DOUBLE_COMPLEX), 16);
    ck_assert_uint_eq(xccl_dtype_size(XCCL_DT_BOOL), 1);
    ck_assert_uint_eq(xccl_dtype_size(XCCL_DT_2INT), 8);
    ck_assert_uint_eq(xccl_dtype_size(XCCL_DT_SHORT_INT), 8);
}
END_TEST

START_TEST(test_names)
{
    static const char *const dn[XCCL_DT_COUNT] = {
        "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
        "float", "double", "long_double", "float_complex", "double_complex",
        "long_double_complex", "bool", "byte", "float_int", "double_int", "long_int",
        "2int", "short_int", "long_double_int", "2float", "2double",
    };
    static const char *const on[XCCL_OP_COUNT] = {
        "sum", "prod", "max", "min", "land", "lor", "lxor", "band", "bor", "bxor",
        "maxloc", "minloc",
    };
    for (int d = 0; d < XCCL_DT_COUNT; d++)
        ck_assert_str_eq(xccl_dtype_name((xccl_dtype_t)d), dn[d]);
    for (int o = 0; o < XCCL_OP_COUNT; o++)
        ck_assert_str_eq(xccl_op_name((xccl_op_t)o), on[o]);
}
END_TEST

/* Wrong kernels the harness must reject. */
static void bad_int32_sum_aa(void *o, const void *a, const void *b, size_t n)
{
    (void)b;
    for (size_t i = 0; i < n; i++) {
        int32_t x;
        memcpy(&x, (const char *)a + 4 * i, 4);
        uint32_t v = (uint32_t)x + (uint32_t)x;
        memcpy((char *)o + 4 * i, &v, 4);
    }
}

static void bad_int8_sum_saturating(void *o, const void *a, const void *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int v = ((const int8_t *)a)[i] + ((const int8_t *)b)[i];
        ((int8_t *)o)[i] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
    }
}

static void bad_float_max_swapped(void *o, const void *a, const void *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x, y;
        memcpy(&x, (const char *)a + 4 * i, 4);
        memcpy(&y, (const char *)b + 4 * i, 4);
        float v = y > x ? y : x;
        memcpy((char *)o + 4 * i, &v, 4);
    }
}

static void bad_2int_minloc_high_index(void *o, const void *a, const void *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        t_2int x, y;
        memcpy(&x, (const char *)a + sizeof x * i, sizeof x);
        memcpy(&y, (const char *)b + sizeof y * i, sizeof y);
        if (y.v < x.v || (y.v == x.v && y.i > x.i))
            x = y;
        memcpy((char *)o + sizeof x * i, &x, sizeof x);
    }
}

static void bad_short_by_one(void *o, const void *a, const void *b, size_t n)
{
    xccl_reduce_kernel(XCCL_DT_DOUBLE, XCCL_OP_SUM)(o, a, b, n ? n - 1 : 0);
}

static void bad_overrun(void *o, const void *a, const void *b, size_t n)
{
    xccl_reduce_kernel(XCCL_DT_UINT16, XCCL_OP_BXOR)(o, a, b, n);
    memset((char *)o + 2 * n, 0, 2);
}

/* Writes out before reading b: wrong when out == b. */
static void bad_alias_b(void *o, const void *a, const void *b, size_t n)
{
    memcpy(o, a, 8 * n);
    for (size_t i = 0; i < n; i++) {
        int64_t x, y;
        memcpy(&x, (const char *)o + 8 * i, 8);
        memcpy(&y, (const char *)b + 8 * i, 8);
        x ^= y;
        memcpy((char *)o + 8 * i, &x, 8);
    }
}

/* Complex products as an FMA machine may fuse them (vfmaddsub: a*c - bd
 * and a*d + bc each rounded once): the bug the variants once had, one bit
 * off in many elements. */
static void bad_double_complex_prod_fma(void *o, const void *a, const void *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x[2], y[2], v[2];
        memcpy(x, (const char *)a + sizeof x * i, sizeof x);
        memcpy(y, (const char *)b + sizeof y * i, sizeof y);
        v[0] = fma(x[0], y[0], -(x[1] * y[1]));
        v[1] = fma(x[0], y[1], x[1] * y[0]);
        memcpy((char *)o + sizeof v * i, v, sizeof v);
    }
}

static void bad_float_complex_prod_fma(void *o, const void *a, const void *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x[2], y[2], v[2];
        memcpy(x, (const char *)a + sizeof x * i, sizeof x);
        memcpy(y, (const char *)b + sizeof y * i, sizeof y);
        v[0] = fmaf(x[0], y[0], -(x[1] * y[1]));
        v[1] = fmaf(x[0], y[1], x[1] * y[0]);
        memcpy((char *)o + sizeof v * i, v, sizeof v);
    }
}

START_TEST(test_harness_catches_bugs)
{
    result_t res;
    ck_assert_int_gt(check_kernel(XCCL_DT_INT32, XCCL_OP_SUM, bad_int32_sum_aa, &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_INT8, XCCL_OP_SUM, bad_int8_sum_saturating, &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_FLOAT, XCCL_OP_MAX, bad_float_max_swapped, &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_2INT, XCCL_OP_MINLOC, bad_2int_minloc_high_index, &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_DOUBLE, XCCL_OP_SUM, bad_short_by_one, &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_UINT16, XCCL_OP_BXOR, bad_overrun, &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_INT64, XCCL_OP_BXOR, bad_alias_b, &res), 0);
    ck_assert_msg(strstr(res.msg, "out == b") != NULL, "alias bug caught elsewhere: %s", res.msg);
    ck_assert_int_gt(check_kernel(XCCL_DT_DOUBLE_COMPLEX, XCCL_OP_PROD, bad_double_complex_prod_fma, &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_FLOAT_COMPLEX, XCCL_OP_PROD, bad_float_complex_prod_fma, &res), 0);
    /* A kernel for one op does not pass as another. */
    ck_assert_int_gt(check_kernel(XCCL_DT_UINT32, XCCL_OP_BOR,
                                  xccl_reduce_kernel(XCCL_DT_UINT32, XCCL_OP_BXOR), &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_INT16, XCCL_OP_MAX,
                                  xccl_reduce_kernel(XCCL_DT_UINT16, XCCL_OP_MAX), &res), 0);
    ck_assert_int_gt(check_kernel(XCCL_DT_DOUBLE_INT, XCCL_OP_MAXLOC,
                                  xccl_reduce_kernel(XCCL_DT_DOUBLE_INT, XCCL_OP_MINLOC), &res), 0);
}
END_TEST

/* xccl_copy_small against memmove: every length up to 64, the regions
 * apart and overlapping either way, bytes around the target untouched. */
START_TEST(test_copy_small)
{
    unsigned char got[256], want[256];
    for (size_t len = 0; len <= 64; len++) {
        for (int shift = -40; shift <= 40; shift++) {
            for (size_t i = 0; i < sizeof(got); i++) {
                got[i] = want[i] = (unsigned char) (i * 37u + len * 11u + (unsigned) shift);
            }
            memmove(want + 96 + shift, want + 96, len);
            xccl_copy_small(got + 96 + shift, got + 96, len);
            ck_assert_msg(0 == memcmp(got, want, sizeof(got)), "len %zu shift %d", len, shift);
        }
    }
}
END_TEST

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("reduce_kernels");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_valid_set);
    tcase_add_test(tc, test_invalid_pairs);
    tcase_add_test(tc, test_sizes);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_isa_tables);
    suite_add_tcase(s, tc);

    tc = tcase_create("kernels");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_kernel_matches_reference, 0, n_valid * n_usable);
    tcase_add_test(tc, test_harness_catches_bugs);
    suite_add_tcase(s, tc);

    tc = tcase_create("copy");
    tcase_add_test(tc, test_copy_small);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    for (int d = 0; d < XCCL_DT_COUNT; d++)
        for (int o = 0; o < XCCL_OP_COUNT; o++)
            if (expect_valid((xccl_dtype_t)d, (xccl_op_t)o)) {
                valid_pairs[n_valid][0] = d;
                valid_pairs[n_valid][1] = o;
                n_valid++;
            }
    /* A variant this CPU cannot run would fault: say so, never pass it. */
    for (int isa = 0; isa < xccl_reduce_isa_count(); isa++) {
        if (xccl_reduce_isa_usable(isa) && n_usable < (int)(sizeof usable_isas / sizeof usable_isas[0]))
            usable_isas[n_usable++] = isa;
        else
            printf("SKIP kernel variant %s: this CPU cannot run it (not tested here)\n",
                   xccl_reduce_isa_name(isa));
    }
    printf("kernel variants tested:");
    for (int k = 0; k < n_usable; k++)
        printf(" %s", xccl_reduce_isa_name(usable_isas[k]));
    printf(" (xccl_reduce_kernel uses %s)\n", xccl_reduce_isa_name(xccl_reduce_isa_best()));
    fflush(stdout);
    return xccl_check_run(kernels_suite());
}
