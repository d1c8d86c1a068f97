/*
 * Pairwise-exchange reduce_scatter with irregular counts: p-1 steps; at
 * step k rank r sends its input block for r+k and receives r's block of
 * the input of r-k, which it reduces into its accumulator.
 *
 * Cost (n = sum(counts) * elem bytes, regular counts):
 *   (p-1) a + ((p-1)/p) n (b + g)
 *
 * Reduction order: fixed by the schedule, not by arrival times:
 *   result = ((x_r op x_{r-1}) op x_{r-2}) op ... op x_{r+1}   (indices mod p)
 * i.e. the own contribution first, then the others in the order they come
 * (r-1, r-2, ..., wrapping).  Each block is computed only on its owner, so
 * this fixed order is all that bitwise reproducibility needs.
 *
 * Buffers: the accumulator is RECV itself when not in place (no copies).
 * In place the input is RECV and its blocks must survive until they are
 * sent, so the accumulator lives in SCRATCH until the last step, whose
 * reduction writes RECV[0..) directly: all sends are done by then.
 */
#include "algo_util.h"
#include "xccl_build.h"

#include <stdlib.h>


int xccl_build_reduce_scatter_pairwise(xccl_sched_t *s, const size_t *counts, int in_place)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;
    /* calloc: GCC 12 cannot see that p > r >= 0 sets first[r] */
    size_t *first = calloc((size_t) p, sizeof(size_t)), off = 0;

    s->algo = "pairwise";
    if (NULL == first) {
        return -1;
    }
    /* own_off, not first[r]: GCC 14 cannot see that the loop runs (p >= 1)
     * and warns that first[r] may be uninitialized. */
    size_t own_off = 0;
    for (int c = 0; c < p; c++) {
        first[c] = off;
        own_off = c == r ? off : own_off;
        off += counts[c];
    }
    const size_t mine = counts[r] * es;
    const xccl_ref_t own = xccl_ref(XCCL_BUF_SEND, own_off * es), out = xccl_ref(XCCL_BUF_RECV, 0);
    if (1 == p) {
        xccl_sched_copy(s, out, own, mine);
        free(first);
        return xccl_sched_finalize(s);
    }
    /* SCRATCH: [0, mine) incoming block; in place, for p > 2, also
     * [mine, 2 mine) the accumulator. */
    const xccl_ref_t in = xccl_ref(XCCL_BUF_SCRATCH, 0);
    const xccl_ref_t acc = in_place ? xccl_ref(XCCL_BUF_SCRATCH, mine) : out;
    s->scratch_bytes = (in_place && p > 2 ? 2 : 1) * mine;

    for (int k = 1; k < p; k++) {
        const int to = mod(r + k, p), from = mod(r - k, p);
        const xccl_ref_t left = 1 == k ? own : acc;
        xccl_sched_step(s);
        xccl_sched_recv(s, from, in, mine);
        xccl_sched_send(s, to, xccl_ref(XCCL_BUF_SEND, first[to] * es), counts[to] * es);
        if (k < p - 1) {
            xccl_sched_reduce(s, acc, left, in, mine);
        } else if (in_place && 1 == k && first[r] != 0) {
            /* p = 2 in place: RECV[0..) overlaps the own input block at a
             * shift; reduce aside first. */
            xccl_sched_reduce(s, in, left, in, mine);
            xccl_sched_copy(s, out, in, mine);
        } else {
            xccl_sched_reduce(s, out, left, in, mine);
        }
    }
    free(first);
    return xccl_sched_finalize(s);
}
