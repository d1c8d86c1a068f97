/*
 * CUDA IPC peer access: nonblocking calls (the provider's start and
 * progress).  A nonblocking call (start): this rank's part is found at the
 * call (its buffers exported, its stream set taken, an event after the
 * application's work so far), the rest runs from progress without waiting:
 * its turn on the communicator, the two rounds (tested, not waited for),
 * the schedule (flags posted when a query says their work is done), its
 * end (an event after its last work).  Where not every rank can, the host
 * paths run it (job->host).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/request/request.h"

#include "coll_xccl_gpu_ipc_int.h"
#include "coll_xccl_request.h"
#include "coll_xccl_select.h"

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
    mca_coll_xccl_gpu_ipc_pass_turn(job->c.m->ipc);
    mca_coll_xccl_gpu_ipc_release_set(&job->call, '\0' != job->call.error[0]);
    job->state = JOB_HOST;
    return job_step(job);
}

/* Its schedule's executor, with the call's hooks: 1, or 0 (then it fails). */
static int job_exec(ipc_job_t *job)
{
    ipc_call_t *call = &job->call;
    mca_coll_xccl_exec_hooks_t hooks = { .bufs = { NULL } };
    mca_coll_xccl_gpu_ipc_set_hooks(call, job->dev, job->s, &hooks);
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
        if (!mca_coll_xccl_gpu_ipc_my_turn(ipc, job->e)) {
            return 0;
        }
        if (!job->in) {
            mca_coll_xccl_gpu_ipc_publish(m, ipc, job->e, XCCL_IPC_STAGE_OUT);
            return job_to_host(job);
        }
        mca_coll_xccl_gpu_ipc_lend(m, ipc, call, job->bufs);
        mca_coll_xccl_gpu_ipc_publish(m, ipc, job->e, XCCL_IPC_STAGE_IN);
        job->state = JOB_ROUND1;
        /* fall through */
    case JOB_ROUND1:
        if (!mca_coll_xccl_gpu_ipc_reached(m, ipc, job->e, XCCL_IPC_STAGE_OUT)) {
            return 0;
        }
        if (!mca_coll_xccl_gpu_ipc_round1_in(m, ipc, job->e)) {
            return job_to_host(job);
        }
        ipc->slot[m->rank]->mapped = mca_coll_xccl_gpu_ipc_map_peers(m, call, job->s);
        mca_coll_xccl_gpu_ipc_publish(m, ipc, job->e, XCCL_IPC_STAGE_MAPPED);
        job->state = JOB_ROUND2;
        /* fall through */
    case JOB_ROUND2:
        if (!mca_coll_xccl_gpu_ipc_reached(m, ipc, job->e, XCCL_IPC_STAGE_MAPPED)) {
            return 0;
        }
        if (!mca_coll_xccl_gpu_ipc_round2_mapped(m, ipc)) {
            return job_to_host(job);
        }
        mca_coll_xccl_log_call(m, job->c.coll, mca_coll_xccl_call_nb(&job->c), job->c.bytes, job->algo, -1.0, NULL,
                               "cuda_ipc");
        if (!job_exec(job)) {
            mca_coll_xccl_gpu_ipc_fail(call, "out of memory for the executor");
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
            mca_coll_xccl_gpu_ipc_fail(call, "cuCtxPushCurrent failed");
        }
        rc = job->exec_up ? xccl_exec_progress(&job->exec) : -1;
        if (0 == rc) {
            if (pushed) {
                mca_coll_xccl_gpu_pop();
            }
            return 0;
        }
        job->rc = 1 == rc ? MPI_SUCCESS : mca_coll_xccl_exec_failed(m, job->c.coll);
        mca_coll_xccl_gpu_ipc_flush(call);
        if (XCCL_CUDA_SUCCESS != (q = call->cu->EventRecord(call->set->ev[XCCL_IPC_PEND + 1],
                                                            call->set->in))) {
            mca_coll_xccl_gpu_ipc_fail(call, xccl_cu_error("cuEventRecord", q));
            mca_coll_xccl_gpu_ipc_sync(call);
        }
        if (pushed) {
            mca_coll_xccl_gpu_pop();
        }
        job->state = JOB_END;
        /* fall through */
    case JOB_END:
        q = XCCL_CUDA_SUCCESS;
        if (0 != mca_coll_xccl_gpu_push(call->ctx)) {
            mca_coll_xccl_gpu_ipc_fail(call, "cuCtxPushCurrent failed");
            mca_coll_xccl_gpu_ipc_drain_posts(call, 1);
        } else {
            if (mca_coll_xccl_gpu_ipc_drain_posts(call, 0) && '\0' == call->error[0]) {
                q = call->cu->EventQuery(call->set->ev[XCCL_IPC_PEND + 1]);
            }
            mca_coll_xccl_gpu_pop();
        }
        if (call->npend > 0 || XCCL_CUDA_ERROR_NOT_READY == q) {
            return 0;
        }
        if (XCCL_CUDA_SUCCESS != q) {
            mca_coll_xccl_gpu_ipc_fail(call, xccl_cu_error("cuEventQuery", q));
        }
        ipc->no_batch |= call->q.one_by_one;
        mca_coll_xccl_gpu_ipc_release_set(call, '\0' != call->error[0]);
        mca_coll_xccl_gpu_ipc_pass_turn(ipc);
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
int mca_coll_xccl_gpu_ipc_progress(void)
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
    if (!mca_coll_xccl_gpu_ipc_own_part(&job->c, call, job->bufs, leader, job->dev)) {
        return 0;
    }
    if (0 != mca_coll_xccl_gpu_push(call->ctx)) {
        return 0;
    }
    int ok = mca_coll_xccl_gpu_ipc_take_set(call, job->s->scratch_bytes) &&
             mca_coll_xccl_gpu_ipc_mark_user_work(call);
    mca_coll_xccl_gpu_pop();
    if (!ok) {
        mca_coll_xccl_log(2, "i%s comm=%u rank=%d: no cuda ipc: %s", xccl_coll_name(job->c.coll),
                          job->c.m->cid, job->c.m->world_rank, call->error);
        mca_coll_xccl_gpu_ipc_release_set(call, 1);
        call->error[0] = '\0';
    }
    return ok;
}

int mca_coll_xccl_gpu_ipc_start(mca_coll_xccl_call_t *c, const xccl_sched_t *s, int algo,
                                mca_coll_xccl_host_fn_t host)
{
    mca_coll_xccl_module_t *m = c->m;
    struct mca_coll_xccl_ipc *ipc = m->ipc;
    ipc_job_t *job = calloc(1, sizeof(*job));
    ompi_request_t *promise = NULL != job ? mca_coll_xccl_promise_new(m) : NULL;
    /* The job's own copy of reduce_scatter's counts (they may be on the
     * entry's stack) or of the v forms' vec (the call frees its own when
     * the entry returns; the host paths read it later) */
    const size_t *from = NULL != c->args.counts ? c->args.counts : c->args.vec;
    const size_t nfrom = NULL != c->args.counts ? (size_t) m->size : c->args.nvec;
    size_t *counts = NULL;
    if (NULL != job && NULL != from && NULL != (counts = malloc((nfrom ? nfrom : 1) * sizeof(size_t)))) {
        memcpy(counts, from, nfrom * sizeof(size_t));
    }
    if (NULL == promise || (NULL != from && NULL == counts)) {
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
    if (NULL != c->args.counts) {
        job->c.args.counts = counts;
    } else {
        job->c.args.vec = counts;
    }
    job->c.seq = m->seq++;
    job->e = ipc->epoch++;
    job->s = s;
    job->algo = algo;
    job->host = host;
    job->promise = promise;
    job->call = (ipc_call_t) { .m = m, .ipc = ipc, .cu = xccl_cu(), .async = 1 };
    job->in = job_own_part(job, mca_coll_xccl_gpu_ipc_leader(ipc, c));
    *c->request = promise;
    OPAL_THREAD_LOCK(&jobs_lock);
    *jobs_tail = job;
    jobs_tail = &job->next;
    __atomic_fetch_add(&jobs_active, 1, __ATOMIC_RELAXED);
    OPAL_THREAD_UNLOCK(&jobs_lock);
    mca_coll_xccl_gpu_ipc_progress();   /* its first steps now */
    return MPI_SUCCESS;
}
