/*
 * Collectives by one rank ("leader"), for ranks whose buffers live on one
 * device (processes sharing a GPU through CUDA IPC).  A GPU runs the work of
 * one process at a time and switches between their contexts (tens of
 * microseconds a switch without MPS, docs/bench/gpu-stream-flags.md), so a mesh
 * schedule, where every rank copies, pays about p switches per step.  Here
 * one rank reads and writes every rank's buffers and the others only say
 * that their buffers are theirs no more and wait:
 *   others: flag 1 (inputs there, RECV free to be written) -> wait for the
 *           leader's flag 2;
 *   leader: wait for every flag 1 -> the whole collective -> flag 2.
 * All of a call's device work runs in one context.  The traffic is the
 * mesh's (one memory serves every rank of one device); each element is
 * reduced once, in rank order 0..p-1, so every rank gets the same bits.
 * The leader is rank 0, the root for bcast.  Not in place for alltoall and
 * reduce_scatter (an output would overwrite input the leader still reads).
 */
#include "mesh_util.h"
#include "xccl_build.h"

/* The others' part, or the leader's waits; 1 for the leader. */
static int leader_begin(xccl_sched_t *s, int leader)
{
    const int p = s->size, r = s->rank;
    s->algo = "leader";
    if (r != leader) {
        xccl_sched_post(s, 1);
        xccl_sched_step(s);
        xccl_sched_wait(s, leader, 2);
        return 0;
    }
    for (int k = 1; k < p; k++) {
        xccl_sched_wait(s, mod(r + k, p), 1);
    }
    return 1;
}

static int leader_end(xccl_sched_t *s)
{
    xccl_sched_post(s, 2);
    return xccl_sched_finalize(s);
}

/* dst = x0 op x1 op ... op x(p-1), bytes [off, off + n) of every SEND. */
static void reduce_all(xccl_sched_t *s, xccl_ref_t dst, size_t off, size_t n)
{
    for (int q = 1; q < s->size; q++) {
        const xccl_ref_t left = 1 == q ? mesh_ref(s, 0, XCCL_BUF_SEND, off) : dst;
        xccl_sched_reduce(s, dst, left, mesh_ref(s, q, XCCL_BUF_SEND, off), n);
    }
}

int xccl_build_allreduce_leader(xccl_sched_t *s, size_t count)
{
    const size_t n = count * s->elem_size;
    s->algo = "leader";
    if (0 == count) {
        return xccl_sched_finalize(s);
    }
    if (1 == s->size) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), n);
        return xccl_sched_finalize(s);
    }
    if (!leader_begin(s, 0)) {
        return xccl_sched_finalize(s);
    }
    /* Into the leader's RECV (in place its own x0: the fold starts there),
     * then to every other RECV (in place their inputs, read above). */
    reduce_all(s, xccl_ref(XCCL_BUF_RECV, 0), 0, n);
    for (int q = 1; q < s->size; q++) {
        xccl_sched_copy(s, xccl_ref_peer(q, XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_RECV, 0), n);
    }
    return leader_end(s);
}

int xccl_build_reduce_scatter_leader(xccl_sched_t *s, const size_t *counts, int in_place)
{
    return xccl_build_reduce_scatter_leader_at(s, counts, in_place,
                                               XCCL_LEADER_FOLD_MAX(s->size));
}

/* Every block's fold is a reduction of its own (one GPU launch each on the
 * device); up to fold_max bytes in all the leader folds the whole vector
 * into its scratch at once and copies the blocks out (two launches
 * whatever p; the same fold order, the same bits). */
int xccl_build_reduce_scatter_leader_at(xccl_sched_t *s, const size_t *counts, int in_place,
                                        size_t fold_max)
{
    const int p = s->size;
    const size_t es = s->elem_size;
    size_t total = 0;
    s->algo = "leader";
    if (in_place && p > 1) {
        return XCCL_NOT_APPLICABLE;
    }
    for (int q = 0; q < p; q++) {
        total += counts[q];
    }
    if (0 == total) {
        return xccl_sched_finalize(s);
    }
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), counts[0] * es);
        return xccl_sched_finalize(s);
    }
    if (!leader_begin(s, 0)) {
        return xccl_sched_finalize(s);
    }
    const int whole = p > 2 && total * es <= fold_max;
    if (whole) {
        s->scratch_bytes = total * es;
        reduce_all(s, xccl_ref(XCCL_BUF_SCRATCH, 0), 0, total * es);
    }
    size_t off = 0;
    for (int j = 0; j < p; j++) {
        if (counts[j] && whole) {
            xccl_sched_copy(s, mesh_ref(s, j, XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, off),
                            counts[j] * es);
        } else if (counts[j]) {
            reduce_all(s, mesh_ref(s, j, XCCL_BUF_RECV, 0), off, counts[j] * es);
        }
        off += counts[j] * es;
    }
    return leader_end(s);
}

/* Block q of every RECV j from rank q's SEND: at 0 (allgather; in place
 * a SEND is the block in its own RECV: that copy is none) or at block j
 * (alltoall). */
static int move_blocks(xccl_sched_t *s, size_t block, int alltoall)
{
    const int p = s->size;
    if (0 == block) {
        return xccl_sched_finalize(s);
    }
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), block);
        return xccl_sched_finalize(s);
    }
    if (!leader_begin(s, 0)) {
        return xccl_sched_finalize(s);
    }
    for (int j = 0; j < p; j++) {
        for (int q = 0; q < p; q++) {
            xccl_sched_copy(s, mesh_ref(s, j, XCCL_BUF_RECV, (size_t) q * block),
                            mesh_ref(s, q, XCCL_BUF_SEND, alltoall ? (size_t) j * block : 0), block);
        }
    }
    return leader_end(s);
}

int xccl_build_allgather_leader(xccl_sched_t *s, size_t block)
{
    s->algo = "leader";
    return move_blocks(s, block, 0);
}

int xccl_build_alltoall_leader(xccl_sched_t *s, size_t block, int in_place)
{
    s->algo = "leader";
    if (in_place && s->size > 1) {
        return XCCL_NOT_APPLICABLE;
    }
    return move_blocks(s, in_place ? 0 : block, 1);    /* in place on one rank: nothing */
}

int xccl_build_bcast_leader(xccl_sched_t *s, size_t bytes, int root)
{
    s->algo = "leader";
    if (0 == bytes || 1 == s->size) {
        return xccl_sched_finalize(s);
    }
    if (!leader_begin(s, root)) {
        return xccl_sched_finalize(s);
    }
    for (int k = 1; k < s->size; k++) {
        const int q = mod(root + k, s->size);
        xccl_sched_copy(s, xccl_ref_peer(q, XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_RECV, 0), bytes);
    }
    return leader_end(s);
}
