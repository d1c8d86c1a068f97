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
 *     spare (the root alone in the halves), exactly, one byte short of
 *     that (two pieces), a few and many pieces, down to one element a
 *     piece;
 *   - off the root RECV is never touched (NULL, or guard bytes that must
 *     stay), SEND is never changed (but the root's in place);
 *   - the schedules: no sends or receives, the slot within its cap, every
 *     element reduced p-1 times in all, the two forms where the rule puts
 *     them, pieces and flags as designed; the way a call ends: every
 *     other rank waiting for the root's last flag, or (the root alone in
 *     the halves) the entry post alone first, the entry's waits on every
 *     peer where a rank writes its slot, SHM_DONE last, no exit waits, a
 *     root that writes nothing using no slot;
 *   - a slot too small, or none, is refused;
 *   - many seeds (interleavings) at a few p;
 *   - planted bugs fail: a barrier's waits removed, the exit waits
 *     removed, the root-alone form's waits before a buffer is reused
 *     removed, with and without the halves;
 *   - successive calls with the slots kept, ranks running ahead of slow
 *     ones into the next call, each rank settling what a call without an
 *     exit wait left owed as the component does: reduce alone on a slot
 *     without halves, and mixed with the other shared-memory schedules
 *     (alltoallv, allgather without its exit barrier, bcast, the allreduce
 *     latency path, a call without flags) on slots of 8 and 48 KiB.
 *     Caught: a rank that left while the root still read its slot (the
 *     exit waits removed), one that writes the half a root two calls
 *     behind still reads (the entry waits removed), writers waiting for
 *     each other's entry post (the post behind the entry waits), and
 *     (mixed) a call of one layout overwriting what a call of another
 *     left to read (the settlement skipped).
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

#define ROOT_BYTES 2048        /* algos/shm_reduce.c SHM_REDUCE_ROOT_BYTES */
#define HUGE_SLOT ((size_t) 1 << 20)
#define WIDE_SLOT ((size_t) 49152)     /* halves of 20 KiB */

static const int test_ps[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 16 };
#define NPS ((int) (sizeof(test_ps) / sizeof(test_ps[0])))

#define DONE_FLAG ((uint32_t) 1 << 30)  /* algos/shm_util.h SHM_DONE */

/* Whether the root reduces alone (algos/shm_reduce.c, the rule). */
static int root_alone(int p, size_t bytes)
{
    return 2 == p || bytes <= ROOT_BYTES;
}

/* The half of a slot of cap bytes (whole pages of the pipelines' part,
 * less the latency path's 512 bytes from 4 KiB on), 0: none.  The root
 * alone takes the halves wherever the slot has them. */
static size_t half_of(size_t cap)
{
    const size_t usable = cap >= 4096 ? (cap - 512) / 64 * 64 : cap;
    return usable / 2 / 4096 * 4096;
}

/* Checks counted, printed at the end of each test. */
static unsigned long nchecks;

/* ------------------------------------------------------------------------ */
/* Planting bugs into built schedules                                       */
/* ------------------------------------------------------------------------ */

/* A wait for flag value val on peer `peer`, or any when peer < 0. */
typedef struct {
    uint32_t val;
    int peer;
} wait_for_t;

static int drop_wait_for(const xccl_sched_t *s, size_t st, const xccl_action_t *a, void *ctx)
{
    const wait_for_t *w = ctx;
    (void) s, (void) st;
    return XCCL_ACT_WAIT == a->kind && a->idx == w->val && (w->peer < 0 || a->peer == w->peer);
}

/* Remove from s the waits for flag value val (on peer `peer`, or any when
 * peer < 0).  Returns whether anything changed. */
static int plant_no_wait(xccl_sched_t *s, uint32_t val, int peer)
{
    wait_for_t w = { val, peer };
    return sched_drop(s, drop_wait_for, &w);
}

/* The entry post moved into the step of the entry's waits (steps 0 and 1
 * made one). */
static void plant_late_entry(xccl_sched_t *s)
{
    if (s->entry_waits && s->nsteps >= 2 && 1 == s->step_start[1]) {
        sched_join_entry(s);
    }
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
 * its cap, the way it ends, flags and reductions as designed. */
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
        const int halves = root_alone(p, bytes) && half_of(c->cap) > 0;
        ck_assert_msg(s->no_exit == halves && s->entry_waits == halves && s->slot_nalt == (halves ? 2u : 0u) &&
                          s->slot_alt == (halves ? half_of(c->cap) : 0),
                      "%s: rank %d: no_exit %d entry_waits %d regions %u of %zu", what, r, s->no_exit,
                      s->entry_waits, s->slot_nalt, s->slot_alt);
        nchecks++;
        const xccl_sched_t *rs = &j->sched[c->root];
        const xccl_action_t *last = &s->acts[s->nacts - 1];
        /* the entry's waits (one call back): one on every peer where the
         * rank writes its slot (all but a root that reads its own input
         * from SEND), none elsewhere */
        const int writes = r != c->root || (c->in_place && c->root >= 2);
        size_t entry = 0;
        uint32_t entered[2] = { 0, 0 };       /* bit q of the peers seen (p <= 64) */
        for (size_t i = 0; i < s->nacts; i++) {
            const xccl_action_t *a = &s->acts[i];
            if (XCCL_ACT_WAIT == a->kind && a->len > 0) {
                const int seen = entered[a->peer / 32] >> a->peer % 32 & 1u;
                ck_assert_msg(1 == a->len && 0 == a->idx && a->peer != r && !seen,
                              "%s: rank %d: a wait one call back", what, r);
                entered[a->peer / 32] |= 1u << a->peer % 32;
                entry++;
            }
        }
        ck_assert_msg(entry == (halves && writes ? (size_t) (p - 1) : 0), "%s: rank %d: %zu entry waits", what, r,
                      entry);
        nchecks++;
        if (halves) {
            /* the entry post alone first, SHM_DONE last on every rank: no
             * exit waits; a root that writes nothing uses no slot */
            ck_assert_msg(s->nsteps >= 2 && 1 == s->step_start[1] && XCCL_ACT_POST == s->acts[0].kind &&
                              0 == s->acts[0].idx,
                          "%s: rank %d: not the entry post alone first", what, r);
            ck_assert_msg(XCCL_ACT_POST == last->kind && DONE_FLAG == last->idx && DONE_FLAG == s->flag_top,
                          "%s: rank %d: not SHM_DONE last", what, r);
            ck_assert_msg(writes == (s->slot_bytes > 0), "%s: rank %d: slot %zu", what, r, s->slot_bytes);
            nchecks += 3;
        } else if (r == c->root) {
            /* it ends with its last flag, after its last read */
            ck_assert_msg(XCCL_ACT_POST == last->kind && last->idx == s->flag_top, "%s: root's last action", what);
        } else {
            /* and everyone else waits for it */
            ck_assert_msg(XCCL_ACT_WAIT == last->kind && last->peer == c->root && last->idx == rs->flag_top,
                          "%s: rank %d does not end waiting for the root's last flag", what, r);
        }
        nchecks++;
        if (root_alone(p, bytes)) {
            /* within the call the others wait for the root alone, and
             * reduce nothing */
            for (size_t i = 0; i < s->nacts && r != c->root; i++) {
                ck_assert_msg(XCCL_ACT_WAIT != s->acts[i].kind || s->acts[i].len > 0 || s->acts[i].peer == c->root,
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
    rc = job_try(&j, kind_fn(c->k), seed, what, bad, badlen);
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

/* The root's highest flag (but SHM_DONE) for count elements of kind k on
 * p ranks in a slot of cap: it grows with the number of pieces. */
static uint32_t flags_at(int p, int k, size_t count, size_t cap)
{
    xccl_sched_t s;
    xccl_sched_init(&s, 0, p, kind_es(k));
    s.slot_cap = cap;
    ck_assert_int_eq(xccl_build_reduce_shm(&s, count, 0, 0), 0);
    uint32_t f = 0;
    for (size_t i = 0; i < s.nacts; i++) {
        if (XCCL_ACT_POST == s.acts[i].kind && DONE_FLAG != s.acts[i].idx && s.acts[i].idx > f) {
            f = s.acts[i].idx;
        }
    }
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
    /* the root alone in the halves: pieces of half a half, at most 64
     * KiB; as many buffers as the half holds */
    static const struct {
        int p;
        size_t count, cap, pieces, used;
    } halves[] = {
        { 2, 30000, WIDE_SLOT, 12, 20480 },          /* pieces of 10 KiB, two in the half */
        { 2, 30000, HUGE_SLOT, 2, 120000 },          /* pieces of 64 KiB, seven in the half */
        { 3, 500, WIDE_SLOT, 1, 2000 },
        { 2, 2, 8704, 1, 8 },                        /* the smallest slot with halves: 4 KiB */
    };
    for (size_t i = 0; i < sizeof(halves) / sizeof(halves[0]); i++) {
        for (int r = 0; r < halves[i].p; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, halves[i].p, es);
            s.slot_cap = halves[i].cap;
            ck_assert_int_eq(xccl_build_reduce_shm(&s, halves[i].count, 0, 0), 0);
            ck_assert_uint_eq(s.slot_nalt, 2);
            ck_assert_uint_eq(s.slot_alt, half_of(halves[i].cap));
            ck_assert_uint_eq(flags_at(halves[i].p, RED_I32_SUM, halves[i].count, halves[i].cap), halves[i].pieces);
            /* the root (not in place) writes nothing; the others use the
             * buffers in one half, the other half above them */
            ck_assert_uint_eq(s.slot_bytes, 0 == r ? 0 : halves[i].used + s.slot_alt);
            nchecks += 4;
            xccl_sched_fini(&s);
        }
    }
    /* a byte less and no halves */
    xccl_sched_t s;
    xccl_sched_init(&s, 1, 2, es);
    s.slot_cap = 8703;
    ck_assert_int_eq(xccl_build_reduce_shm(&s, 2, 0, 0), 0);
    ck_assert_uint_eq(s.slot_nalt, 0);
    ck_assert_int_eq(s.no_exit, 0);
    xccl_sched_fini(&s);
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

/* A schedule with a slot but no slot buffer is refused before it runs
 * (the root alone in the halves, root 0 not in place, writes no slot and
 * needs none). */
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
            if (0 == r && 8 == count) {
                ck_assert_uint_eq(s[r].slot_bytes, 0);
                xccl_sched_fini(&s[r]);
                continue;
            }
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
            for (int wide = 0; wide < 2; wide++) {
                /* several pieces, or a slot with halves (the root alone
                 * there in one piece, of two ranks 3001 floats in two) */
                const size_t cap = wide ? WIDE_SLOT : count * 4 / 2;
                const int halves = wide && root_alone(p, count * 4);
                for (int root = 0; root < p; root += p - 1) {
                    /* the first barrier (the root alone: its wait for the copies in) */
                    run_t c = { p, KIND_FLT_ORDER, root, 1, count, cap, PLANT_WAITS, 1 };
                    int got = caught(c, 300, 20, bad, sizeof(bad));
                    fprintf(stderr, "planted: p=%d count=%zu slot=%zu root=%d, waits for 1 removed: %s\n", p, count,
                            cap, root, got ? bad : "NOT CAUGHT");
                    ck_assert_msg(got, "p=%d count=%zu slot=%zu: waits for 1 removed not caught", p, count, cap);
                    /* the barrier before the root copies the slices out of
                     * the last piece (sliced: the root's last flag less one) */
                    if (!root_alone(p, count * 4)) {
                        c.val = flags_at(p, c.k, count, cap) - 1;
                        got = caught(c, 400, 20, bad, sizeof(bad));
                        fprintf(stderr, "planted: p=%d slot=%zu root=%d, waits for %u removed: %s\n", p, cap, root,
                                c.val, got ? bad : "NOT CAUGHT");
                        ck_assert_msg(got, "p=%d slot=%zu: waits for %u removed not caught", p, cap, c.val);
                    }
                    /* the exit: a rank leaves while the root reads its slot
                     * (the halves have none: check_shape) */
                    if (!halves) {
                        c.how = PLANT_EXIT;
                        got = caught(c, 500, 20, bad, sizeof(bad));
                        fprintf(stderr, "planted: p=%d count=%zu slot=%zu root=%d, exit waits removed: %s\n", p,
                                count, cap, root, got ? bad : "NOT CAUGHT");
                        ck_assert_msg(got, "p=%d count=%zu slot=%zu: exit waits removed not caught", p, count, cap);
                    }
                }
            }
        }
        /* the root alone, many pieces: a rank writes piece 4 over piece 2,
         * which the root has not reduced yet (a rank runs its steps up to
         * a wait in one go, so a removed wait shows only where the rank
         * could be held there: from piece 4 on); in the halves (pieces of
         * 10 KiB: two ranks) too */
        for (int wide = 0; wide < (2 == p ? 2 : 1); wide++) {
            const run_t c = { p, KIND_FLT_ORDER, p / 2, 0, wide ? 30000 : 500, wide ? WIDE_SLOT : 3 * 64,
                              PLANT_REUSE, 3 };
            const int got = caught(c, 600, 40, bad, sizeof(bad));
            fprintf(stderr, "planted: p=%d slot=%zu, the root alone without the waits before reuse: %s\n", p, c.cap,
                    got ? bad : "NOT CAUGHT");
            ck_assert_msg(got, "p=%d slot=%zu: the root alone without the waits before reuse not caught", p, c.cap);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Successive calls: the slots kept, ranks running ahead into the next call */
/* ------------------------------------------------------------------------ */

/* Virtual ranks each run a list of calls on persistent slots and flags,
 * progressed in a random order as far as each can go and into their next
 * calls.  The calls: reduce alone (roots, counts and in place varying,
 * both forms, one piece and several), or mixed with the other
 * shared-memory schedules on the same slots, so that calls of one layout
 * follow calls of another with ranks running ahead: alltoallv (the
 * halves too), allgather (whole: it moves through regions of the slot
 * and, of one chunk, has no exit barrier), bcast (whole: an exit
 * barrier), the allreduce latency path (two regions at the slot's end) or
 * its pipeline, and a call without flags (a reduce of nothing).  Each
 * rank settles what a call without an exit wait left owed as the
 * component does (ompi_coll_xccl/coll_xccl_exec.c): one xccl_exit_owed_t
 * for all its calls, given to every call's executor before it first
 * progresses (shm_successive runs the calls). */
#define MC_CALLS 40
#define MC_SLOT 8192           /* no halves; the latency path's regions */

enum { K_REDUCE, K_A2AV, K_AG, K_BCAST, K_AR_SMALL, K_EMPTY };
static const char *const mc_kind_name[] = { "reduce", "alltoallv", "allgather", "bcast", "allreduce small",
                                            "reduce of nothing" };

/* plant (into the reduce calls): none, the exit waits removed (a slot
 * without halves), the entry waits removed, the entry post behind them */
enum { MC_PLANT_NONE, MC_PLANT_EXIT, MC_PLANT_ENTRY, MC_PLANT_LATE_ENTRY };

/* How a run goes: the slot, the calls alone or mixed, the plant, the
 * settlement skipped (xccl_exec_set_owed never called). */
typedef struct {
    size_t cap;
    int mixed, plant, no_settle;
} mc_run_t;

/* What the build and check of a call know: the run, p and the mix. */
typedef struct {
    const mc_run_t *run;
    int p;
    unsigned mix;
} mc_ctx_t;

typedef struct {
    shm_call_t sim;
    int kind;
    size_t n;                  /* int32 elements (reduce, allreduce), else bytes (a block) */
    int root, in_place;
} mc_call_t;

/* The kind of call i (the same on every rank): reduce alone, or mixed
 * with up to three reduce calls in a row. */
static int mc_kind(int call, int mixed, unsigned mix)
{
    static const int kinds[] = { K_REDUCE, K_REDUCE, K_AG, K_REDUCE, K_A2AV, K_REDUCE, K_REDUCE, K_REDUCE,
                                 K_BCAST, K_REDUCE, K_EMPTY, K_REDUCE, K_AR_SMALL, K_A2AV, K_REDUCE, K_REDUCE,
                                 K_AG, K_A2AV, K_AG };
    return mixed ? kinds[((unsigned) call + mix * 5u) % (sizeof(kinds) / sizeof(kinds[0]))] : K_REDUCE;
}

/* Reduce call i: its root, count and in place (the same on every rank):
 * both forms, one piece and several, runs of small ones (the root alone
 * at every p). */
static void mc_shape(int i, int p, unsigned mix, size_t *n, int *root, int *in_place)
{
    static const size_t sizes[] = { 13, 400, 1500, 3000, 700, 100, 7 };
    *n = sizes[(unsigned) i * (mix + 1) % 7] + (size_t) (i % 3);
    /* the same root for three calls in a row: a rank that leaves early
     * writes its slot again in the next call (a root need not) */
    *root = (int) (((unsigned) i / 3u * 5u + mix) % (unsigned) p);
    *in_place = (i + (int) mix) % 3 == 0;
}

/* Byte i of what rank from gives rank to in call `call` (alltoallv,
 * allgather, bcast). */
static unsigned char mc_byte(int call, int from, int to, size_t i)
{
    const uint32_t x = (uint32_t) (call * 131 + from * 31 + to * 7) + (uint32_t) i * 2654435761u;
    return (unsigned char) (x >> 13);
}

static void mc_build(void *ctx, shm_call_t *sc, int r, int call)
{
    static const size_t a2av_n[] = { 8, 700, 5000 }, ag_n[] = { 200, 3000, 30000 }, bcast_n[] = { 100, 3000 };
    static const size_t ar_n[] = { 5, 60, 700 };
    const mc_ctx_t *x = ctx;
    const mc_run_t *run = x->run;
    const int p = x->p, kind = mc_kind(call, run->mixed, x->mix);
    const unsigned mix = x->mix;
    mc_call_t *c = (mc_call_t *) sc;
    int rc = 0;
    c->kind = kind;
    xccl_sched_init(&sc->s, r, p, K_REDUCE == kind || K_EMPTY == kind || K_AR_SMALL == kind ? 4 : 1);
    sc->s.slot_cap = run->cap;
    switch (kind) {
    case K_REDUCE: case K_EMPTY:
        mc_shape(call, p, mix, &c->n, &c->root, &c->in_place);
        c->n = K_EMPTY == kind ? 0 : c->n;
        rc = xccl_build_reduce_shm(&sc->s, c->n, c->root, c->in_place);
        if (0 == rc && MC_PLANT_EXIT == run->plant && K_REDUCE == kind && r != c->root) {
            /* the exit: the wait for the root's last flag, this rank's last action */
            const xccl_action_t *last = &sc->s.acts[sc->s.nacts - 1];
            ck_assert(XCCL_ACT_WAIT == last->kind && last->peer == c->root);
            ck_assert(plant_no_wait(&sc->s, last->idx, c->root));
        }
        if (0 == rc && MC_PLANT_ENTRY == run->plant && K_REDUCE == kind) {
            sched_drop(&sc->s, drop_entry_wait, NULL);
        } else if (0 == rc && MC_PLANT_LATE_ENTRY == run->plant && K_REDUCE == kind) {
            plant_late_entry(&sc->s);
        }
        sc->in = xmalloc(c->n * 4);
        for (size_t i = 0; i < c->n; i++) {
            ((int32_t *) sc->in)[i] = mix_elem(call, r, i);
        }
        sc->out = r != c->root ? NULL : c->in_place ? sc->in : xmalloc(c->n * 4);
        if (sc->out && sc->out != sc->in) {
            memset(sc->out, 0xEE, c->n * 4);
        }
        break;
    case K_AR_SMALL:
        c->n = ar_n[call % 3];
        rc = mix_build_allreduce_small(sc, c->n, r, call);
        break;
    case K_A2AV: {
        /* blocks of n bytes between every pair, in rank order */
        c->n = a2av_n[call % 3];
        size_t *v = xmalloc(4 * (size_t) p * sizeof(size_t));
        for (int q = 0; q < p; q++) {
            v[q] = v[2 * p + q] = c->n;
            v[p + q] = v[3 * p + q] = (size_t) q * c->n;
        }
        rc = xccl_build_alltoallv_shm(&sc->s, v, v + p, v + 2 * p, v + 3 * p, NULL, NULL);
        free(v);
        sc->in = xmalloc((size_t) p * c->n);
        sc->out = xmalloc((size_t) p * c->n);
        for (size_t i = 0; i < (size_t) p * c->n; i++) {
            sc->in[i] = mc_byte(call, r, (int) (i / c->n), i % c->n);
        }
        memset(sc->out, 0xEE, (size_t) p * c->n);
        break;
    }
    case K_AG:
        c->n = ag_n[call % 3];
        rc = mix_build_allgather(sc, c->n, r, call, mc_byte);
        break;
    default:
        c->n = bcast_n[call % 2];
        c->root = call % p;
        rc = mix_build_bcast(sc, c->n, c->root, r, call, mc_byte);
        break;
    }
    ck_assert_msg(0 == rc, "%s p=%d call %d: build failed", mc_kind_name[kind], p, call);
    ck_assert_msg(sc->s.slot_bytes <= run->cap, "%s p=%d call %d: slot %zu of %zu", mc_kind_name[kind], p, call,
                  sc->s.slot_bytes, run->cap);
}

/* 0, or -1 with why in bad: rank r's result of its call. */
static int mc_check(void *ctx, const shm_call_t *sc, int r, int call, char *bad, size_t badlen)
{
    const int p = ((const mc_ctx_t *) ctx)->p;
    const mc_call_t *c = (const mc_call_t *) sc;
    const unsigned char *out = sc->out;
    char what[128];
    snprintf(what, sizeof(what), "p=%d call %d (%s n=%zu root=%d)", p, call, mc_kind_name[c->kind], c->n, c->root);
    nchecks++;
    switch (c->kind) {
    case K_REDUCE: case K_AR_SMALL: return mix_check_sum(out, c->n, p, r, call, what, bad, badlen);
    case K_A2AV:
        for (size_t i = 0; i < (size_t) p * c->n; i++) {
            if (out[i] != mc_byte(call, (int) (i / c->n), r, i % c->n)) {
                snprintf(bad, badlen, "%s: rank %d byte %zu of block %zu wrong", what, r, i % c->n, i / c->n);
                return -1;
            }
        }
        return 0;
    case K_AG: return mix_check_allgather(out, c->n, p, r, call, mc_byte, what, bad, badlen);
    case K_BCAST: return mix_check_bcast(out, c->n, c->root, r, call, mc_byte, what, bad, badlen);
    default: return 0;
    }
}

/* Runs MC_CALLS calls on p ranks; 0 right, -1 a wrong result or deadlock. */
static int run_successive(int p, unsigned seed, unsigned mix, const mc_run_t *run, char *bad, size_t badlen)
{
    mc_ctx_t x = { run, p, mix };
    const shm_run_t sr = { p, MC_CALLS, run->cap, 500u, !run->no_settle, 0, 0, sizeof(mc_call_t), &x,
                           mc_build, mc_check, NULL };
    return shm_successive(&sr, seed, bad, badlen);
}

/* Whether run fails at p under one of n seeds (the first failure in bad);
 * the intact run passes under each. */
static int mc_caught(int p, const mc_run_t *run, unsigned salt, unsigned n, char *bad, size_t badlen)
{
    for (unsigned sd = 0; sd < n; sd++) {
        const mc_run_t intact = { run->cap, run->mixed, MC_PLANT_NONE, 0 };
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
    char bad[256] = "";
    static const mc_run_t runs[] = {
        { MC_SLOT, 0, MC_PLANT_NONE, 0 },
        { WIDE_SLOT, 0, MC_PLANT_NONE, 0 },
        { MC_SLOT, 1, MC_PLANT_NONE, 0 },
        { WIDE_SLOT, 1, MC_PLANT_NONE, 0 },
    };
    nchecks = 0;
    for (int p = 2; p <= 7; p++) {
        for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
            for (unsigned sd = 0; sd < 12; sd++) {
                ck_assert_msg(0 == run_successive(p, seed_of(p, 700 + sd), sd % 4, &runs[i], bad, sizeof(bad)),
                              "slot %zu%s: %s", runs[i].cap, runs[i].mixed ? " mixed" : "", bad);
            }
        }
    }
    fprintf(stderr, "successive_calls_interleaved: %lu calls checked\n", nchecks);
    for (int p = 2; p <= 7; p++) {
        /* without the exit waits (no halves), a rank that ran ahead
         * overwrites its slot while the root still reads it */
        mc_run_t run = { MC_SLOT, 0, MC_PLANT_EXIT, 0 };
        int got = mc_caught(p, &run, 900, 24, bad, sizeof(bad));
        fprintf(stderr, "planted: p=%d, successive calls without the exit waits: %s\n", p, got ? bad : "NOT CAUGHT");
        ck_assert_msg(got, "p=%d: successive calls without the exit waits not caught", p);
        /* without the entry waits (the halves), a rank two calls ahead of
         * a root writes the half that root still reads: reduce alone, and
         * mixed */
        for (int mixed = 0; mixed < 2; mixed++) {
            run = (mc_run_t) { WIDE_SLOT, mixed, MC_PLANT_ENTRY, 0 };
            got = mc_caught(p, &run, 930, 24, bad, sizeof(bad));
            fprintf(stderr, "planted: p=%d%s, successive calls without the entry waits: %s\n", p,
                    mixed ? " mixed" : "", got ? bad : "NOT CAUGHT");
            ck_assert_msg(got, "p=%d%s: successive calls without the entry waits not caught", p,
                          mixed ? " mixed" : "");
        }
        /* the entry post behind the entry waits: writers wait for each
         * other's post forever after a call that posted nothing, or in
         * the first call (of two ranks one writer: no deadlock) */
        if (p > 2) {
            run = (mc_run_t) { WIDE_SLOT, 1, MC_PLANT_LATE_ENTRY, 0 };
            got = mc_caught(p, &run, 945, 24, bad, sizeof(bad));
            fprintf(stderr, "planted: p=%d mixed, the entry post behind the entry waits: %s\n", p,
                    got ? bad : "NOT CAUGHT");
            ck_assert_msg(got, "p=%d: the entry post behind the entry waits not caught", p);
        }
        /* the settlement skipped: a call of one layout writes what a slow
         * rank still reads of a call of another without an exit wait (in
         * the slot without halves only two ranks' allgather has none) */
        for (int wide = 2 == p ? 0 : 1; wide < 2; wide++) {
            run = (mc_run_t) { wide ? WIDE_SLOT : MC_SLOT, 1, MC_PLANT_NONE, 1 };
            got = mc_caught(p, &run, 960, 24, bad, sizeof(bad));
            fprintf(stderr, "planted: p=%d slot %zu mixed, the settlement skipped: %s\n", p, run.cap,
                    got ? bad : "NOT CAUGHT");
            ck_assert_msg(got, "p=%d slot %zu: the settlement skipped not caught", p, run.cap);
        }
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
