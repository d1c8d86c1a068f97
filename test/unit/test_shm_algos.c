/*
 * Shared-memory ("shm") algorithms on the simulator: schedules that copy
 * into their own slot of a simulated node segment (one buffer per virtual
 * rank, XCCL_BUF_SLOT, filled with stale bytes) and read the peers'
 * slots, synchronised by flags, run by the one executor.
 *
 *   - every p in 1..64: allreduce ("shm" and "shm_small"), reduce_scatter
 *     and _block (regular, irregular and one-rank counts), allgather,
 *     allgatherv, alltoall (in place and not), bcast (every root up to 16);
 *     counts 0, 1, around p and a large one; a slot that holds the whole
 *     message and slots that force chunks (down to the smallest slot each
 *     builder takes), so the pipeline runs with 1, 2, 3 and many chunks;
 *     results bit for bit against scalar references (float sums whose
 *     bits depend on the order: the shm reduces in rank order);
 *   - the schedules: no sends or receives, slot_bytes within slot_cap,
 *     one barrier per chunk plus the pipeline's depth;
 *   - many seeds (interleavings) at a few p, with chunks;
 *   - planted bugs fail: a barrier removed, a flag posted before the copy
 *     into the slot, a wrongly small slot (stale bytes read);
 *   - a schedule with a slot but no slot buffer is refused before it runs;
 *   - composition: shm stages as the intra-node stages of a two-level
 *     allreduce (the slot is not moved by xccl_sched_append).
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 41
#define SIM_SEED_SALT 43u
#include "sim_harness.h"
#include "shm_sim.h"
#include "xccl_layout.h"
#include "xccl_build.h"
#include "xccl_hier.h"
#include "xccl_cost.h"
#include "xccl_catalog.h"

#define SMALL_P 64
#define SHM_FAST_BYTES_TEST 256        /* algos/shm_util.h SHM_FAST_BYTES */
#define LARGE 4099

/* Slot sizes to try for a message of `bytes` whose smallest slot is `min`:
 * the smallest, a few chunks, and one that holds everything. */
static int slots_for(size_t bytes, size_t min, size_t *caps)
{
    int n = 0;
    caps[n++] = min;
    caps[n++] = min * 3 + 64 > bytes / 2 ? min * 3 + 64 : bytes / 2;    /* two or three chunks */
    caps[n++] = 4 * bytes + 4096;                                          /* one chunk */
    return n;
}

/* Every schedule: peer access, no transfers, the slot within its cap, and
 * (when it has chunks) a flag per pipeline step. */
static void check_shape(const xccl_sched_t *s, const char *what)
{
    ck_assert_msg(0 == s->max_xfers, "%s: shm schedules send nothing", what);
    const tally_t t = tally(s);
    ck_assert_msg(0 == t.sends && 0 == t.recvs, "%s: sends or receives", what);
    ck_assert_msg(s->slot_bytes <= s->slot_cap, "%s: slot %zu > cap %zu", what, s->slot_bytes, s->slot_cap);
}

/* ------------------------------------------------------------------------ */
/* Planting bugs into built schedules                                       */
/* ------------------------------------------------------------------------ */

typedef enum {
    PLANT_NONE,
    PLANT_NO_WAIT,             /* the waits for flag value `val` removed */
    PLANT_EARLY_POST,          /* post `val` moved to the end of the step before: the flag
                                * says a step is done before its copies ran (within one
                                * step the simulator cannot tell: a rank runs a step's
                                * local actions at once; test_shm does that on real
                                * memory) */
} plant_t;

/* Whether the last run_* with a plant found anything to change (a wait
 * for val that no rank has, or a post in the first step: nothing). */
static int last_planted;

/* A wait for flag value *(uint32_t *) ctx. */
static int drop_wait_for(const xccl_sched_t *s, size_t st, const xccl_action_t *a, void *ctx)
{
    (void) s, (void) st;
    return XCCL_ACT_WAIT == a->kind && a->idx == *(const uint32_t *) ctx;
}

/* s rewritten in place: see plant_t.  Returns whether anything changed. */
static int plant(xccl_sched_t *s, plant_t how, uint32_t val)
{
    int changed = 0;
    if (PLANT_NO_WAIT == how) {
        changed = sched_drop(s, drop_wait_for, &val);
    } else if (PLANT_EARLY_POST == how) {
        for (size_t st = 1; st < s->nsteps; st++) {
            const size_t begin = s->step_start[st];
            const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
            for (size_t i = begin; i < end; i++) {
                /* Only across a wait: a rank runs steps without waits
                 * back to back, where the simulator cannot tell the
                 * difference (test_shm does, with slow copies). */
                if (XCCL_ACT_POST == s->acts[i].kind && s->acts[i].idx == val &&
                    XCCL_ACT_WAIT == s->acts[begin].kind) {
                    /* first action of step st, then the step boundary moves past it */
                    const xccl_action_t post = s->acts[i];
                    memmove(&s->acts[begin + 1], &s->acts[begin], (i - begin) * sizeof(post));
                    s->acts[begin] = post;
                    s->step_start[st] = begin + 1;
                    changed = 1;
                    break;
                }
            }
        }
    }
    return changed;
}

/* The bug planted into every rank's schedule of j; whether j is to run
 * (nothing planted, or the plant changed something: last_planted). */
static int plant_job(job_t *j, plant_t how, uint32_t val)
{
    int planted = 0;
    for (int r = 0; r < j->p; r++) {
        planted |= plant(&j->sched[r], how, val);
    }
    last_planted = planted;
    return PLANT_NONE == how || planted;
}

/* ------------------------------------------------------------------------ */
/* Allreduce                                                                */
/* ------------------------------------------------------------------------ */

typedef int (*ar_build_t)(xccl_sched_t *, size_t);

static int run_allreduce(int p, int k, size_t count, int in_place, size_t cap, int small, unsigned seed,
                         plant_t how, uint32_t val, char *bad, size_t badlen)
{
    const size_t es = kind_es(k);
    const ar_build_t build = small ? xccl_build_allreduce_shm_small : xccl_build_allreduce_shm;
    char what[200];
    job_t j;
    int rc = 0;
    snprintf(what, sizeof(what), "allreduce %s p=%d kind=%d count=%zu in_place=%d slot=%zu plant=%d/%u",
             small ? "shm_small" : "shm", p, k, count, in_place, cap, (int) how, val);
    job_init(&j, p, es);
    for (int r = 0; r < p; r++) {
        j.sched[r].slot_cap = cap;
        ck_assert_msg(0 == build(&j.sched[r], count), "%s: build failed", what);
        ck_assert_str_eq(j.sched[r].algo, small ? "shm_small" : "shm");
        check_shape(&j.sched[r], what);
        job_fill_allreduce(&j, r, k, count, in_place);
    }
    if (plant_job(&j, how, val)) {
        rc = job_try(&j, kind_fn(k), seed, what, bad, badlen);
        rc = 0 == rc ? job_check_allreduce(&j, k, count, in_place, what, bad, badlen) : rc;
    }
    job_fini(&j);
    return rc;
}

START_TEST(allreduce_shm)
{
    const int p = _i;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    char bad[512] = "";
    for (int small = 0; small < 2; small++) {
        for (int k = 0; k < NKINDS; k++) {
            const size_t es = kind_es(k);
            for (size_t c = 0; c < n; c++) {
                size_t caps[3];
                const int ncaps = slots_for(sz[c] * es, (small ? 2 : 3) * es, caps);
                for (int ci = 0; ci < ncaps; ci++) {
                    /* the tiniest slot (one element per chunk) only on the
                     * small counts (LARGE would be 4099 chunks), for two kinds */
                    if (0 == ci && (sz[c] == LARGE || (k != RED_I32_SUM && k != KIND_FLT_ORDER))) {
                        continue;
                    }
                    for (int in_place = 0; in_place < 2; in_place++) {
                        ck_assert_msg(0 == run_allreduce(p, k, sz[c], in_place, caps[ci], small, seed_of(p, 3),
                                                         PLANT_NONE, 0, bad, sizeof(bad)),
                                      "%s", bad);
                    }
                }
            }
        }
    }
}
END_TEST

/* Chunks and barriers: nchunks + depth - 1 flag values, each a barrier. */
START_TEST(allreduce_shm_barriers)
{
    const size_t es = 4;
    for (int small = 0; small < 2; small++) {
        const int depth = small ? 2 : 3;
        for (size_t count = 1; count <= 200; count += 37) {
            for (size_t ce = 1; ce <= 64; ce *= 4) {
                xccl_sched_t s;
                xccl_sched_init(&s, 1, 4, es);
                s.slot_cap = (size_t) depth * ce * es;
                ck_assert_int_eq((small ? xccl_build_allreduce_shm_small : xccl_build_allreduce_shm)(&s, count), 0);
                const size_t nchunks = (count + ce - 1) / ce;
                ck_assert_uint_eq(s.flag_top, nchunks + (size_t) depth - 1);
                ck_assert_uint_le(s.slot_bytes, (size_t) depth * ce * es);
                if (nchunks > (size_t) depth) {
                    /* every buffer used, chunk depth - 1 (full) in the last */
                    ck_assert_uint_eq(s.slot_bytes, (size_t) depth * ce * es);
                }
                xccl_sched_fini(&s);
            }
        }
    }
    /* Too small a slot: refused. */
    xccl_sched_t s;
    xccl_sched_init(&s, 0, 4, 8);
    s.slot_cap = 23;
    ck_assert_int_eq(xccl_build_allreduce_shm(&s, 10), -1);
    xccl_sched_fini(&s);
    xccl_sched_init(&s, 0, 4, 8);
    ck_assert_int_eq(xccl_build_allreduce_shm_small(&s, 10), -1);     /* no slot at all */
    xccl_sched_fini(&s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Reduce_scatter                                                           */
/* ------------------------------------------------------------------------ */

static int run_reduce_scatter(int p, int k, const size_t *counts, size_t total, int in_place, size_t cap,
                              unsigned seed, plant_t how, uint32_t val, char *bad, size_t badlen)
{
    char what[200];
    job_t j;
    int rc = 0;
    snprintf(what, sizeof(what), "reduce_scatter shm p=%d kind=%d total=%zu in_place=%d slot=%zu plant=%d/%u", p, k,
             total, in_place, cap, (int) how, val);
    job_init(&j, p, kind_es(k));
    for (int r = 0; r < p; r++) {
        j.sched[r].slot_cap = cap;
        ck_assert_msg(0 == xccl_build_reduce_scatter_shm(&j.sched[r], counts, in_place), "%s: build failed", what);
        check_shape(&j.sched[r], what);
        job_fill_reduce_scatter(&j, r, k, counts, total, in_place);
    }
    if (plant_job(&j, how, val)) {
        rc = job_try(&j, kind_fn(k), seed, what, bad, badlen);
        rc = 0 == rc ? job_check_reduce_scatter(&j, k, counts, total, in_place, what, bad, badlen) : rc;
    }
    job_fini(&j);
    return rc;
}

START_TEST(reduce_scatter_shm)
{
    const int p = _i;
    const size_t bases[] = { 0, 1, 37, 1001 };
    size_t *counts = xmalloc((size_t) p * sizeof(size_t));
    char bad[512] = "";
    for (int pat = 0; pat < NCNT; pat++) {
        for (size_t bi = 0; bi < sizeof(bases) / sizeof(bases[0]); bi++) {
            const size_t total = make_counts(p, pat, bases[bi], counts);
            for (int k = 0; k < NKINDS; k++) {
                const size_t es = kind_es(k);
                size_t caps[3];
                const int ncaps = slots_for(total * es, 2 * (size_t) p * es, caps);
                for (int ci = 0; ci < ncaps; ci++) {
                    /* the smallest slot: one element per block and chunk, for two kinds */
                    if (0 == ci && (bases[bi] > 40 || (k != RED_I32_SUM && k != KIND_FLT_ORDER))) {
                        continue;
                    }
                    for (int in_place = 0; in_place < 2; in_place++) {
                        ck_assert_msg(0 == run_reduce_scatter(p, k, counts, total, in_place, caps[ci], seed_of(p, 4),
                                                              PLANT_NONE, 0, bad, sizeof(bad)),
                                      "%s", bad);
                    }
                }
            }
        }
    }
    free(counts);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allgather(v)                                                             */
/* ------------------------------------------------------------------------ */

/* v: bytes[p] then displs[p] of an allgatherv, or NULL: allgather of b. */
static int run_allgather(int p, size_t b, const size_t *v, int in_place, size_t cap, unsigned seed, plant_t how,
                         uint32_t val, char *bad, size_t badlen)
{
    size_t total = (size_t) p * b;
    if (v) {
        total = 0;
        for (int q = 0; q < p; q++) {
            total = v[p + q] + v[q] > total ? v[p + q] + v[q] : total;
        }
    }
    char what[200];
    job_t j;
    int rc = 0;
    snprintf(what, sizeof(what), "allgather%s shm p=%d block=%zu in_place=%d slot=%zu plant=%d/%u", v ? "v" : "", p,
             b, in_place, cap, (int) how, val);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        j.sched[r].slot_cap = cap;
        ck_assert_msg(0 == (v ? xccl_build_allgatherv_shm(&j.sched[r], v, v + p, in_place)
                              : xccl_build_allgather_shm(&j.sched[r], b)),
                      "%s: build failed", what);
        check_shape(&j.sched[r], what);
        job_fill_allgather(&j, r, b, v, total, in_place);
    }
    if (plant_job(&j, how, val)) {
        rc = job_try(&j, NULL, seed, what, bad, badlen);
        rc = 0 == rc ? job_check_allgather(&j, b, v, what, bad, badlen) : rc;
    }
    job_fini(&j);
    return rc;
}

START_TEST(allgather_shm)
{
    const int p = _i;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    char bad[512] = "";
    for (size_t k = 0; k < n; k++) {
        size_t caps[3];
        const int ncaps = slots_for((size_t) p * sz[k], 2, caps);
        for (int ci = 0; ci < ncaps; ci++) {
            if (0 == ci && sz[k] == LARGE) {
                continue;
            }
            for (int in_place = 0; in_place < 2; in_place++) {
                ck_assert_msg(0 == run_allgather(p, sz[k], NULL, in_place, caps[ci], seed_of(p, 0), PLANT_NONE, 0, bad,
                                                 sizeof(bad)),
                              "%s", bad);
            }
        }
    }
    /* allgatherv: irregular blocks (some empty), reversed placement with gaps */
    size_t *v = xmalloc(2 * (size_t) p * sizeof(size_t));
    size_t at = 0;
    for (int q = p - 1; q >= 0; q--) {
        v[q] = q % 3 == 1 ? 0 : (size_t) (q * 37 % 101) + 5;
        v[p + q] = at;
        at += v[q] + 3;
    }
    for (int ci = 0; ci < 3; ci++) {
        const size_t cap = 0 == ci ? 2 : 1 == ci ? 96 : 65536;
        for (int in_place = 0; in_place < 2; in_place++) {
            ck_assert_msg(0 == run_allgather(p, 0, v, in_place, cap, seed_of(p, 5), PLANT_NONE, 0, bad, sizeof(bad)),
                          "%s", bad);
        }
    }
    free(v);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Alltoall                                                                 */
/* ------------------------------------------------------------------------ */

static int run_alltoall(int p, size_t b, int in_place, size_t cap, unsigned seed, plant_t how, uint32_t val,
                        char *bad, size_t badlen)
{
    char what[200];
    job_t j;
    int rc = 0;
    snprintf(what, sizeof(what), "alltoall shm p=%d block=%zu in_place=%d slot=%zu plant=%d/%u", p, b, in_place, cap,
             (int) how, val);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        j.sched[r].slot_cap = cap;
        ck_assert_msg(0 == xccl_build_alltoall_shm(&j.sched[r], b, in_place), "%s: build failed", what);
        check_shape(&j.sched[r], what);
        job_fill_alltoall(&j, r, b, in_place);
    }
    if (plant_job(&j, how, val)) {
        rc = job_try(&j, NULL, seed, what, bad, badlen);
        rc = 0 == rc ? job_check_alltoall(&j, b, in_place, what, bad, badlen) : rc;
    }
    job_fini(&j);
    return rc;
}

START_TEST(alltoall_shm)
{
    const int p = _i;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    char bad[512] = "";
    for (size_t k = 0; k < n; k++) {
        const size_t b = LARGE == sz[k] && p > 32 ? 1031 : sz[k];
        size_t caps[3];
        const int ncaps = slots_for((size_t) p * b, 2 * (size_t) p, caps);
        for (int ci = 0; ci < ncaps; ci++) {
            if (0 == ci && b >= 1031) {
                continue;
            }
            for (int in_place = 0; in_place < 2; in_place++) {
                ck_assert_msg(0 == run_alltoall(p, b, in_place, caps[ci], seed_of(p, 1), PLANT_NONE, 0, bad, sizeof(bad)),
                              "%s", bad);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bcast                                                                    */
/* ------------------------------------------------------------------------ */

static int run_bcast(int p, size_t n, int root, size_t cap, unsigned seed, plant_t how, uint32_t val, char *bad,
                     size_t badlen)
{
    char what[200];
    job_t j;
    int rc = 0;
    snprintf(what, sizeof(what), "bcast shm p=%d bytes=%zu root=%d slot=%zu plant=%d/%u", p, n, root, cap, (int) how,
             val);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        j.sched[r].slot_cap = cap;
        ck_assert_msg(0 == xccl_build_bcast_shm(&j.sched[r], n, root), "%s: build failed", what);
        check_shape(&j.sched[r], what);
        job_fill_bcast(&j, r, n, root);
    }
    if (plant_job(&j, how, val)) {
        rc = job_try(&j, NULL, seed, what, bad, badlen);
        rc = 0 == rc ? job_check_bcast(&j, n, root, what, bad, badlen) : rc;
    }
    job_fini(&j);
    return rc;
}

START_TEST(bcast_shm)
{
    const int p = _i;
    size_t sz[8], n = sizes_at(p, LARGE, sz);
    int roots[SMALL_P];
    const int nroots = pick_roots(p, 16, roots);
    char bad[512] = "";
    for (size_t k = 0; k < n; k++) {
        size_t caps[3];
        const int ncaps = slots_for(sz[k], 2, caps);
        for (int ci = 0; ci < ncaps; ci++) {
            if (0 == ci && LARGE == sz[k]) {
                continue;
            }
            for (int ri = 0; ri < nroots; ri++) {
                ck_assert_msg(0 == run_bcast(p, sz[k], roots[ri], caps[ci], seed_of(p, 2 + (unsigned) ri), PLANT_NONE, 0,
                                             bad, sizeof(bad)),
                              "%s", bad);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Many interleavings, with chunks                                          */
/* ------------------------------------------------------------------------ */

static const int seed_ps[] = { 2, 3, 5, 8, 13 };
#define NSEEDS 24

START_TEST(many_seeds)
{
    const int p = seed_ps[_i];
    size_t counts[13];
    char bad[512] = "";
    for (unsigned sd = 0; sd < NSEEDS; sd++) {
        const unsigned seed = seed_of(p, 100 + sd);
        for (int in_place = 0; in_place < 2; in_place++) {
            /* 5 to 8 chunks each */
            ck_assert_msg(0 == run_allreduce(p, KIND_FLT_ORDER, 7 * 16 + 3, in_place, 3 * 64, 0, seed, PLANT_NONE, 0,
                                             bad, sizeof(bad)),
                          "%s", bad);
            ck_assert_msg(0 == run_allreduce(p, KIND_FLT_ORDER, 7 * 16 + 3, in_place, 2 * 64, 1, seed, PLANT_NONE, 0,
                                             bad, sizeof(bad)),
                          "%s", bad);
            const size_t total = make_counts(p, CNT_IRREGULAR, 21, counts);
            ck_assert_msg(0 == run_reduce_scatter(p, RED_I32_SUM, counts, total, in_place, 2 * (size_t) p * 4 * 4,
                                                  seed, PLANT_NONE, 0, bad, sizeof(bad)),
                          "%s", bad);
            ck_assert_msg(0 == run_allgather(p, 333, NULL, in_place, 128, seed, PLANT_NONE, 0, bad, sizeof(bad)), "%s",
                          bad);
            ck_assert_msg(0 == run_alltoall(p, 111, in_place, 2 * (size_t) p * 20, seed, PLANT_NONE, 0, bad, sizeof(bad)),
                          "%s", bad);
        }
        ck_assert_msg(0 == run_bcast(p, 333, (int) (sd % (unsigned) p), 128, seed, PLANT_NONE, 0, bad, sizeof(bad)),
                      "%s", bad);
    }
}
END_TEST

/* Bcast in pieces smaller than half the slot, many buffers: 100 000 bytes
 * through a 64 KiB slot go as seven 16 KiB pieces in three buffers (the
 * root reuses a buffer once every rank has read it, depth pieces back);
 * under many seeds.  Planted: the waits for flag 2 removed (the root's
 * first reuse wait: it overwrites piece 0 with piece 3 before the others
 * read it) is caught.  Those for flags 3..5 are not observable here: the
 * others' steps between the flags they need run back to back in the
 * simulator (as for moved posts, planted_bugs_fail). */
START_TEST(bcast_shm_many_buffers)
{
    char bad[512] = "";
    const int ps[] = { 2, 3, 4, 7 };
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
        const int p = ps[k];
        for (unsigned sd = 0; sd < 6; sd++) {
            ck_assert_msg(0 == run_bcast(p, 100000, (int) (sd % (unsigned) p), 65536, seed_of(p, 700 + sd),
                                         PLANT_NONE, 0, bad, sizeof(bad)),
                          "%s", bad);
        }
        ck_assert_msg(0 == run_bcast(p, 8191, p - 1, 1 << 20, seed_of(p, 720), PLANT_NONE, 0, bad, sizeof(bad)),
                      "%s", bad);
    }
    xccl_sched_t s;
    xccl_sched_init(&s, 0, 4, 1);
    s.slot_cap = 65536;
    ck_assert_int_eq(xccl_build_bcast_shm(&s, 100000, 0), 0);
    ck_assert_uint_eq(s.flag_top, 7);               /* seven pieces */
    ck_assert_uint_eq(s.slot_bytes, 3 * 16384);     /* three buffers of 16 KiB (the
                                                     * slot's last 512 bytes are the
                                                     * small allreduce's) */
    xccl_sched_fini(&s);
    for (uint32_t val = 2; val <= 2; val++) {
        int caught = 0;
        for (unsigned sd = 0; sd < 16 && !caught; sd++) {
            caught = 0 != run_bcast(4, 100000, 3, 65536, seed_of(4, 740 + sd + val * 17), PLANT_NO_WAIT, val, bad,
                                    sizeof(bad));
        }
        fprintf(stderr, "planted bcast, many buffers, waits for %u removed: %s\n", val, caught ? bad : "NOT CAUGHT");
        ck_assert_msg(caught, "bcast many buffers: removed waits for flag %u not caught", val);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Planted bugs                                                             */
/* ------------------------------------------------------------------------ */

enum { C_AR, C_AR_SMALL, C_RS, C_AG, C_A2A, C_BC, NCOLLS };
static const char *const coll_label[NCOLLS] = { "allreduce shm", "allreduce shm_small", "reduce_scatter",
                                                "allgather", "alltoall", "bcast" };

/* Runs collective c at p (several chunks) with the bug under seed. */
static int run_planted(int c, int p, unsigned seed, plant_t how, uint32_t val, char *bad, size_t len)
{
    size_t counts[16];
    switch (c) {
    case C_AR: return run_allreduce(p, RED_I32_SUM, 200, 0, 3 * 64, 0, seed, how, val, bad, len);
    case C_AR_SMALL: return run_allreduce(p, RED_I32_SUM, 200, 0, 2 * 64, 1, seed, how, val, bad, len);
    case C_RS: {
        const size_t total = make_counts(p, CNT_REGULAR, 50, counts);
        return run_reduce_scatter(p, RED_I32_SUM, counts, total, 0, 2 * (size_t) p * 64, seed, how, val, bad, len);
    }
    case C_AG: return run_allgather(p, 300, NULL, 0, 128, seed, how, val, bad, len);
    case C_A2A: return run_alltoall(p, 300, 0, 2 * (size_t) p * 64, seed, how, val, bad, len);
    default: return run_bcast(p, 300, p - 1, 128, seed, how, val, bad, len);
    }
}

/* Every barrier of every collective, removed in turn, and every post moved
 * before the copies of its step, is caught by some seed (a data error, or
 * the simulator's report of a rank touching a buffer of a rank outside the
 * call); the intact schedule passes under the same seeds. */
START_TEST(planted_bugs_fail)
{
    const int c = _i, p = 4;
    char bad[512] = "", first[512] = "";
    int planted_any = 0;
    for (int how = PLANT_NO_WAIT; how <= PLANT_EARLY_POST; how++) {
        for (uint32_t val = 1; val <= 6; val++) {
            int caught = 0;
            last_planted = 1;
            for (unsigned sd = 0; sd < 16 && !caught && last_planted; sd++) {
                const unsigned seed = seed_of(p, 300 + sd + val * 17);
                ck_assert_msg(0 == run_planted(c, p, seed, PLANT_NONE, 0, bad, sizeof(bad)), "intact: %s", bad);
                if (0 != run_planted(c, p, seed, (plant_t) how, val, bad, sizeof(bad))) {
                    caught = 1;
                    snprintf(first, sizeof(first), "%s", bad);
                }
            }
            if (!last_planted) {
                continue;      /* e.g. the post of step 0 cannot move earlier */
            }
            planted_any++;
            fprintf(stderr, "planted %s, %s %u: %s\n", coll_label[c],
                    PLANT_NO_WAIT == how ? "waits removed" : "post moved a step early", val,
                    caught ? first : "NOT CAUGHT");
            ck_assert_msg(caught, "%s: %s of flag %u not caught", coll_label[c],
                          PLANT_NO_WAIT == how ? "removed barrier" : "early post", val);
        }
    }
    ck_assert_int_ge(planted_any, 8);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Refused without a slot                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(refused_without_slot)
{
    const int p = 3;
    xccl_sched_t s[3];
    xccl_exec_t e[3];
    int32_t sbuf[3][8], rbuf[3][8];
    xccl_sim_t *sim = xccl_sim_create(p);
    for (int r = 0; r < p; r++) {
        xccl_sched_init(&s[r], r, p, 4);
        s[r].slot_cap = 1024;
        ck_assert_int_eq(xccl_build_allreduce_shm_small(&s[r], 8), 0);
        ck_assert(s[r].slot_bytes > 0);
        memset(rbuf[r], 0xEE, sizeof(rbuf[r]));
        for (int i = 0; i < 8; i++) {
            sbuf[r][i] = r;
        }
        void *bufs[XCCL_NBUF] = { sbuf[r], rbuf[r], NULL, NULL };      /* no slot */
        ck_assert_int_eq(xccl_exec_init(&e[r], &s[r], xccl_sim_transport(sim, r), bufs, NULL, NULL, 1), 0);
        xccl_exec_set_peer(&e[r], xccl_sim_peer(sim, r));
        ck_assert_int_lt(xccl_exec_progress(&e[r]), 0);
        ck_assert_uint_eq(e[r].step, 0);
        for (int i = 0; i < 8; i++) {
            ck_assert_int_eq(rbuf[r][i], (int32_t) 0xEEEEEEEE);
        }
        xccl_exec_fini(&e[r]);
        xccl_sched_fini(&s[r]);
    }
    xccl_sim_destroy(sim);
}
END_TEST

/* A whole bcast of two ranks in a slot too small for two regions of its
 * pieces: no rotation (a region count of zero once wrapped around to a
 * huge one), a slot use within the cap. */
START_TEST(rotation_in_small_slots)
{
    for (size_t cap = 512; cap <= 16384; cap *= 2) {
        for (int r = 0; r < 2; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, 2, 1);
            s.slot_cap = cap;
            ck_assert_int_eq(xccl_build_bcast_shm_whole(&s, 300, 0), 0);
            ck_assert_msg(s.slot_bytes <= cap, "cap %zu: slot %zu", cap, s.slot_bytes);
            ck_assert_uint_le(s.slot_nalt, 8u);          /* SHM_ROT_MAX */
            xccl_sched_fini(&s);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Composition: shm stages inside a two-level allreduce                     */
/* ------------------------------------------------------------------------ */

/* Two-level allreduce on "block:4" with the shm reduce_scatter and
 * allgatherv as its intra-node stages (the child schedules inherit the
 * slot cap; the slot is not moved by the map). */
START_TEST(hier_with_shm_stages)
{
    static const char *const layouts[] = { "block:4", "block:3", "cyclic:2", "0,0,1,1,1,2" };
    char bad[512] = "";
    for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++) {
        const int p = 0 == li ? 8 : 1 == li ? 7 : 6;
        for (size_t count = 1; count < 3000; count = count * 7 + 3) {
            for (size_t cap = 256; cap <= 65536; cap *= 16) {
              for (int k = RED_I32_SUM; k <= KIND_FLT_ORDER; k += KIND_FLT_ORDER - RED_I32_SUM) {
                xccl_layout_t l;
                char err[128];
                ck_assert_int_eq(xccl_layout_parse(&l, layouts[li], 3 == li ? 0 : p, err, sizeof(err)), 0);
                const size_t es = kind_es(k), bytes = count * es;
                job_t j;
                job_init(&j, p, es);
                for (int r = 0; r < p; r++) {
                    j.sched[r].slot_cap = cap;
                    ck_assert_int_eq(xccl_build_hier_allreduce(&j.sched[r], &l, count, 0, xccl_build_reduce_scatter_shm,
                                                               xccl_build_allreduce_ring, xccl_build_allgatherv_shm),
                                     0);
                    /* (a node of one rank needs no slot) */
                    ck_assert(j.sched[r].slot_bytes <= cap);
                    j.rbuf[r] = xmalloc(bytes);
                    j.sbuf[r] = job_sbuf(&j, r, bytes);
                    kind_fill(k, r, j.sbuf[r], count);
                }
                char what[128];
                snprintf(what, sizeof(what), "hier allreduce %s kind=%d count=%zu slot=%zu", layouts[li], k, count,
                         cap);
                ck_assert_msg(0 == job_exec(&j, kind_fn(k), seed_of(p, 7), what, bad, sizeof(bad)), "%s: %s", what,
                              bad);
                /* exact integers against the reference; order-dependent
                 * floats: the same bits on every rank */
                unsigned char *want = xmalloc(bytes);
                kind_reference(k, p, want, count);
                for (int r = 0; r < p; r++) {
                    ck_assert_msg(0 == memcmp(j.rbuf[r], KIND_FLT_ORDER == k ? j.rbuf[0] : want, bytes),
                                  "%s: rank %d wrong", what, r);
                }
                free(want);
                job_fini(&j);
                xccl_layout_fini(&l);
              }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The executor's host copy                                                 */
/* ------------------------------------------------------------------------ */

/* xccl_copy_stream is memmove too: every destination alignment mod 64,
 * lengths below and above its 4 KiB start, around its 64-byte body
 * (head and tail by memcpy), overlapping ranges both ways (memmove's),
 * nothing written outside [dst, dst + n). */
START_TEST(copy_stream_is_memmove)
{
    static const size_t lens[] = { 0, 1, 4095, 4096, 4097, 4096 + 63, 4096 + 64 + 15, 65536 + 17, 300001 };
    const size_t span = 2 * 300001 + 4096;
    unsigned char *a = xmalloc(span), *b = xmalloc(span), *want = xmalloc(span);
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        const size_t n = lens[li];
        for (int d = 0; d < 64; d += (n > 70000 ? 7 : 1)) {
            for (int overlap = 0; overlap < 3; overlap++) {
                for (size_t i = 0; i < span; i++) {
                    a[i] = (unsigned char) (i * 7 + 1);
                    b[i] = (unsigned char) (i * 13 + 5);
                }
                /* 0: src in a, dst in b; 1: dst d bytes above src in a; 2: below */
                unsigned char *src = a + 2048 + 3, *base = 0 == overlap ? b : a;
                unsigned char *dst = 0 == overlap ? b + 64 + (size_t) d : 1 == overlap ? src + d : src - d - 1;
                memcpy(want, base, span);
                memmove(want + (dst - base), 0 == overlap ? src : want + (src - a), n);
                xccl_copy_stream(dst, src, n);
                ck_assert_msg(0 == memcmp(base, want, span), "len %zu dst +%d overlap %d", n, d, overlap);
            }
        }
    }
    free(a);
    free(b);
    free(want);
}
END_TEST

/* xccl_memmove is memmove: disjoint buffers whose distance modulo 4 KiB is
 * every value around the pieces' trigger (1..63), and overlapping ranges
 * both ways (memmove's case), at lengths around the piece size; with the
 * pieces forced on, forced off, and as this CPU measures. */
START_TEST(memmove_is_memmove)
{
    static const size_t lens[] = { 0, 1, 63, 2047, 2048, 2049, 4097, 70001 };
    const size_t span = 2 * 70001 + 3 * 4096;
    unsigned char *a = xmalloc(span), *b = xmalloc(span), *want = xmalloc(span);
    static const int forced[] = { 1, 0, -1 };    /* pieces, memmove, measured */
    const int mode = forced[_i];
    xccl_memmove_force(mode);
    if (mode < 0) {
        double al = 0.0, as = 0.0;
        const int v = xccl_memmove_pieces(&al, &as);
        ck_assert_msg((0 == v || 1 == v) && al > 0.0 && as > 0.0, "measured %d: %.3f / %.3f us", v, al, as);
        ck_assert_int_eq(v, xccl_memmove_pieces(NULL, NULL));    /* measured once */
    } else {
        ck_assert_int_eq(xccl_memmove_pieces(NULL, NULL), mode);
    }
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        const size_t n = lens[li];
        for (int d = -70; d <= 70; d++) {
            for (int overlap = 0; overlap < 2; overlap++) {
                for (size_t i = 0; i < span; i++) {
                    a[i] = (unsigned char) (i * 7 + 1);
                    b[i] = (unsigned char) (i * 13 + 5);
                }
                /* overlap: both in a; else src in a, dst in b at distance d mod 4096 */
                unsigned char *src = a + 4096 + 70, *base = overlap ? a : b;
                uintptr_t at = (uintptr_t) src + (uintptr_t) (intptr_t) d;
                if (!overlap) {
                    at = ((uintptr_t) b + 4096 + 4095) / 4096 * 4096 + (((uintptr_t) src + (uintptr_t) (intptr_t) d) & 4095);
                }
                unsigned char *dst = (unsigned char *) at;
                ck_assert(dst >= base && dst + n <= base + span);
                memcpy(want, base, span);
                memmove(want + (dst - base), overlap ? want + (src - a) : src, n);
                xccl_memmove(dst, src, n);
                ck_assert_msg(0 == memcmp(base, want, span), "len %zu distance %d overlap %d mode %d", n, d,
                              overlap, mode);
            }
        }
    }
    free(a);
    free(b);
    free(want);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Successive calls, interleaved: the slot outlives the call                */
/* ------------------------------------------------------------------------ */

/* Virtual ranks each run a list of calls on persistent slots
 * (shm_successive), so a fast rank runs ahead of a slow one: the latency
 * path (no exit barrier, alternating regions), the pipelines, bcast
 * (non-roots wait only for the root) and calls without flags (count 0:
 * nothing holds a rank back). */
enum { MC_FAST, MC_EMPTY, MC_SMALL_BIG, MC_SLICED, MC_BCAST, MC_AG, MC_A2A, MC_NKINDS };
#define MC_CALLS 40
/* bcast, allgather and alltoall move through 2-7 regions of it from call
 * to call (slot_alt); the two allreduce pipelines take 3 chunks */
#define MC_SLOT 32768

/* The kind of call i (the same list on every rank). */
static int mc_kind(int i, unsigned mix)
{
    if (i % 9 == 8) {
        return MC_A2A;
    }
    return (int) ((unsigned) i * 7u + mix * (unsigned) i * (unsigned) i) % MC_A2A;
}

/* One call: its schedule and buffers (int32 elements) on rank r. */
typedef struct {
    shm_call_t sim;
    size_t n;                          /* elements (allgather: per rank) */
} mc_call_t;

/* A run: p ranks, the mix of kinds, the plant: 0 none, 1 the waits one
 * call back removed, 2 the slots swapped on rank 0 only, 3 what a call
 * without an exit barrier left owed never settled (run_successive). */
typedef struct {
    int p;
    unsigned mix;
    int plant;
} mc_run_t;

static void mc_build(void *ctx, shm_call_t *sc, int r, int call)
{
    static const size_t sizes[MC_NKINDS] = { 13, 0, 9000, 7000, 777, 333, 200 };
    const mc_run_t *run = ctx;
    const int p = run->p, plant = run->plant, kind = mc_kind(call, run->mix);
    mc_call_t *c = (mc_call_t *) sc;
    xccl_sched_t *s = &sc->s;
    c->n = sizes[kind] + (size_t) (call % 5);
    if (MC_EMPTY == kind) {
        c->n = 0;
    }
    xccl_sched_init(s, r, p, sizeof(int32_t));
    s->slot_cap = MC_SLOT;
    int rc;
    switch (kind) {
    case MC_FAST: case MC_EMPTY: case MC_SMALL_BIG: rc = xccl_build_allreduce_shm_small(s, c->n); break;
    case MC_SLICED: rc = xccl_build_allreduce_shm(s, c->n); break;
    case MC_BCAST: rc = xccl_build_bcast_shm_whole(s, c->n * 4, call % p); break;
    case MC_A2A: rc = xccl_build_alltoall_shm_whole(s, c->n * 4, 0); break;
    default: rc = xccl_build_allgather_shm(s, c->n * 4); break;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert(s->slot_bytes <= MC_SLOT);
    if (2 == p && (MC_AG == kind || MC_A2A == kind || MC_SLICED == kind)) {
        /* two ranks: the slots trade places on odd calls instead */
        ck_assert_int_eq(s->slot_swap, 1);
        ck_assert_uint_eq(s->slot_nalt, 0);
    } else if (2 == p && MC_BCAST == kind) {
        /* and a bcast's also move through an odd number of regions */
        ck_assert_int_eq(s->slot_swap, 1);
        ck_assert_uint_ge(s->slot_nalt, 3);
        ck_assert_uint_eq(s->slot_nalt % 2, 1);
    } else if (MC_BCAST == kind || MC_AG == kind || (MC_A2A == kind && p <= 6)) {
        ck_assert_uint_ge(s->slot_nalt, 2);
        ck_assert_int_eq(s->slot_swap, 0);
    }
    /* allgather and alltoall of one chunk in two or more places end
     * without an exit barrier; nothing else here does */
    ck_assert_int_eq(s->no_exit, (MC_AG == kind || MC_A2A == kind) && c->n > 0 && (s->slot_swap || s->slot_nalt >= 2));
    if (2 == plant) {                  /* the slots trade places on rank 0 only */
        s->slot_swap = 0 == r && 2 == p;
    }
    if (MC_FAST == kind) {
        ck_assert_uint_eq(s->slot_flip, SHM_FAST_BYTES_TEST);
    }
    if (1 == plant) {                  /* the waits one call back removed */
        sched_drop(s, drop_entry_wait, NULL);
    }
    const size_t in_n = MC_A2A == kind ? (size_t) p * c->n : c->n;
    const size_t out_n = MC_AG == kind || MC_A2A == kind ? (size_t) p * c->n : c->n;
    int32_t *in = xmalloc(in_n * 4);
    for (size_t i = 0; i < in_n; i++) {
        /* alltoall: block q for rank q */
        in[i] = (int32_t) (call * 100003 + r * 1009 + (int) i);
    }
    sc->in = (unsigned char *) in;
    sc->out = xmalloc(out_n * 4);
    memset(sc->out, 0xEE, out_n * 4);
    if (MC_BCAST == kind && r == call % p) {
        memcpy(sc->out, sc->in, c->n * 4);
    }
}

static int mc_check(void *ctx, const shm_call_t *sc, int r, int call, char *bad, size_t badlen)
{
    const mc_run_t *run = ctx;
    const int p = run->p, kind = mc_kind(call, run->mix);
    const mc_call_t *c = (const mc_call_t *) sc;
    const int32_t *out = (const int32_t *) sc->out;
    for (size_t i = 0; i < (MC_AG == kind || MC_A2A == kind ? (size_t) p * c->n : c->n); i++) {
        int32_t want = 0;
        if (MC_A2A == kind) {          /* block q from rank q, its block r */
            want = (int32_t) (call * 100003 + (int) (i / c->n) * 1009 + (int) ((size_t) r * c->n + i % c->n));
        } else if (MC_BCAST == kind) {
            want = (int32_t) (call * 100003 + (call % p) * 1009 + (int) i);
        } else if (MC_AG == kind) {
            want = (int32_t) (call * 100003 + (int) (i / c->n) * 1009 + (int) (i % c->n));
        } else {
            uint32_t acc = 0;
            for (int q = 0; q < p; q++) {
                acc += (uint32_t) (call * 100003 + q * 1009 + (int) i);
            }
            want = (int32_t) acc;
        }
        if (out[i] != want) {
            snprintf(bad, badlen, "p=%d rank %d call %d (kind %d): wrong result", p, r, call, kind);
            return -1;
        }
    }
    return 0;
}

/* Runs MC_CALLS calls on p ranks; 0 ok, -1 a wrong result or deadlock. */
static int run_successive(int p, unsigned seed, unsigned mix, int plant, char *bad, size_t badlen)
{
    mc_run_t mc = { p, mix, plant };
    const shm_run_t run = { p, MC_CALLS, MC_SLOT, 500u, 3 != plant, 0, 0, sizeof(mc_call_t), &mc,
                            mc_build, mc_check, NULL };
    return shm_successive(&run, seed, bad, badlen);
}

START_TEST(successive_calls_interleaved)
{
    char bad[256] = "";
    for (int p = 2; p <= 6; p++) {
        for (unsigned sd = 0; sd < 12; sd++) {
            ck_assert_msg(0 == run_successive(p, seed_of(p, 700 + sd), sd % 4, 0, bad, sizeof(bad)), "%s", bad);
        }
    }
    /* without the waits one call back, a rank that ran ahead overwrites
     * the region a slow one still reads */
    int caught = 0;
    for (int p = 2; p <= 6 && !caught; p++) {
        for (unsigned sd = 0; sd < 24 && !caught; sd++) {
            caught = 0 != run_successive(p, seed_of(p, 900 + sd), sd % 4, 1, bad, sizeof(bad));
        }
    }
    fprintf(stderr, "planted: latency path without its wait one call back: %s\n", caught ? bad : "NOT CAUGHT");
    ck_assert_msg(caught, "the latency path without its wait one call back was not caught");
    /* two ranks that disagree on which slot is whose in odd calls */
    caught = 0;
    for (unsigned sd = 0; sd < 4 && !caught; sd++) {
        caught = 0 != run_successive(2, seed_of(2, 950 + sd), sd % 4, 2, bad, sizeof(bad));
    }
    fprintf(stderr, "planted: slots swapped on one rank only: %s\n", caught ? bad : "NOT CAUGHT");
    ck_assert_msg(caught, "slots swapped on one rank only was not caught");
    /* allgather and alltoall without their exit barriers, what they left
     * owed never settled: the next call of another layout overwrites what
     * a slow rank still reads (of two ranks, whose calls trade slots, only
     * where a call that touches no flag lies between two of the same
     * parity: too rare to count on here) */
    for (int p = 3; p <= 6; p++) {
        caught = 0;
        for (unsigned sd = 0; sd < 24 && !caught; sd++) {
            caught = 0 != run_successive(p, seed_of(p, 990 + sd), sd % 4, 3, bad, sizeof(bad));
        }
        fprintf(stderr, "planted: p=%d, calls without an exit barrier never settled: %s\n", p,
                caught ? bad : "NOT CAUGHT");
        ck_assert_msg(caught, "p=%d: calls without an exit barrier never settled was not caught", p);
    }
}
END_TEST

/* What a call without an exit barrier leaves owed, and which next calls
 * wait for it (xccl_exec_set_owed), decision by decision: rank 0 of p,
 * peers that never post (so an executor stops at its first wait), the
 * owed wait seen in owed_at after the first progress. */
static int nobody_posted(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    (void) ctx, (void) peer, (void) seq, (void) val;
    return 0;
}

static int no_post(void *ctx, uint32_t seq, uint32_t val)
{
    (void) ctx, (void) seq, (void) val;
    return 0;
}

static void *any_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    (void) peer, (void) id;
    return ctx;
}

enum { OW_AG, OW_AG_BIG, OW_A2A, OW_SMALL, OW_MESH };

/* 1: the executor of kind at seq first waits for what o holds. */
static int owed_wait(int p, int kind, uint32_t seq, xccl_exit_owed_t *o, void *slot)
{
    xccl_sched_t s;
    xccl_sched_init(&s, 0, p, 4);
    s.slot_cap = MC_SLOT;
    switch (kind) {
    case OW_AG: ck_assert_int_eq(xccl_build_allgather_shm(&s, 400), 0); break;
    case OW_AG_BIG: ck_assert_int_eq(xccl_build_allgather_shm(&s, 9000), 0); break;
    case OW_A2A: ck_assert_int_eq(xccl_build_alltoall_shm_whole(&s, 400, 0), 0); break;
    case OW_SMALL: ck_assert_int_eq(xccl_build_allreduce_shm_small(&s, 3000), 0); break;
    default: ck_assert_int_eq(xccl_build_allgather_mesh(&s, 400), 0); break;
    }
    static char user[MC_SLOT];
    xccl_peer_t peer = { slot, any_buf, no_post, nobody_posted, NULL, NULL };
    void *bufs[XCCL_NBUF] = { user, user, user, slot };
    const uint32_t owed_seq = o->seq, owed_val = o->val;
    xccl_exec_t e;
    ck_assert_int_eq(xccl_exec_init(&e, &s, NULL, bufs, NULL, NULL, seq), 0);
    xccl_exec_set_peer(&e, &peer);
    xccl_exec_set_owed(&e, o);
    ck_assert_int_eq(xccl_exec_progress(&e), 0);     /* stops at a wait */
    const int waits = e.owed_at < p;
    ck_assert(!waits || (e.owed_seq == owed_seq && e.owed_val == owed_val && owed_val > 0));
    xccl_exec_fini(&e);
    xccl_sched_fini(&s);
    return waits;
}

START_TEST(exit_owed_decisions)
{
    static char slot[MC_SLOT];
    for (int p = 2; p <= 5; p++) {
        xccl_exit_owed_t o = { 0, 0, 0, 0, 0, 0, 0 };
        /* p = 2: the slots trade places by call parity; more: regions */
        ck_assert_int_eq(owed_wait(p, OW_AG, 10, &o, slot), 0);          /* nothing owed */
        ck_assert_int_eq(o.open, 1);
        ck_assert_uint_eq(o.seq, 10);
        const unsigned n = 2 == p ? 2 : o.nalt;
        ck_assert_uint_ge(n, 2);
        ck_assert_int_eq(owed_wait(p, OW_AG, 11, &o, slot), 0);          /* the next place */
        ck_assert_uint_eq(o.seq, 11);
        ck_assert_int_eq(owed_wait(p, OW_MESH, 12, &o, slot), 0);        /* writes no slot: o kept */
        ck_assert_uint_eq(o.seq, 11);
        ck_assert_int_eq(owed_wait(p, OW_AG, 11 + n, &o, slot), 1);      /* 11's place again (a call
                                                                           * between took a number) */
        ck_assert_uint_eq(o.seq, 11 + n);
        /* regions of another size (more ranks) wait; two ranks' slots
         * trading places are one layout whatever the sizes */
        ck_assert_int_eq(owed_wait(p, OW_AG_BIG, 12 + n, &o, slot), p > 2);
        ck_assert_int_eq(owed_wait(p, OW_A2A, 13 + n, &o, slot), p > 2);
        ck_assert_int_eq(owed_wait(p, OW_SMALL, 14 + n, &o, slot), 1);   /* has its exit barrier */
        ck_assert_int_eq(o.open, 0);
        ck_assert_int_eq(owed_wait(p, OW_SMALL, 15 + n, &o, slot), 0);   /* nothing owed */
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The cost model's shared-memory terms                                     */
/* ------------------------------------------------------------------------ */

START_TEST(cost_of_shm_schedules)
{
    const xccl_cost_model_t old = { 1e-6, 1e-10, 2e-10, 1e-10, 0, 0 };
    const xccl_cost_model_t shm = { 1e-6, 1e-10, 2e-10, 1e-10, 3e-7, 5e-11 };
    for (int p = 2; p <= 9; p++) {
        const size_t count = 1000, n = count * 4;
        xccl_sched_t s;
        xccl_sched_init(&s, 1, p, 4);
        s.slot_cap = 1 << 20;
        ck_assert_int_eq(xccl_build_allreduce_shm_small(&s, count), 0);
        /* copy in n; barrier; p-1 reductions of n, reading p-1 peers' slots
         * (the first reads two slots, one the own); barrier */
        const double want = 1e-10 * (double) n + 2.0 * (p - 1) * 3e-7 + 2e-10 * (double) (p - 1) * (double) n +
                            5e-11 * (double) (p - 1) * (double) n;
        ck_assert_double_eq_tol(xccl_sched_cost(&s, &shm), want, 1e-12);
        /* the first reading: a wait is a message received (alpha), no peer term */
        const double want_old = 1e-10 * (double) n + 2.0 * (p - 1) * 1e-6 + 2e-10 * (double) (p - 1) * (double) n;
        ck_assert_double_eq_tol(xccl_sched_cost(&s, &old), want_old, 1e-12);
        /* one node: the hier cost is the same */
        xccl_layout_t l;
        ck_assert_int_eq(xccl_layout_parse(&l, "block:64", p, NULL, 0), 0);
        ck_assert_double_eq_tol(xccl_sched_cost_hier(&s, &l, &shm, &old), want, 1e-12);
        xccl_layout_fini(&l);
        xccl_sched_fini(&s);
    }
    /* Sliced beats small where reductions dominate (large n, many ranks),
     * small wins for tiny messages (one barrier fewer). */
    const xccl_cost_model_t m = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA,
                                  XCCL_COST_SHM_FLAG, XCCL_COST_SHM_PEER };
    double t[2][2];
    for (int big = 0; big < 2; big++) {
        for (int small = 0; small < 2; small++) {
            xccl_sched_t s;
            xccl_sched_init(&s, 0, 8, 4);
            s.slot_cap = 1 << 20;
            ck_assert_int_eq((small ? xccl_build_allreduce_shm_small : xccl_build_allreduce_shm)(&s, big ? 1 << 20 : 2), 0);
            t[big][small] = xccl_sched_cost(&s, &m);
            xccl_sched_fini(&s);
        }
    }
    ck_assert(t[0][1] < t[0][0]);
    ck_assert(t[1][0] < t[1][1]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The catalog: "shm" with a segment on one node; the two-level algorithms  */
/* with shm intra-node stages                                               */
/* ------------------------------------------------------------------------ */

/* Runs catalog algorithm algo of collective c for every rank of layout l
 * on the simulator (int32 sums, byte patterns), checks the results; with
 * shm, also that every send crosses nodes.  Returns 0 or 1 with bad. */
static int run_catalog(xccl_coll_t c, const xccl_algo_t *algo, const xccl_layout_t *l, size_t n, size_t shm_slot,
                       char *bad, size_t badlen)
{
    const int p = l->size;
    const int red = XCCL_COLL_ALLREDUCE == c || XCCL_COLL_REDUCE_SCATTER == c || XCCL_COLL_REDUCE_SCATTER_BLOCK == c;
    const size_t es = red ? 4 : 1;
    size_t *counts = xmalloc((size_t) p * sizeof(size_t));
    size_t total = 0;
    for (int r = 0; r < p; r++) {
        counts[r] = XCCL_COLL_REDUCE_SCATTER == c ? n + (size_t) (r % 3) : n;
        total += counts[r];
    }
    const int root = p / 2;
    xccl_coll_args_t args = { .count = n, .counts = counts, .block = n, .bytes = n, .root = root, .layout = l,
                              .shm_slot = shm_slot };
    char what[160];
    snprintf(what, sizeof(what), "%s %s p=%d n=%zu shm_slot=%zu", xccl_coll_name(c), algo->name, p, n, shm_slot);
    job_t j;
    int rc = 0;
    job_init(&j, p, es);
    size_t sb = 0, rb = 0;
    for (int r = 0; r < p; r++) {
        int b = algo->build(&j.sched[r], &args);
        if (XCCL_NOT_APPLICABLE == b) {
            job_fini(&j);
            free(counts);
            return 0;
        }
        ck_assert_msg(0 == b, "%s: build failed", what);
        /* Moves not (yet) through the segment: the root's scatter inside
         * its node (bcast hier_rails, hier_sag) and, on uneven layouts, the
         * hand-offs to and from the ranks beyond the smallest node (and the
         * alltoallv intra stage). */
        const int transport_inside = (XCCL_COLL_BCAST == c && 0 != strcmp(algo->name, "hier")) ||
                                     !xccl_layout_is_regular(l);
        if (shm_slot && !transport_inside) {
            ck_assert_msg(j.sched[r].slot_bytes <= shm_slot, "%s: slot", what);
            const xccl_sched_t *s = &j.sched[r];
            for (size_t i = 0; i < s->nacts; i++) {
                const xccl_action_t *a = &s->acts[i];
                if ((XCCL_ACT_SEND == a->kind || XCCL_ACT_RECV == a->kind) && l->node_of[a->peer] == l->node_of[r]) {
                    snprintf(bad, badlen, "%s: rank %d sends or receives inside its node", what, r);
                    rc = 1;
                }
            }
        }
        switch (c) {
        case XCCL_COLL_ALLREDUCE: sb = rb = n * es; break;
        case XCCL_COLL_REDUCE_SCATTER: case XCCL_COLL_REDUCE_SCATTER_BLOCK: sb = total * es; rb = counts[r] * es; break;
        case XCCL_COLL_ALLGATHER: sb = n; rb = (size_t) p * n; break;
        case XCCL_COLL_ALLTOALL: sb = rb = (size_t) p * n; break;
        case XCCL_COLL_BCAST: sb = 0; rb = n; break;
        case XCCL_COLL_BARRIER: sb = rb = 0; break;
        default: ck_abort_msg("%s: no reference for this collective", what);
        }
        j.rbuf[r] = xmalloc(rb);
        memset(j.rbuf[r], 0xEE, rb);
        j.sbuf[r] = job_sbuf(&j, r, sb);
        if (red) {
            fill_input(RED_I32_SUM, r, j.sbuf[r], sb / es);
        } else if (XCCL_COLL_ALLGATHER == c) {
            for (size_t i = 0; i < n; i++) {
                j.sbuf[r][i] = ag_pattern(r, i);
            }
        } else if (XCCL_COLL_ALLTOALL == c) {
            for (size_t i = 0; i < sb; i++) {
                j.sbuf[r][i] = pattern(r, (int) (i / n), i % n);
            }
        } else if (XCCL_COLL_BCAST == c) {
            for (size_t i = 0; i < n && r == root; i++) {
                j.rbuf[r][i] = ag_pattern(root, i);
            }
        }
    }
    char err[256];
    if (0 == rc && 0 != job_exec(&j, red ? xccl_reduce_kernel(XCCL_DT_INT32, XCCL_OP_SUM) : NULL, seed_of(p, 9), what,
                                 err, sizeof(err))) {
        snprintf(bad, badlen, "%s: %s", what, err);
        rc = 1;
    }
    int32_t *want = red ? xmalloc(total * es) : NULL;
    if (red) {
        reference(RED_I32_SUM, p, want, XCCL_COLL_ALLREDUCE == c ? n : total);
    }
    size_t first = 0;
    for (int r = 0; r < p && 0 == rc; r++) {
        int wrong = 0;
        switch (c) {
        case XCCL_COLL_ALLREDUCE: wrong = 0 != memcmp(j.rbuf[r], want, n * es); break;
        case XCCL_COLL_REDUCE_SCATTER: case XCCL_COLL_REDUCE_SCATTER_BLOCK:
            wrong = 0 != memcmp(j.rbuf[r], want + first, counts[r] * es);
            first += counts[r];
            break;
        case XCCL_COLL_ALLGATHER:
            for (size_t i = 0; i < (size_t) p * n; i++) {
                wrong |= j.rbuf[r][i] != ag_pattern((int) (i / n), i % n);
            }
            break;
        case XCCL_COLL_ALLTOALL:
            for (size_t i = 0; i < (size_t) p * n; i++) {
                wrong |= j.rbuf[r][i] != pattern((int) (i / n), r, i % n);
            }
            break;
        case XCCL_COLL_BARRIER: break;      /* no data: the run ended (every flag met) */
        default:                            /* bcast */
            for (size_t i = 0; i < n; i++) {
                wrong |= j.rbuf[r][i] != ag_pattern(root, i);
            }
            break;
        }
        if (wrong) {
            snprintf(bad, badlen, "%s: rank %d wrong", what, r);
            rc = 1;
        }
    }
    free(want);
    job_fini(&j);
    free(counts);
    return rc;
}

START_TEST(catalog_shm)
{
    const xccl_cost_model_t m = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA,
                                  XCCL_COST_SHM_FLAG, XCCL_COST_SHM_PEER };
    const int p = 8;
    size_t counts[8];
    for (int r = 0; r < p; r++) {
        counts[r] = 1000;
    }
    xccl_layout_t one, two;
    ck_assert_int_eq(xccl_layout_parse(&one, "block:8", p, NULL, 0), 0);
    ck_assert_int_eq(xccl_layout_parse(&two, "block:4", p, NULL, 0), 0);
    for (int c = 0; c < XCCL_NCOLL; c++) {
        int n, nshm = 0;
        if (!xccl_coll_level((xccl_coll_t) c)) {
            continue;          /* reduce, the v forms, gather, scatter: their own tests */
        }
        const xccl_algo_t *algos = xccl_coll_algos((xccl_coll_t) c, &n);
        for (int i = 0; i < n; i++) {
            if (0 != strncmp(algos[i].name, "shm", 3)) {
                continue;
            }
            nshm++;
            /* not applicable without a segment or on two nodes (s untouched) */
            static const struct {
                size_t slot;
                int two_nodes, rc;
            } cases[] = { { 0, 0, XCCL_NOT_APPLICABLE }, { 65536, 1, XCCL_NOT_APPLICABLE },
                          { 0, 1, XCCL_NOT_APPLICABLE }, { 65536, 0, 0 } };
            for (size_t v = 0; v < sizeof(cases) / sizeof(cases[0]); v++) {
                xccl_coll_args_t a = { .count = 8000, .counts = counts, .block = 1000, .bytes = 8000,
                                       .layout = cases[v].two_nodes ? &two : &one, .shm_slot = cases[v].slot };
                xccl_sched_t s;
                xccl_sched_init(&s, 3, p, 4);
                ck_assert_int_eq(algos[i].build(&s, &a), cases[v].rc);
                if (0 == cases[v].rc) {
                    ck_assert_str_eq(s.algo, algos[i].name);
                    ck_assert(s.slot_bytes <= 65536 && 0 == s.max_xfers);
                    /* a bcast leaf copies out only; a barrier is flags only */
                    ck_assert(s.slot_bytes > 0 || XCCL_COLL_BCAST == c || XCCL_COLL_BARRIER == c);
                    /* and a prediction */
                    ck_assert(xccl_sched_cost_hier(&s, &one, &m, &m) > 0);
                } else {
                    ck_assert_uint_eq(s.nacts, 0);
                    ck_assert_uint_eq(s.slot_cap, 0);
                }
                xccl_sched_fini(&s);
            }
        }
        /* one per collective (two allreduce forms) */
        ck_assert_int_eq(nshm, XCCL_COLL_ALLREDUCE == c ? 2 : 1);
    }
    xccl_layout_fini(&one);
    xccl_layout_fini(&two);
}
END_TEST

/* Every two-level algorithm with a segment: intra-node stages through it,
 * sends only between nodes, right results; and every flat shm one. */
START_TEST(catalog_shm_runs)
{
    static const char *const layouts[] = { "block:4", "block:3", "cyclic:2", "0,0,1,1,1,2", "block:8" };
    static const int sizes[] = { 8, 7, 6, 0, 8 };
    char bad[512] = "";
    for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++) {
        xccl_layout_t l;
        ck_assert_int_eq(xccl_layout_parse(&l, layouts[li], sizes[li], NULL, 0), 0);
        for (int c = 0; c < XCCL_NCOLL; c++) {
            int n;
            const xccl_algo_t *algos = xccl_coll_algos((xccl_coll_t) c, &n);
            for (int i = 0; i < n && xccl_coll_level((xccl_coll_t) c); i++) {
                if (0 != strncmp(algos[i].name, "hier", 4) && 0 != strncmp(algos[i].name, "shm", 3)) {
                    continue;
                }
                const size_t ns[] = { 1, 37, 1000 };
                for (size_t k = 0; k < 3; k++) {
                    for (size_t slot = 512; slot <= 65536; slot *= 128) {
                        ck_assert_msg(0 == run_catalog((xccl_coll_t) c, &algos[i], &l, ns[k], slot, bad, sizeof(bad)),
                                      "%s", bad);
                    }
                }
            }
        }
        xccl_layout_fini(&l);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("shm_algos");
    /* CK_RUN_CASE=basics ./test_shm_algos: all but the p = 1..64 sweeps */
    TCase *tc = tcase_create("basics");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, refused_without_slot);
    tcase_add_test(tc, rotation_in_small_slots);
    tcase_add_test(tc, allreduce_shm_barriers);
    tcase_add_test(tc, hier_with_shm_stages);
    tcase_add_test(tc, cost_of_shm_schedules);
    tcase_add_test(tc, successive_calls_interleaved);
    tcase_add_test(tc, exit_owed_decisions);
    tcase_add_loop_test(tc, memmove_is_memmove, 0, 3);
    tcase_add_test(tc, copy_stream_is_memmove);
    tcase_add_test(tc, catalog_shm);
    tcase_add_test(tc, catalog_shm_runs);
    tcase_add_loop_test(tc, planted_bugs_fail, 0, NCOLLS);
    tcase_add_loop_test(tc, many_seeds, 0, (int) (sizeof(seed_ps) / sizeof(seed_ps[0])));
    suite_add_tcase(su, tc);
    tc = tcase_create("sizes");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, allreduce_shm, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, reduce_scatter_shm, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, allgather_shm, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, alltoall_shm, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, bcast_shm, 1, SMALL_P + 1);
    tcase_add_test(tc, bcast_shm_many_buffers);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
