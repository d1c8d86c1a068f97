/*
 * Recursive-halving reduce_scatter with irregular counts.
 *
 * The halving runs over the largest power of two p' <= p.  The p - p' extra
 * ranks fold in first: of each pair (2i, 2i+1), i < p - p', the odd rank
 * hands its whole input to the even one, which reduces and from then on
 * stands for both ranks' blocks; at the end it sends the odd rank its block.
 * Participant q of the p' owns a contiguous run of blocks (two for a folded
 * pair, one otherwise), so the vector is halved by ranges of participants:
 * at the step of distance m a rank keeps the half of its current range that
 * holds its own participant, sends the other half to q ^ m and reduces what
 * it receives.  Its final range is exactly its blocks.
 *
 * Cost (n = sum(counts) * elem bytes, regular counts):
 *   p power of two:  lg p a + ((p-1)/p) n (b + g)
 *   otherwise add    2a + (1 + 1/p) n b + n g  (whole input in, a block out)
 * Irregular counts cut the halves unevenly; the bytes moved at a step are
 * those of the half given away.
 *
 * Every combine is (data of the lower participant) op (data of the higher
 * one), the fold included (even rank op odd rank): an element's value is
 * computed once, on one rank per step, by the same tree whichever rank ends
 * up owning it, so it does not depend on where the halving boundaries fall
 * (the same bits as the Rabenseifner allreduce for float sums).
 *
 * Buffers: the input (SEND, or RECV in place) is only read, in the fold and
 * in the first halving step; partial sums live in SCRATCH: region A (the
 * range kept at the first reduction, indexed from its first element) and
 * region B (the messages of the later steps).  The last step writes RECV.
 */
#include "xccl_sched.h"
#include "xccl_build.h"

#include <stdlib.h>

typedef struct {
    int p2;          /* participants: largest power of two <= p */
    int rem;         /* p - p2: folded pairs are (2i, 2i+1), i < rem */
    const size_t *first;   /* first[c]: first element of block c; first[p] = total */
} layout_t;

static int real_rank(const layout_t *l, int q);
static size_t bound(const layout_t *l, int q);
static xccl_ref_t at(xccl_ref_t x, size_t bytes);
static void combine(xccl_sched_t *s, int lower, xccl_ref_t dst, xccl_ref_t mine, xccl_ref_t theirs,
                    size_t len);

int xccl_build_reduce_scatter_recursive_halving(xccl_sched_t *s, const size_t *counts, int in_place)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;
    size_t *first = malloc(((size_t) p + 1) * sizeof(size_t));

    s->algo = "recursive_halving";
    if (NULL == first) {
        return -1;
    }
    first[0] = 0;
    for (int c = 0; c < p; c++) {
        first[c + 1] = first[c] + counts[c];
    }
    const size_t total = first[p];
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), total * es);
        free(first);
        return xccl_sched_finalize(s);
    }

    layout_t l = { 1, 0, first };
    while (2 * l.p2 <= p) {
        l.p2 *= 2;
    }
    l.rem = p - l.p2;
    const int folded = r < 2 * l.rem;         /* member of a folded pair */
    if (folded && (r & 1)) {
        /* Hand everything to the partner, get the own block back. */
        xccl_sched_step(s);
        xccl_sched_send(s, r - 1, xccl_ref(XCCL_BUF_SEND, 0), total * es);
        xccl_sched_step(s);
        xccl_sched_recv(s, r - 1, xccl_ref(XCCL_BUF_RECV, 0), counts[r] * es);
        free(first);
        return xccl_sched_finalize(s);
    }
    const int q = folded ? r / 2 : r - l.rem;

    /* Scratch: region A from element abase, then region B. */
    size_t abase, asize, bsize;
    {
        int upper = (q & (l.p2 / 2)) != 0, keep = upper ? l.p2 / 2 : 0;
        size_t k1 = bound(&l, keep + l.p2 / 2) - bound(&l, keep);
        if (folded) {
            abase = 0;
            asize = total;
            bsize = k1;
        } else {
            int m = l.p2 / 4, keep2 = keep + ((q & m) ? m : 0);
            abase = bound(&l, keep);
            asize = k1;
            bsize = m > 0 ? bound(&l, keep2 + m) - bound(&l, keep2) : 0;
        }
    }
    s->scratch_bytes = (asize + bsize) * es;
    const xccl_ref_t A = xccl_ref(XCCL_BUF_SCRATCH, 0), B = xccl_ref(XCCL_BUF_SCRATCH, asize * es);

    if (folded) {
        xccl_sched_step(s);
        xccl_sched_recv(s, r + 1, A, total * es);
        xccl_sched_reduce(s, A, xccl_ref(XCCL_BUF_SEND, 0), A, total * es);
    }

    int lo = 0;                 /* current range: participants [lo, lo + 2m) */
    for (int m = l.p2 / 2; m > 0; m >>= 1) {
        const int partner = q ^ m, peer = real_rank(&l, partner), lower = q < partner;
        const int keep = (q & m) ? lo + m : lo, give = (q & m) ? lo : lo + m;
        const size_t kb = bound(&l, keep), klen = (bound(&l, keep + m) - kb) * es;
        const size_t gb = bound(&l, give), glen = (bound(&l, give + m) - gb) * es;
        /* Before the first reduction the data is the input, after it in A. */
        const int from_input = !folded && m == l.p2 / 2;
        const xccl_ref_t kept = at(A, (kb - abase) * es);
        const xccl_ref_t mine = from_input ? xccl_ref(XCCL_BUF_SEND, kb * es) : kept;
        const xccl_ref_t theirs = from_input ? kept : B;

        xccl_sched_step(s);
        xccl_sched_recv(s, peer, theirs, klen);
        xccl_sched_send(s, peer, from_input ? xccl_ref(XCCL_BUF_SEND, gb * es) : at(A, (gb - abase) * es),
                        glen);
        if (m > 1) {
            combine(s, lower, kept, mine, theirs, klen);
        } else if (folded) {
            /* Own block straight to RECV (the input is no longer read),
             * the partner's into A for the last message. */
            const size_t own = counts[r] * es;
            combine(s, lower, xccl_ref(XCCL_BUF_RECV, 0), mine, theirs, own);
            combine(s, lower, at(kept, own), at(mine, own), at(theirs, own), klen - own);
        } else if (!from_input || !in_place || 0 == first[r]) {
            combine(s, lower, xccl_ref(XCCL_BUF_RECV, 0), mine, theirs, klen);
        } else {
            /* p' = 2 in place: RECV[0..) overlaps the input block at a
             * shift; reduce aside first. */
            combine(s, lower, theirs, mine, theirs, klen);
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), theirs, klen);
        }
        lo = keep;
    }
    if (folded) {
        xccl_sched_step(s);
        xccl_sched_send(s, r + 1, at(A, first[r + 1] * es), counts[r + 1] * es);
    }
    free(first);
    return xccl_sched_finalize(s);
}

/* Rank of participant q: the even rank of a folded pair, or q + rem. */
static int real_rank(const layout_t *l, int q)
{
    return q < l->rem ? 2 * q : q + l->rem;
}

/* First element of participant q's blocks; bound(p2) is the total. */
static size_t bound(const layout_t *l, int q)
{
    return l->first[real_rank(l, q)];
}

static xccl_ref_t at(xccl_ref_t x, size_t bytes)
{
    x.off += bytes;
    return x;
}

/* dst = (lower participant's data) op (higher participant's data). */
static void combine(xccl_sched_t *s, int lower, xccl_ref_t dst, xccl_ref_t mine, xccl_ref_t theirs,
                    size_t len)
{
    xccl_sched_reduce(s, dst, lower ? mine : theirs, lower ? theirs : mine, len);
}
