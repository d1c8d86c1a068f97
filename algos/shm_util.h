/*
 * Shared by the shared-memory builders (algos/shm_*.c): the node segment
 * gives every rank one slot its peers read (XCCL_BUF_SLOT, s->slot_cap
 * bytes).  A message larger than what fits goes through the slot in
 * chunks, software-pipelined: the slot holds `depth` buffers, chunk c uses
 * buffer c % depth and passes through `depth` stages (copy in, then reads
 * of the peers' slots), one stage per step; step t runs stage k of chunk
 * t - k for every k, then posts flag t + 1, and step t + 1 starts once
 * every peer posted t + 1 (mesh_barrier).  A buffer is written again
 * (chunk c + depth, step c + depth) only after every rank finished step
 * c + depth - 1, its last stage: the peers are done reading it.  The last
 * barrier is the exit: nobody leaves (and overwrites its slot in the next
 * call) while a peer still reads it (but shm_no_exit, below).  Not part
 * of the public API.
 */
#ifndef XCCL_SHM_UTIL_H
#define XCCL_SHM_UTIL_H

#include "mesh_util.h"

#include <stdlib.h>

/* Chunks and slot buffers start on this boundary where the element allows. */
#define SHM_ALIGN ((size_t) 64)

/* The largest multiple of es not above n; a multiple of SHM_ALIGN when n
 * is at least that and es divides it (every element of xccl_dtype_t). */
static inline size_t shm_floor(size_t n, size_t es)
{
    const size_t u = n >= SHM_ALIGN && 0 == SHM_ALIGN % es ? SHM_ALIGN : es;
    return n / u * u;
}

static inline size_t shm_round_up(size_t n, size_t u)
{
    return (n + u - 1) / u * u;
}

/* The latency path (allreduce "shm_small" of at most SHM_FAST_BYTES): the
 * last 2 SHM_FAST_BYTES of a slot of at least SHM_FAST_MIN_SLOT, two
 * regions used on alternate calls (slot_flip), so that it needs no exit
 * barrier: call k writes the region that call k - 2 used, once every peer
 * has posted a flag of call k - 1 or later (xccl_sched_wait_before), i.e.
 * finished call k - 2.  The pipelines of the other builders stay below
 * (shm_cap), and they keep their exit barriers. */
#define SHM_FAST_BYTES ((size_t) 256)
#define SHM_FAST_MIN_SLOT ((size_t) 4096)

static inline int shm_has_fast(const xccl_sched_t *s)
{
    return s->slot_cap >= SHM_FAST_MIN_SLOT;
}

/* The part of the slot the pipelines use: [0, shm_cap); the latency path's
 * two regions start there. */
static inline size_t shm_cap(const xccl_sched_t *s)
{
    return shm_has_fast(s) ? (s->slot_cap - 2 * SHM_FAST_BYTES) / SHM_ALIGN * SHM_ALIGN : s->slot_cap;
}

/* Bytes of each of the depth buffers of the slot, a multiple of es; 0 if
 * the slot cannot hold depth buffers of parts pieces of one element. */
static inline size_t shm_buffer(const xccl_sched_t *s, int depth, int parts, size_t es)
{
    const size_t piece = shm_floor(shm_cap(s) / (size_t) depth / (size_t) parts, es);
    return piece * (size_t) parts;
}

/* Where buffer b of the slot starts. */
static inline size_t shm_buf_off(size_t buf_bytes, size_t chunk, int depth)
{
    return (chunk % (size_t) depth) * buf_bytes;
}

/* The slot is too small for this builder, or out of memory: the schedule
 * is marked failed. */
static inline int shm_fail(xccl_sched_t *s)
{
    s->error = 1;
    return -1;
}

/* s uses [0, end) of its slot. */
static inline void shm_use(xccl_sched_t *s, size_t end)
{
    if (end > s->slot_bytes) {
        s->slot_bytes = end;
    }
}

/* Byte range [lo, hi) of piece t of a run of n bytes cut into pieces of pc. */
static inline size_t shm_piece(size_t n, size_t pc, size_t t, size_t *lo)
{
    *lo = t * pc;
    return *lo >= n ? 0 : (n - *lo < pc ? n - *lo : pc);
}

/* acc = x0 op x1 op ... op x(p-1), len bytes, in rank order (the same
 * bits on every rank): rank q's input at offset at of its slot, this
 * rank's own at own (its slot, or SEND where it did not copy it in).
 * Partial results go to acc, which no operand may overlap but as the
 * same range. */
static inline void shm_reduce_ranks(xccl_sched_t *s, xccl_ref_t acc, xccl_ref_t own, size_t at, size_t len)
{
    for (int q = 1; q < s->size && len > 0; q++) {
        const xccl_ref_t left = 1 < q ? acc : 0 == s->rank ? own : mesh_ref(s, 0, XCCL_BUF_SLOT, at);
        const xccl_ref_t right = q == s->rank ? own : mesh_ref(s, q, XCCL_BUF_SLOT, at);
        xccl_sched_reduce(s, acc, left, right, len);
    }
}

/* A whole schedule (never appended) whose
 * ranks' slots use at most [0, used) (the same on every rank: a bcast's
 * readers write nothing there): where the slot holds two or more
 * page-aligned copies of that, call seq uses copy seq % n (at most
 * SHM_ROT_MAX; xccl_sched_t.slot_alt), so that a rank does not write the
 * lines its peers read in the last calls and may still hold: the write
 * then waits for their caches to give the lines up, a probe per line
 * (test/bench/line_probe.c; figures: docs/bench/select-figures.md). */
/* Two ranks instead (slot_swap): on odd calls every slot reference names
 * the other rank's slot, so that each rank writes the lines it read in the
 * call before, where its peer wrote them (a whole schedule;
 * test/bench/lat_pair.c: rewriting what the peer has just read costs
 * several times as long; figures: docs/bench/select-figures.md).  Only
 * where both ranks put what they give each other at the same offsets of
 * their slots.  (Of one chunk, allgather and alltoall then drop their exit
 * barriers: shm_no_exit; the others keep theirs.)  A bcast swaps and
 * rotates (shm_rotate after shm_swap): an odd number of regions, so
 * that a root that changes every call finds in each region the other
 * slot's turn, where its peer wrote and it read, and one that stays the
 * same moves through twice as many places. */
static inline void shm_swap(xccl_sched_t *s)
{
    s->slot_swap = 2 == s->size;
}

/* A whole schedule of one chunk (copy in, a barrier among all ranks,
 * copies out of the peers' slots) that moves through two or more places
 * of the slot (shm_swap, or shm_rotate gave slot_nalt >= 2) ends with a
 * post instead of its exit barrier (xccl_sched_t.no_exit): the next call
 * writes another place, and one that would write this one again, or
 * another layout, first waits for the post (xccl_exec_set_owed).  Its
 * barrier matters: a peer posts it only once done with every call before,
 * which is what lets the next call of the layout skip the wait.  One
 * barrier instead of two per call saves a round of the ranks through the
 * cores (figures: docs/shm-level.md). */
static inline void shm_no_exit(xccl_sched_t *s, size_t nchunks)
{
    s->no_exit = 1 == nchunks && (s->slot_swap || s->slot_nalt >= 2);
}

/* The barrier that ends step t of a pipeline of nchunks (value t + 1); the
 * last one (t = nchunks) is the exit barrier, or its post alone
 * (shm_no_exit). */
static inline void shm_step_barrier(xccl_sched_t *s, size_t t, size_t nchunks)
{
    if (t == nchunks && s->no_exit) {
        xccl_sched_post(s, (uint32_t) (t + 1));
    } else {
        mesh_barrier(s, (uint32_t) (t + 1));
    }
}

#define SHM_ROT_MAX 8u
#define SHM_ROT_ALIGN ((size_t) 4096)

static inline void shm_rotate(xccl_sched_t *s, size_t used)
{
    const size_t stride = shm_round_up(used, SHM_ROT_ALIGN);
    size_t n = stride > 0 ? shm_cap(s) / stride : 0;
    n = n < SHM_ROT_MAX ? n : SHM_ROT_MAX;
    if (s->slot_swap && n > 0 && 0 == n % 2) {
        n--;        /* an odd count: a region's next call has the other parity */
    }
    if (n >= 2) {
        s->slot_alt = stride;
        s->slot_nalt = (unsigned) n;
        shm_use(s, (s->slot_nalt - 1) * stride + used);
    }
}

/* The rooted collectives and the v forms (sizes only some ranks know)
 * use one half of the slot in a call and the other in the next, where
 * each half holds two or more buffers of buf bytes (shm_halves; the same
 * on every rank, from the slot alone): a rank then does not write the
 * lines the peers read in the call before and may still hold.
 * shm_room: the bytes a call's buffers may take (a half, or the slot);
 * shm_rotate_room, at the end of the build on every rank: the halves (a
 * reader finds the writer's half by its own schedule's); a rank that
 * writes nothing in its slot still uses none of it. */
static inline size_t shm_half(const xccl_sched_t *s)
{
    return shm_cap(s) / 2 / SHM_ROT_ALIGN * SHM_ROT_ALIGN;
}

static inline int shm_halves(const xccl_sched_t *s, size_t buf)
{
    return shm_half(s) >= 2 * buf && shm_half(s) > 0;
}

static inline size_t shm_room(const xccl_sched_t *s, size_t buf)
{
    return shm_halves(s, buf) ? shm_half(s) : shm_cap(s);
}

static inline void shm_rotate_room(xccl_sched_t *s, size_t buf)
{
    if (shm_halves(s, buf)) {
        s->slot_alt = shm_half(s);
        s->slot_nalt = 2;
        if (s->slot_bytes > 0) {
            s->slot_bytes += s->slot_alt;
        }
    }
}

/* The even form of a rooted v builder (gather, scatter): blocks of block
 * bytes in rank order.  Every rank knows the block: one of 0 bytes needs
 * no slot. */
typedef int (*shm_rooted_v_fn)(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root,
                               int in_place);

static inline int shm_rooted_even(xccl_sched_t *s, size_t block, int root, int in_place, shm_rooted_v_fn build)
{
    const int p = s->size;
    s->algo = "shm";
    if (0 == block) {
        return xccl_sched_finalize(s);
    }
    size_t *v = (size_t *) malloc(2 * (size_t) p * sizeof(size_t));
    if (NULL == v) {
        return shm_fail(s);
    }
    for (int q = 0; q < p; q++) {
        v[q] = block;
        v[p + q] = (size_t) q * block;
    }
    const int rc = build(s, v, v + p, root, in_place);
    free(v);
    return rc;
}

/* With the halves, such a call has no exit wait (xccl_sched_t.no_exit,
 * entry_waits): shm_enter first, on every rank: it posts 0 ("entered:
 * done with every call before") in a step of its own, before any wait (a
 * peer's entry may wait for it), and a rank that writes its slot in the
 * call then waits for every peer to have entered the call before, i.e.
 * to be done with the last call that used this call's half.  So a rank
 * runs up to one call ahead of its slowest peer instead of waiting for
 * its readers at the end of each call.  shm_leave last, on every rank:
 * it posts SHM_DONE ("done with this call"), which the next call of
 * another layout waits for (xccl_exec_set_owed).  Flags of the call in
 * between rise from 1. */
#define SHM_DONE ((uint32_t) 1 << 30)

static inline void shm_enter(xccl_sched_t *s, int writes)
{
    xccl_sched_post(s, 0);
    xccl_sched_step(s);              /* the post goes out before any wait */
    for (int k = 1; writes && k < s->size; k++) {
        xccl_sched_wait_before(s, mod(s->rank + k, s->size));
    }
}

static inline void shm_leave(xccl_sched_t *s)
{
    xccl_sched_post(s, SHM_DONE);
    s->no_exit = 1;
    s->entry_waits = 1;
}

#endif
