/*
 * xccl_mpi_errors: bad arguments to the collectives xccl intercepts must come
 * back as MPI error codes through the communicator's error handler
 * (MPI_ERRORS_RETURN here), never as a crash or a hang.
 *
 * Every rank passes the same bad arguments, so every rank must detect the
 * error locally, before any data moves.  Run it with --mca mpi_param_check 1
 * (Open MPI's MPI layer checks) and 0 (only the coll component can check).
 * After the bad calls a good Allreduce must still give the right answer.
 *
 * Option -k: skip the NULL-buffer case, which stock Open MPI 4.1 does not
 * check even with mpi_param_check 1 (it segfaults in tuned); only for
 * developing this test without xccl, never to judge xccl.
 *
 * Output: one "ok"/"FAIL" line per case (rank 0, or the failing rank), then
 *   RESULT: <passed> passed, <failed> failed
 * Exit status 0 when every case passed on every rank.
 */
#include <mpi.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CASES 128
#define N 4

static int world_rank, world_size;
static bool skip_stock_bugs;
static int ncase;
static int case_failed[MAX_CASES];

static void record(const char *name, const char *comm_name, bool ok, const char *detail)
{
    static char names[MAX_CASES][96];
    if (ncase >= MAX_CASES)
        return;
    snprintf(names[ncase], sizeof names[ncase], "%s comm=%s", name, comm_name);
    case_failed[ncase] = !ok;
    if (!ok)
        printf("FAIL %s rank=%d: %s\n", names[ncase], world_rank, detail);
    else if (world_rank == 0)
        printf("ok   %s: %s\n", names[ncase], detail);
    ncase++;
}

/* A bad call must return an error code (the handler is MPI_ERRORS_RETURN). */
static void expect_error(const char *name, const char *comm_name, int rc);

/* MPI_IN_PLACE where the standard does not allow it (the receive buffer,
 * the bcast buffer): MPI_ERR_BUFFER or MPI_ERR_ARG, the classes Open MPI
 * 4.1's own checks return (mpi_param_check 1: MPI_ERR_BUFFER for
 * (i)allreduce, MPI_ERR_ARG for the others).  With mpi_param_check 0 only
 * the coll component can catch it; xccl dereferenced it (a segfault in
 * every one of these forms).  A nonblocking call that wrongly succeeds is
 * waited for. */
static void expect_buffer_error(const char *name, const char *comm_name, int rc, MPI_Request *req)
{
    int cls = MPI_ERR_UNKNOWN;
    if (MPI_SUCCESS == rc) {
        if (NULL != req && MPI_REQUEST_NULL != *req) {
            MPI_Wait(req, MPI_STATUS_IGNORE);
        }
        expect_error(name, comm_name, rc);
        return;
    }
    MPI_Error_class(rc, &cls);
    if (MPI_ERR_BUFFER != cls && MPI_ERR_ARG != cls) {
        char detail[MPI_MAX_ERROR_STRING + 64], s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(cls, s, &len);
        snprintf(detail, sizeof detail, "error class %d (%s), want MPI_ERR_BUFFER or MPI_ERR_ARG",
                 cls, s);
        record(name, comm_name, false, detail);
        return;
    }
    expect_error(name, comm_name, rc);
}

static void expect_error(const char *name, const char *comm_name, int rc)
{
    char detail[MPI_MAX_ERROR_STRING + 64];
    if (rc == MPI_SUCCESS) {
        record(name, comm_name, false, "returned MPI_SUCCESS, want an error");
        return;
    }
    int cls = MPI_ERR_UNKNOWN, len = 0;
    char s[MPI_MAX_ERROR_STRING];
    MPI_Error_class(rc, &cls);
    MPI_Error_string(cls, s, &len);
    snprintf(detail, sizeof detail, "error class %d (%s)", cls, s);
    record(name, comm_name, true, detail);
}

static void bad_calls(MPI_Comm comm, const char *cn)
{
    int size;
    int sb[N * 64], rb[N * 64];
    MPI_Comm_size(comm, &size);
    int *rcounts = malloc((size_t)size * sizeof *rcounts);
    for (int i = 0; i < N * 64; i++)
        sb[i] = rb[i] = i;

    expect_error("allreduce count=-1", cn,
                 MPI_Allreduce(sb, rb, -1, MPI_INT, MPI_SUM, comm));
    expect_error("allreduce datatype=MPI_DATATYPE_NULL", cn,
                 MPI_Allreduce(sb, rb, N, MPI_DATATYPE_NULL, MPI_SUM, comm));
    expect_error("allreduce op=MPI_OP_NULL", cn,
                 MPI_Allreduce(sb, rb, N, MPI_INT, MPI_OP_NULL, comm));
    expect_error("bcast root=-1", cn, MPI_Bcast(sb, N, MPI_INT, -1, comm));
    expect_error("bcast root=size", cn, MPI_Bcast(sb, N, MPI_INT, size, comm));
    expect_error("allgather count=-1", cn,
                 MPI_Allgather(sb, -1, MPI_INT, rb, -1, MPI_INT, comm));
    /* sendtype only: Open MPI 4.1's MPI layer returns MPI_SUCCESS before
     * the coll component when recvcount * size(recvtype) is 0, which is the
     * case for recvtype MPI_DATATYPE_NULL, so with mpi_param_check 0 nobody
     * could catch that variant */
    expect_error("alltoall sendtype=MPI_DATATYPE_NULL", cn,
                 MPI_Alltoall(sb, 1, MPI_DATATYPE_NULL, rb, 1, MPI_INT, comm));
    for (int i = 0; i < size; i++)
        rcounts[i] = 1;
    rcounts[size - 1] = -1;
    expect_error("reduce_scatter recvcounts[size-1]=-1", cn,
                 MPI_Reduce_scatter(sb, rb, rcounts, MPI_INT, MPI_SUM, comm));
    expect_error("reduce_scatter_block op=MPI_OP_NULL", cn,
                 MPI_Reduce_scatter_block(sb, rb, 1, MPI_INT, MPI_OP_NULL, comm));
    if (!skip_stock_bugs)
        expect_error("allreduce sendbuf=NULL recvbuf=NULL count=4", cn,
                     MPI_Allreduce(NULL, NULL, N, MPI_INT, MPI_SUM, comm));

    /* MPI_IN_PLACE as the receive buffer (as the buffer of bcast): the 6
     * blocking and the 6 nonblocking forms xccl intercepts */
    MPI_Request req;
    for (int i = 0; i < size; i++)
        rcounts[i] = 1;
    expect_buffer_error("allreduce recvbuf=MPI_IN_PLACE", cn,
                        MPI_Allreduce(sb, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, comm), NULL);
    expect_buffer_error("allgather recvbuf=MPI_IN_PLACE", cn,
                        MPI_Allgather(sb, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, comm), NULL);
    expect_buffer_error("reduce_scatter recvbuf=MPI_IN_PLACE", cn,
                        MPI_Reduce_scatter(sb, MPI_IN_PLACE, rcounts, MPI_INT, MPI_SUM, comm),
                        NULL);
    expect_buffer_error("reduce_scatter_block recvbuf=MPI_IN_PLACE", cn,
                        MPI_Reduce_scatter_block(sb, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, comm),
                        NULL);
    expect_buffer_error("alltoall recvbuf=MPI_IN_PLACE", cn,
                        MPI_Alltoall(sb, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, comm), NULL);
    expect_buffer_error("bcast buffer=MPI_IN_PLACE", cn,
                        MPI_Bcast(MPI_IN_PLACE, N, MPI_INT, 0, comm), NULL);
    req = MPI_REQUEST_NULL;
    expect_buffer_error("iallreduce recvbuf=MPI_IN_PLACE", cn,
                        MPI_Iallreduce(sb, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, comm, &req), &req);
    req = MPI_REQUEST_NULL;
    expect_buffer_error("iallgather recvbuf=MPI_IN_PLACE", cn,
                        MPI_Iallgather(sb, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, comm, &req),
                        &req);
    req = MPI_REQUEST_NULL;
    expect_buffer_error("ireduce_scatter recvbuf=MPI_IN_PLACE", cn,
                        MPI_Ireduce_scatter(sb, MPI_IN_PLACE, rcounts, MPI_INT, MPI_SUM, comm,
                                            &req), &req);
    req = MPI_REQUEST_NULL;
    expect_buffer_error("ireduce_scatter_block recvbuf=MPI_IN_PLACE", cn,
                        MPI_Ireduce_scatter_block(sb, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, comm,
                                                  &req), &req);
    req = MPI_REQUEST_NULL;
    expect_buffer_error("ialltoall recvbuf=MPI_IN_PLACE", cn,
                        MPI_Ialltoall(sb, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, comm, &req), &req);
    req = MPI_REQUEST_NULL;
    expect_buffer_error("ibcast buffer=MPI_IN_PLACE", cn,
                        MPI_Ibcast(MPI_IN_PLACE, N, MPI_INT, 0, comm, &req), &req);
    free(rcounts);
}

static void good_allreduce(MPI_Comm comm, const char *cn)
{
    int size, in[N], out[N], rc;
    char detail[128] = "correct result";
    bool ok = true;
    MPI_Comm_size(comm, &size);
    for (int i = 0; i < N; i++) {
        in[i] = world_rank * 10 + i;
        out[i] = -1;
    }
    rc = MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, comm);
    if (rc != MPI_SUCCESS) {
        ok = false;
        snprintf(detail, sizeof detail, "returned error %d", rc);
    }
    /* comm has the ranks of world (world or a dup of it) */
    for (int i = 0; i < N && ok; i++) {
        int want = 10 * (size * (size - 1) / 2) + size * i;
        if (out[i] != want) {
            ok = false;
            snprintf(detail, sizeof detail, "index=%d got=%d want=%d", i, out[i], want);
        }
    }
    record("good allreduce after bad calls", cn, ok, detail);
}

int main(int argc, char **argv)
{
    MPI_Comm dup;
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-k") == 0) {
            skip_stock_bugs = true;
        } else {
            if (world_rank == 0)
                fprintf(stderr, "usage: %s [-k]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);

    bad_calls(MPI_COMM_WORLD, "world");
    bad_calls(dup, "dup");
    good_allreduce(MPI_COMM_WORLD, "world");
    good_allreduce(dup, "dup");

    /* a case fails if it failed on any rank; gathered point-to-point */
    int status = 0;
    if (world_rank != 0) {
        MPI_Send(case_failed, ncase, MPI_INT, 0, 1, MPI_COMM_WORLD);
        MPI_Recv(&status, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        int other[MAX_CASES], passed = 0, failed = 0;
        for (int q = 1; q < world_size; q++) {
            MPI_Status st;
            int n = 0;
            MPI_Recv(other, MAX_CASES, MPI_INT, q, 1, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_INT, &n);
            if (n != ncase) {
                printf("FAIL rank=%d ran %d cases, rank 0 ran %d\n", q, n, ncase);
                failed++;
            }
            for (int i = 0; i < ncase && i < n; i++)
                case_failed[i] |= other[i];
        }
        for (int i = 0; i < ncase; i++) {
            if (case_failed[i])
                failed++;
            else
                passed++;
        }
        printf("RESULT: %d passed, %d failed\n", passed, failed);
        status = failed != 0;
        for (int q = 1; q < world_size; q++)
            MPI_Send(&status, 1, MPI_INT, q, 2, MPI_COMM_WORLD);
    }

    MPI_Comm_free(&dup);
    MPI_Finalize();
    return status;
}
