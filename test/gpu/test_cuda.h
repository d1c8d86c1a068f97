/*
 * test_cuda.h: the CUDA driver API for the test programs that put MPI
 * buffers in device memory (test/gpu/xccl_mpi_gpu.c, tools/xccl_bench_gpu.c
 * -g).  Header-only, everything static: each program includes it once.
 *
 * libcuda.so.1 is loaded with dlopen, never linked: the real driver, or
 * test/gpu/fake's stand-in through LD_LIBRARY_PATH.  test_cuda_setup() (call
 * it BEFORE MPI_Init, as CUDA applications do; xccl turns its CUDA IPC path
 * on only when every rank has a context when the communicator is created)
 * fills the table `cu`, takes device (OMPI_COMM_WORLD_LOCAL_RANK mod device
 * count), retains its primary context and makes it current.
 * test_cuda_release() (after MPI_Finalize) gives the context back.
 *
 * TEST_CU_CHECK is the MPI tests' fatal-error macro around the calls
 * (cu_err() names a result); test_ctl_all their control traffic.
 */
#ifndef XCCL_TEST_CUDA_H
#define XCCL_TEST_CUDA_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*GetErrorName)(CUresult, const char **);
    /* optional (NULL when the library lacks them), for report headers */
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*PointerGetAttributes)(unsigned, int *, void **, CUdeviceptr);
    CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
} cu;
static void *libcuda;
static CUdevice cu_dev;
static int cu_ndev, cu_ordinal;   /* device count, the ordinal taken */
static bool cu_retained;          /* cu_dev's primary context is retained */

static const char *cu_err(CUresult r)
{
    const char *s = NULL;
    if (cu.GetErrorName && cu.GetErrorName(r, &s) == 0 && s)
        return s;
    return "?";
}

/* Loads the driver, takes device (local rank mod count) and makes its
 * primary context current.  NULL, or why not (the caller's SKIP reason). */
static const char *test_cuda_setup(void)
{
    static char why[256];
    libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!libcuda) {
        snprintf(why, sizeof why, "cannot load libcuda.so.1: %s", dlerror());
        return why;
    }
#define TEST_CUDA_SYM(field, name)                                              \
    if (!(*(void **)&cu.field = dlsym(libcuda, name))) {                        \
        snprintf(why, sizeof why, "libcuda.so.1 has no %s", name);              \
        return why;                                                             \
    }
    TEST_CUDA_SYM(Init, "cuInit");
    TEST_CUDA_SYM(DeviceGetCount, "cuDeviceGetCount");
    TEST_CUDA_SYM(DeviceGet, "cuDeviceGet");
    TEST_CUDA_SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    TEST_CUDA_SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    TEST_CUDA_SYM(CtxSetCurrent, "cuCtxSetCurrent");
    TEST_CUDA_SYM(CtxSynchronize, "cuCtxSynchronize");
    TEST_CUDA_SYM(MemAlloc, "cuMemAlloc_v2");
    TEST_CUDA_SYM(MemFree, "cuMemFree_v2");
    TEST_CUDA_SYM(MemHostAlloc, "cuMemHostAlloc");
    TEST_CUDA_SYM(MemFreeHost, "cuMemFreeHost");
    TEST_CUDA_SYM(MemcpyHtoD, "cuMemcpyHtoD_v2");
    TEST_CUDA_SYM(MemcpyDtoH, "cuMemcpyDtoH_v2");
    TEST_CUDA_SYM(GetErrorName, "cuGetErrorName");
#undef TEST_CUDA_SYM
    *(void **)&cu.DriverGetVersion = dlsym(libcuda, "cuDriverGetVersion");
    *(void **)&cu.DeviceGetName = dlsym(libcuda, "cuDeviceGetName");
    *(void **)&cu.PointerGetAttributes = dlsym(libcuda, "cuPointerGetAttributes");
    *(void **)&cu.MemcpyDtoD = dlsym(libcuda, "cuMemcpyDtoD_v2");
    CUresult r = cu.Init(0);
    if (r) {
        snprintf(why, sizeof why, "cuInit: %d %s", r, cu_err(r));
        return why;
    }
    r = cu.DeviceGetCount(&cu_ndev);
    if (r || cu_ndev <= 0) {
        snprintf(why, sizeof why, "no CUDA device (cuDeviceGetCount: %d, count %d)", r, cu_ndev);
        return why;
    }
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    cu_ordinal = (lr ? atoi(lr) : 0) % cu_ndev;
    CUcontext ctx = NULL;
    r = cu.DeviceGet(&cu_dev, cu_ordinal);
    if (!r && !(r = cu.DevicePrimaryCtxRetain(&ctx, cu_dev)))
        cu_retained = true;
    if (r || (r = cu.CtxSetCurrent(ctx))) {
        snprintf(why, sizeof why, "device %d: %d %s", cu_ordinal, r, cu_err(r));
        return why;
    }
    return NULL;
}

/* After MPI_Finalize: the context goes (libcuda stays loaded).  A no-op
 * when test_cuda_setup() did not retain one. */
static void test_cuda_release(void)
{
    if (!cu_retained)
        return;
    cu.CtxSetCurrent(NULL);
    cu.DevicePrimaryCtxRelease(cu_dev);
    cu_retained = false;
}

/* For the MPI tests: a failing driver call aborts the job and names the
 * rank (rank: an int in scope), the call and where it was made. */
#define TEST_CU_CHECK(rank, call)                                              \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != 0) {                                                         \
            fprintf(stderr, "rank %d: %s failed: %d %s (%s:%d)\n", (rank),     \
                    #call, r_, cu_err(r_), __FILE__, __LINE__);                \
            MPI_Abort(MPI_COMM_WORLD, 2);                                      \
        }                                                                      \
    } while (0)

#ifdef MPI_VERSION   /* included after mpi.h */
/* For the MPI tests: whether ok holds on every rank (rank, nprocs: of
 * MPI_COMM_WORLD).  Point-to-point only, never a collective under test. */
#define TEST_CTL_TAG 31337
static inline int test_ctl_all(int ok, int rank, int nprocs)
{
    if (0 == rank) {
        for (int r = 1; r < nprocs; r++) {
            int o;
            MPI_Recv(&o, 1, MPI_INT, r, TEST_CTL_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ok = ok && o;
        }
        for (int r = 1; r < nprocs; r++) {
            MPI_Send(&ok, 1, MPI_INT, r, TEST_CTL_TAG, MPI_COMM_WORLD);
        }
    } else {
        MPI_Send(&ok, 1, MPI_INT, 0, TEST_CTL_TAG, MPI_COMM_WORLD);
        MPI_Recv(&ok, 1, MPI_INT, 0, TEST_CTL_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return ok;
}

/* malloc for the MPI tests: out of memory aborts the job, naming the rank. */
static inline void *test_xmalloc(size_t n, int rank)
{
    void *p = malloc(n ? n : 1);
    if (NULL == p) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", rank, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}
#endif

#endif /* XCCL_TEST_CUDA_H */
