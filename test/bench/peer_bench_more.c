/*
 * peer_bench_more.c: peer_bench's further collectives (reduce, barrier,
 * allgatherv, alltoallv, gather, gatherv, scatter, scatterv and
 * alltoallv_moe): their calls, blocking or nonblocking (-n), the v forms'
 * counts and displacements at each size, and their check.
 *
 * The layouts are tools/xccl_bench_more.c's, so that a size means the same
 * in both tools (xccl_bench counts floats, peer_bench bytes: the blocks
 * differ by the rounding only).  Blocks contiguous, in rank order, of a
 * size of COUNT bytes:
 *   gather, scatter: p blocks of size/p.
 *   allgatherv, gatherv, scatterv: rank r's block is share(r), the count
 *     split in proportion to p + r (mildly uneven; zeros at small sizes).
 *   alltoallv: rank s sends rank d share((s + d) % p): every rank sends
 *     and receives the count in all, in blocks of different sizes.
 *   alltoallv_moe: rank s sends rank d moe(s, d) bytes, a draw from
 *     MOE_SEED that every rank computes alike (so each knows what it
 *     receives): about a quarter of the pairs get nothing, the others a
 *     weight (16..31) << k with P(k) = 2^-(k+1), k <= 12, a heavy tail like
 *     the tokens a mixture-of-experts layer routes to its experts.  Every
 *     rank sends the count; what a rank receives is the draw's.  Sizes
 *     within MOE_MINBYTES..MOE_MAXBYTES only.
 * Rooted ones are timed at root 0; barrier has one row of 0 B.
 *
 * The check runs each rooted one at root p-1 and at root 0, the others
 * once, on byte_of / float_of inputs, and compares every byte or element
 * each rank receives, and a guard after it, on every rank: a rank's
 * buffer the collective does not use (the receive buffer of reduce or
 * gather(v) off the root) must come back untouched.  Barrier's check:
 * rank p-1 enters LATE_S after the others, and a rank that leaves before
 * it has entered is wrong.  peer_bench -F checks every call with the two
 * halves of the check, more_fill and more_verify, at root 0, on inputs
 * that change with the call (B->gen).
 */
#include <mpi.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer_bench.h"

#define LATE_S 0.01          /* barrier's check: how late rank p-1 enters */

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

/* Rank s's row of the draw for a total of N bytes: c[d] bytes to rank d,
 * summing to N.  Floors of the proportional shares; what they leave goes
 * one by one to the destinations with a weight, in rank order.  A row
 * without any weight sends all to one rank the hash picks.  W: p scratch
 * entries. */
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

void more_alloc(bench_t *B)
{
    const size_t p = (size_t)B->size;
    int *all = xalloc(5 * p * sizeof(int));
    memset(all, 0, 5 * p * sizeof(int));
    B->vscounts = all;
    B->vsdispls = all + p;
    B->vrcounts = all + 2 * p;
    B->vrdispls = all + 3 * p;
    B->vpeer_off = all + 4 * p;
}

void more_free(bench_t *B)
{
    free(B->vscounts);         /* the first array owns the allocation */
    B->vscounts = B->vsdispls = B->vrcounts = B->vrdispls = B->vpeer_off = NULL;
}

/* Whether COLL runs at SIZE (alltoallv_moe: xccl_bench's range). */
bool more_size_runs(int coll, size_t size)
{
    return coll != C_ALLTOALLV_MOE || (size >= MOE_MINBYTES && size <= MOE_MAXBYTES);
}

static void prefix(const int *counts, int *displs, int p)
{
    int at = 0;
    for (int r = 0; r < p; r++) {
        displs[r] = at;
        at += counts[r];
    }
}

/* Bytes this rank receives in all from the v layout. */
static size_t received(const bench_t *B)
{
    const int last = B->size - 1;
    return (size_t)B->vrdispls[last] + (size_t)B->vrcounts[last];
}

/* The receive buffer must hold BYTES and its guard (alltoallv_moe may
 * receive more than it sends); its pages are touched before timing. */
static void rbuf_reserve(bench_t *B, size_t bytes)
{
    if (bytes + GUARD <= B->rcap)
        return;
    unsigned char *nb = xalloc(bytes + GUARD);
    memset(nb, 0, bytes + GUARD);
    free(B->rbuf);
    B->rbuf = nb;
    B->rcap = bytes + GUARD;
}

/* The layout of COLL at shape S on this rank (see the top of the file); a
 * no-op for the collectives without one. */
void more_layout(bench_t *B, int coll, const shape_t *s)
{
    const int p = B->size, me = B->rank;
    switch (coll) {
    case C_GATHER:
    case C_SCATTER:
    case C_ALLGATHERV:
    case C_GATHERV:
    case C_SCATTERV:
        for (int r = 0; r < p; r++) {
            int n = coll == C_GATHER || coll == C_SCATTER ? (int)s->blk : share(s->count, p, r);
            B->vscounts[r] = B->vrcounts[r] = n;
            B->vpeer_off[r] = 0;
        }
        break;
    case C_ALLTOALLV:
        for (int r = 0; r < p; r++) {
            B->vscounts[r] = share(s->count, p, (me + r) % p);
            B->vrcounts[r] = share(s->count, p, (r + me) % p);
            int off = 0;       /* where rank r's block for me starts in its send buffer */
            for (int d = 0; d < me; d++)
                off += share(s->count, p, (r + d) % p);
            B->vpeer_off[r] = off;
        }
        break;
    case C_ALLTOALLV_MOE: {
        uint64_t *w = xalloc((size_t)p * sizeof *w);
        int *row = xalloc((size_t)p * sizeof *row);
        moe_row(me, s->count, p, w, B->vscounts);
        for (int r = 0; r < p; r++) {
            moe_row(r, s->count, p, w, row);
            B->vrcounts[r] = row[me];
            int off = 0;
            for (int d = 0; d < me; d++)
                off += row[d];
            B->vpeer_off[r] = off;
        }
        free(row);
        free(w);
        break;
    }
    default:
        return;
    }
    prefix(B->vscounts, B->vsdispls, p);
    prefix(B->vrcounts, B->vrdispls, p);
    rbuf_reserve(B, received(B));
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                    */
/* ------------------------------------------------------------------------ */

/* One call of COLL at ROOT; -n: its nonblocking form, waited for at once. */
void more_call(bench_t *B, int coll, const shape_t *s, int root)
{
    MPI_Comm w = B->comm;
    MPI_Request q = MPI_REQUEST_NULL, *r = B->o->nonblocking ? &q : NULL;
    void *sb = B->sbuf, *rb = B->rbuf;
    const int n = (int)s->count, blk = (int)s->blk, me = B->rank;
    const int *sc = B->vscounts, *sd = B->vsdispls, *rc = B->vrcounts, *rd = B->vrdispls;
    switch (coll) {
    case C_REDUCE:
        if (r) MPI_Ireduce(sb, rb, n, MPI_FLOAT, MPI_SUM, root, w, r);
        else MPI_Reduce(sb, rb, n, MPI_FLOAT, MPI_SUM, root, w);
        break;
    case C_BARRIER:
        if (r) MPI_Ibarrier(w, r);
        else MPI_Barrier(w);
        break;
    case C_ALLGATHERV:
        if (r) MPI_Iallgatherv(sb, sc[me], MPI_BYTE, rb, rc, rd, MPI_BYTE, w, r);
        else MPI_Allgatherv(sb, sc[me], MPI_BYTE, rb, rc, rd, MPI_BYTE, w);
        break;
    case C_ALLTOALLV:
    case C_ALLTOALLV_MOE:
        if (r) MPI_Ialltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, w, r);
        else MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, w);
        break;
    case C_GATHER:
        if (r) MPI_Igather(sb, blk, MPI_BYTE, rb, blk, MPI_BYTE, root, w, r);
        else MPI_Gather(sb, blk, MPI_BYTE, rb, blk, MPI_BYTE, root, w);
        break;
    case C_GATHERV:
        if (r) MPI_Igatherv(sb, sc[me], MPI_BYTE, rb, rc, rd, MPI_BYTE, root, w, r);
        else MPI_Gatherv(sb, sc[me], MPI_BYTE, rb, rc, rd, MPI_BYTE, root, w);
        break;
    case C_SCATTER:
        if (r) MPI_Iscatter(sb, blk, MPI_BYTE, rb, blk, MPI_BYTE, root, w, r);
        else MPI_Scatter(sb, blk, MPI_BYTE, rb, blk, MPI_BYTE, root, w);
        break;
    case C_SCATTERV:
        if (r) MPI_Iscatterv(sb, sc, sd, MPI_BYTE, rb, rc[me], MPI_BYTE, root, w, r);
        else MPI_Scatterv(sb, sc, sd, MPI_BYTE, rb, rc[me], MPI_BYTE, root, w);
        break;
    default:
        break;
    }
    if (r)
        MPI_Wait(r, MPI_STATUS_IGNORE);
}

/* ------------------------------------------------------------------------ */
/* Correctness                                                              */
/* ------------------------------------------------------------------------ */

/* Barrier: every rank but p-1 sends p-1 a message as it leaves; p-1 waits
 * LATE_S before it enters, and each such message it finds meanwhile is a
 * rank that left before every rank had entered.  (A message that arrives
 * late hides an early exit, but a correct barrier never shows one.) */
static long check_barrier(bench_t *B, const shape_t *s)
{
    const int late = B->size - 1;
    int token = 1;
    if (B->rank != late) {
        more_call(B, C_BARRIER, s, 0);
        MPI_Send(&token, 1, MPI_INT, late, TAG_LEFT, MPI_COMM_WORLD);
        return 0;
    }
    long early = 0;
    for (double t0 = MPI_Wtime(); MPI_Wtime() - t0 < LATE_S;) {
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_LEFT, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, TAG_LEFT, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            early++;
        }
    }
    more_call(B, C_BARRIER, s, 0);
    for (long i = early; i < late; i++)
        MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, TAG_LEFT, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    return early;
}

/* Bytes COLL leaves in this rank's receive buffer at ROOT. */
static size_t out_bytes(const bench_t *B, int coll, const shape_t *s, int root)
{
    const bool am_root = B->rank == root;
    switch (coll) {
    case C_REDUCE:
        return am_root ? s->count * sizeof(float) : 0;
    case C_GATHER:
    case C_GATHERV:
        return am_root ? received(B) : 0;
    case C_SCATTER:
    case C_SCATTERV:
        return (size_t)B->vrcounts[B->rank];
    default:                           /* allgatherv, alltoallv(_moe) */
        return received(B);
    }
}

/* Fill this rank's input of COLL at ROOT (generation B->gen) and poison
 * its output and the guard (barrier: nothing). */
void more_fill(bench_t *B, int coll, const shape_t *s, int root)
{
    const int me = B->rank;
    const size_t g = B->gen;
    float *sf = (float *)B->sbuf;

    if (coll == C_BARRIER)
        return;
    if (coll == C_REDUCE)
        for (size_t i = 0; i < s->count; i++)
            sf[i] = float_of(me, i + g);
    else                               /* the root's or this rank's bytes */
        for (size_t i = 0; i < s->count; i++)
            B->sbuf[i] = byte_of(me, i + g);
    memset(B->rbuf, GUARD_BYTE, out_bytes(B, coll, s, root) + GUARD);
}

/* Compare what one call of COLL at ROOT left on this rank with what
 * more_fill's inputs make.  Returns the number of wrong bytes or elements
 * (barrier: 0, its check is check_barrier's). */
long more_verify(bench_t *B, int coll, const shape_t *s, int root)
{
    const int me = B->rank, p = B->size;
    const size_t g = B->gen;
    const float *rf = (const float *)B->rbuf;

    if (coll == C_BARRIER)
        return 0;
    const size_t out = out_bytes(B, coll, s, root);
    long wrong = 0;
    if (coll == C_REDUCE) {
        for (size_t i = 0; i < out / sizeof(float); i++)
            wrong += rf[i] != float_sum(p, i + g);
    } else if (coll == C_SCATTER || coll == C_SCATTERV) {
        for (size_t i = 0; i < out; i++)    /* my block of the root's */
            wrong += B->rbuf[i] != byte_of(root, (size_t)B->vsdispls[me] + i + g);
    } else if (out > 0) {
        for (int r = 0; r < p; r++) {       /* block r: rank r's from vpeer_off[r] */
            const unsigned char *b = B->rbuf + B->vrdispls[r];
            for (size_t i = 0; i < (size_t)B->vrcounts[r]; i++)
                wrong += b[i] != byte_of(r, (size_t)B->vpeer_off[r] + i + g);
        }
    }
    for (size_t i = 0; i < GUARD; i++)
        wrong += B->rbuf[out + i] != GUARD_BYTE;
    return wrong;
}

/* Fill, call once at ROOT, compare on this rank. */
static long check_at(bench_t *B, int coll, const shape_t *s, int root)
{
    more_fill(B, coll, s, root);
    more_call(B, coll, s, root);
    return more_verify(B, coll, s, root);
}

/* The check of COLL at shape S: rooted ones at root p-1 and root 0. */
long more_check(bench_t *B, int coll, const shape_t *s)
{
    if (coll == C_BARRIER)
        return check_barrier(B, s);
    const int last = B->size - 1;
    long wrong = check_at(B, coll, s, last);
    bool rooted = coll == C_REDUCE || coll == C_GATHER || coll == C_GATHERV ||
                  coll == C_SCATTER || coll == C_SCATTERV;
    if (rooted && last != 0)
        wrong += check_at(B, coll, s, 0);
    return wrong;
}

/* ------------------------------------------------------------------------ */
/* The draw, described                                                      */
/* ------------------------------------------------------------------------ */

/* Rank 0: how skewed alltoallv_moe's draw is at this size of the job:
 * the pairs without data, the largest pair's share of its sender's total,
 * and the least and most a rank receives, in multiples of what it sends. */
void more_describe_moe(const bench_t *B)
{
    if (B->rank != 0)
        return;
    const int p = B->size;
    const size_t N = (size_t)1 << 30;  /* fine enough for the shares */
    uint64_t *w = xalloc((size_t)p * sizeof *w);
    int *row = xalloc((size_t)p * sizeof *row);
    double *recv = xalloc((size_t)p * sizeof *recv);
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
    printf("# alltoallv_moe: sizes %zu..%zu only; counts(src, dst): seed 0x%x, the same\n"
           "#   draw at every size; %d of %d pairs empty; largest pair %.0f%% of its\n"
           "#   sender's total; received per rank %.2f..%.2f x size\n",
           MOE_MINBYTES, MOE_MAXBYTES, (unsigned)MOE_SEED, zeros, p * p,
           100.0 * biggest / (double)N, rmin, rmax);
    free(recv);
    free(row);
    free(w);
}
