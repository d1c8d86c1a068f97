/* What a mapped segment offers its ranks: slots, flags, latency lines,
 * small areas, and the addresses published for cross-memory attach
 * (xccl_segment.h; the layout: segment_int.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE            /* MADV_POPULATE_WRITE, whatever the -std */
#endif
#include "segment_int.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

/* ------------------------------------------------------------------------ */
/* Accessors and flags                                                      */
/* ------------------------------------------------------------------------ */

xccl_segment_kind_t xccl_segment_kind(const xccl_segment_t *seg)
{
    return seg->kind;
}

int xccl_segment_nranks(const xccl_segment_t *seg)
{
    return seg->nranks;
}

int xccl_segment_rank(const xccl_segment_t *seg)
{
    return seg->rank;
}

size_t xccl_segment_slot_bytes(const xccl_segment_t *seg)
{
    return seg->slot_bytes;
}

void *xccl_segment_slot(const xccl_segment_t *seg, int r)
{
    if (r < 0 || r >= seg->nranks) {
        return NULL;
    }
    return seg->base + seg->slots_off + (size_t) r * seg->slot_stride;
}

pid_t xccl_segment_pid(const xccl_segment_t *seg, int r)
{
    if (r < 0 || r >= seg->nranks ||
        !atomic_load_explicit(&info(seg, r)->attached, memory_order_acquire)) {
        return 0;
    }
    return (pid_t) info(seg, r)->pid;
}

int xccl_segment_flag_post(xccl_segment_t *seg, uint32_t seq, uint32_t val)
{
    if (UINT32_MAX == val) {
        return -EINVAL;
    }
    const uint64_t w = ((uint64_t) seq << 32) | (uint64_t) (val + 1u);
    atomic_store_explicit(&flag(seg, seg->rank)->word, w, memory_order_release);
    return 0;
}

int xccl_segment_flag_test(const xccl_segment_t *seg, int peer, uint32_t seq, uint32_t val)
{
    const uint64_t w = atomic_load_explicit(&flag(seg, peer)->word, memory_order_acquire);
    const uint32_t fv = (uint32_t) w, fs = (uint32_t) (w >> 32);
    if (0 == fv) {
        return 0;              /* never posted */
    }
    return fs == seq ? fv - 1u >= val : (int32_t) (fs - seq) > 0;
}

int xccl_segment_peer_alive(const xccl_segment_t *seg, int peer)
{
    const pid_t pid = xccl_segment_pid(seg, peer);
    if (0 == pid || XCCL_SEGMENT_MEMFD != seg->kind) {
        return -1;
    }
    /* EPERM: it exists (another user's process would not share the fd). */
    return 0 == kill(pid, 0) || EPERM == errno ? 1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Latency lines and small areas                                            */
/* ------------------------------------------------------------------------ */

void *xccl_segment_line(const xccl_segment_t *seg, int r)
{
    if (r < 0 || r >= seg->nranks) {
        return NULL;
    }
    return (char *) flag(seg, r) + XCCL_SEGMENT_FLAG_STRIDE - XCCL_SEGMENT_LINE_BYTES;
}

void *xccl_segment_small(const xccl_segment_t *seg, int r)
{
    if (r < 0 || r >= seg->nranks) {
        return NULL;
    }
    return seg->base + seg->small_off + (size_t) r * XCCL_SEGMENT_SMALL_BYTES;
}

int xccl_segment_prefault_small(xccl_segment_t *seg, int r)
{
    void *a = xccl_segment_small(seg, r);
    if (NULL == a) {
        return -EINVAL;
    }
    /* once per mapping: a pooled segment's next user has them (the walk
     * over mapped pages costs about half a communicator's life in
     * test/bench/comm_churn.sh; figures: docs/bench/churn.md) */
    if (NULL == seg->faulted && NULL == (seg->faulted = calloc(((size_t) seg->nranks + 63) / 64, 8))) {
        return -ENOMEM;
    }
    const uint64_t bit = (uint64_t) 1 << (r % 64);
    if (seg->faulted[r / 64] & bit) {
        return 0;
    }
#ifdef MADV_POPULATE_WRITE
    if (0 != madvise(a, XCCL_SEGMENT_SMALL_BYTES, MADV_POPULATE_WRITE) && EINVAL != errno) {
        return -errno;
    }
#endif
    seg->faulted[r / 64] |= bit;
    return 0;
}

int xccl_segment_prefault_slots(xccl_segment_t *seg, size_t bytes)
{
    const size_t from = seg->slots_ready;
    if (bytes <= from) {
        return 0;
    }
    const size_t step = XCCL_SEGMENT_PREFAULT_STEP;
    const size_t to = bytes >= seg->slot_bytes - seg->slot_bytes % step ? seg->slot_bytes
                                                                         : (bytes + step - 1) / step * step;
#ifdef MADV_POPULATE_WRITE
    char *slot = xccl_segment_slot(seg, seg->rank);
    if (0 != madvise(slot + from, to - from, MADV_POPULATE_WRITE) && EINVAL != errno) {
        return -errno;
    }
#endif
    seg->slots_ready = to;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Addresses for cross-memory attach                                        */
/* ------------------------------------------------------------------------ */

int xccl_segment_probe_word(const xccl_segment_t *seg, int peer, uint64_t *addr, uint64_t *value)
{
    if (peer < 0 || peer >= seg->nranks) {
        return -EINVAL;
    }
    *addr = info(seg, peer)->probe_addr;
    *value = probe_value(seg->key, peer);
    return 0;
}

int xccl_segment_publish(xccl_segment_t *seg, uint32_t seq, int n, const void *const *addrs)
{
    shm_info_t *me = info(seg, seg->rank);
    if (n < 0 || n > XCCL_SEGMENT_PUBLISH_MAX) {
        return -EINVAL;
    }
    for (int i = 0; i < n; i++) {
        me->pub_addr[i] = (uint64_t) (uintptr_t) addrs[i];
    }
    me->pub_n = (uint32_t) n;
    atomic_store_explicit(&me->pub_seq, seq, memory_order_release);
    return 0;
}

int xccl_segment_published(const xccl_segment_t *seg, int peer, uint32_t seq, int i, uint64_t *addr)
{
    if (peer < 0 || peer >= seg->nranks || i < 0 || i >= XCCL_SEGMENT_PUBLISH_MAX) {
        return -EINVAL;
    }
    const shm_info_t *in = info(seg, peer);
    if (atomic_load_explicit(&in->pub_seq, memory_order_acquire) != seq || (uint32_t) i >= in->pub_n) {
        return -ESTALE;
    }
    *addr = in->pub_addr[i];
    return 0;
}
