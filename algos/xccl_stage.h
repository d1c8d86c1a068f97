/*
 * xccl algorithms, staging plan: the copies in and out of host copies of
 * device buffers that overlap a schedule.  Section of the algos API;
 * algos/xccl_algos.h includes every section.
 */
#ifndef XCCL_STAGE_H
#define XCCL_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "xccl_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Staging plan: copies in and out that overlap a schedule                  */
/* ------------------------------------------------------------------------ */

/* A schedule runs on host copies of device buffers (regions).  Instead of
 * copying a region whole before the schedule and whole after it, the plan
 * cuts each region into pieces and says
 *   - in which order to copy pieces in: the order the schedule first
 *     touches (reads or writes) them; a piece never touched is not copied;
 *   - how many of those copies must have arrived before step i runs
 *     (need_in[i], non-decreasing);
 *   - which pieces to copy out once step i is complete: those whose last
 *     write is step i; a piece never written is not copied out (the device
 *     copy is already right: the schedule did not change it).
 * Pieces are whole multiples of the piece size (the last one of a region
 * shorter); pieces that are adjacent and need the same moment are merged
 * into one copy. */
typedef struct {
    const void *base;          /* host copy */
    size_t len;
    int copy_in;               /* the schedule may read what the device holds */
    int copy_out;              /* what the schedule writes goes back */
} xccl_stage_region_t;

typedef struct {
    uint32_t region;
    size_t off, len;           /* bytes, in the region */
} xccl_stage_piece_t;

typedef struct {
    size_t piece;              /* piece size used */
    xccl_stage_piece_t *in;    /* copies in, in order */
    size_t nin;
    size_t *need_in;           /* [nsteps of the schedule] */
    xccl_stage_piece_t *out;   /* after step i: out[out_start[i] .. out_start[i+1]) */
    size_t nout;
    size_t *out_start;         /* [nsteps + 1] */
} xccl_stage_plan_t;

/* Plans the copies of s run on bufs (addresses map actions to regions;
 * memory outside every region, such as scratch, is ignored).  piece: bytes
 * per piece, raised so that no region has more than max_pieces (0: no
 * bound).  0, or -1 out of memory (*p is empty then). */
int xccl_stage_plan(xccl_stage_plan_t *p, const xccl_sched_t *s, void *const bufs[XCCL_NBUF],
                    const xccl_stage_region_t *regions, int nregions, size_t piece,
                    size_t max_pieces);
void xccl_stage_plan_fini(xccl_stage_plan_t *p);

#ifdef __cplusplus
}
#endif

#endif
