/*
 * Bcast for large messages: binomial scatter of p chunks from the root, then
 * a ring allgather of the chunks (van de Geijn).
 *
 *   (ceil(lg p) + p - 1) a + 2 ((p-1)/p) n b
 */
#include "algo_util.h"
#include "xccl_build.h"


/* Relative rank v holds chunks [v, v + subtree) after the scatter. */
static int holds(int v, int c, int p)
{
    int sub = 0 == v ? p : (v & -v);
    return c >= v && c < v + sub;
}

int xccl_build_bcast_scatter_allgather(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, vr = mod(s->rank - root, p);
#define REAL(v) mod((v) + root, p)
#define RANGE(a, b) xccl_ref(XCCL_BUF_RECV, chunk_first(bytes, p, (a))), \
                    chunk_first(bytes, p, (b)) - chunk_first(bytes, p, (a))
    s->algo = "scatter_allgather";
    /* Binomial scatter, one round per tree level, largest subtree first:
     * in the round of distance d, every v that is a multiple of 2d sends
     * chunks [v+d, v+2d) to v+d.  Every rank takes every round (empty ones
     * too), so the cost model sees the tree's depth. */
    int top = 1;
    while (top < p) {
        top <<= 1;
    }
    for (int d = top >> 1; d > 0; d >>= 1) {
        xccl_sched_step(s);
        if (0 == vr % (2 * d) && vr + d < p) {
            int end = vr + 2 * d < p ? vr + 2 * d : p;
            xccl_sched_send(s, REAL(vr + d), RANGE(vr + d, end));
        } else if (d == vr % (2 * d)) {
            int end = vr + d < p ? vr + d : p;
            xccl_sched_recv(s, REAL(vr - d), RANGE(vr, end));
        }
    }
    /* Ring allgather of the chunks, in relative ranks, skipping the chunks
     * the receiver got from the scatter (both sides know which). */
    for (int k = 0; k < p - 1; k++) {
        int sc = mod(vr - k, p), rc = mod(vr - k - 1, p), next = mod(vr + 1, p);
        xccl_sched_step(s);
        if (!holds(vr, rc, p)) {
            xccl_sched_recv(s, REAL(vr - 1), RANGE(rc, rc + 1));
        }
        if (!holds(next, sc, p)) {
            xccl_sched_send(s, REAL(next), RANGE(sc, sc + 1));
        }
    }
#undef RANGE
#undef REAL
    return xccl_sched_finalize(s);
}
