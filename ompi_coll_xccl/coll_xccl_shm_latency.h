/*
 * The shared-memory level's latency path (coll_xccl_shm_latency.c): small
 * calls without the executor.
 */
#ifndef MCA_COLL_XCCL_SHM_LATENCY_H
#define MCA_COLL_XCCL_SHM_LATENCY_H

#include "coll_xccl_call.h"

BEGIN_C_DECLS

/* The latency path of the level (coll_xccl_shm_latency.c): a blocking call of any
 * of the five collectives on one node whose every rank writes at most
 * XCCL_SHM_LAT_BYTES (lat_len in coll_xccl_shm_latency.c), without the executor:
 * each rank copies its part into a small area (its own; of two ranks, the
 * one its peer wrote the last time), posts, and reads what it needs from
 * the areas its peers wrote.  Reductions need red.kernel.  On
 * ws and wr, the call's work buffers (coll_xccl_pack.c): MPI error codes. */
#define XCCL_SHM_LAT_BYTES 65536

/* Whether the latency path runs the small calls of the level's algorithm
 * algo: shm for every collective; for allreduce also shm_small (its
 * whole-vector form; shm is its sliced form). */
static inline int mca_coll_xccl_shm_lat_runs(xccl_coll_t coll, int algo)
{
    return algo == xccl_select_level_index(coll, XCCL_LEVEL_SHM) ||
           (XCCL_COLL_ALLREDUCE == coll && algo == xccl_select_level_index(coll, XCCL_LEVEL_SHM_SMALL));
}
/* Whether a call of coll with args, on a communicator whose level is
 * on, runs the latency path where the level's rule chose algo (the same
 * answer on every rank); red: a reduction's plan, NULL for the others. */
int mca_coll_xccl_shm_lat_wanted(const mca_coll_xccl_module_t *m, xccl_coll_t coll, int algo,
                                 const xccl_coll_args_t *args, size_t es,
                                 const mca_coll_xccl_reduce_t *red);

/* One call through the latency path: what mca_coll_xccl_shm_lat_begin
 * fixed (its numbers and units, the same on every rank) and how far it
 * went (mca_coll_xccl_shm_lat_run). */
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
                                      * area s ^ flip (coll_xccl_shm_latency.c) */
    int phase;                       /* 0 give, 1 read, 2 the sliced allreduce's second half */
    size_t k;                        /* bcast: the next piece to read */
    unsigned polls;                  /* waits (blocking: progress calls; a request: unmet
                                      * tests) since the last liveness check */
} mca_coll_xccl_lat_t;

/* Takes the call's numbers and units, in call order (no earlier call of
 * the level may still run: mca_coll_xccl_shm_lat_idle); args, es, red as
 * for mca_coll_xccl_shm_lat_wanted; ws, wr the work buffers
 * (coll_xccl_pack.c). */
void mca_coll_xccl_shm_lat_begin(mca_coll_xccl_lat_t *st, mca_coll_xccl_module_t *m,
                                 xccl_coll_t coll, const xccl_coll_args_t *args, size_t es,
                                 const mca_coll_xccl_reduce_t *red, const char *ws, char *wr,
                                 int algo);
/* Runs st as far as it can: 1 done, 0 waiting for a peer (only where
 * wait is 0: a nonblocking call, from progress), -1 a rank of the node is
 * gone (nothing logged). */
int mca_coll_xccl_shm_lat_run(mca_coll_xccl_lat_t *st, int wait);
/* Whether no nonblocking call of the level is in flight on m (its turns:
 * coll_xccl_shm.h): a blocking call of the latency path waits for that. */
static inline int mca_coll_xccl_shm_lat_idle(mca_coll_xccl_module_t *m)
{
    return __atomic_load_n(&m->shm_turn, __ATOMIC_ACQUIRE) == m->shm_ticket;
}
/* A blocking call: algo the level's algorithm (mca_coll_xccl_shm_lat_runs);
 * an allreduce of shm is sliced (every rank reduces one piece, posts again
 * and copies the others'), of shm_small whole (every rank reduces all, one
 * post). */
int mca_coll_xccl_shm_latency(mca_coll_xccl_call_t *c, const char *ws, char *wr, int algo);
/* A blocking bcast that mca_coll_xccl_short_host lets through, run here
 * when mca_coll_xccl_shm_latency_short would take it (contiguous, at most
 * XCCL_SHM_LAT_BYTES, not its size class's trials): 1 with its result in
 * *rc, else 0 (nothing done).  The entry's own short way, without
 * mca_coll_xccl_call_run's generic steps: in one process, blocks of 2000
 * calls alternating the two ways (np 2, the root changing every call),
 * 0.86-0.91 of the time at 8 and 64 bytes, 0.91-0.95 at 1 KiB, 0.97-1.03
 * at 4 KiB. */
int mca_coll_xccl_shm_lat_bcast(mca_coll_xccl_call_t *c, int *rc);
/* Whether c takes the latency path straight from the entry, where the
 * rest of the call path would take it too (m->shm_lat_colls, host
 * buffers, contiguous data, a reduction kernel): 1 with its work buffers
 * and the level's algorithm, or 0 (the call goes the whole way, and
 * decides the same there from the same shared facts). */
int mca_coll_xccl_shm_latency_short(mca_coll_xccl_call_t *c, const char **ws, char **wr,
                                    int *algo);

END_C_DECLS

#endif
