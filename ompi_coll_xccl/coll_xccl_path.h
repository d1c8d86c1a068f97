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

BEGIN_C_DECLS

/* Runs the call an entry point described: MPI_SUCCESS or an MPI error
 * code (logged).  Frees c->counts. */
int mca_coll_xccl_call_run(mca_coll_xccl_call_t *c);
/* Advances the nonblocking calls of the peer-access providers (CUDA IPC):
 * how many completed.  From the component's progress function. */
int mca_coll_xccl_peer_progress(void);

END_C_DECLS

#endif
