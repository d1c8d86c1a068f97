/*
 * Reduce_scatter through the node's shared segment (algos/shm_util.h):
 * a mesh, each rank reducing its own block over every rank's copy of it,
 * in rank order ((x0 op x1) op x2) ... (the same bits wherever it runs).
 * Two stages per chunk, two buffers in the slot:
 *   copy piece t of every other block of SEND into the own slot
 *   -> reduce piece t of the own block over every rank's slot into RECV,
 *      the own input straight from SEND.
 * Where all of SEND fits one buffer it is copied in one piece, blocks at
 * their SEND offsets; else buffer = p pieces of pc bytes, piece j holding
 * part of block j (irregular counts: the longest block sets the chunks).
 * In place (the input is RECV): RECV[t pc, (t+1) pc) is written in step
 * t + 1, after every input byte below (t+1) pc was copied in (steps <= t;
 * step t + 1 copies in before it reduces, and only higher bytes).  The own
 * block, which the output may overlap at another offset, is then copied
 * in as well and read from the slot.
 *   cost per rank: total - counts[r] copied in (in place: total),
 *   counts[r] reduced p-1 times; chunks + 1 barriers.
 */
#include "shm_util.h"
#include "xccl_build.h"

#include <stdlib.h>

int xccl_build_reduce_scatter_shm(xccl_sched_t *s, const size_t *counts, int in_place)
{
    const int p = s->size, r = s->rank, depth = 2;
    const size_t es = s->elem_size;
    size_t total = 0, longest = 0, first_r = 0;

    s->algo = "shm";
    for (int q = 0; q < p; q++) {
        first_r += q < r ? counts[q] : 0;
        total += counts[q];
        longest = counts[q] > longest ? counts[q] : longest;
    }
    if (0 == total) {
        return xccl_sched_finalize(s);
    }
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), counts[0] * es);
        return xccl_sched_finalize(s);
    }
    const size_t whole = shm_floor(shm_cap(s) / (size_t) depth, es);
    /* one piece: block j at its SEND offset; else p pieces of pc bytes */
    const int one = total * es <= whole;
    const size_t pc = one ? longest * es : shm_buffer(s, depth, p, es) / (size_t) p;
    const size_t buf = one ? total * es : pc * (size_t) p;
    if (0 == pc) {
        return shm_fail(s);
    }
    const size_t nchunks = (longest * es + pc - 1) / pc;
    size_t *first = malloc((size_t) p * sizeof(size_t));
    if (NULL == first) {
        return shm_fail(s);
    }
    for (int q = 0; q < p; q++) {
        first[q] = q ? first[q - 1] + counts[q - 1] : 0;       /* elements */
    }
    for (size_t t = 0; t < nchunks + 1; t++) {
        if (t < nchunks) {
            const size_t at = shm_buf_off(buf, t, depth);
            hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
            for (int j = 0; j < p; j++) {
                if (j == r && !in_place) {
                    continue;
                }
                size_t lo;
                const size_t len = shm_piece(counts[j] * es, pc, t, &lo);
                const size_t to = at + (one ? first[j] * es : (size_t) j * pc);
                hier_copy_add(&cp, xccl_ref(XCCL_BUF_SLOT, to), xccl_ref(XCCL_BUF_SEND, first[j] * es + lo), len);
                if (len) {
                    shm_use(s, to + len);
                }
            }
            hier_copy_flush(&cp);
        }
        if (t >= 1) {
            size_t lo;
            const size_t len = shm_piece(counts[r] * es, pc, t - 1, &lo);
            const size_t at = shm_buf_off(buf, t - 1, depth) + (one ? first_r * es : (size_t) r * pc);
            const xccl_ref_t own = in_place ? xccl_ref(XCCL_BUF_SLOT, at) : xccl_ref(XCCL_BUF_SEND, first_r * es + lo);
            shm_reduce_ranks(s, xccl_ref(XCCL_BUF_RECV, lo), own, at, len);
        }
        mesh_barrier(s, (uint32_t) (t + 1));
    }
    free(first);
    return xccl_sched_finalize(s);
}
