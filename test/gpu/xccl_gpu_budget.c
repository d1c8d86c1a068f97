/*
 * xccl_gpu_budget: what a warm blocking collective on device buffers costs
 * in driver calls, counted by the fake driver (test/gpu/fake_cuda.c's
 * fake_cuda_calls; against a real driver: exit 77).
 *
 * For allreduce, allgather, reduce_scatter_block, alltoall and bcast, at
 * 8 B, 64 KiB, 4 MiB and 16 MiB per rank: 3 calls to warm up (mappings, exports,
 * kernels, streams), then ITERS calls on the same buffers, the calls of
 * every driver entry point counted around them.  Per call and rank:
 *   - no cuIpcOpenMemHandle and no cuIpcGetMemHandle (peers' buffers are
 *     mapped, this rank's exported, once per allocation);
 *   - at most one host synchronisation (cuStreamSynchronize,
 *     cuEventSynchronize, cuCtxSynchronize);
 *   - at most BUDGET(p) driver calls in all, the same number at every
 *     size (nothing grows with the message), but for reduce_scatter,
 *     whose leader folds the whole vector at once up to (p - 2) MiB and
 *     block by block above (algos/mesh_leader.c): there at most 2p calls
 *     more above, and the same at 4 and 16 MiB;
 *   - no copy between host and device memory: nothing was staged, every
 *     call went through CUDA IPC.
 * Then the same calls nonblocking (MPI_I<collective> + MPI_Wait), which
 * CUDA IPC runs from progress: per call and rank no host synchronisation
 * at all, no IPC handle opened or exported, nothing staged, and at most
 * BUDGET(p) driver calls, the same at every size, not counting the ones
 * that poll (cuEventQuery, and the context pushed and popped around each
 * progress step), whose number depends on how long the peers take.
 * Then the same calls persistent (MPI_<Coll>_init once for each
 * collective and size, MPI_Start + MPI_Wait for every call): what the
 * buffers are and where they live is found out at init, so per start,
 * beyond the nonblocking budget, no cuPointerGetAttribute(s) either.
 * Each rank's counts go to rank 0 point-to-point, which prints one line
 * per case (the largest rank's figures), "FAIL: ..." for a broken
 * budget and "RESULT: N passed, M failed" (cases).  Exit 0 all held, 1 a
 * budget broken, 77 no fake driver.  Arguments are ignored.
 *
 * The ranks take the CUDA IPC path by default (coll_xccl_gpu_ipc_bytes 1).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "../../tools/xccl_mpi_pnames.h"

#if !XCCL_MPI_HAVE_PERSIST
#error "no persistent collectives: neither MPI_<Coll>_init (MPI-4) nor MPIX_<Coll>_init (Open MPI pcollreq)"
#endif
#include "test_cuda.h"

#define ITERS 10
#define WARMUP 3
/* Driver calls per warm call and rank: a fixed part and one per peer
 * (the leader's copies to each peer, the mesh's per-peer copies). */
#define BUDGET(p) (24 + 4 * (p) + (p) * (p))

static unsigned long long (*calls)(const char *name);

static const char *const syncs[] = { "cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize" };

static const char *const polls[] = { "cuEventQuery", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2" };

typedef struct {
    double all, sync, ipc_open, ipc_get, staged, attrs;
} cost_t;

/* polled: leave the polling calls out of all */
static cost_t snapshot(int polled)
{
    cost_t c = { (double) calls(NULL), 0, (double) calls("cuIpcOpenMemHandle_v2"),
                 (double) calls("cuIpcGetMemHandle"), (double) calls("host<->device copies"),
                 (double) (calls("cuPointerGetAttribute") + calls("cuPointerGetAttributes")) };
    for (size_t i = 0; i < sizeof(syncs) / sizeof(syncs[0]); i++) {
        c.sync += (double) calls(syncs[i]);
    }
    for (size_t i = 0; polled && i < sizeof(polls) / sizeof(polls[0]); i++) {
        c.all -= (double) calls(polls[i]);
    }
    return c;
}

enum { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, ALLTOALL, BCAST, NCOLL };
static const char *const names[] = { "allreduce", "allgather", "reduce_scatter_block", "alltoall", "bcast" };

static void one_icall(int coll, CUdeviceptr s, CUdeviceptr r, int count, int p)
{
    void *sb = (void *) (uintptr_t) s, *rb = (void *) (uintptr_t) r;
    MPI_Request q;
    switch (coll) {
    case ALLREDUCE: MPI_Iallreduce(sb, rb, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q); break;
    case ALLGATHER:
        MPI_Iallgather(sb, count / p, MPI_FLOAT, rb, count / p, MPI_FLOAT, MPI_COMM_WORLD, &q);
        break;
    case REDUCE_SCATTER:
        MPI_Ireduce_scatter_block(sb, rb, count / p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
        break;
    case ALLTOALL:
        MPI_Ialltoall(sb, count / p, MPI_FLOAT, rb, count / p, MPI_FLOAT, MPI_COMM_WORLD, &q);
        break;
    default: MPI_Ibcast(rb, count, MPI_FLOAT, 0, MPI_COMM_WORLD, &q); break;
    }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* The persistent request of one collective (MPI_<Coll>_init). */
static void one_init(int coll, CUdeviceptr s, CUdeviceptr r, int count, int p, MPI_Request *q)
{
    void *sb = (void *) (uintptr_t) s, *rb = (void *) (uintptr_t) r;
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Info i = MPI_INFO_NULL;
    switch (coll) {
    case ALLREDUCE: MPI_Allreduce_init(sb, rb, count, MPI_FLOAT, MPI_SUM, w, i, q); break;
    case ALLGATHER: MPI_Allgather_init(sb, count / p, MPI_FLOAT, rb, count / p, MPI_FLOAT, w, i, q); break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block_init(sb, rb, count / p, MPI_FLOAT, MPI_SUM, w, i, q);
        break;
    case ALLTOALL: MPI_Alltoall_init(sb, count / p, MPI_FLOAT, rb, count / p, MPI_FLOAT, w, i, q); break;
    default: MPI_Bcast_init(rb, count, MPI_FLOAT, 0, w, i, q); break;
    }
}

/* nb: 0 blocking, 1 nonblocking, 2 a start of the persistent request pq */
static void one_call(int coll, CUdeviceptr s, CUdeviceptr r, int count, int p, int nb, MPI_Request *pq)
{
    if (2 == nb) {
        MPI_Start(pq);
        MPI_Wait(pq, MPI_STATUS_IGNORE);
        return;
    }
    void *sb = (void *) (uintptr_t) s, *rb = (void *) (uintptr_t) r;
    if (nb) {
        one_icall(coll, s, r, count, p);
        return;
    }
    switch (coll) {
    case ALLREDUCE: MPI_Allreduce(sb, rb, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(sb, count / p, MPI_FLOAT, rb, count / p, MPI_FLOAT, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(sb, rb, count / p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALLTOALL: MPI_Alltoall(sb, count / p, MPI_FLOAT, rb, count / p, MPI_FLOAT, MPI_COMM_WORLD); break;
    default: MPI_Bcast(rb, count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    }
}

int main(int argc, char **argv)
{
    int rank, p, bad = 0, cases = 0;
    const char *skip = test_cuda_setup();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (NULL == skip && NULL == (*(void **) &calls = dlsym(libcuda, "fake_cuda_calls"))) {
        skip = "not the fake driver (no fake_cuda_calls): nothing counts the calls";
    }
    if (!test_ctl_all(NULL == skip, rank, p)) {
        if (0 == rank) {
            printf("SKIP: %s\n", skip ? skip : "another rank cannot count driver calls");
        }
        MPI_Finalize();
        return 77;
    }
    static const size_t sizes[] = { 8, 64 << 10, 4 << 20, 16 << 20 };
    const size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1] * (size_t) p;
    CUdeviceptr s, r;
    TEST_CU_CHECK(rank, cu.MemAlloc(&s, max));
    TEST_CU_CHECK(rank, cu.MemAlloc(&r, max));
    static const char *const form[] = { "", "i", "persistent " };
    for (int nb = 0; nb < 3; nb++)
    for (int coll = 0; coll < NCOLL; coll++) {
        double first_all = -1, last_all = -1;
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            /* count: floats per rank's buffer; allgather, reduce_scatter
             * and alltoall: at least one per rank */
            int count = (int) (sizes[k] / sizeof(float));
            count = count < p ? p : count - count % p;
            MPI_Request pq = MPI_REQUEST_NULL;
            if (2 == nb) {
                one_init(coll, s, r, count, p, &pq);
            }
            for (int i = 0; i < WARMUP; i++) {
                one_call(coll, s, r, count, p, nb, &pq);
            }
            const cost_t a = snapshot(nb);
            for (int i = 0; i < ITERS; i++) {
                one_call(coll, s, r, count, p, nb, &pq);
            }
            const cost_t b = snapshot(nb);
            if (2 == nb) {
                MPI_Request_free(&pq);
            }
            double mine[6] = { (b.all - a.all) / ITERS, (b.sync - a.sync) / ITERS,
                               (b.ipc_open - a.ipc_open) / ITERS, (b.ipc_get - a.ipc_get) / ITERS,
                               (b.staged - a.staged) / ITERS, (b.attrs - a.attrs) / ITERS };
            /* the largest of every rank's, at rank 0 (point-to-point) */
            if (0 == rank) {
                for (int q = 1; q < p; q++) {
                    double theirs[6];
                    MPI_Recv(theirs, 6, MPI_DOUBLE, q, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    for (int j = 0; j < 6; j++) {
                        mine[j] = theirs[j] > mine[j] ? theirs[j] : mine[j];
                    }
                }
                printf("budget: %s%-20s %8zu B/rank np %d: per call (largest rank) %.1f driver calls%s "
                       "(budget %d), %.1f synchronisations, %.1f cuIpcOpenMemHandle, %.1f cuIpcGetMemHandle, "
                       "%.1f cuPointerGetAttribute(s)\n",
                       form[nb], names[coll], sizes[k], p, mine[0], nb ? " but polls" : "",
                       BUDGET(p), mine[1], mine[2], mine[3], mine[5]);
                int broken = 0;
                if (mine[0] > BUDGET(p) || mine[1] > (nb ? 0.0 : 1.0) || mine[2] > 0.0 || mine[3] > 0.0 ||
                    (2 == nb && mine[5] > 0.0)) {
                    printf("FAIL: %s%s %zu B: the budget is broken\n", form[nb], names[coll], sizes[k]);
                    broken = 1;
                }
                if (mine[4] > 0.0) {
                    printf("FAIL: %s%s %zu B: %.1f copies between host and device per call: staged, "
                           "not through CUDA IPC\n", form[nb], names[coll], sizes[k], mine[4]);
                    broken = 1;
                }
                const int two_forms = REDUCE_SCATTER == coll && p > 2;
                if (two_forms && last_all >= 0 && k + 1 == sizeof(sizes) / sizeof(sizes[0]) &&
                    mine[0] != last_all) {
                    printf("FAIL: %s%s: %.1f driver calls at %zu B, %.1f at %zu B: grows with the size\n",
                           form[nb], names[coll], mine[0], sizes[k], last_all, sizes[k - 1]);
                    broken = 1;
                }
                if (first_all >= 0 && (two_forms ? mine[0] > first_all + 2 * p : mine[0] != first_all)) {
                    printf("FAIL: %s%s: %.1f driver calls at %zu B, %.1f at %zu B: grows with the size\n",
                           form[nb], names[coll], mine[0], sizes[k], first_all, sizes[0]);
                    broken = 1;
                }
                bad += broken;
                cases++;
                first_all = first_all < 0 ? mine[0] : first_all;
                last_all = mine[0];
            } else {
                MPI_Send(mine, 6, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
            }
        }
    }
    TEST_CU_CHECK(rank, cu.MemFree(s));
    TEST_CU_CHECK(rank, cu.MemFree(r));
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("RESULT: %d passed, %d failed\n", cases - bad, bad);
    }
    MPI_Finalize();
    test_cuda_release();
    return bad ? 1 : 0;
}
