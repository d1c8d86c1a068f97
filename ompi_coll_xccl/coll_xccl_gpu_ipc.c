/*
 * CUDA IPC peer access inside a node (DESIGN 3a): a provider of
 * xccl_peer_t whose peer buffers are CUDA IPC mappings of the other ranks'
 * device buffers and whose flags are words in host shared memory.  A call
 * it takes runs one of its collective's peer-access schedules through the
 * one executor, with the copies and reductions queued on a stream of the
 * buffers' CUDA context: the same schedules the simulator tests and the
 * cost model prices.  Which one is a property of the communicator, found
 * at its set-up:
 *   - "leader" (algos/mesh_leader.c) where every rank's device is the
 *     same GPU: a GPU runs one process's work at a time and switches
 *     contexts between them (about 70 us a switch on an H200 without MPS,
 *     docs/bench/gpu-stream-flags.md), so one rank does all the work and
 *     the others only publish their buffers, flag and wait: one host
 *     synchronisation per call on every rank, no switch;
 *   - "mesh" (algos/..._mesh.c) across GPUs: every device does its share.
 * A chain of reductions into one place (x0 op x1, then op x2, ...) goes to
 * the GPU as one kernel over every source (fold order kept).
 *
 * Each rank owns one slot of shared memory (a POSIX segment that its peers
 * map once per communicator, at the first call that tries): its flag, and
 * what it tells its peers at the start of a call.  A call then agrees in
 * two rounds through the slots, no message and no collective:
 *   1. each rank writes whether it can take part (device buffers of one
 *      context, contiguous, a GPU kernel for a reduction) and the IPC
 *      handles of the buffers its peers read; one that cannot goes on at
 *      once (nobody can take the call: a host-buffer call pays one store),
 *      one that can waits for all;
 *   2. if every rank can, each maps what its schedule reads of the others;
 *      each writes whether that worked and waits for all.
 * Every rank reads the same slots, so all decide alike: the schedule
 * on every rank, or nothing moved and the call goes on as any other (host
 * copies).  Round 2 is also what keeps a slot stable until every peer has
 * read it: nobody starts its next call's round 1 before all finished this
 * call's reading.
 */
#include "ompi_config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "opal/runtime/opal_progress.h"

#include "coll_xccl_gpu_ipc.h"
#include "coll_xccl_gpu_hooks.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"
#include "gpu/xccl_gpu_queue.h"
#include "gpu/xccl_ipc_cache.h"

/* Peers' buffers kept mapped between calls (at least). */
#define XCCL_IPC_MAPS 32
#define XCCL_IPC_NAME 48
/* Flag values with an interprocess event each (1..XCCL_IPC_EVENTS): the
 * peer-access schedules use 1..3. */
#define XCCL_IPC_EVENTS 3

/* One exported buffer. */
typedef struct {
    xccl_cuipc_handle_t handle;
    uint64_t buffer_id, offset;
    int32_t valid, pad;
} ipc_buf_t;

/* What the ranks exchange once per communicator (setup_slots). */
typedef struct {
    char name[XCCL_IPC_NAME];        /* its slot's segment, "" none */
    char pci[32];                    /* its current device, "" none */
    int32_t events;                  /* ev[] are its flag events' handles */
    int32_t pad;
    xccl_cuipc_event_handle_t ev[XCCL_IPC_EVENTS];
} ipc_hello_t;

/* A rank's slot, written by that rank only. */
typedef struct {
    uint64_t flag;                   /* the schedule's flag: seq << 32 | value */
    char pad0[56];
    uint64_t agree;                  /* the agreement: 4 * epoch + stage (agree_*) */
    int32_t mapped;                  /* round 2: it mapped what it reads */
    int32_t pad1;
    ipc_buf_t buf[2];                /* round 1: its SEND and RECV, as its peers read them */
} ipc_slot_t;

/* The call in progress (blocking: one at a time per communicator). */
typedef struct {
    mca_coll_xccl_module_t *m;
    struct mca_coll_xccl_ipc *ipc;
    const xccl_cu_api_t *cu;
    void *ctx;                       /* the context of this rank's buffers */
    xccl_gpu_set_t *set;             /* its stream and device scratch */
    xccl_dtype_t dt;
    xccl_op_t op;
    char error[200];                 /* the first driver error ("": none) */
    int pushed;                      /* ctx is current from the go to close */
    xccl_gpu_queue_t q;              /* the schedule's copies and reductions, coalesced */
    xccl_peer_t peer;
} ipc_call_t;

struct mca_coll_xccl_ipc {
    xccl_ipc_cache_t maps;
    xccl_ipc_exports_t exports;
    int up;                          /* 1 slots mapped, -1 never (all ranks alike), 0 not tried */
    int one_device;                  /* every rank's current device was the same GPU at set-up */
    int no_batch;                    /* xccl_copy_batch did not launch here: copies one by one */
    char pci[32];                    /* that device ("" none) */
    void *device_ctx;                /* a context found on it (buffers elsewhere: no cuda ipc) */
    /* Flags the GPUs wait for (every rank alike; ranks on several GPUs):
     * flag value v of rank j is also an interprocess event, recorded on
     * j's stream where j posts it, waited for by the streams of the ranks
     * that wait for the flag: no host synchronisation but the call's last.
     * NULL: host flags only, each posted after a synchronisation. */
    xccl_cuevent_t *ev;              /* [size * XCCL_IPC_EVENTS], this rank's own and its peers' opened */
    void *ev_ctx;                    /* the context they belong to (calls elsewhere: no cuda ipc) */
    ipc_slot_t **slot;               /* [size] every rank's, this rank's too */
    size_t slot_bytes;
    uint64_t epoch;                  /* agreements so far, the same on every rank */
    char **mapped;                   /* [2 * size] the call's peer buffers (SEND, RECV) */
    ipc_call_t call;
};

/* ------------------------------------------------------------ mappings */

static char *map_open(void *cbctx, const xccl_cuipc_handle_t *handle, void *ctx)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cudeviceptr_t p = 0;
    (void) cbctx, (void) ctx;  /* ctx is current (the caller pushed it) */
    if (XCCL_CUDA_SUCCESS != cu->IpcOpenMemHandle(&p, *handle,
                                                   XCCL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
        return NULL;
    }
    return (char *) (uintptr_t) p;
}

static void map_close(void *cbctx, char *ptr, void *ctx)
{
    const xccl_cu_api_t *cu = xccl_cu();
    (void) cbctx;
    if (NULL != cu && 0 == mca_coll_xccl_gpu_push(ctx)) {
        cu->IpcCloseMemHandle((xccl_cudeviceptr_t) (uintptr_t) ptr);
        mca_coll_xccl_gpu_pop();
    }
}

static void unmap_slots(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc)
{
    for (int j = 0; NULL != ipc->slot && j < m->size; j++) {
        if (NULL != ipc->slot[j]) {
            munmap(ipc->slot[j], ipc->slot_bytes);
        }
    }
    free(ipc->slot);
    ipc->slot = NULL;
}

/* Destroys the flag events there are (own and opened) with their context
 * current; without it (destroyed already) they went with it. */
static void drop_events(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc)
{
    const xccl_cu_api_t *cu = xccl_cu();
    if (NULL != ipc->ev && NULL != cu && 0 == mca_coll_xccl_gpu_push(ipc->ev_ctx)) {
        for (int i = 0; i < m->size * XCCL_IPC_EVENTS; i++) {
            if (NULL != ipc->ev[i]) {
                cu->EventDestroy(ipc->ev[i]);
            }
        }
        mca_coll_xccl_gpu_pop();
    }
    free(ipc->ev);
    ipc->ev = NULL;
}

void mca_coll_xccl_gpu_ipc_fini(mca_coll_xccl_module_t *m)
{
    struct mca_coll_xccl_ipc *ipc = m->ipc;
    if (NULL != ipc) {
        drop_events(m, ipc);
        xccl_ipc_cache_fini(&ipc->maps);
        unmap_slots(m, ipc);
        free(ipc->mapped);
        free(ipc);
    }
    m->ipc = NULL;
}

/* ------------------------------------------------------------ slots */

static void *map_segment(const char *name, int create, size_t bytes)
{
    int fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0600);
    void *p = MAP_FAILED;
    if (fd < 0) {
        return NULL;
    }
    if (!create || 0 == ftruncate(fd, (off_t) bytes)) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    return MAP_FAILED == p ? NULL : p;
}

/* This rank's flag events, in the current context, their handles in
 * hello: 1, or 0 (no context, no driver, a call failed). */
static int make_events(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, ipc_hello_t *hello)
{
    const xccl_cu_api_t *cu = xccl_cu();
    xccl_cucontext_t ctx = NULL;
    if (NULL == cu || XCCL_CUDA_SUCCESS != cu->CtxGetCurrent(&ctx) || NULL == ctx ||
        NULL == (ipc->ev = calloc((size_t) m->size * XCCL_IPC_EVENTS, sizeof(*ipc->ev)))) {
        return 0;
    }
    ipc->ev_ctx = ctx;
    xccl_cuevent_t *mine = ipc->ev + (size_t) m->rank * XCCL_IPC_EVENTS;
    for (int v = 0; v < XCCL_IPC_EVENTS; v++) {
        if (XCCL_CUDA_SUCCESS != cu->EventCreate(&mine[v], XCCL_CU_EVENT_INTERPROCESS |
                                                               XCCL_CU_EVENT_DISABLE_TIMING) ||
            XCCL_CUDA_SUCCESS != cu->IpcGetEventHandle(&hello->ev[v], mine[v])) {
            return 0;
        }
    }
    return 1;
}

/* Opens rank j's flag events (its hello): 1, or 0. */
static int open_events(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, int j,
                       const ipc_hello_t *hello)
{
    const xccl_cu_api_t *cu = xccl_cu();
    (void) m;
    for (int v = 0; hello->events && v < XCCL_IPC_EVENTS; v++) {
        if (XCCL_CUDA_SUCCESS != cu->IpcOpenEventHandle(&ipc->ev[(size_t) j * XCCL_IPC_EVENTS + v],
                                                         hello->ev[v])) {
            return 0;
        }
    }
    return hello->events;
}

/* Once per communicator, at the first call that tries, on every rank (the
 * attempt depends only on what all ranks share): each rank creates its
 * slot, the names go round through the fallback's allgather, each maps its
 * peers', and an allreduce says whether all could (then each unlinks its
 * name: everybody has mapped it, or given up).  All ranks end with the
 * same ipc->up. */
static int setup_slots(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc)
{
    static int segments;
    const int P = m->size, me = m->rank;
    ipc_hello_t hello;
    char *mine = hello.name;
    ipc_hello_t *all = calloc((size_t) P, sizeof(*all));
    int ok, rc;
    ipc->slot_bytes = ((sizeof(ipc_slot_t) + 4095) / 4096) * 4096;
    ipc->slot = calloc((size_t) P, sizeof(*ipc->slot));
    ipc->mapped = calloc(2 * (size_t) P, sizeof(char *));
    memset(&hello, 0, sizeof(hello));
    snprintf(mine, sizeof(hello.name), "/xccl-ipc-%d-%d", (int) getpid(),
             __atomic_fetch_add(&segments, 1, __ATOMIC_RELAXED));
    if (0 != xccl_gpu_current_pci(hello.pci, sizeof(hello.pci))) {
        hello.pci[0] = '\0';
    }
    hello.events = make_events(m, ipc, &hello);
    ok = NULL != all && NULL != ipc->slot && NULL != ipc->mapped &&
         NULL != (ipc->slot[me] = map_segment(mine, 1, ipc->slot_bytes));
    if (!ok) {
        mine[0] = '\0';                /* the peers see this rank cannot */
    }
    rc = NULL == all ? OMPI_ERR_OUT_OF_RESOURCE
                     : m->prev.allgather(&hello, (int) sizeof(hello), MPI_BYTE, all, (int) sizeof(hello),
                                         MPI_BYTE, m->comm, m->prev.allgather_module);
    ipc->one_device = MPI_SUCCESS == rc;
    memcpy(ipc->pci, hello.pci, sizeof(ipc->pci));
    for (int j = 0; MPI_SUCCESS == rc && j < P; j++) {
        ipc->one_device = ipc->one_device && '\0' != all[j].pci[0] &&
                          0 == strncmp(all[j].pci, all[0].pci, sizeof(all[0].pci));
    }
    for (int j = 0; MPI_SUCCESS == rc && ok && j < P; j++) {
        const char *name = all[j].name;
        ok = j == me || ('\0' != name[0] && NULL != (ipc->slot[j] = map_segment(name, 0,
                                                                                 ipc->slot_bytes)));
    }
    /* On one GPU the ranks' streams never wait for each other's events: a
     * wait for another process's event there costs about 290 us a call on
     * an H200 (the context switches again, docs/bench/gpu-transport.md);
     * the leader form's host flags cost one synchronisation per rank. */
    int agreed[2] = { ok, MPI_SUCCESS == rc && hello.events && !ipc->one_device };
    for (int j = 0; MPI_SUCCESS == rc && agreed[1] && j < P; j++) {
        agreed[1] = j == me || open_events(m, ipc, j, &all[j]);
    }
    if (MPI_SUCCESS == rc) {
        rc = m->prev.allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT, MPI_MIN, m->comm,
                               m->prev.allreduce_module);
    }
    ok = agreed[0];
    if (MPI_SUCCESS != rc || !ok || !agreed[1]) {
        drop_events(m, ipc);           /* on every rank alike */
    }
    if ('\0' != mine[0]) {
        shm_unlink(mine);
    }
    free(all);
    ipc->up = MPI_SUCCESS == rc && ok ? 1 : -1;
    ipc->epoch = 1;                    /* the slots' 0 is "nothing yet" */
    if (ipc->up < 0) {
        unmap_slots(m, ipc);
        mca_coll_xccl_log(2, "comm comm=%u rank=%d: no cuda ipc: the ranks' shared slots did not "
                          "map", m->cid, m->world_rank);
    } else {
        mca_coll_xccl_log(2, "comm comm=%u rank=%d: cuda ipc set up: %s; %s", m->cid, m->world_rank,
                          ipc->one_device ? "every rank on one device: one rank does each call's "
                                            "work (\"leader\")"
                                          : "ranks on several devices (or one without a context): "
                                            "each does its share (\"mesh\")",
                          ipc->ev ? "the GPUs wait for each other's flags (interprocess events)"
                                  : "flags after a host synchronisation (no interprocess events)");
    }
    return MPI_SUCCESS == rc ? rc : mca_coll_xccl_error(m, XCCL_COLL_ALLREDUCE, rc,
                                                        "cuda ipc set-up");
}

/* A rank's agreement word for call (epoch) e: 4 e + stage.  Call numbers
 * rise by one per call that wants CUDA IPC, on every rank alike. */
enum {
    STAGE_OUT = 0,                   /* round 1: cannot take part (and went on) */
    STAGE_IN = 1,                    /* round 1: can */
    STAGE_MAPPED = 2                 /* round 2 done (`mapped` says how) */
};

static void publish(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, int stage)
{
    __atomic_store_n(&ipc->slot[m->rank]->agree, 4 * ipc->epoch + (uint64_t) stage, __ATOMIC_RELEASE);
}

/* Round 1 of a rank that can take part: 1 once every rank said it can,
 * 0 once one said it cannot.  A rank already past this call (a word of a
 * later one) cannot have taken part: it would be waiting for this one. */
static int round1_all(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc)
{
    const uint64_t base = 4 * ipc->epoch;
    int all = 1;
    publish(m, ipc, STAGE_IN);
    for (int j = 0; j < m->size; j++) {
        uint64_t w;
        while ((w = __atomic_load_n(&ipc->slot[j]->agree, __ATOMIC_ACQUIRE)) < base) {
            opal_progress();
        }
        all = all && (base + STAGE_IN == w || base + STAGE_MAPPED == w);
    }
    return all;
}

/* Round 2: 1 when every rank mapped what it reads.  Nobody passes this
 * call before all published round 2, and `mapped` changes only in a later
 * round 2, which needs this rank: it is stable here. */
static int round2_all(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, int mapped)
{
    const uint64_t want = 4 * ipc->epoch + STAGE_MAPPED;
    int all = 1;
    ipc->slot[m->rank]->mapped = mapped;
    publish(m, ipc, STAGE_MAPPED);
    for (int j = 0; j < m->size; j++) {
        while (__atomic_load_n(&ipc->slot[j]->agree, __ATOMIC_ACQUIRE) < want) {
            opal_progress();
        }
        all = all && ipc->slot[j]->mapped;
    }
    return all;
}

/* ------------------------------------------------------------ xccl_peer_t */

static void *peer_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    ipc_call_t *c = ctx;
    return id <= XCCL_BUF_RECV ? c->ipc->mapped[2 * peer + id] : NULL;
}

static void call_fail(ipc_call_t *c, const char *error)
{
    if ('\0' == c->error[0]) {
        snprintf(c->error, sizeof(c->error), "%s", error);
        mca_coll_xccl_log(1, "cuda ipc: %s", error);
    }
}

/* The call's driver work, with its context current (pushed from the go
 * to close: one thread runs a blocking call). */

/* Everything the schedule's actions asked for so far, queued in order; a
 * failure is the call's (its flags are still posted). */
static void flush(ipc_call_t *c)
{
    xccl_gpu_queue_flush(&c->q);
    if ('\0' != c->q.error[0]) {
        call_fail(c, c->q.error);
    }
}

/* What this rank queued must be done before a peer may read it (or, past
 * the last flag, reuse its buffers): one synchronisation, where anything
 * was queued since the last. */
static void call_sync(ipc_call_t *c)
{
    flush(c);
    if (c->q.queued) {
        const char *error = mca_coll_xccl_gpu_sync(c->cu, c->set->in);
        if (error) {
            call_fail(c, error);
        }
        c->q.queued = 0;
    }
}

/* Flag value val of rank j as an event, or NULL (host flags only). */
static xccl_cuevent_t flag_event(const ipc_call_t *c, int j, uint32_t val)
{
    return NULL != c->ipc->ev && val >= 1 && val <= XCCL_IPC_EVENTS
               ? c->ipc->ev[(size_t) j * XCCL_IPC_EVENTS + val - 1]
               : NULL;
}

/* The flag goes up once what this rank queued before it is done: with
 * events, on the GPU (the event recorded after that work; the host flag
 * says it is recorded); else after a synchronisation.  A failed step
 * still posts its flags: no peer waits forever; the error is this rank's
 * call's.  An event is recorded again only in a later call, once every
 * peer that waits for it has queued its wait: the schedules' later flags
 * (and the call's end) need every such peer. */
static int peer_post(void *ctx, uint32_t seq, uint32_t val)
{
    ipc_call_t *c = ctx;
    xccl_cuevent_t ev = flag_event(c, c->m->rank, val);
    xccl_curesult_t rc;
    if (NULL == ev) {
        call_sync(c);
    } else {
        flush(c);
        if (XCCL_CUDA_SUCCESS != (rc = c->cu->EventRecord(ev, c->set->in))) {
            call_fail(c, xccl_cu_error("cuEventRecord", rc));
            call_sync(c);              /* the flag must not come early */
        }
        c->q.queued = 1;
    }
    __atomic_store_n(&c->ipc->slot[c->m->rank]->flag, ((uint64_t) seq << 32) | val,
                     __ATOMIC_RELEASE);
    return 0;
}

/* Once the peer's flag is up: with events, the call's stream waits for
 * the peer's work before it (what the step queues next follows). */
static int peer_test(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    ipc_call_t *c = ctx;
    const uint64_t f = __atomic_load_n(&c->ipc->slot[peer]->flag, __ATOMIC_ACQUIRE);
    const uint32_t fseq = (uint32_t) (f >> 32), fval = (uint32_t) f;
    if (!((int32_t) (fseq - seq) > 0 || (fseq == seq && fval >= val))) {
        return 0;
    }
    xccl_cuevent_t ev = flag_event(c, peer, val);
    xccl_curesult_t rc;
    if (NULL != ev) {
        flush(c);                      /* the earlier steps' work need not wait */
        if (XCCL_CUDA_SUCCESS != (rc = c->cu->StreamWaitEvent(c->set->in, ev, 0))) {
            call_fail(c, xccl_cu_error("cuStreamWaitEvent", rc));
        }
        c->q.queued = 1;
    }
    return 1;
}

/* The schedule's copies and reductions, coalesced on the call's stream
 * (gpu/xccl_gpu_queue.h). */
static int call_copy(void *ctx, void *dst, const void *src, size_t len)
{
    xccl_gpu_queue_copy(&((ipc_call_t *) ctx)->q, dst, src, len);
    return 0;
}

static int call_reduce(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    xccl_gpu_queue_reduce(&((ipc_call_t *) ctx)->q, dst, a, b, count);
    return 0;
}

/* ------------------------------------------------------------ this rank's part */

/* Exports device buffer p (its handle, once per allocation) as what the
 * peers read for buffer k; 0 if p is not device memory of c->ctx. */
static int export_buf(ipc_call_t *c, ipc_slot_t *mine, const void *p, int k)
{
    xccl_mem_info_t info;
    ipc_buf_t *b = &mine->buf[k];
    xccl_gpu_classify(p, &info);
    if (XCCL_MEM_DEVICE != info.type || info.ctx != c->ctx) {
        return 0;
    }
    const xccl_cuipc_handle_t *known = xccl_ipc_exports_find(&c->ipc->exports, info.base,
                                                             info.buffer_id);
    if (known) {
        b->handle = *known;
    } else if (0 != mca_coll_xccl_gpu_push(info.ctx)) {
        return 0;
    } else {
        int got = XCCL_CUDA_SUCCESS ==
                  c->cu->IpcGetMemHandle(&b->handle, (xccl_cudeviceptr_t) (uintptr_t) info.base);
        mca_coll_xccl_gpu_pop();
        if (!got) {
            return 0;
        }
        xccl_ipc_exports_add(&c->ipc->exports, info.base, info.buffer_id, &b->handle);
    }
    b->buffer_id = info.buffer_id;
    b->offset = (uint64_t) ((const char *) p - (const char *) info.base);
    b->valid = 1;
    return 1;
}

/* Whether ctx is a context of the communicator's one device. */
static int on_the_device(struct mca_coll_xccl_ipc *ipc, void *ctx)
{
    char pci[sizeof(ipc->pci)];
    if (ctx == ipc->device_ctx) {
        return 1;
    }
    if (0 != mca_coll_xccl_gpu_push(ctx)) {
        return 0;
    }
    const int same = 0 == xccl_gpu_current_pci(pci, sizeof(pci)) && 0 == strcmp(pci, ipc->pci);
    mca_coll_xccl_gpu_pop();
    if (same) {
        ipc->device_ctx = ctx;
    }
    return same;
}

/* The buffers of the schedule (SEND, RECV; see algos/xccl_build.h) at
 * dev[], in the device memory of one context, and whether this rank can
 * take part: every buffer of one context (in the leader form, on the one
 * device), contiguous, a GPU kernel for a reduction (loaded, buffers
 * aligned).  Exports what its peers read or write: in the mesh form the
 * inputs, allreduce's reduced slices and the bcast root's buffer; in the
 * leader form (leader >= 0) every buffer of the others. */
static int own_part(const mca_coll_xccl_call_t *c, ipc_call_t *call, ipc_slot_t *mine,
                    int leader, char *dev[2])
{
    xccl_mem_info_t info;
    const int me = c->m->rank;
    char *r = (char *) c->rbuf + mca_coll_xccl_true_lb(c->rdtype);
    dev[XCCL_BUF_RECV] = r;
    if (XCCL_COLL_BCAST == c->coll) {
        dev[XCCL_BUF_SEND] = r;
    } else if (c->in_place) {
        dev[XCCL_BUF_SEND] = XCCL_COLL_ALLGATHER == c->coll ? r + (size_t) me * c->args.block : r;
    } else {
        dev[XCCL_BUF_SEND] = (char *) c->sbuf + mca_coll_xccl_true_lb(c->sdtype);
    }
    memset(mine->buf, 0, sizeof(mine->buf));
    if (NULL == call->cu) {
        return 0;
    }
    if (c->reduction) {
        if (NULL == c->red.kernel || !xccl_gpu_reduce_supported((xccl_dtype_t) c->red.xdt,
                                                                (xccl_op_t) c->red.xop)) {
            return 0;
        }
        call->dt = (xccl_dtype_t) c->red.xdt;
        call->op = (xccl_op_t) c->red.xop;
        if (((uintptr_t) dev[0] | (uintptr_t) dev[1]) & (xccl_gpu_reduce_align(call->dt) - 1)) {
            return 0;
        }
    } else if (!mca_coll_xccl_is_contiguous(c->rdtype, c->rn) ||
               (XCCL_COLL_BCAST != c->coll && !c->in_place &&
                !mca_coll_xccl_is_contiguous(c->sdtype, c->sn))) {
        return 0;
    }
    xccl_gpu_classify(r, &info);
    if (XCCL_MEM_DEVICE != info.type) {
        return 0;
    }
    call->ctx = info.ctx;
    if ((leader >= 0 && !on_the_device(call->ipc, call->ctx)) ||
        (NULL != call->ipc->ev && call->ctx != call->ipc->ev_ctx)) {
        return 0;
    }
    int ok = 1;
    const int send = leader >= 0 ? me != leader : 1,
              recv = leader >= 0 ? me != leader
                                 : XCCL_COLL_ALLREDUCE == c->coll || (XCCL_COLL_BCAST == c->coll && me == c->root);
    if (XCCL_COLL_BCAST != c->coll && send) {
        ok = export_buf(call, mine, dev[XCCL_BUF_SEND], XCCL_BUF_SEND);
    }
    if (ok && recv) {
        ok = export_buf(call, mine, r, XCCL_BUF_RECV);
    }
    if (ok && c->reduction && (leader < 0 || me == leader)) {
        /* The kernels load into this context (once), or this rank is out. */
        const char *why = NULL;
        ok = 0 == mca_coll_xccl_gpu_push(call->ctx);
        if (ok) {
            ok = 0 == xccl_gpu_kernels_load(&why);
            mca_coll_xccl_gpu_pop();
        }
        if (!ok) {
            mca_coll_xccl_log(2, "%s comm=%u rank=%d: no cuda ipc reduction: %s",
                              xccl_coll_name(c->coll), c->m->cid, c->m->world_rank,
                              why ? why : "cuCtxPushCurrent failed");
        }
    }
    return ok;
}

/* The peers read this rank's buffers on their own streams, which know
 * nothing of this process's work: what the application queued before the
 * call (a fill on the legacy default stream - even cuMemcpyHtoD from
 * pageable memory may return before its data is on the device - or on a
 * blocking stream) must have run before the first flag says "inputs
 * there".  An event on the legacy default stream follows all of it; the
 * call's stream waits for that event, and the first flag's
 * synchronisation of the call's stream (peer_post) so waits for it too.
 * (Work on the application's non-blocking streams must be complete before
 * the call, as with any CUDA-aware MPI.)  With the context current. */
static int after_user_work(ipc_call_t *call)
{
    const char *error = NULL;
    xccl_curesult_t rc;
    if (0 != xccl_gpu_set_events(call->set, 1, &error)) {
        call_fail(call, error);
    } else if (XCCL_CUDA_SUCCESS != (rc = call->cu->EventRecord(call->set->ev[0], XCCL_CU_STREAM_LEGACY))) {
        call_fail(call, xccl_cu_error("cuEventRecord", rc));
    } else if (XCCL_CUDA_SUCCESS != (rc = call->cu->StreamWaitEvent(call->set->in, call->set->ev[0], 0))) {
        call_fail(call, xccl_cu_error("cuStreamWaitEvent", rc));
    }
    call->q.queued = 1;                /* the first flag synchronises */
    return '\0' == call->error[0];
}

/* Round 2's part: maps every peer buffer the schedule names, and takes the
 * stream (and device scratch) of the call. */
static int map_peers(mca_coll_xccl_module_t *m, ipc_call_t *call, const xccl_sched_t *s)
{
    struct mca_coll_xccl_ipc *ipc = call->ipc;
    int ok = 1;
    memset(ipc->mapped, 0, 2 * (size_t) m->size * sizeof(char *));
    if (0 != mca_coll_xccl_gpu_push(call->ctx)) {
        return 0;
    }
    xccl_ipc_cache_begin(&ipc->maps);    /* this call's mappings stay */
    for (size_t i = 0; ok && i < s->nacts; i++) {
        const xccl_ref_t refs[3] = { s->acts[i].a, s->acts[i].b, s->acts[i].dst };
        for (int k = 0; ok && k < 3; k++) {
            const int q = xccl_ref_owner(refs[k]);
            if (q < 0 || q == m->rank || refs[k].buf > XCCL_BUF_RECV ||
                NULL != ipc->mapped[2 * q + refs[k].buf]) {
                continue;
            }
            const ipc_buf_t *b = &ipc->slot[q]->buf[refs[k].buf];
            char *base = b->valid ? xccl_ipc_cache_get(&ipc->maps, q, b->buffer_id, &b->handle,
                                                       call->ctx)
                                  : NULL;
            ok = NULL != base;
            ipc->mapped[2 * q + refs[k].buf] = ok ? base + b->offset : NULL;
        }
    }
    const char *error = NULL;
    if (ok) {
        call->set = xccl_gpu_set_get((xccl_cucontext_t) call->ctx, 0,
                                     mca_coll_xccl_component.gpu_pool_bytes, &error);
        ok = NULL != call->set &&
             (0 == s->scratch_bytes || 0 == xccl_gpu_set_scratch(call->set, s->scratch_bytes, &error));
    }
    if (ok) {
        xccl_gpu_queue_init(&call->q, call->set->in, call->dt, call->op,
                            s->scratch_bytes ? call->set->dev : NULL, call->set->dev_bytes,
                            call->ipc->no_batch);
        ok = after_user_work(call);
    }
    mca_coll_xccl_gpu_pop();
    return ok;
}

static void release_set(ipc_call_t *call, int bad)
{
    if (NULL == call->set) {
        return;
    }
    int pushed = 0 == mca_coll_xccl_gpu_push(call->ctx);
    xccl_gpu_set_put(call->set, bad);
    if (pushed) {
        mca_coll_xccl_gpu_pop();
    }
    call->set = NULL;
}

/* ------------------------------------------------------------ the provider */

static int ipc_wanted(const mca_coll_xccl_call_t *c)
{
    const size_t min = mca_coll_xccl_component.gpu_ipc_bytes;
    /* As the hand-written CUDA IPC collectives did: blocking calls, not in
     * place for alltoall and reduce_scatter. */
    return NULL == c->request && min > 0 && c->bytes >= min && c->m->size >= 2 && !c->ipc_said &&
           !(c->in_place && XCCL_COLL_ALLREDUCE != c->coll && XCCL_COLL_ALLGATHER != c->coll);
}

static int ipc_usable(const mca_coll_xccl_module_t *m)
{
    return m->gpu_ipc && (NULL == m->ipc || m->ipc->up >= 0);
}

/* The communicator's slots, set up by its first call that tries (on every
 * rank), and the schedules' form: "leader" where every rank is on one
 * device, else "mesh"; NULL where the slots did not map (on every rank). */
static const char *ipc_form(mca_coll_xccl_call_t *c, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_ipc *ipc = m->ipc;
    *rc = MPI_SUCCESS;
    if (NULL == ipc) {
        if (NULL == (ipc = m->ipc = calloc(1, sizeof(*ipc)))) {
            *rc = mca_coll_xccl_error(m, c->coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
            return NULL;
        }
        xccl_ipc_cache_init(&ipc->maps, XCCL_IPC_MAPS, map_open, map_close, NULL);
    }
    if (0 == ipc->up && MPI_SUCCESS != (*rc = setup_slots(m, ipc))) {
        return NULL;
    }
    return ipc->up < 0 ? NULL : ipc->one_device ? "leader" : "mesh";
}

static int ipc_open(mca_coll_xccl_call_t *c, const xccl_sched_t *s,
                    mca_coll_xccl_exec_hooks_t *hooks, void **state, int *go)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_ipc *ipc = m->ipc;
    const int leader = !ipc->one_device ? -1 : XCCL_COLL_BCAST == c->coll ? c->root : 0;
    char *dev[2];
    *go = 0;
    ipc_call_t *call = &ipc->call;
    ipc_slot_t *mine = ipc->slot[m->rank];
    memset(call, 0, sizeof(*call));
    call->m = m;
    call->ipc = ipc;
    call->cu = xccl_cu();
    int all = own_part(c, call, mine, leader, dev);
    if (!all) {
        publish(m, ipc, STAGE_OUT);
    } else if ((all = round1_all(m, ipc))) {
        all = round2_all(m, ipc, map_peers(m, call, s));
    }
    ipc->epoch++;
    if (!all) {
        release_set(call, '\0' != call->error[0]);
        return MPI_SUCCESS;
    }
    /* Every rank runs the schedule now, with the context current until
     * close (a failed push fails the call's driver work: its flags still
     * go up). */
    *go = 1;
    call->pushed = 0 == mca_coll_xccl_gpu_push(call->ctx);
    if (!call->pushed) {
        call_fail(call, "cuCtxPushCurrent failed");
    }
    call->peer = (xccl_peer_t) { .ctx = call, .buf = peer_buf, .post = peer_post, .test = peer_test };
    hooks->bufs[XCCL_BUF_SEND] = dev[XCCL_BUF_SEND];
    hooks->bufs[XCCL_BUF_RECV] = dev[XCCL_BUF_RECV];
    hooks->bufs[XCCL_BUF_SCRATCH] = s->scratch_bytes ? call->set->dev : NULL;
    hooks->copy = call_copy;
    hooks->copy_ctx = call;
    hooks->reduce = call_reduce;
    hooks->reduce_ctx = call;
    hooks->peer = &call->peer;
    *state = call;
    return MPI_SUCCESS;
}

static int ipc_close_call(mca_coll_xccl_call_t *c, void *state, int rc)
{
    ipc_call_t *call = state;
    if (call->pushed) {
        call_sync(call);               /* nothing queued outlives the call */
        call->ipc->no_batch |= call->q.one_by_one;
        xccl_gpu_set_put(call->set, '\0' != call->error[0]);
        call->set = NULL;
        mca_coll_xccl_gpu_pop();
    }
    release_set(call, 1);              /* (a failed push) */
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
    if (NULL == m->ipc || 0 == m->ipc->up) {
        return 0;                      /* the set-up is collective: the whole way */
    }
    publish(m, m->ipc, STAGE_OUT);
    m->ipc->epoch++;
    c->ipc_said = 1;                   /* should the call take the whole way after all */
    return 1;
}

const mca_coll_xccl_peer_provider_t mca_coll_xccl_gpu_ipc_provider = {
    .name = "cuda_ipc",
    .wanted = ipc_wanted,
    .usable = ipc_usable,
    .form = ipc_form,
    .open = ipc_open,
    .close = ipc_close_call,
};
