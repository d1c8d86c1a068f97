/*
 * CUDA support, loaded at run time (gpu/xccl_cuda.h): the component never
 * links against libcuda, so it loads and works on machines without a
 * driver.
 *
 * Buffers are classified per call; device (and managed) buffers go through
 * staging sets: two streams (copies in, copies out), a pinned host buffer
 * and events, per CUDA context, reused across calls.
 */
#ifndef XCCL_GPU_H
#define XCCL_GPU_H

#include <stddef.h>

#include "xccl_cuda.h"

typedef enum {
    XCCL_MEM_HOST = 0,         /* ordinary, pinned or registered host memory */
    XCCL_MEM_DEVICE = 1        /* device or managed memory: staged */
} xccl_mem_type_t;

typedef struct xccl_mem_info {
    xccl_mem_type_t type;
    xccl_cucontext_t ctx;             /* the context that owns a device buffer */
    void *base;                       /* start of its allocation */
    unsigned long long buffer_id;     /* unique per allocation in the process */
} xccl_mem_info_t;

/* Where ptr lives: one cuPointerGetAttributes call once the process has
 * loaded the driver; without it, host (no query, no library load). */
void xccl_gpu_classify(const void *ptr, xccl_mem_info_t *info);
xccl_mem_type_t xccl_gpu_mem_type(const void *ptr);

/* The PCI bus id ("0000:1b:00.0", lower case) of the device of the calling
 * thread's current CUDA context; -1 when the process has not loaded the
 * driver or the thread has no context. */
int xccl_gpu_current_pci(char *bus_id, size_t len);

typedef struct xccl_gpu_set {
    xccl_cucontext_t ctx;
    xccl_custream_t in, out;
    void *host;
    size_t host_bytes;
    int pinned;                /* host from cuMemHostAlloc, else malloc */
    xccl_cuevent_t *ev;        /* events for pipelined copies, kept */
    size_t nev;
    void *dev;                 /* device scratch (xccl_gpu_set_scratch), kept */
    size_t dev_bytes;
    struct xccl_gpu_set *next;
} xccl_gpu_set_t;

/* A staging set of ctx (which the caller has made current) with at least
 * bytes of host memory: pinned while bytes <= pool_max, else pageable.
 * NULL and *err on failure.  Sets are reused; concurrent calls get
 * different ones. */
xccl_gpu_set_t *xccl_gpu_set_get(xccl_cucontext_t ctx, size_t bytes, size_t pool_max, const char **err);
/* At least n events in s->ev (with s->ctx current); 0, or -1 and *err. */
int xccl_gpu_set_events(xccl_gpu_set_t *s, size_t n, const char **err);
/* At least bytes of device memory at s->dev (with s->ctx current; grown
 * geometrically, kept with the set); 0, or -1 and *err. */
int xccl_gpu_set_scratch(xccl_gpu_set_t *s, size_t bytes, const char **err);
/* Back to the pool; bad = 1 after a driver error (then it is destroyed). */
void xccl_gpu_set_put(xccl_gpu_set_t *s, int bad);

/* An asynchronous copy of bytes on stream, in the calling thread's
 * current context (UNIFIED addressing: the driver tells device, managed
 * and host memory apart on the device side): NULL, or the driver's error
 * text (valid until the thread's next driver error). */
typedef enum { XCCL_GPU_TO_HOST, XCCL_GPU_FROM_HOST, XCCL_GPU_DEVICE_TO_DEVICE } xccl_gpu_copy_dir_t;
const char *xccl_gpu_copy(void *dst, const void *src, size_t bytes, xccl_gpu_copy_dir_t dir,
                          xccl_custream_t stream);

/* "cuda driver loaded", "no cuda driver loaded" for the log. */
const char *xccl_gpu_status(void);
/* Frees every staging set and forgets the driver. */
void xccl_gpu_fini(void);

#endif
