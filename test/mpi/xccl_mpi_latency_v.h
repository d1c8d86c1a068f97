/*
 * What xccl_mpi_latency_v's two files share: the call hashes, the byte
 * values and layouts, the failure count, and the calls of the
 * collectives whose sizes every rank knows (xccl_mpi_latency_fixed.c).
 */
#ifndef XCCL_MPI_LATENCY_V_H
#define XCCL_MPI_LATENCY_V_H

#include <mpi.h>

#include <stddef.h>
#include <stdint.h>

#define MAXB 20480                 /* the largest block */
#define GAP 40                     /* the largest gap between two blocks */
#define FILL 0x5A                  /* receive buffers: what must stay where no block lands */

extern int rank, size, nfail;
extern uint64_t seed;

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static inline uint64_t h3(uint64_t a, uint64_t b, uint64_t c)
{
    return mix(a * 0x9E3779B97F4A7C15ull ^ mix(b + 0x632BE59BD9B4E019ull) ^ mix(c + 17));
}

/* Byte k of what rank s sends rank d in call i. */
static inline unsigned char bval(long i, int s, int d, size_t k)
{
    return (unsigned char) h3(seed ^ (uint64_t) i, (uint64_t) s * 4099 + (uint64_t) d, k);
}

void fail(long i, const char *coll, const char *what, long k, long got, long want);
/* Displacements of n blocks cnt[0..n) in a random order with gaps; the
 * span in bytes. */
size_t layout(long i, int salt, const int *cnt, int *displs, int n);
void *xmalloc(size_t n);

/* The collectives whose sizes every rank knows: gather, scatter, reduce,
 * allgatherv (xccl_mpi_latency_fixed.c). */
enum { F_GATHER, F_SCATTER, F_REDUCE, F_ALLGATHERV, NF };
/* The calls of ahead_run (three rings of the latency path's v calls). */
#define AHEAD 150

/* One such call's buffers and what it must leave in them. */
typedef struct {
    unsigned char *sb, *rb, *want;
    int *cnt, *dsp;
    size_t cap;
    long i;
    int which;
    MPI_Request req;
} fcall_t;

void f_alloc(fcall_t *f);
/* Starts call i (nonblocking: into f->req) or runs it; calls[which]
 * counts the calls that reach xccl. */
void fixed_start(fcall_t *f, long i, uint64_t h, long *calls, MPI_Comm comm, int nb);
/* Every byte of f's receive buffer, once its call ended. */
void fixed_check(const fcall_t *f);
void fixed_call(fcall_t *f, long i, uint64_t h, long *calls, MPI_Comm comm);
/* A run of n nonblocking gathers and reduces to an asleep root 0 (see
 * xccl_mpi_latency_fixed.c); the calls that passed. */
long ahead_run(fcall_t *f, long i0, int n, long *calls);

#endif
