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


/* A call that skips the paths (the entry's short way to the latency path,
 * host buffers): 1 when it may - it says "cannot" to the peers that wait
 * in CUDA IPC's agreement for this call, where the call would have tried
 * it - or 0 when it must take the whole way (the communicator's CUDA IPC
 * set-up, collective, is still to come). */
int mca_coll_xccl_gpu_ipc_pass(mca_coll_xccl_call_t *c);

/* The CUDA IPC state of a module, at destruction (coll_xccl_gpu_ipc.c). */
void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m);

END_C_DECLS

#endif
