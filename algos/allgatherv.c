/*
 * Allgatherv: rank i contributes bytes[i], placed at RECV + displs[i] on
 * every rank.  The two-level builders use it inside a node, where the
 * slices of a vector cut in L pieces are not all the same size.
 *   ring:   (p-1) a + (n - n_r) b, one block forwarded per round;
 *   direct: every pair at once, one round of p-1 sends and receives;
 *   bruck:  ceil(lg p) a + (n - n_r) b, through scratch (many nodes on a
 *           rail: latency bound).
 */
#include "hier_util.h"
#include "xccl_build.h"


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

/* Bytes of ranks q, q+1, ..., q+i-1 (mod p). */
static size_t rotated_prefix(const size_t *bytes, int p, int q, int i)
{
    size_t sum = 0;
    for (int t = 0; t < i; t++) {
        sum += bytes[mod(q + t, p)];
    }
    return sum;
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

/*
 * Bruck allgatherv: ceil(lg p) rounds for any p, for irregular blocks (the
 * rails of an uneven layout).  SCRATCH holds the blocks in rotated order:
 * slot i is the block of rank r+i (mod p), slots packed back to back, so
 * that slots [0, c) are one contiguous run on every rank.  At distance
 * d = 2^k a rank holds slots [0, d); it sends the first c = min(d, p-d) of
 * them to r-d and receives its slots [d, d+c) from r+d, which are that
 * rank's slots [0, c).  A final rotation copies every slot to RECV +
 * displs of its rank.
 *   ceil(lg p) a + (n - n_r) b, plus n of local copies (rotation).
 */
int xccl_build_allgatherv_bruck(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "bruck";
    if (1 == p) {
        own_block(s, bytes, displs, in_place);
        return xccl_sched_finalize(s);
    }
    /* Slot i of rank q starts after the bytes of ranks q .. q+i-1. */
    const size_t total = rotated_prefix(bytes, p, r, p);
    if (s->scratch_bytes < total) {
        s->scratch_bytes = total;
    }
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, 0),
                    in_place ? xccl_ref(XCCL_BUF_RECV, displs[r]) : xccl_ref(XCCL_BUF_SEND, 0), bytes[r]);
    for (int d = 1; d < p; d *= 2) {
        const int c = d < p - d ? d : p - d;
        const int from = mod(r + d, p), to = mod(r - d, p);
        xccl_sched_step(s);
        xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_SCRATCH, rotated_prefix(bytes, p, r, d)),
                        rotated_prefix(bytes, p, from, c));
        xccl_sched_send(s, to, xccl_ref(XCCL_BUF_SCRATCH, 0), rotated_prefix(bytes, p, r, c));
    }
    /* The rotation, after the last transfers; in place the own block is
     * already where it belongs. */
    hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
    size_t off = 0;
    for (int i = 0; i < p; i++) {
        const int q = mod(r + i, p);
        if (!(in_place && 0 == i)) {
            hier_copy_add(&cp, xccl_ref(XCCL_BUF_RECV, displs[q]), xccl_ref(XCCL_BUF_SCRATCH, off), bytes[q]);
        }
        off += bytes[q];
    }
    hier_copy_flush(&cp);
    return xccl_sched_finalize(s);
}
