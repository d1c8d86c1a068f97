/*
 * Device buffers over a transport that moves host memory only (Debian's
 * UCX has no CUDA support): host copies of the buffers' spans, in pinned
 * memory of a staging set of the buffer's CUDA context.
 *
 * The call on the host copies is exactly the call a rank with host buffers
 * makes (same path, same algorithm, same schedule), so ranks may mix device
 * and host buffers.  A pipeline that overlaps the copies with the transfers
 * of one schedule (steps waiting for the copies of what they read, copies
 * out started after the last write of a piece) is the next step; it needs a
 * GPU to be measured.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <string.h>

#include "coll_xccl.h"
#include "gpu/xccl_gpu.h"

enum { TO_HOST, FROM_HOST, DEVICE_TO_DEVICE };

static const char *copy(const xccl_cu_api_t *cu, void *dst, const void *src, size_t bytes,
                        int dir, xccl_custream_t stream)
{
    xccl_cu_memcpy2d_t d;
    memset(&d, 0, sizeof(d));
    /* UNIFIED: the driver tells device, managed and host memory apart, so a
     * host buffer mixed with a device one works too. */
    if (DEVICE_TO_DEVICE == dir) {
        d.srcMemoryType = d.dstMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.srcDevice = (xccl_cudeviceptr_t) (uintptr_t) src;
        d.dstDevice = (xccl_cudeviceptr_t) (uintptr_t) dst;
    } else if (TO_HOST == dir) {
        d.srcMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.srcDevice = (xccl_cudeviceptr_t) (uintptr_t) src;
        d.dstMemoryType = XCCL_CU_MEMORYTYPE_HOST;
        d.dstHost = dst;
    } else {
        d.srcMemoryType = XCCL_CU_MEMORYTYPE_HOST;
        d.srcHost = src;
        d.dstMemoryType = XCCL_CU_MEMORYTYPE_UNIFIED;
        d.dstDevice = (xccl_cudeviceptr_t) (uintptr_t) dst;
    }
    d.srcPitch = d.dstPitch = d.WidthInBytes = bytes;
    d.Height = 1;
    xccl_curesult_t rc = cu->Memcpy2DAsync(&d, stream);
    return XCCL_CUDA_SUCCESS == rc ? NULL : xccl_cu_error("cuMemcpy2DAsync", rc);
}

static const char *sync_stream(const xccl_cu_api_t *cu, xccl_custream_t stream)
{
    xccl_curesult_t rc = cu->StreamSynchronize(stream);
    return XCCL_CUDA_SUCCESS == rc ? NULL : xccl_cu_error("cuStreamSynchronize", rc);
}

int mca_coll_xccl_gpu_stage_in(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                               mca_coll_xccl_gpu_stage_t *st, void *ctx, const void *sdev,
                               size_t sspan, void **hs, void *rdev, size_t rspan, int copy_r,
                               void **hr)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const size_t soff = (rspan + 63) & ~(size_t) 63;    /* RECV first, SEND 64-byte aligned */
    const char *error = NULL;
    xccl_cucontext_t popped;

    memset(st, 0, sizeof(*st));
    st->ctx = ctx;
    if (NULL == cu) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "device buffer without a cuda driver");
    }
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) ctx)) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    st->set = xccl_gpu_set_get((xccl_cucontext_t) ctx, soff + sspan,
                               mca_coll_xccl_component.gpu_pool_bytes, &error);
    if (st->set) {
        char *host = st->set->host;
        *hr = host;
        *hs = host + soff;
        /* A blocking stream: after the application's work on the legacy
         * default stream.  Work on its own non-blocking streams must be
         * complete before the call, as with any CUDA-aware MPI. */
        if (sdev && sspan) {
            error = copy(cu, *hs, sdev, sspan, TO_HOST, st->set->in);
        }
        if (NULL == error && copy_r && rspan) {
            error = copy(cu, *hr, rdev, rspan, TO_HOST, st->set->in);
        }
        if (NULL == error) {
            error = sync_stream(cu, st->set->in);
        }
        if (error) {
            xccl_gpu_set_put(st->set, 1);
            st->set = NULL;
        }
    }
    cu->CtxPopCurrent(&popped);
    return error ? mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error) : MPI_SUCCESS;
}

int mca_coll_xccl_gpu_stage_out(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                mca_coll_xccl_gpu_stage_t *st, void *rdev, size_t rspan,
                                int copy_out)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const char *error = NULL;
    xccl_cucontext_t popped;
    if (NULL == st->set) {
        return MPI_SUCCESS;
    }
    if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) st->ctx)) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    if (copy_out && rspan) {
        error = copy(cu, rdev, st->set->host, rspan, FROM_HOST, st->set->out);
        if (NULL == error) {
            error = sync_stream(cu, st->set->out);
        }
    }
    xccl_gpu_set_put(st->set, NULL != error);
    st->set = NULL;
    cu->CtxPopCurrent(&popped);
    return error ? mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error) : MPI_SUCCESS;
}

/* ------------------------------------------------------------ CUDA IPC inside a node */

/* Peers' buffers this process has mapped, least recently used replaced.
 * An allocation is known by its exporter's buffer id, which the driver
 * never reuses: a buffer freed and allocated again (even at the same
 * address) is a new entry, and the stale mapping is closed when it ages
 * out (or with the communicator). */
#define XCCL_IPC_MAPS 32

typedef struct {
    xccl_cuipc_handle_t handle;
    unsigned long long buffer_id;
    int peer;
    char *ptr;                       /* mapped allocation base */
    void *ctx;                       /* context it is mapped in */
    unsigned long long used;
} ipc_map_t;

struct mca_coll_xccl_ipc {
    ipc_map_t map[XCCL_IPC_MAPS];
    int n;
    unsigned long long clock;
};

/* What each rank sends the others. */
typedef struct {
    xccl_cuipc_handle_t handle;
    uint64_t buffer_id, offset;
    int32_t ok, exports;
} ipc_rec_t;

static void unmap(const xccl_cu_api_t *cu, ipc_map_t *e)
{
    xccl_cucontext_t popped;
    if (XCCL_CUDA_SUCCESS == cu->CtxPushCurrent((xccl_cucontext_t) e->ctx)) {
        cu->IpcCloseMemHandle((xccl_cudeviceptr_t) (uintptr_t) e->ptr);
        cu->CtxPopCurrent(&popped);
    }
}

/* The peer's allocation mapped here (current context ctx), or NULL. */
static char *map_peer(mca_coll_xccl_module_t *m, const ipc_rec_t *r, int peer, void *ctx)
{
    const xccl_cu_api_t *cu = xccl_cu();
    struct mca_coll_xccl_ipc *c = m->ipc;
    if (NULL == c && NULL == (c = m->ipc = calloc(1, sizeof(*c)))) {
        return NULL;
    }
    ipc_map_t *e = NULL, *oldest = &c->map[0];
    for (int i = 0; i < c->n; i++) {
        ipc_map_t *x = &c->map[i];
        if (x->peer == peer && x->buffer_id == r->buffer_id && x->ctx == ctx &&
            0 == memcmp(&x->handle, &r->handle, sizeof(r->handle))) {
            e = x;
            break;
        }
        oldest = x->used < oldest->used ? x : oldest;
    }
    if (NULL == e) {
        xccl_cudeviceptr_t p = 0;
        if (XCCL_CUDA_SUCCESS != cu->IpcOpenMemHandle(&p, r->handle,
                                                       XCCL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
            return NULL;
        }
        if (c->n < XCCL_IPC_MAPS) {
            e = &c->map[c->n++];
        } else {
            unmap(cu, oldest);
            e = oldest;
        }
        e->handle = r->handle;
        e->buffer_id = r->buffer_id;
        e->peer = peer;
        e->ptr = (char *) (uintptr_t) p;
        e->ctx = ctx;
    }
    e->used = ++c->clock;
    return e->ptr;
}

void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m)
{
    const xccl_cu_api_t *cu = xccl_cu();
    if (NULL != m->ipc && NULL != cu) {
        for (int i = 0; i < m->ipc->n; i++) {
            unmap(cu, &m->ipc->map[i]);
        }
    }
    free(m->ipc);
    m->ipc = NULL;
}

/* Where this rank reads from peer j: offset in j's exported memory and in
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

int mca_coll_xccl_gpu_ipc(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                          xccl_coll_t coll, const void *exp, void *dst, size_t block, int root,
                          int contig, int *done)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const int P = m->size, me = m->rank;
    xccl_mem_info_t di, ei;
    ipc_rec_t mine;
    const char *error = NULL;
    int rc, ok, all_ok = 0;

    *done = 0;
    memset(&mine, 0, sizeof(mine));
    xccl_gpu_classify(dst, &di);
    xccl_gpu_classify(exp, &ei);
    const int needs_dst = XCCL_COLL_BCAST != coll || me != root;
    mine.exports = NULL != exp;
    mine.ok = NULL != cu && contig && (!needs_dst || XCCL_MEM_DEVICE == di.type) &&
              (!mine.exports || XCCL_MEM_DEVICE == ei.type);
    if (mine.ok && mine.exports) {
        xccl_cucontext_t popped;
        mine.ok = XCCL_CUDA_SUCCESS == cu->CtxPushCurrent(ei.ctx);
        if (mine.ok) {
            mine.ok = XCCL_CUDA_SUCCESS ==
                      cu->IpcGetMemHandle(&mine.handle, (xccl_cudeviceptr_t) (uintptr_t) ei.base);
            cu->CtxPopCurrent(&popped);
        }
        mine.buffer_id = ei.buffer_id;
        mine.offset = (uint64_t) ((const char *) exp - (const char *) ei.base);
    }

    /* Round 1: who can take part, and the handles. */
    ipc_rec_t *recs = malloc((size_t) P * sizeof(*recs));
    char **src = calloc((size_t) P, sizeof(*src));
    if (NULL == recs || NULL == src) {
        free(recs);
        free(src);
        return mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory (ipc)");
    }
    rc = m->prev_allgather(&mine, sizeof(mine), MPI_BYTE, recs, sizeof(mine), MPI_BYTE, comm,
                           m->prev_allgather_module);
    ok = MPI_SUCCESS == rc;
    for (int j = 0; ok && j < P; j++) {
        ok = recs[j].ok;
    }
    /* Round 2: every handle this rank needs opened. */
    void *ctx = needs_dst ? di.ctx : NULL;
    if (ok && needs_dst) {
        xccl_cucontext_t popped;
        ok = XCCL_CUDA_SUCCESS == cu->CtxPushCurrent((xccl_cucontext_t) ctx);
        if (ok) {
            for (int j = 0; ok && j < P; j++) {
                size_t so, dof;
                if (j != me && pull(coll, me, j, root, block, &so, &dof)) {
                    char *base = recs[j].exports ? map_peer(m, &recs[j], j, ctx) : NULL;
                    ok = NULL != base;
                    src[j] = base ? base + recs[j].offset : NULL;
                }
            }
            cu->CtxPopCurrent(&popped);
        }
    }
    if (MPI_SUCCESS == rc) {
        all_ok = ok;
        rc = m->prev_allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, comm,
                               m->prev_allreduce_module);
    }
    if (MPI_SUCCESS != rc || !all_ok) {
        free(recs);
        free(src);
        return MPI_SUCCESS == rc ? MPI_SUCCESS : mca_coll_xccl_error(m, coll, rc, "ipc agreement");
    }

    /* Every rank takes this path now: copy, then a barrier so that no rank
     * returns (and reuses its buffers) while another still reads them.  A
     * failed copy still reaches the barrier. */
    *done = 1;
    if (needs_dst) {
        xccl_cucontext_t popped;
        xccl_gpu_set_t *set = NULL;
        if (XCCL_CUDA_SUCCESS != cu->CtxPushCurrent((xccl_cucontext_t) ctx)) {
            error = "cuCtxPushCurrent failed";
        } else {
            set = xccl_gpu_set_get((xccl_cucontext_t) ctx, 0,
                                   mca_coll_xccl_component.gpu_pool_bytes, &error);
            for (int j = 0; set && NULL == error && j < P; j++) {
                size_t so, dof, n = pull(coll, me, j, root, block, &so, &dof);
                const char *from = j == me ? (const char *) exp : src[j];
                if (n && (char *) dst + dof != from + so) {
                    error = copy(cu, (char *) dst + dof, from + so, n, DEVICE_TO_DEVICE, set->in);
                }
            }
            if (set && NULL == error) {
                error = sync_stream(cu, set->in);
            }
            if (set) {
                xccl_gpu_set_put(set, NULL != error);
            }
            cu->CtxPopCurrent(&popped);
        }
    }
    rc = comm->c_coll->coll_barrier(comm, comm->c_coll->coll_barrier_module);
    free(recs);
    free(src);
    if (error) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error);
    }
    if (MPI_SUCCESS != rc) {
        return mca_coll_xccl_error(m, coll, rc, "barrier after cuda ipc copies");
    }
    mca_coll_xccl_log(1, "%s comm=%u rank=%d bytes=%zu algo=cuda_ipc size=%d",
                      mca_coll_xccl_coll_name(coll), m->cid, m->world_rank,
                      XCCL_COLL_BCAST == coll ? block : block * (size_t) P, P);
    return MPI_SUCCESS;
}
