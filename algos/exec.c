/* The generic executor: runs any schedule over an xccl_transport_t. */
#include "xccl_algos.h"

#include <stdlib.h>
#include <string.h>

static inline char *ref_ptr(const xccl_exec_t *e, xccl_ref_t r)
{
    return (char *) e->bufs[r.buf] + r.off;
}

int xccl_exec_init(xccl_exec_t *e, const xccl_sched_t *s, const xccl_transport_t *tr,
                   void *const bufs[XCCL_NBUF], xccl_reduce_cb_t reduce, void *reduce_ctx,
                   uint32_t seq)
{
    memset(e, 0, sizeof(*e));
    e->s = s;
    e->tr = tr;
    memcpy(e->bufs, bufs, sizeof(e->bufs));
    e->reduce = reduce;
    e->reduce_ctx = reduce_ctx;
    e->seq = seq;
    e->reqs = e->inline_reqs;
    if (s->max_xfers > XCCL_EXEC_INLINE_REQS) {
        e->reqs = malloc(s->max_xfers * sizeof(void *));
        if (NULL == e->reqs) {
            e->status = -1;
            return -1;
        }
    }
    return 0;
}

void xccl_exec_fini(xccl_exec_t *e)
{
    for (size_t i = 0; i < e->nreqs; i++) {
        e->tr->cancel(e->tr->ctx, e->reqs[i]);
    }
    e->nreqs = 0;
    if (e->reqs != e->inline_reqs) {
        free(e->reqs);
    }
    e->reqs = NULL;
}

static int post_transfers(xccl_exec_t *e, size_t begin, size_t end)
{
    e->nreqs = 0;
    /* Receives first, so that a peer's send finds its match early. */
    for (int pass = 0; pass < 2; pass++) {
        uint8_t want = pass ? XCCL_ACT_SEND : XCCL_ACT_RECV;
        for (size_t i = begin; i < end; i++) {
            const xccl_action_t *a = &e->s->acts[i];
            void *req = NULL;
            int rc;
            if (a->kind != want) {
                continue;
            }
            if (XCCL_ACT_RECV == a->kind) {
                rc = e->tr->irecv(e->tr->ctx, a->peer, ref_ptr(e, a->dst), a->len,
                                  e->seq, a->idx, &req);
            } else {
                rc = e->tr->isend(e->tr->ctx, a->peer, ref_ptr(e, a->a), a->len,
                                  e->seq, a->idx, &req);
            }
            if (rc < 0) {
                return rc;
            }
            if (req) {
                e->reqs[e->nreqs++] = req;
            }
        }
    }
    return 0;
}

static int run_local(xccl_exec_t *e, size_t begin, size_t end)
{
    for (size_t i = begin; i < end; i++) {
        const xccl_action_t *a = &e->s->acts[i];
        if (XCCL_ACT_COPY == a->kind) {
            char *dst = ref_ptr(e, a->dst), *src = ref_ptr(e, a->a);
            if (dst != src) {
                if (e->copy) {
                    int rc = e->copy(e->copy_ctx, dst, src, a->len);
                    if (rc < 0) {
                        return rc;
                    }
                } else {
                    memmove(dst, src, a->len);
                }
            }
        } else if (XCCL_ACT_REDUCE == a->kind) {
            int rc = e->reduce(e->reduce_ctx, ref_ptr(e, a->dst), ref_ptr(e, a->a),
                               ref_ptr(e, a->b), a->len / e->s->elem_size);
            if (rc < 0) {
                return rc;
            }
        }
    }
    return 0;
}

int xccl_exec_progress(xccl_exec_t *e)
{
    const xccl_sched_t *s = e->s;

    while (0 == e->status) {
        if (e->step >= s->nsteps) {
            int rc = e->gate && e->gate->drain ? e->gate->drain(e->gate->ctx) : 1;
            if (0 != rc) {
                e->status = rc;
            }
            break;
        }
        size_t begin = s->step_start[e->step];
        size_t end = (e->step + 1 < s->nsteps) ? s->step_start[e->step + 1] : s->nacts;
        int rc;

        if (!e->posted) {
            if (e->gate && e->gate->step_ready) {
                rc = e->gate->step_ready(e->gate->ctx, e->step);
                if (rc < 0) {
                    e->status = rc;
                }
                if (rc <= 0) {
                    break;
                }
            }
            rc = post_transfers(e, begin, end);
            e->posted = 1;
            if (rc < 0) {
                e->status = rc;
                break;
            }
        }
        if (e->nreqs > 0) {
            e->tr->progress(e->tr->ctx);
            /* Compact the list of pending requests. */
            size_t keep = 0;
            for (size_t i = 0; i < e->nreqs; i++) {
                rc = e->tr->test(e->tr->ctx, e->reqs[i]);
                if (rc < 0) {
                    e->status = rc;
                } else if (0 == rc) {
                    e->reqs[keep++] = e->reqs[i];
                }
            }
            e->nreqs = keep;
            if (e->status < 0 || keep > 0) {
                break;
            }
        }
        rc = run_local(e, begin, end);
        if (0 == rc && e->gate && e->gate->step_done) {
            rc = e->gate->step_done(e->gate->ctx, e->step);
        }
        if (rc < 0) {
            e->status = rc;
            break;
        }
        e->step++;
        e->posted = 0;
    }
    return e->status;
}
