/*
 * The layout of the node's shared segment and the handle of one mapping,
 * shared by xccl_segment.c (creation, attachment, reuse) and
 * segment_access.c (slots, flags, latency lines, small areas, published
 * addresses).  Nothing outside segment/ includes it.
 */
#ifndef XCCL_SEGMENT_INT_H
#define XCCL_SEGMENT_INT_H

#include "xccl_segment.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* Flags are words in memory shared between processes: the atomics must be
 * lock-free (address-free), not emulated with a process-local lock. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");

#define PAGE ((size_t) XCCL_SEGMENT_SLOT_ALIGN)
_Static_assert(XCCL_SEGMENT_SMALL_BYTES % XCCL_SEGMENT_SLOT_ALIGN == 0, "small areas keep the slots page-aligned");

/* [0, info_end): header + info[nranks]; [flags_off, ...): flag[nranks];
 * [small_off, ...): small area[nranks], XCCL_SEGMENT_SMALL_BYTES each;
 * [slots_off, ...): slot[nranks], each slot_stride apart. */
typedef struct {
    uint64_t magic;
    uint32_t version, nranks;
    uint64_t slot_bytes, slot_stride;
    uint64_t flags_off, slots_off;
    uint8_t key[16];
    /* second cache line: written as ranks attach and release */
    _Alignas(64) _Atomic uint32_t nattached;
    /* ranks that hold the segment for a communicator: nranks from its
     * creation or a claim, one less at each release; 0: free to claim */
    _Atomic uint32_t users;
} shm_header_t;

typedef struct {
    _Atomic uint32_t attached;   /* 1 once the rank's process mapped the segment */
    int32_t pid;
    uint64_t probe_addr;         /* address, in pid, of a word holding probe_value(key, rank) */
    /* xccl_segment_publish: the rank's buffers for call pub_seq (CMA reads);
     * ordered by the flags (written before the call's first post) */
    _Atomic uint32_t pub_seq;
    uint32_t pub_n;
    uint64_t pub_addr[XCCL_SEGMENT_PUBLISH_MAX];
    uint8_t pad[8];
} shm_info_t;

typedef struct {
    /* high 32 bits: seq; low 32 bits: val + 1 (0: never posted) */
    _Atomic uint64_t word;
    uint8_t pad[XCCL_SEGMENT_FLAG_STRIDE - sizeof(uint64_t)];
} shm_flag_t;

_Static_assert(sizeof(shm_info_t) == 64, "info is one cache line");
_Static_assert(sizeof(shm_flag_t) == XCCL_SEGMENT_FLAG_STRIDE, "flag stride");

/* The descriptor's bytes. */
typedef struct {
    uint32_t magic;
    uint16_t version, kind;
    int32_t pid, fd, shmid;
    uint32_t nranks;
    uint64_t slot_bytes, total;
    uint8_t key[16];
} shm_wire_t;
_Static_assert(sizeof(shm_wire_t) <= XCCL_SEGMENT_DESC_BYTES, "descriptor fits its blob");

struct xccl_segment {
    xccl_segment_kind_t kind;
    int rank, nranks, creator;
    int fd;                    /* creator's memfd until released, else -1 */
    char *base;
    size_t total, slot_bytes, slot_stride, flags_off, small_off, slots_off;
    uint8_t key[16];
    xccl_segment_desc_t desc;  /* what names it (from its creation) */
    /* CMA probe: peers read this word of ours with process_vm_readv. */
    volatile uint64_t probe_word;
    uint64_t *faulted;         /* small areas mapped here (xccl_segment_prefault_small), by rank */
    size_t slots_ready;        /* every slot's first bytes mapped here (xccl_segment_prefault_slots) */
};

static inline shm_header_t *header(const xccl_segment_t *s)
{
    return (shm_header_t *) s->base;
}

static inline shm_info_t *info(const xccl_segment_t *s, int r)
{
    return (shm_info_t *) (s->base + sizeof(shm_header_t)) + r;
}

static inline shm_flag_t *flag(const xccl_segment_t *s, int r)
{
    return (shm_flag_t *) (s->base + s->flags_off) + r;
}

/* The value rank r's probe word holds (xccl_cma_probe reads it). */
static inline uint64_t probe_value(const uint8_t key[16], int r)
{
    uint64_t k;
    memcpy(&k, key, sizeof(k));
    return k ^ (0x9E3779B97F4A7C15ull * (uint64_t) (r + 1));
}

#endif
