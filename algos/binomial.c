/*
 * Binomial-tree broadcast: the root's subtree halves at every level.
 * Cost: ceil(lg p)(a + nb).
 */
#include "xccl_sched.h"
#include "xccl_build.h"

int xccl_build_bcast_binomial(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size;
    const int vr = (s->rank - root + p) % p;   /* rank relative to the root */
    int mask = 1;

    s->algo = "binomial";
    /* Receive from the parent: vr with its lowest set bit cleared. */
    while (mask < p) {
        if (vr & mask) {
            xccl_sched_step(s);
            xccl_sched_recv(s, (vr - mask + root) % p, xccl_ref(XCCL_BUF_RECV, 0), bytes);
            break;
        }
        mask <<= 1;
    }
    /* Forward to the children, largest subtree first, all in one step. */
    xccl_sched_step(s);
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask < p) {
            xccl_sched_send(s, (vr + mask + root) % p, xccl_ref(XCCL_BUF_RECV, 0), bytes);
        }
    }
    return xccl_sched_finalize(s);
}
