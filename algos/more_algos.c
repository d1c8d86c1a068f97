/*
 * Allgather by Bruck, reduce_scatter by pairwise exchange, bcast by binomial
 * scatter + ring allgather, linear alltoall, pipelined chain bcast.
 *
 *   allgather bruck:            ceil(lg p) a + ((p-1)/p) n b
 *   reduce_scatter pairwise:    (p-1) a + ((p-1)/p) n (b + g)
 *   bcast scatter_allgather:    (ceil(lg p) + p - 1) a + 2 ((p-1)/p) n b
 *   alltoall linear:            ceil((p-1)/m) rounds of m messages: (p-1) a + ((p-1)/p) n b
 *   bcast chain (s segments):   (p - 1 + s - 1)(a + (n/s) b)
 */
#include "xccl_algos.h"

#include <stdlib.h>

static inline int mod(int a, int p)
{
    return ((a % p) + p) % p;
}

/* Byte range of chunk c when n bytes are cut into p chunks. */
static inline size_t chunk_first(size_t n, int p, int c)
{
    size_t rem = n % (size_t) p;
    return (size_t) c * (n / (size_t) p) + ((size_t) c < rem ? (size_t) c : rem);
}

int xccl_build_allgather_bruck(xccl_sched_t *s, size_t block)
{
    const int p = s->size, r = s->rank;
    s->algo = "bruck";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), block);
        return xccl_sched_finalize(s);
    }
    /* SCRATCH block i holds the block of rank r+i. */
    s->scratch_bytes = (size_t) p * block;
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_SEND, 0), block);
    for (int dist = 1; dist < p; dist *= 2) {
        size_t cnt = (size_t) (dist < p - dist ? dist : p - dist);
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r + dist, p), xccl_ref(XCCL_BUF_SCRATCH, (size_t) dist * block),
                        cnt * block);
        xccl_sched_send(s, mod(r - dist, p), xccl_ref(XCCL_BUF_SCRATCH, 0), cnt * block);
    }
    /* Rotate into place after the last transfers. */
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block), xccl_ref(XCCL_BUF_SCRATCH, 0),
                    (size_t) (p - r) * block);
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0),
                    xccl_ref(XCCL_BUF_SCRATCH, (size_t) (p - r) * block), (size_t) r * block);
    return xccl_sched_finalize(s);
}

int xccl_build_reduce_scatter_pairwise(xccl_sched_t *s, const size_t *counts, int in_place)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;
    size_t *first = malloc((size_t) p * sizeof(size_t)), off = 0, max = 0;
    (void) in_place;   /* the result is assembled in scratch: in place needs nothing more */
    s->algo = "pairwise";
    if (NULL == first) {
        return -1;
    }
    for (int c = 0; c < p; c++) {
        first[c] = off;
        off += counts[c];
        max = counts[c] > max ? counts[c] : max;
    }
    const size_t mine = counts[r] * es, slot = max * es;
    xccl_ref_t acc = xccl_ref(XCCL_BUF_SCRATCH, 0), in = xccl_ref(XCCL_BUF_SCRATCH, slot);
    s->scratch_bytes = 2 * slot;
    /* Accumulate in a fixed order (own block, then from r-1, r-2, ...), so
     * the owner's result does not depend on arrival order. */
    xccl_sched_copy(s, acc, xccl_ref(XCCL_BUF_SEND, first[r] * es), mine);
    for (int k = 1; k < p; k++) {
        int to = mod(r + k, p), from = mod(r - k, p);
        xccl_sched_step(s);
        xccl_sched_recv(s, from, in, mine);
        xccl_sched_send(s, to, xccl_ref(XCCL_BUF_SEND, first[to] * es), counts[to] * es);
        xccl_sched_reduce(s, acc, acc, in, mine);
    }
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), acc, mine);
    free(first);
    return xccl_sched_finalize(s);
}

int xccl_build_bcast_scatter_allgather(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, vr = mod(s->rank - root, p);
#define REAL(v) mod((v) + root, p)
#define RANGE(a, b) xccl_ref(XCCL_BUF_RECV, chunk_first(bytes, p, (a))), \
                    chunk_first(bytes, p, (b)) - chunk_first(bytes, p, (a))
    s->algo = "scatter_allgather";
    /* Binomial scatter: vr receives chunks [vr, vr + its subtree) from its
     * parent and passes the upper parts on, largest first. */
    int mask = 1;
    while (mask < p && !(vr & mask)) {
        mask <<= 1;
    }
    if (vr != 0) {
        int end = vr + mask < p ? vr + mask : p;
        xccl_sched_step(s);
        xccl_sched_recv(s, REAL(vr - mask), RANGE(vr, end));
    }
    xccl_sched_step(s);
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask < p) {
            int end = vr + 2 * mask < p ? vr + 2 * mask : p;
            xccl_sched_send(s, REAL(vr + mask), RANGE(vr + mask, end));
        }
    }
    /* Ring allgather of the chunks, in relative ranks. */
    for (int k = 0; k < p - 1; k++) {
        int sc = mod(vr - k, p), rc = mod(vr - k - 1, p);
        xccl_sched_step(s);
        xccl_sched_recv(s, REAL(vr - 1), RANGE(rc, rc + 1));
        xccl_sched_send(s, REAL(vr + 1), RANGE(sc, sc + 1));
    }
#undef RANGE
#undef REAL
    return xccl_sched_finalize(s);
}

int xccl_build_alltoall_linear(xccl_sched_t *s, size_t block, int in_place, int max_inflight)
{
    const int p = s->size, r = s->rank;
    const int m = max_inflight > 0 ? max_inflight : p;
    xccl_buf_id_t src = XCCL_BUF_SEND;
    s->algo = "linear";
    if (in_place) {
        /* Every block may still have to leave after its slot was refilled:
         * send from a copy. */
        s->scratch_bytes = (size_t) p * block;
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_SCRATCH, 0), xccl_ref(XCCL_BUF_RECV, 0),
                        (size_t) p * block);
        src = XCCL_BUF_SCRATCH;
    } else {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) r * block),
                        xccl_ref(XCCL_BUF_SEND, (size_t) r * block), block);
    }
    /* Peers r+1, r+2, ... in groups of at most m per step. */
    for (int k = 1; k < p; k += m) {
        xccl_sched_step(s);
        for (int j = k; j < k + m && j < p; j++) {
            int from = mod(r - j, p), to = mod(r + j, p);
            xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_RECV, (size_t) from * block), block);
            xccl_sched_send(s, to, xccl_ref(src, (size_t) to * block), block);
        }
    }
    return xccl_sched_finalize(s);
}

int xccl_build_bcast_chain(xccl_sched_t *s, size_t bytes, int root, size_t seg)
{
    const int p = s->size, vr = mod(s->rank - root, p);
    const size_t nseg = 0 == seg || 0 == bytes ? 1 : (bytes + seg - 1) / seg;
    const size_t segsz = 0 == seg ? bytes : seg;
    s->algo = "chain";
    /* Rank vr receives segment j in round j + vr - 1 and forwards it in
     * round j + vr, so the chain fills like a pipeline. */
    for (size_t t = 0; t + 1 < nseg + (size_t) p; t++) {
        xccl_sched_step(s);
        if (vr > 0 && t + 1 >= (size_t) vr && t + 1 - (size_t) vr < nseg) {
            size_t j = t + 1 - (size_t) vr, off = j * segsz;
            size_t len = off + segsz <= bytes ? segsz : bytes - off;
            xccl_sched_recv(s, mod(vr - 1 + root, p), xccl_ref(XCCL_BUF_RECV, off), len);
        }
        if (vr < p - 1 && t >= (size_t) vr && t - (size_t) vr < nseg) {
            size_t j = t - (size_t) vr, off = j * segsz;
            size_t len = off + segsz <= bytes ? segsz : bytes - off;
            xccl_sched_send(s, mod(vr + 1 + root, p), xccl_ref(XCCL_BUF_RECV, off), len);
        }
    }
    return xccl_sched_finalize(s);
}
