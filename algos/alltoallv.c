/*
 * Alltoallv: rank r sends sbytes[q] from SEND + sdispls[q] to every q and
 * receives rbytes[q] at RECV + rdispls[q] from every q (sbytes[q] on r must
 * equal rbytes[r] on q).  SEND and RECV must not overlap.  The two-level
 * alltoall of uneven layouts uses it.
 *   pairwise: p-1 rounds, round k sends to r+k and receives from r-k;
 *   direct:   one round, every pair at once;
 *   bruck:    ceil(lg p) rounds, forwarding other ranks' blocks (small
 *             blocks, many ranks: latency bound).
 */
#include "hier_util.h"
#include "xccl_build.h"

#include <stdlib.h>

static int alltoallv(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls, const size_t *rbytes,
                     const size_t *rdispls, int one_round)
{
    const int p = s->size, r = s->rank;
    xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, rdispls[r]), xccl_ref(XCCL_BUF_SEND, sdispls[r]), rbytes[r]);
    for (int k = 1; k < p; k++) {
        int to = mod(r + k, p), from = mod(r - k, p);
        if (!one_round || 1 == k) {
            xccl_sched_step(s);
        }
        xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_RECV, rdispls[from]), rbytes[from]);
        xccl_sched_send(s, to, xccl_ref(XCCL_BUF_SEND, sdispls[to]), sbytes[to]);
    }
    return xccl_sched_finalize(s);
}

int xccl_build_alltoallv_pairwise(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                  const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                                  const void *pair_ctx)
{
    (void) pair;
    (void) pair_ctx;
    s->algo = "pairwise";
    return alltoallv(s, sbytes, sdispls, rbytes, rdispls, 0);
}

int xccl_build_alltoallv_direct(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                                const void *pair_ctx)
{
    (void) pair;
    (void) pair_ctx;
    s->algo = "direct";
    return alltoallv(s, sbytes, sdispls, rbytes, rdispls, 1);
}

/*
 * Bruck with irregular blocks.  Logical slot i (0 <= i < p) of rank r
 * holds one block whose destination is i ranks after its source; at the
 * step of distance d = 2^k every slot with bit k set moves, in one message,
 * to r + d, keeping its number.  Before that step slot i of r holds the
 * block from r - (i mod d) to r + (i - i mod d), so its size is known on
 * every rank from pair(); after the last step slot i holds the block from
 * r - i for r.
 *
 * A slot is never copied to a place of its own: it stays where it is
 * (SEND at first, then the region of SCRATCH where the step that brought
 * it received it), and each step's outgoing slots are packed into one
 * SCRATCH area unless they already form one contiguous run.  Every
 * step's incoming message gets its own region of SCRATCH, so no slot is
 * overwritten while another step still needs it.  At the end each slot
 * is copied to RECV.
 *   ceil(lg p) a + about (n/2) lg p b, plus the packing copies.
 */
typedef struct {
    xccl_ref_t at;
    size_t len;
} slot_t;

/* The size of slot i of rank r before the step of distance d. */
static size_t slot_bytes(int p, int r, int i, int d, xccl_pair_bytes_fn pair, const void *ctx)
{
    const int low = i % d;
    return pair(ctx, mod(r - low, p), mod(r + i - low, p));
}

int xccl_build_alltoallv_bruck(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                               const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                               const void *pair_ctx)
{
    const int p = s->size, r = s->rank;

    s->algo = "bruck";
    if (NULL == pair) {
        return -1;             /* forwarding needs every pair's size */
    }
    slot_t *slot = malloc((size_t) p * sizeof(slot_t));
    if (NULL == slot) {
        return -1;
    }
    for (int i = 0; i < p; i++) {
        const int q = mod(r + i, p);
        slot[i].at = xccl_ref(XCCL_BUF_SEND, sdispls[q]);
        slot[i].len = sbytes[q];
    }
    /* SCRATCH: [0, pack) the packed outgoing slots of any step, then the
     * incoming message of each step in turn. */
    size_t pack = 0;
    for (int d = 1; d < p; d *= 2) {
        size_t out = 0;
        for (int i = d; i < p; i++) {
            out += (i & d) ? slot_bytes(p, r, i, d, pair, pair_ctx) : 0;
        }
        pack = out > pack ? out : pack;
    }
    size_t at = hier_align(pack);

    for (int d = 1; d < p; d *= 2) {
        const int to = mod(r + d, p), from = mod(r - d, p);
        /* Outgoing: slots with bit d, in slot order; one run or packed. */
        size_t out = 0;
        int run = 1;
        xccl_ref_t first = { 0, 0, 0 };
        for (int i = d; i < p; i++) {
            if ((i & d) && slot[i].len > 0) {
                if (0 == out) {
                    first = slot[i].at;
                } else {
                    run &= slot[i].at.buf == first.buf && slot[i].at.off == first.off + out;
                }
                out += slot[i].len;
            }
        }
        if (!run) {
            hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
            size_t o = 0;
            for (int i = d; i < p; i++) {
                if (i & d) {
                    hier_copy_add(&cp, xccl_ref(XCCL_BUF_SCRATCH, o), slot[i].at, slot[i].len);
                    o += slot[i].len;
                }
            }
            hier_copy_flush(&cp);
            first = xccl_ref(XCCL_BUF_SCRATCH, 0);
        }
        /* Incoming: the sender's slots with bit d, i.e. after this step
         * slot i holds the block from r - (i mod 2d) to r + (i - i mod 2d). */
        size_t in = 0;
        for (int i = d; i < p; i++) {
            if (i & d) {
                slot[i].len = slot_bytes(p, r, i, 2 * d, pair, pair_ctx);
                slot[i].at = xccl_ref(XCCL_BUF_SCRATCH, at + in);
                in += slot[i].len;
            }
        }
        xccl_sched_step(s);
        xccl_sched_recv(s, from, xccl_ref(XCCL_BUF_SCRATCH, at), in);
        xccl_sched_send(s, to, first, out);
        at += hier_align(in);
    }
    if (s->scratch_bytes < at) {
        s->scratch_bytes = at;
    }
    /* Slot i: the block from r - i, after the last step's transfers. */
    hier_copier_t cp = { s, { 0, 0, 0 }, { 0, 0, 0 }, 0 };
    for (int i = 0; i < p; i++) {
        const int q = mod(r - i, p);
        if (slot[i].len != rbytes[q]) {
            s->error = 1;      /* pair() disagrees with sbytes / rbytes */
        }
        hier_copy_add(&cp, xccl_ref(XCCL_BUF_RECV, rdispls[q]), slot[i].at, slot[i].len);
    }
    hier_copy_flush(&cp);
    free(slot);
    return xccl_sched_finalize(s);
}
