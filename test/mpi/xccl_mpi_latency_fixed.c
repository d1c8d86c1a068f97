/*
 * xccl_mpi_latency_v's calls of the collectives whose sizes every rank
 * knows (gather, scatter, reduce, allgatherv; xccl_mpi_latency_v.c has
 * the program and its sequence of calls).
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xccl_mpi_latency_v.h"

/* The collectives whose sizes every rank knows, small and not: gather
 * and scatter (blocks of 0 to 1500 bytes), reduce (1 to 1100 ints,
 * MPI_SUM), allgatherv (blocks of 0 to 1300 bytes, a quarter of them 0,
 * in a random order with gaps); every root, in place where the standard
 * allows it; every byte of the receive buffers (the rest untouched).  One
 * call in three passes the root's blocks (gather, scatter) or the
 * sender's block (allgatherv) as one contiguous type of the block's
 * bytes, freed right after the call started, the other side as bytes. */
static const char *const fname[NF] = { "gather", "scatter", "reduce", "allgatherv" };

static int ival(long i, int r, size_t k)
{
    return (int) (h3(seed ^ (uint64_t) i, (uint64_t) r + 7000, k) & 0xffff);
}

void f_alloc(fcall_t *f)
{
    f->cap = (size_t) size * (1500 + GAP) + 4400 + 2 * GAP;
    f->sb = xmalloc(f->cap);
    f->rb = xmalloc(f->cap);
    f->want = xmalloc(f->cap);
    f->cnt = xmalloc((size_t) size * sizeof(int));
    f->dsp = xmalloc((size_t) size * sizeof(int));
}

/* One side of a block of `bytes` bytes: in one call h in three, where
 * `may`, one derived type of the block's bytes (*t, count 1; the other
 * side passes bytes: one signature, two type maps), else MPI_BYTE, count
 * bytes.  The caller frees a derived *t as soon as its call started. */
static int block_type(uint64_t h, int may, int bytes, MPI_Datatype *t)
{
    *t = MPI_BYTE;
    if (!may || bytes <= 0 || (h >> 20) % 3 != 0) {
        return bytes;
    }
    MPI_Type_contiguous(bytes, MPI_BYTE, t);
    MPI_Type_commit(t);
    return 1;
}

/* Starts call i (nonblocking: into f->req) or runs it; calls[which]
 * counts the calls that reach xccl. */
void fixed_start(fcall_t *f, long i, uint64_t h, long *calls, MPI_Comm comm, int nb)
{
    unsigned char *sb = f->sb, *rb = f->rb, *want = f->want;
    int *cnt = f->cnt, *dsp = f->dsp;
    const int p = size, me = rank, which = (int) (h % NF), root = (int) ((h >> 8) % (uint64_t) p);
    const int ip = (h >> 16) % 4 == 0;
    const uint64_t z = h3(seed ^ (uint64_t) i, 77, 78);     /* the sizes */
    MPI_Request *r = &f->req;
    f->i = i;
    f->which = which;
    memset(rb, FILL, f->cap);
    memset(want, FILL, f->cap);
    int rc = MPI_SUCCESS;
    if (F_GATHER == which || F_SCATTER == which) {
        const int b = (int) (z % 1501), g = F_GATHER == which;
        calls[which] += b > 0;       /* (Open MPI returns at once where nothing moves) */
        for (int q = 0; q < p; q++) {
            for (int k = 0; k < b; k++) {
                const unsigned char x = g ? bval(i, q, root, (size_t) k) : bval(i, root, q, (size_t) k);
                if (g && q == me) {
                    sb[k] = x;
                } else if (!g && me == root) {
                    sb[q * b + k] = x;
                }
                if (g && me == root) {
                    want[q * b + k] = x;
                } else if (!g && q == me && !(ip && me == root)) {
                    want[k] = x;
                }
            }
        }
        if (g && ip && me == root) {
            memcpy(rb + me * b, sb, (size_t) b);
        }
        const void *gs = ip && me == root ? MPI_IN_PLACE : sb;
        void *sr = ip && me == root ? MPI_IN_PLACE : rb;
        MPI_Datatype bt;                     /* the root's side */
        const int bc = block_type(h, 1, b, &bt);
        rc = g ? (nb ? MPI_Igather(gs, b, MPI_BYTE, rb, bc, bt, root, comm, r)
                     : MPI_Gather(gs, b, MPI_BYTE, rb, bc, bt, root, comm))
               : (nb ? MPI_Iscatter(sb, bc, bt, sr, b, MPI_BYTE, root, comm, r)
                     : MPI_Scatter(sb, bc, bt, sr, b, MPI_BYTE, root, comm));
        if (MPI_BYTE != bt) {
            MPI_Type_free(&bt);
        }
    } else if (F_REDUCE == which) {
        const int n = 1 + (int) (z % 1100);
        calls[which]++;
        int *src = ip && me == root ? (int *) rb : (int *) sb, *w = (int *) want;
        for (int k = 0; k < n; k++) {
            src[k] = ival(i, me, (size_t) k);
            long sum = 0;
            for (int q = 0; q < p; q++) {
                sum += ival(i, q, (size_t) k);
            }
            if (me == root) {
                w[k] = (int) sum;
            }
        }
        const void *s = ip && me == root ? MPI_IN_PLACE : sb;
        rc = nb ? MPI_Ireduce(s, rb, n, MPI_INT, MPI_SUM, root, comm, r)
                : MPI_Reduce(s, rb, n, MPI_INT, MPI_SUM, root, comm);
    } else {
        for (int q = 0; q < p; q++) {
            const uint64_t c = h3(seed ^ (uint64_t) i, (uint64_t) q, 55);
            cnt[q] = c % 4 == 0 ? 0 : (int) ((c >> 8) % 1301);
        }
        (void) layout(i, 3000, cnt, dsp, p);
        for (int q = 0, any = 0; q < p && !any; q++) {
            calls[which] += any = cnt[q] > 0;
        }
        for (int q = 0; q < p; q++) {
            for (int k = 0; k < cnt[q]; k++) {
                want[dsp[q] + k] = bval(i, q, 0, (size_t) k);
            }
        }
        for (int k = 0; k < cnt[me]; k++) {
            sb[k] = bval(i, me, 0, (size_t) k);
        }
        if (ip) {
            memcpy(rb + dsp[me], sb, (size_t) cnt[me]);
        }
        const void *s = ip ? MPI_IN_PLACE : sb;
        MPI_Datatype bt;                     /* the sender's side */
        const int bc = block_type(h, !ip, cnt[me], &bt);
        rc = nb ? MPI_Iallgatherv(s, bc, bt, rb, cnt, dsp, MPI_BYTE, comm, r)
                : MPI_Allgatherv(s, bc, bt, rb, cnt, dsp, MPI_BYTE, comm);
        if (MPI_BYTE != bt) {
            MPI_Type_free(&bt);
        }
    }
    if (MPI_SUCCESS != rc) {
        fail(i, fname[which], "return code", 0, rc, MPI_SUCCESS);
    }
}

/* Every byte of f's receive buffer, once its call ended. */
void fixed_check(const fcall_t *f)
{
    for (size_t k = 0; k < f->cap; k++) {
        if (f->rb[k] != f->want[k]) {
            fail(f->i, fname[f->which], "receive buffer", (long) k, f->rb[k], f->want[k]);
            break;
        }
    }
}

void fixed_call(fcall_t *f, long i, uint64_t h, long *calls, MPI_Comm comm)
{
    fixed_start(f, i, h, calls, comm, 0);
    fixed_check(f);
}

/* A run of CALLS nonblocking gathers and reduces of small blocks to root
 * 0 (MPI_Igather, MPI_Ireduce, each waited for at once), root 0 asleep
 * before the first: the senders' requests end as soon as they gave, so
 * the senders run ahead through the latency path's ring, where a request
 * must wait for the root before it writes over units the root has not
 * read.  Every result checked. */
long ahead_run(fcall_t *f, long i0, int n, long *calls)
{
    long ok = 0;
    if (0 == rank) {
        usleep(3000);
    }
    for (int k = 0; k < n; k++) {
        const long i = i0 + k;
        /* which: gather or reduce; root 0; in place one in four */
        const uint64_t h = (h3(seed, (uint64_t) i, 5) & ~(uint64_t) 0xffff) | (k % 2 ? F_REDUCE : F_GATHER);
        const int before = nfail;
        fixed_start(f, i, h, calls, MPI_COMM_WORLD, 1);
        MPI_Wait(&f->req, MPI_STATUS_IGNORE);
        fixed_check(f);
        ok += nfail == before;
    }
    return ok;
}

