/*
 * xccl_bench_call.h: what the files of xccl_bench share (private to the
 * tool).
 *
 *   xccl_bench.c         main, the command line, the sweep (rounds, modes,
 *                        the timed calls): above every other file
 *   xccl_bench_call.c    the collectives as the tool calls them, the table
 *                        of collectives, xmalloc and die: below every other
 *   xccl_bench_more.c    the v forms' and alltoallv_moe's counts and
 *                        displacements, what the further collectives send,
 *                        receive and a check expects
 *   xccl_bench_persist.c -P: persistent requests (MPI[X]_<Coll>_init),
 *                        their timed loops and checks
 *   xccl_bench_mpit.c    the MPI_T control variables that switch xccl on/off
 *   xccl_bench_check.c   the correctness check on host buffers: inputs,
 *                        references, element-by-element comparison
 *   xccl_bench_report.c  the header, the tables, the summary, medians and
 *                        geometric means
 *   xccl_bench_kernels.c -k: the reduction kernel table
 *   xccl_bench_gpu.c     -g: the CUDA driver (test/gpu/test_cuda.h, included
 *                        there only), device buffers, the staged column,
 *                        the device checks
 */
#ifndef XCCL_BENCH_CALL_H
#define XCCL_BENCH_CALL_H

#include <mpi.h>

#include <stdbool.h>
#include <stddef.h>

/* ------------------------------------------------------------------------ */
/* Types and constants                                                      */
/* ------------------------------------------------------------------------ */

enum coll_id {
    C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_REDUCE_SCATTER_BLOCK,
    C_ALLTOALL, C_BCAST,
    /* the further ones (xccl_bench_more.c); not with -g */
    C_REDUCE, C_BARRIER, C_ALLGATHERV, C_ALLTOALLV, C_GATHER, C_GATHERV,
    C_SCATTER, C_SCATTERV,
    C_ALLTOALLV_MOE,           /* alltoallv, skewed counts (coll_xccl_alltoallv_enable) */
    NCOLL
};
#define C_FIRST_MORE C_REDUCE  /* the first collective xccl_bench_more.c calls */

typedef struct {
    const char *name;
    const char *cvar;          /* MPI_T control variable routing it to xccl */
    bool blocked;              /* count must be a multiple of p */
    const char *size_means;    /* what "size" counts, for the table header */
} coll_info_t;

extern const coll_info_t colls[NCOLL];

enum mode { M_XCCL, M_STOCK, NMODE };
/* -g renames the second column "staged" (device -> host, stock, host -> device). */
extern const char *mode_names[NMODE];

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
    bool rotate;               /* -t: the root moves on every call (bcast) */
    bool gpu;                  /* -g: device buffers, xccl vs staged */
    bool pinned;               /* -p: staged through cuMemHostAlloc memory */
    bool nonblocking;          /* -i: xccl's calls as MPI_I<collective> + MPI_Wait */
    bool nonblocking_all;      /* -I: the stock column's calls too */
    bool staged_sync;          /* -S: with -g, the staged call waits for its upload */
    bool persistent;           /* -P: also persistent requests, xccl and stock */
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
    double d2d;                /* -g: seconds of one device-to-device copy of bytes (rank 0); 0: none */
    double bound;              /* -g: the collective's least memory traffic at that speed, seconds */
    double pt[NMODE];          /* -P: median seconds per MPI_Start + MPI_Wait; < 0: not measured */
    int pcheck[NMODE];         /* -P: enum check of the persistent request */
} row_t;

typedef struct {
    int rank, size;
    const opts_t *o;
    cvar_t cv[NCOLL];
    float *sbuf, *rbuf;        /* cap + GUARD elements each; -g: the staging buffers */
    size_t cap;
    int *rcounts;              /* size entries, for MPI_Reduce_scatter */
    size_t rcap;               /* elements rbuf holds before its guard (>= cap) */
    /* The v forms' layout at the current count (vlayout_set), size entries
     * each: counts and displacements to send and receive, and where in the
     * send buffer of the peer the block received from it starts. */
    int *vscounts, *vsdispls, *vrcounts, *vrdispls, *vpeer_off;
    int vscount, vrcount;      /* gatherv's, scatterv's one count of this rank */
    /* -g only */
    unsigned long long dsbuf, drbuf;   /* device buffers (CUdeviceptr), cap + GUARD */
    bool no_xccl_col;          /* xccl inactive: device buffers would reach stock */
    bool xccl_on;              /* the mode set is M_XCCL (set_mode) */
} bench_t;

/* Summary per collective: ratios of stock/xccl time, and check counts. */
typedef struct {
    double logsum_big, logsum_all;
    int n_big, n_all;
    int run[NMODE], fail[NMODE];     /* sizes checked, sizes failed */
    /* -P: ln(xccl persistent / xccl blocking), ln(stock persistent / xccl
     * persistent) over the sizes, and the persistent checks */
    double plog_blk, plog_stock;
    int pn_blk, pn_stock;
    int prun[NMODE], pfail[NMODE];
} summary_t;

#define AUTO_PAYLOAD  (64u << 20)  /* bytes per rank moved by one round */
#define AUTO_MIN_IT   2
#define AUTO_MAX_IT   200
#define GUARD         16           /* sentinel elements after each result */
#define SENTINEL      (-1.0f)      /* never produced by the check inputs */
#define MEMCPY_BYTES  ((size_t)64 << 20)
#define MEMCPY_REPS   5

/* ------------------------------------------------------------------------ */
/* Functions, by file                                                       */
/* ------------------------------------------------------------------------ */

/* xccl_bench_call.c */
void call_coll_on(bench_t *B, int coll, size_t count, int root, void *sbuf, void *rbuf);
void call_coll(bench_t *B, int coll, size_t count, int root);
void io_counts(const bench_t *B, int coll, size_t count, size_t *nsend, size_t *nrecv);
bool coll_rooted(int coll);
void ctl_barrier(void);
void ctl_reduce(const void *in, void *out, int n, MPI_Datatype dt, MPI_Op op);
void *xmalloc(size_t bytes);
void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* xccl_bench_more.c */
#define MOE_SEED      0x5eed0fe7u  /* alltoallv_moe's counts: the same draw everywhere */
#define MOE_MINBYTES  ((size_t)1 << 10)
#define MOE_MAXBYTES  ((size_t)4 << 20)
void vlayout_alloc(bench_t *B);
void vlayout_free(bench_t *B);
void vlayout_set(bench_t *B, int coll, size_t count);
void io_counts_at(const bench_t *B, int coll, size_t count, int root, size_t *nsend,
                  size_t *nrecv);
float expected_v(const bench_t *B, int coll, size_t i, int root);
void moe_describe(const bench_t *B);

/* xccl_bench_persist.c */
const char *persist_unavailable(void);
void persist_init(bench_t *B, int coll, size_t count, int root, MPI_Request *q);
double persist_time(bench_t *B, MPI_Request *q, int iters);
int persist_check(bench_t *B, int coll, size_t count, int root, MPI_Request *q, int mode);

/* xccl_bench_mpit.c */
bool cvars_open(bench_t *B);
bool xccl_world_active(void);
void cvars_close(bench_t *B);
void set_mode(bench_t *B, int coll, int mode);

/* Input element i of rank r: a small positive integer, so float sums over
 * ranks are exact (below 2^24 for p < 16000), and neighbouring elements and
 * ranks differ, so misplaced data shows. */
static inline float pattern(int r, size_t i)
{
    return (float)((i * 7 + (size_t)r * 13) % 1021 + 1);
}

/* xccl_bench_check.c */
bool verify(const bench_t *B, int coll, size_t count, size_t n, int root, const char *what,
            int mode);
void fill_check_inputs(bench_t *B, int coll, size_t count, int root, size_t *nsend,
                       size_t *nrecv);
int check_coll(bench_t *B, int coll, size_t count, int mode);

/* xccl_bench_report.c */
void library_version(char *buf, size_t cap);
double memcpy_bandwidth(void);
void print_header(const bench_t *B, const char *libver, double memcpy_gbs, bool xccl_loaded);
void print_table_header(const bench_t *B, int coll);
void print_row(const bench_t *B, int coll, const row_t *r);
void summary_add(summary_t *sum, const row_t *row);
void print_summary(const bench_t *B, const summary_t *sum);
double median(double *v, int n);
double ln_pos(double x);

/* xccl_bench_kernels.c */
void run_kernel_table(void);

/* xccl_bench_gpu.c */
const char *gpu_setup(void);
void gpu_release(void);
bool agree_all(int mine);
void gpu_buffers(bench_t *B);
void gpu_free_buffers(bench_t *B);
void print_gpu_header(const bench_t *B);
void gpu_call(bench_t *B, int coll, size_t count, int root, int mode);
void gpu_sync(void);
double gpu_d2d(bench_t *B, size_t bytes);
double gpu_bound_copies(const bench_t *B, int coll);
int check_coll_gpu(bench_t *B, int coll, size_t count, int mode);

#endif /* XCCL_BENCH_CALL_H */
