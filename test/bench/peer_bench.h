/*
 * peer_bench.h: what the two files of peer_bench share (private to it).
 *
 *   peer_bench.c       main, the command line, the timed loops, the first
 *                      six collectives' calls and check, the helpers
 *   peer_bench_more.c  the further nine: their calls, the v forms' and
 *                      alltoallv_moe's counts and displacements, their check
 */
#ifndef PEER_BENCH_H
#define PEER_BENCH_H

#include <mpi.h>

#include <stdbool.h>
#include <stddef.h>

/* ------------------------------------------------------------------------ */
/* Types and constants                                                      */
/* ------------------------------------------------------------------------ */

enum coll_id {
    C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_REDUCE_SCATTER_BLOCK,
    C_ALLTOALL, C_BCAST,
    /* the further ones (peer_bench_more.c) */
    C_REDUCE, C_BARRIER, C_ALLGATHERV, C_ALLTOALLV, C_GATHER, C_GATHERV,
    C_SCATTER, C_SCATTERV,
    C_ALLTOALLV_MOE,           /* alltoallv, skewed counts drawn from MOE_SEED */
    NCOLL
};
#define C_FIRST_MORE C_REDUCE  /* the first collective peer_bench_more.c calls */

typedef struct {
    const char *name;
    bool reduces;              /* MPI_FLOAT SUM, else MPI_BYTE */
    bool blocked;              /* size is p blocks of size/p */
} coll_info_t;

extern const coll_info_t colls[NCOLL];

#define MAX_SIZES     64
#define GUARD         64       /* bytes after each result that must stay */
#define GUARD_BYTE    0xA5
/* Tags of the control plane's point-to-point messages */
#define TAG_AGREE     77       /* agree_double: the maximum, to every rank */
#define TAG_LEFT      78       /* barrier's check: "I have left" */
#define TAG_CTL       79       /* ctl_reduce: a rank's values, to rank 0 */
/* alltoallv_moe: the draw's seed and its sizes (xccl_bench's) */
#define MOE_SEED      0x5eed0fe7u
#define MOE_MINBYTES  ((size_t)1 << 10)
#define MOE_MAXBYTES  ((size_t)4 << 20)

typedef struct {
    int colls[NCOLL];
    int ncolls;
    size_t sizes[MAX_SIZES];
    int nsizes;
    int reps;
    size_t payload;            /* bytes per repetition, sets K */
    int kmax;
    double deadline;           /* -T seconds, 0: none */
    long warm_calls;           /* -w: warm-up calls at least (default 0) */
    double slow;               /* -L seconds, 0: none */
    bool memcpy_mode;
    bool nonblocking;          /* -n: MPI_I<coll> + MPI_Wait */
    bool per_call;             /* -P: each call timed alone, root i % p */
    bool persistent;           /* -i: MPI_<Coll>_init per size, then MPI_Start
                                * + MPI_Wait per call */
    int first_calls;           /* -F: calls per size on a new communicator, 0: off */
    bool known;                /* -K: with -F, the same calls on another new
                                * communicator first, untimed */
    size_t memcpy_bytes;
    const char *cvars[8];
    int ncvars;
} opts_t;

typedef struct {
    int rank, size;
    const opts_t *o;
    MPI_Comm comm;             /* the collectives under test run here (world,
                                * or -F's duplicate); the control plane: world */
    size_t gen;                /* the check's inputs: element i of rank r is
                                * byte_of / float_of (r, i + gen) */
    unsigned char *sbuf, *rbuf;
    size_t cap;                /* bytes of sbuf, guard included */
    size_t rcap;               /* bytes of rbuf, guard included (>= cap) */
    int *rcounts;              /* MPI_Reduce_scatter: equal blocks */
    /* The further collectives' layout at the current size (more_layout),
     * p entries each: counts and displacements to send and receive, and
     * where the block received from a rank starts in that rank's send
     * buffer. */
    int *vscounts, *vsdispls, *vrcounts, *vrdispls, *vpeer_off;
    double t_start;
    bool out_of_time;
    double last_call[NCOLL];   /* -L: seconds per call at the last size measured */
    size_t last_size[NCOLL];
    long wrong_total;
    MPI_Request *preq;         /* -i: this size's requests, one per root (p) */
} bench_t;

/* One call's shape: elements per block and bytes the size stands for. */
typedef struct {
    size_t count;              /* elements of the call (allreduce, bcast: all) */
    size_t blk;                /* elements per rank block (blocked collectives) */
    size_t esize;
    size_t bytes;              /* what the lines report */
} shape_t;

/* ------------------------------------------------------------------------ */
/* The check's inputs                                                       */
/* ------------------------------------------------------------------------ */

/* Byte i of rank r's input: differs between neighbouring bytes, ranks
 * (17 is odd: r * 17 mod 256 differs for r < 256) and 256-byte pages. */
static inline unsigned char byte_of(int r, size_t i)
{
    return (unsigned char)(i * 131u + (size_t)r * 17u + (i >> 8) * 7u);
}

/* Float i of rank r: a small integer, so any order of summation is exact. */
static inline float float_of(int r, size_t i)
{
    return (float)((i * 5u + (size_t)r * 11u) % 997u + 1u);
}

static inline float float_sum(int p, size_t i)
{
    float v = 0.0f;
    for (int r = 0; r < p; r++)
        v += float_of(r, i);
    return v;
}

/* ------------------------------------------------------------------------ */
/* Functions, by file                                                       */
/* ------------------------------------------------------------------------ */

/* peer_bench.c */
void *xalloc(size_t bytes);

/* peer_bench_more.c */
void more_alloc(bench_t *B);
void more_free(bench_t *B);
bool more_size_runs(int coll, size_t size);
void more_layout(bench_t *B, int coll, const shape_t *s);
void more_call(bench_t *B, int coll, const shape_t *s, int root);
long more_check(bench_t *B, int coll, const shape_t *s);
void more_fill(bench_t *B, int coll, const shape_t *s, int root);
long more_verify(bench_t *B, int coll, const shape_t *s, int root);
void more_describe_moe(const bench_t *B);

#endif
