/*
 * The executor's transports: the messages of a schedule (algos/exec.c)
 * over xccl's UCX endpoints, or over Open MPI's PML.  The set-up
 * (coll_xccl_setup.c) chooses one for the communicator once every member
 * agrees on it.
 */
#include "ompi_config.h"

#include <limits.h>

#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/request/request.h"

#include "coll_xccl_transport.h"

/* UCX is told the memory type of every buffer: host through
 * m->transport, CUDA through m->transport_cuda, which the calls on device
 * buffers use (coll_xccl_gpu_direct.c). */
static int ucx_isend_mem(mca_coll_xccl_module_t *m, int peer, const void *buf, size_t len,
                         uint32_t seq, uint32_t idx, xccl_ucx_mem_t mem, void **req)
{
    return xccl_ucx_isend(m->eps[peer], buf, len,
                          xccl_ucx_tag(m->cid, (uint32_t) m->rank, seq, idx), mem, req);
}

static int ucx_isend(void *ctx, int peer, const void *buf, size_t len, uint32_t seq,
                     uint32_t idx, void **req)
{
    return ucx_isend_mem(ctx, peer, buf, len, seq, idx, XCCL_UCX_MEM_HOST, req);
}

static int ucx_isend_cuda(void *ctx, int peer, const void *buf, size_t len, uint32_t seq,
                          uint32_t idx, void **req)
{
    return ucx_isend_mem(ctx, peer, buf, len, seq, idx, XCCL_UCX_MEM_CUDA, req);
}

static int ucx_irecv(void *ctx, int peer, void *buf, size_t len, uint32_t seq, uint32_t idx,
                     void **req)
{
    mca_coll_xccl_module_t *m = ctx;
    return xccl_ucx_irecv(buf, len, xccl_ucx_tag(m->cid, (uint32_t) peer, seq, idx),
                          XCCL_UCX_MEM_HOST, req);
}

static int ucx_irecv_cuda(void *ctx, int peer, void *buf, size_t len, uint32_t seq,
                          uint32_t idx, void **req)
{
    mca_coll_xccl_module_t *m = ctx;
    return xccl_ucx_irecv(buf, len, xccl_ucx_tag(m->cid, (uint32_t) peer, seq, idx),
                          XCCL_UCX_MEM_CUDA, req);
}

static int ucx_test(void *ctx, void *req)
{
    (void) ctx;
    return xccl_ucx_test(req);
}

static void ucx_progress(void *ctx)
{
    (void) ctx;
    xccl_ucx_progress();
}

static void ucx_cancel(void *ctx, void *req)
{
    (void) ctx;
    xccl_ucx_cancel(req);
}

/* Open MPI's PML, for communicators where some rank has no UCX path to
 * some peer.  Tags come from the range Open MPI reserves for hcoll, which
 * no stock component uses: (sequence, message index) as in the UCX tag;
 * the PML adds the communicator and the source.  It keeps the order of
 * messages with the same tag between a pair, so the wrap of the index
 * cannot mismatch. */
static int pml_tag(uint32_t seq, uint32_t idx)
{
    return MCA_COLL_BASE_TAG_HCOLL_BASE - 1 - (int) (((seq & 0xffffu) << 12) | (idx & 0xfffu));
}

static int pml_isend(void *ctx, int peer, const void *buf, size_t len, uint32_t seq,
                     uint32_t idx, void **req)
{
    mca_coll_xccl_module_t *m = ctx;
    ompi_request_t *r = MPI_REQUEST_NULL;
    if (len > INT_MAX) {
        return -1;                   /* both ends of this message fail alike */
    }
    int rc = MCA_PML_CALL(isend((void *) buf, (int) len, MPI_BYTE, peer, pml_tag(seq, idx),
                                MCA_PML_BASE_SEND_STANDARD, m->comm, &r));
    *req = r;
    return OMPI_SUCCESS == rc ? 0 : -1;
}

static int pml_irecv(void *ctx, int peer, void *buf, size_t len, uint32_t seq, uint32_t idx,
                     void **req)
{
    mca_coll_xccl_module_t *m = ctx;
    ompi_request_t *r = MPI_REQUEST_NULL;
    if (len > INT_MAX) {
        return -1;
    }
    int rc = MCA_PML_CALL(irecv(buf, (int) len, MPI_BYTE, peer, pml_tag(seq, idx), m->comm, &r));
    *req = r;
    return OMPI_SUCCESS == rc ? 0 : -1;
}

/* Never progresses: the caller may be Open MPI's progress engine already,
 * and opal_progress, which xccl's waits call, progresses the PML. */
static int pml_test(void *ctx, void *req)
{
    ompi_request_t *r = req;
    (void) ctx;
    if (!REQUEST_COMPLETE(r)) {
        return 0;
    }
    const int ok = MPI_SUCCESS == r->req_status.MPI_ERROR;
    ompi_request_free(&r);
    return ok ? 1 : -1;
}

static void pml_progress(void *ctx)
{
    (void) ctx;
}

static void pml_cancel(void *ctx, void *req)
{
    ompi_request_t *r = req;
    (void) ctx;
    ompi_request_cancel(r);
    ompi_request_free(&r);           /* released by the PML once it ends */
}

void mca_coll_xccl_transport_use(mca_coll_xccl_module_t *m, bool ucx)
{
    m->ucx = ucx;
    m->transport.ctx = m;
    m->transport.isend = ucx ? ucx_isend : pml_isend;
    m->transport.irecv = ucx ? ucx_irecv : pml_irecv;
    m->transport.test = ucx ? ucx_test : pml_test;
    m->transport.progress = ucx ? ucx_progress : pml_progress;
    m->transport.cancel = ucx ? ucx_cancel : pml_cancel;
    m->transport_cuda = m->transport;
    if (ucx) {
        m->transport_cuda.isend = ucx_isend_cuda;
        m->transport_cuda.irecv = ucx_irecv_cuda;
    }
}
