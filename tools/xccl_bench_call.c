/*
 * xccl_bench_call.c: the collectives as xccl_bench calls them (blocking,
 * or nonblocking and waited for: -i), the table of collectives, the
 * control plane (ctl_barrier, ctl_reduce), and the helpers every file of
 * the tool uses (xmalloc, die).  Below every other file of the tool: it
 * calls none of them.
 */
#include <mpi.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xccl_bench_call.h"

const coll_info_t colls[NCOLL] = {
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
    [C_REDUCE] = { "reduce", "coll_xccl_reduce_enable", false, "buffer per rank (root 0)" },
    [C_BARRIER] = { "barrier", "coll_xccl_barrier_enable", false, "none (one row, 0 B)" },
    [C_ALLGATHERV] = { "allgatherv", "coll_xccl_allgatherv_enable", true,
                       "total received per rank (rank r sends a share ~ p+r)" },
    [C_ALLTOALLV] = { "alltoallv", "coll_xccl_alltoallv_enable", true,
                      "total sent (and received) per rank (to rank d: a share ~ p+(r+d)%p)" },
    [C_GATHER] = { "gather", "coll_xccl_gather_enable", true,
                   "total received by root 0 (sent = size/p)" },
    [C_GATHERV] = { "gatherv", "coll_xccl_gatherv_enable", true,
                    "total received by root 0 (rank r sends a share ~ p+r)" },
    [C_SCATTER] = { "scatter", "coll_xccl_scatter_enable", true,
                    "total sent by root 0 (received = size/p)" },
    [C_SCATTERV] = { "scatterv", "coll_xccl_scatterv_enable", true,
                     "total sent by root 0 (rank r receives a share ~ p+r)" },
    [C_ALLTOALLV_MOE] = { "alltoallv_moe", "coll_xccl_alltoallv_enable", false,
                          "total sent per rank (1 KiB..4 MiB; per peer: the seeded draw)" },
};

/* The collectives with a root (bcast: per round; the others: rank 0). */
bool coll_rooted(int coll)
{
    return coll == C_BCAST || coll == C_REDUCE || coll == C_GATHER || coll == C_GATHERV ||
           coll == C_SCATTER || coll == C_SCATTERV;
}

/* -g renames the second column "staged" (device -> host, stock, host -> device). */
const char *mode_names[NMODE] = { "xccl", "stock" };

/* The nonblocking form of call_coll_on, waited for at once (-i). */
static void icall_coll_on(bench_t *B, int coll, size_t count, int root, void *sbuf, void *rbuf)
{
    const int n = (int)count, blk = (int)(count / (size_t)B->size);
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request q = MPI_REQUEST_NULL;
    switch (coll) {
    case C_ALLREDUCE:
        MPI_Iallreduce(sbuf, rbuf, n, MPI_FLOAT, MPI_SUM, w, &q);
        break;
    case C_ALLGATHER:
        MPI_Iallgather(sbuf, blk, MPI_FLOAT, rbuf, blk, MPI_FLOAT, w, &q);
        break;
    case C_REDUCE_SCATTER:
        MPI_Ireduce_scatter(sbuf, rbuf, B->rcounts, MPI_FLOAT, MPI_SUM, w, &q);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        MPI_Ireduce_scatter_block(sbuf, rbuf, blk, MPI_FLOAT, MPI_SUM, w, &q);
        break;
    case C_ALLTOALL:
        MPI_Ialltoall(sbuf, blk, MPI_FLOAT, rbuf, blk, MPI_FLOAT, w, &q);
        break;
    case C_BCAST:
        MPI_Ibcast(rbuf, n, MPI_FLOAT, root, w, &q);
        break;
    case C_REDUCE:
        MPI_Ireduce(sbuf, rbuf, n, MPI_FLOAT, MPI_SUM, root, w, &q);
        break;
    case C_BARRIER:
        MPI_Ibarrier(w, &q);
        break;
    case C_ALLGATHERV:
        MPI_Iallgatherv(sbuf, B->vscount, MPI_FLOAT, rbuf, B->vrcounts, B->vrdispls, MPI_FLOAT,
                        w, &q);
        break;
    case C_ALLTOALLV:
    case C_ALLTOALLV_MOE:
        MPI_Ialltoallv(sbuf, B->vscounts, B->vsdispls, MPI_FLOAT, rbuf, B->vrcounts,
                       B->vrdispls, MPI_FLOAT, w, &q);
        break;
    case C_GATHER:
        MPI_Igather(sbuf, blk, MPI_FLOAT, rbuf, blk, MPI_FLOAT, root, w, &q);
        break;
    case C_GATHERV:
        MPI_Igatherv(sbuf, B->vscount, MPI_FLOAT, rbuf, B->vrcounts, B->vrdispls, MPI_FLOAT,
                     root, w, &q);
        break;
    case C_SCATTER:
        MPI_Iscatter(sbuf, blk, MPI_FLOAT, rbuf, blk, MPI_FLOAT, root, w, &q);
        break;
    case C_SCATTERV:
        MPI_Iscatterv(sbuf, B->vscounts, B->vsdispls, MPI_FLOAT, rbuf, B->vrcount, MPI_FLOAT,
                      root, w, &q);
        break;
    default:
        break;
    }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* One call of COLL on SBUF/RBUF (host or device); errors abort (the
 * default MPI_ERRORS_ARE_FATAL handler).  xccl's own calls nonblocking
 * with -i (xccl_on: the xccl column), every call with -I. */
void call_coll_on(bench_t *B, int coll, size_t count, int root, void *sbuf, void *rbuf)
{
    const int n = (int)count, blk = (int)(count / (size_t)B->size);
    MPI_Comm w = MPI_COMM_WORLD;
    if (B->o->nonblocking && (B->xccl_on || B->o->nonblocking_all)) {
        icall_coll_on(B, coll, count, root, sbuf, rbuf);
        return;
    }
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
    /* The further ones; the v forms' arrays: vlayout_set, by run_size. */
    case C_REDUCE:
        MPI_Reduce(sbuf, rbuf, n, MPI_FLOAT, MPI_SUM, root, w);
        break;
    case C_BARRIER:
        MPI_Barrier(w);
        break;
    case C_ALLGATHERV:
        MPI_Allgatherv(sbuf, B->vscount, MPI_FLOAT, rbuf, B->vrcounts, B->vrdispls, MPI_FLOAT, w);
        break;
    case C_ALLTOALLV:
    case C_ALLTOALLV_MOE:
        MPI_Alltoallv(sbuf, B->vscounts, B->vsdispls, MPI_FLOAT, rbuf, B->vrcounts, B->vrdispls,
                      MPI_FLOAT, w);
        break;
    case C_GATHER:
        MPI_Gather(sbuf, blk, MPI_FLOAT, rbuf, blk, MPI_FLOAT, root, w);
        break;
    case C_GATHERV:
        MPI_Gatherv(sbuf, B->vscount, MPI_FLOAT, rbuf, B->vrcounts, B->vrdispls, MPI_FLOAT, root,
                    w);
        break;
    case C_SCATTER:
        MPI_Scatter(sbuf, blk, MPI_FLOAT, rbuf, blk, MPI_FLOAT, root, w);
        break;
    case C_SCATTERV:
        MPI_Scatterv(sbuf, B->vscounts, B->vsdispls, MPI_FLOAT, rbuf, B->vrcount, MPI_FLOAT, root,
                     w);
        break;
    default:
        break;
    }
}

/* One call of COLL on the (host) benchmark buffers. */
void call_coll(bench_t *B, int coll, size_t count, int root)
{
    call_coll_on(B, coll, count, root, B->sbuf, B->rbuf);
}

/* Elements of the send and receive buffer COLL uses at COUNT (the six of
 * -g; all of them with a root: io_counts_at, xccl_bench_more.c). */
void io_counts(const bench_t *B, int coll, size_t count, size_t *nsend, size_t *nrecv)
{
    const size_t blk = count / (size_t)B->size;
    *nsend = *nrecv = count;
    if (coll == C_ALLGATHER)
        *nsend = blk;
    if (coll == C_REDUCE_SCATTER || coll == C_REDUCE_SCATTER_BLOCK)
        *nrecv = blk;
}

/* ------------------------------------------------------------------------ */
/* Control plane                                                            */
/* ------------------------------------------------------------------------ */

/* The tool's own barrier, verdicts and timings travel as point-to-point
 * messages: xccl intercepts MPI_Barrier and MPI_Reduce too, and a broken
 * or switched xccl must not distort the report.  The tags are the tool's;
 * collectives never match point-to-point messages. */
#define CTL_TAG_BARRIER 0x7b01
#define CTL_TAG_REDUCE  0x7b02

/* Dissemination barrier: ceil(log2 p) rounds of one message each way. */
void ctl_barrier(void)
{
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    for (int k = 1; k < p; k <<= 1)
        MPI_Sendrecv(NULL, 0, MPI_BYTE, (rank + k) % p, CTL_TAG_BARRIER, NULL, 0, MPI_BYTE,
                     (rank - k + p) % p, CTL_TAG_BARRIER, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* MPI_Reduce to rank 0 of N elements of DT with a predefined OP: rank 0
 * receives every rank's, in rank order, and combines them with
 * MPI_Reduce_local (the op framework, not a collective). */
void ctl_reduce(const void *in, void *out, int n, MPI_Datatype dt, MPI_Op op)
{
    int rank, p, tsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (rank != 0) {
        MPI_Send(in, n, dt, 0, CTL_TAG_REDUCE, MPI_COMM_WORLD);
        return;
    }
    MPI_Type_size(dt, &tsize);
    void *tmp = xmalloc((size_t)n * (size_t)tsize);
    memcpy(out, in, (size_t)n * (size_t)tsize);
    for (int r = 1; r < p; r++) {
        MPI_Recv(tmp, n, dt, r, CTL_TAG_REDUCE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Reduce_local(tmp, out, n, dt, op);
    }
    free(tmp);
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */
/* ------------------------------------------------------------------------ */

/* 64-byte aligned allocation (whole cache lines, like vector code likes);
 * out of memory is fatal. */
void *xmalloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0 || !p)
        die(3, "out of memory (%zu bytes)", bytes);
    return p;
}

void die(int status, const char *fmt, ...)
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
