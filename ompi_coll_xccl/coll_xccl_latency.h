/*
 * The latency path of the shared-memory level (coll_xccl_latency.c): a
 * call of any of the five collectives on one node whose every rank writes
 * at most XCCL_LATENCY_BYTES, without the executor: each rank copies its
 * part into a small area of the node segment (its own; of two ranks, the
 * one its peer wrote the last time), posts, and reads what it needs from
 * the areas its peers wrote.  Blocking calls run it to the end; a
 * nonblocking one runs it from progress as a request, in its turn.
 */
#ifndef MCA_COLL_XCCL_LATENCY_H
#define MCA_COLL_XCCL_LATENCY_H

#include "coll_xccl_call.h"
#include "coll_xccl_level.h"

BEGIN_C_DECLS

#define XCCL_LATENCY_BYTES 65536

/* Bytes each rank writes in a call of coll with args on size ranks (es:
 * the bytes of an element of a reduction). */
static inline size_t mca_coll_xccl_latency_len(xccl_coll_t coll, const xccl_coll_args_t *a,
                                               size_t es, int size)
{
    size_t total = 0;
    switch (coll) {
    case XCCL_COLL_ALLREDUCE:
        return a->count * es;
    case XCCL_COLL_REDUCE_SCATTER:
    case XCCL_COLL_REDUCE_SCATTER_BLOCK:
        for (int j = 0; j < size; j++) {
            total += a->counts[j];
        }
        return total * es;
    case XCCL_COLL_ALLGATHER:
        return a->block;
    case XCCL_COLL_ALLTOALL:
        return a->block * (size_t) size;
    case XCCL_COLL_BCAST:
        return a->bytes;
    case XCCL_COLL_BARRIER:
        return 0;
    default:
        return SIZE_MAX;
    }
}

/* Whether the latency path runs the small calls of the level's algorithm
 * algo: shm for every collective; for allreduce also shm_small (its
 * whole-vector form; shm is its sliced form). */
static inline int mca_coll_xccl_latency_runs(xccl_coll_t coll, int algo)
{
    return (xccl_coll_level(coll) && algo == xccl_select_level_index(coll, XCCL_LEVEL_SHM)) ||
           (XCCL_COLL_ALLREDUCE == coll && algo == xccl_select_level_index(coll, XCCL_LEVEL_SHM_SMALL));
}
/* Whether a call of coll with args, on a communicator whose level is
 * on, runs the latency path where the level's rule chose algo (the same
 * answer on every rank); red: a reduction's plan, NULL for the others. */
static inline int mca_coll_xccl_latency_wanted(const mca_coll_xccl_module_t *m, xccl_coll_t coll, int algo,
                                               const xccl_coll_args_t *args, size_t es,
                                               const mca_coll_xccl_reduce_t *red)
{
    return m->level_small && mca_coll_xccl_latency_runs(coll, algo) && (NULL == red || NULL != red->kernel) &&
           mca_coll_xccl_latency_len(coll, args, es, m->size) <= XCCL_LATENCY_BYTES;
}

/* The plan of c's reduction for a fast way of the latency path, kept in
 * the level for the next call of the same datatype and op: 1 (c->red and
 * c->es set, a kernel of ours), or 0 (the whole way: its plan, or the
 * fallback's reason). */
static inline int mca_coll_xccl_latency_plan(mca_coll_xccl_call_t *c)
{
    struct mca_coll_xccl_level *h = c->m->level;
    if (c->rdtype != h->plan_dt || c->op != h->plan_op) {
        mca_coll_xccl_reduce_t red;
        size_t es = 1;
        if (NULL != mca_coll_xccl_plan_reduction(c->rdtype, c->op, c->total, &red, &es) || NULL == red.kernel) {
            return 0;
        }
        h->plan = red;
        h->plan_es = es;
        h->plan_dt = c->rdtype;
        h->plan_op = c->op;
    }
    c->red = h->plan;
    c->es = h->plan_es;
    return 1;
}

/* One call through the latency path: what mca_coll_xccl_latency_fix and
 * _begin fixed (its numbers and units, the same on every rank) and how
 * far it went (mca_coll_xccl_latency_run). */
typedef struct {
    mca_coll_xccl_module_t *m;
    xccl_coll_t coll;
    const char *ws;
    char *wr;
    xccl_reduce_fn_t kernel;
    size_t es;
    size_t len, piece, pieces, at0;  /* bytes each rank gives, bcast's pieces, its units' offset */
    size_t count, at;                /* reductions: elements of the result, their offset in ws (bytes) */
    size_t block;                    /* allgather, alltoall */
    uint64_t f, f2, last;            /* its numbers; the last call that wrote its units */
    int me, root, sliced;            /* segment ranks */
    int pair, flip;                  /* two ranks: the pair layout, and segment rank s writes
                                      * area s ^ flip (coll_xccl_latency.c) */
    int phase;                       /* 0 give, 1 read, 2 the sliced allreduce's second half */
    int wide;                        /* the v forms: a ring of the whole area where
                                      * LAT_RING_MIN would do (coll_xccl_latency_v.c) */
    size_t wrote;                    /* the v forms: the bytes this rank writes at the start
                                      * of its part (0: len), all the ring records */
    size_t k;                        /* bcast: the next piece to read */
    unsigned polls;                  /* waits (blocking: progress calls; a request: unmet
                                      * tests) since the last liveness check */
} mca_coll_xccl_latency_t;

/* The fixed part of a call (what its arguments say: the same in every
 * call of a persistent request's kept call, coll_xccl_request.h); args,
 * es, red as for mca_coll_xccl_latency_wanted; ws, wr the work buffers
 * (coll_xccl_pack.c); algo the level's algorithm. */
static inline void mca_coll_xccl_latency_fix(mca_coll_xccl_latency_t *st, mca_coll_xccl_module_t *m,
                                             xccl_coll_t coll, const xccl_coll_args_t *args, size_t es,
                                             const mca_coll_xccl_reduce_t *red, const char *ws, char *wr,
                                             int algo)
{
    const struct mca_coll_xccl_level *h = m->level;
    const int me = h->local_of[m->rank];
    *st = (mca_coll_xccl_latency_t) { .m = m, .coll = coll, .ws = ws, .wr = wr, .es = es,
                                      .len = mca_coll_xccl_latency_len(coll, args, es, m->size),
                                      .kernel = NULL != red ? red->kernel : NULL, .block = args->block,
                                      .me = me, .root = XCCL_COLL_BCAST == coll ? h->local_of[args->root] : me };
    /* the sliced allreduce (shm): every rank reduces a piece */
    st->sliced = XCCL_COLL_ALLREDUCE == coll && h->node_size > 1 &&
                 algo == xccl_select_level_index(coll, XCCL_LEVEL_SHM);
    /* allreduce: every element; reduce_scatter: this rank's block */
    if (XCCL_COLL_ALLREDUCE == coll) {
        st->count = args->count;
    } else if (XCCL_COLL_REDUCE_SCATTER == coll || XCCL_COLL_REDUCE_SCATTER_BLOCK == coll) {
        for (int j = 0; j < m->rank; j++) {
            st->at += args->counts[j];
        }
        st->count = args->counts[m->rank];
        st->at *= es;
    }
}
/* A call whose fixed part st holds (mca_coll_xccl_latency_fix): takes its
 * numbers and units, in call order (no earlier call of the level may
 * still run: mca_coll_xccl_latency_idle), then runs as
 * mca_coll_xccl_latency_run. */
int mca_coll_xccl_latency_begin(mca_coll_xccl_latency_t *st, unsigned tries);
/* Runs st as far as it gets in at most tries tests (a pause between two),
 * without waiting for a peer (a nonblocking call, from progress): 1 done,
 * 0 waiting for a peer, -1 a rank of the node is gone (nothing logged). */
int mca_coll_xccl_latency_run(mca_coll_xccl_latency_t *st, unsigned tries);
/* Whether no nonblocking call of the level is in flight on m (its
 * turns): a blocking call of the latency path waits for that. */
static inline int mca_coll_xccl_latency_idle(mca_coll_xccl_module_t *m)
{
    return __atomic_load_n(&m->level_turn, __ATOMIC_ACQUIRE) == m->level_ticket;
}
/* The ring and the waits of the v forms (coll_xccl_latency_v.c), whose
 * calls give no bytes every rank knows: _place takes st's numbers and
 * units as for any call (st->len the bytes every rank reserves; st->root
 * == st->me where this rank writes its units); _wait, whether segment
 * rank s (every peer where s < 0) posted f or later, waiting for it where
 * wait says (1, 0 not yet: only without wait, or -1 a rank is gone);
 * _post posts st->f. */
void mca_coll_xccl_latency_place(mca_coll_xccl_latency_t *st);
int mca_coll_xccl_latency_wait(mca_coll_xccl_latency_t *st, int s, uint64_t f, int wait);
void mca_coll_xccl_latency_post(mca_coll_xccl_latency_t *st);
/* A blocking call on its work buffers ws, wr (coll_xccl_pack.c): algo the
 * level's algorithm (mca_coll_xccl_latency_runs); an allreduce of shm is
 * sliced (every rank reduces one piece, posts again and copies the
 * others'), of shm_small whole (every rank reduces all, one post).
 * Reductions need red.kernel.  MPI error codes. */
int mca_coll_xccl_latency_call(mca_coll_xccl_call_t *c, const char *ws, char *wr, int algo);

END_C_DECLS

#endif
