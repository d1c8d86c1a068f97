/*
 * xccl algorithms, flat schedule builders: one function per algorithm,
 * their buffer conventions, and the builder function types the two-level
 * builders take as stages.  Section of the algos API; algos/xccl_algos.h
 * includes every section.
 */
#ifndef XCCL_BUILD_H
#define XCCL_BUILD_H

#include <stddef.h>

#include "xccl_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Algorithms (schedule builders).  Each returns 0 or -1 (out of memory).   */
/* Buffer conventions:                                                      */
/*   allreduce:      SEND count elements in, RECV count elements out.       */
/*                   In place: SEND and RECV are the same memory.           */
/*   reduce_scatter: SEND sum(counts) elements in, RECV counts[rank] out.   */
/*                   in_place: the input is RECV itself (SEND == RECV).     */
/*   allgather:      SEND block bytes, RECV size*block.  In place: SEND is  */
/*                   RECV + rank*block.                                     */
/*   alltoall:       SEND size*block, RECV size*block.  in_place: SEND is   */
/*                   RECV; blocks are exchanged through scratch.            */
/*   bcast:          RECV holds bytes; the root's data is sent.             */
/* ------------------------------------------------------------------------ */

int xccl_build_allreduce_ring(xccl_sched_t *s, size_t count);
/* The same with the reduce-scatter phase cut into segments of seg bytes
 * (0: none), each received and reduced in its own step. */
int xccl_build_allreduce_ring_segmented(xccl_sched_t *s, size_t count, size_t seg);
int xccl_build_reduce_scatter_ring(xccl_sched_t *s, const size_t *counts, int in_place);
int xccl_build_allgather_ring(xccl_sched_t *s, size_t block);
int xccl_build_alltoall_pairwise(xccl_sched_t *s, size_t block, int in_place);
int xccl_build_bcast_binomial(xccl_sched_t *s, size_t bytes, int root);

/* More algorithms; same buffer conventions.  Names in comments
 * are the values of s->algo (and of the force parameters). */
/* "recursive_doubling": lg p steps exchanging the whole vector; non-powers
 * of two fold the extra ranks in and out. */
int xccl_build_allreduce_recursive_doubling(xccl_sched_t *s, size_t count);
/* "rabenseifner": recursive-halving reduce-scatter + recursive-doubling
 * allgather, extra ranks folded in and out. */
int xccl_build_allreduce_rabenseifner(xccl_sched_t *s, size_t count);
/* "swing": Swing (Sensi et al., NSDI 2024), bandwidth-optimal form: peer at
 * step k is r +/- rho(k), rho(k) = sum_{i<=k} (-2)^i. */
int xccl_build_allreduce_swing(xccl_sched_t *s, size_t count);
/* "dbt": NCCL's double binary tree: two complementary binary
 * trees (every leaf of one is an inner node or the root of the other),
 * each reducing then broadcasting half of the vector (tree 0 the first
 * (count + 1) / 2 elements, tree 1 the rest), pipelined in chunks of at
 * least chunk bytes (0: one chunk), at most XCCL_DBT_MAX_CHUNKS per tree:
 * C + 2 ceil(lg p) - 1 steps.  Each tree reduces in rank order with its own
 * parenthesisation: (lower child's subtree op own) op higher child's. */
#define XCCL_DBT_MAX_CHUNKS 64
int xccl_build_allreduce_dbt(xccl_sched_t *s, size_t count, size_t chunk);
/* "nhr": nonuniform halving on a ring (after HCCL's NHR): a
 * reduce-scatter and an allgather of ceil(lg p) steps each for any p, no
 * fold, (p-1)/p n bytes sent per phase; rank r sends to r + ceil(m/2) and
 * receives from r - ceil(m/2) while its window of m blocks halves.
 * SCRATCH: the vector rotated plus half of it. */
int xccl_build_allreduce_nhr(xccl_sched_t *s, size_t count);
/* "nhr" reduce_scatter: its reduce-scatter phase over the blocks of
 * counts[] (irregular, zeros included), block r then copied to RECV. */
int xccl_build_reduce_scatter_nhr(xccl_sched_t *s, const size_t *counts, int in_place);
/* "nhr" allgather: its allgather phase, ceil(lg p) steps for any p, the
 * windows doubling to p. */
int xccl_build_allgather_nhr(xccl_sched_t *s, size_t block);
/* "nb": nonuniform Bruck (after HCCL's NB), nhr's mirror: a
 * reduce-scatter whose stride doubles (1, 2, 4, ...) while the data
 * halves, then the allgather back; ceil(lg p) steps each for any p, no
 * fold, (p-1)/p n bytes sent per phase; the most bytes go to the nearest
 * peers.  SCRATCH: the vector (in bit-reversed block order) plus half. */
int xccl_build_allreduce_nb(xccl_sched_t *s, size_t count);
/* "nb" reduce_scatter and allgather: its two phases alone (the blocks of
 * counts[]; blocks of block bytes). */
int xccl_build_reduce_scatter_nb(xccl_sched_t *s, const size_t *counts, int in_place);
int xccl_build_allgather_nb(xccl_sched_t *s, size_t block);
/* bcast "nhr" and "nb" (as HCCL uses them for bcast): the root's
 * p blocks scattered by uneven halves in ceil(lg p) rounds, then nhr's or
 * nb's allgather: 2 ceil(lg p) a + 2((p-1)/p) nb for any p (nb: one round
 * of local copies more).  The root's buffer is rewritten with its own
 * bytes by the allgather. */
int xccl_build_bcast_nhr(xccl_sched_t *s, size_t bytes, int root);
int xccl_build_bcast_nb(xccl_sched_t *s, size_t bytes, int root);
/* The links of rank in tree 0 or 1 of p ranks: parent (-1: the root), and
 * child[0] < rank < child[1] (-1: none). */
void xccl_dbt_tree(int p, int tree, int rank, int *parent, int child[2]);
/* "recursive_halving" and "pairwise" reduce_scatter (irregular counts). */
int xccl_build_reduce_scatter_recursive_halving(xccl_sched_t *s, const size_t *counts, int in_place);
int xccl_build_reduce_scatter_pairwise(xccl_sched_t *s, const size_t *counts, int in_place);
/* "recursive_doubling" and "bruck" allgather. */
int xccl_build_allgather_recursive_doubling(xccl_sched_t *s, size_t block);
int xccl_build_allgather_bruck(xccl_sched_t *s, size_t block);
/* "bruck" alltoall (small blocks) and "linear": every pair at once, at
 * most max_inflight sends and receives posted per step (0: no bound). */
int xccl_build_alltoall_bruck(xccl_sched_t *s, size_t block, int in_place);
int xccl_build_alltoall_linear(xccl_sched_t *s, size_t block, int in_place, int max_inflight);
/* "scatter_allgather": binomial scatter + ring allgather; "chain": a
 * pipelined chain root -> root+1 -> ... in segments of seg bytes. */
int xccl_build_bcast_scatter_allgather(xccl_sched_t *s, size_t bytes, int root);
int xccl_build_bcast_chain(xccl_sched_t *s, size_t bytes, int root, size_t seg);

/* Peer-access ("mesh") algorithms: every rank reads (and reduces) straight
 * from the others' buffers, as the CUDA IPC collectives do; only for ranks
 * of one node with peer access (xccl_peer_t).  Flag barriers separate the
 * phases: on entry (the peers' inputs are there to read), between phases
 * (what a rank reads next has been written) and on exit (nobody leaves, and
 * lets its buffers be reused, while another still reads them).  Same buffer
 * conventions as above; s->algo is "mesh". */
/* Every rank copies each peer's block from the peer's SEND (in place that
 * is the peer's RECV + q * block, as for every allgather builder). */
int xccl_build_allgather_mesh(xccl_sched_t *s, size_t block);
/* Every rank reads its block from every peer's SEND; in place through
 * scratch (size * block), written back once every peer has read. */
int xccl_build_alltoall_mesh(xccl_sched_t *s, size_t block, int in_place);
/* Every rank copies the root's RECV. */
int xccl_build_bcast_mesh(xccl_sched_t *s, size_t bytes, int root);
/* The same where the peers' buffers are copied (XCCL_PEER_COPY), the root
 * writing part k of p into the RECV of the k-th rank after it, which reads
 * the other parts: each side copies (p - 1) / p of the message. */
int xccl_build_bcast_mesh_split(xccl_sched_t *s, size_t bytes, int root);
/* Rank j reduces slice j (chunk j of count over size) over every rank's
 * input in rank order 0..P-1, ((x0 op x1) op x2) ..., into its RECV; the
 * others then copy it from there.  Every rank gets the same bits.  in_place
 * must be said (SEND and RECV the same memory): the partial sums go
 * through scratch then. */
int xccl_build_allreduce_mesh(xccl_sched_t *s, size_t count, int in_place);
/* The same where the peers' buffers can only be copied from
 * (XCCL_PEER_COPY: process_vm_readv), not reduced from: each peer operand
 * comes into SCRATCH in pieces of `piece` bytes (rounded to elements)
 * first, and the piece is reduced there while it is in cache. */
int xccl_build_allreduce_mesh_read(xccl_sched_t *s, size_t count, int in_place, size_t piece);
/* Rank j reduces its block over every rank's input, in rank order. */
int xccl_build_reduce_scatter_mesh(xccl_sched_t *s, const size_t *counts, int in_place);
/* The same where the peers' buffers can only be copied from, as
 * xccl_build_allreduce_mesh_read. */
int xccl_build_reduce_scatter_mesh_read(xccl_sched_t *s, const size_t *counts, int in_place, size_t piece);

/* One rank does the whole collective on every rank's buffers ("leader",
 * mesh_leader.c): for ranks that share one device.  Peer access with
 * mapped buffers that the leader also writes; s->algo is "leader".
 * reduce_scatter and alltoall in place: XCCL_NOT_APPLICABLE. */
int xccl_build_allreduce_leader(xccl_sched_t *s, size_t count);
int xccl_build_reduce_scatter_leader(xccl_sched_t *s, const size_t *counts, int in_place);
/* reduce_scatter's leader folds the whole vector in its scratch, then
 * copies the blocks out, where p > 2 and the vector is at most fold_max
 * bytes (else block by block).  The default, (p - 2) MiB: a GPU launch
 * saved per block against two extra passes over the vector, below the
 * break-even of a launch's time against the passes' (figures:
 * docs/bench/select-figures.md). */
#define XCCL_LEADER_FOLD_MAX(p) ((p) > 2 ? (size_t) ((p) - 2) << 20 : 0)
int xccl_build_reduce_scatter_leader_at(xccl_sched_t *s, const size_t *counts, int in_place,
                                        size_t fold_max);
int xccl_build_allgather_leader(xccl_sched_t *s, size_t block);
int xccl_build_alltoall_leader(xccl_sched_t *s, size_t block, int in_place);
int xccl_build_bcast_leader(xccl_sched_t *s, size_t bytes, int root);

/* Shared-memory ("shm") algorithms: the mesh algorithms for ranks of one
 * node that reach each other only through the node's shared segment
 * (peer access through the node segment): every rank copies what its peers need into its own slot
 * (XCCL_BUF_SLOT) and reads theirs, so SEND and RECV are the caller's
 * own buffers and nothing is copied around the schedule.  The caller sets
 * s->slot_cap (the slot's size) before building; a message larger than
 * the slot goes through it in chunks, pipelined (a slot of 2 or 3 buffers,
 * one flag barrier per chunk; algos/shm_util.h).  No sends or receives.
 * Same buffer conventions as above; -1 also when the slot is too small:
 * allreduce 3 elements ("shm") or 2 ("shm_small"), reduce_scatter 2 p
 * elements, alltoall 2 p bytes, allgather and bcast 2 bytes.  Reductions
 * run in rank order on every element, as the mesh's: every rank gets the
 * same bits. */
/* "shm": per chunk copy in -> rank j reduces slice j over every slot ->
 * every rank copies the slices out of their owners' slots (large
 * messages: n/p reduced per rank).  In place needs no flag (SEND is read
 * only by the copy in). */
int xccl_build_allreduce_shm(xccl_sched_t *s, size_t count);
/* Its slice j of n elements of es bytes among p ranks: the count, the
 * first element in *first.  Slices start on 64-byte lines where es
 * divides 64 (the reductions stream aligned data); the last may be short
 * or empty.  The component's latency path slices the same way. */
size_t xccl_build_shm_slice(size_t n, int p, size_t es, int j, size_t *first);
/* "shm_small": per chunk copy in -> every rank reduces the whole chunk
 * over every slot into RECV (latency: two barriers for one chunk; up to
 * 256 bytes in a slot of 4 KiB or more one barrier: two regions of the
 * slot used on alternate calls, slot_flip, instead of an exit barrier). */
int xccl_build_allreduce_shm_small(xccl_sched_t *s, size_t count);
/* "shm": rank j reduces piece after piece of its block over every slot. */
int xccl_build_reduce_scatter_shm(xccl_sched_t *s, const size_t *counts, int in_place);
/* "shm": each rank's block through its slot to every other rank.  The
 * builders named *_whole (and allgather_shm) make whole schedules, which
 * move through the regions of the slot from call to call (slot_alt);
 * the others are stages that a two-level schedule appends. */
int xccl_build_allgather_shm(xccl_sched_t *s, size_t block);
int xccl_build_allgatherv_shm(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);
/* "shm": the blocks for every peer through the sender's slot. */
int xccl_build_alltoall_shm(xccl_sched_t *s, size_t block, int in_place);
int xccl_build_alltoall_shm_whole(xccl_sched_t *s, size_t block, int in_place);
/* "shm": the root's data through its slot; only the root waits for all. */
int xccl_build_bcast_shm(xccl_sched_t *s, size_t bytes, int root);
int xccl_build_bcast_shm_whole(xccl_sched_t *s, size_t bytes, int root);

/* A builder, or a catalog entry (xccl_algo_t), that does not fit its
 * arguments returns this: a two-level builder on a layout that needs a
 * flat algorithm (xccl_hier.h), a mesh without peer access.  s is
 * untouched then. */
#define XCCL_NOT_APPLICABLE 1

/* Flat builders as values, so that a two-level builder takes the algorithm
 * of each stage as a parameter (the cost model chooses). */
typedef int (*xccl_allreduce_build_fn)(xccl_sched_t *s, size_t count);
typedef int (*xccl_reduce_scatter_build_fn)(xccl_sched_t *s, const size_t *counts, int in_place);
typedef int (*xccl_alltoall_build_fn)(xccl_sched_t *s, size_t block, int in_place);
typedef int (*xccl_bcast_build_fn)(xccl_sched_t *s, size_t bytes, int root);
/* allgatherv: rank i contributes bytes[i], placed at RECV + displs[i]; SEND
 * holds bytes[rank], or in_place: the block is already at RECV + displs[rank]. */
typedef int (*xccl_allgatherv_build_fn)(xccl_sched_t *s, const size_t *bytes, const size_t *displs,
                                        int in_place);
/* reduce and gatherv (conventions below, "Rooted collectives"). */
typedef int (*xccl_reduce_build_fn)(xccl_sched_t *s, size_t count, int root, int in_place);
typedef int (*xccl_gatherv_build_fn)(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                                     int in_place);

/* alltoallv: rank r sends sbytes[q] from SEND + sdispls[q] to q and
 * receives rbytes[q] at RECV + rdispls[q] from q; SEND and RECV do not
 * overlap.  pair(pair_ctx, src, dst) is the number of bytes src sends to
 * dst, for every pair of the group: algorithms that forward other ranks'
 * blocks need it to size their messages; the others take NULL.
 * "pairwise" (p-1 rounds), "direct" (one round) and "bruck" (ceil(lg p)
 * rounds, blocks forwarded through scratch; needs pair). */
typedef size_t (*xccl_pair_bytes_fn)(const void *ctx, int src, int dst);
typedef int (*xccl_alltoallv_build_fn)(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                       const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                                       const void *pair_ctx);
int xccl_build_alltoallv_pairwise(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                  const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                                  const void *pair_ctx);
int xccl_build_alltoallv_direct(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                                const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                                const void *pair_ctx);
int xccl_build_alltoallv_bruck(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                               const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                               const void *pair_ctx);

/* Flat allgatherv: "ring" (p-1 rounds), "direct" (one round, every pair
 * at once: for a node's switch or full mesh) and "bruck" (ceil(lg p)
 * rounds through scratch: many ranks, small blocks). */
int xccl_build_allgatherv_ring(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);
int xccl_build_allgatherv_direct(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);
int xccl_build_allgatherv_bruck(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);

/* ------------------------------------------------------------------------ */
/* Rooted collectives and barrier.  Buffer conventions:                     */
/*   reduce:  SEND count elements in on every rank, RECV count elements out */
/*            at the root only (elsewhere not significant: never touched;   */
/*            partial results go through SCRATCH).  in_place: at the root   */
/*            SEND and RECV are the same memory.  The op is commutative     */
/*            (the component hands the others to the fallback).            */
/*   gather:  SEND block bytes on every rank, RECV size*block at the root   */
/*            only (block i from rank i).  in_place: the root's block is    */
/*            already at RECV + root*block (its SEND is not read).          */
/*   gatherv: rank i sends bytes[i] from SEND, placed at RECV + displs[i]   */
/*            at the root; off the root only bytes[rank] is read (the rest  */
/*            may be anything).  in_place as gather's.                      */
/*   scatter: SEND size*block at the root only (block i to rank i), RECV    */
/*            block bytes on every rank.  in_place: the root's RECV is not  */
/*            written (its block stays in SEND).                            */
/*   scatterv: rank i receives bytes[i] at RECV from the root's SEND +      */
/*            displs[i]; off the root only bytes[rank] is read.             */
/*   barrier: no buffers; nobody leaves before everyone entered.            */
/* Bytes in the gaps between a v form's blocks are never written.           */
/* ------------------------------------------------------------------------ */
/* "binomial": partial sums up a binomial tree rooted at root. */
int xccl_build_reduce_binomial(xccl_sched_t *s, size_t count, int root, int in_place);
/* "rabenseifner": recursive-halving reduce-scatter (extra ranks folded in)
 * then a binomial gather of the reduced blocks to the root:
 * 2 lg p a + 2((p-1)/p) n b + ((p-1)/p) n g. */
int xccl_build_reduce_rabenseifner(xccl_sched_t *s, size_t count, int root, int in_place);
/* "chain": root+1 -> root+2 -> ... -> root, each rank adding its input to
 * the running sum, pipelined in segments of seg bytes (0: one segment). */
int xccl_build_reduce_chain(xccl_sched_t *s, size_t count, int root, int in_place, size_t seg);
/* "dissemination": ceil(lg p) rounds, rank r signals r + 2^k. */
int xccl_build_barrier_dissemination(xccl_sched_t *s);
/* "shm": one flag barrier of the shared-memory level (s->slot_cap set). */
int xccl_build_barrier_shm(xccl_sched_t *s);
/* "binomial" and "linear" (every rank straight to or from the root). */
int xccl_build_gather_binomial(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_gather_linear(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_gatherv_linear(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                              int in_place);
int xccl_build_scatter_binomial(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_scatter_linear(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_scatterv_linear(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                               int in_place);
/* "shm": through the node's shared segment (s->slot_cap; flat, one node),
 * pipelined in pieces through the slots (algos/shm_util.h).  reduce: the
 * ranks reduce slices of each piece over every slot in rank order (the
 * same bits on every rank and CPU), the root copies the slices out;
 * gather(v): each rank's block through its slot, the root copies it out;
 * scatter(v): the root's blocks through its slot, each rank copies its own
 * out; alltoallv: each rank's blocks through its slot, every rank copies
 * its blocks out of the senders' slots.  The v forms and alltoallv wait
 * on the flags of the ranks they trade with, never on a rank's size that
 * only that rank knows. */
int xccl_build_reduce_shm(xccl_sched_t *s, size_t count, int root, int in_place);
int xccl_build_gather_shm(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_gatherv_shm(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                           int in_place);
int xccl_build_scatter_shm(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_scatterv_shm(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                            int in_place);
int xccl_build_alltoallv_shm(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                             const size_t *rbytes, const size_t *rdispls, xccl_pair_bytes_fn pair,
                             const void *pair_ctx);
/* Peer access with mapped buffers (XCCL_PEER_MAPPED), as the CUDA IPC
 * forms of these collectives run: "mesh" (ranks on several GPUs) and
 * "leader" (ranks on one GPU).  reduce, gather(v), scatter(v): the root
 * reads or writes every rank's buffers itself in both forms (the same
 * schedule under either name): the others post flag 1 (input there, RECV
 * free) and wait for the root's flag 2; a rank without a block (the v
 * forms) has nothing to do.  reduce folds in rank order 0..p-1 (the same
 * bits as any rank-order reduction; in place at a root > 0 through
 * SCRATCH, count elements).  allgatherv: "mesh" every rank copies each
 * peer's SEND into its RECV between two barriers of all ranks; "leader"
 * rank 0 fills every RECV. */
int xccl_build_reduce_mesh(xccl_sched_t *s, size_t count, int root, int in_place);
int xccl_build_reduce_leader(xccl_sched_t *s, size_t count, int root, int in_place);
int xccl_build_gather_mesh(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_gather_leader(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_gatherv_mesh(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                            int in_place);
int xccl_build_gatherv_leader(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                              int in_place);
int xccl_build_scatter_mesh(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_scatter_leader(xccl_sched_t *s, size_t block, int root, int in_place);
int xccl_build_scatterv_mesh(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                             int in_place);
int xccl_build_scatterv_leader(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                               int in_place);
int xccl_build_allgatherv_mesh(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);
int xccl_build_allgatherv_leader(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int in_place);
/* alltoallv ("mesh" only, not in place): every rank copies its block from
 * each peer's SEND into its RECV between two barriers of all ranks.  Rank
 * q's SEND at offset 0, as rank r's schedule names it, is where q's block
 * for r begins (q's sdispls[r], which only q knows): whoever provides the
 * peer access resolves it so (the CUDA IPC provider from what q publishes
 * in its slot).  A rank's own block is at SEND + sdispls[r]. */
int xccl_build_alltoallv_mesh(xccl_sched_t *s, const size_t *sbytes, const size_t *sdispls,
                              const size_t *rbytes, const size_t *rdispls);

#ifdef __cplusplus
}
#endif

#endif
