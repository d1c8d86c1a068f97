/*
 * The part of the CUDA driver API that xccl uses, declared here with the
 * ABI of cuda.h (stable since CUDA 4 for these entry points) so that xccl
 * builds without the toolkit, and loaded from libcuda.so.1 with dlopen at
 * run time.  gpu/xccl_cuda.c checks these declarations against cuda.h when
 * the toolkit is there (XCCL_HAVE_CUDA).
 */
#ifndef XCCL_CUDA_H
#define XCCL_CUDA_H

#include <stddef.h>

typedef int xccl_curesult_t;
typedef int xccl_cudevice_t;
typedef unsigned long long xccl_cudeviceptr_t;
typedef struct xccl_cuctx_st *xccl_cucontext_t;
typedef struct xccl_custream_st *xccl_custream_t;
typedef struct xccl_cuevent_st *xccl_cuevent_t;

#define XCCL_CUDA_SUCCESS 0
#define XCCL_CUDA_ERROR_NOT_READY 600      /* an event or stream query: work pending */

/* CUipcMemHandle, passed by value */
typedef struct {
    char reserved[64];
} xccl_cuipc_handle_t;
#define XCCL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 1
/* CUipcEventHandle, passed by value */
typedef struct {
    char reserved[64];
} xccl_cuipc_event_handle_t;

/* CUpointer_attribute */
#define XCCL_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define XCCL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define XCCL_CU_POINTER_ATTRIBUTE_BUFFER_ID 7
#define XCCL_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define XCCL_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define XCCL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11

/* CUmemorytype */
#define XCCL_CU_MEMORYTYPE_HOST 1
#define XCCL_CU_MEMORYTYPE_DEVICE 2
#define XCCL_CU_MEMORYTYPE_ARRAY 3
#define XCCL_CU_MEMORYTYPE_UNIFIED 4

#define XCCL_CU_STREAM_DEFAULT 0           /* synchronises with the legacy default stream */
/* CU_STREAM_LEGACY: the current context's legacy default stream, whatever
 * the caller was compiled with (an operation on it waits for the earlier
 * work of every blocking stream of the context) */
#define XCCL_CU_STREAM_LEGACY ((xccl_custream_t) 0x1)
#define XCCL_CU_MEMHOSTALLOC_PORTABLE 1    /* pinned for every context */
#define XCCL_CU_EVENT_DISABLE_TIMING 2
#define XCCL_CU_EVENT_INTERPROCESS 4       /* with DISABLE_TIMING */

typedef struct {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    xccl_cudeviceptr_t srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    xccl_cudeviceptr_t dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} xccl_cu_memcpy2d_t;                  /* CUDA_MEMCPY2D */

/* One member per entry point; the symbol is the member's name with "cu"
 * and the suffix in XCCL_CU_SYMBOLS. */
typedef struct {
    xccl_curesult_t (*GetErrorString)(xccl_curesult_t error, const char **str);
    xccl_curesult_t (*PointerGetAttributes)(unsigned n, int *attributes, void **data, xccl_cudeviceptr_t ptr);
    xccl_curesult_t (*CtxPushCurrent)(xccl_cucontext_t ctx);
    xccl_curesult_t (*CtxPopCurrent)(xccl_cucontext_t *ctx);
    xccl_curesult_t (*CtxGetCurrent)(xccl_cucontext_t *ctx);
    xccl_curesult_t (*CtxGetDevice)(xccl_cudevice_t *dev);
    xccl_curesult_t (*DeviceGetPCIBusId)(char *bus_id, int len, xccl_cudevice_t dev);
    xccl_curesult_t (*StreamCreate)(xccl_custream_t *stream, unsigned flags);
    xccl_curesult_t (*StreamDestroy)(xccl_custream_t stream);
    xccl_curesult_t (*StreamSynchronize)(xccl_custream_t stream);
    xccl_curesult_t (*Memcpy2DAsync)(const xccl_cu_memcpy2d_t *copy, xccl_custream_t stream);
    xccl_curesult_t (*MemHostAlloc)(void **pp, size_t bytes, unsigned flags);
    xccl_curesult_t (*MemFreeHost)(void *p);
    xccl_curesult_t (*IpcGetMemHandle)(xccl_cuipc_handle_t *handle, xccl_cudeviceptr_t ptr);
    xccl_curesult_t (*IpcOpenMemHandle)(xccl_cudeviceptr_t *ptr, xccl_cuipc_handle_t handle,
                                        unsigned flags);
    xccl_curesult_t (*IpcCloseMemHandle)(xccl_cudeviceptr_t ptr);
    xccl_curesult_t (*StreamQuery)(xccl_custream_t stream);
    xccl_curesult_t (*EventCreate)(xccl_cuevent_t *event, unsigned flags);
    xccl_curesult_t (*EventDestroy)(xccl_cuevent_t event);
    xccl_curesult_t (*EventRecord)(xccl_cuevent_t event, xccl_custream_t stream);
    xccl_curesult_t (*EventQuery)(xccl_cuevent_t event);
    xccl_curesult_t (*MemAlloc)(xccl_cudeviceptr_t *ptr, size_t bytes);
    xccl_curesult_t (*MemFree)(xccl_cudeviceptr_t ptr);
    xccl_curesult_t (*StreamWaitEvent)(xccl_custream_t stream, xccl_cuevent_t event, unsigned flags);
    xccl_curesult_t (*IpcGetEventHandle)(xccl_cuipc_event_handle_t *handle, xccl_cuevent_t event);
    xccl_curesult_t (*IpcOpenEventHandle)(xccl_cuevent_t *event, xccl_cuipc_event_handle_t handle);
} xccl_cu_api_t;

/* The driver's entry points, or NULL when the process has not loaded
 * libcuda.so.1 (then it cannot own device memory; xccl never loads the
 * driver itself, that would cost every job start-up time).  A process that
 * loads it later is noticed on a later call. */
const xccl_cu_api_t *xccl_cu(void);
/* How many times xccl has looked for the driver (each look searches the
 * file system cache for libcuda.so.1, ~70 us): for tests. */
unsigned long xccl_cu_looks(void);
/* "cuMemcpy2DAsync: invalid argument (1)" style text of a failed call. */
const char *xccl_cu_error(const char *call, xccl_curesult_t rc);
void xccl_cu_unload(void);

#endif
