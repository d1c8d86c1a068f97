/*
 * Swing allreduce (Sensi et al., NSDI 2024), bandwidth-optimal form:
 * reduce-scatter then allgather over the largest power of two p' <= p.  At
 * step k = 0 .. lg p' - 1, virtual rank v talks to
 *
 *     pi(v, k) = v + rho(k) (v even), v - rho(k) (v odd)   (mod p'),
 *     rho(k)   = sum_{i=0..k} (-2)^i = (1 - (-2)^(k+1)) / 3 = 1, -1, 3, -5, 11, ...
 *
 * so peers stay close on a ring or torus (|rho(k)| ~ 2^k / 1.5, alternating
 * direction) instead of recursive halving's exact powers of two.
 *
 * Block sets.  Let R(v, k) be the blocks v still holds partial sums of
 * before step k: R(v, lg p') = {v} (v ends owning block v), and
 * R(v, k) = R(v, k+1) u R(pi(v, k), k+1).  At step k of the reduce-scatter
 * v sends R(pi(v, k), k+1) and reduces R(v, k+1); the allgather runs the
 * same exchanges in reverse.  For p' a power of two the R(., k) are 2^k
 * disjoint classes of p' / 2^k blocks each, and each class splits into two
 * classes of the next level: a binary tree over the blocks.  Laying the
 * blocks out in memory in the leaf order of that tree makes every R(v, k)
 * one contiguous, aligned interval of p' / 2^k blocks, so each step is a
 * single message each way, as in recursive halving, whereas in rank order
 * the sets are scattered (up to p'/2 runs at the first step).  The leaf
 * order is built top-down: the class of a representative y at level k has
 * the children "class of y" then "class of pi(y, k)" at level k+1.
 *
 * The p - p' extra ranks fold in first (odd rank r < 2(p-p') hands its
 * vector to r-1, which reduces) and receive the result at the end.
 *
 * Cost (n bytes): 2 lg p' a + 2((p'-1)/p') nb + ((p'-1)/p') ng, plus
 * 2(a + nb) + ng when p is not a power of two: Rabenseifner's terms, with
 * shorter hops on torus-like networks.
 *
 * Every element's final value is computed by one rank and then copied to
 * all: bitwise identical results.  Combines put the lower rank's data left.
 */
#include "algo_util.h"
#include "xccl_build.h"

#include <stdlib.h>

static int swing_peer(int vr, int k, int p2);
static int *swing_positions(int p2, int steps);

int xccl_build_allreduce_swing(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size, bytes = count * es;
    const fold_t f = fold_layout(p, r);
    xccl_buf_id_t cur = XCCL_BUF_SEND;     /* where this rank's partial data is */
    size_t scratch = 0;
    int steps = 0;

    s->algo = "swing";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
        return xccl_sched_finalize(s);
    }
    while ((1 << steps) < f.p2) {
        steps++;
    }
    /* pos[b]: the memory slot of block b (see the top comment). */
    int *pos = NULL;
    if (f.vr >= 0 && NULL == (pos = swing_positions(f.p2, steps))) {
        return -1;
    }

    if (fold_core_begin(s, &f, bytes, steps, &cur, &scratch)) {
        /* Reduce-scatter: at step k the classes have sz = p2 / 2^(k+1)
         * slots; keep the one holding my block, send the peer's. */
        for (int k = 0; k < steps; k++) {
            const int pv = swing_peer(f.vr, k, f.p2), sz = f.p2 >> (k + 1);
            const size_t klen = fold_halving_exchange(s, &f, pv, cur, count, pos[f.vr] / sz * sz,
                                                      pos[pv] / sz * sz, sz);
            scratch = klen > scratch ? klen : scratch;
            cur = XCCL_BUF_RECV;
        }
        /* Allgather: the same exchanges in reverse; the owned interval
         * doubles each step and received slots go straight into place. */
        for (int k = steps - 1; k >= 0; k--) {
            const int pv = swing_peer(f.vr, k, f.p2), sz = f.p2 >> (k + 1);
            fold_doubling_exchange(s, &f, pv, count, pos[f.vr] / sz * sz, pos[pv] / sz * sz, sz);
        }
    }
    free(pos);

    fold_out(s, &f, bytes);
    s->scratch_bytes = scratch;
    return xccl_sched_finalize(s);
}



/* pi(vr, k).  rho(k) is odd, so the peer has the other parity (p2 is even)
 * and pi(pi(v, k), k) = v: the exchanges pair up. */
static int swing_peer(int vr, int k, int p2)
{
    long long pw = 1;
    for (int i = 0; i <= k; i++) {
        pw *= -2;
    }
    long long rho = (1 - pw) / 3;
    long long q = (vr % 2 == 0) ? vr + rho : vr - rho;
    return (int) (((q % p2) + p2) % p2);
}

/* The leaf order of the block tree (top comment), inverted: pos[b] is the
 * slot of block b.  The list of class representatives doubles each level,
 * expanded in place from the back.  Caller frees; NULL if out of memory. */
static int *swing_positions(int p2, int steps)
{
    int *order = malloc(2 * (size_t) p2 * sizeof(int));
    if (NULL == order) {
        return NULL;
    }
    int *pos = order + p2;
    int n = 1;
    order[0] = 0;
    for (int k = 0; k < steps; k++, n *= 2) {
        for (int i = n - 1; i >= 0; i--) {
            int y = order[i];
            order[2 * i] = y;
            order[2 * i + 1] = swing_peer(y, k, p2);
        }
    }
    for (int i = 0; i < p2; i++) {
        pos[order[i]] = i;
    }
    /* Hand back pos alone: move it to the front of the allocation. */
    for (int i = 0; i < p2; i++) {
        order[i] = pos[i];
    }
    return order;
}
