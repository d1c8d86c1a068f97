/*
 * The intra-node shared-memory level of a communicator (docs/shm-level.md):
 * one segment per node (ucx_glue/xccl_shm.h), its provider of peer access
 * (coll_xccl_shm_peer.h), and when the schedules may use it.
 *
 * Set-up rides on the communicator's set-up (coll_xccl_setup.c), never in
 * module_enable and never waiting for another rank there:
 *  - local part: the first rank of each node with two or more ranks creates
 *    the node's segment; its 64-byte descriptor goes into its agreement
 *    record;
 *  - finish: every other rank of the node attaches with its leader's
 *    descriptor (no waiting: the segment exists since the leader's local
 *    part);
 *  - vote: whether every rank attached must be known alike everywhere, so
 *    the first *blocking* call xccl runs after that votes (allreduce MIN
 *    through the fallback).  Every rank makes that call at the same point
 *    of its sequence of collectives (whether xccl runs a call depends only
 *    on what all ranks share, and the state below changes only in such a
 *    call), so all switch the level on, or off for good, at the same call.
 *
 * Which calls use it: blocking calls (nonblocking ones keep the transport:
 * a communicator has one slot per rank, and two shared-memory schedules in
 * flight at once would share it).  Small messages (below
 * coll_xccl_small_msg_bytes) that would go to the fallback run xccl's
 * shared-memory algorithms instead where the whole communicator is one
 * node and the level is on.
 */
#include "ompi_config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/op/op.h"
#include "opal/runtime/opal_progress.h"

#include "coll_xccl_call.h"
#include "coll_xccl_shm_peer.h"

struct mca_coll_xccl_shm {
    xccl_shm_t *seg;                 /* this node's segment, NULL if none */
    xccl_shm_peer_t peer;
    int *local_of;                   /* communicator rank -> rank in its node's segment */
    int node_size;
    int leader;                      /* communicator rank that created this node's segment */
    int ok;                          /* this rank's vote: the node's segment is mapped here */
    uint64_t fast_seq;               /* allreduce calls through the latency lines */
    char why[160];                   /* why not, for the log */
};

void mca_coll_xccl_shm_init(mca_coll_xccl_module_t *m)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    m->shm_state = XCCL_SHM_OFF;
    if (c->shm_bytes > 0 && m->size > 1 && m->size <= XCCL_AGREE_MAX_KEYS) {
        m->shm_state = XCCL_SHM_UNDECIDED;
    }
    m->shm_small = XCCL_SHM_UNDECIDED == m->shm_state && c->shm_small;
}

static void set_why(struct mca_coll_xccl_shm *h, const char *what, int err)
{
    if (!h->why[0]) {
        snprintf(h->why, sizeof(h->why), "%s%s%s", what, err ? ": " : "", err ? strerror(-err) : "");
    }
}

void mca_coll_xccl_shm_local(mca_coll_xccl_module_t *m, int nodes_ok, int *desc)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    memset(desc, 0, XCCL_SHM_DESC_BYTES);
    if (XCCL_SHM_UNDECIDED != m->shm_state) {
        return;
    }
    struct mca_coll_xccl_shm *h = calloc(1, sizeof(*h));
    if (NULL == h || NULL == (h->local_of = malloc((size_t) m->size * sizeof(int)))) {
        free(h);
        return;                      /* m->shm NULL: votes no */
    }
    m->shm = h;
    if (!nodes_ok) {
        set_why(h, "the nodes of the ranks are unknown", 0);
        return;
    }
    /* Segment ranks: the order of the members before placement ordering
     * (the same on every rank; schedules name communicator ranks). */
    const int node = m->layout.node_of[m->rank];
    for (int n = 0; n < m->layout.nnodes; n++) {
        const int *mem = xccl_layout_node_members(&m->layout, n);
        for (int i = 0; i < xccl_layout_node_size(&m->layout, n); i++) {
            h->local_of[mem[i]] = i;
        }
    }
    h->node_size = xccl_layout_node_size(&m->layout, node);
    h->leader = xccl_layout_node_members(&m->layout, node)[0];
    /* A rank alone on its node gets a segment of its own too: the two-level
     * schedules give every rank's intra-node stage a slot. */
    if (h->leader != m->rank) {
        return;
    }
    xccl_shm_desc_t d;
    int rc = xccl_shm_create((xccl_shm_kind_t) c->shm_kind, h->node_size, 0, c->shm_bytes, &h->seg, &d);
    if (0 != rc) {
        set_why(h, "creating the node's segment failed", rc);
        return;
    }
    memcpy(desc, d.bytes, XCCL_SHM_DESC_BYTES);
}

void mca_coll_xccl_shm_finish(mca_coll_xccl_module_t *m, int nodes_ok, const int *all, int stride)
{
    struct mca_coll_xccl_shm *h = m->shm;
    if (NULL == h || h->why[0]) {
        return;
    }
    if (!nodes_ok) {
        set_why(h, "a rank does not know the nodes", 0);
        return;
    }
    if (h->leader == m->rank) {
        h->ok = NULL != h->seg;
    } else {
        xccl_shm_desc_t d;
        memcpy(d.bytes, all + (size_t) h->leader * (size_t) stride, XCCL_SHM_DESC_BYTES);
        int rc = xccl_shm_attach(&d, h->local_of[m->rank], &h->seg);
        if (0 != rc) {
            set_why(h, -EACCES == rc || -EPERM == rc
                           ? "attaching the node's memfd segment was refused (try coll_xccl_shm_kind sysv)"
                           : "attaching the node's segment failed", rc);
            h->seg = NULL;
        } else {
            h->ok = 1;
        }
    }
}

/* Off for good: what the level held goes. */
static void shm_off(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_shm *h = m->shm;
    m->shm_state = XCCL_SHM_OFF;
    m->shm_small = 0;
    if (NULL != h) {
        if (NULL != h->seg) {
            xccl_shm_detach(h->seg);
        }
        free(h->local_of);
        free(h);
        m->shm = NULL;
    }
}

int mca_coll_xccl_shm_vote(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_shm *h = m->shm;
    int mine = NULL != h && h->ok, all = 0;
    int rc = m->prev.allreduce(&mine, &all, 1, &ompi_mpi_int.dt, &ompi_mpi_op_min.op, m->comm,
                               m->prev.allreduce_module);
    /* Single copies, once every rank has attached (and published its pid):
     * every peer of the node lets this rank read its memory (no Yama, or
     * ptrace_scope 0, or CAP_SYS_PTRACE). */
    int cma[2] = { 0, 0 };
    if (MPI_SUCCESS == rc && all && mca_coll_xccl_component.shm_cma) {
        cma[0] = 1;
        for (int r = 0; cma[0] && r < xccl_shm_nranks(h->seg); r++) {
            int p = xccl_shm_cma_probe(h->seg, r);
            cma[0] = 1 == p;
            if (!cma[0]) {
                mca_coll_xccl_log(2, "comm comm=%u rank=%d: process_vm_readv of node rank %d "
                                  "(pid %d): %d", m->cid, m->world_rank, r,
                                  (int) xccl_shm_pid(h->seg, r), p);
            }
        }
        rc = m->prev.allreduce(&cma[0], &cma[1], 1, &ompi_mpi_int.dt, &ompi_mpi_op_min.op,
                               m->comm, m->prev.allreduce_module);
    }
    if (MPI_SUCCESS != rc || !all || m->layout.max_ppn < 2) {
        mca_coll_xccl_log(!all && !mine ? 1 : 2, "comm comm=%u rank=%d: shared-memory level off: %s",
                          m->cid, m->world_rank,
                          MPI_SUCCESS != rc ? "the vote failed"
                          : m->layout.max_ppn < 2 ? "no two ranks share a node"
                          : !mine ? (NULL != h && h->why[0] ? h->why : "out of memory")
                                  : "a rank of the communicator could not attach");
        shm_off(m);
        return rc;
    }
    xccl_shm_peer_init(&h->peer, h->seg, h->local_of, m->size);
    xccl_shm_release_fd(h->seg);                 /* every rank has attached */
    xccl_shm_peer_cma(&h->peer, cma[1]);
    m->shm_cma = cma[1];
    m->shm_state = XCCL_SHM_ON;
    m->shm_small = mca_coll_xccl_component.shm_small && 1 == m->layout.nnodes;
    mca_coll_xccl_log(2, "comm comm=%u rank=%d: shared-memory level on (%s segment, %zu B slots, "
                      "%d ranks on this node, single copies %s)", m->cid, m->world_rank,
                      XCCL_SHM_SYSV == xccl_shm_kind(h->seg) ? "sysv" : "memfd",
                      mca_coll_xccl_component.shm_bytes, h->node_size,
                      cma[1] ? "on (process_vm_readv)"
                      : !mca_coll_xccl_component.shm_cma ? "off (coll_xccl_shm_cma 0)"
                      : "off (process_vm_readv refused: see /proc/sys/kernel/yama/ptrace_scope)");
    return MPI_SUCCESS;
}

int mca_coll_xccl_shm_hooks(mca_coll_xccl_module_t *m, mca_coll_xccl_exec_hooks_t *hooks)
{
    struct mca_coll_xccl_shm *h = m->shm;
    if (NULL == h || NULL == h->seg) {
        return 0;                    /* the executor refuses the schedule */
    }
    hooks->bufs[XCCL_BUF_SLOT] = xccl_shm_slot(h->seg, xccl_shm_rank(h->seg));
    hooks->peer = &h->peer.peer;
    if (!m->shm_cma) {
        return 0;
    }
    /* The peers read this call's SEND and RECV (the executor's seq is the
     * next call's number); schedules of these collectives read no scratch. */
    void *bufs[XCCL_NBUF] = { hooks->bufs[XCCL_BUF_SEND], hooks->bufs[XCCL_BUF_RECV], NULL, NULL };
    return xccl_shm_peer_publish(&h->peer, m->seq, bufs);
}

void mca_coll_xccl_shm_fini(mca_coll_xccl_module_t *m)
{
    shm_off(m);
}

/* ------------------------------------------------------------ latency lines */

/* A tiny allreduce without the executor: every rank's data sits next to
 * its sequence word in its latency line (xccl_shm_line), so a call costs
 * one cache-line transfer per peer.  Call f writes region f & 1: the last
 * call that wrote it, f - 2, was read by every peer before that peer
 * posted f - 1, which this rank saw in call f - 1 (it waited for it), so
 * no wait is needed before writing.  Every rank reduces the lines in
 * segment rank order: the same bits everywhere. */
typedef struct {
    _Atomic uint64_t seq;
    unsigned char data[2][XCCL_SHM_FAST_BYTES];
} fast_line_t;
_Static_assert(sizeof(fast_line_t) <= XCCL_SHM_LINE_BYTES, "latency line");
_Static_assert(sizeof(uint64_t) == sizeof(_Atomic uint64_t) && XCCL_SHM_FAST_BYTES % 8 == 0,
               "latency line layout");

int mca_coll_xccl_shm_allreduce_fast(mca_coll_xccl_module_t *m, const void *src, void *dst,
                                     size_t count, size_t bytes, const mca_coll_xccl_reduce_t *red)
{
    struct mca_coll_xccl_shm *h = m->shm;
    xccl_shm_t *seg = h->seg;
    const int me = xccl_shm_rank(seg), n = xccl_shm_nranks(seg);
    const uint64_t f = ++h->fast_seq;
    fast_line_t *mine = xccl_shm_line(seg, me);
    uint64_t acc[XCCL_SHM_FAST_BYTES / 8];

    memcpy(mine->data[f & 1], src, bytes);
    atomic_store_explicit(&mine->seq, f, memory_order_release);
    for (int r = 0; r < n; r++) {
        const fast_line_t *l = xccl_shm_line(seg, r);
        unsigned spins = 0, misses = 0;
        while (r != me && atomic_load_explicit(&l->seq, memory_order_acquire) < f) {
            /* Open MPI's progress engine now and then, and as rarely a
             * check that the peer still lives (as the provider's waits) */
            if (++spins == MCA_COLL_XCCL_SPINS_PER_PROGRESS) {
                spins = 0;
                opal_progress();
                if (++misses == XCCL_SHM_PEER_LIVENESS_EVERY / MCA_COLL_XCCL_SPINS_PER_PROGRESS) {
                    misses = 0;
                    if (0 == xccl_shm_peer_alive(seg, r)) {
                        return mca_coll_xccl_error(m, XCCL_COLL_ALLREDUCE, MPI_ERR_INTERN,
                                                   "a rank of this node is gone");
                    }
                }
            }
        }
        if (0 == r) {
            memcpy(acc, l->data[f & 1], bytes);
        } else {
            red->kernel(acc, acc, l->data[f & 1], count);
        }
    }
    memcpy(dst, acc, bytes);
    return MPI_SUCCESS;
}
