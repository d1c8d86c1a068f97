/*
 * Kept calls: the call of a persistent request (coll_xccl_persist_start.c)
 * that runs as the path table would run it as a request (the level's
 * latency path, the v forms' latency path, or a schedule of the level
 * without transfers), kept by its owner from start to start: no
 * allocation, no request of its own, no completion callback.  A start
 * takes a call number and the level's next turn, runs as far as it gets
 * where the turn has come, and leaves the rest to progress
 * (mca_coll_xccl_progress_requests calls mca_coll_xccl_kept_progress),
 * which completes the owner.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/request/request.h"

#include "coll_xccl_kept.h"
#include "coll_xccl_level.h"

/* Kept calls in flight (mca_coll_xccl_kept_start), under kept_lock. */
static mca_coll_xccl_kept_t *active_kept;
static opal_mutex_t kept_lock = OPAL_MUTEX_STATIC_INIT;
static int progressing;

/* A kept call of the v forms' latency path, as kept_run. */
static int kept_v_run(mca_coll_xccl_kept_t *k, unsigned spins)
{
    if (k->begun) {
        return mca_coll_xccl_latency_v_run(&k->v, spins);
    }
    k->begun = 1;
    if (k->v_len > 0) {
        const int even = XCCL_COLL_GATHER == k->coll || XCCL_COLL_SCATTER == k->coll;
        memcpy(k->v_vec, even ? k->v_vec + k->v_len : k->v_args->vec, k->v_len * sizeof(size_t));
    }
    return mca_coll_xccl_latency_v_begin(&k->v, k->m, k->coll, &k->v_a, k->v_es,
                                         NULL != k->red ? k->red->kernel : NULL, k->v_ws, k->v_wr, k->seq, spins);
}

int mca_coll_xccl_kept_v(mca_coll_xccl_kept_t *k, int size, const xccl_coll_args_t *a, size_t es,
                         const char *ws, char *wr)
{
    /* the steps change the sizes where only some ranks know them
     * (alltoallv's four arrays, the others' two), and gather's and
     * scatter's even blocks as gatherv's and scatterv's (made once, after
     * the copy: no allocation at a start) */
    const int even = XCCL_COLL_GATHER == k->coll || XCCL_COLL_SCATTER == k->coll;
    k->v_len = even || XCCL_COLL_GATHERV == k->coll || XCCL_COLL_SCATTERV == k->coll ? 2 * (size_t) size
               : XCCL_COLL_ALLTOALLV == k->coll                                    ? 4 * (size_t) size
                                                                                   : 0;
    k->v_vec = k->v_len > 0 ? malloc((even ? 2 : 1) * k->v_len * sizeof(size_t)) : NULL;
    if (k->v_len > 0 && NULL == k->v_vec) {
        return -1;
    }
    if (even) {
        mca_coll_xccl_latency_v_even(k->v_vec + k->v_len, size, a->block);
    }
    k->v_args = a;
    k->v_a = *a;
    if (k->v_len > 0) {
        k->v_a.vec = k->v_vec;
    }
    k->v_es = es;
    k->v_ws = ws;
    k->v_wr = wr;
    return 0;
}

/* A kept call in its turn: its numbers and units (the latency path) or
 * its executor (a schedule) first, then as far as it gets in a few tests.
 * 1 done, 0 not yet, <0 failed (the latency paths: -1 a rank of the node
 * is gone, -2 out of memory, -3 a single copy failed; a schedule: a step
 * failed, or no memory for its executor). */
static inline __attribute__((always_inline)) int kept_run(mca_coll_xccl_kept_t *k)
{
    const unsigned spins = mca_coll_xccl_spins_per_progress(MCA_COLL_XCCL_REQUEST_SPINS);
    int rc = 0;
    if (NULL == k->sched) {
        if (NULL != k->v_args) {
            return kept_v_run(k, spins);
        }
        if (k->begun) {
            return mca_coll_xccl_latency_run(&k->st, spins);
        }
        k->begun = 1;
        return mca_coll_xccl_latency_begin(&k->st, spins);
    }
    if (!k->begun) {
        if (0 != mca_coll_xccl_exec_init(&k->e, k->m, k->sched, &k->hooks, k->red, k->scratch, k->seq)) {
            return -1;
        }
        k->begun = 1;
    }
    for (unsigned i = 0; 0 == rc && i < spins; i++) {
        rc = xccl_exec_progress(&k->e);
    }
    if (0 != rc) {
        xccl_exec_fini(&k->e);
    }
    return rc;
}

/* The owner of a kept call that ended with rc (kept_run's, not 0); the
 * turn was passed on already.  signal: another thread may wait for the
 * owner already (not while its start runs: MPI lets one thread use a
 * request at a time). */
static void kept_complete(mca_coll_xccl_kept_t *k, int rc, bool signal)
{
    ompi_request_t *owner = k->owner;
    owner->req_status.MPI_ERROR = 1 == rc              ? MPI_SUCCESS
                                  : NULL != k->sched ? mca_coll_xccl_exec_failed(k->m, k->coll)
                                                     : mca_coll_xccl_latency_failed(k->m, k->coll, rc);
    ompi_request_complete(owner, signal);
}

int mca_coll_xccl_kept_start(mca_coll_xccl_kept_t *k)
{
    mca_coll_xccl_module_t *m = k->m;
    k->seq = m->seq++;               /* a call number, as every call takes one */
    k->ticket = m->level_ticket++;
    k->begun = 0;
    if (mca_coll_xccl_level_my_turn(m, k->ticket)) {
        const int rc = kept_run(k);
        if (0 != rc) {
            mca_coll_xccl_level_pass_turn(m);
            kept_complete(k, rc, false);
            return MPI_SUCCESS;
        }
    }
    OPAL_THREAD_LOCK(&kept_lock);
    k->next = active_kept;
    active_kept = k;
    OPAL_THREAD_UNLOCK(&kept_lock);
    return MPI_SUCCESS;
}

int mca_coll_xccl_kept_active(void)
{
    return NULL != __atomic_load_n(&active_kept, __ATOMIC_RELAXED);
}

/* Under the lock: the kept calls in flight, each in its turn; those that
 * ended pass the turn on and go onto *done (through next, their code in
 * rc), to be completed outside the lock.  How many ended. */
static int kept_progress(mca_coll_xccl_kept_t **done)
{
    int events = 0;
    for (mca_coll_xccl_kept_t **kp = &active_kept; *kp;) {
        mca_coll_xccl_kept_t *k = *kp;
        const int rc = mca_coll_xccl_level_my_turn(k->m, k->ticket) ? kept_run(k) : 0;
        if (0 == rc) {
            kp = &k->next;
            continue;
        }
        mca_coll_xccl_level_pass_turn(k->m);
        *kp = k->next;
        k->rc = rc;
        k->next = *done;
        *done = k;
        events++;
    }
    return events;
}

int mca_coll_xccl_kept_progress(void)
{
    mca_coll_xccl_kept_t *done = NULL;
    if (NULL == active_kept) {
        return 0;
    }
    OPAL_THREAD_LOCK(&kept_lock);
    if (progressing) {                 /* a reduction re-entered progress */
        OPAL_THREAD_UNLOCK(&kept_lock);
        return 0;
    }
    progressing = 1;
    const int events = kept_progress(&done);
    progressing = 0;
    OPAL_THREAD_UNLOCK(&kept_lock);
    while (done) {
        mca_coll_xccl_kept_t *k = done;
        done = k->next;
        kept_complete(k, k->rc, true);
    }
    return events;
}
