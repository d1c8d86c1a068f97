/*
 * Scatter and scatterv: block i of the root's SEND to rank i, gather's
 * mirror image (conventions: algos/xccl_build.h, "Rooted collectives").
 * n = p * block bytes scattered.
 *   binomial: ceil(lg p) a + ((p-1)/p) n b at the root, one message per
 *             child (two for the child whose blocks wrap past the end of
 *             SEND); inner nodes receive their subtree in SCRATCH and pass
 *             the children theirs;
 *   linear:   (p-1) a + ((p-1)/p) n b, the root's sends all in one step;
 *   scatterv linear: (p-1) a + (n - n_root) b, the same with blocks of
 *             their own sizes and places.
 */
#include "algo_util.h"
#include "tree_util.h"
#include "xccl_build.h"

int xccl_build_scatter_binomial(xccl_sched_t *s, size_t block, int root, int in_place)
{
    const int p = s->size, r = s->rank, v = mod(r - root, p);
    int top = 1;

    s->algo = "binomial";
    while (top < p) {
        top <<= 1;
    }
    if (0 == v) {
        /* Each child's subtree straight from its place in SEND, largest
         * first, in two pieces where it wraps; then the own block. */
        xccl_sched_step(s);
        for (int mask = top >> 1; mask > 0; mask >>= 1) {
            const int n = subtree_blocks(mask, p), k = before_wrap(p, root, mask, n);
            const int child = mod(root + mask, p);
            xccl_sched_send(s, child, xccl_ref(XCCL_BUF_SEND, (size_t) child * block), (size_t) k * block);
            xccl_sched_send(s, child, xccl_ref(XCCL_BUF_SEND, 0), (size_t) (n - k) * block);
        }
        if (!in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, (size_t) r * block), block);
        }
        return xccl_sched_finalize(s);
    }
    const int low = v & -v, n = subtree_blocks(v, p), parent = mod(r - low, p);
    if (1 == n) {
        /* A leaf: its block straight to RECV. */
        xccl_sched_step(s);
        xccl_sched_recv(s, parent, xccl_ref(XCCL_BUF_RECV, 0), block);
        return xccl_sched_finalize(s);
    }
    /* An inner node: its subtree arrives in SCRATCH in relative order,
     * its own block first, child v + mask's subtree at mask blocks; in
     * two messages where the parent is the root and the subtree wraps
     * past the end of its SEND. */
    if (s->scratch_bytes < (size_t) n * block) {
        s->scratch_bytes = (size_t) n * block;
    }
    const int k = low == v ? before_wrap(p, root, v, n) : n;
    xccl_sched_step(s);
    xccl_sched_recv(s, parent, xccl_ref(XCCL_BUF_SCRATCH, 0), (size_t) k * block);
    xccl_sched_recv(s, parent, xccl_ref(XCCL_BUF_SCRATCH, (size_t) k * block), (size_t) (n - k) * block);
    xccl_sched_step(s);
    for (int mask = low >> 1; mask > 0; mask >>= 1) {
        if (v + mask < p) {
            xccl_sched_send(s, mod(r + mask, p), xccl_ref(XCCL_BUF_SCRATCH, (size_t) mask * block),
                            (size_t) subtree_blocks(v + mask, p) * block);
        }
    }
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, 0), block);
    return xccl_sched_finalize(s);
}

int xccl_build_scatter_linear(xccl_sched_t *s, size_t block, int root, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "linear";
    xccl_sched_step(s);
    if (r != root) {
        xccl_sched_recv(s, root, xccl_ref(XCCL_BUF_RECV, 0), block);
        return xccl_sched_finalize(s);
    }
    for (int k = 1; k < p; k++) {
        const int to = mod(root + k, p);
        xccl_sched_send(s, to, xccl_ref(XCCL_BUF_SEND, (size_t) to * block), block);
    }
    if (!in_place) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, (size_t) r * block), block);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_scatterv_linear(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                               int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "linear";
    xccl_sched_step(s);
    if (r != root) {
        /* A zero-byte block is no message: the root knows it too. */
        xccl_sched_recv(s, root, xccl_ref(XCCL_BUF_RECV, 0), bytes[r]);
        return xccl_sched_finalize(s);
    }
    for (int k = 1; k < p; k++) {
        const int to = mod(root + k, p);
        xccl_sched_send(s, to, xccl_ref(XCCL_BUF_SEND, displs[to]), bytes[to]);
    }
    if (!in_place) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, displs[r]), bytes[r]);
    }
    return xccl_sched_finalize(s);
}
