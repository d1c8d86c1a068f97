/*
 * Internal helpers of the pipelined two-level builders (algos/pipe_*.c,
 * after HCCL's "pipeline" algorithm): the vector is cut in
 * chunks, and the stages of a two-level algorithm run on different chunks
 * at once, the intra-node stage of one chunk beside the inter-node stage
 * of another, so that the slower stage hides the faster one.
 *
 * Time is cut in slots: in slot t a rank's intra-node lane runs the
 * intra-node stages due then (one after the other) and its inter-node
 * lane the rail stage due then; the two lanes are zipped
 * (xccl_sched_zip), round by round, into one step per round.  Both lanes
 * of a slot start at the slot's first round; a slot lasts as long as this
 * rank's longer lane.  Each stage's peers (node mates, rail mates) put it
 * in the same slot, and at the same round of its lane: so both ends of
 * every message land on the same (slot, round), the order of the steps of
 * every rank, and no rank can wait for another in a circle.  The two
 * lanes never share a peer (node mates against other nodes), so the
 * messages between a pair keep each lane's order.
 *
 * The stages are round-synchronous builders (ring, nhr, Bruck) and never
 * the shared-memory level (no flags; xccl_sched_zip refuses them).
 */
#ifndef XCCL_PIPE_UTIL_H
#define XCCL_PIPE_UTIL_H

#include "hier_util.h"

#include <stdlib.h>

/* The children of one pipelined schedule and where they go. */
enum { PIPE_INTRA, PIPE_INTER };
typedef struct {
    xccl_sched_t *kid;
    xccl_zip_part_t *part;
    int *lane;                 /* PIPE_INTRA or PIPE_INTER, of each part */
    size_t n, cap;
    xccl_sched_t *s;           /* the parent */
    size_t slot;               /* the current slot's first round */
    size_t len[2];             /* the rounds of its lanes so far */
    size_t base;               /* where the children's scratch starts (pipe_zip) */
} pipe_t;

/* Chunks of a vector of n units of unit bytes: at least chunk bytes each
 * (the last may be shorter), at most max, at least 1 and at most n. */
static inline int pipe_chunks(size_t n, size_t unit, size_t chunk, int max)
{
    size_t bytes = n * unit, k = 0 == chunk ? 1 : (bytes + chunk - 1) / chunk;
    if (k > (size_t) max) {
        k = (size_t) max;
    }
    if (k > n) {
        k = n;
    }
    return k < 1 ? 1 : (int) k;
}

/* The chunk for slots of `rounds` rounds.  chunk is meant for slots of at
 * least PIPE_SLOT_ROUNDS rounds; a shorter slot (two nodes of two ranks:
 * two rounds) costs less latency per chunk, so its chunks shrink in
 * proportion, and the pipeline's fill and drain (the first chunk's
 * intra-node reduce-scatter and the last one's allgather, overlapped with
 * nothing) shrink with them.  Figures: docs/bench/two-node.md. */
#define PIPE_SLOT_ROUNDS 4
static inline size_t pipe_slot_chunk(size_t chunk, int rounds)
{
    if (rounds >= PIPE_SLOT_ROUNDS || 0 == chunk) {
        return chunk;
    }
    const size_t c = chunk / PIPE_SLOT_ROUNDS * (size_t) (rounds > 1 ? rounds : 1);
    return c > 0 ? c : 1;
}

/* What pipe_slices gave (NULL too). */
static inline void pipe_slices_free(hier_slices_t *v, int K)
{
    for (int c = 0; NULL != v && c < K; c++) {
        hier_slices_fini(&v[c]);
    }
    free(v);
}

/* The slices (hier_slices_t) of each of K chunks of a vector of count
 * elements, for a node of ln ranks; NULL out of memory. */
static inline hier_slices_t *pipe_slices(size_t count, int K, int L, int ln, size_t es)
{
    hier_slices_t *v = calloc((size_t) K, sizeof(*v));
    for (int c = 0; NULL != v && c < K; c++) {
        if (0 != hier_slices_init(&v[c], chunk_count(count, K, c), L, ln, es)) {
            pipe_slices_free(v, K);
            return NULL;
        }
    }
    return v;
}

static inline int pipe_init(pipe_t *pp, xccl_sched_t *s, size_t cap)
{
    pp->kid = calloc(cap, sizeof(*pp->kid));
    pp->part = calloc(cap, sizeof(*pp->part));
    pp->lane = calloc(cap, sizeof(*pp->lane));
    pp->n = 0;
    pp->cap = cap;
    pp->s = s;
    pp->slot = 0;
    pp->len[0] = pp->len[1] = 0;
    pp->base = 0;
    return NULL == pp->kid || NULL == pp->part || NULL == pp->lane ? -1 : 0;
}

static inline void pipe_fini(pipe_t *pp)
{
    for (size_t i = 0; i < pp->n; i++) {
        xccl_sched_fini(&pp->kid[i]);
    }
    free(pp->kid);
    free(pp->part);
    free(pp->lane);
}

/* The next child, initialised for the parent's rank on group[0..g), or
 * NULL (no room, or the rank is not in the group). */
static inline xccl_sched_t *pipe_kid(pipe_t *pp, const int *group, int g)
{
    if (pp->n == pp->cap || hier_child_init(pp->s, &pp->kid[pp->n], group, g) < 0) {
        return NULL;
    }
    pp->kid[pp->n].slot_cap = 0;       /* never the shared-memory level (no flags in a zip) */
    return &pp->kid[pp->n];
}

/* The child pipe_kid gave, built with result rc, to the end of lane
 * lane of the current slot, its buffers placed by map (its scratch by
 * pipe_zip).  0, or -1 if rc failed. */
static inline int pipe_add(pipe_t *pp, int rc, int lane, const int *group, xccl_buf_map_t map)
{
    xccl_sched_t *c = &pp->kid[pp->n];
    if (0 != rc) {
        xccl_sched_fini(c);
        return -1;
    }
    pp->part[pp->n].child = c;
    pp->part[pp->n].group = group;
    pp->part[pp->n].map = map;
    pp->part[pp->n].at = pp->slot + pp->len[lane];
    pp->lane[pp->n] = lane;
    pp->len[lane] += c->rounds;
    pp->n++;
    return 0;
}

/* The next slot starts where this rank's longer lane ends. */
static inline void pipe_next_slot(pipe_t *pp)
{
    pp->slot += pp->len[0] > pp->len[1] ? pp->len[0] : pp->len[1];
    pp->len[0] = pp->len[1] = 0;
}

/* Each lane's children get one scratch region from base on (they run one
 * after the other), then the lanes are zipped into the parent.  0 or -1. */
static inline int pipe_zip(pipe_t *pp, size_t base)
{
    size_t top[2] = { 0, 0 };
    for (size_t i = 0; i < pp->n; i++) {
        const size_t b = pp->kid[i].scratch_bytes;
        top[pp->lane[i]] = b > top[pp->lane[i]] ? b : top[pp->lane[i]];
    }
    for (size_t i = 0; i < pp->n; i++) {
        const size_t at = base + (PIPE_INTER == pp->lane[i] ? hier_align(top[PIPE_INTRA]) : 0);
        pp->part[i].map.base[XCCL_BUF_SCRATCH] = xccl_ref(XCCL_BUF_SCRATCH, at);
    }
    return xccl_sched_zip(pp->s, pp->part, pp->n);
}

/* The end of every pipelined builder: where built is 0 (every child was
 * added), the lanes zipped into the parent (scratch from pp->base), the parent
 * named "pipeline" and finalized; where anything failed, the parent marked
 * failed.  The children go either way.  0 or -1. */
static inline int pipe_end(pipe_t *pp, int built)
{
    int rc = -1;
    if (0 == built && pipe_zip(pp, pp->base) >= 0) {
        pp->s->algo = "pipeline";
        rc = xccl_sched_finalize(pp->s);
    }
    if (rc != 0) {
        pp->s->error = 1;
    }
    pipe_fini(pp);
    return rc;
}

#endif
