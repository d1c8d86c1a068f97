/*
 * reduce_scatter (recursive_halving, pairwise, nhr, nb) and allgather
 * (recursive_doubling, bruck, nhr, nb) on the simulated transport: every
 * communicator size 1..64 and a few large ones (100, 127, 128, 129, 255, 1000),
 * regular and irregular counts (zeros included), several element kinds, in
 * place and not; float sums compared bit for bit with the reduction order
 * each algorithm documents; then the textbook shapes at a power of two.
 *
 * At 1000 ranks pairwise does not run reduce_scatter (it posts
 * a million messages, slow on the simulator's list of unmatched requests).
 *
 * Expected values come from scalar references written here, not from the
 * kernels under test; the reduction callback also checks the kernels'
 * aliasing contract.  Checks are plain loops with one assertion per job:
 * Check writes to a pipe per assertion, which is slow inside loops.
 * Buffers are allocated at their exact size so that ASan catches a
 * schedule that strays past them.
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 11
#define SIM_SEED_SALT 17u
#include "sim_harness.h"
#include "xccl_build.h"

#define SMALL_P 64                     /* every p in 1..SMALL_P */

static const int big_p[] = { 100, 127, 128, 129, 255, 1000 };
#define NBIG ((int) (sizeof(big_p) / sizeof(big_p[0])))

/* ------------------------------------------------------------------------ */
/* Reduce_scatter                                                           */
/* ------------------------------------------------------------------------ */

typedef int (*rs_builder_t)(xccl_sched_t *s, const size_t *counts, int in_place);

static const struct {
    const char *name;
    rs_builder_t build;
} rs_algos[] = {
    { "recursive_halving", xccl_build_reduce_scatter_recursive_halving },
    { "pairwise", xccl_build_reduce_scatter_pairwise },
    { "nhr", xccl_build_reduce_scatter_nhr },
    { "nb", xccl_build_reduce_scatter_nb },
};
#define NRS ((int) (sizeof(rs_algos) / sizeof(rs_algos[0])))

/* Count patterns: every rank base; irregular (every third rank 0, the
 * others base .. base+3); rising (base + r % 8: in place, a rank's output
 * RECV[0..) overlaps its own input block at a shift); all on the last rank. */
enum { CNT_REGULAR, CNT_IRREGULAR, CNT_RISING, CNT_LAST_ONLY };
static const char *const cnt_names[] = { "regular", "irregular", "rising", "last_only" };

static size_t *make_counts(int p, int pattern, size_t base, size_t *first)
{
    size_t *c = xmalloc((size_t) p * sizeof(size_t)), total = 0;
    for (int r = 0; r < p; r++) {
        switch (pattern) {
        case CNT_REGULAR: c[r] = base; break;
        case CNT_IRREGULAR: c[r] = (r % 3 == 1) ? 0 : base + (size_t) (r % 4); break;
        case CNT_RISING: c[r] = base + (size_t) (r % 8); break;
        default: c[r] = r == p - 1 ? base : 0; break;
        }
        first[r] = total;
        total += c[r];
    }
    first[p] = total;
    return c;
}

/* Runs one reduce_scatter and compares every rank with want (the full
 * reduced vector); not in place the input must survive. */
static void check_rs(int a, int p, red_kind_t k, const size_t *counts, const size_t *first,
                     const void *want, int in_place, const char *cdesc)
{
    const size_t es = red_kinds[k].es, total = first[p];
    xccl_reduce_fn_t fn = xccl_reduce_kernel(red_kinds[k].dt, red_kinds[k].op);
    char what[160];
    job_t j;
    int bad_build = 0;

    snprintf(what, sizeof(what), "reduce_scatter %s p=%d %s kind=%d in_place=%d", rs_algos[a].name, p,
             cdesc, (int) k, in_place);
    ck_assert_ptr_nonnull(fn);
    job_init(&j, p, es);
    for (int r = 0; r < p; r++) {
        bad_build |= 0 != rs_algos[a].build(&j.sched[r], counts, in_place);
        bad_build |= 0 != strcmp(j.sched[r].algo, rs_algos[a].name);
        j.rbuf[r] = xmalloc((in_place ? total : counts[r]) * es);
        j.sbuf[r] = in_place ? j.rbuf[r] : job_sbuf(&j, r, total * es);
        if (!in_place) {
            memset(j.rbuf[r], 0xEE, counts[r] * es);
        }
        fill_input(k, r, j.sbuf[r], total);
    }
    ck_assert_msg(!bad_build, "%s: build failed or wrong name", what);
    job_run(&j, fn, what);

    unsigned char *input = xmalloc(total * es);
    int bad_rank = -1, input_changed = 0;
    for (int r = 0; r < p && bad_rank < 0; r++) {
        if (0 != memcmp(j.rbuf[r], (const unsigned char *) want + first[r] * es, counts[r] * es)) {
            bad_rank = r;
        } else if (!in_place) {
            fill_input(k, r, input, total);
            if (0 != memcmp(j.sbuf[r], input, total * es)) {
                bad_rank = r;
                input_changed = 1;
            }
        }
    }
    free(input);
    ck_assert_msg(bad_rank < 0, "%s: rank %d %s", what, bad_rank,
                  input_changed ? "changed its input" : "has a wrong result");
    job_fini(&j);
}

/* algos: bit a set runs rs_algos[a]. */
static void check_rs_all(int p, const size_t *bases, int nbases, int nkinds, unsigned algos)
{
    size_t *first = xmalloc(((size_t) p + 1) * sizeof(size_t));
    for (int pat = CNT_REGULAR; pat <= CNT_LAST_ONLY; pat++) {
        for (int bi = 0; bi < nbases; bi++) {
            size_t *counts = make_counts(p, pat, bases[bi], first);
            char cdesc[64];
            snprintf(cdesc, sizeof(cdesc), "counts=%s/%zu", cnt_names[pat], bases[bi]);
            for (int k = 0; k < nkinds; k++) {
                void *want = xmalloc(first[p] * red_kinds[k].es);
                reference((red_kind_t) k, p, want, first[p]);
                for (int a = 0; a < NRS; a++) {
                    for (int in_place = 0; in_place < 2 && (algos >> a & 1); in_place++) {
                        check_rs(a, p, (red_kind_t) k, counts, first, want, in_place, cdesc);
                    }
                }
                free(want);
            }
            free(counts);
        }
    }
    free(first);
}

START_TEST(reduce_scatter_small_p)
{
    const size_t bases[] = { 0, 1, 37, 1001 };
    /* The large odd base only where it stays cheap. */
    check_rs_all(_i, bases, _i <= 16 ? 4 : 3, RED_NKINDS_NO_FLT, ~0u);
}
END_TEST

START_TEST(reduce_scatter_big_p)
{
    const int p = big_p[_i];
    const size_t bases[] = { 0, 1, 37 };
    if (p >= 1000) {
        /* One small base, not pairwise: it posts a
         * million messages, seconds each on the simulator's unmatched list. */
        const size_t one[] = { 3 };
        check_rs_all(p, one, 1, 1, 1u | 4u | 8u);
    } else {
        check_rs_all(p, bases, 3, RED_DBL_MAX + 1, ~0u);
    }
}
END_TEST

/* Float sums, bit for bit against the order each algorithm documents:
 *   recursive_halving: fold (even + odd), then the halving tree, lower
 *     participant's partial on the left: w[i] = w[i] + w[i+m], m = p'/2..1;
 *   pairwise: ((x_r + x_{r-1}) + x_{r-2}) + ... + x_{r+1} on owner r;
 *   nhr: windows m = p, ceil(p/2), ..., 2, h = ceil(m/2): relative block
 *     j < m - h of rank q becomes (q's j) + (q-h's j+h), own on the left;
 *   nb: strides d = 1, 2, 4, ...: relative block j (a multiple of 2d) of
 *     rank q becomes (q's j) + (q-d's j+d) where j+d < p, own on the left. */
static float rh_float_ref(int p, size_t e)
{
    int p2 = 1;
    while (2 * p2 <= p) {
        p2 *= 2;
    }
    const int rem = p - p2;
    float *w = xmalloc((size_t) p2 * sizeof(float));
    for (int q = 0; q < p2; q++) {
        w[q] = q < rem ? float_input(2 * q, e) + float_input(2 * q + 1, e) : float_input(q + rem, e);
    }
    for (int m = p2 / 2; m > 0; m /= 2) {
        for (int i = 0; i < m; i++) {
            w[i] = w[i] + w[i + m];
        }
    }
    float v = w[0];
    free(w);
    return v;
}

static float pairwise_float_ref(int p, int owner, size_t e)
{
    float acc = float_input(owner, e);
    for (int k = 1; k < p; k++) {
        acc = acc + float_input(((owner - k) % p + p) % p, e);
    }
    return acc;
}

/* nhr's value of rank q's relative block j (block q + j) after the first
 * i of the n windows win[], element e of the vector. */
static float nhr_float_val(int p, const int *win, int i, int q, int j, size_t e)
{
    if (0 == i) {
        return float_input(q, e);
    }
    const int m = win[i - 1], h = (m + 1) / 2;
    const float own = nhr_float_val(p, win, i - 1, q, j, e);
    return j < m - h ? own + nhr_float_val(p, win, i - 1, ((q - h) % p + p) % p, j + h, e) : own;
}

static float nhr_float_ref(int p, int owner, size_t e)
{
    int win[32], n = 0;
    for (int m = p; m > 1; m = (m + 1) / 2) {
        win[n++] = m;
    }
    return nhr_float_val(p, win, n, owner, 0, e);
}

/* nb's value of rank q's relative block j after the strides below d. */
static float nb_float_val(int p, int d, int q, int j, size_t e)
{
    if (1 == d) {
        return float_input(q, e);
    }
    const int h = d / 2;
    const float own = nb_float_val(p, h, q, j, e);
    return j + h < p ? own + nb_float_val(p, h, ((q - h) % p + p) % p, j + h, e) : own;
}

static float nb_float_ref(int p, int owner, size_t e)
{
    int d = 1;
    while (d < p) {
        d *= 2;
    }
    return nb_float_val(p, d, owner, 0, e);
}

static void check_rs_float(int p)
{
    xccl_reduce_fn_t fn = xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM);
    size_t *first = xmalloc(((size_t) p + 1) * sizeof(size_t));
    size_t *counts = make_counts(p, CNT_IRREGULAR, 23, first);
    const size_t total = first[p];
    float *want = xmalloc(total * sizeof(float));
    int order_matters = 0;

    for (int a = 0; a < NRS; a++) {
        for (size_t e = 0, owner = 0; e < total; e++) {
            while (e >= first[owner + 1]) {
                owner++;
            }
            want[e] = 0 == a ? rh_float_ref(p, e)
                      : 1 == a ? pairwise_float_ref(p, (int) owner, e)
                      : 2 == a ? nhr_float_ref(p, (int) owner, e) : nb_float_ref(p, (int) owner, e);
            if (0 != a && want[e] != rh_float_ref(p, e)) {
                order_matters = 1;
            }
        }
        for (int in_place = 0; in_place < 2; in_place++) {
            char what[128];
            job_t j;
            int bad_build = 0, bad_rank = -1;
            snprintf(what, sizeof(what), "float sum reduce_scatter %s p=%d in_place=%d", rs_algos[a].name,
                     p, in_place);
            job_init(&j, p, sizeof(float));
            for (int r = 0; r < p; r++) {
                bad_build |= 0 != rs_algos[a].build(&j.sched[r], counts, in_place);
                j.rbuf[r] = xmalloc((in_place ? total : counts[r]) * sizeof(float));
                j.sbuf[r] = in_place ? j.rbuf[r] : job_sbuf(&j, r, total * sizeof(float));
                for (size_t e = 0; e < total; e++) {
                    ((float *) j.sbuf[r])[e] = float_input(r, e);
                }
            }
            ck_assert_msg(!bad_build, "%s: build failed", what);
            job_run(&j, fn, what);
            for (int r = 0; r < p && bad_rank < 0; r++) {
                if (0 != memcmp(j.rbuf[r], want + first[r], counts[r] * sizeof(float))) {
                    bad_rank = r;
                }
            }
            ck_assert_msg(bad_rank < 0, "%s: rank %d differs from the documented order", what, bad_rank);
            job_fini(&j);
        }
    }
    /* The data must be able to tell the orders apart. */
    if (p >= 8) {
        ck_assert_msg(order_matters, "p=%d: float inputs do not depend on the order", p);
    }
    free(want);
    free(counts);
    free(first);
}

START_TEST(reduce_scatter_float_order)
{
    check_rs_float(_i);
}
END_TEST

START_TEST(reduce_scatter_float_order_big_p)
{
    check_rs_float(big_p[_i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allgather                                                                */
/* ------------------------------------------------------------------------ */

typedef int (*ag_builder_t)(xccl_sched_t *s, size_t block);

static const struct {
    const char *name;
    ag_builder_t build;
} ag_algos[] = {
    { "recursive_doubling", xccl_build_allgather_recursive_doubling },
    { "bruck", xccl_build_allgather_bruck },
    { "nhr", xccl_build_allgather_nhr },
    { "nb", xccl_build_allgather_nb },
};
#define NAG ((int) (sizeof(ag_algos) / sizeof(ag_algos[0])))

static void check_allgather(int a, int p, size_t b, int in_place)
{
    const size_t total = (size_t) p * b;
    char what[128];
    job_t j;
    int bad_build = 0;

    snprintf(what, sizeof(what), "allgather %s p=%d block=%zu in_place=%d", ag_algos[a].name, p, b,
             in_place);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        bad_build |= 0 != ag_algos[a].build(&j.sched[r], b);
        bad_build |= 0 != strcmp(j.sched[r].algo, ag_algos[a].name);
        j.rbuf[r] = xmalloc(total);
        memset(j.rbuf[r], 0xEE, total);
        j.sbuf[r] = in_place ? j.rbuf[r] + (size_t) r * b : job_sbuf(&j, r, b);
        for (size_t i = 0; i < b; i++) {
            j.sbuf[r][i] = ag_pattern(r, i);
        }
    }
    ck_assert_msg(!bad_build, "%s: build failed or wrong name", what);
    job_run(&j, NULL, what);
    long bad = -1;
    int bad_rank = -1;
    for (int r = 0; r < p && bad < 0; r++) {
        for (size_t x = 0; x < total && bad < 0; x++) {
            if (j.rbuf[r][x] != ag_pattern((int) (x / b), x % b)) {
                bad = (long) x;
            }
        }
        /* The input survives (not in place). */
        for (size_t i = 0; i < b && bad < 0 && !in_place; i++) {
            if (j.sbuf[r][i] != ag_pattern(r, i)) {
                bad = (long) (total + i);
            }
        }
        bad_rank = r;
    }
    ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong (>= %zu: input changed)", what, bad_rank, bad,
                  total);
    job_fini(&j);
}

START_TEST(allgather_small_p)
{
    const size_t blocks[] = { 0, 1, 3, 37, 1001 };
    for (int a = 0; a < NAG; a++) {
        for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                check_allgather(a, _i, blocks[bi], in_place);
            }
        }
    }
}
END_TEST

START_TEST(allgather_big_p)
{
    const int p = big_p[_i];
    const size_t blocks[] = { 0, 1, 3, 37 };
    for (int a = 0; a < NAG; a++) {
        for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                check_allgather(a, p, blocks[bi], in_place);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Textbook shapes                                                          */
/* ------------------------------------------------------------------------ */

START_TEST(reduce_scatter_structure)
{
    const size_t c = 10, es = 4, n = 8 * c * es;
    size_t counts[8];
    for (int r = 0; r < 8; r++) {
        counts[r] = c;
    }
    for (int r = 0; r < 8; r++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            xccl_sched_t s;
            tally_t t;
            /* Recursive halving, p = 8: 3 rounds, halves of 4, 2, 1 blocks. */
            xccl_sched_init(&s, r, 8, es);
            ck_assert_int_eq(xccl_build_reduce_scatter_recursive_halving(&s, counts, in_place), 0);
            t = tally(&s);
            ck_assert_uint_eq(s.rounds, 3);
            ck_assert_uint_eq(s.max_xfers, 2);
            ck_assert(t.one_each_way);
            ck_assert_uint_eq(t.sends, 3);
            ck_assert_uint_eq(t.sent, n / 2 + n / 4 + n / 8);
            ck_assert_uint_eq(t.received, n / 2 + n / 4 + n / 8);
            ck_assert_uint_eq(t.reduced, n / 2 + n / 4 + n / 8);
            ck_assert_uint_eq(t.copies, 0);
            ck_assert_uint_eq(s.scratch_bytes, n / 2 + n / 4);
            xccl_sched_fini(&s);

            /* Pairwise, p = 8: 7 rounds of one block each way, no copies. */
            xccl_sched_init(&s, r, 8, es);
            ck_assert_int_eq(xccl_build_reduce_scatter_pairwise(&s, counts, in_place), 0);
            t = tally(&s);
            ck_assert_uint_eq(s.rounds, 7);
            ck_assert(t.one_each_way);
            ck_assert_uint_eq(t.sends, 7);
            ck_assert_uint_eq(t.sent, 7 * c * es);
            ck_assert_uint_eq(t.reduced, 7 * c * es);
            ck_assert_uint_eq(t.copies, 0);
            ck_assert_uint_eq(s.scratch_bytes, (in_place ? 2 : 1) * c * es);
            xccl_sched_fini(&s);
        }
    }
    /* p = 6 halving: pairs (0,1), (2,3) fold; 1 and 3 only send their
     * input and get their block, 0 and 2 take two extra rounds. */
    for (int r = 0; r < 6; r++) {
        xccl_sched_t s;
        xccl_sched_init(&s, r, 6, es);
        ck_assert_int_eq(xccl_build_reduce_scatter_recursive_halving(&s, counts, 0), 0);
        tally_t t = tally(&s);
        ck_assert_uint_eq(s.rounds, r < 4 ? (r & 1 ? 2 : 4) : 2);
        if (r < 4 && (r & 1)) {
            ck_assert_uint_eq(t.sent, 6 * c * es);
            ck_assert_uint_eq(t.received, c * es);
            ck_assert_uint_eq(s.scratch_bytes, 0);
        }
        xccl_sched_fini(&s);
    }
}
END_TEST

START_TEST(allgather_structure)
{
    const size_t b = 10;
    for (int r = 0; r < 8; r++) {
        xccl_sched_t s;
        tally_t t;
        /* Bruck, p = 8: 3 rounds of one send and one receive; 1, 2, 4 blocks. */
        xccl_sched_init(&s, r, 8, 1);
        ck_assert_int_eq(xccl_build_allgather_bruck(&s, b), 0);
        t = tally(&s);
        ck_assert_uint_eq(s.rounds, 3);
        ck_assert_uint_eq(s.max_xfers, 2);
        ck_assert(t.one_each_way);
        ck_assert_uint_eq(t.sends, 3);
        ck_assert_uint_eq(t.recvs, 3);
        ck_assert_uint_eq(t.sent, 7 * b);
        ck_assert_uint_eq(t.received, 7 * b);
        ck_assert_uint_eq(s.scratch_bytes, 8 * b);
        xccl_sched_fini(&s);

        /* Recursive doubling, p = 8: the same, straight into RECV. */
        xccl_sched_init(&s, r, 8, 1);
        ck_assert_int_eq(xccl_build_allgather_recursive_doubling(&s, b), 0);
        t = tally(&s);
        ck_assert_uint_eq(s.rounds, 3);
        ck_assert(t.one_each_way);
        ck_assert_uint_eq(t.sends, 3);
        ck_assert_uint_eq(t.sent, 7 * b);
        ck_assert_uint_eq(t.received, 7 * b);
        ck_assert_uint_eq(s.scratch_bytes, 0);
        xccl_sched_fini(&s);
    }
    /* p = 5: Bruck needs ceil(lg 5) = 3 rounds, the last one carries one
     * block; doubling folds (0,1) in and out around its 2 rounds. */
    for (int r = 0; r < 5; r++) {
        xccl_sched_t s;
        xccl_sched_init(&s, r, 5, 1);
        ck_assert_int_eq(xccl_build_allgather_bruck(&s, b), 0);
        tally_t t = tally(&s);
        ck_assert_uint_eq(s.rounds, 3);
        ck_assert_uint_eq(t.sent, 4 * b);
        xccl_sched_fini(&s);

        xccl_sched_init(&s, r, 5, 1);
        ck_assert_int_eq(xccl_build_allgather_recursive_doubling(&s, b), 0);
        ck_assert_uint_eq(s.rounds, 1 == r ? 2 : 0 == r ? 4 : 2);
        xccl_sched_fini(&s);
    }
    /* nhr and nb at any p: ceil(lg p) rounds (nhr's windows 2, 3, 5, 10,
     * 20, ... up to p; nb's strides p/2 .. 1), (p-1) blocks each way, one
     * message per step but where a range is cut in two (nhr: the last
     * step's, past block p-1; nb: around a missing block); SCRATCH at most
     * half the blocks (nhr), all of them (nb). */
    static const int nps[] = { 2, 3, 5, 8, 20, 100, 1000 };
    for (size_t i = 0; i < sizeof(nps) / sizeof(nps[0]); i++) {
        const int p = nps[i];
        int lg = 0;
        while ((1 << lg) < p) {
            lg++;
        }
        for (int r = 0; r < p; r += p > 8 ? p / 7 : 1) {
            for (int nb = 0; nb < 2; nb++) {
                xccl_sched_t s;
                xccl_sched_init(&s, r, p, 1);
                ck_assert_int_eq((nb ? xccl_build_allgather_nb : xccl_build_allgather_nhr)(&s, b), 0);
                const tally_t t = tally(&s);
                ck_assert_uint_eq(s.rounds, (size_t) lg);
                ck_assert_msg(t.sent == (size_t) (p - 1) * b && t.received == t.sent, "%s p=%d rank %d: %zu, %zu",
                              s.algo, p, r, t.sent, t.received);
                ck_assert_uint_le(t.sends, nb ? 2 * (size_t) lg : (size_t) lg + 1);
                ck_assert_uint_le(s.scratch_bytes, (size_t) (nb ? p : (p + 1) / 2) * b);
                xccl_sched_fini(&s);
            }
        }
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("rs_ag_algos");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, reduce_scatter_small_p, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, reduce_scatter_big_p, 0, NBIG);
    tcase_add_loop_test(tc, reduce_scatter_float_order, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, reduce_scatter_float_order_big_p, 0, NBIG - 1);
    tcase_add_loop_test(tc, allgather_small_p, 1, SMALL_P + 1);
    tcase_add_loop_test(tc, allgather_big_p, 0, NBIG);
    tcase_add_test(tc, reduce_scatter_structure);
    tcase_add_test(tc, allgather_structure);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
