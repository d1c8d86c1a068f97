/* Caches of CUDA IPC handles (xccl_ipc_cache.h). */
#include "xccl_ipc_cache.h"

#include <stdlib.h>
#include <string.h>

void xccl_ipc_cache_init(xccl_ipc_cache_t *c, int keep,
                         char *(*open)(void *, const xccl_cuipc_handle_t *, void *),
                         void (*close)(void *, char *, void *), void *cbctx)
{
    memset(c, 0, sizeof(*c));
    c->keep = keep > 0 ? keep : 1;
    c->open = open;
    c->close = close;
    c->cbctx = cbctx;
}

void xccl_ipc_cache_begin(xccl_ipc_cache_t *c)
{
    c->call_start = ++c->clock;
}

char *xccl_ipc_cache_get(xccl_ipc_cache_t *c, int peer, unsigned long long buffer_id,
                         const xccl_cuipc_handle_t *handle, void *ctx)
{
    xccl_ipc_map_t *e = NULL, *oldest = NULL;
    for (int i = 0; i < c->n; i++) {
        xccl_ipc_map_t *x = &c->map[i];
        if (x->peer == peer && x->buffer_id == buffer_id && x->ctx == ctx &&
            0 == memcmp(&x->handle, handle, sizeof(*handle))) {
            e = x;
            break;
        }
        if (x->used < c->call_start && (NULL == oldest || x->used < oldest->used)) {
            oldest = x;        /* not used by this call: may go */
        }
    }
    if (NULL == e) {
        char *p = c->open(c->cbctx, handle, ctx);
        if (NULL == p) {
            return NULL;
        }
        if (c->n >= c->keep && NULL != oldest) {
            c->close(c->cbctx, oldest->ptr, oldest->ctx);
            e = oldest;
        } else {
            if (c->n == c->cap) {
                int cap = c->cap ? 2 * c->cap : c->keep;
                xccl_ipc_map_t *m = realloc(c->map, (size_t) cap * sizeof(*m));
                if (NULL == m) {
                    c->close(c->cbctx, p, ctx);
                    return NULL;
                }
                c->map = m;
                c->cap = cap;
            }
            e = &c->map[c->n++];
        }
        e->handle = *handle;
        e->buffer_id = buffer_id;
        e->peer = peer;
        e->ctx = ctx;
        e->ptr = p;
    }
    e->used = ++c->clock;
    return e->ptr;
}

void xccl_ipc_cache_fini(xccl_ipc_cache_t *c)
{
    for (int i = 0; i < c->n; i++) {
        c->close(c->cbctx, c->map[i].ptr, c->map[i].ctx);
    }
    free(c->map);
    c->map = NULL;
    c->n = c->cap = 0;
}

const xccl_cuipc_handle_t *xccl_ipc_exports_find(const xccl_ipc_exports_t *x, const void *base,
                                                 unsigned long long buffer_id)
{
    for (int i = 0; i < x->n; i++) {
        if (x->e[i].base == base && x->e[i].buffer_id == buffer_id) {
            return &x->e[i].handle;
        }
    }
    return NULL;
}

void xccl_ipc_exports_add(xccl_ipc_exports_t *x, const void *base, unsigned long long buffer_id,
                          const xccl_cuipc_handle_t *handle)
{
    int i = x->n < XCCL_IPC_EXPORTS ? x->n++ : x->next;
    x->next = (i + 1) % XCCL_IPC_EXPORTS;
    x->e[i].base = base;
    x->e[i].buffer_id = buffer_id;
    x->e[i].handle = *handle;
}
