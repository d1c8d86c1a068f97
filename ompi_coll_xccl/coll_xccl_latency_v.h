/*
 * The latency path of the v forms (gatherv, scatterv, alltoallv;
 * coll_xccl_latency_v.c): their blocking calls on one node move the
 * blocks that fit a rank's part of XCCL_LATENCY_V_BLOCK bytes through the
 * latency path's lines and small areas, without the executor, and the
 * others, where a call has any, through the level's executor schedule of
 * those blocks alone.  Whether a block goes which way is known to both of
 * its ends (gatherv: its size; scatterv, alltoallv: the sender's word,
 * which its receiver reads with the block), so no rank needs to know
 * another's sizes and no round of agreement is run: every rank starts
 * every such call here.  Gather, scatter, reduce and allgatherv, whose
 * sizes every rank knows, come here where all of a call fits
 * (mca_coll_xccl_latency_v_fits), also below the small-message size,
 * where they would otherwise go to the fallback.
 */
#ifndef MCA_COLL_XCCL_LATENCY_V_H
#define MCA_COLL_XCCL_LATENCY_V_H

#include "coll_xccl_call.h"
#include "coll_xccl_latency.h"
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

/* The collectives that come here. */
static inline int mca_coll_xccl_latency_v_coll(xccl_coll_t coll)
{
    return xccl_coll_sizes_local(coll) || XCCL_COLL_GATHER == coll || XCCL_COLL_SCATTER == coll ||
           XCCL_COLL_REDUCE == coll || XCCL_COLL_ALLGATHERV == coll;
}

/* Gather and scatter where the level reads its peers' memory
 * (m->level_cma, alike on every rank) may come here at any size, as
 * gatherv and scatterv of even blocks, each block past the room by a
 * single copy (never large): a blocking call whose algorithm is the mesh
 * (the level's trials against shm, or forced), which this form of single
 * copies (every gather sender writes its own block, every scatter
 * receiver reads its own) runs instead of the mesh's schedule (the root
 * copying every block); and every nonblocking call, which has no trials
 * (docs/bench/single-copy-v.md). */
static inline int mca_coll_xccl_latency_v_even_direct(const mca_coll_xccl_module_t *m, xccl_coll_t coll)
{
    return (XCCL_COLL_GATHER == coll || XCCL_COLL_SCATTER == coll) && m->level_cma &&
           m->size <= XCCL_LATENCY_V_DIRECT_RANKS;
}

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
static inline int mca_coll_xccl_latency_v_fits(const mca_coll_xccl_call_t *c)
{
    return mca_coll_xccl_latency_v_fits_args(c->coll, &c->args, c->bytes, c->m->size);
}

/* Whether decide (coll_xccl_decide.c) keeps from the fallback a call
 * that the policy hands it as not faster below the small-message size:
 * one that comes here, blocking (the level's small calls on; the vote
 * settled first, as for the six's small calls) or nonblocking (a request
 * of this path, m->level_small_nb, as the six's; where the vote turns the
 * level off, the executor's schedule), persistent ones alike (their
 * starts take this path's requests on both of their ways:
 * mca_coll_xccl_latency_v_nb_runs). */
static inline int mca_coll_xccl_latency_v_small(const mca_coll_xccl_call_t *c)
{
    return (NULL == c->request ? c->m->level_small : c->m->level_small_nb) &&
           mca_coll_xccl_latency_v_coll(c->coll) && mca_coll_xccl_latency_v_fits(c);
}

/* Whether a call c whose schedule would be algo goes here (from what
 * every rank shares: blocking, the level on with its small calls, the
 * level's algorithm and what fits, or gather's and scatter's mesh
 * (mca_coll_xccl_latency_v_even_direct); a reduction with a kernel of
 * ours). */
static inline int mca_coll_xccl_latency_v_wanted(const mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                                 int algo)
{
    return NULL == c->request && mca_coll_xccl_latency_v_coll(c->coll) && m->level_small &&
           c->args.shm_slot > 0 && m->size >= 2 && m->size <= XCCL_LATENCY_V_RANKS &&
           ((algo == xccl_select_level_index(c->coll, XCCL_LEVEL_SHM) && mca_coll_xccl_latency_v_fits(c)) ||
            (algo == xccl_select_level_index(c->coll, XCCL_LEVEL_MESH) &&
             mca_coll_xccl_latency_v_even_direct(m, c->coll))) &&
           (!c->reduction || NULL != c->red.kernel);
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

/* Step 5, where this rank gave blocks by single copies (v->readers, its
 * steps done): whether each of their readers posted its executor flag of
 * the call seq, which it does after its step 3, where it read them (its
 * LATV_DONE, or the first post of its schedule); the buffer stays the
 * sender's to change once this is so.  Waits for them where wait says: 1,
 * 0 not yet (only without wait), -1 a reader's process is gone. */
int mca_coll_xccl_latency_v_readers_done(const mca_coll_xccl_latency_v_t *v, uint32_t seq, int wait);

/* The MPI error (logged) of a call of the latency paths that failed with
 * rc: -2 out of memory, -3 a single copy failed, else a rank is gone. */
static inline int mca_coll_xccl_latency_failed(mca_coll_xccl_module_t *m, xccl_coll_t coll, int rc)
{
    return -2 == rc   ? mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for the counts")
           : -3 == rc ? mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "a single copy from a peer's buffer failed")
                      : mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "a rank of this node is gone");
}

/* The executor flag of a rank that ran no schedule in a call: it meets
 * every wait on that call's flags (values stay below UINT32_MAX). */
#define LATV_DONE (UINT32_MAX - 1)

/* A call's fixed part (v->vec set: its sizes and displacements in bytes),
 * then its numbers and units, in call order: no earlier call of the level
 * may still run.  ws, wr the work buffers. */
void mca_coll_xccl_latency_v_place(mca_coll_xccl_latency_v_t *v, mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                   const xccl_coll_args_t *a, size_t es, xccl_reduce_fn_t kernel,
                                   const char *ws, char *wr);
/* Its steps 1 to 3 (coll_xccl_latency_v.c), as far as they get: 1 done, 0
 * a peer has not posted yet (only without wait), -1 a rank is gone, -3 a
 * single copy failed; where
 * this rank has a large block, v->large (step 4, the executor's, is the
 * caller's). */
int mca_coll_xccl_latency_v_steps(mca_coll_xccl_latency_v_t *v, int wait);

/* Whether a nonblocking call c whose schedule would be algo runs here as
 * a request, from what every rank knows: gather, scatter, reduce and
 * allgatherv where all of the call fits, as the blocking rule; gatherv,
 * scatterv and alltoallv where the level reads its peers' memory
 * (m->level_cma), every block that does not fit by a single copy
 * (XCCL_LATENCY_V_DIRECT_ALL), else they keep the executor's schedule,
 * where a rank may have a large block.  A persistent request's starts
 * alike: the road (this path) and the kept way (coll_xccl_persist_start.c,
 * mca_coll_xccl_call_level_plan's latency_v) may both run the starts of
 * one request, on different ranks, and take the same call numbers and
 * turns.  _runs: the rule on a request's copy of the arguments (a request
 * made before the set-up decides once it is over, coll_xccl_request.c, as
 * the path would have). */
static inline int mca_coll_xccl_latency_v_nb_runs(const mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                                  const xccl_coll_args_t *a, size_t bytes, int algo,
                                                  const mca_coll_xccl_reduce_t *red)
{
    return mca_coll_xccl_latency_v_coll(coll) &&
           (!xccl_coll_sizes_local(coll) ||
            (m->level_cma && m->size <= XCCL_LATENCY_V_DIRECT_RANKS)) &&
           m->level_small_nb && a->shm_slot > 0 && m->size >= 2 && m->size <= XCCL_LATENCY_V_RANKS &&
           algo == xccl_select_level_index(coll, XCCL_LEVEL_SHM) &&
           (mca_coll_xccl_latency_v_fits_args(coll, a, bytes, m->size) ||
            mca_coll_xccl_latency_v_even_direct(m, coll)) &&
           (NULL == red || NULL != red->kernel);
}
static inline int mca_coll_xccl_latency_v_nb_wanted(const mca_coll_xccl_module_t *m,
                                                    const mca_coll_xccl_call_t *c, int algo)
{
    return NULL != c->request && mca_coll_xccl_latency_v_nb_runs(m, c->coll, &c->args, c->bytes, algo,
                                                                c->reduction ? &c->red : NULL);
}

/* A request's call (mca_coll_xccl_latency_v_nb_wanted) in its turn: takes
 * its numbers and units (no earlier call of the level may still run),
 * then runs as _run; seq its call number.  a, ws, wr stay until it ends.
 * Gather's and scatter's even blocks: a->vec where it is set (a kept
 * call's, made once: mca_coll_xccl_kept_v), else made here. */
int mca_coll_xccl_latency_v_begin(mca_coll_xccl_latency_v_t *v, mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                  const xccl_coll_args_t *a, size_t es, xccl_reduce_fn_t kernel,
                                  const char *ws, char *wr, uint32_t seq, unsigned tries);
/* Runs v as far as it gets in at most tries tests, without waiting for a
 * peer: 1 done (where this rank gave single copies, their readers are
 * done too), 0 waiting for a peer, -1 a rank of the node is gone, -2
 * (_begin) out of memory, -3 a single copy failed; nothing logged. */
int mca_coll_xccl_latency_v_run(mca_coll_xccl_latency_v_t *v, unsigned tries);

END_C_DECLS

#endif
