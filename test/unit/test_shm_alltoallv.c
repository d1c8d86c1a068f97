/*
 * The shared-memory alltoallv ("shm", algos/shm_alltoallv.c) on the
 * simulator: every rank knows only its own sbytes and rbytes, pieces go
 * through the slots, and the ranks wait on the flags of the ranks they
 * trade with.
 *
 *   - p = 1..9 and 16; count matrices: all equal, skewed with a quarter of
 *     the destinations empty (MoE-like), one rank sending everything to
 *     one other, all zero, sizes just below, at and above one piece and
 *     of 4 and 21 pieces, irregular; slots that cut a piece to 1, 5, 64 and
 *     128 bytes (two buffers over the slot, exit waits), one of 12.5 KiB
 *     (the halves, pieces of 128 B to 2 KiB) and one that holds
 *     everything; blocks in permuted order in SEND and RECV with guard
 *     bytes in the gaps, which stay unwritten; several interleavings
 *     (seeds);
 *   - the schedules: no transfers, the slot within its cap, the flags
 *     that the pieces imply, waits only on the ranks a rank trades with
 *     (but the entry's, on every peer, where it writes); in the halves the
 *     entry post first in a step without waits, SHM_DONE last, no exit
 *     waits, a rank that
 *     sends nothing using no slot; too small a slot refused on every rank
 *     alike, a slot buffer needed;
 *   - planted bugs fail, in both forms: the waits for the pieces written,
 *     for the readers of a buffer before its reuse, for the readers at the
 *     exit removed (two buffers over the slot; the halves have none), a
 *     "written" flag posted a step early;
 *   - successive calls on persistent slots and flags, ranks progressed in
 *     a random order into their next calls, each rank settling what a
 *     call without an exit wait left owed as the component does: count
 *     matrices differing from call to call, alone on a small slot, and
 *     mixed with other shared-memory schedules (reduce, allgather without
 *     its exit barrier, bcast, the allreduce latency path, a call without
 *     flags) on slots of 8 and 48 KiB: an early leaver (exit waits
 *     removed), a writer without its entry waits, the entry post behind
 *     the entry waits (a deadlock), flags that outlive their call and
 *     (with the mix) the settlement skipped are caught.
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 61
#define SIM_SEED_SALT 67u
#include "sim_harness.h"
#include "shm_sim.h"
#include "xccl_build.h"

#define GUARD_SEND 0x5C
#define GUARD_RECV 0xEE
#define BIG_SLOT ((size_t) 1 << 20)

/* Byte i of what rank from sends to rank to in call `call`: not periodic
 * in i, so that a piece read from the wrong buffer or step shows. */
static unsigned char data_byte(int from, int to, size_t i, unsigned call)
{
    uint32_t x = (uint32_t) (i + 1) * 2654435761u;
    x ^= ((uint32_t) from << 24) ^ ((uint32_t) to << 16) ^ (call * 0x9E3779B9u);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return (unsigned char) (x >> 8);
}

#define DONE_FLAG ((uint32_t) 1 << 30)  /* algos/shm_util.h SHM_DONE */

/* The pieces the builder cuts from a slot of cap bytes at p > 1: the
 * pipeline part of the slot (less the latency path's 512 bytes from
 * 4 KiB on); where a half of it (whole pages) holds two buffers of p - 1
 * pieces of 64 bytes or more, pieces of a quarter of the half over p - 1,
 * depth the buffers in a half, *half that half (else 0); else two buffers
 * of p - 1 regions over the slot (depth: as many as fit); at most 64 KiB,
 * rounded down to 64 bytes where that much. */
static size_t layout_of(size_t cap, int p, int *depth, size_t *half)
{
    const size_t usable = cap >= 4096 ? (cap - 512) / 64 * 64 : cap;
    const size_t h = usable / 2 / 4096 * 4096;
    size_t pc = h / 2 / (size_t) (p - 1);
    pc = pc >= 64 ? pc / 64 * 64 : 0;
    if (0 == pc) {
        const size_t per = usable / 2 / (size_t) (p - 1);
        pc = per >= 64 ? per / 64 * 64 : per;
    }
    pc = pc < 65536 ? pc : 65536;
    const size_t buf = pc * (size_t) (p - 1);
    *half = h > 0 && h >= 2 * buf ? h : 0;
    *depth = buf ? (int) ((*half ? *half : usable) / buf) : 0;
    return pc;
}

/* ------------------------------------------------------------------------ */
/* Count matrices                                                           */
/* ------------------------------------------------------------------------ */

enum { M_EQUAL, M_MOE, M_ONE, M_ZERO, M_PIECES, M_IRREGULAR, NMAT };
static const char *const mat_name[NMAT] = { "equal", "moe", "one-to-one", "zero", "pieces", "irregular" };

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

/* m[src * p + dst]: the bytes src sends to dst; unit is the piece size
 * (or a typical block where everything is one piece). */
static void make_matrix(int kind, int p, size_t unit, unsigned salt, size_t *m)
{
    const int hot = (int) (salt % (unsigned) p);
    const int from = (int) ((salt / 3u) % (unsigned) p), to = p > 1 ? (from + 1 + (int) (salt % (unsigned) (p - 1))) % p
                                                                       : from;
    for (int s = 0; s < p; s++) {
        for (int d = 0; d < p; d++) {
            const uint32_t h = mix((uint32_t) (s * 1000 + d) ^ (salt * 0x9E3779B9u));
            size_t n = 0;
            switch (kind) {
            case M_EQUAL: n = unit; break;
            case M_MOE:           /* a quarter of the experts idle, one hot */
                n = d % 4 == 3 ? 0 : d == hot ? 4 * unit + (size_t) s : unit / 2 + h % (unit + 1);
                break;
            case M_ONE: n = s == from && d == to ? 3 * unit + 1 : 0; break;
            case M_ZERO: n = 0; break;
            case M_PIECES: {
                const size_t around[7] = { unit - 1, unit, unit + 1, 0, 3 * unit + 5, 1, 20 * unit + 3 };
                n = around[h % 7];
                break;
            }
            default: n = h % (4 * unit + 1); break;
            }
            m[s * p + d] = n;
        }
    }
}

/* A permutation of 0..p-1 from seed. */
static void shuffle(int p, unsigned seed, int *order)
{
    for (int i = 0; i < p; i++) {
        order[i] = i;
    }
    shm_shuffle(p, &seed, order);
}

/* Displacements of the blocks len[0..p-1] placed in the order `order`,
 * with a gap of 1..3 bytes before each and after the last.  Returns the
 * buffer's size. */
static size_t place(int p, const size_t *len, const int *order, size_t *displs)
{
    size_t at = 0;
    for (int i = 0; i < p; i++) {
        const int q = order[i];
        at += 1 + (size_t) (q % 3);
        displs[q] = at;
        at += len[q];
    }
    return at + 2;
}

/* One rank's vectors of a call: sbytes, sdispls, rbytes, rdispls, and
 * its SEND and RECV sizes. */
typedef struct {
    size_t *sb, *sd, *rb, *rd;
    size_t slen, rlen;
} vecs_t;

static void vecs_make(vecs_t *v, int p, int r, const size_t *m, unsigned salt)
{
    int *order = xmalloc((size_t) p * sizeof(int));
    v->sb = xmalloc(4 * (size_t) p * sizeof(size_t));
    v->sd = v->sb + p;
    v->rb = v->sb + 2 * p;
    v->rd = v->sb + 3 * p;
    for (int q = 0; q < p; q++) {
        v->sb[q] = m[r * p + q];
        v->rb[q] = m[q * p + r];
    }
    shuffle(p, salt * 7919u + (unsigned) r * 31u + 1u, order);
    v->slen = place(p, v->sb, order, v->sd);
    shuffle(p, salt * 104729u + (unsigned) r * 17u + 5u, order);
    v->rlen = place(p, v->rb, order, v->rd);
    free(order);
}

static void vecs_free(vecs_t *v)
{
    free(v->sb);
}

static void fill_send(const vecs_t *v, int p, int r, unsigned call, unsigned char *buf)
{
    memset(buf, GUARD_SEND, v->slen);
    for (int q = 0; q < p; q++) {
        for (size_t i = 0; i < v->sb[q]; i++) {
            buf[v->sd[q] + i] = data_byte(r, q, i, call);
        }
    }
}

/* 0, or -1 with bad: RECV holds every block from its sender, the gaps
 * their guard; SEND is unchanged (want: what it held). */
static int check_rank(const vecs_t *v, int p, int r, unsigned call, const unsigned char *rbuf,
                      const unsigned char *sbuf, const unsigned char *want_send, const char *what, char *bad,
                      size_t badlen)
{
    unsigned char *want = xmalloc(v->rlen);
    memset(want, GUARD_RECV, v->rlen);
    for (int q = 0; q < p; q++) {
        for (size_t i = 0; i < v->rb[q]; i++) {
            want[v->rd[q] + i] = data_byte(q, r, i, call);
        }
    }
    int rc = 0;
    for (size_t i = 0; i < v->rlen && 0 == rc; i++) {
        if (rbuf[i] != want[i]) {
            int q = -1;
            for (int k = 0; k < p; k++) {
                q = i >= v->rd[k] && i < v->rd[k] + v->rb[k] ? k : q;
            }
            snprintf(bad, badlen, "%s: rank %d RECV byte %zu (%s %d) is %#x, not %#x", what, r, i,
                     q < 0 ? "gap, block before" : "block from", q, rbuf[i], want[i]);
            rc = -1;
        }
    }
    if (0 == rc && 0 != memcmp(sbuf, want_send, v->slen)) {
        snprintf(bad, badlen, "%s: rank %d changed its SEND", what, r);
        rc = -1;
    }
    free(want);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Planting bugs into built schedules                                       */
/* ------------------------------------------------------------------------ */

typedef enum {
    PLANT_NONE,
    PLANT_NO_WRITTEN,          /* the waits for "written" (odd values) removed */
    PLANT_NO_REUSE,            /* the waits for "read" (even) before the last step removed */
    PLANT_NO_EXIT,             /* the waits for "read" in the last step (the exit) removed */
    PLANT_EARLY_POST,          /* a "written" post of value >= 5 moved to the end of the
                                * step before, ahead of its step's waits and copies */
    PLANT_NO_ENTRY,            /* the entry's waits (for the call before) removed: a
                                * fault of successive calls only */
    PLANT_LATE_ENTRY,          /* the entry post in the step of the entry's waits */
    NPLANTS
} plant_t;

static const char *const plant_name[NPLANTS] = { "none", "written waits removed", "reuse waits removed",
                                                 "exit waits removed", "written posted a step early",
                                                 "entry waits removed", "entry post behind the entry waits" };

/* The entry's waits are those one call back (len 1); the others name a
 * value of this call. */
static int drop_wait(const xccl_sched_t *s, size_t st, const xccl_action_t *a, void *ctx)
{
    const plant_t how = *(const plant_t *) ctx;
    if (XCCL_ACT_WAIT != a->kind) {
        return 0;
    }
    if (a->len > 0) {
        return PLANT_NO_ENTRY == how;
    }
    const int odd = a->idx % 2, last = st + 1 == s->nsteps;
    return (PLANT_NO_WRITTEN == how && odd) || (PLANT_NO_REUSE == how && !odd && !last) ||
           (PLANT_NO_EXIT == how && !odd && last);
}

/* s rewritten in place; returns whether anything changed. */
static int plant(xccl_sched_t *s, plant_t how)
{
    int changed = 0;
    if (PLANT_EARLY_POST == how) {
        for (size_t st = 1; st < s->nsteps; st++) {
            const size_t begin = s->step_start[st];
            const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
            for (size_t i = begin; i < end && XCCL_ACT_WAIT == s->acts[begin].kind; i++) {
                if (XCCL_ACT_POST == s->acts[i].kind && s->acts[i].idx % 2 && s->acts[i].idx >= 5) {
                    const xccl_action_t post = s->acts[i];
                    memmove(&s->acts[begin + 1], &s->acts[begin], (i - begin) * sizeof(post));
                    s->acts[begin] = post;
                    s->step_start[st] = begin + 1;     /* the post joins step st - 1 */
                    changed = 1;
                    break;
                }
            }
        }
        return changed;
    }
    if (PLANT_LATE_ENTRY == how) {
        /* steps 0 (the post) and 1 (the waits) made one */
        if (!s->entry_waits || s->nsteps < 2) {
            return 0;
        }
        sched_join_entry(s);
        return 1;
    }
    return PLANT_NONE != how && sched_drop(s, drop_wait, &how);
}

/* ------------------------------------------------------------------------ */
/* One call on the simulator                                                */
/* ------------------------------------------------------------------------ */

/* Whether s begins with the entry post, 0, in a step that waits for
 * nobody (a peer's entry waits may wait for this post). */
static int entry_first(const xccl_sched_t *s)
{
    const size_t end = s->nsteps > 1 ? s->step_start[1] : s->nacts;
    for (size_t i = 0; i < end; i++) {
        if (XCCL_ACT_WAIT == s->acts[i].kind) {
            return 0;
        }
    }
    return s->nacts > 0 && XCCL_ACT_POST == s->acts[0].kind && 0 == s->acts[0].idx;
}

/* The schedule's shape: no transfers, the slot within its cap, waits only
 * on ranks it trades with (but the entry's), the form the slot implies
 * (layout_of): in the halves the entry post first, in a step without waits,
 * SHM_DONE last, no exit waits, a rank that sends nothing using no slot;
 * with pc (the piece the test expects, 0: not known) the flag values and
 * the number of waits that the pieces imply. */
static int check_shape(const xccl_sched_t *s, const vecs_t *v, size_t pc, const char *what, char *bad,
                       size_t badlen)
{
    const int p = s->size, r = s->rank;
    const tally_t t = tally(s);
    if (0 != s->max_xfers || 0 != t.sends || 0 != t.recvs || s->slot_bytes > s->slot_cap ||
        0 != strcmp(s->algo, "shm")) {
        snprintf(bad, badlen, "%s: rank %d: transfers, a slot of %zu > %zu or algo %s", what, r, s->slot_bytes,
                 s->slot_cap, s->algo);
        return -1;
    }
    int depth = 0;
    size_t half = 0;
    if (p > 1) {
        (void) layout_of(s->slot_cap, p, &depth, &half);
    }
    size_t waits = 0, entry = 0;
    unsigned char *entered = calloc((size_t) p, 1);
    for (size_t i = 0; i < s->nacts; i++) {
        const xccl_action_t *a = &s->acts[i];
        if (XCCL_ACT_WAIT != a->kind) {
            continue;
        }
        if (a->len > 0) {
            /* the entry's: one on each peer, for any flag of the call before */
            if (1 != a->len || 0 != a->idx || a->peer == r || entered[a->peer]) {
                snprintf(bad, badlen, "%s: rank %d: a wait one call back on rank %d for %u", what, r, a->peer,
                         a->idx);
                free(entered);
                return -1;
            }
            entered[a->peer] = 1;
            entry++;
            continue;
        }
        waits++;
        if (a->peer == r || (0 == v->sb[a->peer] && 0 == v->rb[a->peer])) {
            snprintf(bad, badlen, "%s: rank %d waits on rank %d, which it trades nothing with", what, r, a->peer);
            free(entered);
            return -1;
        }
    }
    free(entered);
    const int halves = half > 0;
    if (p > 1 && (s->no_exit != halves || s->entry_waits != halves || s->slot_nalt != (halves ? 2u : 0u) ||
                  s->slot_alt != half)) {
        snprintf(bad, badlen, "%s: rank %d: no_exit %d entry_waits %d regions %u of %zu, want the %s", what, r,
                 s->no_exit, s->entry_waits, s->slot_nalt, s->slot_alt, halves ? "halves" : "whole slot");
        return -1;
    }
    if (halves && (!entry_first(s) || XCCL_ACT_POST != s->acts[s->nacts - 1].kind ||
                   DONE_FLAG != s->acts[s->nacts - 1].idx)) {
        snprintf(bad, badlen, "%s: rank %d: not the entry post first, in a step without waits, and SHM_DONE last",
                 what, r);
        return -1;
    }
    if (0 == pc || 1 == p) {
        return 0;
    }
    size_t ns = 0, nr = 0, want_waits = 0;
    for (int q = 0; q < p; q++) {
        if (q != r) {
            const size_t a = (v->sb[q] + pc - 1) / pc, b = (v->rb[q] + pc - 1) / pc;
            ns = a > ns ? a : ns;
            nr = b > nr ? b : nr;
            /* written; reuse; exit (but in the halves) */
            want_waits += b + (a > (size_t) depth ? a - (size_t) depth : 0) + (!halves && a > 0);
        }
    }
    const size_t want_entry = halves && ns > 0 ? (size_t) (p - 1) : 0;
    const size_t want_top = halves ? DONE_FLAG : 0 == ns && 0 == nr ? 0 : nr >= ns ? 2 * nr : 2 * ns - 1;
    if (s->flag_top != want_top || waits != want_waits || entry != want_entry) {
        snprintf(bad, badlen, "%s: rank %d: flag_top %u waits %zu entry %zu, want %zu, %zu and %zu (pieces of %zu)",
                 what, r, s->flag_top, waits, entry, want_top, want_waits, want_entry, pc);
        return -1;
    }
    if (halves && (0 == ns) != (0 == s->slot_bytes)) {
        snprintf(bad, badlen, "%s: rank %d: sends %zu pieces, slot %zu", what, r, ns, s->slot_bytes);
        return -1;
    }
    return 0;
}

/* Runs matrix m on p ranks with a slot of cap bytes under seed, the bug
 * `how` planted; pc as check_shape's.  0 or -1 with bad.  *planted: whether
 * the plant changed any rank's schedule. */
static int run_a2av(int p, const size_t *m, size_t cap, size_t pc, unsigned call, unsigned seed, plant_t how,
                    int *planted, const char *label, char *bad, size_t badlen)
{
    char what[200];
    job_t j;
    int rc = 0, any = 0;
    snprintf(what, sizeof(what), "alltoallv shm %s p=%d slot=%zu call=%u seed=%u plant=%s", label, p, cap, call,
             seed, plant_name[how]);
    vecs_t *v = xmalloc((size_t) p * sizeof(*v));
    unsigned char **want_send = xmalloc((size_t) p * sizeof(*want_send));
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        vecs_make(&v[r], p, r, m, call);
        j.sched[r].slot_cap = cap;
        ck_assert_msg(0 == xccl_build_alltoallv_shm(&j.sched[r], v[r].sb, v[r].sd, v[r].rb, v[r].rd, NULL, NULL),
                      "%s: build failed", what);
        if (0 == rc) {
            rc = check_shape(&j.sched[r], &v[r], pc, what, bad, badlen);
        }
        any |= plant(&j.sched[r], how);
        j.sbuf[r] = job_sbuf(&j, r, v[r].slen);
        fill_send(&v[r], p, r, call, j.sbuf[r]);
        want_send[r] = xmalloc(v[r].slen);
        memcpy(want_send[r], j.sbuf[r], v[r].slen);
        j.rbuf[r] = xmalloc(v[r].rlen);
        memset(j.rbuf[r], GUARD_RECV, v[r].rlen);
    }
    if (planted) {
        *planted = any;
    }
    rc = 0 == rc ? job_try(&j, NULL, seed, what, bad, badlen) : rc;
    for (int r = 0; r < p; r++) {
        if (0 == rc) {
            rc = check_rank(&v[r], p, r, call, j.rbuf[r], j.sbuf[r], want_send[r], what, bad, badlen);
        }
        free(want_send[r]);
        vecs_free(&v[r]);
    }
    free(want_send);
    free(v);
    job_fini(&j);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Every matrix, slot and p                                                 */
/* ------------------------------------------------------------------------ */

static const int test_ps[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 16 };
static const size_t test_pcs[] = { 1, 5, 64, 128 };     /* pieces of the small slots */
#define NPCS (sizeof(test_pcs) / sizeof(test_pcs[0]))
/* The smallest slot with halves: 12 KiB for the pipelines, a half of 4 KiB */
#define HALVES_SLOT ((size_t) 12800)
#define NSEEDS 3

START_TEST(matrices)
{
    const int p = test_ps[_i];
    size_t *m = xmalloc((size_t) p * (size_t) p * sizeof(size_t));
    char bad[512] = "";
    int runs = 0;
    for (int kind = 0; kind < NMAT; kind++) {
        for (size_t ci = 0; ci <= NPCS + 1; ci++) {
            const int halves = ci == NPCS, big = ci == NPCS + 1;
            /* a slot of exactly two buffers of p - 1 pieces (below the
             * latency path's 4 KiB), one with halves of two buffers of
             * pieces of 128 B to 2 KiB, or one that holds every block
             * whole (halves too) */
            const size_t cap = big || 1 == p ? BIG_SLOT : halves ? HALVES_SLOT : 2 * (size_t) (p - 1) * test_pcs[ci];
            int depth = 0;
            size_t half = 0;
            const size_t pc = 1 == p ? 0 : layout_of(cap, p, &depth, &half);
            const size_t unit = big || 1 == p ? 300 : pc;
            if (!big && !halves && p > 1) {
                ck_assert_uint_eq(pc, test_pcs[ci]);
                ck_assert_uint_lt(cap, 4096);
                ck_assert_uint_eq(half, 0);
            } else if (p > 1) {
                ck_assert_uint_eq(half, halves ? 4096 : 520192);
                ck_assert_uint_ge(pc, 128);
                ck_assert_int_ge(depth, 2);
            }
            for (unsigned sd = 0; sd < NSEEDS; sd++) {
                const unsigned call = (unsigned) kind * 100u + (unsigned) ci * 10u + sd;
                make_matrix(kind, p, unit, call, m);
                ck_assert_msg(0 == run_a2av(p, m, cap, pc, call, seed_of(p, call), PLANT_NONE, NULL,
                                            mat_name[kind], bad, sizeof(bad)),
                              "%s", bad);
                runs++;
            }
        }
    }
    ck_assert_int_eq(runs, NMAT * (int) (NPCS + 2) * NSEEDS);
    free(m);
}
END_TEST

/* Many interleavings of the skewed and one-to-one cases, many pieces. */
START_TEST(many_seeds)
{
    const int ps[] = { 2, 3, 5, 8 };
    const int p = ps[_i];
    size_t m[64];
    char bad[512] = "";
    for (unsigned sd = 0; sd < 40; sd++) {
        const int kind = 0 == sd % 3 ? M_ONE : 1 == sd % 3 ? M_MOE : M_IRREGULAR;
        const size_t cap = 2 * (size_t) (p - 1) * 7;
        make_matrix(kind, p, 7, sd, m);
        ck_assert_msg(0 == run_a2av(p, m, cap, 7, sd, seed_of(p, 500 + sd), PLANT_NONE, NULL, mat_name[kind], bad,
                                    sizeof(bad)),
                      "%s", bad);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Refusals                                                                 */
/* ------------------------------------------------------------------------ */

/* A slot below two buffers of p - 1 one-byte pieces is refused on every
 * rank, whatever it trades (all zero too): the ranks agree; at the
 * smallest slot it is built.  One rank needs no slot. */
START_TEST(slot_too_small)
{
    for (int p = 1; p <= 9; p++) {
        size_t *m = xmalloc((size_t) p * (size_t) p * sizeof(size_t));
        for (int kind = M_ZERO; kind <= M_PIECES; kind++) {
            make_matrix(kind, p, 3, 1, m);
            for (int r = 0; r < p; r++) {
                vecs_t v;
                vecs_make(&v, p, r, m, 1);
                for (int ok = 0; ok < 2; ok++) {
                    xccl_sched_t s;
                    xccl_sched_init(&s, r, p, 1);
                    s.slot_cap = 1 == p ? 0 : 2 * (size_t) (p - 1) - (ok ? 0 : 1);
                    const int rc = xccl_build_alltoallv_shm(&s, v.sb, v.sd, v.rb, v.rd, NULL, NULL);
                    ck_assert_str_eq(s.algo, "shm");
                    if (ok || 1 == p) {
                        ck_assert_int_eq(rc, 0);
                        ck_assert_int_eq(s.error, 0);
                        ck_assert_uint_le(s.slot_bytes, s.slot_cap);
                    } else {
                        ck_assert_int_eq(rc, -1);
                        ck_assert_int_eq(s.error, 1);
                    }
                    xccl_sched_fini(&s);
                }
                vecs_free(&v);
            }
        }
        free(m);
    }
}
END_TEST

/* A rank that writes its slot, run without a slot buffer, fails before
 * it runs anything (the own block is not copied either). */
START_TEST(refused_without_slot)
{
    const int p = 3;
    size_t m[9];
    xccl_sim_t *sim = xccl_sim_create(p);
    make_matrix(M_EQUAL, p, 8, 2, m);
    for (int r = 0; r < p; r++) {
        vecs_t v;
        vecs_make(&v, p, r, m, 2);
        xccl_sched_t s;
        xccl_exec_t e;
        xccl_sched_init(&s, r, p, 1);
        s.slot_cap = 1024;
        ck_assert_int_eq(xccl_build_alltoallv_shm(&s, v.sb, v.sd, v.rb, v.rd, NULL, NULL), 0);
        ck_assert(s.slot_bytes > 0);
        unsigned char *sbuf = xmalloc(v.slen), *rbuf = xmalloc(v.rlen);
        fill_send(&v, p, r, 2, sbuf);
        memset(rbuf, GUARD_RECV, v.rlen);
        void *bufs[XCCL_NBUF] = { sbuf, rbuf, NULL, NULL };      /* no slot */
        ck_assert_int_eq(xccl_exec_init(&e, &s, xccl_sim_transport(sim, r), bufs, NULL, NULL, 1), 0);
        xccl_exec_set_peer(&e, xccl_sim_peer(sim, r));
        ck_assert_int_lt(xccl_exec_progress(&e), 0);
        ck_assert_uint_eq(e.step, 0);
        for (size_t i = 0; i < v.rlen; i++) {
            ck_assert_uint_eq(rbuf[i], GUARD_RECV);
        }
        xccl_exec_fini(&e);
        xccl_sched_fini(&s);
        free(sbuf);
        free(rbuf);
        vecs_free(&v);
    }
    xccl_sim_destroy(sim);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Planted bugs                                                             */
/* ------------------------------------------------------------------------ */

/* Each bug, planted into every rank's schedule, is caught under some seed
 * (a wrong byte, or the simulator's report of a rank reading the slot of
 * a rank that left), on the one-to-one and the skewed matrices, in both
 * forms: many pieces of 7 bytes (two buffers over the slot), and pieces of
 * 640 bytes in the halves (which have no exit waits to remove:
 * check_shape counts every wait); the intact schedules pass under the
 * same seeds. */
START_TEST(planted_bugs_fail)
{
    const plant_t how = (plant_t) _i;
    const int p = 4;
    size_t m[16];
    char bad[512] = "", first[512] = "";
    for (int halves = 0; halves < 2; halves++) {
        const size_t cap = halves ? HALVES_SLOT : 2 * (size_t) (p - 1) * 7;
        int depth;
        size_t half;
        const size_t pc = layout_of(cap, p, &depth, &half);
        ck_assert_uint_eq(pc, halves ? 640 : 7);
        ck_assert_uint_eq(half > 0, halves);
        for (int kind = M_MOE; kind <= M_ONE && !(halves && PLANT_NO_EXIT == how); kind++) {
            int caught = 0, planted = 0;
            for (unsigned sd = 0; sd < 24 && !caught; sd++) {
                make_matrix(kind, p, pc, sd, m);
                ck_assert_msg(0 == run_a2av(p, m, cap, pc, sd, seed_of(p, 800 + sd), PLANT_NONE, NULL,
                                            mat_name[kind], bad, sizeof(bad)),
                              "intact: %s", bad);
                int any = 0;
                if (0 != run_a2av(p, m, cap, 0, sd, seed_of(p, 800 + sd), how, &any, mat_name[kind], bad,
                                  sizeof(bad))) {
                    caught = 1;
                    snprintf(first, sizeof(first), "%s", bad);
                }
                planted |= any;
            }
            fprintf(stderr, "planted alltoallv shm, %s, %s, %s: %s\n", halves ? "halves" : "whole slot",
                    mat_name[kind], plant_name[how], caught ? first : "NOT CAUGHT");
            ck_assert_msg(planted, "%s: %s changed nothing", mat_name[kind], plant_name[how]);
            ck_assert_msg(caught, "%s: %s not caught", mat_name[kind], plant_name[how]);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Successive calls, interleaved: the slot and the flags outlive the call   */
/* ------------------------------------------------------------------------ */

/* Virtual ranks each run a list of calls on persistent slots and flags,
 * progressed in a random order as far as each can go and into its next
 * calls: a rank that leaves early overwrites, in its next call, what a
 * slow rank still reads; one that runs two calls ahead of a slow reader
 * (the entry waits removed) writes the half that reader still reads; a
 * flag that a later call's wait took for its own (stale) lets a rank
 * read before the write.  The calls: alltoallv alone (count matrices
 * differing from call to call, several pieces), or mixed with the other
 * shared-memory schedules on the same slots, so that calls of one layout
 * follow calls of another with ranks running ahead: reduce (the root
 * alone in the halves, or sliced), allgather (whole: it moves through
 * regions of the slot and, of one chunk, has no exit barrier), bcast
 * (whole: an exit barrier), the allreduce latency path (two regions at
 * the slot's end) or its pipeline, and a call without flags (a reduce of
 * nothing).  Each rank settles what a call without an exit wait left
 * owed as the component does (ompi_coll_xccl/coll_xccl_exec.c): one
 * xccl_exit_owed_t for all its calls, given to every call's executor
 * before it first progresses. */
#define SC_CALLS 30
#define SC_PIECE 16
/* The slots besides the smallest (two buffers of pieces of SC_PIECE):
 * one without halves (the latency path's regions from 4 KiB on; of two
 * ranks allgather trades slots and has no exit barrier), one with halves
 * (allgather moves through regions) */
#define SC_MID_SLOT ((size_t) 8192)
#define SC_BIG_SLOT ((size_t) 49152)

enum { K_A2AV, K_REDUCE, K_AG, K_BCAST, K_AR_SMALL, K_EMPTY };
static const char *const sc_kind_name[] = { "alltoallv", "reduce", "allgather", "bcast", "allreduce small",
                                            "reduce of nothing" };

/* How a run goes: the slot, the calls alone or mixed, what is planted
 * (into the alltoallv calls), flags compared without their call, the
 * settlement skipped (xccl_exec_set_owed never called). */
typedef struct {
    size_t cap;
    int mixed;
    plant_t how;
    int ignore_seq, no_settle;
} sc_run_t;

/* What the build and check of a call know: the run, p and the mix. */
typedef struct {
    const sc_run_t *run;
    int p;
    unsigned mix;
} sc_ctx_t;

typedef struct {
    shm_call_t sim;
    int kind;
    vecs_t v;                  /* alltoallv */
    size_t n;                  /* int32 elements (reduce, allreduce), else bytes */
    int root, in_place;
    unsigned char *want_in;
} sc_call_t;

/* The kind of call i (the same on every rank): alltoallv alone, or mixed
 * with up to three alltoallv calls in a row. */
static int sc_kind(int call, int mixed, unsigned mix)
{
    static const int kinds[] = { K_A2AV, K_A2AV, K_AG, K_A2AV, K_REDUCE, K_A2AV, K_A2AV, K_A2AV, K_BCAST,
                                 K_A2AV, K_EMPTY, K_A2AV, K_AR_SMALL, K_REDUCE, K_A2AV, K_A2AV, K_AG, K_REDUCE,
                                 K_AG };
    return mixed ? kinds[((unsigned) call + mix * 5u) % (sizeof(kinds) / sizeof(kinds[0]))] : K_A2AV;
}

/* The matrix of call i (the same on every rank): kinds in turn, sizes of
 * up to about 20 pieces of unit. */
static void sc_matrix(int p, int call, size_t unit, size_t *m)
{
    static const int kinds[] = { M_MOE, M_ONE, M_IRREGULAR, M_EQUAL, M_ZERO, M_PIECES, M_ONE };
    make_matrix(kinds[call % 7], p, unit, (unsigned) call * 13u + 1u, m);
}

/* data_byte for the calls of other layouts (mix_byte_t). */
static unsigned char sc_byte(int call, int from, int to, size_t i)
{
    return data_byte(from, to, i, (unsigned) call);
}

/* Call `call` of rank r: its schedule and buffers. */
static void sc_build(void *ctx, shm_call_t *sc, int r, int call)
{
    static const size_t reduce_n[] = { 13, 300, 3000, 9000 }, ag_n[] = { 200, 3000, 30000 };
    static const size_t bcast_n[] = { 100, 3000 }, ar_n[] = { 5, 60, 700 };
    const sc_ctx_t *x = ctx;
    const sc_run_t *run = x->run;
    const int p = x->p, kind = sc_kind(call, run->mixed, x->mix);
    sc_call_t *c = (sc_call_t *) sc;
    int rc = 0;
    c->kind = kind;
    xccl_sched_init(&sc->s, r, p, K_REDUCE == kind || K_EMPTY == kind || K_AR_SMALL == kind ? 4 : 1);
    sc->s.slot_cap = run->cap;
    switch (kind) {
    case K_A2AV: {
        /* blocks of pieces of the small slot; of a quarter of a piece on
         * the larger ones, so that one-to-one calls take one piece and let
         * the sender run on */
        size_t *m = xmalloc((size_t) p * (size_t) p * sizeof(size_t)), half;
        int depth;
        const size_t pc = layout_of(run->cap, p, &depth, &half);
        sc_matrix(p, call, pc >= 256 ? pc / 4 : pc, m);
        vecs_make(&c->v, p, r, m, (unsigned) call);
        free(m);
        rc = xccl_build_alltoallv_shm(&sc->s, c->v.sb, c->v.sd, c->v.rb, c->v.rd, NULL, NULL);
        plant(&sc->s, run->how);
        sc->in = xmalloc(c->v.slen);
        c->want_in = xmalloc(c->v.slen);
        sc->out = xmalloc(c->v.rlen);
        fill_send(&c->v, p, r, (unsigned) call, sc->in);
        memcpy(c->want_in, sc->in, c->v.slen);
        memset(sc->out, GUARD_RECV, c->v.rlen);
        break;
    }
    case K_REDUCE: case K_EMPTY:
        /* the root alone (small, or two ranks) and sliced; the same root
         * for two calls in a row */
        c->n = K_EMPTY == kind ? 0 : reduce_n[call % 4];
        c->root = call / 2 % p;
        c->in_place = 0 == call % 3;
        rc = xccl_build_reduce_shm(&sc->s, c->n, c->root, c->in_place);
        sc->in = xmalloc(c->n * 4);
        for (size_t i = 0; i < c->n; i++) {
            ((int32_t *) sc->in)[i] = mix_elem(call, r, i);
        }
        sc->out = r != c->root ? NULL : c->in_place ? sc->in : xmalloc(c->n * 4);
        if (sc->out && sc->out != sc->in) {
            memset(sc->out, GUARD_RECV, c->n * 4);
        }
        break;
    case K_AR_SMALL:
        c->n = ar_n[call % 3];
        rc = mix_build_allreduce_small(sc, c->n, r, call);
        break;
    case K_AG:
        c->n = ag_n[call % 3];
        rc = mix_build_allgather(sc, c->n, r, call, sc_byte);
        break;
    default:
        c->n = bcast_n[call % 2];
        c->root = call % p;
        rc = mix_build_bcast(sc, c->n, c->root, r, call, sc_byte);
        break;
    }
    ck_assert_msg(0 == rc, "%s p=%d call %d: build failed", sc_kind_name[kind], p, call);
    ck_assert_msg(sc->s.slot_bytes <= run->cap, "%s p=%d call %d: slot %zu of %zu", sc_kind_name[kind], p, call,
                  sc->s.slot_bytes, run->cap);
}

/* 0, or -1 with bad: rank r's result of its call. */
static int sc_check(void *ctx, const shm_call_t *sc, int r, int call, char *bad, size_t badlen)
{
    const int p = ((const sc_ctx_t *) ctx)->p;
    const sc_call_t *c = (const sc_call_t *) sc;
    const unsigned char *out = sc->out;
    char what[96];
    snprintf(what, sizeof(what), "successive p=%d call %d (%s)", p, call, sc_kind_name[c->kind]);
    switch (c->kind) {
    case K_A2AV:
        return check_rank(&c->v, p, r, (unsigned) call, out, sc->in, c->want_in, what, bad, badlen);
    case K_REDUCE: case K_AR_SMALL: return mix_check_sum(out, c->n, p, r, call, what, bad, badlen);
    case K_AG: return mix_check_allgather(out, c->n, p, r, call, sc_byte, what, bad, badlen);
    case K_BCAST: return mix_check_bcast(out, c->n, c->root, r, call, sc_byte, what, bad, badlen);
    default:
        return 0;
    }
}

/* What sc_build allocated beyond SEND and RECV. */
static void sc_release(void *ctx, shm_call_t *sc)
{
    sc_call_t *c = (sc_call_t *) sc;
    (void) ctx;
    if (K_A2AV == c->kind) {
        vecs_free(&c->v);
    }
    free(c->want_in);
}

static int run_successive(int p, unsigned seed, unsigned mix, const sc_run_t *run, char *bad, size_t badlen)
{
    sc_ctx_t x = { run, p, mix };
    const shm_run_t sr = { p, SC_CALLS, run->cap, 900u, !run->no_settle, run->ignore_seq, 1, sizeof(sc_call_t),
                           &x, sc_build, sc_check, sc_release };
    return shm_successive(&sr, seed, bad, badlen);
}

/* Whether run fails at p under one of n seeds (the first failure in bad);
 * the intact run passes under each. */
static int sc_caught(int p, const sc_run_t *run, unsigned salt, unsigned n, char *bad, size_t badlen)
{
    for (unsigned sd = 0; sd < n; sd++) {
        const sc_run_t intact = { run->cap, run->mixed, PLANT_NONE, 0, 0 };
        ck_assert_msg(0 == run_successive(p, seed_of(p, salt + sd), sd % 4, &intact, bad, badlen), "intact: %s",
                      bad);
        if (0 != run_successive(p, seed_of(p, salt + sd), sd % 4, run, bad, badlen)) {
            return 1;
        }
    }
    return 0;
}

START_TEST(successive_calls_interleaved)
{
    char bad[512] = "";
    const size_t tiny = 0;     /* two buffers of pieces of SC_PIECE: per p */
    const sc_run_t runs[] = {
        { tiny, 0, PLANT_NONE, 0, 0 },
        { SC_BIG_SLOT, 0, PLANT_NONE, 0, 0 },
        { SC_MID_SLOT, 1, PLANT_NONE, 0, 0 },
        { SC_BIG_SLOT, 1, PLANT_NONE, 0, 0 },
    };
    unsigned long calls = 0;
    for (int p = 2; p <= 7; p++) {
        for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
            sc_run_t run = runs[i];
            run.cap = run.cap ? run.cap : 2 * (size_t) (p - 1) * SC_PIECE;
            for (unsigned sd = 0; sd < 10; sd++) {
                ck_assert_msg(0 == run_successive(p, seed_of(p, 600 + sd), sd % 4, &run, bad, sizeof(bad)),
                              "slot %zu%s: %s", run.cap, run.mixed ? " mixed" : "", bad);
                calls += SC_CALLS;
            }
        }
    }
    fprintf(stderr, "successive: %lu calls per rank checked\n", calls);
    for (int p = 2; p <= 5; p++) {
        /* without the exit waits (two buffers over the slot) a rank leaves
         * while its readers still read, and overwrites its slot in the
         * next call */
        sc_run_t run = { 2 * (size_t) (p - 1) * SC_PIECE, 0, PLANT_NO_EXIT, 0, 0 };
        int caught = sc_caught(p, &run, 650, 24, bad, sizeof(bad));
        fprintf(stderr, "planted successive p=%d, exit waits removed: %s\n", p, caught ? bad : "NOT CAUGHT");
        ck_assert_msg(caught, "p=%d: an early leaver was not caught", p);
        /* without the entry waits (the halves) a rank writes the half a
         * reader two calls behind still reads: alltoallv alone, and mixed */
        for (int mixed = 0; mixed < 2; mixed++) {
            run = (sc_run_t) { SC_BIG_SLOT, mixed, PLANT_NO_ENTRY, 0, 0 };
            caught = sc_caught(p, &run, 660, 24, bad, sizeof(bad));
            fprintf(stderr, "planted successive p=%d%s, entry waits removed: %s\n", p, mixed ? " mixed" : "",
                    caught ? bad : "NOT CAUGHT");
            ck_assert_msg(caught, "p=%d%s: a writer without its entry waits was not caught", p,
                          mixed ? " mixed" : "");
        }
        /* the entry post behind the entry waits: writers wait for each
         * other's post forever after a call that posted nothing, or in
         * the first call */
        run = (sc_run_t) { SC_BIG_SLOT, 1, PLANT_LATE_ENTRY, 0, 0 };
        caught = sc_caught(p, &run, 665, 24, bad, sizeof(bad));
        fprintf(stderr, "planted successive p=%d mixed, entry post behind the entry waits: %s\n", p,
                caught ? bad : "NOT CAUGHT");
        ck_assert_msg(caught, "p=%d: the entry post behind the entry waits was not caught", p);
        /* the settlement skipped: a call of one layout writes what a slow
         * rank still reads of a call of another without an exit wait (in
         * the slot without halves only two ranks' allgather has none) */
        for (int big = 2 == p ? 0 : 1; big < 2; big++) {
            run = (sc_run_t) { big ? SC_BIG_SLOT : SC_MID_SLOT, 1, PLANT_NONE, 0, 1 };
            caught = sc_caught(p, &run, 670, 24, bad, sizeof(bad));
            fprintf(stderr, "planted successive p=%d slot %zu mixed, settlement skipped: %s\n", p, run.cap,
                    caught ? bad : "NOT CAUGHT");
            ck_assert_msg(caught, "p=%d slot %zu: the settlement skipped was not caught", p, run.cap);
        }
    }
    /* flags compared without their call: an earlier call's flag passes a
     * wait of the next */
    int caught = 0;
    for (int p = 2; p <= 5 && !caught; p++) {
        const sc_run_t run = { 2 * (size_t) (p - 1) * SC_PIECE, 0, PLANT_NONE, 1, 0 };
        caught = sc_caught(p, &run, 680, 24, bad, sizeof(bad));
    }
    fprintf(stderr, "planted successive, stale flags: %s\n", caught ? bad : "NOT CAUGHT");
    ck_assert_msg(caught, "flags of an earlier call taken for this one's were not caught");
}
END_TEST

int main(void)
{
    Suite *su = suite_create("shm_alltoallv");
    TCase *tc = tcase_create("basics");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, slot_too_small);
    tcase_add_test(tc, refused_without_slot);
    tcase_add_loop_test(tc, planted_bugs_fail, PLANT_NO_WRITTEN, PLANT_NO_ENTRY);
    tcase_add_loop_test(tc, many_seeds, 0, 4);
    tcase_add_test(tc, successive_calls_interleaved);
    suite_add_tcase(su, tc);
    tc = tcase_create("sizes");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, matrices, 0, (int) (sizeof(test_ps) / sizeof(test_ps[0])));
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
