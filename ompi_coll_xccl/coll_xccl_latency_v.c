/*
 * The latency path of the v forms (coll_xccl_latency_v.h): gatherv,
 * scatterv and alltoallv blocking calls on one node, their small blocks
 * through the latency lines and small areas with the ring, numbers and
 * waits of the latency path (coll_xccl_latency.c), their large blocks,
 * where there are any, through the level's executor.
 *
 * The decision.  The six collectives' latency path takes a call where
 * every rank's part is small, which every rank computes alike from the
 * call's arguments.  A v form's rank knows its own sizes only (gatherv's
 * and scatterv's root: every rank's), so whether a whole call is small is
 * known to no rank before the ranks have told each other, and no bound
 * every rank could compute exists.  An agreement in the call (each rank
 * posting whether its part fits, every rank reading every post before
 * any data moves) was the first form of this file; it makes every rank
 * wait for the ones whose word it needs (gatherv's senders for the root,
 * where tuned's run ahead: 1.5 times tuned's time at np 2, 8 and 64 B).
 * Decided block by block instead, nothing needs agreeing: both ends of a
 * block know which way it goes, gatherv's by its size (at most
 * XCCL_LATENCY_V_BLOCK: small), scatterv's and alltoallv's by the word
 * the sender writes for it in its directory, which the receiver reads
 * where it reads the block, after the sender's post, which it waits for
 * anyway.  In every blocking call of these collectives on the level, each
 * rank:
 *   1. (where it writes its part) waits until every peer posted past the
 *      last call that wrote its units, as the six's calls do;
 *   2. copies each block it sends that fits into its part, with its entry
 *      in the directory (the others' entries: large), and posts the
 *      call's number in its latency line (release), also where it sends
 *      nothing: "in this call, done with every call before";
 *   3. copies its own block straight from SEND to RECV, and each block it
 *      receives out of the sender's part once the sender posted (acquire),
 *      where the sender's entry says it lies there;
 *   4. where it sends or receives a large block: runs the collective's
 *      level schedule (shm) of the large blocks alone (the small ones and
 *      its own set to zero bytes in the call's counts), in its turn;
 *      both ends of each large block run it, and those schedules wait
 *      only for the ranks they trade bytes with; else it posts its
 *      executor flag at (this call, LATV_DONE) and takes the call
 *      number the executor would have taken;
 *   5. where it gave blocks by single copies (below): waits until each of
 *      their readers posted its executor flag of this call (step 4's
 *      LATV_DONE or its schedule's first post, both after its step 3).
 * Single copies.  Where the level reads its peers' memory (m->level_cma,
 * alike on every rank), a blocking alltoallv's or scatterv's block of at
 * least v->direct bytes (XCCL_LATENCY_V_DIRECT_*) that does not fit the
 * part goes by one process_vm_readv from the sender's buffer instead of
 * the executor's two copies: the sender writes the block's address in its
 * part where its directory entry says (marked LATV_DIRECT), the receiver
 * reads it in step 3 and the block after it.  Step 5 keeps the sender's
 * buffer until then; a reader posts its flag without waiting for the
 * sender, so step 5 ends.  Gatherv's blocks that do not fit go the other
 * way, each by one process_vm_writev by its sender into the root's
 * receive buffer: the root writes the addresses in its part in step 2
 * (recorded in the ring as any part's bytes), a sender waits for the
 * root's post, writes, then posts, and the root's step 3 waits for that
 * post; so the senders' copies run beside each other and beside the
 * root's own, where the root's reads would run one after the other
 * (docs/bench/single-copy-v.md, "Gatherv: each sender writes").  A request (nonblocking
 * gatherv, scatterv, alltoallv) has no executor step: there every block that does
 * not fit goes by a single copy (XCCL_LATENCY_V_DIRECT_ALL), a sender
 * keeps room for the addresses of the blocks it has still to place, and
 * its request ends once every peer posted its flag of the call (step 5).
 * That post keeps the executor's flags in step: the schedules of a call
 * wait for every peer to have entered the call before (shm_enter) and a
 * later call of another layout for every peer's done flag of one without
 * an exit barrier (the executor's settlement); a rank that ran no
 * schedule in a call says, with the highest value, that it is done with
 * it and every call before, which it is.  The latency path's state (ring,
 * numbers, flips) moves alike on every rank, the slots and flags only in
 * the ranks that run schedules, as in any call of the level.
 *
 * The room each rank reserves in a call, how each block goes and the
 * blocks given and taken: coll_xccl_latency_v_part.c.
 *
 * Gather, scatter, reduce and allgatherv know their sizes on every rank
 * and come here where all of a call fits (mca_coll_xccl_latency_v_fits,
 * the same answer everywhere): gather and scatter as gatherv and scatterv
 * of even blocks, reduce as a gather of the vectors that the root reduces
 * in rank order (with a kernel of ours), allgatherv as every rank's block
 * in its part, read by all.  None has a large block, so for them the
 * executor never runs from here; decide (coll_xccl_path.c) keeps them
 * from the fallback below the small-message size.
 *
 * Nonblocking calls of those four, where all of a call fits, and of
 * the v forms where the level reads its peers' memory, run the same steps as
 * requests in their turn (m->level_ticket; each step as far as the peers'
 * posts let it, from progress); the other nonblocking calls keep the
 * executor.  A blocking call first waits until no nonblocking
 * call of the level is in flight (mca_coll_xccl_latency_idle).
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"

#include "segment/xccl_cma.h"

#include "coll_xccl_exec.h"
#include "coll_xccl_latency_v.h"
#include "coll_xccl_log.h"

/* Steps 2 and 3 of each collective (the top of the file): 1, or -1 a
 * rank is gone; v->large set, and the counts of the blocks moved here
 * (and the own one's) set to zero, which leaves the executor's.  Without
 * wait (a request), 0 where a peer has not posted yet: the next run goes
 * on from there (v->given: step 2 done; v->k: the peers read). */

/* Gatherv: a sender's block that fits goes in its part, where the root
 * copies it out.  One that does not is large (the executor's), or, with
 * v->direct, written by its sender straight into the root's receive
 * buffer (process_vm_writev) at the address the root's part holds for it
 * (8 bytes a rank, at the part's start): the sender waits for the root's
 * post, writes, then posts, and the root's wait for that post is its wait
 * for the block.  The sender's copy runs on its own core, beside the
 * others' and the root's own (figures: docs/bench/single-copy-v.md). */
static int gatherv(latv_t *v, int wait)
{
    size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int n = v->n, me = v->rank, root = v->root;
    const char *ws = v->ws;
    char *wr = v->wr;
    if (me != root && !v->given && latv_written(v, bytes[me])) {
        const int r = latv_posted(v, root, wait);
        if (1 != r) {
            return r;
        }
        const struct mca_coll_xccl_level *h = v->st.m->level;
        uint64_t addr;
        memcpy(&addr, latv_part_of(v, root) + (size_t) me * sizeof(addr), sizeof(addr));
        if (0 != xccl_cma_write(xccl_segment_pid(h->seg, h->local_of[root]), (void *) (uintptr_t) addr, ws,
                                bytes[me])) {
            return -3;
        }
        v->took = 1;
        v->given = 1;
        bytes[me] = 0;
        mca_coll_xccl_latency_post(&v->st);
        return 1;
    }
    if (!v->given) {
        v->given = 1;
        if (me != root) {
            if (bytes[me] <= v->part) {
                latv_copy(latv_part_of(v, me), ws, bytes[me]);
                latv_put_inline(v, ws, bytes[me]);
            }
            mca_coll_xccl_latency_post(&v->st);
            v->large = bytes[me] > v->part;
            return 1;
        }
        if (v->st.wrote) {
            unsigned char *part = latv_part_of(v, me);
            for (int q = 0; q < n; q++) {
                if (q != root && latv_written(v, bytes[q])) {
                    latv_put_address(part + (size_t) q * sizeof(uint64_t), wr + displs[q]);
                }
            }
        }
        mca_coll_xccl_latency_post(&v->st);
        if (!v->in_place && bytes[me] > 0) {
            latv_copy(wr + displs[me], ws, bytes[me]);
        }
        bytes[me] = 0;
        v->k = 1;
    }
    for (; v->k < n; v->k++) {
        const int q = (root + v->k) % n;
        if (latv_written(v, bytes[q])) {
            const int r = latv_posted(v, q, wait);
            if (1 != r) {
                return r;
            }
            v->took = 1;
            bytes[q] = 0;
        } else if (bytes[q] > v->part) {
            v->large = 1;
        } else if (bytes[q] > 0) {
            const int r = latv_posted(v, q, wait);
            if (1 != r) {
                return r;
            }
            if (!latv_get_inline(v, q, wr + displs[q], bytes[q])) {
                latv_copy(wr + displs[q], latv_part_of(v, q), bytes[q]);
            }
            bytes[q] = 0;
        }
    }
    return 1;
}

static int scatterv(latv_t *v, int wait)
{
    size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int me = v->rank, root = v->root;
    if (me != root) {
        if (!v->given) {
            v->given = 1;
            mca_coll_xccl_latency_post(&v->st);
        }
        return bytes[me] > 0 ? mca_coll_xccl_latency_v_take(v, root, v->wr, &bytes[me], wait) : 1;
    }
    mca_coll_xccl_latency_v_give(v, v->ws, bytes, displs);
    mca_coll_xccl_latency_post(&v->st);
    if (!v->in_place && bytes[me] > 0) {
        latv_copy(v->wr, v->ws + displs[me], bytes[me]);
    }
    bytes[me] = 0;
    return 1;
}

static int alltoallv(latv_t *v, int wait)
{
    const int n = v->n, me = v->rank;
    size_t *sc = v->vec, *sd = v->vec + n, *rc = v->vec + 2 * n, *rd = v->vec + 3 * n;
    const char *ws = v->ws;
    char *wr = v->wr;
    if (!v->given) {
        v->given = 1;
        mca_coll_xccl_latency_v_give(v, ws, sc, sd);
        mca_coll_xccl_latency_post(&v->st);
        if (rc[me] > 0 && wr + rd[me] != ws + sd[me]) {
            latv_copy(wr + rd[me], ws + sd[me], rc[me]);
        }
        sc[me] = rc[me] = 0;
        v->k = 1;
    }
    for (; v->k < n; v->k++) {
        const int q = (me - v->k + n) % n;
        const int r = rc[q] > 0 ? mca_coll_xccl_latency_v_take(v, q, wr + rd[q], &rc[q], wait) : 1;
        if (1 != r) {
            return r;
        }
    }
    return 1;
}

/* Reduce (all of it fits): every rank but an in-place root's gives its
 * vector in its part; the root reduces them in rank order into RECV (its
 * own from SEND, or in place from the copy in its part). */
static int reduce(latv_t *v, int wait)
{
    const int n = v->n, me = v->rank, root = v->root;
    const size_t count = v->count, len = count * v->es;
    if (!v->given) {
        v->given = 1;
        if (me != root || v->in_place) {
            latv_copy(latv_part_of(v, me), v->ws, len);
        }
        mca_coll_xccl_latency_post(&v->st);
        if (me != root || 0 == count) {
            return 1;
        }
        v->k = 0;
    }
    for (; v->k < n; v->k++) {
        const int q = v->k;
        const int r = q != me ? latv_posted(v, q, wait) : 1;
        if (1 != r) {
            return r;
        }
        const char *src = q == me && !v->in_place ? v->ws : (const char *) latv_part_of(v, q);
        if (0 == q) {
            v->first = src;
        } else {
            v->kernel(v->wr, 1 == q ? v->first : v->wr, src, count);
        }
    }
    return 1;
}

/* Allgatherv (all of it fits): every rank gives its block in its part
 * and copies every other rank's out after its post. */
static int allgatherv(latv_t *v, int wait)
{
    const size_t *bytes = v->vec, *displs = v->vec + v->n;
    const int n = v->n, me = v->rank;
    char *wr = v->wr;
    if (!v->given) {
        v->given = 1;
        const char *own = v->in_place ? wr + displs[me] : v->ws;
        latv_copy(latv_part_of(v, me), own, bytes[me]);
        latv_put_inline(v, own, bytes[me]);
        mca_coll_xccl_latency_post(&v->st);
        if (!v->in_place) {
            latv_copy(wr + displs[me], own, bytes[me]);
        }
        v->k = 1;
    }
    for (; v->k < n; v->k++) {
        const int q = (me - v->k + n) % n;
        if (bytes[q] > 0) {
            const int r = latv_posted(v, q, wait);
            if (1 != r) {
                return r;
            }
            if (!latv_get_inline(v, q, wr + displs[q], bytes[q])) {
                latv_copy(wr + displs[q], latv_part_of(v, q), bytes[q]);
            }
        }
    }
    return 1;
}

int mca_coll_xccl_latency_v_steps(mca_coll_xccl_latency_v_t *v, int wait)
{
    if (v->ring) {
        const int r = mca_coll_xccl_latency_wait(&v->st, -1, v->ring, wait);
        if (1 != r) {
            return r;
        }
        v->ring = 0;
    }
    switch (v->st.coll) {
    case XCCL_COLL_GATHER:
    case XCCL_COLL_GATHERV:
        return gatherv(v, wait);
    case XCCL_COLL_SCATTER:
    case XCCL_COLL_SCATTERV:
        return scatterv(v, wait);
    case XCCL_COLL_REDUCE:
        return reduce(v, wait);
    case XCCL_COLL_ALLGATHERV:
        return allgatherv(v, wait);
    default:
        return alltoallv(v, wait);
    }
}

/* ------------------------------------------------------------ requests */

int mca_coll_xccl_latency_v_begin(mca_coll_xccl_latency_v_t *v, mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                  const xccl_coll_args_t *a, size_t es, xccl_reduce_fn_t kernel,
                                  const char *ws, char *wr, uint32_t seq, unsigned tries)
{
    v->own = NULL;
    v->vec = (size_t *) a->vec;
    if ((XCCL_COLL_GATHER == coll || XCCL_COLL_SCATTER == coll) && NULL == v->vec) {
        if (NULL == (v->own = malloc(2 * (size_t) m->size * sizeof(size_t)))) {
            return -2;
        }
        v->vec = v->own;
        mca_coll_xccl_latency_v_even(v->vec, m->size, a->block);
    }
    v->seq = seq;
    /* (no large block comes here: scatterv's and alltoallv's go by single
     * copies) */
    v->direct = xccl_coll_sizes_local(coll) || mca_coll_xccl_latency_v_even_direct(m, coll)
                    ? XCCL_LATENCY_V_DIRECT_ALL
                    : 0;
    mca_coll_xccl_latency_v_place(v, m, coll, a, es, kernel, ws, wr);
    return mca_coll_xccl_latency_v_run(v, tries);
}

/* One try: the steps, until done, then the flag; then step 5. */
static int run_once(latv_t *v)
{
    if (!v->stepped) {
        const int r = mca_coll_xccl_latency_v_steps(v, 0);
        if (1 != r) {
            return r;
        }
        v->stepped = 1;
        (void) xccl_segment_flag_post(v->st.m->level->seg, v->seq, LATV_DONE);
    }
    return v->readers ? mca_coll_xccl_latency_v_readers_done(v, v->seq, 0) : 1;
}

int mca_coll_xccl_latency_v_run(mca_coll_xccl_latency_v_t *v, unsigned tries)
{
    int r = run_once(v);
    for (unsigned k = 1; 0 == r && k < tries; k++) {
#if defined(__x86_64__)
        __builtin_ia32_pause();      /* as the latency path's waits: the peer's store lands sooner */
#endif
        r = run_once(v);
    }
    if (0 != r) {
        free(v->own);
        v->own = NULL;
    }
    return r;
}