/*
 * The executor's transports (coll_xccl_transport.c): the communicator's
 * messages over xccl's UCX endpoints, or over Open MPI's PML where some
 * rank has no UCX path to some peer.
 */
#ifndef MCA_COLL_XCCL_TRANSPORT_H
#define MCA_COLL_XCCL_TRANSPORT_H

#include "coll_xccl.h"

BEGIN_C_DECLS

/* Sets m->ucx and the module's transports: m->transport for host buffers
 * and m->transport_cuda for device buffers, over UCX (ucx true: m->eps
 * holds an endpoint to every peer) or else over the PML, where both are
 * the same. */
void mca_coll_xccl_transport_use(mca_coll_xccl_module_t *m, bool ucx);

END_C_DECLS

#endif
