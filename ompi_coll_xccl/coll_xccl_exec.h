/*
 * Running a schedule with the one executor (coll_xccl_exec.c): where its
 * buffers are, which transport, gate, copies, reductions and peer access.
 */
#ifndef MCA_COLL_XCCL_EXEC_H
#define MCA_COLL_XCCL_EXEC_H

#include "opal/runtime/opal_progress.h"

#include "coll_xccl_dtype.h"

BEGIN_C_DECLS

/* How the executor runs a schedule: where (bufs: SEND, RECV, SCRATCH;
 * SCRATCH NULL: the module's host scratch), over which transport (NULL:
 * the module's, for host memory; &m->transport_cuda when every buffer
 * the transfers name is device memory), a gate, the local copies and
 * reductions (NULL: on the host), peer access (NULL: none). */
typedef struct {
    void *bufs[XCCL_NBUF];
    const xccl_transport_t *transport;
    const xccl_gate_t *gate;
    xccl_copy_cb_t copy;
    void *copy_ctx;
    xccl_reduce_cb_t reduce;
    void *reduce_ctx;
    const xccl_peer_t *peer;
    xccl_exit_owed_t *owed;          /* the level's (xccl_exec_set_owed), NULL: none */
} mca_coll_xccl_exec_hooks_t;

/* Sets e up to run s as h says, with red's host reductions where h has
 * none, on the module's transport: 0 or -1. */
int mca_coll_xccl_exec_init(xccl_exec_t *e, mca_coll_xccl_module_t *m, const xccl_sched_t *s,
                            const mca_coll_xccl_exec_hooks_t *h, mca_coll_xccl_reduce_t *red,
                            void *scratch, uint32_t seq);
/* Runs s to completion: MPI_SUCCESS or an error code (logged). */
int mca_coll_xccl_exec_run(mca_coll_xccl_module_t *m, xccl_coll_t coll, const xccl_sched_t *s,
                           const mca_coll_xccl_exec_hooks_t *h, mca_coll_xccl_reduce_t *red);
/* An execution that ended in an error: logged, MPI_ERR_INTERN. */
int mca_coll_xccl_exec_failed(mca_coll_xccl_module_t *m, xccl_coll_t coll);

/* Unmet flag tests between two calls of Open MPI's progress engine while a
 * call of the shared-memory level waits (no transfers to progress): own,
 * a few microseconds of tests, which cost far less than opal_progress
 * when every rank has a core of its own; 1 under mpi_yield_when_idle
 * (more ranks than cores: the peer may need this core, and opal_progress
 * yields it: docs/bench/latency-path.md). */
static inline unsigned mca_coll_xccl_spins_per_progress(unsigned own)
{
    return opal_progress_yield_when_idle ? 1u : own;
}

/* own for a call in flight (a request, a kept call) in one progress call:
 * few, since an application that polls with MPI_Test pays for them in
 * each call. */
#define MCA_COLL_XCCL_REQUEST_SPINS 16u

END_C_DECLS

#endif
