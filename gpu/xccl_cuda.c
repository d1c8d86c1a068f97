/* The CUDA driver API, loaded with dlopen from a process that loaded it. */
#define _GNU_SOURCE 1          /* dl_iterate_phdr, dlinfo, RTLD_NOLOAD */
#include "xccl_build_config.h"
#include "xccl_cuda.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef XCCL_HAVE_CUDA
/* Our declarations must be cuda.h's ABI. */
#include <cuda.h>
#define SAME_OFFSET(f) _Static_assert(offsetof(xccl_cu_memcpy2d_t, f) == offsetof(CUDA_MEMCPY2D, f), #f)
SAME_OFFSET(srcMemoryType);
SAME_OFFSET(srcHost);
SAME_OFFSET(srcDevice);
SAME_OFFSET(srcPitch);
SAME_OFFSET(dstMemoryType);
SAME_OFFSET(dstHost);
SAME_OFFSET(dstDevice);
SAME_OFFSET(dstPitch);
SAME_OFFSET(WidthInBytes);
SAME_OFFSET(Height);
_Static_assert(sizeof(xccl_cu_memcpy2d_t) == sizeof(CUDA_MEMCPY2D), "CUDA_MEMCPY2D");
_Static_assert(sizeof(xccl_cudeviceptr_t) == sizeof(CUdeviceptr), "CUdeviceptr");
_Static_assert(sizeof(xccl_cuipc_handle_t) == sizeof(CUipcMemHandle), "CUipcMemHandle");
_Static_assert(sizeof(xccl_cuipc_event_handle_t) == sizeof(CUipcEventHandle), "CUipcEventHandle");
_Static_assert(XCCL_CU_EVENT_INTERPROCESS == CU_EVENT_INTERPROCESS, "interprocess events");
_Static_assert(XCCL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS &&
               XCCL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
               "ipc");
_Static_assert(XCCL_CU_POINTER_ATTRIBUTE_CONTEXT == CU_POINTER_ATTRIBUTE_CONTEXT &&
               XCCL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE == CU_POINTER_ATTRIBUTE_MEMORY_TYPE &&
               XCCL_CU_POINTER_ATTRIBUTE_BUFFER_ID == CU_POINTER_ATTRIBUTE_BUFFER_ID &&
               XCCL_CU_POINTER_ATTRIBUTE_IS_MANAGED == CU_POINTER_ATTRIBUTE_IS_MANAGED &&
               XCCL_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
               "pointer attributes");
_Static_assert(XCCL_CU_MEMORYTYPE_HOST == CU_MEMORYTYPE_HOST &&
               XCCL_CU_MEMORYTYPE_DEVICE == CU_MEMORYTYPE_DEVICE &&
               XCCL_CU_MEMORYTYPE_ARRAY == CU_MEMORYTYPE_ARRAY &&
               XCCL_CU_MEMORYTYPE_UNIFIED == CU_MEMORYTYPE_UNIFIED, "memory types");
_Static_assert(XCCL_CU_MEMHOSTALLOC_PORTABLE == CU_MEMHOSTALLOC_PORTABLE &&
               XCCL_CU_STREAM_DEFAULT == CU_STREAM_DEFAULT &&
               XCCL_CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "flags");
_Static_assert(XCCL_CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "not ready");
#endif

/* Member order of xccl_cu_api_t. */
static const char *const symbols[] = {
    "cuGetErrorString", "cuPointerGetAttributes", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2",
    "cuCtxGetCurrent", "cuCtxGetDevice", "cuDeviceGetPCIBusId",
    "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuMemcpy2DAsync_v2",
    "cuMemHostAlloc", "cuMemFreeHost", "cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2",
    "cuIpcCloseMemHandle", "cuStreamQuery", "cuEventCreate", "cuEventDestroy_v2",
    "cuEventRecord", "cuEventQuery", "cuMemAlloc_v2", "cuMemFree_v2", "cuStreamWaitEvent",
    "cuIpcGetEventHandle", "cuIpcOpenEventHandle",
};
_Static_assert(sizeof(symbols) / sizeof(symbols[0]) == sizeof(xccl_cu_api_t) / sizeof(void (*)(void)),
               "one symbol per member");

static void *libcuda;
static xccl_cu_api_t api;

/* Whether the process has loaded anything since the driver was last looked
 * for, in one load: `newest` is the object that was last in the loader's
 * list then, held open by newest_handle so that it stays there.  glibc
 * appends every object it loads to that list, so while newest->l_next is
 * NULL nothing was loaded after it (or what was is gone again) and there is
 * still no driver.  dl_iterate_phdr's count of loads says the same at the
 * price of the loader's lock and a call back, about a tenth of a small
 * bcast's time, on every call whose buffers are not in the brk heap
 * (stack arrays, large mallocs, Python's objects).  The look itself (below)
 * happens once per change. */
static struct link_map *newest;
static void *newest_handle;
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long looks;          /* under probe_lock */

static int name_newest(struct dl_phdr_info *info, size_t size, void *data)
{
    (void) size;
    /* Called with the loader's list locked, in its order: the name must be
     * copied, the object may go once the walk is over. */
    snprintf(data, PATH_MAX, "%s", info->dlpi_name ? info->dlpi_name : "");
    return 0;
}

/* Holds the list's last object open as `newest` (should the application
 * close it, it stays loaded until xccl_cu_unload).  dl_iterate_phdr walks
 * the caller's namespace, the one dlopen looks in: objects of another
 * (dlmopen, LD_AUDIT tools) neither change its last object nor could be
 * the driver xccl finds (test_gpu_classify another_namespace).  Should
 * another thread load something meanwhile, the object held is not the
 * last and the next call looks again: too often, never too seldom.
 * RTLD_LAZY | RTLD_NOLOAD only takes a reference: it neither loads nor
 * binds anything.  The new reference is taken before the old one goes. */
static void hold_newest(void)
{
    char name[PATH_MAX];
    name[0] = '\0';
    dl_iterate_phdr(name_newest, name);
    void *h = '\0' != name[0] ? dlopen(name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    struct link_map *lm = NULL;
    if (NULL != h && 0 != dlinfo(h, RTLD_DI_LINKMAP, &lm)) {
        dlclose(h);
        h = NULL;
        lm = NULL;
    }
    if (newest_handle) {
        dlclose(newest_handle);
    }
    newest_handle = h;
    __atomic_store_n(&newest, lm, __ATOMIC_RELEASE);
}

static int unchanged(void)
{
    struct link_map *lm = __atomic_load_n(&newest, __ATOMIC_ACQUIRE);
    return NULL != lm && NULL == __atomic_load_n(&lm->l_next, __ATOMIC_ACQUIRE);
}

static int probe(void)
{
    pthread_mutex_lock(&probe_lock);
    int found = NULL != __atomic_load_n(&libcuda, __ATOMIC_ACQUIRE);
    if (found || unchanged()) {
        pthread_mutex_unlock(&probe_lock);
        return found;
    }
    /* dlopen(RTLD_NOLOAD) of a library that is not loaded searches the
     * file system cache (~70 us): hence the look only after a change. */
    looks++;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    xccl_cu_api_t a;
    void (**slot)(void) = (void (**)(void)) &a;
    for (size_t i = 0; NULL != h && i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        if (NULL == (slot[i] = (void (*)(void)) dlsym(h, symbols[i]))) {
            dlclose(h);        /* a driver older than CUDA 4: not usable */
            h = NULL;
        }
    }
    if (NULL != h) {
        api = a;
        __atomic_store_n(&libcuda, h, __ATOMIC_RELEASE);
    } else {
        hold_newest();
    }
    pthread_mutex_unlock(&probe_lock);
    return NULL != h;
}

const xccl_cu_api_t *xccl_cu(void)
{
    return (__atomic_load_n(&libcuda, __ATOMIC_ACQUIRE) || (!unchanged() && probe())) ? &api : NULL;
}

unsigned long xccl_cu_looks(void)
{
    pthread_mutex_lock(&probe_lock);
    const unsigned long n = looks;
    pthread_mutex_unlock(&probe_lock);
    return n;
}

const char *xccl_cu_error(const char *call, xccl_curesult_t rc)
{
    static __thread char buf[200];
    const char *s = NULL;
    if (NULL == libcuda || XCCL_CUDA_SUCCESS != api.GetErrorString(rc, &s) || NULL == s) {
        s = "unknown error";
    }
    snprintf(buf, sizeof(buf), "%s: %s (%d)", call, s, rc);
    return buf;
}

void xccl_cu_unload(void)
{
    pthread_mutex_lock(&probe_lock);
    if (libcuda) {
        dlclose(libcuda);
        libcuda = NULL;
        memset(&api, 0, sizeof(api));
    }
    if (newest_handle) {
        dlclose(newest_handle);
        newest_handle = NULL;
    }
    newest = NULL;
    pthread_mutex_unlock(&probe_lock);
}
