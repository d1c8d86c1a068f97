/*
 * Allreduce by nonuniform Bruck ("nb"): a reduce-scatter whose
 * stride doubles while the data halves, then the allgather that undoes it
 * (stride halving, data doubling), ceil(lg p) steps each for any p and no
 * extra traffic: every rank sends (p-1)/p n bytes in each phase.  Our
 * construction after the properties HCCL documents for its NB; the mirror
 * of nhr (algos/allreduce_nhr.c), whose far steps carry the most data:
 * here the nearest peers (stride 1) get half the vector, so on a machine
 * of nodes and leaf switches most bytes stay close.
 *
 * Rank r owns block r; relative block j is block r+j (mod p).  Before the
 * reduce-scatter step of stride d = 2^k, rank r holds partial sums of the
 * j that are multiples of d; it sends those with lowest set bit k (j = d,
 * 3d, 5d, ... < p) to rank r+d, to whom they are j - d, multiples of 2d,
 * and reduces the same from r-d.  Relative block j then holds the ranks
 * r-t for t in [0, min(d, p-j)) (by induction: [0, min(d, p-j)) and its
 * shift by d from r-d), so block r (j = 0) ends with [0, p), every rank
 * once.  A multiple of 2d in [p-d, p) (one at most: j*) gets nothing in
 * that step; the others get one block each.
 *
 * In SCRATCH the relative blocks are ordered by their index's bits
 * reversed (K = ceil(lg p) bits; the indices past p-1 left out): then the
 * multiples of 2^k are a prefix, the blocks a step sends (lowest set bit
 * k) the next range, and the map j -> j - d keeps the order, so a step
 * sends one range and reduces what arrives into the prefix in one or two
 * pieces (around j*).  The allgather sends that prefix (without j*: in one
 * or two messages) to r-d, into its range of stride d.  The vector is
 * copied into this order first (a round of copies) and back at the end.
 * Cost (n bytes): (2 ceil(lg p) + 1) a + 2((p-1)/p) nb + ((p-1)/p) ng
 * + 2 n d, plus a per allgather step that sends around j*.
 *
 * The two phases alone are reduce_scatter's and allgather's "nb" (the
 * blocks of counts[], block r copied to RECV at the end; the allgather's
 * first step sends SEND and copies it into place); bcast's "nb" is the
 * root's blocks scattered by uneven halves (halving_scatter, algo_util.h)
 * and then this allgather: (2 ceil(lg p) + 1) a + 2((p-1)/p) nb + 2 n d
 * at most.  All four are here, they share every step.
 *
 * Every block is reduced once per combine and its final value computed by
 * its owner alone, then copied to all: bitwise identical results
 * everywhere.  A combine puts the owner's partial sum on the left.
 */
#include "algo_util.h"
#include "xccl_build.h"

#include <stdlib.h>

/* This rank's blocks in SCRATCH order: the relative index at each place
 * (the same on every rank) and each place's byte offset (this rank's). */
typedef struct {
    int *rel;                  /* [p]: rel[i] the relative block at place i */
    size_t *at;                /* [p+1]: byte offset of place i; at[p] the vector */
    int *place;                /* [p]: the place of relative block j */
    size_t *first;             /* [p]: byte offset of block b in block order */
    int p, r, K;
} nb_order_t;

/* The order for rank r of p, blocks of counts[b] (counts NULL: count cut
 * into p chunks) units of unit bytes.  0, or -1 out of memory. */
static int nb_order(nb_order_t *o, int p, int r, size_t count, const size_t *counts, size_t unit)
{
    int K = 0;
    while ((1 << K) < p) {
        K++;
    }
    o->p = p;
    o->r = r;
    o->K = K;
    o->first = malloc((size_t) p * sizeof(size_t));
    o->rel = malloc((size_t) p * sizeof(int));
    o->place = malloc((size_t) p * sizeof(int));
    o->at = malloc(((size_t) p + 1) * sizeof(size_t));
    if (NULL == o->rel || NULL == o->place || NULL == o->at || NULL == o->first) {
        return -1;
    }
    size_t sum = 0;
    for (int b = 0; b < p; b++) {
        o->first[b] = sum;
        sum += (counts ? counts[b] : chunk_count(count, p, b)) * unit;
    }
    int i = 0;
    for (unsigned v = 0; v < 1u << K; v++) {
        unsigned j = 0;
        for (int b = 0; b < K; b++) {
            j |= ((v >> b) & 1u) << (K - 1 - b);
        }
        if ((int) j < p) {
            o->rel[i] = (int) j;
            o->place[j] = i;
            i++;
        }
    }
    o->at[0] = 0;
    for (i = 0; i < p; i++) {
        const int b = (r + o->rel[i]) % p;
        o->at[i + 1] = o->at[i] + (b + 1 < p ? o->first[b + 1] : sum) - o->first[b];
    }
    return 0;
}

static void nb_order_free(nb_order_t *o)
{
    free(o->rel);
    free(o->place);
    free(o->at);
    free(o->first);
}

/* Block order in buf <-> SCRATCH order: a copy per block. */
static void nb_copy_blocks(xccl_sched_t *s, const nb_order_t *o, xccl_buf_id_t buf, int to_scratch)
{
    for (int i = 0; i < o->p; i++) {
        const xccl_ref_t flat = xccl_ref(buf, o->first[(o->r + o->rel[i]) % o->p]);
        const xccl_ref_t ord = xccl_ref(XCCL_BUF_SCRATCH, o->at[i]);
        xccl_sched_copy(s, to_scratch ? ord : flat, to_scratch ? flat : ord, o->at[i + 1] - o->at[i]);
    }
}

/* Places [a, b) of o as a byte range of SCRATCH starting at base. */
static xccl_ref_t places(const nb_order_t *o, size_t base, int a)
{
    return xccl_ref(XCCL_BUF_SCRATCH, base + o->at[a]);
}

static size_t span(const nb_order_t *o, int a, int b)
{
    return o->at[b] - o->at[a];
}

/* The multiples of 2d below p: the first ceil(p / 2d) places. */
static int multiples(int p, int d2)
{
    return (p + d2 - 1) / d2;
}

/* The place of j*, the multiple of 2d in [p-d, p), or -1. */
static int jstar(const nb_order_t *o, int p, int d)
{
    const int j = (p - d + 2 * d - 1) / (2 * d) * (2 * d);
    return j < p ? o->place[j] : -1;
}

/* The reduce-scatter from the vector in buffer in (block order): block r,
 * reduced over every rank, ends at SCRATCH 0.  Returns the SCRATCH bytes. */
static size_t nb_reduce_scatter(xccl_sched_t *s, const nb_order_t *o, xccl_buf_id_t in)
{
    const int p = o->p, r = o->r;
    const size_t recvd = o->at[p];     /* SCRATCH: the vector in order, then what arrives */
    size_t scratch = recvd;

    xccl_sched_step(s);
    nb_copy_blocks(s, o, in, 1);
    for (int k = 0; k < o->K; k++) {
        const int d = 1 << k, keep = multiples(p, 2 * d), sent_end = multiples(p, d), js = jstar(o, p, d);
        /* what arrives: the prefix [0, keep) without j* */
        const size_t arrives = span(o, 0, keep) - (js >= 0 ? span(o, js, js + 1) : 0);
        const int cut = js >= 0 ? js : keep;
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r - d, p), xccl_ref(XCCL_BUF_SCRATCH, recvd), arrives);
        xccl_sched_send(s, mod(r + d, p), places(o, 0, keep), span(o, keep, sent_end));
        xccl_sched_reduce(s, places(o, 0, 0), places(o, 0, 0), xccl_ref(XCCL_BUF_SCRATCH, recvd), span(o, 0, cut));
        if (js >= 0) {
            xccl_sched_reduce(s, places(o, 0, js + 1), places(o, 0, js + 1),
                              xccl_ref(XCCL_BUF_SCRATCH, recvd + span(o, 0, js)), span(o, js + 1, keep));
        }
        scratch = recvd + arrives > scratch ? recvd + arrives : scratch;
    }
    return scratch;
}

/* The allgather: block r at own, which is SCRATCH 0 or a buffer that the
 * first step sends from and copies there; every block ends in RECV, in
 * block order. */
static void nb_allgather(xccl_sched_t *s, const nb_order_t *o, xccl_ref_t own)
{
    const int p = o->p, r = o->r;
    for (int k = o->K - 1; k >= 0; k--) {
        const int d = 1 << k, keep = multiples(p, 2 * d), sent_end = multiples(p, d), js = jstar(o, p, d);
        const int cut = js >= 0 ? js : keep, first = o->K - 1 == k;
        xccl_sched_step(s);
        /* r+d's prefix without its j*, as its pieces, into places
         * [keep, sent_end); this prefix without j* to r-d, likewise (the
         * first step: block r alone) */
        xccl_sched_recv(s, mod(r + d, p), places(o, 0, keep), span(o, keep, keep + cut));
        xccl_sched_recv(s, mod(r + d, p), places(o, 0, keep + cut), span(o, keep + cut, sent_end));
        xccl_sched_send(s, mod(r - d, p), first ? own : places(o, 0, 0), span(o, 0, cut));
        if (js >= 0) {
            xccl_sched_send(s, mod(r - d, p), places(o, 0, js + 1), span(o, js + 1, keep));
        }
        if (first && XCCL_BUF_SCRATCH != own.buf) {
            xccl_sched_copy(s, places(o, 0, 0), own, span(o, 0, 1));
        }
    }
    /* Back to block order, after the last transfers. */
    nb_copy_blocks(s, o, XCCL_BUF_RECV, 0);
}

int xccl_build_allreduce_nb(xccl_sched_t *s, size_t count)
{
    const size_t bytes = count * s->elem_size;
    nb_order_t o;

    s->algo = "nb";
    if (one_rank_copy(s, bytes)) {
        return xccl_sched_finalize(s);
    }
    if (0 != nb_order(&o, s->size, s->rank, count, NULL, s->elem_size)) {
        s->error = 1;
    } else {
        s->scratch_bytes = nb_reduce_scatter(s, &o, XCCL_BUF_SEND);
        nb_allgather(s, &o, xccl_ref(XCCL_BUF_SCRATCH, 0));
    }
    nb_order_free(&o);
    return xccl_sched_finalize(s);
}

int xccl_build_reduce_scatter_nb(xccl_sched_t *s, const size_t *counts, int in_place)
{
    nb_order_t o;

    s->algo = "nb";
    if (one_rank_copy(s, in_place ? 0 : counts[0] * s->elem_size)) {
        return xccl_sched_finalize(s);
    }
    if (0 != nb_order(&o, s->size, s->rank, 0, counts, s->elem_size)) {
        s->error = 1;
    } else {
        s->scratch_bytes = nb_reduce_scatter(s, &o, in_place ? XCCL_BUF_RECV : XCCL_BUF_SEND);
        /* block r, after the last step's reduction */
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), places(&o, 0, 0), counts[s->rank] * s->elem_size);
    }
    nb_order_free(&o);
    return xccl_sched_finalize(s);
}

int xccl_build_allgather_nb(xccl_sched_t *s, size_t block)
{
    nb_order_t o;

    s->algo = "nb";
    if (one_rank_copy(s, block)) {
        return xccl_sched_finalize(s);
    }
    if (0 != nb_order(&o, s->size, s->rank, (size_t) s->size, NULL, block)) {
        s->error = 1;
    } else {
        s->scratch_bytes = o.at[s->size];
        nb_allgather(s, &o, xccl_ref(XCCL_BUF_SEND, 0));
    }
    nb_order_free(&o);
    return xccl_sched_finalize(s);
}

int xccl_build_bcast_nb(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, r = s->rank;
    nb_order_t o;

    s->algo = "nb";
    if (bcast_pair(s, bytes, root)) {
        return xccl_sched_finalize(s);
    }
    if (0 != nb_order(&o, p, r, bytes, NULL, 1)) {
        s->error = 1;
    } else {
        halving_scatter(s, bytes, root);
        s->scratch_bytes = o.at[p];
        nb_allgather(s, &o, xccl_ref(XCCL_BUF_RECV, o.first[r]));
    }
    nb_order_free(&o);
    return xccl_sched_finalize(s);
}
