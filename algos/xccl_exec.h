/*
 * xccl algorithms, executor: the transport interface (xccl_transport_t),
 * the hooks around steps (xccl_gate_t), peer access (xccl_peer_t) and the
 * executor that runs any schedule over them (xccl_exec_t).  Section of the
 * algos API; algos/xccl_algos.h includes every section.
 */
#ifndef XCCL_EXEC_H
#define XCCL_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "xccl_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Transport interface and executor                                         */
/* ------------------------------------------------------------------------ */

/* A message is named by (sequence number of the collective call, index of
 * the message between the pair); the transport adds what it needs (its
 * communicator, the source) to make the wire tag unique. */
typedef struct {
    void *ctx;
    /* Post a transfer.  *req is set to NULL if it completed at once.
     * Return 0 or a negative error. */
    int (*isend)(void *ctx, int peer, const void *buf, size_t len,
                 uint32_t seq, uint32_t idx, void **req);
    int (*irecv)(void *ctx, int peer, void *buf, size_t len,
                 uint32_t seq, uint32_t idx, void **req);
    /* 1: complete (req released), 0: pending, <0: error (req released). */
    int (*test)(void *ctx, void *req);
    /* Make progress on outstanding transfers. */
    void (*progress)(void *ctx);
    /* Abandon a pending request (after an error elsewhere) and release it. */
    void (*cancel)(void *ctx, void *req);
} xccl_transport_t;

/* dst = a op b over count elements; 0 or a negative error. */
typedef int (*xccl_reduce_cb_t)(void *cbctx, void *dst, const void *a, const void *b, size_t count);
/* dst = src over len bytes (dst != src; the ranges may overlap); 0 or a
 * negative error. */
typedef int (*xccl_copy_cb_t)(void *cbctx, void *dst, const void *src, size_t len);
/* The executor's host copy (memmove semantics): memmove, except where the
 * destination is 1..63 bytes past the source modulo 4 KiB on a CPU where
 * glibc's `rep movsb` then runs several times slower: there the copy is
 * made in pieces instead (exec.c).  For copy callbacks that copy on the
 * host. */
void xccl_memmove(void *dst, const void *src, size_t len);
/* A copy with non-temporal stores (x86: the lines go to memory, not into
 * the caches, and are not read first), ordered before what follows (a
 * flag's post) by a store fence; memmove where the ranges overlap or
 * there is no such store. */
void xccl_copy_stream(void *dst, const void *src, size_t len);
/* Whether xccl_memmove takes the pieces in this process: measured on the
 * first call (a few microseconds), 1 or 0; the measurement's times per 32
 * KiB copy, aligned and 16 bytes past, where the pointers are not NULL
 * (0 where forced). */
int xccl_memmove_pieces(double *aligned_us, double *aliased_us);
/* Tests: 1 pieces, 0 memmove, -1 measure again on the next call. */
void xccl_memmove_force(int pieces);

#define XCCL_EXEC_INLINE_REQS 16

/* Optional hooks around the steps, for buffers whose contents arrive and
 * leave asynchronously (device memory staged through host copies, see
 * xccl_stage_plan), or whose local actions complete asynchronously (copies
 * and reductions queued on a device stream, xccl_exec_set_copy: the gate
 * then holds a step back until what earlier steps queued has run).  All
 * three may be NULL. */
typedef struct {
    void *ctx;
    /* Before step i is posted: 1 it may run (what it reads or writes is in
     * place), 0 ask again later, <0 error. */
    int (*step_ready)(void *ctx, size_t step);
    /* Step i is complete (transfers and local actions): 0 or <0. */
    int (*step_done)(void *ctx, size_t step);
    /* After the last step: 1 what the hooks started is finished, 0 ask
     * again later, <0 error.  The execution is done only then. */
    int (*drain)(void *ctx);
} xccl_gate_t;

/* Peer access: what a schedule needs to name other ranks' buffers and to
 * post and wait for flags.  The component hands it CUDA IPC
 * mappings or the node's shared segment; the simulator, the other virtual
 * ranks' buffers and in-memory flags.  Flags live with the peers' buffers
 * rather than in xccl_transport_t: they are words in memory the peers
 * share (posting one is a store, not a message), which UCX or the PML
 * transport cannot offer; a schedule that uses them runs only where the
 * peers' memory is reachable anyway. */
typedef struct {
    void *ctx;
    /* Buffer id of group rank peer (never this rank), as this process
     * reaches it; NULL: not available (the execution fails). */
    void *(*buf)(void *ctx, int peer, xccl_buf_id_t id);
    /* This rank's flag becomes (seq, val): 0 or <0.  Called in order with
     * the copy callback (xccl_exec_set_copy): a provider whose copies
     * complete asynchronously orders the post after them. */
    int (*post)(void *ctx, uint32_t seq, uint32_t val);
    /* 1: peer's flag has reached (seq, val), i.e. the same call and at
     * least val, or a later call; 0: not yet; <0 error. */
    int (*test)(void *ctx, int peer, uint32_t seq, uint32_t val);
    /* Optional (NULL: none): copy len bytes at offset off of buffer id of
     * group rank peer into dst, this rank's memory, for a peer buffer
     * that buf() cannot map: cross-memory attach (process_vm_readv), a
     * single copy.  Used by COPY actions only (a reduction needs its
     * operands mapped).  0 or <0. */
    int (*read)(void *ctx, int peer, xccl_buf_id_t id, size_t off, void *dst, size_t len);
    /* Optional (NULL: none): the other way, len bytes of src, this rank's
     * memory, into buffer id of group rank peer at offset off, where buf()
     * cannot map it (process_vm_writev).  COPY actions only.  0 or <0. */
    int (*write)(void *ctx, int peer, xccl_buf_id_t id, size_t off, const void *src, size_t len);
} xccl_peer_t;

typedef struct {
    const xccl_sched_t *s;
    const xccl_transport_t *tr;
    void *bufs[XCCL_NBUF];
    xccl_reduce_cb_t reduce;
    void *reduce_ctx;
    uint32_t seq;
    size_t step;
    int posted;                /* transfers of the current step are posted */
    int status;                /* 0 running, 1 done, <0 error */
    void **reqs;
    size_t nreqs;
    void *inline_reqs[XCCL_EXEC_INLINE_REQS];
    const xccl_gate_t *gate;   /* NULL: none */
    xccl_copy_cb_t copy;       /* NULL: memmove */
    void *copy_ctx;
    const xccl_peer_t *peer;   /* NULL: a schedule with peer access fails */
    size_t wait_at;            /* first action of the step whose flag wait may not be met */
    /* Before step 0: every peer's flag must reach (owed_seq, owed_val),
     * from peer owed_at on (xccl_exec_set_owed); owed_at = s->size: none. */
    uint32_t owed_seq, owed_val;
    int owed_at;
    struct xccl_exit_owed *owed;   /* NULL: none, or settled (xccl_exec_set_owed) */
} xccl_exec_t;

/* What the last schedule without an exit barrier (xccl_sched_t.no_exit)
 * left owed on one set of slots and flags: its call number, the flag its
 * peers post when done with it, and the places it moved through.  Zero:
 * nothing owed.  Kept by whoever runs the calls (the same on every rank:
 * it follows from the calls alone). */
typedef struct xccl_exit_owed {
    int open;
    uint32_t seq, val;
    size_t alt;
    unsigned nalt;
    int swap;
    int entry_waits;
} xccl_exit_owed_t;

/* The calls of one set of slots and flags share o: each executor settles
 * with it as it first progresses (the calls of a set run one at a time, in
 * call order).  A schedule that writes the slot (slot_bytes > 0) where o
 * is open and e's call could write what o's call left for its peers to
 * read (another layout, or the same place of the slot) first waits for
 * every peer to post o's done flag.  A no_exit schedule of o's layout in
 * another place needs no wait: every peer was done with the calls before
 * o's once it posted o's first flag, which this rank waited for in o.
 * Then o records e's call if it has no exit barrier. */
static inline void xccl_exec_set_owed(xccl_exec_t *e, xccl_exit_owed_t *o)
{
    e->owed = o;
}

/* bufs[XCCL_BUF_SCRATCH] must hold s->scratch_bytes and bufs[XCCL_BUF_SLOT]
 * (this rank's slot, NULL when s->slot_bytes is 0) s->slot_bytes; a
 * schedule that uses a slot without one fails at its first progress call,
 * before it runs anything.  The schedule and the buffers must outlive the
 * execution.  Returns 0 or -1. */
int xccl_exec_init(xccl_exec_t *e, const xccl_sched_t *s, const xccl_transport_t *tr,
                   void *const bufs[XCCL_NBUF], xccl_reduce_cb_t reduce, void *reduce_ctx,
                   uint32_t seq);
/* Attach a gate (before the first progress call); it must outlive the
 * execution. */
static inline void xccl_exec_set_gate(xccl_exec_t *e, const xccl_gate_t *g)
{
    e->gate = g;
}
/* Run the schedule's local copies through copy (before the first progress
 * call), e.g. on a device stream; NULL: memmove. */
static inline void xccl_exec_set_copy(xccl_exec_t *e, xccl_copy_cb_t copy, void *ctx)
{
    e->copy = copy;
    e->copy_ctx = ctx;
}
/* Give the execution peer access (before the first progress call); it
 * must outlive the execution.  Without it (or without all three of its
 * functions) a schedule with peer_access fails at its first progress call
 * before it runs anything. */
static inline void xccl_exec_set_peer(xccl_exec_t *e, const xccl_peer_t *p)
{
    e->peer = p;
}
/* Advance as far as possible without blocking: 1 done, 0 pending, <0 error. */
int xccl_exec_progress(xccl_exec_t *e);
/* Releases the executor; requests still pending (after an error) are
 * cancelled through the transport. */
void xccl_exec_fini(xccl_exec_t *e);

#ifdef __cplusplus
}
#endif

#endif
