/*
 * The shared-memory level's latency path (coll_xccl_shm_latency.c): small
 * blocking calls without the executor.
 */
#ifndef MCA_COLL_XCCL_SHM_LATENCY_H
#define MCA_COLL_XCCL_SHM_LATENCY_H

#include "coll_xccl_call.h"

BEGIN_C_DECLS

/* The latency path of the level (coll_xccl_shm_latency.c): a blocking call of any
 * of the five collectives on one node whose every rank writes at most
 * XCCL_SHM_LAT_BYTES (mca_coll_xccl_shm_lat_bytes), without the executor:
 * each rank copies its part into its own small area, posts, and reads
 * what it needs from the peers' areas.  Reductions need red.kernel.  On
 * ws and wr, the call's work buffers (coll_xccl_pack.c): MPI error codes. */
#define XCCL_SHM_LAT_BYTES 65536

/* Bytes each rank writes for c (the same on every rank), once its
 * reduction is planned. */
size_t mca_coll_xccl_shm_lat_bytes(const mca_coll_xccl_call_t *c);
/* Whether the latency path runs the small calls of the level's algorithm
 * algo: shm for every collective; for allreduce also shm_small (its
 * whole-vector form; shm is its sliced form). */
static inline int mca_coll_xccl_shm_lat_runs(xccl_coll_t coll, int algo)
{
    return algo == xccl_select_level_index(coll, XCCL_LEVEL_SHM) ||
           (XCCL_COLL_ALLREDUCE == coll && algo == xccl_select_level_index(coll, XCCL_LEVEL_SHM_SMALL));
}
/* algo: the level's algorithm (mca_coll_xccl_shm_lat_runs); an allreduce
 * of shm is sliced (every rank reduces one piece, posts again and copies
 * the others'), of shm_small whole (every rank reduces all, one post). */
int mca_coll_xccl_shm_latency(mca_coll_xccl_call_t *c, const char *ws, char *wr, int algo);
/* The latency path straight from the entry, where the rest of the call
 * path would take it too (m->shm_lat_colls, host buffers, contiguous data,
 * a reduction kernel): 1 and *rc, or 0 (the call goes the whole way, and
 * decides the same there from the same shared facts). */
int mca_coll_xccl_shm_latency_try(mca_coll_xccl_call_t *c, int *rc);

END_C_DECLS

#endif
