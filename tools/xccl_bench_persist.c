/*
 * xccl_bench_persist.c: -P, the persistent form of every collective
 * (MPI-4's MPI_<Coll>_init; Open MPI 4.1's MPIX_<Coll>_init through the
 * pcollreq extension of <mpi-ext.h>).  run_size inits one request per
 * size and mode (on the benchmark buffers, the further rooted ones at root
 * 0, bcast one per root, each round's the root of its blocking calls), times
 * MPI_Start + MPI_Wait on it in the same interleaved rounds as the
 * blocking calls, and checks one start of it on known inputs in the first
 * round.  Which module runs a start is the mode's: each request is made
 * under its mode's coll_xccl_<coll>_enable, and xccl hands a disabled
 * collective's init to the stock module, so the stock request is libnbc's
 * own, with or without xccl loaded.
 */
#include <mpi.h>

#include <stdbool.h>
#include <stddef.h>

#include "xccl_bench_call.h"
#include "xccl_mpi_pnames.h"

#define HAVE_PERSIST XCCL_MPI_HAVE_PERSIST

/* NULL when -P can run, else why not. */
const char *persist_unavailable(void)
{
    return HAVE_PERSIST ? NULL
                        : "persistent collectives unavailable: this MPI has neither "
                          "MPI_<Coll>_init (MPI-4) nor MPIX_<Coll>_init (Open MPI pcollreq)";
}

#if HAVE_PERSIST

/* An inactive persistent request of COLL at COUNT on the benchmark
 * buffers, the layout of vlayout_set; errors abort. */
void persist_init(bench_t *B, int coll, size_t count, int root, MPI_Request *q)
{
    const int n = (int)count, blk = (int)(count / (size_t)B->size);
    float *s = B->sbuf, *r = B->rbuf;
    const MPI_Datatype f = MPI_FLOAT;
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Info i = MPI_INFO_NULL;
    switch (coll) {
    case C_ALLREDUCE:
        MPI_Allreduce_init(s, r, n, f, MPI_SUM, w, i, q);
        break;
    case C_ALLGATHER:
        MPI_Allgather_init(s, blk, f, r, blk, f, w, i, q);
        break;
    case C_REDUCE_SCATTER:
        MPI_Reduce_scatter_init(s, r, B->rcounts, f, MPI_SUM, w, i, q);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        MPI_Reduce_scatter_block_init(s, r, blk, f, MPI_SUM, w, i, q);
        break;
    case C_ALLTOALL:
        MPI_Alltoall_init(s, blk, f, r, blk, f, w, i, q);
        break;
    case C_BCAST:
        MPI_Bcast_init(r, n, f, root, w, i, q);
        break;
    case C_REDUCE:
        MPI_Reduce_init(s, r, n, f, MPI_SUM, root, w, i, q);
        break;
    case C_BARRIER:
        MPI_Barrier_init(w, i, q);
        break;
    case C_ALLGATHERV:
        MPI_Allgatherv_init(s, B->vscount, f, r, B->vrcounts, B->vrdispls, f, w, i, q);
        break;
    case C_ALLTOALLV:
    case C_ALLTOALLV_MOE:
        MPI_Alltoallv_init(s, B->vscounts, B->vsdispls, f, r, B->vrcounts, B->vrdispls, f, w, i,
                           q);
        break;
    case C_GATHER:
        MPI_Gather_init(s, blk, f, r, blk, f, root, w, i, q);
        break;
    case C_GATHERV:
        MPI_Gatherv_init(s, B->vscount, f, r, B->vrcounts, B->vrdispls, f, root, w, i, q);
        break;
    case C_SCATTER:
        MPI_Scatter_init(s, blk, f, r, blk, f, root, w, i, q);
        break;
    case C_SCATTERV:
        MPI_Scatterv_init(s, B->vscounts, B->vsdispls, f, r, B->vrcount, f, root, w, i, q);
        break;
    default:
        die(3, "no persistent form of collective %d", coll);
    }
}

#else  /* !HAVE_PERSIST: parse_args refuses -P, so nothing calls it */

void persist_init(bench_t *B, int coll, size_t count, int root, MPI_Request *q)
{
    (void)B;
    (void)count;
    (void)root;
    *q = MPI_REQUEST_NULL;
    die(2, "-P: no persistent form of %s in this MPI", colls[coll].name);
}

#endif

/* One timed loop on Q: the warm-up starts, then ITERS starts, each waited
 * for.  Returns the per-start average, maxed over ranks, on rank 0. */
double persist_time(bench_t *B, MPI_Request *q, int iters)
{
    for (int w = 0; w < B->o->warmup; w++) {
        MPI_Start(q);
        MPI_Wait(q, MPI_STATUS_IGNORE);
    }
    ctl_barrier();
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        MPI_Start(q);
        MPI_Wait(q, MPI_STATUS_IGNORE);
    }
    double t = (MPI_Wtime() - t0) / iters, tmax = 0.0;
    ctl_reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX);
    return tmax;
}

/* One start of Q on known inputs, every element checked on every rank
 * (check_coll's inputs and references).  The verdict (enum check) is
 * meaningful on rank 0; barrier has nothing to check. */
int persist_check(bench_t *B, int coll, size_t count, int root, MPI_Request *q, int mode)
{
    if (coll == C_BARRIER)
        return CK_NONE;
    size_t nsend, nrecv;
    fill_check_inputs(B, coll, count, root, &nsend, &nrecv);
    MPI_Start(q);
    MPI_Wait(q, MPI_STATUS_IGNORE);
    int mine = verify(B, coll, count, nrecv, root, " (persistent)", mode), all = 0;
    ctl_reduce(&mine, &all, 1, MPI_INT, MPI_MIN);
    return all ? CK_OK : CK_FAIL;
}
