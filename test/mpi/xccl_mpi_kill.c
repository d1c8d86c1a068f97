/*
 * xccl_mpi_kill: a rank killed (SIGKILL) while the others are inside
 * shared-memory collectives.
 *
 * Every rank loops over allreduce (larger than the slot: a pipeline of
 * chunks through the node's segment) and bcast, checking results; the
 * last rank starts a thread that sends SIGKILL to its own process
 * KILL_MS milliseconds after its third iteration began.  The caller
 * (run_mpi_tests.sh) checks that mpirun ends (the job aborts) within its
 * limit, that no process of the job survives, and that /dev/shm holds
 * nothing new.  Before the kill, rank 0 prints "LOOPING <iterations>" so
 * the test knows the collectives ran.
 *
 * usage: xccl_mpi_kill [count_ints]
 */
#include <mpi.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define KILL_MS 300

static void *killer(void *arg)
{
    (void) arg;
    struct timespec ts = { KILL_MS / 1000, (KILL_MS % 1000) * 1000000L };
    nanosleep(&ts, NULL);
    kill(getpid(), SIGKILL);
    return NULL;
}

int main(int argc, char **argv)
{
    int rank, size, provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = argc > 1 ? atoi(argv[1]) : 1 << 19;
    int *in = malloc((size_t) n * sizeof(int)), *out = malloc((size_t) n * sizeof(int));
    for (int i = 0; i < n; i++) {
        in[i] = rank + i;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_t t;
    for (long it = 0;; it++) {
        /* The clock starts once every rank has run the loop's collectives
         * twice (rank 0 has said so by then): on a loaded machine a clock
         * started before the loop could kill before rank 0's line. */
        if (2 == it && rank == size - 1 && size > 1) {
            pthread_create(&t, NULL, killer, NULL);
        }
        MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        const int want0 = size * (size - 1) / 2;
        if (out[0] != want0) {
            printf("FAIL rank=%d iteration %ld: %d, want %d\n", rank, it, out[0], want0);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Bcast(out, 8, MPI_INT, 0, MPI_COMM_WORLD);
        if (0 == rank && 1 == it) {
            printf("LOOPING %ld\n", it);
            fflush(stdout);
        }
        if (it > 1000000) {
            break;           /* never reached while the killer works */
        }
    }
    MPI_Finalize();
    return 0;
}
