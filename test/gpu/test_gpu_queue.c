/*
 * test_gpu_queue: a call's device work coalesced (gpu/xccl_gpu_queue.c),
 * no MPI; against the fake driver (run_gpu_unit.sh) and a real one.
 *
 *   1. 20 independent copies (lengths 0 to 70 000 + odd, some off 16-byte
 *      alignment) into disjoint slices: every byte right, the guards
 *      untouched; with the kernels built and the fake counting calls: one
 *      launch, no copy-engine copy;
 *   2. copies that depend on each other (X -> Y, then Y -> Z, then Z -> X
 *      at another offset): results as if run one by one, in order;
 *   3. where the kernels are built: a chain x0 + x1 + x2 + x3 (int32 SUM)
 *      through a scratch accumulator, the last link into the output: the
 *      sums right, one launch; a chain whose result moves out of a
 *      non-scratch place (two chains): both results right; a copy of the
 *      chain's output queued after it: the reduced values;
 *   4. without kernels the reductions report their error and the copies
 *      still run one by one (checked in 1 and 2).
 * Exit 0 all right, 1 a failure, 77 no driver or device ("SKIP: ...").
 */
#define _GNU_SOURCE 1
#include "xccl_build_config.h"
#include "xccl_cuda.h"
#include "xccl_gpu_kernels.h"
#include "xccl_gpu_queue.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES (4u << 20)
#define GUARD_BYTE 0x5c

static struct {
    xccl_curesult_t (*Init)(unsigned);
    xccl_curesult_t (*DeviceGet)(xccl_cudevice_t *, int);
    xccl_curesult_t (*DevicePrimaryCtxRetain)(xccl_cucontext_t *, xccl_cudevice_t);
    xccl_curesult_t (*DevicePrimaryCtxRelease)(xccl_cudevice_t);
    xccl_curesult_t (*CtxSetCurrent)(xccl_cucontext_t);
    xccl_curesult_t (*MemcpyHtoD)(xccl_cudeviceptr_t, const void *, size_t);
    xccl_curesult_t (*MemcpyDtoH)(void *, xccl_cudeviceptr_t, size_t);
    xccl_curesult_t (*MemsetD8)(xccl_cudeviceptr_t, unsigned char, size_t);
} cu;
static unsigned long long (*fake_calls)(const char *name);   /* the fake's, or NULL */
static int failures;

#define CK(call)                                                                            \
    do {                                                                                    \
        xccl_curesult_t r_ = (call);                                                        \
        if (r_) {                                                                           \
            fprintf(stderr, "FAIL: line %d: %s: %d\n", __LINE__, #call, r_);                \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static void check(int ok, const char *what)
{
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    failures += !ok;
}

static unsigned long long calls(const char *name)
{
    return fake_calls ? fake_calls(name) : 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    const xccl_cu_api_t *api;
    xccl_cudevice_t dev;
    xccl_cucontext_t ctx;
    const char *err = NULL;
    if (NULL == lib) {
        printf("SKIP: no libcuda.so.1 (%s)\n", dlerror());
        return 77;
    }
    *(void **) &cu.Init = dlsym(lib, "cuInit");
    *(void **) &cu.DeviceGet = dlsym(lib, "cuDeviceGet");
    *(void **) &cu.DevicePrimaryCtxRetain = dlsym(lib, "cuDevicePrimaryCtxRetain");
    *(void **) &cu.DevicePrimaryCtxRelease = dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
    *(void **) &cu.CtxSetCurrent = dlsym(lib, "cuCtxSetCurrent");
    *(void **) &cu.MemcpyHtoD = dlsym(lib, "cuMemcpyHtoD_v2");
    *(void **) &cu.MemcpyDtoH = dlsym(lib, "cuMemcpyDtoH_v2");
    *(void **) &cu.MemsetD8 = dlsym(lib, "cuMemsetD8_v2");
    *(void **) &fake_calls = dlsym(lib, "fake_cuda_calls");
    if (NULL == (api = xccl_cu()) || 0 != cu.Init(0) || 0 != cu.DeviceGet(&dev, 0)) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    CK(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CK(cu.CtxSetCurrent(ctx));
    const int kernels = 0 == xccl_gpu_kernels_load(&err);
    printf("%s\n", kernels ? "kernels loaded" : "no kernels (copies one by one, reductions refused)");
    xccl_custream_t stream;
    CK(api->StreamCreate(&stream, 0));
    xccl_cudeviceptr_t src, dst, scratch;
    CK(api->MemAlloc(&src, BYTES));
    CK(api->MemAlloc(&dst, BYTES));
    CK(api->MemAlloc(&scratch, BYTES));
    unsigned char *h = malloc(BYTES), *back = malloc(BYTES), *want = malloc(BYTES);
    if (!h || !back || !want) {
        return 1;
    }
    for (size_t i = 0; i < BYTES; i++) {
        h[i] = (unsigned char) rnd();
    }
    CK(cu.MemcpyHtoD(src, h, BYTES));
    xccl_gpu_queue_t q;

    /* 1: independent copies */
    {
        CK(cu.MemsetD8(dst, GUARD_BYTE, BYTES));
        memset(want, GUARD_BYTE, BYTES);
        xccl_gpu_queue_init(&q, stream, XCCL_DT_INT32, XCCL_OP_SUM, NULL, 0, 0);
        const unsigned long long launches = calls("cuLaunchKernel"), copies = calls("cuMemcpy2DAsync_v2");
        size_t at = 0;
        for (int e = 0; e < 20; e++) {
            const size_t len = e % 7 == 3 ? 0 : (size_t) (rnd() % 70000) + (size_t) (e & 1);
            const size_t off = e % 3 == 1 ? 3 : 0;
            xccl_gpu_queue_copy(&q, (void *) (uintptr_t) (dst + at + off), (const void *) (uintptr_t) (src + at),
                                len);
            memcpy(want + at + off, h + at, len);
            at += len + off + 32;
        }
        xccl_gpu_queue_flush(&q);
        CK(api->StreamSynchronize(stream));
        CK(cu.MemcpyDtoH(back, dst, BYTES));
        check(0 == memcmp(back, want, BYTES) && '\0' == q.error[0], "20 independent copies");
        if (kernels && fake_calls) {
            check(calls("cuLaunchKernel") - launches == 1 && calls("cuMemcpy2DAsync_v2") == copies,
                  "    as one launch, no copy-engine copy");
        }
    }
    /* 2: dependent copies run in order */
    {
        const size_t n = 100000;
        CK(cu.MemsetD8(dst, GUARD_BYTE, BYTES));
        memset(want, GUARD_BYTE, BYTES);
        xccl_gpu_queue_init(&q, stream, XCCL_DT_INT32, XCCL_OP_SUM, NULL, 0, 0);
        char *d = (char *) (uintptr_t) dst;
        xccl_gpu_queue_copy(&q, d, (const void *) (uintptr_t) src, n);        /* X -> Y */
        memcpy(want, h, n);
        xccl_gpu_queue_copy(&q, d + n + 16, d + 8, n);                         /* Y -> Z */
        memcpy(want + n + 16, want + 8, n);
        xccl_gpu_queue_copy(&q, d + 3 * n, d + n + 16, n);                     /* Z -> W */
        memcpy(want + 3 * n, want + n + 16, n);
        xccl_gpu_queue_copy(&q, d + 4, d + 3 * n + 100, 64);                   /* W -> inside Y */
        memmove(want + 4, want + 3 * n + 100, 64);
        xccl_gpu_queue_flush(&q);
        CK(api->StreamSynchronize(stream));
        CK(cu.MemcpyDtoH(back, dst, BYTES));
        check(0 == memcmp(back, want, BYTES) && '\0' == q.error[0], "dependent copies in order");
        if (kernels) {
            /* never a batch the launch refused (the fake refuses copies
             * that touch each other; a GPU would race them) */
            check(!q.one_by_one, "    every batch launched");
        }
    }
    /* 3: chains of reductions */
    if (kernels) {
        const size_t count = 50001, bytes = count * sizeof(int32_t);
        const int32_t *x = (const int32_t *) (void *) h;      /* x_k at k * bytes */
        int32_t *w = (int32_t *) (void *) want;
        const char *xs = (const char *) (uintptr_t) src, *acc = (const char *) (uintptr_t) scratch;
        char *out = (char *) (uintptr_t) dst;
        CK(cu.MemsetD8(dst, GUARD_BYTE, BYTES));
        xccl_gpu_queue_init(&q, stream, XCCL_DT_INT32, XCCL_OP_SUM, acc, BYTES, 0);
        const unsigned long long launches = calls("cuLaunchKernel");
        xccl_gpu_queue_reduce(&q, (void *) acc, xs, xs + bytes, count);
        xccl_gpu_queue_reduce(&q, (void *) acc, acc, xs + 2 * bytes, count);
        xccl_gpu_queue_reduce(&q, out, acc, xs + 3 * bytes, count);          /* leaves the scratch */
        const unsigned long long one = calls("cuLaunchKernel") - launches;
        /* then the output copied on (after the chain) */
        xccl_gpu_queue_copy(&q, out + bytes, out, bytes);
        /* a chain outside the scratch whose result moves: two chains */
        xccl_gpu_queue_reduce(&q, out + 2 * bytes, xs, xs + bytes, count);
        xccl_gpu_queue_reduce(&q, out + 3 * bytes, out + 2 * bytes, xs + 2 * bytes, count);
        xccl_gpu_queue_flush(&q);
        CK(api->StreamSynchronize(stream));
        CK(cu.MemcpyDtoH(back, dst, BYTES));
        memset(want, GUARD_BYTE, BYTES);
        for (size_t i = 0; i < count; i++) {
            const uint32_t s3 = (uint32_t) x[i] + (uint32_t) x[count + i] + (uint32_t) x[2 * count + i];
            w[i] = w[count + i] = (int32_t) (s3 + (uint32_t) x[3 * count + i]);
            w[2 * count + i] = (int32_t) ((uint32_t) x[i] + (uint32_t) x[count + i]);
            w[3 * count + i] = (int32_t) s3;
        }
        check(0 == memcmp(back, want, BYTES) && '\0' == q.error[0], "reduction chains");
        if (fake_calls) {
            check(0 == one, "    the chain queued only when something else comes");
        }
    } else {
        xccl_gpu_queue_init(&q, stream, XCCL_DT_INT32, XCCL_OP_SUM, NULL, 0, 0);
        xccl_gpu_queue_reduce(&q, (void *) (uintptr_t) dst, (void *) (uintptr_t) src,
                              (void *) (uintptr_t) (src + 64), 16);
        xccl_gpu_queue_flush(&q);
        check('\0' != q.error[0], "without kernels a reduction reports an error");
        printf("    (%s)\n", q.error);
    }
    api->MemFree(src);
    api->MemFree(dst);
    api->MemFree(scratch);
    api->StreamDestroy(stream);
    xccl_gpu_kernels_release();
    cu.DevicePrimaryCtxRelease(dev);
    free(h);
    free(back);
    free(want);
    printf("RESULT: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
