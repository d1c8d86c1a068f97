/*
 * CUDA IPC peer access: the communicator's state, set up once by its first
 * call that tries (coll_xccl_gpu_ipc_int.h says what the slots are for):
 * every rank's slot of shared memory, the flag events the GPUs wait for
 * (ranks on several GPUs), the cache of the peers' buffers kept mapped
 * between calls, and from them the schedules' form, "leader" or "mesh".
 */
#include "ompi_config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll_xccl_gpu_ipc_int.h"

/* Peers' buffers kept mapped between calls (at least). */
#define XCCL_IPC_MAPS 32
#define XCCL_IPC_NAME 48

/* What the ranks exchange once per communicator (setup_slots). */
typedef struct {
    char name[XCCL_IPC_NAME];        /* its slot's segment, "" none */
    char pci[32];                    /* its current device, "" none */
    int32_t events;                  /* ev[] are its flag events' handles */
    int32_t pad;
    xccl_cuipc_event_handle_t ev[XCCL_IPC_EVENTS];
} ipc_hello_t;

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

void mca_coll_xccl_gpu_ipc_unmap_slots(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc)
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
void mca_coll_xccl_gpu_ipc_drop_events(mca_coll_xccl_module_t *m, struct mca_coll_xccl_ipc *ipc)
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
    ipc->slot_bytes = ((sizeof(ipc_slot_t) + (size_t) P * sizeof(ipc_block_t) + 4095) / 4096) * 4096;
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
     * wait for another process's event there switches the context again
     * (figures: docs/bench/gpu-transport.md); the leader form's host flags
     * cost one synchronisation per rank. */
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
        mca_coll_xccl_gpu_ipc_drop_events(m, ipc);   /* on every rank alike */
    }
    if ('\0' != mine[0]) {
        shm_unlink(mine);
    }
    free(all);
    ipc->up = MPI_SUCCESS == rc && ok ? 1 : -1;
    ipc->epoch = ipc->turn = 1;        /* the slots' 0 is "nothing yet" */
    if (ipc->up < 0) {
        mca_coll_xccl_gpu_ipc_unmap_slots(m, ipc);
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

/* ------------------------------------------------------------ the form */

const char *mca_coll_xccl_gpu_ipc_form(mca_coll_xccl_call_t *c, int *rc)
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
    /* (alltoallv has the mesh form only: the leader would need every
     * pair's displacements on both sides) */
    return ipc->up < 0 ? NULL : ipc->one_device && XCCL_COLL_ALLTOALLV != c->coll ? "leader" : "mesh";
}
