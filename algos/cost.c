/* The alpha-beta-gamma cost of a schedule, read off the schedule itself. */
#include "xccl_algos.h"

double xccl_sched_cost(const xccl_sched_t *s, const xccl_cost_model_t *m)
{
    double t = 0.0;
    size_t transfer_steps = 0;
    for (size_t st = 0; st < s->nsteps; st++) {
        size_t begin = s->step_start[st];
        size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        size_t sends = 0, recvs = 0, sent = 0, received = 0, reduced = 0, copied = 0;
        for (size_t i = begin; i < end; i++) {
            const xccl_action_t *a = &s->acts[i];
            switch (a->kind) {
            case XCCL_ACT_SEND: sends++; sent += a->len; break;
            case XCCL_ACT_RECV: recvs++; received += a->len; break;
            case XCCL_ACT_REDUCE: reduced += a->len; break;
            default: copied += a->len; break;
            }
        }
        transfer_steps += (sends + recvs) > 0;
        t += m->alpha * (double) (sends > recvs ? sends : recvs) +
             m->beta * (double) (sent > received ? sent : received) +
             m->gamma * (double) reduced + m->delta * (double) copied;
    }
    /* Rounds left empty by zero-length chunks still cost a latency each,
     * unless the whole call moves nothing. */
    if (transfer_steps > 0 && s->rounds > transfer_steps) {
        t += m->alpha * (double) (s->rounds - transfer_steps);
    }
    return t;
}
