/*
 * Whether a call goes to the fallback (coll_xccl_decide.h), decided from
 * what every rank shares only (parameters, communicator size, sizes) and
 * before any data moves, so that all ranks take the same way whatever
 * their buffers; and how the path table would run a persistent request's
 * call, decided once at its init.
 */
#include "ompi_config.h"

#include "coll_xccl_decide.h"
#include "coll_xccl_latency_v.h"
#include "coll_xccl_peers.h"
#include "coll_xccl_dtype.h"
#include "coll_xccl_pack.h"
#include "coll_xccl_previous.h"
#include "coll_xccl_select.h"
#include "coll_xccl_setup.h"

/* Whether the fallback would compute c wrongly, so that xccl keeps it
 * where only speed sends it away: 8- and 16-bit sums
 * (mca_coll_xccl_stock_gets_wrong), and MPI_Ialltoallv in place, whose
 * blocks stock Open MPI (4.1.4 and 5.0.7) takes from the wrong peers
 * (MPI_IN_PLACE is every rank's or none's). */
static inline int fallback_wrong(const mca_coll_xccl_call_t *c)
{
    return (c->reduction && mca_coll_xccl_stock_gets_wrong(c->rdtype, c->op)) ||
           (XCCL_COLL_ALLTOALLV == c->coll && c->in_place);
}

/* A call that xccl carries across nodes at its size
 * (xccl_select_across_nodes, against its own fallback: blocking or
 * nonblocking) on a communicator that is not one node of this job
 * (m->level_local: alike on every rank).  A blocking one before its
 * set-up: the set-up then runs first (settle_nodes), so that every rank
 * reads the same layout.  A nonblocking one cannot wait for it: it is a
 * candidate once a blocking call has settled it (m->nodes_settled, set at
 * the same point of every member's sequence of calls), else the fallback
 * runs it. */
static inline int across_nodes_candidate(const mca_coll_xccl_call_t *c)
{
    const mca_coll_xccl_module_t *m = c->m;
    const unsigned two_level = NULL == c->request ? m->prev_two_level : m->prev_two_level_nb;
    return !m->level_local && (NULL == c->request || m->nodes_settled) &&
           xccl_select_across_nodes(c->coll, c->bytes, two_level >> c->coll & 1u);
}

/* ... and the layout has several nodes, one of them with more ranks than
 * one (else the two-level schedules have no level to save on). */
static inline int across_nodes(const mca_coll_xccl_call_t *c)
{
    const mca_coll_xccl_module_t *m = c->m;
    if (!across_nodes_candidate(c) || XCCL_SETUP_DONE != m->setup) {
        return 0;
    }
    opal_atomic_rmb();
    return m->layout.nnodes > 1 && m->layout.max_ppn > 1;
}

/* Whether c goes to the fallback, from what every rank shares: the
 * policy's reason why (policy below), or NULL.  Calls the policy sends
 * to the fallback as small stay with xccl where:
 *  - (the collectives the level carries: the first six, barrier)
 *    a blocking call of at most XCCL_LATENCY_BYTES can run the level's
 *    latency path (the level on, or its vote still to settle: the caller
 *    settles it first, settle_small);
 *  - a nonblocking one can run the level (m->level_small_nb: the latency
 *    path as a request, or the executor where the vote turns the level
 *    off), or CUDA IPC is set up and takes it (on device buffers one GPU
 *    round trip, no copy across PCIe);
 *  - the fallback would compute the call wrongly (fallback_wrong), which
 *    also keeps calls the policy sends away as not faster.
 * Calls the policy sends away as not faster (the collectives without a
 * latency path: xccl_coll_level) stay with xccl where the collective has
 * a form of the level ("shm") and the communicator is one node of this
 * job whose level may run (m->level_local): its schedules then run
 * through the node's segment, not the transport.  Below small_msg_bytes
 * the fallback is faster (the executor's cost per call), where every
 * rank knows the size, but for the calls of gather, scatter, reduce and
 * allgatherv that the latency path of coll_xccl_latency_v.c takes
 * (blocking: the vote settled first, settle_small; nonblocking: as its
 * requests, m->level_small_nb); alltoallv, gatherv and
 * scatterv stay whatever their sizes.  Across nodes, allgatherv and
 * reduce stay from the sizes where their two-level schedules are faster
 * than the fallback's (across_nodes; nonblocking calls once a blocking
 * one has settled the set-up).  Figures: docs/bench/latency-path.md,
 * docs/bench/more-collectives.md, docs/bench/two-node.md. */
static inline const char *decide(const mca_coll_xccl_call_t *c, const char *why)
{
    if (xccl_select_why_slower == why) {
        if (fallback_wrong(c) || across_nodes(c)) {
            return NULL;
        }
        if (c->m->level_local && xccl_select_level_index(c->coll, XCCL_LEVEL_SHM) >= XCCL_SEL_FIRST) {
            return xccl_coll_sizes_local(c->coll) ||
                           c->bytes >= (size_t) mca_coll_xccl_component.policy.small_bytes ||
                           mca_coll_xccl_latency_v_small(c)
                       ? NULL
                       : xccl_select_why_small;
        }
    }
    const int level = xccl_coll_level(c->coll);
    if (xccl_select_why_small == why &&
        ((level && NULL == c->request && c->bytes <= XCCL_LATENCY_BYTES && c->m->level_small) ||
         (level && NULL != c->request && c->m->level_small_nb) || fallback_wrong(c) ||
         (NULL != c->request && c->m->gpu_ipc && mca_coll_xccl_peer_wanted(c)))) {
        return NULL;
    }
    return why;
}

/* The policy's reason for the fallback (enable, forced, tuning rules,
 * size), before the exceptions of decide; a call made from inside the
 * fallback's set-up agreement on the same communicator (XCCL_SETUP_AGREEING:
 * every rank is there) goes to the fallback whatever it is. */
static inline const char *policy(const mca_coll_xccl_call_t *c)
{
    const mca_coll_xccl_component_t *k = &mca_coll_xccl_component;
    if (!k->enable[c->coll]) {
        return "disabled";
    }
    if (__builtin_expect(XCCL_SETUP_AGREEING == c->m->setup, 0)) {
        return "inside_set_up";
    }
    return xccl_select_fallback(&k->policy, c->coll, c->m->size, c->bytes, 0);
}

/* Before decide reads m->level_small for a small blocking call: where the
 * level's vote may still run, it is over (the same answer on every
 * rank). */
static inline void settle_small(mca_coll_xccl_call_t *c, const char *why)
{
    mca_coll_xccl_module_t *m = c->m;
    if (((xccl_select_why_small == why && c->bytes <= XCCL_LATENCY_BYTES) ||
         (xccl_select_why_slower == why && !xccl_coll_sizes_local(c->coll) &&
          mca_coll_xccl_latency_v_coll(c->coll) && mca_coll_xccl_latency_v_fits(c))) &&
        NULL == c->request && m->level_small && XCCL_LEVEL_ON != __atomic_load_n(&m->level_state, __ATOMIC_ACQUIRE)) {
        mca_coll_xccl_setup_settle(m);
    }
}

const char *mca_coll_xccl_call_fallback(const mca_coll_xccl_call_t *c)
{
    return decide(c, policy(c));
}

int mca_coll_xccl_call_level_plan(mca_coll_xccl_call_t *c, mca_coll_xccl_level_plan_t *plan)
{
    mca_coll_xccl_module_t *m = c->m;
    mca_coll_xccl_packed_t pk;
    /* as path_reduction, path_select and path_latency take a nonblocking
     * call on host buffers where no provider wants it */
    if (NULL == c->request || m->gpu_ipc || c->no_level || NULL != mca_coll_xccl_call_fallback(c)) {
        return 0;
    }
    const int state = __atomic_load_n(&m->level_state, __ATOMIC_ACQUIRE);
    if (!mca_coll_xccl_setup_test(m) || (XCCL_LEVEL_ON != state && XCCL_LEVEL_OFF != state)) {
        return -1;
    }
    if (XCCL_LEVEL_ON != state ||
        (c->reduction && (NULL != mca_coll_xccl_plan_reduction(c->rdtype, c->op, c->total, &c->red, &c->es) ||
                          NULL == c->red.kernel)) ||
        MPI_SUCCESS != mca_coll_xccl_work_buffers(c, c->sbuf, c->rbuf, NULL, &pk, &plan->ws, &plan->wr)) {
        return 0;
    }
    if (NULL != pk.s || NULL != pk.r) {
        mca_coll_xccl_packed_end(m, c->coll, &pk, 0, 0);
        return 0;
    }
    c->args.shm_slot = mca_coll_xccl_component.shm_bytes;
    c->args.layout = &m->layout;
    plan->sched = mca_coll_xccl_select_schedule(m, c->coll, &c->args, c->bytes, c->es, -1, &plan->algo,
                                                &plan->predicted_us, NULL);
    if (NULL != plan->sched && mca_coll_xccl_sched_level(plan->sched) && 0 == plan->sched->max_xfers) {
        plan->latency = mca_coll_xccl_latency_wanted(m, c->coll, plan->algo, &c->args, c->es,
                                                     c->reduction ? &c->red : NULL);
        plan->latency_v = !plan->latency &&
                          mca_coll_xccl_latency_v_nb_runs(m, c->coll, &c->args, c->bytes, plan->algo,
                                                          c->reduction ? &c->red : NULL);
        return 1;
    }
    if (NULL != plan->sched) {
        xccl_select_put(plan->sched);
    }
    return 0;
}

/* Before decide reads the layout for a blocking call that may run across
 * nodes: the set-up is over (it runs here if it has not: the same call on
 * every rank, which all make it), for this call and the nonblocking ones
 * after it. */
static inline void settle_nodes(mca_coll_xccl_call_t *c, const char *why)
{
    if (xccl_select_why_slower == why && NULL == c->request && across_nodes_candidate(c)) {
        (void) mca_coll_xccl_setup(c->m, 1);
        c->m->nodes_settled = 1;
    }
}

const char *mca_coll_xccl_call_decide(mca_coll_xccl_call_t *c)
{
    const char *why = policy(c);
    settle_small(c, why);
    settle_nodes(c, why);
    return decide(c, why);
}
