/*
 * xccl_segment: the node's shared segment, the transport of the intra-node
 * shared-memory level.  No MPI, no algorithms.
 *
 * One segment per communicator and node: a header, one flag per rank (its
 * own cache lines), one small area per rank, and one slot of slot_bytes
 * per rank.  One rank creates
 * it and gets a descriptor (a small blob); the caller hands the blob to the
 * other ranks of the node (the component: through the agreement it already
 * runs) and each attaches with it.  Blob in, blob out: this file never
 * talks to another process except through the segment.
 *
 * The segment never has a name (nothing ever appears in /dev/shm, so a
 * kill -9 at any moment leaves nothing behind):
 *   XCCL_SEGMENT_MEMFD  memfd_create; peers open /proc/<pid>/fd/<fd> of the
 *                   creator.  That open needs only PTRACE_MODE_READ on the
 *                   creator (same user, creator dumpable), which Yama's
 *                   ptrace_scope 1-3 do not restrict.  The memory lives as
 *                   long as one mapping or fd does.
 *   XCCL_SEGMENT_SYSV   shmget(IPC_PRIVATE) + shmat + shmctl(IPC_RMID) at once;
 *                   peers shmat the id of a segment already marked for
 *                   removal (Linux allows it).  Needs no ptrace permission,
 *                   but a kill -9 between shmget and IPC_RMID (two system
 *                   calls) leaves a segment in ipcs (never in /dev/shm).
 * XCCL_SEGMENT_AUTO is memfd, or SysV where memfd_create does not exist.  When
 * a peer cannot open the memfd (-EACCES: creator not dumpable, /proc
 * mounted hidepid, another PID namespace), the caller agrees on the failure
 * and creates a SysV segment instead.  A named segment (shm_open, later
 * unlinked) is deliberately not offered: between its creation and the
 * moment the last peer attached, a killed job would leave it in /dev/shm.
 *
 * Flags: rank r's flag is a 64-bit word only r writes: (seq, val) of its
 * last post.  post is a release store and test an acquire load, so what a
 * rank wrote before posting is visible to a peer once it saw the flag, and
 * what a peer read before posting is read before anyone who saw the flag
 * overwrites it.  seq is the call (the executor's sequence number): a flag
 * of an earlier call never satisfies a test of a later one, so successive
 * calls never confuse each other's flags.
 *
 * Each rank also publishes, in the segment, the addresses its peers'
 * cross-memory copies reach (segment/xccl_cma.h).
 *
 * Functions return 0 (or a count) or a negative errno.
 */
#ifndef XCCL_SEGMENT_H
#define XCCL_SEGMENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xccl_segment xccl_segment_t;

typedef enum {
    XCCL_SEGMENT_AUTO = 0,     /* memfd, else SysV */
    XCCL_SEGMENT_MEMFD = 1,
    XCCL_SEGMENT_SYSV = 2
} xccl_segment_kind_t;

/* What the creator hands to the other ranks of the node (same machine,
 * same ABI: plain bytes). */
#define XCCL_SEGMENT_DESC_BYTES 64
typedef struct {
    unsigned char bytes[XCCL_SEGMENT_DESC_BYTES];
} xccl_segment_desc_t;

/* Every rank's flag sits alone in this many bytes (two cache lines: the
 * adjacent-line prefetcher fetches pairs). */
#define XCCL_SEGMENT_FLAG_STRIDE 128
/* Slots start on page boundaries (each rank touches its own first: on a
 * NUMA machine its pages come from its own node). */
#define XCCL_SEGMENT_SLOT_ALIGN 4096

/* Creates a segment of nranks slots of slot_bytes (> 0) for this process,
 * rank `rank` of the segment, and fills *desc.  The creator keeps its
 * memfd open until xccl_segment_release_fd or detach: peers attach through it. */
int xccl_segment_create(xccl_segment_kind_t kind, int nranks, int rank, size_t slot_bytes, xccl_segment_t **seg,
                    xccl_segment_desc_t *desc);
/* Attaches the segment of desc as rank `rank` (not the creator's).
 * -EACCES / -EPERM: the creator's memfd cannot be opened from here (use
 * SysV); -ESTALE: the blob names no live segment (creator gone, another
 * PID namespace); -EBUSY: that rank is attached already. */
int xccl_segment_attach(const xccl_segment_desc_t *desc, int rank, xccl_segment_t **seg);
/* Unmaps (and closes the creator's fd).  The memory goes away with the
 * last process that maps it: there is nothing to remove. */
void xccl_segment_detach(xccl_segment_t *seg);
/* Reuse: without it, a communicator created, used once and freed pays a
 * segment's creation, attachment, first touches and unmapping, about half
 * of its cost (figures: docs/bench/churn.md).  A process may keep a segment mapped after its
 * communicator is gone and hand it to the next communicator of the same
 * processes: one rank claims it, and the others, which kept it mapped too,
 * rejoin it, without a system call.
 *   The header counts the ranks that hold the segment for a
 *   communicator: nranks from the creation, each rank's release takes one
 *   off (after its last access: release order).
 *   claim: where no rank holds it (0: every user released), this process
 *   takes it for nranks new users, resets it to what creation leaves (no
 *   rank attached, no flag or latency line ever posted, nothing published)
 *   and rejoins it as `rank`; -EBUSY where it is held (another claim won,
 *   or a user has not released it).
 *   rejoin: this process, which has it mapped, is rank `rank` of the
 *   claimed segment (-EBUSY: that rank is attached already).
 * Whoever claims must tell the others (the component: in its agreement,
 * desc_of), so that nobody reads a flag before the reset. */
int xccl_segment_claim(xccl_segment_t *seg, int rank);
int xccl_segment_rejoin(xccl_segment_t *seg, int rank);
void xccl_segment_release(xccl_segment_t *seg);
/* The descriptor of a segment this process has mapped (its creator's);
 * whether desc names seg (the same random key); whether two descriptors
 * name the same segment (0 where either is not a descriptor). */
void xccl_segment_desc_of(const xccl_segment_t *seg, xccl_segment_desc_t *desc);
int xccl_segment_desc_names(const xccl_segment_desc_t *desc, const xccl_segment_t *seg);
int xccl_segment_desc_same(const xccl_segment_desc_t *a, const xccl_segment_desc_t *b);
/* 1 once every rank has attached (then the creator's fd is no longer
 * needed), else 0. */
int xccl_segment_all_attached(const xccl_segment_t *seg);
/* The creator closes its memfd (after every rank attached); no-op else. */
void xccl_segment_release_fd(xccl_segment_t *seg);

xccl_segment_kind_t xccl_segment_kind(const xccl_segment_t *seg); /* MEMFD or SYSV */
xccl_segment_kind_t xccl_segment_desc_kind(const xccl_segment_desc_t *desc);
int xccl_segment_nranks(const xccl_segment_t *seg);
int xccl_segment_rank(const xccl_segment_t *seg);
size_t xccl_segment_slot_bytes(const xccl_segment_t *seg);
/* Slot of rank r, XCCL_SEGMENT_SLOT_ALIGN-aligned, slot_bytes long (NULL if
 * r is out of range). */
void *xccl_segment_slot(const xccl_segment_t *seg, int r);
/* The process of rank r as it attached (0 if not yet). */
pid_t xccl_segment_pid(const xccl_segment_t *seg, int r);

/* This rank's flag becomes (seq, val), val < UINT32_MAX (release).  Values
 * a rank posts in one call never decrease (the schedules guarantee it). */
int xccl_segment_flag_post(xccl_segment_t *seg, uint32_t seq, uint32_t val);
/* 1: rank peer's flag has reached (seq, val): the same call and at least
 * val, or a later call (serial number arithmetic); 0: not yet (acquire). */
int xccl_segment_flag_test(const xccl_segment_t *seg, int peer, uint32_t seq, uint32_t val);
/* 1: rank peer's process exists, 0: it is gone, -1: cannot tell (not
 * attached yet, or a SysV segment: the pid may be of another namespace). */
int xccl_segment_peer_alive(const xccl_segment_t *seg, int peer);

/* The latency line of rank r: the second cache line of its flag's
 * XCCL_SEGMENT_FLAG_STRIDE bytes, XCCL_SEGMENT_LINE_BYTES long, 64-byte aligned,
 * zero at creation, written only by rank r (never by this file): for a
 * caller that keeps its own sequence word and a few bytes of data there,
 * so that one cache-line transfer carries both.  NULL if r is out of
 * range. */
#define XCCL_SEGMENT_LINE_BYTES 64
void *xccl_segment_line(const xccl_segment_t *seg, int r);
/* The small area of rank r: XCCL_SEGMENT_SMALL_BYTES, page-aligned, zero at
 * creation, apart from the slots, never written by this file: for a
 * caller's small messages next to (not inside) the slots' pipelines.
 * NULL if r is out of range. */
#define XCCL_SEGMENT_SMALL_BYTES 196608
void *xccl_segment_small(const xccl_segment_t *seg, int r);
/* Maps every page of rank r's small area in this process now
 * (MADV_POPULATE_WRITE; the data stays as it is), so that its first uses
 * take no page faults; a page nobody touched yet is allocated here (on
 * this process's NUMA node: the rank's own area first).  Nothing where
 * the kernel lacks it (before 5.14).  Once per area and mapping (later
 * calls return at once).  0 or -errno. */
int xccl_segment_prefault_small(xccl_segment_t *seg, int r);
/* Maps the first `bytes` of this rank's own slot in this process now (as
 * above), in steps of XCCL_SEGMENT_PREFAULT_STEP: a schedule about to use
 * them then takes no page fault per page (on a VM about 2 us each: the
 * first four 256 KiB bcasts through the slots, which take turns over a
 * 1 MiB slot, 150-280 us each against a steady 21; all of it now in the
 * first call, docs/bench/first-calls.md).  The peers' slots are left to
 * their owners, who write them first (their pages on the owner's NUMA
 * node).  Once per byte and mapping: a call that needs no more returns
 * at once.  0 or -errno. */
#define XCCL_SEGMENT_PREFAULT_STEP ((size_t) 64 << 10)
int xccl_segment_prefault_slots(xccl_segment_t *seg, size_t bytes);

/* ---- addresses for cross-memory attach (segment/xccl_cma.h) */

/* The probe word of rank peer: its address in peer's process, and the
 * value it holds (from the segment's key), for xccl_cma_probe's read.
 * 0, or -EINVAL where peer is out of range. */
int xccl_segment_probe_word(const xccl_segment_t *seg, int peer, uint64_t *addr, uint64_t *value);
/* Addresses a rank publishes per call for its peers' CMA copies (its
 * buffers: send, receive, scratch...). */
#define XCCL_SEGMENT_PUBLISH_MAX 4
/* This rank's n addresses for call seq.  Publish before the call's first
 * flag post: a peer that has seen the post sees them. */
int xccl_segment_publish(xccl_segment_t *seg, uint32_t seq, int n, const void *const *addrs);
/* Address i that rank peer published for call seq: 0, or -ESTALE (it has
 * published another call's, or fewer). */
int xccl_segment_published(const xccl_segment_t *seg, int peer, uint32_t seq, int i, uint64_t *addr);

#ifdef __cplusplus
}
#endif

#endif
