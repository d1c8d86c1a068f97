/*
 * The shared-memory reduce ("shm", algos/shm_reduce.c) on the simulator:
 * every rank's slot a buffer of the simulated node segment, filled with
 * stale bytes, the ranks synchronised by flags, run by the one executor.
 *
 *   - p = 1..9 and 16, every root, in place and not, six element kinds
 *     (float sums whose bits depend on the order among them, checked bit
 *     for bit against a reference computed here in rank order); counts
 *     0, 1, odd ones, around p, at the boundary of the root-alone rule
 *     and above it; slots that hold the message in one piece with room to
 *     spare, exactly, one byte short of that (two pieces), a few and many
 *     pieces, down to one element a piece;
 *   - off the root RECV is never touched (NULL, or guard bytes that must
 *     stay), SEND is never changed (but the root's in place);
 *   - the schedules: no sends or receives, the slot within its cap, every
 *     element reduced p-1 times in all, the two forms where the rule puts
 *     them, pieces and flags as designed, the exit (every other rank ends
 *     waiting for the root's last flag);
 *   - a slot too small, or none, is refused;
 *   - many seeds (interleavings) at a few p;
 *   - planted bugs fail: a barrier's waits removed, the exit waits
 *     removed, the root-alone form's waits before a buffer is reused
 *     removed;
 *   - successive calls with the slots kept, ranks running ahead of slow
 *     ones into the next call: a rank that left while the root still read
 *     its slot would overwrite it (planted: the exit waits removed).
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

#define ROOT_BYTES 2048        /* algos/shm_reduce.c SHM_REDUCE_ROOT_BYTES */
#define HUGE_SLOT ((size_t) 1 << 20)

static const int test_ps[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 16 };
#define NPS ((int) (sizeof(test_ps) / sizeof(test_ps[0])))

static unsigned seed_of(int p, unsigned salt)
{
    return (unsigned) p * 2654435761u + SIM_SEED_SALT + salt * 40503u;
}

/* Whether the root reduces alone (algos/shm_reduce.c, the rule). */
static int root_alone(int p, size_t bytes)
{
    return 2 == p || bytes <= ROOT_BYTES;
}

/* Checks counted, printed at the end of each test. */
static unsigned long nchecks;

/* ------------------------------------------------------------------------ */
/* Planting bugs into built schedules                                       */
/* ------------------------------------------------------------------------ */

/* Remove from s the waits for flag value val (on peer `peer`, or any when
 * peer < 0).  Returns whether anything changed. */
static int plant_no_wait(xccl_sched_t *s, uint32_t val, int peer)
{
    int changed = 0;
    size_t w = 0;
    for (size_t st = 0; st < s->nsteps; st++) {
        const size_t begin = s->step_start[st];
        const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        s->step_start[st] = w;
        for (size_t i = begin; i < end; i++) {
            const xccl_action_t *a = &s->acts[i];
            if (XCCL_ACT_WAIT == a->kind && a->idx == val && (peer < 0 || a->peer == peer)) {
                changed = 1;
                continue;
            }
            s->acts[w++] = *a;
        }
    }
    s->nacts = w;
    return changed;
}

typedef enum {
    PLANT_NONE,
    PLANT_WAITS,               /* every rank's waits for flag value val removed */
    PLANT_EXIT,                /* the other ranks' waits for the root's last flag removed */
    PLANT_REUSE,               /* the other ranks' waits for the root's flag val removed */
} plant_t;

/* ------------------------------------------------------------------------ */
/* One run                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    int p, k, root, in_place;
    size_t count, cap;
    plant_t how;
    uint32_t val;
} run_t;

/* The schedule's shape (before any plant): no transfers, the slot within
 * its cap, the exit, flags and reductions as designed. */
static void check_shape(const job_t *j, const run_t *c, const char *what)
{
    const int p = c->p;
    const size_t bytes = c->count * kind_es(c->k);
    size_t reduced = 0;
    for (int r = 0; r < p; r++) {
        const xccl_sched_t *s = &j->sched[r];
        const tally_t t = tally(s);
        ck_assert_msg(0 == s->max_xfers && 0 == t.sends && 0 == t.recvs, "%s: rank %d sends", what, r);
        ck_assert_msg(s->slot_bytes <= s->slot_cap, "%s: rank %d slot %zu > cap %zu", what, r, s->slot_bytes,
                      s->slot_cap);
        ck_assert_str_eq(s->algo, "shm");
        nchecks += 3;
        reduced += t.reduced;
        if (1 == p || 0 == bytes) {
            ck_assert_msg(0 == s->flag_top && 0 == s->slot_bytes, "%s: flags or a slot with nothing to do", what);
            nchecks++;
            continue;
        }
        const xccl_sched_t *rs = &j->sched[c->root];
        const xccl_action_t *last = &s->acts[s->nacts - 1];
        if (r == c->root) {
            /* it ends with its last flag, after its last read */
            ck_assert_msg(XCCL_ACT_POST == last->kind && last->idx == s->flag_top, "%s: root's last action", what);
        } else {
            /* and everyone else waits for it */
            ck_assert_msg(XCCL_ACT_WAIT == last->kind && last->peer == c->root && last->idx == rs->flag_top,
                          "%s: rank %d does not end waiting for the root's last flag", what, r);
        }
        nchecks++;
        if (root_alone(p, bytes)) {
            /* the others wait for the root alone, and reduce nothing */
            for (size_t i = 0; i < s->nacts && r != c->root; i++) {
                ck_assert_msg(XCCL_ACT_WAIT != s->acts[i].kind || s->acts[i].peer == c->root,
                              "%s: rank %d waits for a peer other than the root", what, r);
                nchecks++;
            }
            ck_assert_msg(r == c->root ? t.reduced == (size_t) (p - 1) * bytes : 0 == t.reduced,
                          "%s: rank %d reduced %zu bytes", what, r, t.reduced);
            nchecks++;
        }
    }
    /* every element reduced p-1 times, once each */
    ck_assert_msg(reduced == (p > 1 ? (size_t) (p - 1) * bytes : 0), "%s: %zu bytes reduced in all", what, reduced);
    nchecks++;
}

/* Runs c on the simulator with this seed; 0 right, -1 wrong (why in bad).
 * *planted: whether the plant found anything to change (NULL: none asked). */
static int run_reduce(const run_t *c, unsigned seed, int *planted, char *bad, size_t badlen)
{
    const int p = c->p;
    const size_t es = kind_es(c->k), bytes = c->count * es;
    char what[200];
    job_t j;
    int rc = 0, changed = 0;
    snprintf(what, sizeof(what), "reduce shm p=%d kind=%d count=%zu root=%d in_place=%d slot=%zu plant=%d/%u", p,
             c->k, c->count, c->root, c->in_place, c->cap, (int) c->how, c->val);
    job_init(&j, p, es);
    for (int r = 0; r < p; r++) {
        j.sched[r].slot_cap = c->cap;
        ck_assert_msg(0 == xccl_build_reduce_shm(&j.sched[r], c->count, c->root, c->in_place), "%s: build failed",
                      what);
    }
    check_shape(&j, c, what);
    const uint32_t exit_val = j.sched[c->root].flag_top;
    for (int r = 0; r < p; r++) {
        xccl_sched_t *s = &j.sched[r];
        if (PLANT_WAITS == c->how) {
            changed |= plant_no_wait(s, c->val, -1);
        } else if (PLANT_EXIT == c->how && r != c->root) {
            changed |= plant_no_wait(s, exit_val, c->root);
        } else if (PLANT_REUSE == c->how && r != c->root) {
            changed |= plant_no_wait(s, c->val, c->root);
        }
        /* off the root RECV is NULL or guard bytes, alternately */
        const int guard = r != c->root && 0 == (c->root + r + (int) c->count) % 2;
        j.rbuf[r] = r == c->root || guard ? xmalloc(bytes) : NULL;
        if (j.rbuf[r]) {
            memset(j.rbuf[r], 0xEE, bytes);
        }
        j.sbuf[r] = r == c->root && c->in_place ? j.rbuf[r] : job_sbuf(&j, r, bytes);
        kind_fill(c->k, r, j.sbuf[r], c->count);
    }
    if (planted) {
        *planted = changed;
    }
    if (PLANT_NONE != c->how && !changed) {
        job_fini(&j);
        return 0;
    }
    unsigned char *want = xmalloc(bytes), *input = xmalloc(bytes);
    kind_reference(c->k, p, want, c->count);
    char err[256];
    if (0 != job_exec(&j, kind_fn(c->k), seed, what, err, sizeof(err))) {
        snprintf(bad, badlen, "%s: %s", what, err);
        rc = -1;
    }
    if (0 == rc && 0 != memcmp(j.rbuf[c->root], want, bytes)) {
        size_t i = 0;
        while (((unsigned char *) j.rbuf[c->root])[i] == want[i]) {
            i++;
        }
        snprintf(bad, badlen, "%s: wrong result at the root, byte %zu", what, i);
        rc = -1;
    }
    for (int r = 0; r < p && 0 == rc; r++) {
        kind_fill(c->k, r, input, c->count);
        if (!(r == c->root && c->in_place) && 0 != memcmp(j.sbuf[r], input, bytes)) {
            snprintf(bad, badlen, "%s: rank %d changed its SEND", what, r);
            rc = -1;
        }
        for (size_t i = 0; r != c->root && j.rbuf[r] && i < bytes && 0 == rc; i++) {
            if (0xEE != j.rbuf[r][i]) {
                snprintf(bad, badlen, "%s: rank %d (not the root) wrote its RECV", what, r);
                rc = -1;
            }
        }
        nchecks += 2;
    }
    nchecks++;
    free(want);
    free(input);
    job_fini(&j);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Sizes and slots                                                          */
/* ------------------------------------------------------------------------ */

/* The root's flag_top for count elements of kind k on p ranks in a slot of
 * cap: it grows with the number of pieces. */
static uint32_t flags_at(int p, int k, size_t count, size_t cap)
{
    xccl_sched_t s;
    xccl_sched_init(&s, 0, p, kind_es(k));
    s.slot_cap = cap;
    ck_assert_int_eq(xccl_build_reduce_shm(&s, count, 0, 0), 0);
    const uint32_t f = s.flag_top;
    xccl_sched_fini(&s);
    return f;
}

/* The smallest slot that takes the message in one piece (the fewest
 * flags): a byte less and it takes two. */
static size_t one_piece_slot(int p, int k, size_t count)
{
    const uint32_t one = flags_at(p, k, count, HUGE_SLOT);
    size_t lo = 3 * kind_es(k), hi = HUGE_SLOT;        /* lo: more pieces; hi: one */
    while (lo + 1 < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (flags_at(p, k, count, mid) == one) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return hi;
}

/* Counts for es-byte elements at p: 0, 1, odd ones, around p, the last
 * count the root reduces alone and the first it does not, larger ones.
 * Returns how many. */
static size_t counts_for(int p, size_t es, size_t *c)
{
    size_t n = counts_around(p, c);
    c[n++] = 7;
    c[n++] = 37;
    c[n++] = ROOT_BYTES / es;
    c[n++] = ROOT_BYTES / es + 1;
    c[n++] = 1001;
    c[n++] = 5003;
    return n;
}

/* Slots for count at p: room to spare, exactly one piece, a byte short of
 * one piece, about five pieces, and (small counts) one element a piece.
 * Returns how many. */
static int caps_for(int p, int k, size_t count, size_t *caps)
{
    const size_t es = kind_es(k);
    int n = 0;
    caps[n++] = HUGE_SLOT;
    if (0 == count || 1 == p) {
        caps[n++] = 0;         /* nothing to move: no slot needed */
        return n;
    }
    const size_t exact = one_piece_slot(p, k, count);
    caps[n++] = exact;
    caps[n++] = exact - 1;
    if (count >= 10) {
        caps[n++] = exact / 5 > 3 * es ? exact / 5 : 3 * es;
    }
    if (count <= 40) {
        caps[n++] = 3 * es;
    } else if (count == ROOT_BYTES / es + 1 && !root_alone(p, count * es)) {
        caps[n++] = 3 * 13 * es;       /* sliced, pieces of a few elements */
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

START_TEST(reduce_shm_sizes)
{
    const int p = test_ps[_i];
    char bad[512] = "";
    nchecks = 0;
    unsigned long runs = 0;
    for (int k = 0; k < NKINDS; k++) {
        size_t counts[16];
        const size_t nc = counts_for(p, kind_es(k), counts);
        for (size_t ci = 0; ci < nc; ci++) {
            size_t caps[8];
            const int ncaps = caps_for(p, k, counts[ci], caps);
            for (int cj = 0; cj < ncaps; cj++) {
                for (int root = 0; root < p; root++) {
                    for (int in_place = 0; in_place < 2; in_place++) {
                        const run_t c = { p, k, root, in_place, counts[ci], caps[cj], PLANT_NONE, 0 };
                        ck_assert_msg(0 == run_reduce(&c, seed_of(p, (unsigned) (root * 7 + cj)), NULL, bad,
                                                      sizeof(bad)),
                                      "%s", bad);
                        runs++;
                    }
                }
            }
        }
    }
    fprintf(stderr, "reduce_shm_sizes p=%d: %lu runs, %lu checks\n", p, runs, nchecks);
}
END_TEST

/* Pieces and flags: the root alone posts one flag per piece; sliced, the
 * pipeline's pieces + 2 (a barrier after each step, the last the root's
 * alone).  Slots of depth buffers of ce elements, whole lines or less. */
START_TEST(reduce_shm_pieces)
{
    const size_t es = 4;
    nchecks = 0;
    for (int p = 2; p <= 5; p++) {
        for (int big = 0; big < 2; big++) {
            const size_t count = big ? 1000 : 200;          /* 4000 B: sliced but at p = 2 */
            const int alone = root_alone(p, count * es), depth = alone ? 2 : 3;
            for (size_t ce = 1; ce <= 256; ce *= 4) {
                /* (at least the three elements every slot needs) */
                const size_t bufs = (size_t) depth * ce * es, cap = bufs > 3 * es ? bufs : 3 * es;
                const size_t nchunks = (count + ce - 1) / ce;
                for (int r = 0; r < p; r++) {
                    xccl_sched_t s;
                    xccl_sched_init(&s, r, p, es);
                    s.slot_cap = cap;
                    ck_assert_int_eq(xccl_build_reduce_shm(&s, count, 1, 0), 0);
                    /* the root alone: a flag per piece, the root's after it
                     * reduced it, the others' after they copied it in;
                     * sliced: a barrier per step, the last the root's alone */
                    ck_assert_uint_eq(s.flag_top, nchunks + (alone ? 0 : 1 == r ? 2 : 1));
                    ck_assert_uint_le(s.slot_bytes, cap);
                    if (nchunks > (size_t) depth) {
                        ck_assert_uint_eq(s.slot_bytes, bufs);           /* every buffer used */
                    }
                    nchecks += 2;
                    xccl_sched_fini(&s);
                }
            }
        }
    }
    fprintf(stderr, "reduce_shm_pieces: %lu checks\n", nchecks);
}
END_TEST

/* A slot too small for three elements, or none: refused, whatever the
 * count; nothing to move needs none. */
START_TEST(reduce_shm_small_slot)
{
    static const size_t ess[] = { 1, 4, 8 };
    for (size_t e = 0; e < 3; e++) {
        const size_t es = ess[e];
        for (size_t count = 1; count <= 5000; count = count * 9 + 1) {
            for (size_t cap = 0; cap <= 3 * es; cap += es) {
                for (int r = 0; r < 3; r++) {
                    xccl_sched_t s;
                    xccl_sched_init(&s, r, 3, es);
                    s.slot_cap = 3 * es == cap ? cap : cap + es - 1;    /* a byte short of 3 elements */
                    const int want = 3 * es == cap ? 0 : -1;
                    ck_assert_int_eq(xccl_build_reduce_shm(&s, count, 2, 0), want);
                    ck_assert_int_eq(s.error, want ? 1 : 0);
                    xccl_sched_fini(&s);
                }
            }
        }
    }
    for (int p = 1; p <= 2; p++) {
        xccl_sched_t s;
        xccl_sched_init(&s, 0, p, 4);
        ck_assert_int_eq(xccl_build_reduce_shm(&s, 1 == p ? 10 : 0, 0, 0), 0);    /* no slot needed */
        ck_assert_str_eq(s.algo, "shm");
        ck_assert_uint_eq(s.slot_bytes, 0);
        xccl_sched_fini(&s);
    }
}
END_TEST

/* A schedule with a slot but no slot buffer is refused before it runs. */
START_TEST(refused_without_slot)
{
    const int p = 3;
    for (size_t count = 8; count <= 4000; count *= 500) {
        xccl_sched_t s[3];
        xccl_exec_t e[3];
        int32_t *sbuf = xmalloc(count * 4), *rbuf = xmalloc(count * 4);
        xccl_sim_t *sim = xccl_sim_create(p);
        for (int r = 0; r < p; r++) {
            xccl_sched_init(&s[r], r, p, 4);
            s[r].slot_cap = 65536;
            ck_assert_int_eq(xccl_build_reduce_shm(&s[r], count, 0, 0), 0);
            ck_assert(s[r].slot_bytes > 0);
            memset(rbuf, 0xEE, count * 4);
            for (size_t i = 0; i < count; i++) {
                sbuf[i] = r;
            }
            void *bufs[XCCL_NBUF] = { sbuf, rbuf, NULL, NULL };        /* no slot */
            ck_assert_int_eq(xccl_exec_init(&e[r], &s[r], xccl_sim_transport(sim, r), bufs, NULL, NULL, 1), 0);
            xccl_exec_set_peer(&e[r], xccl_sim_peer(sim, r));
            ck_assert_int_lt(xccl_exec_progress(&e[r]), 0);
            ck_assert_uint_eq(e[r].step, 0);
            for (size_t i = 0; i < count; i++) {
                ck_assert_int_eq(rbuf[i], (int32_t) 0xEEEEEEEE);
            }
            xccl_exec_fini(&e[r]);
            xccl_sched_fini(&s[r]);
        }
        xccl_sim_destroy(sim);
        free(sbuf);
        free(rbuf);
    }
}
END_TEST

/* Many interleavings at a few p, with pieces, both forms. */
START_TEST(reduce_shm_many_seeds)
{
    static const int ps[] = { 2, 3, 5, 8 };
    char bad[512] = "";
    nchecks = 0;
    for (size_t pi = 0; pi < 4; pi++) {
        const int p = ps[pi];
        for (unsigned sd = 0; sd < 40; sd++) {
            const size_t count = sd % 2 ? 3001 : 301;
            const run_t c = { p, KIND_FLT_ORDER, (int) sd % p, (int) (sd / 2) % 2, count,
                              count * 4 / (sd % 3 + 2), PLANT_NONE, 0 };
            ck_assert_msg(0 == run_reduce(&c, seed_of(p, 100 + sd), NULL, bad, sizeof(bad)), "%s", bad);
        }
    }
    fprintf(stderr, "reduce_shm_many_seeds: %lu checks\n", nchecks);
}
END_TEST

/* Whether c, planted, fails under one of n seeds. */
static int caught(run_t c, unsigned salt, unsigned n, char *bad, size_t badlen)
{
    for (unsigned sd = 0; sd < n; sd++) {
        int planted = 0;
        if (0 != run_reduce(&c, seed_of(c.p, salt + sd), &planted, bad, badlen)) {
            return 1;
        }
        ck_assert_msg(planted, "plant %d/%u found nothing to remove", (int) c.how, c.val);
    }
    return 0;
}

START_TEST(planted_bugs_fail)
{
    char bad[512] = "";
    for (int p = 2; p <= 6; p++) {
        for (int big = 0; big < 2; big++) {
            const size_t count = big ? 3001 : 301;       /* floats: sliced from p = 3, or root alone */
            const size_t cap = count * 4 / 2;             /* several pieces */
            for (int root = 0; root < p; root += p - 1) {
                /* the first barrier (the root alone: its wait for the copies in) */
                run_t c = { p, KIND_FLT_ORDER, root, 1, count, cap, PLANT_WAITS, 1 };
                int got = caught(c, 300, 20, bad, sizeof(bad));
                fprintf(stderr, "planted: p=%d count=%zu root=%d, waits for 1 removed: %s\n", p, count, root,
                        got ? bad : "NOT CAUGHT");
                ck_assert_msg(got, "p=%d count=%zu: waits for 1 removed not caught", p, count);
                /* the barrier before the root copies the slices out of the
                 * last piece (sliced: the root's last flag less one) */
                if (!root_alone(p, count * 4)) {
                    c.val = flags_at(p, c.k, count, cap) - 1;
                    got = caught(c, 400, 20, bad, sizeof(bad));
                    fprintf(stderr, "planted: p=%d root=%d, waits for %u removed: %s\n", p, root, c.val,
                            got ? bad : "NOT CAUGHT");
                    ck_assert_msg(got, "p=%d: waits for %u removed not caught", p, c.val);
                }
                /* the exit: a rank leaves while the root reads its slot */
                c.how = PLANT_EXIT;
                got = caught(c, 500, 20, bad, sizeof(bad));
                fprintf(stderr, "planted: p=%d count=%zu root=%d, exit waits removed: %s\n", p, count, root,
                        got ? bad : "NOT CAUGHT");
                ck_assert_msg(got, "p=%d count=%zu: exit waits removed not caught", p, count);
            }
        }
        /* the root alone, many pieces: a rank writes piece 4 over piece 2,
         * which the root has not reduced yet (a rank runs its steps up to
         * a wait in one go, so a removed wait shows only where the rank
         * could be held there: from piece 4 on) */
        const run_t c = { p, KIND_FLT_ORDER, p / 2, 0, 500, 3 * 64, PLANT_REUSE, 3 };
        const int got = caught(c, 600, 40, bad, sizeof(bad));
        fprintf(stderr, "planted: p=%d, the root alone without the waits before reuse: %s\n", p,
                got ? bad : "NOT CAUGHT");
        ck_assert_msg(got, "p=%d: the root alone without the waits before reuse not caught", p);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Successive calls: the slots kept, ranks running ahead into the next call */
/* ------------------------------------------------------------------------ */

/* Flags in memory, slots kept from call to call; the providers' ctx is
 * the rank. */
typedef struct {
    int p;
    unsigned char **slot;
    struct {
        int posted;
        uint32_t seq, val;
    } *flag;
    int *ranks;
} mc_t;

static mc_t *mc_cur;

static void *mc_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    (void) ctx;
    return XCCL_BUF_SLOT == id ? mc_cur->slot[peer] : NULL;
}

static int mc_post(void *ctx, uint32_t seq, uint32_t val)
{
    const int r = *(const int *) ctx;
    mc_cur->flag[r].posted = 1;
    mc_cur->flag[r].seq = seq;
    mc_cur->flag[r].val = val;
    return 0;
}

static int mc_test(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    (void) ctx;
    const uint32_t fs = mc_cur->flag[peer].seq;
    return mc_cur->flag[peer].posted && (fs == seq ? mc_cur->flag[peer].val >= val : (int32_t) (fs - seq) > 0);
}

#define MC_CALLS 40
#define MC_SLOT 8192

typedef struct {
    xccl_sched_t s;
    xccl_exec_t e;
    int32_t *in, *out;
    size_t n;
    int root, in_place, started;
} mc_call_t;

/* Call i: its root, count and in place (the same on every rank): both
 * forms, one piece and several. */
static void mc_shape(int i, int p, unsigned mix, size_t *n, int *root, int *in_place)
{
    static const size_t sizes[] = { 13, 400, 1500, 3000, 700 };
    *n = sizes[(unsigned) i * (mix + 1) % 5] + (size_t) (i % 3);
    /* the same root for three calls in a row: a rank that leaves early
     * writes its slot again in the next call (a root need not) */
    *root = (int) (((unsigned) i / 3u * 5u + mix) % (unsigned) p);
    *in_place = (i + (int) mix) % 3 == 0;
}

static void mc_build(mc_call_t *c, int r, int p, int call, unsigned mix, int plant)
{
    mc_shape(call, p, mix, &c->n, &c->root, &c->in_place);
    xccl_sched_init(&c->s, r, p, sizeof(int32_t));
    c->s.slot_cap = MC_SLOT;
    ck_assert_int_eq(xccl_build_reduce_shm(&c->s, c->n, c->root, c->in_place), 0);
    if (plant && r != c->root) {
        /* the exit: the wait for the root's last flag, this rank's last action */
        const xccl_action_t *last = &c->s.acts[c->s.nacts - 1];
        ck_assert(XCCL_ACT_WAIT == last->kind && last->peer == c->root);
        ck_assert(plant_no_wait(&c->s, last->idx, c->root));
    }
    c->in = xmalloc(c->n * 4);
    for (size_t i = 0; i < c->n; i++) {
        c->in[i] = (int32_t) (call * 100003 + r * 1009 + (int) i);
    }
    c->out = NULL;
    if (r == c->root) {
        c->out = c->in_place ? c->in : xmalloc(c->n * 4);
        if (!c->in_place) {
            memset(c->out, 0xEE, c->n * 4);
        }
    }
}

static int mc_check(const mc_call_t *c, int r, int p, int call)
{
    for (size_t i = 0; r == c->root && i < c->n; i++) {
        uint32_t acc = 0;
        for (int q = 0; q < p; q++) {
            acc += (uint32_t) (call * 100003 + q * 1009 + (int) i);
        }
        if (c->out[i] != (int32_t) acc) {
            return -1;
        }
    }
    return 0;
}

static void mc_free(mc_call_t *c)
{
    xccl_exec_fini(&c->e);
    xccl_sched_fini(&c->s);
    if (c->out != c->in) {
        free(c->out);
    }
    free(c->in);
    memset(c, 0, sizeof(*c));
}

/* Runs MC_CALLS calls on p ranks; 0 right, -1 a wrong result or deadlock. */
static int run_successive(int p, unsigned seed, unsigned mix, int plant, char *bad, size_t badlen)
{
    mc_t mc;
    mc.p = p;
    mc.slot = xmalloc((size_t) p * sizeof(*mc.slot));
    mc.flag = calloc((size_t) p, sizeof(*mc.flag));
    mc.ranks = xmalloc((size_t) p * sizeof(int));
    xccl_peer_t *peer = xmalloc((size_t) p * sizeof(*peer));
    mc_call_t *cur = calloc((size_t) p, sizeof(*cur));
    int *at = calloc((size_t) p, sizeof(int)), *order = xmalloc((size_t) p * sizeof(int));
    red_ctx_t rctx = { xccl_reduce_kernel(XCCL_DT_INT32, XCCL_OP_SUM), 4, 0 };
    mc_cur = &mc;
    for (int r = 0; r < p; r++) {
        mc.slot[r] = xmalloc(MC_SLOT);
        memset(mc.slot[r], 0xA5, MC_SLOT);
        mc.ranks[r] = r;
        peer[r] = (xccl_peer_t) { &mc.ranks[r], mc_buf, mc_post, mc_test, NULL, NULL };
        order[r] = r;
    }
    int rc = 0, idle = 0, left = p;
    while (left > 0 && 0 == rc) {
        for (int i = p - 1; i > 0; i--) {
            seed = seed * 1103515245u + 12345u;
            const int j = (int) ((seed >> 16) % (unsigned) (i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        int moved = 0;
        for (int k = 0; k < p && 0 == rc; k++) {
            const int r = order[k];
            /* a random share of turns is skipped: some ranks fall behind */
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 3 == 0) {
                continue;
            }
            while (at[r] < MC_CALLS && 0 == rc) {
                mc_call_t *c = &cur[r];
                if (!c->started) {
                    mc_build(c, r, p, at[r], mix, plant);
                    void *bufs[XCCL_NBUF] = { c->in, c->out, NULL, mc.slot[r] };
                    const uint32_t seq = 500u + (unsigned) at[r];
                    ck_assert_int_eq(xccl_exec_init(&c->e, &c->s, NULL, bufs, reduce_cb, &rctx, seq), 0);
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
                } else {
                    if (0 != mc_check(c, r, p, at[r])) {
                        snprintf(bad, badlen, "p=%d call %d (n=%zu root=%d): wrong result", p, at[r], c->n, c->root);
                        rc = -1;
                    }
                    nchecks++;
                    mc_free(c);
                    if (++at[r] == MC_CALLS) {
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
    ck_assert_msg(!rctx.bad_alias, "a reduction's ranges overlap partially");
    for (int r = 0; r < p; r++) {
        if (cur[r].started) {
            mc_free(&cur[r]);
        }
        free(mc.slot[r]);
    }
    free(mc.slot);
    free(mc.flag);
    free(mc.ranks);
    free(peer);
    free(cur);
    free(at);
    free(order);
    return rc;
}

START_TEST(successive_calls_interleaved)
{
    char bad[256] = "";
    nchecks = 0;
    for (int p = 2; p <= 7; p++) {
        for (unsigned sd = 0; sd < 12; sd++) {
            ck_assert_msg(0 == run_successive(p, seed_of(p, 700 + sd), sd % 4, 0, bad, sizeof(bad)), "%s", bad);
        }
    }
    fprintf(stderr, "successive_calls_interleaved: %lu calls checked\n", nchecks);
    /* without the exit waits, a rank that ran ahead overwrites its slot
     * while the root still reads it */
    for (int p = 2; p <= 7; p++) {
        int got = 0;
        for (unsigned sd = 0; sd < 24 && !got; sd++) {
            got = 0 != run_successive(p, seed_of(p, 900 + sd), sd % 4, 1, bad, sizeof(bad));
        }
        fprintf(stderr, "planted: p=%d, successive calls without the exit waits: %s\n", p, got ? bad : "NOT CAUGHT");
        ck_assert_msg(got, "p=%d: successive calls without the exit waits not caught", p);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("shm_reduce");
    TCase *tc = tcase_create("basics");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, reduce_shm_pieces);
    tcase_add_test(tc, reduce_shm_small_slot);
    tcase_add_test(tc, refused_without_slot);
    tcase_add_test(tc, reduce_shm_many_seeds);
    tcase_add_test(tc, planted_bugs_fail);
    tcase_add_test(tc, successive_calls_interleaved);
    suite_add_tcase(su, tc);
    tc = tcase_create("sizes");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, reduce_shm_sizes, 0, NPS);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
