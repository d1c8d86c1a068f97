/* Buffer classification through the CUDA driver API, loaded with dlopen. */
#define _GNU_SOURCE 1          /* dl_iterate_phdr, RTLD_NOLOAD */
#include "xccl_build_config.h"
#include "xccl_gpu.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

#ifdef XCCL_HAVE_CUDA
#include <cuda.h>
#else
/* The few driver API definitions used here (stable ABI values of cuda.h). */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
#define CUDA_SUCCESS 0
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_ARRAY 3
#endif

typedef CUresult (*pointer_get_attribute_fn)(void *data, int attribute, CUdeviceptr ptr);

static void *libcuda;
static pointer_get_attribute_fn pointer_get_attribute;

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

    /* Only a process that loaded the driver can own device memory, so do
     * not load it ourselves: that would cost every job startup time. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == h) {
        return 0;
    }
    pointer_get_attribute = (pointer_get_attribute_fn) dlsym(h, "cuPointerGetAttribute");
    if (NULL == pointer_get_attribute) {
        dlclose(h);
        return 0;
    }
    libcuda = h;
    return 1;
}

xccl_mem_type_t xccl_gpu_mem_type(const void *ptr)
{
    unsigned int type = 0;
    if (NULL == ptr || (NULL == libcuda && !probe())) {
        return XCCL_MEM_HOST;
    }
    if (CUDA_SUCCESS != pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              (CUdeviceptr) (uintptr_t) ptr)) {
        return XCCL_MEM_HOST;  /* not known to the driver: host memory */
    }
    return (CU_MEMORYTYPE_DEVICE == type || CU_MEMORYTYPE_ARRAY == type) ? XCCL_MEM_DEVICE
                                                                          : XCCL_MEM_HOST;
}

const char *xccl_gpu_status(void)
{
    return (libcuda || probe()) ? "cuda driver loaded" : "no cuda driver loaded";
}

void xccl_gpu_fini(void)
{
    if (libcuda) {
        dlclose(libcuda);
        libcuda = NULL;
        pointer_get_attribute = NULL;
    }
}
