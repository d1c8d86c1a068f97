/*
 * Barrier: dissemination over messages, and one flag barrier of the
 * shared-memory level.
 *
 * Cost (p ranks):
 *   dissemination:  ceil(lg p) a (one byte each way per round)
 *   shm:            one flag post and p - 1 flag waits
 */
#include "mesh_util.h"
#include "xccl_build.h"

/* In round k rank r signals r + 2^k and hears from r - 2^k: after round k
 * it has heard, through some chain of messages, from the 2^(k+1) - 1
 * ranks before it, so after ceil(lg p) rounds from every rank.  Zero-length
 * actions are dropped (xccl_sched_t), so each signal is one byte, sent
 * from SCRATCH at 0 and received into SCRATCH at 1 (its value unused). */
int xccl_build_barrier_dissemination(xccl_sched_t *s)
{
    const int p = s->size, r = s->rank;

    s->algo = "dissemination";
    for (int dist = 1; dist < p; dist *= 2) {
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r - dist, p), xccl_ref(XCCL_BUF_SCRATCH, 1), 1);
        xccl_sched_send(s, mod(r + dist, p), xccl_ref(XCCL_BUF_SCRATCH, 0), 1);
    }
    s->scratch_bytes = p > 1 ? 2 : 0;
    return xccl_sched_finalize(s);
}

/* Every rank posts its flag on entry and leaves once every peer has
 * posted it (mesh_barrier): no slot, no data. */
int xccl_build_barrier_shm(xccl_sched_t *s)
{
    s->algo = "shm";
    mesh_barrier(s, 1);
    return xccl_sched_finalize(s);
}
