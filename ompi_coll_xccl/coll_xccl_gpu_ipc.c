/*
 * CUDA IPC peer access inside a node: a provider of xccl_peer_t whose peer
 * buffers are CUDA IPC mappings of the other ranks' device buffers and
 * whose flags are words in host shared memory.  A call it takes runs one
 * of its collective's peer-access schedules through the one executor,
 * with the copies and reductions queued on a stream of the buffers' CUDA
 * context: the same schedules the simulator tests and the cost model
 * prices.  Which one is a property of the communicator, found at its
 * set-up:
 *   - "leader" (algos/mesh_leader.c) where every rank's device is the
 *     same GPU: a GPU runs one process's work at a time and switches
 *     contexts between them (without MPS; figures:
 *     docs/bench/gpu-stream-flags.md), so one rank does all the work and
 *     the others only publish their buffers, flag and wait: one host
 *     synchronisation per call on every rank, no switch;
 *   - "mesh" (algos/..._mesh.c) across GPUs: every device does its share.
 * A chain of reductions into one place (x0 op x1, then op x2, ...) goes to
 * the GPU as one kernel over every source (fold order kept).
 *
 * A call agrees with its peers in two rounds through the ranks' slots, in
 * its turn (coll_xccl_gpu_ipc_int.h).  This file is the provider and its
 * blocking calls, which wait for their turn (progressing the nonblocking
 * calls made before them, coll_xccl_gpu_ipc_nb.c) and for each round; the
 * set-up is coll_xccl_gpu_ipc_setup.c, this rank's part of a call
 * coll_xccl_gpu_ipc_part.c, a call's peer coll_xccl_gpu_ipc_peer.c.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"

#include "coll_xccl_gpu_ipc.h"
#include "coll_xccl_gpu_ipc_int.h"

/* ------------------------------------------------------------ the rounds, waited for */

/* A blocking call's rounds: wait, with Open MPI's progress. */
static int round1_all(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, uint64_t e)
{
    mca_coll_xccl_gpu_ipc_publish(m, ipc, e, XCCL_IPC_STAGE_IN);
    while (!mca_coll_xccl_gpu_ipc_reached(m, ipc, e, XCCL_IPC_STAGE_OUT)) {
        opal_progress();
    }
    return mca_coll_xccl_gpu_ipc_round1_in(m, ipc, e);
}

static int round2_all(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, uint64_t e,
                      int mapped)
{
    ipc->slot[m->rank]->mapped = mapped;
    mca_coll_xccl_gpu_ipc_publish(m, ipc, e, XCCL_IPC_STAGE_MAPPED);
    while (!mca_coll_xccl_gpu_ipc_reached(m, ipc, e, XCCL_IPC_STAGE_MAPPED)) {
        opal_progress();
    }
    return mca_coll_xccl_gpu_ipc_round2_mapped(m, ipc);
}

/* ------------------------------------------------------------ the provider */

static int ipc_wanted(const mca_coll_xccl_call_t *c)
{
    const size_t min = mca_coll_xccl_component.gpu_ipc_bytes;
    const struct mca_coll_xccl_ipc *ipc = c->m->ipc;
    /* From what every rank shares only: not in place for alltoall(v) and
     * reduce_scatter (every rank's MPI_IN_PLACE or none's; the rooted
     * collectives' is the root's alone and never decides); alltoallv,
     * gatherv and scatterv at every size (a rank knows only its own, and
     * the root the total: xccl_coll_sizes_local).  A nonblocking call
     * cannot set the slots up (that waits for the other ranks): it is
     * wanted where a blocking call did (the same calls came before it on
     * every rank, so every rank sees the same ipc->up). */
    return min > 0 && xccl_coll_mapped(c->coll) && (c->bytes >= min || xccl_coll_sizes_local(c->coll)) &&
           c->m->size >= 2 && !c->ipc_said &&
           !(c->in_place && (XCCL_COLL_ALLTOALL == c->coll || XCCL_COLL_ALLTOALLV == c->coll ||
                             XCCL_COLL_REDUCE_SCATTER == c->coll || XCCL_COLL_REDUCE_SCATTER_BLOCK == c->coll)) &&
           (NULL == c->request || (NULL != ipc && ipc->up > 0));
}

static int ipc_usable(const mca_coll_xccl_module_t *m)
{
    return m->gpu_ipc && (NULL == m->ipc || m->ipc->up >= 0);
}

static int ipc_open(mca_coll_xccl_call_t *c, const xccl_sched_t *s,
                    mca_coll_xccl_exec_hooks_t *hooks, void **state, int *go)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_ipc *ipc = m->ipc;
    const int leader = mca_coll_xccl_gpu_ipc_leader(ipc, c);
    const uint64_t e = ipc->epoch++;
    char *dev[2];
    ipc_buf_t bufs[2];
    *go = 0;
    ipc_call_t *call = &ipc->call;
    while (!mca_coll_xccl_gpu_ipc_my_turn(ipc, e)) {   /* the nonblocking calls made before it */
        opal_progress();
    }
    memset(call, 0, sizeof(*call));
    call->m = m;
    call->ipc = ipc;
    call->cu = xccl_cu();
    int all = mca_coll_xccl_gpu_ipc_own_part(c, call, bufs, leader, dev);
    if (!all) {
        mca_coll_xccl_gpu_ipc_publish(m, ipc, e, XCCL_IPC_STAGE_OUT);
    } else {
        mca_coll_xccl_gpu_ipc_lend(m, ipc, call, bufs);
        if ((all = round1_all(m, ipc, e))) {
            all = round2_all(m, ipc, e, mca_coll_xccl_gpu_ipc_map_peers(m, call, s));
        }
    }
    if (!all) {
        mca_coll_xccl_gpu_ipc_release_set(call, '\0' != call->error[0]);
        mca_coll_xccl_gpu_ipc_pass_turn(ipc);
        return MPI_SUCCESS;
    }
    /* Every rank runs the schedule now, with the context current until
     * close (a failed push fails the call's driver work: its flags still
     * go up). */
    *go = 1;
    call->pushed = 0 == mca_coll_xccl_gpu_push(call->ctx);
    if (!call->pushed) {
        mca_coll_xccl_gpu_ipc_fail(call, "cuCtxPushCurrent failed");
    }
    mca_coll_xccl_gpu_ipc_set_hooks(call, dev, s, hooks);
    *state = call;
    return MPI_SUCCESS;
}

static int ipc_close_call(mca_coll_xccl_call_t *c, void *state, int rc)
{
    ipc_call_t *call = state;
    if (call->pushed) {
        mca_coll_xccl_gpu_ipc_sync(call);   /* nothing queued outlives the call */
        call->ipc->no_batch |= call->q.one_by_one;
        xccl_gpu_set_put(call->set, '\0' != call->error[0]);
        call->set = NULL;
        mca_coll_xccl_gpu_pop();
    }
    mca_coll_xccl_gpu_ipc_release_set(call, 1);   /* (a failed push) */
    mca_coll_xccl_gpu_ipc_pass_turn(call->ipc);
    if ('\0' != call->error[0]) {
        return mca_coll_xccl_error(c->m, c->coll, MPI_ERR_INTERN, call->error);
    }
    return rc;
}

int mca_coll_xccl_gpu_ipc_pass(mca_coll_xccl_call_t *c)
{
    mca_coll_xccl_module_t *m = c->m;
    if (!m->gpu_ipc || !ipc_wanted(c) || (NULL != m->ipc && m->ipc->up < 0)) {
        return 1;
    }
    if (NULL == m->ipc || 0 == m->ipc->up || !mca_coll_xccl_gpu_ipc_my_turn(m->ipc, m->ipc->epoch)) {
        return 0;                      /* the set-up is collective, or nonblocking calls are on
                                        * their way: the whole way */
    }
    mca_coll_xccl_gpu_ipc_publish(m, m->ipc, m->ipc->epoch++, XCCL_IPC_STAGE_OUT);
    mca_coll_xccl_gpu_ipc_pass_turn(m->ipc);
    c->ipc_said = 1;                   /* should the call take the whole way after all */
    return 1;
}

void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_ipc *ipc = m->ipc;
    if (NULL != ipc) {
        mca_coll_xccl_gpu_ipc_drop_events(m, ipc);
        xccl_ipc_cache_fini(&ipc->maps);
        mca_coll_xccl_gpu_ipc_unmap_slots(m, ipc);
        free(ipc->mapped);
        free(ipc);
    }
    m->ipc = NULL;
}

const mca_coll_xccl_peer_provider_t mca_coll_xccl_gpu_ipc_provider = {
    .name = "cuda_ipc",
    .wanted = ipc_wanted,
    .usable = ipc_usable,
    .form = mca_coll_xccl_gpu_ipc_form,
    .open = ipc_open,
    .close = ipc_close_call,
    .start = mca_coll_xccl_gpu_ipc_start,
    .progress = mca_coll_xccl_gpu_ipc_progress,
};
