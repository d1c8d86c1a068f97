/*
 * The paths a call can take (coll_xccl_path.c), tried in order:
 *
 *   decide (fallback or xccl: only from what every rank shares)
 *   -> device buffers (CUDA IPC peer access, else host copies)
 *   -> the fallback, or: buffers (packed copies) -> schedule (cached)
 *      -> execute (to completion, or as a request)
 */
#ifndef MCA_COLL_XCCL_PATH_H
#define MCA_COLL_XCCL_PATH_H

#include "coll_xccl_call.h"
#include "coll_xccl_gpu.h"
#include "coll_xccl_gpu_ipc.h"

BEGIN_C_DECLS

/* Runs the call an entry point described: MPI_SUCCESS or an MPI error
 * code (logged).  Frees c->counts. */
int mca_coll_xccl_call_run(mca_coll_xccl_call_t *c);
/* Whether c may take the latency path straight from the entry as far as
 * the module and its buffers go: the level runs c's collective there, and
 * the buffers are host memory (in the heap, or any where the process has
 * not loaded the CUDA driver) that CUDA IPC, where set up, lets pass. */
static inline int mca_coll_xccl_short_host(mca_coll_xccl_call_t *c)
{
    const mca_coll_xccl_module_t *m = c->m;
    return (m->shm_lat_colls >> c->coll & 1u) && (NULL == xccl_cu() || mca_coll_xccl_gpu_surely_host(c)) &&
           (!m->gpu_ipc || mca_coll_xccl_gpu_ipc_pass(c));
}
/* Advances the nonblocking calls of the peer-access providers (CUDA IPC):
 * how many completed.  From the component's progress function. */
int mca_coll_xccl_peer_progress(void);

END_C_DECLS

#endif
