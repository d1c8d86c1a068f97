/*
 * Allgatherv: rank i contributes bytes[i], placed at RECV + displs[i] on
 * every rank.  The two-level builders use it inside a node, where the
 * slices of a vector cut in L pieces are not all the same size.
 *   ring:   (p-1) a + (n - n_r) b, one block forwarded per round;
 *   direct: every pair at once, one round of p-1 sends and receives.
 */
#include "algo_util.h"


static void own_block(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place)
{
    if (!in_place) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[s->rank]), xccl_ref(XCCL_BUF_SEND, 0),
                        bytes[s->rank]);
    }
}

int xccl_build_allgatherv_ring(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place)
{
    const int p = s->size, r = s->rank;
    const int right = mod(r + 1, p), left = mod(r - 1, p);

    s->algo = "ring";
    own_block(s, bytes, displs, in_place);
    /* Step k forwards block r-k (own block at k = 0) and receives r-k-1. */
    for (int k = 0; k < p - 1; k++) {
        int sb = mod(r - k, p), rb = mod(r - k - 1, p);
        xccl_sched_step(s);
        xccl_sched_recv(s, left, xccl_ref(XCCL_BUF_RECV, displs[rb]), bytes[rb]);
        if (0 == k && !in_place) {
            xccl_sched_send(s, right, xccl_ref(XCCL_BUF_SEND, 0), bytes[sb]);
        } else {
            xccl_sched_send(s, right, xccl_ref(XCCL_BUF_RECV, displs[sb]), bytes[sb]);
        }
    }
    return xccl_sched_finalize(s);
}

int xccl_build_allgatherv_direct(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "direct";
    own_block(s, bytes, displs, in_place);
    if (p > 1) {
        xccl_sched_step(s);
    }
    /* Peers in the order r+1, r+2, ... spread the load on a switch. */
    for (int k = 1; k < p; k++) {
        int to = mod(r + k, p), from = mod(r - k, p);
        xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_RECV, displs[from]), bytes[from]);
        xccl_sched_send(s, to, in_place ? xccl_ref(XCCL_BUF_RECV, displs[r]) : xccl_ref(XCCL_BUF_SEND, 0),
                        bytes[r]);
    }
    return xccl_sched_finalize(s);
}
