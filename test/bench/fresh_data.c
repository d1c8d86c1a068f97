/*
 * fresh_data: the time of one collective call on data the program has just
 * written, or on data unchanged since the last call (what peer_bench and
 * the OSU tests measure: they never rewrite their buffers).  Plain MPI.
 *
 *   mpirun -np N fresh_data COLL BYTES ITERS FRESH
 *
 * COLL: allgather, alltoall, bcast (root 0) or allreduce (float sum);
 * BYTES: allgather received / alltoall sent / bcast / allreduce per rank.
 * Each call is timed alone, after a barrier; with FRESH 1 every rank
 * rewrites its send data (the bcast root its buffer) before the barrier.
 * Prints the median over ITERS calls of the slowest rank's time, in us.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int r, p;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (argc != 5) {
        if (0 == r) {
            fprintf(stderr, "usage: fresh_data allgather|alltoall|bcast|allreduce BYTES ITERS 0|1\n");
        }
        MPI_Finalize();
        return 2;
    }
    const char *c = argv[1];
    const size_t n = strtoull(argv[2], NULL, 0);
    const int iters = atoi(argv[3]), fresh = atoi(argv[4]);
    char *s = malloc(n), *d = malloc(n);
    double *t = malloc((size_t) (iters > 0 ? iters : 1) * sizeof(double));
    if (NULL == s || NULL == d || NULL == t || iters <= 0) {
        fprintf(stderr, "fresh_data: bad arguments or out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(s, r, n);
    memset(d, 0, n);
    for (int i = -10; i < iters; i++) {            /* 10 untimed calls first */
        if (fresh) {
            memset(s, i + r, n);
            if (0 == strcmp(c, "bcast") && 0 == r) {
                memset(d, i, n);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (0 == strcmp(c, "allgather")) {
            MPI_Allgather(s, (int) (n / p), MPI_BYTE, d, (int) (n / p), MPI_BYTE, MPI_COMM_WORLD);
        } else if (0 == strcmp(c, "alltoall")) {
            MPI_Alltoall(s, (int) (n / p), MPI_BYTE, d, (int) (n / p), MPI_BYTE, MPI_COMM_WORLD);
        } else if (0 == strcmp(c, "bcast")) {
            MPI_Bcast(d, (int) n, MPI_BYTE, 0, MPI_COMM_WORLD);
        } else if (0 == strcmp(c, "allreduce")) {
            MPI_Allreduce(s, d, (int) (n / sizeof(float)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else {
            fprintf(stderr, "fresh_data: unknown collective %s\n", c);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        double dt = MPI_Wtime() - t0, slowest;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= 0) {
            t[i] = slowest;
        }
    }
    qsort(t, (size_t) iters, sizeof(double), cmp);
    if (0 == r) {
        printf("%.2f\n", t[iters / 2] * 1e6);
    }
    free(s);
    free(d);
    free(t);
    MPI_Finalize();
    return 0;
}
