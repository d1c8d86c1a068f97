/*
 * Allreduce by peer access ("mesh"), as the CUDA IPC allreduce does: rank
 * j owns slice j (chunk j of count over p) and reduces it over every
 * rank's SEND in rank order, ((x0 op x1) op x2) ... op x(p-1), into its
 * RECV; the others copy it from there.  Every element is reduced in one
 * place in one order: every rank gets the same bits.
 *   barrier 1 (inputs there) -> reduce own slice -> barrier 2 (every
 *   slice reduced; and, in place, every owner is done reading this rank's
 *   SEND, which the copies overwrite) -> copy p-1 slices -> barrier 3
 *   (nobody leaves while its slice is being read).
 * In place the own slice of RECV is also this rank's input x_r: partial
 * results go to SCRATCH (one slice) and only the last reduction writes
 * RECV (when r = p-1 it reads x_r there: exactly its own operand, allowed).
 *   cost: 3 barriers, (p-1)/p n reduced and (p-1)/p n copied per rank.
 */
#include "mesh_util.h"
#include "xccl_build.h"

/* The end of both forms: once every slice is reduced (barrier 2; in place
 * also every owner done reading this rank's SEND, which the copies
 * overwrite), copy the p-1 slices of the others; nobody leaves while its
 * slice is being read (barrier 3). */
static int copy_slices(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;
    mesh_barrier(s, 2);
    for (int k = 1; k < p; k++) {
        const int j = mod(r + k, p);
        const size_t oj = chunk_first(count, p, j) * es;
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, oj), xccl_ref_peer(j, XCCL_BUF_RECV, oj),
                        chunk_count(count, p, j) * es);
    }
    mesh_barrier(s, 3);
    return xccl_sched_finalize(s);
}

int xccl_build_allreduce_mesh(xccl_sched_t *s, size_t count, int in_place)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;

    s->algo = "mesh";
    if (0 == count) {
        return xccl_sched_finalize(s);
    }
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), count * es);
        return xccl_sched_finalize(s);
    }
    const size_t off = chunk_first(count, p, r) * es, n = chunk_count(count, p, r) * es;
    const xccl_ref_t out = xccl_ref(XCCL_BUF_RECV, off);
    const xccl_ref_t acc = in_place && p > 2 ? xccl_ref(XCCL_BUF_SCRATCH, 0) : out;
    if (in_place && p > 2) {
        s->scratch_bytes = chunk_count(count, p, 0) * es;    /* the largest slice */
    }

    mesh_barrier(s, 1);
    for (int q = 1; q < p; q++) {
        const xccl_ref_t left = 1 == q ? mesh_ref(s, 0, XCCL_BUF_SEND, off) : acc;
        xccl_sched_reduce(s, q == p - 1 ? out : acc, left, mesh_ref(s, q, XCCL_BUF_SEND, off), n);
    }
    return copy_slices(s, count);
}

/*
 * The same over peers that can only be copied from (process_vm_readv):
 * a reduction needs its operands mapped, so each peer's part of this
 * rank's slice comes into SCRATCH first, one piece at a time, and is
 * reduced there while it is in cache: per piece, operand q is this rank's
 * own input or a copy of rank q's (two scratch pieces, T0 and T1: x0 and
 * x1 may both be peers'), and the partial result goes to RECV, or in
 * place with p > 2 to a third scratch piece (RECV's slice holds this
 * rank's own operand until its turn).  The order stays 0..p-1 per
 * element.  Same barriers and copies of the finished slices as above.
 *   cost: (p-1)/p n copied into scratch, reduced, and copied again.
 */
int xccl_build_allreduce_mesh_read(xccl_sched_t *s, size_t count, int in_place, size_t piece)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;

    s->algo = "mesh";
    if (0 == count || 1 == p) {
        return xccl_build_allreduce_mesh(s, count, in_place);
    }
    const size_t first = chunk_first(count, p, r), n = chunk_count(count, p, r);
    const size_t pcb = mesh_piece_bytes(piece, es, n);
    const int acc_scratch = in_place && p > 2;
    s->scratch_bytes = (acc_scratch ? 3 : 2) * pcb;

    mesh_barrier(s, 1);
    mesh_reduce_copied(s, first * es, n * es, pcb, xccl_ref(XCCL_BUF_RECV, first * es), acc_scratch);
    return copy_slices(s, count);
}
