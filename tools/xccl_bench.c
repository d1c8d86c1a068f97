/*
 * xccl_bench: xccl against the stock Open MPI collectives, in the same run.
 *
 * In the spirit of nccl-tests.  For every collective and message size the
 * benchmark runs ROUNDS rounds; each round times xccl and stock Open MPI
 * back to back, alternating which goes first (even rounds xccl first, odd
 * rounds stock first), so slow drifts of a shared, noisy machine hit both
 * alike.  A round's time is the per-call average of ITERS calls, maxed over
 * ranks; the table shows the median over rounds.
 *
 * Switching: the xccl component registers one MPI_T control variable per
 * collective, coll_xccl_<coll>_enable (1: xccl handles the call, 0: the call
 * goes to the module Open MPI would otherwise have used, "stock").  All ranks
 * write it at the same point, read it back, and meet in a barrier.  Without
 * the variables (xccl not loaded) only the stock column is measured.
 *
 * Correctness: after the timed loop of the first round each mode runs the
 * collective once more on rank- and index-dependent small integers (exact in
 * float) and every rank compares every element with a value it computes
 * itself.  A failure in the xccl column makes the exit status 1; a failure
 * in the stock column is reported but is Open MPI's, not xccl's.
 *
 * The control plane (timings, verdicts) uses MPI_Reduce and MPI_Barrier,
 * which xccl does not intercept, so a broken xccl cannot distort the report.
 *
 * -k prints a table of the local reduction kernels instead: xccl's
 * xccl_reduce_kernel() against Open MPI's op framework (MPI_Reduce_local).
 *
 * -g: CUDA device buffers.  libcuda.so.1 is loaded with dlopen (never
 * linked; the real driver, or test/gpu/fake's stand-in through
 * LD_LIBRARY_PATH), each rank takes device (OMPI_COMM_WORLD_LOCAL_RANK mod
 * device count), retains its primary context and makes it current BEFORE
 * MPI_Init (xccl turns its CUDA IPC path on only when every rank has a
 * context when the communicator is created), and the send/receive buffers
 * are cuMemAlloc memory.  The two columns become
 *   xccl:   the MPI call directly on the device buffers, xccl enabled;
 *   staged: what a user of a non-CUDA-aware MPI does: cuMemcpyDtoH of the
 *           input into a host buffer (pageable malloc; -p: pinned,
 *           cuMemHostAlloc), the MPI call on the host buffers with xccl
 *           DISABLED (the stock stack), cuMemcpyHtoD of the result back,
 *           all three inside the timed call (bcast: the root copies down,
 *           the other ranks copy up).
 * Rounds, medians and the table are as in host mode; ratio = staged time /
 * xccl time.  The checks copy the device results back and compare them
 * with the host references; allreduce also runs on inputs whose float sum
 * depends on the order of the additions and must give bitwise the same
 * result on every rank (64-bit hash of the result bytes, min and max over
 * ranks).  Without -g nothing changes.
 *
 * Build:  mpicc -std=gnu11 -O2 -I. tools/xccl_bench.c base/reduce_kernels.c
 * Exit:   0 ok, 1 an xccl result was wrong, 2 bad command line, 3 MPI_T (or,
 *         with -g, CUDA driver) trouble, 4 xccl is loaded but not active on
 *         MPI_COMM_WORLD (its set-up failed: the xccl column then measured the
 *         fallback; with -g it is not measured; see coll_xccl_verbose 2),
 *         77 with -g: no libcuda.so.1 or no device ("SKIP: <reason>").
 */
#include <mpi.h>

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/xccl_base.h"
#include "test/gpu/test_cuda.h"

/* ------------------------------------------------------------------------ */
/* Types and constants                                                      */
/* ------------------------------------------------------------------------ */

enum coll_id {
    C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_REDUCE_SCATTER_BLOCK,
    C_ALLTOALL, C_BCAST, NCOLL
};

typedef struct {
    const char *name;
    const char *cvar;          /* MPI_T control variable routing it to xccl */
    bool blocked;              /* count must be a multiple of p */
    const char *size_means;    /* what "size" counts, for the table header */
} coll_info_t;

static const coll_info_t colls[NCOLL] = {
    [C_ALLREDUCE] = { "allreduce", "coll_xccl_allreduce_enable", false,
                      "buffer per rank" },
    [C_ALLGATHER] = { "allgather", "coll_xccl_allgather_enable", true,
                      "total received per rank (sent = size/p)" },
    [C_REDUCE_SCATTER] = { "reduce_scatter", "coll_xccl_reduce_scatter_enable", true,
                           "total sent per rank (received = size/p)" },
    [C_REDUCE_SCATTER_BLOCK] = { "reduce_scatter_block",
                                 "coll_xccl_reduce_scatter_block_enable", true,
                                 "total sent per rank (received = size/p)" },
    [C_ALLTOALL] = { "alltoall", "coll_xccl_alltoall_enable", true,
                     "total sent per rank" },
    [C_BCAST] = { "bcast", "coll_xccl_bcast_enable", false, "buffer per rank" },
};

enum mode { M_XCCL, M_STOCK, NMODE };
/* -g renames the second column "staged" (device -> host, stock, host -> device). */
static const char *mode_names[NMODE] = { "xccl", "stock" };

typedef struct {
    int colls[NCOLL];          /* collectives to run, in command-line order */
    int ncolls;
    size_t minbytes, maxbytes;
    unsigned factor;
    int rounds;
    int iters;                 /* 0: automatic */
    int warmup;
    bool kernels;
    bool quiet;
    bool gpu;                  /* -g: device buffers, xccl vs staged */
    bool pinned;               /* -p: staged through cuMemHostAlloc memory */
} opts_t;

/* One MPI_T control variable. */
typedef struct {
    bool found;
    bool is_bool;              /* MPI_C_BOOL (an MCA bool) rather than MPI_INT */
    MPI_T_cvar_handle handle;
    int initial;               /* restored at the end */
} cvar_t;

/* Per-size results, as rank 0 sees them. */
enum check { CK_NONE, CK_OK, CK_FAIL };
typedef struct {
    size_t bytes, count;
    double t[NMODE];           /* median seconds per call; < 0: not measured */
    int check[NMODE];          /* enum check */
} row_t;

typedef struct {
    int rank, size;
    const opts_t *o;
    cvar_t cv[NCOLL];
    float *sbuf, *rbuf;        /* cap + GUARD elements each; -g: the staging buffers */
    size_t cap;
    int *rcounts;              /* size entries, for MPI_Reduce_scatter */
    /* -g only */
    unsigned long long dsbuf, drbuf;   /* device buffers (CUdeviceptr), cap + GUARD */
    bool no_xccl_col;          /* xccl inactive: device buffers would reach stock */
} bench_t;

/* Summary per collective: ratios of stock/xccl time, and check counts. */
typedef struct {
    double logsum_big, logsum_all;
    int n_big, n_all;
    int run[NMODE], fail[NMODE];     /* sizes checked, sizes failed */
} summary_t;

#define DEFAULT_COLLS "allreduce,allgather,reduce_scatter,alltoall,bcast"
#define AUTO_PAYLOAD  (64u << 20)  /* bytes per rank moved by one round */
#define AUTO_MIN_IT   2
#define AUTO_MAX_IT   200
#define GUARD         16           /* sentinel elements after each result */
#define SENTINEL      (-1.0f)      /* never produced by the check inputs */
#define MEMCPY_BYTES  ((size_t)64 << 20)
#define MEMCPY_REPS   5
#define KERNEL_REPS   7
#define KERNEL_WORK   ((size_t)32 << 20) /* operand bytes per timing sample */
#define LINE_MAX_W    120

static const size_t kernel_sizes[] = { 4096, (size_t)1 << 20, (size_t)16 << 20 };
#define NKSIZES (sizeof(kernel_sizes) / sizeof(kernel_sizes[0]))

/* Kernel-table rows: an MPI (type, op) pair and its xccl equivalent. */
typedef struct {
    const char *tname, *oname;
    MPI_Datatype mt;
    MPI_Op mo;
    xccl_dtype_t xt;
    xccl_op_t xo;
} kcase_t;

/* Value/index pairs as MPI_FLOAT_INT and MPI_DOUBLE_INT lay them out. */
typedef struct { float v; int i; } float_int_t;
typedef struct { double v; int i; } double_int_t;

/* ------------------------------------------------------------------------ */
/* CUDA driver API (-g): test/gpu/test_cuda.h, shared with xccl_mpi_gpu.c  */
/* ------------------------------------------------------------------------ */

/* A failing driver call is fatal (exit 3). */
#define CU_CHECK(call)                                                          \
    do {                                                                        \
        CUresult r_ = (call);                                                   \
        if (r_ != 0)                                                            \
            die(3, "%s failed: %d %s (line %d)", #call, r_, cu_err(r_), __LINE__); \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Prototypes (helpers follow main, top-down)                               */
/* ------------------------------------------------------------------------ */

static int parse_args(int argc, char **argv, opts_t *o, int rank);
static void print_header(const bench_t *B, const char *libver, double memcpy_gbs,
                         bool xccl_loaded);
static void library_version(char *buf, size_t cap);
static double memcpy_bandwidth(void);

static bool cvars_open(bench_t *B);
static bool xccl_world_active(void);
static void cvars_close(bench_t *B);
static void set_mode(bench_t *B, int coll, int mode);

static void run_collective(bench_t *B, int coll, summary_t *sum);
static void run_size(bench_t *B, int coll, size_t count, row_t *row);
static void call_coll(bench_t *B, int coll, size_t count, int root);
static int check_coll(bench_t *B, int coll, size_t count, int mode);
static int check_coll_gpu(bench_t *B, int coll, size_t count, int mode);
static void bench_call(bench_t *B, int coll, size_t count, int root, int mode);
static void print_table_header(const bench_t *B, int coll);
static void print_row(const bench_t *B, int coll, const row_t *r);
static void print_summary(const bench_t *B, const summary_t *sum);

static void run_kernel_table(void);

static bool wants_gpu(int argc, char **argv);
static bool agree_all(int mine);
static void gpu_buffers(bench_t *B);
static void gpu_free_buffers(bench_t *B);
static void print_gpu_header(const bench_t *B);

static double busbw_factor(int coll, int p);
static double median(double *v, int n);
static double ln_pos(double x);
static double exp_any(double x);
static void *xmalloc(size_t bytes);
static void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    int rank, size;
    /* -g: the driver and a current context before MPI_Init, as CUDA
     * applications do (and as xccl's IPC path needs). */
    const bool gpu = wants_gpu(argc, argv);
    const char *skip = gpu ? test_cuda_setup() : NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    opts_t o;
    int prc = parse_args(argc, argv, &o, rank);
    if (prc >= 0) {            /* -h (0) or a bad command line (2) */
        MPI_Finalize();
        test_cuda_release();
        return prc;
    }
    if (gpu && !agree_all(skip == NULL)) {
        if (rank == 0)
            printf("SKIP: %s\n", skip ? skip : "another rank has no CUDA device");
        fflush(stdout);
        MPI_Finalize();
        test_cuda_release();
        return 77;
    }
    if (gpu)
        mode_names[M_STOCK] = "staged";

    char libver[256];
    library_version(libver, sizeof libver);

    /* A reference for the bandwidth columns: what one core can copy.  Rank 0
     * measures while the others wait. */
    double memcpy_gbs = 0.0;
    if (rank == 0)
        memcpy_gbs = memcpy_bandwidth();
    MPI_Barrier(MPI_COMM_WORLD);

    bench_t B = { .rank = rank, .size = size, .o = &o };

    if (o.kernels) {
        if (rank == 0) {
            print_header(&B, libver, memcpy_gbs, false);
            run_kernel_table();
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
        return 0;
    }

    bool xccl_loaded = cvars_open(&B);
    print_header(&B, libver, memcpy_gbs, xccl_loaded);
    bool xccl_inactive = xccl_loaded && !xccl_world_active();
    if (xccl_inactive && rank == 0)
        printf("# WARNING: xccl is loaded but not active on MPI_COMM_WORLD (its set-up failed;\n"
               "#   --mca coll_xccl_verbose 2 says why): %s\n",
               gpu ? "the xccl column is not measured (device buffers\n"
                     "#   would reach the stock, non-CUDA-aware collectives)"
                   : "the xccl column measures the fallback");
    B.no_xccl_col = gpu && xccl_inactive;

    /* Buffers for the largest size; every collective uses a prefix.  Both
     * start with valid small floats so no timed call sees NaN or denormals. */
    B.cap = o.maxbytes / sizeof(float);
    B.sbuf = xmalloc((B.cap + GUARD) * sizeof(float));
    B.rbuf = xmalloc((B.cap + GUARD) * sizeof(float));
    B.rcounts = xmalloc((size_t)size * sizeof(int));
    for (size_t i = 0; i < B.cap + GUARD; i++) {
        B.sbuf[i] = (float)(i % 13 + 1);
        B.rbuf[i] = 0.0f;
    }
    if (o.gpu) {               /* device buffers, same contents; pinned staging */
        gpu_buffers(&B);
        print_gpu_header(&B);
    }

    summary_t sums[NCOLL];
    memset(sums, 0, sizeof sums);
    for (int k = 0; k < o.ncolls; k++)
        run_collective(&B, o.colls[k], &sums[o.colls[k]]);

    int status = 0;
    if (rank == 0) {
        print_summary(&B, sums);
        for (int k = 0; k < o.ncolls; k++)
            if (sums[o.colls[k]].fail[M_XCCL])
                status = 1;
        if (status == 0 && xccl_inactive)
            status = 4;
    }

    cvars_close(&B);
    if (o.gpu)
        gpu_free_buffers(&B);  /* frees the staging buffers too */
    else {
        free(B.sbuf);
        free(B.rbuf);
    }
    free(B.rcounts);
    MPI_Finalize();
    test_cuda_release();
    /* Only rank 0 knows the verdict; mpirun reports its non-zero status. */
    return status;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: xccl_bench [-c LIST] [-b MIN] [-e MAX] [-f FACTOR] [-r ROUNDS] [-n ITERS]\n"
        "                  [-w WARMUP] [-k] [-g [-p]] [-q] [-h]\n"
        "  -c LIST    collectives, comma separated, from allreduce, allgather, reduce_scatter,\n"
        "             reduce_scatter_block, alltoall, bcast\n"
        "             (default " DEFAULT_COLLS ")\n"
        "  -b MIN     smallest size in bytes, K/M/G suffixes allowed (default 8)\n"
        "  -e MAX     largest size in bytes (default 64M)\n"
        "  -f FACTOR  size multiplier between steps, integer >= 2 (default 2)\n"
        "  -r ROUNDS  interleaved rounds per size and mode; the median is shown (default 5)\n"
        "  -n ITERS   timed calls per round (default 0: automatic, ~64 MiB of payload per\n"
        "             round and rank, within [2, 200])\n"
        "  -w WARMUP  untimed calls before each timed loop (default 2)\n"
        "  -k         kernel table instead: xccl reduction kernels vs MPI_Reduce_local\n"
        "             (rank 0 only; -np 1 is fine)\n"
        "  -g         CUDA device buffers (cuMemAlloc; libcuda.so.1 by dlopen, device =\n"
        "             local rank mod device count): xccl on the device buffers vs staged\n"
        "             (cuMemcpyDtoH to host, stock collective with xccl off, cuMemcpyHtoD\n"
        "             back, timed together); exit 77 and SKIP: without driver or device\n"
        "  -p         with -g: stage through pinned host memory (cuMemHostAlloc) instead\n"
        "             of pageable malloc memory\n"
        "  -q         less output (no explanatory notes)\n"
        "  -h         this help\n"
        "Size (nccl-tests convention, MPI_FLOAT elements): allreduce, bcast: the buffer;\n"
        "allgather: total received; reduce_scatter(_block), alltoall: total sent.\n");
}

/* Byte count with an optional K, M or G (binary) suffix. */
static bool parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || s[0] == '-')
        return false;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return false;
    *out = (size_t)(v << shift);
    return true;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static bool parse_colls(const char *list, opts_t *o)
{
    char buf[256];
    if (strlen(list) >= sizeof buf)
        return false;
    strcpy(buf, list);
    o->ncolls = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int id = -1;
        for (int c = 0; c < NCOLL; c++)
            if (strcmp(tok, colls[c].name) == 0)
                id = c;
        if (id < 0)
            return false;
        bool dup = false;
        for (int k = 0; k < o->ncolls; k++)
            dup |= o->colls[k] == id;
        if (!dup)
            o->colls[o->ncolls++] = id;
    }
    return o->ncolls > 0;
}

#define OPTSTRING "c:b:e:f:r:n:w:kgpqh"

/* Is -g on the command line?  Looked at before MPI_Init (the context must
 * exist by then), silently; parse_args reports any error later. */
static bool wants_gpu(int argc, char **argv)
{
    bool g = false;
    int c;
    opterr = 0;
    while ((c = getopt(argc, argv, OPTSTRING)) != -1)
        g |= c == 'g';
    optind = 1;                /* parse_args scans again from the start */
    return g;
}

/* Every rank parses the same argv; only rank 0 talks.  Returns -1 to go on,
 * or the exit status: 0 after -h, 2 after an error. */
static int parse_args(int argc, char **argv, opts_t *o, int rank)
{
    *o = (opts_t){ .minbytes = 8, .maxbytes = (size_t)64 << 20, .factor = 2,
                   .rounds = 5, .iters = 0, .warmup = 2 };
    parse_colls(DEFAULT_COLLS, o);

    const char *bad = NULL;
    int c, f;
    opterr = 0;
    while (!bad && (c = getopt(argc, argv, OPTSTRING)) != -1) {
        switch (c) {
        case 'c': if (!parse_colls(optarg, o)) bad = "-c: unknown collective in list"; break;
        case 'b': if (!parse_size(optarg, &o->minbytes)) bad = "-b: bad size"; break;
        case 'e': if (!parse_size(optarg, &o->maxbytes)) bad = "-e: bad size"; break;
        case 'f':
            if (!parse_int(optarg, 2, 1 << 20, &f)) bad = "-f: need an integer >= 2";
            else o->factor = (unsigned)f;
            break;
        case 'r': if (!parse_int(optarg, 1, 1000, &o->rounds)) bad = "-r: need 1..1000"; break;
        case 'n': if (!parse_int(optarg, 0, 1 << 30, &o->iters)) bad = "-n: need >= 0"; break;
        case 'w': if (!parse_int(optarg, 0, 1 << 20, &o->warmup)) bad = "-w: need >= 0"; break;
        case 'k': o->kernels = true; break;
        case 'g': o->gpu = true; break;
        case 'p': o->pinned = true; break;
        case 'q': o->quiet = true; break;
        case 'h':
            if (rank == 0)
                usage(stdout);
            return 0;
        default: bad = "unknown option or missing argument"; break;
        }
    }
    if (!bad && optind < argc)
        bad = "unexpected argument";
    if (!bad && o->gpu && o->kernels)
        bad = "-g and -k exclude each other";
    if (!bad && o->pinned && !o->gpu)
        bad = "-p needs -g";
    if (!bad && o->minbytes < 1)
        bad = "-b: the smallest size must be at least 1 byte";
    if (!bad && o->maxbytes < o->minbytes)
        bad = "-e: the largest size is below the smallest";
    /* MPI counts are int; the buffers hold the largest size as floats. */
    if (!bad && o->maxbytes / sizeof(float) > INT_MAX)
        bad = "-e: too large for int element counts";
    if (bad) {
        if (rank == 0) {
            fprintf(stderr, "xccl_bench: %s\n", bad);
            usage(stderr);
        }
        return 2;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Header                                                                   */
/* ------------------------------------------------------------------------ */

/* First line of MPI_Get_library_version, cut to fit a header line. */
static void library_version(char *buf, size_t cap)
{
    char full[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(full, &len);
    full[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    full[strcspn(full, "\r\n")] = '\0';
    size_t keep = LINE_MAX_W - 12;    /* room for "# library: " */
    if (keep > cap - 1)
        keep = cap - 1;
    snprintf(buf, cap, "%.*s", (int)keep, full);
}

/* Median GB/s of MEMCPY_REPS copies of 64 MiB on this core. */
static double memcpy_bandwidth(void)
{
    char *src = xmalloc(MEMCPY_BYTES), *dst = xmalloc(MEMCPY_BYTES);
    memset(src, 1, MEMCPY_BYTES);     /* fault every page in before timing */
    memset(dst, 2, MEMCPY_BYTES);
    double gbs[MEMCPY_REPS];
    volatile char sink = 0;
    for (int r = 0; r < MEMCPY_REPS; r++) {
        double t0 = MPI_Wtime();
        memcpy(dst, src, MEMCPY_BYTES);
        double t = MPI_Wtime() - t0;
        sink ^= dst[(size_t)r * 4099];   /* keep the copy observable */
        gbs[r] = (double)MEMCPY_BYTES / t / 1e9;
    }
    (void)sink;
    free(src);
    free(dst);
    return median(gbs, MEMCPY_REPS);
}

static void print_header(const bench_t *B, const char *libver, double memcpy_gbs,
                         bool xccl_loaded)
{
    if (B->rank != 0)
        return;
    const opts_t *o = B->o;
    printf("# xccl_bench: %s\n",
           o->kernels ? "reduction kernels, xccl vs Open MPI op framework"
           : o->gpu   ? "CUDA device buffers: xccl vs staged through host + stock Open MPI,\n"
                        "#   same run, interleaved"
                      : "xccl vs stock Open MPI collectives, same run, interleaved");
    printf("# library: %s\n", libver);
    printf("# memcpy: %.2f GB/s (one core, %zu MiB, median of %d)\n", memcpy_gbs,
           MEMCPY_BYTES >> 20, MEMCPY_REPS);
    if (o->kernels)
        return;
    char iters[64];
    if (o->iters)
        snprintf(iters, sizeof iters, "%d", o->iters);
    else
        snprintf(iters, sizeof iters, "auto (%u MiB per round, %d..%d)", AUTO_PAYLOAD >> 20,
                 AUTO_MIN_IT, AUTO_MAX_IT);
    printf("# np=%d  rounds=%d  iters/round=%s  warmup=%d  sizes %zu..%zu x%u\n", B->size,
           o->rounds, iters, o->warmup, o->minbytes, o->maxbytes, o->factor);
    if (!xccl_loaded)
        printf("xccl_bench: xccl not loaded (cvar %s not found): measuring the stock stack only\n",
               colls[C_ALLREDUCE].cvar);
    else
        printf("# xccl on/off per call: MPI_T cvars coll_xccl_<collective>_enable = 1/0\n");
    if (o->quiet)
        return;
    const char *st = mode_names[M_STOCK];
    printf("# time: per-call average over ITERS calls, max over ranks, median over rounds;\n"
           "#   rounds alternate xccl-first / %s-first; time in us\n"
           "# algbw = size / time, busbw = algbw * factor (nccl-tests): allreduce 2(p-1)/p;\n"
           "#   allgather, reduce_scatter(_block), alltoall (p-1)/p; bcast 1; GB/s, GB = 1e9 B\n"
           "# ratio = %s time / xccl time (> 1: xccl faster)\n"
           "# check = xccl/%s: every element of one call per size checked on every rank\n"
           "#   (allreduce also in place); - = not run.  Datatype MPI_FLOAT, op MPI_SUM;\n"
           "#   bcast root rotates per round (round %% p), its check uses root p-1\n",
           st, st, st);
    if (o->gpu)
        printf("# -g: the check copies the device result back (cuMemcpyDtoH) and also runs\n"
               "#   allreduce on order-sensitive float inputs: the result must be close to the\n"
               "#   host reference and bitwise identical on every rank (hash min = max)\n");
}

/* ------------------------------------------------------------------------ */
/* MPI_T control variables                                                  */
/* ------------------------------------------------------------------------ */

static const char *mpit_err_name(int rc)
{
    switch (rc) {
    case MPI_T_ERR_INVALID_NAME: return "MPI_T_ERR_INVALID_NAME";
    case MPI_T_ERR_INVALID_INDEX: return "MPI_T_ERR_INVALID_INDEX";
    case MPI_T_ERR_INVALID_HANDLE: return "MPI_T_ERR_INVALID_HANDLE";
    case MPI_T_ERR_CVAR_SET_NEVER: return "MPI_T_ERR_CVAR_SET_NEVER (read-only or constant scope)";
    case MPI_T_ERR_CVAR_SET_NOT_NOW: return "MPI_T_ERR_CVAR_SET_NOT_NOW (not settable at run time)";
    case MPI_T_ERR_NOT_INITIALIZED: return "MPI_T_ERR_NOT_INITIALIZED";
    default: return "MPI_T error";
    }
}

/* Name, type and binding of cvar IDX; false if the index is not valid. */
static bool cvar_info(int idx, char *name, int namecap, MPI_Datatype *dt, int *bind)
{
    int nlen = namecap, verb, scope, dlen = 0;
    MPI_T_enum et;
    return MPI_T_cvar_get_info(idx, name, &nlen, &verb, dt, &et, NULL, &dlen, bind,
                               &scope) == MPI_SUCCESS;
}

/* Index of the cvar called NAME, or -1.  MPI_T_cvar_get_index is tried
 * first and its answer confirmed by name; a scan of all cvars is the
 * fallback, for implementations whose lookup misbehaves. */
static int cvar_find(const char *name)
{
    char got[256];
    MPI_Datatype dt;
    int idx, bind, num = 0;
    if (MPI_T_cvar_get_index(name, &idx) == MPI_SUCCESS &&
        cvar_info(idx, got, sizeof got, &dt, &bind) && strcmp(got, name) == 0)
        return idx;
    MPI_T_cvar_get_num(&num);
    for (idx = 0; idx < num; idx++)
        if (cvar_info(idx, got, sizeof got, &dt, &bind) && strcmp(got, name) == 0)
            return idx;
    return -1;
}

static int cvar_read(const cvar_t *cv, const char *name)
{
    int rc, v;
    if (cv->is_bool) {
        /* Open MPI stores an MCA bool in one byte and reads back just that. */
        bool b = false;
        rc = MPI_T_cvar_read(cv->handle, &b);
        v = b;
    } else {
        v = -1;
        rc = MPI_T_cvar_read(cv->handle, &v);
    }
    if (rc != MPI_SUCCESS)
        die(3, "MPI_T_cvar_read(%s) failed: %s (%d)", name, mpit_err_name(rc), rc);
    return v;
}

/* Write VALUE and verify it reads back. */
static void cvar_write(const cvar_t *cv, const char *name, int value)
{
    /* An int buffer serves MPI_C_BOOL too: Open MPI validates a bool write
     * by reading an int, then copies the variable's one byte from the start
     * of the buffer (the low byte: x86 is little-endian).  The read-back
     * check below catches any platform where that does not hold. */
    int v = value;
    int rc = MPI_T_cvar_write(cv->handle, &v);
    if (rc != MPI_SUCCESS)
        die(3, "MPI_T_cvar_write(%s = %d) failed: %s (%d); the variable must be registered "
            "settable (MCA_BASE_VAR_FLAG_SETTABLE, scope ALL_EQ)", name, value,
            mpit_err_name(rc), rc);
    int back = cvar_read(cv, name);
    if (back != value)
        die(3, "cvar %s reads back %d after writing %d", name, back, value);
}

/* Find and open the cvars of the selected collectives.  Returns false, and
 * opens none, when xccl is not loaded (no allreduce cvar). */
static bool cvars_open(bench_t *B)
{
    int provided, rc = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (rc != MPI_SUCCESS)
        die(3, "MPI_T_init_thread failed: %d", rc);

    bool loaded = cvar_find(colls[C_ALLREDUCE].cvar) >= 0;
    for (int c = 0; loaded && c < NCOLL; c++) {
        bool wanted = false;
        for (int k = 0; k < B->o->ncolls; k++)
            wanted |= B->o->colls[k] == c;
        int idx = wanted ? cvar_find(colls[c].cvar) : -1;
        if (idx < 0)
            continue;

        cvar_t *cv = &B->cv[c];
        char name[256];
        MPI_Datatype dt;
        int bind, count;
        if (!cvar_info(idx, name, sizeof name, &dt, &bind))
            die(3, "MPI_T_cvar_get_info(%s) failed", colls[c].cvar);
        if (dt != MPI_INT && dt != MPI_C_BOOL)
            die(3, "cvar %s: datatype is not MPI_INT (nor MPI_C_BOOL); cannot switch it",
                colls[c].cvar);
        if (bind != MPI_T_BIND_NO_OBJECT)
            die(3, "cvar %s: bound to an MPI object (bind %d); expected MPI_T_BIND_NO_OBJECT",
                colls[c].cvar, bind);
        rc = MPI_T_cvar_handle_alloc(idx, NULL, &cv->handle, &count);
        if (rc != MPI_SUCCESS || count != 1)
            die(3, "MPI_T_cvar_handle_alloc(%s) failed: %s (%d), count %d", colls[c].cvar,
                mpit_err_name(rc), rc, count);
        cv->found = true;
        cv->is_bool = dt == MPI_C_BOOL;
        cv->initial = cvar_read(cv, colls[c].cvar);
    }

    /* Every rank must have the same view, or the modes would diverge. */
    int mine[NCOLL + 1], lo[NCOLL + 1], hi[NCOLL + 1];
    for (int c = 0; c < NCOLL; c++)
        mine[c] = B->cv[c].found;
    mine[NCOLL] = loaded;
    MPI_Reduce(mine, lo, NCOLL + 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(mine, hi, NCOLL + 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (B->rank == 0)
        for (int c = 0; c <= NCOLL; c++)
            if (lo[c] != hi[c])
                die(3, "ranks disagree on which xccl cvars exist (%s)",
                    c < NCOLL ? colls[c].cvar : "xccl loaded");
    MPI_Barrier(MPI_COMM_WORLD);
    return loaded;
}

/* The component's read-only cvar coll_xccl_world_active: whether xccl runs
 * MPI_COMM_WORLD's collectives (its set-up may have failed).  Older builds
 * without the variable count as active. */
static bool xccl_world_active(void)
{
    int idx = cvar_find("coll_xccl_world_active"), count;
    if (idx < 0)
        return true;
    cvar_t cv = { .is_bool = true };
    MPI_Datatype dt;
    char name[256];
    int bind;
    /* xccl sets a communicator up at the first call it runs itself: one
     * small allreduce with coll_xccl_small_msg_bytes 0 for the moment
     * (MPI_T), so that MPI_COMM_WORLD's set-up has happened (or failed). */
    int sidx = cvar_find("coll_xccl_small_msg_bytes");
    if (sidx >= 0) {
        cvar_t sm = { .is_bool = false };
        if (MPI_T_cvar_handle_alloc(sidx, NULL, &sm.handle, &count) != MPI_SUCCESS)
            die(3, "MPI_T_cvar_handle_alloc(coll_xccl_small_msg_bytes) failed");
        int initial = cvar_read(&sm, "coll_xccl_small_msg_bytes"), one = 1, sum = 0;
        cvar_write(&sm, "coll_xccl_small_msg_bytes", 0);
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        cvar_write(&sm, "coll_xccl_small_msg_bytes", initial);
        MPI_T_cvar_handle_free(&sm.handle);
    }
    if (!cvar_info(idx, name, sizeof name, &dt, &bind))
        die(3, "MPI_T_cvar_get_info(coll_xccl_world_active) failed");
    cv.is_bool = dt == MPI_C_BOOL;
    if (MPI_T_cvar_handle_alloc(idx, NULL, &cv.handle, &count) != MPI_SUCCESS)
        die(3, "MPI_T_cvar_handle_alloc(coll_xccl_world_active) failed");
    int v = cvar_read(&cv, "coll_xccl_world_active");
    MPI_T_cvar_handle_free(&cv.handle);
    return v != 0;
}

/* Restore the initial values, free the handles, close MPI_T. */
static void cvars_close(bench_t *B)
{
    for (int c = 0; c < NCOLL; c++) {
        cvar_t *cv = &B->cv[c];
        if (!cv->found)
            continue;
        cvar_write(cv, colls[c].cvar, cv->initial);
        MPI_T_cvar_handle_free(&cv->handle);
        cv->found = false;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_T_finalize();
}

/* Route COLL to xccl or to the stock module, on all ranks at once.  A no-op
 * without the cvar (stock is then the only mode measured). */
static void set_mode(bench_t *B, int coll, int mode)
{
    const cvar_t *cv = &B->cv[coll];
    if (!cv->found)
        return;
    cvar_write(cv, colls[coll].cvar, mode == M_XCCL ? 1 : 0);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ------------------------------------------------------------------------ */
/* Sweep                                                                    */
/* ------------------------------------------------------------------------ */

static void run_collective(bench_t *B, int coll, summary_t *sum)
{
    const opts_t *o = B->o;
    const size_t p = (size_t)B->size;
    print_table_header(B, coll);

    size_t prev = 0;
    for (size_t bytes = o->minbytes; bytes <= o->maxbytes; ) {
        size_t count = bytes / sizeof(float);
        if (colls[coll].blocked)
            count -= count % p;
        /* Skip sizes too small for one element (per block), and repeats
         * that rounding produced. */
        if (count > 0 && count != prev) {
            prev = count;
            row_t row;
            run_size(B, coll, count, &row);
            if (B->rank == 0) {
                print_row(B, coll, &row);
                for (int m = 0; m < NMODE; m++) {
                    sum->run[m] += row.check[m] != CK_NONE;
                    sum->fail[m] += row.check[m] == CK_FAIL;
                }
                if (row.t[M_XCCL] > 0 && row.t[M_STOCK] > 0) {
                    double l = ln_pos(row.t[M_STOCK] / row.t[M_XCCL]);
                    sum->logsum_all += l;
                    sum->n_all++;
                    if (row.bytes >= ((size_t)1 << 20)) {
                        sum->logsum_big += l;
                        sum->n_big++;
                    }
                }
            }
        }
        if (bytes > o->maxbytes / o->factor)
            break;
        bytes *= o->factor;
    }
}

/* Calls per round: a fixed payload per round, so small sizes get enough
 * calls to rise above the timer and large ones do not take forever. */
static int auto_iters(size_t bytes)
{
    size_t n = AUTO_PAYLOAD / bytes;
    return n < AUTO_MIN_IT ? AUTO_MIN_IT : n > AUTO_MAX_IT ? AUTO_MAX_IT : (int)n;
}

static void run_size(bench_t *B, int coll, size_t count, row_t *row)
{
    const opts_t *o = B->o;
    const int R = o->rounds;
    const size_t bytes = count * sizeof(float);
    const int iters = o->iters ? o->iters : auto_iters(bytes);
    double *samples = xmalloc((size_t)NMODE * (size_t)R * sizeof(double));

    /* Without its cvar, xccl cannot be told apart: stock only. */
    const bool on[NMODE] = { [M_XCCL] = B->cv[coll].found && !B->no_xccl_col,
                             [M_STOCK] = true };

    for (int i = 0; i < B->size; i++)   /* MPI_Reduce_scatter: equal blocks */
        B->rcounts[i] = (int)(count / (size_t)B->size);

    *row = (row_t){ .bytes = bytes, .count = count,
                    .t = { -1.0, -1.0 }, .check = { CK_NONE, CK_NONE } };
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < NMODE; k++) {
            int mode = (r % 2 == 0) ? k : NMODE - 1 - k;
            if (!on[mode])
                continue;
            set_mode(B, coll, mode);
            int root = r % B->size;
            for (int w = 0; w < o->warmup; w++)
                bench_call(B, coll, count, root, mode);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++)
                bench_call(B, coll, count, root, mode);
            /* -g: a copy from pageable memory to the device may return
             * before its DMA ends; the loop's last one counts too. */
            if (o->gpu)
                CU_CHECK(cu.CtxSynchronize());
            double t = (MPI_Wtime() - t0) / iters, tmax = 0.0;
            /* The slowest rank defines the collective's time. */
            MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            samples[mode * R + r] = tmax;
            if (r == 0)
                row->check[mode] = o->gpu ? check_coll_gpu(B, coll, count, mode)
                                          : check_coll(B, coll, count, mode);
        }
    }
    if (B->rank == 0)
        for (int m = 0; m < NMODE; m++)
            if (on[m])
                row->t[m] = median(samples + m * R, R);
    free(samples);
}

/* One call of COLL on SBUF/RBUF (host or device); errors abort (the
 * default MPI_ERRORS_ARE_FATAL handler). */
static void call_coll_on(bench_t *B, int coll, size_t count, int root, void *sbuf, void *rbuf)
{
    const int n = (int)count, blk = (int)(count / (size_t)B->size);
    MPI_Comm w = MPI_COMM_WORLD;
    switch (coll) {
    case C_ALLREDUCE:
        MPI_Allreduce(sbuf, rbuf, n, MPI_FLOAT, MPI_SUM, w);
        break;
    case C_ALLGATHER:
        MPI_Allgather(sbuf, blk, MPI_FLOAT, rbuf, blk, MPI_FLOAT, w);
        break;
    case C_REDUCE_SCATTER:      /* rcounts[] = blk, set by run_size */
        MPI_Reduce_scatter(sbuf, rbuf, B->rcounts, MPI_FLOAT, MPI_SUM, w);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        MPI_Reduce_scatter_block(sbuf, rbuf, blk, MPI_FLOAT, MPI_SUM, w);
        break;
    case C_ALLTOALL:
        MPI_Alltoall(sbuf, blk, MPI_FLOAT, rbuf, blk, MPI_FLOAT, w);
        break;
    case C_BCAST:
        MPI_Bcast(rbuf, n, MPI_FLOAT, root, w);
        break;
    default:
        break;
    }
}

/* One call of COLL on the (host) benchmark buffers. */
static void call_coll(bench_t *B, int coll, size_t count, int root)
{
    call_coll_on(B, coll, count, root, B->sbuf, B->rbuf);
}

/* Elements of the send and receive buffer COLL uses at COUNT. */
static void io_counts(const bench_t *B, int coll, size_t count, size_t *nsend, size_t *nrecv)
{
    const size_t blk = count / (size_t)B->size;
    *nsend = *nrecv = count;
    if (coll == C_ALLGATHER)
        *nsend = blk;
    if (coll == C_REDUCE_SCATTER || coll == C_REDUCE_SCATTER_BLOCK)
        *nrecv = blk;
}

#define DPTR(d) ((void *)(uintptr_t)(d))

/* -g, staged: what a user of a non-CUDA-aware MPI writes.  The input down
 * to the host, the stock collective (xccl is disabled in this mode) on the
 * host buffers, the result up to the device. */
static void staged_call(bench_t *B, int coll, size_t count, int root)
{
    size_t ns, nr;
    io_counts(B, coll, count, &ns, &nr);
    if (coll == C_BCAST) {     /* one buffer: the root has the data, the others get it */
        if (B->rank == root)
            CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, count * sizeof(float)));
        call_coll(B, coll, count, root);
        if (B->rank != root)
            CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, count * sizeof(float)));
        return;
    }
    CU_CHECK(cu.MemcpyDtoH(B->sbuf, B->dsbuf, ns * sizeof(float)));
    call_coll(B, coll, count, root);
    CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, nr * sizeof(float)));
}

/* The timed call of MODE: host mode as ever; -g: xccl on the device
 * buffers, or staged. */
static void bench_call(bench_t *B, int coll, size_t count, int root, int mode)
{
    if (!B->o->gpu)
        call_coll(B, coll, count, root);
    else if (mode == M_XCCL)
        call_coll_on(B, coll, count, root, DPTR(B->dsbuf), DPTR(B->drbuf));
    else
        staged_call(B, coll, count, root);
}

/* ------------------------------------------------------------------------ */
/* Correctness check                                                        */
/* ------------------------------------------------------------------------ */

/* Input element i of rank r: a small positive integer, so float sums over
 * ranks are exact (below 2^24 for p < 16000), and neighbouring elements and
 * ranks differ, so misplaced data shows. */
static float pattern(int r, size_t i)
{
    return (float)((i * 7 + (size_t)r * 13) % 1021 + 1);
}

static float sum_over_ranks(int p, size_t i)
{
    float s = 0.0f;
    for (int r = 0; r < p; r++)
        s += pattern(r, i);
    return s;
}

/* Expected output element i of COLL on RANK. */
static float expected(int coll, int rank, int p, size_t count, size_t i, int root)
{
    const size_t blk = count / (size_t)p;
    switch (coll) {
    case C_ALLREDUCE:
        return sum_over_ranks(p, i);
    case C_ALLGATHER:                 /* block j comes from rank j */
        return pattern((int)(i / blk), i % blk);
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_BLOCK:      /* my block of the sum */
        return sum_over_ranks(p, (size_t)rank * blk + i);
    case C_ALLTOALL:                  /* block j: rank j's block for me */
        return pattern((int)(i / blk), (size_t)rank * blk + i % blk);
    case C_BCAST:
        return pattern(root, i);
    default:
        return 0.0f;
    }
}

/* Compare rbuf[0..n) with the expectation and the guard after it; report
 * the first difference on stderr.  Returns true when all is right. */
static bool verify(const bench_t *B, int coll, size_t count, size_t n, int root,
                   const char *what, int mode)
{
    for (size_t i = 0; i < n; i++) {
        float want = expected(coll, B->rank, B->size, count, i, root);
        if (B->rbuf[i] != want) {
            fprintf(stderr, "xccl_bench: rank %d: %s %s%s count %zu: element %zu is %.1f, "
                    "expected %.1f\n", B->rank, mode_names[mode], colls[coll].name, what,
                    count, i, (double)B->rbuf[i], (double)want);
            return false;
        }
    }
    for (size_t i = n; i < n + GUARD; i++) {
        if (B->rbuf[i] != SENTINEL) {
            fprintf(stderr, "xccl_bench: rank %d: %s %s%s count %zu: wrote past the result "
                    "(element %zu)\n", B->rank, mode_names[mode], colls[coll].name, what,
                    count, i);
            return false;
        }
    }
    return true;
}

/* The known inputs of a check in the host buffers: the pattern in SEND,
 * sentinels in RECV and its guard (a stale result of the other mode must
 * not pass), the root's data in a bcast's RECV.  *nsend, *nrecv: elements. */
static void fill_check_inputs(bench_t *B, int coll, size_t count, int root, size_t *nsend,
                              size_t *nrecv)
{
    io_counts(B, coll, count, nsend, nrecv);
    for (size_t i = 0; i < *nsend; i++)
        B->sbuf[i] = pattern(B->rank, i);
    for (size_t i = 0; i < *nrecv + GUARD; i++)
        B->rbuf[i] = SENTINEL;
    if (coll == C_BCAST && B->rank == root)
        for (size_t i = 0; i < count; i++)
            B->rbuf[i] = pattern(root, i);
}

/* Run COLL once on known inputs in the current mode and check every element
 * on every rank.  The verdict (enum check) is meaningful on rank 0. */
static int check_coll(bench_t *B, int coll, size_t count, int mode)
{
    const int root = B->size - 1;
    size_t nsend, nrecv;
    fill_check_inputs(B, coll, count, root, &nsend, &nrecv);

    call_coll(B, coll, count, root);
    bool ok = verify(B, coll, count, nrecv, root, "", mode);

    if (coll == C_ALLREDUCE) {
        for (size_t i = 0; i < count; i++)
            B->rbuf[i] = pattern(B->rank, i);
        MPI_Allreduce(MPI_IN_PLACE, B->rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        ok = verify(B, coll, count, count, root, " (in place)", mode) && ok;
    }

    int mine = ok, all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    return all ? CK_OK : CK_FAIL;
}

/* Input of the -g identity check: fractions with many mantissa bits, so
 * the bits of a float sum depend on the order of the additions. */
static float frac_pattern(int r, size_t i)
{
    uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(r + 1) * 0x9E3779B9u;
    h ^= h >> 15;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    return (float)(h % 1000003u) / 997.0f;
}

/* FNV-1a, 64 bits, of N bytes. */
static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

/* check_coll for -g: the same inputs, uploaded to the device buffers, the
 * call of MODE (xccl on the device buffers, or staged), the result (and
 * the guard after it) copied back and compared with the host reference.
 * Allreduce also: in place, and on frac_pattern inputs, whose result must
 * be close to the reference and bitwise identical on every rank. */
static int check_coll_gpu(bench_t *B, int coll, size_t count, int mode)
{
    const int root = B->size - 1;
    const size_t fs = sizeof(float);
    size_t nsend, nrecv;
    fill_check_inputs(B, coll, count, root, &nsend, &nrecv);
    CU_CHECK(cu.MemcpyHtoD(B->dsbuf, B->sbuf, nsend * fs));
    CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, (nrecv + GUARD) * fs));

    bench_call(B, coll, count, root, mode);
    CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, (nrecv + GUARD) * fs));
    bool ok = verify(B, coll, count, nrecv, root, "", mode);

    if (coll == C_ALLREDUCE) {
        /* In place; the guard on the device still holds the sentinels. */
        for (size_t i = 0; i < count; i++)
            B->rbuf[i] = pattern(B->rank, i);
        CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, count * fs));
        if (mode == M_XCCL) {
            MPI_Allreduce(MPI_IN_PLACE, DPTR(B->drbuf), (int)count, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
        } else {
            CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, count * fs));
            MPI_Allreduce(MPI_IN_PLACE, B->rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, count * fs));
        }
        CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, (count + GUARD) * fs));
        ok = verify(B, coll, count, count, root, " (in place)", mode) && ok;

        /* Order-sensitive sums: close to the reference, the same bits everywhere. */
        for (size_t i = 0; i < count; i++)
            B->sbuf[i] = frac_pattern(B->rank, i);
        CU_CHECK(cu.MemcpyHtoD(B->dsbuf, B->sbuf, count * fs));
        bench_call(B, coll, count, root, mode);
        CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, count * fs));
        for (size_t i = 0; i < count; i++) {
            double want = 0.0;
            for (int r = 0; r < B->size; r++)
                want += frac_pattern(r, i);
            double d = (double)B->rbuf[i] - want;
            if (d > 1e-5 * want || -d > 1e-5 * want) {
                fprintf(stderr, "xccl_bench: rank %d: %s allreduce (fractions) count %zu: "
                        "element %zu is %.6f, expected %.6f\n", B->rank, mode_names[mode],
                        count, i, (double)B->rbuf[i], want);
                ok = false;
                break;
            }
        }
        uint64_t h = hash_bytes(B->rbuf, count * fs), hmin = 0, hmax = 0;
        MPI_Reduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
        if (B->rank == 0 && hmin != hmax) {
            fprintf(stderr, "xccl_bench: %s allreduce (fractions) count %zu: the result "
                    "differs between ranks (hash %016llx .. %016llx)\n", mode_names[mode],
                    count, (unsigned long long)hmin, (unsigned long long)hmax);
            ok = false;
        }
    }

    int mine = ok, all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    return all ? CK_OK : CK_FAIL;
}

/* ------------------------------------------------------------------------ */
/* Table output (rank 0)                                                    */
/* ------------------------------------------------------------------------ */

/* Columns: size count | xccl time algbw busbw | stock time algbw busbw | ratio check */
#define ROW_FMT "%12s %11s  %10s %7s %7s  %10s %7s %7s  %6s  %s\n"

static void print_table_header(const bench_t *B, int coll)
{
    if (B->rank != 0)
        return;
    char factor[32];
    if (coll == C_ALLREDUCE)
        snprintf(factor, sizeof factor, "2(p-1)/p = %.3f", busbw_factor(coll, B->size));
    else if (coll == C_BCAST)
        snprintf(factor, sizeof factor, "1");
    else
        snprintf(factor, sizeof factor, "(p-1)/p = %.3f", busbw_factor(coll, B->size));
    bool reduces = coll == C_ALLREDUCE || coll == C_REDUCE_SCATTER ||
                   coll == C_REDUCE_SCATTER_BLOCK;
    printf("#\n# %s  np=%d  MPI_FLOAT%s  rounds=%d (median)  busbw factor %s\n",
           colls[coll].name, B->size, reduces ? " MPI_SUM" : "", B->o->rounds, factor);
    if (!B->o->quiet)
        printf("# size = %s\n", colls[coll].size_means);
    if (!B->cv[coll].found && B->cv[C_ALLREDUCE].found)
        printf("# cvar %s not found: stock only\n", colls[coll].cvar);
    printf("#%25s%s  %s\n", "", "----------- xccl ---------",
           B->o->gpu ? "--------- staged ---------" : "---------- stock ---------");
    printf(ROW_FMT, "#    size(B)", "count", "time(us)", "algbw", "busbw", "time(us)", "algbw",
           "busbw", "ratio", "check");
    fflush(stdout);
}

/* GB/s in a 7-wide column; large values (np=1 no-ops) lose the decimals. */
static void fmt_bw(char *buf, size_t cap, double gbs)
{
    snprintf(buf, cap, gbs < 1000.0 ? "%.2f" : "%.0f", gbs);
}

static void print_row(const bench_t *B, int coll, const row_t *r)
{
    char size[24], count[24], cell[NMODE][3][16], ratio[16], check[16];
    const double bus = busbw_factor(coll, B->size);
    static const char *const ck[] = { [CK_NONE] = "-", [CK_OK] = "ok", [CK_FAIL] = "FAIL" };

    snprintf(size, sizeof size, "%zu", r->bytes);
    snprintf(count, sizeof count, "%zu", r->count);
    for (int m = 0; m < NMODE; m++) {
        if (r->t[m] > 0.0) {
            double algbw = (double)r->bytes / r->t[m] / 1e9;
            snprintf(cell[m][0], sizeof cell[m][0], "%.2f", r->t[m] * 1e6);
            fmt_bw(cell[m][1], sizeof cell[m][1], algbw);
            fmt_bw(cell[m][2], sizeof cell[m][2], algbw * bus);
        } else {               /* not measured (or below the timer's resolution) */
            for (int j = 0; j < 3; j++)
                snprintf(cell[m][j], sizeof cell[m][j], "-");
        }
    }
    if (r->t[M_XCCL] > 0.0 && r->t[M_STOCK] > 0.0)
        snprintf(ratio, sizeof ratio, "%.2f", r->t[M_STOCK] / r->t[M_XCCL]);
    else
        snprintf(ratio, sizeof ratio, "-");
    snprintf(check, sizeof check, "%s/%s", ck[r->check[M_XCCL]], ck[r->check[M_STOCK]]);

    printf(ROW_FMT, size, count, cell[M_XCCL][0], cell[M_XCCL][1], cell[M_XCCL][2],
           cell[M_STOCK][0], cell[M_STOCK][1], cell[M_STOCK][2], ratio, check);
    fflush(stdout);
}

static void print_summary(const bench_t *B, const summary_t *sums)
{
    const opts_t *o = B->o;
    printf("#\n# summary: geometric mean of ratio = %s time / xccl time (> 1: xccl faster)\n",
           mode_names[M_STOCK]);
    printf("# %-22s %16s %16s   %s\n", "collective", "sizes >= 1 MiB", "all sizes",
           "checks (sizes ok or FAIL / checked)");
    int xfail = 0, sfail = 0;
    for (int k = 0; k < o->ncolls; k++) {
        const summary_t *s = &sums[o->colls[k]];
        char big[32], all[32], checks[NMODE][32];
        if (s->n_big)
            snprintf(big, sizeof big, "%.3f (%d)", exp_any(s->logsum_big / s->n_big), s->n_big);
        else
            snprintf(big, sizeof big, "- (0)");
        if (s->n_all)
            snprintf(all, sizeof all, "%.3f (%d)", exp_any(s->logsum_all / s->n_all), s->n_all);
        else
            snprintf(all, sizeof all, "- (0)");
        for (int m = 0; m < NMODE; m++) {
            if (!s->run[m])
                snprintf(checks[m], sizeof checks[m], "%s -", mode_names[m]);
            else
                snprintf(checks[m], sizeof checks[m], "%s %s %d/%d", mode_names[m],
                         s->fail[m] ? "FAIL" : "ok", s->fail[m] ? s->fail[m] : s->run[m],
                         s->run[m]);
        }
        printf("# %-22s %16s %16s   %s, %s\n", colls[o->colls[k]].name, big, all,
               checks[M_XCCL], checks[M_STOCK]);
        xfail += s->fail[M_XCCL];
        sfail += s->fail[M_STOCK];
    }
    if (sfail)
        printf("# NOTE: %d %s-only check failure(s): Open MPI's own result was wrong; this\n"
               "#   does not count against xccl (exit status unaffected)\n", sfail,
               mode_names[M_STOCK]);
    printf("# result: %s\n", xfail ? "FAIL (xccl produced wrong results; see stderr)"
                                   : "all xccl checks passed (or xccl not measured)");
}

/* ------------------------------------------------------------------------ */
/* Kernel table (-k, rank 0)                                                */
/* ------------------------------------------------------------------------ */

static int kernel_cases(kcase_t *k)
{
    int n = 0;
#define KC(T, O, XT, XO) k[n++] = (kcase_t){ #T, #O, T, O, XT, XO }
    KC(MPI_INT8_T, MPI_SUM, XCCL_DT_INT8, XCCL_OP_SUM);
    KC(MPI_UINT8_T, MPI_SUM, XCCL_DT_UINT8, XCCL_OP_SUM);
    KC(MPI_INT16_T, MPI_SUM, XCCL_DT_INT16, XCCL_OP_SUM);
    KC(MPI_INT32_T, MPI_SUM, XCCL_DT_INT32, XCCL_OP_SUM);
    KC(MPI_INT64_T, MPI_SUM, XCCL_DT_INT64, XCCL_OP_SUM);
    KC(MPI_FLOAT, MPI_SUM, XCCL_DT_FLOAT, XCCL_OP_SUM);
    KC(MPI_DOUBLE, MPI_SUM, XCCL_DT_DOUBLE, XCCL_OP_SUM);
    KC(MPI_FLOAT, MPI_MAX, XCCL_DT_FLOAT, XCCL_OP_MAX);
    KC(MPI_DOUBLE, MPI_MAX, XCCL_DT_DOUBLE, XCCL_OP_MAX);
    KC(MPI_INT32_T, MPI_BXOR, XCCL_DT_INT32, XCCL_OP_BXOR);
    KC(MPI_INT32_T, MPI_LAND, XCCL_DT_INT32, XCCL_OP_LAND);
    KC(MPI_FLOAT_INT, MPI_MAXLOC, XCCL_DT_FLOAT_INT, XCCL_OP_MAXLOC);
    KC(MPI_DOUBLE_INT, MPI_MINLOC, XCCL_DT_DOUBLE_INT, XCCL_OP_MINLOC);
#undef KC
    return n;
}
#define MAX_KCASES 16

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: plenty for test inputs */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* Operand values for the comparison.  Narrow integer sums are made to
 * overflow (wrap vs saturate shows); float values are small integers so
 * results are exact; pair values repeat often so index tie-breaks matter. */
static void fill_operand(const kcase_t *kc, void *buf, size_t count, uint64_t seed)
{
    uint64_t s = seed | 1;
    memset(buf, 0, count * xccl_dtype_size(kc->xt));  /* defined padding bytes */
    for (size_t i = 0; i < count; i++) {
        uint64_t r = rng_next(&s);
        switch (kc->xt) {
        case XCCL_DT_INT8: ((int8_t *)buf)[i] = (int8_t)(100 + r % 28); break;
        case XCCL_DT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(200 + r % 56); break;
        case XCCL_DT_INT16: ((int16_t *)buf)[i] = (int16_t)(20000 + r % 12768); break;
        case XCCL_DT_INT32:
            ((int32_t *)buf)[i] = kc->xo == XCCL_OP_LAND && r % 3 == 0 ? 0 : (int32_t)(uint32_t)r;
            break;
        case XCCL_DT_INT64: ((int64_t *)buf)[i] = (int64_t)r; break;
        case XCCL_DT_FLOAT: ((float *)buf)[i] = (float)(r % 2001) - 1000.0f; break;
        case XCCL_DT_DOUBLE: ((double *)buf)[i] = (double)(r % 2001) - 1000.0; break;
        case XCCL_DT_FLOAT_INT:
            ((float_int_t *)buf)[i].v = (float)(r % 8);
            ((float_int_t *)buf)[i].i = (int)((r >> 8) % 1000);
            break;
        case XCCL_DT_DOUBLE_INT:
            ((double_int_t *)buf)[i].v = (double)(r % 8);
            ((double_int_t *)buf)[i].i = (int)((r >> 8) % 1000);
            break;
        default: break;
        }
    }
}

/* Do elements X and Y hold the same result?  Integers and floats bitwise;
 * pairs compare value and index only (padding is not part of the result). */
static bool same_elem(xccl_dtype_t t, const void *x, const void *y, size_t esize)
{
    if (t == XCCL_DT_FLOAT_INT) {
        const float_int_t *a = x, *b = y;
        return memcmp(&a->v, &b->v, sizeof a->v) == 0 && a->i == b->i;
    }
    if (t == XCCL_DT_DOUBLE_INT) {
        const double_int_t *a = x, *b = y;
        return memcmp(&a->v, &b->v, sizeof a->v) == 0 && a->i == b->i;
    }
    return memcmp(x, y, esize) == 0;
}

/* Is V the saturated (clamped) sum of A and B, for the narrow integer sums? */
static bool is_saturated_sum(xccl_dtype_t t, const void *a, const void *b, const void *v,
                             size_t i)
{
    long s, lo, hi, got;
    switch (t) {
    case XCCL_DT_INT8:
        s = (long)((const int8_t *)a)[i] + ((const int8_t *)b)[i];
        got = ((const int8_t *)v)[i]; lo = INT8_MIN; hi = INT8_MAX; break;
    case XCCL_DT_UINT8:
        s = (long)((const uint8_t *)a)[i] + ((const uint8_t *)b)[i];
        got = ((const uint8_t *)v)[i]; lo = 0; hi = UINT8_MAX; break;
    case XCCL_DT_INT16:
        s = (long)((const int16_t *)a)[i] + ((const int16_t *)b)[i];
        got = ((const int16_t *)v)[i]; lo = INT16_MIN; hi = INT16_MAX; break;
    default:
        return false;
    }
    return got == (s < lo ? lo : s > hi ? hi : s);
}

/* Seconds per call of one implementation: xccl (b = a op b through the
 * kernel) or stock (MPI_Reduce_local, which also computes b = a op b). */
static double time_kernel(const kcase_t *kc, xccl_reduce_fn_t fn, bool xccl, const void *a,
                          void *b, size_t count, size_t inner)
{
    double t0 = MPI_Wtime();
    for (size_t j = 0; j < inner; j++) {
        if (xccl)
            fn(b, a, b, count);
        else
            MPI_Reduce_local(a, b, (int)count, kc->mt, kc->mo);
    }
    return (MPI_Wtime() - t0) / (double)inner;
}

static void run_kernel_table(void)
{
    kcase_t cases[MAX_KCASES];
    const int ncases = kernel_cases(cases);
    const size_t maxb = kernel_sizes[NKSIZES - 1];
    /* a, b: timing operands; b1, b2: the two results of the comparison. */
    char *a = xmalloc(maxb), *b = xmalloc(maxb), *b1 = xmalloc(maxb), *b2 = xmalloc(maxb);
    bool any_sat = false;

    printf("# kernel table (rank 0): xccl_reduce_kernel() computing b = a op b vs\n"
           "#   MPI_Reduce_local(a, b) (Open MPI op framework, op/avx where it applies)\n"
           "# GB/s = bytes of one operand / time per call (GB = 1e9 B), median of %d\n"
           "#   interleaved samples of >= %zu MiB each; ratio = xccl GB/s / stock GB/s\n"
           "# result: both results compared element by element (exact inputs)\n",
           KERNEL_REPS, KERNEL_WORK >> 20);
    printf("# %-16s %-10s %9s %9s %10s %11s %6s  %s\n", "type", "op", "size(B)", "count",
           "xccl GB/s", "stock GB/s", "ratio", "result");

    for (int c = 0; c < ncases; c++) {
        const kcase_t *kc = &cases[c];
        const xccl_reduce_fn_t fn = xccl_reduce_kernel(kc->xt, kc->xo);
        const size_t esize = xccl_dtype_size(kc->xt);
        MPI_Aint lb, extent;
        MPI_Type_get_extent(kc->mt, &lb, &extent);
        for (size_t s = 0; s < NKSIZES; s++) {
            const size_t bytes = kernel_sizes[s], count = bytes / esize;
            printf("  %-16s %-10s %9zu %9zu ", kc->tname, kc->oname, bytes, count);
            if (!fn || (size_t)extent != esize || lb != 0) {
                printf("%10s %11s %6s  %s\n", "-", "-", "-",
                       fn ? "layout differs from MPI's" : "no xccl kernel");
                continue;
            }

            /* Correctness: the same operands through both. */
            fill_operand(kc, a, count, 0x1234 + s);
            fill_operand(kc, b1, count, 0x5678 + s);
            memcpy(b2, b1, count * esize);
            memcpy(b, b1, count * esize);   /* the untouched b, for the saturation test */
            fn(b1, a, b1, count);
            MPI_Reduce_local(a, b2, (int)count, kc->mt, kc->mo);
            size_t ndiff = 0;
            bool all_sat = true;
            for (size_t i = 0; i < count; i++) {
                if (same_elem(kc->xt, b1 + i * esize, b2 + i * esize, esize))
                    continue;
                ndiff++;
                all_sat = all_sat && kc->xo == XCCL_OP_SUM && is_saturated_sum(kc->xt, a, b, b2, i);
            }

            /* Timing: alternate which goes first; warm both up once. */
            const size_t inner = bytes >= KERNEL_WORK ? 1 : KERNEL_WORK / bytes;
            double gbs[NMODE][KERNEL_REPS];
            time_kernel(kc, fn, true, a, b, count, 1);
            time_kernel(kc, fn, false, a, b, count, 1);
            for (int r = 0; r < KERNEL_REPS; r++)
                for (int k = 0; k < NMODE; k++) {
                    int m = (r % 2 == 0) ? k : NMODE - 1 - k;
                    double t = time_kernel(kc, fn, m == M_XCCL, a, b, count, inner);
                    gbs[m][r] = (double)bytes / t / 1e9;
                }
            double gx = median(gbs[M_XCCL], KERNEL_REPS), gs = median(gbs[M_STOCK], KERNEL_REPS);

            char result[64];
            if (!ndiff)
                snprintf(result, sizeof result, "same");
            else
                snprintf(result, sizeof result, "DIFFERS %zu/%zu%s", ndiff, count,
                         all_sat ? " (a)" : "");
            any_sat |= ndiff && all_sat;
            printf("%10.2f %11.2f %6.2f  %s\n", gx, gs, gx / gs, result);
            fflush(stdout);
        }
    }
    if (any_sat)
        printf("# (a) stock op/avx saturates (ompi#8045): every differing stock element is the\n"
               "#     clamped sum; xccl wraps modulo 2^N, as Open MPI's own C loops (op/base) do\n");
    free(a);
    free(b);
    free(b1);
    free(b2);
}

/* ------------------------------------------------------------------------ */
/* CUDA device buffers (-g)                                                 */
/* ------------------------------------------------------------------------ */

/* Every rank's MINE is true?  MPI_Reduce and point-to-point only (not
 * intercepted by xccl), the answer on every rank. */
static bool agree_all(int mine)
{
    int all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        for (int r = 1; r < size; r++)
            MPI_Send(&all, 1, MPI_INT, r, 77, MPI_COMM_WORLD);
    else
        MPI_Recv(&all, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return all != 0;
}

/* Device buffers of the host buffers' size and contents; with -p the
 * staging (host) buffers move to pinned memory. */
static void gpu_buffers(bench_t *B)
{
    const size_t bytes = (B->cap + GUARD) * sizeof(float);
    CU_CHECK(cu.MemAlloc(&B->dsbuf, bytes));
    CU_CHECK(cu.MemAlloc(&B->drbuf, bytes));
    if (B->o->pinned) {
        void *ps = NULL, *pr = NULL;
        CU_CHECK(cu.MemHostAlloc(&ps, bytes, 0));
        CU_CHECK(cu.MemHostAlloc(&pr, bytes, 0));
        memcpy(ps, B->sbuf, bytes);
        memcpy(pr, B->rbuf, bytes);
        free(B->sbuf);
        free(B->rbuf);
        B->sbuf = ps;
        B->rbuf = pr;
    }
    CU_CHECK(cu.MemcpyHtoD(B->dsbuf, B->sbuf, bytes));
    CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, bytes));
}

static void gpu_free_buffers(bench_t *B)
{
    CU_CHECK(cu.MemFree(B->dsbuf));
    CU_CHECK(cu.MemFree(B->drbuf));
    if (B->o->pinned) {
        CU_CHECK(cu.MemFreeHost(B->sbuf));
        CU_CHECK(cu.MemFreeHost(B->rbuf));
    } else {
        free(B->sbuf);
        free(B->rbuf);
    }
    B->sbuf = B->rbuf = NULL;
}

/* What -g measures, and what one staging copy costs (rank 0 alone). */
static void print_gpu_header(const bench_t *B)
{
    double gbs[2][MEMCPY_REPS];
    size_t bytes = B->cap * sizeof(float);
    if (bytes > MEMCPY_BYTES)
        bytes = MEMCPY_BYTES;
    if (B->rank == 0) {
        for (int r = 0; r < MEMCPY_REPS; r++) {
            double t0 = MPI_Wtime();
            CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->dsbuf, bytes));
            double t1 = MPI_Wtime();
            CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, bytes));
            double t2 = MPI_Wtime();
            gbs[0][r] = t1 > t0 ? (double)bytes / (t1 - t0) / 1e9 : 0.0;
            gbs[1][r] = t2 > t1 ? (double)bytes / (t2 - t1) / 1e9 : 0.0;
        }
        char name[128] = "?";
        int ver = 0;
        if (cu.DeviceGetName)
            cu.DeviceGetName(name, (int)sizeof name, cu_dev);
        if (cu.DriverGetVersion)
            cu.DriverGetVersion(&ver);
        printf("# -g: CUDA device buffers (cuMemAlloc); %d device(s), each rank takes local rank\n"
               "#   mod %d (%d rank(s) per device on one node); rank 0: device %d \"%.60s\",\n"
               "#   driver %d.%d\n", cu_ndev, cu_ndev, (B->size + cu_ndev - 1) / cu_ndev,
               cu_ordinal, name, ver / 1000, ver % 1000 / 10);
        printf("# xccl:   the collective on the device buffers, xccl enabled\n"
               "# staged: cuMemcpyDtoH into %s host memory, the collective on the host\n"
               "#   buffers with xccl disabled (stock Open MPI), cuMemcpyHtoD back; all timed\n"
               "#   (bcast: the root copies down, the others copy up)\n",
               B->o->pinned ? "PINNED (cuMemHostAlloc, -p)" : "PAGEABLE (malloc; -p: pinned)");
        printf("# staging copies (rank 0 alone, %zu KiB, median of %d): DtoH %.2f GB/s, "
               "HtoD %.2f GB/s\n", bytes >> 10, MEMCPY_REPS, median(gbs[0], MEMCPY_REPS),
               median(gbs[1], MEMCPY_REPS));
        /* What xccl pays per buffer per call to classify it: one
         * cuPointerGetAttributes of these 5 attributes (gpu/xccl_gpu.c). */
        if (cu.PointerGetAttributes) {
            enum { CALLS = 10000 };
            double ns[2][MEMCPY_REPS];
            for (int k = 0; k < 2; k++) {
                CUdeviceptr p = k ? (CUdeviceptr)(uintptr_t)B->rbuf : (CUdeviceptr)(uintptr_t)B->dsbuf;
                for (int r = 0; r < MEMCPY_REPS; r++) {
                    unsigned type = 0, managed = 0;
                    void *ctx = NULL;
                    unsigned long long base = 0, id = 0;
                    int attrs[] = { 2, 8, 1, 11, 7 };   /* type, managed, context, base, id */
                    void *data[] = { &type, &managed, &ctx, &base, &id };
                    double t0 = MPI_Wtime();
                    for (int i = 0; i < CALLS; i++)
                        cu.PointerGetAttributes(5, attrs, data, p);
                    ns[k][r] = (MPI_Wtime() - t0) / CALLS * 1e9;
                }
            }
            printf("# classification (cuPointerGetAttributes, 5 attributes, median of %d x %d "
                   "calls): device buffer %.0f ns, host buffer %.0f ns\n", MEMCPY_REPS, CALLS,
                   median(ns[0], MEMCPY_REPS), median(ns[1], MEMCPY_REPS));
        }
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */
/* ------------------------------------------------------------------------ */

/* nccl-tests bus bandwidth factors (doc/PERFORMANCE.md). */
static double busbw_factor(int coll, int p)
{
    switch (coll) {
    case C_ALLREDUCE: return 2.0 * (p - 1) / p;
    case C_BCAST: return 1.0;
    default: return (double)(p - 1) / p;
    }
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median of v[0..n); reorders v. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ln and exp for the geometric means, without libm (the build line links
 * no -lm).  Accurate to ~1e-15, far beyond the noise of the timings. */
#define LN2 0.69314718055994530942
static double ln_pos(double x)
{
    int k = 0;
    while (x >= 2.0) { x *= 0.5; k++; }
    while (x < 1.0) { x *= 2.0; k--; }
    /* x in [1, 2): ln x = 2 atanh(y), y = (x - 1)/(x + 1) in [0, 1/3) */
    double y = (x - 1.0) / (x + 1.0), y2 = y * y, term = y, sum = 0.0;
    for (int n = 1; n < 70; n += 2) {
        sum += term / n;
        term *= y2;
    }
    return 2.0 * sum + k * LN2;
}

static double exp_any(double x)
{
    int k = 0;
    while (x > LN2) { x -= LN2; k++; }
    while (x < 0.0) { x += LN2; k--; }
    /* x in [0, ln 2]: Taylor series */
    double term = 1.0, sum = 1.0;
    for (int n = 1; n < 30; n++) {
        term *= x / n;
        sum += term;
    }
    for (; k > 0; k--) sum *= 2.0;
    for (; k < 0; k++) sum *= 0.5;
    return sum;
}

/* 64-byte aligned allocation (whole cache lines, like vector code likes);
 * out of memory is fatal. */
static void *xmalloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0 || !p)
        die(3, "out of memory (%zu bytes)", bytes);
    return p;
}

static void die(int status, const char *fmt, ...)
{
    int rank = -1;
    va_list ap;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "xccl_bench: rank %d: ", rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);              /* not reached */
}
