/*
 * Allreduce through the node's shared segment (algos/shm_util.h for the
 * pipeline).  Both reduce every element in rank order, ((x0 op x1) op x2)
 * ... op x(p-1), so every rank gets the same bits.  In place (SEND and
 * RECV the same memory) needs nothing special: a chunk of RECV is written
 * only after every read of the same chunk of SEND.
 *
 * "shm" (large messages, a reduce-scatter mesh): per chunk of the vector,
 * three stages, the slot holding three buffers:
 *   copy the chunk of SEND into the own slot, but for the own slice j,
 *      which only j reads
 *   -> rank j reduces slice j of the chunk over every rank's slot, its own
 *      input straight from SEND, partial and final results in slice j of
 *      its own slot
 *   -> every rank copies slice j of the chunk from rank j's slot into RECV.
 *   cost per rank: n (p - 1) / p copied in, n/p reduced, n copied out;
 *   chunks + 2 barriers.  (The own slice is read from SEND, not copied
 *   into the slot: only its owner reads it; figures:
 *   docs/bench/select-figures.md.)  A
 *   whole schedule (only the catalog builds it): of two ranks the slots
 *   trade places from call to call (shm_swap): a rank's own slice and
 *   the other's are where the other rank's were, which it has just read.
 * "shm_small" (latency): per chunk two stages, two buffers: copy in ->
 *   every rank reduces the whole chunk over all slots into its RECV.
 *   cost per rank: n copied in, n reduced (p-1 reductions); chunks + 1
 *   barriers (one chunk: 2).  Up to SHM_FAST_BYTES in a slot that has the
 *   latency regions: one barrier and no exit barrier (latency_path).
 */
#include "shm_util.h"
#include "xccl_build.h"

/* Slice j of a chunk of n elements (xccl_build.h). */
size_t xccl_build_shm_slice(size_t n, int p, size_t es, int j, size_t *first)
{
    size_t u = 0 == SHM_ALIGN % es ? SHM_ALIGN / es : 1;
    size_t sl = shm_round_up((n + (size_t) p - 1) / (size_t) p, u);
    size_t lo = (size_t) j * sl < n ? (size_t) j * sl : n;
    size_t hi = lo + sl < n ? lo + sl : n;
    *first = lo;
    return hi - lo;
}

static int single_rank(xccl_sched_t *s, size_t count)
{
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), count * s->elem_size);
    return xccl_sched_finalize(s);
}

int xccl_build_allreduce_shm(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank, depth = 3;
    const size_t es = s->elem_size;

    s->algo = "shm";
    if (0 == count) {
        return xccl_sched_finalize(s);
    }
    if (1 == p) {
        return single_rank(s, count);
    }
    const size_t buf = shm_buffer(s, depth, 1, es), ce = buf / es;
    if (0 == ce) {
        return shm_fail(s);
    }
    const size_t nchunks = (count + ce - 1) / ce;
    for (size_t t = 0; t < nchunks + (size_t) depth - 1; t++) {
        /* stage 0: chunk t of SEND but the own slice into the own slot */
        if (t < nchunks) {
            const size_t n = t + 1 < nchunks ? ce : count - t * ce;
            const size_t at = shm_buf_off(buf, t, depth);
            size_t first;
            const size_t len = xccl_build_shm_slice(n, p, es, r, &first);
            const size_t rest = first + len;
            if (first > 0) {
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_SEND, t * ce * es), first * es);
            }
            if (rest < n) {
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at + rest * es),
                                xccl_ref(XCCL_BUF_SEND, (t * ce + rest) * es), (n - rest) * es);
            }
            shm_use(s, at + n * es);
        }
        /* stage 1: reduce the own slice of chunk t - 1 into the own slot */
        if (t >= 1 && t - 1 < nchunks) {
            const size_t c = t - 1, n = c + 1 < nchunks ? ce : count - c * ce;
            size_t first;
            const size_t len = xccl_build_shm_slice(n, p, es, r, &first) * es;
            const size_t at = shm_buf_off(buf, c, depth) + first * es;
            shm_reduce_ranks(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_SEND, (c * ce + first) * es), at,
                             len);
        }
        /* stage 2: every slice of chunk t - 2 from its owner's slot */
        if (t >= 2 && t - 2 < nchunks) {
            const size_t c = t - 2, n = c + 1 < nchunks ? ce : count - c * ce;
            for (int k = 0; k < p; k++) {
                const int j = mod(r + k, p);
                size_t first;
                const size_t len = xccl_build_shm_slice(n, p, es, j, &first) * es;
                xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (c * ce + first) * es),
                                mesh_ref(s, j, XCCL_BUF_SLOT, shm_buf_off(buf, c, depth) + first * es), len);
            }
        }
        mesh_barrier(s, (uint32_t) (t + 1));
    }
    s->stream_recv = count * es >= XCCL_STREAM_BYTES;
    shm_swap(s);
    return xccl_sched_finalize(s);
}

/* shm_small up to SHM_FAST_BYTES (shm_util.h): one barrier, no exit
 * barrier.  Step 0 posts 0 (entered the call: done with the calls before),
 * step 1 waits until every peer is done with the call before the previous
 * one (the last user of this call's region), copies in and posts 1, step 2
 * waits for every peer's 1 and reduces. */
static int latency_path(xccl_sched_t *s, size_t count)
{
    const int p = s->size, r = s->rank;
    const size_t n = count * s->elem_size, at = shm_cap(s);
    s->slot_flip = SHM_FAST_BYTES;
    shm_use(s, at + SHM_FAST_BYTES + n);
    xccl_sched_post(s, 0);
    xccl_sched_step(s);
    for (int k = 1; k < p; k++) {
        xccl_sched_wait_before(s, mod(r + k, p));
    }
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_SEND, 0), n);
    xccl_sched_post(s, 1);
    xccl_sched_step(s);
    for (int k = 1; k < p; k++) {
        xccl_sched_wait(s, mod(r + k, p), 1);
    }
    shm_reduce_ranks(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SLOT, at), at, n);
    return xccl_sched_finalize(s);
}

int xccl_build_allreduce_shm_small(xccl_sched_t *s, size_t count)
{
    const int p = s->size, depth = 2;
    const size_t es = s->elem_size;

    s->algo = "shm_small";
    if (0 == count) {
        return xccl_sched_finalize(s);
    }
    if (1 == p) {
        return single_rank(s, count);
    }
    if (shm_has_fast(s) && count * es <= SHM_FAST_BYTES) {
        return latency_path(s, count);
    }
    const size_t buf = shm_buffer(s, depth, 1, es), ce = buf / es;
    if (0 == ce) {
        return shm_fail(s);
    }
    const size_t nchunks = (count + ce - 1) / ce;
    for (size_t t = 0; t < nchunks + 1; t++) {
        if (t < nchunks) {
            const size_t n = (t + 1 < nchunks ? ce : count - t * ce) * es;
            const size_t at = shm_buf_off(buf, t, depth);
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_SLOT, at), xccl_ref(XCCL_BUF_SEND, t * ce * es), n);
            shm_use(s, at + n);
        }
        if (t >= 1) {
            const size_t c = t - 1, n = (c + 1 < nchunks ? ce : count - c * ce) * es;
            const size_t at = shm_buf_off(buf, c, depth);
            shm_reduce_ranks(s, xccl_ref(XCCL_BUF_RECV, c * ce * es), xccl_ref(XCCL_BUF_SLOT, at), at, n);
        }
        mesh_barrier(s, (uint32_t) (t + 1));
    }
    return xccl_sched_finalize(s);
}
