/*
 * peer_bench: a portable timing of collectives, for comparing MPI
 * implementations (Open MPI with or without xccl, Intel MPI, MPICH) on the
 * same machine.  Plain MPI-3 C, no xccl header: test/bench/compare_peers.sh
 * builds it with each implementation's own mpicc.  Collectives: allreduce,
 * allgather, reduce_scatter, alltoall, bcast (the default), reduce_scatter
 * _block, and the further ones of peer_bench_more.c (reduce, barrier,
 * allgatherv, alltoallv, gather, gatherv, scatter, scatterv, and
 * alltoallv_moe, alltoallv with skewed counts from a fixed seed).
 *
 * For each collective and size: a warm-up that doubles its calls until
 * they last WARM_S (this also estimates the time of a call), one
 * correctness check, then REPS repetitions of K calls.  K is
 * the same on every rank: PAYLOAD / bytes calls (at most KMAX), fewer
 * where the warm-up says they would last longer than REP_S, at least one.
 * The time of a repetition is the per-call average of its K calls, maximum
 * over ranks (the maximum of each rank's MPI_Wtime difference).
 *
 * What "size" means (nccl-tests' convention, as in xccl_bench):
 *   allreduce, bcast, reduce  the buffer of each rank
 *   allgather(v)          total received per rank (each sends size/p;
 *                         allgatherv: rank r a share ~ p + r)
 *   reduce_scatter(_block) total sent per rank (each receives size/p)
 *   alltoall(v)           total sent per rank (size/p to each rank;
 *                         alltoallv: to rank d a share ~ p + (r + d) % p)
 *   gather(v)             total the root receives (from each size/p;
 *                         gatherv: from rank r a share ~ p + r)
 *   scatter(v)            total the root sends (likewise)
 *   alltoallv_moe         total sent per rank, split by the draw; sizes
 *                         within 1 KiB..4 MiB only (as in xccl_bench)
 *   barrier               one row, size 0
 * (the layouts: peer_bench_more.c, the same as tools/xccl_bench_more.c's).
 * Reductions (allreduce, reduce_scatter(_block), reduce) are MPI_SUM on
 * MPI_FLOAT; the others move MPI_BYTE.
 * A block (size/p) is at least one element, so at 8 B and np 4
 * reduce_scatter moves 16 B: the lines print the bytes really moved.
 * MPI_Reduce_scatter runs with equal counts.  Reduce, gather(v) and
 * scatter(v) run at root 0, as in xccl_bench.  Bcast's root changes on
 * every call (call i of a repetition: (rep + i) % p), so that every root
 * weighs the same in every figure: some MPIs are fast from one root and
 * slow from another (twice as slow, for one, at np 2 and 1 MiB), and a
 * root fixed per repetition (rep % p) would let the median of 3
 * repetitions pick the root that came up twice.
 * -n times the nonblocking forms instead (each MPI_I<coll> followed by
 * MPI_Wait: the nonblocking path's cost, no overlap).
 * -i times the persistent forms instead: per size MPI_<Coll>_init on the
 * same buffers (bcast: one request per root, every root's made before the
 * warm-up), each call MPI_Start + MPI_Wait of the request of its root, the
 * check through the same requests; the requests are freed after the size.
 * MPI 4's MPI_<Coll>_init, or Open MPI 4.1's MPIX_<Coll>_init from
 * <mpi-ext.h>; where this MPI has neither, -i says so on stderr and exits
 * with status 3.  The first six collectives only; not with -n or -F.
 * -P times every call alone instead: a barrier, one call, this rank's
 * time; a repetition's figure is the median over its K calls of each
 * call's slowest rank (the T line's last field but one; the last is their
 * mean), and bcast's root changes on every call (call i's root is i % p).
 * What a code that calls a collective now and then, and not in a loop,
 * sees: no call hides behind the previous one's tail.  Where ranks share
 * cores, the median and the mean can tell different stories.
 * -F CALLS times the first calls of a size instead: what a program meets
 * that calls a size a few times (a solver whose sizes change, a script).
 * Per size a new communicator (MPI_Comm_dup of world, freed after the
 * size), no warm-up, CALLS calls on it, each after a barrier on it and
 * timed alone, every rooted one (bcast too) at root 0.  Call i's inputs are
 * the check's shifted by i (element j is byte_of / float_of (rank, j + i)),
 * so data changes from call to call, and every call's result is checked
 * (fill and compare outside the timed call).  The times of a call are
 * gathered after the last call; its figure is the slowest rank's.
 * -r, -p, -k and -w do not apply; not with -P or -m.
 *
 * The check runs the collective once on rank- and index-dependent data
 * (small integers for floats, so every sum is exact) and compares every
 * element, and a guard after the result, on every rank.  The further
 * rooted ones run it at root p-1 and at root 0, and a receive buffer they
 * do not use (reduce, gather(v) off the root) must stay untouched;
 * barrier's: a rank that leaves before the late rank p-1 has entered is
 * wrong.  A wrong result prints a WRONG line and makes the exit status 1.
 *
 * -T SECONDS starts no new size after SECONDS; -L SECONDS measures no size
 * of a collective whose call is predicted to take longer than SECONDS (the
 * last size's time per call, scaled by the ratio of the sizes from 64 KiB,
 * where bandwidth rules): an MPI that collapses when oversubscribed would
 * otherwise take hours.
 *
 * -m measures the one-copy limit instead: every rank memcpy's a buffer of
 * -M bytes (default 64 MiB, more than the last-level cache) at the same
 * time; GB/s per rank (bytes copied / time, slowest rank and mean).  Run
 * it with one rank per core to get "memcpy per core with all cores
 * copying".
 *
 * The control plane (agreements, timings, verdicts) uses point-to-point
 * messages and MPI_Reduce_local, so a broken collective cannot distort the
 * report, and MPI_Barrier before the timed calls: a barrier that returns
 * early blurs the start of the timings, no result, and barrier's own C
 * line shows it.
 *
 * Output, rank 0, one line per record (compare_peers.sh parses it):
 *   # comments (library version, np, options)
 *   T <coll> <size> <bytes> <rep> <calls> <us per call, max over ranks>
 *     (-P: the median over the calls, then their mean)
 *   C <coll> <size> ok|WRONG <wrong elements, summed over ranks;
 *                              barrier: ranks that left early>
 *   S <coll> <size> deadline|slow     (not measured: -T out of time, or
 *                                     -L predicted slower)
 *   F <coll> <size> <bytes> <calls> <us of call 1> ... <us of call CALLS>
 *     (-F: each the slowest rank's; the C line before it sums the wrong
 *     elements of all the calls)
 *   M memcpy <bytes> <rep> <GB/s slowest rank> <GB/s mean over ranks>
 *   V <cvar> <value>|absent           (-V: an MPI_T control variable, read
 *                                     after one 1 MiB allreduce)
 *
 * Build:  mpicc -std=gnu11 -O2 -o peer_bench test/bench/peer_bench.c \
 *           test/bench/peer_bench_more.c
 * Exit:   0 ok, 1 a wrong result, 2 bad command line or out of memory.
 */
#include <mpi.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer_bench.h"

/* The persistent collectives (-i): MPI 4's names, or Open MPI 4.1's pcollreq
 * extension under MPIX_ (Open MPI 5 has MPI 4's names with MPI_VERSION 3).
 * PB_PERSIST: 1 where this MPI has them under either name. */
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define PB_PERSIST 1
#define PB_Allreduce_init MPIX_Allreduce_init
#define PB_Allgather_init MPIX_Allgather_init
#define PB_Reduce_scatter_init MPIX_Reduce_scatter_init
#define PB_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#define PB_Alltoall_init MPIX_Alltoall_init
#define PB_Bcast_init MPIX_Bcast_init
#elif MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define PB_PERSIST 1
#define PB_Allreduce_init MPI_Allreduce_init
#define PB_Allgather_init MPI_Allgather_init
#define PB_Reduce_scatter_init MPI_Reduce_scatter_init
#define PB_Reduce_scatter_block_init MPI_Reduce_scatter_block_init
#define PB_Alltoall_init MPI_Alltoall_init
#define PB_Bcast_init MPI_Bcast_init
#else
#define PB_PERSIST 0
#endif

/* ------------------------------------------------------------------------ */
/* Constants (types: peer_bench.h)                                          */
/* ------------------------------------------------------------------------ */

const coll_info_t colls[NCOLL] = {
    [C_ALLREDUCE] = { "allreduce", true, false },
    [C_ALLGATHER] = { "allgather", false, true },
    [C_REDUCE_SCATTER] = { "reduce_scatter", true, true },
    [C_REDUCE_SCATTER_BLOCK] = { "reduce_scatter_block", true, true },
    [C_ALLTOALL] = { "alltoall", false, true },
    [C_BCAST] = { "bcast", false, false },
    [C_REDUCE] = { "reduce", true, false },
    [C_BARRIER] = { "barrier", false, false },
    [C_ALLGATHERV] = { "allgatherv", false, true },
    [C_ALLTOALLV] = { "alltoallv", false, true },
    [C_GATHER] = { "gather", false, true },
    [C_GATHERV] = { "gatherv", false, true },
    [C_SCATTER] = { "scatter", false, true },
    [C_SCATTERV] = { "scatterv", false, true },
    [C_ALLTOALLV_MOE] = { "alltoallv_moe", false, false },
};

#define DEFAULT_COLLS "allreduce,allgather,reduce_scatter,alltoall,bcast"
/* Powers of 4 from 16 B hold 64 KiB, 1 MiB, 16 MiB and 64 MiB; 8 B is the
 * smallest message. */
#define DEFAULT_SIZES "8,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M"
#define WARM_S        0.005    /* warm-up lasts at least this long ... */
#define REP_S         0.05     /* ... and a repetition about this long */

/* ------------------------------------------------------------------------ */
/* Prototypes (helpers follow main, top-down)                               */
/* ------------------------------------------------------------------------ */

static void parse_args(int argc, char **argv, opts_t *o, int rank);
static void print_header(const bench_t *B);
static void run_memcpy(bench_t *B);
static void run_size(bench_t *B, int coll, size_t size);
static void run_first(bench_t *B, int coll, size_t size);
static bool skip_size(bench_t *B, int coll, size_t size);
static shape_t shape_of(const bench_t *B, int coll, size_t size);
static void call_coll(bench_t *B, int coll, const shape_t *s, int root);
static void persist_make(bench_t *B, int coll, const shape_t *s);
static void persist_free(bench_t *B);
static long check_coll(bench_t *B, int coll, const shape_t *s);
static void fill_coll(bench_t *B, int coll, const shape_t *s, int root);
static long verify_coll(bench_t *B, int coll, const shape_t *s, int root);
static double timed_calls(bench_t *B, int coll, const shape_t *s, int root0, long k);
static double per_call_median(bench_t *B, int coll, const shape_t *s, long k, double *mean);
static void ctl_reduce(const bench_t *B, const void *in, void *out, int n, MPI_Datatype dt,
                       MPI_Op op);
static double agree_double(const bench_t *B, double v);
static void print_cvar(const bench_t *B, const char *name);
static size_t parse_bytes(const char *s, bool *ok);
static int cmp_size(const void *a, const void *b);
static int cmp_double(const void *a, const void *b);

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    opts_t o;
    bench_t B = { .o = &o, .comm = MPI_COMM_WORLD };
    MPI_Comm_rank(MPI_COMM_WORLD, &B.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &B.size);
    parse_args(argc, argv, &o, B.rank);
    if (o.persistent && !PB_PERSIST) {
        if (B.rank == 0)
            fprintf(stderr, "peer_bench: -i: this MPI (MPI_VERSION %d) has no persistent "
                    "collectives (MPI 4's MPI_<Coll>_init, Open MPI 4.1's MPIX_<Coll>_init)\n",
                    MPI_VERSION);
        MPI_Finalize();
        return 3;
    }
    print_header(&B);
    B.t_start = MPI_Wtime();

    if (o.memcpy_mode) {
        run_memcpy(&B);
    } else {
        size_t maxsize = o.sizes[o.nsizes - 1];
        /* The largest block rounding up (one element per rank) stays below this. */
        B.cap = B.rcap = maxsize + (size_t)B.size * sizeof(float) + GUARD;
        B.sbuf = xalloc(B.cap);
        B.rbuf = xalloc(B.cap);
        memset(B.sbuf, 0, B.cap);       /* touch every page before timing */
        memset(B.rbuf, 0, B.cap);
        B.rcounts = xalloc((size_t)B.size * sizeof(int));
        B.preq = xalloc((size_t)B.size * sizeof(MPI_Request));
        for (int i = 0; i < B.size; i++)
            B.preq[i] = MPI_REQUEST_NULL;
        more_alloc(&B);
        void (*run)(bench_t *, int, size_t) = o.first_calls ? run_first : run_size;
        for (int c = 0; c < o.ncolls; c++) {
            if (o.colls[c] == C_BARRIER) {     /* no payload: one row */
                run(&B, C_BARRIER, 0);
                continue;
            }
            for (int i = 0; i < o.nsizes; i++)
                if (more_size_runs(o.colls[c], o.sizes[i]))
                    run(&B, o.colls[c], o.sizes[i]);
        }
        more_free(&B);
        free(B.sbuf);
        free(B.rbuf);
        free(B.rcounts);
        free(B.preq);
    }
    if (o.ncvars > 0) {
        /* Components that set a communicator up on its first large call
         * (xccl) have done so before their variables are read. */
        size_t n = (size_t)1 << 18;
        float *a = xalloc(n * sizeof(float)), *b = xalloc(n * sizeof(float));
        memset(a, 0, n * sizeof(float));
        MPI_Allreduce(a, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        free(a);
        free(b);
    }
    for (int i = 0; i < o.ncvars; i++)
        print_cvar(&B, o.cvars[i]);
    if (B.rank == 0) {
        printf("# done in %.1f s%s\n", MPI_Wtime() - B.t_start,
               B.wrong_total ? ", WRONG results" : "");
        fflush(stdout);
    }
    MPI_Finalize();
    return B.wrong_total ? 1 : 0;
}

static void usage(void)
{
    fprintf(stderr,
        "usage: peer_bench [-c COLLS] [-s SIZES] [-r REPS] [-p PAYLOAD] [-k KMAX]\n"
        "                  [-T SECONDS] [-L SECONDS] [-w CALLS] [-V CVAR]... [-n|-i] [-P]\n"
        "       peer_bench -F CALLS [-K] [-c COLLS] [-s SIZES] [-T SECONDS] [-L SECONDS]\n"
        "                  [-V CVAR]... [-n]\n"
        "       peer_bench -m [-M BYTES] [-r REPS]\n"
        "  -c  collectives, comma-separated (default " DEFAULT_COLLS ";\n"
        "      also reduce_scatter_block, reduce, barrier, allgatherv, alltoallv,\n"
        "      gather, gatherv, scatter, scatterv, alltoallv_moe; all: every one)\n"
        "  -s  sizes in bytes, K/M/G suffixes (default " DEFAULT_SIZES ")\n"
        "  -r  timed repetitions per size (default 5)\n"
        "  -p  bytes per repetition: K = PAYLOAD/size calls (default 32M)\n"
        "  -k  at most this many calls per repetition (default 1000)\n"
        "  -T  start no new size after SECONDS (prints S lines for the rest)\n"
        "  -L  skip a size whose call is predicted to take more than SECONDS\n"
        "  -w  warm up with at least CALLS calls per size (OSU's large-message\n"
        "      default is 10; default: none beyond the timed batches)\n"
        "  -V  print the MPI_T control variable CVAR at the end (or 'absent')\n"
        "  -m  measure memcpy of -M bytes (default 64M) on every rank at once\n"
        "  -n  time the nonblocking forms (MPI_I<coll>, then MPI_Wait)\n"
        "  -i  time the persistent forms (MPI_<Coll>_init per size, then\n"
        "      MPI_Start + MPI_Wait per call; the first six collectives only;\n"
        "      exit status 3 where this MPI has none)\n"
        "  -P  time each call alone (barrier, call): the median over a\n"
        "      repetition's calls of the slowest rank; bcast's root is call %% p\n"
        "  -F  first calls: per size a new communicator (MPI_Comm_dup), CALLS\n"
        "      calls on it, each after a barrier and timed alone, each checked;\n"
        "      one F line per size with every call's time (root 0, no warm-up)\n"
        "  -K  with -F: the same calls first on another new communicator,\n"
        "      untimed (the first calls of a size the process has called)\n"
        "size: allreduce, bcast, reduce the buffer; allgather(v) total received;\n"
        "reduce_scatter(_block), alltoall(v) total sent; gather(v) total the root\n"
        "receives; scatter(v) total the root sends; alltoallv_moe total sent, the\n"
        "sizes within 1K..4M; barrier one row, 0 B.  reduce, gather(v), scatter(v)\n"
        "at root 0; bcast's root changes on every call.\n");
}

static void parse_args(int argc, char **argv, opts_t *o, int rank)
{
    *o = (opts_t){ .reps = 5, .payload = (size_t)32 << 20, .kmax = 1000,
                   .memcpy_bytes = (size_t)64 << 20 };
    const char *clist = DEFAULT_COLLS, *slist = DEFAULT_SIZES;
    bool ok = true;
    for (int i = 1; i < argc && ok; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        bool takes = a[0] == '-' && a[1] && !a[2] && strchr("csrpkTLVMwF", a[1]);
        if (takes && !v) {
            ok = false;
            break;
        }
        if (!strcmp(a, "-c")) clist = v;
        else if (!strcmp(a, "-s")) slist = v;
        else if (!strcmp(a, "-r")) o->reps = atoi(v);
        else if (!strcmp(a, "-p")) o->payload = parse_bytes(v, &ok);
        else if (!strcmp(a, "-k")) o->kmax = atoi(v);
        else if (!strcmp(a, "-T")) o->deadline = atof(v);
        else if (!strcmp(a, "-L")) o->slow = atof(v);
        else if (!strcmp(a, "-w")) o->warm_calls = atol(v);
        else if (!strcmp(a, "-F")) ok = (o->first_calls = atoi(v)) > 0;
        else if (!strcmp(a, "-M")) o->memcpy_bytes = parse_bytes(v, &ok);
        else if (!strcmp(a, "-V")) {
            if (o->ncvars < (int)(sizeof o->cvars / sizeof o->cvars[0]))
                o->cvars[o->ncvars++] = v;
        } else if (!strcmp(a, "-m")) {
            o->memcpy_mode = true;
            continue;
        } else if (!strcmp(a, "-n")) {
            o->nonblocking = true;
            continue;
        } else if (!strcmp(a, "-P")) {
            o->per_call = true;
            continue;
        } else if (!strcmp(a, "-K")) {
            o->known = true;
            continue;
        } else if (!strcmp(a, "-i")) {
            o->persistent = true;
            continue;
        } else {
            ok = false;
            break;
        }
        i++;
    }
    ok = ok && o->reps > 0 && o->kmax > 0 && o->payload > 0 && o->memcpy_bytes > 0;
    ok = ok && !(o->first_calls && (o->per_call || o->memcpy_mode));
    ok = ok && !(o->known && !o->first_calls);
    ok = ok && !(o->persistent && (o->first_calls || o->nonblocking || o->memcpy_mode));

    /* Collectives */
    char *dup = strdup(clist);
    for (char *save = NULL, *t = strtok_r(dup, ",", &save); t && ok;
         t = strtok_r(NULL, ",", &save)) {
        int c = 0;
        while (c < NCOLL && strcmp(colls[c].name, t))
            c++;
        if (!strcmp(t, "all") && o->ncolls == 0) {
            for (c = 0; c < NCOLL; c++)
                o->colls[o->ncolls++] = c;
        } else if (c == NCOLL || o->ncolls == NCOLL) {
            ok = false;
        } else {
            o->colls[o->ncolls++] = c;
        }
    }
    free(dup);
    /* Sizes, sorted, no repeats */
    dup = strdup(slist);
    for (char *save = NULL, *t = strtok_r(dup, ",", &save); t && ok;
         t = strtok_r(NULL, ",", &save)) {
        size_t b = parse_bytes(t, &ok);
        if (b == 0 || o->nsizes == MAX_SIZES)
            ok = false;
        else
            o->sizes[o->nsizes++] = b;
    }
    free(dup);
    if (ok && o->nsizes > 0) {
        qsort(o->sizes, (size_t)o->nsizes, sizeof o->sizes[0], cmp_size);
        int n = 1;
        for (int i = 1; i < o->nsizes; i++)
            if (o->sizes[i] != o->sizes[n - 1])
                o->sizes[n++] = o->sizes[i];
        o->nsizes = n;
    }
    ok = ok && (o->memcpy_mode || (o->ncolls > 0 && o->nsizes > 0));
    for (int c = 0; c < o->ncolls && o->persistent; c++)
        ok = ok && o->colls[c] < C_FIRST_MORE;
    if (!ok) {
        if (rank == 0)
            usage();
        MPI_Finalize();
        exit(2);
    }
}

static void print_header(const bench_t *B)
{
    if (B->rank != 0)
        return;
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    /* MPICH's string has several lines: keep the first. */
    ver[strcspn(ver, "\r\n")] = '\0';
    int major = 0, minor = 0;
    MPI_Get_version(&major, &minor);
    printf("# peer_bench np=%d mpi=%d.%d lib=%s\n", B->size, major, minor, ver);
    if (B->o->memcpy_mode)
        printf("# memcpy of %zu bytes on every rank at once, %d reps\n",
               B->o->memcpy_bytes, B->o->reps);
    else if (B->o->first_calls)
        printf("# first calls: per size a new communicator (MPI_Comm_dup of world) and %d\n"
               "#   calls on it%s, each after a barrier and timed alone;\n"
               "#   inputs change with the call, every result is checked; rooted ones at\n"
               "#   root 0; reductions MPI_FLOAT MPI_SUM, others MPI_BYTE\n"
               "# F coll size bytes calls us_call_1 ... us_call_%d (each the slowest rank)\n",
               B->o->first_calls,
               B->o->nonblocking ? " (nonblocking: MPI_I<coll> + MPI_Wait)" : "",
               B->o->first_calls);
    else
        printf("# reps=%d payload=%zu kmax=%d deadline=%g slow=%g%s%s%s; reductions MPI_FLOAT "
               "MPI_SUM, others MPI_BYTE\n# T coll size bytes rep calls "
               "us_per_call(max over ranks%s)\n",
               B->o->reps, B->o->payload, B->o->kmax, B->o->deadline, B->o->slow,
               B->o->nonblocking ? " nonblocking (MPI_I<coll> + MPI_Wait)" : "",
               B->o->persistent ? " persistent (MPI_<Coll>_init per size, MPI_Start + MPI_Wait)" : "",
               B->o->per_call ? " per-call (barrier, one call; bcast root = call % p)" : "",
               B->o->per_call ? "; median over the calls" : "");
    for (int c = 0; c < B->o->ncolls && !B->o->memcpy_mode; c++)
        if (B->o->colls[c] == C_ALLTOALLV_MOE)
            more_describe_moe(B);
    fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* The one-copy limit                                                       */
/* ------------------------------------------------------------------------ */

static void run_memcpy(bench_t *B)
{
    const size_t n = B->o->memcpy_bytes;
    unsigned char *src = xalloc(n), *dst = xalloc(n);
    memset(src, B->rank + 1, n);
    memset(dst, 0, n);
    /* Enough copies per repetition for ~0.25 GB, at least 2. */
    int k = (int)(((size_t)256 << 20) / n);
    k = k < 2 ? 2 : k;
    memcpy(dst, src, n);               /* warm-up */
    unsigned sink = 0;
    for (int r = 0; r < B->o->reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < k; i++) {
            memcpy(dst, src, n);
            sink += dst[(size_t)i * 4099 % n];   /* the copy is used */
        }
        double t = MPI_Wtime() - t0, tmax = 0.0, tsum = 0.0;
        ctl_reduce(B, &t, &tmax, 1, MPI_DOUBLE, MPI_MAX);
        ctl_reduce(B, &t, &tsum, 1, MPI_DOUBLE, MPI_SUM);
        if (B->rank == 0) {
            double bytes = (double)n * k;
            printf("M memcpy %zu %d %.3f %.3f\n", n, r, bytes / tmax / 1e9,
                   bytes / (tsum / B->size) / 1e9);
            fflush(stdout);
        }
    }
    if (sink == 1u)   /* never true in practice; keeps sink alive */
        fprintf(stderr, "#\n");
    free(src);
    free(dst);
}

/* ------------------------------------------------------------------------ */
/* One collective at one size                                               */
/* ------------------------------------------------------------------------ */

static void run_size(bench_t *B, int coll, size_t size)
{
    const opts_t *o = B->o;
    const char *name = colls[coll].name;
    if (skip_size(B, coll, size))
        return;
    shape_t s = shape_of(B, coll, size);
    for (int i = 0; i < B->size; i++)
        B->rcounts[i] = (int)s.blk;
    more_layout(B, coll, &s);
    if (o->persistent)
        persist_make(B, coll, &s);

    /* Warm-up: batches of 1, 2, 4, ... calls until at least three batches
     * have lasted WARM_S together, or a batch reaches K; the estimate of
     * a call is the fastest batch's (a first call that sets something up,
     * or a batch descheduled on a shared machine, must not shrink K),
     * slowest rank, the same on every rank. */
    long kpay = s.bytes ? (long)(o->payload / s.bytes) : o->kmax;
    kpay = kpay < 1 ? 1 : kpay > o->kmax ? o->kmax : kpay;
    double per_call = 0.0, spent = 0.0;
    long warmed = 0;
    for (long w = 1, n = 1;; w *= 2, n++) {
        double t = agree_double(B, timed_calls(B, coll, &s, 0, w));
        per_call = (n == 1 || t / (double)w < per_call) ? t / (double)w : per_call;
        spent += t;
        warmed += w;
        if (((spent >= WARM_S && n >= 3) || w >= kpay) && warmed >= o->warm_calls)
            break;
    }
    B->last_call[coll] = per_call;
    B->last_size[coll] = size;
    long k = kpay;
    if (per_call * (double)k > REP_S)
        k = (long)(REP_S / per_call);
    k = k < 1 ? 1 : k;

    long wrong = check_coll(B, coll, &s), wrong_sum = 0;
    ctl_reduce(B, &wrong, &wrong_sum, 1, MPI_LONG, MPI_SUM);
    if (B->rank == 0) {
        printf("C %s %zu %s %ld\n", name, size, wrong_sum ? "WRONG" : "ok", wrong_sum);
        B->wrong_total += wrong_sum;
    }

    for (int r = 0; r < o->reps; r++) {
        double t, tmax = 0.0, tmean = -1.0;
        if (o->per_call) {
            tmax = per_call_median(B, coll, &s, k, &tmean);
        } else {
            t = timed_calls(B, coll, &s, r % B->size, k) / (double)k;
            ctl_reduce(B, &t, &tmax, 1, MPI_DOUBLE, MPI_MAX);
        }
        if (B->rank == 0) {
            printf("T %s %zu %zu %d %ld %.3f", name, size, s.bytes, r, k, tmax * 1e6);
            if (tmean >= 0.0)
                printf(" %.3f", tmean * 1e6);
            printf("\n");
        }
    }
    if (o->persistent)
        persist_free(B);
    if (B->rank == 0)
        fflush(stdout);
}

/* -F: first calls.  CALLS calls of COLL at SIZE on a new communicator (a
 * duplicate of world, freed after the size), each after a barrier on it
 * and timed alone, every rooted one at root 0; call i's inputs are
 * generation i (1, 2, ...), so no call finds the previous one's data, and
 * every result is checked (barrier: check_barrier once after the calls).
 * The ranks' times go to rank 0 after the last call, so the control plane
 * never runs between them; rank 0 prints the C line (wrong elements over
 * all calls and ranks) and the F line (each call's slowest rank).  -K:
 * the same calls run first on another duplicate, untimed but checked. */
static void run_first(bench_t *B, int coll, size_t size)
{
    const int n = B->o->first_calls;
    const char *name = colls[coll].name;
    if (skip_size(B, coll, size))
        return;
    shape_t s = shape_of(B, coll, size);
    for (int i = 0; i < B->size; i++)
        B->rcounts[i] = (int)s.blk;
    more_layout(B, coll, &s);

    double *t = xalloc((size_t)n * sizeof(double));
    double *tmax = xalloc((size_t)n * sizeof(double));
    long wrong = 0, wrong_sum = 0;
    for (int pass = B->o->known ? 0 : 1; pass < 2; pass++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &B->comm);
        for (int i = 0; i < n; i++) {
            B->gen = (size_t)i + 1;
            fill_coll(B, coll, &s, 0);
            MPI_Barrier(B->comm);
            double t0 = MPI_Wtime();
            call_coll(B, coll, &s, 0);
            t[i] = MPI_Wtime() - t0;
            wrong += verify_coll(B, coll, &s, 0);
        }
        if (coll == C_BARRIER)
            wrong += more_check(B, coll, &s);
        MPI_Comm_free(&B->comm);
    }
    B->comm = MPI_COMM_WORLD;
    B->gen = 0;

    ctl_reduce(B, t, tmax, n, MPI_DOUBLE, MPI_MAX);
    ctl_reduce(B, &wrong, &wrong_sum, 1, MPI_LONG, MPI_SUM);
    double steady = 0.0;               /* -L: the median of the last third */
    if (B->rank == 0) {
        printf("C %s %zu %s %ld\n", name, size, wrong_sum ? "WRONG" : "ok", wrong_sum);
        B->wrong_total += wrong_sum;
        printf("F %s %zu %zu %d", name, size, s.bytes, n);
        for (int i = 0; i < n; i++)
            printf(" %.3f", tmax[i] * 1e6);
        printf("\n");
        fflush(stdout);
        int from = n - (n + 2) / 3;
        qsort(tmax + from, (size_t)(n - from), sizeof(double), cmp_double);
        int m = n - from;
        steady = m % 2 ? tmax[from + m / 2] : (tmax[from + m / 2 - 1] + tmax[from + m / 2]) / 2;
    }
    B->last_call[coll] = agree_double(B, steady);
    B->last_size[coll] = size;
    free(t);
    free(tmax);
}

/* Whether COLL at SIZE is left out (-T out of time, -L predicted slower
 * than the limit), the same on every rank; rank 0 prints its S line. */
static bool skip_size(bench_t *B, int coll, size_t size)
{
    const opts_t *o = B->o;
    if (!B->out_of_time && o->deadline > 0)
        B->out_of_time = agree_double(B, MPI_Wtime() - B->t_start) > o->deadline;
    const size_t last = B->last_size[coll];
    double predicted = B->last_call[coll];
    if (last >= ((size_t)64 << 10))
        predicted *= (double)size / (double)last;
    bool too_slow = o->slow > 0 && last > 0 && predicted > o->slow;
    if (!B->out_of_time && !too_slow)
        return false;
    if (B->rank == 0)
        printf("S %s %zu %s\n", colls[coll].name, size,
               B->out_of_time ? "deadline" : "slow");
    return true;
}

static shape_t shape_of(const bench_t *B, int coll, size_t size)
{
    const size_t p = (size_t)B->size;
    shape_t s = { .esize = colls[coll].reduces ? sizeof(float) : 1 };
    size_t elems = size / s.esize;
    if (elems == 0)
        elems = 1;
    if (colls[coll].blocked) {
        s.blk = elems / p ? elems / p : 1;
        s.count = s.blk * p;
    } else {
        s.count = elems;
        s.blk = elems / p;
    }
    if (coll == C_BARRIER)
        s.count = s.blk = 0;
    s.bytes = s.count * s.esize;
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* -P: K calls, each after a barrier and timed alone (bcast: call i's root
 * is i % p; the other rooted ones: root 0); on rank 0 the median over the
 * calls of the slowest rank's time, seconds, and their mean in *mean (0
 * elsewhere). */
static double per_call_median(bench_t *B, int coll, const shape_t *s, long k, double *mean)
{
    double *t = xalloc((size_t)k * sizeof(double));
    double *tmax = xalloc((size_t)k * sizeof(double));
    for (long i = 0; i < k; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        call_coll(B, coll, s, coll == C_BCAST ? (int)(i % B->size) : 0);
        t[i] = MPI_Wtime() - t0;
    }
    ctl_reduce(B, t, tmax, (int)k, MPI_DOUBLE, MPI_MAX);
    double med = 0.0;
    *mean = 0.0;
    if (B->rank == 0) {
        for (long i = 0; i < k; i++)
            *mean += tmax[i] / (double)k;
        qsort(tmax, (size_t)k, sizeof(double), cmp_double);
        med = k % 2 ? tmax[k / 2] : (tmax[k / 2 - 1] + tmax[k / 2]) / 2;
    }
    free(t);
    free(tmax);
    return med;
}

/* Barrier, K calls, this rank's elapsed time; call i's root (bcast) is
 * (root0 + i) % p, the other rooted ones' 0. */
static double timed_calls(bench_t *B, int coll, const shape_t *s, int root0, long k)
{
    int root = root0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < k; i++) {
        call_coll(B, coll, s, coll == C_BCAST ? root : 0);
        if (++root == B->size)
            root = 0;
    }
    return MPI_Wtime() - t0;
}

static void call_icoll(bench_t *B, int coll, const shape_t *s, int root)
{
    MPI_Comm w = B->comm;
    MPI_Request r = MPI_REQUEST_NULL;
    const int n = (int)s->count, blk = (int)s->blk;
    switch (coll) {
    case C_ALLREDUCE:
        MPI_Iallreduce(B->sbuf, B->rbuf, n, MPI_FLOAT, MPI_SUM, w, &r);
        break;
    case C_ALLGATHER:
        MPI_Iallgather(B->sbuf, blk, MPI_BYTE, B->rbuf, blk, MPI_BYTE, w, &r);
        break;
    case C_REDUCE_SCATTER:
        MPI_Ireduce_scatter(B->sbuf, B->rbuf, B->rcounts, MPI_FLOAT, MPI_SUM, w, &r);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        MPI_Ireduce_scatter_block(B->sbuf, B->rbuf, blk, MPI_FLOAT, MPI_SUM, w, &r);
        break;
    case C_ALLTOALL:
        MPI_Ialltoall(B->sbuf, blk, MPI_BYTE, B->rbuf, blk, MPI_BYTE, w, &r);
        break;
    case C_BCAST:
        MPI_Ibcast(B->rbuf, n, MPI_BYTE, root, w, &r);
        break;
    default:
        break;
    }
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

/* -i: this size's persistent requests on the buffers of every call (bcast:
 * one per root, in root order on every rank: the inits are collective). */
static void persist_make(bench_t *B, int coll, const shape_t *s)
{
#if PB_PERSIST
    MPI_Comm w = B->comm;
    MPI_Info in = MPI_INFO_NULL;
    const int n = (int)s->count, blk = (int)s->blk;
    MPI_Request *r = B->preq;
    switch (coll) {
    case C_ALLREDUCE:
        PB_Allreduce_init(B->sbuf, B->rbuf, n, MPI_FLOAT, MPI_SUM, w, in, r);
        break;
    case C_ALLGATHER:
        PB_Allgather_init(B->sbuf, blk, MPI_BYTE, B->rbuf, blk, MPI_BYTE, w, in, r);
        break;
    case C_REDUCE_SCATTER:
        PB_Reduce_scatter_init(B->sbuf, B->rbuf, B->rcounts, MPI_FLOAT, MPI_SUM, w, in, r);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        PB_Reduce_scatter_block_init(B->sbuf, B->rbuf, blk, MPI_FLOAT, MPI_SUM, w, in, r);
        break;
    case C_ALLTOALL:
        PB_Alltoall_init(B->sbuf, blk, MPI_BYTE, B->rbuf, blk, MPI_BYTE, w, in, r);
        break;
    case C_BCAST:
        for (int root = 0; root < B->size; root++)
            PB_Bcast_init(B->rbuf, n, MPI_BYTE, root, w, in, &r[root]);
        break;
    default:
        break;
    }
#else
    (void)B;
    (void)coll;
    (void)s;
#endif
}

static void persist_free(bench_t *B)
{
    for (int i = 0; i < B->size; i++)
        if (B->preq[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&B->preq[i]);
}

static void call_coll(bench_t *B, int coll, const shape_t *s, int root)
{
    MPI_Comm w = B->comm;
    const int n = (int)s->count, blk = (int)s->blk;
    if (coll >= C_FIRST_MORE) {
        more_call(B, coll, s, root);
        return;
    }
    if (B->o->persistent) {
        MPI_Request *r = &B->preq[coll == C_BCAST ? root : 0];
        MPI_Start(r);
        MPI_Wait(r, MPI_STATUS_IGNORE);
        return;
    }
    if (B->o->nonblocking) {
        call_icoll(B, coll, s, root);
        return;
    }
    switch (coll) {
    case C_ALLREDUCE:
        MPI_Allreduce(B->sbuf, B->rbuf, n, MPI_FLOAT, MPI_SUM, w);
        break;
    case C_ALLGATHER:
        MPI_Allgather(B->sbuf, blk, MPI_BYTE, B->rbuf, blk, MPI_BYTE, w);
        break;
    case C_REDUCE_SCATTER:
        MPI_Reduce_scatter(B->sbuf, B->rbuf, B->rcounts, MPI_FLOAT, MPI_SUM, w);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        MPI_Reduce_scatter_block(B->sbuf, B->rbuf, blk, MPI_FLOAT, MPI_SUM, w);
        break;
    case C_ALLTOALL:
        MPI_Alltoall(B->sbuf, blk, MPI_BYTE, B->rbuf, blk, MPI_BYTE, w);
        break;
    case C_BCAST:
        MPI_Bcast(B->rbuf, n, MPI_BYTE, root, w);
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Correctness                                                              */
/* ------------------------------------------------------------------------ */

/* Fill the input, poison the output and its guard, call once at root p-1
 * (bcast), compare on this rank.  Returns the number of wrong bytes or
 * elements here. */
static long check_coll(bench_t *B, int coll, const shape_t *s)
{
    if (coll >= C_FIRST_MORE)
        return more_check(B, coll, s);
    const int root = B->size - 1;
    fill_coll(B, coll, s, root);
    call_coll(B, coll, s, root);
    return verify_coll(B, coll, s, root);
}

/* Bytes of this rank's result (the first six collectives). */
static size_t out_bytes_of(int coll, const shape_t *s)
{
    const size_t elems = (coll == C_REDUCE_SCATTER || coll == C_REDUCE_SCATTER_BLOCK)
                             ? s->blk : s->count;
    return elems * s->esize;
}

/* This rank's input of one call of COLL at ROOT, element i being
 * byte_of / float_of (rank, i + B->gen); its output and guard poisoned. */
static void fill_coll(bench_t *B, int coll, const shape_t *s, int root)
{
    if (coll >= C_FIRST_MORE) {
        more_fill(B, coll, s, root);
        return;
    }
    const int me = B->rank;
    const size_t g = B->gen;
    float *sf = (float *)B->sbuf;

    memset(B->rbuf, GUARD_BYTE, out_bytes_of(coll, s) + GUARD);
    switch (coll) {
    case C_ALLREDUCE:
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_BLOCK:
        for (size_t i = 0; i < s->count; i++)
            sf[i] = float_of(me, i + g);
        break;
    case C_ALLGATHER:
        for (size_t i = 0; i < s->blk; i++)
            B->sbuf[i] = byte_of(me, i + g);
        break;
    case C_ALLTOALL:                   /* byte i goes to rank i / blk */
        for (size_t i = 0; i < s->count; i++)
            B->sbuf[i] = byte_of(me, i + g);
        break;
    case C_BCAST:
        if (me == root)
            for (size_t i = 0; i < s->count; i++)
                B->rbuf[i] = byte_of(root, i + g);
        break;
    default:
        break;
    }
}

/* Compare the result of one call of COLL at ROOT, on fill_coll's inputs,
 * and the guard after it on this rank.  Returns the number of wrong bytes
 * or elements here. */
static long verify_coll(bench_t *B, int coll, const shape_t *s, int root)
{
    if (coll >= C_FIRST_MORE)
        return more_verify(B, coll, s, root);
    const int me = B->rank, p = B->size;
    const size_t g = B->gen, out = out_bytes_of(coll, s);
    const float *rf = (const float *)B->rbuf;

    long wrong = 0;
    switch (coll) {
    case C_ALLREDUCE:
        for (size_t i = 0; i < s->count; i++)
            wrong += rf[i] != float_sum(p, i + g);
        break;
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_BLOCK:
        for (size_t i = 0; i < s->blk; i++)
            wrong += rf[i] != float_sum(p, (size_t)me * s->blk + i + g);
        break;
    case C_ALLGATHER:
        for (size_t i = 0; i < s->count; i++)
            wrong += B->rbuf[i] != byte_of((int)(i / s->blk), i % s->blk + g);
        break;
    case C_ALLTOALL:                   /* block j came from rank j's block me */
        for (size_t i = 0; i < s->count; i++)
            wrong += B->rbuf[i] != byte_of((int)(i / s->blk),
                                           (size_t)me * s->blk + i % s->blk + g);
        break;
    case C_BCAST:
        for (size_t i = 0; i < s->count; i++)
            wrong += B->rbuf[i] != byte_of(root, i + g);
        break;
    default:
        break;
    }
    for (size_t i = 0; i < GUARD; i++)
        wrong += B->rbuf[out + i] != GUARD_BYTE;
    return wrong;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* OP (MPI_MAX or MPI_SUM) of IN's N values of type DT over the ranks, into
 * OUT on rank 0: every rank sends rank 0 its values, which it combines with
 * MPI_Reduce_local.  Point-to-point, as MPI_Reduce is a collective under
 * test. */
static void ctl_reduce(const bench_t *B, const void *in, void *out, int n, MPI_Datatype dt,
                       MPI_Op op)
{
    if (B->rank != 0) {
        MPI_Send(in, n, dt, 0, TAG_CTL, MPI_COMM_WORLD);
        return;
    }
    int esize = 0;
    MPI_Type_size(dt, &esize);
    void *tmp = xalloc((size_t)n * (size_t)esize);
    memcpy(out, in, (size_t)n * (size_t)esize);
    for (int r = 1; r < B->size; r++) {
        MPI_Recv(tmp, n, dt, r, TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Reduce_local(tmp, out, n, dt, op);
    }
    free(tmp);
}

/* The maximum of V over ranks, known to every rank (ctl_reduce, then rank
 * 0 sends it to each). */
static double agree_double(const bench_t *B, double v)
{
    double m = 0.0;
    ctl_reduce(B, &v, &m, 1, MPI_DOUBLE, MPI_MAX);
    if (B->rank == 0)
        for (int r = 1; r < B->size; r++)
            MPI_Send(&m, 1, MPI_DOUBLE, r, TAG_AGREE, MPI_COMM_WORLD);
    else
        MPI_Recv(&m, 1, MPI_DOUBLE, 0, TAG_AGREE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return m;
}

/* The value of an MPI_T control variable (int, unsigned, bool, double
 * scalars), or "absent".  Read on rank 0 only. */
static void print_cvar(const bench_t *B, const char *name)
{
    if (B->rank != 0)
        return;
    int provided, n = 0, idx = -1;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        printf("V %s absent\n", name);
        return;
    }
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n && idx < 0; i++) {
        char nm[256], desc[16];
        int nlen = sizeof nm, dlen = sizeof desc, verb, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, nm, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope)
                == MPI_SUCCESS && !strcmp(nm, name) && bind == MPI_T_BIND_NO_OBJECT)
            idx = i;
    }
    if (idx < 0) {
        printf("V %s absent\n", name);
    } else {
        char nm[256], desc[16];
        int nlen = sizeof nm, dlen = sizeof desc, verb, bind, scope, count = 0;
        MPI_Datatype dt;
        MPI_T_enum en;
        MPI_T_cvar_handle h;
        union { int i; unsigned u; double d; bool b; long long ll; unsigned char raw[64]; } v;
        memset(&v, 0, sizeof v);
        MPI_T_cvar_get_info(idx, nm, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope);
        if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS || count != 1
                || MPI_T_cvar_read(h, &v) != MPI_SUCCESS)
            printf("V %s unreadable\n", name);
        else if (dt == MPI_C_BOOL)
            printf("V %s %d\n", name, v.b ? 1 : 0);
        else if (dt == MPI_INT)
            printf("V %s %d\n", name, v.i);
        else if (dt == MPI_UNSIGNED)
            printf("V %s %u\n", name, v.u);
        else if (dt == MPI_DOUBLE)
            printf("V %s %g\n", name, v.d);
        else
            printf("V %s unreadable\n", name);
        if (count == 1)
            MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    fflush(stdout);
}

/* "64", "16K", "1M", "2G" (powers of 1024). */
static size_t parse_bytes(const char *s, bool *ok)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) {
        *ok = false;
        return 0;
    }
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        *ok = false;
    return (size_t)v;
}

void *xalloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
        fprintf(stderr, "peer_bench: out of memory (%zu bytes)\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}
