/*
 * Staging plans for collectives on device buffers when the transport can
 * only move host memory (Debian's UCX has no CUDA support).
 *
 * A collective on device buffers becomes a sequence of chunks.  Each chunk
 * is an independent host collective of the same kind on a pinned host
 * "slot": copy in (device -> slot input area), run the host collective
 * (slot input -> slot output), copy out (slot output -> device).  The
 * chunks split every rank's contribution the same way (element-aligned
 * pieces of each block), so the chunk collectives together are the
 * original one.  The engine (ompi_coll_xccl/coll_xccl_gpu.c) overlaps the
 * copies of some chunks with the transfers of others.
 *
 * Pure C: no CUDA, no MPI; test/unit/test_stage.c checks every plan by
 * running it with memcpy and host references.
 */
#ifndef XCCL_STAGE_H
#define XCCL_STAGE_H

#include <stddef.h>

#include "xccl_algos.h"

/* A 2-D copy between the user's buffer and the slot: rows of width bytes,
 * upitch apart in the user buffer from uoff, spitch apart in the slot from
 * soff.  Copy in reads the user's input buffer (SEND, or RECV in place),
 * copy out writes RECV. */
typedef struct {
    size_t uoff, upitch;
    size_t soff, spitch;
    size_t width, rows;
} xccl_stage_copy_t;

typedef struct {
    /* The host collective: count (allreduce: elements; allgather,
     * alltoall: block bytes; bcast: bytes) or counts (reduce_scatter: one
     * element count per rank).  Its SEND is the slot at 0, its RECV the
     * slot at recv_off; bcast has no SEND. */
    size_t count;
    size_t *counts;
    size_t recv_off;
    size_t slot_bytes;              /* this chunk's part of the slot */
    int nin, nout;
    xccl_stage_copy_t *in, *out;
} xccl_stage_chunk_t;

typedef struct {
    xccl_coll_t coll;
    int rank, size;
    size_t es;                      /* element size (1 for allgather, alltoall, bcast) */
    size_t count;                   /* allreduce: elements; bcast: bytes */
    const size_t *counts;           /* reduce_scatter(_block): elements per rank */
    size_t block;                   /* allgather, alltoall: bytes per rank */
    int root;                       /* bcast */
    int in_place;
    size_t chunk_bytes;             /* target data per chunk (> 0) */
} xccl_stage_args_t;

typedef struct {
    int nchunks;
    size_t slot_bytes;              /* the largest chunk's slot */
    xccl_stage_chunk_t *chunks;
    void *storage;                  /* one allocation behind chunks, copies, counts */
} xccl_stage_plan_t;

/* Same plan on every rank for the same arguments (but its own copies).
 * Returns 0 or -1 (out of memory). */
int xccl_stage_plan(xccl_stage_plan_t *p, const xccl_stage_args_t *a);
void xccl_stage_plan_fini(xccl_stage_plan_t *p);

#endif
