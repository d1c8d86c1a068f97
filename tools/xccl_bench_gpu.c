/*
 * xccl_bench_gpu.c: -g, CUDA device buffers.
 *
 * libcuda.so.1 is loaded with dlopen (never linked; the real driver, or
 * test/gpu/fake's stand-in through LD_LIBRARY_PATH), each rank takes device
 * (OMPI_COMM_WORLD_LOCAL_RANK mod device count), retains its primary context
 * and makes it current BEFORE MPI_Init (xccl turns its CUDA IPC path on
 * only when every rank has a context when the communicator is created), and
 * the send/receive buffers are cuMemAlloc memory.  The two columns become
 *   xccl:   the MPI call directly on the device buffers, xccl enabled;
 *   staged: what a user of a non-CUDA-aware MPI does: cuMemcpyDtoH of the
 *           input into a host buffer (pageable malloc; -p: pinned,
 *           cuMemHostAlloc), the MPI call on the host buffers with xccl
 *           DISABLED (the stock stack), cuMemcpyHtoD of the result back,
 *           all three inside the timed call (bcast: the root copies down,
 *           the other ranks copy up).
 * The checks copy the device results back and compare them with the host
 * references; allreduce also runs on inputs whose float sum depends on the
 * order of the additions and must give bitwise the same result on every
 * rank (64-bit hash of the result bytes, min and max over ranks).
 *
 * test/gpu/test_cuda.h (static, one copy per program) is included here
 * only: the other files reach the driver through the functions below.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/gpu/test_cuda.h"
#include "xccl_bench_call.h"

/* ------------------------------------------------------------------------ */
/* CUDA driver API: test/gpu/test_cuda.h, shared with xccl_mpi_gpu.c        */
/* ------------------------------------------------------------------------ */

/* A failing driver call is fatal (exit 3). */
#define CU_CHECK(call)                                                          \
    do {                                                                        \
        CUresult r_ = (call);                                                   \
        if (r_ != 0)                                                            \
            die(3, "%s failed: %d %s (line %d)", #call, r_, cu_err(r_), __LINE__); \
    } while (0)

#define DPTR(d) ((void *)(uintptr_t)(d))

/* Loads the driver and makes a context current: before MPI_Init.  NULL,
 * or why not (the SKIP reason). */
const char *gpu_setup(void)
{
    return test_cuda_setup();
}

/* After MPI_Finalize: the context goes.  A no-op without one. */
void gpu_release(void)
{
    test_cuda_release();
}

/* ------------------------------------------------------------------------ */
/* Set-up, device buffers, header                                           */
/* ------------------------------------------------------------------------ */

/* Every rank's MINE is true?  MPI_Reduce and point-to-point only (not
 * intercepted by xccl), the answer on every rank. */
bool agree_all(int mine)
{
    int all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        for (int r = 1; r < size; r++)
            MPI_Send(&all, 1, MPI_INT, r, 77, MPI_COMM_WORLD);
    else
        MPI_Recv(&all, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return all != 0;
}

/* Device buffers of the host buffers' size and contents; with -p the
 * staging (host) buffers move to pinned memory. */
void gpu_buffers(bench_t *B)
{
    const size_t bytes = (B->cap + GUARD) * sizeof(float);
    CU_CHECK(cu.MemAlloc(&B->dsbuf, bytes));
    CU_CHECK(cu.MemAlloc(&B->drbuf, bytes));
    if (B->o->pinned) {
        void *ps = NULL, *pr = NULL;
        CU_CHECK(cu.MemHostAlloc(&ps, bytes, 0));
        CU_CHECK(cu.MemHostAlloc(&pr, bytes, 0));
        memcpy(ps, B->sbuf, bytes);
        memcpy(pr, B->rbuf, bytes);
        free(B->sbuf);
        free(B->rbuf);
        B->sbuf = ps;
        B->rbuf = pr;
    }
    CU_CHECK(cu.MemcpyHtoD(B->dsbuf, B->sbuf, bytes));
    CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, bytes));
}

void gpu_free_buffers(bench_t *B)
{
    CU_CHECK(cu.MemFree(B->dsbuf));
    CU_CHECK(cu.MemFree(B->drbuf));
    if (B->o->pinned) {
        CU_CHECK(cu.MemFreeHost(B->sbuf));
        CU_CHECK(cu.MemFreeHost(B->rbuf));
    } else {
        free(B->sbuf);
        free(B->rbuf);
    }
    B->sbuf = B->rbuf = NULL;
}

/* What -g measures, and what one staging copy costs (rank 0 alone). */
void print_gpu_header(const bench_t *B)
{
    double gbs[2][MEMCPY_REPS];
    size_t bytes = B->cap * sizeof(float);
    if (bytes > MEMCPY_BYTES)
        bytes = MEMCPY_BYTES;
    if (B->rank == 0) {
        for (int r = 0; r < MEMCPY_REPS; r++) {
            double t0 = MPI_Wtime();
            CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->dsbuf, bytes));
            double t1 = MPI_Wtime();
            CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, bytes));
            double t2 = MPI_Wtime();
            gbs[0][r] = t1 > t0 ? (double)bytes / (t1 - t0) / 1e9 : 0.0;
            gbs[1][r] = t2 > t1 ? (double)bytes / (t2 - t1) / 1e9 : 0.0;
        }
        char name[128] = "?";
        int ver = 0;
        if (cu.DeviceGetName)
            cu.DeviceGetName(name, (int)sizeof name, cu_dev);
        if (cu.DriverGetVersion)
            cu.DriverGetVersion(&ver);
        printf("# -g: CUDA device buffers (cuMemAlloc); %d device(s), each rank takes local rank\n"
               "#   mod %d (%d rank(s) per device on one node); rank 0: device %d \"%.60s\",\n"
               "#   driver %d.%d\n", cu_ndev, cu_ndev, (B->size + cu_ndev - 1) / cu_ndev,
               cu_ordinal, name, ver / 1000, ver % 1000 / 10);
        printf("# xccl:   the collective on the device buffers, xccl enabled\n"
               "# staged: cuMemcpyDtoH into %s host memory, the collective on the host\n"
               "#   buffers with xccl disabled (stock Open MPI), cuMemcpyHtoD back; all timed\n"
               "#   (bcast: the root copies down, the others copy up)%s\n",
               B->o->pinned ? "PINNED (cuMemHostAlloc, -p)" : "PAGEABLE (malloc; -p: pinned)",
               B->o->staged_sync ? ", then cuCtxSynchronize\n#   (-S: the result on the device "
                                   "when the call returns, as xccl's)"
                                 : "\n#   (the upload may still run when the call returns; -S: "
                                   "synchronised)");
        printf("# staging copies (rank 0 alone, %zu KiB, median of %d): DtoH %.2f GB/s, "
               "HtoD %.2f GB/s\n", bytes >> 10, MEMCPY_REPS, median(gbs[0], MEMCPY_REPS),
               median(gbs[1], MEMCPY_REPS));
        /* What xccl pays per buffer per call to classify it: one
         * cuPointerGetAttributes of these 5 attributes (gpu/xccl_gpu.c). */
        if (cu.PointerGetAttributes) {
            enum { CALLS = 10000 };
            double ns[2][MEMCPY_REPS];
            for (int k = 0; k < 2; k++) {
                CUdeviceptr p = k ? (CUdeviceptr)(uintptr_t)B->rbuf : (CUdeviceptr)(uintptr_t)B->dsbuf;
                for (int r = 0; r < MEMCPY_REPS; r++) {
                    unsigned type = 0, managed = 0;
                    void *ctx = NULL;
                    unsigned long long base = 0, id = 0;
                    int attrs[] = { 2, 8, 1, 11, 7 };   /* type, managed, context, base, id */
                    void *data[] = { &type, &managed, &ctx, &base, &id };
                    double t0 = MPI_Wtime();
                    for (int i = 0; i < CALLS; i++)
                        cu.PointerGetAttributes(5, attrs, data, p);
                    ns[k][r] = (MPI_Wtime() - t0) / CALLS * 1e9;
                }
            }
            printf("# classification (cuPointerGetAttributes, 5 attributes, median of %d x %d "
                   "calls): device buffer %.0f ns, host buffer %.0f ns\n", MEMCPY_REPS, CALLS,
                   median(ns[0], MEMCPY_REPS), median(ns[1], MEMCPY_REPS));
        }
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The memory's own speed at this size, in the same run: rank 0 times a
 * device-to-device copy of bytes between its buffers (cuMemcpyDtoD, then
 * cuCtxSynchronize: a call's fixed costs included), median of 5, while the
 * others wait; 0 on the other ranks or without cuMemcpyDtoD. */
double gpu_d2d(bench_t *B, size_t bytes)
{
    double t[5] = { 0 };
    if (B->rank == 0 && cu.MemcpyDtoD) {
        for (int r = 0; r < 5; r++) {
            double t0 = MPI_Wtime();
            CU_CHECK(cu.MemcpyDtoD(B->drbuf, B->dsbuf, bytes));
            CU_CHECK(cu.CtxSynchronize());
            t[r] = MPI_Wtime() - t0;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return median(t, 5);
}

/* The least memory traffic of coll, in copies of the row's size (a copy
 * reads and writes it once), on the memory that rank 0's device shares
 * with k ranks: per rank, allreduce reads its input and writes its result
 * (1), allgather and reduce_scatter read or write the row's size and the
 * other a p-th of it ((p + 1) / 2p), alltoall 1, bcast the root reads and
 * the others write (1/2). */
static int ranks_per_device(const bench_t *B)
{
    return (B->size + cu_ndev - 1) / cu_ndev;
}

double gpu_bound_copies(const bench_t *B, int coll)
{
    const double p = B->size, k = ranks_per_device(B);
    switch (coll) {
    case C_ALLREDUCE:
    case C_ALLTOALL:
        return k;
    case C_BCAST:
        return k / 2.0;
    default:
        return k * (p + 1.0) / (2.0 * p);
    }
}

/* ------------------------------------------------------------------------ */
/* The timed calls                                                          */
/* ------------------------------------------------------------------------ */

/* -g, staged: what a user of a non-CUDA-aware MPI writes.  The input down
 * to the host, the stock collective (xccl is disabled in this mode) on the
 * host buffers, the result up to the device. */
static void staged_call(bench_t *B, int coll, size_t count, int root)
{
    size_t ns, nr;
    io_counts(B, coll, count, &ns, &nr);
    if (coll == C_BCAST) {     /* one buffer: the root has the data, the others get it */
        if (B->rank == root)
            CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, count * sizeof(float)));
        call_coll(B, coll, count, root);
        if (B->rank != root)
            CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, count * sizeof(float)));
    } else {
        CU_CHECK(cu.MemcpyDtoH(B->sbuf, B->dsbuf, ns * sizeof(float)));
        call_coll(B, coll, count, root);
        CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, nr * sizeof(float)));
    }
    if (B->o->staged_sync)     /* -S: the result on the device, as xccl returns it */
        CU_CHECK(cu.CtxSynchronize());
}

/* The timed call of MODE with -g: xccl on the device buffers, or staged. */
void gpu_call(bench_t *B, int coll, size_t count, int root, int mode)
{
    if (mode == M_XCCL)
        call_coll_on(B, coll, count, root, DPTR(B->dsbuf), DPTR(B->drbuf));
    else
        staged_call(B, coll, count, root);
}

/* The end of a timed loop: a copy from pageable memory to the device may
 * return before its DMA ends; the loop's last one counts too. */
void gpu_sync(void)
{
    CU_CHECK(cu.CtxSynchronize());
}

/* ------------------------------------------------------------------------ */
/* Correctness check on the device buffers                                  */
/* ------------------------------------------------------------------------ */

/* Input of the -g identity check: fractions with many mantissa bits, so
 * the bits of a float sum depend on the order of the additions. */
static float frac_pattern(int r, size_t i)
{
    uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(r + 1) * 0x9E3779B9u;
    h ^= h >> 15;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    return (float)(h % 1000003u) / 997.0f;
}

/* FNV-1a, 64 bits, of N bytes. */
static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

/* check_coll for -g: the same inputs, uploaded to the device buffers, the
 * call of MODE (xccl on the device buffers, or staged), the result (and
 * the guard after it) copied back and compared with the host reference.
 * Allreduce also: in place, and on frac_pattern inputs, whose result must
 * be close to the reference and bitwise identical on every rank. */
int check_coll_gpu(bench_t *B, int coll, size_t count, int mode)
{
    const int root = B->size - 1;
    const size_t fs = sizeof(float);
    size_t nsend, nrecv;
    fill_check_inputs(B, coll, count, root, &nsend, &nrecv);
    CU_CHECK(cu.MemcpyHtoD(B->dsbuf, B->sbuf, nsend * fs));
    CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, (nrecv + GUARD) * fs));

    gpu_call(B, coll, count, root, mode);
    CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, (nrecv + GUARD) * fs));
    bool ok = verify(B, coll, count, nrecv, root, "", mode);

    if (coll == C_ALLREDUCE) {
        /* In place; the guard on the device still holds the sentinels. */
        for (size_t i = 0; i < count; i++)
            B->rbuf[i] = pattern(B->rank, i);
        CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, count * fs));
        if (mode == M_XCCL) {
            MPI_Allreduce(MPI_IN_PLACE, DPTR(B->drbuf), (int)count, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
        } else {
            CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, count * fs));
            MPI_Allreduce(MPI_IN_PLACE, B->rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            CU_CHECK(cu.MemcpyHtoD(B->drbuf, B->rbuf, count * fs));
        }
        CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, (count + GUARD) * fs));
        ok = verify(B, coll, count, count, root, " (in place)", mode) && ok;

        /* Order-sensitive sums: close to the reference, the same bits everywhere. */
        for (size_t i = 0; i < count; i++)
            B->sbuf[i] = frac_pattern(B->rank, i);
        CU_CHECK(cu.MemcpyHtoD(B->dsbuf, B->sbuf, count * fs));
        gpu_call(B, coll, count, root, mode);
        CU_CHECK(cu.MemcpyDtoH(B->rbuf, B->drbuf, count * fs));
        for (size_t i = 0; i < count; i++) {
            double want = 0.0;
            for (int r = 0; r < B->size; r++)
                want += frac_pattern(r, i);
            double d = (double)B->rbuf[i] - want;
            if (d > 1e-5 * want || -d > 1e-5 * want) {
                fprintf(stderr, "xccl_bench: rank %d: %s allreduce (fractions) count %zu: "
                        "element %zu is %.6f, expected %.6f\n", B->rank, mode_names[mode],
                        count, i, (double)B->rbuf[i], want);
                ok = false;
                break;
            }
        }
        uint64_t h = hash_bytes(B->rbuf, count * fs), hmin = 0, hmax = 0;
        MPI_Reduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
        if (B->rank == 0 && hmin != hmax) {
            fprintf(stderr, "xccl_bench: %s allreduce (fractions) count %zu: the result "
                    "differs between ranks (hash %016llx .. %016llx)\n", mode_names[mode],
                    count, (unsigned long long)hmin, (unsigned long long)hmax);
            ok = false;
        }
    }

    int mine = ok, all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    return all ? CK_OK : CK_FAIL;
}
