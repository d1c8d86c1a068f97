/*
 * xccl algorithms, two-level ("hier") schedule builders: stages inside
 * nodes and on rails, composed with xccl_sched_append.  Section of the
 * algos API; algos/xccl_algos.h includes every section.
 */
#ifndef XCCL_HIER_H
#define XCCL_HIER_H

#include <stddef.h>

#include "xccl_build.h"
#include "xccl_layout.h"
#include "xccl_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Two-level algorithms                                                     */
/* ------------------------------------------------------------------------ */

/* Two-level builders (s->algo "hier").  s is initialised for (rank, size of
 * the communicator); l describes the same size.  Same buffer conventions as
 * the flat builders.  Return 0, -1 (out of memory, bad argument, a stage
 * failed) or XCCL_NOT_APPLICABLE: this layout needs a flat algorithm; s is
 * untouched then.  Reductions: every element is reduced in one place, in one
 * order, then copied, so every rank gets the same bits.  (XCCL_NOT_APPLICABLE
 * is defined in xccl_build.h.) */

/* intra-node reduce-scatter of L = min ppn slices (local ranks >= L get
 * none) -> allreduce of slice j on rail j, all rails at once -> intra-node
 * allgather of the slices.  Any layout.  Unlike the flat allreduce builders
 * it must be told in_place (SEND and RECV are the same memory). */
int xccl_build_hier_allreduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int in_place,
                              xccl_reduce_scatter_build_fn intra_rs, xccl_allreduce_build_fn inter_ar,
                              xccl_allgatherv_build_fn intra_ag);
/* Blocks in communicator order (counts per rank, irregular).  Destination
 * ranks are grouped by local rank mod L (L = min ppn): intra-node
 * reduce-scatter of the groups -> reduce-scatter on rail j of group j's
 * blocks, per node -> on uneven nodes, rail ranks pass the blocks of the
 * ranks of local index >= L on.  Any layout. */
int xccl_build_hier_reduce_scatter(xccl_sched_t *s, const xccl_layout_t *l, const size_t *counts,
                                   int in_place, xccl_reduce_scatter_build_fn intra,
                                   xccl_reduce_scatter_build_fn inter);
/* Any layout, allgatherv on the rails and inside nodes.  Destination ranks
 * are grouped by local rank mod L (L = min ppn), local rank j < L carries
 * group j: on uneven nodes local ranks j+L, j+2L, ... first hand their block
 * to j -> allgatherv of group j on rail j -> intra-node allgatherv of the
 * groups -> blocks to communicator order. */
int xccl_build_hier_allgather_any(xccl_sched_t *s, const xccl_layout_t *l, size_t block,
                                  xccl_allgatherv_build_fn inter, xccl_allgatherv_build_fn intra);
/* intra-node alltoall regrouping by destination local rank -> alltoall on
 * each rail of everything for one destination node -> blocks to
 * communicator order.  Regular layouts only (else XCCL_NOT_APPLICABLE: use
 * xccl_build_hier_alltoall_any or a flat one).  The catalog prefers it on
 * regular layouts: with block placement the rail stage writes straight
 * into RECV, where the _any builder always copies the result once more,
 * and its stages are fixed-block alltoalls (flat Bruck needs no sizes). */
int xccl_build_hier_alltoall(xccl_sched_t *s, const xccl_layout_t *l, size_t block, int in_place,
                             xccl_alltoall_build_fn intra, xccl_alltoall_build_fn inter);
/* Any layout, alltoallv stages.  Destination ranks are grouped by local
 * rank mod L (L = min ppn), local rank j < L carries group j: intra-node
 * alltoallv of each rank's blocks for group j to local rank j -> alltoallv
 * on rail j, one message per node pair -> local rank j hands the ranks
 * j+L, j+2L, ... of its node their blocks (uneven nodes only). */
int xccl_build_hier_alltoall_any(xccl_sched_t *s, const xccl_layout_t *l, size_t block, int in_place,
                                 xccl_alltoallv_build_fn intra, xccl_alltoallv_build_fn inter);
/* root -> one rank per node (the root's rail, or the leader of a node too
 * small for it) -> inside each node.  Any layout. */
int xccl_build_hier_bcast(xccl_sched_t *s, const xccl_layout_t *l, size_t bytes, int root,
                          xccl_bcast_build_fn inter, xccl_bcast_build_fn intra);
/* Rail-parallel, for large messages: the root scatters L = min ppn pieces
 * inside its node -> piece j broadcast on rail j -> intra-node allgather of
 * the pieces.  Any layout. */
int xccl_build_hier_bcast_rails(xccl_sched_t *s, const xccl_layout_t *l, size_t bytes, int root,
                                xccl_bcast_build_fn inter, xccl_allgatherv_build_fn intra);
/* Rail-parallel reduce: intra-node reduce-scatter of L = min ppn slices
 * -> reduce of slice j on rail j to the rail's rank on the root's node
 * -> gather of the slices to the root inside its node.  Any layout, any
 * root; only the root's RECV is named.  Each element is reduced in an
 * order fixed by the layout and count: the same bits on every run. */
int xccl_build_hier_reduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int root, int in_place,
                           xccl_reduce_scatter_build_fn intra_rs, xccl_reduce_build_fn inter,
                           xccl_gatherv_build_fn intra_gv);
/* hier_allgather_any with a size per rank: rank i's rbytes[i] bytes go to
 * RECV + rdispls[i] (in_place: already there).  Staged in RECV itself when
 * the displacements pack the blocks in the rail-group order, else in
 * SCRATCH and copied out block by block (gaps never written).  Any
 * layout. */
int xccl_build_hier_allgatherv(xccl_sched_t *s, const xccl_layout_t *l, const size_t *rbytes,
                               const size_t *rdispls, int in_place, xccl_allgatherv_build_fn inter,
                               xccl_allgatherv_build_fn intra);

/* ------------------------------------------------------------------------ */
/* Pipelined two-level algorithms                                          */
/* ------------------------------------------------------------------------ */

/* The stages of hier_allreduce, hier_reduce_scatter and hier_allgather_any
 * on K chunks (at least chunk bytes each, at most max_chunks, at most one
 * per element or byte; allreduce: less than chunk where a slot has fewer
 * than four rounds, pipe_slot_chunk in pipe_util.h), overlapped: the intra-node stage of one chunk runs
 * beside the inter-node stage of another, in one step per round
 * (xccl_sched_zip; algos/pipe_util.h has the slots and why they cannot
 * deadlock).  The stages must be round-synchronous builders (ring, nhr,
 * Bruck: the two ends of every message at the same round) and not the
 * shared-memory level.  s->algo "pipeline".  Any layout; same buffer
 * conventions and results as the hier builders. */
int xccl_build_pipe_allreduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int in_place,
                              size_t chunk, int max_chunks, xccl_reduce_scatter_build_fn intra_rs,
                              xccl_allreduce_build_fn inter_ar, xccl_allgatherv_build_fn intra_ag);
/* reduce: as xccl_build_hier_reduce, pipelined; two nodes or more
 * (XCCL_NOT_APPLICABLE on one). */
int xccl_build_pipe_reduce(xccl_sched_t *s, const xccl_layout_t *l, size_t count, int root, int in_place,
                           size_t chunk, int max_chunks, xccl_reduce_scatter_build_fn intra_rs,
                           xccl_reduce_build_fn inter, xccl_gatherv_build_fn intra_gv);
int xccl_build_pipe_reduce_scatter(xccl_sched_t *s, const xccl_layout_t *l, const size_t *counts, int in_place,
                                   size_t chunk, int max_chunks, xccl_reduce_scatter_build_fn intra,
                                   xccl_reduce_scatter_build_fn inter);
int xccl_build_pipe_allgather(xccl_sched_t *s, const xccl_layout_t *l, size_t block, size_t chunk, int max_chunks,
                              xccl_allgatherv_build_fn inter, xccl_allgatherv_build_fn intra);
/* The catalog's: chunks of at least 2 MiB, at most 64 (xccl_simulate, 64
 * and 1024 ranks on nodes of 8: fewer, larger chunks lose to hier_hd's
 * latency below 4 MiB; smaller ones pay a slot's latency too often). */
#define XCCL_PIPE_CHUNK ((size_t) 2 << 20)
#define XCCL_PIPE_MAX_CHUNKS 64

#ifdef __cplusplus
}
#endif

#endif
