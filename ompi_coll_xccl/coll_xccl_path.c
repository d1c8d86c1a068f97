/*
 * The road of a call after the latency path's fast way (coll_xccl_path.h).
 * The call is decided first (coll_xccl_decide.c): the fallback or xccl,
 * alike on every rank; a call for the fallback on heap buffers goes there
 * at once (the fallback's fast way).  Every other call tries the paths in
 * order (paths[] below), each of one shape: it takes the call, or the
 * call goes on to the next:
 *
 *   set_up        a small blocking call on a communicator whose level may
 *                 be on, not yet set up: sets it up, then the latency
 *                 path's fast way where it now takes the call (no
 *                 schedule built and cached for a communicator used once);
 *   reduction     a reduction xccl would run gets its kernel (or the
 *                 fallback's reason);
 *   peer_access   CUDA IPC inside a node: a peer-access schedule ("mesh",
 *                 or "leader" on one shared GPU) on the peers' mapped
 *                 buffers, where every rank can (coll_xccl_peers.c);
 *   staging       device buffers: host copies, on which the paths after
 *                 it run; the copies go back once the call is done;
 *   fallback      the saved module's function (coll_xccl_previous.c);
 *   select        xccl's: work buffers, set-up on first use, the schedule
 *                 (a nonblocking call made before the set-up is in waits
 *                 for it as a request);
 *   latency_path  small calls of the shared-memory level, without the
 *                 executor;
 *   schedule      the executor, on the level or over the transport, to
 *                 completion or as a request.
 *
 * Every call logs one line at verbose >= 1.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opal/runtime/opal_progress.h"

#include "coll_xccl_path.h"
#include "coll_xccl_peers.h"
#include "coll_xccl_exec.h"
#include "coll_xccl_gpu.h"
#include "coll_xccl_gpu_ipc.h"
#include "coll_xccl_pack.h"
#include "coll_xccl_request.h"
#include "coll_xccl_select.h"
#include "coll_xccl_setup.h"
#include "coll_xccl_level.h"
#include "coll_xccl_latency.h"
#include "coll_xccl_previous.h"

/* CLOCK_MONOTONIC: one clock for every process of a node (the level's
 * trials compare readings of several ranks) */
static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The end of a call of a level trial (NULL: none) that began at t0
 * (now_ns) and returned rc: every rank records it (in step also after an
 * error, a local one included, so that the agreement's allreduce is the
 * same call everywhere), and the call returns rc, else the agreement's
 * error. */
static int trial_end(mca_coll_xccl_call_t *c, xccl_trial_t *trial, uint64_t t0, int rc)
{
    if (NULL == trial) {
        return rc;
    }
    const int rc2 = mca_coll_xccl_level_trial_end(c->m, c->coll, c->bytes, trial, t0, now_ns());
    return MPI_SUCCESS != rc ? rc : rc2;
}

/* ------------------------------------------------------------ the paths */

/* One call on its way through the paths: what it runs on (the user's
 * buffers, or host copies of device buffers: stage), where a nonblocking
 * call's request goes, and, once the schedule is chosen (path_select),
 * what the later paths share. */
typedef struct {
    const char *why;                 /* the fallback's reason, or NULL */
    const void *s;
    void *r;
    mca_coll_xccl_gpu_stage_t *stage;
    ompi_request_t **request;
    /* from path_staging on: the host copies, and the request of the host
     * call on them (nonblocking calls) */
    int staged;
    mca_coll_xccl_staged_t st;
    ompi_request_t *inner;
    /* from path_select on */
    mca_coll_xccl_packed_t pk;
    int have_pk;                     /* pk is this call's to end */
    char *ws, *wr;                   /* the work buffers (packed copies where needed) */
    mca_coll_xccl_exec_hooks_t hooks;
    const xccl_sched_t *sched;       /* a reference to put back, or NULL */
    int algo, level;
    double predicted_us;
    xccl_trial_t *trial;
} run_t;

/* A path a call can take: 1 when it took the call (*rc is the call's
 * result), 0 when the call goes on to the next path.  Every rank takes
 * the same path: what decides rests on what all ranks share. */
typedef struct {
    const char *name;
    int (*take)(mca_coll_xccl_call_t *c, run_t *run, int *rc);
} path_t;

/* What a path that ends the call after path_select releases: the
 * schedule, the trial's record (in step on every rank, also after an
 * error: the agreement's allreduce is the same call everywhere; t0 0:
 * now), the packed copies.  Returns the call's code. */
static int run_end(mca_coll_xccl_call_t *c, run_t *run, uint64_t t0, int rc)
{
    if (run->sched) {
        xccl_select_put(run->sched);
        run->sched = NULL;
    }
    if (run->trial) {
        rc = trial_end(c, run->trial, t0 ? t0 : now_ns(), rc);
    }
    if (run->have_pk) {
        int rc2 = mca_coll_xccl_packed_end(c->m, c->coll, &run->pk, MPI_SUCCESS == rc, 0);
        rc = MPI_SUCCESS != rc ? rc : rc2;
    }
    return rc;
}

static int peer_host(mca_coll_xccl_call_t *c, ompi_request_t **inner);

/* Peer access inside a node (CUDA IPC): where every rank can, the
 * collective's mesh schedule on the peers' mapped buffers. */
static int path_peer_access(mca_coll_xccl_call_t *c, run_t *run, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    if (NULL != run->why) {
        return 0;
    }
    for (size_t i = 0; i < mca_coll_xccl_nproviders; i++) {
        const mca_coll_xccl_peer_provider_t *pv = mca_coll_xccl_providers[i];
        mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
        void *state = NULL;
        double predicted_us;
        int used, go = 0;
        if (!pv->wanted(c)) {
            continue;
        }
        /* Whether the communicator can is known once it is set up: such a
         * call (blocking, on every rank) sets it up first (its vote too);
         * a nonblocking one is wanted only where that happened
         * (pv->wanted). */
        if (NULL == c->request && !mca_coll_xccl_setup_test(m) &&
            MPI_SUCCESS != (*rc = mca_coll_xccl_setup(m, 1))) {
            *rc = mca_coll_xccl_error(m, c->coll, *rc, "setting the communicator up failed");
            return 1;
        }
        if (!pv->usable(m)) {
            continue;
        }
        const char *form = pv->form(c, rc);
        if (MPI_SUCCESS != *rc) {
            return 1;
        }
        if (NULL == form) {
            continue;
        }
        const int algo = xccl_select_index(c->coll, form);
        c->args.layout = &m->layout;
        c->args.peer_access = XCCL_PEER_MAPPED;
        const xccl_sched_t *s = mca_coll_xccl_select_schedule(m, c->coll, &c->args, c->bytes,
                                                              c->es, algo, &used, &predicted_us,
                                                              NULL);
        c->args.peer_access = 0;
        if (NULL == s) {
            *rc = OMPI_ERR_OUT_OF_RESOURCE;
            return 1;
        }
        if (NULL != c->request && used == algo) {
            *rc = pv->start(c, s, algo, peer_host);   /* takes s */
            return 1;
        }
        *rc = used == algo ? pv->open(c, s, &hooks, &state, &go) : MPI_SUCCESS;
        if (go) {
            mca_coll_xccl_log_call(m, c->coll, 0, c->bytes, algo, -1.0, NULL, pv->name);
            *rc = mca_coll_xccl_exec_run(m, c->coll, s, &hooks, NULL);
            *rc = pv->close(c, state, *rc);
        }
        xccl_select_put(s);
        if (go || MPI_SUCCESS != *rc) {
            return 1;
        }
    }
    return 0;
}

/* Device buffers (only outside the heap, and only where the process has
 * loaded the driver): the same call on host copies, through the paths
 * after this one; run_paths sends the copies back once a path took the
 * call.  A nonblocking one completes its copies back when the host call's
 * request (run->inner) does. */
static int path_staging(mca_coll_xccl_call_t *c, run_t *run, int *rc)
{
    mca_coll_xccl_where_t w;
    w.device = 0;
    if (!mca_coll_xccl_gpu_surely_host(c) && NULL != xccl_cu()) {
        mca_coll_xccl_gpu_where(c, &w);
    }
    if (!w.device) {
        return 0;
    }
    if (MPI_SUCCESS != (*rc = mca_coll_xccl_gpu_stage_call(c, &w, &run->st))) {
        return 1;
    }
    run->staged = 1;
    run->s = run->st.s;
    run->r = run->st.r;
    run->stage = &run->st.gpu;
    run->request = c->request ? &run->inner : NULL;
    return 0;
}

/* The fallback: the saved module's function (on host copies, filled
 * first). */
static int path_fallback(mca_coll_xccl_call_t *c, run_t *run, int *rc)
{
    if (NULL == run->why) {
        return 0;
    }
    mca_coll_xccl_log_call(c->m, c->coll, mca_coll_xccl_call_nb(c), c->bytes, -1, -1.0, run->why, NULL);
    *rc = run->stage ? mca_coll_xccl_gpu_stage_fill(c->m, c->coll, run->stage) : MPI_SUCCESS;
    if (MPI_SUCCESS == *rc) {
        *rc = mca_coll_xccl_call_previous(c, run->s, run->r, run->request);
    }
    return 1;
}

/* xccl runs the call: its work buffers, the communicator set up on first
 * use, the schedule chosen; a nonblocking call made before the set-up's
 * agreement and the level's vote are in waits for them as a request. */
static int path_select(mca_coll_xccl_call_t *c, run_t *run, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    run->hooks = (mca_coll_xccl_exec_hooks_t) { .bufs = { NULL } };
    if (MPI_SUCCESS != (*rc = mca_coll_xccl_work_buffers(c, run->s, run->r, run->stage, &run->pk,
                                                          &run->ws, &run->wr))) {
        return 1;
    }
    run->have_pk = 1;
    run->hooks.bufs[XCCL_BUF_SEND] = run->ws;
    run->hooks.bufs[XCCL_BUF_RECV] = run->wr;
    if (MPI_SUCCESS != (*rc = mca_coll_xccl_setup(m, NULL == run->request))) {
        *rc = run_end(c, run, 0, mca_coll_xccl_error(m, c->coll, *rc, "setting the communicator up failed"));
        return 1;
    }
    if (NULL != run->request && (!mca_coll_xccl_setup_test(m) || !mca_coll_xccl_level_ready(m))) {
        /* Device data is copied in now, the schedule is chosen later. */
        if (run->stage && MPI_SUCCESS != (*rc = mca_coll_xccl_gpu_stage_fill(m, c->coll, run->stage))) {
            *rc = run_end(c, run, 0, *rc);
            return 1;
        }
        mca_coll_xccl_call_t waiting = *c;
        waiting.request = run->request;
        *rc = mca_coll_xccl_request_start_waiting(m, &waiting, &run->hooks, &run->pk);
        return 1;
    }
    /* The shared-memory level, its vote over (the same state on every
     * rank).  Whether a call uses it never depends on its buffers (device
     * or host may differ between ranks): device data runs it on host
     * copies. */
    c->args.shm_slot = XCCL_LEVEL_ON == m->level_state && !c->no_level ? mca_coll_xccl_component.shm_bytes
                                                                   : 0;
    /* Single copies from and to the peers' own buffers (process_vm_readv
     * and writev): the mesh schedules of the six (the reductions reduce
     * pieces copied into scratch), allgatherv, gather and scatter
     * (xccl_coll_peer_copy), in blocking calls (mca_coll_xccl_level_hooks:
     * one publication per rank). */
    c->args.peer_access = NULL == run->request && c->args.shm_slot && m->level_cma &&
                                  xccl_coll_peer_copy(c->coll) ? XCCL_PEER_COPY : XCCL_PEER_NONE;
    c->args.layout = &m->layout;
    /* Where shm (or its latency path) and the mesh may both run, the
     * level's trials time them and keep the faster (xccl_trial_t). */
    c->args.trial = c->args.peer_access ? mca_coll_xccl_level_trial_wanted(m, c) : XCCL_TRIAL_OFF;
    run->sched = mca_coll_xccl_select_schedule(m, c->coll, &c->args, c->bytes, c->es, -1,
                                               &run->algo, &run->predicted_us, &run->trial);
    c->args.peer_access = c->args.trial = 0;
    if (NULL == run->sched) {
        *rc = run_end(c, run, 0, OMPI_ERR_OUT_OF_RESOURCE);
        return 1;
    }
    run->level = mca_coll_xccl_sched_level(run->sched);
    return 0;
}

/* Small calls of the level: the latency path, no executor (the same
 * choice on every rank: collective, sizes, op and type, algorithm); a
 * nonblocking one as a request, run from progress in its turn. */
static int path_latency(mca_coll_xccl_call_t *c, run_t *run, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    if (mca_coll_xccl_latency_v_wanted(m, c, run->algo)) {   /* the v forms: every blocking call */
        const uint64_t t0 = NULL != run->trial ? now_ns() : 0;
        *rc = run_end(c, run, t0, mca_coll_xccl_latency_v_call(c, run->stage, run->ws, run->wr, run->algo));
        return 1;
    }
    if (!(run->level && (mca_coll_xccl_latency_wanted(m, c->coll, run->algo, &c->args, c->es,
                                                      c->reduction ? &c->red : NULL) ||
                         mca_coll_xccl_latency_v_nb_wanted(m, c, run->algo)))) {
        return 0;
    }
    mca_coll_xccl_log_call(m, c->coll, mca_coll_xccl_call_nb(c), c->bytes, run->algo, run->predicted_us,
                           NULL, "latency_path");
    /* Device data: the copies, filled first (the peers read them). */
    if (run->stage && MPI_SUCCESS != (*rc = mca_coll_xccl_gpu_stage_fill(m, c->coll, run->stage))) {
        *rc = run_end(c, run, 0, *rc);
        return 1;
    }
    xccl_select_put(run->sched);
    run->sched = NULL;
    if (NULL != run->request) {
        /* the request takes the packed copies */
        *rc = mca_coll_xccl_request_start_lat(m, c, &run->hooks, &run->pk, run->algo, run->request);
        return 1;
    }
    m->seq++;                    /* a call number, as the executor's would take */
    const uint64_t t0 = NULL != run->trial ? now_ns() : 0;
    *rc = run_end(c, run, t0, mca_coll_xccl_latency_call(c, run->ws, run->wr, run->algo));
    return 1;
}

/* The schedule, through the one executor: on the shared-memory level
 * (its slot and peer access, in its turn), or over the transport; on the
 * device buffers or on host copies while they arrive and leave (device
 * data); to completion, or as a request. */
static int path_schedule(mca_coll_xccl_call_t *c, run_t *run, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    const int level = run->level;
    mca_coll_xccl_log_call(m, c->coll, mca_coll_xccl_call_nb(c), c->bytes, run->algo,
                           run->predicted_us, NULL, NULL);
    /* Device data: a schedule of the level runs on the copies, filled
     * first (its peers read them); any other through the staging gate. */
    if (run->stage) {
        *rc = level ? mca_coll_xccl_gpu_stage_fill(m, c->coll, run->stage)
                    : mca_coll_xccl_gpu_stage_gate(m, c->coll, run->stage, run->sched,
                                                   c->reduction ? c->red.xdt : -1,
                                                   c->reduction ? c->red.xop : -1, &run->hooks);
        if (MPI_SUCCESS != *rc) {
            *rc = run_end(c, run, 0, *rc);
            return 1;
        }
    }
    if (level && 0 != mca_coll_xccl_level_hooks(m, &run->hooks, run->sched->peer_access,
                                                    run->sched->slot_bytes)) {
        *rc = run_end(c, run, 0, mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN,
                                                     "publishing buffers for the peers failed"));
        return 1;
    }
    mca_coll_xccl_reduce_t *red = c->reduction ? &c->red : NULL;
    if (run->request) {
        /* the request takes the schedule and the packed copies */
        *rc = mca_coll_xccl_request_start(m, c->coll, run->sched, &run->hooks, red, &run->pk, level,
                                          c->seq, run->request);
        return 1;
    }
    if (level) {
        /* after the level's nonblocking calls made before this one */
        const uint32_t ticket = m->level_ticket++;
        while (!mca_coll_xccl_level_my_turn(m, ticket)) {
            opal_progress();
        }
    }
    const uint64_t t0 = NULL != run->trial ? now_ns() : 0;
    *rc = mca_coll_xccl_exec_run(m, c->coll, run->sched, &run->hooks, red);
    if (level) {
        mca_coll_xccl_level_pass_turn(m);
    }
    *rc = run_end(c, run, t0, *rc);
    return 1;
}

/* A small blocking call on a communicator whose level may be on and
 * which is not set up yet: the set-up here, as path_peer_access or
 * path_select would do it in this same call on every rank; then the
 * latency path's fast way, where it now takes the call, without a
 * schedule built and cached for nothing. */
static int path_set_up(mca_coll_xccl_call_t *c, run_t *run, int *rc)
{
    mca_coll_xccl_module_t *m = c->m;
    return NULL == run->why && NULL == c->request && xccl_coll_level(c->coll) && m->level_small &&
           XCCL_SETUP_DONE != m->setup &&
           c->bytes <= XCCL_LATENCY_BYTES && MPI_SUCCESS == mca_coll_xccl_setup(m, 1) &&
           mca_coll_xccl_fast_latency(c, rc);
}

/* A reduction xccl would run needs a kernel (or a commutative op): its
 * plan, or the fallback's reason.  Takes no call. */
static int path_reduction(mca_coll_xccl_call_t *c, run_t *run, int *rc)
{
    (void) rc;
    if (NULL == run->why && c->reduction) {
        run->why = mca_coll_xccl_plan_reduction(c->rdtype, c->op, c->total, &c->red, &c->es);
    }
    return 0;
}

/* The paths, in the order a call tries them. */
enum {
    PATH_SET_UP,
    PATH_REDUCTION,
    PATH_PEER_ACCESS,
    PATH_STAGING,
    PATH_FALLBACK,
    PATH_SELECT,
    PATH_LATENCY,
    PATH_SCHEDULE
};
static const path_t paths[] = {
    [PATH_SET_UP] = { "set_up", path_set_up },
    [PATH_REDUCTION] = { "reduction", path_reduction },
    [PATH_PEER_ACCESS] = { "peer_access", path_peer_access },
    [PATH_STAGING] = { "staging", path_staging },
    [PATH_FALLBACK] = { "fallback", path_fallback },
    [PATH_SELECT] = { "select", path_select },
    [PATH_LATENCY] = { "latency_path", path_latency },
    [PATH_SCHEDULE] = { "schedule", path_schedule },
};
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

/* The paths from the from-th on, until one takes the call; then the
 * host copies of device buffers (path_staging) go back. */
static int run_paths(mca_coll_xccl_call_t *c, run_t *run, size_t from)
{
    int rc = MPI_SUCCESS;
    for (size_t i = from; i < NPATHS; i++) {
        if (paths[i].take(c, run, &rc)) {
            break;                   /* path_schedule takes every call it sees */
        }
    }
    if (run->staged) {
        rc = mca_coll_xccl_staged_finish(c->m, c->coll, &run->st, rc, run->inner, c->request);
    }
    return rc;
}

/* A nonblocking call that a peer-access provider started and not every
 * rank could take (coll_xccl_provider.h): the rest of the paths, from
 * progress, as a request in inner. */
static int peer_host(mca_coll_xccl_call_t *c, ompi_request_t **inner)
{
    run_t run = { .why = NULL, .s = c->sbuf, .r = c->rbuf, .request = inner };
    c->request = inner;
    c->no_level = 1;
    return run_paths(c, &run, PATH_STAGING);
}

/* The path table's way. */
static __opal_attribute_noinline__ int run_call(mca_coll_xccl_call_t *c, const char *why)
{
    run_t run = { .why = why, .s = c->sbuf, .r = c->rbuf, .request = c->request };
    int rc = run_paths(c, &run, 0);
    free(c->counts);
    c->counts = NULL;
    return rc;
}

/* Where this thread's next described call goes (coll_xccl_path.h). */
static __thread mca_coll_xccl_call_t *keep_to;

void mca_coll_xccl_call_keep_to(mca_coll_xccl_call_t *to)
{
    keep_to = to;
}

int mca_coll_xccl_call_keep(mca_coll_xccl_call_t *c)
{
    mca_coll_xccl_call_t *to = keep_to;
    keep_to = NULL;
    if (NULL != c->args.counts && c->args.counts != c->counts) {
        /* reduce_scatter's counts on the entry's stack */
        const size_t n = (size_t) c->m->size * sizeof(size_t);
        size_t *own = malloc(n);
        if (NULL == own) {
            return mca_coll_xccl_error(c->m, c->coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
        }
        memcpy(own, c->args.counts, n);
        c->counts = own;
        c->args.counts = own;
    }
    if (NULL == to) {
        free(c->counts);
        return MPI_ERR_INTERN;
    }
    *to = *c;
    return MPI_SUCCESS;
}

int mca_coll_xccl_call_route(mca_coll_xccl_call_t *c)
{
    const char *why = mca_coll_xccl_call_decide(c);
    /* The fallback's fast way: a call for the fallback on buffers in the
     * heap, with the fewest steps. */
    if (NULL != why && NULL == c->counts && mca_coll_xccl_gpu_surely_host(c)) {
        mca_coll_xccl_log_call(c->m, c->coll, mca_coll_xccl_call_nb(c), c->bytes, -1, -1.0, why, NULL);
        return mca_coll_xccl_call_previous(c, c->sbuf, c->rbuf, c->request);
    }
    return run_call(c, why);
}
