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

static const char *copy(const xccl_cu_api_t *cu, void *dst, const void *src, size_t bytes,
                        int to_host, xccl_custream_t stream)
{
    xccl_cu_memcpy2d_t d;
    memset(&d, 0, sizeof(d));
    /* UNIFIED: the driver tells device, managed and host memory apart, so a
     * host buffer mixed with a device one works too. */
    if (to_host) {
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
            error = copy(cu, *hs, sdev, sspan, 1, st->set->in);
        }
        if (NULL == error && copy_r && rspan) {
            error = copy(cu, *hr, rdev, rspan, 1, st->set->in);
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
        error = copy(cu, rdev, st->set->host, rspan, 0, st->set->out);
        if (NULL == error) {
            error = sync_stream(cu, st->set->out);
        }
    }
    xccl_gpu_set_put(st->set, NULL != error);
    st->set = NULL;
    cu->CtxPopCurrent(&popped);
    return error ? mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error) : MPI_SUCCESS;
}
