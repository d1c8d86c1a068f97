/*
 * Device buffers.  Where the transport moves host memory only (Debian's
 * UCX has no CUDA support): host copies of the buffers' spans, in pinned
 * memory of a staging set of the buffer's CUDA context.  Where UCX moves
 * CUDA memory: the device pointers themselves, with the schedule's copies
 * and reductions on the GPU (coll_xccl_gpu_direct.c).
 *
 * The call on the host copies is exactly the call a rank with host buffers
 * makes (same path, same algorithm, same schedule), so ranks may mix device
 * and host buffers, and direct and staged ranks.  When that call runs a
 * schedule, the copies overlap it (xccl_stage_plan): each step waits only
 * for the pieces it touches, each piece goes back once the schedule has
 * written it for the last time.  The waits are local (a copy completes
 * whatever the peers do), so they cannot deadlock against ranks that do
 * not stage.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"

#include "algos/xccl_stage.h"
#include "coll_xccl_gpu.h"
#include "coll_xccl_gpu_direct.h"
#include "gpu/xccl_gpu.h"

/* ------------------------------------------------------------ where, host copies */

uintptr_t mca_coll_xccl_heap_lo = UINTPTR_MAX;     /* nothing is sure before init */

void mca_coll_xccl_gpu_init(void)
{
    /* start_brk is field 47 of /proc/self/stat (Linux >= 3.5), counted
     * after the command name, which may hold spaces: from its last ')'. */
    char buf[1024];
    unsigned long long lo = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 47; field++) {
        p = strchr(p + 1, ' ');
    }
    if (NULL == &__curbrk) {
        return;                        /* not glibc: nothing is sure */
    }
    if (p && 1 == sscanf(p + 1, "%llu", &lo) && lo > 0 && lo <= (uintptr_t) __curbrk) {
        mca_coll_xccl_heap_lo = (uintptr_t) lo;
    } else {
        mca_coll_xccl_heap_lo = (uintptr_t) __curbrk;  /* what grows from now on */
    }
}

void mca_coll_xccl_gpu_where(const mca_coll_xccl_call_t *c, mca_coll_xccl_where_t *w)
{
    const void *a = mca_coll_xccl_send_in_place(c) ? NULL : c->sbuf, *b = c->rbuf;
    xccl_mem_info_t *ia = &w->mem[0], *ib = &w->mem[1];
    if (NULL != c->mem) {
        *ia = c->mem[0];
        *ib = c->mem[1];
    } else {
        xccl_gpu_classify(a, ia);
        xccl_gpu_classify(b, ib);
    }
    const int da = XCCL_MEM_DEVICE == ia->type, db = XCCL_MEM_DEVICE == ib->type;
    w->device = da || db;
    w->all = (da || NULL == a) && (db || NULL == b) && (!da || !db || ia->ctx == ib->ctx);
    w->ctx = da ? ia->ctx : ib->ctx;
}

/* RECV first, SEND 64-byte aligned after it; copy_r: RECV is read (in
 * place, or gaps that must survive the copy back); copy_out: RECV goes back
 * (not at a bcast root: its data has not changed). */
int mca_coll_xccl_gpu_stage_call(const mca_coll_xccl_call_t *c, const mca_coll_xccl_where_t *w,
                                 mca_coll_xccl_staged_t *staged)
{
    mca_coll_xccl_module_t *m = c->m;
    mca_coll_xccl_gpu_stage_t *st = &staged->gpu;
    const xccl_cu_api_t *cu = xccl_cu();
    const int has_send = NULL != c->sbuf && MPI_IN_PLACE != c->sbuf;
    ptrdiff_t sgap = 0, rgap = 0;
    const size_t sspan = has_send ? (size_t) opal_datatype_span(&c->sdtype->super, c->sn, &sgap) : 0;
    const size_t rspan = (size_t) opal_datatype_span(&c->rdtype->super, c->rn, &rgap);
    const size_t soff = (rspan + 63) & ~(size_t) 63;
    const char *error = NULL;

    memset(st, 0, sizeof(*st));
    st->ctx = w->ctx;
    if (NULL == cu) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "device buffer without a cuda driver");
    }
    if (0 != mca_coll_xccl_gpu_push(w->ctx)) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    st->set = xccl_gpu_set_get((xccl_cucontext_t) w->ctx, soff + sspan,
                               mca_coll_xccl_component.gpu_pool_bytes, &error);
    mca_coll_xccl_gpu_pop();
    if (NULL == st->set) {
        return mca_coll_xccl_error(m, c->coll, MPI_ERR_INTERN, error);
    }
    st->hr = st->set->host;
    st->hs = st->hr + soff;
    st->sdev = has_send ? (const char *) c->sbuf + sgap : NULL;
    st->sspan = sspan;
    st->rdev = (char *) c->rbuf + rgap;
    st->rspan = rspan;
    st->copy_r = c->copy_r || c->in_place || !mca_coll_xccl_is_contiguous(c->rdtype, c->rn);
    st->copy_out = c->copy_out;
    st->all_device = w->all;
    staged->s = has_send ? (const char *) st->hs - sgap : c->sbuf;
    staged->r = st->hr - rgap;
    mca_coll_xccl_log(2, "%s comm=%u rank=%d: device buffers, host copies of %zu + %zu bytes "
                      "ready", xccl_coll_name(c->coll), m->cid, m->world_rank, sspan, rspan);
    return MPI_SUCCESS;
}

int mca_coll_xccl_gpu_stage_fill(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                 mca_coll_xccl_gpu_stage_t *st)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const char *error = NULL;
    if (NULL == st->set || st->filled || st->pipe || st->direct) {
        return MPI_SUCCESS;
    }
    if (0 != mca_coll_xccl_gpu_push(st->ctx)) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    /* A blocking stream: after the application's work on the legacy
     * default stream.  Work on its own non-blocking streams must be
     * complete before the call, as with any CUDA-aware MPI. */
    if (st->sspan) {
        error = xccl_gpu_copy(st->hs, st->sdev, st->sspan, XCCL_GPU_TO_HOST, st->set->in);
    }
    if (NULL == error && st->copy_r && st->rspan) {
        error = xccl_gpu_copy(st->hr, st->rdev, st->rspan, XCCL_GPU_TO_HOST, st->set->in);
    }
    if (NULL == error) {
        error = mca_coll_xccl_gpu_sync(cu, st->set->in);
    }
    mca_coll_xccl_gpu_pop();
    st->filled = NULL == error;
    return error ? mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error) : MPI_SUCCESS;
}

/* ------------------------------------------------------------ pipelined staging */

/* The copies of one staged call that runs a schedule: in pieces on the
 * set's "in" stream, all queued at once in the order the schedule first
 * touches them, an event after each; a step runs once the event of the
 * last piece it needs has completed.  Pieces go back on the "out" stream
 * after the step that last writes them. */
enum { REG_SEND, REG_RECV };

struct mca_coll_xccl_gpu_pipe {
    mca_coll_xccl_gpu_hooks_t h;
    xccl_stage_plan_t plan;
    xccl_stage_region_t reg[2];
    const char *dev[2];              /* device address of each region */
    size_t arrived;                  /* copies in known complete */
};

static int pipe_ready(void *ctx, size_t step)
{
    struct mca_coll_xccl_gpu_pipe *p = ctx;
    const size_t need = p->plan.need_in[step];
    if (p->arrived >= need) {
        return 1;
    }
    int rc = mca_coll_xccl_gpu_hooks_done(&p->h, p->h.set->ev[need - 1], NULL);
    if (1 == rc) {
        p->arrived = need;             /* one stream: everything before it too */
    }
    return rc;
}

static int pipe_done(void *ctx, size_t step)
{
    struct mca_coll_xccl_gpu_pipe *p = ctx;
    const size_t first = p->plan.out_start[step], last = p->plan.out_start[step + 1];
    if (first == last) {
        return 0;
    }
    const char *error = NULL;
    if (0 != mca_coll_xccl_gpu_push(p->h.ctx)) {
        return mca_coll_xccl_gpu_hooks_fail(&p->h, "cuCtxPushCurrent failed");
    }
    for (size_t i = first; i < last && NULL == error; i++) {
        const xccl_stage_piece_t *pc = &p->plan.out[i];
        error = xccl_gpu_copy((char *) p->dev[pc->region] + pc->off,
                              (const char *) p->reg[pc->region].base + pc->off, pc->len, XCCL_GPU_FROM_HOST,
                              p->h.set->out);
    }
    mca_coll_xccl_gpu_pop();
    return error ? mca_coll_xccl_gpu_hooks_fail(&p->h, error) : 0;
}

static int pipe_drain(void *ctx)
{
    struct mca_coll_xccl_gpu_pipe *p = ctx;
    return mca_coll_xccl_gpu_hooks_done(&p->h, NULL, p->h.set->out);
}

/* Max pieces per region: bounds the events and copies of one call. */
#define XCCL_STAGE_MAX_PIECES 256

int mca_coll_xccl_gpu_stage_gate(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                 mca_coll_xccl_gpu_stage_t *st, const xccl_sched_t *s, int gpu_dt,
                                 int gpu_op, mca_coll_xccl_exec_hooks_t *hooks)
{
    void *const *bufs = hooks->bufs;
    if (NULL == st->set || st->filled || st->pipe || st->direct) {
        return MPI_SUCCESS;
    }
    /* Only UCX moves device memory; the PML transport runs on the copies. */
    if (m->ucx && mca_coll_xccl_gpu_direct_wanted()) {
        int rc = mca_coll_xccl_gpu_direct_gate(m, coll, st, s, gpu_dt, gpu_op, hooks);
        if (MPI_SUCCESS != rc || NULL != st->direct) {
            return rc;
        }
    }
    if (0 == mca_coll_xccl_component.gpu_chunk_bytes) {
        return mca_coll_xccl_gpu_stage_fill(m, coll, st);
    }
    struct mca_coll_xccl_gpu_pipe *p = calloc(1, sizeof(*p));
    if (NULL == p) {
        return mca_coll_xccl_gpu_stage_fill(m, coll, st);
    }
    p->h.ctx = st->ctx;
    p->h.set = st->set;
    p->h.what = "staging pipeline";
    p->reg[REG_SEND] = (xccl_stage_region_t) { st->hs, st->sspan, 1, 0 };
    p->reg[REG_RECV] = (xccl_stage_region_t) { st->hr, st->rspan, st->copy_r, st->copy_out };
    p->dev[REG_SEND] = st->sdev;
    p->dev[REG_RECV] = st->rdev;
    if (0 != xccl_stage_plan(&p->plan, s, bufs, p->reg, 2, mca_coll_xccl_component.gpu_chunk_bytes,
                             XCCL_STAGE_MAX_PIECES)) {
        free(p);
        return mca_coll_xccl_gpu_stage_fill(m, coll, st);
    }

    const xccl_cu_api_t *cu = xccl_cu();
    const char *error = NULL;
    if (0 != mca_coll_xccl_gpu_push(st->ctx)) {
        xccl_stage_plan_fini(&p->plan);
        free(p);
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    if (0 == xccl_gpu_set_events(st->set, p->plan.nin, &error)) {
        for (size_t i = 0; i < p->plan.nin && NULL == error; i++) {
            const xccl_stage_piece_t *pc = &p->plan.in[i];
            error = xccl_gpu_copy((char *) p->reg[pc->region].base + pc->off,
                                  p->dev[pc->region] + pc->off, pc->len, XCCL_GPU_TO_HOST, st->set->in);
            xccl_curesult_t rc;
            if (NULL == error &&
                XCCL_CUDA_SUCCESS != (rc = cu->EventRecord(st->set->ev[i], st->set->in))) {
                error = xccl_cu_error("cuEventRecord", rc);
            }
        }
    }
    mca_coll_xccl_gpu_pop();
    /* From here on stage_out owns p (it waits for what was queued). */
    st->pipe = p;
    if (error) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error);
    }
    p->h.gate = (xccl_gate_t) { p, pipe_ready, pipe_done, pipe_drain };
    hooks->gate = &p->h.gate;
    mca_coll_xccl_log(2, "%s comm=%u rank=%d: staging pipelined: %zu copies in, %zu out, "
                      "pieces of %zu bytes, %zu steps", xccl_coll_name(coll), m->cid,
                      m->world_rank, p->plan.nin, p->plan.nout, p->plan.piece, s->nsteps);
    return MPI_SUCCESS;
}

int mca_coll_xccl_gpu_stage_out(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                mca_coll_xccl_gpu_stage_t *st, int ok)
{
    const xccl_cu_api_t *cu = xccl_cu();
    const char *error = NULL;
    int rc = MPI_SUCCESS;
    if (NULL == st->set) {
        return MPI_SUCCESS;
    }
    if (0 != mca_coll_xccl_gpu_push(st->ctx)) {
        return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "cuCtxPushCurrent failed");
    }
    struct mca_coll_xccl_gpu_pipe *p = st->pipe;
    if (st->direct) {
        error = mca_coll_xccl_gpu_direct_end(m, coll, st);
    } else if (p) {
        /* What was queued must finish before the host memory is reused,
         * also after an error. */
        const char *e1 = mca_coll_xccl_gpu_sync(cu, st->set->in);
        const char *e2 = mca_coll_xccl_gpu_sync(cu, st->set->out);
        error = p->h.error[0] ? p->h.error : e1 ? e1 : e2;
    } else if (ok && st->filled && st->copy_out && st->rspan) {
        /* Filled for the fallback: all of RECV goes back.  (Never filled:
         * the host call touched no data, nothing to copy.) */
        error = xccl_gpu_copy(st->rdev, st->hr, st->rspan, XCCL_GPU_FROM_HOST, st->set->out);
        if (NULL == error) {
            error = mca_coll_xccl_gpu_sync(cu, st->set->out);
        }
    }                          /* (stage_fill waited for its copies) */
    if (error) {
        rc = mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, error);
    }
    if (p) {
        xccl_stage_plan_fini(&p->plan);
        free(p);
        st->pipe = NULL;
    }
    xccl_gpu_set_put(st->set, NULL != error);
    st->set = NULL;
    mca_coll_xccl_gpu_pop();
    return rc;
}
