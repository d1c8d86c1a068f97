/*
 * CUDA IPC inside a node: every rank reads its peers' device buffers.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/op/op.h"

#include "coll_xccl_gpu.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"
#include "gpu/xccl_ipc_cache.h"

/* ------------------------------------------------------------ CUDA IPC inside a node */

/* The peers' buffers this process has mapped and its own exported handles
 * (gpu/xccl_ipc_cache.h): at least 32 mappings kept between calls. */
#define XCCL_IPC_MAPS 32

struct mca_coll_xccl_ipc {
    xccl_ipc_cache_t maps;
    xccl_ipc_exports_t exports;
};

/* One exported buffer. */
typedef struct {
    xccl_cuipc_handle_t handle;
    uint64_t buffer_id, offset;
    int32_t valid, pad;
} ipc_buf_t;

/* What each rank sends the others: whether it can take part, and up to two
 * buffers its peers read (0: input, 1: output). */
typedef struct {
    ipc_buf_t buf[2];
    int32_t ok, pad;
} ipc_rec_t;

/* The state of one call on this rank. */
typedef struct {
    mca_coll_xccl_module_t *m;
    struct ompi_communicator_t *comm;
    xccl_coll_t coll;
    const xccl_cu_api_t *cu;
    void *ctx;                       /* the context of this rank's device buffers */
    ipc_rec_t mine, *recs;
    char **peer[2];                  /* peers' buffers, mapped (NULL: not needed) */
    xccl_gpu_set_t *set;             /* its stream */
    const char *error;
} ipc_call_t;

static char *ipc_open(void *cbctx, const xccl_cuipc_handle_t *handle, void *ctx)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cudeviceptr_t p = 0;
    (void) cbctx, (void) ctx;  /* ctx is current (the caller pushed it) */
    if (XCCL_CUDA_SUCCESS != cu->IpcOpenMemHandle(&p, *handle,
                                                   XCCL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
        return NULL;
    }
    return (char *) (uintptr_t) p;
}

static void ipc_close(void *cbctx, char *ptr, void *ctx)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cucontext_t popped;
    (void) cbctx;
    if (NULL != cu && XCCL_CUDA_SUCCESS == cu->CtxPushCurrent((xccl_cucontext_t) ctx)) {
        cu->IpcCloseMemHandle((xccl_cudeviceptr_t) (uintptr_t) ptr);
        cu->CtxPopCurrent(&popped);
    }
}

/* The module's caches, created on first use. */
static struct mca_coll_xccl_ipc *ipc_state(mca_coll_xccl_module_t *m)
{
    if (NULL == m->ipc && NULL != (m->ipc = calloc(1, sizeof(*m->ipc)))) {
        xccl_ipc_cache_init(&m->ipc->maps, XCCL_IPC_MAPS, ipc_open, ipc_close, NULL);
    }
    return m->ipc;
}

/* The peer's buffer mapped here (current context ctx), or NULL. */
static char *map_peer(mca_coll_xccl_module_t *m, const ipc_buf_t *b, int peer, void *ctx)
{
    struct mca_coll_xccl_ipc *ipc = ipc_state(m);
    char *base = ipc ? xccl_ipc_cache_get(&ipc->maps, peer, b->buffer_id, &b->handle, ctx) : NULL;
    return base ? base + b->offset : NULL;
}

void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m)
{
    if (NULL != m->ipc) {
        xccl_ipc_cache_fini(&m->ipc->maps);
    }
    free(m->ipc);
    m->ipc = NULL;
}

/* This rank takes part if its device buffers dst and (when not NULL) exp
 * share one context (the caller checked the rest); exp is exported as
 * buffer k.  ctx: that context. */
static int export_buf(ipc_call_t *c, const void *p, int k)
{
    xccl_mem_info_t info;
    xccl_cucontext_t popped;
    xccl_gpu_classify(p, &info);
    if (XCCL_MEM_DEVICE != info.type || (NULL != c->ctx && info.ctx != c->ctx)) {
        return 0;
    }
    c->ctx = info.ctx;
    ipc_buf_t *b = &c->mine.buf[k];
    struct mca_coll_xccl_ipc *ipc = ipc_state(c->m);
    if (NULL == ipc) {
        return 0;
    }
    b->buffer_id = info.buffer_id;
    const xccl_cuipc_handle_t *known = xccl_ipc_exports_find(&ipc->exports, info.base,
                                                             info.buffer_id);
    if (known) {
        b->handle = *known;
        b->valid = 1;
    } else {
        if (XCCL_CUDA_SUCCESS != c->cu->CtxPushCurrent(info.ctx)) {
            return 0;
        }
        b->valid = XCCL_CUDA_SUCCESS ==
                   c->cu->IpcGetMemHandle(&b->handle, (xccl_cudeviceptr_t) (uintptr_t) info.base);
        c->cu->CtxPopCurrent(&popped);
        if (b->valid) {
            xccl_ipc_exports_add(&ipc->exports, info.base, info.buffer_id, &b->handle);
        }
    }
    b->offset = (uint64_t) ((const char *) p - (const char *) info.base);
    return b->valid;
}

static int agree(ipc_call_t *c, int ok, int *all)
{
    *all = ok;
    return c->m->prev.allreduce(MPI_IN_PLACE, all, 1, MPI_INT, MPI_MIN, c->comm,
                                c->m->prev.allreduce_module);
}

static void call_init(ipc_call_t *c, mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                      xccl_coll_t coll)
{
    memset(c, 0, sizeof(*c));
    c->m = m;
    c->comm = comm;
    c->coll = coll;
    c->cu = xccl_cu();
}

static void call_fini(ipc_call_t *c)
{
    free(c->recs);
    free(c->peer[0]);
    free(c->peer[1]);
}

/* Rounds 1 and 2: exchange the records, then map what this rank reads
 * (need[k][j]: buffer k of peer j), then agree.  *go on every rank alike. */
static int ipc_setup(ipc_call_t *c, int ok, int need_mask, int (*need)(ipc_call_t *, int k, int j),
                     int *go)
{
    mca_coll_xccl_module_t *m = c->m;
    const int P = m->size;
    int rc;
    *go = 0;
    c->mine.ok = ok;
    c->recs = malloc((size_t) P * sizeof(*c->recs));
    c->peer[0] = calloc((size_t) P, sizeof(char *));
    c->peer[1] = calloc((size_t) P, sizeof(char *));
    if (NULL == c->recs || NULL == c->peer[0] || NULL == c->peer[1]) {
        return mca_coll_xccl_error(m, c->coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory (ipc)");
    }
    rc = m->prev.allgather(&c->mine, sizeof(c->mine), MPI_BYTE, c->recs, sizeof(c->mine),
                           MPI_BYTE, c->comm, m->prev.allgather_module);
    if (MPI_SUCCESS != rc) {
        return mca_coll_xccl_error(m, c->coll, rc, "ipc exchange");
    }
    for (int j = 0; j < P; j++) {
        ok = ok && c->recs[j].ok;
    }
    if (ok && NULL != c->ctx && NULL == ipc_state(m)) {
        ok = 0;
    }
    if (ok && NULL != c->ctx) {
        xccl_cucontext_t popped;
        xccl_ipc_cache_begin(&m->ipc->maps);    /* this call's mappings stay */
        ok = XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx);
        for (int k = 0; ok && k < 2; k++) {
            for (int j = 0; ok && j < P; j++) {
                if ((need_mask & (1 << k)) && j != m->rank && need(c, k, j)) {
                    ok = c->recs[j].buf[k].valid &&
                         NULL != (c->peer[k][j] = map_peer(m, &c->recs[j].buf[k], j, c->ctx));
                }
            }
        }
        if (ok) {
            c->set = xccl_gpu_set_get((xccl_cucontext_t) c->ctx, 0,
                                      mca_coll_xccl_component.gpu_pool_bytes, &c->error);
            ok = NULL != c->set;
            c->error = NULL;
        }
        c->cu->CtxPopCurrent(&popped);
    }
    if (MPI_SUCCESS != (rc = agree(c, ok, go))) {
        *go = 0;
    }
    if (!*go && NULL != c->set) {
        xccl_gpu_set_put(c->set, 0);
        c->set = NULL;
    }
    return MPI_SUCCESS == rc ? MPI_SUCCESS : mca_coll_xccl_error(m, c->coll, rc, "ipc agreement");
}

/* Waits for this rank's work, then a barrier: no rank goes on (reusing its
 * buffers) while another still reads them.  A failed step still reaches
 * the barrier, so that no rank waits forever. */
static int ipc_step_end(ipc_call_t *c)
{
    if (NULL == c->error && NULL != c->set) {
        xccl_cucontext_t popped;
        if (XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx)) {
            c->error = mca_coll_xccl_gpu_sync(c->cu, c->set->in);
            c->cu->CtxPopCurrent(&popped);
        } else {
            c->error = "cuCtxPushCurrent failed";
        }
    }
    return c->comm->c_coll->coll_barrier(c->comm, c->comm->c_coll->coll_barrier_module);
}

static int ipc_finish(ipc_call_t *c, int rc, size_t bytes)
{
    mca_coll_xccl_module_t *m = c->m;
    if (NULL != c->set) {
        xccl_cucontext_t popped;
        int pushed = XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx);
        xccl_gpu_set_put(c->set, NULL != c->error);
        if (pushed) {
            c->cu->CtxPopCurrent(&popped);
        }
    }
    call_fini(c);
    if (c->error) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, c->error);
    }
    if (MPI_SUCCESS != rc) {
        return mca_coll_xccl_error(m, c->coll, rc, "barrier after cuda ipc");
    }
    mca_coll_xccl_log(1, "%s comm=%u rank=%d bytes=%zu algo=cuda_ipc size=%d",
                      xccl_coll_name(c->coll), m->cid, m->world_rank, bytes, m->size);
    return MPI_SUCCESS;
}

/* Enqueues a device-to-device copy on the call's stream (its context current). */
static void ipc_copy(ipc_call_t *c, void *dst, const void *src, size_t n)
{
    if (NULL == c->error && n && dst != src) {
        c->error = mca_coll_xccl_gpu_copy(c->cu, dst, src, n, c->set->in);
    }
}

/* ---- allgather, alltoall, bcast: every rank reads what it needs */

typedef struct {
    ipc_call_t c;
    int root;
    size_t block;
} move_call_t;

/* Where this rank reads from peer j: offset in j's exported buffer and in
 * its own dst, and how many bytes (0: nothing from j). */
static size_t pull(xccl_coll_t coll, int me, int j, int root, size_t block, size_t *src_off,
                   size_t *dst_off)
{
    *src_off = 0;
    *dst_off = (size_t) j * block;
    switch (coll) {
    case XCCL_COLL_ALLGATHER:
        return block;
    case XCCL_COLL_ALLTOALL:
        *src_off = (size_t) me * block;
        return block;
    default:                          /* bcast */
        *dst_off = 0;
        return j == root && me != root ? block : 0;
    }
}

static int move_needs(ipc_call_t *c, int k, int j)
{
    move_call_t *mc = (move_call_t *) c;
    size_t so, dof;
    (void) k;
    return 0 != pull(c->coll, c->m->rank, j, mc->root, mc->block, &so, &dof);
}

static int ipc_move(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                          xccl_coll_t coll, const void *exp, void *dst, size_t block, int root,
                          int contig, int *done)
{
    move_call_t mc = { .root = root, .block = block };
    ipc_call_t *c = &mc.c;
    call_init(c, m, comm, coll);
    const int P = m->size, me = m->rank;
    const int needs_dst = XCCL_COLL_BCAST != coll || me != root;
    int go, rc;

    *done = 0;
    int ok = NULL != c->cu && contig;
    if (ok && needs_dst) {
        xccl_mem_info_t di;
        xccl_gpu_classify(dst, &di);
        ok = XCCL_MEM_DEVICE == di.type;
        c->ctx = di.ctx;
    }
    if (ok && NULL != exp) {
        ok = export_buf(c, exp, 0);
    }
    rc = ipc_setup(c, ok, 1, move_needs, &go);
    if (MPI_SUCCESS != rc || !go) {
        call_fini(c);
        return rc;
    }

    /* Every rank takes this path now. */
    *done = 1;
    if (needs_dst) {
        xccl_cucontext_t popped;
        if (XCCL_CUDA_SUCCESS != c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx)) {
            c->error = "cuCtxPushCurrent failed";
        } else {
            for (int j = 0; j < P; j++) {
                size_t so, dof, n = pull(coll, me, j, root, block, &so, &dof);
                const char *from = j == me ? (const char *) exp : c->peer[0][j];
                if (n) {
                    ipc_copy(c, (char *) dst + dof, from + so, n);
                }
            }
            c->cu->CtxPopCurrent(&popped);
        }
    }
    rc = ipc_step_end(c);
    return ipc_finish(c, rc, XCCL_COLL_BCAST == coll ? block : block * (size_t) P);
}

/* ---- allreduce, reduce_scatter_block: each rank reduces its slice from all */

typedef struct {
    ipc_call_t c;
    int allreduce;
} red_call_t;

static int red_needs(ipc_call_t *c, int k, int j)
{
    (void) j;
    return 0 == k || ((red_call_t *) c)->allreduce;
}

static int ipc_reduce(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                                 xccl_coll_t coll, const void *src, void *dst, const size_t *counts,
                                 size_t es, int gpu_dt, int gpu_op, int ok, int *done)
{
    red_call_t rcall = { .allreduce = XCCL_COLL_ALLREDUCE == coll };
    ipc_call_t *c = &rcall.c;
    call_init(c, m, comm, coll);
    const int P = m->size, me = m->rank;
    int go, rc;
    size_t displ = 0, total = 0;

    *done = 0;
    ok = ok && NULL != c->cu && P <= XCCL_GPU_MAX_SRCS &&
         xccl_gpu_reduce_supported((xccl_dtype_t) gpu_dt, (xccl_op_t) gpu_op);
    ok = ok && export_buf(c, src, 0);
    if (ok && rcall.allreduce) {
        ok = export_buf(c, dst, 1);
    } else if (ok) {
        xccl_mem_info_t di;
        xccl_gpu_classify(dst, &di);
        ok = XCCL_MEM_DEVICE == di.type && di.ctx == c->ctx;
    }
    if (ok) {
        /* The kernels load into this context (once), or this rank is out. */
        xccl_cucontext_t popped;
        const char *why = NULL;
        ok = XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx);
        if (ok) {
            ok = 0 == xccl_gpu_kernels_load(&why);
            c->cu->CtxPopCurrent(&popped);
        }
        if (!ok) {
            mca_coll_xccl_log(2, "%s comm=%u rank=%d: no cuda ipc reduction: %s",
                              xccl_coll_name(coll), m->cid, m->world_rank,
                              why ? why : "cuCtxPushCurrent failed");
        }
    }
    rc = ipc_setup(c, ok, rcall.allreduce ? 3 : 1, red_needs, &go);
    if (MPI_SUCCESS != rc || !go) {
        call_fini(c);
        return rc;
    }

    *done = 1;
    for (int j = 0; j < P; j++) {
        displ += j < me ? counts[j] : 0;
        total += counts[j];
    }
    xccl_cucontext_t popped;
    const int pushed = XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx);
    if (!pushed) {
        c->error = "cuCtxPushCurrent failed";
    }
    /* Phase 1: my slice, folded over the ranks in rank order (the same bits
     * wherever it is read later). */
    if (NULL == c->error && counts[me]) {
        const void *srcs[XCCL_GPU_MAX_SRCS];
        for (int j = 0; j < P; j++) {
            srcs[j] = (j == me ? (const char *) src : c->peer[0][j]) + displ * es;
        }
        char *out = (char *) dst + (rcall.allreduce ? displ * es : 0);
        if (0 != xccl_gpu_reduce((xccl_dtype_t) gpu_dt, (xccl_op_t) gpu_op, out, srcs, P,
                                 counts[me], c->set->in, &c->error)) {
            c->error = c->error ? c->error : "xccl_gpu_reduce failed";
        }
    }
    if (pushed) {
        c->cu->CtxPopCurrent(&popped);
    }
    rc = ipc_step_end(c);
    /* Phase 2 (allreduce): the other slices from their owners. */
    if (rcall.allreduce && MPI_SUCCESS == rc) {
        if (XCCL_CUDA_SUCCESS == c->cu->CtxPushCurrent((xccl_cucontext_t) c->ctx)) {
            size_t off = 0;
            for (int j = 0; j < P; j++) {
                if (j != me) {
                    ipc_copy(c, (char *) dst + off * es, c->peer[1][j] + off * es, counts[j] * es);
                }
                off += counts[j];
            }
            c->cu->CtxPopCurrent(&popped);
        } else if (NULL == c->error) {
            c->error = "cuCtxPushCurrent failed";
        }
        rc = ipc_step_end(c);
    }
    return ipc_finish(c, rc, total * es);
}

int mca_coll_xccl_gpu_ipc_wanted(const mca_coll_xccl_call_t *c)
{
    const size_t min = mca_coll_xccl_component.gpu_ipc_bytes;
    return NULL == c->request && min > 0 && c->bytes >= min && c->m->size >= 2 &&
           !(c->in_place && c->coll != XCCL_COLL_ALLREDUCE && c->coll != XCCL_COLL_ALLGATHER) &&
           !(c->reduction && c->m->size > XCCL_GPU_MAX_SRCS);
}

int mca_coll_xccl_gpu_ipc_run(mca_coll_xccl_call_t *c, int *done)
{
    mca_coll_xccl_module_t *m = c->m;
    const size_t P = (size_t) m->size;
    *done = 0;
    if (c->reduction) {
        size_t *slices = NULL;
        if (NULL == c->args.counts) {
            if (NULL == (slices = malloc(P * sizeof(size_t)))) {
                return mca_coll_xccl_error(m, c->coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
            }
            for (size_t j = 0; j < P; j++) {
                slices[j] = c->total / P + (j < c->total % P);
            }
        }
        xccl_dtype_t xdt = XCCL_DT_BYTE;
        xccl_op_t xop = XCCL_OP_SUM;
        int ok = ompi_op_is_intrinsic(c->op) && 0 == mca_coll_xccl_map_dtype(c->rdtype, &xdt) &&
                 0 == mca_coll_xccl_map_op(c->op, &xop);
        char *r = (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
        const char *s = c->in_place ? r : (const char *) c->sbuf + mca_coll_xccl_true_lb(c->rdtype);
        int rc = ipc_reduce(m, m->comm, c->coll, s, r, c->args.counts ? c->args.counts : slices,
                            mca_coll_xccl_dtype_extent(c->rdtype), (int) xdt, (int) xop, ok, done);
        free(slices);
        return rc;
    }
    if (XCCL_COLL_BCAST == c->coll) {
        char *b = (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
        return ipc_move(m, m->comm, c->coll, m->rank == c->root ? b : NULL, b, c->bytes, c->root,
                        mca_coll_xccl_is_contiguous(c->rdtype, c->rn), done);
    }
    const size_t block = c->args.block;
    char *r = (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
    const char *exp = c->in_place ? r + (size_t) m->rank * block
                                  : (const char *) c->sbuf + mca_coll_xccl_true_lb(c->sdtype);
    int contig = mca_coll_xccl_is_contiguous(c->rdtype, c->rn) &&
                 (c->in_place || mca_coll_xccl_is_contiguous(c->sdtype, c->sn));
    return ipc_move(m, m->comm, c->coll, exp, r, block, -1, contig, done);
}
