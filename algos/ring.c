/*
 * Ring algorithms: allreduce (reduce-scatter + allgather), reduce_scatter,
 * allgather.  Rank r sends to r+1 and receives from r-1 (mod p).
 * Cost (p ranks, n bytes): allreduce 2(p-1)a + 2((p-1)/p)nb + ((p-1)/p)ng,
 * allgather and reduce_scatter (p-1)a + ((p-1)/p)nb (+ ((p-1)/p)ng).
 */
#include "algo_util.h"
#include "xccl_build.h"

#include <stdlib.h>



int xccl_build_allreduce_ring(xccl_sched_t *s, size_t count)
{
    return xccl_build_allreduce_ring_segmented(s, count, 0);
}

/* Steps of one ring transfer of len bytes cut into segments of seg bytes
 * (seg 0: one piece), so that a segment is reduced while it is still in
 * cache and the next one can follow at once. */
static size_t nsegs(size_t len, size_t seg)
{
    return 0 == seg || len <= seg ? 1 : (len + seg - 1) / seg;
}

int xccl_build_allreduce_ring_segmented(xccl_sched_t *s, size_t count, size_t seg)
{
    const int p = s->size, r = s->rank;
    const int right = mod(r + 1, p), left = mod(r - 1, p);
    const size_t es = s->elem_size;

    s->algo = "ring";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), count * es);
        return xccl_sched_finalize(s);
    }
    /* Segments hold whole elements. */
    seg = seg / es * es;
    const size_t maxchunk = chunk_count(count, p, 0) * es;
    const size_t ns = nsegs(maxchunk, seg), segsz = 1 == ns ? maxchunk : seg;
    s->scratch_bytes = segsz;

    /* Reduce-scatter: at step k send chunk r-k (the input at k = 0, else
     * what was reduced at step k-1) and reduce chunk r-k-1 into RECV.
     * Every chunk is cut into the same number of segments (the chunks of
     * one ring step differ by at most one element), segment j of the sent
     * chunk travels with segment j of the received one.
     * In place (SEND == RECV) works: chunk r-k-1 is only read by its own
     * reduction, whose destination aliases its right operand exactly. */
    for (int k = 0; k < p - 1; k++) {
        int sc = mod(r - k, p), rc = mod(r - k - 1, p);
        size_t soff = chunk_first(count, p, sc) * es, slen = chunk_count(count, p, sc) * es;
        size_t roff = chunk_first(count, p, rc) * es, rlen = chunk_count(count, p, rc) * es;
        for (size_t j = 0; j < ns; j++) {
            size_t o = j * segsz;
            size_t sl = o < slen ? (slen - o < segsz ? slen - o : segsz) : 0;
            size_t rl = o < rlen ? (rlen - o < segsz ? rlen - o : segsz) : 0;
            xccl_sched_step(s);
            xccl_sched_recv(s, left, xccl_ref(XCCL_BUF_SCRATCH, 0), rl);
            xccl_sched_send(s, right, xccl_ref(0 == k ? XCCL_BUF_SEND : XCCL_BUF_RECV, soff + o), sl);
            xccl_sched_reduce(s, xccl_ref(XCCL_BUF_RECV, roff + o), xccl_ref(XCCL_BUF_SCRATCH, 0),
                              xccl_ref(XCCL_BUF_SEND, roff + o), rl);
        }
    }
    /* Rank r now owns chunk r+1.  Allgather: step k sends chunk r+1-k and
     * receives chunk r-k straight into place (no reduction: no segments). */
    for (int k = 0; k < p - 1; k++) {
        int sc = mod(r + 1 - k, p), rc = mod(r - k, p);
        xccl_sched_step(s);
        xccl_sched_recv(s, left, xccl_ref(XCCL_BUF_RECV, chunk_first(count, p, rc) * es),
                        chunk_count(count, p, rc) * es);
        xccl_sched_send(s, right, xccl_ref(XCCL_BUF_RECV, chunk_first(count, p, sc) * es),
                        chunk_count(count, p, sc) * es);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_reduce_scatter_ring(xccl_sched_t *s, const size_t *counts, int in_place)
{
    const int p = s->size, r = s->rank;
    const int right = mod(r + 1, p), left = mod(r - 1, p);
    const size_t es = s->elem_size;
    size_t *first = malloc((size_t) p * sizeof(size_t));
    size_t max = 0, off = 0;

    s->algo = "ring";
    if (NULL == first) {
        return -1;
    }
    for (int c = 0; c < p; c++) {
        first[c] = off;
        off += counts[c];
        max = counts[c] > max ? counts[c] : max;
    }
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), counts[0] * es);
        free(first);
        return xccl_sched_finalize(s);
    }
    /* Two scratch slots: partial sums alternate between them, one being
     * sent while the next arrives in the other. */
    const size_t slot = max * es;
    s->scratch_bytes = 2 * slot;

    /* Step k sends chunk r-k-1 and receives chunk r-k-2, so the last
     * chunk received (k = p-2) is chunk r. */
    for (int k = 0; k < p - 1; k++) {
        int sc = mod(r - k - 1, p), rc = mod(r - k - 2, p);
        xccl_ref_t sref = 0 == k ? xccl_ref(XCCL_BUF_SEND, first[sc] * es)
                                 : xccl_ref(XCCL_BUF_SCRATCH, (size_t) ((k - 1) & 1) * slot);
        xccl_ref_t rslot = xccl_ref(XCCL_BUF_SCRATCH, (size_t) (k & 1) * slot);
        xccl_ref_t in = xccl_ref(XCCL_BUF_SEND, first[rc] * es);
        size_t rlen = counts[rc] * es;

        xccl_sched_step(s);
        xccl_sched_recv(s, left, rslot, rlen);
        xccl_sched_send(s, right, sref, counts[sc] * es);
        if (k < p - 2) {
            xccl_sched_reduce(s, rslot, rslot, in, rlen);
        } else if (in_place && first[r] != 0) {
            /* The output overlaps the input at a shift: reduce aside first. */
            xccl_sched_reduce(s, rslot, rslot, in, rlen);
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), rslot, rlen);
        } else {
            xccl_sched_reduce(s, xccl_ref(XCCL_BUF_RECV, 0), rslot, in, rlen);
        }
    }
    free(first);
    return xccl_sched_finalize(s);
}

int xccl_build_allgather_ring(xccl_sched_t *s, size_t block)
{
    const int p = s->size, r = s->rank;
    const int right = mod(r + 1, p), left = mod(r - 1, p);

    s->algo = "ring";
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block), xccl_ref(XCCL_BUF_SEND, 0), block);
    for (int k = 0; k < p - 1; k++) {
        xccl_sched_step(s);
        xccl_sched_recv(s, left, xccl_ref(XCCL_BUF_RECV, (size_t) mod(r - k - 1, p) * block), block);
        xccl_sched_send(s, right, xccl_ref(XCCL_BUF_RECV, (size_t) mod(r - k, p) * block), block);
    }
    return xccl_sched_finalize(s);
}
