/*
 * xccl_bench_more.c: the layouts of the further collectives (reduce,
 * barrier, allgatherv, alltoallv, gather, gatherv, scatter, scatterv) and
 * of alltoallv_moe: the v forms' counts and displacements at each size,
 * the elements each rank sends and receives, and the value a check
 * expects in a v form's receive buffer.
 *
 * Layouts at a row's count of MPI_FLOAT elements (blocks contiguous, in
 * rank order):
 *   allgatherv, gatherv, scatterv: rank r's block is share(r), the count
 *     split in proportion to p + r (mildly uneven; zeros at small sizes).
 *   alltoallv: rank s sends rank d share((s + d) % p): every rank sends
 *     and receives the count in all, in blocks of different sizes.
 *   alltoallv_moe: rank s sends rank d moe(s, d) elements, a draw from
 *     MOE_SEED that every rank computes alike (so each knows what it
 *     receives): about a quarter of the pairs get nothing, the others a
 *     weight (16..31) << k with P(k) = 2^-(k+1), k <= 12, a heavy tail like
 *     the tokens a mixture-of-experts layer routes to its experts.  Every
 *     rank sends the count; what a rank receives is the draw's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xccl_bench_call.h"

/* ------------------------------------------------------------------------ */
/* Counts                                                                   */
/* ------------------------------------------------------------------------ */

/* Elements of block r when COUNT is split in proportion to p + r:
 * cum(k) = sum_{j<k} (p + j), block r = [floor(count cum(r) / W),
 * floor(count cum(r+1) / W)) with W = cum(p).  The count is taken apart
 * as q W + rem so the products stay within 64 bits. */
static uint64_t cum(uint64_t k, uint64_t p)
{
    return k * p + k * (k - 1) / 2;    /* k = 0: 0 (unsigned wrap times 0) */
}

static int share(size_t count, int p, int r)
{
    const uint64_t P = (uint64_t)p, W = cum(P, P), q = count / W, rem = count % W;
    const uint64_t lo = cum((uint64_t)r, P), hi = cum((uint64_t)r + 1, P);
    return (int)(q * (hi - lo) + rem * hi / W - rem * lo / W);
}

/* splitmix64's finaliser: a well mixed 64-bit hash of X. */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The draw's weight of the pair (s, d): 0 for about a quarter of the
 * pairs, else (16..31) << k, k geometric (the trailing zeros of a hash). */
static uint64_t moe_weight(int s, int d)
{
    uint64_t h = mix(MOE_SEED ^ mix((uint64_t)(uint32_t)s << 32 | (uint32_t)d));
    if ((h & 3) == 0)
        return 0;
    unsigned k = (unsigned)__builtin_ctzll((h >> 2) | ((uint64_t)1 << 12));
    return (16 + (h >> 40) % 16) << k;
}

/* Rank s's row of the draw for a total of N elements: c[d] elements to
 * rank d, summing to N.  Floors of the proportional shares; what they
 * leave goes one by one to the destinations with a weight, in rank order.
 * A row without any weight sends all to one rank the hash picks.  W: p
 * scratch entries. */
static void moe_row(int s, size_t N, int p, uint64_t *W, int *c)
{
    uint64_t sum = 0;
    for (int d = 0; d < p; d++)
        sum += W[d] = moe_weight(s, d);
    if (sum == 0)
        sum = W[mix(MOE_SEED ^ (uint64_t)s) % (uint64_t)p] = 16;
    size_t given = 0;
    for (int d = 0; d < p; d++) {
        c[d] = (int)((uint64_t)N * W[d] / sum);
        given += (size_t)c[d];
    }
    for (int d = 0; given < N; d = (d + 1) % p)
        if (W[d]) {
            c[d]++;
            given++;
        }
}

/* ------------------------------------------------------------------------ */
/* Layouts                                                                  */
/* ------------------------------------------------------------------------ */

void vlayout_alloc(bench_t *B)
{
    const size_t p = (size_t)B->size;
    int *all = xmalloc(5 * p * sizeof(int));
    memset(all, 0, 5 * p * sizeof(int));
    B->vscounts = all;
    B->vsdispls = all + p;
    B->vrcounts = all + 2 * p;
    B->vrdispls = all + 3 * p;
    B->vpeer_off = all + 4 * p;
}

void vlayout_free(bench_t *B)
{
    free(B->vscounts);         /* the first array owns the allocation */
    B->vscounts = B->vsdispls = B->vrcounts = B->vrdispls = B->vpeer_off = NULL;
}

static void prefix(const int *counts, int *displs, int p)
{
    int at = 0;
    for (int r = 0; r < p; r++) {
        displs[r] = at;
        at += counts[r];
    }
}

/* The receive buffer must hold N elements and its guard (alltoallv_moe
 * may receive more than it sends); its new part starts as zeros. */
static void rbuf_reserve(bench_t *B, size_t n)
{
    if (n <= B->rcap)
        return;
    float *nb = xmalloc((n + GUARD) * sizeof(float));
    memset(nb, 0, (n + GUARD) * sizeof(float));
    free(B->rbuf);
    B->rbuf = nb;
    B->rcap = n;
}

/* The layout of COLL at COUNT on this rank (see the top of the file); a
 * no-op for the collectives without one. */
void vlayout_set(bench_t *B, int coll, size_t count)
{
    const int p = B->size, me = B->rank;
    switch (coll) {
    case C_ALLGATHERV:
    case C_GATHERV:
    case C_SCATTERV:
        for (int r = 0; r < p; r++)
            B->vscounts[r] = B->vrcounts[r] = share(count, p, r);
        prefix(B->vscounts, B->vsdispls, p);
        prefix(B->vrcounts, B->vrdispls, p);
        memset(B->vpeer_off, 0, (size_t)p * sizeof(int));
        B->vscount = B->vrcount = share(count, p, me);
        break;
    case C_ALLTOALLV:
        for (int r = 0; r < p; r++) {
            B->vscounts[r] = share(count, p, (me + r) % p);
            B->vrcounts[r] = share(count, p, (r + me) % p);
            int off = 0;       /* where rank r's block for me starts in its send buffer */
            for (int d = 0; d < me; d++)
                off += share(count, p, (r + d) % p);
            B->vpeer_off[r] = off;
        }
        prefix(B->vscounts, B->vsdispls, p);
        prefix(B->vrcounts, B->vrdispls, p);
        break;
    case C_ALLTOALLV_MOE: {
        uint64_t *w = xmalloc((size_t)p * sizeof *w);
        int *row = xmalloc((size_t)p * sizeof *row);
        moe_row(me, count, p, w, B->vscounts);
        for (int s = 0; s < p; s++) {
            moe_row(s, count, p, w, row);
            B->vrcounts[s] = row[me];
            int off = 0;
            for (int d = 0; d < me; d++)
                off += row[d];
            B->vpeer_off[s] = off;
        }
        free(row);
        free(w);
        prefix(B->vscounts, B->vsdispls, p);
        prefix(B->vrcounts, B->vrdispls, p);
        rbuf_reserve(B, (size_t)B->vrdispls[p - 1] + (size_t)B->vrcounts[p - 1]);
        break;
    }
    default:
        break;
    }
}

/* Elements of the send and receive buffer COLL uses at COUNT on this rank
 * with ROOT (the buffers a rank does not use: 0). */
void io_counts_at(const bench_t *B, int coll, size_t count, int root, size_t *nsend,
                  size_t *nrecv)
{
    const size_t blk = count / (size_t)B->size, last = (size_t)B->size - 1;
    const bool am_root = B->rank == root;
    switch (coll) {
    case C_REDUCE:
        *nsend = count;
        *nrecv = am_root ? count : 0;
        break;
    case C_BARRIER:
        *nsend = *nrecv = 0;
        break;
    case C_ALLGATHERV:
        *nsend = (size_t)B->vscount;
        *nrecv = count;
        break;
    case C_ALLTOALLV:
    case C_ALLTOALLV_MOE:
        *nsend = (size_t)B->vsdispls[last] + (size_t)B->vscounts[last];
        *nrecv = (size_t)B->vrdispls[last] + (size_t)B->vrcounts[last];
        break;
    case C_GATHER:
        *nsend = blk;
        *nrecv = am_root ? count : 0;
        break;
    case C_GATHERV:
        *nsend = (size_t)B->vscount;
        *nrecv = am_root ? count : 0;
        break;
    case C_SCATTER:
        *nsend = am_root ? count : 0;
        *nrecv = blk;
        break;
    case C_SCATTERV:
        *nsend = am_root ? count : 0;
        *nrecv = (size_t)B->vrcount;
        break;
    default:
        io_counts(B, coll, count, nsend, nrecv);
        break;
    }
}

/* Expected element i of a v form's receive buffer on this rank (the
 * inputs are pattern(rank, index in its send buffer)). */
float expected_v(const bench_t *B, int coll, size_t i, int root)
{
    if (coll == C_SCATTERV)
        return pattern(root, (size_t)B->vsdispls[B->rank] + i);
    /* The block holding i: the last rank whose displacement is <= i (a
     * zero block shares its displacement with the next one). */
    int lo = 0, hi = B->size - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if ((size_t)B->vrdispls[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return pattern(lo, (size_t)B->vpeer_off[lo] + i - (size_t)B->vrdispls[lo]);
}

/* ------------------------------------------------------------------------ */
/* The draw, described                                                      */
/* ------------------------------------------------------------------------ */

/* Rank 0: how skewed alltoallv_moe's draw is at this size of the job:
 * the pairs without data, the largest pair's share of its sender's total,
 * and the least and most a rank receives, in multiples of what it sends. */
void moe_describe(const bench_t *B)
{
    if (B->rank != 0)
        return;
    const int p = B->size;
    const size_t N = (size_t)1 << 30;  /* fine enough for the shares */
    uint64_t *w = xmalloc((size_t)p * sizeof *w);
    int *row = xmalloc((size_t)p * sizeof *row);
    double *recv = xmalloc((size_t)p * sizeof *recv);
    int zeros = 0, biggest = 0;
    for (int d = 0; d < p; d++)
        recv[d] = 0.0;
    for (int s = 0; s < p; s++) {
        moe_row(s, N, p, w, row);
        for (int d = 0; d < p; d++) {
            zeros += row[d] == 0;
            biggest = row[d] > biggest ? row[d] : biggest;
            recv[d] += (double)row[d] / (double)N;
        }
    }
    double rmin = recv[0], rmax = recv[0];
    for (int d = 1; d < p; d++) {
        rmin = recv[d] < rmin ? recv[d] : rmin;
        rmax = recv[d] > rmax ? recv[d] : rmax;
    }
    printf("# counts(src, dst): seed 0x%x, the same draw at every size; %d of %d pairs empty;\n"
           "#   largest pair %.0f%% of its sender's total; received per rank %.2f..%.2f x size\n",
           (unsigned)MOE_SEED, zeros, p * p, 100.0 * biggest / (double)N, rmin, rmax);
    free(recv);
    free(row);
    free(w);
}
