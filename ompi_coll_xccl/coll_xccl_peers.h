/*
 * The peer-access providers (coll_xccl_provider.h) a call tries, in
 * order: CUDA IPC.
 */
#ifndef MCA_COLL_XCCL_PEERS_H
#define MCA_COLL_XCCL_PEERS_H

#include <stddef.h>

#include "coll_xccl_provider.h"

BEGIN_C_DECLS

extern const mca_coll_xccl_peer_provider_t *const mca_coll_xccl_providers[];
extern const size_t mca_coll_xccl_nproviders;

/* Whether a provider wants the nonblocking call c and the communicator
 * can run it (from what every rank shares: coll_xccl_provider.h). */
int mca_coll_xccl_peer_wanted(const mca_coll_xccl_call_t *c);

/* Advances the providers' nonblocking calls: how many completed.  From
 * the component's progress function. */
int mca_coll_xccl_peer_progress(void);

END_C_DECLS

#endif
