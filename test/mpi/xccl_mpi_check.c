/*
 * xccl_mpi_check: MPI correctness test for the collectives xccl intercepts
 * (Allreduce, Reduce_scatter, Reduce_scatter_block, Allgather, Alltoall,
 * Bcast).
 *
 * Every rank's input is a deterministic function of (rank, index, type, op),
 * so every rank computes the expected result locally (reductions: the op
 * applied over ranks 0..p-1 in rank order) and never trusts MPI for it.
 * Integer results are compared exactly (8/16-bit sums are made to wrap);
 * floating inputs are small multiples of powers of two so sums and products
 * are exact.  Results that must be the same on every rank (allreduce,
 * allgather, bcast) are hashed and the hashes compared across ranks, to
 * prove bitwise identical results.  All of this is exchanged with
 * point-to-point messages only, never with a collective under test.
 *
 * Communicators: MPI_COMM_WORLD, a dup of it, and a split of it
 * (color = rank % 2, key = -rank: reversed rank order).
 *
 * Output (rank 0, at the end):
 *   EXPECT rank=<r> allreduce=<n> reduce_scatter=<n> reduce_scatter_block=<n>
 *          allgather=<n> alltoall=<n> bcast=<n>          (one line per rank)
 *   CALLS  rank=<r> ...same fields...: every call that reaches the coll
 *          component, expected to be handled by xccl or not
 *   RESULT: <passed> passed, <failed> failed
 * and on failure, from the rank that sees it:
 *   FAIL <coll> comm=<name> type=<T> op=<O> count=<n> inplace=<0|1> rank=<r>
 *        index=<i> got=<..> want=<..>
 * Exit status: 0 when every case passed on every rank, 1 otherwise.
 *
 * Options: -q  quick mode (fewer counts, no 100003-element and 64 MiB cases).
 *          -P  also messages past 4 MiB on MPI_COMM_WORLD (allreduce, reduce_scatter,
 *              reduce_scatter_block, allgather, bcast; odd counts): the pipelined
 *              algorithms' several 2 MiB chunks, also in quick mode.
 *          -k  skip cases that hit known bugs of stock Open MPI 4.1.x, for
 *              developing this test without xccl: MPI_MAX/MPI_MIN on
 *              MPI_UNSIGNED_LONG compare as signed (open-mpi/ompi#10525).
 *              Never use -k to judge xccl.
 */
#include <mpi.h>

#include <complex.h>
#include <float.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Collectives and ops                                                      */
/* ------------------------------------------------------------------------ */

enum {
    C_ALLREDUCE, C_REDUCE_SCATTER, C_REDUCE_SCATTER_BLOCK,
    C_ALLGATHER, C_ALLTOALL, C_BCAST, NCOLL
};
static const char *const coll_names[NCOLL] = {
    "allreduce", "reduce_scatter", "reduce_scatter_block",
    "allgather", "alltoall", "bcast"
};

enum {
    OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_LAND, OP_LOR, OP_LXOR,
    OP_BAND, OP_BOR, OP_BXOR, OP_MAXLOC, OP_MINLOC,
    OP_USER_SUM,  /* user op, commute = 1: elementwise int sum        */
    OP_USER_NC,   /* user op, commute = 0: affine map composition     */
    OP_NONE,      /* data movement                                    */
    NOPS
};
static const char *const op_names[NOPS] = {
    "MPI_SUM", "MPI_PROD", "MPI_MAX", "MPI_MIN", "MPI_LAND", "MPI_LOR",
    "MPI_LXOR", "MPI_BAND", "MPI_BOR", "MPI_BXOR", "MPI_MAXLOC",
    "MPI_MINLOC", "user_sum_commutative", "user_affine_noncommutative", "none"
};
static MPI_Op mpi_ops[NOPS];

#define B(o) (1u << (o))
#define OPS_INT  (B(OP_SUM) | B(OP_PROD) | B(OP_MAX) | B(OP_MIN) | B(OP_LAND) | \
                  B(OP_LOR) | B(OP_LXOR) | B(OP_BAND) | B(OP_BOR) | B(OP_BXOR))
#define OPS_FLT  (B(OP_SUM) | B(OP_PROD) | B(OP_MAX) | B(OP_MIN))
#define OPS_CPLX (B(OP_SUM) | B(OP_PROD))
#define OPS_BOOL (B(OP_LAND) | B(OP_LOR) | B(OP_LXOR))
#define OPS_BYTE (B(OP_BAND) | B(OP_BOR) | B(OP_BXOR))
#define OPS_PAIR (B(OP_MAXLOC) | B(OP_MINLOC))

/* ------------------------------------------------------------------------ */
/* Deterministic inputs                                                     */
/* ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t seed_of(uint64_t salt, int rank, size_t i)
{
    return mix64(salt ^ mix64(((uint64_t)(unsigned)rank << 44) ^ (uint64_t)i));
}

/* x -> a*x + b (mod 2^32), packed as a << 32 | b.  "u then v". */
static uint64_t affine_compose(uint64_t u, uint64_t v)
{
    uint32_t au = (uint32_t)(u >> 32), bu = (uint32_t)u;
    uint32_t av = (uint32_t)(v >> 32), bv = (uint32_t)v;
    uint32_t a = au * av, b = av * bu + bv;
    return ((uint64_t)a << 32) | b;
}

/* An integer input as a 64-bit pattern, truncated to the type by the caller.
 * SUM on 8/16-bit types (and unsigned 32/64-bit) wraps; PROD never
 * overflows a signed type: factors are 1, -1 and 2 (2 only on ranks < 5). */
static uint64_t int_input(uint64_t s, int rank, int op, int bits, bool sgn)
{
    uint64_t r1 = mix64(s), r2 = mix64(r1), r3 = mix64(r2);
    int64_t neg = (r1 & 1) ? -1 : 1;
    switch (op) {
    case OP_SUM:
    case OP_USER_SUM:
        switch (bits) {
        case 8:
            return sgn ? (uint64_t)(neg * (int64_t)(90 + r2 % 38)) : 130 + r2 % 126;
        case 16:
            return sgn ? (uint64_t)(neg * (int64_t)(20000 + r2 % 12768)) : 40000 + r2 % 25536;
        case 32:
            return sgn ? (uint64_t)((int64_t)(r2 % 2000001) - 1000000)
                       : 0x80000000ull + r2 % 0x7fffffffull;
        default:
            return sgn ? (uint64_t)((int64_t)(r2 % (1ull << 50)) - (1ll << 49)) : r2;
        }
    case OP_PROD:
        if (sgn) {
            uint64_t k = r1 % 3;
            return k == 0 ? (rank < 5 ? 2 : 1) : k == 1 ? 1 : (uint64_t)-1;
        }
        return 1 + r1 % 3;
    case OP_LAND: /* true values are single bits: bitwise AND would be wrong */
        return (r1 % 8 == 0) ? 0 : 1ull << (r2 % (unsigned)bits);
    case OP_LOR:
        return (r1 % 8 == 0) ? 1ull << (r2 % (unsigned)bits) : 0;
    case OP_LXOR:
        return (r1 % 2) ? 1ull << (r2 % (unsigned)bits) : 0;
    case OP_BAND:
        return r1 | r2 | r3;
    case OP_BOR:
        return r1 & r2 & r3;
    case OP_USER_NC:
        return ((r1 | 1) << 32) | (r2 & 0xffffffffull);
    default: /* MAX, MIN, BXOR, data movement: any bits */
        return r1;
    }
}

/* Floating inputs: exact under any summation order / product order. */
static double flt_input(uint64_t s, int rank, int op)
{
    uint64_t r1 = mix64(s), r2 = mix64(r1);
    switch (op) {
    case OP_SUM:
        return ((double)(int64_t)(r1 % 4001) - 2000.0) * 0.25;
    case OP_PROD: {
        uint64_t k = r1 % 4;
        return k == 0 ? (rank < 5 ? 2.0 : 1.0) : k == 1 ? 1.0 : k == 2 ? -1.0 : 0.5;
    }
    default:
        return ((double)(int64_t)(r2 % 2000001) - 1000000.0) / 64.0;
    }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* Bytes of a long double that carry its value (x87: 10 of 16). */
#if LDBL_MANT_DIG == 64
#define LDBL_SIG 10
#else
#define LDBL_SIG sizeof(long double)
#endif

/* ------------------------------------------------------------------------ */
/* Element types                                                            */
/* ------------------------------------------------------------------------ */

typedef struct tinfo {
    const char *name;
    MPI_Datatype dt;
    size_t size;              /* sizeof the C element == MPI extent */
    unsigned ops;             /* predefined ops valid for the type */
    void (*gen)(void *dst, uint64_t s, int rank, int op);
    void (*apply)(void *acc, const void *in, int op); /* acc = acc op in */
    bool (*equal)(const void *a, const void *b);
    void (*fmt)(char *buf, size_t n, const void *a);
    size_t (*sig)(const void *a, unsigned char *out); /* value bytes only */
} tinfo;

#define DEF_INT(NAME, T, UT, SGN, BITS)                                          \
    static void gen_##NAME(void *d, uint64_t s, int rank, int op)                \
    {                                                                            \
        T v = (T)(UT)int_input(s, rank, op, BITS, SGN);                          \
        memcpy(d, &v, sizeof v);                                                 \
    }                                                                            \
    static void apply_##NAME(void *accp, const void *inp, int op)               \
    {                                                                            \
        T a, b, r;                                                               \
        memcpy(&a, accp, sizeof a);                                              \
        memcpy(&b, inp, sizeof b);                                               \
        switch (op) {                                                            \
        case OP_SUM: case OP_USER_SUM: r = (T)(UT)((UT)a + (UT)b); break;       \
        case OP_PROD:                                                            \
            r = (T)(UT)((unsigned long long)(UT)a * (unsigned long long)(UT)b);  \
            break;                                                               \
        case OP_MAX: r = a > b ? a : b; break;                                   \
        case OP_MIN: r = a < b ? a : b; break;                                   \
        case OP_LAND: r = (T)(a && b); break;                                    \
        case OP_LOR: r = (T)(a || b); break;                                     \
        case OP_LXOR: r = (T)(!a != !b); break;                                  \
        case OP_BAND: r = (T)(UT)((UT)a & (UT)b); break;                         \
        case OP_BOR: r = (T)(UT)((UT)a | (UT)b); break;                          \
        case OP_BXOR: r = (T)(UT)((UT)a ^ (UT)b); break;                         \
        case OP_USER_NC:                                                         \
            r = (T)(UT)affine_compose((uint64_t)(UT)a, (uint64_t)(UT)b);         \
            break;                                                               \
        default: r = a; break;                                                   \
        }                                                                        \
        memcpy(accp, &r, sizeof r);                                              \
    }                                                                            \
    static bool eq_##NAME(const void *x, const void *y)                          \
    {                                                                            \
        T a, b;                                                                  \
        memcpy(&a, x, sizeof a);                                                 \
        memcpy(&b, y, sizeof b);                                                 \
        return a == b;                                                           \
    }                                                                            \
    static void fmt_##NAME(char *buf, size_t n, const void *x)                   \
    {                                                                            \
        T a;                                                                     \
        memcpy(&a, x, sizeof a);                                                 \
        if (SGN)                                                                 \
            snprintf(buf, n, "%lld", (long long)a);                              \
        else                                                                     \
            snprintf(buf, n, "%llu", (unsigned long long)(UT)a);                 \
    }                                                                            \
    static size_t sig_##NAME(const void *x, unsigned char *out)                  \
    {                                                                            \
        memcpy(out, x, sizeof(T));                                               \
        return sizeof(T);                                                        \
    }

DEF_INT(i8, int8_t, uint8_t, true, 8)
DEF_INT(u8, uint8_t, uint8_t, false, 8)
DEF_INT(chr, char, unsigned char, CHAR_MIN < 0, 8)
DEF_INT(schr, signed char, unsigned char, true, 8)
DEF_INT(uchr, unsigned char, unsigned char, false, 8)
DEF_INT(shrt, short, unsigned short, true, 16)
DEF_INT(ushrt, unsigned short, unsigned short, false, 16)
DEF_INT(int, int, unsigned, true, 32)
DEF_INT(uns, unsigned, unsigned, false, 32)
DEF_INT(lng, long, unsigned long, true, (int)(8 * sizeof(long)))
DEF_INT(ulng, unsigned long, unsigned long, false, (int)(8 * sizeof(long)))
DEF_INT(ll, long long, unsigned long long, true, 64)
DEF_INT(i16, int16_t, uint16_t, true, 16)
DEF_INT(i32, int32_t, uint32_t, true, 32)
DEF_INT(i64, int64_t, uint64_t, true, 64)
DEF_INT(u64, uint64_t, uint64_t, false, 64)
DEF_INT(byte, unsigned char, unsigned char, false, 8)

/* Long double inputs use bits below double precision, so an implementation
 * that reduces long double as double is caught. */
#define DEF_FLT(NAME, T, SIGBYTES, EXTRA)                                        \
    static void gen_##NAME(void *d, uint64_t s, int rank, int op)                \
    {                                                                            \
        T v = (T)flt_input(s, rank, op);                                         \
        if ((EXTRA) && op != OP_PROD)                                            \
            v += (T)((long double)(mix64(~s) % 1024) * 0x1p-40L);                \
        memcpy(d, &v, sizeof v);                                                 \
    }                                                                            \
    static void apply_##NAME(void *accp, const void *inp, int op)               \
    {                                                                            \
        T a, b, r;                                                               \
        memcpy(&a, accp, sizeof a);                                              \
        memcpy(&b, inp, sizeof b);                                               \
        switch (op) {                                                            \
        case OP_SUM: r = a + b; break;                                           \
        case OP_PROD: r = a * b; break;                                          \
        case OP_MAX: r = a > b ? a : b; break;                                   \
        case OP_MIN: r = a < b ? a : b; break;                                   \
        default: r = a; break;                                                   \
        }                                                                        \
        memcpy(accp, &r, sizeof r);                                              \
    }                                                                            \
    static bool eq_##NAME(const void *x, const void *y)                          \
    {                                                                            \
        T a, b;                                                                  \
        memcpy(&a, x, sizeof a);                                                 \
        memcpy(&b, y, sizeof b);                                                 \
        return a == b;                                                           \
    }                                                                            \
    static void fmt_##NAME(char *buf, size_t n, const void *x)                   \
    {                                                                            \
        T a;                                                                     \
        memcpy(&a, x, sizeof a);                                                 \
        snprintf(buf, n, "%.21Lg", (long double)a);                              \
    }                                                                            \
    static size_t sig_##NAME(const void *x, unsigned char *out)                  \
    {                                                                            \
        memcpy(out, x, SIGBYTES);                                                \
        return SIGBYTES;                                                         \
    }

DEF_FLT(flt, float, sizeof(float), 0)
DEF_FLT(dbl, double, sizeof(double), 0)
DEF_FLT(ldbl, long double, LDBL_SIG, LDBL_MANT_DIG >= 64)

#define DEF_CPLX(NAME, T, RT)                                                    \
    static void gen_##NAME(void *d, uint64_t s, int rank, int op)                \
    {                                                                            \
        static const RT tab[6][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}, {1, 1}, {1, -1}}; \
        RT re, im;                                                               \
        if (op == OP_PROD) {                                                     \
            uint64_t k = mix64(s) % 6;                                           \
            re = tab[k][0];                                                      \
            im = tab[k][1];                                                      \
        } else {                                                                 \
            re = (RT)flt_input(s, rank, op);                                     \
            im = (RT)flt_input(mix64(s + 1), rank, op);                          \
        }                                                                        \
        T v = CMPLX(re, im);                                                     \
        memcpy(d, &v, sizeof v);                                                 \
    }                                                                            \
    static void apply_##NAME(void *accp, const void *inp, int op)               \
    {                                                                            \
        T a, b, r;                                                               \
        memcpy(&a, accp, sizeof a);                                              \
        memcpy(&b, inp, sizeof b);                                               \
        r = op == OP_SUM ? a + b : op == OP_PROD ? a * b : a;                    \
        memcpy(accp, &r, sizeof r);                                              \
    }                                                                            \
    static bool eq_##NAME(const void *x, const void *y)                          \
    {                                                                            \
        T a, b;                                                                  \
        memcpy(&a, x, sizeof a);                                                 \
        memcpy(&b, y, sizeof b);                                                 \
        return creal(a) == creal(b) && cimag(a) == cimag(b);                     \
    }                                                                            \
    static void fmt_##NAME(char *buf, size_t n, const void *x)                   \
    {                                                                            \
        T a;                                                                     \
        memcpy(&a, x, sizeof a);                                                 \
        snprintf(buf, n, "(%.17g,%.17g)", (double)creal(a), (double)cimag(a));   \
    }                                                                            \
    static size_t sig_##NAME(const void *x, unsigned char *out)                  \
    {                                                                            \
        memcpy(out, x, sizeof(T));                                               \
        return sizeof(T);                                                        \
    }

DEF_CPLX(fcplx, float _Complex, float)
DEF_CPLX(dcplx, double _Complex, double)

static void gen_bool(void *d, uint64_t s, int rank, int op)
{
    uint64_t r = mix64(s);
    bool v = op == OP_LAND ? r % 8 != 0 : op == OP_LOR ? r % 8 == 0 : (r & 1);
    (void)rank;
    memcpy(d, &v, sizeof v);
}
static void apply_bool(void *accp, const void *inp, int op)
{
    bool a, b, r;
    memcpy(&a, accp, sizeof a);
    memcpy(&b, inp, sizeof b);
    r = op == OP_LAND ? (a && b) : op == OP_LOR ? (a || b) : op == OP_LXOR ? (a != b) : a;
    memcpy(accp, &r, sizeof r);
}
static bool eq_bool(const void *x, const void *y)
{
    return *(const unsigned char *)x == *(const unsigned char *)y;
}
static void fmt_bool(char *buf, size_t n, const void *x)
{
    snprintf(buf, n, "%u", *(const unsigned char *)x);
}
static size_t sig_bool(const void *x, unsigned char *out)
{
    memcpy(out, x, 1);
    return 1;
}

/* value/index pairs, laid out as MPI defines them (C structs) */
#define DEF_PAIR(NAME, VT, SCALE, VSIG)                                          \
    typedef struct { VT v; int i; } NAME##_t;                                    \
    static void gen_##NAME(void *d, uint64_t s, int rank, int op)                \
    {                                                                            \
        NAME##_t e;                                                              \
        uint64_t r1 = mix64(s), r2 = mix64(r1);                                  \
        (void)op;                                                                \
        memset(&e, 0, sizeof e);                                                 \
        e.v = (VT)((long double)((long long)(r1 % 5) - 2) * (SCALE));            \
        e.i = (int)(((unsigned)rank * 7u + (unsigned)(r2 % 5)) % 11u) - 3;       \
        memcpy(d, &e, sizeof e);                                                 \
    }                                                                            \
    static void apply_##NAME(void *accp, const void *inp, int op)               \
    {                                                                            \
        NAME##_t a, b;                                                           \
        memcpy(&a, accp, sizeof a);                                              \
        memcpy(&b, inp, sizeof b);                                               \
        if (op == OP_MAXLOC || op == OP_MINLOC) {                                \
            bool better = op == OP_MAXLOC ? b.v > a.v : b.v < a.v;               \
            if (better)                                                          \
                a = b;                                                           \
            else if (b.v == a.v && b.i < a.i)                                    \
                a.i = b.i;                                                       \
        }                                                                        \
        memcpy(accp, &a, sizeof a);                                              \
    }                                                                            \
    static bool eq_##NAME(const void *x, const void *y)                          \
    {                                                                            \
        NAME##_t a, b;                                                           \
        memcpy(&a, x, sizeof a);                                                 \
        memcpy(&b, y, sizeof b);                                                 \
        return a.v == b.v && a.i == b.i;                                         \
    }                                                                            \
    static void fmt_##NAME(char *buf, size_t n, const void *x)                   \
    {                                                                            \
        NAME##_t a;                                                              \
        memcpy(&a, x, sizeof a);                                                 \
        snprintf(buf, n, "(%.21Lg,%d)", (long double)a.v, a.i);                  \
    }                                                                            \
    static size_t sig_##NAME(const void *x, unsigned char *out)                  \
    {                                                                            \
        const unsigned char *c = x;                                              \
        memcpy(out, c + offsetof(NAME##_t, v), VSIG);                            \
        memcpy(out + VSIG, c + offsetof(NAME##_t, i), sizeof(int));              \
        return VSIG + sizeof(int);                                               \
    }

DEF_PAIR(float_int, float, 1.5L, sizeof(float))
DEF_PAIR(double_int, double, 1.5L, sizeof(double))
DEF_PAIR(long_int, long, 1099511627776.0L, sizeof(long))
DEF_PAIR(two_int, int, 100000.0L, sizeof(int))
DEF_PAIR(short_int, short, 1000.0L, sizeof(short))
DEF_PAIR(ldbl_int, long double, 1.5L, LDBL_SIG)

#define T_ENTRY(MPINAME, NAME, CT, OPS) \
    { #MPINAME, MPINAME, sizeof(CT), OPS, gen_##NAME, apply_##NAME, eq_##NAME, fmt_##NAME, sig_##NAME }

static const tinfo types[] = {
    T_ENTRY(MPI_INT8_T, i8, int8_t, OPS_INT),
    T_ENTRY(MPI_UINT8_T, u8, uint8_t, OPS_INT),
    T_ENTRY(MPI_CHAR, chr, char, OPS_INT),
    T_ENTRY(MPI_SIGNED_CHAR, schr, signed char, OPS_INT),
    T_ENTRY(MPI_UNSIGNED_CHAR, uchr, unsigned char, OPS_INT),
    T_ENTRY(MPI_SHORT, shrt, short, OPS_INT),
    T_ENTRY(MPI_UNSIGNED_SHORT, ushrt, unsigned short, OPS_INT),
    T_ENTRY(MPI_INT, int, int, OPS_INT),
    T_ENTRY(MPI_UNSIGNED, uns, unsigned, OPS_INT),
    T_ENTRY(MPI_LONG, lng, long, OPS_INT),
    T_ENTRY(MPI_UNSIGNED_LONG, ulng, unsigned long, OPS_INT),
    T_ENTRY(MPI_LONG_LONG, ll, long long, OPS_INT),
    T_ENTRY(MPI_INT16_T, i16, int16_t, OPS_INT),
    T_ENTRY(MPI_INT32_T, i32, int32_t, OPS_INT),
    T_ENTRY(MPI_INT64_T, i64, int64_t, OPS_INT),
    T_ENTRY(MPI_UINT64_T, u64, uint64_t, OPS_INT),
    T_ENTRY(MPI_FLOAT, flt, float, OPS_FLT),
    T_ENTRY(MPI_DOUBLE, dbl, double, OPS_FLT),
    T_ENTRY(MPI_LONG_DOUBLE, ldbl, long double, OPS_FLT),
    T_ENTRY(MPI_C_FLOAT_COMPLEX, fcplx, float _Complex, OPS_CPLX),
    T_ENTRY(MPI_C_DOUBLE_COMPLEX, dcplx, double _Complex, OPS_CPLX),
    T_ENTRY(MPI_C_BOOL, bool, bool, OPS_BOOL),
    T_ENTRY(MPI_BYTE, byte, unsigned char, OPS_BYTE),
    T_ENTRY(MPI_FLOAT_INT, float_int, float_int_t, OPS_PAIR),
    T_ENTRY(MPI_DOUBLE_INT, double_int, double_int_t, OPS_PAIR),
    T_ENTRY(MPI_LONG_INT, long_int, long_int_t, OPS_PAIR),
    T_ENTRY(MPI_2INT, two_int, two_int_t, OPS_PAIR),
    T_ENTRY(MPI_SHORT_INT, short_int, short_int_t, OPS_PAIR),
    T_ENTRY(MPI_LONG_DOUBLE_INT, ldbl_int, ldbl_int_t, OPS_PAIR),
};
#define NTYPES ((int)(sizeof types / sizeof types[0]))

static const tinfo *type_by_name(const char *name)
{
    for (int i = 0; i < NTYPES; i++)
        if (strcmp(types[i].name, name) == 0)
            return &types[i];
    fprintf(stderr, "xccl_mpi_check: unknown type %s\n", name);
    exit(2);
}

/* ------------------------------------------------------------------------ */
/* Datatypes under test: a basic element type laid out in an MPI datatype   */
/* ------------------------------------------------------------------------ */

typedef struct dtype {
    const char *name;
    const tinfo *t;      /* basic element */
    MPI_Datatype dt;     /* what the call is given */
    int nper;            /* basic elements per MPI element */
    size_t extent;       /* bytes per MPI element */
    size_t off[4];       /* byte offset of each basic element inside one */
    bool predefined;
    bool contiguous;     /* a gap-free layout */
    bool check_gaps;     /* bytes between basic elements must stay untouched */
    uint64_t id;
} dtype_t;

static dtype_t predef(const tinfo *t)
{
    dtype_t d;
    memset(&d, 0, sizeof d);
    d.name = t->name;
    d.t = t;
    d.dt = t->dt;
    d.nper = 1;
    d.extent = t->size;
    d.predefined = true;
    d.contiguous = true;
    d.id = (uint64_t)(t - types) + 1;
    return d;
}

static dtype_t dt_contig3;   /* MPI_Type_contiguous(3, MPI_INT) */
static dtype_t dt_vector;    /* MPI_Type_vector(2, 1, 2, MPI_INT): int, gap, int */

static void make_derived(void)
{
    const tinfo *ti = type_by_name("MPI_INT");
    memset(&dt_contig3, 0, sizeof dt_contig3);
    dt_contig3.name = "contig3_int";
    dt_contig3.t = ti;
    MPI_Type_contiguous(3, MPI_INT, &dt_contig3.dt);
    MPI_Type_commit(&dt_contig3.dt);
    dt_contig3.nper = 3;
    dt_contig3.extent = 3 * sizeof(int);
    dt_contig3.off[1] = sizeof(int);
    dt_contig3.off[2] = 2 * sizeof(int);
    dt_contig3.contiguous = true;
    dt_contig3.id = 1001;

    memset(&dt_vector, 0, sizeof dt_vector);
    dt_vector.name = "vector_2x1s2_int";
    dt_vector.t = ti;
    MPI_Type_vector(2, 1, 2, MPI_INT, &dt_vector.dt);
    MPI_Type_commit(&dt_vector.dt);
    dt_vector.nper = 2;
    dt_vector.extent = 3 * sizeof(int);
    dt_vector.off[1] = 2 * sizeof(int);
    dt_vector.check_gaps = true;
    dt_vector.id = 1002;
}

static inline void *vptr(const dtype_t *d, const void *base, size_t v)
{
    if (d->nper == 1)
        return (char *)base + v * d->extent;
    return (char *)base + (v / (size_t)d->nper) * d->extent + d->off[v % (size_t)d->nper];
}

/* ------------------------------------------------------------------------ */
/* Buffers: every allocation is pre-filled with PAD and followed by GUARD   */
/* bytes that a correct collective never touches.                           */
/* ------------------------------------------------------------------------ */

#define PAD 0xa5
#define GUARD 64

static void *xalloc(size_t bytes)
{
    unsigned char *p = malloc(bytes + GUARD);
    if (!p) {
        fprintf(stderr, "xccl_mpi_check: out of memory (%zu bytes)\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, PAD, bytes + GUARD);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Cases, failures, counters                                                */
/* ------------------------------------------------------------------------ */

typedef struct {
    int coll, op, inplace, root;
    long count;
    const char *tname;
} case_desc;

typedef struct {
    uint64_t hash;
    int32_t ok;
    int32_t has_hash;
} case_rec;

typedef struct {
    MPI_Comm comm;
    const char *name;
    int rank, size;       /* in comm */
    int *world_of;        /* world rank of each comm rank */
    case_desc *desc;
    case_rec *rec;
    size_t ncase, cap;
} comm_ctx;

static int world_rank, world_size;
static bool quick, skip_stock_bugs, pipe_sizes;
static long expect_cnt[NCOLL];  /* calls expected to be handled by xccl  */
static long calls_cnt[NCOLL];   /* calls that reach the coll component   */
static long passed, failed;     /* cases judged by this rank (comm roots) */
static long fail_lines;
#define MAX_FAIL_LINES 200
#define MAX_FAIL_PER_CASE 3

static struct {
    comm_ctx *c;
    case_desc d;
    long bad;
} cur;

static void case_begin(comm_ctx *c, int coll, const dtype_t *d, int op, long count,
                       int inplace, int root)
{
    cur.c = c;
    cur.d.coll = coll;
    cur.d.tname = d->name;
    cur.d.op = op;
    cur.d.count = count;
    cur.d.inplace = inplace;
    cur.d.root = root;
    cur.bad = 0;
}

static void print_fail(const comm_ctx *c, const case_desc *d, int wrank, long index,
                       const char *got, const char *want)
{
    char rootstr[32] = "";
    if (fail_lines++ >= MAX_FAIL_LINES)
        return;
    if (d->coll == C_BCAST)
        snprintf(rootstr, sizeof rootstr, " root=%d", d->root);
    printf("FAIL %s comm=%s type=%s op=%s count=%ld inplace=%d rank=%d index=%ld got=%s want=%s%s\n",
           coll_names[d->coll], c->name, d->tname, op_names[d->op], d->count, d->inplace,
           wrank, index, got, want, rootstr);
}

static void mismatch(long index, const char *got, const char *want)
{
    if (cur.bad++ < MAX_FAIL_PER_CASE)
        print_fail(cur.c, &cur.d, world_rank, index, got, want);
}

static void case_end(bool has_hash, uint64_t hash)
{
    comm_ctx *c = cur.c;
    if (c->ncase == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        c->desc = realloc(c->desc, c->cap * sizeof *c->desc);
        c->rec = realloc(c->rec, c->cap * sizeof *c->rec);
        if (!c->desc || !c->rec)
            MPI_Abort(MPI_COMM_WORLD, 2);
    }
    c->desc[c->ncase] = cur.d;
    c->rec[c->ncase].ok = cur.bad == 0;
    c->rec[c->ncase].has_hash = has_hash;
    c->rec[c->ncase].hash = hash;
    c->ncase++;
}

/* What the coll component will see, and what xccl is expected to handle.
 *
 * Open MPI 4.1's MPI layer returns MPI_SUCCESS without calling the coll
 * component for: Allreduce/Reduce_scatter_block with count 0,
 * Reduce_scatter whose recvcounts are all 0, Allgather with recvcount 0 (or
 * sendcount 0 when not in place), Alltoall with sendcount and recvcount 0,
 * Bcast with count 0 or on a 1-rank communicator.  Those calls are counted
 * neither in CALLS nor in EXPECT.
 *
 * Expected to be handled by xccl (an "algo=" line): reductions with a
 * predefined op or a commutative user op (a datatype with gaps too: xccl
 * reduces copies of its layout); data movement on any datatype (one with
 * gaps is packed with Open MPI's convertor, so ranks may mix datatypes of
 * one signature).  Not expected ("fallback=" line): non-commutative user
 * ops. */
static bool reaches_component(int coll, long count, int inplace, int comm_size)
{
    (void)inplace;
    if (coll == C_BCAST && comm_size <= 1)
        return false;
    return count != 0;
}

static bool expect_xccl(int coll, const dtype_t *d, int op)
{
    if (coll == C_ALLREDUCE || coll == C_REDUCE_SCATTER || coll == C_REDUCE_SCATTER_BLOCK)
        return op != OP_USER_NC;
    (void)d;
    return true;
}

static void count_call(const comm_ctx *c, int coll, const dtype_t *d, int op, long count,
                       int inplace)
{
    if (!reaches_component(coll, count, inplace, c->size))
        return;
    calls_cnt[coll]++;
    if (expect_xccl(coll, d, op))
        expect_cnt[coll]++;
}

static void check_rc(int rc)
{
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING], got[MPI_MAX_ERROR_STRING + 8];
        int len = 0;
        MPI_Error_string(rc, s, &len);
        snprintf(got, sizeof got, "rc:%s", s);
        mismatch(-1, got, "rc:MPI_SUCCESS");
    }
}

/* Compare nv values of buf (layout d) with want[] (contiguous basic
 * elements); index reported relative to the buffer. */
static void compare(const dtype_t *d, const void *buf, size_t nv, const void *want)
{
    const tinfo *t = d->t;
    for (size_t v = 0; v < nv; v++) {
        const void *g = vptr(d, buf, v);
        const void *w = (const char *)want + v * t->size;
        if (!t->equal(g, w)) {
            char gs[96], ws[96];
            t->fmt(gs, sizeof gs, g);
            t->fmt(ws, sizeof ws, w);
            mismatch((long)v, gs, ws);
            if (cur.bad > MAX_FAIL_PER_CASE)
                return;
        }
    }
}

/* Guard bytes after an allocation of `bytes` and, for layouts with holes,
 * the holes of the first nelem elements, must still hold PAD. */
static void check_untouched(const dtype_t *d, const void *buf, size_t nelem, size_t bytes)
{
    const unsigned char *p = buf;
    char gs[32];
    for (size_t i = bytes; i < bytes + GUARD; i++)
        if (p[i] != PAD) {
            snprintf(gs, sizeof gs, "guard_byte:0x%02x", p[i]);
            mismatch((long)i, gs, "guard_byte:0xa5");
            return;
        }
    if (!d->check_gaps)
        return;
    for (size_t e = 0; e < nelem; e++)
        for (size_t b = 0; b < d->extent; b++) {
            bool covered = false;
            for (int j = 0; j < d->nper; j++)
                if (b >= d->off[j] && b < d->off[j] + d->t->size)
                    covered = true;
            if (!covered && p[e * d->extent + b] != PAD) {
                snprintf(gs, sizeof gs, "gap_byte:0x%02x", p[e * d->extent + b]);
                mismatch((long)(e * d->extent + b), gs, "gap_byte:0xa5");
                return;
            }
        }
}

static uint64_t hash_vals(const dtype_t *d, const void *buf, size_t nv)
{
    unsigned char tmp[64];
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t v = 0; v < nv; v++)
        h = fnv(h, tmp, d->t->sig(vptr(d, buf, v), tmp));
    return h;
}

/* Fill values [first, first+nv) of rank r's input into buf (value 0 of buf
 * gets input index `first`). */
static void fill(const dtype_t *d, void *buf, size_t nv, size_t first, int r, int op,
                 uint64_t salt)
{
    for (size_t v = 0; v < nv; v++)
        d->t->gen(vptr(d, buf, v), seed_of(salt, r, first + v), r, op);
}

/* Same, into a contiguous array of basic elements. */
static void *gen_array(const dtype_t *d, size_t nv, size_t first, int r, int op, uint64_t salt)
{
    size_t sz = d->t->size;
    unsigned char *a = xalloc(nv * sz);
    for (size_t v = 0; v < nv; v++)
        d->t->gen(a + v * sz, seed_of(salt, r, first + v), r, op);
    return a;
}

static void *dup_bytes(const void *p, size_t n)
{
    void *q = xalloc(n);
    memcpy(q, p, n);
    return q;
}

static void check_send_intact(const void *sb, const void *copy, size_t bytes)
{
    if (memcmp(sb, copy, bytes + GUARD) != 0)
        mismatch(-1, "sendbuf_modified", "sendbuf_intact");
}

/* ------------------------------------------------------------------------ */
/* Reductions                                                               */
/* ------------------------------------------------------------------------ */

enum { M_AR = 1, M_RS = 2, M_RSB = 4, M_ALLRED = 7 };

static void rs_counts(int p, long count, int *rc, int *displ, long *total)
{
    long t = 0;
    for (int r = 0; r < p; r++) {
        rc[r] = (r % 3 == 1 && p > 1) ? 0 : (int)((count + r) / (r + 1));
        displ[r] = (int)t;
        t += rc[r];
    }
    *total = t;
}

/* Reduce_scatter_block moves p times its recvcount: for large counts use
 * about count/p (odd) so the case stays as big as the others. */
static long rsb_count(long count, int p)
{
    return count < 1000 ? count : (count / p) | 1;
}

static void reduction_cases(comm_ctx *c, const dtype_t *d, int op, long count, unsigned mask)
{
    const int p = c->size, me = c->rank;
    const size_t np = (size_t)d->nper, esz = d->t->size, ext = d->extent;
    const uint64_t salt = mix64(d->id * 1000003u + (uint64_t)op * 7919u);
    MPI_Comm comm = c->comm;
    MPI_Op mop = mpi_ops[op];
    int *rc = malloc((size_t)p * sizeof *rc), *displ = malloc((size_t)p * sizeof *displ);
    long rs_total;
    const long bcount = rsb_count(count, p);
    rs_counts(p, count, rc, displ, &rs_total);

    size_t nmax = (size_t)count;                     /* in MPI elements */
    if ((mask & M_RS) && (size_t)rs_total > nmax)
        nmax = (size_t)rs_total;
    if ((mask & M_RSB) && (size_t)bcount * (size_t)p > nmax)
        nmax = (size_t)bcount * (size_t)p;
    const size_t nvmax = nmax * np;

    /* reference: op over ranks 0..p-1, in rank order */
    unsigned char *want = xalloc(nvmax * esz), tmp[64];
    for (size_t v = 0; v < nvmax; v++) {
        unsigned char *w = want + v * esz;
        d->t->gen(w, seed_of(salt, 0, v), 0, op);
        for (int r = 1; r < p; r++) {
            d->t->gen(tmp, seed_of(salt, r, v), r, op);
            d->t->apply(w, tmp, op);
        }
    }

    for (int inplace = 0; inplace <= 1; inplace++) {
        if (mask & M_AR) { /* ---------------- Allreduce */
            size_t nv = (size_t)count * np, bytes = (size_t)count * ext;
            void *sb = NULL, *scopy = NULL, *rb = xalloc(bytes);
            case_begin(c, C_ALLREDUCE, d, op, count, inplace, 0);
            if (inplace) {
                fill(d, rb, nv, 0, me, op, salt);
            } else {
                sb = xalloc(bytes);
                fill(d, sb, nv, 0, me, op, salt);
                scopy = dup_bytes(sb, bytes);
            }
            count_call(c, C_ALLREDUCE, d, op, count, inplace);
            check_rc(MPI_Allreduce(inplace ? MPI_IN_PLACE : sb, rb, (int)count, d->dt, mop, comm));
            compare(d, rb, nv, want);
            check_untouched(d, rb, (size_t)count, bytes);
            if (!inplace)
                check_send_intact(sb, scopy, bytes);
            case_end(true, hash_vals(d, rb, nv));
            free(sb);
            free(scopy);
            free(rb);
        }
        if (mask & M_RS) { /* ---------------- Reduce_scatter */
            size_t tot_bytes = (size_t)rs_total * ext;
            size_t my_bytes = (size_t)rc[me] * ext;
            void *sb = NULL, *scopy = NULL, *rb;
            case_begin(c, C_REDUCE_SCATTER, d, op, rs_total, inplace, 0);
            if (inplace) {
                rb = xalloc(tot_bytes);
                fill(d, rb, (size_t)rs_total * np, 0, me, op, salt);
            } else {
                sb = xalloc(tot_bytes);
                fill(d, sb, (size_t)rs_total * np, 0, me, op, salt);
                scopy = dup_bytes(sb, tot_bytes);
                rb = xalloc(my_bytes);
            }
            count_call(c, C_REDUCE_SCATTER, d, op, rs_total, inplace);
            check_rc(MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : sb, rb, rc, d->dt, mop, comm));
            compare(d, rb, (size_t)rc[me] * np, want + (size_t)displ[me] * np * esz);
            check_untouched(d, rb, (size_t)rc[me], inplace ? tot_bytes : my_bytes);
            if (!inplace)
                check_send_intact(sb, scopy, tot_bytes);
            case_end(false, 0);
            free(sb);
            free(scopy);
            free(rb);
        }
        if (mask & M_RSB) { /* ---------------- Reduce_scatter_block */
            size_t tot_bytes = (size_t)bcount * (size_t)p * ext, my_bytes = (size_t)bcount * ext;
            size_t tot_vals = (size_t)bcount * (size_t)p * np;
            void *sb = NULL, *scopy = NULL, *rb;
            case_begin(c, C_REDUCE_SCATTER_BLOCK, d, op, bcount, inplace, 0);
            if (inplace) {
                rb = xalloc(tot_bytes);
                fill(d, rb, tot_vals, 0, me, op, salt);
            } else {
                sb = xalloc(tot_bytes);
                fill(d, sb, tot_vals, 0, me, op, salt);
                scopy = dup_bytes(sb, tot_bytes);
                rb = xalloc(my_bytes);
            }
            count_call(c, C_REDUCE_SCATTER_BLOCK, d, op, bcount, inplace);
            check_rc(MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : sb, rb, (int)bcount, d->dt,
                                              mop, comm));
            compare(d, rb, (size_t)bcount * np, want + (size_t)me * (size_t)bcount * np * esz);
            check_untouched(d, rb, (size_t)bcount, inplace ? tot_bytes : my_bytes);
            if (!inplace)
                check_send_intact(sb, scopy, tot_bytes);
            case_end(false, 0);
            free(sb);
            free(scopy);
            free(rb);
        }
    }
    free(want);
    free(rc);
    free(displ);
}

/* ------------------------------------------------------------------------ */
/* Data movement                                                            */
/* ------------------------------------------------------------------------ */

enum { M_AG = 1, M_A2A = 2, M_BC = 4, M_MOVE = 7 };

static void movement_cases(comm_ctx *c, const dtype_t *d, long count, unsigned mask)
{
    const int p = c->size, me = c->rank;
    const size_t np = (size_t)d->nper, n = (size_t)count, nv = n * np, blk = n * d->extent;
    MPI_Comm comm = c->comm;

    for (int inplace = 0; inplace <= 1 && (mask & (M_AG | M_A2A)); inplace++) {
        if (mask & M_AG) { /* ---------------- Allgather */
            const uint64_t salt = mix64(d->id * 1000003u + 17);
            size_t tot = blk * (size_t)p;
            void *sb = NULL, *scopy = NULL, *rb = xalloc(tot);
            case_begin(c, C_ALLGATHER, d, OP_NONE, count, inplace, 0);
            if (inplace) {
                fill(d, (char *)rb + (size_t)me * blk, nv, 0, me, OP_NONE, salt);
            } else {
                sb = xalloc(blk);
                fill(d, sb, nv, 0, me, OP_NONE, salt);
                scopy = dup_bytes(sb, blk);
            }
            count_call(c, C_ALLGATHER, d, OP_NONE, count, inplace);
            if (inplace)
                check_rc(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, (int)count, d->dt, comm));
            else
                check_rc(MPI_Allgather(sb, (int)count, d->dt, rb, (int)count, d->dt, comm));
            for (int q = 0; q < p && cur.bad <= MAX_FAIL_PER_CASE; q++) {
                void *w = gen_array(d, nv, 0, q, OP_NONE, salt);
                compare(d, (char *)rb + (size_t)q * blk, nv, w);
                free(w);
            }
            check_untouched(d, rb, n * (size_t)p, tot);
            if (!inplace)
                check_send_intact(sb, scopy, blk);
            case_end(true, hash_vals(d, rb, nv * (size_t)p));
            free(sb);
            free(scopy);
            free(rb);
        }
        if (mask & M_A2A) { /* ---------------- Alltoall */
            /* block q of rank r's send data: values [q*nv, (q+1)*nv) of r */
            const uint64_t salt = mix64(d->id * 1000003u + 29);
            size_t tot = blk * (size_t)p;
            void *sb = NULL, *scopy = NULL, *rb = xalloc(tot);
            case_begin(c, C_ALLTOALL, d, OP_NONE, count, inplace, 0);
            if (inplace) {
                fill(d, rb, nv * (size_t)p, 0, me, OP_NONE, salt);
            } else {
                sb = xalloc(tot);
                fill(d, sb, nv * (size_t)p, 0, me, OP_NONE, salt);
                scopy = dup_bytes(sb, tot);
            }
            count_call(c, C_ALLTOALL, d, OP_NONE, count, inplace);
            if (inplace)
                check_rc(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, (int)count, d->dt, comm));
            else
                check_rc(MPI_Alltoall(sb, (int)count, d->dt, rb, (int)count, d->dt, comm));
            for (int q = 0; q < p && cur.bad <= MAX_FAIL_PER_CASE; q++) {
                void *w = gen_array(d, nv, (size_t)me * nv, q, OP_NONE, salt);
                compare(d, (char *)rb + (size_t)q * blk, nv, w);
                free(w);
            }
            check_untouched(d, rb, n * (size_t)p, tot);
            if (!inplace)
                check_send_intact(sb, scopy, tot);
            case_end(false, 0);
            free(sb);
            free(scopy);
            free(rb);
        }
    }
    if (mask & M_BC) { /* ---------------- Bcast, every root */
        const uint64_t salt = mix64(d->id * 1000003u + 41);
        for (int root = 0; root < p; root++) {
            void *b = xalloc(blk);
            case_begin(c, C_BCAST, d, OP_NONE, count, 0, root);
            if (me == root)
                fill(d, b, nv, 0, root, OP_NONE, salt);
            count_call(c, C_BCAST, d, OP_NONE, count, 0);
            check_rc(MPI_Bcast(b, (int)count, d->dt, root, comm));
            void *w = gen_array(d, nv, 0, root, OP_NONE, salt);
            compare(d, b, nv, w);
            free(w);
            check_untouched(d, b, n, blk);
            case_end(true, hash_vals(d, b, nv));
            free(b);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Big messages (~64 MiB): closed-form inputs so the check stays cheap      */
/* ------------------------------------------------------------------------ */

static void *big_alloc(size_t bytes)
{
    unsigned char *p = malloc(bytes + GUARD);
    if (!p)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(p + bytes, PAD, GUARD);
    return p;
}

static void big_cases(comm_ctx *c)
{
    const size_t n = (size_t)16 << 20; /* ints: 64 MiB */
    const int p = c->size, me = c->rank;
    dtype_t dint = predef(type_by_name("MPI_INT"));
    dtype_t dbyte = predef(type_by_name("MPI_BYTE"));
    char gs[32], ws[32];

    int *sb = big_alloc(n * sizeof(int)), *rb = big_alloc(n * sizeof(int));
    for (size_t i = 0; i < n; i++)
        sb[i] = (int)(i & 1023) * (me + 1) - (int)((i >> 10) & 7);
    case_begin(c, C_ALLREDUCE, &dint, OP_SUM, (long)n, 0, 0);
    count_call(c, C_ALLREDUCE, &dint, OP_SUM, (long)n, 0);
    check_rc(MPI_Allreduce(sb, rb, (int)n, MPI_INT, MPI_SUM, c->comm));
    for (size_t i = 0; i < n; i++) {
        int want = (int)(i & 1023) * (p * (p + 1) / 2) - (int)((i >> 10) & 7) * p;
        if (rb[i] != want) {
            snprintf(gs, sizeof gs, "%d", rb[i]);
            snprintf(ws, sizeof ws, "%d", want);
            mismatch((long)i, gs, ws);
            if (cur.bad > MAX_FAIL_PER_CASE)
                break;
        }
    }
    check_untouched(&dint, rb, n, n * sizeof(int));
    case_end(true, fnv(0xcbf29ce484222325ull, rb, n * sizeof(int)));
    free(sb);
    free(rb);

    const size_t nb = (size_t)64 << 20;
    const int root = p - 1;
    unsigned char *b = big_alloc(nb);
    for (size_t i = 0; i < nb; i++)
        b[i] = me == root ? (unsigned char)(i * 131u + (i >> 16) + 17u) : 0;
    case_begin(c, C_BCAST, &dbyte, OP_NONE, (long)nb, 0, root);
    count_call(c, C_BCAST, &dbyte, OP_NONE, (long)nb, 0);
    check_rc(MPI_Bcast(b, (int)nb, MPI_BYTE, root, c->comm));
    for (size_t i = 0; i < nb; i++) {
        unsigned char want = (unsigned char)(i * 131u + (i >> 16) + 17u);
        if (b[i] != want) {
            snprintf(gs, sizeof gs, "%u", b[i]);
            snprintf(ws, sizeof ws, "%u", want);
            mismatch((long)i, gs, ws);
            if (cur.bad > MAX_FAIL_PER_CASE)
                break;
        }
    }
    check_untouched(&dbyte, b, nb, nb);
    case_end(true, fnv(0xcbf29ce484222325ull, b, nb));
    free(b);
    /* allgather and alltoall past 8 MiB received (the shared-memory
     * level's copies out with non-temporal stores from there), in and
     * out of place, blocks of an odd count */
    movement_cases(c, &dint, 1100003, M_AG | M_A2A);
}

/* -P: past 4 MiB per call (5.2 MB of ints to reduce; 1.6 MB a rank to
 * gather or broadcast, at least 4.8 MB gathered from np 3 on), in and out
 * of place, counts not divisible by the size. */
static void pipe_cases(comm_ctx *c)
{
    dtype_t dint = predef(type_by_name("MPI_INT"));
    reduction_cases(c, &dint, OP_SUM, 1300001, M_ALLRED);
    movement_cases(c, &dint, 400003, M_AG | M_BC);
}

/* ------------------------------------------------------------------------ */
/* User ops                                                                 */
/* ------------------------------------------------------------------------ */


/* elementwise int sum on MPI_INT, or on dt_vector (ints 0 and 2 of each 3) */
static void user_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *a = in;
    int *b = inout;
    if (*dt == dt_vector.dt) {
        for (int i = 0; i < *len; i++) {
            b[3 * i] = (int)((unsigned)a[3 * i] + (unsigned)b[3 * i]);
            b[3 * i + 2] = (int)((unsigned)a[3 * i + 2] + (unsigned)b[3 * i + 2]);
        }
        return;
    }
    for (int i = 0; i < *len; i++)
        b[i] = (int)((unsigned)a[i] + (unsigned)b[i]);
}

/* inout = in ∘ inout, where `in` holds the lower ranks' partial result */
static void user_affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const uint64_t *a = in;
    uint64_t *b = inout;
    (void)dt;
    for (int i = 0; i < *len; i++)
        b[i] = affine_compose(a[i], b[i]);
}

/* ------------------------------------------------------------------------ */
/* Per communicator                                                         */
/* ------------------------------------------------------------------------ */

#define TAG_RECS 7301
#define TAG_TOTALS 7302
#define TAG_STATUS 7303

static bool stock_bug(const tinfo *t, int op)
{
    return skip_stock_bugs && t->dt == MPI_UNSIGNED_LONG && (op == OP_MAX || op == OP_MIN);
}

static void add_count(long *counts, int *n, long v)
{
    for (int i = 0; i < *n; i++)
        if (counts[i] == v)
            return;
    counts[(*n)++] = v;
}

static void run_comm(comm_ctx *c)
{
    const int p = c->size;
    long counts[16];
    int nc = 0;

    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);

    /* full type x op matrix at a few counts */
    add_count(counts, &nc, p + 1);
    if (!quick)
        add_count(counts, &nc, 1000);
    for (int ti = 0; ti < NTYPES; ti++) {
        dtype_t d = predef(&types[ti]);
        for (int op = 0; op < OP_USER_SUM; op++)
            if ((types[ti].ops & B(op)) && !stock_bug(&types[ti], op))
                for (int k = 0; k < nc; k++)
                    reduction_cases(c, &d, op, counts[k], M_ALLRED);
    }

    /* count sweep for a few type/op pairs */
    nc = 0;
    add_count(counts, &nc, 0);
    add_count(counts, &nc, 1);
    add_count(counts, &nc, p - 1);
    add_count(counts, &nc, p);
    add_count(counts, &nc, p + 1);
    add_count(counts, &nc, 1000);
    static const struct { const char *t; int op; bool big; } sweep[] = {
        {"MPI_INT", OP_SUM, true}, {"MPI_DOUBLE", OP_SUM, true},
        {"MPI_INT8_T", OP_SUM, false}, {"MPI_UNSIGNED_SHORT", OP_SUM, false},
        {"MPI_FLOAT", OP_MAX, false}, {"MPI_DOUBLE_INT", OP_MINLOC, false},
        {"MPI_UINT64_T", OP_BXOR, false},
    };
    for (size_t s = 0; s < sizeof sweep / sizeof sweep[0]; s++) {
        dtype_t d = predef(type_by_name(sweep[s].t));
        for (int k = 0; k < nc; k++)
            reduction_cases(c, &d, sweep[s].op, counts[k], M_ALLRED);
        if (sweep[s].big && !quick)
            reduction_cases(c, &d, sweep[s].op, 100003, M_ALLRED);
    }

    /* user-defined ops: commutative (xccl) and non-commutative (fallback) */
    {
        dtype_t dint = predef(type_by_name("MPI_INT"));
        dtype_t du64 = predef(type_by_name("MPI_UINT64_T"));
        for (int k = 0; k < nc; k++) {
            reduction_cases(c, &dint, OP_USER_SUM, counts[k], M_ALLRED);
            reduction_cases(c, &du64, OP_USER_NC, counts[k], M_ALLRED);
        }
    }

    /* data movement: several types x a few counts, every root for bcast */
    static const char *const move_types[] = {
        "MPI_BYTE", "MPI_CHAR", "MPI_SHORT", "MPI_INT", "MPI_INT64_T", "MPI_FLOAT",
        "MPI_DOUBLE", "MPI_LONG_DOUBLE", "MPI_C_DOUBLE_COMPLEX", "MPI_C_BOOL", "MPI_2INT",
    };
    long mcounts[3] = {1, p + 1, 1000};
    int nmc = quick ? 2 : 3;
    for (size_t ti = 0; ti < sizeof move_types / sizeof move_types[0]; ti++) {
        dtype_t d = predef(type_by_name(move_types[ti]));
        for (int k = 0; k < nmc; k++)
            movement_cases(c, &d, mcounts[k], M_MOVE);
    }
    for (int k = 0; k < nmc; k++)
        movement_cases(c, &dt_contig3, mcounts[k], M_MOVE);
    {
        dtype_t dint = predef(type_by_name("MPI_INT"));
        dtype_t dbyte = predef(type_by_name("MPI_BYTE"));
        for (int k = 0; k < nc; k++) {
            movement_cases(c, &dint, counts[k], M_MOVE);
            movement_cases(c, &dbyte, counts[k], M_AG | M_A2A);
        }
        if (!quick) {
            movement_cases(c, &dint, 100003, M_AG | M_A2A);
            movement_cases(c, &dbyte, 100003, M_BC);
        }
    }

    /* non-contiguous derived datatype: xccl packs (movement) or reduces
     * copies of the layout (user op); gaps must stay untouched */
    for (int k = 0; k < nmc; k++) {
        movement_cases(c, &dt_vector, mcounts[k], M_MOVE);
        /* Open MPI rejects predefined ops on derived datatypes: user op */
        reduction_cases(c, &dt_vector, OP_USER_SUM, mcounts[k], M_ALLRED);
    }
}

/* Comm rank 0 collects every rank's per-case records and judges the cases:
 * a case passes when every rank checked it OK and, where results must be the
 * same everywhere, every rank's hash equals rank 0's. */
static void judge_comm(comm_ctx *c)
{
    const size_t n = c->ncase;
    if (c->rank != 0) {
        MPI_Send(c->rec, (int)(n * sizeof *c->rec), MPI_BYTE, 0, TAG_RECS, c->comm);
        return;
    }
    bool *bad = calloc(n ? n : 1, sizeof *bad);
    case_rec *other = malloc((n ? n : 1) * sizeof *other);
    for (size_t i = 0; i < n; i++)
        bad[i] = !c->rec[i].ok;
    for (int q = 1; q < c->size; q++) {
        MPI_Status st;
        int bytes = 0;
        MPI_Probe(q, TAG_RECS, c->comm, &st);
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        if ((size_t)bytes != n * sizeof *other) {
            printf("FAIL comm=%s rank=%d ran %zu cases, rank 0 ran %zu\n", c->name,
                   c->world_of[q], (size_t)bytes / sizeof *other, n);
            failed++;
            void *junk = malloc((size_t)bytes + 1);
            MPI_Recv(junk, bytes, MPI_BYTE, q, TAG_RECS, c->comm, MPI_STATUS_IGNORE);
            free(junk);
            continue;
        }
        MPI_Recv(other, bytes, MPI_BYTE, q, TAG_RECS, c->comm, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++) {
            if (!other[i].ok)
                bad[i] = true;
            if (c->rec[i].has_hash && other[i].hash != c->rec[i].hash) {
                char gs[40], ws[40];
                snprintf(gs, sizeof gs, "hash:%016llx", (unsigned long long)other[i].hash);
                snprintf(ws, sizeof ws, "hash:%016llx", (unsigned long long)c->rec[i].hash);
                print_fail(c, &c->desc[i], c->world_of[q], -1, gs, ws);
                bad[i] = true;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (bad[i])
            failed++;
        else
            passed++;
    }
    free(bad);
    free(other);
}

static void init_ctx(comm_ctx *c, MPI_Comm comm, const char *name)
{
    MPI_Group wg, g;
    memset(c, 0, sizeof *c);
    c->comm = comm;
    c->name = name;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    c->world_of = malloc((size_t)c->size * sizeof(int));
    int *ranks = malloc((size_t)c->size * sizeof(int));
    for (int i = 0; i < c->size; i++)
        ranks[i] = i;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Comm_group(comm, &g);
    MPI_Group_translate_ranks(g, c->size, ranks, wg, c->world_of);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    free(ranks);
}

static void free_ctx(comm_ctx *c)
{
    free(c->world_of);
    free(c->desc);
    free(c->rec);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines: output of ranks interleaves */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-q") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "-k") == 0) {
            skip_stock_bugs = true;
        } else if (strcmp(argv[i], "-P") == 0) {
            pipe_sizes = true;
        } else {
            if (world_rank == 0)
                fprintf(stderr, "usage: %s [-q] [-k] [-P]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }

    /* the C layouts must be MPI's */
    for (int i = 0; i < NTYPES; i++) {
        MPI_Aint lb, ext;
        MPI_Type_get_extent(types[i].dt, &lb, &ext);
        if (lb != 0 || (size_t)ext != types[i].size) {
            fprintf(stderr, "xccl_mpi_check: %s extent %ld, C size %zu\n", types[i].name,
                    (long)ext, types[i].size);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    make_derived();
    static const MPI_Op predefined_ops[] = {
        MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR, MPI_LXOR,
        MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC,
    };
    for (int i = 0; i < OP_USER_SUM; i++)
        mpi_ops[i] = predefined_ops[i];
    MPI_Op_create(user_sum_fn, 1, &mpi_ops[OP_USER_SUM]);
    MPI_Op_create(user_affine_fn, 0, &mpi_ops[OP_USER_NC]);
    mpi_ops[OP_NONE] = MPI_OP_NULL;

    double t0 = MPI_Wtime();
    MPI_Comm dup, split;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, -world_rank, &split);
    /* Open MPI 4.1 implements MPI_Comm_split with an Allgather of 2 MPI_INT
     * (color, key) on the parent through its coll component: xccl sees it.
     * MPI_Comm_dup only uses nonblocking collectives, which xccl does not
     * intercept. */
    calls_cnt[C_ALLGATHER]++;
    expect_cnt[C_ALLGATHER]++;

    comm_ctx ctx[3];
    init_ctx(&ctx[0], MPI_COMM_WORLD, "world");
    init_ctx(&ctx[1], dup, "dup");
    init_ctx(&ctx[2], split, world_rank % 2 ? "split_odd" : "split_even");
    for (int i = 0; i < 3; i++) {
        run_comm(&ctx[i]);
        if (i == 0 && !quick)
            big_cases(&ctx[0]);
        if (i == 0 && pipe_sizes)
            pipe_cases(&ctx[0]);
        judge_comm(&ctx[i]);
    }

    /* totals to world rank 0, point-to-point */
    long mine[2 + 2 * NCOLL];
    mine[0] = passed;
    mine[1] = failed;
    for (int k = 0; k < NCOLL; k++) {
        mine[2 + k] = expect_cnt[k];
        mine[2 + NCOLL + k] = calls_cnt[k];
    }
    int status = 0;
    if (world_rank != 0) {
        MPI_Send(mine, 2 + 2 * NCOLL, MPI_LONG, 0, TAG_TOTALS, MPI_COMM_WORLD);
        MPI_Recv(&status, 1, MPI_INT, 0, TAG_STATUS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        long (*all)[2 + 2 * NCOLL] = malloc((size_t)world_size * sizeof *all);
        long tp = 0, tf = 0;
        memcpy(all[0], mine, sizeof mine);
        for (int q = 1; q < world_size; q++)
            MPI_Recv(all[q], 2 + 2 * NCOLL, MPI_LONG, q, TAG_TOTALS, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (int q = 0; q < world_size; q++) {
            tp += all[q][0];
            tf += all[q][1];
        }
        for (int w = 0; w < 2; w++)
            for (int q = 0; q < world_size; q++) {
                const long *v = &all[q][2 + w * NCOLL];
                printf("%s rank=%d allreduce=%ld reduce_scatter=%ld reduce_scatter_block=%ld "
                       "allgather=%ld alltoall=%ld bcast=%ld\n",
                       w == 0 ? "EXPECT" : "CALLS", q, v[C_ALLREDUCE], v[C_REDUCE_SCATTER],
                       v[C_REDUCE_SCATTER_BLOCK], v[C_ALLGATHER], v[C_ALLTOALL], v[C_BCAST]);
            }
        printf("xccl_mpi_check: np=%d %s mode, %.2f s\n", world_size, quick ? "quick" : "full",
               MPI_Wtime() - t0);
        printf("RESULT: %ld passed, %ld failed\n", tp, tf);
        status = tf != 0;
        for (int q = 1; q < world_size; q++)
            MPI_Send(&status, 1, MPI_INT, q, TAG_STATUS, MPI_COMM_WORLD);
        free(all);
    }

    for (int i = 0; i < 3; i++)
        free_ctx(&ctx[i]);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
    MPI_Op_free(&mpi_ops[OP_USER_SUM]);
    MPI_Op_free(&mpi_ops[OP_USER_NC]);
    MPI_Type_free(&dt_contig3.dt);
    MPI_Type_free(&dt_vector.dt);
    MPI_Finalize();
    return status;
}
