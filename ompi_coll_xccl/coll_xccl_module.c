/*
 * The xccl module of one communicator: query, enable (fallbacks, endpoints,
 * agreement), teardown.
 *
 * Agreement.  Whether xccl runs on a communicator must be decided the same
 * way on every member, or some ranks would run xccl's schedules while others
 * run the fallback's, and both would hang.  comm_query therefore declines
 * only for reasons every member sees alike (intercommunicator, context id or
 * size beyond the tag layout); it never looks at local state.  Everything
 * that can fail on one process only (its UCX set-up, a peer's address, an
 * endpoint, memory) is folded into one flag per rank, and module_enable
 * combines the flags of all members with nonblocking point-to-point messages
 * through the PML (never a collective: enable may run inside a progress
 * callback).  If any member failed, every member clears its function
 * pointers so that Open MPI keeps the modules it had: the communicator
 * works, without xccl.  module_enable itself always returns success, since
 * Open MPI 4.1 drops every module of the communicator when one fails.
 */
#include "ompi_config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "ompi/request/request.h"

#include "coll_xccl.h"
#include "gpu/xccl_gpu.h"
#include "topo/xccl_topo.h"

/* Tag of the agreement messages: the bottom of the range Open MPI reserves
 * for collective components, which no stock component uses. */
#define XCCL_AGREE_TAG (MCA_COLL_BASE_TAG_HCOLL_END)
/* Placement keys travel with the agreement up to this many ranks. */
#define XCCL_AGREE_MAX_KEYS 4096

static int xccl_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);

/* ------------------------------------------------------------ transport adapter */

static int tr_isend(void *ctx, int peer, const void *buf, size_t len, uint32_t seq, uint32_t idx,
                    void **req)
{
    mca_coll_xccl_module_t *m = ctx;
    return xccl_ucx_isend(m->eps[peer], buf, len,
                          xccl_ucx_tag(m->cid, (uint32_t) m->rank, seq, idx), req);
}

static int tr_irecv(void *ctx, int peer, void *buf, size_t len, uint32_t seq, uint32_t idx,
                    void **req)
{
    mca_coll_xccl_module_t *m = ctx;
    return xccl_ucx_irecv(buf, len, xccl_ucx_tag(m->cid, (uint32_t) peer, seq, idx), req);
}

static int tr_test(void *ctx, void *req)
{
    (void) ctx;
    return xccl_ucx_test(req);
}

static void tr_progress(void *ctx)
{
    (void) ctx;
    xccl_ucx_progress();
}

static void tr_cancel(void *ctx, void *req)
{
    (void) ctx;
    xccl_ucx_cancel(req);
}

/* ------------------------------------------------------------ object */

static void module_construct(mca_coll_xccl_module_t *m)
{
    memset((char *) m + sizeof(m->super), 0, sizeof(*m) - sizeof(m->super));
}

#define RELEASE_PREV(m, name)                          \
    do {                                               \
        if (NULL != (m)->prev_##name##_module) {       \
            OBJ_RELEASE((m)->prev_##name##_module);    \
            (m)->prev_##name##_module = NULL;          \
        }                                              \
    } while (0)

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

/* Runs when the communicator is freed (COMM_WORLD's in MPI_Finalize, before
 * the component closes): endpoints are released here, force-closed when
 * no other communicator uses them. */
static void module_destruct(mca_coll_xccl_module_t *m)
{
    mca_coll_xccl_gpu_ipc_fini(m);
    release_endpoints(m);
    free(m->scratch);
    xccl_layout_fini(&m->layout);
    RELEASE_PREV(m, allreduce);
    RELEASE_PREV(m, allgather);
    RELEASE_PREV(m, reduce_scatter);
    RELEASE_PREV(m, reduce_scatter_block);
    RELEASE_PREV(m, alltoall);
    RELEASE_PREV(m, bcast);
    RELEASE_PREV(m, iallreduce);
    RELEASE_PREV(m, iallgather);
    RELEASE_PREV(m, ireduce_scatter);
    RELEASE_PREV(m, ireduce_scatter_block);
    RELEASE_PREV(m, ialltoall);
    RELEASE_PREV(m, ibcast);
}

OBJ_CLASS_INSTANCE(mca_coll_xccl_module_t, mca_coll_base_module_t, module_construct,
                   module_destruct);

/* ------------------------------------------------------------ query */

mca_coll_base_module_t *mca_coll_xccl_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    const char *why = NULL;

    if (c->world_rank < 0) {
        c->world_rank = ompi_comm_rank(&ompi_mpi_comm_world.comm);
    }
    /* Only reasons that are the same on every member (see the top). */
    if (c->priority < 0) {
        why = "priority < 0";
    } else if (OMPI_COMM_IS_INTER(comm)) {
        why = "intercommunicator (not supported)";
    } else if (!xccl_compat_comm_cid_is_global(comm)) {
        why = "context id not the same on every member (MPI_Comm_create_from_group)";
    } else if (xccl_compat_comm_cid(comm) > XCCL_UCX_MAX_CID) {
        why = "context id beyond xccl's 16-bit tag field";
    } else if ((unsigned) ompi_comm_size(comm) > XCCL_UCX_MAX_RANKS) {
        why = "more ranks than xccl's 20-bit tag field";
    }
    if (why) {
        mca_coll_xccl_log(1, "comm comm=%u rank=%d declined: %s", xccl_compat_comm_cid(comm),
                          c->world_rank, why);
        return NULL;
    }

    mca_coll_xccl_module_t *m = OBJ_NEW(mca_coll_xccl_module_t);
    if (NULL == m) {
        return NULL;
    }
    *priority = c->priority;
    m->super.coll_module_enable = xccl_module_enable;
    m->super.coll_allreduce = mca_coll_xccl_allreduce;
    m->super.coll_allgather = mca_coll_xccl_allgather;
    m->super.coll_reduce_scatter = mca_coll_xccl_reduce_scatter;
    m->super.coll_reduce_scatter_block = mca_coll_xccl_reduce_scatter_block;
    m->super.coll_alltoall = mca_coll_xccl_alltoall;
    m->super.coll_bcast = mca_coll_xccl_bcast;
    m->super.coll_iallreduce = mca_coll_xccl_iallreduce;
    m->super.coll_iallgather = mca_coll_xccl_iallgather;
    m->super.coll_ireduce_scatter = mca_coll_xccl_ireduce_scatter;
    m->super.coll_ireduce_scatter_block = mca_coll_xccl_ireduce_scatter_block;
    m->super.coll_ialltoall = mca_coll_xccl_ialltoall;
    m->super.coll_ibcast = mca_coll_xccl_ibcast;
    return &m->super;
}

/* ------------------------------------------------------------ enable */

#define SAVE_PREV(m, comm, name)                                          \
    do {                                                                  \
        (m)->prev_##name = (comm)->c_coll->coll_##name;                   \
        (m)->prev_##name##_module = (comm)->c_coll->coll_##name##_module; \
        if (NULL == (m)->prev_##name || NULL == (m)->prev_##name##_module) { \
            why = "no fallback module for " #name;                        \
        } else {                                                          \
            OBJ_RETAIN((m)->prev_##name##_module);                        \
        }                                                                 \
    } while (0)

static const char *connect_peers(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    if (!c->ucx_ok) {
        return "UCX set-up failed on this process";
    }
    m->eps = calloc((size_t) m->size, sizeof(*m->eps));
    m->ep_keys = calloc((size_t) m->size, sizeof(*m->ep_keys));
    if (NULL == m->eps || NULL == m->ep_keys) {
        return "out of memory";
    }
    for (int i = 0; i < m->size; i++) {
        if (i == m->rank) {
            continue;
        }
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, i);
        opal_process_name_t name = proc->super.proc_name;
        uint64_t key = ((uint64_t) name.jobid << 32) | name.vpid;
        void *addr = NULL;
        size_t len = 0;
        int rc;
        OPAL_MODEX_RECV(rc, &c->super.collm_version, &name, &addr, &len);
        if (OPAL_SUCCESS != rc || NULL == addr || 0 == len) {
            free(addr);
            return "a peer published no xccl address";
        }
        rc = xccl_ucx_ep_get(key, addr, len, &m->eps[i]);
        free(addr);
        if (0 != rc) {
            return "endpoint creation failed";
        }
        m->ep_keys[i] = key;
    }
    return NULL;
}

/* Combine every member's flag: 1 if all are 1.  Rank 0 gathers and answers. */
static int agree(struct ompi_communicator_t *comm, int rank, int size, int mine, int key,
                 int *keys)
{
    /* Rank 0 gathers {flag, key} from everyone and answers with the
     * combined flag and every rank's key; in large communicators only with
     * the flag (the answers would grow as size^2), keys are then -1. */
    const int nans = size <= XCCL_AGREE_MAX_KEYS ? size + 1 : 1;
    int msg[2] = { mine, key }, all = mine, rc;
    if (NULL == keys) {
        msg[0] = all = mine = 0;         /* take part, then everyone fails */
    } else {
        keys[rank] = key;
    }
    if (size == 1) {
        return mine;
    }
    if (rank != 0) {
        ompi_request_t *req;
        int *answer = malloc((size_t) (size + 1) * sizeof(int));
        if (NULL == answer) {
            msg[0] = 0;                  /* still take part, then fail */
        }
        rc = MCA_PML_CALL(isend(msg, 2, MPI_INT, 0, XCCL_AGREE_TAG, MCA_PML_BASE_SEND_STANDARD,
                                comm, &req));
        if (OMPI_SUCCESS == rc) {
            rc = ompi_request_wait(&req, MPI_STATUS_IGNORE);
        }
        if (OMPI_SUCCESS == rc) {
            int dummy[1];
            /* Without memory, receive into a short buffer: truncation is an
             * error here, and the answer is "no" anyway. */
            rc = MCA_PML_CALL(irecv(answer ? answer : dummy, answer ? nans : 1, MPI_INT, 0,
                                    XCCL_AGREE_TAG, comm, &req));
        }
        if (OMPI_SUCCESS == rc) {
            rc = ompi_request_wait(&req, MPI_STATUS_IGNORE);
        }
        all = OMPI_SUCCESS == rc && NULL != answer && answer[0];
        if (all && NULL != keys) {
            for (int i = 0; i < size; i++) {
                keys[i] = nans > 1 ? answer[1 + i] : -1;
            }
        }
        free(answer);
        return all;
    }
    int *got = malloc((size_t) 2 * size * sizeof(int));
    int *answer = malloc((size_t) (size + 1) * sizeof(int));
    ompi_request_t **reqs = malloc((size_t) size * sizeof(*reqs));
    if (NULL == got || NULL == reqs || NULL == answer) {
        /* Still answer everyone so that nobody waits forever. */
        all = 0;
        for (int i = 1; i < size; i++) {
            int dummy[2];
            MCA_PML_CALL(recv(dummy, 2, MPI_INT, i, XCCL_AGREE_TAG, comm, MPI_STATUS_IGNORE));
        }
        for (int i = 1; i < size; i++) {
            MCA_PML_CALL(send(&all, 1, MPI_INT, i, XCCL_AGREE_TAG, MCA_PML_BASE_SEND_STANDARD, comm));
        }
    } else {
        for (int i = 1; i < size; i++) {
            reqs[i - 1] = MPI_REQUEST_NULL;
            MCA_PML_CALL(irecv(&got[2 * i], 2, MPI_INT, i, XCCL_AGREE_TAG, comm, &reqs[i - 1]));
        }
        rc = ompi_request_wait_all((size_t) size - 1, reqs, MPI_STATUSES_IGNORE);
        for (int i = 1; i < size; i++) {
            all = all && got[2 * i] && OMPI_SUCCESS == rc;
            answer[1 + i] = got[2 * i + 1];
        }
        answer[0] = all;
        answer[1] = key;
        if (NULL != keys) {
            for (int i = 0; i < size; i++) {
                keys[i] = nans > 1 ? answer[1 + i] : -1;
            }
        }
        for (int i = 1; i < size; i++) {
            MCA_PML_CALL(send(answer, nans, MPI_INT, i, XCCL_AGREE_TAG,
                              MCA_PML_BASE_SEND_STANDARD, comm));
        }
    }
    free(got);
    free(answer);
    free(reqs);
    return all;
}

/* Where this process runs inside its node, for the ring order inside the
 * node.  With a current CUDA context on a device the node's topology knows:
 * XCCL_KEY_GPU + the device's position on the ring that follows the GPU
 * wiring (xccl_topo_ring_order: NVLink, then PCIe switch and socket), so
 * ranks on linked devices are neighbours and ranks sharing a device are
 * adjacent.  Else package * 65536 + lowest CPU of its binding, from sysfs,
 * or XCCL_KEY_UNBOUND when it is not bound to a strict subset of the CPUs
 * (no order to follow), plus XCCL_KEY_CUDA when it has a CUDA context on
 * a device the topology does not know.  Every rank computes its own key
 * from its own node's view; all ranks then sort the keys they exchanged
 * the same way. */
#define XCCL_KEY_GPU (1 << 30)
#define XCCL_KEY_CUDA (1 << 29)
#define XCCL_KEY_UNBOUND (XCCL_KEY_CUDA - 1)
#define KEY_CPU(k) ((k) & XCCL_KEY_UNBOUND)

/* With a CUDA context: its ring position key, else XCCL_KEY_CUDA.  Else -1. */
static int gpu_placement_key(void)
{
    const xccl_topo_t *topo = mca_coll_xccl_component.topo;
    char pci[32];
    int order[XCCL_TOPO_MAX_DEVS];
    if (0 != xccl_gpu_current_pci(pci, sizeof(pci))) {
        return -1;
    }
    if (NULL == topo) {
        return XCCL_KEY_CUDA;
    }
    int n = xccl_topo_ring_order(topo, order);
    for (int k = 0; k < n; k++) {
        if (0 == strcasecmp(topo->devs[order[k]].loc.pci, pci)) {
            return XCCL_KEY_GPU + k;
        }
    }
    return XCCL_KEY_CUDA;
}

static int placement_key(void)
{
    int gpu = gpu_placement_key();
    if (gpu >= XCCL_KEY_GPU) {
        return gpu;
    }
    const int cuda = gpu >= 0 ? XCCL_KEY_CUDA : 0;
    cpu_set_t set;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (0 != sched_getaffinity(0, sizeof(set), &set) || ncpu <= 0 || CPU_COUNT(&set) >= ncpu) {
        return cuda | XCCL_KEY_UNBOUND;
    }
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set)) {
        cpu++;
    }
    if (cpu >= CPU_SETSIZE || cpu >= 65536) {
        return cuda | XCCL_KEY_UNBOUND;
    }
    char path[96];
    int package = 0;
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    FILE *f = fopen(path, "r");
    if (NULL != f) {
        /* below XCCL_KEY_UNBOUND */
        if (1 != fscanf(f, "%d", &package) || package < 0 ||
            package >= XCCL_KEY_UNBOUND / 65536) {
            package = 0;
        }
        fclose(f);
    }
    return cuda | (package * 65536 + cpu);
}

typedef struct {
    int key, rank;
} key_rank_t;

static int cmp_key_rank(const void *a, const void *b)
{
    const key_rank_t *x = a, *y = b;
    return x->key != y->key ? (x->key < y->key ? -1 : 1) : x->rank - y->rank;
}

/* Orders the ranks of each node by where they run (GPU ring position, or
 * package then CPU), so that rings inside a node follow the wiring instead
 * of hopping across sockets in communicator order.  Nodes where a rank is
 * unbound, or some ranks have a GPU key and others not, keep the
 * communicator order.  keys are the same on every rank: so is the order. */
static void order_nodes(mca_coll_xccl_module_t *m, const int *keys)
{
    key_rank_t *kr = malloc((size_t) m->layout.max_ppn * sizeof(*kr));
    int *order = malloc((size_t) m->layout.max_ppn * sizeof(int));
    for (int n = 0; NULL != kr && NULL != order && n < m->layout.nnodes; n++) {
        const int ln = xccl_layout_node_size(&m->layout, n);
        const int *members = xccl_layout_node_members(&m->layout, n);
        int bound = 1, changed = 0, gpus = 0;
        for (int i = 0; i < ln; i++) {
            kr[i].key = keys[members[i]];
            kr[i].rank = members[i];
            gpus += kr[i].key >= XCCL_KEY_GPU;
        }
        for (int i = 0; i < ln && 0 == gpus; i++) {
            kr[i].key = kr[i].key < 0 ? XCCL_KEY_UNBOUND : KEY_CPU(kr[i].key);
            bound = bound && XCCL_KEY_UNBOUND != kr[i].key;
        }
        bound = bound && (0 == gpus || ln == gpus);
        if (!bound || ln < 2) {
            continue;
        }
        qsort(kr, (size_t) ln, sizeof(*kr), cmp_key_rank);
        for (int i = 0; i < ln; i++) {
            order[i] = kr[i].rank;
            changed = changed || order[i] != members[i];
        }
        if (changed && 0 == xccl_layout_set_order(&m->layout, n, order)) {
            char line[256];
            int len = 0;
            for (int i = 0; i < ln && len < (int) sizeof(line) - 12; i++) {
                len += snprintf(line + len, sizeof(line) - (size_t) len, " %d", order[i]);
            }
            mca_coll_xccl_log(2, "comm comm=%u node %d: ranks in placement order (%s):%s%s",
                              m->cid, n, gpus ? "gpu ring" : "cpu", line,
                              len >= (int) sizeof(line) - 12 ? " ..." : "");
        }
    }
    free(kr);
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
static const char *map_nodes(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm)
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
    if (NULL == hr || NULL == id) {
        why = "out of memory mapping ranks to nodes";
        goto out;
    }
    for (int r = 0; r < p; r++) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, r);
        hr[r].host = NULL != proc ? opal_get_proc_hostname(&proc->super) : NULL;
        hr[r].rank = r;
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
    free(hr);
    free(id);
    return why;
}

static int xccl_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_xccl_module_t *m = (mca_coll_xccl_module_t *) module;
    const char *why = NULL;

    m->comm = comm;
    m->rank = ompi_comm_rank(comm);
    m->size = ompi_comm_size(comm);
    m->world_rank = mca_coll_xccl_component.world_rank;
    m->cid = xccl_compat_comm_cid(comm);
    m->transport.ctx = m;
    m->transport.isend = tr_isend;
    m->transport.irecv = tr_irecv;
    m->transport.test = tr_test;
    m->transport.progress = tr_progress;
    m->transport.cancel = tr_cancel;

    SAVE_PREV(m, comm, allreduce);
    SAVE_PREV(m, comm, allgather);
    SAVE_PREV(m, comm, reduce_scatter);
    SAVE_PREV(m, comm, reduce_scatter_block);
    SAVE_PREV(m, comm, alltoall);
    SAVE_PREV(m, comm, bcast);
    SAVE_PREV(m, comm, iallreduce);
    SAVE_PREV(m, comm, iallgather);
    SAVE_PREV(m, comm, ireduce_scatter);
    SAVE_PREV(m, comm, ireduce_scatter_block);
    SAVE_PREV(m, comm, ialltoall);
    SAVE_PREV(m, comm, ibcast);
    if (NULL == why) {
        why = map_nodes(m, comm);
    }
    if (NULL == why) {
        why = connect_peers(m, comm);
    }

    int *keys = malloc((size_t) m->size * sizeof(int));
    if (NULL == keys && NULL == why) {
        why = "out of memory";
    }
    if (!agree(comm, m->rank, m->size, NULL == why, placement_key(), keys)) {
        free(keys);
        mca_coll_xccl_log(1, "comm comm=%u rank=%d size=%d disabled: %s", m->cid, m->world_rank,
                          m->size, why ? why : "set-up failed on another rank");
        release_endpoints(m);
        /* Leave the communicator to the modules it had. */
        m->super.coll_allreduce = NULL;
        m->super.coll_allgather = NULL;
        m->super.coll_reduce_scatter = NULL;
        m->super.coll_reduce_scatter_block = NULL;
        m->super.coll_alltoall = NULL;
        m->super.coll_bcast = NULL;
        m->super.coll_iallreduce = NULL;
        m->super.coll_iallgather = NULL;
        m->super.coll_ireduce_scatter = NULL;
        m->super.coll_ireduce_scatter_block = NULL;
        m->super.coll_ialltoall = NULL;
        m->super.coll_ibcast = NULL;
        return OMPI_SUCCESS;
    }
    order_nodes(m, keys);
    m->gpu_ipc = m->size > 1 && 1 == m->layout.nnodes;
    for (int i = 0; i < m->size; i++) {
        m->gpu_ipc = m->gpu_ipc && keys[i] >= 0 && (keys[i] & (XCCL_KEY_GPU | XCCL_KEY_CUDA));
    }
    free(keys);
    if (comm == &ompi_mpi_comm_world.comm) {
        mca_coll_xccl_component.world_active = true;
    }
    mca_coll_xccl_log(2, "comm comm=%u rank=%d size=%d enabled (name %s) nodes=%d ppn=%d..%d%s",
                      m->cid, m->world_rank, m->size, comm->c_name, m->layout.nnodes,
                      m->layout.min_ppn, m->layout.max_ppn, m->gpu_ipc ? " cuda_ipc" : "");
    return OMPI_SUCCESS;
}
