/*
 * A probe of what the device transport rests on, for a real GPU (not part
 * of the suite): P processes on one device, each with a flag area and a
 * data buffer exported by CUDA IPC, and the per-iteration time of
 *   A  a flag barrier on the GPU (cuStreamWriteValue32 into every peer's
 *      area, cuStreamWaitValue32 on one's own), N of them queued, one sync;
 *   B  the same plus a copy of `bytes` from the next peer's buffer;
 *   C  host-flag barrier + copy + cuStreamSynchronize per iteration (the
 *      CUDA IPC provider's way);
 *   D  one "call" of the new design: 3 GPU barriers, a copy, one sync.
 * Usage: stream_flags_probe P bytes iters
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x) do { CUresult r_ = (x); if (r_) { const char *s_; cuGetErrorString(r_, &s_); \
    fprintf(stderr, "rank %d: %s: %s\n", rank, #x, s_); exit(1); } } while (0)

typedef struct {
    volatile int ready[16];
    volatile uint64_t hflag[16][8];
    volatile int bar[16];
    CUipcMemHandle flags[16], data[16];
} shared_t;

static int rank, P;
static shared_t *sh;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void host_barrier(int gen)
{
    __atomic_store_n(&sh->bar[rank], gen, __ATOMIC_RELEASE);
    for (int j = 0; j < P; j++)
        while (__atomic_load_n(&sh->bar[j], __ATOMIC_ACQUIRE) < gen) ;
}

static void run(size_t bytes, int iters)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream st;
    CUdeviceptr flags, data, peerf[16], peerd[16];
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&flags, 4096));
    CK(cuMemsetD8(flags, 0, 4096));
    CK(cuMemAlloc(&data, bytes * 2 + 4096));
    CK(cuMemsetD8(data, rank + 1, bytes * 2 + 4096));
    CK(cuIpcGetMemHandle(&sh->flags[rank], flags));
    CK(cuIpcGetMemHandle(&sh->data[rank], data));
    CK(cuCtxSynchronize());
    host_barrier(1);
    for (int j = 0; j < P; j++) {
        if (j == rank) continue;
        CK(cuIpcOpenMemHandle(&peerf[j], sh->flags[j], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CK(cuIpcOpenMemHandle(&peerd[j], sh->data[j], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    }
    host_barrier(2);
    unsigned word = 0;
    int gen = 2;
    const int next = (rank + 1) % P;
#define GPU_BARRIER() do { word++; \
        for (int j = 0; j < P; j++) if (j != rank) CK(cuStreamWriteValue32(st, peerf[j] + 64 * rank, word, 0)); \
        for (int j = 0; j < P; j++) if (j != rank) CK(cuStreamWaitValue32(st, flags + 64 * j, word, CU_STREAM_WAIT_VALUE_GEQ)); \
    } while (0)
    for (int mode = 0; mode < 4; mode++) {
        for (int rep = 0; rep < 3; rep++) {
            host_barrier(++gen);
            double t0 = now();
            for (int i = 0; i < iters; i++) {
                if (mode == 0) {
                    GPU_BARRIER();
                } else if (mode == 1) {
                    GPU_BARRIER();
                    if (P > 1) CK(cuMemcpyDtoDAsync(data + bytes, peerd[next], bytes, st));
                } else if (mode == 2) {
                    if (P > 1) CK(cuMemcpyDtoDAsync(data + bytes, peerd[next], bytes, st));
                    CK(cuStreamSynchronize(st));
                    sh->hflag[rank][0] = (uint64_t) i + 1 + (uint64_t) rep * iters + (uint64_t) mode * 100000000ull;
                    for (int j = 0; j < P; j++)
                        while (sh->hflag[j][0] < sh->hflag[rank][0]) ;
                } else {
                    GPU_BARRIER();
                    if (P > 1) CK(cuMemcpyDtoDAsync(data + bytes, peerd[next], bytes, st));
                    GPU_BARRIER();
                    GPU_BARRIER();
                    CK(cuStreamSynchronize(st));
                }
            }
            CK(cuStreamSynchronize(st));
            double t = (now() - t0) / iters * 1e6;
            if (rank == 0)
                printf("P=%d bytes=%zu mode=%c rep=%d: %.2f us/iter\n", P, bytes, "ABCD"[mode], rep, t);
            fflush(stdout);
        }
    }
    /* the copy alone, one process */
    if (rank == 0) {
        for (int rep = 0; rep < 3; rep++) {
            CK(cuStreamSynchronize(st));
            double t0 = now();
            for (int i = 0; i < iters; i++) CK(cuMemcpyDtoDAsync(data + bytes, data, bytes, st));
            CK(cuStreamSynchronize(st));
            printf("P=%d bytes=%zu copy-only(local, queued): %.2f us/iter\n", P, bytes, (now() - t0) / iters * 1e6);
            t0 = now();
            for (int i = 0; i < iters; i++) { CK(cuMemcpyDtoDAsync(data + bytes, data, bytes, st)); CK(cuStreamSynchronize(st)); }
            printf("P=%d bytes=%zu copy+sync(local): %.2f us/iter\n", P, bytes, (now() - t0) / iters * 1e6);
            fflush(stdout);
        }
    }
    host_barrier(++gen);
}

int main(int argc, char **argv)
{
    P = argc > 1 ? atoi(argv[1]) : 2;
    size_t bytes = argc > 2 ? strtoull(argv[2], 0, 0) : 65536;
    int iters = argc > 3 ? atoi(argv[3]) : 200;
    sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset((void *) sh, 0, sizeof(*sh));
    for (int r = 0; r < P; r++) {
        if (0 == fork()) {
            rank = r;
            alarm(60);
            run(bytes, iters);
            _exit(0);
        }
    }
    int bad = 0, st;
    while (wait(&st) > 0) bad |= !WIFEXITED(st) || WEXITSTATUS(st);
    return bad;
}
