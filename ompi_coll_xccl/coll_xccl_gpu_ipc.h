/*
 * CUDA IPC peer access inside a node (coll_xccl_gpu_ipc.c): its interface
 * for the rest of the component.  Its files share
 * coll_xccl_gpu_ipc_int.h.
 */
#ifndef MCA_COLL_XCCL_GPU_IPC_H
#define MCA_COLL_XCCL_GPU_IPC_H

#include "coll_xccl_provider.h"

BEGIN_C_DECLS

/* CUDA IPC peer access inside a node (coll_xccl_gpu_ipc.c). */
extern const mca_coll_xccl_peer_provider_t mca_coll_xccl_gpu_ipc_provider;


/* The step of a call that skips the path table (the latency path's fast
 * way, host buffers) on a CUDA IPC communicator: it says "cannot" to the
 * peers that wait in CUDA IPC's agreement for this call, where the call
 * would have tried it, and returns 1; or 0 when the call must take the
 * whole way (the communicator's CUDA IPC set-up, collective, is still to
 * come, or nonblocking calls are on their way). */
int mca_coll_xccl_gpu_ipc_pass(mca_coll_xccl_call_t *c);

/* The CUDA IPC state of a module, at destruction (coll_xccl_gpu_ipc.c). */
void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m);

END_C_DECLS

#endif
