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
 * Switching: one MPI_T control variable per collective,
 * coll_xccl_<coll>_enable (xccl_bench_mpit.c); without them (xccl not
 * loaded) only the stock column is measured.
 *
 * Collectives: the six of nccl-tests' kind (allreduce, allgather,
 * reduce_scatter, reduce_scatter_block, alltoall, bcast), the further
 * eight xccl carries (reduce, barrier, allgatherv, alltoallv, gather,
 * gatherv, scatter, scatterv; rooted ones at root 0, barrier one row) and
 * alltoallv_moe, alltoallv with skewed counts drawn from a fixed seed
 * (xccl_bench_more.c: the layouts).
 *
 * Correctness: after the timed loop of the first round each mode runs the
 * collective once more on known inputs and every rank checks every element
 * (xccl_bench_check.c).  A failure in the xccl column makes the exit status
 * 1; a failure in the stock column is reported but is Open MPI's.
 *
 * -P: the persistent form too (xccl_bench_persist.c): per size one request
 * per mode (bcast one per root: a round's starts take its blocking calls'
 * root), MPI_Start + MPI_Wait timed in the same rounds (the order of
 * the four runs turns round every other round), checked like the calls.
 *
 * The control plane (timings, verdicts, the barriers around mode switches)
 * uses point-to-point messages (ctl_barrier, ctl_reduce), which xccl does
 * not intercept, so a broken xccl cannot distort the report.
 *
 * -k prints a table of the local reduction kernels instead: xccl's
 * xccl_reduce_kernel() against Open MPI's op framework (MPI_Reduce_local)
 * (xccl_bench_kernels.c).
 *
 * -g: CUDA device buffers (xccl_bench_gpu.c): the two columns become xccl
 * on cuMemAlloc buffers and "staged" (cuMemcpyDtoH to host, the stock
 * collective with xccl disabled, cuMemcpyHtoD back, timed together).
 * Rounds, medians and the table are as in host mode; ratio = staged time /
 * xccl time.  Without -g nothing changes.
 *
 * Files: xccl_bench_call.h lists them and what they share; this one has
 * main, the command line and the sweep.
 *
 * Build:  mpicc -std=gnu11 -O2 -I. tools/xccl_bench*.c base/reduce_kernels.c -ldl
 * Exit:   0 ok, 1 an xccl result was wrong, 2 bad command line, 3 MPI_T (or,
 *         with -g, CUDA driver) trouble, 4 xccl is loaded but not active on
 *         MPI_COMM_WORLD (its set-up failed: the xccl column then measured the
 *         fallback; with -g it is not measured; see coll_xccl_verbose 2),
 *         77 with -g: no libcuda.so.1 or no device ("SKIP: <reason>").
 */
#include <mpi.h>

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

#include "xccl_bench_call.h"

#define DEFAULT_COLLS "allreduce,allgather,reduce_scatter,alltoall,bcast"

static int parse_args(int argc, char **argv, opts_t *o, int rank);
static bool wants_gpu(int argc, char **argv);
static void run_collective(bench_t *B, int coll, summary_t *sum);
static void run_size(bench_t *B, int coll, size_t count, row_t *row);
static void bench_call(bench_t *B, int coll, size_t count, int root, int mode);

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    int rank, size;
    /* -g: the driver and a current context before MPI_Init, as CUDA
     * applications do (and as xccl's IPC path needs). */
    const bool gpu = wants_gpu(argc, argv);
    const char *skip = gpu ? gpu_setup() : NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    opts_t o;
    int prc = parse_args(argc, argv, &o, rank);
    if (prc >= 0) {            /* -h (0) or a bad command line (2) */
        MPI_Finalize();
        gpu_release();
        return prc;
    }
    if (gpu && !agree_all(skip == NULL)) {
        if (rank == 0)
            printf("SKIP: %s\n", skip ? skip : "another rank has no CUDA device");
        fflush(stdout);
        MPI_Finalize();
        gpu_release();
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
    ctl_barrier();

    bench_t B = { .rank = rank, .size = size, .o = &o };

    if (o.kernels) {
        if (rank == 0) {
            print_header(&B, libver, memcpy_gbs, false);
            run_kernel_table();
        }
        ctl_barrier();
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
    B.cap = B.rcap = o.maxbytes / sizeof(float);
    B.sbuf = xmalloc((B.cap + GUARD) * sizeof(float));
    B.rbuf = xmalloc((B.cap + GUARD) * sizeof(float));
    B.rcounts = xmalloc((size_t)size * sizeof(int));
    vlayout_alloc(&B);
    for (size_t i = 0; i < B.cap + GUARD; i++) {   /* alltoallv_moe may grow rbuf */
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
            if (sums[o.colls[k]].fail[M_XCCL] || sums[o.colls[k]].pfail[M_XCCL])
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
    vlayout_free(&B);
    MPI_Finalize();
    gpu_release();
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
        "                  [-w WARMUP] [-k] [-g [-p] [-S]] [-i] [-P] [-t] [-q] [-h]\n"
        "  -c LIST    collectives, comma separated, from allreduce, allgather, reduce_scatter,\n"
        "             reduce_scatter_block, alltoall, bcast, reduce, barrier, allgatherv,\n"
        "             alltoallv, gather, gatherv, scatter, scatterv, alltoallv_moe; all: every\n"
        "             one (default " DEFAULT_COLLS ")\n"
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
        "  -S         with -g: the staged call synchronises after its upload (cuMemcpyHtoD\n"
        "             from pageable memory may return before the data is on the device;\n"
        "             xccl's result is there when the call returns)\n"
        "  -i         the xccl column nonblocking: MPI_I<collective>, then MPI_Wait (the\n"
        "             stock or staged column stays blocking)\n"
        "  -I         both columns nonblocking: the stock column's MPI_I<collective> is the\n"
        "             fallback's nonblocking form (libnbc's under tuned)\n"
        "  -P         also persistent requests (MPI_<Coll>_init, or MPIX_ on Open MPI 4.1;\n"
        "             init once per size, MPI_Start + MPI_Wait per call), xccl and stock:\n"
        "             columns pxccl, pstock, px/x, ps/px, pcheck after check; exit 2 where\n"
        "             the MPI has no persistent collectives\n"
        "  -t         bcast: the root moves on every call (rank i %% size in call i),\n"
        "             as a program whose root changes; default: one root per round\n"
        "  -q         less output (no explanatory notes)\n"
        "  -h         this help\n"
        "Size (nccl-tests convention, MPI_FLOAT elements): allreduce, bcast, reduce: the\n"
        "buffer; allgather(v): total received; reduce_scatter(_block), alltoall(v): total\n"
        "sent; gather(v): total the root receives; scatter(v): total the root sends;\n"
        "alltoallv_moe: total sent, the sizes within 1 KiB..4 MiB; barrier: one row, 0 B.\n"
        "Rooted ones at root 0 (bcast: rotating, see -t).  The v forms' blocks: see\n"
        "docs/tools.md.\n");
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
        const bool all = strcmp(tok, "all") == 0;
        int id = -1;
        for (int c = 0; c < NCOLL; c++)
            if (all || strcmp(tok, colls[c].name) == 0) {
                id = c;
                bool dup = false;
                for (int k = 0; k < o->ncolls; k++)
                    dup |= o->colls[k] == id;
                if (!dup)
                    o->colls[o->ncolls++] = id;
            }
        if (id < 0)
            return false;
    }
    return o->ncolls > 0;
}

#define OPTSTRING "c:b:e:f:r:n:w:kgpiIPSqth"

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
        case 'i': o->nonblocking = true; break;
        case 'I': o->nonblocking = o->nonblocking_all = true; break;
        case 'P': o->persistent = true; break;
        case 'S': o->staged_sync = true; break;
        case 'q': o->quiet = true; break;
        case 't': o->rotate = true; break;
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
    if (!bad && o->staged_sync && !o->gpu)
        bad = "-S needs -g";
    if (!bad && o->persistent && (o->gpu || o->kernels))
        bad = "-P excludes -g and -k";
    for (int k = 0; !bad && o->gpu && k < o->ncolls; k++)
        if (o->colls[k] >= C_FIRST_MORE)
            bad = "-g: only allreduce, allgather, reduce_scatter(_block), alltoall, bcast";
    if (!bad && o->persistent && persist_unavailable()) {
        if (rank == 0)
            fprintf(stderr, "xccl_bench: -P: %s\n", persist_unavailable());
        return 2;
    }
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
/* Sweep                                                                    */
/* ------------------------------------------------------------------------ */

static void run_row(bench_t *B, int coll, size_t count, summary_t *sum)
{
    row_t row;
    run_size(B, coll, count, &row);
    if (B->rank == 0) {
        print_row(B, coll, &row);
        summary_add(sum, &row);
    }
}

static void run_collective(bench_t *B, int coll, summary_t *sum)
{
    const opts_t *o = B->o;
    const size_t p = (size_t)B->size;
    print_table_header(B, coll);

    if (coll == C_BARRIER) {   /* no payload: one row */
        run_row(B, coll, 0, sum);
        return;
    }
    size_t prev = 0;
    int rows = 0;
    for (size_t bytes = o->minbytes; bytes <= o->maxbytes; ) {
        size_t count = bytes / sizeof(float);
        if (colls[coll].blocked)
            count -= count % p;
        /* Skip sizes too small for one element (per block), and repeats
         * that rounding produced; alltoallv_moe: its own range. */
        bool in_range = coll != C_ALLTOALLV_MOE ||
                        (bytes >= MOE_MINBYTES && bytes <= MOE_MAXBYTES);
        if (count > 0 && count != prev && in_range) {
            prev = count;
            rows++;
            run_row(B, coll, count, sum);
        }
        if (bytes > o->maxbytes / o->factor)
            break;
        bytes *= o->factor;
    }
    if (rows == 0 && B->rank == 0 && coll == C_ALLTOALLV_MOE)
        printf("# no size of -b..-e within %zu..%zu B\n", MOE_MINBYTES, MOE_MAXBYTES);
}

/* Calls per round: a fixed payload per round, so small sizes get enough
 * calls to rise above the timer and large ones do not take forever. */
static int auto_iters(size_t bytes)
{
    size_t n = AUTO_PAYLOAD / bytes;
    return n < AUTO_MIN_IT ? AUTO_MIN_IT : n > AUTO_MAX_IT ? AUTO_MAX_IT : (int)n;
}

/* The timed loop of one blocking (or -i) run of MODE; returns the
 * per-call average, maxed over ranks, on rank 0. */
static double time_calls(bench_t *B, int coll, size_t count, int root, int mode, int iters)
{
    const opts_t *o = B->o;
    const bool rotate = o->rotate && coll == C_BCAST;
    for (int w = 0; w < o->warmup; w++)
        bench_call(B, coll, count, rotate ? (root + w) % B->size : root, mode);
    ctl_barrier();
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        bench_call(B, coll, count, rotate ? (root + i) % B->size : root, mode);
    /* -g: a copy from pageable memory to the device may return before its
     * DMA ends; the loop's last one counts too. */
    if (o->gpu)
        gpu_sync();
    double t = (MPI_Wtime() - t0) / iters, tmax = 0.0;
    /* The slowest rank defines the collective's time. */
    ctl_reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX);
    return tmax;
}

/* One row.  Runs: the modes' blocking calls, then with -P their persistent
 * requests (run v: mode v % NMODE, persistent from NMODE on); even rounds
 * in that order, odd rounds in the reverse one. */
static void run_size(bench_t *B, int coll, size_t count, row_t *row)
{
    const opts_t *o = B->o;
    const int R = o->rounds, nrun = o->persistent ? 2 * NMODE : NMODE;
    const size_t bytes = count * sizeof(float);
    const int iters = o->iters ? o->iters : auto_iters(bytes ? bytes : sizeof(float));
    double *samples = xmalloc((size_t)nrun * (size_t)R * sizeof(double));

    /* Without its cvar, xccl cannot be told apart: stock only. */
    const bool on[NMODE] = { [M_XCCL] = B->cv[coll].found && !B->no_xccl_col,
                             [M_STOCK] = true };

    for (int i = 0; i < B->size; i++)   /* MPI_Reduce_scatter: equal blocks */
        B->rcounts[i] = (int)(count / (size_t)B->size);
    vlayout_set(B, coll, count);        /* the v forms' counts and displacements */

    *row = (row_t){ .bytes = bytes, .count = count,
                    .t = { -1.0, -1.0 }, .check = { CK_NONE, CK_NONE },
                    .pt = { -1.0, -1.0 }, .pcheck = { CK_NONE, CK_NONE } };
    /* -P: per mode one request, bcast one per root (a round's persistent
     * starts take the root of its blocking calls); every rank makes them
     * in the same order */
    const int nroot = coll == C_BCAST ? B->size : 1;
    MPI_Request *preq = xmalloc((size_t)NMODE * (size_t)nroot * sizeof(MPI_Request));
    for (int i = 0; i < NMODE * nroot; i++)
        preq[i] = MPI_REQUEST_NULL;
    for (int m = 0; o->persistent && m < NMODE; m++)
        if (on[m]) {
            set_mode(B, coll, m);
            for (int root = 0; root < nroot; root++)
                persist_init(B, coll, count, root, &preq[m * nroot + root]);
        }
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < nrun; k++) {
            const int v = (r % 2 == 0) ? k : nrun - 1 - k, mode = v % NMODE;
            if (!on[mode])
                continue;
            set_mode(B, coll, mode);
            /* bcast's root moves per round; the further rooted ones: 0 */
            const int root = coll == C_BCAST ? r % B->size : 0;
            if (v >= NMODE) {  /* -P: the persistent request */
                samples[v * R + r] = persist_time(B, &preq[mode * nroot + root], iters);
                if (r == 0)
                    row->pcheck[mode] = persist_check(B, coll, count, root, &preq[mode * nroot + root], mode);
                continue;
            }
            samples[v * R + r] = time_calls(B, coll, count, root, mode, iters);
            if (r == 0)
                row->check[mode] = o->gpu ? check_coll_gpu(B, coll, count, mode)
                                          : check_coll(B, coll, count, mode);
        }
    }
    for (int i = 0; i < NMODE * nroot; i++)
        if (preq[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&preq[i]);
    free(preq);
    if (B->rank == 0)
        for (int v = 0; v < nrun; v++)
            if (on[v % NMODE])
                *(v < NMODE ? &row->t[v] : &row->pt[v - NMODE]) = median(samples + v * R, R);
    if (o->gpu) {
        row->d2d = gpu_d2d(B, bytes);
        row->bound = gpu_bound_copies(B, coll) * row->d2d;
    }
    free(samples);
}

static void bench_call(bench_t *B, int coll, size_t count, int root, int mode)
{
    if (!B->o->gpu)
        call_coll(B, coll, count, root);
    else
        gpu_call(B, coll, count, root, mode);
}
