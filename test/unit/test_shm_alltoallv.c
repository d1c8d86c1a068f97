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
 *     128 bytes and one that holds everything; blocks in permuted order
 *     in SEND and RECV with guard bytes in the gaps, which stay unwritten;
 *     several interleavings (seeds);
 *   - the schedules: no transfers, the slot within its cap, the flags
 *     that the pieces imply, waits only on the ranks a rank trades with;
 *     too small a slot refused on every rank alike, a slot buffer needed;
 *   - planted bugs fail: the waits for the pieces written, for the
 *     readers of a buffer before its reuse, for the readers at the exit
 *     removed, a "written" flag posted a step early;
 *   - successive calls with different count matrices on persistent slots
 *     and flags, ranks progressed in a random order into their next calls:
 *     an early leaver (exit waits removed) and flags that outlive their
 *     call are caught.
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
#include "xccl_build.h"

#define GUARD_SEND 0x5C
#define GUARD_RECV 0xEE
#define STALE 0xA5                     /* the harness's stale slot bytes */
#define BIG_SLOT ((size_t) 1 << 20)

static unsigned seed_of(int p, unsigned salt)
{
    return (unsigned) p * 2654435761u + SIM_SEED_SALT + salt * 40503u;
}

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

/* The piece the builder cuts from a slot of cap bytes at p > 1: the
 * pipeline part of the slot (less the latency path's 512 bytes from
 * 4 KiB on), two buffers of p - 1 regions, rounded down to 64 bytes. */
static size_t piece_of(size_t cap, int p)
{
    const size_t usable = cap >= 4096 ? (cap - 512) / 64 * 64 : cap;
    const size_t per = usable / 2 / (size_t) (p - 1);
    return per >= 64 ? per / 64 * 64 : per;
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
    for (int i = p - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        const int j = (int) ((seed >> 16) % (unsigned) (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
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
    NPLANTS
} plant_t;

static const char *const plant_name[NPLANTS] = { "none", "written waits removed", "reuse waits removed",
                                                 "exit waits removed", "written posted a step early" };

static int drop_wait(const xccl_sched_t *s, size_t st, const xccl_action_t *a, plant_t how)
{
    if (XCCL_ACT_WAIT != a->kind) {
        return 0;
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
    if (PLANT_NONE == how) {
        return 0;
    }
    size_t w = 0;
    for (size_t st = 0; st < s->nsteps; st++) {
        const size_t begin = s->step_start[st];
        const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        s->step_start[st] = w;
        for (size_t i = begin; i < end; i++) {
            if (drop_wait(s, st, &s->acts[i], how)) {
                changed = 1;
                continue;
            }
            s->acts[w++] = s->acts[i];
        }
    }
    s->nacts = w;
    return changed;
}

/* ------------------------------------------------------------------------ */
/* One call on the simulator                                                */
/* ------------------------------------------------------------------------ */

/* The schedule's shape: no transfers, the slot within its cap, waits only
 * on ranks it trades with; with pc (the piece the test expects, 0: not
 * known) the flag values and the number of waits that the pieces imply. */
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
    size_t waits = 0;
    for (size_t i = 0; i < s->nacts; i++) {
        const xccl_action_t *a = &s->acts[i];
        if (XCCL_ACT_WAIT == a->kind) {
            waits++;
            if (a->peer == r || (0 == v->sb[a->peer] && 0 == v->rb[a->peer])) {
                snprintf(bad, badlen, "%s: rank %d waits on rank %d, which it trades nothing with", what, r,
                         a->peer);
                return -1;
            }
        }
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
            want_waits += b + (a > 2 ? a - 2 : 0) + (a > 0);    /* written; reuse; exit */
        }
    }
    const size_t want_top = 0 == ns && 0 == nr ? 0 : nr >= ns ? 2 * nr : 2 * ns - 1;
    if (s->flag_top != want_top || waits != want_waits) {
        snprintf(bad, badlen, "%s: rank %d: flag_top %u waits %zu, want %zu and %zu (pieces of %zu)", what, r,
                 s->flag_top, waits, want_top, want_waits, pc);
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
    char err[256];
    if (0 == rc && 0 != job_exec(&j, NULL, seed, what, err, sizeof(err))) {
        snprintf(bad, badlen, "%s: %s", what, err);
        rc = -1;
    }
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
#define NSEEDS 3

START_TEST(matrices)
{
    const int p = test_ps[_i];
    size_t *m = xmalloc((size_t) p * (size_t) p * sizeof(size_t));
    char bad[512] = "";
    int runs = 0;
    for (int kind = 0; kind < NMAT; kind++) {
        for (size_t ci = 0; ci <= sizeof(test_pcs) / sizeof(test_pcs[0]); ci++) {
            const int big = ci == sizeof(test_pcs) / sizeof(test_pcs[0]);
            /* a slot of exactly two buffers of p - 1 pieces (below the
             * latency path's 4 KiB), or one that holds every block whole */
            const size_t cap = big || 1 == p ? BIG_SLOT : 2 * (size_t) (p - 1) * test_pcs[ci];
            const size_t pc = 1 == p ? 0 : piece_of(cap, p);
            const size_t unit = big || 1 == p ? 300 : pc;
            if (!big && p > 1) {
                ck_assert_uint_eq(pc, test_pcs[ci]);
                ck_assert_uint_lt(cap, 4096);
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
    ck_assert_int_eq(runs, NMAT * 5 * NSEEDS);
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
 * a rank that left), on the one-to-one and the skewed matrices (many
 * pieces of 7 bytes); the intact schedules pass under the same seeds. */
START_TEST(planted_bugs_fail)
{
    const plant_t how = (plant_t) _i;
    const int p = 4;
    size_t m[16];
    char bad[512] = "", first[512] = "";
    for (int kind = M_MOE; kind <= M_ONE; kind++) {
        int caught = 0, planted = 0;
        for (unsigned sd = 0; sd < 24 && !caught; sd++) {
            make_matrix(kind, p, 7, sd, m);
            const size_t cap = 2 * (size_t) (p - 1) * 7;
            ck_assert_msg(0 == run_a2av(p, m, cap, 7, sd, seed_of(p, 800 + sd), PLANT_NONE, NULL, mat_name[kind],
                                        bad, sizeof(bad)),
                          "intact: %s", bad);
            int any = 0;
            if (0 != run_a2av(p, m, cap, 0, sd, seed_of(p, 800 + sd), how, &any, mat_name[kind], bad,
                              sizeof(bad))) {
                caught = 1;
                snprintf(first, sizeof(first), "%s", bad);
            }
            planted |= any;
        }
        fprintf(stderr, "planted alltoallv shm, %s, %s: %s\n", mat_name[kind], plant_name[how],
                caught ? first : "NOT CAUGHT");
        ck_assert_msg(planted, "%s: %s changed nothing", mat_name[kind], plant_name[how]);
        ck_assert_msg(caught, "%s: %s not caught", mat_name[kind], plant_name[how]);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Successive calls, interleaved: the slot and the flags outlive the call   */
/* ------------------------------------------------------------------------ */

/* Virtual ranks each run a list of calls (count matrices differing from
 * call to call, several pieces) on persistent slots and flags, progressed
 * in a random order as far as each can go and into its next calls: a
 * rank that leaves early overwrites, in its next call, what a slow rank
 * still reads; a flag that a later call's wait took for its own (stale)
 * lets a rank read before the write. */
typedef struct {
    unsigned char **slot;
    struct {
        int posted;
        uint32_t seq, val;
    } *flag;
    int *ranks;
    int ignore_seq;            /* planted: flags compared without their call */
} sc_t;

static sc_t *sc_cur;

static void *sc_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    (void) ctx;
    return XCCL_BUF_SLOT == id ? sc_cur->slot[peer] : NULL;
}

static int sc_post(void *ctx, uint32_t seq, uint32_t val)
{
    const int r = *(const int *) ctx;
    sc_cur->flag[r].posted = 1;
    sc_cur->flag[r].seq = seq;
    sc_cur->flag[r].val = val;
    return 0;
}

static int sc_test(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    (void) ctx;
    const uint32_t fs = sc_cur->flag[peer].seq;
    if (sc_cur->ignore_seq) {
        return sc_cur->flag[peer].posted && sc_cur->flag[peer].val >= val;
    }
    return sc_cur->flag[peer].posted && (fs == seq ? sc_cur->flag[peer].val >= val : (int32_t) (fs - seq) > 0);
}

#define SC_CALLS 30
#define SC_PIECE 16

typedef struct {
    xccl_sched_t s;
    xccl_exec_t e;
    vecs_t v;
    unsigned char *in, *out, *want_in;
    int started;
} sc_call_t;

/* The matrix of call i (the same on every rank): kinds in turn, sizes of
 * up to about five pieces. */
static void sc_matrix(int p, int call, size_t *m)
{
    static const int kinds[] = { M_MOE, M_ONE, M_IRREGULAR, M_EQUAL, M_ZERO, M_PIECES, M_ONE };
    make_matrix(kinds[call % 7], p, SC_PIECE, (unsigned) call * 13u + 1u, m);
}

/* plant: as plant_t, into every call's schedule. */
static int run_successive(int p, unsigned seed, plant_t how, int ignore_seq, char *bad, size_t badlen)
{
    const size_t cap = 2 * (size_t) (p - 1) * SC_PIECE;
    sc_t sc;
    sc.slot = xmalloc((size_t) p * sizeof(*sc.slot));
    sc.flag = calloc((size_t) p, sizeof(*sc.flag));
    sc.ranks = xmalloc((size_t) p * sizeof(int));
    sc.ignore_seq = ignore_seq;
    xccl_peer_t *peer = xmalloc((size_t) p * sizeof(*peer));
    sc_call_t *cur = calloc((size_t) p, sizeof(*cur));
    int *at = calloc((size_t) p, sizeof(int)), *order = xmalloc((size_t) p * sizeof(int));
    size_t *m = xmalloc((size_t) p * (size_t) p * sizeof(size_t));
    sc_cur = &sc;
    for (int r = 0; r < p; r++) {
        sc.slot[r] = xmalloc(cap);
        memset(sc.slot[r], STALE, cap);
        sc.ranks[r] = r;
        peer[r] = (xccl_peer_t) { &sc.ranks[r], sc_buf, sc_post, sc_test, NULL, NULL };
    }
    int rc = 0, idle = 0, left = p;
    while (left > 0 && 0 == rc) {
        seed = seed * 1103515245u + 12345u;
        shuffle(p, seed, order);
        int moved = 0;
        for (int k = 0; k < p && 0 == rc; k++) {
            const int r = order[k];
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 3 == 0) {
                continue;              /* a random share of turns skipped: ranks fall behind */
            }
            while (at[r] < SC_CALLS && 0 == rc) {
                sc_call_t *c = &cur[r];
                if (!c->started) {
                    sc_matrix(p, at[r], m);
                    vecs_make(&c->v, p, r, m, (unsigned) at[r]);
                    xccl_sched_init(&c->s, r, p, 1);
                    c->s.slot_cap = cap;
                    ck_assert_int_eq(xccl_build_alltoallv_shm(&c->s, c->v.sb, c->v.sd, c->v.rb, c->v.rd, NULL, NULL),
                                     0);
                    ck_assert_uint_le(c->s.slot_bytes, cap);
                    plant(&c->s, how);
                    c->in = xmalloc(c->v.slen);
                    c->want_in = xmalloc(c->v.slen);
                    c->out = xmalloc(c->v.rlen);
                    fill_send(&c->v, p, r, (unsigned) at[r], c->in);
                    memcpy(c->want_in, c->in, c->v.slen);
                    memset(c->out, GUARD_RECV, c->v.rlen);
                    void *bufs[XCCL_NBUF] = { c->in, c->out, NULL, sc.slot[r] };
                    ck_assert_int_eq(xccl_exec_init(&c->e, &c->s, NULL, bufs, NULL, NULL, 900u + (unsigned) at[r]), 0);
                    xccl_exec_set_peer(&c->e, &peer[r]);
                    c->started = 1;
                }
                const size_t before = c->e.step;
                const int st = xccl_exec_progress(&c->e);
                moved |= c->e.step != before || st != 0;
                if (st < 0) {
                    snprintf(bad, badlen, "p=%d rank %d call %d: execution failed", p, r, at[r]);
                    rc = -1;
                } else if (0 == st) {
                    break;
                }
                if (st > 0) {
                    char what[64];
                    snprintf(what, sizeof(what), "successive p=%d call %d", p, at[r]);
                    rc = check_rank(&c->v, p, r, (unsigned) at[r], c->out, c->in, c->want_in, what, bad, badlen);
                }
                if (st != 0 || rc) {
                    xccl_exec_fini(&c->e);
                    xccl_sched_fini(&c->s);
                    vecs_free(&c->v);
                    free(c->in);
                    free(c->want_in);
                    free(c->out);
                    memset(c, 0, sizeof(*c));
                    if (st > 0 && ++at[r] == SC_CALLS) {
                        left--;
                    }
                }
            }
        }
        idle = moved ? 0 : idle + 1;
        if (idle > 50 && 0 == rc) {
            snprintf(bad, badlen, "p=%d: deadlock", p);
            rc = -1;
        }
    }
    for (int r = 0; r < p; r++) {
        if (cur[r].started) {
            xccl_exec_fini(&cur[r].e);
            xccl_sched_fini(&cur[r].s);
            vecs_free(&cur[r].v);
            free(cur[r].in);
            free(cur[r].want_in);
            free(cur[r].out);
        }
        free(sc.slot[r]);
    }
    free(sc.slot);
    free(sc.flag);
    free(sc.ranks);
    free(peer);
    free(cur);
    free(at);
    free(order);
    free(m);
    return rc;
}

START_TEST(successive_calls_interleaved)
{
    char bad[512] = "";
    for (int p = 2; p <= 7; p++) {
        for (unsigned sd = 0; sd < 10; sd++) {
            ck_assert_msg(0 == run_successive(p, seed_of(p, 600 + sd), PLANT_NONE, 0, bad, sizeof(bad)), "%s", bad);
        }
    }
    /* without the exit waits a rank leaves while its readers still read,
     * and overwrites its slot in the next call */
    for (int p = 2; p <= 5; p++) {
        int caught = 0;
        for (unsigned sd = 0; sd < 24 && !caught; sd++) {
            caught = 0 != run_successive(p, seed_of(p, 650 + sd), PLANT_NO_EXIT, 0, bad, sizeof(bad));
        }
        fprintf(stderr, "planted successive p=%d, exit waits removed: %s\n", p, caught ? bad : "NOT CAUGHT");
        ck_assert_msg(caught, "p=%d: an early leaver was not caught", p);
    }
    /* flags compared without their call: an earlier call's flag passes a
     * wait of the next */
    int caught = 0;
    for (int p = 2; p <= 5 && !caught; p++) {
        for (unsigned sd = 0; sd < 24 && !caught; sd++) {
            caught = 0 != run_successive(p, seed_of(p, 680 + sd), PLANT_NONE, 1, bad, sizeof(bad));
        }
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
    tcase_add_loop_test(tc, planted_bugs_fail, PLANT_NO_WRITTEN, NPLANTS);
    tcase_add_loop_test(tc, many_seeds, 0, 4);
    tcase_add_test(tc, successive_calls_interleaved);
    suite_add_tcase(su, tc);
    tc = tcase_create("sizes");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, matrices, 0, (int) (sizeof(test_ps) / sizeof(test_ps[0])));
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
