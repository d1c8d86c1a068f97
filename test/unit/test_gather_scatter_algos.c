/*
 * Gather, gatherv, scatter and scatterv, and the v forms allgatherv and
 * alltoallv, on the simulated transport, every algorithm of their catalog
 * rows (xccl_coll_algos) with the arguments the component hands them
 * (xccl_coll_args_t; the v forms' counts and displacements in vec):
 * p = 1..17, 32, 33 and 64, every root up to 17 ranks, blocks of 0, 1, 7
 * and 4096 bytes, in place and not.  Buffers a convention says are not
 * referenced are NULL (gather: RECV off the root, the root's SEND in
 * place; scatter: SEND off the root, the root's RECV in place).  The v
 * forms: uneven counts with zeros, one rank with everything, all zero;
 * blocks in rank order, permuted with gaps of guard bytes that must stay
 * untouched, permuted back to back; off the root the counts and
 * displacements of the other ranks are wrong on purpose (only
 * bytes[rank] may be read).  Results against references the test
 * computes; inputs must survive.  The same through the shared-memory
 * forms ("shm") with a node segment of 4 and 64 KiB.  Then the textbook
 * shapes of the binomial trees.
 *
 * Buffers have their exact size so that ASan catches a schedule that
 * strays past them; one assertion per buffer (Check is slow per byte).
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXEC_SEQ 19
#define SIM_SEED_SALT 41u
#include "sim_harness.h"
#include "xccl_build.h"
#include "xccl_catalog.h"
#include "xccl_select.h"

static const int sizes_p[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 32, 33, 64 };
#define NP ((int) (sizeof(sizes_p) / sizeof(sizes_p[0])))
#define ALL_ROOTS_P 17                 /* every root up to this p */

static const size_t blocks[] = { 0, 1, 7, 4096 };
#define NBLOCKS ((int) (sizeof(blocks) / sizeof(blocks[0])))

#define GUARD 0xEE                     /* gap and not-yet-written bytes */
#define SEND_GUARD 0xDD                /* gaps of a v form's SEND */

/* ------------------------------------------------------------------------ */
/* Jobs through the catalog                                                 */
/* ------------------------------------------------------------------------ */

/* The node segment's slot the builders see (xccl_coll_args_t.shm_slot):
 * 0, where the shared-memory forms ("shm") are not applicable, or the
 * slot of the shm_forms cases, which run those forms alone (only_shm). */
static size_t slot_cap;
static int only_shm;

static int wanted(const xccl_algo_t *al)
{
    return !only_shm || 0 == strcmp(al->name, "shm");
}

/* Builds rank r's schedule with entry al and args[r] on every rank.
 * Returns 1, or 0 where every rank's builder says XCCL_NOT_APPLICABLE
 * (the ranks must agree). */
static int build_job(job_t *j, const xccl_algo_t *al, const xccl_coll_args_t *args, const char *what)
{
    int na = 0;
    for (int r = 0; r < j->p; r++) {
        const int rc = al->build(&j->sched[r], &args[r]);
        ck_assert_msg(0 == rc || XCCL_NOT_APPLICABLE == rc, "%s: rank %d: build returned %d", what, r, rc);
        if (0 == rc) {
            ck_assert_msg(0 == strcmp(j->sched[r].algo, al->name), "%s: rank %d built %s", what, r,
                          j->sched[r].algo);
        }
        na += XCCL_NOT_APPLICABLE == rc;
    }
    ck_assert_msg(0 == na || j->p == na, "%s: only some ranks not applicable", what);
    return 0 == na;
}

/* Runs the job under a seed of the case's own. */
static void run_job(job_t *j, unsigned salt, const char *what)
{
    char err[256];
    const unsigned seed = (unsigned) j->p * 2654435761u + salt * 40503u + SIM_SEED_SALT;
    ck_assert_msg(0 == job_exec(j, NULL, seed, what, err, sizeof(err)), "%s: %s", what, err);
}

static const xccl_algo_t *row(xccl_coll_t c, int *n)
{
    const xccl_algo_t *list = xccl_coll_algos(c, n);
    ck_assert_msg(*n > 0, "collective %d: empty catalog row", (int) c);
    return list;
}

/* The first byte where x and y differ, or -1. */
static long first_diff(const unsigned char *x, const unsigned char *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            return (long) i;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Gather and scatter                                                       */
/* ------------------------------------------------------------------------ */

/* Byte i of rank q's block (gather: its input; scatter: what it gets). */
static unsigned char blk(int q, int root, size_t i)
{
    return pattern(q, root, i);
}

static void fill_block(unsigned char *b, int q, int root, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        b[i] = blk(q, root, i);
    }
}

/* 0 where rank q's block of n bytes is at b. */
static long check_block(const unsigned char *b, int q, int root, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i] != blk(q, root, i)) {
            return (long) i;
        }
    }
    return -1;
}

static void check_gather(const xccl_algo_t *al, int p, size_t block, int root, int in_place)
{
    if (!wanted(al)) {
        return;
    }
    char what[160];
    job_t j;
    xccl_coll_args_t *args = xmalloc((size_t) p * sizeof(*args));
    snprintf(what, sizeof(what), "gather %s p=%d block=%zu root=%d in_place=%d", al->name, p, block, root,
             in_place);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        memset(&args[r], 0, sizeof(args[r]));
        args[r].shm_slot = slot_cap;
        args[r].block = block;
        args[r].root = root;
        args[r].in_place = r == root && in_place;
        if (r == root) {
            j.rbuf[r] = xmalloc((size_t) p * block);
            memset(j.rbuf[r], GUARD, (size_t) p * block);
        }
        if (r == root && in_place) {
            fill_block(j.rbuf[r] + (size_t) r * block, r, root, block);
        } else {
            j.sbuf[r] = job_sbuf(&j, r, block);
            fill_block(j.sbuf[r], r, root, block);
        }
    }
    if (!build_job(&j, al, args, what)) {
        job_fini(&j);
        free(args);
        return;
    }
    run_job(&j, (unsigned) (block * 7 + (size_t) root * 3 + (size_t) in_place), what);
    for (int q = 0; q < p; q++) {
        const long bad = check_block(j.rbuf[root] + (size_t) q * block, q, root, block);
        ck_assert_msg(bad < 0, "%s: block of rank %d byte %ld wrong", what, q, bad);
    }
    for (int r = 0; r < p; r++) {
        if (j.sbuf[r]) {
            const long bad = check_block(j.sbuf[r], r, root, block);
            ck_assert_msg(bad < 0, "%s: rank %d input changed at byte %ld", what, r, bad);
        }
    }
    job_fini(&j);
    free(args);
}

static void check_scatter(const xccl_algo_t *al, int p, size_t block, int root, int in_place)
{
    if (!wanted(al)) {
        return;
    }
    char what[160];
    job_t j;
    xccl_coll_args_t *args = xmalloc((size_t) p * sizeof(*args));
    snprintf(what, sizeof(what), "scatter %s p=%d block=%zu root=%d in_place=%d", al->name, p, block, root,
             in_place);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        memset(&args[r], 0, sizeof(args[r]));
        args[r].shm_slot = slot_cap;
        args[r].block = block;
        args[r].root = root;
        args[r].in_place = r == root && in_place;
        if (r == root) {
            j.sbuf[r] = job_sbuf(&j, r, (size_t) p * block);
            for (int q = 0; q < p; q++) {
                fill_block(j.sbuf[r] + (size_t) q * block, q, root, block);
            }
        }
        if (!(r == root && in_place)) {
            j.rbuf[r] = xmalloc(block);
            memset(j.rbuf[r], GUARD, block);
        }
    }
    if (!build_job(&j, al, args, what)) {
        job_fini(&j);
        free(args);
        return;
    }
    run_job(&j, (unsigned) (block * 5 + (size_t) root * 11 + (size_t) in_place), what);
    for (int r = 0; r < p; r++) {
        if (j.rbuf[r]) {
            const long bad = check_block(j.rbuf[r], r, root, block);
            ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong", what, r, bad);
        }
    }
    for (int q = 0; q < p; q++) {
        const long bad = check_block(j.sbuf[root] + (size_t) q * block, q, root, block);
        ck_assert_msg(bad < 0, "%s: root's input changed in block %d byte %ld", what, q, bad);
    }
    job_fini(&j);
    free(args);
}

static void sweep_gather_scatter(int p)
{
    int roots[ALL_ROOTS_P > 5 ? ALL_ROOTS_P : 5], nga, nsc;
    const int nroots = pick_roots(p, ALL_ROOTS_P, roots);
    const xccl_algo_t *ga = row(XCCL_COLL_GATHER, &nga), *sc = row(XCCL_COLL_SCATTER, &nsc);
    for (int ri = 0; ri < nroots; ri++) {
        for (int bi = 0; bi < NBLOCKS; bi++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                for (int a = 0; a < nga; a++) {
                    check_gather(&ga[a], p, blocks[bi], roots[ri], in_place);
                }
                for (int a = 0; a < nsc; a++) {
                    check_scatter(&sc[a], p, blocks[bi], roots[ri], in_place);
                }
            }
        }
    }
}
START_TEST(gather_scatter)
{
    sweep_gather_scatter(sizes_p[_i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The v forms' counts and displacements                                    */
/* ------------------------------------------------------------------------ */

enum { CNT_UNEVEN, CNT_ONE, CNT_ZERO, NCNT };
enum { PLACE_RANK_ORDER, PLACE_PERMUTED_GAPS, PLACE_PERMUTED_TIGHT, NPLACE };

/* Counts of kind k for p ranks: uneven, zeros among them (odd sizes of
 * around unit bytes); everything on rank one (p / 2); nothing at all. */
static void make_counts(int k, int p, size_t unit, int one, size_t *c)
{
    for (int i = 0; i < p; i++) {
        const size_t v = (size_t) ((i * 7 + 3) % 5);
        switch (k) {
        case CNT_UNEVEN: c[i] = v * unit + (v ? (size_t) (i % 3) : 0); break;
        case CNT_ONE: c[i] = i == one ? unit * (size_t) p + 4099 : 0; break;
        default: c[i] = 0; break;
        }
    }
}

/* Displacements of the blocks c[0..p) placed as kind k says (seed varies
 * the permutation); returns the span, gaps included. */
static size_t place_blocks(int k, int p, const size_t *c, unsigned seed, size_t *d)
{
    size_t off = PLACE_PERMUTED_GAPS == k ? 3 : 0;
    /* Permuted: i -> (i * m + seed) mod p for an m coprime to p, near
     * p / 2 so that neighbours land far apart. */
    int m = 1;
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

/* What a rank off the root gets: its own count right, every other count
 * and every displacement wrong (only bytes[rank] may be read). */
static void spoil_off_root(int p, int rank, const size_t *c, const size_t *d, size_t *vec)
{
    for (int i = 0; i < p; i++) {
        vec[i] = i == rank ? c[i] : c[i] + 1 + (size_t) (i % 3);
        vec[p + i] = d[i] + 5 + (size_t) i;
    }
}

/* The expected buffer of span bytes: guard everywhere, block q (rank q's
 * bytes from bytefn) at d[q]. */
static unsigned char *expect_blocks(int p, const size_t *c, const size_t *d, size_t span, int guard,
                                    unsigned char (*bytefn)(int q, int other, size_t i), int other)
{
    unsigned char *e = xmalloc(span);
    memset(e, guard, span);
    for (int q = 0; q < p; q++) {
        for (size_t i = 0; i < c[q]; i++) {
            e[d[q] + i] = bytefn(q, other, i);
        }
    }
    return e;
}

/* Byte i of what rank from sends to rank to. */
static unsigned char from_to(int from, int to, size_t i)
{
    return pattern(from, to, i);
}

/* Byte i of what rank to gets from the root (scatterv): from_to(root, to). */
static unsigned char root_to(int to, int root, size_t i)
{
    return pattern(root, to, i);
}

typedef struct {
    int p, cnt, place, root, in_place;
    size_t unit;
} vcase_t;

static void vcase_what(char *what, size_t n, const char *coll, const char *algo, const vcase_t *v)
{
    snprintf(what, n, "%s %s p=%d counts=%d place=%d unit=%zu root=%d in_place=%d", coll, algo, v->p, v->cnt,
             v->place, v->unit, v->root, v->in_place);
}

static unsigned vcase_salt(const vcase_t *v)
{
    return (unsigned) (v->cnt * 131 + v->place * 17 + v->root * 5 + v->in_place) + (unsigned) v->unit;
}

/* ------------------------------------------------------------------------ */
/* Gatherv and scatterv                                                     */
/* ------------------------------------------------------------------------ */

static void check_gatherv(const xccl_algo_t *al, const vcase_t *v)
{
    if (!wanted(al)) {
        return;
    }
    const int p = v->p, root = v->root;
    char what[200];
    job_t j;
    size_t *c = xmalloc((size_t) p * sizeof(size_t)), *d = xmalloc((size_t) p * sizeof(size_t));
    size_t *vec = xmalloc((size_t) p * 2 * p * sizeof(size_t));
    xccl_coll_args_t *args = xmalloc((size_t) p * sizeof(*args));
    vcase_what(what, sizeof(what), "gatherv", al->name, v);
    make_counts(v->cnt, p, v->unit, p / 2, c);
    const size_t span = place_blocks(v->place, p, c, (unsigned) root, d);
    unsigned char *expect = expect_blocks(p, c, d, span, GUARD, from_to, root);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        size_t *rv = vec + (size_t) r * 2 * p;
        if (r == root) {
            memcpy(rv, c, (size_t) p * sizeof(size_t));
            memcpy(rv + p, d, (size_t) p * sizeof(size_t));
        } else {
            spoil_off_root(p, r, c, d, rv);
        }
        memset(&args[r], 0, sizeof(args[r]));
        args[r].shm_slot = slot_cap;
        args[r].root = root;
        args[r].in_place = r == root && v->in_place;
        args[r].vec = rv;
        args[r].nvec = 2 * (size_t) p;
        if (r == root) {
            j.rbuf[r] = xmalloc(span);
            memset(j.rbuf[r], GUARD, span);
        }
        if (r == root && v->in_place) {
            memcpy(j.rbuf[r] + d[r], expect + d[r], c[r]);
        } else {
            j.sbuf[r] = job_sbuf(&j, r, c[r]);
            memcpy(j.sbuf[r], expect + d[r], c[r]);
        }
    }
    if (build_job(&j, al, args, what)) {
        run_job(&j, vcase_salt(v), what);
        long bad = first_diff(j.rbuf[root], expect, span);
        ck_assert_msg(bad < 0, "%s: root's byte %ld wrong (guard %s)", what, bad,
                      bad >= 0 && expect[bad] == GUARD ? "overwritten" : "intact");
        for (int r = 0; r < p; r++) {
            if (j.sbuf[r]) {
                bad = first_diff(j.sbuf[r], expect + d[r], c[r]);
                ck_assert_msg(bad < 0, "%s: rank %d input changed at byte %ld", what, r, bad);
            }
        }
    }
    job_fini(&j);
    free(expect);
    free(args);
    free(vec);
    free(c);
    free(d);
}

static void check_scatterv(const xccl_algo_t *al, const vcase_t *v)
{
    if (!wanted(al)) {
        return;
    }
    const int p = v->p, root = v->root;
    char what[200];
    job_t j;
    size_t *c = xmalloc((size_t) p * sizeof(size_t)), *d = xmalloc((size_t) p * sizeof(size_t));
    size_t *vec = xmalloc((size_t) p * 2 * p * sizeof(size_t));
    xccl_coll_args_t *args = xmalloc((size_t) p * sizeof(*args));
    vcase_what(what, sizeof(what), "scatterv", al->name, v);
    make_counts(v->cnt, p, v->unit, p / 2, c);
    const size_t span = place_blocks(v->place, p, c, (unsigned) root + 1, d);
    unsigned char *input = expect_blocks(p, c, d, span, SEND_GUARD, root_to, root);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        size_t *rv = vec + (size_t) r * 2 * p;
        if (r == root) {
            memcpy(rv, c, (size_t) p * sizeof(size_t));
            memcpy(rv + p, d, (size_t) p * sizeof(size_t));
            j.sbuf[r] = job_sbuf(&j, r, span);
            memcpy(j.sbuf[r], input, span);
        } else {
            spoil_off_root(p, r, c, d, rv);
        }
        memset(&args[r], 0, sizeof(args[r]));
        args[r].shm_slot = slot_cap;
        args[r].root = root;
        args[r].in_place = r == root && v->in_place;
        args[r].vec = rv;
        args[r].nvec = 2 * (size_t) p;
        if (!(r == root && v->in_place)) {
            j.rbuf[r] = xmalloc(c[r]);
            memset(j.rbuf[r], GUARD, c[r]);
        }
    }
    if (build_job(&j, al, args, what)) {
        run_job(&j, vcase_salt(v), what);
        for (int r = 0; r < p; r++) {
            if (j.rbuf[r]) {
                const long bad = first_diff(j.rbuf[r], input + d[r], c[r]);
                ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong", what, r, bad);
            }
        }
        const long bad = first_diff(j.sbuf[root], input, span);
        ck_assert_msg(bad < 0, "%s: root's input changed at byte %ld", what, bad);
    }
    job_fini(&j);
    free(input);
    free(args);
    free(vec);
    free(c);
    free(d);
}

static void sweep_gatherv_scatterv(int p)
{
    int roots[ALL_ROOTS_P > 5 ? ALL_ROOTS_P : 5], ngv, nsv;
    const int nroots = pick_roots(p, ALL_ROOTS_P, roots);
    const xccl_algo_t *gv = row(XCCL_COLL_GATHERV, &ngv), *sv = row(XCCL_COLL_SCATTERV, &nsv);
    const size_t units[] = { 1, 29 };
    for (int ri = 0; ri < nroots; ri++) {
        for (int cnt = 0; cnt < NCNT; cnt++) {
            for (int place = 0; place < NPLACE; place++) {
                for (int ui = 0; ui < 2; ui++) {
                    for (int in_place = 0; in_place < 2; in_place++) {
                        const vcase_t v = { p, cnt, place, roots[ri], in_place, units[ui] };
                        for (int a = 0; a < ngv; a++) {
                            check_gatherv(&gv[a], &v);
                        }
                        for (int a = 0; a < nsv; a++) {
                            check_scatterv(&sv[a], &v);
                        }
                    }
                }
            }
        }
    }
}
START_TEST(gatherv_scatterv)
{
    sweep_gatherv_scatterv(sizes_p[_i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allgatherv and alltoallv                                                 */
/* ------------------------------------------------------------------------ */

static void check_allgatherv(const xccl_algo_t *al, const vcase_t *v)
{
    if (!wanted(al)) {
        return;
    }
    const int p = v->p;
    char what[200];
    job_t j;
    size_t *vec = xmalloc((size_t) p * 2 * sizeof(size_t));
    size_t *c = vec, *d = vec + p;
    xccl_coll_args_t *args = xmalloc((size_t) p * sizeof(*args));
    vcase_what(what, sizeof(what), "allgatherv", al->name, v);
    make_counts(v->cnt, p, v->unit, p - 1, c);
    const size_t span = place_blocks(v->place, p, c, (unsigned) p / 3, d);
    unsigned char *expect = expect_blocks(p, c, d, span, GUARD, from_to, p);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        memset(&args[r], 0, sizeof(args[r]));
        args[r].shm_slot = slot_cap;
        args[r].in_place = v->in_place;
        args[r].vec = vec;
        args[r].nvec = 2 * (size_t) p;
        j.rbuf[r] = xmalloc(span);
        memset(j.rbuf[r], GUARD, span);
        if (v->in_place) {
            memcpy(j.rbuf[r] + d[r], expect + d[r], c[r]);
        } else {
            j.sbuf[r] = job_sbuf(&j, r, c[r]);
            memcpy(j.sbuf[r], expect + d[r], c[r]);
        }
    }
    if (build_job(&j, al, args, what)) {
        run_job(&j, vcase_salt(v), what);
        for (int r = 0; r < p; r++) {
            long bad = first_diff(j.rbuf[r], expect, span);
            ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong (guard %s)", what, r, bad,
                          bad >= 0 && expect[bad] == GUARD ? "overwritten" : "intact");
            if (j.sbuf[r]) {
                bad = first_diff(j.sbuf[r], expect + d[r], c[r]);
                ck_assert_msg(bad < 0, "%s: rank %d input changed at byte %ld", what, r, bad);
            }
        }
    }
    job_fini(&j);
    free(expect);
    free(args);
    free(vec);
}

/* Bytes rank f sends to rank t, for count kind k: uneven with zeros,
 * rank one sends everything (only its row), rank one receives
 * everything (only its column: CNT_NCNT), nothing. */
#define CNT_COLUMN NCNT
static size_t a2a_count(int k, int f, int t, size_t unit, int one)
{
    const size_t v = (size_t) ((f * 5 + t * 3 + 1) % 6);
    switch (k) {
    case CNT_UNEVEN: return v < 2 ? 0 : v * unit + (size_t) ((f + t) % 3);
    case CNT_ONE: return f == one ? unit * 3 + 1 + (size_t) t : 0;
    case CNT_COLUMN: return t == one ? unit * 3 + 2 + (size_t) f : 0;
    default: return 0;
    }
}

static void check_alltoallv(const xccl_algo_t *al, const vcase_t *v)
{
    if (!wanted(al)) {
        return;
    }
    const int p = v->p, one = p / 2;
    char what[200];
    job_t j;
    size_t *vec = xmalloc((size_t) p * 4 * p * sizeof(size_t));
    size_t *sspan = xmalloc((size_t) p * sizeof(size_t)), *rspan = xmalloc((size_t) p * sizeof(size_t));
    unsigned char **sin = xmalloc((size_t) p * sizeof(*sin)), **rexp = xmalloc((size_t) p * sizeof(*rexp));
    xccl_coll_args_t *args = xmalloc((size_t) p * sizeof(*args));
    vcase_what(what, sizeof(what), "alltoallv", al->name, v);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        size_t *sb = vec + (size_t) r * 4 * p, *sd = sb + p, *rb = sb + 2 * p, *rd = sb + 3 * p;
        for (int q = 0; q < p; q++) {
            sb[q] = a2a_count(v->cnt, r, q, v->unit, one);
            rb[q] = a2a_count(v->cnt, q, r, v->unit, one);
        }
        /* Send and receive blocks each in an order of their own. */
        sspan[r] = place_blocks(v->place, p, sb, (unsigned) r, sd);
        rspan[r] = place_blocks(v->place, p, rb, (unsigned) r * 3 + 1, rd);
        sin[r] = xmalloc(sspan[r]);
        memset(sin[r], SEND_GUARD, sspan[r]);
        for (int q = 0; q < p; q++) {
            for (size_t i = 0; i < sb[q]; i++) {
                sin[r][sd[q] + i] = pattern(r, q, i);
            }
        }
        rexp[r] = expect_blocks(p, rb, rd, rspan[r], GUARD, from_to, r);
        memset(&args[r], 0, sizeof(args[r]));
        args[r].shm_slot = slot_cap;
        args[r].vec = sb;
        args[r].nvec = 4 * (size_t) p;
        j.sbuf[r] = job_sbuf(&j, r, sspan[r]);
        memcpy(j.sbuf[r], sin[r], sspan[r]);
        j.rbuf[r] = xmalloc(rspan[r]);
        memset(j.rbuf[r], GUARD, rspan[r]);
    }
    if (build_job(&j, al, args, what)) {
        run_job(&j, vcase_salt(v), what);
        for (int r = 0; r < p; r++) {
            long bad = first_diff(j.rbuf[r], rexp[r], rspan[r]);
            ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong (guard %s)", what, r, bad,
                          bad >= 0 && rexp[r][bad] == GUARD ? "overwritten" : "intact");
            bad = first_diff(j.sbuf[r], sin[r], sspan[r]);
            ck_assert_msg(bad < 0, "%s: rank %d input changed at byte %ld", what, r, bad);
        }
    }
    job_fini(&j);
    for (int r = 0; r < p; r++) {
        free(sin[r]);
        free(rexp[r]);
    }
    free(sin);
    free(rexp);
    free(sspan);
    free(rspan);
    free(args);
    free(vec);
}

static void sweep_allgatherv_alltoallv(int p)
{
    int nag, na2a;
    const xccl_algo_t *ag = row(XCCL_COLL_ALLGATHERV, &nag), *a2a = row(XCCL_COLL_ALLTOALLV, &na2a);
    const size_t units[] = { 1, 29 };
    for (int place = 0; place < NPLACE; place++) {
        for (int ui = 0; ui < 2; ui++) {
            for (int cnt = 0; cnt < NCNT; cnt++) {
                for (int in_place = 0; in_place < 2; in_place++) {
                    const vcase_t v = { p, cnt, place, 0, in_place, units[ui] };
                    for (int a = 0; a < nag; a++) {
                        check_allgatherv(&ag[a], &v);
                    }
                }
            }
            for (int cnt = 0; cnt <= CNT_COLUMN; cnt++) {
                const vcase_t v = { p, cnt, place, 0, 0, units[ui] };
                for (int a = 0; a < na2a; a++) {
                    check_alltoallv(&a2a[a], &v);
                }
            }
        }
    }
}
START_TEST(allgatherv_alltoallv)
{
    sweep_allgatherv_alltoallv(sizes_p[_i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The shared-memory forms                                                  */
/* ------------------------------------------------------------------------ */

/* The "shm" entries of the six rows with a node segment: every sweep
 * above, at the ranks of shm_ps, in a slot of 4 KiB (blocks of 4096
 * bytes in many pieces) and of 64 KiB. */
static const int shm_ps[] = { 1, 2, 3, 4, 5, 7, 8, 9, 16, 17 };
#define NSHM_P ((int) (sizeof(shm_ps) / sizeof(shm_ps[0])))

START_TEST(shm_forms)
{
    only_shm = 1;
    for (slot_cap = 4096; slot_cap <= 65536; slot_cap *= 16) {
        sweep_gather_scatter(shm_ps[_i]);
        sweep_gatherv_scatterv(shm_ps[_i]);
        sweep_allgatherv_alltoallv(shm_ps[_i]);
    }
    only_shm = 0;
    slot_cap = 0;
}
END_TEST

/* Every row of the six has its shm entry, which a builder without a
 * segment refuses on every rank (the sweeps above skip it then). */
START_TEST(shm_rows)
{
    static const xccl_coll_t colls[] = { XCCL_COLL_GATHER, XCCL_COLL_GATHERV, XCCL_COLL_SCATTER,
                                         XCCL_COLL_SCATTERV, XCCL_COLL_ALLGATHERV, XCCL_COLL_ALLTOALLV };
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
        ck_assert_msg(xccl_select_index(colls[i], "shm") >= XCCL_SEL_FIRST, "%s: no shm entry",
                      xccl_coll_name(colls[i]));
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Textbook shapes                                                          */
/* ------------------------------------------------------------------------ */

/* Binomial gather and scatter at p = 16, root 0: the root exchanges lg p
 * messages, (p-1) blocks, in one step; relative rank 8 one message of its
 * 8 blocks with its parent and three with its children, through 8 blocks
 * of scratch; a leaf one block, no scratch.  Roots 5, 10, 15: at 5 the
 * subtree of relative rank 8 (ranks 13, 14, 15, 0, ..., 4) wraps, at 10
 * that of 4 (14, 15, 0, 1): two messages; at 15 none wraps. */
START_TEST(binomial_shape)
{
    const int p = 16;
    const size_t b = 10;
    for (int scatter = 0; scatter < 2; scatter++) {
        for (int root = 0; root < p; root += 5) {
            for (int r = 0; r < p; r++) {
                const int v = (r - root + p) % p;
                xccl_sched_t s;
                xccl_sched_init(&s, r, p, 1);
                ck_assert_int_eq(scatter ? xccl_build_scatter_binomial(&s, b, root, 0)
                                         : xccl_build_gather_binomial(&s, b, root, 0), 0);
                /* the child whose subtree wraps past the end of the root's buffer */
                const int wrap_v = 5 == root ? 8 : 10 == root ? 4 : 0;
                const tally_t t = tally(&s);
                const size_t in = scatter ? t.received : t.sent, out = scatter ? t.sent : t.received;
                const size_t nin = scatter ? t.recvs : t.sends, nout = scatter ? t.sends : t.recvs;
                if (0 == v) {
                    ck_assert_uint_eq(s.rounds, 1);
                    ck_assert_uint_eq(nout, 4 + (0 != wrap_v));
                    ck_assert_uint_eq(out, (size_t) (p - 1) * b);
                    ck_assert_uint_eq(nin, 0);
                    ck_assert_uint_eq(s.scratch_bytes, 0);
                } else if (8 == v) {
                    ck_assert_uint_eq(s.rounds, 2);
                    ck_assert_uint_eq(nin, 1 + (8 == wrap_v));
                    ck_assert_uint_eq(in, 8 * b);
                    ck_assert_uint_eq(nout, 3);
                    ck_assert_uint_eq(out, 7 * b);
                    ck_assert_uint_eq(s.scratch_bytes, 8 * b);
                } else if (v & 1) {
                    ck_assert_uint_eq(s.rounds, 1);
                    ck_assert_uint_eq(nin, 1);
                    ck_assert_uint_eq(in, b);
                    ck_assert_uint_eq(nout, 0);
                    ck_assert_uint_eq(s.scratch_bytes, 0);
                }
                xccl_sched_fini(&s);
            }
        }
    }
}
END_TEST

/* Linear: the root's p-1 messages in one step; every other rank one. */
START_TEST(linear_shape)
{
    const int p = 13, root = 4;
    const size_t b = 10;
    for (int scatter = 0; scatter < 2; scatter++) {
        for (int r = 0; r < p; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, p, 1);
            ck_assert_int_eq(scatter ? xccl_build_scatter_linear(&s, b, root, 0)
                                     : xccl_build_gather_linear(&s, b, root, 0), 0);
            const tally_t t = tally(&s);
            ck_assert_uint_eq(s.rounds, 1);
            ck_assert_uint_eq(s.max_xfers, r == root ? (size_t) p - 1 : 1);
            ck_assert_uint_eq(t.sent + t.received, r == root ? (size_t) (p - 1) * b : b);
            ck_assert_uint_eq(t.copies, r == root ? 1 : 0);
            xccl_sched_fini(&s);
        }
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("gather_scatter_algos");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, gather_scatter, 0, NP);
    tcase_add_loop_test(tc, gatherv_scatterv, 0, NP);
    tcase_add_loop_test(tc, allgatherv_alltoallv, 0, NP);
    tcase_add_loop_test(tc, shm_forms, 0, NSHM_P);
    tcase_add_test(tc, shm_rows);
    tcase_add_test(tc, binomial_shape);
    tcase_add_test(tc, linear_shape);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
