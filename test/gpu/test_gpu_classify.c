/*
 * gpu/xccl_gpu.c without MPI: buffer classification and staging sets,
 * against whatever libcuda.so.1 the loader finds (test/gpu/run_gpu_unit.sh
 * runs it against the fake of test/gpu/fake, then against the real driver
 * where there is one).  Exit 77 with "SKIP: <reason>" when no driver or
 * device is there.
 *
 * Each test runs in its own process (Check's fork mode), which loads the
 * driver itself: xccl never loads it (it only finds it once the
 * application has).
 */
#define _GNU_SOURCE 1
#include "xccl_gpu.h"

#include <check.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_cuda.h"

static CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned);
static CUresult (*CtxGetCurrent)(CUcontext *);

static void setup(void)
{
    const char *why = test_cuda_setup();
    ck_assert_msg(NULL == why, "%s", why ? why : "");
    *(void **) &MemAllocManaged = dlsym(libcuda, "cuMemAllocManaged");
    *(void **) &CtxGetCurrent = dlsym(libcuda, "cuCtxGetCurrent");
    ck_assert_ptr_nonnull(MemAllocManaged);
    ck_assert_ptr_nonnull(CtxGetCurrent);
}

static void teardown(void)
{
    xccl_gpu_fini();
    test_cuda_release();
}

/* Before the application loads the driver: host, and xccl has not loaded
 * it either. */
START_TEST(host_without_a_driver)
{
    char buf[64] = "host";
    xccl_mem_info_t info;
    xccl_gpu_classify(buf, &info);
    ck_assert_int_eq(info.type, XCCL_MEM_HOST);
    ck_assert_ptr_null(xccl_cu());
    ck_assert_ptr_null(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD));
}
END_TEST

/* The application loads the driver late, after xccl has looked and found
 * none: the next look finds it.  xccl notices a load by the object that was
 * last in the loader's list at its look (it holds it open): in between, a
 * library loaded and closed again by the application (it was the last one
 * when xccl looked), and a look with nothing loaded since. */
START_TEST(driver_loaded_later)
{
    char buf[64] = "host";
    xccl_mem_info_t info;
    ck_assert_ptr_null(xccl_cu());
    void *other = dlopen("libanl.so.1", RTLD_NOW);
    ck_assert_msg(NULL != other, "libanl.so.1: %s", dlerror());
    ck_assert_ptr_null(xccl_cu());      /* looks again: the last object is libanl */
    ck_assert_ptr_null(xccl_cu());      /* nothing since */
    ck_assert_int_eq(0, dlclose(other));
    ck_assert_ptr_null(xccl_cu());
    setup();                            /* the driver, and a device context */
    ck_assert_ptr_nonnull(xccl_cu());
    CUdeviceptr d = 0;
    ck_assert_int_eq(0, cu.MemAlloc(&d, 4096));
    xccl_gpu_classify((void *) (uintptr_t) d, &info);
    ck_assert_int_eq(info.type, XCCL_MEM_DEVICE);
    xccl_gpu_classify(buf, &info);
    ck_assert_int_eq(info.type, XCCL_MEM_HOST);
    ck_assert_int_eq(0, cu.MemFree(d));
    teardown();
}
END_TEST

/* A library in a namespace of its own (dlmopen, as LD_AUDIT tools load
 * theirs), then one in the base namespace: the process now has objects
 * in two lists, and xccl must watch the one it and dlopen are in.  It
 * must not look for the driver again on every call (each look searches
 * the file system cache, ~70 us), nor miss the driver when the
 * application loads it. */
START_TEST(another_namespace)
{
    ck_assert_ptr_null(xccl_cu());
    void *apart = dlmopen(LM_ID_NEWLM, "libanl.so.1", RTLD_NOW);
    ck_assert_msg(NULL != apart, "dlmopen libanl.so.1: %s", dlerror());
    void *base = dlopen("libutil.so.1", RTLD_NOW);
    ck_assert_msg(NULL != base, "libutil.so.1: %s", dlerror());
    ck_assert_ptr_null(xccl_cu());      /* looks: libutil is new */
    const unsigned long looks = xccl_cu_looks();
    for (int i = 0; i < 1000; i++) {
        ck_assert_ptr_null(xccl_cu());
    }
    ck_assert_uint_le(xccl_cu_looks() - looks, 1);
    setup();
    ck_assert_ptr_nonnull(xccl_cu());
    teardown();
}
END_TEST

START_TEST(device_memory)
{
    setup();
    CUdeviceptr d = 0;
    CUcontext ctx = NULL;
    ck_assert_int_eq(0, cu.MemAlloc(&d, 1 << 20));
    ck_assert_int_eq(0, CtxGetCurrent(&ctx));
    xccl_mem_info_t a, b;
    xccl_gpu_classify((void *) (uintptr_t) d, &a);
    ck_assert_int_eq(a.type, XCCL_MEM_DEVICE);
    ck_assert_ptr_eq(a.ctx, ctx);
    ck_assert_ptr_eq(a.base, (void *) (uintptr_t) d);
    ck_assert_uint_ne(a.buffer_id, 0);
    /* inside the allocation: the same allocation */
    xccl_gpu_classify((void *) (uintptr_t) (d + 12345), &b);
    ck_assert_int_eq(b.type, XCCL_MEM_DEVICE);
    ck_assert_ptr_eq(b.base, a.base);
    ck_assert_uint_eq(b.buffer_id, a.buffer_id);
    ck_assert_int_eq(xccl_gpu_mem_type((void *) (uintptr_t) d), XCCL_MEM_DEVICE);
    ck_assert_int_eq(0, cu.MemFree(d));
    teardown();
}
END_TEST

/* Freed and allocated again: a new buffer id, even at the same address
 * (what the IPC handle cache relies on). */
START_TEST(reallocation_is_a_new_buffer)
{
    setup();
    CUdeviceptr d1 = 0, d2 = 0;
    xccl_mem_info_t a, b;
    ck_assert_int_eq(0, cu.MemAlloc(&d1, 4096));
    xccl_gpu_classify((void *) (uintptr_t) d1, &a);
    ck_assert_int_eq(0, cu.MemFree(d1));
    ck_assert_int_eq(0, cu.MemAlloc(&d2, 4096));
    xccl_gpu_classify((void *) (uintptr_t) d2, &b);
    ck_assert_int_eq(b.type, XCCL_MEM_DEVICE);
    ck_assert_uint_ne(a.buffer_id, b.buffer_id);
    printf("reallocation: %s address, buffer ids %llu then %llu\n",
           d1 == d2 ? "same" : "another", a.buffer_id, b.buffer_id);
    ck_assert_int_eq(0, cu.MemFree(d2));
    teardown();
}
END_TEST

/* Managed memory is staged like device memory; host, pinned host and
 * stack memory are host. */
START_TEST(managed_pinned_and_host)
{
    setup();
    CUdeviceptr m = 0;
    void *pinned = NULL, *heap = malloc(1000);
    char stack[100];
    CUresult r = MemAllocManaged(&m, 8192, 1 /* CU_MEM_ATTACH_GLOBAL */);
    if (801 == r) {            /* CUDA_ERROR_NOT_SUPPORTED: the fake has none */
        printf("managed memory: not supported by this driver, not checked\n");
    } else {
        ck_assert_int_eq(0, r);
        xccl_mem_info_t i;
        xccl_gpu_classify((void *) (uintptr_t) m, &i);
        ck_assert_int_eq(i.type, XCCL_MEM_DEVICE);
        ck_assert_ptr_nonnull(i.ctx);
        ck_assert_int_eq(0, cu.MemFree(m));
    }
    ck_assert_int_eq(0, cu.MemHostAlloc(&pinned, 8192, 0));
    ck_assert_int_eq(xccl_gpu_mem_type(pinned), XCCL_MEM_HOST);
    ck_assert_int_eq(xccl_gpu_mem_type(heap), XCCL_MEM_HOST);
    ck_assert_int_eq(xccl_gpu_mem_type(stack), XCCL_MEM_HOST);
    ck_assert_int_eq(xccl_gpu_mem_type(NULL), XCCL_MEM_HOST);
    ck_assert_int_eq(0, cu.MemFreeHost(pinned));
    free(heap);
    teardown();
}
END_TEST

/* Staging sets: reused per context, a second concurrent call gets another
 * one, pinned up to the pool size, events kept. */
START_TEST(staging_sets)
{
    setup();
    CUcontext ctx = NULL;
    const char *err = NULL;
    ck_assert_int_eq(0, CtxGetCurrent(&ctx));
    xccl_cucontext_t c = (xccl_cucontext_t) ctx;
    xccl_gpu_set_t *a = xccl_gpu_set_get(c, 1000, 1 << 20, &err);
    ck_assert_msg(NULL != a, "%s", err ? err : "");
    ck_assert(a->pinned);
    ck_assert_uint_ge(a->host_bytes, 1000);
    xccl_gpu_set_t *b = xccl_gpu_set_get(c, 1000, 1 << 20, &err);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(a, b);
    ck_assert_ptr_ne(a->host, b->host);
    ck_assert_int_eq(0, xccl_gpu_set_events(a, 5, &err));
    ck_assert_uint_eq(a->nev, 5);
    ck_assert_int_eq(0, xccl_gpu_set_events(a, 3, &err));
    ck_assert_uint_eq(a->nev, 5);
    xccl_cuevent_t first = a->ev[0];
    void *host = a->host;
    xccl_gpu_set_put(b, 0);
    xccl_gpu_set_put(a, 0);
    /* the most recent one back, with its memory and events */
    xccl_gpu_set_t *again = xccl_gpu_set_get(c, 500, 1 << 20, &err);
    ck_assert_ptr_eq(again, a);
    ck_assert_ptr_eq(again->host, host);
    ck_assert_uint_eq(again->nev, 5);
    ck_assert_ptr_eq(again->ev[0], first);
    /* above the pool size: pageable */
    xccl_gpu_set_t *big = xccl_gpu_set_get(c, (2 << 20) + 1, 1 << 20, &err);
    ck_assert_ptr_nonnull(big);
    ck_assert(!big->pinned);
    xccl_gpu_set_put(big, 0);
    /* a set given back after a driver error is destroyed, not reused */
    xccl_gpu_set_put(again, 1);
    xccl_gpu_set_t *fresh = xccl_gpu_set_get(c, 500, 1 << 20, &err);
    ck_assert_ptr_nonnull(fresh);
    ck_assert_uint_eq(fresh->nev, 0);
    xccl_gpu_set_put(fresh, 0);
    teardown();
}
END_TEST

/* Device scratch of a set (schedules run on device buffers): device memory
 * of the set's context, grown when asked for more, kept with the set. */
START_TEST(device_scratch)
{
    setup();
    CUcontext ctx = NULL;
    const char *err = NULL;
    ck_assert_int_eq(0, CtxGetCurrent(&ctx));
    xccl_cucontext_t c = (xccl_cucontext_t) ctx;
    xccl_gpu_set_t *a = xccl_gpu_set_get(c, 0, 1 << 20, &err);
    ck_assert_msg(NULL != a, "%s", err ? err : "");
    ck_assert_ptr_null(a->dev);
    ck_assert_int_eq(0, xccl_gpu_set_scratch(a, 0, &err));
    ck_assert_ptr_null(a->dev);
    ck_assert_msg(0 == xccl_gpu_set_scratch(a, 1000, &err), "%s", err ? err : "");
    ck_assert_ptr_nonnull(a->dev);
    ck_assert_uint_ge(a->dev_bytes, 1000);
    xccl_mem_info_t info;
    xccl_gpu_classify(a->dev, &info);
    ck_assert_int_eq(info.type, XCCL_MEM_DEVICE);
    ck_assert_ptr_eq(info.ctx, c);
    void *first = a->dev;
    ck_assert_int_eq(0, xccl_gpu_set_scratch(a, 10, &err));
    ck_assert_ptr_eq(a->dev, first);                /* enough: kept */
    ck_assert_int_eq(0, xccl_gpu_set_scratch(a, 3000, &err));
    ck_assert_uint_ge(a->dev_bytes, 3000);
    xccl_gpu_classify((char *) a->dev + 2999, &info);
    ck_assert_int_eq(info.type, XCCL_MEM_DEVICE);
    ck_assert_int_eq(0, xccl_gpu_set_scratch(a, 3001, &err));
    ck_assert_uint_ge(a->dev_bytes, 6000);          /* doubled: no realloc per byte */
    void *dev = a->dev;
    xccl_gpu_set_put(a, 0);
    xccl_gpu_set_t *again = xccl_gpu_set_get(c, 0, 1 << 20, &err);
    ck_assert_ptr_eq(again, a);
    ck_assert_ptr_eq(again->dev, dev);
    xccl_gpu_set_put(again, 0);
    teardown();                                     /* frees it (the fake's stats count) */
}
END_TEST

int main(void)
{
    /* A driver and a device, or a SKIP: probed in a child so that this
     * process stays without the driver (host_without_a_driver). */
    pid_t pid = fork();
    if (0 == pid) {
        const char *why = test_cuda_setup();
        if (why) {
            printf("SKIP: %s\n", why);
            fflush(stdout);
            _exit(77);
        }
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return WIFEXITED(status) && 77 == WEXITSTATUS(status) ? 77 : EXIT_FAILURE;
    }
    Suite *su = suite_create("gpu_classify");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, host_without_a_driver);
    tcase_add_test(tc, driver_loaded_later);
    tcase_add_test(tc, another_namespace);
    tcase_add_test(tc, device_scratch);
    tcase_add_test(tc, device_memory);
    tcase_add_test(tc, reallocation_is_a_new_buffer);
    tcase_add_test(tc, managed_pinned_and_host);
    tcase_add_test(tc, staging_sets);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
