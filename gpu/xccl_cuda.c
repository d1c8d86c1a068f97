/* The CUDA driver API, loaded with dlopen from a process that loaded it. */
#define _GNU_SOURCE 1          /* dl_iterate_phdr, RTLD_NOLOAD */
#include "xccl_build_config.h"
#include "xccl_cuda.h"

#include <dlfcn.h>
#include <link.h>
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

static int count_loads(struct dl_phdr_info *info, size_t size, void *data)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds)) {
        *(unsigned long long *) data = info->dlpi_adds;
    }
    return 1;                  /* the first object is enough */
}

static int probe(void)
{
    static unsigned long long seen_loads = ~0ull;
    unsigned long long loads = 0;

    /* dlopen(RTLD_NOLOAD) of a library that is not loaded searches the
     * file system cache (~70 us): only look again when the process has
     * loaded something since the last look. */
    dl_iterate_phdr(count_loads, &loads);
    if (loads == seen_loads) {
        return 0;
    }
    seen_loads = loads;

    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == h) {
        return 0;
    }
    xccl_cu_api_t a;
    void (**slot)(void) = (void (**)(void)) &a;
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        if (NULL == (slot[i] = (void (*)(void)) dlsym(h, symbols[i]))) {
            dlclose(h);        /* a driver older than CUDA 4: not usable */
            return 0;
        }
    }
    api = a;
    libcuda = h;
    return 1;
}

const xccl_cu_api_t *xccl_cu(void)
{
    return (libcuda || probe()) ? &api : NULL;
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
    if (libcuda) {
        dlclose(libcuda);
        libcuda = NULL;
        memset(&api, 0, sizeof(api));
    }
}
