/*
 * Device buffers straight to UCX (coll_xccl_gpu_direct.c).
 */
#ifndef MCA_COLL_XCCL_GPU_DIRECT_H
#define MCA_COLL_XCCL_GPU_DIRECT_H

#include "coll_xccl_exec.h"
#include "coll_xccl_gpu_hooks.h"

BEGIN_C_DECLS

/* coll_xccl_gpu_direct and what UCX reports: device buffers straight to
 * UCX; refused: why coll_xccl_gpu_direct 1 is not honoured, or NULL. */
int mca_coll_xccl_gpu_direct_wanted(void);
const char *mca_coll_xccl_gpu_direct_refused(void);

/* Device pointers straight to UCX (coll_xccl_gpu_direct.c): runs s on the
 * device buffers (st->direct set, hooks filled), or leaves st alone with
 * the reason logged (the caller stages instead); direct_end completes the
 * queued work and frees what direct_gate took: NULL or the first error. */
int mca_coll_xccl_gpu_direct_gate(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                  mca_coll_xccl_gpu_stage_t *st, const xccl_sched_t *s,
                                  int gpu_dt, int gpu_op, mca_coll_xccl_exec_hooks_t *hooks);
const char *mca_coll_xccl_gpu_direct_end(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                         mca_coll_xccl_gpu_stage_t *st);

END_C_DECLS

#endif
