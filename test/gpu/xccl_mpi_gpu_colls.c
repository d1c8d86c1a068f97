/*
 * xccl_mpi_gpu_colls: MPI_Reduce, MPI_Barrier, MPI_Allgatherv,
 * MPI_Alltoallv, MPI_Gather, MPI_Gatherv, MPI_Scatter, MPI_Scatterv and
 * their nonblocking forms on CUDA device buffers, used as an application
 * uses them.
 *
 * Loads libcuda.so.1 with dlopen (the real driver, or test/gpu/fake's
 * stand-in through LD_LIBRARY_PATH; test_cuda.h), takes device (local rank
 * mod device count) and makes its primary context current before MPI_Init.
 * Every buffer is a cuMemAlloc allocation.  Each call:
 *   1. its input made on the host (a function of case, iteration, source
 *      rank, destination rank and element: data change from call to call
 *      and every element says where it belongs) and uploaded with
 *      cuMemcpyHtoD from pageable memory, together with the guards around
 *      it: receive buffers are passed 2 elements into their allocation
 *      and have 4 more after them, v forms' blocks lie in a permuted order
 *      (reversed, rotated) with 1-3 elements of gap before each block and
 *      one after the last; heads, gaps and tails hold guard bytes (0xC3)
 *      that must stay, gaps of send buffers poison bytes (0x3C) that must
 *      never arrive anywhere, blocks still to be received 0x5A;
 *   2. the call;
 *   3. its send buffer overwritten with cuMemsetD8(0x5A) as soon as a
 *      blocking call returns, a nonblocking one as soon as MPI_Waitany
 *      says it completed;
 *   4. the whole receive allocation read back with cuMemcpyDtoH and
 *      compared bytewise with the reference computed here: blocks hold
 *      what they should, guards are untouched.
 * Buffers that MPI calls insignificant are NULL: the non-roots' receive
 * buffer of reduce, gather and gatherv (and gatherv's counts and
 * displacements there), the non-roots' send buffer of scatter and
 * scatterv (and scatterv's counts and displacements there), alltoallv's
 * send counts and displacements in place.  MPI_IN_PLACE wherever the
 * standard allows it: the root of reduce, gather(v) (its block already in
 * place) and scatter(v) (its block left in the send buffer), every rank of
 * allgatherv and alltoallv (symmetric counts).
 *
 * Cases: sizes per rank of 0, 1 element, 3 KiB + 1 element, 64 KiB + 3
 * elements and 1 MiB + 5 elements (alltoallv: a rank's whole send side);
 * every root of the rooted ones; in place and not; reduce on MPI_INT SUM,
 * MPI_DOUBLE SUM (integers / 1024: exact in any order) and MPI_FLOAT MAX,
 * the moves on MPI_INT and MPI_DOUBLE by turns; v forms with uneven
 * counts, zeros among them (alltoallv: a count matrix with zeros).  Each
 * case blocking (ITERS iterations on the same buffers) and nonblocking
 * (ITERS calls in flight together, on buffers of their own).  Barrier:
 * one rank late each time (3 ms); nobody may leave before the last one
 * entered (CLOCK_MONOTONIC, the same clock in every process of a node).
 * Then "mix": a dozen nonblocking calls of every kind in flight at once
 * (an MPI_Iallreduce among them), at each size, twice; and "step": a
 * training step, MPI_Allreduce (in place, float SUM, 1 MiB), MPI_Reduce,
 * MPI_Gather, MPI_Alltoallv, MPI_Barrier on buffers allocated once, 3
 * iterations, results checked after the whole step.
 *
 * Options: -q      quiet (only failures and the summary)
 *          -H, --host  host buffers (malloc) instead of device buffers,
 *                  nothing else changes: checks the test itself against
 *                  stock Open MPI
 *          -M      the last rank on host buffers (malloc), the others on
 *                  device buffers (no call can run through CUDA IPC)
 *          -n N    largest size per rank in bytes (larger classes skipped)
 *          -i N    iterations per case (default 2)
 *          -c LIST only these, comma-separated: collective names, "mix",
 *                  "step" (default: everything)
 * Output: FAIL <coll> phase=<p> type=<t> op=<o> n=<n> root=<r>
 *              inplace=<0|1> iter=<i> rank=<r> at=<where> got=<..>
 *              want=<..>  (at most 3 per case and rank, then a "note:")
 *         RESULT: <passed> passed, <failed> failed    (cases)
 * Exit: 0 all passed, 1 failures, 77 (and "SKIP: <reason>") when
 * libcuda.so.1 cannot be loaded or reports no device.
 * Control traffic (who failed, barrier times) is point-to-point only.
 *
 * Stock Open MPI 4.1.4 (--host, coll tuned,basic,libnbc,self) passes all
 * of it at np 2 and 3; at np 4 it fails the in-place MPI_Ialltoallv cases
 * whose count matrix has zeros: libnbc's in-place schedule
 * (a2av_sched_inplace) ends a round only after a receive of a nonzero
 * count, so where a peer's count is 0 it refills its one temporary buffer
 * while the send of that buffer is still in flight, and a peer gets the
 * block meant for another rank.  The test is right there; xccl must not
 * hand such a call to libnbc as it is.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_cuda.h"

#define CU_CHECK(call) TEST_CU_CHECK(my_rank, call)

#define SCRIBBLE 0x5A   /* send buffers after the call, blocks before it */
#define GUARD 0xC3      /* heads, gaps and tails of receive buffers */
#define POISON 0x3C     /* gaps of send buffers: must never arrive */
#define HEAD 2          /* guard elements before a receive buffer */
#define TAIL 4          /* and after it */
#define ALL (-1)        /* destination of data every rank gets */
#define LATE_US 3000    /* the late rank of a barrier */
#define MAX_FAIL_LINES 3
#define CTL_TAG_TIME 31338

static int my_rank, nprocs, quiet, host_mode, mixed, iters = 2;
static unsigned selected = ~0u;   /* bit i: coll_names[i]; MIX_BIT, STEP_BIT */
static size_t max_bytes = 2u << 20;
static CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);

/* ------------------------------------------------------------ buffers */
static void *xmalloc(size_t n)
{
    return test_xmalloc(n, my_rank);
}

static unsigned char *buf_alloc(size_t bytes)
{
    if (host_mode) {
        return xmalloc(bytes);
    }
    CUdeviceptr d;
    CU_CHECK(cu.MemAlloc(&d, bytes ? bytes : 1));
    return (unsigned char *) (uintptr_t) d;
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

/* The user's upload: cuMemcpyHtoD from pageable memory, after which the
 * host copy is the user's again (scribbled). */
static void buf_put(void *dst, unsigned char *host, size_t n)
{
    if (host_mode) {
        memcpy(dst, host, n);
    } else {
        CU_CHECK(cu.MemcpyHtoD((CUdeviceptr) (uintptr_t) dst, host, n));
    }
    memset(host, SCRIBBLE, n);
}

static void buf_get(unsigned char *host, const void *src, size_t n)
{
    if (host_mode) {
        memcpy(host, src, n);
    } else {
        CU_CHECK(cu.MemcpyDtoH(host, (CUdeviceptr) (uintptr_t) src, n));
    }
}

static void buf_scribble(void *p, size_t n)
{
    if (host_mode) {
        memset(p, SCRIBBLE, n);
    } else {
        CU_CHECK(MemsetD8((CUdeviceptr) (uintptr_t) p, SCRIBBLE, n));
    }
}

/* One host scratch image, grown as needed. */
static unsigned char *img;
static size_t img_bytes;
static unsigned char *image(size_t n)
{
    if (n > img_bytes) {
        free(img);
        img = xmalloc(n);
        img_bytes = n;
    }
    return img;
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

enum {
    C_REDUCE, C_BARRIER, C_ALLGATHERV, C_ALLTOALLV, C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV,
    C_ALLREDUCE
};
static const char *const coll_names[] = { "reduce", "barrier", "allgatherv", "alltoallv", "gather",
                                          "gatherv", "scatter", "scatterv", "allreduce" };
#define NCOLL_NAMES (sizeof(coll_names) / sizeof(coll_names[0]))
#define MIX_BIT (1u << NCOLL_NAMES)
#define STEP_BIT (1u << (NCOLL_NAMES + 1))

/* -c: the bits of a comma-separated list of names; 0 on an unknown one. */
static unsigned parse_selection(char *list)
{
    unsigned bits = 0;
    for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        unsigned b = 0;
        for (size_t i = 0; i < NCOLL_NAMES; i++) {
            b |= strcmp(w, coll_names[i]) ? 0 : 1u << i;
        }
        b |= strcmp(w, "mix") ? 0 : MIX_BIT;
        b |= strcmp(w, "step") ? 0 : STEP_BIT;
        if (0 == b) {
            return 0;
        }
        bits |= b;
    }
    return bits;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Element k of what src sends dst (ALL: every rank) in iteration it of
 * case salt, of type t for op, stored at p.  Sums are exact in any order:
 * int within +-2^23, float small integers, double integers / 1024. */
static void gen(int t, int op, uint64_t salt, int it, int src, int dst, size_t k, void *p)
{
    uint64_t h = mix(mix(salt * 131 + (uint64_t) it) ^
                     mix(((uint64_t) (src + 1) << 48) ^ ((uint64_t) (dst + 1) << 32) ^ k));
    if (T_INT == t) {
        int32_t v = O_SUM == op ? (int32_t) (h % (1u << 24)) - (1 << 23) : (int32_t) h;
        memcpy(p, &v, 4);
    } else if (T_FLOAT == t) {
        float v = O_SUM == op ? (float) ((int) (h % 4097) - 2048)
                              : (float) (int32_t) (h >> 32) / 256.0f;
        memcpy(p, &v, 4);
    } else {
        double v = (double) ((int64_t) (h % (1ull << 40)) - (1ll << 39)) / 1024.0;
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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* ------------------------------------------------------------ cases */
/* A case: one collective with its arguments; its layout, this rank's
 * view of it, follows from them alike on every rank. */
typedef struct {
    int coll, t, op, inplace, root;
    size_t n;                 /* elements per rank: the size class */
    const char *phase;        /* blocking, nonblocking, mix, step */
    uint64_t salt;
    /* this rank's view (case_layout) */
    int ssig, rsig;           /* a send / receive buffer of its own */
    int in_place_here;        /* its receive buffer holds its input */
    int nsblk, nrblk;         /* blocks of each side */
    int *scnt, *sdsp, *rcnt, *rdsp;   /* nprocs each, elements */
    size_t soff, sspan, rspan;        /* elements */
    int late;                 /* barrier: the rank that enters late */
    int lines, bad;           /* FAIL lines printed, wrong calls (this rank) */
} case_t;

static int passed_cases, failed_cases;
static uint64_t case_salt;

static int ctl_all(int ok)
{
    return test_ctl_all(ok, my_rank, nprocs);
}

/* The latest of every rank's t (point-to-point, through rank 0). */
static double ctl_max(double t)
{
    if (0 == my_rank) {
        for (int r = 1; r < nprocs; r++) {
            double o;
            MPI_Recv(&o, 1, MPI_DOUBLE, r, CTL_TAG_TIME, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            t = o > t ? o : t;
        }
        for (int r = 1; r < nprocs; r++) {
            MPI_Send(&t, 1, MPI_DOUBLE, r, CTL_TAG_TIME, MPI_COMM_WORLD);
        }
    } else {
        MPI_Send(&t, 1, MPI_DOUBLE, 0, CTL_TAG_TIME, MPI_COMM_WORLD);
        MPI_Recv(&t, 1, MPI_DOUBLE, 0, CTL_TAG_TIME, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return t;
}

static void fail_line(case_t *c, int it, const char *at, const char *got, const char *want)
{
    if (c->lines++ >= MAX_FAIL_LINES) {
        return;
    }
    printf("FAIL %s phase=%s type=%s op=%s n=%zu root=%d inplace=%d iter=%d rank=%d at=%s "
           "got=%s want=%s\n",
           coll_names[c->coll], c->phase, type_names[c->t], op_names[c->op], c->n, c->root,
           c->inplace, it, my_rank, at, got, want);
    fflush(stdout);
}

/* Uneven counts of the v forms around n, zeros among them. */
static int vcount(const case_t *c, int r)
{
    if (0 == c->n || 0 == (r + c->salt) % 3) {
        return 0;
    }
    return (int) (c->n + ((size_t) r + c->salt / 3) % 3 * (c->n / 4));
}

/* Alltoallv: elements i sends j, zeros among them; symmetric in place. */
static int pair_count(const case_t *c, int i, int j)
{
    size_t b = c->n / (size_t) nprocs;
    if (0 == c->n) {
        return 0;
    }
    b = b ? b : 1;
    if (0 == (i + j + c->salt) % 3) {
        return 0;
    }
    size_t n = b + ((size_t) (i * j + i + j) + c->salt) % 3 * (b / 4);
    if (!c->inplace) {
        n += ((size_t) (2 * i + j) + c->salt) % 3 * (b / 8);
    }
    return (int) n;
}

/* Places nblk blocks of cnt[] elements into dsp[]: v forms in a permuted
 * order (reversed, rotated by rot) with 1-3 elements of gap before each
 * and one after the last, others contiguous in order.  Returns the span. */
static size_t place(int nblk, const int *cnt, int *dsp, int v, unsigned rot, uint64_t salt)
{
    const unsigned nb = (unsigned) nblk;
    size_t off = 0;
    v = v && nblk > 1;
    for (int k = 0; k < nblk; k++) {
        int j = v ? (int) ((rot % nb + nb - (unsigned) k) % nb) : k;
        if (v) {
            off += 1 + ((size_t) k + salt) % 3;
        }
        dsp[j] = (int) off;
        off += (size_t) cnt[j];
    }
    return off + (v ? 1 : 0);
}

static void case_layout(case_t *c)
{
    const int P = nprocs, me = my_rank, isroot = me == c->root;
    const int isv = C_GATHERV == c->coll || C_SCATTERV == c->coll || C_ALLGATHERV == c->coll ||
                    C_ALLTOALLV == c->coll;
    c->scnt = xmalloc((size_t) P * sizeof(int));
    c->sdsp = xmalloc((size_t) P * sizeof(int));
    c->rcnt = xmalloc((size_t) P * sizeof(int));
    c->rdsp = xmalloc((size_t) P * sizeof(int));
    c->ssig = c->rsig = c->in_place_here = 0;
    c->nsblk = c->nrblk = 1;
    c->scnt[0] = c->rcnt[0] = 0;
    switch (c->coll) {
    case C_REDUCE:
    case C_ALLREDUCE:
        c->rsig = C_ALLREDUCE == c->coll || isroot;
        c->in_place_here = c->inplace && c->rsig;
        c->ssig = !c->in_place_here;
        c->scnt[0] = c->rcnt[0] = (int) c->n;
        break;
    case C_GATHER:
    case C_GATHERV:
    case C_ALLGATHERV:
        c->rsig = C_ALLGATHERV == c->coll || isroot;
        c->in_place_here = c->inplace && c->rsig;
        c->ssig = !c->in_place_here;
        c->nrblk = P;
        for (int r = 0; r < P; r++) {
            c->rcnt[r] = C_GATHER == c->coll ? (int) c->n : vcount(c, r);
        }
        c->scnt[0] = c->rcnt[me];
        break;
    case C_SCATTER:
    case C_SCATTERV:
        c->ssig = isroot;
        c->rsig = !(c->inplace && isroot);
        c->nsblk = P;
        for (int r = 0; r < P; r++) {
            c->scnt[r] = C_SCATTER == c->coll ? (int) c->n : vcount(c, r);
        }
        c->rcnt[0] = c->scnt[me];
        break;
    case C_ALLTOALLV:
        c->rsig = 1;
        c->in_place_here = c->inplace;
        c->ssig = !c->inplace;
        c->nsblk = c->nrblk = P;
        for (int r = 0; r < P; r++) {
            c->scnt[r] = pair_count(c, me, r);
            c->rcnt[r] = pair_count(c, r, me);
        }
        break;
    default:   /* barrier */
        c->nsblk = c->nrblk = 0;
        c->late = (int) (c->salt % (uint64_t) P);
        break;
    }
    c->soff = c->salt & 1;
    c->sspan = place(c->nsblk, c->scnt, c->sdsp, isv, (unsigned) c->salt, c->salt);
    c->rspan = place(c->nrblk, c->rcnt, c->rdsp, isv, (unsigned) (c->salt / 7 + 1), c->salt + 1);
}

static void case_free(case_t *c)
{
    free(c->scnt);
    free(c->sdsp);
    free(c->rcnt);
    free(c->rdsp);
}

/* What element k of send block j holds. */
static void send_elem(const case_t *c, int it, int j, size_t k, void *p)
{
    int dst = ALL;
    if (C_SCATTER == c->coll || C_SCATTERV == c->coll || C_ALLTOALLV == c->coll) {
        dst = j;
    } else if (C_GATHER == c->coll || C_GATHERV == c->coll) {
        dst = c->root;
    }
    gen(c->t, c->op, c->salt, it, my_rank, dst, k, p);
}

/* What element k of receive block j must hold after the call. */
static void want_elem(const case_t *c, int it, int j, size_t k, void *p)
{
    unsigned char x[8];
    switch (c->coll) {
    case C_REDUCE:
    case C_ALLREDUCE:
        gen(c->t, c->op, c->salt, it, 0, ALL, k, p);
        for (int r = 1; r < nprocs; r++) {
            gen(c->t, c->op, c->salt, it, r, ALL, k, x);
            fold(c->t, c->op, p, x);
        }
        return;
    case C_GATHER:
    case C_GATHERV: gen(c->t, c->op, c->salt, it, j, c->root, k, p); return;
    case C_ALLGATHERV: gen(c->t, c->op, c->salt, it, j, ALL, k, p); return;
    case C_SCATTER:
    case C_SCATTERV: gen(c->t, c->op, c->salt, it, c->root, my_rank, k, p); return;
    default: gen(c->t, c->op, c->salt, it, j, my_rank, k, p); return;   /* alltoallv */
    }
}

/* In place: whether receive block j holds this rank's input before the
 * call (reductions: the vector; gather(v), allgatherv: its own block;
 * alltoallv: every block, what it sends j). */
static int pre_block(const case_t *c, int j)
{
    if (!c->in_place_here) {
        return 0;
    }
    if (C_GATHER == c->coll || C_GATHERV == c->coll || C_ALLGATHERV == c->coll) {
        return j == my_rank;
    }
    return 1;
}

/* ------------------------------------------------------------ calls */
/* One call on buffers of its own. */
typedef struct {
    case_t *c;
    int it;
    unsigned char *sa, *ra;   /* allocations (NULL: none) */
    size_t sabytes, rabytes;
    MPI_Request req;
    double t_in, t_out;       /* barrier: entered, left */
    int rc;
} inst_t;

static void inst_alloc(inst_t *in, case_t *c)
{
    const size_t es = type_size[c->t];
    memset(in, 0, sizeof(*in));
    in->c = c;
    in->req = MPI_REQUEST_NULL;
    if (c->ssig) {
        in->sabytes = (c->soff + c->sspan) * es;
        in->sa = buf_alloc(in->sabytes);
    }
    if (c->rsig) {
        in->rabytes = (HEAD + c->rspan + TAIL) * es;
        in->ra = buf_alloc(in->rabytes);
    }
}

static void inst_free(inst_t *in)
{
    buf_free(in->sa);
    buf_free(in->ra);
    in->sa = in->ra = NULL;
}

/* Iteration it's input and guards, uploaded. */
static void inst_load(inst_t *in, int it)
{
    const case_t *c = in->c;
    const size_t es = type_size[c->t];
    in->it = it;
    in->rc = MPI_SUCCESS;
    if (in->sa) {
        unsigned char *h = image(in->sabytes);
        memset(h, POISON, in->sabytes);
        for (int j = 0; j < c->nsblk; j++) {
            unsigned char *b = h + (c->soff + (size_t) c->sdsp[j]) * es;
            for (size_t k = 0; k < (size_t) c->scnt[j]; k++) {
                send_elem(c, it, j, k, b + k * es);
            }
        }
        buf_put(in->sa, h, in->sabytes);
    }
    if (in->ra) {
        unsigned char *h = image(in->rabytes);
        memset(h, GUARD, in->rabytes);
        for (int j = 0; j < c->nrblk; j++) {
            unsigned char *b = h + (HEAD + (size_t) c->rdsp[j]) * es;
            if (!pre_block(c, j)) {
                memset(b, SCRIBBLE, (size_t) c->rcnt[j] * es);
                continue;
            }
            for (size_t k = 0; k < (size_t) c->rcnt[j]; k++) {
                send_elem(c, it, j, k, b + k * es);
            }
        }
        buf_put(in->ra, h, in->rabytes);
    }
}

/* The call: blocking (req NULL) or started into *req. */
static int inst_call(inst_t *in, MPI_Request *req)
{
    const case_t *c = in->c;
    const size_t es = type_size[c->t];
    const int isroot = my_rank == c->root, n = (int) c->n;
    MPI_Datatype dt = type_mpi(c->t);
    MPI_Op op = O_MAX == c->op ? MPI_MAX : MPI_SUM;
    MPI_Comm w = MPI_COMM_WORLD;
    void *sb = in->sa ? in->sa + c->soff * es : NULL;
    void *rb = in->ra ? in->ra + HEAD * es : NULL;
    const void *sp = c->in_place_here ? MPI_IN_PLACE : sb;
    int *rc_ = isroot ? c->rcnt : NULL, *rd_ = isroot ? c->rdsp : NULL;
    int *sc_ = isroot ? c->scnt : NULL, *sd_ = isroot ? c->sdsp : NULL;
    if (C_BARRIER == c->coll && my_rank == c->late) {
        usleep(LATE_US);
    }
    in->t_in = now();
    switch (c->coll) {
    case C_REDUCE:
        return req ? MPI_Ireduce(sp, rb, n, dt, op, c->root, w, req)
                   : MPI_Reduce(sp, rb, n, dt, op, c->root, w);
    case C_ALLREDUCE:
        return req ? MPI_Iallreduce(sp, rb, n, dt, op, w, req)
                   : MPI_Allreduce(sp, rb, n, dt, op, w);
    case C_BARRIER: return req ? MPI_Ibarrier(w, req) : MPI_Barrier(w);
    case C_ALLGATHERV:
        return req ? MPI_Iallgatherv(sp, c->scnt[0], dt, rb, c->rcnt, c->rdsp, dt, w, req)
                   : MPI_Allgatherv(sp, c->scnt[0], dt, rb, c->rcnt, c->rdsp, dt, w);
    case C_ALLTOALLV:
        if (c->inplace) {   /* send counts and displacements ignored */
            return req ? MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, dt, rb, c->rcnt, c->rdsp, dt, w,
                                        req)
                       : MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, dt, rb, c->rcnt, c->rdsp, dt, w);
        }
        return req ? MPI_Ialltoallv(sb, c->scnt, c->sdsp, dt, rb, c->rcnt, c->rdsp, dt, w, req)
                   : MPI_Alltoallv(sb, c->scnt, c->sdsp, dt, rb, c->rcnt, c->rdsp, dt, w);
    case C_GATHER:
        return req ? MPI_Igather(sp, n, dt, rb, n, dt, c->root, w, req)
                   : MPI_Gather(sp, n, dt, rb, n, dt, c->root, w);
    case C_GATHERV:
        return req ? MPI_Igatherv(sp, c->scnt[0], dt, rb, rc_, rd_, dt, c->root, w, req)
                   : MPI_Gatherv(sp, c->scnt[0], dt, rb, rc_, rd_, dt, c->root, w);
    case C_SCATTER:
        rb = c->rsig ? rb : MPI_IN_PLACE;
        return req ? MPI_Iscatter(sb, n, dt, rb, n, dt, c->root, w, req)
                   : MPI_Scatter(sb, n, dt, rb, n, dt, c->root, w);
    default:   /* scatterv */
        rb = c->rsig ? rb : MPI_IN_PLACE;
        return req ? MPI_Iscatterv(sb, sc_, sd_, dt, rb, c->rcnt[0], dt, c->root, w, req)
                   : MPI_Scatterv(sb, sc_, sd_, dt, rb, c->rcnt[0], dt, c->root, w);
    }
}

/* The call returned or completed: its send buffer is the user's again. */
static void inst_release(inst_t *in)
{
    in->t_out = now();
    if (in->sa) {
        buf_scribble(in->sa, in->sabytes);
    }
}

static void bad_rc(case_t *c, int it, int rc)
{
    char g[32];
    snprintf(g, sizeof(g), "rc%d", rc);
    fail_line(c, it, "return", g, "MPI_SUCCESS");
    c->bad++;
}

/* Where element e (from the allocation's start) of a receive buffer lies. */
static void where(const case_t *c, size_t e, char *s, size_t n)
{
    if (e < HEAD) {
        snprintf(s, n, "head[%zu]", e);
        return;
    }
    e -= HEAD;
    for (int j = 0; j < c->nrblk; j++) {
        if (e >= (size_t) c->rdsp[j] && e < (size_t) c->rdsp[j] + (size_t) c->rcnt[j]) {
            snprintf(s, n, "block%d[%zu]", j, e - (size_t) c->rdsp[j]);
            return;
        }
    }
    snprintf(s, n, e >= c->rspan ? "tail[%zu]" : "gap[%zu]", e >= c->rspan ? e - c->rspan : e);
}

/* Reads the whole receive allocation back and compares it bytewise with
 * the reference: the blocks, and the guards around and between them. */
static void inst_check(inst_t *in)
{
    case_t *c = in->c;
    const size_t es = type_size[c->t];
    if (MPI_SUCCESS != in->rc) {
        bad_rc(c, in->it, in->rc);
    }
    if (C_BARRIER == c->coll) {
        double last_in = ctl_max(in->t_in);
        if (in->t_out < last_in) {
            char g[64], w[64];
            snprintf(g, sizeof(g), "left_%.6fs_before", last_in - in->t_out);
            snprintf(w, sizeof(w), "rank%d_entered", c->late);
            fail_line(c, in->it, "barrier", g, w);
            c->bad++;
        }
        return;
    }
    if (NULL == in->ra) {
        return;
    }
    unsigned char *want = xmalloc(in->rabytes), *got = xmalloc(in->rabytes);
    memset(want, GUARD, in->rabytes);
    for (int j = 0; j < c->nrblk; j++) {
        unsigned char *b = want + (HEAD + (size_t) c->rdsp[j]) * es;
        for (size_t k = 0; k < (size_t) c->rcnt[j]; k++) {
            want_elem(c, in->it, j, k, b + k * es);
        }
    }
    memset(got, 0, in->rabytes);
    buf_get(got, in->ra, in->rabytes);
    if (memcmp(got, want, in->rabytes)) {
        size_t wrong = 0, ne = in->rabytes / es;
        for (size_t e = 0; e < ne; e++) {
            if (memcmp(got + e * es, want + e * es, es)) {
                char at[64], gs[48], ws[48];
                where(c, e, at, sizeof(at));
                fmt(gs, sizeof(gs), c->t, got + e * es);
                fmt(ws, sizeof(ws), c->t, want + e * es);
                fail_line(c, in->it, at, gs, ws);
                wrong++;
            }
        }
        c->bad++;
        printf("note: %s phase=%s n=%zu root=%d inplace=%d iter=%d rank=%d: %zu of %zu "
               "elements wrong\n",
               coll_names[c->coll], c->phase, c->n, c->root, c->inplace, in->it, my_rank, wrong,
               ne);
        fflush(stdout);
    }
    free(want);
    free(got);
}

/* Waits for n started calls in the order they complete, each one's send
 * buffer overwritten as soon as MPI_Waitany gives it back. */
static void complete_all(inst_t *v, int n)
{
    MPI_Request *reqs = xmalloc((size_t) n * sizeof(MPI_Request));
    for (int i = 0; i < n; i++) {
        reqs[i] = v[i].req;
    }
    for (int left = n; left > 0; left--) {
        int idx = MPI_UNDEFINED;
        int rc = MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE);
        if (MPI_SUCCESS != rc || MPI_UNDEFINED == idx) {
            for (int i = 0; i < n; i++) {
                v[i].rc = MPI_SUCCESS != rc ? rc : MPI_ERR_REQUEST;
            }
            break;
        }
        v[idx].req = MPI_REQUEST_NULL;
        inst_release(&v[idx]);
    }
    free(reqs);
}

/* A case's verdict, agreed by every rank. */
static void verdict(case_t *c)
{
    int ok = ctl_all(0 == c->bad);
    if (ok) {
        passed_cases++;
    } else {
        failed_cases++;
    }
    if (0 == my_rank && (!quiet || !ok)) {
        printf("%s %s phase=%s type=%s op=%s n=%zu root=%d inplace=%d\n", ok ? "ok  " : "BAD ",
               coll_names[c->coll], c->phase, type_names[c->t], op_names[c->op], c->n, c->root,
               c->inplace);
        fflush(stdout);
    }
}

static void case_start(case_t *c, const char *phase)
{
    c->phase = phase;
    c->salt = ++case_salt;
    c->lines = c->bad = 0;
    case_layout(c);
}

/* Blocking: ITERS calls on the same buffers, each checked at once. */
static void run_blocking(case_t c)
{
    inst_t in;
    case_start(&c, "blocking");
    inst_alloc(&in, &c);
    for (int it = 0; it < iters; it++) {
        inst_load(&in, it);
        in.rc = inst_call(&in, NULL);
        inst_release(&in);
        inst_check(&in);
    }
    inst_free(&in);
    verdict(&c);
    case_free(&c);
}

/* Nonblocking: ITERS calls in flight together, on buffers of their own. */
static void run_nonblocking(case_t c)
{
    inst_t *v = xmalloc((size_t) iters * sizeof(inst_t));
    case_start(&c, "nonblocking");
    for (int it = 0; it < iters; it++) {
        inst_alloc(&v[it], &c);
        inst_load(&v[it], it);
    }
    for (int it = 0; it < iters; it++) {
        v[it].rc = inst_call(&v[it], &v[it].req);
        if (MPI_SUCCESS != v[it].rc) {
            bad_rc(&c, it, v[it].rc);
        }
    }
    complete_all(v, iters);
    for (int it = 0; it < iters; it++) {
        inst_check(&v[it]);
        inst_free(&v[it]);
    }
    free(v);
    verdict(&c);
    case_free(&c);
}

static void run_both(case_t c)
{
    if (!(selected & 1u << c.coll)) {
        return;
    }
    run_blocking(c);
    run_nonblocking(c);
}

/* ------------------------------------------------------------ the run */
#define NSIZES 5
/* Bytes per rank of size class i. */
static size_t size_bytes(int i, size_t es)
{
    switch (i) {
    case 0: return 0;
    case 1: return es;
    case 2: return (3u << 10) + es;
    case 3: return (64u << 10) + 3 * es;
    default: return (1u << 20) + 5 * es;
    }
}

/* Every kind of call in flight at once, nonblocking, size class si,
 * roots spread; round r. */
static void run_mix(int si, int round)
{
    const int P = nprocs, s = si + round;
    case_t cs[] = {
        { .coll = C_REDUCE, .t = T_INT, .op = O_SUM, .root = s % P },
        { .coll = C_GATHERV, .t = T_DOUBLE, .op = O_NONE, .inplace = 1, .root = (s + 1) % P },
        { .coll = C_ALLTOALLV, .t = T_INT, .op = O_NONE, .root = -1 },
        { .coll = C_SCATTER, .t = T_DOUBLE, .op = O_NONE, .root = (s + 2) % P },
        { .coll = C_BARRIER, .t = T_INT, .op = O_NONE, .root = -1 },
        { .coll = C_ALLGATHERV, .t = T_INT, .op = O_NONE, .inplace = 1, .root = -1 },
        { .coll = C_GATHER, .t = T_INT, .op = O_NONE, .root = (s + 3) % P },
        { .coll = C_SCATTERV, .t = T_INT, .op = O_NONE, .inplace = 1, .root = s % P },
        { .coll = C_ALLREDUCE, .t = T_FLOAT, .op = O_SUM, .root = -1 },
        { .coll = C_REDUCE, .t = T_DOUBLE, .op = O_SUM, .inplace = 1, .root = (s + 1) % P },
        { .coll = C_ALLTOALLV, .t = T_DOUBLE, .op = O_NONE, .inplace = 1, .root = -1 },
        { .coll = C_REDUCE, .t = T_FLOAT, .op = O_MAX, .root = (s + 2) % P },
        { .coll = C_GATHER, .t = T_DOUBLE, .op = O_NONE, .inplace = 1, .root = s % P },
        { .coll = C_SCATTERV, .t = T_DOUBLE, .op = O_NONE, .root = (s + 3) % P },
    };
    const int n = (int) (sizeof(cs) / sizeof(cs[0]));
    inst_t v[sizeof(cs) / sizeof(cs[0])];
    for (int i = 0; i < n; i++) {
        cs[i].n = size_bytes(si, type_size[cs[i].t]) / type_size[cs[i].t];
        case_start(&cs[i], "mix");
        inst_alloc(&v[i], &cs[i]);
        inst_load(&v[i], round);
    }
    for (int i = 0; i < n; i++) {
        v[i].rc = inst_call(&v[i], &v[i].req);
    }
    complete_all(v, n);
    for (int i = 0; i < n; i++) {
        inst_check(&v[i]);
        inst_free(&v[i]);
        verdict(&cs[i]);
        case_free(&cs[i]);
    }
}

/* A training step on buffers allocated once: gradients allreduced in
 * place, a loss reduced to the last rank, metrics gathered to rank 0,
 * tokens exchanged with alltoallv, a barrier; each input made just before
 * its call, each result checked after the whole step. */
static void run_step(void)
{
    case_t cs[] = {
        { .coll = C_ALLREDUCE, .t = T_FLOAT, .op = O_SUM, .inplace = 1, .root = -1,
          .n = (1u << 18) + 3 },
        { .coll = C_REDUCE, .t = T_DOUBLE, .op = O_SUM, .root = nprocs - 1, .n = 3 },
        { .coll = C_GATHER, .t = T_INT, .op = O_NONE, .root = 0, .n = 1025 },
        { .coll = C_ALLTOALLV, .t = T_INT, .op = O_NONE, .root = -1, .n = (16u << 10) + 1 },
        { .coll = C_BARRIER, .t = T_INT, .op = O_NONE, .root = -1 },
    };
    const int n = (int) (sizeof(cs) / sizeof(cs[0]));
    inst_t v[sizeof(cs) / sizeof(cs[0])];
    for (int i = 0; i < n; i++) {
        if (cs[i].n * type_size[cs[i].t] > max_bytes) {
            cs[i].n = max_bytes / type_size[cs[i].t];
        }
        case_start(&cs[i], "step");
        inst_alloc(&v[i], &cs[i]);
    }
    for (int it = 0; it < 3; it++) {
        for (int i = 0; i < n; i++) {
            inst_load(&v[i], it);
            v[i].rc = inst_call(&v[i], NULL);
            inst_release(&v[i]);
        }
        for (int i = 0; i < n; i++) {
            inst_check(&v[i]);
        }
    }
    for (int i = 0; i < n; i++) {
        inst_free(&v[i]);
        verdict(&cs[i]);
        case_free(&cs[i]);
    }
}

static void run_all(void)
{
    static const int red[][2] = { { T_INT, O_SUM }, { T_DOUBLE, O_SUM }, { T_FLOAT, O_MAX } };
    static const int rooted[] = { C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV };
    const int P = nprocs;
    for (int si = 0; si < NSIZES; si++) {
        if (size_bytes(si, 8) > max_bytes) {
            continue;
        }
        for (size_t k = 0; k < sizeof(red) / sizeof(red[0]); k++) {
            const int t = red[k][0];
            for (int root = 0; root < P; root++) {
                for (int ip = 0; ip < 2; ip++) {
                    run_both((case_t) { .coll = C_REDUCE, .t = t, .op = red[k][1], .inplace = ip,
                                        .root = root,
                                        .n = size_bytes(si, type_size[t]) / type_size[t] });
                }
            }
        }
        for (size_t k = 0; k < sizeof(rooted) / sizeof(rooted[0]); k++) {
            const int t = (si + (int) k) % 2 ? T_DOUBLE : T_INT;
            for (int root = 0; root < P; root++) {
                for (int ip = 0; ip < 2; ip++) {
                    run_both((case_t) { .coll = rooted[k], .t = t, .op = O_NONE, .inplace = ip,
                                        .root = root,
                                        .n = size_bytes(si, type_size[t]) / type_size[t] });
                }
            }
        }
        for (int coll = C_ALLGATHERV; coll <= C_ALLTOALLV; coll++) {
            const int t = (si + coll) % 2 ? T_DOUBLE : T_INT;
            for (int ip = 0; ip < 2; ip++) {
                run_both((case_t) { .coll = coll, .t = t, .op = O_NONE, .inplace = ip, .root = -1,
                                    .n = size_bytes(si, type_size[t]) / type_size[t] });
            }
        }
        if (si < 2) {
            run_both((case_t) { .coll = C_BARRIER, .t = T_INT, .op = O_NONE, .root = -1 });
        }
        for (int round = 0; round < 2 && (selected & MIX_BIT); round++) {
            run_mix(si, round);
        }
    }
    if (selected & STEP_BIT) {
        run_step();
    }
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-q] [-H|--host] [-M] [-n max_bytes_per_rank] [-i iterations] [-c list]\n",
            prog);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = { { "host", no_argument, NULL, 'H' },
                                              { NULL, 0, NULL, 0 } };
    int opt;
    while ((opt = getopt_long(argc, argv, "qHMn:i:c:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'q': quiet = 1; break;
        case 'H': host_mode = 1; break;
        case 'M': mixed = 1; break;
        case 'n': max_bytes = strtoull(optarg, NULL, 0); break;
        case 'i': iters = atoi(optarg); break;
        case 'c': selected = parse_selection(optarg); break;
        default: usage(argv[0]); return 2;
        }
    }
    if (iters < 1 || 0 == selected || optind != argc) {
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
    if (!ctl_all(NULL == skip)) {
        if (0 == my_rank) {
            printf("SKIP: %s\n", skip ? skip : "another rank has no device");
        }
        MPI_Finalize();
        test_cuda_release();
        return 77;
    }
    if (mixed && my_rank == nprocs - 1) {
        host_mode = 1;               /* its driver loaded and its context current all the same */
    }
    if (0 == my_rank && !quiet) {
        printf("xccl_mpi_gpu_colls: %d ranks, %s buffers, max %zu bytes per rank, %d iterations\n",
               nprocs, mixed ? "device and (last rank) host" : host_mode ? "host (--host)" : "device",
               max_bytes, iters);
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
    free(img);
    MPI_Finalize();
    test_cuda_release();
    return failed_cases ? 1 : 0;
}
