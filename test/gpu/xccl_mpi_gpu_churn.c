/*
 * xccl_mpi_gpu_churn: communicators made, used once on device buffers and
 * freed, as a training code that builds a group per phase does; then host
 * calls on a communicator that reuses the same context id.
 *
 * CYCLES times: MPI_Comm_dup of MPI_COMM_WORLD, one blocking MPI_Allreduce
 * (MPI_INT SUM, COUNT elements) on device buffers whose data depends on
 * (cycle, rank, element), the result read back and checked, the
 * communicator freed at once (rank (cycle mod p) first sleeps a little, so
 * the ranks free at different times).  Such a call sets the communicator
 * up and may run through CUDA IPC without the shared-memory level, whose
 * vote goes on after the call: a communicator freed while its vote runs
 * leaves the peers' vote messages behind under tags a later communicator
 * of the same context id would match (coll_xccl_level_vote.c, vote_gen).
 * Then a last MPI_Comm_dup (the same context id) runs host MPI_Allreduce
 * and MPI_Bcast at 1 element .. 64 Ki elements through the level, checked.
 *
 * Output: "FAIL ..." lines, then on rank 0 "RESULT: <passed> passed,
 * <failed> failed" (checks).  Exit 0 all right, 1 wrong results, 77
 * ("SKIP: ...") without a driver or device.  run_gpu_tests.sh also reads
 * the verbose log (xccl_mpi_gpu_churn.*): no vote may be abandoned.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_cuda.h"

#define CYCLES 24
#define COUNT 16384

static int my_rank, nprocs;

#define CU_CHECK(call) TEST_CU_CHECK(my_rank, call)

static int want_sum(int cycle, int i)
{
    /* sum over r of (cycle * 7 + r * 3 + i % 101) */
    return nprocs * (cycle * 7 + i % 101) + 3 * nprocs * (nprocs - 1) / 2;
}

int main(int argc, char **argv)
{
    const char *skip = test_cuda_setup();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (!test_ctl_all(NULL == skip, my_rank, nprocs)) {
        if (0 == my_rank) {
            printf("SKIP: %s\n", skip ? skip : "a rank has no CUDA device");
        }
        MPI_Finalize();
        return 77;
    }
    const size_t bytes = COUNT * sizeof(int);
    int *h = test_xmalloc(bytes, my_rank), *back = test_xmalloc(bytes, my_rank);
    long passed = 0, failed = 0;
    CUdeviceptr ds, dr;
    CU_CHECK(cu.MemAlloc(&ds, bytes));
    CU_CHECK(cu.MemAlloc(&dr, bytes));
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        for (int i = 0; i < COUNT; i++) {
            h[i] = cycle * 7 + my_rank * 3 + i % 101;
        }
        CU_CHECK(cu.MemcpyHtoD(ds, h, bytes));
        MPI_Allreduce((void *) (uintptr_t) ds, (void *) (uintptr_t) dr, COUNT, MPI_INT, MPI_SUM, c);
        CU_CHECK(cu.MemcpyDtoH(back, dr, bytes));
        int bad = 0;
        for (int i = 0; i < COUNT; i++) {
            if (back[i] != want_sum(cycle, i)) {
                if (bad++ < 3) {
                    printf("FAIL cycle=%d allreduce rank=%d index=%d got=%d want=%d\n", cycle,
                           my_rank, i, back[i], want_sum(cycle, i));
                }
            }
        }
        bad ? failed++ : passed++;
        if (my_rank == cycle % nprocs) {
            usleep(2000);
        }
        MPI_Comm_free(&c);
    }
    CU_CHECK(cu.MemFree(ds));
    CU_CHECK(cu.MemFree(dr));

    /* host calls on the next communicator of that context id */
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    for (int n = 1; n <= COUNT; n *= 4) {
        for (int i = 0; i < n; i++) {
            h[i] = 1000 + my_rank * 3 + i % 101;
        }
        MPI_Allreduce(h, back, n, MPI_INT, MPI_SUM, c);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            bad += back[i] != want_sum(0, i) + 1000 * nprocs;
        }
        const int root = n % nprocs;
        for (int i = 0; i < n; i++) {
            back[i] = my_rank == root ? n * 5 + i : -1;
        }
        MPI_Bcast(back, n, MPI_INT, root, c);
        for (int i = 0; i < n; i++) {
            bad += back[i] != n * 5 + i;
        }
        if (bad) {
            printf("FAIL host n=%d rank=%d: %d wrong elements\n", n, my_rank, bad);
        }
        bad ? failed++ : passed++;
    }
    MPI_Comm_free(&c);
    free(h);
    free(back);

    long sums[2] = { passed, failed }, tot[2];
    MPI_Reduce(sums, tot, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == my_rank) {
        printf("RESULT: %ld passed, %ld failed\n", tot[0], tot[1]);
    }
    MPI_Finalize();
    test_cuda_release();
    return failed ? 1 : 0;
}
