/*
 * The binomial tree of the rooted collectives (gather, scatter) on
 * relative ranks v = rank - root (mod p): the parent of v > 0 is v less
 * its lowest set bit, its subtree the ranks [v, v + lowbit(v)) cut at p.
 * Not part of the public API (xccl_algos.h).
 */
#ifndef XCCL_TREE_UTIL_H
#define XCCL_TREE_UTIL_H

/* Blocks of the subtree of relative rank v > 0. */
static inline int subtree_blocks(int v, int p)
{
    const int low = v & -v;
    return low < p - v ? low : p - v;
}

/* A child of the root, relative rank v with n blocks: how many of its
 * blocks come before the end of the root's buffer, where block i sits at
 * rank i (the rest wrap to its start).  n when none wrap. */
static inline int before_wrap(int p, int root, int v, int n)
{
    const int k = p - root - v;
    return k > 0 && k < n ? k : n;
}

#endif
