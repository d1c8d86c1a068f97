/*
 * xccl's own UCP context and worker (one per process), endpoints shared by
 * all communicators, and tagged nonblocking transfers.  Knows nothing of MPI
 * or of algorithms: the caller supplies peer keys, addresses and tags.
 */
#ifndef XCCL_UCX_H
#define XCCL_UCX_H

#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

/* Tag layout, 64 bits: | comm id 16 | source rank 20 | sequence 16 | message index 12 |.
 * The receiver matches all 64 bits.  UCP keeps the order of messages with
 * the same tag from one endpoint, so the wrap of the 12-bit index (more
 * than 4096 messages between one pair in one call) cannot mismatch. */
#define XCCL_UCX_MAX_CID   0xffffu
#define XCCL_UCX_MAX_RANKS (1u << 20)

static inline ucp_tag_t xccl_ucx_tag(uint32_t cid, uint32_t src, uint32_t seq, uint32_t idx)
{
    return ((ucp_tag_t) (cid & 0xffffu) << 48) | ((ucp_tag_t) (src & 0xfffffu) << 28) |
           ((ucp_tag_t) (seq & 0xffffu) << 12) | (ucp_tag_t) (idx & 0xfffu);
}

/* Create the context (transports restricted to tls when not empty) and the
 * worker.  multi_thread: the worker may be used from several threads.
 * Returns 0, or -1 with xccl_ucx_error() saying why. */
int xccl_ucx_init(const char *tls, const char *rndv_scheme, const char *rndv_thresh,
                  int multi_thread);
/* Close what is left of the endpoints, destroy the worker and the context. */
void xccl_ucx_fini(void);
int xccl_ucx_ready(void);
/* Why the last call that failed on this thread failed; "" after clear. */
const char *xccl_ucx_error(void);
void xccl_ucx_clear_error(void);
/* 1 when the context can move CUDA device memory itself (a UCX built with
 * CUDA: ucp_context_query's memory types, read once at init), else 0
 * (Debian's: xccl stages device buffers through host memory). */
int xccl_ucx_cuda_memory(void);
/* The names of the transports UCP uses (after init), e.g. "posix,cma,tcp". */
const char *xccl_ucx_tls(void);

/* This worker's address, valid until fini. */
int xccl_ucx_address(const void **addr, size_t *len);

/* Progress the worker; returns the number of events. */
unsigned xccl_ucx_progress(void);

/* Endpoints are cached by peer key for the life of the worker: get
 * creates one (or takes a reference to the cached one), put drops a
 * reference; the cache keeps its own, so an endpoint stays open when the
 * last communicator using it goes and the next one to the same process
 * reuses it (a new endpoint is a wire-up: a TCP connection, an address
 * look-up, most of a short-lived communicator's cost; figures:
 * docs/bench/churn.md).  fini closes them all.  At most one endpoint per
 * peer process this one ever talked to, as in Open MPI's PML. */
int xccl_ucx_ep_get(uint64_t key, const void *addr, size_t len, ucp_ep_h *ep);
/* A reference to the cached endpoint of key: 0, or -1 when none is cached
 * (then get it with the peer's address). */
int xccl_ucx_ep_ref(uint64_t key, ucp_ep_h *ep);
void xccl_ucx_ep_put(uint64_t key);

/* What a transfer's buffer is.  UCX is always told (the request's
 * memory_type): left to guess, UCX 1.22 with CUDA took a cuMemAlloc
 * pointer its memory-type cache did not know for host memory and crashed
 * reading it.  The caller knows: xccl passes device pointers only in the
 * calls it runs on device buffers (coll_xccl_gpu_direct.c). */
typedef enum { XCCL_UCX_MEM_HOST, XCCL_UCX_MEM_CUDA } xccl_ucx_mem_t;

/* Tagged transfers.  *req is NULL when the transfer completed at once.
 * Returns 0 or -1 (also for XCCL_UCX_MEM_CUDA on a context without CUDA
 * memory support, which would take the pointer for host memory). */
int xccl_ucx_isend(ucp_ep_h ep, const void *buf, size_t len, ucp_tag_t tag, xccl_ucx_mem_t mem,
                   void **req);
int xccl_ucx_irecv(void *buf, size_t len, ucp_tag_t tag, xccl_ucx_mem_t mem, void **req);
/* 1 done (request released), 0 pending, -1 failed or the received length
 * differs from the posted one (request released). */
int xccl_ucx_test(void *req);
/* Abandon a pending request and release it. */
void xccl_ucx_cancel(void *req);

#endif
