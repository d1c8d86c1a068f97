/*
 * A rank's part in a call of the latency path of the v forms
 * (coll_xccl_latency_v_part.c; the steps: coll_xccl_latency_v.c): the
 * room every rank reserves in a call, the call's state, how each block
 * goes, the blocks given and taken, and the waits for posts and readers.
 */
#ifndef MCA_COLL_XCCL_LATENCY_V_PART_H
#define MCA_COLL_XCCL_LATENCY_V_PART_H

#include <stdint.h>
#include <string.h>

#include "base/xccl_copy.h"

#include "coll_xccl_latency.h"
#include "coll_xccl_latency_line.h"
#include "coll_xccl_level.h"

BEGIN_C_DECLS

/* A rank's part of such a call in its small area: the blocks it sends
 * there, XCCL_LATENCY_V_BLOCK bytes at most (a gatherv sender's block, a
 * reduce's vector: at most that), after a directory of 4 bytes per rank
 * (scatter(v)'s root, alltoallv), which says where each block lies, or
 * that it is large; blocks XCCL_LATENCY_V_ALIGN bytes apart at least. */
#define XCCL_LATENCY_V_BLOCK ((size_t) 4096)
#define XCCL_LATENCY_V_ALIGN ((size_t) 16)
/* Blocks of alltoallv and scatterv from these sizes, in blocking calls
 * where the level reads its peers' memory (m->level_cma): the receiver
 * copies the block straight out of the sender's buffer (process_vm_readv)
 * instead of the executor's two copies through the slots; the sender's
 * directory entry holds where.  Below them the executor's pipeline was
 * as fast or faster.  Gatherv's blocks that do not fit, every one: its
 * sender writes the block straight into the root's receive buffer
 * (process_vm_writev), which was faster than the executor at every size
 * from 32 KiB (docs/bench/single-copy-v.md). */
#define XCCL_LATENCY_V_DIRECT_ALLTOALLV ((size_t) 4096)
#define XCCL_LATENCY_V_DIRECT_SCATTERV ((size_t) 16384)
#define XCCL_LATENCY_V_DIRECT_GATHERV ((size_t) 1)
/* Nonblocking calls of the v forms (requests, which have no executor
 * step): every block that does not fit goes by a single copy, and a
 * scatterv or alltoallv sender keeps room in its part for the addresses
 * of its blocks still to come, so that no block is ever large.
 * That room, XCCL_LATENCY_V_ALIGN bytes for each other rank, must fit
 * XCCL_LATENCY_V_BLOCK: at most XCCL_LATENCY_V_DIRECT_RANKS ranks (a
 * gatherv root's addresses, 8 bytes a rank, fit then too). */
#define XCCL_LATENCY_V_DIRECT_ALL ((size_t) 1)
#define XCCL_LATENCY_V_DIRECT_RANKS ((int) (XCCL_LATENCY_V_BLOCK / XCCL_LATENCY_V_ALIGN) + 1)
static inline size_t mca_coll_xccl_latency_v_dir(int n)
{
    return ((size_t) n * 4 + 15) / 16 * 16;
}
/* The ranks whose part fits XCCL_LATENCY_BYTES (three fit the small area). */
#define XCCL_LATENCY_V_RANKS ((int) ((XCCL_LATENCY_BYTES - XCCL_LATENCY_V_BLOCK) / 4))

/* Whether all of c fits, from what every rank knows (the v forms: always,
 * block by block): gather's and allgatherv's every block and reduce's
 * vector at most XCCL_LATENCY_V_BLOCK bytes, scatter's blocks all in the
 * root's part. */
static inline int mca_coll_xccl_latency_v_fits_args(xccl_coll_t coll, const xccl_coll_args_t *a, size_t bytes,
                                                    int size)
{
    const size_t most = XCCL_LATENCY_V_BLOCK, align = XCCL_LATENCY_V_ALIGN;
    switch (coll) {
    case XCCL_COLL_GATHER:
        return a->block <= most;
    case XCCL_COLL_SCATTER:
        return (size_t) (size - 1) * ((a->block + align - 1) / align * align) <= most;
    case XCCL_COLL_REDUCE:
        return bytes <= most;
    case XCCL_COLL_ALLGATHERV:
        for (int q = 0; q < size; q++) {
            if (a->vec[q] > most) {
                return 0;
            }
        }
        return 1;
    default:
        return 1;
    }
}
/* A call's state on this path: its numbers and units, sizes, buffers,
 * and where its steps stopped (a request runs them from progress). */
typedef struct {
    mca_coll_xccl_latency_t st;      /* the ring's numbers and units */
    size_t *vec;                     /* sizes and displacements in bytes (c->args.vec, or even blocks) */
    size_t *own;                     /* a request's even blocks (gather, scatter), owned */
    size_t part;                     /* the bytes of a rank's part of the call */
    int n, rank, root;               /* communicator ranks */
    int large;                       /* this rank sends or receives a large block */
    size_t direct;                   /* set before place: blocks from this size may be single copies (0: none;
                                      * XCCL_LATENCY_V_DIRECT_ALL: every block that does not fit) */
    int readers;                     /* this rank gave single copies: wait for their readers */
    int took;                        /* this rank read a block by a single copy */
    int given, k;                    /* step 2 done; the peers read in step 3 */
    int stepped;                     /* a request: its steps done, its flag posted (it waits for readers) */
    uint64_t ring;                   /* step 1: every peer's post this rank waits for; 0 none */
    const char *ws;                  /* the work buffers */
    char *wr;
    int in_place;
    size_t count, es;                /* reduce: elements, their size */
    xccl_reduce_fn_t kernel;
    const char *first;               /* reduce: rank 0's vector */
    uint32_t seq;                    /* a request's call number (its executor flag) */
} mca_coll_xccl_latency_v_t;

/* gather's and scatter's counts as gatherv's and scatterv's: n blocks of
 * block bytes in rank order (vec: 2n entries). */
static inline void mca_coll_xccl_latency_v_even(size_t *vec, int n, size_t block)
{
    for (int q = 0; q < n; q++) {
        vec[q] = block;
        vec[n + q] = (size_t) q * block;
    }
}

/* A call's fixed part (v->vec set: its sizes and displacements in bytes),
 * then its numbers and units, in call order: no earlier call of the level
 * may still run.  ws, wr the work buffers. */
void mca_coll_xccl_latency_v_place(mca_coll_xccl_latency_v_t *v, mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                   const xccl_coll_args_t *a, size_t es, xccl_reduce_fn_t kernel,
                                   const char *ws, char *wr);

/* Step 5, where this rank gave blocks by single copies (v->readers, its
 * steps done): whether each of their readers posted its executor flag of
 * the call seq, which it does after its step 3, where it read them (its
 * LATV_DONE, or the first post of its schedule); the buffer stays the
 * sender's to change once this is so.  Waits for them where wait says: 1,
 * 0 not yet (only without wait), -1 a reader's process is gone. */
int mca_coll_xccl_latency_v_readers_done(const mca_coll_xccl_latency_v_t *v, uint32_t seq, int wait);

/* The executor flag of a rank that ran no schedule in a call: it meets
 * every wait on that call's flags (values stay below UINT32_MAX). */
#define LATV_DONE (UINT32_MAX - 1)

/* What the steps of each collective (coll_xccl_latency_v.c) and this
 * unit share: */
typedef mca_coll_xccl_latency_v_t latv_t;

/* A directory entry: the block is large (the executor's); else where it
 * lies in the part, or with LATV_DIRECT where the part holds the block's
 * address in the sender's process (a single copy). */
#define LATV_LARGE UINT32_MAX
#define LATV_DIRECT ((uint32_t) 1 << 31)
/* The displacement give leaves for such a block: the entries of blocks of
 * 0 bytes are not written, so the directory alone may hold an earlier
 * call's. */
#define LATV_GAVE SIZE_MAX
#define LATV_ALIGN XCCL_LATENCY_V_ALIGN

static inline void latv_copy(void *dst, const void *src, size_t len)
{
    if (len <= 64) {
        xccl_copy_small(dst, src, len);
    } else {
        xccl_memmove(dst, src, len);
    }
}

/* Rank q's part of the call (a communicator rank): at the start of its
 * area (more than two ranks) or of the area of the pair layout
 * (coll_xccl_latency.c), as the six's calls. */
static inline unsigned char *latv_part_of(const latv_t *v, int q)
{
    const mca_coll_xccl_latency_t *st = &v->st;
    const int s = st->m->level->local_of[q];
    return st->m->level->small[st->pair ? s ^ st->flip : s] + st->at0;
}

/* Whether q posted this call, waiting for it where wait says: 1, 0 not
 * yet (only without wait), or -1 q is gone. */
static inline int latv_posted(latv_t *v, int q, int wait)
{
    return mca_coll_xccl_latency_wait(&v->st, v->st.m->level->local_of[q], v->st.f, wait);
}

/* Small blocks travel in the sender's latency line too (as the six's
 * bcast: XCCL_LATENCY_INLINE), where both ends know the block's place
 * there: a rank's own block (gather(v), allgatherv), or of two
 * ranks the one block for the other (scatter(v), alltoallv).  A reader
 * whose sender has not moved on then gets the post and the block in one
 * cache-line transfer instead of two or three; else it copies the block
 * from the sender's part, which the ring protects as before (figures:
 * docs/bench/latency-path.md). */
static inline int latv_inline_fits(size_t len)
{
    return len > 0 && len <= XCCL_LATENCY_INLINE;
}

static inline void latv_put_inline(latv_t *v, const void *src, size_t len)
{
    if (latv_inline_fits(len)) {
        mca_coll_xccl_latency_line_put(v->st.m->level->line[v->st.me], src, len, v->st.f);
    }
}

/* q's block of len bytes to dst from q's line, after q's post: 1, or 0
 * (copy it from q's part).  Where q was seen past this call already, its
 * line holds a later call's block: not read (a cache-line transfer from
 * the writer's core, in every call of a reader that runs behind). */
static inline int latv_get_inline(latv_t *v, int q, void *dst, size_t len)
{
    const struct mca_coll_xccl_level *h = v->st.m->level;
    const int s = h->local_of[q];
    return latv_inline_fits(len) && h->seen[s] == v->st.f &&
           mca_coll_xccl_latency_line_get(h->line[s], dst, len, v->st.f);
}

/* A block's address in the sender's process, where the part says so. */
static inline void latv_put_address(unsigned char *where, const void *block)
{
    const uint64_t addr = (uint64_t) (uintptr_t) block;
    memcpy(where, &addr, sizeof(addr));
}

/* Whether a gatherv sender's block of len bytes goes by a single copy
 * its sender writes into the root's receive buffer (coll_xccl_latency_v.c,
 * gatherv). */
static inline int latv_written(const latv_t *v, size_t len)
{
    return v->direct && len > v->part && len >= v->direct;
}

/* A sender's blocks (scatterv's root, alltoallv): each block for another
 * rank, in the order of the ranks after this one, into the part after its
 * directory while it fits (its entry: where), else its address there
 * where it goes by a single copy (its entry: where | LATV_DIRECT,
 * v->readers set, displs[r] then LATV_GAVE), else the entry says large
 * (v->large set); bytes[r] then 0 for the first two kinds. */
void mca_coll_xccl_latency_v_give(mca_coll_xccl_latency_v_t *v, const char *ws, size_t *bytes, size_t *displs);

/* A receiver's block of len bytes from q at dst, once q posted: copied
 * from q's part, or from q's buffer at the address in q's part (a single
 * copy), where q's directory says so (*len then 0), else left for the
 * executor (v->large set).  1, 0 q has not posted (only without wait), -1
 * q is gone, or -3 the single copy failed. */
int mca_coll_xccl_latency_v_take(mca_coll_xccl_latency_v_t *v, int q, char *dst, size_t *len, int wait);

END_C_DECLS

#endif /* MCA_COLL_XCCL_LATENCY_V_PART_H */
