/*
 * xccl_bench_check.c: the correctness check on host buffers.
 *
 * After the timed loop of the first round each mode runs the collective
 * once more on rank- and index-dependent small integers (exact in float)
 * and every rank compares every element with a value it computes itself.
 * A failure in the xccl column makes the exit status 1; a failure in the
 * stock column is reported but is Open MPI's, not xccl's.  The device
 * version (-g) is check_coll_gpu in xccl_bench_gpu.c, on the same inputs;
 * -P's persistent requests: persist_check in xccl_bench_persist.c.
 *
 * Rooted collectives are checked at root p-1 (bcast's check root) and the
 * further ones also at root 0, the root they are timed with.  A rank's
 * buffer that the collective does not use (the receive buffer of a reduce
 * or gather off the root) must come back untouched: its guard is checked.
 * Barrier has no result to check.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "xccl_bench_call.h"

static float sum_over_ranks(int p, size_t i)
{
    float s = 0.0f;
    for (int r = 0; r < p; r++)
        s += pattern(r, i);
    return s;
}

/* Expected output element i of COLL on this rank. */
static float expected(const bench_t *B, int coll, size_t count, size_t i, int root)
{
    const int rank = B->rank, p = B->size;
    const size_t blk = count / (size_t)p;
    switch (coll) {
    case C_ALLREDUCE:
    case C_REDUCE:                    /* at the root; the others receive nothing */
        return sum_over_ranks(p, i);
    case C_ALLGATHER:                 /* block j comes from rank j */
    case C_GATHER:
        return pattern((int)(i / blk), i % blk);
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_BLOCK:      /* my block of the sum */
        return sum_over_ranks(p, (size_t)rank * blk + i);
    case C_ALLTOALL:                  /* block j: rank j's block for me */
        return pattern((int)(i / blk), (size_t)rank * blk + i % blk);
    case C_BCAST:
        return pattern(root, i);
    case C_SCATTER:                   /* my block of the root's */
        return pattern(root, (size_t)rank * blk + i);
    case C_ALLGATHERV:
    case C_GATHERV:
    case C_SCATTERV:
    case C_ALLTOALLV:
    case C_ALLTOALLV_MOE:
        return expected_v(B, coll, i, root);
    default:
        return 0.0f;
    }
}

/* Compare rbuf[0..n) with the expectation and the guard after it; report
 * the first difference on stderr.  Returns true when all is right. */
bool verify(const bench_t *B, int coll, size_t count, size_t n, int root,
            const char *what, int mode)
{
    for (size_t i = 0; i < n; i++) {
        float want = expected(B, coll, count, i, root);
        if (B->rbuf[i] != want) {
            fprintf(stderr, "xccl_bench: rank %d: %s %s%s count %zu: element %zu is %.1f, "
                    "expected %.1f\n", B->rank, mode_names[mode], colls[coll].name, what,
                    count, i, (double)B->rbuf[i], (double)want);
            return false;
        }
    }
    for (size_t i = n; i < n + GUARD; i++) {
        if (B->rbuf[i] != SENTINEL) {
            fprintf(stderr, "xccl_bench: rank %d: %s %s%s count %zu: wrote past the result "
                    "(element %zu)\n", B->rank, mode_names[mode], colls[coll].name, what,
                    count, i);
            return false;
        }
    }
    return true;
}

/* The known inputs of a check in the host buffers: the pattern in SEND,
 * sentinels in RECV and its guard (a stale result of the other mode must
 * not pass), the root's data in a bcast's RECV.  *nsend, *nrecv: elements. */
void fill_check_inputs(bench_t *B, int coll, size_t count, int root, size_t *nsend,
                       size_t *nrecv)
{
    io_counts_at(B, coll, count, root, nsend, nrecv);
    for (size_t i = 0; i < *nsend; i++)
        B->sbuf[i] = pattern(B->rank, i);
    for (size_t i = 0; i < *nrecv + GUARD; i++)
        B->rbuf[i] = SENTINEL;
    if (coll == C_BCAST && B->rank == root)
        for (size_t i = 0; i < count; i++)
            B->rbuf[i] = pattern(root, i);
}

/* Run COLL once on known inputs in the current mode and check every element
 * on every rank.  The verdict (enum check) is meaningful on rank 0. */
static bool check_at(bench_t *B, int coll, size_t count, int root, const char *what, int mode)
{
    size_t nsend, nrecv;
    fill_check_inputs(B, coll, count, root, &nsend, &nrecv);
    call_coll(B, coll, count, root);
    return verify(B, coll, count, nrecv, root, what, mode);
}

int check_coll(bench_t *B, int coll, size_t count, int mode)
{
    if (coll == C_BARRIER)
        return CK_NONE;
    const int root = B->size - 1;
    bool ok = check_at(B, coll, count, root, "", mode);
    if (coll_rooted(coll) && coll != C_BCAST && root != 0)
        ok = check_at(B, coll, count, 0, " (root 0)", mode) && ok;

    if (coll == C_ALLREDUCE) {
        for (size_t i = 0; i < count; i++)
            B->rbuf[i] = pattern(B->rank, i);
        MPI_Allreduce(MPI_IN_PLACE, B->rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        ok = verify(B, coll, count, count, root, " (in place)", mode) && ok;
    }

    int mine = ok, all = 0;
    ctl_reduce(&mine, &all, 1, MPI_INT, MPI_MIN);
    return all ? CK_OK : CK_FAIL;
}
