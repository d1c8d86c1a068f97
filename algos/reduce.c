/*
 * Reduce to one root: a binomial tree, Rabenseifner's reduce-scatter then
 * gather, and a pipelined chain.  Every rank works on relative ranks
 * v = rank - root (mod p), so the root is v = 0 wherever the shape has a
 * special place.  Only the root's RECV is named; the other ranks keep
 * their partial sums in SCRATCH.  Combines put the data of the lower
 * relative ranks on the left (the chain: the running sum), so the order
 * of every reduction follows from the shape alone.
 *
 * Cost (n bytes, p ranks, p' the largest power of two <= p, s segments):
 *   binomial:      ceil(lg p)(a + nb + ng)                       small n
 *   rabenseifner:  2 lg p' a + 2((p'-1)/p') nb + ((p'-1)/p') ng,
 *                  plus a + nb + ng when p is not a power of two  large n
 *   chain:         (p - 2 + s)(a + (n/s)b + (n/s)g)              large n,
 *                  few ranks or a slow root link
 */
#include "algo_util.h"
#include "xccl_build.h"

/* ------------------------------------------------------------------------ */
/* Binomial                                                                 */
/* ------------------------------------------------------------------------ */

/* Relative rank v receives from v + 1, v + 2, v + 4, ... (those below p,
 * smallest subtree first, one per step) and adds each into its sum, then
 * sends the sum to v - lowbit(v).  The sum lives in RECV at the root and
 * in SCRATCH at 0 elsewhere; the first child's vector is received straight
 * into it (sum = SEND op sum), the later ones into a second buffer (SCRATCH
 * at tmp).  A leaf sends its SEND; the root in place, whose RECV is its
 * SEND, receives every child into the second buffer. */
int xccl_build_reduce_binomial(xccl_sched_t *s, size_t count, int root, int in_place)
{
    const int p = s->size, v = mod(s->rank - root, p);
    const size_t bytes = count * s->elem_size;
    const xccl_ref_t sum = 0 == v ? xccl_ref(XCCL_BUF_RECV, 0) : xccl_ref(XCCL_BUF_SCRATCH, 0);
    const size_t tmp = 0 == v ? 0 : bytes;
    xccl_ref_t cur = xccl_ref(XCCL_BUF_SEND, 0);     /* this rank's data so far */
    int children = 0;

    s->algo = "binomial";
    if (one_rank_copy(s, in_place ? 0 : bytes)) {
        return xccl_sched_finalize(s);
    }
    for (int mask = 1; mask < p; mask <<= 1) {
        xccl_sched_step(s);
        if (v & mask) {
            xccl_sched_send(s, mod(v - mask + root, p), cur, bytes);
            break;
        }
        if (v + mask >= p) {
            continue;
        }
        const int into_sum = 0 == children && !(0 == v && in_place);
        const xccl_ref_t in = into_sum ? sum : xccl_ref(XCCL_BUF_SCRATCH, tmp);
        xccl_sched_recv(s, mod(v + mask + root, p), in, bytes);
        xccl_sched_reduce(s, sum, cur, in, bytes);
        cur = sum;
        children++;
        if (!into_sum && tmp + bytes > s->scratch_bytes) {
            s->scratch_bytes = tmp + bytes;
        }
    }
    if (0 != v && children > 0 && bytes > s->scratch_bytes) {
        s->scratch_bytes = bytes;
    }
    return xccl_sched_finalize(s);
}

/* ------------------------------------------------------------------------ */
/* Rabenseifner                                                             */
/* ------------------------------------------------------------------------ */

/* The fold of algo_util.h on relative ranks: the root is virtual rank 0.
 * Of each pair (2i, 2i+1), i < extra, the odd one sends its SEND to the
 * even one and is done; the core's p' ranks then halve: virtual rank u
 * ends owning block u of the vector cut into p' chunks, reduced over
 * every rank; a binomial gather brings the blocks, each to its place, to
 * virtual rank 0.  The working vector W is the root's RECV and SCRATCH at
 * 0 elsewhere (blocks at their offsets in the vector); what a peer sends
 * to be reduced arrives in SCRATCH at tmp. */
typedef struct {
    xccl_sched_t *s;
    fold_t f;
    int root;
    size_t count;
    xccl_buf_id_t w;           /* W's buffer; at offset 0 */
    size_t tmp;                /* SCRATCH offset of the incoming operand */
    size_t tmp_need;           /* bytes of it used */
} rab_t;

/* The group rank of virtual rank u of the core. */
static int rab_peer(const rab_t *c, int u)
{
    return mod(fold_real_rank(&c->f, u) + c->root, c->s->size);
}

/* Fold in: the even rank reduces W = SEND op (its partner's SEND).  The
 * vector comes straight into W but where W is the rank's own SEND (the
 * root in place).  Returns 1 when this rank's data is now in W. */
static int rab_fold_in(rab_t *c, int v, size_t bytes, int in_place)
{
    xccl_sched_t *s = c->s;
    if (0 == c->f.extra) {
        return 0;
    }
    xccl_sched_step(s);
    if (v >= 2 * c->f.extra) {
        return 0;
    }
    if (v & 1) {
        xccl_sched_send(s, mod(v - 1 + c->root, s->size), xccl_ref(XCCL_BUF_SEND, 0), bytes);
        return 0;
    }
    const int aside = 0 == v && in_place;
    const xccl_ref_t in = aside ? xccl_ref(XCCL_BUF_SCRATCH, c->tmp) : xccl_ref(c->w, 0);
    xccl_sched_recv(s, mod(v + 1 + c->root, s->size), in, bytes);
    xccl_sched_reduce(s, xccl_ref(c->w, 0), xccl_ref(XCCL_BUF_SEND, 0), in, bytes);
    if (aside && bytes > c->tmp_need) {
        c->tmp_need = bytes;
    }
    return 1;
}

/* One halving exchange with virtual rank u: blocks [give, give + n) of
 * cur to u, its part of blocks [keep, keep + n) into tmp, reduced into W,
 * the lower virtual rank's operand on the left. */
static void rab_halve(rab_t *c, int u, xccl_buf_id_t cur, int keep, int give, int n)
{
    xccl_sched_t *s = c->s;
    size_t koff, goff;
    const size_t klen = fold_blocks(s, &c->f, c->count, keep, n, &koff);
    const size_t glen = fold_blocks(s, &c->f, c->count, give, n, &goff);
    const xccl_ref_t mine = xccl_ref(cur, koff), theirs = xccl_ref(XCCL_BUF_SCRATCH, c->tmp);

    xccl_sched_step(s);
    xccl_sched_recv(s, rab_peer(c, u), theirs, klen);
    xccl_sched_send(s, rab_peer(c, u), xccl_ref(cur, goff), glen);
    xccl_sched_reduce(s, xccl_ref(c->w, koff), c->f.vr < u ? mine : theirs, c->f.vr < u ? theirs : mine,
                      klen);
    if (klen > c->tmp_need) {
        c->tmp_need = klen;
    }
}

int xccl_build_reduce_rabenseifner(xccl_sched_t *s, size_t count, int root, int in_place)
{
    const int p = s->size, v = mod(s->rank - root, p);
    const size_t bytes = count * s->elem_size;
    rab_t c = { s, fold_layout(p, v), root, count, 0 == v ? XCCL_BUF_RECV : XCCL_BUF_SCRATCH,
                0 == v ? 0 : bytes, 0 };
    xccl_buf_id_t cur = XCCL_BUF_SEND;

    s->algo = "rabenseifner";
    if (one_rank_copy(s, in_place ? 0 : bytes)) {
        return xccl_sched_finalize(s);
    }
    if (rab_fold_in(&c, v, bytes, in_place)) {
        cur = c.w;
    }
    if (c.f.vr < 0) {
        return xccl_sched_finalize(s);         /* folded out: its part is sent */
    }
    /* Reduce-scatter by halving: [lo, lo + 2 mask) are the blocks this
     * rank holds partial sums of; it keeps the half with block vr. */
    int lo = 0;
    for (int mask = c.f.p2 / 2; mask > 0; mask /= 2) {
        const int u = c.f.vr ^ mask;
        const int keep = (c.f.vr & mask) ? lo + mask : lo, give = (c.f.vr & mask) ? lo : lo + mask;
        rab_halve(&c, u, cur, keep, give, mask);
        cur = c.w;
        lo = keep;
    }
    /* Binomial gather: the blocks [vr, vr + mask) go to vr - mask, into
     * place, one child per step. */
    for (int mask = 1; mask < c.f.p2; mask <<= 1) {
        size_t off;
        xccl_sched_step(s);
        if (c.f.vr & mask) {
            const size_t len = fold_blocks(s, &c.f, count, c.f.vr, mask, &off);
            xccl_sched_send(s, rab_peer(&c, c.f.vr - mask), xccl_ref(c.w, off), len);
            break;
        }
        const size_t len = fold_blocks(s, &c.f, count, c.f.vr + mask, mask, &off);
        xccl_sched_recv(s, rab_peer(&c, c.f.vr + mask), xccl_ref(c.w, off), len);
    }
    s->scratch_bytes = (0 == v ? 0 : bytes) + c.tmp_need;
    return xccl_sched_finalize(s);
}

/* ------------------------------------------------------------------------ */
/* Chain                                                                    */
/* ------------------------------------------------------------------------ */

/* Position k = v - 1 (mod p) in the chain: root+1 is k = 0, the root
 * k = p - 1.  Position k sends segment j to k + 1 in round j + k and
 * receives it from k - 1 in round j + k - 1, reducing it (the running sum
 * on the left, its own SEND on the right) once it is in: in a round a
 * rank sends one segment while the next arrives, then reduces that one.
 * A middle rank's running sums alternate between two segment buffers of
 * SCRATCH (the one sent and the one arriving); the root receives into its
 * RECV, or in place (RECV is its SEND) into SCRATCH. */
int xccl_build_reduce_chain(xccl_sched_t *s, size_t count, int root, int in_place, size_t seg)
{
    const int p = s->size, k = mod(s->rank - root - 1, p);
    const size_t es = s->elem_size, bytes = count * es;
    size_t segsz = 0 == seg ? bytes : seg / es * es;

    s->algo = "chain";
    if (one_rank_copy(s, in_place ? 0 : bytes)) {
        return xccl_sched_finalize(s);
    }
    if (0 == bytes) {
        return xccl_sched_finalize(s);
    }
    segsz = 0 == segsz ? es : segsz > bytes ? bytes : segsz;
    const size_t nseg = (bytes + segsz - 1) / segsz;
    const int last = p - 1;                    /* the root's position */
    for (size_t t = 0; t + 2 < nseg + (size_t) p; t++) {
        xccl_sched_step(s);
        /* the segment that arrives this round, and the one that leaves */
        if (k > 0 && t + 1 >= (size_t) k && t + 1 - (size_t) k < nseg) {
            const size_t j = t + 1 - (size_t) k, off = j * segsz;
            const size_t len = bytes - off < segsz ? bytes - off : segsz;
            const xccl_ref_t own = xccl_ref(XCCL_BUF_SEND, off);
            xccl_ref_t in, out;
            if (k < last) {
                in = out = xccl_ref(XCCL_BUF_SCRATCH, (j % 2) * segsz);
            } else {
                in = in_place ? xccl_ref(XCCL_BUF_SCRATCH, 0) : xccl_ref(XCCL_BUF_RECV, off);
                out = xccl_ref(XCCL_BUF_RECV, off);
            }
            xccl_sched_recv(s, mod(s->rank - 1, p), in, len);
            xccl_sched_reduce(s, out, in, own, len);
        }
        if (k < last && t >= (size_t) k && t - (size_t) k < nseg) {
            const size_t j = t - (size_t) k, off = j * segsz;
            const size_t len = bytes - off < segsz ? bytes - off : segsz;
            const xccl_ref_t src = 0 == k ? xccl_ref(XCCL_BUF_SEND, off)
                                          : xccl_ref(XCCL_BUF_SCRATCH, (j % 2) * segsz);
            xccl_sched_send(s, mod(s->rank + 1, p), src, len);
        }
    }
    if (k > 0 && k < last) {
        s->scratch_bytes = (nseg > 1 ? 2 : 1) * segsz;
    } else if (k == last && in_place) {
        s->scratch_bytes = segsz;
    }
    return xccl_sched_finalize(s);
}
