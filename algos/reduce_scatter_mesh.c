/*
 * Reduce_scatter by peer access ("mesh"), as the CUDA IPC reduce_scatter
 * does: rank j reduces its block over every rank's input in rank order,
 * ((x0 op x1) op x2) ... op x(p-1), reading the peers' inputs in place.
 *   not in place: barrier 1 -> reduce into RECV -> barrier 2 (exit: nobody
 *   leaves while its input is being read);
 *   in place (the input is RECV): RECV[0, counts[r]) is also input the
 *   peers read, so the result goes to SCRATCH first: barrier 1 -> reduce
 *   into SCRATCH -> barrier 2 (every peer is done reading) -> SCRATCH to
 *   RECV.
 * Counts may differ per rank (reduce_scatter) or not (_block).
 */
#include "mesh_util.h"
#include "xccl_build.h"

int xccl_build_reduce_scatter_mesh(xccl_sched_t *s, const size_t *counts, int in_place)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;
    size_t first = 0, total = 0;

    s->algo = "mesh";
    for (int q = 0; q < p; q++) {
        first += q < r ? counts[q] : 0;
        total += counts[q];
    }
    if (0 == total) {
        return xccl_sched_finalize(s);    /* nothing read: nothing to wait for */
    }
    const size_t off = first * es, n = counts[r] * es;
    const xccl_ref_t out = xccl_ref(XCCL_BUF_RECV, 0);
    if (1 == p) {
        xccl_sched_copy(s, out, xccl_ref(XCCL_BUF_SEND, 0), n);
        return xccl_sched_finalize(s);
    }
    const xccl_ref_t acc = in_place ? xccl_ref(XCCL_BUF_SCRATCH, 0) : out;
    if (in_place) {
        s->scratch_bytes = n;
    }

    mesh_barrier(s, 1);
    for (int q = 1; q < p; q++) {
        const xccl_ref_t left = 1 == q ? mesh_ref(s, 0, XCCL_BUF_SEND, off) : acc;
        xccl_sched_reduce(s, acc, left, mesh_ref(s, q, XCCL_BUF_SEND, off), n);
    }
    mesh_barrier(s, 2);
    if (in_place) {
        xccl_sched_copy(s, out, acc, n);
    }
    return xccl_sched_finalize(s);
}

/*
 * The same over peers that can only be copied from (process_vm_readv): the
 * peers' operands of this rank's block come into SCRATCH in pieces and are
 * reduced there (mesh_reduce_copied).  In place the result goes to SCRATCH
 * after the two pieces and is copied to RECV after barrier 2, as above.
 */
int xccl_build_reduce_scatter_mesh_read(xccl_sched_t *s, const size_t *counts, int in_place, size_t piece)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;
    size_t first = 0, total = 0;

    for (int q = 0; q < p; q++) {
        first += q < r ? counts[q] : 0;
        total += counts[q];
    }
    if (0 == total || 1 == p) {
        return xccl_build_reduce_scatter_mesh(s, counts, in_place);
    }
    s->algo = "mesh";
    const size_t n = counts[r] * es;
    const size_t pcb = mesh_piece_bytes(piece, es, counts[r]);
    const xccl_ref_t out = xccl_ref(XCCL_BUF_RECV, 0);
    const xccl_ref_t dst = in_place ? xccl_ref(XCCL_BUF_SCRATCH, 2 * pcb) : out;
    s->scratch_bytes = 2 * pcb + (in_place ? n : 0);

    mesh_barrier(s, 1);
    mesh_reduce_copied(s, first * es, n, pcb, dst, 0);
    mesh_barrier(s, 2);
    if (in_place) {
        xccl_sched_copy(s, out, dst, n);
    }
    return xccl_sched_finalize(s);
}
