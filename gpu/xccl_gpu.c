/* Buffer classification and staging sets over the CUDA driver API. */
#include "xccl_build_config.h"
#include "xccl_gpu.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void xccl_gpu_classify(const void *ptr, xccl_mem_info_t *info)
{
    const xccl_cu_api_t *cu = xccl_cu();
    unsigned int type = 0, managed = 0;
    xccl_cucontext_t ctx = NULL;
    xccl_cudeviceptr_t base = 0;
    unsigned long long id = 0;
    int attrs[] = { XCCL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, XCCL_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    XCCL_CU_POINTER_ATTRIBUTE_CONTEXT, XCCL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                    XCCL_CU_POINTER_ATTRIBUTE_BUFFER_ID };
    void *data[] = { &type, &managed, &ctx, &base, &id };

    memset(info, 0, sizeof(*info));
    info->type = XCCL_MEM_HOST;
    /* The driver answers "type 0" for memory it does not know. */
    if (NULL == ptr || NULL == cu ||
        XCCL_CUDA_SUCCESS != cu->PointerGetAttributes(5, attrs, data,
                                                      (xccl_cudeviceptr_t) (uintptr_t) ptr)) {
        return;
    }
    if (managed || XCCL_CU_MEMORYTYPE_DEVICE == type || XCCL_CU_MEMORYTYPE_ARRAY == type) {
        info->type = XCCL_MEM_DEVICE;
        info->ctx = ctx;
        info->base = (void *) (uintptr_t) base;
        info->buffer_id = id;
    }
}

xccl_mem_type_t xccl_gpu_mem_type(const void *ptr)
{
    xccl_mem_info_t info;
    xccl_gpu_classify(ptr, &info);
    return info.type;
}

int xccl_gpu_current_pci(char *bus_id, size_t len)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cucontext_t ctx = NULL;
    xccl_cudevice_t dev;
    if (NULL == cu || len < 2 || len > 64 || XCCL_CUDA_SUCCESS != cu->CtxGetCurrent(&ctx) ||
        NULL == ctx || XCCL_CUDA_SUCCESS != cu->CtxGetDevice(&dev) ||
        XCCL_CUDA_SUCCESS != cu->DeviceGetPCIBusId(bus_id, (int) len, dev)) {
        return -1;
    }
    for (char *c = bus_id; *c; c++) {
        *c = (char) tolower((unsigned char) *c);
    }
    return 0;
}

/* ------------------------------------------------------------ staging sets */

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static xccl_gpu_set_t *free_sets;    /* idle sets of every context */

static void free_host(const xccl_cu_api_t *cu, xccl_gpu_set_t *s)
{
    if (s->pinned) {
        cu->MemFreeHost(s->host);
    } else {
        free(s->host);
    }
    s->host = NULL;
    s->host_bytes = 0;
}

/* With s->ctx current. */
static void destroy_set(const xccl_cu_api_t *cu, xccl_gpu_set_t *s)
{
    for (size_t i = 0; i < s->nev; i++) {
        cu->EventDestroy(s->ev[i]);
    }
    free(s->ev);
    if (s->dev) {
        cu->MemFree((xccl_cudeviceptr_t) (uintptr_t) s->dev);
    }
    if (s->in) {
        cu->StreamDestroy(s->in);
    }
    if (s->out) {
        cu->StreamDestroy(s->out);
    }
    free_host(cu, s);
    free(s);
}

static xccl_gpu_set_t *new_set(const xccl_cu_api_t *cu, xccl_cucontext_t ctx, const char **err)
{
    xccl_gpu_set_t *s = calloc(1, sizeof(*s));
    xccl_curesult_t rc;
    if (NULL == s) {
        *err = "out of memory";
        return NULL;
    }
    s->ctx = ctx;
    /* Blocking streams (not CU_STREAM_NON_BLOCKING): they wait for work the
     * application queued on the legacy default stream. */
    if (XCCL_CUDA_SUCCESS != (rc = cu->StreamCreate(&s->in, XCCL_CU_STREAM_DEFAULT)) ||
        XCCL_CUDA_SUCCESS != (rc = cu->StreamCreate(&s->out, XCCL_CU_STREAM_DEFAULT))) {
        *err = xccl_cu_error("cuStreamCreate", rc);
        destroy_set(cu, s);
        return NULL;
    }
    return s;
}

xccl_gpu_set_t *xccl_gpu_set_get(xccl_cucontext_t ctx, size_t bytes, size_t pool_max, const char **err)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_gpu_set_t *s = NULL;
    if (NULL == cu) {
        *err = "no cuda driver loaded";
        return NULL;
    }
    pthread_mutex_lock(&sets_lock);
    for (xccl_gpu_set_t **pp = &free_sets; *pp; pp = &(*pp)->next) {
        if ((*pp)->ctx == ctx) {
            s = *pp;
            *pp = s->next;
            break;
        }
    }
    pthread_mutex_unlock(&sets_lock);
    if (NULL == s && NULL == (s = new_set(cu, ctx, err))) {
        return NULL;
    }
    s->next = NULL;
    const int want_pinned = bytes <= pool_max;
    if (s->host_bytes < bytes || s->pinned != want_pinned) {
        free_host(cu, s);
        size_t n = bytes ? bytes : 1;
        /* Grow pinned memory geometrically: cuMemHostAlloc costs ms. */
        if (want_pinned && s->pinned && 2 * s->host_bytes > n) {
            n = 2 * s->host_bytes < pool_max ? 2 * s->host_bytes : pool_max;
        }
        xccl_curesult_t rc = XCCL_CUDA_SUCCESS;
        if (want_pinned) {
            rc = cu->MemHostAlloc(&s->host, n, XCCL_CU_MEMHOSTALLOC_PORTABLE);
        } else {
            s->host = malloc(n);
        }
        if (XCCL_CUDA_SUCCESS != rc || NULL == s->host) {
            *err = want_pinned ? xccl_cu_error("cuMemHostAlloc", rc) : "out of memory";
            s->host = NULL;
            destroy_set(cu, s);
            return NULL;
        }
        s->host_bytes = n;
        s->pinned = want_pinned;
    }
    return s;
}

int xccl_gpu_set_events(xccl_gpu_set_t *s, size_t n, const char **err)
{
    const xccl_cu_api_t *cu = xccl_cu();
    if (n <= s->nev) {
        return 0;
    }
    xccl_cuevent_t *ev = realloc(s->ev, n * sizeof(*ev));
    if (NULL == ev) {
        *err = "out of memory";
        return -1;
    }
    s->ev = ev;
    for (; s->nev < n; s->nev++) {
        xccl_curesult_t rc = cu->EventCreate(&s->ev[s->nev], XCCL_CU_EVENT_DISABLE_TIMING);
        if (XCCL_CUDA_SUCCESS != rc) {
            *err = xccl_cu_error("cuEventCreate", rc);
            return -1;
        }
    }
    return 0;
}

int xccl_gpu_set_scratch(xccl_gpu_set_t *s, size_t bytes, const char **err)
{
    const xccl_cu_api_t *cu = xccl_cu();
    if (bytes <= s->dev_bytes) {
        return 0;
    }
    size_t n = bytes < 2 * s->dev_bytes ? 2 * s->dev_bytes : bytes;
    xccl_cudeviceptr_t p = 0;
    if (s->dev) {
        cu->MemFree((xccl_cudeviceptr_t) (uintptr_t) s->dev);
        s->dev = NULL;
        s->dev_bytes = 0;
    }
    xccl_curesult_t rc = cu->MemAlloc(&p, n);
    if (XCCL_CUDA_SUCCESS != rc) {
        *err = xccl_cu_error("cuMemAlloc", rc);
        return -1;
    }
    s->dev = (void *) (uintptr_t) p;
    s->dev_bytes = n;
    return 0;
}

void xccl_gpu_set_put(xccl_gpu_set_t *s, int bad)
{
    const xccl_cu_api_t *cu = xccl_cu();
    if (NULL == s) {
        return;
    }
    if (bad && cu) {
        destroy_set(cu, s);    /* the caller still has s->ctx current */
        return;
    }
    pthread_mutex_lock(&sets_lock);
    s->next = free_sets;
    free_sets = s;
    pthread_mutex_unlock(&sets_lock);
}

const char *xccl_gpu_copy(void *dst, const void *src, size_t bytes, xccl_gpu_copy_dir_t dir,
                          xccl_custream_t stream)
{
    xccl_cu_memcpy2d_t d;
    memset(&d, 0, sizeof(d));
    if (XCCL_GPU_FROM_HOST == dir) {
        d.srcMemoryType = XCCL_CU_MEMORYTYPE_HOST;
        d.srcHost = src;
    } else {
        d.srcMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.srcDevice = (xccl_cudeviceptr_t) (uintptr_t) src;
    }
    if (XCCL_GPU_TO_HOST == dir) {
        d.dstMemoryType = XCCL_CU_MEMORYTYPE_HOST;
        d.dstHost = dst;
    } else {
        d.dstMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.dstDevice = (xccl_cudeviceptr_t) (uintptr_t) dst;
    }
    d.srcPitch = d.dstPitch = d.WidthInBytes = bytes;
    d.Height = 1;
    xccl_curesult_t rc = xccl_cu()->Memcpy2DAsync(&d, stream);
    return XCCL_CUDA_SUCCESS == rc ? NULL : xccl_cu_error("cuMemcpy2DAsync", rc);
}

const char *xccl_gpu_status(void)
{
    return xccl_cu() ? "cuda driver loaded" : "no cuda driver loaded";
}

void xccl_gpu_fini(void)
{
    const xccl_cu_api_t *cu = xccl_cu();
    pthread_mutex_lock(&sets_lock);
    while (free_sets) {
        xccl_gpu_set_t *s = free_sets;
        free_sets = s->next;
        /* The application may have destroyed the context already: then the
         * calls fail and there is nothing left to free. */
        if (cu && XCCL_CUDA_SUCCESS == cu->CtxPushCurrent(s->ctx)) {
            xccl_cucontext_t popped;
            destroy_set(cu, s);
            cu->CtxPopCurrent(&popped);
        } else {
            if (!s->pinned) {
                free(s->host);
            }
            free(s);
        }
    }
    pthread_mutex_unlock(&sets_lock);
    xccl_cu_unload();
}
