/*
 * xccl_mpi_gpu: the collectives xccl intercepts on CUDA device buffers.
 *
 * Loads libcuda.so.1 with dlopen (the real driver, or test/gpu/fake's
 * stand-in through LD_LIBRARY_PATH), takes device (local rank mod device
 * count), retains its primary context and makes it current, allocates every
 * buffer with cuMemAlloc and checks, against references computed here on
 * the host (never by MPI):
 *   MPI_Allreduce (SUM/PROD/MAX/MIN/BAND/BOR/BXOR/LAND/LOR on int8, int32,
 *     int64, uint64, float, double; MINLOC/MAXLOC on MPI_DOUBLE_INT; a
 *     commutative user op), in place and not
 *   MPI_Reduce_scatter_block, MPI_Reduce_scatter (irregular counts, some 0)
 *   MPI_Allgather, MPI_Alltoall (in place and not)
 *   MPI_Bcast from every root (also with an MPI_Type_vector datatype)
 *   MPI_Iallreduce and MPI_Ibcast + MPI_Wait
 *   a mix: rank 0 device buffers, the other ranks host buffers
 *   with two devices or more: buffers in the next device's context while
 *     the rank's own context is current; every case checks that the call
 *     left the current context as it was
 *   allgather, allreduce, bcast three times on buffers freed and allocated
 *     again at the same size (stale CUDA IPC mappings)
 * at counts 0, 1, 7, p-1 and sizes around 1 MiB, 4 MiB and 16 MiB (odd
 * counts, so chunked pipelines cross chunk boundaries unevenly).  Receive
 * buffers have guard bytes after them that must stay untouched; send
 * buffers must come back unchanged.  Floating sums are compared with a
 * tolerance and must be bitwise identical on every rank (rank 0 receives
 * every rank's result bytes).  Results are read back with cuMemcpyDtoH.
 * Control traffic (who failed, result bytes) is point-to-point only.
 *
 * Options: -q quiet (only failures and the summary)
 *          -n N  largest buffer in bytes (default 20 MiB; 40 MiB with -l)
 *          -l    long: more sizes, and every type/op at the big sizes
 *          -H    host buffers (malloc) instead of device buffers, nothing
 *                else changes: checks the test itself against stock Open MPI
 *          -L    the driver loaded late: after MPI_Init and after host calls
 *                on stack buffers, which make xccl look for it and find none
 *                (a Python code that imports torch after mpi4py's first call)
 * Output: FAIL <coll> type=<T> op=<O> count=<n> inplace=<0|1> mem=<m>
 *              root=<r> rank=<r> index=<i> got=<..> want=<..>
 *         RESULT: <passed> passed, <failed> failed
 * Exit: 0 all passed, 1 failures, 77 (and "SKIP: <reason>") when
 * libcuda.so.1 cannot be loaded or reports no device.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ driver API
 * test/gpu/test_cuda.h (shared with xccl_bench -g); a failing call aborts. */
#include "test_cuda.h"

#define CU_CHECK(call) TEST_CU_CHECK(my_rank, call)

static int my_rank, nprocs, quiet, host_mode, long_mode;
static size_t max_bytes;

/* Several devices (cu_ndev >= 2): buffers of mem "other" live in the
 * primary context of the next device while this rank's own context stays
 * current, as in an application that drives two GPUs.  Every case also
 * checks that the call left the current context as it was. */
static CUresult (*CtxGetCurrent)(CUcontext *);
static CUcontext own_ctx, other_ctx;
static CUdevice other_dev;

static void other_setup(void)
{
    *(void **) &CtxGetCurrent = dlsym(libcuda, "cuCtxGetCurrent");
    if (NULL == CtxGetCurrent || 0 != CtxGetCurrent(&own_ctx)) {
        own_ctx = NULL;
        return;
    }
    if (cu_ndev >= 2 && 0 == cu.DeviceGet(&other_dev, (cu_ordinal + 1) % cu_ndev) &&
        0 != cu.DevicePrimaryCtxRetain(&other_ctx, other_dev)) {
        other_ctx = NULL;
    }
}

static void other_release(void)
{
    if (other_ctx) {
        cu.DevicePrimaryCtxRelease(other_dev);
        other_ctx = NULL;
    }
}

/* Runs with the other device's context current (dev 2), then back. */
#define IN_CTX(dev, stmt)                                                      \
    do {                                                                       \
        if (2 == (dev)) {                                                      \
            CU_CHECK(cu.CtxSetCurrent(other_ctx));                             \
        }                                                                      \
        stmt;                                                                  \
        if (2 == (dev)) {                                                      \
            CU_CHECK(cu.CtxSetCurrent(own_ctx));                               \
        }                                                                      \
    } while (0)

/* ------------------------------------------------------------ buffers */
typedef struct {
    char *ptr;                 /* what MPI gets */
    size_t bytes;
    int dev;                   /* 0 host, 1 device, 2 the other device */
} buf_t;

static buf_t buf_alloc(size_t bytes, int dev)
{
    buf_t b = { NULL, bytes, dev };
    size_t n = bytes ? bytes : 1;
    if (dev) {
        CUdeviceptr d;
        IN_CTX(dev, CU_CHECK(cu.MemAlloc(&d, n)));
        b.ptr = (char *) (uintptr_t) d;
    } else {
        b.ptr = malloc(n);
        if (NULL == b.ptr) {
            fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", my_rank, n);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    return b;
}

static void buf_free(buf_t *b)
{
    if (b->dev) {
        IN_CTX(b->dev, CU_CHECK(cu.MemFree((CUdeviceptr) (uintptr_t) b->ptr)));
    } else {
        free(b->ptr);
    }
    b->ptr = NULL;
}

static void buf_put(buf_t *b, const void *host, size_t n)
{
    if (0 == n) {
        return;
    }
    if (b->dev) {
        IN_CTX(b->dev, CU_CHECK(cu.MemcpyHtoD((CUdeviceptr) (uintptr_t) b->ptr, host, n)));
    } else {
        memcpy(b->ptr, host, n);
    }
}

static void buf_get(void *host, const buf_t *b, size_t n)
{
    if (0 == n) {
        return;
    }
    if (b->dev) {
        IN_CTX(b->dev, CU_CHECK(cu.MemcpyDtoH(host, (CUdeviceptr) (uintptr_t) b->ptr, n)));
    } else {
        memcpy(host, b->ptr, n);
    }
}

static void *xmalloc(size_t n)
{
    return test_xmalloc(n, my_rank);
}

/* ------------------------------------------------------------ types, ops */
enum { T_INT8, T_INT32, T_INT64, T_UINT64, T_FLOAT, T_DOUBLE, T_DOUBLE_INT, NTYPES };
static const char *const type_names[NTYPES] = {
    "int8", "int32", "int64", "uint64", "float", "double", "double_int"
};
static const size_t type_size[NTYPES] = { 1, 4, 8, 8, 4, 8, 16 };
static MPI_Datatype type_mpi[NTYPES];

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_BAND, O_BOR, O_BXOR, O_LAND, O_LOR,
       O_MINLOC, O_MAXLOC, O_USER, O_NONE, NOPS };
static const char *const op_names[NOPS] = {
    "sum", "prod", "max", "min", "band", "bor", "bxor", "land", "lor",
    "minloc", "maxloc", "user", "none"
};
static MPI_Op op_mpi[NOPS];

typedef struct {
    double v;
    int i;
} double_int;

static int is_float(int t)
{
    return T_FLOAT == t || T_DOUBLE == t;
}

/* The user op: inout = in + inout + 1 on MPI_INT (commutative, associative). */
static void user_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void) dt;
    const int32_t *a = in;
    int32_t *b = inout;
    for (int i = 0; i < *len; i++) {
        b[i] = (int32_t) ((uint32_t) a[i] + (uint32_t) b[i] + 1u);
    }
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash3(uint64_t rank, uint64_t idx, uint64_t salt)
{
    return mix(idx * 0x100000001b3ull ^ mix(rank * 7919 + salt * 104729));
}

/* An element's value as int64 (integers, uint64 bits) or double. */
typedef struct {
    int64_t i;
    double f;
    int loc;                   /* double_int */
} val_t;

/* Input of rank r at element idx, for op (the range suits the op). */
static val_t gen(int t, int op, int r, size_t idx, uint64_t salt)
{
    uint64_t h = hash3((uint64_t) r, idx, salt * 64 + (uint64_t) op * 8 + (uint64_t) t);
    val_t v = { 0, 0, 0 };
    switch (t) {
    case T_FLOAT:
    case T_DOUBLE: {
        double x;
        if (O_PROD == op) {
            x = 1.0 + ((double) (h % 201) - 100.0) / 997.0;
        } else {
            x = ((double) (h % 200001) - 100000.0) / 7.0 * 1.3;
        }
        v.f = T_FLOAT == t ? (double) (float) x : x;
        return v;
    }
    case T_DOUBLE_INT:
        v.f = (double) (h % 5) - 2.0;  /* many ties */
        v.loc = (int) ((h >> 20) % 100);
        return v;
    default:
        break;
    }
    switch (op) {
    case O_PROD: {
        static const int64_t small[6] = { 1, -1, 2, -2, 1, 3 };
        v.i = small[h % 6];
        break;
    }
    case O_SUM:
    case O_USER:
        v.i = T_INT8 == t ? (int64_t) (int8_t) h               /* wraps: tested */
            : T_INT32 == t ? (int64_t) (h % (1u << 29)) - (1 << 28)
            : T_INT64 == t ? (int64_t) (h >> 4) - (int64_t) (1ull << 59)
            : (int64_t) h;                                     /* uint64 wraps */
        break;
    case O_LAND:
    case O_LOR:
        v.i = (h % 5 == 0) ? 0 : (int64_t) (h % 3 + 1);
        break;
    default:                   /* max/min/bitwise/none: the type's full range */
        v.i = T_INT8 == t ? (int64_t) (int8_t) h
            : T_INT32 == t ? (int64_t) (int32_t) h
            : (int64_t) h;
        break;
    }
    return v;
}

static void store(int t, void *buf, size_t idx, val_t v)
{
    switch (t) {
    case T_INT8: ((int8_t *) buf)[idx] = (int8_t) v.i; break;
    case T_INT32: ((int32_t *) buf)[idx] = (int32_t) v.i; break;
    case T_INT64: ((int64_t *) buf)[idx] = v.i; break;
    case T_UINT64: ((uint64_t *) buf)[idx] = (uint64_t) v.i; break;
    case T_FLOAT: ((float *) buf)[idx] = (float) v.f; break;
    case T_DOUBLE: ((double *) buf)[idx] = v.f; break;
    case T_DOUBLE_INT: {
        double_int *p = (double_int *) buf + idx;
        p->v = v.f;
        p->i = v.loc;
        break;
    }
    }
}

static val_t load(int t, const void *buf, size_t idx)
{
    val_t v = { 0, 0, 0 };
    switch (t) {
    case T_INT8: v.i = ((const int8_t *) buf)[idx]; break;
    case T_INT32: v.i = ((const int32_t *) buf)[idx]; break;
    case T_INT64: v.i = ((const int64_t *) buf)[idx]; break;
    case T_UINT64: v.i = (int64_t) ((const uint64_t *) buf)[idx]; break;
    case T_FLOAT: v.f = ((const float *) buf)[idx]; break;
    case T_DOUBLE: v.f = ((const double *) buf)[idx]; break;
    case T_DOUBLE_INT:
        v.f = ((const double_int *) buf)[idx].v;
        v.loc = ((const double_int *) buf)[idx].i;
        break;
    }
    return v;
}

/* Integer a op b in type t (sums and products wrap like the machine). */
static int64_t fold_int(int t, int op, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t) a, ub = (uint64_t) b;
    uint64_t r;
    switch (op) {
    case O_SUM: r = ua + ub; break;
    case O_USER: r = ua + ub + 1; break;
    case O_PROD: r = ua * ub; break;
    case O_BAND: r = ua & ub; break;
    case O_BOR: r = ua | ub; break;
    case O_BXOR: r = ua ^ ub; break;
    case O_LAND: r = (a && b); break;
    case O_LOR: r = (a || b); break;
    case O_MAX:
        if (T_UINT64 == t) {
            return ua > ub ? a : b;
        }
        return a > b ? a : b;
    case O_MIN:
        if (T_UINT64 == t) {
            return ua < ub ? a : b;
        }
        return a < b ? a : b;
    default: r = 0; break;
    }
    switch (t) {
    case T_INT8: return (int8_t) r;
    case T_INT32: return (int32_t) r;
    default: return (int64_t) r;
    }
}

/* Expected reduction over ranks 0..p-1 of element idx; sumabs for the
 * floating tolerance. */
static val_t reference(int t, int op, size_t idx, uint64_t salt, int p, double *sumabs)
{
    val_t acc = gen(t, op, 0, idx, salt);
    *sumabs = fabs(acc.f);
    for (int r = 1; r < p; r++) {
        val_t v = gen(t, op, r, idx, salt);
        if (T_DOUBLE_INT == t) {
            if (O_MINLOC == op ? v.f < acc.f : v.f > acc.f) {
                acc = v;
            } else if (v.f == acc.f && v.loc < acc.loc) {
                acc.loc = v.loc;
            }
        } else if (is_float(t)) {
            *sumabs += fabs(v.f);
            switch (op) {
            case O_SUM: acc.f += v.f; break;
            case O_PROD: acc.f *= v.f; break;
            case O_MAX: acc.f = v.f > acc.f ? v.f : acc.f; break;
            case O_MIN: acc.f = v.f < acc.f ? v.f : acc.f; break;
            }
        } else {
            acc.i = fold_int(t, op, acc.i, v.i);
        }
    }
    return acc;
}

/* ------------------------------------------------------------ cases, checks */
typedef struct {
    const char *coll;
    int type, op;
    size_t count;
    int inplace;
    const char *mem;
    int root;
    int failed;                /* this rank */
} case_t;

static int passed_cases, failed_cases;

static void fail(case_t *c, size_t index, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    printf("FAIL %s type=%s op=%s count=%zu inplace=%d mem=%s root=%d rank=%d index=%zu %s\n",
           c->coll, type_names[c->type], op_names[c->op], c->count, c->inplace, c->mem,
           c->root, my_rank, index, what);
    fflush(stdout);
    c->failed++;
}

static void fmt_val(char *s, size_t n, int t, val_t v)
{
    if (is_float(t)) {
        snprintf(s, n, "%.17g", v.f);
    } else if (T_DOUBLE_INT == t) {
        snprintf(s, n, "(%.17g,%d)", v.f, v.loc);
    } else if (T_UINT64 == t) {
        snprintf(s, n, "%" PRIu64, (uint64_t) v.i);
    } else {
        snprintf(s, n, "%" PRId64, v.i);
    }
}

/* got vs want; floating sums and products within a tolerance. */
static int close_enough(int t, int op, val_t got, val_t want, double sumabs, int p)
{
    if (T_DOUBLE_INT == t) {
        return got.f == want.f && got.loc == want.loc;
    }
    if (!is_float(t)) {
        return got.i == want.i;
    }
    double eps = T_FLOAT == t ? FLT_EPSILON : DBL_EPSILON;
    if (O_SUM == op) {
        return fabs(got.f - want.f) <= 2.0 * (p + 1) * eps * sumabs;
    }
    if (O_PROD == op) {
        return fabs(got.f - want.f) <= 4.0 * (p + 1) * eps * fabs(want.f);
    }
    return got.f == want.f;
}

/* Checks n elements of got (type t) against want[] values; first bad one. */
static void check_elems(case_t *c, const void *got, size_t n, val_t (*want)(size_t, double *, void *),
                        void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        double sumabs = 0;
        val_t w = want(i, &sumabs, ctx);
        val_t g = load(c->type, got, i);
        if (!close_enough(c->type, c->op, g, w, sumabs, nprocs)) {
            char gs[64], ws[64];
            fmt_val(gs, sizeof(gs), c->type, g);
            fmt_val(ws, sizeof(ws), c->type, w);
            fail(c, i, "got=%s want=%s", gs, ws);
            return;
        }
    }
}

#define GUARD 64
#define GUARD_BYTE 0xa5

static void check_guard(case_t *c, const unsigned char *host, size_t from, size_t total)
{
    for (size_t i = from; i < total; i++) {
        if (host[i] != GUARD_BYTE) {
            fail(c, i, "got=0x%02x want=0x%02x (byte outside the result overwritten)", host[i],
                 GUARD_BYTE);
            return;
        }
    }
}

/* Control traffic (test_cuda.h): point-to-point only. */
static int ctl_all(int ok)
{
    return test_ctl_all(ok, my_rank, nprocs);
}

/* Every rank's n result bytes identical to rank 0's (element granularity
 * for the report); compares element values, skipping padding. */
static void check_identical(case_t *c, const void *mine, size_t n)
{
    size_t bytes = n * type_size[c->type];
    if (0 == my_rank) {
        char *other = xmalloc(bytes);
        for (int r = 1; r < nprocs; r++) {
            MPI_Recv(other, (int) bytes, MPI_BYTE, r, TEST_CTL_TAG + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t i = 0; i < n; i++) {
                val_t a = load(c->type, mine, i), b = load(c->type, other, i);
                if (a.i != b.i || a.loc != b.loc || memcmp(&a.f, &b.f, sizeof(a.f))) {
                    char as[64], bs[64];
                    fmt_val(as, sizeof(as), c->type, b);
                    fmt_val(bs, sizeof(bs), c->type, a);
                    fail(c, i, "got=%s want=%s (rank %d's result is not bitwise identical to rank 0's)",
                         as, bs, r);
                    break;
                }
            }
        }
        free(other);
    } else {
        MPI_Send(mine, (int) bytes, MPI_BYTE, 0, TEST_CTL_TAG + 1, MPI_COMM_WORLD);
    }
}

static void finish_case(case_t *c)
{
    CUcontext now = NULL;
    if (own_ctx && (0 != CtxGetCurrent(&now) || now != own_ctx)) {
        fail(c, 0, "got=current-context-changed want=unchanged");
    }
    int ok = ctl_all(0 == c->failed);
    if (ok) {
        passed_cases++;
    } else {
        failed_cases++;
    }
    if (!quiet && 0 == my_rank) {
        printf("%s %s type=%s op=%s count=%zu inplace=%d mem=%s root=%d\n", ok ? "ok  " : "BAD ",
               c->coll, type_names[c->type], op_names[c->op], c->count, c->inplace, c->mem, c->root);
        fflush(stdout);
    }
}

/* Which buffers are device buffers: "dev" all ranks (host with -H),
 * "mixed": rank 0 only, "other": all ranks, on the other device. */
static int use_dev(const char *mem)
{
    if (host_mode) {
        return 0;
    }
    if (0 == strcmp(mem, "other")) {
        return 2;
    }
    return 0 == strcmp(mem, "dev") || (0 == strcmp(mem, "mixed") && 0 == my_rank);
}

/* Fills an input buffer on the host: element j of rank r. */
static void fill_input(int t, int op, void *host, size_t n, int r, uint64_t salt, size_t first_idx)
{
    for (size_t j = 0; j < n; j++) {
        store(t, host, j, gen(t, op, r, first_idx + j, salt));
    }
}

/* Uploads host[0..n) and prefills the guard; returns the buffer. */
static buf_t make_buf(const void *host, size_t bytes, size_t total, int dev)
{
    buf_t b = buf_alloc(total, dev);
    unsigned char *tmp = xmalloc(total);
    memset(tmp, GUARD_BYTE, total);
    if (host) {
        memcpy(tmp, host, bytes);
    }
    buf_put(&b, tmp, total);
    free(tmp);
    return b;
}

/* The send buffer came back unchanged. */
static void check_unchanged(case_t *c, const buf_t *b, const void *host, size_t bytes)
{
    unsigned char *tmp = xmalloc(bytes);
    buf_get(tmp, b, bytes);
    for (size_t i = 0; i < bytes; i++) {
        if (tmp[i] != ((const unsigned char *) host)[i]) {
            fail(c, i, "got=0x%02x want=0x%02x (send buffer modified)", tmp[i],
                 ((const unsigned char *) host)[i]);
            break;
        }
    }
    free(tmp);
}

/* ------------------------------------------------------------ reductions */
struct red_ctx {
    int t, op;
    uint64_t salt;
    size_t offset;             /* global index of result element 0 */
};

static val_t want_reduce(size_t i, double *sumabs, void *vctx)
{
    struct red_ctx *x = vctx;
    return reference(x->t, x->op, x->offset + i, x->salt, nprocs, sumabs);
}

static uint64_t case_salt;

/* The end of a call's check: its return code; RECV (rbytes of result room,
 * GUARD after it) downloaded, its first n elements against want, the guard
 * untouched; SEND (sb, sbytes of in; NULL in place) back unchanged, freed.
 * Returns the downloaded RECV for the caller's further checks (it frees it). */
static unsigned char *check_result(case_t *c, int rc, const buf_t *rb, size_t rbytes, size_t n,
                                   val_t (*want)(size_t, double *, void *), void *wctx,
                                   buf_t *sb, const void *in, size_t sbytes)
{
    if (rc != MPI_SUCCESS) {
        fail(c, 0, "got=rc%d want=MPI_SUCCESS", rc);
    }
    unsigned char *out = xmalloc(rbytes + GUARD);
    buf_get(out, rb, rbytes + GUARD);
    check_elems(c, out, n, want, wctx);
    check_guard(c, out, rbytes, rbytes + GUARD);
    if (sb) {
        check_unchanged(c, sb, in, sbytes);
        buf_free(sb);
    }
    return out;
}

/* MPI_Allreduce / MPI_Iallreduce of count elements. */
static void test_allreduce(int t, int op, size_t count, int inplace, const char *mem, int nb)
{
    case_t c = { nb ? "iallreduce" : "allreduce", t, op, count, inplace, mem, -1, 0 };
    uint64_t salt = ++case_salt;
    size_t es = type_size[t], bytes = count * es;
    int dev = use_dev(mem);
    void *in = xmalloc(bytes);
    fill_input(t, op, in, count, my_rank, salt, 0);
    buf_t sb = { NULL, 0, 0 };
    buf_t rb = make_buf(inplace ? in : NULL, bytes, bytes + GUARD, dev);
    if (!inplace) {
        sb = make_buf(in, bytes, bytes, dev);
    }
    const void *sendp = inplace ? MPI_IN_PLACE : (const void *) sb.ptr;
    int rc;
    if (nb) {
        MPI_Request req;
        rc = MPI_Iallreduce(sendp, rb.ptr, (int) count, type_mpi[t], op_mpi[op], MPI_COMM_WORLD, &req);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPI_Allreduce(sendp, rb.ptr, (int) count, type_mpi[t], op_mpi[op], MPI_COMM_WORLD);
    }
    struct red_ctx x = { t, op, salt, 0 };
    unsigned char *out = check_result(&c, rc, &rb, bytes, count, want_reduce, &x,
                                      inplace ? NULL : &sb, in, bytes);
    if (is_float(t) && (O_SUM == op || O_PROD == op)) {
        check_identical(&c, out, count);
    }
    buf_free(&rb);
    free(out);
    free(in);
    finish_case(&c);
}

/* MPI_Reduce_scatter_block (counts == NULL) or MPI_Reduce_scatter. */
static void test_reduce_scatter(int t, int op, size_t block, const int *counts, int inplace,
                                const char *mem)
{
    case_t c = { counts ? "reduce_scatter" : "reduce_scatter_block", t, op, block, inplace, mem,
                 -1, 0 };
    uint64_t salt = ++case_salt;
    size_t es = type_size[t];
    size_t total = 0, mine = 0, offset = 0;
    for (int r = 0; r < nprocs; r++) {
        size_t n = counts ? (size_t) counts[r] : block;
        if (r == my_rank) {
            mine = n;
            offset = total;
        }
        total += n;
    }
    if (counts) {
        c.count = mine;
    }
    int dev = use_dev(mem);
    void *in = xmalloc(total * es);
    fill_input(t, op, in, total, my_rank, salt, 0);
    buf_t sb = { NULL, 0, 0 }, rb;
    size_t rbytes = inplace ? total * es : mine * es;
    rb = make_buf(inplace ? in : NULL, inplace ? total * es : 0, rbytes + GUARD, dev);
    if (!inplace) {
        sb = make_buf(in, total * es, total * es, dev);
    }
    const void *sendp = inplace ? MPI_IN_PLACE : (const void *) sb.ptr;
    int rc;
    if (counts) {
        rc = MPI_Reduce_scatter(sendp, rb.ptr, counts, type_mpi[t], op_mpi[op], MPI_COMM_WORLD);
    } else {
        rc = MPI_Reduce_scatter_block(sendp, rb.ptr, (int) block, type_mpi[t], op_mpi[op],
                                      MPI_COMM_WORLD);
    }
    struct red_ctx x = { t, op, salt, offset };
    unsigned char *out = check_result(&c, rc, &rb, rbytes, mine, want_reduce, &x,
                                      inplace ? NULL : &sb, in, total * es);
    /* in place, the rest of the buffer is undefined; else it is the guard */
    if (!inplace) {
        check_guard(&c, out, mine * es, rbytes);
    }
    buf_free(&rb);
    free(out);
    free(in);
    finish_case(&c);
}

/* ------------------------------------------------------------ data movement */
struct move_ctx {
    int t;
    uint64_t salt;
    size_t count;
    int kind;                  /* 0 allgather, 1 alltoall, 2 bcast */
    int root;
};

/* What element i of the receive buffer must be. */
static val_t want_move(size_t i, double *sumabs, void *vctx)
{
    struct move_ctx *x = vctx;
    *sumabs = 0;
    if (2 == x->kind) {
        return gen(x->t, O_NONE, x->root, i, x->salt);
    }
    size_t src = x->count ? i / x->count : 0, j = x->count ? i % x->count : 0;
    if (0 == x->kind) {
        return gen(x->t, O_NONE, (int) src, j, x->salt);
    }
    return gen(x->t, O_NONE, (int) src, (size_t) my_rank * x->count + j, x->salt);
}

static void test_allgather(int t, size_t count, int inplace, const char *mem)
{
    case_t c = { "allgather", t, O_NONE, count, inplace, mem, -1, 0 };
    uint64_t salt = ++case_salt;
    size_t es = type_size[t], bytes = count * es, rbytes = bytes * (size_t) nprocs;
    int dev = use_dev(mem);
    void *in = xmalloc(bytes);
    fill_input(t, O_NONE, in, count, my_rank, salt, 0);
    buf_t sb = { NULL, 0, 0 }, rb;
    if (inplace) {
        unsigned char *pre = xmalloc(rbytes);
        memset(pre, GUARD_BYTE, rbytes);
        memcpy(pre + (size_t) my_rank * bytes, in, bytes);
        rb = make_buf(pre, rbytes, rbytes + GUARD, dev);
        free(pre);
    } else {
        rb = make_buf(NULL, 0, rbytes + GUARD, dev);
        sb = make_buf(in, bytes, bytes, dev);
    }
    int rc = MPI_Allgather(inplace ? MPI_IN_PLACE : (const void *) sb.ptr, (int) count, type_mpi[t],
                           rb.ptr, (int) count, type_mpi[t], MPI_COMM_WORLD);
    struct move_ctx x = { t, salt, count, 0, 0 };
    unsigned char *out = check_result(&c, rc, &rb, rbytes, count * (size_t) nprocs, want_move,
                                      &x, inplace ? NULL : &sb, in, bytes);
    buf_free(&rb);
    free(out);
    free(in);
    finish_case(&c);
}

static void test_alltoall(int t, size_t count, int inplace, const char *mem)
{
    case_t c = { "alltoall", t, O_NONE, count, inplace, mem, -1, 0 };
    uint64_t salt = ++case_salt;
    size_t es = type_size[t], n = count * (size_t) nprocs, bytes = n * es;
    int dev = use_dev(mem);
    void *in = xmalloc(bytes);
    fill_input(t, O_NONE, in, n, my_rank, salt, 0);
    buf_t sb = { NULL, 0, 0 };
    buf_t rb = make_buf(inplace ? in : NULL, inplace ? bytes : 0, bytes + GUARD, dev);
    if (!inplace) {
        sb = make_buf(in, bytes, bytes, dev);
    }
    int rc = MPI_Alltoall(inplace ? MPI_IN_PLACE : (const void *) sb.ptr, (int) count, type_mpi[t],
                          rb.ptr, (int) count, type_mpi[t], MPI_COMM_WORLD);
    struct move_ctx x = { t, salt, count, 1, 0 };
    unsigned char *out = check_result(&c, rc, &rb, bytes, n, want_move, &x,
                                      inplace ? NULL : &sb, in, bytes);
    buf_free(&rb);
    free(out);
    free(in);
    finish_case(&c);
}

/* Checks a broadcast's result (the root's input of salt) and frees it all. */
static void finish_bcast(case_t *c, int rc, buf_t *b, void *in, uint64_t salt, int root)
{
    const int t = c->type;
    const size_t count = c->count, bytes = count * type_size[t];
    struct move_ctx x = { t, salt, count, 2, root };
    unsigned char *out = check_result(c, rc, b, bytes, count, want_move, &x, NULL, NULL, 0);
    buf_free(b);
    free(out);
    free(in);
    finish_case(c);
}

static void test_bcast(int t, size_t count, int root, const char *mem, int nb)
{
    case_t c = { nb ? "ibcast" : "bcast", t, O_NONE, count, 0, mem, root, 0 };
    uint64_t salt = ++case_salt;
    size_t es = type_size[t], bytes = count * es;
    int dev = use_dev(mem);
    void *in = xmalloc(bytes);
    fill_input(t, O_NONE, in, count, root, salt, 0);
    buf_t b = make_buf(my_rank == root ? in : NULL, my_rank == root ? bytes : 0, bytes + GUARD, dev);
    int rc;
    if (nb) {
        MPI_Request req;
        rc = MPI_Ibcast(b.ptr, (int) count, type_mpi[t], root, MPI_COMM_WORLD, &req);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPI_Bcast(b.ptr, (int) count, type_mpi[t], root, MPI_COMM_WORLD);
    }
    finish_bcast(&c, rc, &b, in, salt, root);
}

/* A nonblocking collective must not wait for other ranks before it returns.
 * Rank 0 starts MPI_Ibcast (root 0) and then sends rank 1 a token; rank 1
 * waits for the token before it starts its MPI_Ibcast.  A call that runs to
 * completion before returning deadlocks here (the root's rendezvous send
 * to rank 1 waits for a receive rank 1 has not posted): rank 1 gives up
 * after 60 s, reports the failure and aborts the job. */
static void test_ibcast_returns_early(int t, size_t count, const char *mem)
{
    case_t c = { "ibcast_returns_early", t, O_NONE, count, 0, mem, 0, 0 };
    uint64_t salt = ++case_salt;
    size_t es = type_size[t], bytes = count * es;
    int dev = use_dev(mem), token = 42, rc;
    void *in = xmalloc(bytes);
    fill_input(t, O_NONE, in, count, 0, salt, 0);
    buf_t b = make_buf(0 == my_rank ? in : NULL, 0 == my_rank ? bytes : 0, bytes + GUARD, dev);
    MPI_Request req;
    if (1 == my_rank) {
        MPI_Request rreq;
        int got = 0;
        double until = MPI_Wtime() + 60.0;
        MPI_Irecv(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, &rreq);
        while (!got && MPI_Wtime() < until) {
            MPI_Test(&rreq, &got, MPI_STATUS_IGNORE);
        }
        if (!got) {
            fail(&c, 0, "rank 0's MPI_Ibcast did not return before the broadcast completed");
            fprintf(stderr, "FAIL ibcast_returns_early: aborting (the job would hang)\n");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    rc = MPI_Ibcast(b.ptr, (int) count, type_mpi[t], 0, MPI_COMM_WORLD, &req);
    if (0 == my_rank && MPI_SUCCESS == rc) {
        MPI_Send(&token, 1, MPI_INT, 1, 99, MPI_COMM_WORLD);
    }
    if (MPI_SUCCESS == rc) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    finish_bcast(&c, rc, &b, in, salt, 0);
}

/* MPI_Bcast of count MPI_Type_vector(count, 2, 3, MPI_INT) elements... one
 * element of a vector type of nblocks blocks: every third int stays. */
static void test_bcast_vector(size_t nblocks, int root, const char *mem)
{
    case_t c = { "bcast_vector", T_INT32, O_NONE, nblocks, 0, mem, root, 0 };
    uint64_t salt = ++case_salt;
    size_t nints = nblocks ? (nblocks - 1) * 3 + 2 : 0, bytes = nints * 4;
    int dev = use_dev(mem);
    int32_t *in = xmalloc(bytes);
    for (size_t i = 0; i < nints; i++) {
        in[i] = (int32_t) hash3((uint64_t) root, i, salt);
    }
    unsigned char *pre = xmalloc(bytes + GUARD);
    memset(pre, GUARD_BYTE, bytes + GUARD);
    if (my_rank == root) {
        memcpy(pre, in, bytes);
    }
    buf_t b = make_buf(pre, bytes + GUARD, bytes + GUARD, dev);
    MPI_Datatype vec;
    MPI_Type_vector((int) (nblocks ? nblocks : 1), 2, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int rc = MPI_Bcast(b.ptr, nblocks ? 1 : 0, vec, root, MPI_COMM_WORLD);
    MPI_Type_free(&vec);
    if (rc != MPI_SUCCESS) {
        fail(&c, 0, "got=rc%d want=MPI_SUCCESS", rc);
    }
    unsigned char *out = xmalloc(bytes + GUARD);
    buf_get(out, &b, bytes + GUARD);
    for (size_t i = 0; i < nints; i++) {
        int32_t got, want;
        memcpy(&got, out + i * 4, 4);
        if (i % 3 == 2 && my_rank != root) {
            memcpy(&want, pre + i * 4, 4);   /* a gap: untouched */
        } else {
            want = in[i];
        }
        if (got != want) {
            fail(&c, i, "got=%" PRId32 " want=%" PRId32 "%s", got, want,
                 i % 3 == 2 ? " (gap of the vector type overwritten)" : "");
            break;
        }
    }
    check_guard(&c, out, bytes, bytes + GUARD);
    buf_free(&b);
    free(out);
    free(pre);
    free(in);
    finish_case(&c);
}

/* ------------------------------------------------------------ counts */
/* Counts per block: 0, 1, 7, p-1, then sizes around 1, 4 and 16 MiB of
 * the largest buffer (nblocks blocks of es bytes elements), odd. */
static size_t counts_for(size_t es, size_t nblocks, size_t *out, int with_big)
{
    size_t n = 0;
    size_t small[4] = { 0, 1, 7, (size_t) nprocs - 1 };
    for (int i = 0; i < 4; i++) {
        int dup = 0;
        for (size_t j = 0; j < n; j++) {
            dup |= out[j] == small[i];
        }
        if (!dup) {
            out[n++] = small[i];
        }
    }
    if (!with_big) {
        return n;
    }
    static const size_t big[] = { (1u << 20) - 8, (1u << 20) + 40, (4u << 20) + 72, (16u << 20) + 136 };
    static const size_t more[] = { (64u << 10) + 8, (256u << 10) + 24, (2u << 20) + 56,
                                   (8u << 20) + 104, (32u << 20) + 200 };
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        size_t cnt = (big[i] / (es * nblocks)) | 1;
        if (cnt * es * nblocks <= max_bytes) {
            out[n++] = cnt;
        }
    }
    if (long_mode) {
        for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
            size_t cnt = (more[i] / (es * nblocks)) | 1;
            if (cnt * es * nblocks <= max_bytes) {
                out[n++] = cnt;
            }
        }
    }
    return n;
}

/* The type/op pairs at big sizes (all of them with -l). */
static int big_pair(int t, int op)
{
    if (long_mode) {
        return 1;
    }
    return (T_INT32 == t && O_SUM == op) || (T_FLOAT == t && O_SUM == op) ||
           (T_DOUBLE == t && O_MAX == op) || (T_INT8 == t && O_SUM == op) ||
           (T_DOUBLE_INT == t && O_MINLOC == op) || (T_INT32 == t && O_USER == op) ||
           (T_DOUBLE == t && O_SUM == op);
}

static const struct {
    int t;
    int ops[10];
} red_pairs[] = {
    { T_INT8, { O_SUM, O_PROD, O_MAX, O_MIN, O_BAND, O_BOR, O_BXOR, -1 } },
    { T_INT32, { O_SUM, O_PROD, O_MAX, O_MIN, O_BAND, O_BOR, O_BXOR, O_LAND, O_LOR, O_USER } },
    { T_INT64, { O_SUM, O_PROD, O_MAX, O_MIN, O_BXOR, -1 } },
    { T_UINT64, { O_SUM, O_MAX, O_MIN, O_BOR, -1 } },
    { T_FLOAT, { O_SUM, O_PROD, O_MAX, O_MIN, -1 } },
    { T_DOUBLE, { O_SUM, O_PROD, O_MAX, O_MIN, -1 } },
    { T_DOUBLE_INT, { O_MINLOC, O_MAXLOC, -1 } },
};
#define NPAIRS (sizeof(red_pairs) / sizeof(red_pairs[0]))

static void run_all(void)
{
    size_t counts[32];
    const char *mem = "dev";
    /* allreduce: every pair, in place and not */
    for (size_t k = 0; k < NPAIRS; k++) {
        for (int j = 0; j < 10 && red_pairs[k].ops[j] >= 0; j++) {
            int t = red_pairs[k].t, op = red_pairs[k].ops[j];
            size_t n = counts_for(type_size[t], 1, counts, big_pair(t, op));
            for (size_t i = 0; i < n; i++) {
                for (int ip = 0; ip < 2; ip++) {
                    if (i >= 4 && !long_mode && ip != (int) (i % 2)) {
                        continue;  /* big sizes: alternate in place */
                    }
                    test_allreduce(t, op, counts[i], ip, mem, 0);
                }
            }
        }
    }
    /* reduce_scatter_block */
    static const int rs_pairs[][2] = { { T_INT32, O_SUM }, { T_DOUBLE, O_SUM }, { T_FLOAT, O_MAX },
                                       { T_INT64, O_BXOR }, { T_UINT64, O_SUM }, { T_INT8, O_SUM },
                                       { T_DOUBLE_INT, O_MAXLOC }, { T_INT32, O_USER } };
    for (size_t k = 0; k < sizeof(rs_pairs) / sizeof(rs_pairs[0]); k++) {
        int t = rs_pairs[k][0], op = rs_pairs[k][1];
        size_t n = counts_for(type_size[t], (size_t) nprocs, counts, k < 3 || long_mode);
        for (size_t i = 0; i < n; i++) {
            for (int ip = 0; ip < 2; ip++) {
                test_reduce_scatter(t, op, counts[i], NULL, ip, mem);
            }
        }
    }
    /* reduce_scatter: irregular counts, some 0 */
    {
        int *rc = xmalloc(sizeof(int) * (size_t) nprocs);
        size_t bases[] = { 0, 1, 5, (1u << 18) + 3, (1u << 20) + 5 };
        for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
            for (int r = 0; r < nprocs; r++) {
                rc[r] = 1 == r % 3 ? 0 : (int) (bases[b] + (size_t) r * 3 + (bases[b] ? 1 : 0));
            }
            size_t total = 0;
            for (int r = 0; r < nprocs; r++) {
                total += (size_t) rc[r];
            }
            for (int tt = 0; tt < 2; tt++) {
                int t = tt ? T_DOUBLE : T_INT32;
                if (total * type_size[t] > max_bytes) {
                    continue;
                }
                for (int ip = 0; ip < 2; ip++) {
                    test_reduce_scatter(t, O_SUM, bases[b], rc, ip, mem);
                }
            }
        }
        free(rc);
    }
    /* allgather, alltoall, bcast */
    static const int move_types[] = { T_INT8, T_INT32, T_DOUBLE, T_DOUBLE_INT };
    for (size_t k = 0; k < sizeof(move_types) / sizeof(move_types[0]); k++) {
        int t = move_types[k];
        size_t n = counts_for(type_size[t], (size_t) nprocs, counts, k != 0 || long_mode);
        for (size_t i = 0; i < n; i++) {
            for (int ip = 0; ip < 2; ip++) {
                test_allgather(t, counts[i], ip, mem);
                test_alltoall(t, counts[i], ip, mem);
            }
        }
        n = counts_for(type_size[t], 1, counts, k != 0 || long_mode);
        for (size_t i = 0; i < n; i++) {
            for (int root = 0; root < nprocs; root++) {
                if (i >= 4 && !long_mode && root != (int) (i % (size_t) nprocs) && root != nprocs - 1) {
                    continue;      /* big sizes: two roots */
                }
                test_bcast(t, counts[i], root, mem, 0);
            }
        }
    }
    /* Buffers freed and allocated again at the same size (the same address
     * more often than not), new data each time: every call must read its
     * own buffers, never a cached mapping of a freed one (CUDA IPC handles
     * are cached per allocation). */
    for (int k = 0; k < 3; k++) {
        test_allgather(T_INT32, (size_t) 1 << 15, 0, mem);
        test_allreduce(T_INT32, O_SUM, (size_t) 1 << 16, 0, mem, 0);
        test_bcast(T_INT32, (size_t) 1 << 16, k % nprocs, mem, 0);
    }
    /* derived datatype bcast */
    {
        size_t nb[] = { 1, 7, (1u << 17) + 1, (1u << 19) + 3 };
        for (size_t i = 0; i < sizeof(nb) / sizeof(nb[0]); i++) {
            if (((nb[i] - 1) * 3 + 2) * 4 > max_bytes) {
                continue;
            }
            for (int root = 0; root < nprocs; root++) {
                test_bcast_vector(nb[i], root, mem);
            }
        }
    }
    /* nonblocking */
    {
        size_t nbc[] = { 0, 1, 7, (1u << 20) / 8 + 3, (4u << 20) / 8 + 5 };
        for (size_t i = 0; i < sizeof(nbc) / sizeof(nbc[0]); i++) {
            if (nbc[i] * 8 > max_bytes) {
                continue;
            }
            test_allreduce(T_DOUBLE, O_SUM, nbc[i], 0, mem, 1);
            test_allreduce(T_INT64, O_MAX, nbc[i], 1, mem, 1);
            test_bcast(T_DOUBLE, nbc[i], 0, mem, 1);
            test_bcast(T_INT8, nbc[i] * 3, nprocs - 1, mem, 1);
        }
        if (nprocs >= 2 && (4u << 20) <= max_bytes) {
            test_ibcast_returns_early(T_DOUBLE, (4u << 20) / 8, mem);
        }
    }
    /* buffers on another device than the current one (all ranks alike:
     * every rank sees the same device count) */
    if (ctl_all(NULL != other_ctx) && NULL != other_ctx) {
        const char *mo = "other";
        size_t oc[] = { 7, (1u << 20) / 4 + 1, (4u << 20) / 4 + 7 };
        for (size_t i = 0; i < sizeof(oc) / sizeof(oc[0]); i++) {
            size_t c = oc[i];
            if (c * 4 * (size_t) nprocs > max_bytes) {
                continue;
            }
            for (int ip = 0; ip < 2; ip++) {
                test_allreduce(T_FLOAT, O_SUM, c, ip, mo, 0);
                test_allgather(T_INT32, c, ip, mo);
                test_reduce_scatter(T_INT32, O_SUM, c, NULL, ip, mo);
            }
            test_alltoall(T_INT32, c, 0, mo);
            test_bcast(T_INT32, c, nprocs - 1, mo, 0);
            test_allreduce(T_INT32, O_SUM, c, 0, mo, 1);
        }
    } else if (0 == my_rank && !host_mode) {
        printf("note: one device: buffers on another device than the current one not tested\n");
    }
    /* rank 0 device, the others host */
    {
        const char *mx = "mixed";
        size_t mc[] = { 1, 7, (1u << 20) / 4 + 1, (4u << 20) / 4 + 7 };
        for (size_t i = 0; i < sizeof(mc) / sizeof(mc[0]); i++) {
            size_t c = mc[i];
            if (c * 4 * (size_t) nprocs > max_bytes) {
                continue;
            }
            for (int ip = 0; ip < 2; ip++) {
                test_allreduce(T_INT32, O_SUM, c, ip, mx, 0);
                test_allreduce(T_FLOAT, O_SUM, c, ip, mx, 0);
                test_allgather(T_INT32, c, ip, mx);
                test_alltoall(T_INT32, c, ip, mx);
                test_reduce_scatter(T_INT32, O_SUM, c, NULL, ip, mx);
            }
            test_bcast(T_INT32, c, 0, mx, 0);
            test_bcast(T_INT32, c, nprocs - 1, mx, 0);
            test_allreduce(T_INT32, O_USER, c, 0, mx, 0);
        }
    }
}

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-q] [-l] [-H] [-L] [-n max_bytes]\n", prog);
}

int main(int argc, char **argv)
{
    int opt;
    max_bytes = 0;
    int late_mode = 0;
    while ((opt = getopt(argc, argv, "qlHLn:")) != -1) {
        switch (opt) {
        case 'q': quiet = 1; break;
        case 'l': long_mode = 1; break;
        case 'H': host_mode = 1; break;
        case 'L': late_mode = 1; break;
        case 'n': max_bytes = strtoull(optarg, NULL, 0); break;
        default: usage(argv[0]); return 2;
        }
    }
    if (0 == max_bytes) {
        max_bytes = long_mode ? (40u << 20) : (20u << 20);
    }
    /* The driver before MPI_Init, as CUDA applications do (-L: after). */
    const char *skip = host_mode || late_mode ? NULL : test_cuda_setup();
    if (!host_mode && !late_mode && NULL == skip) {
        other_setup();
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (late_mode && !host_mode) {
        int v[4] = { my_rank, 1, 2, 3 }, sum[4];
        char b[64] = { 0 };
        MPI_Allreduce(v, sum, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Bcast(b, (int) sizeof(b), MPI_CHAR, 0, MPI_COMM_WORLD);
        if (sum[1] != nprocs) {
            fprintf(stderr, "rank %d: host allreduce before the driver: %d, want %d\n", my_rank,
                    sum[1], nprocs);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (NULL == (skip = test_cuda_setup())) {
            other_setup();
        }
    }
    if (!ctl_all(NULL == skip)) {
        if (0 == my_rank) {
            printf("SKIP: %s\n", skip ? skip : "another rank has no device");
        }
        MPI_Finalize();
        return 77;
    }
    type_mpi[T_INT8] = MPI_INT8_T;
    type_mpi[T_INT32] = MPI_INT32_T;
    type_mpi[T_INT64] = MPI_INT64_T;
    type_mpi[T_UINT64] = MPI_UINT64_T;
    type_mpi[T_FLOAT] = MPI_FLOAT;
    type_mpi[T_DOUBLE] = MPI_DOUBLE;
    type_mpi[T_DOUBLE_INT] = MPI_DOUBLE_INT;
    op_mpi[O_SUM] = MPI_SUM;
    op_mpi[O_PROD] = MPI_PROD;
    op_mpi[O_MAX] = MPI_MAX;
    op_mpi[O_MIN] = MPI_MIN;
    op_mpi[O_BAND] = MPI_BAND;
    op_mpi[O_BOR] = MPI_BOR;
    op_mpi[O_BXOR] = MPI_BXOR;
    op_mpi[O_LAND] = MPI_LAND;
    op_mpi[O_LOR] = MPI_LOR;
    op_mpi[O_MINLOC] = MPI_MINLOC;
    op_mpi[O_MAXLOC] = MPI_MAXLOC;
    MPI_Op_create(user_fn, 1, &op_mpi[O_USER]);
    if (0 == my_rank && !quiet) {
        printf("xccl_mpi_gpu: %d ranks, %s buffers, max %zu bytes%s%s\n", nprocs,
               host_mode ? "host (-H)" : "device", max_bytes, long_mode ? ", long" : "",
               late_mode ? ", the driver loaded after MPI_Init (-L)" : "");
    }
    run_all();
    MPI_Op_free(&op_mpi[O_USER]);
    if (0 == my_rank) {
        printf("RESULT: %d passed, %d failed\n", passed_cases, failed_cases);
        fflush(stdout);
    }
    MPI_Finalize();
    other_release();
    test_cuda_release();
    return failed_cases ? 1 : 0;
}
