/* The generic executor: runs any schedule over an xccl_transport_t. */
#include "xccl_sched.h"
#include "xccl_exec.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* memmove without a trap of `rep movsb` (glibc's memcpy for mid sizes):
 * on some CPUs, when the destination lies 1..63 bytes past the source
 * modulo 4 KiB, loads alias the stores just made and it runs at a fraction
 * of the speed.  A page-aligned slot copied to a buffer from malloc (16
 * bytes into its page) is exactly that case.  There, copies of at most
 * 2 KiB each take glibc's vector loop instead.  Other CPUs have no trap,
 * and the pieces cost them.  So the process measures its CPU once
 * (xccl_memmove_pieces) and takes the pieces only where the trap is
 * (figures: docs/bench/select-figures.md).  Large copies, which glibc
 * does with non-temporal stores, and every other case go to memmove as
 * they are. */
#define XCCL_COPY_PIECE ((size_t) 2048)
#define XCCL_COPY_ALIAS_MAX ((size_t) 8 << 20)
/* The measurement: CAL_BYTES copied at distance 0 and CAL_AHEAD modulo 4
 * KiB, CAL_COPIES copies a sample, the fastest of CAL_ROUNDS samples each
 * (interleaved: a descheduled sample only lengthens that sample); a trap
 * makes the aliased copy CAL_TRAP times slower or more, a CPU without one
 * well under that (figures: docs/bench/select-figures.md). */
#define CAL_BYTES ((size_t) 32768)
#define CAL_AHEAD 16
#define CAL_COPIES 4
#define CAL_ROUNDS 9
#define CAL_TRAP 2.0

static _Atomic int copy_pieces = -1;   /* -1: not measured yet */
static double cal_us[2];               /* the last measurement: aligned, aliased */
static volatile unsigned cal_sink;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e6 + (double) t.tv_nsec * 1e-3;
}

/* 1 where memmove has the trap on this CPU, else 0; pieces where nothing
 * could be measured (no memory: the safe side). */
static int measure_trap(void)
{
    unsigned char *a = aligned_alloc(4096, CAL_BYTES + 4096);
    unsigned char *b = aligned_alloc(4096, CAL_BYTES + 4096);
    if (NULL == a || NULL == b) {
        free(a);
        free(b);
        return 1;
    }
    memset(a, 1, CAL_BYTES + 4096);
    memset(b, 2, CAL_BYTES + 4096);
    double best[2] = { 1e30, 1e30 };
    for (int r = 0; r < CAL_ROUNDS; r++) {
        for (int k = 0; k < 2; k++) {
            unsigned char *dst = b + (k ? CAL_AHEAD : 0);
            memmove(dst, a, CAL_BYTES);            /* in cache before the clock */
            const double t0 = now_us();
            for (int i = 0; i < CAL_COPIES; i++) {
                a[i] = (unsigned char) i;           /* each copy is a new one */
                memmove(dst, a, CAL_BYTES);
            }
            const double t = (now_us() - t0) / CAL_COPIES;
            best[k] = t < best[k] ? t : best[k];
            cal_sink += dst[r];                     /* the copies are used */
        }
    }
    free(a);
    free(b);
    cal_us[0] = best[0];
    cal_us[1] = best[1];
    return best[1] > CAL_TRAP * best[0];
}

int xccl_memmove_pieces(double *aligned_us, double *aliased_us)
{
    int v = atomic_load_explicit(&copy_pieces, memory_order_relaxed);
    if (v < 0) {
        v = measure_trap();                /* threads racing here agree, or nearly: any answer is correct */
        atomic_store_explicit(&copy_pieces, v, memory_order_relaxed);
    }
    if (aligned_us) {
        *aligned_us = cal_us[0];
    }
    if (aliased_us) {
        *aliased_us = cal_us[1];
    }
    return v;
}

void xccl_memmove_force(int pieces)
{
    atomic_store_explicit(&copy_pieces, pieces < 0 ? -1 : !!pieces, memory_order_relaxed);
}

void xccl_copy_stream(void *dst, const void *src, size_t len)
{
    const uintptr_t d = (uintptr_t) dst, s = (uintptr_t) src;
#if defined(__SSE2__)
    if (len >= 4096 && !(d < s + len && s < d + len)) {
        const size_t head = (16u - (d & 15u)) & 15u;
        memcpy(dst, src, head);
        char *o = (char *) dst + head;
        const char *i = (const char *) src + head;
        const size_t body = (len - head) & ~(size_t) 63;
        for (size_t k = 0; k < body; k += 64) {
            const __m128i x0 = _mm_loadu_si128((const __m128i *) (i + k));
            const __m128i x1 = _mm_loadu_si128((const __m128i *) (i + k + 16));
            const __m128i x2 = _mm_loadu_si128((const __m128i *) (i + k + 32));
            const __m128i x3 = _mm_loadu_si128((const __m128i *) (i + k + 48));
            _mm_stream_si128((__m128i *) (o + k), x0);
            _mm_stream_si128((__m128i *) (o + k + 16), x1);
            _mm_stream_si128((__m128i *) (o + k + 32), x2);
            _mm_stream_si128((__m128i *) (o + k + 48), x3);
        }
        memcpy(o + body, i + body, len - head - body);
        _mm_sfence();
        return;
    }
#endif
    (void) d;
    (void) s;
    xccl_memmove(dst, src, len);
}

void xccl_memmove(void *dst, const void *src, size_t len)
{
    const uintptr_t d = (uintptr_t) dst, s = (uintptr_t) src, ahead = (d - s) & 4095u;
    if (len <= XCCL_COPY_PIECE || len > XCCL_COPY_ALIAS_MAX || 0 == ahead || ahead >= 64 ||
        (d < s + len && s < d + len) || !xccl_memmove_pieces(NULL, NULL)) {
        memmove(dst, src, len);
        return;
    }
    for (size_t off = 0; off < len; off += XCCL_COPY_PIECE) {
        memcpy((char *) dst + off, (const char *) src + off, len - off < XCCL_COPY_PIECE ? len - off
                                                                                        : XCCL_COPY_PIECE);
    }
}

/* The address of r, or NULL: a peer's buffer the peer access cannot give.
 * Own buffers (also named as a peer ref to this rank) never fail. */
static inline int ref_owner(const xccl_exec_t *e, xccl_ref_t r)
{
    const int q = xccl_ref_owner(r);
    if (XCCL_BUF_SLOT == r.buf && e->s->slot_swap && (e->seq & 1u)) {
        return 1 - (q < 0 ? e->s->rank : q);    /* two ranks: the other slot */
    }
    return q;
}

static inline char *ref_ptr(const xccl_exec_t *e, xccl_ref_t r)
{
    const int q = ref_owner(e, r);
    /* a schedule that moves between slot regions from call to call: odd
     * calls use the other (slot_flip), or call seq region seq % slot_nalt
     * (slot_alt); at most one of them is set */
    size_t off = r.off;
    if (XCCL_BUF_SLOT == r.buf) {
        off += (e->seq & 1u) * e->s->slot_flip;
        off += e->s->slot_nalt ? e->seq % e->s->slot_nalt * e->s->slot_alt : 0;
    }
    if (q < 0 || q == e->s->rank) {
        return (char *) e->bufs[r.buf] + off;
    }
    char *base = e->peer->buf(e->peer->ctx, q, (xccl_buf_id_t) r.buf);
    return base ? base + off : NULL;
}

/* A schedule that names peers' buffers or flags runs only with all of
 * xccl_peer_t: refused (error) before it touches anything, never run wrong. */
static int peer_ready(const xccl_exec_t *e)
{
    if (e->s->slot_bytes > 0 && NULL == e->bufs[XCCL_BUF_SLOT]) {
        return 0;              /* a shared-memory schedule without its slot */
    }
    return !e->s->peer_access ||
           (e->peer && e->peer->buf && e->peer->post && e->peer->test);
}

int xccl_exec_init(xccl_exec_t *e, const xccl_sched_t *s, const xccl_transport_t *tr,
                   void *const bufs[XCCL_NBUF], xccl_reduce_cb_t reduce, void *reduce_ctx,
                   uint32_t seq)
{
    memset(e, 0, sizeof(*e));
    e->s = s;
    e->tr = tr;
    memcpy(e->bufs, bufs, sizeof(e->bufs));
    e->reduce = reduce;
    e->reduce_ctx = reduce_ctx;
    e->seq = seq;
    e->owed_at = s->size;
    e->reqs = e->inline_reqs;
    if (s->max_xfers > XCCL_EXEC_INLINE_REQS) {
        e->reqs = malloc(s->max_xfers * sizeof(void *));
        if (NULL == e->reqs) {
            e->status = -1;
            return -1;
        }
    }
    return 0;
}

void xccl_exec_fini(xccl_exec_t *e)
{
    for (size_t i = 0; i < e->nreqs; i++) {
        e->tr->cancel(e->tr->ctx, e->reqs[i]);
    }
    e->nreqs = 0;
    if (e->reqs != e->inline_reqs) {
        free(e->reqs);
    }
    e->reqs = NULL;
}

static int post_transfers(xccl_exec_t *e, size_t begin, size_t end)
{
    e->nreqs = 0;
    /* Receives first, so that a peer's send finds its match early. */
    for (int pass = 0; pass < 2; pass++) {
        uint8_t want = pass ? XCCL_ACT_SEND : XCCL_ACT_RECV;
        for (size_t i = begin; i < end; i++) {
            const xccl_action_t *a = &e->s->acts[i];
            void *req = NULL;
            int rc;
            if (a->kind != want) {
                continue;
            }
            char *buf = ref_ptr(e, XCCL_ACT_RECV == a->kind ? a->dst : a->a);
            if (NULL == buf) {
                return -1;
            }
            if (XCCL_ACT_RECV == a->kind) {
                rc = e->tr->irecv(e->tr->ctx, a->peer, buf, a->len, e->seq, a->idx, &req);
            } else {
                rc = e->tr->isend(e->tr->ctx, a->peer, buf, a->len, e->seq, a->idx, &req);
            }
            if (rc < 0) {
                return rc;
            }
            if (req) {
                e->reqs[e->nreqs++] = req;
            }
        }
    }
    return 0;
}

static int run_local(xccl_exec_t *e, size_t begin, size_t end)
{
    for (size_t i = begin; i < end; i++) {
        const xccl_action_t *a = &e->s->acts[i];
        if (XCCL_ACT_POST == a->kind) {
            int rc = e->peer->post(e->peer->ctx, e->seq, a->idx);
            if (rc < 0) {
                return rc;
            }
        } else if (XCCL_ACT_COPY == a->kind) {
            char *dst = ref_ptr(e, a->dst), *src = ref_ptr(e, a->a);
            if (NULL != dst && NULL == src && e->peer->read) {
                /* a peer's buffer the provider reads but cannot map */
                int rc = e->peer->read(e->peer->ctx, ref_owner(e, a->a), (xccl_buf_id_t) a->a.buf, a->a.off,
                                       dst, a->len);
                if (rc < 0) {
                    return rc;
                }
                continue;
            }
            if (NULL == dst && NULL != src && e->peer->write) {
                int rc = e->peer->write(e->peer->ctx, ref_owner(e, a->dst), (xccl_buf_id_t) a->dst.buf,
                                        a->dst.off, src, a->len);
                if (rc < 0) {
                    return rc;
                }
                continue;
            }
            if (NULL == dst || NULL == src) {
                return -1;
            }
            if (dst != src) {
                if (e->copy) {
                    int rc = e->copy(e->copy_ctx, dst, src, a->len);
                    if (rc < 0) {
                        return rc;
                    }
                } else if (e->s->stream_recv && XCCL_BUF_RECV == a->dst.buf && 0 == a->dst.peer_plus1) {
                    xccl_copy_stream(dst, src, a->len);
                } else {
                    xccl_memmove(dst, src, a->len);
                }
            }
        } else if (XCCL_ACT_REDUCE == a->kind) {
            char *dst = ref_ptr(e, a->dst), *x = ref_ptr(e, a->a), *y = ref_ptr(e, a->b);
            if (NULL == dst || NULL == x || NULL == y) {
                return -1;
            }
            int rc = e->reduce(e->reduce_ctx, dst, x, y, a->len / e->s->elem_size);
            if (rc < 0) {
                return rc;
            }
        }
    }
    return 0;
}

/* The step's flag waits, from the first one not yet seen met (a flag only
 * rises: a met wait stays met): 1 all met, 0 not yet, <0 error. */
static int waits_met(xccl_exec_t *e, size_t end)
{
    for (; e->wait_at < end; e->wait_at++) {
        const xccl_action_t *a = &e->s->acts[e->wait_at];
        if (XCCL_ACT_WAIT == a->kind) {
            int rc = e->peer->test(e->peer->ctx, a->peer, e->seq - (uint32_t) a->len, a->idx);
            if (rc <= 0) {
                return rc;
            }
        }
    }
    return 1;
}

/* Where a place of the slot is in call seq: the slot of a rank that
 * trades places (two ranks), or region seq % nalt. */
static unsigned slot_place(uint32_t seq, unsigned nalt, int swap)
{
    return swap ? seq & 1u : nalt ? seq % nalt : 0;
}

/* xccl_exec_set_owed's settlement, once, before step 0. */
static void settle(xccl_exec_t *e)
{
    const xccl_sched_t *s = e->s;
    xccl_exit_owed_t *o = e->owed;
    e->owed = NULL;
    if (0 == s->slot_bytes) {
        return;                    /* writes no slot */
    }
    if (o->open) {
        const int elsewhere = s->no_exit && s->slot_alt == o->alt && s->slot_nalt == o->nalt &&
                              s->slot_swap == o->swap && s->entry_waits == o->entry_waits &&
                              slot_place(e->seq, s->slot_nalt, s->slot_swap) !=
                                  slot_place(o->seq, o->nalt, o->swap);
        if (!elsewhere) {
            e->owed_seq = o->seq;
            e->owed_val = o->val;
            e->owed_at = 0;
        }
        o->open = 0;
    }
    if (s->no_exit) {
        *o = (xccl_exit_owed_t) { 1, e->seq, s->flag_top, s->slot_alt, s->slot_nalt, s->slot_swap,
                                  s->entry_waits };
    }
}

/* The flags the last call without an exit barrier left owed, from the
 * first peer not yet seen there: 1 all met, 0 not yet, <0 error. */
static int owed_met(xccl_exec_t *e)
{
    for (; e->owed_at < e->s->size; e->owed_at++) {
        if (e->owed_at != e->s->rank) {
            int rc = e->peer->test(e->peer->ctx, e->owed_at, e->owed_seq, e->owed_val);
            if (rc <= 0) {
                return rc;
            }
        }
    }
    return 1;
}

int xccl_exec_progress(xccl_exec_t *e)
{
    const xccl_sched_t *s = e->s;

    if (0 == e->status && !peer_ready(e)) {
        e->status = -1;
    }
    if (0 == e->status && e->owed) {
        settle(e);
    }
    if (0 == e->status && e->owed_at < s->size) {
        const int rc = NULL == e->peer || NULL == e->peer->test ? -1 : owed_met(e);
        if (rc <= 0) {
            e->status = rc;
            return rc;
        }
    }
    while (0 == e->status) {
        if (e->step >= s->nsteps) {
            int rc = e->gate && e->gate->drain ? e->gate->drain(e->gate->ctx) : 1;
            if (0 != rc) {
                e->status = rc;
            }
            break;
        }
        size_t begin = s->step_start[e->step];
        size_t end = (e->step + 1 < s->nsteps) ? s->step_start[e->step + 1] : s->nacts;
        int rc;

        if (!e->posted) {
            if (e->gate && e->gate->step_ready) {
                rc = e->gate->step_ready(e->gate->ctx, e->step);
                if (rc < 0) {
                    e->status = rc;
                }
                if (rc <= 0) {
                    break;
                }
            }
            rc = post_transfers(e, begin, end);
            e->posted = 1;
            e->wait_at = begin;
            if (rc < 0) {
                e->status = rc;
                break;
            }
        }
        if (e->nreqs > 0) {
            e->tr->progress(e->tr->ctx);
            /* Compact the list of pending requests. */
            size_t keep = 0;
            for (size_t i = 0; i < e->nreqs; i++) {
                rc = e->tr->test(e->tr->ctx, e->reqs[i]);
                if (rc < 0) {
                    e->status = rc;
                } else if (0 == rc) {
                    e->reqs[keep++] = e->reqs[i];
                }
            }
            e->nreqs = keep;
            if (e->status < 0 || keep > 0) {
                break;
            }
        }
        if (s->peer_access) {
            rc = waits_met(e, end);
            if (rc < 0) {
                e->status = rc;
            }
            if (rc <= 0) {
                break;
            }
        }
        rc = run_local(e, begin, end);
        if (0 == rc && e->gate && e->gate->step_done) {
            rc = e->gate->step_done(e->gate->ctx, e->step);
        }
        if (rc < 0) {
            e->status = rc;
            break;
        }
        e->step++;
        e->posted = 0;
    }
    return e->status;
}
