/*
 * xccl_mpi_gpu_threads: nonblocking collectives on CUDA device buffers from
 * several threads at once (MPI_THREAD_MULTIPLE), each thread on a
 * communicator of its own, as a training code with one communication
 * thread per process group does.
 *
 * The main thread loads the driver (test_cuda.h), makes its device's
 * primary context current, initialises MPI with MPI_THREAD_MULTIPLE and
 * duplicates MPI_COMM_WORLD once per thread (THREADS).  Each thread makes
 * the same context current and, on its communicator:
 *   - one blocking MPI_Allreduce (CUDA IPC is set up by a blocking call);
 *   - ROUNDS rounds, each at one of the sizes 1 element, 16 KiB, 64 KiB + 1
 *     element, 1 MiB (in turn): K buffers per collective filled with data
 *     that depends on (thread, round, buffer, rank, element), uploaded with
 *     cuMemcpyHtoD from pageable memory, then K MPI_Iallreduce (MPI_INT
 *     SUM), K MPI_Iallgather and K MPI_Ibcast (root = (round + k) mod p)
 *     started back to back, one MPI_Waitall, every send buffer overwritten
 *     (cuMemsetD8 0x5A) as soon as it returns, every result read back and
 *     compared element by element with the test's own reference.
 * So several nonblocking calls of one communicator are in flight while the
 * other threads' calls run on theirs: the calls of one communicator must
 * keep their order, the communicators must not disturb each other.
 *
 * Output: "FAIL thread=<t> round=<r> <coll> k=<k> rank=<r> index=<i> got=<g>
 * want=<w>" (at most 3 per thread and rank), then on rank 0
 * "RESULT: <passed> passed, <failed> failed" (thread-rounds).
 * Exit: 0 all right, 1 wrong results, 77 ("SKIP: ...") without a driver or
 * device, or when MPI gives less than MPI_THREAD_MULTIPLE.
 * Control traffic (who failed) is point-to-point on MPI_COMM_WORLD, from
 * the main thread once the others are joined.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cuda.h"

#define THREADS 2
#define ROUNDS 16
#define K 3
#define SCRIBBLE 0x5A
#define MAX_FAIL_LINES 3

static int my_rank, nprocs;
static CUcontext ctx;
static CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
static CUresult (*CtxGetCurrent)(CUcontext *);

#define CU_CHECK(call) TEST_CU_CHECK(my_rank, call)

enum { C_ALLREDUCE, C_ALLGATHER, C_BCAST, NCOLL };
static const char *const coll_names[NCOLL] = { "iallreduce", "iallgather", "ibcast" };

typedef struct {
    int t;                     /* thread number */
    MPI_Comm comm;
    int bad[ROUNDS];           /* this rank saw round r wrong */
    int lines;
} thread_t;

/* The input element i of rank r for (thread, round, buffer, collective). */
static int32_t value(int t, int round, int k, int coll, int r, size_t i)
{
    uint64_t x = ((uint64_t) t << 48) ^ ((uint64_t) round << 36) ^ ((uint64_t) k << 30) ^
                 ((uint64_t) coll << 28) ^ ((uint64_t) r << 20) ^ i;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (int32_t) (x % 2000003u) - 1000001;
}

/* Element i of this rank's result. */
static int32_t want(int t, int round, int k, int coll, size_t n, size_t i)
{
    switch (coll) {
    case C_ALLREDUCE: {
        uint32_t s = 0;
        for (int r = 0; r < nprocs; r++) {
            s += (uint32_t) value(t, round, k, coll, r, i);
        }
        return (int32_t) s;
    }
    case C_ALLGATHER:
        return value(t, round, k, coll, (int) (i / n), i % n);
    default:
        return value(t, round, k, coll, (round + k) % nprocs, i);
    }
}

static size_t round_count(int round)
{
    static const size_t bytes[] = { 4, 16u << 10, (64u << 10) + 4, 1u << 20 };
    return bytes[round % 4] / sizeof(int32_t);
}

static void *thread_main(void *arg)
{
    thread_t *th = arg;
    const size_t P = (size_t) nprocs;
    CU_CHECK(cu.CtxSetCurrent(ctx));
    /* CUDA IPC is set up by a blocking call on the communicator. */
    CUdeviceptr warm;
    CU_CHECK(cu.MemAlloc(&warm, sizeof(int32_t)));
    CU_CHECK(MemsetD8(warm, 0, sizeof(int32_t)));
    MPI_Allreduce(MPI_IN_PLACE, (void *) (uintptr_t) warm, 1, MPI_INT, MPI_SUM, th->comm);
    CU_CHECK(cu.MemFree(warm));
    const size_t max = round_count(3) * P;
    CUdeviceptr sb[NCOLL][K], rb[NCOLL][K];
    for (int c = 0; c < NCOLL; c++) {
        for (int k = 0; k < K; k++) {
            CU_CHECK(cu.MemAlloc(&sb[c][k], max * sizeof(int32_t)));
            CU_CHECK(cu.MemAlloc(&rb[c][k], max * sizeof(int32_t)));
        }
    }
    int32_t *host = test_xmalloc(max * sizeof(int32_t), my_rank), *res[NCOLL][K];
    for (int c = 0; c < NCOLL; c++) {
        for (int k = 0; k < K; k++) {
            res[c][k] = test_xmalloc(max * sizeof(int32_t), my_rank);
        }
    }
    for (int round = 0; round < ROUNDS; round++) {
        const size_t n = round_count(round);
        MPI_Request req[NCOLL * K];
        int bad = 0;
        for (int c = 0; c < NCOLL; c++) {
            for (int k = 0; k < K; k++) {
                const size_t rn = C_ALLGATHER == c ? n * P : n;
                CU_CHECK(MemsetD8(rb[c][k], SCRIBBLE, rn * sizeof(int32_t)));
                for (size_t i = 0; i < n; i++) {
                    host[i] = value(th->t, round, k, c, my_rank, i);
                }
                /* bcast: only the root's buffer holds the input */
                CUdeviceptr in = C_BCAST == c ? rb[c][k] : sb[c][k];
                if (C_BCAST != c || (round + k) % nprocs == my_rank) {
                    CU_CHECK(cu.MemcpyHtoD(in, host, n * sizeof(int32_t)));
                }
            }
        }
        for (int k = 0; k < K; k++) {
            void *s = (void *) (uintptr_t) sb[C_ALLREDUCE][k], *r = (void *) (uintptr_t) rb[C_ALLREDUCE][k];
            MPI_Iallreduce(s, r, (int) n, MPI_INT, MPI_SUM, th->comm, &req[C_ALLREDUCE * K + k]);
            s = (void *) (uintptr_t) sb[C_ALLGATHER][k];
            r = (void *) (uintptr_t) rb[C_ALLGATHER][k];
            MPI_Iallgather(s, (int) n, MPI_INT, r, (int) n, MPI_INT, th->comm, &req[C_ALLGATHER * K + k]);
            r = (void *) (uintptr_t) rb[C_BCAST][k];
            MPI_Ibcast(r, (int) n, MPI_INT, (round + k) % nprocs, th->comm, &req[C_BCAST * K + k]);
        }
        if (MPI_SUCCESS != MPI_Waitall(NCOLL * K, req, MPI_STATUSES_IGNORE)) {
            bad = 1;
        }
        /* the results at once, then the send buffers are the user's again */
        for (int c = 0; c < NCOLL; c++) {
            for (int k = 0; k < K; k++) {
                const size_t rn = C_ALLGATHER == c ? n * P : n;
                CU_CHECK(cu.MemcpyDtoH(res[c][k], rb[c][k], rn * sizeof(int32_t)));
            }
        }
        for (int c = 0; c < NCOLL - 1; c++) {
            for (int k = 0; k < K; k++) {
                CU_CHECK(MemsetD8(sb[c][k], SCRIBBLE, n * sizeof(int32_t)));
            }
        }
        for (int c = 0; c < NCOLL; c++) {
            for (int k = 0; k < K; k++) {
                const size_t rn = C_ALLGATHER == c ? n * P : n;
                const int32_t *got = res[c][k];
                for (size_t i = 0; i < rn; i++) {
                    const int32_t w = want(th->t, round, k, c, n, i);
                    if (got[i] != w) {
                        if (th->lines++ < MAX_FAIL_LINES) {
                            printf("FAIL thread=%d round=%d %s k=%d rank=%d index=%zu got=%d want=%d\n",
                                   th->t, round, coll_names[c], k, my_rank, i, got[i], w);
                            fflush(stdout);
                        }
                        bad = 1;
                        break;
                    }
                }
            }
        }
        th->bad[round] = bad;
    }
    free(host);
    for (int c = 0; c < NCOLL; c++) {
        for (int k = 0; k < K; k++) {
            free(res[c][k]);
            CU_CHECK(cu.MemFree(sb[c][k]));
            CU_CHECK(cu.MemFree(rb[c][k]));
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    const char *skip = test_cuda_setup();
    if (NULL == skip && (NULL == (*(void **) &MemsetD8 = dlsym(libcuda, "cuMemsetD8_v2")) ||
                         NULL == (*(void **) &CtxGetCurrent = dlsym(libcuda, "cuCtxGetCurrent")))) {
        skip = "libcuda.so.1 lacks cuMemsetD8_v2 or cuCtxGetCurrent";
    }
    if (NULL == skip && 0 != CtxGetCurrent(&ctx)) {
        skip = "no current context";
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (NULL == skip && provided < MPI_THREAD_MULTIPLE) {
        skip = "MPI_THREAD_MULTIPLE not provided";
    }
    if (!test_ctl_all(NULL == skip, my_rank, nprocs)) {
        if (0 == my_rank) {
            printf("SKIP: %s\n", skip ? skip : "another rank cannot run it");
        }
        MPI_Finalize();
        test_cuda_release();
        return 77;
    }
    thread_t th[THREADS];
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
        th[t] = (thread_t) { .t = t };
        MPI_Comm_dup(MPI_COMM_WORLD, &th[t].comm);
    }
    for (int t = 0; t < THREADS; t++) {
        if (0 != pthread_create(&tid[t], NULL, thread_main, &th[t])) {
            fprintf(stderr, "rank %d: pthread_create failed\n", my_rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    int bad[THREADS * ROUNDS];
    for (int t = 0; t < THREADS; t++) {
        pthread_join(tid[t], NULL);
        MPI_Comm_free(&th[t].comm);
        memcpy(&bad[t * ROUNDS], th[t].bad, sizeof(th[t].bad));
    }
    /* a thread-round passes where it passed on every rank (point-to-point) */
    int failed = 0;
    if (0 == my_rank) {
        for (int r = 1; r < nprocs; r++) {
            int theirs[THREADS * ROUNDS];
            MPI_Recv(theirs, THREADS * ROUNDS, MPI_INT, r, TEST_CTL_TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            for (int i = 0; i < THREADS * ROUNDS; i++) {
                bad[i] |= theirs[i];
            }
        }
        for (int i = 0; i < THREADS * ROUNDS; i++) {
            failed += 0 != bad[i];
        }
        printf("RESULT: %d passed, %d failed\n", THREADS * ROUNDS - failed, failed);
        fflush(stdout);
    } else {
        MPI_Send(bad, THREADS * ROUNDS, MPI_INT, 0, TEST_CTL_TAG, MPI_COMM_WORLD);
    }
    failed = !test_ctl_all(0 == failed, my_rank, nprocs);
    MPI_Finalize();
    test_cuda_release();
    return failed ? 1 : 0;
}
