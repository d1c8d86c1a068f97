/*
 * Alltoall by peer access ("mesh"): every rank reads its block from every
 * peer's SEND (block r of rank q goes to block q of rank r), as the CUDA
 * IPC alltoall does.
 *   not in place: barrier 1 -> p copies -> barrier 2 (exit);
 *   in place (SEND is RECV): the block this rank reads from q replaces
 *   block q of its RECV, which q itself still has to read.  So: barrier 1
 *   -> copies into SCRATCH -> barrier 2 (every peer has read its block
 *   here) -> SCRATCH to RECV.  No exit barrier: after barrier 2 nobody
 *   reads another rank's buffer.
 */
#include "mesh_util.h"
#include "xccl_build.h"

int xccl_build_alltoall_mesh(xccl_sched_t *s, size_t block, int in_place)
{
    const int p = s->size, r = s->rank;

    s->algo = "mesh";
    if (0 == block) {
        return xccl_sched_finalize(s);
    }
    const xccl_buf_id_t to = in_place ? XCCL_BUF_SCRATCH : XCCL_BUF_RECV;
    if (in_place && p > 1) {
        s->scratch_bytes = (size_t) p * block;    /* slot q: the block from q (own slot unused) */
    }
    mesh_barrier(s, 1);
    for (int k = 0; k < p; k++) {
        const int q = mod(r + k, p);
        if (in_place && q == r) {
            continue;                              /* own block already in place */
        }
        xccl_sched_copy(s, xccl_ref(to, (size_t) q * block), mesh_ref(s, q, XCCL_BUF_SEND, (size_t) r * block),
                        block);
    }
    mesh_barrier(s, 2);
    if (in_place) {
        /* Slots 0..r-1 and r+1..p-1: two copies. */
        hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
        for (int q = 0; q < p; q++) {
            if (q != r) {
                hier_copy_add(&cp, xccl_ref(XCCL_BUF_RECV, (size_t) q * block),
                              xccl_ref(XCCL_BUF_SCRATCH, (size_t) q * block), block);
            }
        }
        hier_copy_flush(&cp);
    }
    return xccl_sched_finalize(s);
}
