/*
 * Set-up of a communicator on first use.
 *
 * module_enable runs inside Open MPI's communicator activation, which may
 * be progressed from opal_progress (nonblocking communicator creation, at
 * any thread level): nothing there may wait for another rank.  So enable
 * only saves the fallbacks, and what needs the other ranks happens in the
 * first call that xccl runs itself on the communicator.  That call is the
 * same call on every member (xccl's decision to run a call depends only on
 * arguments and parameters all members share, and collectives are called
 * in the same order everywhere), so every member starts the same agreement
 * at the same point of its sequence of collectives:
 *
 *  - local part: the node of every rank (host names, or
 *    coll_xccl_node_layout), this process's placement key, and UCX
 *    endpoints to the peers (addresses from the modex; a process whose UCX
 *    did not start published a one-byte marker instead, so nobody waits
 *    for a missing key);
 *  - agreement: one allgather of {flags, key} through the saved fallback
 *    (its allgather for a blocking call, its iallgather for a nonblocking
 *    one, which never waits);
 *  - finish: every member sees the same flags and keys, so all order the
 *    ranks inside the nodes alike and choose the same transport: UCX when
 *    every member connected to every peer, else Open MPI's PML.
 *
 * Whether a call runs xccl's schedule or the fallback's never depends on
 * the agreement: a nonblocking call cannot wait for it, and a decision made
 * before it is known locally would differ between ranks.  Only the
 * transport and the order inside the nodes do, and a nonblocking call that
 * comes before the agreement is in builds its schedule afterwards.
 */
#include "ompi_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/op/op.h"
#include "ompi/proc/proc.h"
#include "ompi/request/request.h"
#include "opal/runtime/opal_progress.h"

#include "coll_xccl_setup.h"
#include "coll_xccl_level.h"
#include "coll_xccl_transport.h"
#include "gpu/xccl_gpu.h"
#include "topo/xccl_topo.h"

/* The agreement's flags: what this rank could set up. */
#define XCCL_OK_UCX 1                /* an endpoint to every peer */
#define XCCL_OK_NODES 2              /* the node of every rank */

/* ------------------------------------------------------------ endpoints */

static void release_endpoints(mca_coll_xccl_module_t *m)
{
    if (NULL != m->eps) {
        for (int i = 0; i < m->size; i++) {
            if (NULL != m->eps[i]) {
                xccl_ucx_ep_put(m->ep_keys[i]);
            }
        }
    }
    free(m->eps);
    free(m->ep_keys);
    m->eps = NULL;
    m->ep_keys = NULL;
}

/* UCX endpoints to every peer; NULL, or why not (then none are kept). */
static const char *connect_peers(mca_coll_xccl_module_t *m)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    const char *why = NULL;
    if (!c->ucx_ok) {
        return "UCX did not start on this process";
    }
    m->eps = calloc((size_t) m->size, sizeof(*m->eps));
    m->ep_keys = calloc((size_t) m->size, sizeof(*m->ep_keys));
    if (NULL == m->eps || NULL == m->ep_keys) {
        why = "out of memory";
    }
    for (int i = 0; NULL == why && i < m->size; i++) {
        if (i == m->rank) {
            continue;
        }
        ompi_proc_t *proc = ompi_comm_peer_lookup(m->comm, i);
        opal_process_name_t name = proc->super.proc_name;
        uint64_t key = ((uint64_t) name.jobid << 32) | name.vpid;
        void *addr = NULL;
        size_t len = 0;
        int rc;
        /* A peer with a cached endpoint needs no modex look-up (PMIx 5.0.7
         * leaks a few hundred bytes per PMIx_Get, which adds up over many
         * communicators). */
        if (0 == xccl_ucx_ep_ref(key, &m->eps[i])) {
            m->ep_keys[i] = key;
            continue;
        }
        OPAL_MODEX_RECV(rc, &c->super.collm_version, &name, &addr, &len);
        if (OPAL_SUCCESS != rc || NULL == addr || len <= 1) {
            why = len == 1 ? "a peer has no UCX" : "a peer published no xccl address";
        } else if (0 != xccl_ucx_ep_get(key, addr, len, &m->eps[i])) {
            why = "endpoint creation failed";
        } else {
            m->ep_keys[i] = key;
            /* once per peer process for the process's life (the cache
             * keeps it): xccl_comm_churn.reuse counts these */
            mca_coll_xccl_log(2, "comm comm=%u rank=%d: new UCX endpoint to rank %d", m->cid,
                              m->world_rank, i);
        }
        free(addr);
    }
    if (NULL != why) {
        release_endpoints(m);
    }
    return why;
}

/* ------------------------------------------------------------ placement */

/* Where this process runs inside its node, for the order of the ranks
 * inside the node (topo/topo_place.c): its GPU's position on the node's
 * ring when it has a current CUDA context on a device the topology knows,
 * else package and CPU of its binding.  Every rank computes its own key
 * from its own node's view; all ranks then order the keys they exchanged
 * the same way. */
static int placement_key(void)
{
    char pci[32];
    const char *cuda = 0 == xccl_gpu_current_pci(pci, sizeof(pci)) ? pci : NULL;
    return xccl_topo_placement_key(mca_coll_xccl_component.topo, cuda);
}

/* Orders the ranks of each node by where they run (GPU ring position, or
 * package then CPU), so that rings inside a node follow the wiring instead
 * of hopping across sockets in communicator order.  Nodes where a rank is
 * unbound, or some ranks have a GPU key and others not, keep the
 * communicator order.  keys are the same on every rank: so is the order. */
static void order_nodes(mca_coll_xccl_module_t *m, const int *keys)
{
    int *node_keys = malloc((size_t) m->layout.max_ppn * sizeof(int));
    int *order = malloc((size_t) m->layout.max_ppn * sizeof(int));
    for (int n = 0; NULL != node_keys && NULL != order && n < m->layout.nnodes; n++) {
        const int ln = xccl_layout_node_size(&m->layout, n);
        const int *members = xccl_layout_node_members(&m->layout, n);
        int changed = 0;
        for (int i = 0; i < ln; i++) {
            node_keys[i] = keys[members[i]];
        }
        const int how = xccl_topo_placement_order(node_keys, members, ln, order);
        if (XCCL_TOPO_ORDER_KEEP == how) {
            continue;
        }
        for (int i = 0; i < ln; i++) {
            changed = changed || order[i] != members[i];
        }
        if (changed && 0 == xccl_layout_set_order(&m->layout, n, order)) {
            char line[256];
            int len = 0;
            for (int i = 0; i < ln && len < (int) sizeof(line) - 12; i++) {
                len += snprintf(line + len, sizeof(line) - (size_t) len, " %d", order[i]);
            }
            mca_coll_xccl_log(2, "comm comm=%u node %d: ranks in placement order (%s):%s%s",
                              m->cid, n, XCCL_TOPO_ORDER_GPU == how ? "gpu ring" : "cpu", line,
                              len >= (int) sizeof(line) - 12 ? " ..." : "");
        }
    }
    free(node_keys);
    free(order);
}

/* ------------------------------------------------------------ nodes */

typedef struct {
    const char *host;
    int rank;
} host_rank_t;

static int cmp_host_rank(const void *a, const void *b)
{
    const host_rank_t *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : x->rank - y->rank;
}

/* Node of every rank, from the host names Open MPI's runtime knows for each
 * process (no messages, no rank arithmetic), or from coll_xccl_node_layout.
 * Every member computes the same layout.  Returns NULL, or why it could
 * not. */
static const char *map_nodes(mca_coll_xccl_module_t *m)
{
    const int p = m->size;
    const char *spec = mca_coll_xccl_component.node_layout;
    if (NULL != spec && spec[0]) {
        char err[128];
        if (0 == xccl_layout_parse(&m->layout, spec, p, err, sizeof(err))) {
            return NULL;
        }
        /* Same on every rank (same string, same size): all fall back alike. */
        mca_coll_xccl_log(1, "comm comm=%u: coll_xccl_node_layout \"%s\" ignored (%s); using "
                          "the host names", m->cid, spec, err);
    }
    host_rank_t *hr = malloc((size_t) p * sizeof(*hr));
    int *id = malloc((size_t) p * sizeof(int));
    const char *why = NULL;
    int got = 0;
    if (NULL == hr || NULL == id) {
        why = "out of memory mapping ranks to nodes";
        goto out;
    }
    for (int r = 0; r < p; r++) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(m->comm, r);
        hr[r].host = NULL != proc ? xccl_compat_proc_hostname(&proc->super) : NULL;
        hr[r].rank = r;
        got = r + 1;
        if (NULL == hr[r].host || 0 == strcmp(hr[r].host, "unknown")) {
            why = "the host of a rank is unknown";
            goto out;
        }
    }
    /* Sort by host name; equal names, equal ids. */
    qsort(hr, (size_t) p, sizeof(*hr), cmp_host_rank);
    for (int i = 0, n = -1; i < p; i++) {
        if (0 == i || 0 != strcmp(hr[i].host, hr[i - 1].host)) {
            n++;
        }
        id[hr[i].rank] = n;
    }
    if (0 != xccl_layout_init(&m->layout, p, id)) {
        why = "out of memory mapping ranks to nodes";
    }
out:
    for (int i = 0; i < got; i++) {
        xccl_compat_proc_hostname_release(hr[i].host);
    }
    free(hr);
    free(id);
    return why;
}

/* All ranks on one node: the layout of last resort (flat algorithms). */
static int one_node(mca_coll_xccl_module_t *m)
{
    int *id = calloc((size_t) m->size, sizeof(int));
    int rc = NULL != id ? xccl_layout_init(&m->layout, m->size, id) : -1;
    free(id);
    return rc;
}

/* ------------------------------------------------------------ agreement */

static bool with_keys(const mca_coll_xccl_module_t *m)
{
    return m->size <= XCCL_AGREE_MAX_KEYS;
}

/* The local part: this rank's flags and key in m->agree_msg, and the
 * buffer for everyone's.  Logs why something failed. */
static int setup_local(mca_coll_xccl_module_t *m)
{
    const char *nodes = map_nodes(m);
    const char *ucx = connect_peers(m);
    m->agree_msg[0] = (NULL == nodes ? XCCL_OK_NODES : 0) | (NULL == ucx ? XCCL_OK_UCX : 0);
    m->agree_msg[XCCL_AGREE_KEY] = placement_key();
    m->agree_msg[XCCL_AGREE_FLAGS] |=
        mca_coll_xccl_level_local(m, NULL == nodes, &m->agree_msg[XCCL_AGREE_DESC]) |
        mca_coll_xccl_level_vote_gen(m->cid) << XCCL_AGREE_VOTE_SHIFT;
    if (nodes) {
        mca_coll_xccl_log(1, "comm comm=%u rank=%d: %s", m->cid, m->world_rank, nodes);
    }
    if (ucx) {
        mca_coll_xccl_log(2, "comm comm=%u rank=%d: no UCX path: %s", m->cid, m->world_rank, ucx);
    }
    m->agree_all = malloc((size_t) (with_keys(m) ? XCCL_AGREE_INTS * m->size : 1) * sizeof(int));
    return NULL == m->agree_all ? OMPI_ERR_OUT_OF_RESOURCE : MPI_SUCCESS;
}

/* Starts (or, blocking, runs) the exchange of {flags, key}: an allgather
 * of both, or in large communicators an allreduce (bitwise and) of the
 * flags, through the fallback modules. */
static int agree(mca_coll_xccl_module_t *m, int wait)
{
    struct ompi_communicator_t *comm = m->comm;
    struct ompi_datatype_t *t = &ompi_mpi_int.dt;
    if (with_keys(m)) {
        const int n = XCCL_AGREE_INTS;
        return wait ? m->prev.allgather(m->agree_msg, n, t, m->agree_all, n, t, comm,
                                        m->prev.allgather_module)
                    : m->prev.iallgather(m->agree_msg, n, t, m->agree_all, n, t, comm,
                                         &m->agree_req, m->prev.iallgather_module);
    }
    struct ompi_op_t *band = &ompi_mpi_op_band.op;
    return wait ? m->prev.allreduce(m->agree_msg, m->agree_all, 1, t, band, comm,
                                    m->prev.allreduce_module)
                : m->prev.iallreduce(m->agree_msg, m->agree_all, 1, t, band, comm,
                                     &m->agree_req, m->prev.iallreduce_module);
}

/* Everyone's flags and keys are in (rc: how the exchange ended). */
static void setup_finish(mca_coll_xccl_module_t *m, int rc)
{
    int flags = XCCL_OK_UCX | XCCL_OK_NODES;
    int *keys = NULL;
    if (MPI_SUCCESS != rc) {
        flags = 0;
        mca_coll_xccl_log(1, "comm comm=%u rank=%d: the set-up agreement failed (%d)", m->cid,
                          m->world_rank, rc);
    } else if (with_keys(m)) {
        keys = malloc((size_t) m->size * sizeof(int));
        for (int i = 0; i < m->size; i++) {
            const int gen = m->agree_all[XCCL_AGREE_INTS * i] >> XCCL_AGREE_VOTE_SHIFT &
                            XCCL_AGREE_VOTE_MASK;
            m->level_vote.gen = gen > m->level_vote.gen ? gen : m->level_vote.gen;
            flags &= m->agree_all[XCCL_AGREE_INTS * i];
            if (keys) {
                keys[i] = m->agree_all[XCCL_AGREE_INTS * i + 1];
            }
        }
        mca_coll_xccl_level_finish(m, flags & XCCL_OK_NODES, m->agree_all, XCCL_AGREE_INTS);
    } else {
        flags &= m->agree_all[0];
    }
    free(m->agree_all);
    m->agree_all = NULL;
    if (!(flags & XCCL_OK_NODES)) {
        xccl_layout_fini(&m->layout);
        if (0 != one_node(m)) {
            flags = 0;
        }
    }
    if (!(flags & XCCL_OK_UCX)) {
        release_endpoints(m);
    }
    mca_coll_xccl_transport_use(m, flags & XCCL_OK_UCX);
    m->gpu_ipc = m->size > 1 && 1 == m->layout.nnodes && NULL != keys;
    if (NULL != keys) {
        order_nodes(m, keys);
        for (int i = 0; i < m->size; i++) {
            m->gpu_ipc = m->gpu_ipc && xccl_topo_key_has_cuda(keys[i]);
        }
    }
    free(keys);
    mca_coll_xccl_level_vote_start(m);     /* the transport and layout are final */
    if (m->comm == &ompi_mpi_comm_world.comm) {
        mca_coll_xccl_component.world_active = true;
    }
    /* The PML transport is worth saying at verbose 1 (xccl is slower
     * there), except on a process without UCX: it said so once already. */
    mca_coll_xccl_log(m->ucx || !mca_coll_xccl_component.ucx_ok ? 2 : 1, "comm comm=%u rank=%d size=%d set up (name %s) nodes=%d "
                      "ppn=%d..%d transport=%s%s", m->cid, m->world_rank, m->size, m->comm->c_name,
                      m->layout.nnodes, m->layout.min_ppn, m->layout.max_ppn,
                      m->ucx ? "ucx" : "pml (a rank has no UCX path to a peer)",
                      m->gpu_ipc ? " cuda_ipc" : "");
    opal_atomic_wmb();
    m->setup = XCCL_SETUP_DONE;
}

int mca_coll_xccl_setup_test(mca_coll_xccl_module_t *m)
{
    if (XCCL_SETUP_DONE == m->setup) {
        opal_atomic_rmb();
        return 1;
    }
    int done = 0;
    OPAL_THREAD_LOCK(&m->setup_lock);
    if (XCCL_SETUP_PENDING == m->setup && REQUEST_COMPLETE(m->agree_req)) {
        int rc = m->agree_req->req_status.MPI_ERROR;
        ompi_request_free(&m->agree_req);
        setup_finish(m, rc);
    }
    done = XCCL_SETUP_DONE == m->setup;
    OPAL_THREAD_UNLOCK(&m->setup_lock);
    return done;
}

/* Starts the set-up (blocking: runs the agreement); mca_coll_xccl_setup
 * waits for the rest. */
static int setup_start(mca_coll_xccl_module_t *m, int wait)
{
    if (mca_coll_xccl_setup_test(m)) {
        return MPI_SUCCESS;
    }
    if (XCCL_SETUP_NONE == m->setup) {
        /* Only the thread making a collective call on this communicator
         * gets here (MPI lets one at a time), and nothing else reads the
         * state before it is PENDING. */
        int rc = setup_local(m);
        if (MPI_SUCCESS != rc) {
            return rc;
        }
        if (m->size == 1) {
            memcpy(m->agree_all, m->agree_msg, sizeof(m->agree_msg));
            setup_finish(m, MPI_SUCCESS);
            return MPI_SUCCESS;
        }
        /* The fallback's agreement call may make collectives of its own
         * on this communicator (han creates its sub-communicators in its
         * first call, with an iallreduce of the parent's): those find the
         * state AGREEING and go to the fallback (mca_coll_xccl_call_fallback),
         * alike on every rank, since every rank is inside the same call. */
        m->setup = XCCL_SETUP_AGREEING;
        rc = agree(m, wait);
        if (wait || MPI_SUCCESS != rc) {
            setup_finish(m, rc);
            return MPI_SUCCESS;
        }
        opal_atomic_wmb();
        m->setup = XCCL_SETUP_PENDING;
    }
    return MPI_SUCCESS;
}

/* Blocking, the vote ends too: a blocking call that returned before it
 * could see its communicator freed while the vote ran, its peers' vote
 * messages left behind (coll_xccl_level_vote.c, vote_gen). */
int mca_coll_xccl_setup(mca_coll_xccl_module_t *m, int wait)
{
    const int rc = setup_start(m, wait);
    if (MPI_SUCCESS == rc && wait) {
        mca_coll_xccl_setup_settle(m);
    }
    return rc;
}

void mca_coll_xccl_setup_fini(mca_coll_xccl_module_t *m)
{
    /* A pending agreement holds a request of the call that started it,
     * which holds this module: the module goes only after it is done. */
    if (XCCL_SETUP_PENDING == m->setup && !REQUEST_COMPLETE(m->agree_req)) {
        mca_coll_xccl_log(1, "comm comm=%u rank=%d: freed during its set-up agreement; its "
                          "buffers are left to it", m->cid, m->world_rank);
        m->agree_all = NULL;
    } else if (XCCL_SETUP_PENDING == m->setup) {
        ompi_request_free(&m->agree_req);
    }
    mca_coll_xccl_level_fini(m);          /* a vote in flight uses the endpoints */
    release_endpoints(m);
    free(m->agree_all);
    m->agree_all = NULL;
    xccl_layout_fini(&m->layout);
}

void mca_coll_xccl_setup_settle(mca_coll_xccl_module_t *m)
{
    if (XCCL_SETUP_NONE == m->setup || XCCL_SETUP_AGREEING == m->setup) {
        return;                      /* the call sets up, then waits; or runs inside it */
    }
    while (!mca_coll_xccl_setup_test(m) || !mca_coll_xccl_level_ready(m)) {
        opal_progress();
    }
}
