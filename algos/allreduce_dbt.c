/*
 * Double binary tree allreduce ("dbt"), after NCCL: two binary trees over
 * the p ranks, each carrying half of the vector (tree 0 the first
 * ceil(count / 2) elements, tree 1 the rest); on each tree a reduce up to
 * the root and a broadcast back down, pipelined in chunks.
 *
 * The trees.  Tree 0 is NCCL's in-order binary tree over positions
 * v = 0..p-1: v with lowest set bit b has children v - b/2 and v + b/2 (the
 * latter, when past p, replaced by v + b/4, v + b/8, ...); position 0 is
 * the root, with the one child P, the largest power of two below p.  Odd
 * positions are leaves.  Tree 1 is the same shape over positions mirrored
 * (v = p-1-r, p even) or shifted (v = r+1 mod p, p odd), so that every
 * leaf of tree 0 (an odd rank) is an inner node or the root of tree 1:
 * each rank forwards data on one tree and is an end point on the other,
 * and both halves move at once.  Depth at most D = ceil(lg p).
 *
 * Reduction order.  A subtree is a contiguous range of ranks (positions
 * are ranks, reversed or rotated), and every node combines
 * (lower child's subtree op own) op higher child's subtree, by rank: the
 * result is the reduction in rank order 0..p-1 with the tree's
 * parenthesisation, the same for every element of a tree.  It is computed
 * once, at the root, and every other rank receives the root's bits.
 *
 * Pipelining: each tree's half is cut into C chunks of at least `chunk`
 * bytes (C <= XCCL_DBT_MAX_CHUNKS); on a global clock a node at depth d
 * sends chunk c up at step c + D - d (its children send it one step
 * earlier, so both arrive in the same step and are reduced there) and the
 * root's result goes down: a node at depth d receives chunk c at step
 * c + D + d - 1 and forwards it at the next.  C + 2D - 1 steps in all;
 * in steady state a rank moves about four chunks (n / 2C bytes each) each
 * way per step: 2n bytes in and out per rank, as the ring, with O(lg p)
 * latency.
 *
 * Cost (n bytes, steps S = C + 2D - 1): about S (4a + 2(n/C) b) + n g.
 */
#include "algo_util.h"
#include "xccl_build.h"

/* The lowest set bit of v > 0. */
static int lowbit(int v)
{
    return v & -v;
}

/* Tree 0's links at position v of p (positions, -1 for none). */
static void btree(int p, int v, int *parent, int *down0, int *down1)
{
    *parent = *down0 = *down1 = -1;
    if (0 == v) {
        int top = 1;
        while (top * 2 < p) {
            top *= 2;
        }
        *down1 = p > 1 ? top : -1;
        return;
    }
    const int b = lowbit(v);
    int up = (v ^ b) | (b << 1);
    *parent = up >= p ? (v ^ b) : up;
    if (b > 1) {
        *down0 = v - b / 2;
        for (int h = b / 2; h > 0; h /= 2) {
            if (v + h < p) {
                *down1 = v + h;
                break;
            }
        }
    }
}

/* Position of rank r in tree t, and back (the map is an involution for
 * the mirror; the shift's inverse is the other rotation). */
static int to_pos(int p, int t, int r)
{
    if (0 == t) {
        return r;
    }
    return 0 == p % 2 ? p - 1 - r : (r + 1) % p;
}

static int to_rank(int p, int t, int v)
{
    if (0 == t || v < 0) {
        return v;
    }
    return 0 == p % 2 ? p - 1 - v : (v + p - 1) % p;
}

void xccl_dbt_tree(int p, int tree, int rank, int *parent, int child[2])
{
    int up, d0, d1;
    btree(p, to_pos(p, tree, rank), &up, &d0, &d1);
    *parent = to_rank(p, tree, up);
    const int a = to_rank(p, tree, d0), b = to_rank(p, tree, d1);
    /* child[0] below rank, child[1] above: one on each side at most. */
    child[0] = child[1] = -1;
    if (a >= 0) {
        child[a < rank ? 0 : 1] = a;
    }
    if (b >= 0) {
        child[b < rank ? 0 : 1] = b;
    }
}

/* Depth of rank r in tree t (root 0). */
static int depth(int p, int t, int r)
{
    int d = 0, v = to_pos(p, t, r), up, d0, d1;
    while (v > 0) {
        btree(p, v, &up, &d0, &d1);
        v = up;
        d++;
    }
    return d;
}

int xccl_build_allreduce_dbt(xccl_sched_t *s, size_t count, size_t chunk)
{
    const int p = s->size, r = s->rank;
    const size_t es = s->elem_size;

    s->algo = "dbt";
    if (1 == p) {
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), count * es);
        return xccl_sched_finalize(s);
    }
    int D = 0;
    while ((1 << D) < p) {
        D++;
    }
    /* Elements of each tree and the chunk count, the same on every rank. */
    const size_t n[2] = { (count + 1) / 2, count / 2 }, base[2] = { 0, (count + 1) / 2 };
    const size_t half = n[0] * es;
    size_t C = 0 == chunk ? 1 : (half + chunk - 1) / chunk;
    C = C < 1 ? 1 : C > XCCL_DBT_MAX_CHUNKS ? XCCL_DBT_MAX_CHUNKS : C;
    const size_t slot = chunk_count(n[0], (int) C, 0) * es;   /* the largest chunk */

    int parent[2], child[2][2], d[2];
    for (int t = 0; t < 2; t++) {
        xccl_dbt_tree(p, t, r, &parent[t], child[t]);
        d[t] = depth(p, t, r);
    }
    /* Scratch: one slot per (tree, child side). */
    s->scratch_bytes = 4 * slot;

    const long S = (long) C + 2 * D - 1;
    for (long st = 0; st < S; st++) {
        xccl_sched_step(s);
        for (int t = 0; t < 2; t++) {
            const int inner = child[t][0] >= 0 || child[t][1] >= 0;
#define CHUNK_OFF(c) ((base[t] + chunk_first(n[t], (int) C, (int) (c))) * es)
#define CHUNK_LEN(c) (chunk_count(n[t], (int) C, (int) (c)) * es)
            /* Reduce: chunk c up to the parent at step c + D - d. */
            long c = st - (D - d[t]);
            if (parent[t] >= 0 && c >= 0 && c < (long) C) {
                xccl_sched_send(s, parent[t], xccl_ref(inner ? XCCL_BUF_RECV : XCCL_BUF_SEND, CHUNK_OFF(c)),
                                CHUNK_LEN(c));
            }
            /* Reduce: the children's chunk c arrives at step c + D - d - 1,
             * and is combined in rank order: (low op own) op high. */
            c = st - (D - d[t] - 1);
            if (inner && c >= 0 && c < (long) C) {
                const size_t off = CHUNK_OFF(c), len = CHUNK_LEN(c);
                const xccl_ref_t lo = xccl_ref(XCCL_BUF_SCRATCH, (size_t) (2 * t) * slot);
                const xccl_ref_t hi = xccl_ref(XCCL_BUF_SCRATCH, (size_t) (2 * t + 1) * slot);
                const xccl_ref_t own = xccl_ref(XCCL_BUF_SEND, off), acc = xccl_ref(XCCL_BUF_RECV, off);
                if (child[t][0] >= 0) {
                    xccl_sched_recv(s, child[t][0], lo, len);
                }
                if (child[t][1] >= 0) {
                    xccl_sched_recv(s, child[t][1], hi, len);
                }
                if (child[t][0] >= 0) {
                    xccl_sched_reduce(s, acc, lo, own, len);
                }
                if (child[t][1] >= 0) {
                    xccl_sched_reduce(s, acc, child[t][0] >= 0 ? acc : own, hi, len);
                }
            }
            /* Broadcast: chunk c from the parent at step c + D + d - 1. */
            c = st - (D + d[t] - 1);
            if (parent[t] >= 0 && c >= 0 && c < (long) C) {
                xccl_sched_recv(s, parent[t], xccl_ref(XCCL_BUF_RECV, CHUNK_OFF(c)), CHUNK_LEN(c));
            }
            /* ... and on to the children at the next step. */
            c = st - (D + d[t]);
            if (c >= 0 && c < (long) C) {
                for (int k = 0; k < 2; k++) {
                    if (child[t][k] >= 0) {
                        xccl_sched_send(s, child[t][k], xccl_ref(XCCL_BUF_RECV, CHUNK_OFF(c)), CHUNK_LEN(c));
                    }
                }
            }
#undef CHUNK_OFF
#undef CHUNK_LEN
        }
    }
    return xccl_sched_finalize(s);
}
