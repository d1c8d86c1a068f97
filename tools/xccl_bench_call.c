/*
 * xccl_bench_call.c: the collectives as xccl_bench calls them (blocking,
 * or nonblocking and waited for: -i), the table of collectives, and the
 * helpers every file of the tool uses (xmalloc, die).  Below every other
 * file of the tool: it calls none of them.
 */
#include <mpi.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

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
};

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
    default:
        break;
    }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* One call of COLL on SBUF/RBUF (host or device); errors abort (the
 * default MPI_ERRORS_ARE_FATAL handler).  xccl's own calls nonblocking
 * with -i (xccl_on: the xccl column). */
void call_coll_on(bench_t *B, int coll, size_t count, int root, void *sbuf, void *rbuf)
{
    const int n = (int)count, blk = (int)(count / (size_t)B->size);
    MPI_Comm w = MPI_COMM_WORLD;
    if (B->o->nonblocking && B->xccl_on) {
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
    default:
        break;
    }
}

/* One call of COLL on the (host) benchmark buffers. */
void call_coll(bench_t *B, int coll, size_t count, int root)
{
    call_coll_on(B, coll, count, root, B->sbuf, B->rbuf);
}

/* Elements of the send and receive buffer COLL uses at COUNT. */
void io_counts(const bench_t *B, int coll, size_t count, size_t *nsend, size_t *nrecv)
{
    const size_t blk = count / (size_t)B->size;
    *nsend = *nrecv = count;
    if (coll == C_ALLGATHER)
        *nsend = blk;
    if (coll == C_REDUCE_SCATTER || coll == C_REDUCE_SCATTER_BLOCK)
        *nrecv = blk;
}

/* The timed call of MODE: host mode as ever; -g: xccl on the device
 * buffers, or staged (xccl_bench_gpu.c). */
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
