/*
 * The peer-access providers, in the order the peer_access path
 * (coll_xccl_path.c) tries them.
 */
#include "ompi_config.h"

#include "coll_xccl_peers.h"
#include "coll_xccl_gpu_ipc.h"

const mca_coll_xccl_peer_provider_t *const mca_coll_xccl_providers[] = {
    &mca_coll_xccl_gpu_ipc_provider,
};
const size_t mca_coll_xccl_nproviders =
    sizeof(mca_coll_xccl_providers) / sizeof(mca_coll_xccl_providers[0]);

int mca_coll_xccl_peer_wanted(const mca_coll_xccl_call_t *c)
{
    for (size_t i = 0; i < mca_coll_xccl_nproviders; i++) {
        if (mca_coll_xccl_providers[i]->wanted(c) && mca_coll_xccl_providers[i]->usable(c->m)) {
            return 1;
        }
    }
    return 0;
}

int mca_coll_xccl_peer_progress(void)
{
    int n = 0;
    for (size_t i = 0; i < mca_coll_xccl_nproviders; i++) {
        n += mca_coll_xccl_providers[i]->progress();
    }
    return n;
}
