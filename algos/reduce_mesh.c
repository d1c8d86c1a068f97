/*
 * Reduce by peer access, as the CUDA IPC reduce does: the root reduces
 * every rank's SEND into its RECV in rank order, ((x0 op x1) op x2) ...
 * op x(p-1), one chain of folds over the mapped inputs, so the result has
 * the bits of the rank-order reduction whatever the number of GPUs:
 *   others: flag 1 (input there) -> wait for the root's flag 2 (it is
 *           done reading; SEND may be reused once the call returns);
 *   root:   wait for every flag 1 -> the chain -> flag 2.
 * The same schedule is the "mesh" form (ranks on several GPUs) and the
 * "leader" form (ranks on one GPU, mesh_leader.c): either way the root
 * does the whole reduction, in one context.
 * In place at the root its RECV is its own input x_root: where root > 0
 * the partial results go to SCRATCH (count elements) and only the last
 * fold writes RECV (at root = p-1 it reads x_root there: its own
 * operand, allowed).
 *   cost: 2 flags; (p-1) n reduced by the root, the others nothing.
 */
#include "mesh_util.h"
#include "xccl_build.h"

static int reduce_by_root(xccl_sched_t *s, size_t count, int root, int in_place, const char *name)
{
    const int p = s->size, r = s->rank;
    const size_t n = count * s->elem_size;

    s->algo = name;
    if (0 == count) {
        return xccl_sched_finalize(s);
    }
    if (1 == p) {
        if (!in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), n);
        }
        return xccl_sched_finalize(s);
    }
    if (r != root) {
        mesh_lend(s, root);
        return xccl_sched_finalize(s);
    }
    for (int k = 1; k < p; k++) {
        xccl_sched_wait(s, mod(r + k, p), 1);
    }
    const xccl_ref_t out = xccl_ref(XCCL_BUF_RECV, 0);
    const xccl_ref_t own = xccl_ref(in_place ? XCCL_BUF_RECV : XCCL_BUF_SEND, 0);
    const int via_scratch = in_place && root > 0 && p > 2;
    const xccl_ref_t acc = via_scratch ? xccl_ref(XCCL_BUF_SCRATCH, 0) : out;
    if (via_scratch) {
        s->scratch_bytes = n;
    }
    for (int q = 1; q < p; q++) {
        const xccl_ref_t x0 = 0 == root ? own : xccl_ref_peer(0, XCCL_BUF_SEND, 0);
        const xccl_ref_t xq = q == root ? own : xccl_ref_peer(q, XCCL_BUF_SEND, 0);
        xccl_sched_reduce(s, q == p - 1 ? out : acc, 1 == q ? x0 : acc, xq, n);
    }
    xccl_sched_post(s, 2);
    return xccl_sched_finalize(s);
}

int xccl_build_reduce_mesh(xccl_sched_t *s, size_t count, int root, int in_place)
{
    return reduce_by_root(s, count, root, in_place, "mesh");
}

int xccl_build_reduce_leader(xccl_sched_t *s, size_t count, int root, int in_place)
{
    return reduce_by_root(s, count, root, in_place, "leader");
}
