/*
 * Loader of xccl's GPU reduction kernels (gpu/xccl_gpu_kernels.h): the
 * fatbin that the build embeds (xccl_gpu_fatbin, generated from
 * gpu/xccl_kernels.cu) becomes one module per CUDA context
 * (cuModuleLoadData, on first use, cached with the functions looked up so
 * far).  The driver entry points beyond gpu/xccl_cuda.h's table are
 * resolved here, from the libcuda.so.1 the process has already loaded.
 */
#define _GNU_SOURCE 1          /* RTLD_NOLOAD */
#include "xccl_build_config.h"
#include "xccl_gpu_kernels.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef XCCL_HAVE_GPU_KERNELS

static const char *const not_built = "not built with CUDA kernels";

int xccl_gpu_reduce_supported(xccl_dtype_t dt, xccl_op_t op)
{
    (void) dt;
    (void) op;
    return 0;
}

const char *xccl_gpu_reduce_kernel_name(xccl_dtype_t dt, xccl_op_t op)
{
    (void) dt;
    (void) op;
    return NULL;
}

size_t xccl_gpu_reduce_align(xccl_dtype_t dt)
{
    (void) dt;
    return 1;
}

int xccl_gpu_reduce(xccl_dtype_t dt, xccl_op_t op, void *dst, const void *const *srcs, int nsrc,
                    size_t count, xccl_custream_t stream, const char **err)
{
    (void) dt;
    (void) op;
    (void) dst;
    (void) srcs;
    (void) nsrc;
    (void) count;
    (void) stream;
    *err = not_built;
    return -1;
}

int xccl_gpu_copy_batch(const xccl_gpu_copies_t *c, xccl_custream_t stream, const char **err)
{
    (void) c;
    (void) stream;
    *err = not_built;
    return -1;
}

int xccl_gpu_kernels_load(const char **err)
{
    *err = not_built;
    return -1;
}

const char *xccl_gpu_kernels_status(void)
{
    return not_built;
}

void xccl_gpu_kernels_release(void)
{
}

void xccl_gpu_kernels_fini(void)
{
}

#else /* XCCL_HAVE_GPU_KERNELS */

/* gpu/xccl_kernels_fatbin.c, generated in the build directory. */
extern const unsigned char xccl_gpu_fatbin[];
extern const size_t xccl_gpu_fatbin_size;

typedef struct xccl_cumod_st *xccl_cumodule_t;
typedef struct xccl_cufunc_st *xccl_cufunction_t;

#define XCCL_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16

#ifdef XCCL_HAVE_CUDA
#include <cuda.h>
_Static_assert(XCCL_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
               "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT");
_Static_assert(sizeof(xccl_cumodule_t) == sizeof(CUmodule) && sizeof(xccl_cufunction_t) == sizeof(CUfunction),
               "CUmodule, CUfunction");
#endif

/* The kernels' parameters, as gpu/xccl_kernels.cu declares them. */
_Static_assert(sizeof(xccl_gpu_srcs_t) == XCCL_GPU_MAX_SRCS * 8, "xccl_gpu_srcs_t");

#define NAME(DT, tn, T, opn, OP) [DT][OP] = "xccl_reduce_" #tn "_" #opn,
static const char *const names[XCCL_DT_COUNT][XCCL_OP_COUNT] = { XCCL_GPU_PAIRS(NAME) };
#undef NAME

/* Alignment the kernels need of each pointer. */
static const unsigned char align_of[XCCL_DT_COUNT] = {
    [XCCL_DT_INT8] = 1, [XCCL_DT_UINT8] = 1, [XCCL_DT_INT16] = 2, [XCCL_DT_UINT16] = 2,
    [XCCL_DT_INT32] = 4, [XCCL_DT_UINT32] = 4, [XCCL_DT_INT64] = 8, [XCCL_DT_UINT64] = 8,
    [XCCL_DT_FLOAT] = _Alignof(float), [XCCL_DT_DOUBLE] = _Alignof(double),
    [XCCL_DT_FLOAT_COMPLEX] = _Alignof(xccl_gpu_cfloat_t),
    [XCCL_DT_DOUBLE_COMPLEX] = _Alignof(xccl_gpu_cdouble_t),
    [XCCL_DT_BOOL] = 1, [XCCL_DT_BYTE] = 1,
    [XCCL_DT_FLOAT_INT] = _Alignof(xccl_gpu_float_int_t),
    [XCCL_DT_DOUBLE_INT] = _Alignof(xccl_gpu_double_int_t),
    [XCCL_DT_LONG_INT] = _Alignof(xccl_gpu_long_int_t),
    [XCCL_DT_2INT] = _Alignof(xccl_gpu_2int_t),
    [XCCL_DT_SHORT_INT] = _Alignof(xccl_gpu_short_int_t),
    [XCCL_DT_2FLOAT] = _Alignof(xccl_gpu_2float_t),
    [XCCL_DT_2DOUBLE] = _Alignof(xccl_gpu_2double_t),
};

#define BLOCK 256              /* threads per block (the kernels' launch bound) */
#define BLOCKS_PER_SM 8        /* grid cap: the kernels loop over the rest */

/* One CUDA context's module. */
typedef struct ctx_entry {
    xccl_cucontext_t ctx;
    unsigned long long id;     /* cuCtxGetId, where the driver has it */
    xccl_cumodule_t mod;       /* NULL: did not load, err says why */
    char err[200];
    unsigned max_blocks;
    xccl_cufunction_t fn[XCCL_DT_COUNT][XCCL_OP_COUNT];
    xccl_cufunction_t copy_fn;         /* xccl_copy_batch */
    struct ctx_entry *next;
} ctx_entry_t;

static struct {
    pthread_mutex_t lock;
    void *handle;              /* our own reference to libcuda.so.1 */
    const char *missing;       /* a required entry point it lacks (sticky) */
    xccl_curesult_t (*ModuleLoadData)(xccl_cumodule_t *mod, const void *image);
    xccl_curesult_t (*ModuleGetFunction)(xccl_cufunction_t *fn, xccl_cumodule_t mod, const char *name);
    xccl_curesult_t (*ModuleUnload)(xccl_cumodule_t mod);
    xccl_curesult_t (*LaunchKernel)(xccl_cufunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shared_bytes, xccl_custream_t stream,
                                    void **params, void **extra);
    xccl_curesult_t (*DeviceGetAttribute)(int *value, int attribute, xccl_cudevice_t dev);
    xccl_curesult_t (*CtxGetId)(xccl_cucontext_t ctx, unsigned long long *id);   /* optional (CUDA 12) */
    ctx_entry_t *ctxs;
} drv = { .lock = PTHREAD_MUTEX_INITIALIZER };

int xccl_gpu_reduce_supported(xccl_dtype_t dt, xccl_op_t op)
{
    return (unsigned) dt < XCCL_DT_COUNT && (unsigned) op < XCCL_OP_COUNT && NULL != names[dt][op];
}

const char *xccl_gpu_reduce_kernel_name(xccl_dtype_t dt, xccl_op_t op)
{
    return xccl_gpu_reduce_supported(dt, op) ? names[dt][op] : NULL;
}

size_t xccl_gpu_reduce_align(xccl_dtype_t dt)
{
    return (unsigned) dt < XCCL_DT_COUNT && align_of[dt] ? align_of[dt] : 1;
}

const char *xccl_gpu_kernels_status(void)
{
    return "CUDA kernels for " XCCL_GPU_KERNEL_ARCHS;
}

/* Under the lock: the entry points, or NULL and *err. */
static int driver_locked(const xccl_cu_api_t **cu, const char **err)
{
    if (NULL == (*cu = xccl_cu())) {
        *err = "no CUDA driver loaded";
        return -1;
    }
    if (drv.missing) {
        *err = drv.missing;
        return -1;
    }
    if (drv.handle) {
        return 0;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == h) {
        *err = "no CUDA driver loaded";
        return -1;
    }
    static const struct {
        const char *sym, *missing;
        size_t off;
    } need[] = {
#define NEED(m, s) { s, "libcuda.so.1 has no " s, offsetof(__typeof__(drv), m) }
        NEED(ModuleLoadData, "cuModuleLoadData"),
        NEED(ModuleGetFunction, "cuModuleGetFunction"),
        NEED(ModuleUnload, "cuModuleUnload"),
        NEED(LaunchKernel, "cuLaunchKernel"),
        NEED(DeviceGetAttribute, "cuDeviceGetAttribute"),
#undef NEED
    };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        void *f = dlsym(h, need[i].sym);
        if (NULL == f) {
            dlclose(h);
            *err = drv.missing = need[i].missing;
            return -1;
        }
        memcpy((char *) &drv + need[i].off, &f, sizeof(f));
    }
    void *get_id = dlsym(h, "cuCtxGetId");
    memcpy(&drv.CtxGetId, &get_id, sizeof(get_id));
    drv.handle = h;
    return 0;
}

/* Under the lock: the current context's entry (its module loaded, or the
 * reason it is not), or NULL and *err. */
static ctx_entry_t *context_locked(const char **err)
{
    const xccl_cu_api_t *cu;
    if (driver_locked(&cu, err)) {
        return NULL;
    }
    xccl_cucontext_t ctx = NULL;
    xccl_curesult_t rc = cu->CtxGetCurrent(&ctx);
    if (XCCL_CUDA_SUCCESS != rc || NULL == ctx) {
        *err = "no current CUDA context";
        return NULL;
    }
    unsigned long long id = 0;
    if (drv.CtxGetId && XCCL_CUDA_SUCCESS != drv.CtxGetId(ctx, &id)) {
        id = 0;
    }
    ctx_entry_t *e;
    for (e = drv.ctxs; e; e = e->next) {
        if (e->ctx == ctx) {
            break;
        }
    }
    if (e && e->id == id) {
        return e;
    }
    if (NULL == e) {
        if (NULL == (e = calloc(1, sizeof(*e)))) {
            *err = "out of memory";
            return NULL;
        }
        e->next = drv.ctxs;
        drv.ctxs = e;
    } else {
        /* The same handle, another context (the first was destroyed, with
         * its module): start over. */
        ctx_entry_t *next = e->next;
        memset(e, 0, sizeof(*e));
        e->next = next;
    }
    e->ctx = ctx;
    e->id = id;
    rc = drv.ModuleLoadData(&e->mod, xccl_gpu_fatbin);
    if (XCCL_CUDA_SUCCESS != rc) {
        e->mod = NULL;
        snprintf(e->err, sizeof(e->err), "%s (no kernel image for this device?)",
                 xccl_cu_error("cuModuleLoadData", rc));
    }
    xccl_cudevice_t dev;
    int sms = 0;
    if (XCCL_CUDA_SUCCESS != cu->CtxGetDevice(&dev) ||
        XCCL_CUDA_SUCCESS != drv.DeviceGetAttribute(&sms, XCCL_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) ||
        sms <= 0) {
        sms = 128;
    }
    e->max_blocks = (unsigned) sms * BLOCKS_PER_SM;
    return e;
}

int xccl_gpu_kernels_load(const char **err)
{
    pthread_mutex_lock(&drv.lock);
    ctx_entry_t *e = context_locked(err);
    int rc = 0;
    if (NULL == e) {
        rc = -1;
    } else if (NULL == e->mod) {
        *err = e->err;
        rc = -1;
    }
    pthread_mutex_unlock(&drv.lock);
    return rc;
}

/* The function of (dt, op) in the current context, or NULL and *err. */
static xccl_cufunction_t function(xccl_dtype_t dt, xccl_op_t op, unsigned *max_blocks, const char **err)
{
    xccl_cufunction_t f = NULL;
    pthread_mutex_lock(&drv.lock);
    ctx_entry_t *e = context_locked(err);
    if (NULL == e) {
        goto out;
    }
    if (NULL == e->mod) {
        *err = e->err;
        goto out;
    }
    if (NULL == e->fn[dt][op]) {
        xccl_curesult_t rc = drv.ModuleGetFunction(&e->fn[dt][op], e->mod, names[dt][op]);
        if (XCCL_CUDA_SUCCESS != rc) {
            e->fn[dt][op] = NULL;
            *err = "cuModuleGetFunction failed: the fatbin lacks a kernel";
            goto out;
        }
    }
    f = e->fn[dt][op];
    *max_blocks = e->max_blocks;
out:
    pthread_mutex_unlock(&drv.lock);
    return f;
}

int xccl_gpu_reduce(xccl_dtype_t dt, xccl_op_t op, void *dst, const void *const *srcs, int nsrc,
                    size_t count, xccl_custream_t stream, const char **err)
{
    if (!xccl_gpu_reduce_supported(dt, op)) {
        *err = (unsigned) dt < XCCL_DT_COUNT && (unsigned) op < XCCL_OP_COUNT && xccl_reduce_kernel(dt, op)
                   ? "no GPU kernel for this type and op (long double)"
                   : "no such type and op pair";
        return -1;
    }
    if (nsrc < 1 || NULL == srcs) {
        *err = "no sources";
        return -1;
    }
    if (0 == count) {
        return 0;
    }
    const size_t size = xccl_dtype_size(dt);
    if (count > (size_t) INT64_MAX / size) {
        *err = "count too large";
        return -1;
    }
    const uintptr_t amask = xccl_gpu_reduce_align(dt) - 1;
    if (NULL == dst || ((uintptr_t) dst & amask)) {
        *err = NULL == dst ? "no destination" : "destination not aligned to its element type";
        return -1;
    }
    for (int k = 0; k < nsrc; k++) {
        if (NULL == srcs[k] || ((uintptr_t) srcs[k] & amask)) {
            *err = NULL == srcs[k] ? "a source is NULL" : "a source is not aligned to its element type";
            return -1;
        }
        if (k >= XCCL_GPU_MAX_SRCS && srcs[k] == dst) {
            /* the first launch would overwrite it before it is read */
            *err = "destination is a source beyond the first XCCL_GPU_MAX_SRCS";
            return -1;
        }
    }

    unsigned max_blocks = 0;
    xccl_cufunction_t f = function(dt, op, &max_blocks, err);
    if (NULL == f) {
        return -1;
    }
    /* A thread moves 16 bytes of each source per iteration (when aligned). */
    const unsigned long long units = (count * size + 15) / 16;
    unsigned long long blocks = (units + BLOCK - 1) / BLOCK;
    if (blocks > max_blocks) {
        blocks = max_blocks;
    }

    /* Launch 1: sources 0..15; launch j > 1: dst and the next 15. */
    void *dst_arg = dst;
    xccl_gpu_srcs_t s;
    int n;
    unsigned long long count_arg = count;
    void *params[] = { &dst_arg, &s, &n, &count_arg };
    int next = 0;
    while (next < nsrc) {
        memset(&s, 0, sizeof(s));
        n = 0;
        if (next > 0) {
            s.p[n++] = (unsigned long long) (uintptr_t) dst;
        }
        while (n < XCCL_GPU_MAX_SRCS && next < nsrc) {
            s.p[n++] = (unsigned long long) (uintptr_t) srcs[next++];
        }
        xccl_curesult_t rc = drv.LaunchKernel(f, (unsigned) blocks, 1, 1, BLOCK, 1, 1, 0, stream, params, NULL);
        if (XCCL_CUDA_SUCCESS != rc) {
            *err = xccl_cu_error("cuLaunchKernel", rc);
            return -1;
        }
    }
    return 0;
}

int xccl_gpu_copy_batch(const xccl_gpu_copies_t *c, xccl_custream_t stream, const char **err)
{
    unsigned long long units = 0;
    if (NULL == c || c->n < 1 || c->n > XCCL_GPU_MAX_COPIES) {
        *err = "no copies, or too many";
        return -1;
    }
    for (int e = 0; e < c->n; e++) {
        if (0 == c->dst[e] || 0 == c->src[e]) {
            *err = "a copy without source or destination";
            return -1;
        }
        units += (c->len[e] + 15) / 16;
    }
    xccl_cufunction_t f = NULL;
    unsigned max_blocks = 0;
    pthread_mutex_lock(&drv.lock);
    ctx_entry_t *e = context_locked(err);
    if (NULL != e && NULL == e->mod) {
        *err = e->err;
    } else if (NULL != e) {
        if (NULL == e->copy_fn &&
            XCCL_CUDA_SUCCESS != drv.ModuleGetFunction(&e->copy_fn, e->mod, "xccl_copy_batch")) {
            e->copy_fn = NULL;
            *err = "cuModuleGetFunction failed: the fatbin lacks xccl_copy_batch";
        }
        f = e->copy_fn;
        max_blocks = e->max_blocks;
    }
    pthread_mutex_unlock(&drv.lock);
    if (NULL == f) {
        return -1;
    }
    unsigned long long blocks = (units + BLOCK - 1) / BLOCK;
    blocks = blocks < 1 ? 1 : blocks > max_blocks ? max_blocks : blocks;
    xccl_gpu_copies_t arg = *c;
    void *params[] = { &arg };
    xccl_curesult_t rc = drv.LaunchKernel(f, (unsigned) blocks, 1, 1, BLOCK, 1, 1, 0, stream, params, NULL);
    if (XCCL_CUDA_SUCCESS != rc) {
        *err = xccl_cu_error("cuLaunchKernel", rc);
        return -1;
    }
    return 0;
}

void xccl_gpu_kernels_release(void)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cucontext_t ctx = NULL;
    if (NULL == cu || XCCL_CUDA_SUCCESS != cu->CtxGetCurrent(&ctx) || NULL == ctx) {
        return;
    }
    pthread_mutex_lock(&drv.lock);
    for (ctx_entry_t **p = &drv.ctxs; *p; p = &(*p)->next) {
        ctx_entry_t *e = *p;
        if (e->ctx == ctx) {
            unsigned long long id = 0;
            if (drv.CtxGetId && XCCL_CUDA_SUCCESS != drv.CtxGetId(ctx, &id)) {
                id = 0;
            }
            if (e->mod && e->id == id) {
                drv.ModuleUnload(e->mod);
            }
            *p = e->next;
            free(e);
            break;
        }
    }
    pthread_mutex_unlock(&drv.lock);
}

void xccl_gpu_kernels_fini(void)
{
    pthread_mutex_lock(&drv.lock);
    while (drv.ctxs) {
        ctx_entry_t *e = drv.ctxs;
        drv.ctxs = e->next;
        free(e);
    }
    if (drv.handle) {
        dlclose(drv.handle);
    }
    drv.handle = NULL;
    drv.missing = NULL;
    pthread_mutex_unlock(&drv.lock);
}

#endif /* XCCL_HAVE_GPU_KERNELS */
