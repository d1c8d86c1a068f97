/*
 * The CUDA driver API types and constants the fake libcuda.so.1 implements,
 * with plain C types and prefixed names (fake_cuda_abi.c checks them
 * against cuda.h where the toolkit headers exist).
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <stddef.h>

typedef int fcu_result;                 /* CUresult */
typedef int fcu_device;                 /* CUdevice */
typedef unsigned long long fcu_dptr;    /* CUdeviceptr */
typedef struct fake_ctx *fcu_ctx;       /* CUcontext */
typedef struct fake_stream *fcu_stream; /* CUstream */
typedef struct fake_event *fcu_event;   /* CUevent */
typedef int fcu_pattr;                  /* CUpointer_attribute */
typedef struct fake_module *fcu_module; /* CUmodule */
typedef struct fake_function *fcu_function; /* CUfunction */

#define FCU_IPC_HANDLE_SIZE 64
typedef struct {
    char reserved[FCU_IPC_HANDLE_SIZE];
} fcu_ipc_mem_handle;                   /* CUipcMemHandle */
typedef struct {
    char reserved[FCU_IPC_HANDLE_SIZE];
} fcu_ipc_event_handle;                 /* CUipcEventHandle */
enum { FCU_EVENT_DISABLE_TIMING = 2, FCU_EVENT_INTERPROCESS = 4 };

typedef struct {                        /* CUDA_MEMCPY2D (_v2) */
    size_t srcXInBytes;
    size_t srcY;
    int srcMemoryType;
    const void *srcHost;
    fcu_dptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes;
    size_t dstY;
    int dstMemoryType;
    void *dstHost;
    fcu_dptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes;
    size_t Height;
} fcu_memcpy2d;

enum {
    FCU_SUCCESS = 0,
    FCU_ERROR_INVALID_VALUE = 1,
    FCU_ERROR_OUT_OF_MEMORY = 2,
    FCU_ERROR_NOT_INITIALIZED = 3,
    FCU_ERROR_NO_DEVICE = 100,
    FCU_ERROR_INVALID_DEVICE = 101,
    FCU_ERROR_INVALID_CONTEXT = 201,
    FCU_ERROR_MAP_FAILED = 205,
    FCU_ERROR_INVALID_HANDLE = 400,
    FCU_ERROR_NOT_FOUND = 500,
    FCU_ERROR_NOT_READY = 600,
    FCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    FCU_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    FCU_ERROR_NOT_SUPPORTED = 801,
    FCU_ERROR_UNKNOWN = 999,
};

enum { FCU_MT_HOST = 1, FCU_MT_DEVICE = 2, FCU_MT_ARRAY = 3, FCU_MT_UNIFIED = 4 };

enum {
    FCU_PA_CONTEXT = 1, FCU_PA_MEMORY_TYPE = 2, FCU_PA_DEVICE_POINTER = 3,
    FCU_PA_HOST_POINTER = 4, FCU_PA_SYNC_MEMOPS = 6, FCU_PA_BUFFER_ID = 7,
    FCU_PA_IS_MANAGED = 8, FCU_PA_DEVICE_ORDINAL = 9,
    FCU_PA_IS_LEGACY_CUDA_IPC_CAPABLE = 10, FCU_PA_RANGE_START_ADDR = 11,
    FCU_PA_RANGE_SIZE = 12, FCU_PA_MAPPED = 13,
};

enum { FCU_STREAM_NON_BLOCKING = 1 };
#define FCU_STREAM_LEGACY ((fcu_stream)0x1)
#define FCU_STREAM_PER_THREAD ((fcu_stream)0x2)

/* cuDeviceGetAttribute's attributes that the fake answers with more than 0. */
enum {
    FCU_DA_MAX_THREADS_PER_BLOCK = 1, FCU_DA_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    FCU_DA_WARP_SIZE = 10, FCU_DA_MULTIPROCESSOR_COUNT = 16, FCU_DA_PCI_BUS_ID = 33,
    FCU_DA_UNIFIED_ADDRESSING = 41, FCU_DA_COMPUTE_CAPABILITY_MAJOR = 75,
};

#endif
