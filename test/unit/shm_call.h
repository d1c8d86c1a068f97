/*
 * One collective call of a forked rank (shm_ranks.h) on the node segment,
 * for test_shm_exec: the shm builders, or the mesh builders in "mirror"
 * mode (every rank's SEND / RECV / SCRATCH in its slot, copied in and out
 * around the call) or over cross-memory attach; planted bugs on the ranks
 * they concern.
 */
#ifndef XCCL_TEST_SHM_CALL_H
#define XCCL_TEST_SHM_CALL_H

#include "shm_ranks.h"

typedef enum { C_AR, C_AR_SMALL, C_RS, C_AG, C_A2A, C_BC, NC } coll_t;
extern const char *const coll_names[NC];

enum { USE_SHM, USE_MESH_MIRROR, USE_MESH_CMA };

/* Element kinds of the reductions. */
enum { EK_I32, EK_FLT };

typedef struct {
    coll_t coll;
    int mesh;                  /* USE_*: the shm builder, or the mesh builder in mirror mode or over CMA */
    size_t n;                  /* elements (reductions), bytes per block (allgather, alltoall), bytes (bcast) */
    int in_place, root, ek;
    unsigned call;             /* the call's number: its inputs and its seq */
} call_t;

/* Planted bugs: the entry barrier removed, flags tested without their
 * sequence number (a flag of the previous call satisfies a wait), the
 * post moved before the copy into the slot (on the slow rank, whose
 * copies into its slot are slow). */
typedef enum { BUG_NONE, BUG_NO_ENTRY_WAIT, BUG_SEQLESS, BUG_POST_BEFORE_COPY } bug_t;

/* Rank r runs call k on seg, with bug planted on the ranks it concerns.
 * slow: this rank starts late (and copies slowly into its slot for
 * BUG_POST_BEFORE_COPY).  0 ok, 1 failed (message in c). */
int run_call(ctl_t *c, xccl_segment_t *seg, int r, int p, const call_t *k, bug_t bug, int slow);

#endif
