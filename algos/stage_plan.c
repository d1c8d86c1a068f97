/*
 * Staging plan: which pieces of host copies of device buffers a schedule
 * needs before each step, and which it has finished writing after each
 * step (see xccl_stage_plan in xccl_stage.h).
 */
#include "xccl_sched.h"
#include "xccl_stage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NONE SIZE_MAX

typedef struct {
    size_t step;               /* first touch (in) or last write (out) */
    uint32_t region;
    size_t off, len;
} item_t;

static int item_cmp(const void *pa, const void *pb)
{
    const item_t *a = pa, *b = pb;
    if (a->step != b->step) {
        return a->step < b->step ? -1 : 1;
    }
    if (a->region != b->region) {
        return a->region < b->region ? -1 : 1;
    }
    return a->off < b->off ? -1 : (a->off > b->off);
}

typedef struct {
    const xccl_stage_region_t *regions;
    int nregions;
    const size_t *first_piece;  /* [nregions]: index of the region's piece 0 */
    size_t piece;
    size_t *first, *lastw;      /* per piece */
} walk_t;

static void touch(walk_t *w, uintptr_t lo, size_t len, int write, size_t step)
{
    const uintptr_t hi = lo + len;
    if (0 == lo) {
        return;                /* a peer's buffer (ref_addr), or an absent one */
    }
    for (int r = 0; r < w->nregions; r++) {
        const xccl_stage_region_t *g = &w->regions[r];
        const uintptr_t glo = (uintptr_t) g->base, ghi = glo + g->len;
        if (0 == g->len || hi <= glo || lo >= ghi) {
            continue;
        }
        size_t a = (size_t) ((lo > glo ? lo : glo) - glo);
        size_t b = (size_t) ((hi < ghi ? hi : ghi) - glo);
        for (size_t k = a / w->piece; k * w->piece < b; k++) {
            size_t i = w->first_piece[r] + k;
            if (NONE == w->first[i]) {
                w->first[i] = step;
            }
            if (write) {
                w->lastw[i] = step;    /* steps come in increasing order */
            }
        }
    }
}

/* Sorted items -> pieces, adjacent ones with the same step merged; counts
 * per step into per_step[0..nsteps) when given. */
static size_t merge(const item_t *it, size_t n, xccl_stage_piece_t *out, size_t *per_step)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && it[i - 1].step == it[i].step && out[m - 1].region == it[i].region &&
            out[m - 1].off + out[m - 1].len == it[i].off) {
            out[m - 1].len += it[i].len;
            continue;
        }
        out[m].region = it[i].region;
        out[m].off = it[i].off;
        out[m].len = it[i].len;
        if (per_step) {
            per_step[it[i].step]++;
        }
        m++;
    }
    return m;
}

/* The pieces of the regions copied in (in = 1) or out, whose step[] is
 * set, merged and in step order; counts per step added to per_step. */
static size_t pieces(const walk_t *w, int in, const size_t *step, item_t *items,
                     xccl_stage_piece_t *out, size_t *per_step)
{
    size_t n = 0;
    for (int r = 0; r < w->nregions; r++) {
        const xccl_stage_region_t *g = &w->regions[r];
        if (!(in ? g->copy_in : g->copy_out)) {
            continue;
        }
        for (size_t k = 0; k * w->piece < g->len; k++) {
            size_t i = w->first_piece[r] + k, off = k * w->piece;
            if (NONE != step[i]) {
                size_t len = g->len - off < w->piece ? g->len - off : w->piece;
                items[n++] = (item_t) { step[i], (uint32_t) r, off, len };
            }
        }
    }
    qsort(items, n, sizeof(item_t), item_cmp);
    return merge(items, n, out, per_step);
}

/* Where r lies in this rank's memory; 0 for a peer's buffer (peer access),
 * which no region of this rank's holds: the peers' copies are theirs. */
static uintptr_t ref_addr(const xccl_sched_t *s, void *const bufs[XCCL_NBUF], xccl_ref_t r)
{
    const int q = xccl_ref_owner(r);
    if (q >= 0 && q != s->rank) {
        return 0;
    }
    return (uintptr_t) bufs[r.buf] + r.off;
}

int xccl_stage_plan(xccl_stage_plan_t *p, const xccl_sched_t *s, void *const bufs[XCCL_NBUF],
                    const xccl_stage_region_t *regions, int nregions, size_t piece,
                    size_t max_pieces)
{
    memset(p, 0, sizeof(*p));
    if (0 == piece) {
        piece = 1;
    }
    for (int r = 0; r < nregions; r++) {
        if (max_pieces && regions[r].len / max_pieces >= piece) {
            piece = (regions[r].len + max_pieces - 1) / max_pieces;
        }
    }
    p->piece = piece;

    size_t npieces = 0, *first_piece = malloc(((size_t) nregions + 1) * sizeof(size_t));
    if (NULL == first_piece) {
        return -1;
    }
    for (int r = 0; r < nregions; r++) {
        first_piece[r] = npieces;
        npieces += (regions[r].len + piece - 1) / piece;
    }
    walk_t w = { regions, nregions, first_piece, piece, malloc((npieces + 1) * sizeof(size_t)),
                 malloc((npieces + 1) * sizeof(size_t)) };
    item_t *items = malloc((npieces + 1) * sizeof(item_t));
    p->need_in = calloc(s->nsteps + 1, sizeof(size_t));
    p->out_start = calloc(s->nsteps + 1, sizeof(size_t));
    p->in = malloc((npieces + 1) * sizeof(xccl_stage_piece_t));
    p->out = malloc((npieces + 1) * sizeof(xccl_stage_piece_t));
    int rc = -1;
    if (!w.first || !w.lastw || !items || !p->need_in || !p->out_start || !p->in || !p->out) {
        goto done;
    }
    for (size_t i = 0; i < npieces; i++) {
        w.first[i] = w.lastw[i] = NONE;
    }

    for (size_t step = 0; step < s->nsteps; step++) {
        size_t end = step + 1 < s->nsteps ? s->step_start[step + 1] : s->nacts;
        for (size_t i = s->step_start[step]; i < end; i++) {
            const xccl_action_t *a = &s->acts[i];
            /* integers: a buffer may be absent (NULL); a peer's buffer is
             * in no region of this rank's (0: outside every region) */
            const uintptr_t pa = ref_addr(s, bufs, a->a), pb = ref_addr(s, bufs, a->b);
            const uintptr_t pd = ref_addr(s, bufs, a->dst);
            switch (a->kind) {
            case XCCL_ACT_SEND:
                touch(&w, pa, a->len, 0, step);
                break;
            case XCCL_ACT_RECV:
                touch(&w, pd, a->len, 1, step);
                break;
            case XCCL_ACT_COPY:
                if (pa != pd) {        /* the executor skips a copy onto itself */
                    touch(&w, pa, a->len, 0, step);
                    touch(&w, pd, a->len, 1, step);
                }
                break;
            case XCCL_ACT_REDUCE:
                touch(&w, pa, a->len, 0, step);
                touch(&w, pb, a->len, 0, step);
                touch(&w, pd, a->len, 1, step);
                break;
            }
        }
    }

    /* In: every touched piece of a region read from the device, in order
     * of first touch; need_in[i] = copies with first touch <= i.
     * Out: every written piece of a region that goes back, after its last
     * write; out_start is the prefix sum of the per-step counts. */
    p->nin = pieces(&w, 1, w.first, items, p->in, p->need_in);
    for (size_t i = 1; i < s->nsteps; i++) {
        p->need_in[i] += p->need_in[i - 1];
    }
    p->nout = pieces(&w, 0, w.lastw, items, p->out, p->out_start + 1);
    for (size_t i = 1; i <= s->nsteps; i++) {
        p->out_start[i] += p->out_start[i - 1];
    }
    rc = 0;
done:
    free(first_piece);
    free(w.first);
    free(w.lastw);
    free(items);
    if (rc) {
        xccl_stage_plan_fini(p);
    }
    return rc;
}

void xccl_stage_plan_fini(xccl_stage_plan_t *p)
{
    free(p->in);
    free(p->out);
    free(p->need_in);
    free(p->out_start);
    memset(p, 0, sizeof(*p));
}
