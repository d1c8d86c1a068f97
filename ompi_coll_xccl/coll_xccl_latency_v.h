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
#include "coll_xccl_latency_v_part.h"

BEGIN_C_DECLS

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

/* Whether all of c fits (mca_coll_xccl_latency_v_fits_args). */
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

/* The MPI error (logged) of a call of the latency paths that failed with
 * rc: -2 out of memory, -3 a single copy failed, else a rank is gone. */
static inline int mca_coll_xccl_latency_failed(mca_coll_xccl_module_t *m, xccl_coll_t coll, int rc)
{
    return -2 == rc   ? mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for the counts")
           : -3 == rc ? mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "a single copy from a peer's buffer failed")
                      : mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, "a rank of this node is gone");
}

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
