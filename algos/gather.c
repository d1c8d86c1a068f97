/*
 * Gather and gatherv: every rank's block to the root, block i of the
 * result from rank i (conventions: algos/xccl_build.h, "Rooted
 * collectives").  n = p * block bytes gathered.
 *   binomial: ceil(lg p) a + ((p-1)/p) n b at the root, one message per
 *             child (two for the child whose blocks wrap past the end of
 *             RECV); inner nodes collect their subtree in SCRATCH;
 *   linear:   (p-1) a + ((p-1)/p) n b, every rank straight to the root,
 *             the root's receives all in one step;
 *   gatherv linear: (p-1) a + (n - n_root) b, the same with blocks of
 *             their own sizes and places.
 */
#include "algo_util.h"
#include "tree_util.h"
#include "xccl_build.h"

int xccl_build_gather_binomial(xccl_sched_t *s, size_t block, int root, int in_place)
{
    const int p = s->size, r = s->rank, v = mod(r - root, p);

    s->algo = "binomial";
    if (0 == v) {
        /* Each child's subtree straight to its place in RECV, in two
         * pieces where it wraps; then the own block. */
        xccl_sched_step(s);
        for (int mask = 1; mask < p; mask <<= 1) {
            const int n = subtree_blocks(mask, p), k = before_wrap(p, root, mask, n);
            const int child = mod(root + mask, p);
            xccl_sched_recv(s, child, xccl_ref(XCCL_BUF_RECV, (size_t) child * block), (size_t) k * block);
            xccl_sched_recv(s, child, xccl_ref(XCCL_BUF_RECV, 0), (size_t) (n - k) * block);
        }
        if (!in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block), xccl_ref(XCCL_BUF_SEND, 0), block);
        }
        return xccl_sched_finalize(s);
    }
    const int low = v & -v, n = subtree_blocks(v, p), parent = mod(r - low, p);
    if (1 == n) {
        /* A leaf: its block straight from SEND. */
        xccl_sched_step(s);
        xccl_sched_send(s, parent, xccl_ref(XCCL_BUF_SEND, 0), block);
        return xccl_sched_finalize(s);
    }
    /* An inner node: SCRATCH holds its subtree in relative order, its own
     * block first, child v + mask's subtree at mask blocks. */
    if (s->scratch_bytes < (size_t) n * block) {
        s->scratch_bytes = (size_t) n * block;
    }
    xccl_sched_step(s);
    for (int mask = 1; mask < low && v + mask < p; mask <<= 1) {
        xccl_sched_recv(s, mod(r + mask, p), xccl_ref(XCCL_BUF_SCRATCH, (size_t) mask * block),
                        (size_t) subtree_blocks(v + mask, p) * block);
    }
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_SEND, 0), block);
    /* Up in one message, in two where the parent is the root and the
     * subtree wraps past the end of its RECV. */
    const int k = low == v ? before_wrap(p, root, v, n) : n;
    xccl_sched_step(s);
    xccl_sched_send(s, parent, xccl_ref(XCCL_BUF_SCRATCH, 0), (size_t) k * block);
    xccl_sched_send(s, parent, xccl_ref(XCCL_BUF_SCRATCH, (size_t) k * block), (size_t) (n - k) * block);
    return xccl_sched_finalize(s);
}

int xccl_build_gather_linear(xccl_sched_t *s, size_t block, int root, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "linear";
    xccl_sched_step(s);
    if (r != root) {
        xccl_sched_send(s, root, xccl_ref(XCCL_BUF_SEND, 0), block);
        return xccl_sched_finalize(s);
    }
    for (int k = 1; k < p; k++) {
        const int from = mod(root + k, p);
        xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_RECV, (size_t) from * block), block);
    }
    if (!in_place) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block), xccl_ref(XCCL_BUF_SEND, 0), block);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_gatherv_linear(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                              int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "linear";
    xccl_sched_step(s);
    if (r != root) {
        /* A zero-byte block is no message: the root knows it too. */
        xccl_sched_send(s, root, xccl_ref(XCCL_BUF_SEND, 0), bytes[r]);
        return xccl_sched_finalize(s);
    }
    for (int k = 1; k < p; k++) {
        const int from = mod(root + k, p);
        xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_RECV, displs[from]), bytes[from]);
    }
    if (!in_place) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[r]), xccl_ref(XCCL_BUF_SEND, 0), bytes[r]);
    }
    return xccl_sched_finalize(s);
}
