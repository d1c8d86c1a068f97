/*
 * Gather, gatherv, scatter and scatterv through the node's shared segment
 * ("shm", algos/shm_gather.c and algos/shm_scatter.c) on the simulator:
 * schedules that copy into their own slot of a simulated node segment
 * (stale bytes in it) and read the peers' slots, synchronised by flags.
 *
 *   - p = 1..9 and 16, every root, in place and not; slots from the
 *     smallest each builder takes (pieces of one byte) over a few pieces
 *     and the smallest of the halves (two pieces to a half of 4 KiB) to
 *     1 MiB (pieces of 64 KiB); blocks of 0, 1 and 7 bytes, one piece
 *     less a byte, one piece, one and a byte, many pieces (past the
 *     slot's buffers, which are reused);
 *   - the v forms: uneven counts with zeros, one rank with everything,
 *     nothing at all; blocks in rank order, permuted with gaps of guard
 *     bytes (never written), permuted back to back; off the root every
 *     other count and every displacement is garbage, different on every
 *     rank, and the rank's schedule must equal the one built from the
 *     true arrays (it reads only bytes[rank]);
 *   - buffers a convention says are not significant are NULL (the
 *     executor fails on a reference to one), the others have their exact
 *     size (ASan); results against references the test computes, inputs
 *     unchanged;
 *   - the schedules: no transfers, the slot within its cap, only the
 *     writers use one, a flag per piece; where the slot's halves hold
 *     two buffers each, the halves, no exit wait, an entry post in a
 *     step of its own, entry waits on the writers alone, SHM_DONE last;
 *   - many seeds (interleavings), in both forms; planted bugs fail: a
 *     reuse or ready wait removed, the small form's exit waits removed
 *     (the simulator reports a rank that reads the slot of one that has
 *     left), the entry post behind the entry waits (deadlock);
 *   - successive calls of all four, roots changing, on persistent slots
 *     (small, and of the halves), mixed with allgather, bcast,
 *     allreduce's latency path and empty gathers, settled as in the
 *     component (xccl_exec_set_owed), ranks running ahead into their next
 *     calls; planted, each caught: the small form without exit waits, the
 *     halves without entry waits (an early writer's call overwrites the
 *     half a slow root still reads), with the entry post behind them, and
 *     without the settlement;
 *   - slots too small are refused, by every rank alike.
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 59
#define SIM_SEED_SALT 61u
#include "sim_harness.h"
#include "shm_sim.h"
#include "xccl_build.h"

static const int sizes_p[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 16 };
#define NP ((int) (sizeof(sizes_p) / sizeof(sizes_p[0])))

#define GUARD 0xEE                     /* gaps of RECV, bytes not yet written */
#define SEND_GUARD 0xDD                /* gaps of scatterv's SEND */
#define BIG_SLOT ((size_t) 1 << 20)
/* The smallest slots of the halves' form have two buffers to a half: a
 * half of 4 KiB. */
#define HALVES_SLOT ((size_t) 8704)
#define SHM_DONE_TEST ((uint32_t) 1 << 30)    /* algos/shm_util.h SHM_DONE */

/* ------------------------------------------------------------------------ */
/* The builders' pieces (their head comments), to pick sizes around them    */
/* ------------------------------------------------------------------------ */

/* algos/shm_util.h shm_cap and shm_floor for bytes. */
static size_t usable(size_t cap)
{
    return cap >= 4096 ? (cap - 512) / 64 * 64 : cap;
}

static size_t floor64(size_t n)
{
    return n >= 64 ? n / 64 * 64 : n;
}

static size_t at_most_64k(size_t n)
{
    return n < 65536 ? n : 65536;
}

enum { C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV, NCOLLS };
static const char *const coll_name[NCOLLS] = { "gather", "gatherv", "scatter", "scatterv" };

static int is_gather(int coll)
{
    return C_GATHER == coll || C_GATHERV == coll;
}

static int is_v(int coll)
{
    return C_GATHERV == coll || C_SCATTERV == coll;
}

/* algos/shm_util.h shm_half: a half of the slot, in whole pages. */
static size_t half_of(size_t cap)
{
    return usable(cap) / 2 / 4096 * 4096;
}

/* Gather: a quarter of the slot (two pieces to a half) where that is 64
 * bytes or more, else half the slot; scatter: the same over p - 1 parts;
 * at most 64 KiB. */
static size_t piece_of(int coll, int p, size_t cap)
{
    const size_t parts = is_gather(coll) ? 1 : (size_t) (p - 1);
    if (p < 2) {
        return 0;
    }
    const size_t pc = floor64(half_of(cap) / 2 / parts);
    return at_most_64k(pc >= 64 ? pc : floor64(usable(cap) / 2 / parts));
}

/* Whether the builders take the halves of the slot (shm_halves: two
 * buffers to a half), and with them no exit waits. */
static int halves_of(int coll, int p, size_t cap)
{
    const size_t buf = piece_of(coll, p, cap) * (is_gather(coll) ? 1 : (size_t) (p - 1));
    return p > 1 && half_of(cap) > 0 && half_of(cap) >= 2 * buf;
}

/* The smallest slot the builder takes at p: pieces of one byte. */
static size_t min_slot(int coll, int p)
{
    return is_gather(coll) || p < 2 ? 2 : 2 * (size_t) (p - 1);
}

/* ------------------------------------------------------------------------ */
/* Planting bugs into built schedules                                       */
/* ------------------------------------------------------------------------ */

typedef enum {
    PLANT_NONE,
    PLANT_NO_WAIT,             /* the waits for flag value `val` removed */
    PLANT_NO_EXIT,             /* the waits of the last step removed: a rank leaves early */
    PLANT_NO_ENTRY,            /* the entry waits (one call back) removed */
    PLANT_LATE_ENTRY,          /* the entry post in the step of the entry waits, behind them */
    PLANT_NO_SETTLE            /* (run_successive) xccl_exec_set_owed never called */
} plant_t;

/* What plant_bug drops: the plant, its flag value, whether the last step
 * holds nothing but waits (the exit waits). */
typedef struct {
    plant_t how;
    uint32_t val;
    int last_waits_only;
} drop_t;

static int drop_planted(const xccl_sched_t *s, size_t st, const xccl_action_t *a, void *ctx)
{
    const drop_t *d = ctx;
    const int wait = XCCL_ACT_WAIT == a->kind;
    return (PLANT_NO_WAIT == d->how && wait && a->idx == d->val && 0 == a->len) ||
           (PLANT_NO_EXIT == d->how && wait && st + 1 == s->nsteps && d->last_waits_only) ||
           (PLANT_NO_ENTRY == d->how && wait && 1 == a->len);
}

/* s rewritten in place; returns whether anything changed.  The exit
 * waits: those of a last step with nothing else in it.  The late entry:
 * step 0 (the entry post alone) merged into step 1 (the entry waits). */
static int plant_bug(xccl_sched_t *s, plant_t how, uint32_t val)
{
    if (PLANT_LATE_ENTRY == how) {
        const int entry = s->nsteps >= 2 && 1 == s->step_start[1] && XCCL_ACT_POST == s->acts[0].kind &&
                          0 == s->acts[0].idx;
        if (entry) {
            sched_join_entry(s);
        }
        return entry;
    }
    drop_t d = { how, val, 1 };
    for (size_t i = s->nsteps ? s->step_start[s->nsteps - 1] : s->nacts; i < s->nacts; i++) {
        d.last_waits_only &= XCCL_ACT_WAIT == s->acts[i].kind;
    }
    return sched_drop(s, drop_planted, &d);
}

/* ------------------------------------------------------------------------ */
/* One case                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct {
    int coll, p, root, in_place;
    size_t cap;
    const size_t *c, *d;       /* every rank's true bytes and displacements */
    size_t span;               /* RECV (gather) or SEND (scatter) at the root */
    const char *label;         /* of the counts and places (v forms) */
} gs_case_t;

/* Byte i of rank q's block (gather: q's input; scatter: what q gets):
 * bytes a page or 64 KiB apart differ, so that a piece read from the
 * buffer before it is rewritten is told from the one after. */
static unsigned char blk(int q, int root, size_t i)
{
    return (unsigned char) (pattern(q, root, i) + (i >> 8) * 5 + (i >> 16) * 3);
}

/* What rank r off the root holds in place of the other ranks' entries:
 * its own count right, every other count and every displacement wrong,
 * different from rank to rank. */
static void garbage(int p, int r, const size_t *c, const size_t *d, size_t *v)
{
    for (int i = 0; i < p; i++) {
        v[i] = i == r ? c[i] : c[i] + 1 + (size_t) ((r * 13 + i * 7) % 11) * 97;
        v[p + i] = d[i] + 3 + (size_t) r * 5 + (size_t) i;
    }
}

static int same_ref(xccl_ref_t x, xccl_ref_t y)
{
    return x.buf == y.buf && x.off == y.off && x.peer_plus1 == y.peer_plus1;
}

/* Whether two schedules do the same. */
static int same_sched(const xccl_sched_t *x, const xccl_sched_t *y)
{
    if (x->nsteps != y->nsteps || x->nacts != y->nacts || x->slot_bytes != y->slot_bytes ||
        x->flag_top != y->flag_top || x->stream_recv != y->stream_recv || x->no_exit != y->no_exit ||
        x->entry_waits != y->entry_waits || x->slot_alt != y->slot_alt || x->slot_nalt != y->slot_nalt) {
        return 0;
    }
    for (size_t st = 0; st < x->nsteps; st++) {
        if (x->step_start[st] != y->step_start[st]) {
            return 0;
        }
    }
    for (size_t i = 0; i < x->nacts; i++) {
        const xccl_action_t *a = &x->acts[i], *b = &y->acts[i];
        if (a->kind != b->kind || a->peer != b->peer || a->idx != b->idx || a->len != b->len ||
            !same_ref(a->a, b->a) || !same_ref(a->b, b->b) || !same_ref(a->dst, b->dst)) {
            return 0;
        }
    }
    return 1;
}

static int build_one(xccl_sched_t *s, const gs_case_t *k, const size_t *v)
{
    const int p = k->p, ip = s->rank == k->root && k->in_place;
    switch (k->coll) {
    case C_GATHER: return xccl_build_gather_shm(s, k->c[0], k->root, ip);
    case C_SCATTER: return xccl_build_scatter_shm(s, k->c[0], k->root, ip);
    case C_GATHERV: return xccl_build_gatherv_shm(s, v, v + p, k->root, ip);
    default: return xccl_build_scatterv_shm(s, v, v + p, k->root, ip);
    }
}

/* Rank r's schedule of k, with what r knows of the arrays (garbage off the
 * root), checked for its shape. */
static void build_rank(xccl_sched_t *s, const gs_case_t *k, int r, const char *what)
{
    const int p = k->p;
    size_t *v = xmalloc(2 * (size_t) p * sizeof(size_t));
    if (r == k->root) {
        memcpy(v, k->c, (size_t) p * sizeof(size_t));
        memcpy(v + p, k->d, (size_t) p * sizeof(size_t));
    } else {
        garbage(p, r, k->c, k->d, v);
    }
    s->slot_cap = k->cap;
    ck_assert_msg(0 == build_one(s, k, v), "%s: rank %d: build failed", what, r);
    ck_assert_msg(0 == strcmp(s->algo, "shm"), "%s: algo %s", what, s->algo);
    ck_assert_msg(0 == s->max_xfers && 0 == tally(s).sends && 0 == tally(s).recvs, "%s: transfers", what);
    ck_assert_msg(s->slot_bytes <= k->cap, "%s: rank %d slot %zu > cap %zu", what, r, s->slot_bytes, k->cap);
    /* only the writers use a slot: the ranks of a gather, the root of a scatter */
    const int writes = is_gather(k->coll) ? r != k->root : r == k->root;
    ck_assert_msg(writes || 0 == s->slot_bytes, "%s: rank %d uses %zu bytes of its slot", what, r, s->slot_bytes);
    /* a flag per piece: of the own block, or at the root of the longest */
    if (p > 1) {
        const size_t pc = piece_of(k->coll, p, k->cap);
        size_t want = 0, others = 0;
        for (int q = 0; q < p; q++) {
            const size_t n = (k->c[q] + pc - 1) / pc;
            if (q != k->root && (r == k->root || q == r) && n > want) {
                want = n;
            }
            others += q != k->root ? k->c[q] : 0;
        }
        uint32_t top = 0;
        size_t entry = 0;
        for (size_t i = 0; i < s->nacts; i++) {
            const xccl_action_t *a = &s->acts[i];
            top = XCCL_ACT_POST == a->kind && a->idx != SHM_DONE_TEST && a->idx > top ? a->idx : top;
            entry += XCCL_ACT_WAIT == a->kind && 1 == a->len;
        }
        ck_assert_msg(top == want, "%s: rank %d posts %u flags, not %zu", what, r, top, want);
        /* the halves: an entry post alone in step 0, entry waits where the
         * rank writes its slot, SHM_DONE last, no exit wait; else the
         * whole slot and the exit waits */
        /* (a regular block of 0 bytes: no step at all) */
        const int halves = halves_of(k->coll, p, k->cap) && (is_v(k->coll) || k->c[0] > 0);
        const int writer = is_gather(k->coll) ? r != k->root && k->c[r] > 0 : r == k->root && others > 0;
        ck_assert_msg(s->no_exit == halves && s->entry_waits == halves, "%s: rank %d no_exit %d entry_waits %d",
                      what, r, s->no_exit, s->entry_waits);
        ck_assert_msg(entry == (size_t) (halves && writer ? p - 1 : 0), "%s: rank %d waits %zu times at entry",
                      what, r, entry);
        if (halves) {
            ck_assert_msg(s->slot_alt == half_of(k->cap) && 2 == s->slot_nalt, "%s: halves %zu/%u", what,
                          s->slot_alt, s->slot_nalt);
            ck_assert_msg(s->nsteps >= 2 && 1 == s->step_start[1] && XCCL_ACT_POST == s->acts[0].kind &&
                              0 == s->acts[0].idx, "%s: rank %d: no entry post of its own", what, r);
            ck_assert_msg(XCCL_ACT_POST == s->acts[s->nacts - 1].kind && SHM_DONE_TEST == s->acts[s->nacts - 1].idx &&
                              SHM_DONE_TEST == s->flag_top, "%s: rank %d does not end with SHM_DONE", what, r);
            ck_assert_msg(writes || 0 == s->slot_bytes, "%s", what);
            ck_assert_msg(!writer || s->slot_bytes > s->slot_alt, "%s: rank %d writes none of its half", what, r);
        } else {
            ck_assert_msg(0 == s->slot_nalt && s->flag_top == want, "%s: rank %d: flag_top %u, regions %u", what,
                          r, s->flag_top, s->slot_nalt);
        }
    }
    if (is_v(k->coll) && r != k->root) {
        /* the same as from the true arrays: nothing but bytes[r] read */
        xccl_sched_t t;
        xccl_sched_init(&t, r, p, 1);
        t.slot_cap = k->cap;
        memcpy(v, k->c, (size_t) p * sizeof(size_t));
        memcpy(v + p, k->d, (size_t) p * sizeof(size_t));
        ck_assert_int_eq(build_one(&t, k, v), 0);
        ck_assert_msg(same_sched(s, &t), "%s: rank %d's schedule depends on other ranks' entries", what, r);
        xccl_sched_fini(&t);
    }
    free(v);
}

/* The simulator runs a rank as far as it can go: steps without a wait
 * unmet run back to back, and a peer cannot tell that a rank posted a
 * flag before the next step's copies (some planted bugs would hide).  A
 * gate that holds each step back once, at random, lets the peers run in
 * between. */
typedef struct {
    unsigned seed;
    int held;
} stutter_t;

static int stutter_ready(void *ctx, size_t step)
{
    stutter_t *g = ctx;
    (void) step;
    if (g->held) {
        g->held = 0;
        return 1;
    }
    g->seed = g->seed * 1103515245u + 12345u;
    g->held = (g->seed >> 16) % 2;
    return !g->held;
}

/* The harness's job_exec with a stuttering gate on every rank. */
static int exec_stutter(job_t *j, unsigned seed, const char *what, char *err, size_t errlen)
{
    xccl_sim_t *sim = xccl_sim_create(j->p);
    stutter_t *st = xmalloc((size_t) j->p * sizeof(*st));
    xccl_gate_t *gate = xmalloc((size_t) j->p * sizeof(*gate));
    int init_failed = 0;
    ck_assert_ptr_nonnull(sim);
    for (int r = 0; r < j->p; r++) {
        j->scratch[r] = xmalloc(j->sched[r].scratch_bytes);
        /* a slot holds stale bytes, as a real one does from earlier calls */
        j->slot[r] = j->sched[r].slot_bytes ? xmalloc(j->sched[r].slot_bytes) : NULL;
        if (j->slot[r]) {
            memset(j->slot[r], 0xA5, j->sched[r].slot_bytes);
        }
        void *bufs[XCCL_NBUF] = { j->sbuf[r], j->rbuf[r], j->scratch[r], j->slot[r] };
        init_failed |= 0 != xccl_exec_init(&j->exec[r], &j->sched[r], xccl_sim_transport(sim, r), bufs, NULL, NULL,
                                           SIM_EXEC_SEQ);
        xccl_exec_set_peer(&j->exec[r], xccl_sim_peer(sim, r));
        st[r] = (stutter_t) { seed + (unsigned) r * 977u, 0 };
        gate[r] = (xccl_gate_t) { &st[r], stutter_ready, NULL, NULL };
        xccl_exec_set_gate(&j->exec[r], &gate[r]);
    }
    ck_assert_msg(!init_failed, "%s: exec_init failed", what);
    const int rc = xccl_sim_run(sim, j->exec, j->p, seed);
    snprintf(err, errlen, "%s", xccl_sim_error(sim));
    for (int r = 0; r < j->p; r++) {
        xccl_exec_fini(&j->exec[r]);
        free(j->scratch[r]);
        free(j->slot[r]);
    }
    xccl_sim_destroy(sim);
    free(st);
    free(gate);
    return rc;
}

/* Runs case k under seed with the bug planted; 0, or -1 with the error
 * in bad.  *planted: whether the plant changed anything. */
static int run_case(const gs_case_t *k, unsigned seed, plant_t how, uint32_t val, int *planted, char *bad,
                    size_t badlen)
{
    const int p = k->p, root = k->root, g = is_gather(k->coll);
    char what[240];
    job_t j;
    int rc = 0, changed = 0;
    snprintf(what, sizeof(what), "%s shm p=%d root=%d in_place=%d slot=%zu %s plant=%d/%u", coll_name[k->coll], p,
             root, k->in_place, k->cap, k->label, (int) how, val);
    job_init(&j, p, 1);
    unsigned char *expect = xmalloc(k->span);
    memset(expect, g ? GUARD : SEND_GUARD, k->span);
    for (int q = 0; q < p; q++) {
        for (size_t i = 0; i < k->c[q]; i++) {
            expect[k->d[q] + i] = blk(q, root, i);
        }
    }
    for (int r = 0; r < p; r++) {
        build_rank(&j.sched[r], k, r, what);
        if (PLANT_NONE != how) {
            changed |= plant_bug(&j.sched[r], how, val);
        }
        const int ip = r == root && k->in_place;
        if (g) {
            if (r == root) {
                j.rbuf[r] = xmalloc(k->span);
                memset(j.rbuf[r], GUARD, k->span);
                if (ip) {
                    memcpy(j.rbuf[r] + k->d[r], expect + k->d[r], k->c[r]);
                }
            }
            if (!ip) {
                j.sbuf[r] = job_sbuf(&j, r, k->c[r]);
                memcpy(j.sbuf[r], expect + k->d[r], k->c[r]);
            }
        } else {
            if (r == root) {
                j.sbuf[r] = job_sbuf(&j, r, k->span);
                memcpy(j.sbuf[r], expect, k->span);
            }
            if (!ip) {
                j.rbuf[r] = xmalloc(k->c[r]);
                memset(j.rbuf[r], GUARD, k->c[r]);
            }
        }
    }
    if (planted) {
        *planted = changed;
    }
    if (PLANT_NONE != how && !changed) {
        goto out;
    }
    char err[256];
    if (0 != exec_stutter(&j, seed, what, err, sizeof(err))) {
        snprintf(bad, badlen, "%s: %s", what, err);
        rc = -1;
        goto out;
    }
    if (g) {
        for (size_t i = 0; i < k->span; i++) {
            if (j.rbuf[root][i] != expect[i]) {
                snprintf(bad, badlen, "%s: root's byte %zu wrong (%s)", what, i,
                         GUARD == expect[i] ? "a gap written" : "data");
                rc = -1;
                goto out;
            }
        }
    }
    for (int r = 0; r < p; r++) {
        /* gather: the inputs unchanged; scatter: the blocks, the root's input unchanged */
        const unsigned char *have = g ? j.sbuf[r] : j.rbuf[r];
        if (have && 0 != memcmp(have, expect + k->d[r], k->c[r])) {
            snprintf(bad, badlen, "%s: rank %d's %s wrong", what, r, g ? "input" : "block");
            rc = -1;
            goto out;
        }
    }
    if (!g && 0 != memcmp(j.sbuf[root], expect, k->span)) {
        snprintf(bad, badlen, "%s: the root's input changed", what);
        rc = -1;
    }
out:
    free(expect);
    job_fini(&j);
    return rc;
}

static void must_pass(const gs_case_t *k, unsigned seed)
{
    char bad[512] = "";
    ck_assert_msg(0 == run_case(k, seed, PLANT_NONE, 0, NULL, bad, sizeof(bad)), "%s", bad);
}

/* ------------------------------------------------------------------------ */
/* Gather and scatter                                                       */
/* ------------------------------------------------------------------------ */

/* A regular case: block bytes from (to) every rank. */
static gs_case_t regular(int coll, int p, int root, int in_place, size_t cap, size_t block, size_t *c, size_t *d)
{
    for (int q = 0; q < p; q++) {
        c[q] = block;
        d[q] = (size_t) q * block;
    }
    return (gs_case_t) { coll, p, root, in_place, cap, c, d, (size_t) p * block, "regular" };
}

START_TEST(gather_scatter_shm)
{
    const int p = sizes_p[_i];
    size_t c[16], d[16];
    for (int coll = C_GATHER; coll <= C_SCATTER; coll += C_SCATTER - C_GATHER) {
        const size_t caps[] = { p > 1 ? min_slot(coll, p) : 0, 256 + 64 * (size_t) p, HALVES_SLOT, BIG_SLOT };
        for (int ci = 0; ci < 4; ci++) {
            const size_t pc = p > 1 ? piece_of(coll, p, caps[ci]) : 1;
            /* many pieces: past the slot's buffers (reused), but not at 1 MiB */
            const size_t blocks[] = { 0, 1, 7, pc - 1, pc, pc + 1, BIG_SLOT == caps[ci] ? 2 * pc + 3 : 9 * pc + 5 };
            for (int root = 0; root < p; root++) {
                for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
                    if (BIG_SLOT == caps[ci] && blocks[bi] > 1000 && root != 0 && root != p - 1 && root != p / 2) {
                        continue;      /* the large blocks at three roots */
                    }
                    for (int in_place = 0; in_place < 2; in_place++) {
                        const gs_case_t k = regular(coll, p, root, in_place, caps[ci], blocks[bi], c, d);
                        must_pass(&k, seed_of(p, (unsigned) (root * 7 + (int) bi * 3 + in_place + ci * 101)));
                    }
                }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Gatherv and scatterv                                                     */
/* ------------------------------------------------------------------------ */

enum { CNT_UNEVEN, CNT_ONE, CNT_ZERO, NVCNT };
enum { PLACE_RANK_ORDER, PLACE_PERMUTED_GAPS, PLACE_PERMUTED_TIGHT, NPLACE };
static const char *const cnt_name[NVCNT] = { "uneven", "one", "zero" };
static const char *const place_name[NPLACE] = { "rank order", "permuted with gaps", "permuted tight" };

/* Counts of kind k: uneven, zeros among them (odd sizes around unit);
 * everything on rank `one`; nothing at all. */
static void make_vcounts(int k, int p, size_t unit, int one, size_t *c)
{
    for (int i = 0; i < p; i++) {
        const size_t v = (size_t) ((i * 7 + 3) % 5);
        switch (k) {
        case CNT_UNEVEN: c[i] = v * unit + (v ? (size_t) (i % 3) : 0); break;
        case CNT_ONE: c[i] = i == one ? unit * (size_t) p + 37 : 0; break;
        default: c[i] = 0; break;
        }
    }
}

/* Displacements of kind k (seed varies the permutation); returns the span,
 * gaps included. */
static size_t place_blocks(int k, int p, const size_t *c, unsigned seed, size_t *d)
{
    size_t off = PLACE_PERMUTED_GAPS == k ? 3 : 0;
    int m = 1;                         /* coprime to p, near p / 2 */
    if (PLACE_RANK_ORDER != k) {
        for (m = p / 2 + 1; m > 1; m++) {
            int a = m, b = p;
            while (b) {
                const int t = a % b;
                a = b;
                b = t;
            }
            if (1 == a) {
                break;
            }
        }
    }
    for (int j = 0; j < p; j++) {
        const int q = PLACE_RANK_ORDER == k ? j : (int) (((unsigned) j * (unsigned) m + seed) % (unsigned) p);
        d[q] = off;
        off += c[q];
        if (PLACE_PERMUTED_GAPS == k) {
            off += 1 + (size_t) ((j + (int) seed) % 4) * 5;
        }
    }
    return off;
}

START_TEST(gatherv_scatterv_shm)
{
    const int p = sizes_p[_i];
    const size_t units[] = { 1, 29, 300 };
    size_t c[16], d[16];
    char label[96];
    for (int coll = C_GATHERV; coll <= C_SCATTERV; coll += C_SCATTERV - C_GATHERV) {
        const size_t caps[] = { p > 1 ? min_slot(coll, p) : 0, 256 + 64 * (size_t) p, HALVES_SLOT, BIG_SLOT };
        for (int ci = 0; ci < 4; ci++) {
            for (int ui = 0; ui < 3; ui++) {
                if (0 == ci && 2 == ui) {
                    continue;          /* pieces of a byte: the smaller units */
                }
                for (int root = 0; root < p; root++) {
                    for (int cnt = 0; cnt < NVCNT; cnt++) {
                        make_vcounts(cnt, p, units[ui], p / 2, c);
                        for (int place = 0; place < NPLACE; place++) {
                            const size_t span = place_blocks(place, p, c, (unsigned) (root + ui), d);
                            snprintf(label, sizeof(label), "counts %s x%zu, %s", cnt_name[cnt], units[ui],
                                     place_name[place]);
                            for (int in_place = 0; in_place < 2; in_place++) {
                                const gs_case_t k = { coll, p, root, in_place, caps[ci], c, d, span, label };
                                must_pass(&k, seed_of(p, (unsigned) (root * 5 + cnt * 31 + place * 7 + ui * 3 +
                                                                     in_place + ci * 211)));
                            }
                        }
                    }
                }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Many interleavings; planted bugs                                         */
/* ------------------------------------------------------------------------ */

/* Collective coll at p with several pieces through a slot of two
 * buffers (halves: two to each half): uneven blocks (a zero among them)
 * of 2 to 9 pieces, permuted with gaps (the regular forms: 5 pieces
 * each). */
static gs_case_t pieces_case(int coll, int p, int root, int halves, size_t *c, size_t *d)
{
    const size_t cap = halves ? HALVES_SLOT : min_slot(coll, p) * 8;    /* small: pieces of 8 bytes */
    const size_t pc = piece_of(coll, p, cap);
    ck_assert_int_eq(halves_of(coll, p, cap), halves);
    ck_assert_uint_eq((halves ? half_of(cap) : usable(cap)) / (pc * (is_gather(coll) ? 1 : (size_t) (p - 1))), 2);
    if (!is_v(coll)) {
        return regular(coll, p, root, 0, cap, 5 * pc - 3, c, d);
    }
    for (int q = 0; q < p; q++) {
        c[q] = 1 == q % 4 ? 0 : (size_t) (2 + (q * 5) % 8) * pc - (size_t) (q % 3);
    }
    const size_t span = place_blocks(PLACE_PERMUTED_GAPS, p, c, (unsigned) root, d);
    return (gs_case_t) { coll, p, root, 0, cap, c, d, span, halves ? "pieces, halves" : "pieces" };
}

static const int seed_ps[] = { 2, 3, 5, 8 };

START_TEST(many_seeds)
{
    const int p = seed_ps[_i];
    size_t c[16], d[16];
    for (unsigned sd = 0; sd < 24; sd++) {
        for (int coll = 0; coll < NCOLLS; coll++) {
            for (int halves = 0; halves < 2; halves++) {
                const gs_case_t k = pieces_case(coll, p, (int) (sd % (unsigned) p), halves, c, d);
                must_pass(&k, seed_of(p, 100 + sd + (unsigned) halves * 50));
            }
        }
    }
}
END_TEST

/* The waits for each flag value of the first pieces removed in turn (a
 * piece read before it was written, or a buffer rewritten before it was
 * read), in both forms; the small slot's exit waits removed (a rank
 * leaves while its slot is read: the simulator reports the reader); the
 * entry post behind the entry waits, as shm_enter alone puts it (the
 * writers wait for each other's posts: deadlock).  Each is caught by
 * some seed; the intact schedules pass under the same seeds.  The halves
 * have no exit waits to remove, and their entry waits matter only from
 * call to call (successive_calls_interleaved). */
START_TEST(planted_bugs_fail)
{
    const int coll = _i, p = 4;
    size_t c[16], d[16];
    char bad[512] = "", first[512] = "";
    for (int halves = 0; halves < 2; halves++) {
        for (int how = PLANT_NO_WAIT; how <= PLANT_LATE_ENTRY; how++) {
            for (uint32_t val = 1; val <= (PLANT_NO_WAIT == how ? 4u : 1u); val++) {
                /* the exit waits only in the small form, the entry only in the halves */
                const int there = PLANT_NO_EXIT == how ? !halves
                                  : PLANT_NO_ENTRY == how || PLANT_LATE_ENTRY == how ? halves : 1;
                int caught = 0, planted = 0;
                for (unsigned sd = 0; sd < 64 && !caught; sd++) {
                    const gs_case_t k = pieces_case(coll, p, (int) (sd % 3), halves, c, d);
                    const unsigned seed = seed_of(p, 300 + sd + val * 17);
                    must_pass(&k, seed);
                    if (0 != run_case(&k, seed, (plant_t) how, val, &planted, bad, sizeof(bad))) {
                        caught = 1;
                        snprintf(first, sizeof(first), "%s", bad);
                    }
                    ck_assert_msg(planted == there, "%s: %s form: planted %d (%d/%u)", coll_name[coll],
                                  halves ? "halves" : "small", planted, how, val);
                    if (!there || (PLANT_NO_ENTRY == how && sd >= 7)) {
                        break;
                    }
                }
                if (!there) {
                    continue;
                }
                if (PLANT_NO_ENTRY == how) {
                    /* one call alone needs no entry waits */
                    ck_assert_msg(!caught, "%s: a single call without entry waits failed: %s", coll_name[coll],
                                  first);
                    continue;
                }
                fprintf(stderr, "planted %s, %s form, %s %u: %s\n", coll_name[coll], halves ? "halves" : "small",
                        PLANT_NO_WAIT == how   ? "waits removed for flag"
                        : PLANT_NO_EXIT == how ? "exit waits removed"
                                               : "entry post behind the entry waits",
                        val, caught ? first : "NOT CAUGHT");
                ck_assert_msg(caught, "%s: plant %d/%u not caught", coll_name[coll], how, val);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Successive calls, interleaved: the slot outlives the call                */
/* ------------------------------------------------------------------------ */

/* Virtual ranks each run a list of calls on persistent slots, progressed
 * in a random order as far as each can go (into their next calls too).
 * As in the component, the calls of a rank share one xccl_exit_owed_t,
 * settled before each call (xccl_exec_set_owed).  Between the four come
 * calls of other layouts: allgather (regions in turn, no exit barrier of
 * one chunk), bcast (regions in turn, its exit barrier), allreduce's
 * latency path (two regions past the pipelines', no exit barrier) and
 * gathers of 0 bytes (no flag at all: the entry of the call after one
 * must not wait for a flag of it). */
#define MC_CALLS 40
/* Slots: the small forms, and the halves (pieces of a few KiB, two
 * buffers to a half at p = 7). */
static const size_t mc_slots[] = { 6144, 32768 };
#define MC_NSLOTS ((int) (sizeof(mc_slots) / sizeof(mc_slots[0])))
#define MC_HALVES 1                    /* mc_slots[MC_HALVES] takes the halves */

enum { K_EMPTY = NCOLLS, K_AG, K_BCAST, K_AR, MC_NKINDS };

/* Call i: its kind, root and arrays (the same on every rank); c[0]: the
 * bytes (allreduce: int32 elements) of the other kinds. */
typedef struct {
    int kind, root;
    size_t cap;
    size_t c[8], d[8], span;
} mc_spec_t;

static void mc_spec(int i, int p, unsigned mix, size_t cap, mc_spec_t *m)
{
    unsigned h = ((unsigned) i + 1u) * 2654435761u ^ mix * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    m->cap = cap;
    m->root = (int) ((h >> 4) % (unsigned) p);
    if (0 != mix % 4 && 0 == (h >> 12) % 3) {    /* a call in three of another kind, but with mix 0 */
        static const size_t base[] = { 0, 50, 300, 13 };
        m->kind = K_EMPTY + (int) ((h >> 16) % 4u);
        m->c[0] = base[m->kind - K_EMPTY] + (K_EMPTY == m->kind ? 0 : (size_t) (i % 5));
        return;
    }
    m->kind = (int) (h % NCOLLS);
    const size_t pc = piece_of(m->kind, p, cap);
    for (int q = 0; q < p; q++) {
        /* 0 to 4 pieces (past the two buffers: reused), a few bytes in
         * some calls */
        size_t base = is_v(m->kind) ? (size_t) ((q * 7 + i * 3) % 5) * (pc * 3 / 4)
                                    : pc / 2 + (size_t) (i % 3) * pc + (size_t) (i % 7) * 11;
        base = 1 == i % 4 ? base % 13 : base;
        m->c[q] = base + (is_v(m->kind) && base ? (size_t) (q % 3) : 0);
    }
    if (is_v(m->kind)) {
        m->span = place_blocks(PLACE_PERMUTED_GAPS, p, m->c, (unsigned) i, m->d);
    } else {
        for (int q = 0; q < p; q++) {
            m->c[q] = m->c[0];
            m->d[q] = (size_t) q * m->c[0];
        }
        m->span = (size_t) p * m->c[0];
    }
}

/* Byte i of rank q's block in call `call`. */
static unsigned char mc_byte(int call, int q, size_t i)
{
    return (unsigned char) (call * 37 + q * 11 + (int) i * 3 + (int) (i >> 8) + 1);
}

static int32_t mc_int(int call, int q, size_t i)
{
    return (int32_t) (call * 100003 + q * 1009 + (int) i);
}

/* A run: p ranks, slots of cap bytes, the mix of calls, the plant. */
typedef struct {
    int p;
    size_t cap;
    unsigned mix;
    plant_t how;
} mc_run_t;

/* The ways the schedules of a run end: halves (entry waits), no exit
 * barrier otherwise (allgather), the latency path, exit waits or
 * barrier. */
static struct {
    int halves, no_exit, flip, exits;
} mc_seen;

static const char *mc_name(int kind)
{
    static const char *const others[] = { "gather of 0", "allgather", "bcast", "allreduce" };
    return kind < NCOLLS ? coll_name[kind] : others[kind - K_EMPTY];
}

static void mc_build(void *ctx, shm_call_t *cl, int r, int call)
{
    const mc_run_t *run = ctx;
    const int p = run->p;
    const plant_t how = run->how;
    mc_spec_t spec;
    const mc_spec_t *m = &spec;
    mc_spec(call, p, run->mix, run->cap, &spec);
    const int root = m->root, g = is_gather(m->kind);
    const size_t n = m->c[0];
    xccl_sched_init(&cl->s, r, p, K_AR == m->kind ? sizeof(int32_t) : 1);
    cl->s.slot_cap = m->cap;
    cl->in = cl->out = NULL;
    if (K_EMPTY == m->kind) {
        ck_assert_int_eq(xccl_build_gather_shm(&cl->s, 0, root, 0), 0);
        ck_assert(0 == cl->s.nacts && 0 == cl->s.slot_bytes);
        return;
    }
    if (K_AG == m->kind || K_BCAST == m->kind) {
        const int rc = K_AG == m->kind ? xccl_build_allgather_shm(&cl->s, n)
                                       : xccl_build_bcast_shm_whole(&cl->s, n, root);
        ck_assert_int_eq(rc, 0);
        cl->in = xmalloc(n);
        cl->out = xmalloc(K_AG == m->kind ? (size_t) p * n : n);
        for (size_t i = 0; i < n; i++) {
            cl->in[i] = mc_byte(call, r, i);
        }
        memset(cl->out, GUARD, K_AG == m->kind ? (size_t) p * n : n);
        if (K_BCAST == m->kind && r == root) {
            memcpy(cl->out, cl->in, n);
        }
    } else if (K_AR == m->kind) {
        ck_assert_int_eq(xccl_build_allreduce_shm_small(&cl->s, n), 0);
        int32_t *in = xmalloc(n * sizeof(int32_t));
        for (size_t i = 0; i < n; i++) {
            in[i] = mc_int(call, r, i);
        }
        cl->in = (unsigned char *) in;
        cl->out = xmalloc(n * sizeof(int32_t));
        memset(cl->out, GUARD, n * sizeof(int32_t));
    } else {
        const gs_case_t k = { m->kind, p, root, 0, m->cap, m->c, m->d, m->span, "successive" };
        char what[64];
        snprintf(what, sizeof(what), "successive p=%d call %d", p, call);
        build_rank(&cl->s, &k, r, what);
        if (PLANT_NONE != how && PLANT_NO_SETTLE != how) {
            plant_bug(&cl->s, how, 0);
        }
        if (g || r == root) {
            const size_t len = g ? m->c[r] : m->span;
            cl->in = xmalloc(len);
            memset(cl->in, SEND_GUARD, len);
            for (int q = 0; q < p; q++) {
                for (size_t i = 0; (g ? q == r : 1) && i < m->c[q]; i++) {
                    cl->in[(g ? 0 : m->d[q]) + i] = mc_byte(call, q, i);
                }
            }
        }
        if (!g || r == root) {
            const size_t len = g ? m->span : m->c[r];
            cl->out = xmalloc(len);
            memset(cl->out, GUARD, len);
        }
    }
    ck_assert_msg(cl->s.slot_bytes <= m->cap, "%s p=%d slot %zu: uses %zu", mc_name(m->kind), p, m->cap,
                  cl->s.slot_bytes);
    mc_seen.halves += cl->s.entry_waits;
    mc_seen.no_exit += cl->s.no_exit && !cl->s.entry_waits;
    mc_seen.flip += cl->s.slot_flip > 0;
    mc_seen.exits += !cl->s.no_exit && !cl->s.slot_flip;
}

static int mc_right(const shm_call_t *cl, const mc_spec_t *m, int r, int p, int call)
{
    const size_t n = m->c[0];
    switch (m->kind) {
    case K_EMPTY: return 0;
    case K_AG:
        for (size_t i = 0; i < (size_t) p * n; i++) {
            if (cl->out[i] != mc_byte(call, (int) (i / n), i % n)) {
                return -1;
            }
        }
        return 0;
    case K_BCAST:
        for (size_t i = 0; i < n; i++) {
            if (cl->out[i] != mc_byte(call, m->root, i)) {
                return -1;
            }
        }
        return 0;
    case K_AR:
        for (size_t i = 0; i < n; i++) {
            uint32_t acc = 0;
            int32_t have;
            for (int q = 0; q < p; q++) {
                acc += (uint32_t) mc_int(call, q, i);
            }
            memcpy(&have, cl->out + i * sizeof(int32_t), sizeof(have));
            if (have != (int32_t) acc) {
                return -1;
            }
        }
        return 0;
    default: break;
    }
    if (is_gather(m->kind) && r != m->root) {
        return 0;
    }
    for (int q = 0; q < p; q++) {
        if (is_gather(m->kind) || q == r) {
            const size_t at = is_gather(m->kind) ? m->d[q] : 0;
            for (size_t i = 0; i < m->c[q]; i++) {
                if (cl->out[at + i] != mc_byte(call, q, i)) {
                    return -1;
                }
            }
        }
    }
    return 0;
}

static int mc_check(void *ctx, const shm_call_t *cl, int r, int call, char *bad, size_t badlen)
{
    const mc_run_t *run = ctx;
    mc_spec_t m;
    mc_spec(call, run->p, run->mix, run->cap, &m);
    if (0 != mc_right(cl, &m, r, run->p, call)) {
        snprintf(bad, badlen, "p=%d slot %zu rank %d call %d (%s root %d): wrong result", run->p, run->cap, r, call,
                 mc_name(m.kind), m.root);
        return -1;
    }
    return 0;
}

/* Runs MC_CALLS calls on p ranks with slots of cap bytes; 0 ok, -1 a
 * wrong result or deadlock. */
static int run_successive(int p, size_t cap, unsigned seed, unsigned mix, plant_t how, char *bad, size_t badlen)
{
    mc_run_t mc = { p, cap, mix, how };
    const shm_run_t run = { p, MC_CALLS, cap, 500u, PLANT_NO_SETTLE != how, 0, 0, sizeof(shm_call_t), &mc,
                            mc_build, mc_check, NULL };
    return shm_successive(&run, seed, bad, badlen);
}

/* A plant at p = 2..5 with slots of cap, each caught by some seed. */
static void must_catch(size_t cap, plant_t how, const char *name)
{
    char bad[256] = "";
    for (int p = 2; p <= 5; p++) {
        int caught = 0;
        for (unsigned sd = 0; sd < 24 && !caught; sd++) {
            caught = 0 != run_successive(p, cap, seed_of(p, 900 + sd + 40 * (unsigned) how), sd % 4, how, bad,
                                         sizeof(bad));
        }
        fprintf(stderr, "planted: p=%d slot %zu, successive calls, %s: %s\n", p, cap, name,
                caught ? bad : "NOT CAUGHT");
        ck_assert_msg(caught, "p=%d slot %zu: successive calls, %s: not caught", p, cap, name);
    }
}

START_TEST(successive_calls_interleaved)
{
    const size_t cap = mc_slots[_i];
    char bad[256] = "";
    memset(&mc_seen, 0, sizeof(mc_seen));
    for (int p = 2; p <= 7; p++) {
        for (unsigned sd = 0; sd < 12; sd++) {
            ck_assert_msg(0 == run_successive(p, cap, seed_of(p, 700 + sd), sd % 4, PLANT_NONE, bad, sizeof(bad)),
                          "%s", bad);
        }
    }
    /* the mix holds the ways: the halves only in their slots, allreduce's
     * latency path from 4 KiB up */
    ck_assert_msg((mc_seen.halves > 0) == (MC_HALVES == _i) && mc_seen.no_exit > 0 &&
                      (mc_seen.flip > 0) == (cap >= 4096) && mc_seen.exits > 0,
                  "slot %zu: halves %d, no exit %d, latency %d, exits %d", cap, mc_seen.halves, mc_seen.no_exit,
                  mc_seen.flip, mc_seen.exits);
    if (MC_HALVES != _i) {
        /* without the exit waits a rank goes on to its next call and
         * writes its slot (a gather's rank, a scatter's root) while the
         * root of the last still reads it, or (a scatter's root) a reader
         * still reads */
        must_catch(cap, PLANT_NO_EXIT, "without exit waits");
        return;
    }
    /* without the entry waits a rank writes the half that a peer two
     * calls behind still reads; with the entry post behind them the
     * writers of a call after one that posted nothing wait for each
     * other; without the settlement a call of another layout writes what
     * a peer still reads in the last call of the halves, or the halves
     * what it reads in the last allgather */
    must_catch(cap, PLANT_NO_ENTRY, "without entry waits");
    must_catch(cap, PLANT_LATE_ENTRY, "entry post behind the entry waits");
    must_catch(cap, PLANT_NO_SETTLE, "never settled");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Slots too small                                                          */
/* ------------------------------------------------------------------------ */

/* 1: rank r's build of coll at p (root 0) with this slot fails (marked
 * failed). */
static int refused(int coll, int p, int r, size_t cap, size_t block)
{
    xccl_sched_t s;
    size_t v[2 * 16];
    for (int q = 0; q < p; q++) {
        v[q] = q == r ? block : 1000;  /* the others' entries garbage off the root */
        v[p + q] = 0;
    }
    xccl_sched_init(&s, r, p, 1);
    s.slot_cap = cap;
    const gs_case_t k = { coll, p, 0, 0, cap, v + r, v + p, 0, "" };    /* c[0]: the block */
    const int rc = build_one(&s, &k, v);
    ck_assert_msg(0 == rc || (-1 == rc && s.error), "%s: rc %d error %d", coll_name[coll], rc, s.error);
    ck_assert_str_eq(s.algo, "shm");
    xccl_sched_fini(&s);
    return 0 != rc;
}

START_TEST(small_slot_refused)
{
    for (int coll = 0; coll < NCOLLS; coll++) {
        for (int p = 2; p <= 9; p++) {
            const size_t min = min_slot(coll, p);
            for (int r = 0; r < p; r++) {
                /* by every rank alike, whatever its block, zero included
                 * (only the regular forms, whose ranks all know the block,
                 * skip the slot for a block of 0) */
                for (size_t block = 0; block < 3; block++) {
                    ck_assert_int_eq(refused(coll, p, r, min - 1, block), is_v(coll) || block > 0);
                    ck_assert_int_eq(refused(coll, p, r, 0, block), is_v(coll) || block > 0);
                    ck_assert_int_eq(refused(coll, p, r, min, block), 0);
                }
            }
        }
        /* one rank needs no slot */
        ck_assert_int_eq(refused(coll, 1, 0, 0, 5), 0);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("shm_gather_scatter");
    TCase *tc = tcase_create("basics");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, small_slot_refused);
    tcase_add_loop_test(tc, planted_bugs_fail, 0, NCOLLS);
    tcase_add_loop_test(tc, many_seeds, 0, (int) (sizeof(seed_ps) / sizeof(seed_ps[0])));
    tcase_add_loop_test(tc, successive_calls_interleaved, 0, MC_NSLOTS);
    suite_add_tcase(su, tc);
    tc = tcase_create("sizes");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, gather_scatter_shm, 0, NP);
    tcase_add_loop_test(tc, gatherv_scatterv_shm, 0, NP);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
