/*
 * Allgatherv by peer access, as the CUDA IPC allgatherv does.
 * "mesh" (ranks on several GPUs): every rank copies each peer's SEND
 * into its RECV at displs[q], as allgather_mesh.c:
 *   barrier 1 (every block is there) -> the copies -> barrier 2 (nobody
 *   leaves while a peer still reads its block).
 * "leader" (ranks on one GPU, as mesh_leader.c): rank 0 copies every
 * rank's block into every rank's RECV; the others flag 1 (input there,
 * RECV may be written) and wait for its flag 2.
 * In place (SEND not given) block q is read from rank q's RECV +
 * displs[q]; a rank's own block is then not copied.  Every rank
 * knows every count: the barriers take all ranks, those without a block
 * too.
 */
#include "mesh_util.h"
#include "xccl_build.h"

/* Nothing to move (0), one rank (its own block, 0), or 1: go on. */
static int agv_trivial(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place)
{
    size_t total = 0;
    for (int q = 0; q < s->size; q++) {
        total += bytes[q];
    }
    if (0 == total) {
        return 0;
    }
    if (1 == s->size) {
        if (!in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[0]), xccl_ref(XCCL_BUF_SEND, 0), bytes[0]);
        }
        return 0;
    }
    return 1;
}

/* Rank q's block as its input: its SEND, or in place its RECV there. */
static xccl_ref_t block_of(const xccl_sched_t *s, int q, const size_t *displs, int in_place)
{
    return in_place ? mesh_ref(s, q, XCCL_BUF_RECV, displs[q]) : mesh_ref(s, q, XCCL_BUF_SEND, 0);
}

int xccl_build_allgatherv_mesh(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "mesh";
    if (!agv_trivial(s, bytes, displs, in_place)) {
        return xccl_sched_finalize(s);
    }
    mesh_barrier(s, 1);
    /* Own block first, then the peers from r+1 on: not every rank reads
     * rank 0 first. */
    for (int k = 0; k < p; k++) {
        const int q = mod(r + k, p);
        if (q != r || !in_place) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, displs[q]), block_of(s, q, displs, in_place), bytes[q]);
        }
    }
    mesh_barrier(s, 2);
    return xccl_sched_finalize(s);
}

int xccl_build_allgatherv_leader(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "leader";
    if (!agv_trivial(s, bytes, displs, in_place)) {
        return xccl_sched_finalize(s);
    }
    if (r != 0) {
        mesh_lend(s, 0);
        return xccl_sched_finalize(s);
    }
    for (int k = 1; k < p; k++) {
        xccl_sched_wait(s, k, 1);
    }
    for (int j = 0; j < p; j++) {
        for (int q = 0; q < p; q++) {
            if (q != j || !in_place) {
                xccl_sched_copy(s, mesh_ref(s, j, XCCL_BUF_RECV, displs[q]), block_of(s, q, displs, in_place),
                                bytes[q]);
            }
        }
    }
    xccl_sched_post(s, 2);
    return xccl_sched_finalize(s);
}
