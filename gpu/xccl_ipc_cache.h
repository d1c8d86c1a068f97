/*
 * Caches of CUDA IPC handles, pure logic (the driver calls are callbacks),
 * so that they are unit-tested without a GPU (test/gpu/test_ipc_cache.c).
 *
 * Mappings of peers' buffers: an allocation is known by its exporter's
 * buffer id, which the driver never reuses, so a buffer freed and
 * allocated again (even at the same address) is a new entry; the stale
 * mapping is closed when it ages out, or with the cache.  Least recently
 * used entries go first once more than `keep` are open, but never one used
 * in the current call (xccl_ipc_cache_begin): a call that needs more
 * mappings than `keep` grows the cache instead.
 *
 * Exports of this process's own buffers (cuIpcGetMemHandle is a driver call
 * per buffer: once per allocation is enough): a few, replaced in turn.
 */
#ifndef XCCL_IPC_CACHE_H
#define XCCL_IPC_CACHE_H

#include "xccl_cuda.h"

typedef struct {
    xccl_cuipc_handle_t handle;
    unsigned long long buffer_id;
    int peer;
    void *ctx;                 /* the context it is mapped in */
    char *ptr;                 /* mapped allocation base */
    unsigned long long used;   /* clock of its last use */
} xccl_ipc_map_t;

typedef struct {
    /* Map handle in ctx: the base address, or NULL (nothing to close). */
    char *(*open)(void *cbctx, const xccl_cuipc_handle_t *handle, void *ctx);
    void (*close)(void *cbctx, char *ptr, void *ctx);
    void *cbctx;
    int keep;                  /* open mappings kept between calls */
    xccl_ipc_map_t *map;
    int n, cap;
    unsigned long long clock, call_start;
} xccl_ipc_cache_t;

void xccl_ipc_cache_init(xccl_ipc_cache_t *c, int keep,
                         char *(*open)(void *, const xccl_cuipc_handle_t *, void *),
                         void (*close)(void *, char *, void *), void *cbctx);
/* A new call begins: what it uses stays mapped until it ends. */
void xccl_ipc_cache_begin(xccl_ipc_cache_t *c);
/* The base of peer's allocation buffer_id (handle) mapped in ctx, opened
 * now or earlier; NULL when it does not open (or out of memory). */
char *xccl_ipc_cache_get(xccl_ipc_cache_t *c, int peer, unsigned long long buffer_id,
                         const xccl_cuipc_handle_t *handle, void *ctx);
/* Closes every mapping. */
void xccl_ipc_cache_fini(xccl_ipc_cache_t *c);

#define XCCL_IPC_EXPORTS 8

typedef struct {
    struct {
        const void *base;
        unsigned long long buffer_id;
        xccl_cuipc_handle_t handle;
    } e[XCCL_IPC_EXPORTS];
    int n, next;
} xccl_ipc_exports_t;

/* The handle exported for allocation (base, buffer_id), or NULL. */
const xccl_cuipc_handle_t *xccl_ipc_exports_find(const xccl_ipc_exports_t *x, const void *base,
                                                 unsigned long long buffer_id);
void xccl_ipc_exports_add(xccl_ipc_exports_t *x, const void *base, unsigned long long buffer_id,
                          const xccl_cuipc_handle_t *handle);

#endif
