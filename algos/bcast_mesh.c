/*
 * Bcast by peer access ("mesh"): every rank copies the root's RECV, as the
 * CUDA IPC bcast does.  Only the root is waited for and waits:
 *   root:   flag 1 (its data is there), then waits for every rank's flag 2
 *           (nobody reads its buffer any more) before it leaves;
 *   others: wait for the root's flag 1, copy, flag 2.
 * The other ranks do not wait for each other: none reads their buffers.
 */
#include "mesh_util.h"
#include "xccl_build.h"

int xccl_build_bcast_mesh(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, r = s->rank;

    s->algo = "mesh";
    if (0 == bytes || 1 == p) {
        return xccl_sched_finalize(s);
    }
    if (r == root) {
        xccl_sched_post(s, 1);
        xccl_sched_step(s);
        for (int k = 1; k < p; k++) {
            xccl_sched_wait(s, mod(r + k, p), 2);
        }
    } else {
        xccl_sched_wait(s, root, 1);
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref_peer(root, XCCL_BUF_RECV, 0), bytes);
        xccl_sched_post(s, 2);
    }
    return xccl_sched_finalize(s);
}

/*
 * The same where the peers' buffers are copied, not mapped (XCCL_PEER_COPY:
 * process_vm_readv / process_vm_writev, a system call for every copy, by
 * the core that calls it).  The mesh above leaves the root's core idle
 * while the readers copy; here the root writes a share of each reader's
 * RECV itself, and the reader reads the rest:
 *   the message in p parts (XCCL_SPLIT_ALIGN-byte boundaries where they
 *   fit); reader k (k = 1 .. p - 1 ranks after the root) reads every part
 *   but part k, which the root writes into its RECV;
 *   root:   flag 1 (its data is there); then for k = 1 .. p - 1: wait for
 *           reader k's flag 1 (it is in the call: its RECV may be written),
 *           write part k, flag 1 + k; at the end waits for every reader's
 *           flag 2 (nobody reads its buffer any more);
 *   reader k: flag 1; wait for the root's flag 1, read its parts, flag 2;
 *           wait for the root's flag 1 + k (its part is written).
 * Each side copies (p - 1) / p of a message: of two ranks half each.  The
 * root writes the parts in the readers' order, so a reader that comes
 * late holds up the parts of the readers after it (the plain mesh's
 * readers never wait for each other); the trials see that cost.  With
 * both cores copying, a message takes about half the time of one reader's
 * copy (figures: docs/bench/select-figures.md).
 */
#define XCCL_SPLIT_ALIGN ((size_t) 4096)

/* Part k of p of n bytes: [lo, lo + len), boundaries on multiples of
 * XCCL_SPLIT_ALIGN where n holds at least one such unit per part. */
static size_t split_part(size_t n, int p, int k, size_t *lo)
{
    const size_t unit = n / (size_t) p >= XCCL_SPLIT_ALIGN ? XCCL_SPLIT_ALIGN : 1;
    const size_t units = (n + unit - 1) / unit;
    const size_t a = chunk_first(units, p, k) * unit, b = chunk_first(units, p, k + 1) * unit;
    *lo = a < n ? a : n;
    return (b < n ? b : n) - *lo;
}

int xccl_build_bcast_mesh_split(xccl_sched_t *s, size_t bytes, int root)
{
    const int p = s->size, r = s->rank;

    s->algo = "mesh";
    if (0 == bytes || 1 == p) {
        return xccl_sched_finalize(s);
    }
    xccl_sched_post(s, 1);
    xccl_sched_step(s);
    if (r == root) {
        for (int k = 1; k < p; k++) {
            const int q = mod(root + k, p);
            size_t lo;
            const size_t len = split_part(bytes, p, k, &lo);
            xccl_sched_wait(s, q, 1);
            xccl_sched_copy(s, xccl_ref_peer(q, XCCL_BUF_RECV, lo), xccl_ref(XCCL_BUF_RECV, lo), len);
            xccl_sched_post(s, (uint32_t) (1 + k));
            xccl_sched_step(s);
        }
        for (int k = 1; k < p; k++) {
            xccl_sched_wait(s, mod(root + k, p), 2);
        }
    } else {
        const int k = mod(r - root, p);
        size_t lo;
        const size_t len = split_part(bytes, p, k, &lo);
        xccl_sched_wait(s, root, 1);
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref_peer(root, XCCL_BUF_RECV, 0), lo);
        xccl_sched_copy(s, xccl_ref(XCCL_BUF_RECV, lo + len), xccl_ref_peer(root, XCCL_BUF_RECV, lo + len),
                        bytes - lo - len);
        xccl_sched_post(s, 2);
        xccl_sched_step(s);
        xccl_sched_wait(s, root, (uint32_t) (1 + k));
    }
    return xccl_sched_finalize(s);
}
