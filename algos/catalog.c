/*
 * The catalog: every algorithm of every collective, under the name that the
 * force parameters, the tuning file and the verbose line use.  The
 * component, xccl_simulate and xccl_info all choose from this one list.
 */
#include "base/xccl_base.h"
#include "xccl_sched.h"
#include "xccl_layout.h"
#include "xccl_build.h"
#include "xccl_hier.h"
#include "xccl_catalog.h"

#include <stddef.h>

/* Two-level algorithms: flat stages composed over nodes and rails.  Not
 * applicable without a layout, on one node or with one rank per node, where
 * they would be a flat algorithm themselves. */
static int flat_layout(const xccl_layout_t *l)
{
    return NULL == l || l->nnodes <= 1 || l->nnodes == l->size;
}

/* The node's shared segment (a->shm_slot): the intra-node stages of the
 * two-level algorithms run through it, and the flat "shm" algorithms apply
 * on one node.  The slot's size goes to the schedule (children inherit it). */
static int shm_on(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    s->slot_cap = a->shm_slot;
    return a->shm_slot > 0;
}
static xccl_reduce_scatter_build_fn intra_rs(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_on(s, a) ? xccl_build_reduce_scatter_shm : xccl_build_reduce_scatter_ring;
}
static xccl_allgatherv_build_fn intra_agv(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_on(s, a) ? xccl_build_allgatherv_shm : xccl_build_allgatherv_ring;
}
static int shm_flat(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return (NULL == a->layout || a->layout->nnodes <= 1) && shm_on(s, a);
}

static int ar_ring(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_allreduce_ring_segmented(s, a->count, a->segment);
}
static int ar_rd(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allreduce_recursive_doubling(s, a->count); }
static int ar_rab(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allreduce_rabenseifner(s, a->count); }
static int ar_swing(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allreduce_swing(s, a->count); }
/* Double binary tree: chunks of at least 64 KiB per tree (at most
 * XCCL_DBT_MAX_CHUNKS), so that latency stays 2 lg p steps plus the
 * pipeline's depth. */
static int ar_dbt(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allreduce_dbt(s, a->count, 64 * 1024); }
static int ar_nhr(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allreduce_nhr(s, a->count); }
static int ar_nb(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allreduce_nb(s, a->count); }
static int ar_hier(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_allreduce(s, a->layout, a->count, a->in_place, intra_rs(s, a), xccl_build_allreduce_ring,
                                    intra_agv(s, a));
}
static int ar_hier_hd(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_allreduce(s, a->layout, a->count, a->in_place, intra_rs(s, a),
                                    xccl_build_allreduce_rabenseifner, intra_agv(s, a));
}

/* Pipelined: hier's stages on chunks, overlapped; ring inside
 * the nodes, nhr on the rails (logarithmic at any node count, round-
 * synchronous as the zip needs).  Never through the shared segment. */
static int ar_pipe(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_pipe_allreduce(s, a->layout, a->count, a->in_place, XCCL_PIPE_CHUNK, XCCL_PIPE_MAX_CHUNKS,
                                    xccl_build_reduce_scatter_ring, xccl_build_allreduce_nhr,
                                    xccl_build_allgatherv_ring);
}

static int rs_ring(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_reduce_scatter_ring(s, a->counts, a->in_place); }
static int rs_pw(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_reduce_scatter_pairwise(s, a->counts, a->in_place); }
static int rs_rh(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_reduce_scatter_recursive_halving(s, a->counts, a->in_place); }
static int rs_nhr(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_reduce_scatter_nhr(s, a->counts, a->in_place); }
static int rs_nb(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_reduce_scatter_nb(s, a->counts, a->in_place); }
static int rs_hier(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_reduce_scatter(s, a->layout, a->counts, a->in_place, intra_rs(s, a),
                                         xccl_build_reduce_scatter_ring);
}

static int rs_hier_hd(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_reduce_scatter(s, a->layout, a->counts, a->in_place, intra_rs(s, a),
                                         xccl_build_reduce_scatter_recursive_halving);
}

static int rs_pipe(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_pipe_reduce_scatter(s, a->layout, a->counts, a->in_place, XCCL_PIPE_CHUNK,
                                         XCCL_PIPE_MAX_CHUNKS, xccl_build_reduce_scatter_ring,
                                         xccl_build_reduce_scatter_nhr);
}

static int ag_ring(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allgather_ring(s, a->block); }
static int ag_bruck(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allgather_bruck(s, a->block); }
static int ag_rd(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allgather_recursive_doubling(s, a->block); }
static int ag_nhr(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allgather_nhr(s, a->block); }
static int ag_nb(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_allgather_nb(s, a->block); }
static int ag_hier(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_allgather_any(s, a->layout, a->block, xccl_build_allgatherv_ring, intra_agv(s, a));
}
/* Bruck on the rails: ceil(lg N) rounds between nodes instead of N-1. */
static int ag_hier_bruck(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_allgather_any(s, a->layout, a->block, xccl_build_allgatherv_bruck, intra_agv(s, a));
}

/* Bruck on the rails (no allgatherv nhr; Bruck is round-synchronous too). */
static int ag_pipe(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_pipe_allgather(s, a->layout, a->block, XCCL_PIPE_CHUNK, XCCL_PIPE_MAX_CHUNKS,
                                    xccl_build_allgatherv_bruck, xccl_build_allgatherv_ring);
}

static int a2a_pw(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_alltoall_pairwise(s, a->block, a->in_place); }
/* At most 8 transfers in flight: all at once floods shared-memory queues. */
static int a2a_linear(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_alltoall_linear(s, a->block, a->in_place, 8); }
static int a2a_bruck(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_alltoall_bruck(s, a->block, a->in_place); }
/* Regular layouts take the fixed-block builder (one copy fewer with block
 * placement), uneven ones the alltoallv one; the rail stage is pairwise or,
 * for small blocks on many nodes, Bruck (ceil(lg N) rounds). */
static int a2a_two_level(xccl_sched_t *s, const xccl_coll_args_t *a, xccl_alltoall_build_fn inter,
                         xccl_alltoallv_build_fn inter_v)
{
    if (flat_layout(a->layout)) {
        return XCCL_NOT_APPLICABLE;
    }
    if (xccl_layout_is_regular(a->layout)) {
        return xccl_build_hier_alltoall(s, a->layout, a->block, a->in_place,
                                        shm_on(s, a) ? xccl_build_alltoall_shm : xccl_build_alltoall_pairwise, inter);
    }
    return xccl_build_hier_alltoall_any(s, a->layout, a->block, a->in_place, xccl_build_alltoallv_pairwise,
                                        inter_v);
}
static int a2a_hier(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return a2a_two_level(s, a, xccl_build_alltoall_pairwise, xccl_build_alltoallv_pairwise);
}
static int a2a_hier_bruck(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return a2a_two_level(s, a, xccl_build_alltoall_bruck, xccl_build_alltoallv_bruck);
}

static int bc_binomial(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_bcast_binomial(s, a->bytes, a->root); }
static int bc_sag(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_bcast_scatter_allgather(s, a->bytes, a->root); }
/* 256 KiB segments: large enough to amortise a message, small enough to pipeline. */
static int bc_chain(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_bcast_chain(s, a->bytes, a->root, 256 * 1024); }
static int bc_nhr(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_bcast_nhr(s, a->bytes, a->root); }
static int bc_nb(xccl_sched_t *s, const xccl_coll_args_t *a) { return xccl_build_bcast_nb(s, a->bytes, a->root); }
static int bc_hier(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_bcast(s, a->layout, a->bytes, a->root, xccl_build_bcast_binomial,
                                shm_on(s, a) ? xccl_build_bcast_shm : xccl_build_bcast_binomial);
}
static int bc_hier_rails(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_bcast_rails(s, a->layout, a->bytes, a->root, xccl_build_bcast_binomial, intra_agv(s, a));
}
/* The rails' pieces broadcast by scatter + allgather: large messages on
 * many nodes (2 n/L bytes per rail instead of lg N n/L). */
static int bc_hier_sag(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_bcast_rails(s, a->layout, a->bytes, a->root, xccl_build_bcast_scatter_allgather,
                                      intra_agv(s, a));
}

/* Peer access ("mesh"): ranks read each other's buffers.  Only where the
 * caller says every rank reaches the others' memory (CUDA IPC, a shared
 * segment) and all ranks are on one node; otherwise not applicable, so
 * that the cost model never predicts them and a forced "mesh" falls back
 * like a two-level algorithm on a flat layout. */
#ifndef XCCL_MESH_READ_PIECE
#define XCCL_MESH_READ_PIECE (64u << 10)
#endif
static int mesh_ok(const xccl_coll_args_t *a)
{
    return a->peer_access && (NULL == a->layout || a->layout->nnodes <= 1);
}
static int ar_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    if (!mesh_ok(a)) {
        return XCCL_NOT_APPLICABLE;
    }
    return XCCL_PEER_COPY == a->peer_access
               ? xccl_build_allreduce_mesh_read(s, a->count, a->in_place, XCCL_MESH_READ_PIECE)
               : xccl_build_allreduce_mesh(s, a->count, a->in_place);
}
static int rs_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    if (!mesh_ok(a)) {
        return XCCL_NOT_APPLICABLE;
    }
    return XCCL_PEER_COPY == a->peer_access
               ? xccl_build_reduce_scatter_mesh_read(s, a->counts, a->in_place, XCCL_MESH_READ_PIECE)
               : xccl_build_reduce_scatter_mesh(s, a->counts, a->in_place);
}
static int ag_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return mesh_ok(a) ? xccl_build_allgather_mesh(s, a->block) : XCCL_NOT_APPLICABLE;
}
static int a2a_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return mesh_ok(a) ? xccl_build_alltoall_mesh(s, a->block, a->in_place) : XCCL_NOT_APPLICABLE;
}
/* Copied peers, from 8 MiB (past the caches, as XCCL_STREAM_BYTES): the
 * root writes a share of each reader's RECV (xccl_build_bcast_mesh_split),
 * its core otherwise idle; the trials still choose between this and shm.
 * Below, the one copy stream of the plain mesh: with both cores copying
 * lines of the other core's cache at once, some runs are several times
 * slower (figures: docs/bench/select-figures.md). */
#define XCCL_MESH_SPLIT_BYTES ((size_t) 8 << 20)
static int bc_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    if (!mesh_ok(a)) {
        return XCCL_NOT_APPLICABLE;
    }
    return XCCL_PEER_COPY == a->peer_access && a->bytes >= XCCL_MESH_SPLIT_BYTES
               ? xccl_build_bcast_mesh_split(s, a->bytes, a->root)
               : xccl_build_bcast_mesh(s, a->bytes, a->root);
}

/* One rank does the whole collective on everyone's buffers ("leader",
 * algos/mesh_leader.c): it writes the peers' buffers too, so only where
 * they are mapped (CUDA IPC: ranks that share one device), on one node. */
static int leader_ok(const xccl_coll_args_t *a)
{
    return XCCL_PEER_MAPPED == a->peer_access && (NULL == a->layout || a->layout->nnodes <= 1);
}
static int ar_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_allreduce_leader(s, a->count) : XCCL_NOT_APPLICABLE;
}
static int rs_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_reduce_scatter_leader(s, a->counts, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int ag_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_allgather_leader(s, a->block) : XCCL_NOT_APPLICABLE;
}
static int a2a_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_alltoall_leader(s, a->block, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int bc_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_bcast_leader(s, a->bytes, a->root) : XCCL_NOT_APPLICABLE;
}

/* Shared memory ("shm"): every rank reads the others' slots of the node
 * segment; one node with a segment only. */
static int ar_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_allreduce_shm(s, a->count) : XCCL_NOT_APPLICABLE;
}
static int ar_shm_small(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_allreduce_shm_small(s, a->count) : XCCL_NOT_APPLICABLE;
}
static int rs_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_reduce_scatter_shm(s, a->counts, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int ag_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_allgather_shm(s, a->block) : XCCL_NOT_APPLICABLE;
}
static int a2a_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_alltoall_shm_whole(s, a->block, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int bc_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_bcast_shm_whole(s, a->bytes, a->root) : XCCL_NOT_APPLICABLE;
}

/* The rooted collectives, barrier and the v forms.  vec: counts then
 * displacements (xccl_coll_args_t). */
static int rd_binomial(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_reduce_binomial(s, a->count, a->root, a->in_place);
}
static int rd_rab(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_reduce_rabenseifner(s, a->count, a->root, a->in_place);
}
/* Segments of 64 KiB: a chain's latency is p + segments - 1 steps. */
static int rd_chain(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_reduce_chain(s, a->count, a->root, a->in_place, 64 * 1024);
}
/* Two-level: reduce-scatter inside the nodes (the segment's where there is
 * one), Rabenseifner's reduce on the rails (about 2 slices a rank where a
 * binomial tree sends lg N: the model prices it ahead from 1 MiB on many
 * nodes, the two within a few per cent on two), the slices gathered to
 * the root over the transport (the shm gatherv is a whole schedule, not
 * a stage). */
static int rd_hier(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_reduce(s, a->layout, a->count, a->root, a->in_place, intra_rs(s, a),
                                 xccl_build_reduce_rabenseifner, xccl_build_gatherv_linear);
}
static int rd_pipe(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_pipe_reduce(s, a->layout, a->count, a->root, a->in_place, XCCL_PIPE_CHUNK,
                                 XCCL_PIPE_MAX_CHUNKS, xccl_build_reduce_scatter_ring,
                                 xccl_build_reduce_binomial, xccl_build_gatherv_linear);
}
static int rd_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_reduce_shm(s, a->count, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int bar_dissem(xccl_sched_t *s, const xccl_coll_args_t *a) { (void) a; return xccl_build_barrier_dissemination(s); }
static int bar_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_barrier_shm(s) : XCCL_NOT_APPLICABLE;
}
static int agv_ring(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_allgatherv_ring(s, a->vec, a->vec + s->size, a->in_place);
}
static int agv_direct(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_allgatherv_direct(s, a->vec, a->vec + s->size, a->in_place);
}
static int agv_bruck(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_allgatherv_bruck(s, a->vec, a->vec + s->size, a->in_place);
}
/* Two-level, as allgather's: ring on the rails; hier_bruck: Bruck there,
 * ceil(lg N) rounds between nodes instead of N-1 (many nodes). */
static int agv_hier(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_allgatherv(s, a->layout, a->vec, a->vec + s->size, a->in_place,
                                     xccl_build_allgatherv_ring, intra_agv(s, a));
}
static int agv_hier_bruck(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return flat_layout(a->layout) ? XCCL_NOT_APPLICABLE
        : xccl_build_hier_allgatherv(s, a->layout, a->vec, a->vec + s->size, a->in_place,
                                     xccl_build_allgatherv_bruck, intra_agv(s, a));
}
static int agv_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_allgatherv_shm(s, a->vec, a->vec + s->size, a->in_place)
                          : XCCL_NOT_APPLICABLE;
}
static int a2av_pw(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    const size_t p = (size_t) s->size;
    return xccl_build_alltoallv_pairwise(s, a->vec, a->vec + p, a->vec + 2 * p, a->vec + 3 * p, NULL, NULL);
}
static int a2av_direct(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    const size_t p = (size_t) s->size;
    return xccl_build_alltoallv_direct(s, a->vec, a->vec + p, a->vec + 2 * p, a->vec + 3 * p, NULL, NULL);
}
static int a2av_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    const size_t p = (size_t) s->size;
    return shm_flat(s, a) ? xccl_build_alltoallv_shm(s, a->vec, a->vec + p, a->vec + 2 * p, a->vec + 3 * p, NULL, NULL)
                          : XCCL_NOT_APPLICABLE;
}
static int ga_binomial(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_gather_binomial(s, a->block, a->root, a->in_place);
}
static int ga_linear(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_gather_linear(s, a->block, a->root, a->in_place);
}
static int gav_linear(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_gatherv_linear(s, a->vec, a->vec + s->size, a->root, a->in_place);
}
static int ga_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_gather_shm(s, a->block, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int gav_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_gatherv_shm(s, a->vec, a->vec + s->size, a->root, a->in_place)
                          : XCCL_NOT_APPLICABLE;
}
static int sc_binomial(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_scatter_binomial(s, a->block, a->root, a->in_place);
}
static int sc_linear(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_scatter_linear(s, a->block, a->root, a->in_place);
}
static int scv_linear(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return xccl_build_scatterv_linear(s, a->vec, a->vec + s->size, a->root, a->in_place);
}
static int sc_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_scatter_shm(s, a->block, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int scv_shm(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return shm_flat(s, a) ? xccl_build_scatterv_shm(s, a->vec, a->vec + s->size, a->root, a->in_place)
                          : XCCL_NOT_APPLICABLE;
}
/* Their peer-access forms: mapped peers (CUDA IPC) on one node, as
 * "leader" above (the root writes peers' RECV, the reduce reads their
 * inputs in place); "mesh" and "leader" differ only in allgatherv.  The
 * mesh of allgatherv, gather and scatter also runs on copied peers
 * (process_vm_readv and writev: xccl_coll_peer_copy); reduce's and the
 * v forms' only on mapped ones. */
static int rd_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_reduce_mesh(s, a->count, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int rd_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_reduce_leader(s, a->count, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int agv_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return mesh_ok(a) ? xccl_build_allgatherv_mesh(s, a->vec, a->vec + s->size, a->in_place)
                        : XCCL_NOT_APPLICABLE;
}
static int agv_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_allgatherv_leader(s, a->vec, a->vec + s->size, a->in_place)
                        : XCCL_NOT_APPLICABLE;
}
/* alltoallv's: "mesh" only, not in place (algos/alltoallv_mesh.c). */
static int a2av_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    const size_t p = (size_t) s->size;
    return leader_ok(a) && !a->in_place
               ? xccl_build_alltoallv_mesh(s, a->vec, a->vec + p, a->vec + 2 * p, a->vec + 3 * p)
               : XCCL_NOT_APPLICABLE;
}
static int ga_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return mesh_ok(a) ? xccl_build_gather_mesh(s, a->block, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int ga_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_gather_leader(s, a->block, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int gav_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_gatherv_mesh(s, a->vec, a->vec + s->size, a->root, a->in_place)
                        : XCCL_NOT_APPLICABLE;
}
static int gav_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_gatherv_leader(s, a->vec, a->vec + s->size, a->root, a->in_place)
                        : XCCL_NOT_APPLICABLE;
}
static int sc_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return mesh_ok(a) ? xccl_build_scatter_mesh(s, a->block, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int sc_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_scatter_leader(s, a->block, a->root, a->in_place) : XCCL_NOT_APPLICABLE;
}
static int scv_mesh(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_scatterv_mesh(s, a->vec, a->vec + s->size, a->root, a->in_place)
                        : XCCL_NOT_APPLICABLE;
}
static int scv_leader(xccl_sched_t *s, const xccl_coll_args_t *a)
{
    return leader_ok(a) ? xccl_build_scatterv_leader(s, a->vec, a->vec + s->size, a->root, a->in_place)
                        : XCCL_NOT_APPLICABLE;
}

/* The first algorithm of each collective is its measured default (auto
 * keeps it unless another is predicted clearly faster). */
static const xccl_algo_t catalog[XCCL_NCOLL][XCCL_CATALOG_MAX + 1] = {
    /* Ties go to the earlier entry: hier before swing, whose inter-node
     * bytes the model predicts equal on two nodes, but which spreads them
     * over flows that share links (figures: docs/bench/select-figures.md,
     * docs/bench/multinode-rails.txt). */
    [XCCL_COLL_ALLREDUCE] = { { "ring", ar_ring }, { "recursive_doubling", ar_rd },
        { "rabenseifner", ar_rab }, { "hier", ar_hier }, { "hier_hd", ar_hier_hd },
        { "swing", ar_swing }, { "mesh", ar_mesh }, { "shm", ar_shm }, { "shm_small", ar_shm_small },
        { "dbt", ar_dbt }, { "leader", ar_leader }, { "nhr", ar_nhr }, { "nb", ar_nb },
        { "pipeline", ar_pipe } },
    [XCCL_COLL_ALLGATHER] = { { "ring", ag_ring }, { "bruck", ag_bruck },
        { "recursive_doubling", ag_rd }, { "hier", ag_hier }, { "hier_bruck", ag_hier_bruck },
        { "mesh", ag_mesh }, { "shm", ag_shm }, { "leader", ag_leader }, { "nhr", ag_nhr }, { "nb", ag_nb },
        { "pipeline", ag_pipe } },
    [XCCL_COLL_REDUCE_SCATTER] = { { "ring", rs_ring }, { "pairwise", rs_pw },
        { "recursive_halving", rs_rh }, { "hier", rs_hier }, { "hier_hd", rs_hier_hd },
        { "mesh", rs_mesh }, { "shm", rs_shm }, { "leader", rs_leader }, { "nhr", rs_nhr }, { "nb", rs_nb },
        { "pipeline", rs_pipe } },
    [XCCL_COLL_REDUCE_SCATTER_BLOCK] = { { "ring", rs_ring }, { "pairwise", rs_pw },
        { "recursive_halving", rs_rh }, { "hier", rs_hier }, { "hier_hd", rs_hier_hd },
        { "mesh", rs_mesh }, { "shm", rs_shm }, { "leader", rs_leader }, { "nhr", rs_nhr }, { "nb", rs_nb },
        { "pipeline", rs_pipe } },
    [XCCL_COLL_ALLTOALL] = { { "pairwise", a2a_pw }, { "linear", a2a_linear },
        { "bruck", a2a_bruck }, { "hier", a2a_hier }, { "hier_bruck", a2a_hier_bruck },
        { "mesh", a2a_mesh }, { "shm", a2a_shm }, { "leader", a2a_leader } },
    [XCCL_COLL_BCAST] = { { "binomial", bc_binomial }, { "scatter_allgather", bc_sag },
        { "chain", bc_chain }, { "hier", bc_hier }, { "hier_rails", bc_hier_rails },
        { "hier_sag", bc_hier_sag }, { "mesh", bc_mesh }, { "shm", bc_shm }, { "leader", bc_leader },
        { "nhr", bc_nhr }, { "nb", bc_nb } },
    [XCCL_COLL_REDUCE] = { { "binomial", rd_binomial }, { "rabenseifner", rd_rab }, { "chain", rd_chain },
        { "hier", rd_hier }, { "pipeline", rd_pipe }, { "shm", rd_shm }, { "mesh", rd_mesh },
        { "leader", rd_leader } },
    [XCCL_COLL_BARRIER] = { { "dissemination", bar_dissem }, { "shm", bar_shm } },
    [XCCL_COLL_ALLGATHERV] = { { "ring", agv_ring }, { "direct", agv_direct }, { "bruck", agv_bruck },
        { "hier", agv_hier }, { "hier_bruck", agv_hier_bruck },
        { "shm", agv_shm }, { "mesh", agv_mesh }, { "leader", agv_leader } },
    [XCCL_COLL_ALLTOALLV] = { { "pairwise", a2av_pw }, { "direct", a2av_direct }, { "shm", a2av_shm },
        { "mesh", a2av_mesh } },
    [XCCL_COLL_GATHER] = { { "binomial", ga_binomial }, { "linear", ga_linear }, { "shm", ga_shm },
        { "mesh", ga_mesh }, { "leader", ga_leader } },
    [XCCL_COLL_GATHERV] = { { "linear", gav_linear }, { "shm", gav_shm }, { "mesh", gav_mesh }, { "leader", gav_leader } },
    [XCCL_COLL_SCATTER] = { { "binomial", sc_binomial }, { "linear", sc_linear }, { "shm", sc_shm },
        { "mesh", sc_mesh }, { "leader", sc_leader } },
    [XCCL_COLL_SCATTERV] = { { "linear", scv_linear }, { "shm", scv_shm }, { "mesh", scv_mesh }, { "leader", scv_leader } },
};

const xccl_algo_t *xccl_coll_algos(xccl_coll_t c, int *n)
{
    int k = 0;
    if ((int) c < 0 || c >= XCCL_NCOLL) {
        *n = 0;
        return NULL;
    }
    while (k < XCCL_CATALOG_MAX && catalog[c][k].name) {
        k++;
    }
    *n = k;
    return catalog[c];
}
