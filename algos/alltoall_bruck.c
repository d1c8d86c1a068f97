/*
 * Bruck alltoall (small blocks): ceil(lg p) steps; step k sends, in one
 * message to r + 2^k, every block whose distance to its destination has
 * bit k set, so each block hops along the binary digits of its distance.
 * Cost: ceil(lg p) a + (n/2) ceil(lg p) b (n = p * block bytes; exactly
 * sum_k |{i < p : bit k of i}| blocks), plus about (1 + lg p) n of local
 * copies (the reversal in, packing and unpacking).
 *
 * Layout: logical slot i of rank r holds a block whose destination is i
 * ranks after its source (initially r's own block for r + i); a block keeps
 * its slot number as it travels.  Slot i is stored in RECV at block
 * (r - i) mod p, so at the end, when slot i holds the block from r - i, the
 * result is already in place: only the initial placement is a reversal.
 * Blocks of one step go through two scratch buffers (packed to send, packed
 * received); transfers of a step run before its local actions, so packing
 * for step k is the last local action of step k-1.
 */
#include "algo_util.h"
#include "xccl_build.h"


static void place_input(xccl_sched_t *s, size_t block, int in_place);
static size_t count_bit(int p, int bit);
static void pack(xccl_sched_t *s, size_t block, int bit, xccl_ref_t packed, int to_packed);

int xccl_build_alltoall_bruck(xccl_sched_t *s, size_t block, int in_place)
{
    const int p = s->size, r = s->rank;
    size_t maxpack = 0;

    s->algo = "bruck";
    for (int bit = 0; (1 << bit) < p; bit++) {
        size_t c = count_bit(p, bit);
        maxpack = c > maxpack ? c : maxpack;
    }
    /* [0, maxpack): outgoing packed blocks; [maxpack, 2 maxpack): incoming. */
    const xccl_ref_t out = xccl_ref(XCCL_BUF_SCRATCH, 0);
    const xccl_ref_t in = xccl_ref(XCCL_BUF_SCRATCH, maxpack * block);
    s->scratch_bytes = 2 * maxpack * block;   /* also covers the in-place swap block */

    place_input(s, block, in_place);
    if (p > 1) {
        pack(s, block, 0, out, 1);
    }
    for (int bit = 0; (1 << bit) < p; bit++) {
        const int dist = 1 << bit;
        const size_t len = count_bit(p, bit) * block;
        xccl_sched_step(s);
        xccl_sched_recv(s, mod(r - dist, p), in, len);
        xccl_sched_send(s, mod(r + dist, p), out, len);
        pack(s, block, bit, in, 0);
        if ((2 << bit) < p) {
            pack(s, block, bit + 1, out, 1);
        }
    }
    return xccl_sched_finalize(s);
}

/* RECV[(r - i) mod p] = input block for r + i, for every i. */
static void place_input(xccl_sched_t *s, size_t block, int in_place)
{
    const int p = s->size, r = s->rank;
    if (!in_place) {
        for (int i = 0; i < p; i++) {
            xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, (size_t) mod(r - i, p) * block),
                            xccl_ref(XCCL_BUF_SEND, (size_t) mod(r + i, p) * block), block);
        }
        return;
    }
    /* In place the reversal around r is a set of swaps (r - i <-> r + i);
     * one block of scratch (the packing area, not yet in use) holds one side. */
    const xccl_ref_t tmp = xccl_ref(XCCL_BUF_SCRATCH, 0);
    for (int i = 1; 2 * i < p; i++) {
        xccl_ref_t lo = xccl_ref(XCCL_BUF_RECV, (size_t) mod(r - i, p) * block);
        xccl_ref_t hi = xccl_ref(XCCL_BUF_RECV, (size_t) mod(r + i, p) * block);
        xccl_sched_copy(s, tmp, lo, block);
        xccl_sched_copy(s, lo, hi, block);
        xccl_sched_copy(s, hi, tmp, block);
    }
}

/* Number of i in [0, p) with the given bit set. */
static size_t count_bit(int p, int bit)
{
    const long period = 2L << bit, half = 1L << bit;
    long full = p / period, rest = p % period - half;
    return (size_t) (full * half + (rest > 0 ? rest : 0));
}

/*
 * Copy the slots whose index has the bit set between RECV and the packed
 * buffer (to_packed: RECV -> packed, else packed -> RECV).  Slot i sits at
 * block (r - i) mod p, so a run of slots [a, b) is the blocks
 * (r - b, r - a] ascending: the packed order is runs ascending, each run
 * highest slot first, the same on sender and receiver.  A run that wraps
 * around block 0 is split in two copies.
 */
static void pack(xccl_sched_t *s, size_t block, int bit, xccl_ref_t packed, int to_packed)
{
    const int p = s->size, r = s->rank;
    const int half = 1 << bit;
    size_t pos = 0;
    for (int a = half; a < p; a += 2 * half) {
        int b = a + half < p ? a + half : p;
        int first = mod(r - (b - 1), p), n = b - a;
        while (n > 0) {
            int piece = first + n <= p ? n : p - first;
            xccl_ref_t mem = xccl_ref(XCCL_BUF_RECV, (size_t) first * block);
            xccl_ref_t pk = xccl_ref((xccl_buf_id_t) packed.buf, packed.off + pos * block);
            if (to_packed) {
                xccl_sched_copy(s, pk, mem, (size_t) piece * block);
            } else {
                xccl_sched_copy(s, mem, pk, (size_t) piece * block);
            }
            pos += (size_t) piece;
            n -= piece;
            first = 0;
        }
    }
}
