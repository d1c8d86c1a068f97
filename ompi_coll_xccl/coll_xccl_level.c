/*
 * The intra-node shared-memory level of a communicator (docs/shm-level.md):
 * one segment per node (segment/xccl_segment.h), its provider of peer access
 * (coll_xccl_level_peer.h), and when the schedules may use it.  This file:
 * the level's state at enable and its hooks for a schedule that uses it;
 * the turns are inline in coll_xccl_level.h.  The level's other files:
 *   coll_xccl_level_pool.c    the pool of segments, the node's set-up
 *                             (local part, finish), the level off
 *   coll_xccl_level_vote.c    the vote with its probe of single copies
 *   coll_xccl_level_trials.c  the end of a trial: the agreed pick
 *
 * Set-up rides on the communicator's set-up (coll_xccl_setup.c), never in
 * module_enable and never waiting for another rank there:
 *  - local part: the first rank of each node with two or more ranks creates
 *    the node's segment, or claims one a communicator of the same
 *    processes left (the pool, coll_xccl_level_pool.c); its 64-byte
 *    descriptor goes into its agreement record (the other ranks': the
 *    pooled segment they hold);
 *  - finish: every other rank of the node attaches with its leader's
 *    descriptor (no waiting: the segment exists since the leader's local
 *    part), or rejoins it where it holds it;
 *  - vote: whether every rank attached must be known alike everywhere:
 *    each rank starts the vote as its set-up ends (over xccl's own
 *    transport, coll_xccl_level_vote.c), and every call reads the level's
 *    state only once the vote is over on its rank, so all calls decide
 *    alike; skipped where the agreed records already say how it would end
 *    (the pool).
 *
 * Which calls use it: blocking and nonblocking calls, one schedule at a
 * time in call order (they share each rank's slot and flag: m->level_turn).
 * Small blocking messages (below coll_xccl_small_msg_bytes) that would go
 * to the fallback run xccl's shared-memory algorithms instead where the
 * whole communicator is one node and the level is on.
 */
#include "ompi_config.h"

#include "ompi/proc/proc.h"

#include "coll_xccl_level.h"

void mca_coll_xccl_level_init(mca_coll_xccl_module_t *m)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    m->level_state = XCCL_LEVEL_OFF;
    if (c->shm_bytes > 0 && m->size > 1 && m->size <= XCCL_AGREE_MAX_KEYS) {
        m->level_state = XCCL_LEVEL_UNDECIDED;
    }
    m->level_small = XCCL_LEVEL_UNDECIDED == m->level_state && c->shm_small;
    m->level_local = XCCL_LEVEL_UNDECIDED == m->level_state && (NULL == c->node_layout || !c->node_layout[0]);
    const ompi_proc_t *me = ompi_proc_local();
    for (int i = 0; m->level_local && i < m->size; i++) {
        const ompi_proc_t *proc = ompi_comm_peer_lookup(m->comm, i);
        m->level_local = proc->super.proc_name.jobid == me->super.proc_name.jobid &&
                         OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags);
    }
    m->level_small_nb = m->level_small && m->level_local;
}

int mca_coll_xccl_level_hooks(mca_coll_xccl_module_t *m, mca_coll_xccl_exec_hooks_t *hooks,
                            int publish, size_t slot_bytes)
{
    struct mca_coll_xccl_level *h = m->level;
    if (NULL == h || NULL == h->seg) {
        return 0;                    /* the executor refuses the schedule */
    }
    /* (a failure leaves the pages to be faulted in one by one) */
    (void) xccl_segment_prefault_slots(h->seg, slot_bytes);
    hooks->bufs[XCCL_BUF_SLOT] = xccl_segment_slot(h->seg, xccl_segment_rank(h->seg));
    hooks->peer = &h->peer.peer;
    hooks->owed = &h->exit_owed;
    if (!publish || !m->level_cma) {
        return 0;
    }
    /* The peers read this call's SEND and RECV (the executor's seq is the
     * next call's number); schedules of these collectives read no scratch.
     * One publication per rank: only blocking calls get such schedules (a
     * later call's would replace one that waits for its turn). */
    void *bufs[XCCL_NBUF] = { hooks->bufs[XCCL_BUF_SEND], hooks->bufs[XCCL_BUF_RECV], NULL, NULL };
    return xccl_level_peer_publish(&h->peer, m->seq, bufs);
}
