/*
 * xccl algorithms, catalog: the algorithms of each collective by name and
 * the arguments their builders take.  Section of the algos API;
 * algos/xccl_algos.h includes every section.
 */
#ifndef XCCL_CATALOG_H
#define XCCL_CATALOG_H

#include <stddef.h>

#include "base/xccl_base.h"          /* xccl_coll_t */
#include "xccl_layout.h"
#include "xccl_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Catalog: the algorithms of each collective by name                       */
/* ------------------------------------------------------------------------ */

/* How a rank reaches its peers' buffers (xccl_coll_args_t.peer_access). */
enum { XCCL_PEER_NONE, XCCL_PEER_MAPPED, XCCL_PEER_COPY };

/* What a builder needs; each collective reads its own fields. */
typedef struct {
    size_t count;                  /* allreduce, reduce: elements */
    const size_t *counts;          /* reduce_scatter(_block): elements per rank */
    size_t block;                  /* allgather, alltoall, gather, scatter: bytes per rank */
    size_t bytes;                  /* bcast */
    int in_place, root;            /* root: bcast, reduce, gather(v), scatter(v) */
    const size_t *vec;             /* the v forms, bytes: allgatherv, gatherv, scatterv:
                                    * counts[size] then displacements[size] (gatherv,
                                    * scatterv: the root's; elsewhere only counts[rank]
                                    * is read); alltoallv: send counts, send
                                    * displacements, receive counts, receive
                                    * displacements, size each */
    size_t nvec;                   /* entries of vec */
    const xccl_layout_t *layout;   /* nodes of the ranks; NULL: no hierarchy */
    size_t segment;                /* ring allreduce pipelining segment, 0: none */
    int peer_access;               /* every rank reaches the others' buffers and flags
                                    * (xccl_peer_t): XCCL_PEER_MAPPED (reads them in place),
                                    * XCCL_PEER_COPY (copies from and to them, never maps
                                    * them: process_vm_readv / writev);
                                    * 0: the "mesh" algorithms do not apply */
    size_t shm_slot;               /* bytes of each rank's slot of its node's shared segment
                                    * (s->slot_cap); 0: none: the "shm" algorithms do not
                                    * apply and the two-level ones keep their intra-node
                                    * stages on the transport; else their intra-node
                                    * stages are the shm builders */
    int trial;                     /* selection only, no builder reads it: this call may
                                    * be one of a level trial's (blocking, peer_access,
                                    * at least 16 KiB: xccl_trial_t), XCCL_TRIAL_QUIET
                                    * or _NOISY; 0 (XCCL_TRIAL_OFF): not */
} xccl_coll_args_t;

typedef int (*xccl_coll_build_t)(xccl_sched_t *s, const xccl_coll_args_t *a);

typedef struct {
    const char *name;              /* as forced, in tuning files, after algo= */
    xccl_coll_build_t build;       /* 0, -1, or XCCL_NOT_APPLICABLE (hier on a flat layout,
                                    * mesh without peer access or on several nodes) */
} xccl_algo_t;

#define XCCL_CATALOG_MAX 14

/* The algorithms of c, its measured default first; *n of them. */
const xccl_algo_t *xccl_coll_algos(xccl_coll_t c, int *n);

#ifdef __cplusplus
}
#endif

#endif
