/*
 * Pipelined chain bcast: the message is cut into s segments of seg bytes;
 * relative rank v receives segment j from v-1 in round j+v-1 and forwards it
 * to v+1 in round j+v, so the chain fills like a pipeline.
 *
 *   (p - 1 + s - 1)(a + (n/s) b)
 */
#include "algo_util.h"
#include "xccl_build.h"


int xccl_build_bcast_chain(xccl_sched_t *s, size_t bytes, int root, size_t seg)
{
    const int p = s->size, vr = mod(s->rank - root, p);
    const size_t nseg = 0 == seg || 0 == bytes ? 1 : (bytes + seg - 1) / seg;
    const size_t segsz = 0 == seg ? bytes : seg;
    s->algo = "chain";
    /* Rank vr receives segment j in round j + vr - 1 and forwards it in
     * round j + vr, so the chain fills like a pipeline. */
    for (size_t t = 0; t + 2 < nseg + (size_t) p; t++) {
        xccl_sched_step(s);
        if (vr > 0 && t + 1 >= (size_t) vr && t + 1 - (size_t) vr < nseg) {
            size_t j = t + 1 - (size_t) vr, off = j * segsz;
            size_t len = off + segsz <= bytes ? segsz : bytes - off;
            xccl_sched_recv(s, mod(vr - 1 + root, p), xccl_ref(XCCL_BUF_RECV, off), len);
        }
        if (vr < p - 1 && t >= (size_t) vr && t - (size_t) vr < nseg) {
            size_t j = t - (size_t) vr, off = j * segsz;
            size_t len = off + segsz <= bytes ? segsz : bytes - off;
            xccl_sched_send(s, mod(vr + 1 + root, p), xccl_ref(XCCL_BUF_RECV, off), len);
        }
    }
    return xccl_sched_finalize(s);
}
