/*
 * CUDA IPC peer access inside a node (coll_xccl_gpu_ipc.c).
 */
#ifndef MCA_COLL_XCCL_GPU_IPC_H
#define MCA_COLL_XCCL_GPU_IPC_H

#include "coll_xccl_provider.h"

BEGIN_C_DECLS

/* CUDA IPC peer access inside a node (coll_xccl_gpu_ipc.c). */
extern const mca_coll_xccl_peer_provider_t mca_coll_xccl_gpu_ipc_provider;


/* The CUDA IPC state of a module, at destruction (coll_xccl_gpu_ipc.c). */
void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m);

END_C_DECLS

#endif
