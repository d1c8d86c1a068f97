/*
 * installed_check: allreduce, bcast and alltoall on MPI_COMM_WORLD, as an
 * application calls them, for the installed package (test/deb/deb_check.sh
 * runs it at np 3 in a root without build tools, under plain mpirun, with
 * coll_xccl_verbose 1, and reads xccl's lines).  Plain MPI: it includes no
 * xccl header.
 *
 * Sizes from 4 KiB to 1 MiB per rank (at or above the default
 * coll_xccl_small_msg_bytes, so that xccl runs them), every bcast root,
 * int and double data whose results are exact.  Every rank checks its own
 * results against values it computes itself.
 *
 * Output: "installed_check: rank R: N calls ok" per rank, or FAIL lines;
 * exit status 0 when the rank's results were right, 1 otherwise (no
 * collective of its own for the verdict: every call is one under test).
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

static int failures;

static void fail(int rank, const char *what, int count, long i, double got, double want)
{
    if (failures++ < 10)
        printf("installed_check: FAIL rank %d %s count=%d index=%ld got=%g want=%g\n", rank, what,
               count, i, got, want);
}

int main(int argc, char **argv)
{
    int rank, size, calls = 0;
    const int counts[] = { 1024, 16384, 262144 };   /* 4 KiB, 64 KiB, 1 MiB of int */

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        const int n = counts[c];
        int *ia = malloc(sizeof(int) * (size_t)n);
        int *ib = malloc(sizeof(int) * (size_t)n);
        double *da = malloc(sizeof(double) * (size_t)n);
        double *db = malloc(sizeof(double) * (size_t)n);
        int *sa = malloc(sizeof(int) * (size_t)n * (size_t)size);
        int *ra = malloc(sizeof(int) * (size_t)n * (size_t)size);
        if (!ia || !ib || !da || !db || !sa || !ra) {
            fprintf(stderr, "installed_check: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }

        /* allreduce, int sum and double max */
        for (int i = 0; i < n; i++) {
            ia[i] = (rank + 1) * (i % 1000) - rank;
            da[i] = (double)((rank * 7 + i) % 13) * 0.25;
        }
        MPI_Allreduce(ia, ib, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(da, db, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        calls += 2;
        for (int i = 0; i < n; i++) {
            long want = 0;
            double dmax = 0;
            for (int r = 0; r < size; r++) {
                double d = (double)((r * 7 + i) % 13) * 0.25;
                want += (long)(r + 1) * (i % 1000) - r;
                if (r == 0 || d > dmax)
                    dmax = d;
            }
            if (ib[i] != want)
                fail(rank, "allreduce(int,sum)", n, i, ib[i], (double)want);
            if (db[i] != dmax)
                fail(rank, "allreduce(double,max)", n, i, db[i], dmax);
        }

        /* bcast from every root */
        for (int root = 0; root < size; root++) {
            for (int i = 0; i < n; i++)
                ia[i] = rank == root ? root * 100003 + i : -1;
            MPI_Bcast(ia, n, MPI_INT, root, MPI_COMM_WORLD);
            calls++;
            for (int i = 0; i < n; i++)
                if (ia[i] != root * 100003 + i)
                    fail(rank, "bcast", n, i, ia[i], root * 100003 + i);
        }

        /* alltoall: block d of rank s holds s, d and the index */
        for (int d = 0; d < size; d++)
            for (int i = 0; i < n; i++)
                sa[(size_t)d * (size_t)n + (size_t)i] = (rank * 64 + d) * 65536 + i % 65536;
        MPI_Alltoall(sa, n, MPI_INT, ra, n, MPI_INT, MPI_COMM_WORLD);
        calls++;
        for (int s = 0; s < size; s++)
            for (int i = 0; i < n; i++) {
                int want = (s * 64 + rank) * 65536 + i % 65536;
                int got = ra[(size_t)s * (size_t)n + (size_t)i];
                if (got != want)
                    fail(rank, "alltoall", n, i, got, want);
            }

        free(ia);
        free(ib);
        free(da);
        free(db);
        free(sa);
        free(ra);
    }

    if (failures)
        printf("installed_check: rank %d: %d wrong elements in %d calls\n", rank, failures, calls);
    else
        printf("installed_check: rank %d: %d calls ok\n", rank, calls);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;    /* mpirun exits non-zero when a rank does */
}
