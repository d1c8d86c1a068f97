/*
 * xccl_mpi_gpu_user: the collectives xccl intercepts on CUDA device
 * buffers, used the way an application uses them.
 *
 * MPI gives a blocking collective's buffers back when the call returns, so
 * an application overwrites them at once and changes its data from call to
 * call.  A library that is only right while the buffers keep their old
 * contents a little longer (a peer still reading a send buffer through a
 * CUDA IPC mapping after the owner returned, a result read from the
 * previous call's data, a copy not yet done on the device) fails here.
 *
 * Loads libcuda.so.1 with dlopen (the real driver, or test/gpu/fake's
 * stand-in through LD_LIBRARY_PATH; test_cuda.h), takes device (local rank
 * mod device count) and makes its primary context current before MPI_Init.
 * Then, for
 *   MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Reduce_scatter (uneven
 *     counts, one rank 0 at np >= 3): MPI_INT SUM, MPI_INT MAX, MPI_FLOAT
 *     SUM (small integers: every sum exact in float, in any order)
 *   MPI_Allgather, MPI_Alltoall: MPI_DOUBLE and MPI_INT
 *   MPI_Bcast from every root: MPI_DOUBLE and MPI_INT
 * in place (where MPI allows it; not bcast) and not, on cuMemAlloc buffers
 * allocated once per case, ITERS (3) iterations per case, each:
 *   1. the input, a function of (case, rank, element, iteration), made in
 *      pageable host memory and written with cuMemcpyHtoD (the host copy
 *      is scribbled right after: the call returned, it is the user's);
 *   2. the collective;
 *   3. not in place: cuMemsetD8(sendbuf, 0x5A) immediately after the call
 *      returns; in place / bcast: nothing before reading;
 *   4. the result read with cuMemcpyDtoH and every element compared
 *      bitwise with a reference computed here (never by MPI): integers and
 *      the float sums are exact, so every rank must get exactly the
 *      reference, which makes the results bitwise identical across ranks;
 *   5. cuMemsetD8(0x5A) of the receive buffer (in place: the buffer), so
 *      the next iteration cannot pass on stale results.
 * A stale read of the previous iteration's data or of the 0x5A pattern
 * gives a wrong element (0x5A5A5A5A is no value the inputs take).
 *
 * Sizes, on both sides of xccl's thresholds (16 KiB per rank: the
 * shared-memory latency path; 64 KiB per call: coll_xccl_gpu_ipc_bytes;
 * 1 MiB: the shared-memory slot and staging piece): 1 element, 16 KiB,
 * 64 KiB - 1 element, 64 KiB, 1 MiB, 4 MiB + 7 elements, as the call's
 * bytes as xccl counts them (allreduce and bcast: the buffer;
 * reduce_scatter(_block): the whole send vector; allgather: everything
 * received; alltoall: everything sent), the count rounded down below a
 * threshold and up from one; and, for reduce_scatter_block, allgather and
 * alltoall, the same sizes (up to 1 MiB) as each rank's block.
 *
 * Nonblocking (-N): the ITERS iterations of a case are in flight together,
 * each on buffers of its own: every input uploaded, the first ITERS - 1
 * calls started as MPI_I<collective>, the last one blocking (it comes
 * after them on the communicator), then MPI_Waitall; each send buffer is
 * scribbled as soon as the wait returns, then every result is checked.
 * With -M, rank 1 uses host buffers while the others use device buffers
 * (a CUDA-aware MPI must take any mix: xccl cannot run such a call through
 * CUDA IPC and must still be right).
 *
 * Options: -q quiet (only failures and the summary)
 *          -n N  largest buffer in bytes (default 16 MiB; larger cases
 *                are skipped)
 *          -i N  iterations per case (default 3)
 *          -H    host buffers (malloc, memset, memcpy) instead of device
 *                buffers, nothing else changes: checks the test itself
 *                against stock Open MPI
 *          -N    nonblocking, the iterations in flight together (above)
 *          -M    rank 1 on host buffers, the others on device buffers
 * Output: FAIL <coll> count=<n> inplace=<0|1> iter=<i> rank=<r> index=<i>
 *              got=<..> want=<..> type=<t> op=<o> root=<r>
 *         (at most 3 per case and rank, then a "note:" with the number of
 *         wrong elements), and at the end
 *         RESULT: <passed> passed, <failed> failed    (cases)
 * Exit: 0 all passed, 1 failures, 77 (and "SKIP: <reason>") when
 * libcuda.so.1 cannot be loaded or reports no device.
 * Control traffic (who failed) is point-to-point only.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_cuda.h"

#define CU_CHECK(call) TEST_CU_CHECK(my_rank, call)

#define SCRIBBLE 0x5A
#define MAX_FAIL_LINES 3

static int my_rank, nprocs, quiet, host_mode, iters = 3, nonblocking, mixed;
static size_t max_bytes = 16u << 20;
static CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);

/* ------------------------------------------------------------ buffers */
static void *xmalloc(size_t n)
{
    return test_xmalloc(n, my_rank);
}

static void *buf_alloc(size_t bytes)
{
    if (host_mode) {
        return xmalloc(bytes);
    }
    CUdeviceptr d;
    CU_CHECK(cu.MemAlloc(&d, bytes ? bytes : 1));
    return (void *) (uintptr_t) d;
}

static void buf_free(void *p)
{
    if (NULL == p) {
        return;
    }
    if (host_mode) {
        free(p);
    } else {
        CU_CHECK(cu.MemFree((CUdeviceptr) (uintptr_t) p));
    }
}

/* The user's upload: cuMemcpyHtoD from pageable memory, and the host copy
 * is the user's again as soon as that returns. */
static void buf_put(void *dst, void *host, size_t n)
{
    if (0 == n) {
        return;
    }
    if (host_mode) {
        memcpy(dst, host, n);
    } else {
        CU_CHECK(cu.MemcpyHtoD((CUdeviceptr) (uintptr_t) dst, host, n));
    }
    memset(host, SCRIBBLE, n);
}

static void buf_get(void *host, const void *src, size_t n)
{
    if (0 == n) {
        return;
    }
    if (host_mode) {
        memcpy(host, src, n);
    } else {
        CU_CHECK(cu.MemcpyDtoH(host, (CUdeviceptr) (uintptr_t) src, n));
    }
}

static void buf_scribble(void *p, size_t n)
{
    if (0 == n) {
        return;
    }
    if (host_mode) {
        memset(p, SCRIBBLE, n);
    } else {
        CU_CHECK(MemsetD8((CUdeviceptr) (uintptr_t) p, SCRIBBLE, n));
    }
}

/* ------------------------------------------------------------ data */
enum { T_INT, T_FLOAT, T_DOUBLE };
static const char *const type_names[] = { "int", "float", "double" };
static const size_t type_size[] = { 4, 4, 8 };
static MPI_Datatype type_mpi(int t)
{
    return T_INT == t ? MPI_INT : T_FLOAT == t ? MPI_FLOAT : MPI_DOUBLE;
}

enum { O_SUM, O_MAX, O_NONE };
static const char *const op_names[] = { "sum", "max", "none" };
static MPI_Op op_mpi(int op)
{
    return O_SUM == op ? MPI_SUM : MPI_MAX;
}

enum { C_ALLREDUCE, C_RSB, C_RS, C_ALLGATHER, C_ALLTOALL, C_BCAST };
static const char *const coll_names[] = {
    "allreduce", "reduce_scatter_block", "reduce_scatter", "allgather", "alltoall", "bcast"
};

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Element idx of rank r's input in iteration it of case salt, stored at p. */
static void gen(int t, int op, uint64_t salt, int it, int r, size_t idx, void *p)
{
    uint64_t h = mix(mix(salt * 131 + (uint64_t) it) ^ mix((uint64_t) r * 0x100000001b3ull + idx));
    if (T_INT == t) {
        /* sums: no overflow at any np this runs; max: the full range */
        int32_t v = O_SUM == op ? (int32_t) (h % (1u << 24)) - (1 << 23) : (int32_t) h;
        memcpy(p, &v, 4);
    } else if (T_FLOAT == t) {
        float v = (float) ((int) (h % 4097) - 2048);   /* sums exact in float */
        memcpy(p, &v, 4);
    } else {
        double v = (double) (int64_t) (h >> 11) / 64.0 - 1e12;   /* exact */
        memcpy(p, &v, 8);
    }
}

/* acc = acc op x (type t). */
static void fold(int t, int op, void *acc, const void *x)
{
    if (T_INT == t) {
        int32_t a, b;
        memcpy(&a, acc, 4);
        memcpy(&b, x, 4);
        a = O_SUM == op ? (int32_t) ((uint32_t) a + (uint32_t) b) : (a > b ? a : b);
        memcpy(acc, &a, 4);
    } else if (T_FLOAT == t) {
        float a, b;
        memcpy(&a, acc, 4);
        memcpy(&b, x, 4);
        a = O_SUM == op ? a + b : (a > b ? a : b);
        memcpy(acc, &a, 4);
    } else {
        double a, b;
        memcpy(&a, acc, 8);
        memcpy(&b, x, 8);
        a = O_SUM == op ? a + b : (a > b ? a : b);
        memcpy(acc, &a, 8);
    }
}

static void fmt(char *s, size_t n, int t, const void *p)
{
    if (T_INT == t) {
        int32_t v;
        memcpy(&v, p, 4);
        snprintf(s, n, "%" PRId32, v);
    } else if (T_FLOAT == t) {
        float v;
        memcpy(&v, p, 4);
        snprintf(s, n, "%.9g", (double) v);
    } else {
        double v;
        memcpy(&v, p, 8);
        snprintf(s, n, "%.17g", v);
    }
}

/* ------------------------------------------------------------ cases */
typedef struct {
    int coll, t, op, inplace, root;
    size_t count;              /* the count argument (reduce_scatter: the total) */
    int *counts;               /* reduce_scatter */
    uint64_t salt;
    int lines, bad;            /* FAIL lines printed, wrong results (this rank) */
} case_t;

static int passed_cases, failed_cases;
static uint64_t case_salt;

/* Control traffic (test_cuda.h): point-to-point only. */
static int ctl_all(int ok)
{
    return test_ctl_all(ok, my_rank, nprocs);
}

static void fail_line(case_t *c, int it, size_t index, const char *got, const char *want)
{
    if (c->lines++ >= MAX_FAIL_LINES) {
        return;
    }
    printf("FAIL %s count=%zu inplace=%d iter=%d rank=%d index=%zu got=%s want=%s type=%s op=%s "
           "root=%d\n",
           coll_names[c->coll], c->count, c->inplace, it, my_rank, index, got, want,
           type_names[c->t], op_names[c->op], c->root);
    fflush(stdout);
}

/* Element k of this rank's expected result, into w. */
static void want_elem(const case_t *c, int it, size_t k, void *w)
{
    unsigned char x[8];
    size_t idx;
    int src;
    switch (c->coll) {
    case C_ALLREDUCE:
    case C_RSB:
    case C_RS:
        idx = k;
        if (C_RSB == c->coll) {
            idx = (size_t) my_rank * c->count + k;
        } else if (C_RS == c->coll) {
            for (int r = 0; r < my_rank; r++) {
                idx += (size_t) c->counts[r];
            }
        }
        gen(c->t, c->op, c->salt, it, 0, idx, w);
        for (int r = 1; r < nprocs; r++) {
            gen(c->t, c->op, c->salt, it, r, idx, x);
            fold(c->t, c->op, w, x);
        }
        return;
    case C_ALLGATHER:      /* block src, element k % count of src's block */
        src = (int) (k / c->count);
        gen(c->t, c->op, c->salt, it, src, k % c->count, w);
        return;
    case C_ALLTOALL:       /* src's block for me */
        src = (int) (k / c->count);
        gen(c->t, c->op, c->salt, it, src, (size_t) my_rank * c->count + k % c->count, w);
        return;
    default:               /* bcast */
        gen(c->t, c->op, c->salt, it, c->root, k, w);
        return;
    }
}

/* Checks n result elements of iteration it. */
static void check(case_t *c, int it, const unsigned char *got, size_t n)
{
    const size_t es = type_size[c->t];
    unsigned char w[8];
    size_t wrong = 0;
    for (size_t k = 0; k < n; k++) {
        want_elem(c, it, k, w);
        if (memcmp(got + k * es, w, es)) {
            char gs[48], ws[48];
            fmt(gs, sizeof(gs), c->t, got + k * es);
            fmt(ws, sizeof(ws), c->t, w);
            fail_line(c, it, k, gs, ws);
            wrong++;
        }
    }
    if (wrong) {
        c->bad++;
        printf("note: %s count=%zu inplace=%d iter=%d rank=%d type=%s op=%s root=%d: %zu of %zu "
               "elements wrong\n",
               coll_names[c->coll], c->count, c->inplace, it, my_rank, type_names[c->t],
               op_names[c->op], c->root, wrong, n);
        fflush(stdout);
    }
}

/* Fills this rank's input of iteration it: n elements, element j being
 * global index first + j, into host (the rest of the buffer is left). */
static void fill(const case_t *c, int it, unsigned char *host, size_t first, size_t n)
{
    const size_t es = type_size[c->t];
    for (size_t j = 0; j < n; j++) {
        gen(c->t, c->op, c->salt, it, my_rank, first + j, host + j * es);
    }
}

/* Bytes of the send input and the receive buffer (in place: the buffer),
 * and the elements of this rank's result. */
static void sizes(const case_t *c, size_t *sbytes, size_t *rbytes, size_t *nres)
{
    const size_t es = type_size[c->t], P = (size_t) nprocs, n = c->count;
    size_t s = 0, r = 0, res = 0;
    switch (c->coll) {
    case C_ALLREDUCE: s = r = res = n; break;
    case C_RSB: s = P * n; r = c->inplace ? P * n : n; res = n; break;
    case C_RS:
        s = n;
        res = (size_t) c->counts[my_rank];
        r = c->inplace ? n : res;
        break;
    case C_ALLGATHER: s = n; r = res = P * n; break;
    case C_ALLTOALL: s = r = res = P * n; break;
    default: s = r = res = n; break;
    }
    *sbytes = s * es;
    *rbytes = r * es;
    *nres = res;
}

/* One iteration of the call: blocking (req NULL) or started into *req. */
static int call(const case_t *c, void *sb, void *rb, MPI_Request *req)
{
    const void *sp = c->inplace ? MPI_IN_PLACE : sb;
    MPI_Datatype dt = type_mpi(c->t);
    int n = (int) c->count;
    if (req) {
        switch (c->coll) {
        case C_ALLREDUCE: return MPI_Iallreduce(sp, rb, n, dt, op_mpi(c->op), MPI_COMM_WORLD, req);
        case C_RSB:
            return MPI_Ireduce_scatter_block(sp, rb, n, dt, op_mpi(c->op), MPI_COMM_WORLD, req);
        case C_RS:
            return MPI_Ireduce_scatter(sp, rb, c->counts, dt, op_mpi(c->op), MPI_COMM_WORLD, req);
        case C_ALLGATHER: return MPI_Iallgather(sp, n, dt, rb, n, dt, MPI_COMM_WORLD, req);
        case C_ALLTOALL: return MPI_Ialltoall(sp, n, dt, rb, n, dt, MPI_COMM_WORLD, req);
        default: return MPI_Ibcast(rb, n, dt, c->root, MPI_COMM_WORLD, req);
        }
    }
    switch (c->coll) {
    case C_ALLREDUCE: return MPI_Allreduce(sp, rb, n, dt, op_mpi(c->op), MPI_COMM_WORLD);
    case C_RSB: return MPI_Reduce_scatter_block(sp, rb, n, dt, op_mpi(c->op), MPI_COMM_WORLD);
    case C_RS: return MPI_Reduce_scatter(sp, rb, c->counts, dt, op_mpi(c->op), MPI_COMM_WORLD);
    case C_ALLGATHER: return MPI_Allgather(sp, n, dt, rb, n, dt, MPI_COMM_WORLD);
    case C_ALLTOALL: return MPI_Alltoall(sp, n, dt, rb, n, dt, MPI_COMM_WORLD);
    default: return MPI_Bcast(rb, n, dt, c->root, MPI_COMM_WORLD);
    }
}

/* Iteration it's input, uploaded from pageable memory (host: scratch). */
static void upload(const case_t *c, int it, void *sb, void *rb, size_t sbytes, size_t rbytes,
                   unsigned char *host, size_t hbytes)
{
    const size_t es = type_size[c->t];
    void *in = sb ? sb : rb;
    size_t inbytes = sb ? sbytes : rbytes;
    memset(host, SCRIBBLE, hbytes);
    if (C_ALLGATHER == c->coll && c->inplace) {
        fill(c, it, host + (size_t) my_rank * c->count * es, 0, c->count);
    } else if (C_BCAST == c->coll) {
        if (my_rank == c->root) {
            fill(c, it, host, 0, c->count);
        }
    } else {
        fill(c, it, host, 0, inbytes / es);
    }
    if (C_BCAST != c->coll || my_rank == c->root) {
        buf_put(in, host, inbytes);
    }
}

static void bad_rc(case_t *c, int it, int rc)
{
    char g[32];
    snprintf(g, sizeof(g), "rc%d", rc);
    fail_line(c, it, 0, g, "MPI_SUCCESS");
    c->bad++;
}

/* -N: every iteration in flight at once, on buffers of its own. */
static void run_case_nb(case_t *c)
{
    const size_t es = type_size[c->t];
    size_t sbytes, rbytes, nres;
    sizes(c, &sbytes, &rbytes, &nres);
    void **sb = xmalloc((size_t) iters * sizeof(void *)), **rb = xmalloc((size_t) iters * sizeof(void *));
    MPI_Request *req = xmalloc((size_t) iters * sizeof(MPI_Request));
    size_t hbytes = sbytes > rbytes ? sbytes : rbytes;
    unsigned char *host = xmalloc(hbytes);
    for (int it = 0; it < iters; it++) {
        sb[it] = c->inplace || C_BCAST == c->coll ? NULL : buf_alloc(sbytes);
        rb[it] = buf_alloc(rbytes);
        buf_scribble(rb[it], rbytes);
        upload(c, it, sb[it], rb[it], sbytes, rbytes, host, hbytes);
    }
    for (int it = 0; it < iters; it++) {
        const int last = it == iters - 1;
        req[it] = MPI_REQUEST_NULL;
        int rc = call(c, sb[it], rb[it], last ? NULL : &req[it]);
        if (MPI_SUCCESS != rc) {
            bad_rc(c, it, rc);
        }
    }
    for (int it = 0; it < iters; it++) {
        int rc = MPI_Wait(&req[it], MPI_STATUS_IGNORE);
        if (sb[it]) {
            buf_scribble(sb[it], sbytes);   /* the user's again */
        }
        if (MPI_SUCCESS != rc) {
            bad_rc(c, it, rc);
        }
    }
    for (int it = 0; it < iters; it++) {
        memset(host, 0, hbytes);
        buf_get(host, rb[it], nres * es);
        check(c, it, host, nres);
        buf_free(sb[it]);
        buf_free(rb[it]);
    }
    free(host);
    free(req);
    free(sb);
    free(rb);
}

static void run_case_blocking(case_t *c)
{
    const size_t es = type_size[c->t];
    size_t sbytes, rbytes, nres;
    sizes(c, &sbytes, &rbytes, &nres);
    void *sb = c->inplace || C_BCAST == c->coll ? NULL : buf_alloc(sbytes);
    void *rb = buf_alloc(rbytes);
    size_t hbytes = sbytes > rbytes ? sbytes : rbytes;
    unsigned char *host = xmalloc(hbytes);
    /* a new buffer holds garbage, as a reused one would */
    buf_scribble(rb, rbytes);
    for (int it = 0; it < iters; it++) {
        /* 1. this iteration's input, uploaded from pageable memory */
        upload(c, it, sb, rb, sbytes, rbytes, host, hbytes);
        /* 2. the call; 3. the send buffer is the user's again */
        int rc = call(c, sb, rb, NULL);
        if (sb) {
            buf_scribble(sb, sbytes);
        }
        if (MPI_SUCCESS != rc) {
            bad_rc(c, it, rc);
        }
        /* 4. the result, read back and checked */
        memset(host, 0, hbytes);
        buf_get(host, rb, nres * es);
        check(c, it, host, nres);
        /* 5. no stale result for the next iteration */
        buf_scribble(rb, rbytes);
    }
    free(host);
    buf_free(sb);
    buf_free(rb);
}

static void run_case(case_t *c)
{
    size_t sbytes, rbytes, nres;
    sizes(c, &sbytes, &rbytes, &nres);
    c->salt = ++case_salt;
    c->lines = c->bad = 0;
    if (nonblocking) {
        run_case_nb(c);
    } else {
        run_case_blocking(c);
    }
    int ok = ctl_all(0 == c->bad);
    if (ok) {
        passed_cases++;
    } else {
        failed_cases++;
    }
    if (0 == my_rank && (!quiet || !ok)) {
        printf("%s %s type=%s op=%s count=%zu inplace=%d root=%d (%zu bytes in, %zu out)\n",
               ok ? "ok  " : "BAD ", coll_names[c->coll], type_names[c->t], op_names[c->op],
               c->count, c->inplace, c->root, sbytes, rbytes);
        fflush(stdout);
    }
}

/* ------------------------------------------------------------ the run */
/* The sizes in bytes (es: element size) and whether each is just below a
 * threshold (its count rounds down) or at/above one (rounds up). */
#define NSIZES 6
static size_t size_bytes(int i, size_t es, int *below)
{
    *below = 0;
    switch (i) {
    case 0: return es;
    case 1: return 16u << 10;
    case 2: *below = 1; return (64u << 10) - es;
    case 3: return 64u << 10;
    case 4: return 1u << 20;
    default: return (4u << 20) + 7 * es;
    }
}

/* Count for a call of about `bytes` spread over `parts` blocks. */
static size_t count_for(size_t bytes, size_t es, size_t parts, int below)
{
    size_t n = bytes / es;
    size_t c = below ? n / parts : (n + parts - 1) / parts;
    return c ? c : 1;
}

static size_t biggest(const case_t *c)
{
    /* the same on every rank: reduce_scatter by its total */
    size_t s, r, n;
    if (C_RS == c->coll) {
        return c->count * type_size[c->t];
    }
    sizes(c, &s, &r, &n);
    return s > r ? s : r;
}

static void do_case(case_t c)
{
    if (biggest(&c) > max_bytes) {
        return;
    }
    run_case(&c);
}

/* Uneven reduce_scatter counts summing to total: weights r + 1, rank 1's 0
 * at np >= 3, the remainder on the last rank. */
static void rs_counts(int *counts, size_t total)
{
    size_t wsum = 0, given = 0;
    for (int r = 0; r < nprocs; r++) {
        wsum += (nprocs >= 3 && 1 == r) ? 0 : (size_t) r + 1;
    }
    for (int r = 0; r < nprocs; r++) {
        size_t w = (nprocs >= 3 && 1 == r) ? 0 : (size_t) r + 1;
        counts[r] = (int) (total * w / wsum);
        given += (size_t) counts[r];
    }
    counts[nprocs - 1] += (int) (total - given);
}

static void run_all(void)
{
    static const int red[][2] = { { T_INT, O_SUM }, { T_INT, O_MAX }, { T_FLOAT, O_SUM } };
    static const int moves[] = { T_DOUBLE, T_INT };
    const size_t P = (size_t) nprocs;
    int *counts = xmalloc(P * sizeof(int));
    for (int si = 0; si < NSIZES; si++) {
        for (size_t k = 0; k < sizeof(red) / sizeof(red[0]); k++) {
            const int t = red[k][0], op = red[k][1];
            const size_t es = type_size[t];
            int below;
            const size_t bytes = size_bytes(si, es, &below);
            for (int ip = 0; ip < 2; ip++) {
                do_case((case_t) { .coll = C_ALLREDUCE, .t = t, .op = op, .inplace = ip,
                                   .root = -1, .count = bytes / es });
                size_t rc = count_for(bytes, es, P, below);
                do_case((case_t) { .coll = C_RSB, .t = t, .op = op, .inplace = ip, .root = -1,
                                   .count = rc });
                if (bytes <= (1u << 20) && bytes / es != rc) {
                    do_case((case_t) { .coll = C_RSB, .t = t, .op = op, .inplace = ip,
                                       .root = -1, .count = bytes / es });
                }
                rs_counts(counts, bytes / es);
                do_case((case_t) { .coll = C_RS, .t = t, .op = op, .inplace = ip, .root = -1,
                                   .count = bytes / es, .counts = counts });
            }
        }
        for (size_t k = 0; k < sizeof(moves) / sizeof(moves[0]); k++) {
            const int t = moves[k];
            const size_t es = type_size[t];
            int below;
            const size_t bytes = size_bytes(si, es, &below);
            const size_t bc = count_for(bytes, es, P, below);
            for (int coll = C_ALLGATHER; coll <= C_ALLTOALL; coll++) {
                for (int ip = 0; ip < 2; ip++) {
                    do_case((case_t) { .coll = coll, .t = t, .op = O_NONE, .inplace = ip,
                                       .root = -1, .count = bc });
                    if (bytes <= (1u << 20) && bytes / es != bc) {
                        do_case((case_t) { .coll = coll, .t = t, .op = O_NONE, .inplace = ip,
                                           .root = -1, .count = bytes / es });
                    }
                }
            }
            for (int root = 0; root < nprocs; root++) {
                do_case((case_t) { .coll = C_BCAST, .t = t, .op = O_NONE, .inplace = 0,
                                   .root = root, .count = bytes / es });
            }
        }
    }
    free(counts);
}

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-q] [-H] [-N] [-M] [-n max_bytes] [-i iterations]\n", prog);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "qHNMn:i:")) != -1) {
        switch (opt) {
        case 'q': quiet = 1; break;
        case 'H': host_mode = 1; break;
        case 'N': nonblocking = 1; break;
        case 'M': mixed = 1; break;
        case 'n': max_bytes = strtoull(optarg, NULL, 0); break;
        case 'i': iters = atoi(optarg); break;
        default: usage(argv[0]); return 2;
        }
    }
    if (iters < 1) {
        usage(argv[0]);
        return 2;
    }
    /* The driver before MPI_Init, as CUDA applications do. */
    const char *skip = host_mode ? NULL : test_cuda_setup();
    if (!host_mode && NULL == skip &&
        NULL == (*(void **) &MemsetD8 = dlsym(libcuda, "cuMemsetD8_v2"))) {
        skip = "libcuda.so.1 has no cuMemsetD8_v2";
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    host_mode = host_mode || (mixed && 1 == my_rank);
    if (!ctl_all(NULL == skip)) {
        if (0 == my_rank) {
            printf("SKIP: %s\n", skip ? skip : "another rank has no device");
        }
        MPI_Finalize();
        test_cuda_release();
        return 77;
    }
    if (0 == my_rank && !quiet) {
        printf("xccl_mpi_gpu_user: %d ranks, %s buffers%s, max %zu bytes, %d iterations%s\n",
               nprocs, host_mode ? "host (-H)" : "device", mixed ? " (rank 1: host)" : "",
               max_bytes, iters, nonblocking ? " in flight together (-N)" : "");
    }
    double t0 = MPI_Wtime();
    run_all();
    if (0 == my_rank) {
        if (!quiet) {
            printf("time: %.1f s\n", MPI_Wtime() - t0);
        }
        printf("RESULT: %d passed, %d failed\n", passed_cases, failed_cases);
        fflush(stdout);
    }
    MPI_Finalize();
    test_cuda_release();
    return failed_cases ? 1 : 0;
}
