/* Staging plans: see xccl_stage.h. */
#include "xccl_stage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Piece k of K of n items: [piece_first(n, K, k), piece_first(n, K, k + 1)). */
static size_t piece_first(size_t n, size_t K, size_t k)
{
    /* n * k may not fit for absurd sizes; split the product. */
    return (n / K) * k + (n % K) * k / K;
}

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

static size_t nchunks(size_t total_bytes, size_t chunk_bytes, size_t max_pieces)
{
    size_t K = div_up(total_bytes, chunk_bytes);
    if (K > max_pieces) {
        K = max_pieces;        /* a piece holds at least one item */
    }
    return K ? K : 1;
}

static void add_copy(xccl_stage_copy_t *c, int *n, size_t uoff, size_t upitch, size_t soff,
                     size_t spitch, size_t width, size_t rows)
{
    if (0 == width || 0 == rows) {
        return;
    }
    c[*n] = (xccl_stage_copy_t) { uoff, upitch, soff, spitch, width, rows };
    (*n)++;
}

static int all_equal(const size_t *v, int n)
{
    for (int i = 1; i < n; i++) {
        if (v[i] != v[0]) {
            return 0;
        }
    }
    return 1;
}

int xccl_stage_plan(xccl_stage_plan_t *p, const xccl_stage_args_t *a)
{
    const size_t P = (size_t) a->size, es = a->es, cb = a->chunk_bytes ? a->chunk_bytes : 1;
    size_t K = 1, copies_per_chunk = 2, counts_per_chunk = 0, total = 0;
    int rs_equal = 1;

    memset(p, 0, sizeof(*p));
    switch (a->coll) {
    case XCCL_COLL_ALLREDUCE:
        K = nchunks(a->count * es, cb, a->count);
        break;
    case XCCL_COLL_BCAST:
        K = nchunks(a->count, cb, a->count);
        break;
    case XCCL_COLL_ALLGATHER:
    case XCCL_COLL_ALLTOALL:
        K = nchunks(P * a->block, cb, a->block);
        break;
    case XCCL_COLL_REDUCE_SCATTER:
    case XCCL_COLL_REDUCE_SCATTER_BLOCK: {
        size_t maxc = 0;
        for (size_t i = 0; i < P; i++) {
            total += a->counts[i];
            maxc = a->counts[i] > maxc ? a->counts[i] : maxc;
        }
        rs_equal = all_equal(a->counts, a->size);
        K = nchunks(total * es, cb, maxc);
        /* In place with unequal blocks, the result (at the start of RECV)
         * overlaps pieces of other blocks that later chunks still read. */
        if (a->in_place && !rs_equal) {
            K = 1;
        }
        copies_per_chunk = rs_equal ? 2 : P + 1;
        counts_per_chunk = P;
        break;
    }
    default:
        return -1;
    }

    size_t sz_chunks = K * sizeof(xccl_stage_chunk_t);
    size_t sz_copies = K * copies_per_chunk * sizeof(xccl_stage_copy_t);
    size_t sz_counts = K * counts_per_chunk * sizeof(size_t);
    char *mem = calloc(1, sz_chunks + sz_copies + sz_counts);
    if (NULL == mem) {
        return -1;
    }
    p->storage = mem;
    p->chunks = (xccl_stage_chunk_t *) mem;
    p->nchunks = (int) K;
    xccl_stage_copy_t *copies = (xccl_stage_copy_t *) (mem + sz_chunks);
    size_t *counts = (size_t *) (mem + sz_chunks + sz_copies);

    for (size_t k = 0; k < K; k++) {
        xccl_stage_chunk_t *c = &p->chunks[k];
        c->in = copies + k * copies_per_chunk;
        switch (a->coll) {
        case XCCL_COLL_ALLREDUCE: {
            size_t first = piece_first(a->count, K, k) * es;
            size_t len = piece_first(a->count, K, k + 1) * es - first;
            c->count = len / es;
            c->recv_off = len;
            c->slot_bytes = 2 * len;
            add_copy(c->in, &c->nin, first, 0, 0, 0, len, 1);
            c->out = c->in + c->nin;
            add_copy(c->out, &c->nout, first, 0, len, 0, len, 1);
            break;
        }
        case XCCL_COLL_BCAST: {
            size_t first = piece_first(a->count, K, k);
            size_t len = piece_first(a->count, K, k + 1) - first;
            c->count = len;
            c->slot_bytes = len;
            if (a->rank == a->root) {
                add_copy(c->in, &c->nin, first, 0, 0, 0, len, 1);
            }
            c->out = c->in + c->nin;
            if (a->rank != a->root) {
                add_copy(c->out, &c->nout, first, 0, 0, 0, len, 1);
            }
            break;
        }
        case XCCL_COLL_ALLGATHER: {
            size_t first = piece_first(a->block, K, k);
            size_t len = piece_first(a->block, K, k + 1) - first;
            size_t own = a->in_place ? (size_t) a->rank * a->block : 0;
            c->count = len;
            c->recv_off = len;
            c->slot_bytes = len + P * len;
            add_copy(c->in, &c->nin, own + first, 0, 0, 0, len, 1);
            c->out = c->in + c->nin;
            add_copy(c->out, &c->nout, first, a->block, len, len, len, P);
            break;
        }
        case XCCL_COLL_ALLTOALL: {
            size_t first = piece_first(a->block, K, k);
            size_t len = piece_first(a->block, K, k + 1) - first;
            c->count = len;
            c->recv_off = P * len;
            c->slot_bytes = 2 * P * len;
            add_copy(c->in, &c->nin, first, a->block, 0, len, len, P);
            c->out = c->in + c->nin;
            add_copy(c->out, &c->nout, first, a->block, P * len, len, len, P);
            break;
        }
        default: {             /* reduce_scatter(_block) */
            c->counts = counts + k * P;
            size_t soff = 0, displ = 0, mine_first = 0;
            for (size_t i = 0; i < P; i++) {
                size_t f = piece_first(a->counts[i], K, k);
                c->counts[i] = piece_first(a->counts[i], K, k + 1) - f;
                if (!rs_equal) {
                    add_copy(c->in, &c->nin, (displ + f) * es, 0, soff, 0, c->counts[i] * es, 1);
                }
                if ((int) i == a->rank) {
                    mine_first = f;
                }
                soff += c->counts[i] * es;
                displ += a->counts[i];
            }
            if (rs_equal) {
                size_t f = piece_first(a->counts[0], K, k), len = c->counts[0] * es;
                add_copy(c->in, &c->nin, f * es, a->counts[0] * es, 0, len, len, P);
            }
            c->recv_off = soff;
            c->slot_bytes = soff + c->counts[a->rank] * es;
            c->out = c->in + c->nin;
            add_copy(c->out, &c->nout, mine_first * es, 0, soff, 0, c->counts[a->rank] * es, 1);
            break;
        }
        }
        if (c->slot_bytes > p->slot_bytes) {
            p->slot_bytes = c->slot_bytes;
        }
    }
    return 0;
}

void xccl_stage_plan_fini(xccl_stage_plan_t *p)
{
    free(p->storage);
    memset(p, 0, sizeof(*p));
}
