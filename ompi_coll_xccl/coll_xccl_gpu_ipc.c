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
 *
 * Calls that want CUDA IPC are numbered in call order (epoch, alike on
 * every rank) and use the slots one at a time, in that order (turn).  A
 * nonblocking call (ipc_start, "nonblocking calls" below) does its own part
 * at the call and the rest from progress: the rounds tested, not waited
 * for, flags posted when an event query says their work is done, the end
 * by an event; where not every rank can, the host paths run it.  A blocking
 * call waits for the nonblocking ones before it.
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

#include "ompi/request/request.h"

#include "coll_xccl_gpu_ipc.h"
#include "coll_xccl_gpu_hooks.h"
#include "coll_xccl_request.h"
#include "coll_xccl_select.h"
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
/* A nonblocking call's flags posted on the GPU and not yet seen done (at
 * most; the schedules post up to 3 per call): events of its set 1..PEND,
 * the user's work before the call 0, its end PEND + 1. */
#define XCCL_IPC_PEND 4
#define XCCL_IPC_SET_EVENTS (XCCL_IPC_PEND + 2)

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

/* A call's driver work and peer access (blocking: ipc->call; nonblocking:
 * its job's; one holds the slots at a time). */
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
    /* A nonblocking call (async) never synchronises: a flag it posts is
     * an event recorded on its stream, written to its slot once a query
     * says the work before it is done (in order; pend[] the flag words). */
    int async;
    int npend, pend_head;
    uint64_t pend[XCCL_IPC_PEND];
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
    /* Calls that want CUDA IPC are numbered (epoch) in call order, the
     * same on every rank; their agreements and schedules use the slots one
     * at a time, in that order: turn is the number whose turn it is (a
     * blocking call waits for its turn, progressing the nonblocking calls
     * made before it).  Written by the thread that holds the turn. */
    uint64_t epoch;                  /* the next call's number */
    uint64_t turn;
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
    ipc->epoch = ipc->turn = 1;        /* the slots' 0 is "nothing yet" */
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

static void publish(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, uint64_t e, int stage)
{
    __atomic_store_n(&ipc->slot[m->rank]->agree, 4 * e + (uint64_t) stage, __ATOMIC_RELEASE);
}

/* Whether every rank's word for call e has reached stage. */
static int reached(const mca_coll_xccl_module_t *m, const struct mca_coll_xccl_ipc *ipc,
                   uint64_t e, int stage)
{
    for (int j = 0; j < m->size; j++) {
        if (__atomic_load_n(&ipc->slot[j]->agree, __ATOMIC_ACQUIRE) < 4 * e + (uint64_t) stage) {
            return 0;
        }
    }
    return 1;
}

/* Round 1, once reached(e, STAGE_OUT): whether every rank said it can.  A
 * rank already past this call (a word of a later one) cannot have taken
 * part: it would be waiting for this one. */
static int round1_in(const mca_coll_xccl_module_t *m, const struct mca_coll_xccl_ipc *ipc,
                     uint64_t e)
{
    int all = 1;
    for (int j = 0; j < m->size; j++) {
        const uint64_t w = __atomic_load_n(&ipc->slot[j]->agree, __ATOMIC_ACQUIRE);
        all = all && (4 * e + STAGE_IN == w || 4 * e + STAGE_MAPPED == w);
    }
    return all;
}

/* Round 2, once reached(e, STAGE_MAPPED): whether every rank mapped what
 * it reads.  Nobody passes this call before all published round 2, and
 * `mapped` changes only in a later round 2, which needs this rank: it is
 * stable here. */
static int round2_mapped(const mca_coll_xccl_module_t *m, const struct mca_coll_xccl_ipc *ipc)
{
    int all = 1;
    for (int j = 0; j < m->size; j++) {
        all = all && ipc->slot[j]->mapped;
    }
    return all;
}

/* A blocking call's rounds: wait, with Open MPI's progress. */
static int round1_all(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, uint64_t e)
{
    publish(m, ipc, e, STAGE_IN);
    while (!reached(m, ipc, e, STAGE_OUT)) {
        opal_progress();
    }
    return round1_in(m, ipc, e);
}

static int round2_all(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc, uint64_t e,
                      int mapped)
{
    ipc->slot[m->rank]->mapped = mapped;
    publish(m, ipc, e, STAGE_MAPPED);
    while (!reached(m, ipc, e, STAGE_MAPPED)) {
        opal_progress();
    }
    return round2_mapped(m, ipc);
}

static int my_turn(const struct mca_coll_xccl_ipc *ipc, uint64_t e)
{
    return e == __atomic_load_n(&ipc->turn, __ATOMIC_ACQUIRE);
}

/* The call holding the turn is done with the slots. */
static void pass_turn(struct mca_coll_xccl_ipc *ipc)
{
    __atomic_store_n(&ipc->turn, ipc->turn + 1, __ATOMIC_RELEASE);
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

/* A nonblocking call's flags whose work is done, written in order (all of
 * them at once with now: the call failed, no peer may wait forever): 1
 * when none is left. */
static int drain_posts(ipc_call_t *c, int now)
{
    while (c->npend > 0) {
        const xccl_curesult_t rc = now ? XCCL_CUDA_SUCCESS
                                       : c->cu->EventQuery(c->set->ev[1 + c->pend_head]);
        if (XCCL_CUDA_ERROR_NOT_READY == rc) {
            return 0;
        }
        if (XCCL_CUDA_SUCCESS != rc) {
            call_fail(c, xccl_cu_error("cuEventQuery", rc));   /* the flag still goes up */
        }
        __atomic_store_n(&c->ipc->slot[c->m->rank]->flag, c->pend[c->pend_head], __ATOMIC_RELEASE);
        c->pend_head = (c->pend_head + 1) % XCCL_IPC_PEND;
        c->npend--;
    }
    return 1;
}

/* A nonblocking call's flag: an event after the work queued so far, the
 * flag written once it is done (drain_posts); 0, or -1 when it must go up
 * now (no event: after a synchronisation). */
static int post_later(ipc_call_t *c, uint64_t word)
{
    xccl_curesult_t rc;
    if (XCCL_IPC_PEND == c->npend) {
        call_sync(c);                  /* (more flags than events: not in today's schedules) */
        drain_posts(c, 0);
    }
    const int k = (c->pend_head + c->npend) % XCCL_IPC_PEND;
    if (XCCL_CUDA_SUCCESS != (rc = c->cu->EventRecord(c->set->ev[1 + k], c->set->in))) {
        call_fail(c, xccl_cu_error("cuEventRecord", rc));
        call_sync(c);
        return -1;
    }
    c->pend[k] = word;
    c->npend++;
    return 0;
}

/* The flag goes up once what this rank queued before it is done: with
 * events, on the GPU (the event recorded after that work; the host flag
 * says it is recorded); in a nonblocking call, once a query says that
 * work is done; else after a synchronisation.  A failed step
 * still posts its flags: no peer waits forever; the error is this rank's
 * call's.  An event is recorded again only in a later call, once every
 * peer that waits for it has queued its wait: the schedules' later flags
 * (and the call's end) need every such peer. */
static int peer_post(void *ctx, uint32_t seq, uint32_t val)
{
    ipc_call_t *c = ctx;
    xccl_cuevent_t ev = flag_event(c, c->m->rank, val);
    xccl_curesult_t rc;
    if (NULL == ev && c->async) {
        flush(c);
        if (0 == post_later(c, ((uint64_t) seq << 32) | val)) {
            return 0;
        }
    } else if (NULL == ev) {
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
    if (c->npend > 0) {
        drain_posts(c, 0);
    }
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
static int export_buf(ipc_call_t *c, ipc_buf_t out[2], const void *p, int k)
{
    xccl_mem_info_t info;
    ipc_buf_t *b = &out[k];
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
static int own_part(const mca_coll_xccl_call_t *c, ipc_call_t *call, ipc_buf_t out[2],
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
    memset(out, 0, 2 * sizeof(*out));
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
        ok = export_buf(call, out, dev[XCCL_BUF_SEND], XCCL_BUF_SEND);
    }
    if (ok && recv) {
        ok = export_buf(call, out, r, XCCL_BUF_RECV);
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
static int user_work_mark(ipc_call_t *call)
{
    const char *error = NULL;
    xccl_curesult_t rc;
    if (0 != xccl_gpu_set_events(call->set, call->async ? XCCL_IPC_SET_EVENTS : 1, &error)) {
        call_fail(call, error);
    } else if (XCCL_CUDA_SUCCESS != (rc = call->cu->EventRecord(call->set->ev[0], XCCL_CU_STREAM_LEGACY))) {
        call_fail(call, xccl_cu_error("cuEventRecord", rc));
    }
    return '\0' == call->error[0];
}

static int after_user_work(ipc_call_t *call)
{
    xccl_curesult_t rc;
    if (XCCL_CUDA_SUCCESS != (rc = call->cu->StreamWaitEvent(call->set->in, call->set->ev[0], 0))) {
        call_fail(call, xccl_cu_error("cuStreamWaitEvent", rc));
    }
    call->q.queued = 1;                /* the first flag synchronises */
    return '\0' == call->error[0];
}

/* The call's stream and device scratch (a set of its context, which is
 * current), for a schedule needing scratch bytes: 1, or 0. */
static int take_set(ipc_call_t *call, size_t scratch)
{
    const char *error = NULL;
    call->set = xccl_gpu_set_get((xccl_cucontext_t) call->ctx, 0,
                                 mca_coll_xccl_component.gpu_pool_bytes, &error);
    if (NULL == call->set || (scratch && 0 != xccl_gpu_set_scratch(call->set, scratch, &error))) {
        call_fail(call, error ? error : "no stream set");
        return 0;
    }
    return 1;
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
    if (ok && NULL == call->set) {     /* (a nonblocking call took its set at the start) */
        ok = take_set(call, s->scratch_bytes) && user_work_mark(call);
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
    const struct mca_coll_xccl_ipc *ipc = c->m->ipc;
    /* Not in place for alltoall and reduce_scatter.  A nonblocking call
     * cannot set the slots up (that waits for the other ranks): it is
     * wanted where a blocking call did (the same calls came before it on
     * every rank, so every rank sees the same ipc->up). */
    return min > 0 && c->bytes >= min && c->m->size >= 2 && !c->ipc_said &&
           !(c->in_place && XCCL_COLL_ALLREDUCE != c->coll && XCCL_COLL_ALLGATHER != c->coll) &&
           (NULL == c->request || (NULL != ipc && ipc->up > 0));
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
    const uint64_t e = ipc->epoch++;
    char *dev[2];
    ipc_buf_t bufs[2];
    *go = 0;
    ipc_call_t *call = &ipc->call;
    ipc_slot_t *mine = ipc->slot[m->rank];
    while (!my_turn(ipc, e)) {         /* the nonblocking calls made before it */
        opal_progress();
    }
    memset(call, 0, sizeof(*call));
    call->m = m;
    call->ipc = ipc;
    call->cu = xccl_cu();
    int all = own_part(c, call, bufs, leader, dev);
    if (!all) {
        publish(m, ipc, e, STAGE_OUT);
    } else {
        memcpy(mine->buf, bufs, sizeof(bufs));
        if ((all = round1_all(m, ipc, e))) {
            all = round2_all(m, ipc, e, map_peers(m, call, s));
        }
    }
    if (!all) {
        release_set(call, '\0' != call->error[0]);
        pass_turn(ipc);
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
    pass_turn(call->ipc);
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
    if (NULL == m->ipc || 0 == m->ipc->up || !my_turn(m->ipc, m->ipc->epoch)) {
        return 0;                      /* the set-up is collective, or nonblocking calls are on
                                        * their way: the whole way */
    }
    publish(m, m->ipc, m->ipc->epoch++, STAGE_OUT);
    pass_turn(m->ipc);
    c->ipc_said = 1;                   /* should the call take the whole way after all */
    return 1;
}

/* ------------------------------------------------------------ nonblocking calls */

/* A nonblocking call (start): this rank's part is found at the call (its
 * buffers exported, its stream set taken, an event after the application's
 * work so far), the rest runs from progress without waiting: its turn on
 * the communicator, the two rounds, the schedule (flags posted when a
 * query says their work is done), its end (an event after its last work).
 * Where not every rank can, the host paths run it (job->host). */
enum { JOB_TURN, JOB_ROUND1, JOB_ROUND2, JOB_RUN, JOB_END, JOB_HOST, JOB_INNER };

typedef struct ipc_job {
    struct ipc_job *next;
    mca_coll_xccl_call_t c;          /* the call; c.seq taken at the start */
    const xccl_sched_t *s;           /* a reference */
    mca_coll_xccl_host_fn_t host;
    ompi_request_t *promise, *inner; /* the application's; the host paths' */
    uint64_t e;                      /* its number (ipc->epoch) */
    int state, in, rc, algo;
    ipc_buf_t bufs[2];
    char *dev[2];
    ipc_call_t call;
    xccl_exec_t exec;
    int exec_up;
} ipc_job_t;

/* Every module's calls in flight, oldest first. */
static ipc_job_t *jobs, **jobs_tail = &jobs;
static opal_mutex_t jobs_lock = OPAL_MUTEX_STATIC_INIT;
static int jobs_active;

static void job_free(ipc_job_t *job)
{
    if (job->exec_up) {
        xccl_exec_fini(&job->exec);
    }
    if (job->s) {
        xccl_select_put(job->s);
    }
    free(job->c.counts);
    free(job);
}

static int job_step(ipc_job_t *job);

/* The host paths take the call (not every rank could): the turn goes to
 * the next call, the stream set back, and the job runs on (job_step). */
static int job_to_host(ipc_job_t *job)
{
    pass_turn(job->c.m->ipc);
    release_set(&job->call, '\0' != job->call.error[0]);
    job->state = JOB_HOST;
    return job_step(job);
}

/* Its schedule's executor, with the call's hooks: 1, or 0 (then it fails). */
static int job_exec(ipc_job_t *job)
{
    ipc_call_t *call = &job->call;
    mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
    call->peer = (xccl_peer_t) { .ctx = call, .buf = peer_buf, .post = peer_post, .test = peer_test };
    hooks.bufs[XCCL_BUF_SEND] = job->dev[XCCL_BUF_SEND];
    hooks.bufs[XCCL_BUF_RECV] = job->dev[XCCL_BUF_RECV];
    hooks.bufs[XCCL_BUF_SCRATCH] = job->s->scratch_bytes ? call->set->dev : NULL;
    hooks.copy = call_copy;
    hooks.copy_ctx = call;
    hooks.reduce = call_reduce;
    hooks.reduce_ctx = call;
    hooks.peer = &call->peer;
    job->exec_up = 0 == mca_coll_xccl_exec_init(&job->exec, job->c.m, job->s, &hooks, NULL, NULL,
                                                (uint32_t) job->c.seq);
    return job->exec_up;
}

/* One step of job, as far as it goes without waiting: 1 when it is over
 * (job->rc its code), 0 not yet.  With jobs_lock held. */
static int job_step(ipc_job_t *job)
{
    mca_coll_xccl_module_t *m = job->c.m;
    struct mca_coll_xccl_ipc *ipc = m->ipc;
    ipc_call_t *call = &job->call;
    xccl_curesult_t q;
    int rc, pushed;
    switch (job->state) {
    case JOB_TURN:
        if (!my_turn(ipc, job->e)) {
            return 0;
        }
        if (!job->in) {
            publish(m, ipc, job->e, STAGE_OUT);
            return job_to_host(job);
        }
        memcpy(ipc->slot[m->rank]->buf, job->bufs, sizeof(job->bufs));
        publish(m, ipc, job->e, STAGE_IN);
        job->state = JOB_ROUND1;
        /* fall through */
    case JOB_ROUND1:
        if (!reached(m, ipc, job->e, STAGE_OUT)) {
            return 0;
        }
        if (!round1_in(m, ipc, job->e)) {
            return job_to_host(job);
        }
        ipc->slot[m->rank]->mapped = map_peers(m, call, job->s);
        publish(m, ipc, job->e, STAGE_MAPPED);
        job->state = JOB_ROUND2;
        /* fall through */
    case JOB_ROUND2:
        if (!reached(m, ipc, job->e, STAGE_MAPPED)) {
            return 0;
        }
        if (!round2_mapped(m, ipc)) {
            return job_to_host(job);
        }
        mca_coll_xccl_log_call(m, job->c.coll, 1, job->c.bytes, job->algo, -1.0, NULL, "cuda_ipc");
        if (!job_exec(job)) {
            call_fail(call, "out of memory for the executor");
        }
        job->state = JOB_RUN;
        /* fall through */
    case JOB_RUN:
        /* Every rank runs the schedule now; a failed step still posts its
         * flags (the executor goes on; without the context every driver
         * call fails and each flag goes up at once), the error is this
         * rank's. */
        pushed = 0 == mca_coll_xccl_gpu_push(call->ctx);
        if (!pushed) {
            call_fail(call, "cuCtxPushCurrent failed");
        }
        rc = job->exec_up ? xccl_exec_progress(&job->exec) : -1;
        if (0 == rc) {
            if (pushed) {
                mca_coll_xccl_gpu_pop();
            }
            return 0;
        }
        job->rc = 1 == rc ? MPI_SUCCESS : mca_coll_xccl_exec_failed(m, job->c.coll);
        flush(call);
        if (XCCL_CUDA_SUCCESS != (q = call->cu->EventRecord(call->set->ev[XCCL_IPC_PEND + 1],
                                                            call->set->in))) {
            call_fail(call, xccl_cu_error("cuEventRecord", q));
            call_sync(call);
        }
        if (pushed) {
            mca_coll_xccl_gpu_pop();
        }
        job->state = JOB_END;
        /* fall through */
    case JOB_END:
        q = XCCL_CUDA_SUCCESS;
        if (0 != mca_coll_xccl_gpu_push(call->ctx)) {
            call_fail(call, "cuCtxPushCurrent failed");
            drain_posts(call, 1);
        } else {
            if (drain_posts(call, 0) && '\0' == call->error[0]) {
                q = call->cu->EventQuery(call->set->ev[XCCL_IPC_PEND + 1]);
            }
            mca_coll_xccl_gpu_pop();
        }
        if (call->npend > 0 || XCCL_CUDA_ERROR_NOT_READY == q) {
            return 0;
        }
        if (XCCL_CUDA_SUCCESS != q) {
            call_fail(call, xccl_cu_error("cuEventQuery", q));
        }
        ipc->no_batch |= call->q.one_by_one;
        release_set(call, '\0' != call->error[0]);
        pass_turn(ipc);
        if ('\0' != call->error[0]) {
            job->rc = mca_coll_xccl_error(m, job->c.coll, MPI_ERR_INTERN, call->error);
        }
        return 1;
    case JOB_HOST:
        mca_coll_xccl_log(2, "i%s comm=%u rank=%d: not every rank can take the call through cuda "
                          "ipc: host paths", xccl_coll_name(job->c.coll), m->cid, m->world_rank);
        job->rc = job->host(&job->c, &job->inner);
        if (MPI_SUCCESS != job->rc || NULL == job->inner) {
            return 1;
        }
        job->state = JOB_INNER;
        /* fall through */
    case JOB_INNER:
        if (!REQUEST_COMPLETE(job->inner)) {
            return 0;
        }
        job->rc = job->inner->req_status.MPI_ERROR;
        ompi_request_free(&job->inner);
        return 1;
    default:
        return 1;
    }
}

/* Advances every call in flight, oldest first; completes the ones that
 * ended (outside the lock).  A thread that finds the lock taken goes on:
 * another is at it. */
static int ipc_progress(void)
{
    ipc_job_t *done = NULL, **done_tail = &done;
    int n = 0;
    if (0 == __atomic_load_n(&jobs_active, __ATOMIC_RELAXED) || 0 != OPAL_THREAD_TRYLOCK(&jobs_lock)) {
        return 0;
    }
    for (ipc_job_t **pp = &jobs; *pp;) {
        ipc_job_t *job = *pp;
        if (!job_step(job)) {
            pp = &job->next;
            continue;
        }
        *pp = job->next;
        if (jobs_tail == &job->next) {
            jobs_tail = pp;
        }
        job->next = NULL;
        *done_tail = job;
        done_tail = &job->next;
        __atomic_fetch_sub(&jobs_active, 1, __ATOMIC_RELAXED);
        n++;
    }
    OPAL_THREAD_UNLOCK(&jobs_lock);
    while (done) {
        ipc_job_t *job = done;
        done = job->next;
        mca_coll_xccl_promise_keep(job->promise, job->rc);
        job_free(job);
    }
    return n;
}

/* This rank's part of a nonblocking call, now: its buffers exported, its
 * stream set, the event after the application's work (the call runs
 * after what was queued before it, not after what comes later). */
static int job_own_part(ipc_job_t *job, int leader)
{
    ipc_call_t *call = &job->call;
    if (!own_part(&job->c, call, job->bufs, leader, job->dev)) {
        return 0;
    }
    if (0 != mca_coll_xccl_gpu_push(call->ctx)) {
        return 0;
    }
    int ok = take_set(call, job->s->scratch_bytes) && user_work_mark(call);
    mca_coll_xccl_gpu_pop();
    if (!ok) {
        mca_coll_xccl_log(2, "i%s comm=%u rank=%d: no cuda ipc: %s", xccl_coll_name(job->c.coll),
                          job->c.m->cid, job->c.m->world_rank, call->error);
        release_set(call, 1);
        call->error[0] = '\0';
    }
    return ok;
}

static int ipc_start(mca_coll_xccl_call_t *c, const xccl_sched_t *s, int algo,
                     mca_coll_xccl_host_fn_t host)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_ipc *ipc = m->ipc;
    ipc_job_t *job = calloc(1, sizeof(*job));
    ompi_request_t *promise = NULL != job ? mca_coll_xccl_promise_new(m) : NULL;
    size_t *counts = NULL;
    /* (reduce_scatter's counts may be on the entry's stack) */
    if (NULL != job && NULL != c->args.counts &&
        NULL != (counts = malloc((size_t) m->size * sizeof(size_t)))) {
        memcpy(counts, c->args.counts, (size_t) m->size * sizeof(size_t));
    }
    if (NULL == promise || (NULL != c->args.counts && NULL == counts)) {
        free(counts);
        free(job);
        if (NULL != promise) {
            mca_coll_xccl_promise_keep(promise, MPI_SUCCESS);
            ompi_request_free(&promise);
        }
        xccl_select_put(s);
        return mca_coll_xccl_error(m, c->coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for a request");
    }
    /* Its numbers, in call order on every rank: the agreement's, and the
     * call's (the schedule's flags, or the host paths' transfers). */
    job->c = *c;
    job->c.counts = counts;
    job->c.args.counts = counts;
    job->c.seq = m->seq++;
    job->e = ipc->epoch++;
    job->s = s;
    job->algo = algo;
    job->host = host;
    job->promise = promise;
    job->call = (ipc_call_t) { .m = m, .ipc = ipc, .cu = xccl_cu(), .async = 1 };
    job->in = job_own_part(job, !ipc->one_device ? -1 : XCCL_COLL_BCAST == c->coll ? c->root : 0);
    *c->request = promise;
    OPAL_THREAD_LOCK(&jobs_lock);
    *jobs_tail = job;
    jobs_tail = &job->next;
    __atomic_fetch_add(&jobs_active, 1, __ATOMIC_RELAXED);
    OPAL_THREAD_UNLOCK(&jobs_lock);
    ipc_progress();                    /* its first steps now */
    return MPI_SUCCESS;
}

const mca_coll_xccl_peer_provider_t mca_coll_xccl_gpu_ipc_provider = {
    .name = "cuda_ipc",
    .wanted = ipc_wanted,
    .usable = ipc_usable,
    .form = ipc_form,
    .open = ipc_open,
    .close = ipc_close_call,
    .start = ipc_start,
    .progress = ipc_progress,
};
