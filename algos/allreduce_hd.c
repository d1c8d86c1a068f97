/*
 * Halving-doubling allreduces over the largest power of two p' <= p; the
 * p - p' extra ranks fold in first (each odd rank r < 2(p-p') hands its
 * vector to r-1) and get the result at the end.
 *
 *   recursive_doubling: lg p' exchanges of the whole vector.
 *     lg p'(a + nb + ng)  (+ 2(a + nb) + ng for the fold)
 *   rabenseifner: recursive-halving reduce-scatter, then recursive-doubling
 *     allgather.  2 lg p' a + 2((p'-1)/p') nb + ((p'-1)/p') ng  (+ fold)
 *
 * Every combine computes (data of the lower rank) op (data of the higher
 * rank), so both partners of an exchange produce the same bits and every
 * rank ends with a bitwise identical result for commutative but
 * non-associative ops (floating point).
 */
#include "xccl_algos.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int p2;         /* the power of two */
    int rem;        /* p - p2 */
    int nr;         /* rank among the p2 participants, -1 for folded-out ranks */
} fold_t;

static int real_rank(const fold_t *f, int nr)
{
    return nr < f->rem ? 2 * nr : nr + f->rem;
}

/* Copies the input into RECV, then folds the extra ranks in.  Returns the
 * layout; folded-out ranks are done after fold_out(). */
static fold_t fold_in(xccl_sched_t *s, size_t bytes)
{
    const int p = s->size, r = s->rank;
    fold_t f;
    f.p2 = 1;
    while (2 * f.p2 <= p) {
        f.p2 *= 2;
    }
    f.rem = p - f.p2;
    f.nr = r < 2 * f.rem ? (r % 2 ? -1 : r / 2) : r - f.rem;

    /* Runs at once (a step with no transfers); aliasing copies are skipped. */
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), bytes);
    if (r < 2 * f.rem) {
        xccl_sched_step(s);
        if (r % 2) {
            xccl_sched_send(s, r - 1, xccl_ref(XCCL_BUF_RECV, 0), bytes);
        } else {
            xccl_sched_recv(s, r + 1, xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
            xccl_sched_reduce(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_RECV, 0),
                              xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
        }
    }
    return f;
}

static void fold_out(xccl_sched_t *s, const fold_t *f, size_t bytes)
{
    const int r = s->rank;
    if (r < 2 * f->rem) {
        xccl_sched_step(s);
        if (r % 2) {
            xccl_sched_recv(s, r - 1, xccl_ref(XCCL_BUF_RECV, 0), bytes);
        } else {
            xccl_sched_send(s, r + 1, xccl_ref(XCCL_BUF_RECV, 0), bytes);
        }
    }
}

/* RECV[off, off+len) = lower op higher, where the peer's part is in SCRATCH. */
static void combine(xccl_sched_t *s, int me_lower, size_t off, size_t soff, size_t len)
{
    xccl_ref_t mine = xccl_ref(XCCL_BUF_RECV, off), theirs = xccl_ref(XCCL_BUF_SCRATCH, soff);
    xccl_sched_reduce(s, mine, me_lower ? mine : theirs, me_lower ? theirs : mine, len);
}

int xccl_build_allreduce_recursive_doubling(xccl_sched_t *s, size_t count)
{
    const size_t bytes = count * s->elem_size;
    s->algo = "recursive_doubling";
    s->scratch_bytes = s->size > 1 ? bytes : 0;
    fold_t f = fold_in(s, bytes);
    for (int mask = 1; f.nr >= 0 && mask < f.p2; mask <<= 1) {
        int partner = f.nr ^ mask, peer = real_rank(&f, partner);
        xccl_sched_step(s);
        xccl_sched_recv(s, peer, xccl_ref(XCCL_BUF_SCRATCH, 0), bytes);
        xccl_sched_send(s, peer, xccl_ref(XCCL_BUF_RECV, 0), bytes);
        combine(s, f.nr < partner, 0, 0, bytes);
    }
    fold_out(s, &f, bytes);
    return xccl_sched_finalize(s);
}

/* Blocks of the vector: p2 pieces, the first count % p2 one element longer. */
static size_t block_first(size_t count, int p2, int b)
{
    size_t rem = count % (size_t) p2;
    return (size_t) b * (count / (size_t) p2) + ((size_t) b < rem ? (size_t) b : rem);
}

int xccl_build_allreduce_rabenseifner(xccl_sched_t *s, size_t count)
{
    const size_t es = s->elem_size, bytes = count * es;
    s->algo = "rabenseifner";
    s->scratch_bytes = s->size > 1 ? bytes : 0;
    fold_t f = fold_in(s, bytes);
    if (f.nr >= 0) {
        /* Reduce-scatter by halving: keep the half whose index bit matches. */
        int lo = 0;                         /* my blocks start here */
        for (int mask = f.p2 / 2; mask > 0; mask >>= 1) {
            int partner = f.nr ^ mask, peer = real_rank(&f, partner);
            int upper = (f.nr & mask) != 0;
            int keep = upper ? lo + mask : lo, give = upper ? lo : lo + mask;
            size_t koff = block_first(count, f.p2, keep) * es;
            size_t klen = block_first(count, f.p2, keep + mask) * es - koff;
            size_t goff = block_first(count, f.p2, give) * es;
            size_t glen = block_first(count, f.p2, give + mask) * es - goff;
            xccl_sched_step(s);
            xccl_sched_recv(s, peer, xccl_ref(XCCL_BUF_SCRATCH, 0), klen);
            xccl_sched_send(s, peer, xccl_ref(XCCL_BUF_RECV, goff), glen);
            combine(s, f.nr < partner, koff, 0, klen);
            lo = keep;
        }
        /* Allgather by doubling: exchange the owned ranges, which double. */
        for (int mask = 1; mask < f.p2; mask <<= 1) {
            int partner = f.nr ^ mask, peer = real_rank(&f, partner);
            int mine = f.nr & ~(mask - 1), theirs = partner & ~(mask - 1);
            size_t moff = block_first(count, f.p2, mine) * es;
            size_t mlen = block_first(count, f.p2, mine + mask) * es - moff;
            size_t toff = block_first(count, f.p2, theirs) * es;
            size_t tlen = block_first(count, f.p2, theirs + mask) * es - toff;
            xccl_sched_step(s);
            xccl_sched_recv(s, peer, xccl_ref(XCCL_BUF_RECV, toff), tlen);
            xccl_sched_send(s, peer, xccl_ref(XCCL_BUF_RECV, moff), mlen);
        }
    }
    fold_out(s, &f, bytes);
    return xccl_sched_finalize(s);
}

/* ------------------------------------------------------------------------ */
/* Swing (Sensi et al., NSDI 2024), bandwidth-optimal form                  */
/* ------------------------------------------------------------------------ */

/* rho(k) = sum_{i<=k} (-2)^i = (1 - (-2)^(k+1)) / 3: 1, -1, 3, -5, 11, ... */
static long swing_rho(int k)
{
    long pow = 1;
    for (int i = 0; i <= k; i++) {
        pow *= -2;
    }
    return (1 - pow) / 3;
}

static int swing_peer(int nr, int k, int p2)
{
    long rho = swing_rho(k), q = (nr % 2 == 0) ? nr + rho : nr - rho;
    return (int) (((q % p2) + p2) % p2);
}

/* Marks in set[] the ranks whose blocks nr is responsible for from step k
 * on: itself and, recursively, what its peer of each later step covers. */
static void swing_reach(int nr, int k, int steps, int p2, unsigned char *set)
{
    set[nr] = 1;
    for (int j = k; j < steps; j++) {
        swing_reach(swing_peer(nr, j, p2), j + 1, steps, p2, set);
    }
}

/* One action per run of consecutive marked blocks, in block order on both
 * sides so the per-pair message numbering agrees. */
static void swing_blocks(xccl_sched_t *s, int send, int peer, const unsigned char *set, int p2,
                         size_t count, xccl_buf_id_t buf, int reduce, int me_lower)
{
    const size_t es = s->elem_size;
    for (int b = 0; b < p2;) {
        if (!set[b]) {
            b++;
            continue;
        }
        int e = b;
        while (e < p2 && set[e]) {
            e++;
        }
        size_t off = block_first(count, p2, b) * es, len = block_first(count, p2, e) * es - off;
        if (send) {
            xccl_sched_send(s, peer, xccl_ref(XCCL_BUF_RECV, off), len);
        } else {
            xccl_sched_recv(s, peer, xccl_ref(buf, off), len);
            if (reduce) {
                combine(s, me_lower, off, off, len);
            }
        }
        b = e;
    }
}

int xccl_build_allreduce_swing(xccl_sched_t *s, size_t count)
{
    const size_t bytes = count * s->elem_size;
    s->algo = "swing";
    s->scratch_bytes = s->size > 1 ? bytes : 0;
    fold_t f = fold_in(s, bytes);
    int steps = 0;
    while ((1 << steps) < f.p2) {
        steps++;
    }
    unsigned char *mine = calloc((size_t) f.p2, 1), *theirs = calloc((size_t) f.p2, 1);
    if (NULL == mine || NULL == theirs) {
        free(mine);
        free(theirs);
        return -1;
    }
    if (f.nr >= 0) {
        /* Reduce-scatter: at step k send the peer the blocks it covers from
         * step k+1 on; receive and reduce the ones this rank covers. */
        for (int k = 0; k < steps; k++) {
            int q = swing_peer(f.nr, k, f.p2), peer = real_rank(&f, q);
            memset(mine, 0, (size_t) f.p2);
            memset(theirs, 0, (size_t) f.p2);
            swing_reach(f.nr, k + 1, steps, f.p2, mine);
            swing_reach(q, k + 1, steps, f.p2, theirs);
            xccl_sched_step(s);
            /* Received blocks land in SCRATCH at their own offsets. */
            swing_blocks(s, 0, peer, mine, f.p2, count, XCCL_BUF_SCRATCH, 1, f.nr < q);
            swing_blocks(s, 1, peer, theirs, f.p2, count, XCCL_BUF_RECV, 0, 0);
        }
        /* Allgather: the same exchanges in reverse, final blocks straight
         * into place. */
        for (int k = steps - 1; k >= 0; k--) {
            int q = swing_peer(f.nr, k, f.p2), peer = real_rank(&f, q);
            memset(mine, 0, (size_t) f.p2);
            memset(theirs, 0, (size_t) f.p2);
            swing_reach(f.nr, k + 1, steps, f.p2, mine);
            swing_reach(q, k + 1, steps, f.p2, theirs);
            xccl_sched_step(s);
            swing_blocks(s, 0, peer, theirs, f.p2, count, XCCL_BUF_RECV, 0, 0);
            swing_blocks(s, 1, peer, mine, f.p2, count, XCCL_BUF_RECV, 0, 0);
        }
    }
    free(mine);
    free(theirs);
    fold_out(s, &f, bytes);
    return xccl_sched_finalize(s);
}
