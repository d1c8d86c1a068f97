/*
 * xccl_mpi_nb: nonblocking collectives.  Several of them are in flight at
 * once, on MPI_COMM_WORLD and on a dup of it, mixed with point-to-point
 * requests, completed by MPI_Waitall or by MPI_Test polling (in a changing
 * order); every result is compared with a reference computed locally.
 *
 * Also: an intercommunicator (xccl declines those; Open MPI's modules must
 * still run its collectives correctly with xccl loaded).
 *
 * With -l (the shared-memory level): every round also starts large calls
 * (several pipeline chunks of a 1 MiB slot) and makes two blocking calls
 * (a small one and a large allgather) while the nonblocking ones are in
 * flight: on one node all of them share each rank's slot and flag, so
 * they must run one at a time in call order.  The first calls on each
 * communicator are nonblocking: they must get the level too (its vote
 * may not wait for a blocking call).
 *
 * Output: "NB_CALLS <n>" (nonblocking collective calls made by every rank)
 * and "RESULT: <passed> passed, <failed> failed" from rank 0; exit status 0
 * when every check passed on every rank.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000   /* elements: above xccl's small-message threshold when it is 0 */

static int rank, size, failed, checks, nb_calls, level;

static void expect(int ok, const char *what, int round)
{
    checks++;
    if (!ok) {
        failed++;
        printf("FAIL rank=%d round=%d %s\n", rank, round, what);
    }
}

/* Sizes of the large calls (-l), in elements per rank. */
enum { BIG_AR = 300000, BIG_AG = 100000, BIG_A2A = 60000, BIG_BC = 400000 };

/* The large calls of a round (-l). */
typedef struct {
    int *ar_in, *ar_out, *ag_in, *ag_out, *a2a_in, *a2a_out, *bl_in, *bl_out;
    double *bc;
    int small_in, small_out;
} big_t;

static void big_start(big_t *b, MPI_Comm w, MPI_Comm d, int round, MPI_Request *req, int *nreq)
{
    b->ar_in = malloc(BIG_AR * sizeof(int));
    b->ar_out = malloc(BIG_AR * sizeof(int));
    b->ag_in = malloc(BIG_AG * sizeof(int));
    b->ag_out = malloc((size_t) size * BIG_AG * sizeof(int));
    b->a2a_in = malloc((size_t) size * BIG_A2A * sizeof(int));
    b->a2a_out = malloc((size_t) size * BIG_A2A * sizeof(int));
    b->bl_in = malloc(BIG_AG * sizeof(int));
    b->bl_out = malloc((size_t) size * BIG_AG * sizeof(int));
    b->bc = malloc(BIG_BC * sizeof(double));
    for (int i = 0; i < BIG_AR; i++) {
        b->ar_in[i] = rank * 7 + i + round;
    }
    for (int i = 0; i < BIG_AG; i++) {
        b->ag_in[i] = rank * BIG_AG + i + round;
        b->bl_in[i] = -(rank * BIG_AG + i) - round;
    }
    for (int i = 0; i < size * BIG_A2A; i++) {
        b->a2a_in[i] = rank * 1000003 + i + round;
    }
    for (int i = 0; i < BIG_BC; i++) {
        b->bc[i] = 0 == rank ? i * 0.25 + round : -1.0;
    }
    b->small_in = rank + round;
    MPI_Iallreduce(b->ar_in, b->ar_out, BIG_AR, MPI_INT, MPI_SUM, w, &req[(*nreq)++]);
    MPI_Iallgather(b->ag_in, BIG_AG, MPI_INT, b->ag_out, BIG_AG, MPI_INT, d, &req[(*nreq)++]);
    /* blocking, while the calls above are in flight */
    MPI_Allreduce(&b->small_in, &b->small_out, 1, MPI_INT, MPI_SUM, w);
    MPI_Ialltoall(b->a2a_in, BIG_A2A, MPI_INT, b->a2a_out, BIG_A2A, MPI_INT, w, &req[(*nreq)++]);
    MPI_Allgather(b->bl_in, BIG_AG, MPI_INT, b->bl_out, BIG_AG, MPI_INT, d);
    MPI_Ibcast(b->bc, BIG_BC, MPI_DOUBLE, 0, d, &req[(*nreq)++]);
    nb_calls += 4;
}

static void big_check(big_t *b, int round)
{
    int ok = 1;
    for (int i = 0; i < BIG_AR && ok; i++) {
        ok = b->ar_out[i] == 7 * size * (size - 1) / 2 + size * (i + round);
    }
    expect(ok, "large iallreduce", round);
    ok = 1;
    for (int i = 0; i < size * BIG_AG && ok; i++) {
        ok = b->ag_out[i] == i + round && b->bl_out[i] == -i - round;
    }
    expect(ok, "large iallgather and allgather", round);
    ok = 1;
    for (int from = 0; from < size && ok; from++) {
        for (int j = 0; j < BIG_A2A && ok; j++) {
            ok = b->a2a_out[from * BIG_A2A + j] == from * 1000003 + rank * BIG_A2A + j + round;
        }
    }
    expect(ok, "large ialltoall", round);
    ok = 1;
    for (int i = 0; i < BIG_BC && ok; i++) {
        ok = b->bc[i] == i * 0.25 + round;
    }
    expect(ok, "large ibcast", round);
    expect(b->small_out == size * (size - 1) / 2 + size * round, "small allreduce among them", round);
    free(b->ar_in); free(b->ar_out); free(b->ag_in); free(b->ag_out); free(b->a2a_in);
    free(b->a2a_out); free(b->bl_in); free(b->bl_out); free(b->bc);
}

/* One round: start everything, complete everything, check everything. */
static void round_trip(MPI_Comm comms[2], int round, int use_test)
{
    enum { NREQ = 16 };
    MPI_Request req[NREQ];
    int nreq = 0;
    big_t big;
    int *ar_in = malloc(N * sizeof(int)), *ar_out = malloc(N * sizeof(int));
    int *ar_ip = malloc(N * sizeof(int));
    int *ag_out = malloc((size_t) size * N * sizeof(int)), ag_in[N];
    int *rsb_in = malloc((size_t) size * N * sizeof(int)), rsb_out[N];
    int *rcounts = malloc((size_t) size * sizeof(int)), rs_total = 0;
    int *a2a_in = malloc((size_t) size * 7 * sizeof(int)), *a2a_out = malloc((size_t) size * 7 * sizeof(int));
    double *bc = malloc(N * sizeof(double));
    int p2p_out = rank * 100 + round, p2p_in = -1;

    for (int i = 0; i < size; i++) {
        rcounts[i] = 1 + (i + round) % 5;
        rs_total += rcounts[i];
    }
    int *rs_in = malloc((size_t) rs_total * sizeof(int)), *rs_out = malloc(8 * sizeof(int));
    for (int i = 0; i < N; i++) {
        ar_in[i] = rank + i + round;
        ar_ip[i] = rank * 3 - i;
        ag_in[i] = rank * N + i;
        bc[i] = rank == size - 1 ? i * 0.5 + round : -1.0;
    }
    for (int i = 0; i < size * N; i++) {
        rsb_in[i] = rank + i;
    }
    for (int i = 0; i < rs_total; i++) {
        rs_in[i] = (rank + 1) * (i + 1);
    }
    for (int i = 0; i < size * 7; i++) {
        a2a_in[i] = rank * 100000 + i;
    }

    MPI_Comm w = comms[0], d = comms[1];
    MPI_Iallreduce(ar_in, ar_out, N, MPI_INT, MPI_SUM, w, &req[nreq++]);
    MPI_Iallgather(ag_in, N, MPI_INT, ag_out, N, MPI_INT, d, &req[nreq++]);
    MPI_Irecv(&p2p_in, 1, MPI_INT, (rank + size - 1) % size, 7, w, &req[nreq++]);
    MPI_Ireduce_scatter_block(rsb_in, rsb_out, N, MPI_INT, MPI_SUM, w, &req[nreq++]);
    MPI_Iallreduce(MPI_IN_PLACE, ar_ip, N, MPI_INT, MPI_MAX, d, &req[nreq++]);
    MPI_Ialltoall(a2a_in, 7, MPI_INT, a2a_out, 7, MPI_INT, w, &req[nreq++]);
    MPI_Isend(&p2p_out, 1, MPI_INT, (rank + 1) % size, 7, w, &req[nreq++]);
    MPI_Ireduce_scatter(rs_in, rs_out, rcounts, MPI_INT, MPI_SUM, d, &req[nreq++]);
    MPI_Ibcast(bc, N, MPI_DOUBLE, size - 1, w, &req[nreq++]);
    nb_calls += 7;
    if (level) {
        big_start(&big, w, d, round, req, &nreq);
    }

    if (use_test) {
        /* Poll the requests one by one, starting at a different one each round. */
        int left = nreq;
        while (left > 0) {
            for (int k = 0; k < nreq; k++) {
                int i = (k + round) % nreq, flag = 0;
                if (MPI_REQUEST_NULL == req[i]) {
                    continue;
                }
                MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
                left -= flag;
            }
        }
    } else {
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    }

    int ok = 1;
    for (int i = 0; i < N && ok; i++) {
        ok = ar_out[i] == size * (i + round) + size * (size - 1) / 2;
    }
    expect(ok, "iallreduce sum", round);
    ok = 1;
    for (int i = 0; i < N && ok; i++) {
        ok = ar_ip[i] == (size - 1) * 3 - i;
    }
    expect(ok, "iallreduce in place max", round);
    ok = 1;
    for (int i = 0; i < size * N && ok; i++) {
        ok = ag_out[i] == i;
    }
    expect(ok, "iallgather", round);
    ok = 1;
    for (int i = 0; i < N && ok; i++) {
        ok = rsb_out[i] == size * (rank * N + i) + size * (size - 1) / 2;
    }
    expect(ok, "ireduce_scatter_block", round);
    int first = 0;
    for (int i = 0; i < rank; i++) {
        first += rcounts[i];
    }
    ok = 1;
    for (int i = 0; i < rcounts[rank] && ok; i++) {
        ok = rs_out[i] == (size * (size + 1) / 2) * (first + i + 1);
    }
    expect(ok, "ireduce_scatter", round);
    ok = 1;
    for (int from = 0; from < size && ok; from++) {
        for (int j = 0; j < 7 && ok; j++) {
            ok = a2a_out[from * 7 + j] == from * 100000 + rank * 7 + j;
        }
    }
    expect(ok, "ialltoall", round);
    ok = 1;
    for (int i = 0; i < N && ok; i++) {
        ok = bc[i] == i * 0.5 + round;
    }
    expect(ok, "ibcast", round);
    expect(p2p_in == ((rank + size - 1) % size) * 100 + round, "isend/irecv", round);
    if (level) {
        big_check(&big, round);
    }

    free(ar_in); free(ar_out); free(ar_ip); free(ag_out); free(rsb_in); free(rcounts);
    free(a2a_in); free(a2a_out); free(bc); free(rs_in); free(rs_out);
}

int main(int argc, char **argv)
{
    MPI_Comm comms[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    level = argc > 1 && 0 == strcmp(argv[1], "-l");
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    if (level) {
        /* The first call on the dup: a nonblocking bcast, built once the
         * set-up and the level's vote are in (its non-roots read the
         * root's slot and have none of their own). */
        enum { FIRST = 40000 };
        int *first = malloc(FIRST * sizeof(int)), ok = 1;
        MPI_Request r;
        for (int i = 0; i < FIRST; i++) {
            first[i] = rank == size - 1 ? 3 * i + 1 : -1;
        }
        MPI_Ibcast(first, FIRST, MPI_INT, size - 1, comms[1], &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        for (int i = 0; i < FIRST && ok; i++) {
            ok = first[i] == 3 * i + 1;
        }
        expect(ok, "first call: ibcast", -1);
        nb_calls++;
        free(first);
    }
    for (int round = 0; round < 6; round++) {
        round_trip(comms, round, round % 2);
    }
    MPI_Comm_free(&comms[1]);

    if (size >= 2) {
        /* Two halves joined by an intercommunicator: an allreduce on it
         * returns the sum over the other group. */
        MPI_Comm half, inter;
        int color = rank < size / 2, remote_sum = 0, mine = rank + 1, got = -1;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? size / 2 : 0, 99, &inter);
        for (int r = 0; r < size; r++) {
            if ((r < size / 2) != color) {
                remote_sum += r + 1;
            }
        }
        MPI_Allreduce(&mine, &got, 1, MPI_INT, MPI_SUM, inter);
        expect(got == remote_sum, "allreduce on an intercommunicator", -1);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }

    int total_failed = 0, total_checks = 0;
    MPI_Reduce(&failed, &total_failed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&checks, &total_checks, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("NB_CALLS %d\n", nb_calls);
        printf("RESULT: %d passed, %d failed\n", total_checks - total_failed, total_failed);
    }
    MPI_Finalize();
    return total_failed ? 1 : 0;
}
