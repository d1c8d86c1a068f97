/*
 * The node segment on real shared memory, without MPI: N forked processes
 * (N = 1..8) attach one segment (segment/xccl_segment.h) and run schedules
 * through the executor with the shm peer provider
 * (ompi_coll_xccl/coll_xccl_level_peer.h) and a transport that fails any
 * send or receive (one node: the schedules need none).
 *
 *   - segment: create / attach through the blob, slots, flags (sequence
 *     numbers of successive calls, serial wrap), errors (bad blob, creator
 *     gone, rank attached twice), memfd and SysV;
 *   - the mesh builders (xccl_build_*_mesh) unchanged, in "mirror" mode:
 *     every rank's SEND / RECV / SCRATCH in its slot, copied in and out
 *     around the call;
 *   - the shm builders (xccl_build_*_shm): user buffers private, the
 *     slot shared, messages of 0, 1, odd sizes and larger than the slot
 *     (chunks), in place and not, every root, bit-exact against scalar
 *     references; many successive calls on one segment, with random
 *     delays, mixing collectives;
 *   - planted bugs fail on real memory: the entry barrier removed, flags
 *     tested without their sequence number (a flag of the previous call
 *     satisfies a wait), the post moved before the copy into the slot (a
 *     slow copy shows it);
 *   - kill -9: a rank killed mid-call: the others notice (no hang), and
 *     nothing was ever in /dev/shm (memfd), or the SysV segment is gone
 *     once the processes are; a creator killed at random moments during
 *     create/attach leaves nothing;
 *   - CMA: the probe, reads and writes; a non-dumpable process refuses
 *     /proc/<pid>/fd (memfd attach fails, SysV works) and CMA.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include "check_main.h"

#include "base/xccl_base.h"
#include "xccl_sched.h"
#include "xccl_build.h"
#include "xccl_exec.h"
#include "segment/xccl_cma.h"
#include "segment/xccl_segment.h"
#include "ompi_coll_xccl/coll_xccl_level_peer.h"

/* For sched_drop (shm_sim.h), which plants the missing entry barrier; the
 * simulator's sequence base and seed salt go unused here. */
#define SIM_EXEC_SEQ 0
#define SIM_SEED_SALT 0u
#include "sim_harness.h"
#include "shm_sim.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXR 8
#define SLOT ((size_t) 16384)

/* ------------------------------------------------------------------------ */
/* Forked ranks                                                             */
/* ------------------------------------------------------------------------ */

/* Test control between the parent and its ranks (not the data path: an
 * anonymous shared mapping made before fork). */
typedef struct {
    _Atomic int ready;             /* the descriptor is published */
    _Atomic int create_rc;
    xccl_segment_desc_t desc;
    _Atomic int arrived;           /* a simple counter for test-level sync */
    _Atomic int progress[MAXR];    /* calls done by each rank */
    uint64_t addr[MAXR];           /* published private addresses (CMA) */
    pid_t pid[MAXR];
    char msg[MAXR][320];
} ctl_t;

typedef int (*rank_fn)(ctl_t *c, xccl_segment_t *seg, int rank, int n, const void *arg);

static ctl_t *ctl_new(void)
{
    ctl_t *c = mmap(NULL, sizeof(ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(c, MAP_FAILED);
    memset(c, 0, sizeof(*c));
    return c;
}

static int failf(ctl_t *c, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(ctl_t *c, int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg[rank], sizeof(c->msg[rank]), fmt, ap);
    va_end(ap);
    return 1;
}

/* Child r: rank 0 creates (kind, slot) and publishes the blob, the others
 * attach with it; then fn. */
static void child(ctl_t *c, xccl_segment_kind_t kind, size_t slot, int rank, int n, rank_fn fn, const void *arg)
{
    xccl_segment_t *seg = NULL;
    int rc;
    c->pid[rank] = getpid();
    if (0 == rank) {
        rc = xccl_segment_create(kind, n, 0, slot, &seg, &c->desc);
        atomic_store(&c->create_rc, rc);
        atomic_store(&c->ready, 1);
        if (rc < 0) {
            _exit(failf(c, rank, "create: %s", strerror(-rc)));
        }
    } else {
        while (!atomic_load(&c->ready)) {
            usleep(100);
        }
        if (atomic_load(&c->create_rc) < 0) {
            _exit(failf(c, rank, "creator failed"));
        }
        rc = xccl_segment_attach(&c->desc, rank, &seg);
        if (rc < 0) {
            _exit(failf(c, rank, "attach: %s", strerror(-rc)));
        }
    }
    rc = fn(c, seg, rank, n, arg);
    xccl_segment_detach(seg);
    _exit(rc);
}

/* Waits for the children, killing them all after timeout_s: the number of
 * ranks that failed (exit status != 0, a signal, the timeout). */
static int reap(ctl_t *c, const pid_t *pids, int n, int timeout_s, int *status, char *why, size_t whylen)
{
    int left = n, failed = 0;
    const time_t end = time(NULL) + timeout_s;
    int done[MAXR] = { 0 };
    why[0] = '\0';
    while (left > 0) {
        int progressed = 0;
        for (int r = 0; r < n; r++) {
            if (done[r]) {
                continue;
            }
            int st;
            if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
                done[r] = 1;
                left--;
                progressed = 1;
                status[r] = st;
                if (!WIFEXITED(st) || 0 != WEXITSTATUS(st)) {
                    failed++;
                    if ('\0' == why[0]) {
                        snprintf(why, whylen, "rank %d: %s", r,
                                 c->msg[r][0] ? c->msg[r] : WIFSIGNALED(st) ? "killed by a signal" : "failed");
                    }
                }
            }
        }
        if (left > 0 && time(NULL) > end) {
            for (int r = 0; r < n; r++) {
                if (!done[r]) {
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], &status[r], 0);
                    failed++;
                }
            }
            snprintf(why, whylen, "timeout after %d s (a rank hangs)", timeout_s);
            break;
        }
        if (!progressed) {
            usleep(1000);
        }
    }
    return failed;
}

/* Runs fn on n forked ranks; returns the failures, the first in why. */
static int run_ranks(int n, xccl_segment_kind_t kind, size_t slot, rank_fn fn, const void *arg, int timeout_s,
                     char *why, size_t whylen)
{
    ctl_t *c = ctl_new();
    pid_t pids[MAXR];
    int status[MAXR];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        ck_assert_int_ge(pids[r], 0);
        if (0 == pids[r]) {
            child(c, kind, slot, r, n, fn, arg);
        }
    }
    int failed = reap(c, pids, n, timeout_s, status, why, whylen);
    munmap(c, sizeof(*c));
    return failed;
}

/* ------------------------------------------------------------------------ */
/* Executing a schedule on the segment                                      */
/* ------------------------------------------------------------------------ */

/* One node: any send or receive is an error (and counted). */
static int xfers;
static int no_isend(void *ctx, int peer, const void *buf, size_t len, uint32_t seq, uint32_t idx, void **req)
{
    (void) ctx, (void) peer, (void) buf, (void) len, (void) seq, (void) idx, (void) req;
    xfers++;
    return -1;
}
static int no_irecv(void *ctx, int peer, void *buf, size_t len, uint32_t seq, uint32_t idx, void **req)
{
    (void) ctx, (void) peer, (void) buf, (void) len, (void) seq, (void) idx, (void) req;
    xfers++;
    return -1;
}
static int no_test(void *ctx, void *req)
{
    (void) ctx, (void) req;
    return -1;
}
static void no_progress(void *ctx)
{
    (void) ctx;
}
static void no_cancel(void *ctx, void *req)
{
    (void) ctx, (void) req;
}
static const xccl_transport_t no_transport = { NULL, no_isend, no_irecv, no_test, no_progress, no_cancel };

typedef struct {
    xccl_reduce_fn_t fn;
} red_t;

static int red_cb(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    red_t *r = ctx;
    if (NULL == r->fn) {
        return -1;
    }
    r->fn(dst, a, b, count);
    return 0;
}

/* Copies through a callback that is slow for copies into the own slot on
 * the slow rank (the planted "post before copy" bug shows then). */
typedef struct {
    char *slot;
    size_t slot_bytes;
    int slow;
} copy_ctx_t;

static int slow_copy(void *ctx, void *dst, const void *src, size_t len)
{
    copy_ctx_t *c = ctx;
    if (c->slow && (char *) dst >= c->slot && (char *) dst < c->slot + c->slot_bytes) {
        usleep(30000);
    }
    memmove(dst, src, len);
    return 0;
}

/* Wraps the provider: tests flags without their sequence number (the
 * previous call's flag satisfies a wait): a planted bug. */
typedef struct {
    xccl_peer_t peer;
    xccl_level_peer_t *real;
} seqless_t;

static int seqless_test(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    seqless_t *w = ctx;
    (void) seq;
    /* the flag of the call before satisfies it as if it were this one's */
    return w->real->peer.test(w->real->peer.ctx, peer, seq - 1, val) ||
           w->real->peer.test(w->real->peer.ctx, peer, seq, val);
}

static void *seqless_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    seqless_t *w = ctx;
    return w->real->peer.buf(w->real->peer.ctx, peer, id);
}

static int seqless_post(void *ctx, uint32_t seq, uint32_t val)
{
    seqless_t *w = ctx;
    return w->real->peer.post(w->real->peer.ctx, seq, val);
}

/* What this rank's last call without an exit barrier left owed (each rank
 * is a process of its own, forked per test): its calls settle it in
 * order, as the component's level does. */
static xccl_exit_owed_t owed;

/* Runs s to the end: 0, or <0 (an action failed, a peer is gone). */
static int exec_sched(const xccl_sched_t *s, void *const bufs[XCCL_NBUF], const xccl_peer_t *peer, uint32_t seq,
                      xccl_reduce_fn_t fn, copy_ctx_t *slow)
{
    xccl_exec_t e;
    red_t red = { fn };
    if (0 != xccl_exec_init(&e, s, &no_transport, bufs, red_cb, &red, seq)) {
        return -1;
    }
    xccl_exec_set_peer(&e, peer);
    xccl_exec_set_owed(&e, &owed);
    if (slow) {
        xccl_exec_set_copy(&e, slow_copy, slow);
    }
    int rc;
    while (0 == (rc = xccl_exec_progress(&e))) {
        sched_yield();         /* 8 ranks on 2 cores: let the peers run */
    }
    xccl_exec_fini(&e);
    return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------------------ */
/* Inputs and references                                                    */
/* ------------------------------------------------------------------------ */

static int32_t in_i32(unsigned call, int r, size_t i)
{
    return (int32_t) (call * 7919u + (unsigned) r * 1000003u + (unsigned) i * 31u) - 77777;
}

/* floats whose sums depend on the order */
static float in_flt(unsigned call, int r, size_t i)
{
    return 0.1f * (float) (r + 1) + 1e-3f * (float) ((i + call) % 1000) + (0 == (r * 7 + i + call) % 5 ? 1e7f : 0.0f);
}

static unsigned char in_byte(unsigned call, int from, int to, size_t i)
{
    return (unsigned char) (call * 17 + (unsigned) from * 31 + (unsigned) to * 7 + i * 13 + 1 + (i >> 8));
}

/* Element kinds of the reductions. */
enum { EK_I32, EK_FLT };

static size_t ek_size(int ek)
{
    return EK_I32 == ek ? sizeof(int32_t) : sizeof(float);
}

static xccl_reduce_fn_t ek_fn(int ek)
{
    return xccl_reduce_kernel(EK_I32 == ek ? XCCL_DT_INT32 : XCCL_DT_FLOAT, XCCL_OP_SUM);
}

static void ek_fill(int ek, unsigned call, int r, void *buf, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (EK_I32 == ek) {
            ((int32_t *) buf)[i] = in_i32(call, r, off + i);
        } else {
            ((float *) buf)[i] = in_flt(call, r, off + i);
        }
    }
}

/* Element off+i of the reduction over ranks 0..p-1 in rank order. */
static void ek_reference(int ek, unsigned call, int p, void *out, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (EK_I32 == ek) {
            uint32_t acc = (uint32_t) in_i32(call, 0, off + i);
            for (int r = 1; r < p; r++) {
                acc += (uint32_t) in_i32(call, r, off + i);
            }
            ((int32_t *) out)[i] = (int32_t) acc;
        } else {
            float acc = in_flt(call, 0, off + i);
            for (int r = 1; r < p; r++) {
                acc = acc + in_flt(call, r, off + i);
            }
            ((float *) out)[i] = acc;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* One collective call on a rank                                            */
/* ------------------------------------------------------------------------ */

typedef enum { C_AR, C_AR_SMALL, C_RS, C_AG, C_A2A, C_BC, NC } coll_t;
static const char *const coll_names[NC] = { "allreduce", "allreduce_small", "reduce_scatter", "allgather",
                                            "alltoall", "bcast" };

enum { USE_SHM, USE_MESH_MIRROR, USE_MESH_CMA };

typedef struct {
    coll_t coll;
    int mesh;                  /* USE_*: the shm builder, or the mesh builder in mirror mode or over CMA */
    size_t n;                  /* elements (reductions), bytes per block (allgather, alltoall), bytes (bcast) */
    int in_place, root, ek;
    unsigned call;             /* the call's number: its inputs and its seq */
} call_t;

typedef enum { BUG_NONE, BUG_NO_ENTRY_WAIT, BUG_SEQLESS, BUG_POST_BEFORE_COPY } bug_t;

/* Moves the first post of s before the local actions of its step (after
 * the step's waits): a flag that says "my data is in the slot" before it
 * is. */
static void post_first(xccl_sched_t *s)
{
    for (size_t st = 0; st < s->nsteps; st++) {
        const size_t begin = s->step_start[st];
        const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        for (size_t i = begin; i < end; i++) {
            if (XCCL_ACT_POST == s->acts[i].kind) {
                size_t to = begin;
                while (to < i && XCCL_ACT_WAIT == s->acts[to].kind) {
                    to++;
                }
                const xccl_action_t post = s->acts[i];
                memmove(&s->acts[to + 1], &s->acts[to], (i - to) * sizeof(post));
                s->acts[to] = post;
                return;
            }
        }
    }
}

/* A wait for flag 1, for sched_drop: the entry barrier of the schedules
 * planted_bugs_fail runs (each rank posts 1 once its data is in its slot;
 * they wait for this call's flags, len 0, so drop_entry_wait finds none). */
static int drop_flag1_wait(const xccl_sched_t *s, size_t st, const xccl_action_t *a, void *ctx)
{
    (void) s, (void) st, (void) ctx;
    return XCCL_ACT_WAIT == a->kind && 1 == a->idx;
}

/* Sizes of SEND and RECV of a call at p, in bytes. */
static void call_bytes(const call_t *k, int p, size_t *sb, size_t *rb)
{
    const size_t es = ek_size(k->ek);
    switch (k->coll) {
    case C_AR: case C_AR_SMALL: *sb = *rb = k->n * es; break;
    case C_RS: *sb = (size_t) p * k->n * es; *rb = k->in_place ? *sb : k->n * es; break;
    case C_AG: *sb = k->n; *rb = (size_t) p * k->n; break;
    case C_A2A: *sb = *rb = (size_t) p * k->n; break;
    default: *sb = 0; *rb = k->n; break;
    }
}

static int build(const call_t *k, xccl_sched_t *s, int r, int p, size_t slot)
{
    const size_t es = ek_size(k->ek);
    size_t counts[MAXR];
    for (int q = 0; q < p; q++) {
        counts[q] = k->n;
    }
    xccl_sched_init(s, r, p, C_AR == k->coll || C_AR_SMALL == k->coll || C_RS == k->coll ? es : 1);
    s->slot_cap = slot;
    switch (k->coll) {
    case C_AR: return k->mesh ? xccl_build_allreduce_mesh(s, k->n, k->in_place) : xccl_build_allreduce_shm(s, k->n);
    case C_AR_SMALL: return xccl_build_allreduce_shm_small(s, k->n);
    case C_RS: return k->mesh ? xccl_build_reduce_scatter_mesh(s, counts, k->in_place)
                              : xccl_build_reduce_scatter_shm(s, counts, k->in_place);
    case C_AG: return k->mesh ? xccl_build_allgather_mesh(s, k->n) : xccl_build_allgather_shm(s, k->n);
    case C_A2A: return k->mesh ? xccl_build_alltoall_mesh(s, k->n, k->in_place)
                               : xccl_build_alltoall_shm(s, k->n, k->in_place);
    default:
        /* over CMA both forms the component runs (the plain mesh below 8
         * MiB, the split from there: the root writes a share of each
         * reader's RECV), by the parity of size + root (every root
         * meets both) */
        if (USE_MESH_CMA == k->mesh && (k->n + (size_t) k->root) % 2) {
            return xccl_build_bcast_mesh_split(s, k->n, k->root);
        }
        return k->mesh ? xccl_build_bcast_mesh(s, k->n, k->root) : xccl_build_bcast_shm(s, k->n, k->root);
    }
}

/* Fills the user buffers of rank r for call k. */
static void fill(const call_t *k, int r, int p, unsigned char *sbuf, unsigned char *rbuf, size_t rb)
{
    memset(rbuf, 0xEE, rb);
    switch (k->coll) {
    case C_AR: case C_AR_SMALL: ek_fill(k->ek, k->call, r, sbuf, 0, k->n); break;
    case C_RS: ek_fill(k->ek, k->call, r, sbuf, 0, (size_t) p * k->n); break;
    case C_AG:
        for (size_t i = 0; i < k->n; i++) {
            sbuf[i] = in_byte(k->call, r, 0, i);
        }
        break;
    case C_A2A:
        for (int to = 0; to < p; to++) {
            for (size_t i = 0; i < k->n; i++) {
                sbuf[(size_t) to * k->n + i] = in_byte(k->call, r, to, i);
            }
        }
        break;
    default:
        for (size_t i = 0; r == k->root && i < k->n; i++) {
            rbuf[i] = in_byte(k->call, k->root, 0, i);
        }
        break;
    }
}

/* 0 if rank r's result is right, else 1 with a message. */
static int verify(ctl_t *c, const call_t *k, int r, int p, const unsigned char *rbuf, const char *what)
{
    const size_t es = ek_size(k->ek);
    switch (k->coll) {
    case C_AR: case C_AR_SMALL: case C_RS: {
        const size_t n = k->n, off = C_RS == k->coll ? (size_t) r * n : 0;
        unsigned char *want = malloc(n * es + 1);
        ek_reference(k->ek, k->call, p, want, off, n);
        const int bad = 0 != memcmp(want, rbuf, n * es);
        free(want);
        return bad ? failf(c, r, "%s: wrong result", what) : 0;
    }
    case C_AG:
        for (int q = 0; q < p; q++) {
            for (size_t i = 0; i < k->n; i++) {
                if (rbuf[(size_t) q * k->n + i] != in_byte(k->call, q, 0, i)) {
                    return failf(c, r, "%s: block %d byte %zu wrong", what, q, i);
                }
            }
        }
        return 0;
    case C_A2A:
        for (int q = 0; q < p; q++) {
            for (size_t i = 0; i < k->n; i++) {
                if (rbuf[(size_t) q * k->n + i] != in_byte(k->call, q, r, i)) {
                    return failf(c, r, "%s: block from %d byte %zu wrong", what, q, i);
                }
            }
        }
        return 0;
    default:
        for (size_t i = 0; i < k->n; i++) {
            if (rbuf[i] != in_byte(k->call, k->root, 0, i)) {
                return failf(c, r, "%s: byte %zu wrong", what, i);
            }
        }
        return 0;
    }
}

/* Rank r runs call k on seg, with bug planted on the ranks it concerns.
 * slow: this rank starts late (and copies slowly into its slot for
 * BUG_POST_BEFORE_COPY).  0 ok, 1 failed (message in c). */
static int run_call(ctl_t *c, xccl_segment_t *seg, int r, int p, const call_t *k, bug_t bug, int slow)
{
    char what[160];
    static const char *const use[] = { "shm", "mesh(mirror)", "mesh(cma)" };
    snprintf(what, sizeof(what), "%s %s p=%d n=%zu in_place=%d root=%d ek=%d call=%u", coll_names[k->coll],
             use[k->mesh], p, k->n, k->in_place, k->root, k->ek, k->call);
    size_t sb, rb;
    call_bytes(k, p, &sb, &rb);
    unsigned char *sbuf = malloc(sb + 1), *rbuf = malloc(rb + 1);
    xccl_sched_t s;
    const size_t slot = xccl_segment_slot_bytes(seg);
    if (0 != build(k, &s, r, p, slot)) {
        return failf(c, r, "%s: build failed", what);
    }
    if (!k->mesh && (s.max_xfers != 0 || s.slot_bytes > slot)) {
        return failf(c, r, "%s: %zu transfers, slot %zu of %zu", what, s.max_xfers, s.slot_bytes, slot);
    }
    if (BUG_NO_ENTRY_WAIT == bug) {
        (void) sched_drop(&s, drop_flag1_wait, NULL);
    } else if (BUG_POST_BEFORE_COPY == bug && slow) {
        post_first(&s);
    }
    fill(k, r, p, sbuf, rbuf, rb);
    if (k->in_place && (C_AR == k->coll || C_AR_SMALL == k->coll || C_RS == k->coll || C_A2A == k->coll)) {
        memcpy(rbuf, sbuf, sb);
    } else if (k->in_place && C_AG == k->coll) {
        memcpy(rbuf + (size_t) r * k->n, sbuf, sb);
    }

    xccl_level_peer_t sp;
    xccl_level_peer_init(&sp, seg, NULL, p);
    void *bufs[XCCL_NBUF] = { k->in_place ? (void *) rbuf : sbuf, rbuf, NULL, xccl_segment_slot(seg, r) };
    void *scratch = NULL;
    if (USE_MESH_MIRROR == k->mesh) {
        /* mirror: SEND, RECV, SCRATCH at fixed offsets of every slot */
        const size_t ab = (sb + 63) / 64 * 64, rbb = (rb + 63) / 64 * 64;
        const size_t roff = k->in_place ? 0 : ab, xoff = roff + rbb;
        if (xoff + s.scratch_bytes > slot || 0 != xccl_level_peer_map(&sp, XCCL_BUF_SEND, 0, k->in_place ? rbb : ab) ||
            0 != xccl_level_peer_map(&sp, XCCL_BUF_RECV, roff, rbb) ||
            0 != xccl_level_peer_map(&sp, XCCL_BUF_SCRATCH, xoff, s.scratch_bytes)) {
            return failf(c, r, "%s: does not fit the slot in mirror mode", what);
        }
        for (int b = 0; b < XCCL_BUF_SLOT; b++) {
            bufs[b] = xccl_level_peer_own(&sp, (xccl_buf_id_t) b);
        }
    } else {
        scratch = malloc(s.scratch_bytes + 1);
        bufs[XCCL_BUF_SCRATCH] = scratch;
    }
    if (slow) {
        usleep(40000);         /* the others reach their waits first */
    }
    /* mirror mode: copy in before the call (the exit barrier of the call
     * before guarantees nobody still reads this slot) */
    if (USE_MESH_MIRROR == k->mesh) {
        /* (a call before without its exit barrier: the peers done with it
         * first, as xccl_exec_set_owed's settlement would wait) */
        for (int q = 0; owed.open && q < p; q++) {
            while (q != r && 1 != sp.peer.test(sp.peer.ctx, q, owed.seq, owed.val)) {
                sched_yield();
            }
        }
        owed.open = 0;
        memcpy(bufs[XCCL_BUF_SEND], k->in_place ? rbuf : sbuf, k->in_place ? rb : sb);
        if (C_BC == k->coll && r == k->root) {
            memcpy(bufs[XCCL_BUF_RECV], rbuf, rb);
        }
    }
    seqless_t wrap = { { NULL, seqless_buf, seqless_post, seqless_test, NULL, NULL }, &sp };
    wrap.peer.ctx = &wrap;
    copy_ctx_t cc = { xccl_segment_slot(seg, r), slot, slow && BUG_POST_BEFORE_COPY == bug };
    const xccl_peer_t *peer = BUG_SEQLESS == bug ? &wrap.peer : &sp.peer;
    const int before = xfers;
    if (USE_MESH_CMA == k->mesh) {
        /* the peers read this rank's own buffers: publish them first */
        if (C_AG == k->coll && k->in_place) {
            bufs[XCCL_BUF_SEND] = rbuf + (size_t) r * k->n;
        }
        xccl_level_peer_cma(&sp, 1);
        xccl_level_peer_publish(&sp, 1000u + k->call, bufs);
    }
    int rc = exec_sched(&s, bufs, peer, 1000u + k->call, ek_fn(k->ek), BUG_POST_BEFORE_COPY == bug ? &cc : NULL);
    if (USE_MESH_MIRROR == k->mesh && 0 == rc) {
        memcpy(rbuf, bufs[XCCL_BUF_RECV], rb);    /* copy out */
    }
    int bad = 0;
    if (rc < 0) {
        bad = failf(c, r, "%s: execution failed (%d)", what, rc);
    } else if (xfers != before) {
        bad = failf(c, r, "%s: %d sends/receives on one node", what, xfers - before);
    } else {
        bad = verify(c, k, r, p, rbuf, what);
    }
    xccl_sched_fini(&s);
    free(sbuf);
    free(rbuf);
    free(scratch);
    return bad;
}

/* ------------------------------------------------------------------------ */
/* Segment basics                                                           */
/* ------------------------------------------------------------------------ */

START_TEST(segment_layout_and_flags)
{
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        xccl_segment_t *a, *b;
        xccl_segment_desc_t d;
        ck_assert_int_eq(xccl_segment_create((xccl_segment_kind_t) kind, 3, 0, 1000, &a, &d), 0);
        ck_assert_int_eq(xccl_segment_kind(a), kind);
        ck_assert_int_eq(xccl_segment_desc_kind(&d), kind);
        ck_assert_int_eq(xccl_segment_attach(&d, 2, &b), 0);
        ck_assert_int_eq(xccl_segment_nranks(b), 3);
        ck_assert_int_eq(xccl_segment_rank(b), 2);
        ck_assert_uint_eq(xccl_segment_slot_bytes(b), 1000);
        ck_assert(!xccl_segment_all_attached(a));
        /* a rank attaches once */
        xccl_segment_t *again;
        ck_assert_int_eq(xccl_segment_attach(&d, 2, &again), -EBUSY);
        ck_assert_int_eq(xccl_segment_attach(&d, 3, &again), -EINVAL);
        /* slots: aligned, disjoint, the same memory through both mappings */
        for (int r = 0; r < 3; r++) {
            unsigned char *s = xccl_segment_slot(a, r);
            ck_assert_uint_eq((uintptr_t) s % XCCL_SEGMENT_SLOT_ALIGN, 0);
            memset(s, 0x10 + r, 1000);
        }
        for (int r = 0; r < 3; r++) {
            const unsigned char *s = xccl_segment_slot(b, r);
            for (size_t i = 0; i < 1000; i++) {
                ck_assert_uint_eq(s[i], 0x10 + r);
            }
        }
        ck_assert_ptr_null(xccl_segment_slot(a, 3));
        /* latency lines and small areas (the component's latency path):
         * zero at creation, aligned, shared, apart from each other, from
         * the flags (tested below: never posted) and from the slots */
        for (int r = 0; r < 3; r++) {
            const unsigned char *l = xccl_segment_line(b, r), *sm = xccl_segment_small(b, r);
            ck_assert_uint_eq((uintptr_t) l % 64, 0);
            ck_assert_uint_eq((uintptr_t) sm % XCCL_SEGMENT_SLOT_ALIGN, 0);
            for (size_t i = 0; i < XCCL_SEGMENT_LINE_BYTES; i++) {
                ck_assert_uint_eq(l[i], 0);
            }
            for (size_t i = 0; i < XCCL_SEGMENT_SMALL_BYTES; i++) {
                ck_assert_uint_eq(sm[i], 0);
            }
        }
        for (int r = 0; r < 3; r++) {
            memset(xccl_segment_line(a, r), 0x20 + r, XCCL_SEGMENT_LINE_BYTES);
            memset(xccl_segment_small(a, r), 0x30 + r, XCCL_SEGMENT_SMALL_BYTES);
        }
        for (int r = 0; r < 3; r++) {
            const unsigned char *l = xccl_segment_line(b, r), *sm = xccl_segment_small(b, r);
            const unsigned char *slot = xccl_segment_slot(b, r);
            for (size_t i = 0; i < XCCL_SEGMENT_LINE_BYTES; i++) {
                ck_assert_uint_eq(l[i], 0x20 + r);
            }
            for (size_t i = 0; i < XCCL_SEGMENT_SMALL_BYTES; i++) {
                ck_assert_uint_eq(sm[i], 0x30 + r);
            }
            for (size_t i = 0; i < 1000; i++) {
                ck_assert_uint_eq(slot[i], 0x10 + r);
            }
        }
        ck_assert_ptr_null(xccl_segment_line(a, 3));
        ck_assert_ptr_null(xccl_segment_small(a, 3));
        ck_assert_ptr_null(xccl_segment_small(a, -1));
        ck_assert_int_eq(xccl_segment_pid(b, 0), getpid());
        ck_assert_int_eq(xccl_segment_pid(b, 1), 0);         /* not attached */
        /* flags: never posted, then (seq, val) of the same call, earlier
         * and later calls, serial wrap */
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0x80000001u, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_post(a, 7, 3), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 7, 3), 1);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 7, 2), 1);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 7, 4), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 8, 1), 0);  /* a later call: not yet */
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 6, 100), 1); /* an earlier call: passed */
        ck_assert_int_eq(xccl_segment_flag_test(b, 2, 7, 0), 0);  /* rank 2 never posted */
        ck_assert_int_eq(xccl_segment_flag_post(a, 0xFFFFFFFFu, 5), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0, 1), 0);  /* the next call, across the wrap */
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0xFFFFFFFEu, 9), 1);
        ck_assert_int_eq(xccl_segment_flag_post(a, 0, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0xFFFFFFFFu, 99), 1);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0, 0), 1);
        ck_assert_int_eq(xccl_segment_flag_post(a, 1, UINT32_MAX), -EINVAL);
        /* the flags are alone on their cache lines */
        ck_assert_int_eq(xccl_segment_flag_post(b, 1, 1), 0);
        ck_assert_int_eq(xccl_segment_flag_test(a, 2, 1, 1), 1);
        ck_assert_int_eq(xccl_segment_flag_test(a, 0, 1, 1), 0);   /* rank 0's (0, 0) is of an earlier call */
        xccl_segment_detach(b);
        xccl_segment_detach(a);
    }
}
END_TEST

/* Reuse: a segment every user released is claimed by one
 * process, reset to what creation leaves, and rejoined by the others that
 * kept it mapped, at any rank; it cannot be claimed while any user holds
 * it. */
START_TEST(segment_reuse)
{
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        xccl_segment_t *a, *b, *other;
        xccl_segment_desc_t d, da, dother;
        ck_assert_int_eq(xccl_segment_create((xccl_segment_kind_t) kind, 2, 0, 1000, &a, &d), 0);
        ck_assert_int_eq(xccl_segment_attach(&d, 1, &b), 0);
        ck_assert_int_eq(xccl_segment_create((xccl_segment_kind_t) kind, 2, 0, 1000, &other, &dother), 0);
        /* the descriptors name the segment, in every process that maps it */
        xccl_segment_desc_of(b, &da);
        ck_assert(xccl_segment_desc_same(&d, &da));
        ck_assert(xccl_segment_desc_names(&da, a));
        ck_assert(!xccl_segment_desc_names(&dother, a));
        ck_assert(!xccl_segment_desc_same(&d, &dother));
        xccl_segment_desc_t zero;
        memset(&zero, 0, sizeof(zero));
        ck_assert(!xccl_segment_desc_same(&zero, &zero));
        /* a use: flags of late calls, lines, publications */
        const void *addrs[1] = { &kind };
        ck_assert_int_eq(xccl_segment_flag_post(a, 900, 3), 0);
        ck_assert_int_eq(xccl_segment_flag_post(b, 900, 1), 0);
        memset(xccl_segment_line(a, 0), 0x55, XCCL_SEGMENT_LINE_BYTES);
        memset(xccl_segment_line(b, 1), 0x66, XCCL_SEGMENT_LINE_BYTES);
        ck_assert_int_eq(xccl_segment_publish(b, 900, 1, addrs), 0);
        memset(xccl_segment_slot(a, 0), 0x77, 1000);
        /* held: by both, then by one */
        ck_assert_int_eq(xccl_segment_claim(a, 0), -EBUSY);
        xccl_segment_release(a);
        ck_assert_int_eq(xccl_segment_claim(b, 1), -EBUSY);
        ck_assert_int_eq(xccl_segment_claim(a, 0), -EBUSY);
        xccl_segment_release(b);
        /* free: claimed as rank 1 by the process that was rank 0 */
        ck_assert_int_eq(xccl_segment_claim(a, 2), -EINVAL);
        ck_assert_int_eq(xccl_segment_claim(a, 1), 0);
        ck_assert_int_eq(xccl_segment_rank(a), 1);
        ck_assert_int_eq(xccl_segment_claim(b, 0), -EBUSY);      /* one claim wins */
        /* as created: the old calls' flags, lines and publications gone */
        for (int r = 0; r < 2; r++) {
            ck_assert_int_eq(xccl_segment_flag_test(a, r, 1, 0), 0);
            const unsigned char *l = xccl_segment_line(b, r);
            for (size_t i = 0; i < XCCL_SEGMENT_LINE_BYTES; i++) {
                ck_assert_uint_eq(l[i], 0);
            }
        }
        uint64_t addr = 0;
        ck_assert_int_eq(xccl_segment_published(a, 1, 900, 0, &addr), -ESTALE);
        ck_assert_int_eq(xccl_segment_pid(b, 0), 0);              /* rank 0 not rejoined yet */
        ck_assert_int_eq(xccl_segment_pid(b, 1), getpid());
        ck_assert(!xccl_segment_all_attached(a));
        /* the other rejoins as rank 0, once */
        ck_assert_int_eq(xccl_segment_rejoin(b, 0), 0);
        ck_assert_int_eq(xccl_segment_rejoin(b, 0), -EBUSY);
        ck_assert_int_eq(xccl_segment_rejoin(b, 2), -EINVAL);
        ck_assert(xccl_segment_all_attached(a));
        /* flags of the new use's first calls, at the new ranks */
        ck_assert_int_eq(xccl_segment_flag_post(a, 1, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 1, 1, 0), 1);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 1, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_post(b, 1, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_test(a, 0, 1, 0), 1);
        /* the slots are the same memory still */
        ck_assert_uint_eq(((unsigned char *) xccl_segment_slot(b, 0))[999], 0x77);
        /* held again by its two new users */
        ck_assert_int_eq(xccl_segment_claim(b, 0), -EBUSY);
        xccl_segment_release(a);
        xccl_segment_release(b);
        ck_assert_int_eq(xccl_segment_claim(b, 0), 0);
        xccl_segment_detach(b);
        xccl_segment_detach(a);
        xccl_segment_detach(other);
    }
}
END_TEST

/* Pages of [a, a + len) mapped in this process (/proc/self/pagemap's
 * present bit, readable without privileges), or -1 where it cannot tell. */
static long pages_present(const void *a, size_t len)
{
    const long pg = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/pagemap", "rb");
    if (NULL == f) {
        return -1;
    }
    long n = 0;
    for (uintptr_t v = (uintptr_t) a; v < (uintptr_t) a + len; v += (uintptr_t) pg) {
        uint64_t e;
        if (0 != fseek(f, (long) (v / (uintptr_t) pg * 8), SEEK_SET) || 1 != fread(&e, 8, 1, f)) {
            fclose(f);
            return -1;
        }
        n += (long) (e >> 63);
    }
    fclose(f);
    return n;
}

/* xccl_segment_prefault_small maps a small area's pages here (allocating the
 * ones nobody made), and leaves its data and the other areas alone. */
START_TEST(small_area_prefault)
{
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        xccl_segment_t *a, *b;
        xccl_segment_desc_t d;
        ck_assert_int_eq(xccl_segment_create((xccl_segment_kind_t) kind, 2, 0, 1000, &a, &d), 0);
        ck_assert_int_eq(xccl_segment_attach(&d, 1, &b), 0);
        const size_t n = XCCL_SEGMENT_SMALL_BYTES / (size_t) sysconf(_SC_PAGESIZE);
        unsigned char *a0 = xccl_segment_small(a, 0), *b0 = xccl_segment_small(b, 0), *b1 = xccl_segment_small(b, 1);
        if (pages_present(a0, XCCL_SEGMENT_SMALL_BYTES) < 0) {
            fprintf(stderr, "small_area_prefault: /proc/self/pagemap unreadable: not checked\n");
            ck_assert_int_eq(xccl_segment_prefault_small(a, 0), 0);
        } else {
            ck_assert_int_eq(pages_present(a0, XCCL_SEGMENT_SMALL_BYTES), 0); /* nothing touched */
            a0[5] = 0x5a;                                      /* one page made by its rank */
            ck_assert_int_eq(pages_present(a0, XCCL_SEGMENT_SMALL_BYTES), 1);
            ck_assert_int_eq(xccl_segment_prefault_small(a, 0), 0);
            ck_assert_int_eq(pages_present(a0, XCCL_SEGMENT_SMALL_BYTES), (long) n);
            ck_assert_int_eq(pages_present(b0, XCCL_SEGMENT_SMALL_BYTES), 0); /* another mapping */
            ck_assert_int_eq(xccl_segment_prefault_small(b, 0), 0);
            ck_assert_int_eq(pages_present(b0, XCCL_SEGMENT_SMALL_BYTES), (long) n);
            ck_assert_int_eq(pages_present(b1, XCCL_SEGMENT_SMALL_BYTES), 0); /* the other area */
        }
        for (size_t i = 0; i < XCCL_SEGMENT_SMALL_BYTES; i++) {
            ck_assert_uint_eq(b0[i], 5 == i ? 0x5a : 0);
        }
        ck_assert_int_eq(xccl_segment_prefault_small(b, 2), -EINVAL);
        xccl_segment_detach(b);
        xccl_segment_detach(a);
    }
}
END_TEST

/* xccl_segment_prefault_slots maps the first bytes of this rank's own slot
 * here, in whole steps up to the slot's end, once; the data and the other
 * slots stay as they were. */
START_TEST(slot_prefault)
{
    const size_t step = XCCL_SEGMENT_PREFAULT_STEP, page = (size_t) sysconf(_SC_PAGESIZE);
    const size_t slot = 3 * step + 3 * page;   /* the last step short */
    xccl_segment_t *a, *b;
    xccl_segment_desc_t d;
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_MEMFD, 2, 0, slot, &a, &d), 0);
    ck_assert_int_eq(xccl_segment_attach(&d, 1, &b), 0);
    unsigned char *a0 = xccl_segment_slot(a, 0), *a1 = xccl_segment_slot(a, 1);
    unsigned char *b0 = xccl_segment_slot(b, 0), *b1 = xccl_segment_slot(b, 1);
    b1[7] = 0x77;
    if (pages_present(a0, slot) < 0) {
        fprintf(stderr, "slot_prefault: /proc/self/pagemap unreadable: not checked\n");
        ck_assert_int_eq(xccl_segment_prefault_slots(b, 1), 0);
    } else {
        ck_assert_int_eq(pages_present(b1, slot), 1);
        ck_assert_int_eq(xccl_segment_prefault_slots(b, 1), 0);         /* one step */
        ck_assert_int_eq(pages_present(b1, step), (long) (step / page));
        ck_assert_int_eq(pages_present(b1 + step, slot - step), 0);
        ck_assert_int_eq(pages_present(b0, slot), 0);                    /* a peer's slot */
        ck_assert_int_eq(pages_present(a1, slot), 0);                    /* another mapping */
        ck_assert_int_eq(xccl_segment_prefault_slots(b, step), 0);       /* no more */
        ck_assert_int_eq(pages_present(b1 + step, slot - step), 0);
        ck_assert_int_eq(xccl_segment_prefault_slots(b, 2 * step + 1), 0);
        ck_assert_int_eq(pages_present(b1, slot), (long) (3 * step / page));
        ck_assert_int_eq(xccl_segment_prefault_slots(b, SIZE_MAX), 0);   /* to the slot's end */
        ck_assert_int_eq(pages_present(b1, slot), (long) (slot / page));
        ck_assert_int_eq(pages_present(b0, slot), 0);
        ck_assert_int_eq(xccl_segment_prefault_slots(a, slot), 0);       /* rank 0's own, there */
        ck_assert_int_eq(pages_present(a0, slot), (long) (slot / page));
    }
    for (size_t i = 0; i < slot; i++) {
        ck_assert_uint_eq(a1[i], 7 == i ? 0x77 : 0);
        ck_assert_uint_eq(a0[i], 0);
    }
    xccl_segment_detach(b);
    xccl_segment_detach(a);
}
END_TEST

START_TEST(segment_errors)
{
    xccl_segment_t *a;
    xccl_segment_desc_t d;
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_AUTO, 0, 0, 100, &a, &d), -EINVAL);
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 2, 100, &a, &d), -EINVAL);
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 0, 0, &a, &d), -EINVAL);
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 0, SIZE_MAX / 2, &a, &d), -EOVERFLOW);
    /* garbage blob */
    xccl_segment_desc_t junk;
    memset(&junk, 0x5A, sizeof(junk));
    ck_assert_int_eq(xccl_segment_attach(&junk, 1, &a), -EINVAL);
    /* the blob of a segment whose creator is gone (and whose memory with it) */
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        ctl_t *c = ctl_new();
        pid_t pid = fork();
        if (0 == pid) {
            xccl_segment_t *s;
            _exit(xccl_segment_create((xccl_segment_kind_t) kind, 2, 0, 4096, &s, &c->desc) ? 1 : 0);
        }
        int st;
        waitpid(pid, &st, 0);
        ck_assert(WIFEXITED(st) && 0 == WEXITSTATUS(st));
        ck_assert_int_eq(xccl_segment_attach(&c->desc, 1, &a), -ESTALE);
        munmap(c, sizeof(*c));
    }
    /* a blob with the right numbers but another key: not that segment */
    xccl_segment_t *s;
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_MEMFD, 2, 0, 4096, &s, &d), 0);
    xccl_segment_desc_t other = d;
    other.bytes[XCCL_SEGMENT_DESC_BYTES - 20] ^= 0xFF; /* inside the key */
    other.bytes[sizeof(uint32_t) * 6 + 16 + 3] ^= 0x01;
    ck_assert_int_ne(xccl_segment_attach(&other, 1, &a), 0);
    xccl_segment_detach(s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Collectives on the segment                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
    int mesh;                  /* mesh builders in mirror mode */
    int delays;                /* random small delays between calls */
} calls_arg_t;

/* The calls every rank makes, the same list on all (call numbers rise:
 * one segment, successive calls). */
static int make_calls(int p, int mesh, call_t *out)
{
    /* "large": past the slot (many chunks) */
    const size_t red_sizes[] = { 0, 1, 7, (size_t) p * 3 + 1, 1000, 3 * SLOT / 4 + 123 };
    const size_t byte_sizes[] = { 0, 1, 13, 1000, 3 * SLOT + 77 };
    int n = 0;
    unsigned call = 1;
    for (int coll = 0; coll < NC; coll++) {
        if ((mesh && C_AR_SMALL == coll) ||
            (USE_MESH_CMA == mesh && (C_AR == coll || C_RS == coll))) {    /* CMA: copies only */
            continue;
        }
        const int red = C_AR == coll || C_AR_SMALL == coll || C_RS == coll;
        const size_t *sz = red ? red_sizes : byte_sizes;
        const int nsz = red ? 6 : 5;
        for (int si = 0; si < nsz; si++) {
            size_t size = sz[si];
            if (USE_MESH_MIRROR == mesh) {
                /* mirror mode: everything in the slot */
                const size_t most = red ? 300 : 400;
                size = size > most ? most : size;
            } else if (C_A2A == coll && si >= 4) {
                size = SLOT / 2 + 77;                  /* p blocks: several chunks */
            }
            for (int in_place = 0; in_place < 2; in_place++) {
                /* (mirror mode places every rank's SEND alike: not the
                 * in-place allgather's RECV + r * block) */
                if (in_place && (C_BC == coll || (C_AG == coll && USE_MESH_CMA != mesh))) {
                    continue;
                }
                for (int ek = EK_I32; ek <= (red ? EK_FLT : EK_I32); ek++) {
                    const int roots = C_BC == coll ? p : 1;
                    for (int root = 0; root < roots; root++) {
                        call_t k = { (coll_t) coll, mesh, size, in_place, root, ek, call++ };
                        out[n++] = k;
                    }
                }
            }
        }
    }
    return n;
}

#define MAXCALLS 512

static int calls_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *argp)
{
    const calls_arg_t *arg = argp;
    static call_t calls[MAXCALLS];
    const int n = make_calls(p, arg->mesh, calls);
    unsigned rng = 12345u + (unsigned) r * 7919u;
    for (int i = 0; i < n; i++) {
        if (arg->delays) {
            rng = rng * 1103515245u + 12345u;
            if ((rng >> 16) % 4 == 0) {
                usleep((rng >> 8) % 300);
            }
        }
        if (run_call(c, seg, r, p, &calls[i], BUG_NONE, 0)) {
            return 1;
        }
        atomic_store(&c->progress[r], i + 1);
    }
    return 0;
}

START_TEST(shm_builders_on_segment)
{
    const int p = _i;
    char why[400];
    const calls_arg_t arg = { 0, 1 };
    const int failed = run_ranks(p, XCCL_SEGMENT_AUTO, SLOT, calls_body, &arg, 300, why, sizeof(why));
    ck_assert_msg(0 == failed, "p=%d: %d ranks failed; %s", p, failed, why);
}
END_TEST

START_TEST(mesh_builders_mirror_mode)
{
    const int p = _i;
    char why[400];
    const calls_arg_t arg = { USE_MESH_MIRROR, 0 };
    const int failed = run_ranks(p, XCCL_SEGMENT_AUTO, SLOT, calls_body, &arg, 300, why, sizeof(why));
    ck_assert_msg(0 == failed, "p=%d: %d ranks failed; %s", p, failed, why);
}
END_TEST

/* The mesh allgather, alltoall and bcast with cross-memory attach: the
 * peers' own buffers read with process_vm_readv (and, in the split bcast,
 * written with process_vm_writev), single copies, messages much larger
 * than the slot. */
START_TEST(mesh_builders_cma)
{
    const int p = _i;
    char why[400];
    const calls_arg_t arg = { USE_MESH_CMA, 1 };
    const int failed = run_ranks(p, XCCL_SEGMENT_AUTO, SLOT, calls_body, &arg, 300, why, sizeof(why));
    ck_assert_msg(0 == failed, "p=%d: %d ranks failed; %s", p, failed, why);
}
END_TEST

/* A reduction cannot read a peer through CMA: the execution fails (it is
 * never run wrong). */
static int cma_reduce_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *arg)
{
    (void) arg;
    call_t k = { C_AR, USE_MESH_CMA, 100, 0, 0, EK_I32, 1 };
    if (0 == run_call(c, seg, r, p, &k, BUG_NONE, 0) || NULL == strstr(c->msg[r], "execution failed")) {
        return failf(c, r, "allreduce mesh over CMA did not fail: %s", c->msg[r]);
    }
    c->msg[r][0] = '\0';
    return 0;
}

START_TEST(cma_refuses_reductions)
{
    char why[400];
    ck_assert_msg(0 == run_ranks(2, XCCL_SEGMENT_AUTO, SLOT, cma_reduce_body, NULL, 30, why, sizeof(why)), "%s", why);
}
END_TEST

/* The same on a SysV segment, a few p. */
START_TEST(shm_builders_sysv)
{
    const int ps[] = { 2, 5 };
    char why[400];
    const calls_arg_t arg = { 0, 0 };
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        const int failed = run_ranks(ps[i], XCCL_SEGMENT_SYSV, SLOT, calls_body, &arg, 300, why, sizeof(why));
        ck_assert_msg(0 == failed, "p=%d: %d ranks failed; %s", ps[i], failed, why);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Planted bugs on real memory                                              */
/* ------------------------------------------------------------------------ */

typedef struct {
    bug_t bug;
    coll_t coll;
} bug_arg_t;

/* Two successive calls (the stale slot then holds the first call's data);
 * in the second the last rank starts late.  With the bug, a rank reads a
 * slot before its owner wrote it. */
static int bug_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *argp)
{
    const bug_arg_t *a = argp;
    const size_t n = C_AR == a->coll || C_AR_SMALL == a->coll ? 1000 : 999;
    call_t k1 = { a->coll, 0, n, 0, 0, EK_I32, 1 }, k2 = k1;
    k2.call = 2;
    if (run_call(c, seg, r, p, &k1, BUG_NONE, 0)) {
        return 1;
    }
    return run_call(c, seg, r, p, &k2, a->bug, r == p - 1);
}

START_TEST(planted_bugs_fail)
{
    static const bug_t bugs[] = { BUG_NONE, BUG_NO_ENTRY_WAIT, BUG_SEQLESS, BUG_POST_BEFORE_COPY };
    static const char *const names[] = { "none", "entry barrier removed", "flags without sequence numbers",
                                         "post before the copy into the slot" };
    const coll_t colls[] = { C_AR, C_AR_SMALL, C_AG };
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
        for (size_t b = 0; b < sizeof(bugs) / sizeof(bugs[0]); b++) {
            for (int p = 2; p <= 3; p++) {
                char why[400];
                const bug_arg_t arg = { bugs[b], colls[ci] };
                const int failed = run_ranks(p, XCCL_SEGMENT_AUTO, SLOT, bug_body, &arg, 60, why, sizeof(why));
                fprintf(stderr, "planted %s, %s, p=%d: %d ranks failed%s%s\n", coll_names[colls[ci]], names[b], p,
                        failed, failed ? ": " : "", failed ? why : "");
                if (BUG_NONE == bugs[b]) {
                    ck_assert_msg(0 == failed, "intact: %s", why);
                } else {
                    ck_assert_msg(failed > 0, "%s, %s, p=%d: not caught", coll_names[colls[ci]], names[b], p);
                }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* kill -9                                                                  */
/* ------------------------------------------------------------------------ */

/* Names in /dev/shm that contain "xccl" (others' jobs may come and go). */
static int dev_shm_xccl(void)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    if (NULL == d) {
        return 0;
    }
    for (struct dirent *e; NULL != (e = readdir(d));) {
        n += NULL != strstr(e->d_name, "xccl");
    }
    closedir(d);
    return n;
}

/* Whether process pid maps anything from /dev/shm; sets *memfd if it maps
 * the segment's memfd. */
static int maps_dev_shm(pid_t pid, int *memfd)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int) pid);
    FILE *f = fopen(path, "r");
    int n = 0;
    if (NULL == f) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        n += NULL != strstr(line, "/dev/shm/");
        *memfd |= NULL != strstr(line, "/memfd:xccl_shm");
    }
    fclose(f);
    return n;
}

/* SysV segments created by pid (column cpid of /proc/sysvipc/shm). */
static int sysv_of(pid_t pid)
{
    FILE *f = fopen("/proc/sysvipc/shm", "r");
    char line[512];
    int n = 0;
    if (NULL == f) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        long key, id, perms, size, cpid;
        if (5 == sscanf(line, "%ld %ld %lo %ld %ld", &key, &id, &perms, &size, &cpid) && cpid == pid) {
            n++;
        }
    }
    fclose(f);
    return n;
}

/* Endless allreduces; a rank whose peer is gone fails its wait: exit 3. */
static int endless_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *arg)
{
    (void) arg;
    for (unsigned i = 1;; i++) {
        call_t k = { C_AR_SMALL, 0, 100, 0, 0, EK_I32, i };
        if (run_call(c, seg, r, p, &k, BUG_NONE, 0)) {
            return strstr(c->msg[r], "execution failed") ? 3 : 1;
        }
        atomic_store(&c->progress[r], (int) i);
    }
}

START_TEST(kill9_mid_call)
{
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        const int p = 3, before = dev_shm_xccl();
        ctl_t *c = ctl_new();
        pid_t pids[MAXR];
        for (int r = 0; r < p; r++) {
            pids[r] = fork();
            if (0 == pids[r]) {
                child(c, (xccl_segment_kind_t) kind, SLOT, r, p, endless_body, NULL);
            }
        }
        /* wait until they run calls, look at them, kill rank 1 */
        while (atomic_load(&c->progress[0]) < 20 || atomic_load(&c->progress[2]) < 20) {
            usleep(1000);
        }
        int memfd = 0, devshm = 0;
        for (int r = 0; r < p; r++) {
            devshm += maps_dev_shm(pids[r], &memfd);
        }
        ck_assert_int_eq(devshm, 0);
        ck_assert_int_eq(memfd, XCCL_SEGMENT_MEMFD == kind);
        ck_assert_int_eq(dev_shm_xccl(), before);
        if (XCCL_SEGMENT_SYSV == kind) {
            ck_assert_int_eq(sysv_of(pids[0]), 1);       /* there, marked for removal */
        }
        kill(pids[1], SIGKILL);
        /* The survivors notice (memfd: the dead rank's pid is checked; SysV:
         * no liveness check, they spin: killed after a while). */
        int status[MAXR];
        char why[400];
        const int failed = reap(c, pids, p, XCCL_SEGMENT_MEMFD == kind ? 60 : 3, status, why, sizeof(why));
        ck_assert_int_eq(failed, p);
        ck_assert(WIFSIGNALED(status[1]));
        if (XCCL_SEGMENT_MEMFD == kind) {
            for (int r = 0; r < p; r += 2) {
                ck_assert_msg(WIFEXITED(status[r]) && 3 == WEXITSTATUS(status[r]), "rank %d did not notice: %s", r,
                              c->msg[r]);
            }
        }
        ck_assert_int_eq(dev_shm_xccl(), before);
        ck_assert_int_eq(sysv_of(pids[0]), 0);           /* gone with its processes */
        munmap(c, sizeof(*c));
    }
}
END_TEST

/* A creator killed at random moments while it creates and a peer attaches:
 * no name ever, no SysV segment left. */
START_TEST(kill9_during_setup)
{
    const int before = dev_shm_xccl();
    unsigned rng = 99u;
    for (int it = 0; it < 40; it++) {
        ctl_t *c = ctl_new();
        pid_t pid = fork();
        if (0 == pid) {
            for (;;) {
                xccl_segment_t *s, *t;
                xccl_segment_desc_t d;
                if (0 == xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 0, 1 << 20, &s, &d)) {
                    if (0 == xccl_segment_attach(&d, 1, &t)) {
                        memset(xccl_segment_slot(t, 1), 1, 1 << 20);
                        xccl_segment_detach(t);
                    }
                    xccl_segment_detach(s);
                }
                atomic_fetch_add(&c->arrived, 1);
            }
        }
        rng = rng * 1103515245u + 12345u;
        usleep(500 + (rng >> 16) % 5000);
        int memfd = 0;
        ck_assert_int_eq(maps_dev_shm(pid, &memfd), 0);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        ck_assert_int_eq(sysv_of(pid), 0);
        ck_assert_int_eq(dev_shm_xccl(), before);
        munmap(c, sizeof(*c));
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Cross-memory attach                                                      */
/* ------------------------------------------------------------------------ */

static char cma_buf[4096];

static int cma_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *arg)
{
    (void) arg, (void) p;
    for (size_t i = 0; i < sizeof(cma_buf); i++) {
        cma_buf[i] = (char) (r * 11 + i);
    }
    c->addr[r] = (uint64_t) (uintptr_t) cma_buf;
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < 2) {
        usleep(100);
    }
    const int peer = 1 - r;
    int ok = xccl_cma_probe(seg, peer);
    if (1 != ok) {
        return failf(c, r, "probe of rank %d: %d (ptrace_scope %d)", peer, ok, xccl_cma_ptrace_scope());
    }
    char got[4096];
    if (0 != xccl_cma_read(xccl_segment_pid(seg, peer), got, (void *) (uintptr_t) c->addr[peer], sizeof(got))) {
        return failf(c, r, "cma read failed");
    }
    for (size_t i = 0; i < sizeof(got); i++) {
        if (got[i] != (char) (peer * 11 + i)) {
            return failf(c, r, "cma read: byte %zu wrong", i);
        }
    }
    /* rank 0 writes into rank 1's buffer; rank 1 checks */
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < 4) {
        usleep(100);
    }
    if (0 == r) {
        memset(got, 0x77, 100);
        if (0 != xccl_cma_write(xccl_segment_pid(seg, 1), (void *) (uintptr_t) (c->addr[1] + 10), got, 100)) {
            return failf(c, r, "cma write failed");
        }
    }
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < 6) {
        usleep(100);
    }
    if (1 == r && (cma_buf[10] != 0x77 || cma_buf[109] != 0x77 || cma_buf[110] != (char) (11 + 110))) {
        return failf(c, r, "cma write not seen");
    }
    /* reading an unmapped address fails cleanly */
    if (0 == xccl_cma_read(xccl_segment_pid(seg, peer), got, (void *) (uintptr_t) 16, 8)) {
        return failf(c, r, "cma read of address 16 succeeded");
    }
    return 0;
}

START_TEST(cma_probe_read_write)
{
    const int scope = xccl_cma_ptrace_scope();
    ck_assert(scope >= -1 && scope <= 3);
    fprintf(stderr, "ptrace_scope: %d (-1: no Yama)\n", scope);
    char why[400];
    /* where Yama forbids it the probe says so; the test needs it allowed */
    if (scope >= 1 && 0 != geteuid()) {
        fprintf(stderr, "cma_probe_read_write: ptrace_scope %d, not root: skipped\n", scope);
        return;
    }
    ck_assert_msg(0 == run_ranks(2, XCCL_SEGMENT_AUTO, 4096, cma_body, NULL, 30, why, sizeof(why)), "%s", why);
}
END_TEST

/* A creator that is not dumpable (and, when the test runs as root, ranks
 * without root's CAP_SYS_PTRACE): its /proc/<pid>/fd is closed to the
 * peer, so memfd attach fails with EACCES, SysV works, and CMA into it is
 * refused while the other direction works. */
START_TEST(not_dumpable_refuses)
{
    ctl_t *c = ctl_new();
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (0 == pids[r]) {
            if (0 == geteuid() && (0 != setresgid(65534, 65534, 65534) || 0 != setresuid(65534, 65534, 65534))) {
                _exit(failf(c, r, "cannot become nobody"));
            }
            /* a change of credentials clears "dumpable": rank 1 sets it again */
            prctl(PR_SET_DUMPABLE, 0 == r ? 0 : 1, 0, 0, 0);
            xccl_segment_t *seg;
            int rc;
            if (0 == r) {
                rc = xccl_segment_create(XCCL_SEGMENT_MEMFD, 2, 0, 4096, &seg, &c->desc);
                atomic_store(&c->ready, 1);
                while (atomic_load(&c->arrived) < 1) {
                    usleep(100);
                }
                xccl_segment_detach(seg);
                /* then SysV */
                rc = xccl_segment_create(XCCL_SEGMENT_SYSV, 2, 0, 4096, &seg, &c->desc);
                atomic_store(&c->ready, 2);
                while (atomic_load(&c->arrived) < 2) {
                    usleep(100);
                }
                int probe = xccl_cma_probe(seg, 1);
                atomic_store(&c->ready, 3);        /* rank 1 may leave */
                xccl_segment_detach(seg);
                _exit(0 == rc && 1 == probe ? 0 : failf(c, r, "sysv create %d, probe of the dumpable peer %d", rc, probe));
            }
            while (atomic_load(&c->ready) < 1) {
                usleep(100);
            }
            rc = xccl_segment_attach(&c->desc, 1, &seg);
            atomic_fetch_add(&c->arrived, 1);
            if (-EACCES != rc && -EPERM != rc) {
                _exit(failf(c, r, "memfd attach to a non-dumpable creator: %d, not EACCES", rc));
            }
            while (atomic_load(&c->ready) < 2) {
                usleep(100);
            }
            rc = xccl_segment_attach(&c->desc, 1, &seg);
            if (0 != rc) {
                atomic_fetch_add(&c->arrived, 1);
                _exit(failf(c, r, "sysv attach: %d", rc));
            }
            int probe = xccl_cma_probe(seg, 0);
            atomic_fetch_add(&c->arrived, 1);
            while (atomic_load(&c->ready) < 3) {
                usleep(100);
            }
            xccl_segment_detach(seg);
            _exit(0 == probe ? 0 : failf(c, r, "cma probe of a non-dumpable peer: %d", probe));
        }
    }
    int status[2];
    char why[400];
    ck_assert_msg(0 == reap(c, pids, 2, 30, status, why, sizeof(why)), "%s", why);
    munmap(c, sizeof(*c));
}
END_TEST

/* Test cases by subject (CK_RUN_CASE=kill ./test_shm runs one). */
static TCase *tcase(Suite *su, const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 900);
    suite_add_tcase(su, tc);
    return tc;
}

int main(void)
{
    Suite *su = suite_create("shm");
    TCase *tc = tcase(su, "segment");
    tcase_add_test(tc, segment_layout_and_flags);
    tcase_add_test(tc, segment_errors);
    tcase_add_test(tc, segment_reuse);
    tcase_add_test(tc, small_area_prefault);
    tc = tcase(su, "cma");
    tcase_add_test(tc, cma_probe_read_write);
    tcase_add_test(tc, not_dumpable_refuses);
    tcase_add_test(tc, cma_refuses_reductions);
    tcase_add_loop_test(tc, mesh_builders_cma, 1, MAXR + 1);
    tc = tcase(su, "kill");
    tcase_add_test(tc, slot_prefault);
    tcase_add_test(tc, kill9_mid_call);
    tcase_add_test(tc, kill9_during_setup);
    tc = tcase(su, "planted");
    tcase_add_test(tc, planted_bugs_fail);
    tc = tcase(su, "shm");
    tcase_add_loop_test(tc, shm_builders_on_segment, 1, MAXR + 1);
    tcase_add_test(tc, shm_builders_sysv);
    tc = tcase(su, "mesh");
    tcase_add_loop_test(tc, mesh_builders_mirror_mode, 1, MAXR + 1);
    return xccl_check_run(su);
}
