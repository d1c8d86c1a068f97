/*
 * The host peer-access provider: xccl_peer_t (algos) over the node's shared
 * segment (segment/xccl_segment.h).  It joins algos and segment, so it sits
 * with the component (only ompi_coll_xccl depends on both), but
 * it is MPI-free: the unit tests link it without Open MPI.
 *
 * A schedule names a peer's buffer as (group rank q, buffer id, offset).
 * Here buffer id b of peer q is a region of q's slot: XCCL_BUF_SLOT is the
 * whole slot (the shm builders, algos/shm_*.c, use only that: they copy
 * SEND into the own slot themselves, and read the peers' slots).  Other ids
 * are not reachable unless mapped with xccl_level_peer_map ("mirror" mode:
 * every rank's SEND / RECV / SCRATCH live in its slot, so that any
 * peer-access schedule, e.g. the mesh builders', runs on the segment; the
 * caller then copies SEND into the slot region before the call and RECV out
 * after it, see docs/shm-level.md).
 *
 * With cross-memory attach on (xccl_level_peer_cma), a peer's unmapped
 * SEND / RECV / SCRATCH is read or written in the peer's own memory
 * instead (xccl_peer_t.read / write, process_vm_readv / writev): single
 * copies, no slot.
 *
 * Flags are the segment's flags of the ranks.  A wait for a peer whose
 * process is gone (memfd segments: same PID namespace) fails instead of
 * spinning forever.
 */
#ifndef XCCL_COLL_LEVEL_PEER_H
#define XCCL_COLL_LEVEL_PEER_H

#include "algos/xccl_exec.h"
#include "segment/xccl_segment.h"

typedef struct {
    size_t off, len;
    int on;
} xccl_level_region_t;

typedef struct {
    xccl_peer_t peer;              /* hand &p->peer to xccl_exec_set_peer */
    xccl_segment_t *seg;
    const int *local_of;           /* [group_size]: group rank -> rank in the segment, -1 off
                                    * this node; NULL: group rank = segment rank */
    int group_size;
    xccl_level_region_t region[XCCL_NBUF];
    uint32_t misses;               /* flag tests not met since the last liveness check */
    int gone;                      /* a peer found dead (segment rank), or -1 */
    int cma;                       /* peers' unmapped SEND/RECV/SCRATCH copied (CMA) */
    uint32_t seq;                  /* the call published (xccl_level_peer_publish) */
} xccl_level_peer_t;

/* Flag tests not met between two checks that the peer still lives. */
#define XCCL_LEVEL_PEER_LIVENESS_EVERY (1u << 16)

/* Provider for this process's rank of seg; XCCL_BUF_SLOT maps the whole
 * slot, nothing else.  local_of (kept, not copied) may be NULL. */
void xccl_level_peer_init(xccl_level_peer_t *p, xccl_segment_t *seg, const int *local_of, int group_size);
/* Buffer id of every rank is [off, off + len) of its slot: 0, or -1 if
 * that does not fit the slot. */
int xccl_level_peer_map(xccl_level_peer_t *p, xccl_buf_id_t id, size_t off, size_t len);
/* This rank's own buffer id in the segment (for the executor's bufs), or
 * NULL if id is not mapped. */
void *xccl_level_peer_own(const xccl_level_peer_t *p, xccl_buf_id_t id);
/* 1 if schedule s can run on this provider: the slot it uses fits. */
int xccl_level_peer_fits(const xccl_level_peer_t *p, const xccl_sched_t *s);
/* Cross-memory attach: a peer's SEND / RECV / SCRATCH that is not mapped
 * into its slot is read with process_vm_readv (xccl_peer_t.read) and
 * written with process_vm_writev (xccl_peer_t.write), straight in the
 * peer's own buffer: the mesh builders' copies become single copies.
 * Only where xccl_cma_probe said yes for every peer (the caller
 * agrees on it).  Every call then publishes its buffers first. */
void xccl_level_peer_cma(xccl_level_peer_t *p, int on);
/* Before executing call seq on bufs (the executor's): publish this rank's
 * SEND, RECV, SCRATCH for the peers' reads and writes.  0 or <0. */
int xccl_level_peer_publish(xccl_level_peer_t *p, uint32_t seq, void *const bufs[XCCL_NBUF]);

#endif
