/*
 * Two-level (hierarchical, rail-parallel) schedules on the simulated
 * transport: allreduce, reduce_scatter, allgather, alltoall and bcast over
 * many node layouts (nodes x ppn up to 16 x 8 in block and cyclic
 * placement, uneven nodes, explicit lists with non-contiguous nodes),
 * counts 0, below the size and above, in place and not, several roots, and
 * several choices of the intra- and inter-node algorithms; float sums must
 * give the same bits on every rank.  Then the layout parser, the
 * composition primitive, the traffic each rank sends between nodes, and the
 * hierarchical cost model.
 *
 * Expected values come from scalar code here (node of a rank from the
 * layout string computed again by the test), not from the code under test.
 * Checks are plain loops with one assertion per job (Check writes to a pipe
 * per assertion).  Buffers have their exact size so that ASan catches a
 * schedule that strays past them.
 */
#include <check.h>
#include "check_main.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Its element kinds are its own (other inputs, a wrapping int sum). */
#define SIM_HARNESS_OWN_KINDS
#define SIM_EXEC_SEQ 5
#define SIM_SEED_SALT 3u
#include "sim_harness.h"
#include "xccl_layout.h"
#include "xccl_build.h"
#include "xccl_hier.h"
#include "xccl_cost.h"
#include "xccl_catalog.h"

/* ------------------------------------------------------------------------ */
/* Layouts under test                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
    char spec[96];
    int size;
    int rot;                   /* inside each node, local rank i is the (i + rot)-th rank */
} lay_t;

#define MAX_LAYS 512
static lay_t lays[MAX_LAYS];
static int nlays;

static void add_lay_rot(const char *spec, int size, int rot)
{
    if (nlays < MAX_LAYS) {
        snprintf(lays[nlays].spec, sizeof(lays[nlays].spec), "%s", spec);
        lays[nlays].size = size;
        lays[nlays].rot = rot;
        nlays++;
    }
}

static void add_lay(const char *spec, int size)
{
    add_lay_rot(spec, size, 0);
}

static void build_lays(void)
{
    /* nodes x ppn, every pair of 1..16 x 1..8 in block placement (ranks of a
     * node contiguous); cyclic placement (--map-by node) for the pairs
     * with both > 1 up to 40 ranks, and at 16 x 8. */
    char spec[32];
    for (int n = 1; n <= 16; n++) {
        for (int ppn = 1; ppn <= 8; ppn++) {
            snprintf(spec, sizeof(spec), "block:%d", ppn);
            add_lay(spec, n * ppn);
            if (n > 1 && ppn > 1 && (n * ppn <= 40 || (16 == n && 8 == ppn))) {
                snprintf(spec, sizeof(spec), "cyclic:%d", n);
                add_lay(spec, n * ppn);
            }
        }
    }
    /* Uneven nodes. */
    add_lay("block:3", 10);            /* 3 3 3 1 */
    add_lay("block:4", 13);            /* 4 4 4 1 */
    add_lay("block:8", 20);            /* 8 8 4 */
    add_lay("block:5", 23);            /* 5 5 5 5 3 */
    add_lay("cyclic:3", 10);           /* 4 3 3, non-contiguous */
    add_lay("cyclic:4", 7);            /* 2 2 2 1 */
    add_lay("cyclic:5", 37);           /* 8 8 7 7 7 */
    /* Explicit lists: ids out of order, non-contiguous, singletons. */
    add_lay("0,0,1,1,2", 0);
    add_lay("1,0,1,0,2,2", 0);
    add_lay("0,1,1,0", 0);
    add_lay("5,5,5,5,9,9,9,9,7,7,7,7", 0);
    add_lay("0,1,2,0,1,2,0,1", 0);
    add_lay("0,0,0,0,0,1", 0);
    add_lay("3,1,1,1,1,1,1,1,1", 0);
    add_lay("2,0,1,1,0,2,0,2,1,0,2,1", 0);
    add_lay("0,0,1,2,2,2,1,0,3,3,3,3,0,1", 0);
    add_lay("7", 0);
    /* Nodes reordered (a ring order that follows the wiring). */
    add_lay_rot("block:4", 16, 1);
    add_lay_rot("cyclic:3", 12, 2);
    add_lay_rot("block:3", 10, 1);
    add_lay_rot("0,1,1,0,2,2,2", 0, 1);
}

/* Node of every rank, computed from the spec by the test itself:
 * renumbered in order of first appearance. */
static int *test_node_of(const lay_t *lay, int *size_out, int *nnodes_out)
{
    int p = lay->size, *ids;
    if (0 == strncmp(lay->spec, "block:", 6) || 0 == strncmp(lay->spec, "cyclic:", 7)) {
        int k = atoi(strchr(lay->spec, ':') + 1);
        ids = malloc((size_t) p * sizeof(int));
        for (int r = 0; r < p; r++) {
            ids[r] = 'b' == lay->spec[0] ? r / k : r % k;
        }
    } else {
        p = 1;
        for (const char *c = lay->spec; *c; c++) {
            p += ',' == *c;
        }
        ids = malloc((size_t) p * sizeof(int));
        const char *c = lay->spec;
        for (int r = 0; r < p; r++) {
            ids[r] = atoi(c);
            c = strchr(c, ',') + 1;
        }
    }
    int *node = malloc((size_t) p * sizeof(int)), nn = 0;
    for (int r = 0; r < p; r++) {
        node[r] = -1;
        for (int q = 0; q < r; q++) {
            if (ids[q] == ids[r]) {
                node[r] = node[q];
                break;
            }
        }
        if (node[r] < 0) {
            node[r] = nn++;
        }
    }
    free(ids);
    *size_out = p;
    *nnodes_out = nn;
    return node;
}

/* The layout's name in messages. */
static const char *lname(const lay_t *lay)
{
    static char buf[128];
    snprintf(buf, sizeof(buf), lay->rot ? "%s rotated by %d" : "%s", lay->spec, lay->rot);
    return buf;
}

static void layout_of(const lay_t *lay, xccl_layout_t *l)
{
    char err[160] = "";
    int rc = xccl_layout_parse(l, lay->spec, lay->size, err, sizeof(err));
    ck_assert_msg(0 == rc, "parse '%s': %s", lay->spec, err);
    for (int n = 0; n < l->nnodes && lay->rot; n++) {
        const int ln = xccl_layout_node_size(l, n);
        int order[64];
        ck_assert_int_le(ln, 64);
        for (int i = 0; i < ln; i++) {
            order[i] = xccl_layout_node_members(l, n)[(i + lay->rot) % ln];
        }
        ck_assert_int_eq(xccl_layout_set_order(l, n, order), 0);
    }
}

/* ------------------------------------------------------------------------ */
/* Element kinds and scalar references                                      */
/* ------------------------------------------------------------------------ */

typedef enum { RED_I32_SUM, RED_DBL_MAX, RED_I64_BXOR, RED_NKINDS } red_kind_t;

static const struct {
    xccl_dtype_t dt;
    xccl_op_t op;
    size_t es;
} red_kinds[RED_NKINDS] = {
    { XCCL_DT_INT32, XCCL_OP_SUM, 4 },
    { XCCL_DT_DOUBLE, XCCL_OP_MAX, 8 },
    { XCCL_DT_INT64, XCCL_OP_BXOR, 8 },
};

static void fill_input(red_kind_t k, int r, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (k) {
        case RED_I32_SUM: ((int32_t *) buf)[i] = (int32_t) (r * 1000 + (int) (i % 977)) - 7000; break;
        case RED_DBL_MAX: ((double *) buf)[i] = (double) ((r * 7919 + (int) i * 31) % 1009) - 0.5; break;
        default: ((int64_t *) buf)[i] = (int64_t) (((uint64_t) r << 40) ^ (i * 0x9E3779B97F4A7C15ull)); break;
        }
    }
}

static void reference(red_kind_t k, int p, void *out, size_t n)
{
    void *tmp = xmalloc(n * red_kinds[k].es);
    fill_input(k, 0, out, n);
    for (int r = 1; r < p; r++) {
        fill_input(k, r, tmp, n);
        for (size_t i = 0; i < n; i++) {
            switch (k) {
            case RED_I32_SUM:
                ((int32_t *) out)[i] = (int32_t) ((uint32_t) ((int32_t *) out)[i] + (uint32_t) ((int32_t *) tmp)[i]);
                break;
            case RED_DBL_MAX: {
                double a = ((double *) out)[i], b = ((double *) tmp)[i];
                ((double *) out)[i] = a > b ? a : b;
                break;
            }
            default: ((int64_t *) out)[i] ^= ((int64_t *) tmp)[i]; break;
            }
        }
    }
    free(tmp);
}


/* ------------------------------------------------------------------------ */
/* Stage algorithms                                                         */
/* ------------------------------------------------------------------------ */

static int a2a_linear2(xccl_sched_t *s, size_t block, int in_place)
{
    return xccl_build_alltoall_linear(s, block, in_place, 2);
}

static int bcast_chain64(xccl_sched_t *s, size_t bytes, int root)
{
    return xccl_build_bcast_chain(s, bytes, root, 64);
}

static const struct {
    xccl_reduce_scatter_build_fn rs;
    xccl_allreduce_build_fn ar;
    xccl_allgatherv_build_fn ag;
    const char *name;
} ar_combos[] = {
    { xccl_build_reduce_scatter_ring, xccl_build_allreduce_ring, xccl_build_allgatherv_ring, "ring/ring/ring" },
    { xccl_build_reduce_scatter_pairwise, xccl_build_allreduce_rabenseifner, xccl_build_allgatherv_direct,
      "pairwise/rabenseifner/direct" },
    { xccl_build_reduce_scatter_recursive_halving, xccl_build_allreduce_recursive_doubling,
      xccl_build_allgatherv_ring, "halving/doubling/ring" },
    { xccl_build_reduce_scatter_ring, xccl_build_allreduce_swing, xccl_build_allgatherv_direct,
      "ring/swing/direct" },
};
#define NAR ((int) (sizeof(ar_combos) / sizeof(ar_combos[0])))

/* The pipelined forms: round-synchronous stages only (the
 * zip's condition), in pipe_k chunks of at least pipe_chunk bytes. */
static int pipe_k = 3;
static size_t pipe_chunk = 1;
static const struct {
    xccl_reduce_scatter_build_fn rs;
    xccl_allreduce_build_fn ar;
    xccl_allgatherv_build_fn ag;
    const char *name;
} par_combos[] = {
    { xccl_build_reduce_scatter_ring, xccl_build_allreduce_nhr, xccl_build_allgatherv_ring, "pipe ring/nhr/ring" },
    { xccl_build_reduce_scatter_ring, xccl_build_allreduce_ring, xccl_build_allgatherv_ring, "pipe ring/ring/ring" },
    { xccl_build_reduce_scatter_ring, xccl_build_allreduce_nb, xccl_build_allgatherv_bruck, "pipe ring/nb/bruck" },
};
#define NPAR ((int) (sizeof(par_combos) / sizeof(par_combos[0])))

/* The catalog's entry name of collective c. */
static const xccl_algo_t *catalog_entry(xccl_coll_t c, const char *name)
{
    int n;
    const xccl_algo_t *all = xccl_coll_algos(c, &n);
    for (int k = 0; k < n; k++) {
        if (0 == strcmp(all[k].name, name)) {
            return &all[k];
        }
    }
    ck_abort_msg("%s has no %s", xccl_coll_name(c), name);
    return NULL;
}

/* combo < NAR: hier with ar_combos[combo]; then the pipelined form with
 * par_combos[combo - NAR]; NAR + NPAR: the catalog's "pipeline". */
static int build_ar_combo(xccl_sched_t *s, const xccl_layout_t *l, int combo, size_t count, int in_place,
                          const char **name)
{
    if (NAR + NPAR == combo) {
        const xccl_coll_args_t a = { .count = count, .in_place = in_place, .layout = l };
        *name = "pipeline";
        return catalog_entry(XCCL_COLL_ALLREDUCE, "pipeline")->build(s, &a);
    }
    if (combo < NAR) {
        *name = "hier";
        return xccl_build_hier_allreduce(s, l, count, in_place, ar_combos[combo].rs, ar_combos[combo].ar,
                                         ar_combos[combo].ag);
    }
    *name = "pipeline";
    combo -= NAR;
    return xccl_build_pipe_allreduce(s, l, count, in_place, pipe_chunk, pipe_k, par_combos[combo].rs,
                                     par_combos[combo].ar, par_combos[combo].ag);
}

static const char *ar_combo_name(int combo)
{
    return combo < NAR ? ar_combos[combo].name : combo < NAR + NPAR ? par_combos[combo - NAR].name : "catalog pipeline";
}

static const struct {
    xccl_reduce_scatter_build_fn intra, inter;
    const char *name;
} rs_combos[] = {
    { xccl_build_reduce_scatter_ring, xccl_build_reduce_scatter_ring, "ring/ring" },
    { xccl_build_reduce_scatter_pairwise, xccl_build_reduce_scatter_recursive_halving, "pairwise/halving" },
    { xccl_build_reduce_scatter_recursive_halving, xccl_build_reduce_scatter_pairwise, "halving/pairwise" },
};
#define NRS ((int) (sizeof(rs_combos) / sizeof(rs_combos[0])))

static const struct {
    xccl_reduce_scatter_build_fn intra, inter;
    const char *name;
} prs_combos[] = {
    { xccl_build_reduce_scatter_ring, xccl_build_reduce_scatter_nhr, "pipe ring/nhr" },
    { xccl_build_reduce_scatter_ring, xccl_build_reduce_scatter_ring, "pipe ring/ring" },
    { xccl_build_reduce_scatter_nhr, xccl_build_reduce_scatter_nb, "pipe nhr/nb" },
};
#define NPRS ((int) (sizeof(prs_combos) / sizeof(prs_combos[0])))

static int build_rs_combo(xccl_sched_t *s, const xccl_layout_t *l, int combo, const size_t *counts, int in_place)
{
    if (NRS + NPRS == combo) {
        const xccl_coll_args_t a = { .counts = counts, .in_place = in_place, .layout = l };
        return catalog_entry(XCCL_COLL_REDUCE_SCATTER, "pipeline")->build(s, &a);
    }
    if (combo < NRS) {
        return xccl_build_hier_reduce_scatter(s, l, counts, in_place, rs_combos[combo].intra, rs_combos[combo].inter);
    }
    combo -= NRS;
    return xccl_build_pipe_reduce_scatter(s, l, counts, in_place, 1, pipe_k, prs_combos[combo].intra,
                                          prs_combos[combo].inter);
}

/* allgather_any: allgatherv stages, any layout. */
static const struct {
    xccl_allgatherv_build_fn inter, intra;
    const char *name;
} agv_combos[] = {
    { xccl_build_allgatherv_ring, xccl_build_allgatherv_ring, "any ring/ring" },
    { xccl_build_allgatherv_direct, xccl_build_allgatherv_ring, "any direct/ring" },
    { xccl_build_allgatherv_ring, xccl_build_allgatherv_direct, "any ring/direct" },
    { xccl_build_allgatherv_bruck, xccl_build_allgatherv_ring, "any bruck/ring" },
    { xccl_build_allgatherv_direct, xccl_build_allgatherv_bruck, "any direct/bruck" },
};
#define NAGV ((int) (sizeof(agv_combos) / sizeof(agv_combos[0])))

static const struct {
    xccl_allgatherv_build_fn inter, intra;
    const char *name;
} pag_combos[] = {
    { xccl_build_allgatherv_bruck, xccl_build_allgatherv_ring, "pipe bruck/ring" },
    { xccl_build_allgatherv_ring, xccl_build_allgatherv_ring, "pipe ring/ring" },
    { xccl_build_allgatherv_ring, xccl_build_allgatherv_bruck, "pipe ring/bruck" },
};
#define NPAG ((int) (sizeof(pag_combos) / sizeof(pag_combos[0])))

static const struct {
    xccl_alltoall_build_fn intra, inter;
    const char *name;
} a2a_combos[] = {
    { xccl_build_alltoall_pairwise, xccl_build_alltoall_pairwise, "pairwise/pairwise" },
    { a2a_linear2, xccl_build_alltoall_bruck, "linear2/bruck" },
    { xccl_build_alltoall_bruck, a2a_linear2, "bruck/linear2" },
};
#define NA2A ((int) (sizeof(a2a_combos) / sizeof(a2a_combos[0])))

/* alltoall_any: alltoallv stages, any layout. */
static const struct {
    xccl_alltoallv_build_fn intra, inter;
    const char *name;
} a2av_combos[] = {
    { xccl_build_alltoallv_pairwise, xccl_build_alltoallv_pairwise, "any pairwise/pairwise" },
    { xccl_build_alltoallv_direct, xccl_build_alltoallv_pairwise, "any direct/pairwise" },
    { xccl_build_alltoallv_pairwise, xccl_build_alltoallv_direct, "any pairwise/direct" },
    { xccl_build_alltoallv_pairwise, xccl_build_alltoallv_bruck, "any pairwise/bruck" },
    { xccl_build_alltoallv_bruck, xccl_build_alltoallv_direct, "any bruck/direct" },
};
#define NA2AV ((int) (sizeof(a2av_combos) / sizeof(a2av_combos[0])))

static const struct {
    xccl_bcast_build_fn inter, intra;
    xccl_allgatherv_build_fn agv;      /* NULL: leader path, else the rails path */
    const char *name;
} bc_combos[] = {
    { xccl_build_bcast_binomial, xccl_build_bcast_binomial, NULL, "leaders binomial/binomial" },
    { xccl_build_bcast_scatter_allgather, bcast_chain64, NULL, "leaders scatter_allgather/chain" },
    { xccl_build_bcast_binomial, NULL, xccl_build_allgatherv_ring, "rails binomial/ring" },
    { xccl_build_bcast_scatter_allgather, NULL, xccl_build_allgatherv_direct, "rails scatter_allgather/direct" },
};
#define NBC ((int) (sizeof(bc_combos) / sizeof(bc_combos[0])))

/* The catalog's two-level algorithms (names "hier*"), built exactly as the
 * component builds them; they must not apply on flat layouts (one node, or
 * one rank per node) and must be right on every other. */
static int catalog_hier(xccl_coll_t c, const xccl_algo_t **out)
{
    int n, k = 0;
    const xccl_algo_t *all = xccl_coll_algos(c, &n);
    for (int i = 0; i < n; i++) {
        if (0 == strncmp(all[i].name, "hier", 4)) {
            out[k++] = &all[i];
        }
    }
    return k;
}

static int flat_layout(const xccl_layout_t *l)
{
    return l->nnodes <= 1 || l->nnodes == l->size;
}

typedef struct {
    const xccl_algo_t *algo;
    xccl_coll_args_t args;
} cat_job_t;

/* xccl_predict_hier's builder for a catalog entry. */
static int build_cat(xccl_sched_t *s, void *arg)
{
    const cat_job_t *j = arg;
    return j->algo->build(s, &j->args);
}

/* ------------------------------------------------------------------------ */
/* Allreduce                                                                */
/* ------------------------------------------------------------------------ */

static void check_allreduce(const lay_t *lay, int combo, red_kind_t k, size_t count, int in_place)
{
    xccl_layout_t l;
    const size_t es = red_kinds[k].es;
    char what[256];
    job_t j;
    int bad_build = 0;

    layout_of(lay, &l);
    const int p = l.size;
    snprintf(what, sizeof(what), "allreduce %s (k %d) layout %s p=%d kind=%d count=%zu in_place=%d",
             ar_combo_name(combo), pipe_k, lname(lay), p, (int) k, count, in_place);
    job_init(&j, p, es);
    for (int r = 0; r < p; r++) {
        const char *name;
        bad_build |= 0 != build_ar_combo(&j.sched[r], &l, combo, count, in_place, &name);
        bad_build |= NULL == j.sched[r].algo || 0 != strcmp(j.sched[r].algo, name);
        j.rbuf[r] = xmalloc(count * es);
        if (in_place) {
            j.sbuf[r] = j.rbuf[r];
        } else {
            j.sbuf[r] = xmalloc(count * es);
            j.sbuf_owned[r] = 1;
            memset(j.rbuf[r], 0xEE, count * es);
        }
        fill_input(k, r, j.sbuf[r], count);
    }
    ck_assert_msg(!bad_build, "%s: build failed or wrong name", what);
    job_run(&j, xccl_reduce_kernel(red_kinds[k].dt, red_kinds[k].op), what);

    unsigned char *want = xmalloc(count * es), *input = xmalloc(count * es);
    int bad_rank = -1, input_changed = 0;
    reference(k, p, want, count);
    for (int r = 0; r < p && bad_rank < 0; r++) {
        if (0 != memcmp(j.rbuf[r], want, count * es)) {
            bad_rank = r;
        } else if (!in_place) {
            fill_input(k, r, input, count);
            input_changed = 0 != memcmp(j.sbuf[r], input, count * es);
            bad_rank = input_changed ? r : -1;
        }
    }
    ck_assert_msg(bad_rank < 0, "%s: rank %d %s", what, bad_rank, input_changed ? "changed its input" : "wrong");
    free(want);
    free(input);
    job_fini(&j);
    xccl_layout_fini(&l);
}

/* Float sums: the same bits on every rank, close to the exact sum. */
static void check_allreduce_float(const lay_t *lay, int combo, size_t count, int in_place)
{
    xccl_layout_t l;
    char what[256];
    job_t j;
    int bad_build = 0;

    layout_of(lay, &l);
    const int p = l.size;
    snprintf(what, sizeof(what), "float allreduce %s (k %d) layout %s p=%d count=%zu in_place=%d",
             ar_combo_name(combo), pipe_k, lname(lay), p, count, in_place);
    job_init(&j, p, sizeof(float));
    for (int r = 0; r < p; r++) {
        const char *name;
        bad_build |= 0 != build_ar_combo(&j.sched[r], &l, combo, count, in_place, &name);
        j.rbuf[r] = xmalloc(count * sizeof(float));
        j.sbuf[r] = in_place ? j.rbuf[r] : xmalloc(count * sizeof(float));
        j.sbuf_owned[r] = !in_place;
        for (size_t i = 0; i < count; i++) {
            ((float *) j.sbuf[r])[i] = float_input(r, i);
        }
    }
    ck_assert_msg(!bad_build, "%s: build failed", what);
    job_run(&j, xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM), what);
    int differs = -1;
    long far = -1;
    for (int r = 1; r < p && differs < 0; r++) {
        if (0 != memcmp(j.rbuf[r], j.rbuf[0], count * sizeof(float))) {
            differs = r;
        }
    }
    for (size_t i = 0; i < count && far < 0; i++) {
        double exact = 0.0, mag = 0.0;
        for (int r = 0; r < p; r++) {
            exact += (double) float_input(r, i);
            mag += fabs((double) float_input(r, i));
        }
        if (fabs((double) ((float *) j.rbuf[0])[i] - exact) > 1e-6 * (double) p * mag) {
            far = (long) i;
        }
    }
    ck_assert_msg(differs < 0, "%s: rank %d's bits differ from rank 0's", what, differs);
    ck_assert_msg(far < 0, "%s: element %ld far from the sum", what, far);
    job_fini(&j);
    xccl_layout_fini(&l);
}

START_TEST(allreduce_layouts)
{
    const lay_t *lay = &lays[_i];
    int p, nn;
    free(test_node_of(lay, &p, &nn));
    const size_t counts[] = { 0, 1, (size_t) (p > 1 ? p - 1 : 2), 37, p > 64 ? 301 : 1001 };
    const int nc = (int) (sizeof(counts) / sizeof(counts[0]));
    for (int c = 0; c < nc; c++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            /* Every combination on two counts (one above 32 ranks), one in
             * turn on the others. */
            for (int a = 0; a < NAR; a++) {
                if (2 == c || (4 == c && p <= 32) || a == (c + in_place) % NAR) {
                    check_allreduce(lay, a, (red_kind_t) ((c + a) % RED_NKINDS), counts[c], in_place);
                }
            }
        }
    }
    for (int a = 0; a < NAR; a++) {
        check_allreduce_float(lay, a, 203, a & 1);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Reduce_scatter                                                           */
/* ------------------------------------------------------------------------ */

enum { CNT_REGULAR, CNT_IRREGULAR, CNT_LAST_ONLY, CNT_NPAT };

static size_t *make_counts(int p, int pattern, size_t base, size_t *first)
{
    size_t *c = xmalloc((size_t) p * sizeof(size_t)), total = 0;
    for (int r = 0; r < p; r++) {
        switch (pattern) {
        case CNT_REGULAR: c[r] = base; break;
        case CNT_IRREGULAR: c[r] = (r % 3 == 1) ? 0 : base + (size_t) (r % 4); break;
        default: c[r] = r == p - 1 ? base : 0; break;
        }
        first[r] = total;
        total += c[r];
    }
    first[p] = total;
    return c;
}

static void check_rs(const lay_t *lay, int combo, red_kind_t k, int pattern, size_t base, int in_place)
{
    xccl_layout_t l;
    const size_t es = red_kinds[k].es;
    char what[256];
    job_t j;
    int bad_build = 0;

    layout_of(lay, &l);
    const int p = l.size;
    size_t *first = xmalloc(((size_t) p + 1) * sizeof(size_t));
    size_t *counts = make_counts(p, pattern, base, first);
    const size_t total = first[p];
    snprintf(what, sizeof(what), "reduce_scatter %s (k %d) layout %s p=%d kind=%d pattern=%d base=%zu in_place=%d",
             combo < NRS ? rs_combos[combo].name : combo < NRS + NPRS ? prs_combos[combo - NRS].name : "catalog pipeline", pipe_k, lname(lay), p, (int) k,
             pattern, base, in_place);
    job_init(&j, p, es);
    for (int r = 0; r < p; r++) {
        bad_build |= 0 != build_rs_combo(&j.sched[r], &l, combo, counts, in_place);
        j.rbuf[r] = xmalloc((in_place ? total : counts[r]) * es);
        if (in_place) {
            j.sbuf[r] = j.rbuf[r];
        } else {
            j.sbuf[r] = xmalloc(total * es);
            j.sbuf_owned[r] = 1;
            memset(j.rbuf[r], 0xEE, counts[r] * es);
        }
        fill_input(k, r, j.sbuf[r], total);
    }
    ck_assert_msg(!bad_build, "%s: build failed", what);
    job_run(&j, xccl_reduce_kernel(red_kinds[k].dt, red_kinds[k].op), what);

    unsigned char *want = xmalloc(total * es), *input = xmalloc(total * es);
    int bad_rank = -1, input_changed = 0;
    reference(k, p, want, total);
    for (int r = 0; r < p && bad_rank < 0; r++) {
        if (0 != memcmp(j.rbuf[r], want + first[r] * es, counts[r] * es)) {
            bad_rank = r;
        } else if (!in_place) {
            fill_input(k, r, input, total);
            input_changed = 0 != memcmp(j.sbuf[r], input, total * es);
            bad_rank = input_changed ? r : -1;
        }
    }
    ck_assert_msg(bad_rank < 0, "%s: rank %d %s", what, bad_rank, input_changed ? "changed its input" : "wrong");
    free(want);
    free(input);
    free(counts);
    free(first);
    job_fini(&j);
    xccl_layout_fini(&l);
}

START_TEST(reduce_scatter_layouts)
{
    const size_t bases[] = { 0, 1, 5, 37 };
    int p, nn;
    free(test_node_of(&lays[_i], &p, &nn));
    for (int pat = 0; pat < CNT_NPAT; pat++) {
        for (int b = 0; b < 4; b++) {
            /* All zero counts once; above 40 ranks, bases 5 and 37 only. */
            if ((0 == b && CNT_IRREGULAR != pat) || (p > 40 && b < 2)) {
                continue;
            }
            for (int in_place = 0; in_place < 2; in_place++) {
                for (int a = 0; a < NRS; a++) {
                    if (2 == b || a == (pat + b + in_place) % NRS) {
                        check_rs(&lays[_i], a, (red_kind_t) ((pat + b + a) % RED_NKINDS), pat, bases[b], in_place);
                    }
                }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allgather                                                                */
/* ------------------------------------------------------------------------ */

/* combo < NAGV: xccl_build_hier_allgather_any with agv_combos[combo], else
 * the catalog's two-level algorithm combo - NAGV, from PAG0 on the
 * pipelined form. */
#define PAG0 1000
static void check_allgather(const lay_t *lay, int combo, size_t b, int in_place)
{
    xccl_layout_t l;
    char what[256];
    job_t j;
    int bad_build = 0, not_applicable = 0;
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    catalog_hier(XCCL_COLL_ALLGATHER, cat);

    layout_of(lay, &l);
    const int p = l.size;
    const size_t total = (size_t) p * b;
    /* combo >= PAG0: the pipelined form with pag_combos[combo - PAG0] */
    const int any = combo < NAGV || combo >= PAG0, pipe = combo >= PAG0;
    const xccl_coll_args_t args = { .block = b, .in_place = in_place, .layout = &l };
    snprintf(what, sizeof(what), "allgather %s%s (k %d) layout %s p=%d block=%zu in_place=%d", any ? "" : "catalog ",
             PAG0 + NPAG == combo ? "catalog pipeline" : pipe ? pag_combos[combo - PAG0].name : any ? agv_combos[combo].name : cat[combo - NAGV]->name, pipe_k,
             lname(lay), p, b, in_place);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        int rc = PAG0 + NPAG == combo ? catalog_entry(XCCL_COLL_ALLGATHER, "pipeline")->build(&j.sched[r], &args)
                 : pipe ? xccl_build_pipe_allgather(&j.sched[r], &l, b, 1, pipe_k, pag_combos[combo - PAG0].inter,
                                                  pag_combos[combo - PAG0].intra)
                 : any ? xccl_build_hier_allgather_any(&j.sched[r], &l, b, agv_combos[combo].inter,
                                                       agv_combos[combo].intra)
                       : cat[combo - NAGV]->build(&j.sched[r], &args);
        not_applicable += XCCL_NOT_APPLICABLE == rc && 0 == j.sched[r].nacts && 0 == j.sched[r].nsteps;
        bad_build |= 0 != rc && XCCL_NOT_APPLICABLE != rc;
        j.rbuf[r] = xmalloc(total);
        memset(j.rbuf[r], 0xEE, total);
        if (in_place) {
            j.sbuf[r] = j.rbuf[r] + (size_t) r * b;
        } else {
            j.sbuf[r] = xmalloc(b);
            j.sbuf_owned[r] = 1;
        }
        for (size_t i = 0; i < b; i++) {
            j.sbuf[r][i] = ag_pattern(r, i);
        }
    }
    ck_assert_msg(!bad_build, "%s: build failed", what);
    /* Catalog entries on flat layouts: every rank says so and leaves its
     * schedule empty. */
    const int applies = any || !flat_layout(&l);
    ck_assert_msg(not_applicable == (applies ? 0 : p), "%s: %d ranks not applicable, applies=%d", what,
                  not_applicable, applies);
    if (applies) {
        job_run(&j, NULL, what);
        long bad = -1;
        int bad_rank = -1;
        for (int r = 0; r < p && bad < 0; r++) {
            for (size_t x = 0; x < total && bad < 0; x++) {
                if (j.rbuf[r][x] != ag_pattern((int) (x / b), x % b)) {
                    bad = (long) x;
                }
            }
            for (size_t i = 0; i < b && bad < 0 && !in_place; i++) {
                if (j.sbuf[r][i] != ag_pattern(r, i)) {
                    bad = (long) (total + i);
                }
            }
            bad_rank = r;
        }
        ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong (>= %zu: input changed)", what, bad_rank, bad, total);
    }
    job_fini(&j);
    xccl_layout_fini(&l);
}

START_TEST(allgather_layouts)
{
    const size_t blocks[] = { 0, 1, 3, 37 };
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    const int ncat = catalog_hier(XCCL_COLL_ALLGATHER, cat);
    for (int bi = 0; bi < 4; bi++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            /* Every catalog entry on every case; the stage combinations on
             * one block size, in turn on the others. */
            for (int a = 0; a < NAGV + ncat; a++) {
                if (a >= NAGV || 2 == bi || a == (bi + in_place) % NAGV) {
                    check_allgather(&lays[_i], a, blocks[bi], in_place);
                }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Alltoall                                                                 */
/* ------------------------------------------------------------------------ */

static unsigned char a2a_byte(int from, int to, size_t i)
{
    return (unsigned char) (from * 29 + to * 7 + i * 3 + 5);
}

/* combo < NA2A: xccl_build_hier_alltoall (regular layouts only); then
 * xccl_build_hier_alltoall_any with a2av_combos[combo - NA2A]; then the
 * catalog's two-level algorithm combo - NA2A - NA2AV. */
static void check_alltoall(const lay_t *lay, int combo, size_t b, int in_place)
{
    xccl_layout_t l;
    char what[256];
    job_t j;
    int bad_build = 0, not_applicable = 0;
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    catalog_hier(XCCL_COLL_ALLTOALL, cat);

    layout_of(lay, &l);
    const int p = l.size;
    const size_t total = (size_t) p * b;
    const int kind = combo < NA2A ? 0 : combo < NA2A + NA2AV ? 1 : 2;    /* regular, any, catalog */
    const xccl_coll_args_t args = { .block = b, .in_place = in_place, .layout = &l };
    snprintf(what, sizeof(what), "alltoall %s%s layout %s p=%d block=%zu in_place=%d", 2 == kind ? "catalog " : "",
             0 == kind ? a2a_combos[combo].name : 1 == kind ? a2av_combos[combo - NA2A].name
                                                            : cat[combo - NA2A - NA2AV]->name,
             lname(lay), p, b, in_place);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        int rc = 0 == kind ? xccl_build_hier_alltoall(&j.sched[r], &l, b, in_place, a2a_combos[combo].intra,
                                                      a2a_combos[combo].inter)
               : 1 == kind ? xccl_build_hier_alltoall_any(&j.sched[r], &l, b, in_place,
                                                          a2av_combos[combo - NA2A].intra,
                                                          a2av_combos[combo - NA2A].inter)
                           : cat[combo - NA2A - NA2AV]->build(&j.sched[r], &args);
        not_applicable += XCCL_NOT_APPLICABLE == rc && 0 == j.sched[r].nacts;
        bad_build |= 0 != rc && XCCL_NOT_APPLICABLE != rc;
        j.rbuf[r] = xmalloc(total);
        memset(j.rbuf[r], 0xEE, total);
        if (in_place) {
            j.sbuf[r] = j.rbuf[r];
        } else {
            j.sbuf[r] = xmalloc(total);
            j.sbuf_owned[r] = 1;
        }
        for (size_t x = 0; x < total; x++) {
            j.sbuf[r][x] = a2a_byte(r, (int) (x / b), x % b);
        }
    }
    ck_assert_msg(!bad_build, "%s: build failed", what);
    /* The regular-layout builder on uneven layouts, catalog entries on flat
     * ones: every rank says so and leaves its schedule empty. */
    const int applies = 0 == kind ? l.min_ppn == l.max_ppn : 1 == kind || !flat_layout(&l);
    ck_assert_msg(not_applicable == (applies ? 0 : p), "%s: %d ranks not applicable, applies=%d", what,
                  not_applicable, applies);
    if (applies) {
        job_run(&j, NULL, what);
        long bad = -1;
        int bad_rank = -1;
        for (int r = 0; r < p && bad < 0; r++) {
            for (size_t x = 0; x < total && bad < 0; x++) {
                if (j.rbuf[r][x] != a2a_byte((int) (x / b), r, x % b)) {
                    bad = (long) x;
                }
                if (!in_place && j.sbuf[r][x] != a2a_byte(r, (int) (x / b), x % b)) {
                    bad = (long) (total + x);
                }
            }
            bad_rank = r;
        }
        ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong (>= %zu: input changed)", what, bad_rank, bad, total);
    }
    job_fini(&j);
    xccl_layout_fini(&l);
}

START_TEST(alltoall_layouts)
{
    const size_t blocks[] = { 0, 1, 3, 17 };
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    const int ncat = catalog_hier(XCCL_COLL_ALLTOALL, cat);
    int p, nn;
    free(test_node_of(&lays[_i], &p, &nn));
    for (int bi = 0; bi < 4; bi++) {
        if (p > 40 && 1 == bi) {
            continue;
        }
        for (int in_place = 0; in_place < 2; in_place++) {
            for (int a = 0; a < NA2A + NA2AV + ncat; a++) {
                if (a >= NA2A + NA2AV || 2 == bi || a % NA2A == (bi + in_place) % NA2A) {
                    check_alltoall(&lays[_i], a, blocks[bi], in_place);
                }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bcast                                                                    */
/* ------------------------------------------------------------------------ */

/* combo < NBC: bc_combos[combo], else the catalog's two-level algorithm
 * combo - NBC. */
static void check_bcast(const lay_t *lay, int combo, size_t n, int root)
{
    xccl_layout_t l;
    char what[256];
    job_t j;
    int bad_build = 0, not_applicable = 0;
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    catalog_hier(XCCL_COLL_BCAST, cat);

    layout_of(lay, &l);
    const int p = l.size;
    const xccl_coll_args_t args = { .bytes = n, .root = root, .layout = &l };
    snprintf(what, sizeof(what), "bcast %s%s layout %s p=%d bytes=%zu root=%d", combo < NBC ? "" : "catalog ",
             combo < NBC ? bc_combos[combo].name : cat[combo - NBC]->name, lname(lay), p, n, root);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        int rc = combo >= NBC ? cat[combo - NBC]->build(&j.sched[r], &args)
               : bc_combos[combo].agv
                     ? xccl_build_hier_bcast_rails(&j.sched[r], &l, n, root, bc_combos[combo].inter,
                                                   bc_combos[combo].agv)
                     : xccl_build_hier_bcast(&j.sched[r], &l, n, root, bc_combos[combo].inter,
                                             bc_combos[combo].intra);
        not_applicable += XCCL_NOT_APPLICABLE == rc && 0 == j.sched[r].nacts;
        bad_build |= 0 != rc && XCCL_NOT_APPLICABLE != rc;
        j.rbuf[r] = xmalloc(n);
        j.sbuf[r] = j.rbuf[r];
        for (size_t i = 0; i < n; i++) {
            j.rbuf[r][i] = r == root ? ag_pattern(root + 1, i) : 0xEE;
        }
    }
    ck_assert_msg(!bad_build, "%s: build failed", what);
    const int applies = combo < NBC || !flat_layout(&l);
    ck_assert_msg(not_applicable == (applies ? 0 : p), "%s: %d ranks not applicable, applies=%d", what,
                  not_applicable, applies);
    if (!applies) {
        job_fini(&j);
        xccl_layout_fini(&l);
        return;
    }
    job_run(&j, NULL, what);
    long bad = -1;
    int bad_rank = -1;
    for (int r = 0; r < p && bad < 0; r++) {
        for (size_t i = 0; i < n && bad < 0; i++) {
            if (j.rbuf[r][i] != ag_pattern(root + 1, i)) {
                bad = (long) i;
            }
        }
        bad_rank = r;
    }
    ck_assert_msg(bad < 0, "%s: rank %d byte %ld wrong", what, bad_rank, bad);
    job_fini(&j);
    xccl_layout_fini(&l);
}

START_TEST(bcast_layouts)
{
    int p, nn;
    int *node = test_node_of(&lays[_i], &p, &nn);
    free(node);
    const int roots[] = { 0, p - 1, p / 2, (p * 2) / 3 };
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    const int ncat = catalog_hier(XCCL_COLL_BCAST, cat);
    const size_t sizes[] = { 0, 1, (size_t) p + 1, 1000 };
    for (int ri = 0; ri < 4; ri++) {
        if (ri > 0 && roots[ri] == roots[ri - 1]) {
            continue;
        }
        for (int si = 0; si < 4; si++) {
            for (int a = 0; a < NBC + ncat; a++) {
                if (a >= NBC || 3 == si || a == (ri + si) % NBC) {
                    check_bcast(&lays[_i], a, sizes[si], roots[ri]);
                }
            }
        }
    }
}
END_TEST

/* A thousand ranks: 128 nodes of 8, 64 nodes of 16 placed cyclically, and
 * 84 uneven nodes (83 of 12 and one of 4). */
START_TEST(big_layouts)
{
    static const lay_t big[] = { { "block:8", 1024, 0 }, { "cyclic:64", 1024, 0 }, { "block:12", 1000, 0 } };
    const lay_t *lay = &big[_i];
    check_allreduce(lay, 1, RED_I32_SUM, 3000, 0);
    check_allreduce_float(lay, 0, 100, 1);
    check_rs(lay, 1, RED_I64_BXOR, CNT_IRREGULAR, 2, 1);
    check_allgather(lay, 0, 3, 1);
    check_alltoall(lay, NA2A, 2, 0);
    check_bcast(lay, 3, 5000, 999);
    /* The catalog's two-level algorithms as the component builds them. */
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    for (int k = catalog_hier(XCCL_COLL_ALLGATHER, cat) - 1; k >= 0; k--) {
        check_allgather(lay, NAGV + k, 3, k & 1);
    }
    for (int k = catalog_hier(XCCL_COLL_ALLTOALL, cat) - 1; k >= 0; k--) {
        check_alltoall(lay, NA2A + NA2AV + k, 2, k & 1);
    }
    for (int k = catalog_hier(XCCL_COLL_BCAST, cat) - 1; k >= 0; k--) {
        check_bcast(lay, NBC + k, 5000, 500 + k);
    }
}
END_TEST


/* ------------------------------------------------------------------------ */
/* Pipelined two-level forms                                               */
/* ------------------------------------------------------------------------ */

/* Every layout: allreduce, reduce_scatter and allgather pipelined in 1 to 4
 * chunks (each combination in turn, all of them on one count), counts 0,
 * 1, p-1, 37 and 1001 (301 above 64 ranks), in place and not, irregular
 * reduce_scatter counts; float sums the same bits everywhere. */
START_TEST(pipe_layouts)
{
    const lay_t *lay = &lays[_i];
    int p, nn;
    free(test_node_of(lay, &p, &nn));
    const size_t counts[] = { 0, 1, (size_t) (p > 1 ? p - 1 : 2), 37, p > 64 ? 301 : 1001 };
    for (int c = 0; c < 5; c++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            for (int a = 0; a < NPAR; a++) {
                if (3 == c || a == (c + in_place) % NPAR) {
                    pipe_k = 1 + (c + a + in_place) % 4;
                    check_allreduce(lay, NAR + a, (red_kind_t) ((c + a) % RED_NKINDS), counts[c], in_place);
                }
            }
        }
    }
    pipe_k = 3;
    for (int a = 0; a < NPAR; a++) {
        check_allreduce_float(lay, NAR + a, 203, a & 1);
    }
    const size_t bases[] = { 0, 1, 5, 37 };
    for (int pat = 0; pat < CNT_NPAT; pat++) {
        for (int b = 0; b < 4; b++) {
            if ((0 == b && CNT_IRREGULAR != pat) || (p > 40 && b < 2)) {
                continue;
            }
            for (int in_place = 0; in_place < 2; in_place++) {
                for (int a = 0; a < NPRS; a++) {
                    if (2 == b || a == (pat + b + in_place) % NPRS) {
                        pipe_k = 1 + (pat + b + a) % 4;
                        check_rs(lay, NRS + a, (red_kind_t) ((pat + b + a) % RED_NKINDS), pat, bases[b], in_place);
                    }
                }
            }
        }
    }
    const size_t blocks[] = { 0, 1, 3, 37 };
    for (int bi = 0; bi < 4; bi++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            for (int a = 0; a < NPAG; a++) {
                if (3 == bi || a == (bi + in_place) % NPAG) {
                    pipe_k = 1 + (bi + a + in_place) % 4;
                    check_allgather(lay, PAG0 + a, blocks[bi], in_place);
                }
            }
        }
    }
    pipe_k = 3;
}
END_TEST

/* p = 100, 127 (15 nodes of 8 and one of 7), 1000 (83 nodes of 12 and one
 * of 4) and 1024 (cyclic, 16 per node), 4 chunks; then the catalog's
 * "pipeline" entries as the component builds them (2 MiB chunks: 3 of
 * them at 5 MiB) on 4 nodes of 2. */
START_TEST(pipe_big)
{
    static const lay_t big[] = { { "block:10", 100, 0 }, { "block:8", 127, 0 }, { "block:12", 1000, 0 },
                                 { "cyclic:64", 1024, 0 } };
    pipe_k = 4;
    for (int i = 0; i < 4; i++) {
        const lay_t *lay = &big[i];
        check_allreduce(lay, NAR + i % NPAR, RED_I32_SUM, 3001, i & 1);
        check_allreduce_float(lay, NAR, 257, 0);
        check_rs(lay, NRS + i % NPRS, RED_I64_BXOR, CNT_IRREGULAR, 5, i & 1);
        check_allgather(lay, PAG0 + i % NPAG, 5, !(i & 1));
    }
    pipe_k = 3;

    static const lay_t four = { "block:2", 8, 0 };
    check_allreduce(&four, NAR + NPAR, RED_I32_SUM, (5u << 20) / 4 + 3, 0);
    check_allreduce(&four, NAR + NPAR, RED_DBL_MAX, (5u << 20) / 8 + 1, 1);
    check_rs(&four, NRS + NPRS, RED_I64_BXOR, CNT_REGULAR, (5u << 20) / 8 / 8, 1);
    check_allgather(&four, PAG0 + NPAG, (5u << 20) / 8 + 5, 0);
    xccl_layout_t l;
    layout_of(&four, &l);
    const xccl_coll_t colls[] = { XCCL_COLL_ALLREDUCE, XCCL_COLL_REDUCE_SCATTER, XCCL_COLL_ALLGATHER };
    for (int ci = 0; ci < 3; ci++) {
        int n, at = -1;
        const xccl_algo_t *all = xccl_coll_algos(colls[ci], &n);
        for (int k = 0; k < n; k++) {
            at = 0 == strcmp(all[k].name, "pipeline") ? k : at;
        }
        ck_assert_msg(at >= 0, "%s has no pipeline entry", xccl_coll_name(colls[ci]));
        /* flat layouts: not applicable */
        xccl_layout_t flat;
        ck_assert_int_eq(0, xccl_layout_parse(&flat, "block:4", 4, NULL, 0));
        xccl_sched_t s;
        xccl_sched_init(&s, 0, 4, 4);
        size_t cnt4[4] = { 1, 1, 1, 1 };
        xccl_coll_args_t fa = { .count = 4, .block = 4, .counts = cnt4, .layout = &flat };
        ck_assert_int_eq(XCCL_NOT_APPLICABLE, all[at].build(&s, &fa));
        xccl_sched_fini(&s);
        xccl_layout_fini(&flat);
    }
    xccl_layout_fini(&l);
}
END_TEST

/* Rank 0's messages to other nodes in the pipelined allreduce (ring,
 * nhr, ring) of count floats on the layout, in chunks of at least chunk
 * bytes, at most max of them. */
static size_t pipe_inter_msgs(const xccl_layout_t *l, size_t count, size_t chunk, int max)
{
    xccl_sched_t s;
    xccl_sched_init(&s, 0, l->size, sizeof(float));
    ck_assert_int_eq(0, xccl_build_pipe_allreduce(&s, l, count, 0, chunk, max, xccl_build_reduce_scatter_ring,
                                                  xccl_build_allreduce_nhr, xccl_build_allgatherv_ring));
    size_t n = 0;
    for (size_t i = 0; i < s.nacts; i++) {
        n += XCCL_ACT_SEND == s.acts[i].kind && l->node_of[s.acts[i].peer] != l->node_of[0];
    }
    xccl_sched_fini(&s);
    return n;
}

/* Slots of fewer than four rounds take proportionally smaller chunks
 * (two nodes of two ranks: ring reduce-scatter and allgather of one
 * round each, nhr of two: half the chunk), longer ones the chunk as
 * given; the number of chunks (rank 0's rail messages over those of one
 * chunk) follows from the layout's largest node and its node count alone,
 * so that uneven nodes agree on it and still reduce correctly. */
START_TEST(pipe_short_slots)
{
    static const struct {
        lay_t lay;
        int chunks;            /* of 16 KiB in chunks of at least 4 KiB */
    } cases[] = {
        { { "block:2", 4, 0 }, 8 },            /* 2 nodes x 2: 2 rounds, 2 KiB */
        { { "block:3", 6, 0 }, 4 },            /* 2 x 3: 2 + 2 rounds */
        { { "block:4", 8, 0 }, 4 },            /* 2 x 4: 3 + 3 */
        { { "block:2", 8, 0 }, 4 },            /* 4 x 2: nhr on 4 ranks, 4 rounds */
        { { "0,0,1,1,1", 0, 0 }, 4 },          /* nodes of 2 and 3: the larger one's 4 rounds */
        { { "0,0,1,1,2,2,2", 0, 0 }, 4 },      /* 2, 2, 3 */
    };
    const size_t count = 4096;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        xccl_layout_t l;
        layout_of(&cases[i].lay, &l);
        const size_t one = pipe_inter_msgs(&l, count, 4096, 1), all = pipe_inter_msgs(&l, count, 4096, 64);
        ck_assert_msg(one > 0 && all == (size_t) cases[i].chunks * one, "layout %s p=%d: %zu rail messages, "
                      "%zu per chunk: want %d chunks", lname(&cases[i].lay), l.size, all, one, cases[i].chunks);
        xccl_layout_fini(&l);
        pipe_chunk = 4096;
        pipe_k = 64;
        check_allreduce(&cases[i].lay, NAR, RED_I32_SUM, count + 3, (int) (i & 1));
        check_allreduce_float(&cases[i].lay, NAR, count, !(i & 1));
        pipe_chunk = 1;
        pipe_k = 3;
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The flat v-builders the stages use, on their own                          */
/* ------------------------------------------------------------------------ */

static const struct {
    xccl_allgatherv_build_fn fn;
    const char *name;
} agv_flat[] = {
    { xccl_build_allgatherv_ring, "ring" },
    { xccl_build_allgatherv_direct, "direct" },
    { xccl_build_allgatherv_bruck, "bruck" },
};

static const struct {
    xccl_alltoallv_build_fn fn;
    const char *name;
} a2av_flat[] = {
    { xccl_build_alltoallv_pairwise, "pairwise" },
    { xccl_build_alltoallv_direct, "direct" },
    { xccl_build_alltoallv_bruck, "bruck" },
};

static const int flat_sizes[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 31, 33, 64 };

/* Irregular block sizes: pattern 0 regular, 1 with zeros and unequal, 2
 * only the last rank's block.  Placement: order 0 contiguous in rank
 * order, 1 reversed with gaps of 3 bytes. */
static size_t agv_bytes(int pat, int p, int r)
{
    return 0 == pat ? 5 : 1 == pat ? (r % 3 == 1 ? 0 : (size_t) (3 + r % 4)) : (r == p - 1 ? 9 : 0);
}

START_TEST(allgatherv_flat)
{
    const int p = flat_sizes[_i];
    size_t *bytes = xmalloc((size_t) p * sizeof(size_t)), *displs = xmalloc((size_t) p * sizeof(size_t));
    for (int pat = 0; pat < 3; pat++) {
        for (int order = 0; order < 2; order++) {
            size_t total = 0;
            for (int k = 0; k < p; k++) {
                const int r = order ? p - 1 - k : k;
                bytes[r] = agv_bytes(pat, p, r);
                displs[r] = total;
                total += bytes[r] + (order ? 3 : 0);
            }
            for (size_t a = 0; a < sizeof(agv_flat) / sizeof(agv_flat[0]); a++) {
                for (int in_place = 0; in_place < 2; in_place++) {
                    char what[160];
                    job_t j;
                    int bad_build = 0;
                    snprintf(what, sizeof(what), "allgatherv %s p=%d pattern=%d order=%d in_place=%d",
                             agv_flat[a].name, p, pat, order, in_place);
                    job_init(&j, p, 1);
                    for (int r = 0; r < p; r++) {
                        bad_build |= 0 != agv_flat[a].fn(&j.sched[r], bytes, displs, in_place);
                        bad_build |= 0 != strcmp(j.sched[r].algo, agv_flat[a].name);
                        j.rbuf[r] = xmalloc(total);
                        memset(j.rbuf[r], 0xEE, total);
                        if (in_place) {
                            j.sbuf[r] = j.rbuf[r] + displs[r];
                        } else {
                            j.sbuf[r] = xmalloc(bytes[r]);
                            j.sbuf_owned[r] = 1;
                        }
                        for (size_t i = 0; i < bytes[r]; i++) {
                            j.sbuf[r][i] = ag_pattern(r, i);
                        }
                    }
                    ck_assert_msg(!bad_build, "%s: build failed or wrong name", what);
                    job_run(&j, NULL, what);
                    long bad = -1;
                    for (int r = 0; r < p && bad < 0; r++) {
                        for (int q = 0; q < p && bad < 0; q++) {
                            for (size_t i = 0; i < bytes[q] && bad < 0; i++) {
                                if (j.rbuf[r][displs[q] + i] != ag_pattern(q, i)) {
                                    bad = r * 1000L + q;
                                }
                            }
                            /* The gaps are left alone. */
                            for (size_t i = 0; order && i < 3 && bad < 0; i++) {
                                if (j.rbuf[r][displs[q] + bytes[q] + i] != 0xEE) {
                                    bad = r * 1000L + q;
                                }
                            }
                        }
                    }
                    ck_assert_msg(bad < 0, "%s: rank %ld, block of %ld wrong", what, bad / 1000, bad % 1000);
                    job_fini(&j);
                }
            }
        }
    }
    free(bytes);
    free(displs);
}
END_TEST

/* Bytes from src to dst: zeros and unequal sizes (pattern 1), or all 4. */
typedef struct {
    int pat;
} pair_ctx_t;

static size_t pair_bytes(const void *ctx, int src, int dst)
{
    const pair_ctx_t *c = ctx;
    return c->pat ? (size_t) ((src * 7 + dst * 3) % 5) : 4;
}

START_TEST(alltoallv_flat)
{
    const int p = flat_sizes[_i];
    size_t *v = xmalloc(4 * (size_t) p * sizeof(size_t));
    size_t *sb = v, *sd = v + p, *rb = v + 2 * p, *rd = v + 3 * p;
    for (int pat = 0; pat < 2; pat++) {
        const pair_ctx_t ctx = { pat };
        for (size_t a = 0; a < sizeof(a2av_flat) / sizeof(a2av_flat[0]); a++) {
            char what[160];
            job_t j;
            int bad_build = 0;
            snprintf(what, sizeof(what), "alltoallv %s p=%d pattern=%d", a2av_flat[a].name, p, pat);
            job_init(&j, p, 1);
            for (int r = 0; r < p; r++) {
                /* Send blocks in destination order, receive blocks in
                 * reversed source order with a gap of 2 bytes after each. */
                size_t so = 0, ro = 0;
                for (int q = 0; q < p; q++) {
                    sb[q] = pair_bytes(&ctx, r, q);
                    sd[q] = so;
                    so += sb[q];
                }
                for (int k = p - 1; k >= 0; k--) {
                    rb[k] = pair_bytes(&ctx, k, r);
                    rd[k] = ro;
                    ro += rb[k] + 2;
                }
                bad_build |= 0 != a2av_flat[a].fn(&j.sched[r], sb, sd, rb, rd, pair_bytes, &ctx);
                bad_build |= 0 != strcmp(j.sched[r].algo, a2av_flat[a].name);
                j.sbuf[r] = xmalloc(so);
                j.sbuf_owned[r] = 1;
                j.rbuf[r] = xmalloc(ro);
                memset(j.rbuf[r], 0xEE, ro);
                for (int q = 0; q < p; q++) {
                    for (size_t i = 0; i < sb[q]; i++) {
                        j.sbuf[r][sd[q] + i] = a2a_byte(r, q, i);
                    }
                }
            }
            ck_assert_msg(!bad_build, "%s: build failed or wrong name", what);
            job_run(&j, NULL, what);
            long bad = -1;
            for (int r = 0; r < p && bad < 0; r++) {
                size_t ro = 0;
                for (int k = p - 1; k >= 0 && bad < 0; k--) {
                    const size_t n = pair_bytes(&ctx, k, r);
                    for (size_t i = 0; i < n + 2 && bad < 0; i++) {
                        if (j.rbuf[r][ro + i] != (i < n ? a2a_byte(k, r, i) : 0xEE)) {
                            bad = r * 1000L + k;
                        }
                    }
                    ro += n + 2;
                }
                /* The input is left alone. */
                size_t so = 0;
                for (int q = 0; q < p && bad < 0; q++) {
                    const size_t n = pair_bytes(&ctx, r, q);
                    for (size_t i = 0; i < n && bad < 0; i++) {
                        if (j.sbuf[r][so + i] != a2a_byte(r, q, i)) {
                            bad = r * 1000L + 999;
                        }
                    }
                    so += n;
                }
            }
            ck_assert_msg(bad < 0, "%s: rank %ld, block from %ld wrong (999: input changed)", what, bad / 1000,
                          bad % 1000);
            job_fini(&j);
        }
        /* Bruck must be told every pair's size. */
        xccl_sched_t s;
        xccl_sched_init(&s, 0, p, 1);
        if (p > 1) {
            ck_assert_int_eq(xccl_build_alltoallv_bruck(&s, sb, sd, rb, rd, NULL, NULL), -1);
        }
        xccl_sched_fini(&s);
    }
    free(v);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Reduce and allgatherv                                                    */
/* ------------------------------------------------------------------------ */

static int reduce_chain16(xccl_sched_t *s, size_t count, int root, int in_place)
{
    return xccl_build_reduce_chain(s, count, root, in_place, 16);
}

static const struct {
    xccl_reduce_scatter_build_fn rs;
    xccl_reduce_build_fn rd;
    xccl_gatherv_build_fn gv;
    const char *name;
    int pipe_k;                        /* > 0: xccl_build_pipe_reduce, chunks of 1 byte, at most pipe_k */
} rd_combos[] = {
    { xccl_build_reduce_scatter_ring, xccl_build_reduce_rabenseifner, xccl_build_gatherv_linear,
      "ring/rabenseifner/linear", 0 },
    { xccl_build_reduce_scatter_pairwise, xccl_build_reduce_binomial, xccl_build_gatherv_linear,
      "pairwise/binomial/linear", 0 },
    { xccl_build_reduce_scatter_recursive_halving, reduce_chain16, xccl_build_gatherv_linear,
      "halving/chain16/linear", 0 },
    { xccl_build_reduce_scatter_ring, xccl_build_reduce_binomial, xccl_build_gatherv_linear,
      "pipeline ring/binomial/linear k<=3", 3 },
    { xccl_build_reduce_scatter_ring, xccl_build_reduce_rabenseifner, xccl_build_gatherv_linear,
      "pipeline ring/rabenseifner/linear k<=64", 64 },
};
#define NRD ((int) (sizeof(rd_combos) / sizeof(rd_combos[0])))

/* A reduce job: combo < NRD xccl_build_hier_reduce (or with pipe_k,
 * xccl_build_pipe_reduce: two nodes or more) with rd_combos[combo],
 * else the catalog's two-level entry combo - NRD (with a shared-memory
 * slot of slot bytes: its intra-node stages through the segment).  Every
 * rank's input from fill (element kind es), the root's RECV and every
 * other rank's (which must stay untouched) 0xEE.  Returns 0 where the
 * algorithm applies, else asserts that every rank said so. */
typedef void (*rd_fill_fn)(int r, void *buf, size_t n, void *ctx);

static int reduce_job(job_t *j, const xccl_layout_t *l, int combo, size_t es, size_t count, int root, int in_place,
                      size_t slot, rd_fill_fn fill, void *ctx, const char *what)
{
    const int p = l->size;
    const size_t bytes = count * es;
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    catalog_hier(XCCL_COLL_REDUCE, cat);
    const xccl_coll_args_t args = { .count = count, .root = root, .in_place = in_place, .layout = l,
                                    .shm_slot = slot };
    const int pipe = combo < NRD && rd_combos[combo].pipe_k > 0;
    const char *want_name = pipe ? "pipeline" : "hier";
    int bad_build = 0, not_applicable = 0, recv_named = -1;
    job_init(j, p, es);
    for (int r = 0; r < p; r++) {
        xccl_sched_t *s = &j->sched[r];
        const int rc = combo >= NRD         ? cat[combo - NRD]->build(s, &args)
                       : rd_combos[combo].pipe_k ? xccl_build_pipe_reduce(s, l, count, root, in_place, 1,
                                                                          rd_combos[combo].pipe_k, rd_combos[combo].rs,
                                                                          rd_combos[combo].rd, rd_combos[combo].gv)
                                                 : xccl_build_hier_reduce(s, l, count, root, in_place,
                                                                          rd_combos[combo].rs, rd_combos[combo].rd,
                                                                          rd_combos[combo].gv);
        not_applicable += XCCL_NOT_APPLICABLE == rc && 0 == s->nacts && 0 == s->nsteps;
        bad_build |= (0 != rc && XCCL_NOT_APPLICABLE != rc) || (0 == rc && 0 != strcmp(s->algo, want_name));
        if (0 == rc && r != root && sched_names_recv(s)) {
            recv_named = r;
        }
        j->rbuf[r] = xmalloc(bytes);
        memset(j->rbuf[r], 0xEE, bytes);
        if (r == root && in_place) {
            j->sbuf[r] = j->rbuf[r];
        } else {
            j->sbuf[r] = job_sbuf(j, r, bytes);
        }
        fill(r, j->sbuf[r], count, ctx);
    }
    ck_assert_msg(!bad_build, "%s: build failed or wrong name", what);
    ck_assert_msg(recv_named < 0, "%s: rank %d (not the root) names RECV", what, recv_named);
    const int applies = combo < NRD ? !pipe || l->nnodes > 1 : !flat_layout(l);
    ck_assert_msg(not_applicable == (applies ? 0 : p), "%s: %d ranks not applicable, applies=%d", what,
                  not_applicable, applies);
    return applies ? 0 : XCCL_NOT_APPLICABLE;
}

static void rd_fill_kind(int r, void *buf, size_t n, void *ctx)
{
    fill_input(*(const red_kind_t *) ctx, r, buf, n);
}

static const char *rd_combo_name(int combo)
{
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    catalog_hier(XCCL_COLL_REDUCE, cat);
    return combo < NRD ? rd_combos[combo].name : cat[combo - NRD]->name;
}

/* The root gets the reduction of every rank's input (the kinds' results
 * do not depend on the order: the test's reference is exact); no other
 * RECV is written, no input changes (but the root's in place). */
static void check_hier_reduce(const lay_t *lay, int combo, red_kind_t k, size_t count, int root, int in_place,
                              size_t slot)
{
    xccl_layout_t l;
    const size_t es = red_kinds[k].es, bytes = count * es;
    char what[256];
    job_t j;

    layout_of(lay, &l);
    const int p = l.size;
    snprintf(what, sizeof(what), "reduce %s%s layout %s p=%d kind=%d count=%zu root=%d in_place=%d slot=%zu",
             combo < NRD ? "" : "catalog ", rd_combo_name(combo), lname(lay), p, (int) k, count, root, in_place,
             slot);
    if (0 == reduce_job(&j, &l, combo, es, count, root, in_place, slot, rd_fill_kind, &k, what)) {
        job_run(&j, xccl_reduce_kernel(red_kinds[k].dt, red_kinds[k].op), what);
        unsigned char *want = xmalloc(bytes), *input = xmalloc(bytes);
        reference(k, p, want, count);
        ck_assert_msg(0 == memcmp(j.rbuf[root], want, bytes), "%s: root's result wrong", what);
        int bad_recv = -1, bad_send = -1;
        for (int r = 0; r < p; r++) {
            for (size_t i = 0; r != root && i < bytes && bad_recv < 0; i++) {
                bad_recv = 0xEE != j.rbuf[r][i] ? r : -1;
            }
            if (r != root || !in_place) {
                fill_input(k, r, input, count);
                bad_send = 0 != memcmp(j.sbuf[r], input, bytes) ? r : bad_send;
            }
        }
        ck_assert_msg(bad_recv < 0, "%s: rank %d's RECV written", what, bad_recv);
        ck_assert_msg(bad_send < 0, "%s: rank %d's input changed", what, bad_send);
        free(want);
        free(input);
    }
    job_fini(&j);
    xccl_layout_fini(&l);
}

static void rd_fill_float(int r, void *buf, size_t n, void *ctx)
{
    (void) ctx;
    for (size_t i = 0; i < n; i++) {
        ((float *) buf)[i] = float_input(r, i);
    }
}

/* Float sums, whose bits depend on the order of the additions: the same
 * bits from runs under different simulator seeds (the order is the
 * schedule's, not the messages' arrival), close to the exact sum. */
static void check_hier_reduce_float(const lay_t *lay, int combo, size_t count, int root, int in_place)
{
    xccl_layout_t l;
    const size_t bytes = count * sizeof(float);
    char what[256], err[256];
    float *first = xmalloc(bytes);

    layout_of(lay, &l);
    const int p = l.size;
    snprintf(what, sizeof(what), "float reduce %s layout %s p=%d count=%zu root=%d in_place=%d",
             rd_combo_name(combo), lname(lay), p, count, root, in_place);
    for (unsigned seed = 1; seed <= 3; seed++) {
        job_t j;
        if (0 == reduce_job(&j, &l, combo, sizeof(float), count, root, in_place, 0, rd_fill_float, NULL, what)) {
            const int rc = job_exec(&j, xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM), seed * 7919u, what, err,
                                    sizeof(err));
            ck_assert_msg(0 == rc, "%s seed %u: %s", what, seed, err);
            if (1 == seed) {
                memcpy(first, j.rbuf[root], bytes);
            }
            ck_assert_msg(0 == memcmp(first, j.rbuf[root], bytes), "%s: seed %u's bits differ from seed 1's",
                          what, seed);
        }
        job_fini(&j);
    }
    long far = -1;
    const int applies = NRD > combo ? 0 == rd_combos[combo].pipe_k || l.nnodes > 1 : !flat_layout(&l);
    for (size_t i = 0; i < count && far < 0 && applies; i++) {
        double exact = 0.0, mag = 0.0;
        for (int r = 0; r < p; r++) {
            exact += (double) float_input(r, i);
            mag += fabs((double) float_input(r, i));
        }
        far = fabs((double) first[i] - exact) > 1e-6 * (double) p * mag ? (long) i : -1;
    }
    ck_assert_msg(far < 0, "%s: element %ld far from the sum", what, far);
    free(first);
    xccl_layout_fini(&l);
}

START_TEST(reduce_layouts)
{
    const lay_t *lay = &lays[_i];
    int p, nn, roots[64] = { 0 };
    free(test_node_of(lay, &p, &nn));
    const int nroots = pick_roots(p, 24, roots);
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    const int ncomb = NRD + catalog_hier(XCCL_COLL_REDUCE, cat);
    /* fewer elements than slices (some empty), a few per slice, many */
    const size_t counts[] = { 0, 1, 5, 37, p > 64 ? 101 : 301 };
    const int nc = (int) (sizeof(counts) / sizeof(counts[0]));
    /* Every root: each count once, the algorithms and in_place in turn. */
    for (int ri = 0; ri < nroots; ri++) {
        for (int c = 0; c < nc; c++) {
            check_hier_reduce(lay, (ri + c) % ncomb, (red_kind_t) ((ri + 2 * c) % RED_NKINDS), counts[c], roots[ri],
                              (ri + c / 2) & 1, 0);
        }
    }
    /* The first and last root: every algorithm, in place and not. */
    for (int ri = 0; ri < nroots; ri += nroots > 1 ? nroots - 1 : 1) {
        for (int a = 0; a < ncomb; a++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                check_hier_reduce(lay, a, (red_kind_t) ((a + in_place) % RED_NKINDS), 37, roots[ri], in_place, 0);
            }
        }
    }
    /* The catalog's with the intra-node stages through the segment. */
    check_hier_reduce(lay, NRD, RED_I32_SUM, 301, p / 2, 1, 4096);
    check_hier_reduce(lay, NRD, RED_DBL_MAX, 301, p - 1, 0, 4096);
    for (int a = 0; a < ncomb; a++) {
        check_hier_reduce_float(lay, a, 203, roots[(a * 3) % nroots], a & 1);
    }
}
END_TEST

/* Allgatherv block sizes: agv_bytes's patterns (regular, zeros and
 * unequal, only the last rank's), then one middle rank with everything,
 * then all empty. */
#define HAGV_NPAT 5
static size_t hagv_bytes(int pat, int p, int r)
{
    return pat < 3 ? agv_bytes(pat, p, r) : 3 == pat ? (r == p / 2 ? 37 : 0) : 0;
}

/* Placements: 0 packed in rank order; 1 reversed with gaps of 3 bytes;
 * 2 packed in rail-group order (local rank mod L, node, local rank: the
 * two-level builder's staging order, computed here from the layout), 3
 * the same with a gap of 3 bytes before the first block; 4 rank order
 * with gaps of 3 bytes. */
#define HAGV_NPLACE 5
static size_t hagv_place(const xccl_layout_t *l, int pat, int place, size_t *bytes, size_t *displs)
{
    const int p = l->size, L = l->min_ppn;
    int *order = xmalloc((size_t) p * sizeof(int)), k = 0;
    for (int r = 0; r < p; r++) {
        bytes[r] = hagv_bytes(pat, p, r);
        order[r] = place == 1 ? p - 1 - r : r;
    }
    if (place >= 2) {
        for (int gg = 0; gg < L; gg++) {
            for (int n = 0; n < l->nnodes; n++) {
                for (int i = gg; i < xccl_layout_node_size(l, n); i += L) {
                    order[k++] = xccl_layout_rank_at(l, n, i);
                }
            }
        }
        ck_assert_int_eq(k, p);
    }
    size_t total = place == 3 ? 3 : 0;
    for (int i = 0; i < p; i++) {
        displs[order[i]] = total;
        total += bytes[order[i]] + (place == 1 || place == 4 ? 3 : 0);
    }
    free(order);
    return total;
}

/* allgatherv stages of xccl_build_hier_allgatherv: (inter, intra). */
static const struct {
    xccl_allgatherv_build_fn inter, intra;
    const char *name;
} hagv_combos[] = {
    { xccl_build_allgatherv_ring, xccl_build_allgatherv_ring, "ring/ring" },
    { xccl_build_allgatherv_bruck, xccl_build_allgatherv_direct, "bruck/direct" },
    { xccl_build_allgatherv_direct, xccl_build_allgatherv_bruck, "direct/bruck" },
};
#define NHAGV ((int) (sizeof(hagv_combos) / sizeof(hagv_combos[0])))

/* combo < NHAGV: xccl_build_hier_allgatherv with hagv_combos[combo], else
 * the catalog's two-level entry combo - NHAGV (slot: the shared-memory
 * slot, intra-node stages through the segment).  Every rank ends with
 * every block at its place; the bytes between blocks and the inputs are
 * left alone. */
static void check_hier_agv(const lay_t *lay, int combo, int pat, int place, int in_place, size_t slot)
{
    xccl_layout_t l;
    char what[256];
    job_t j;
    int bad_build = 0, not_applicable = 0;
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    catalog_hier(XCCL_COLL_ALLGATHERV, cat);

    layout_of(lay, &l);
    const int p = l.size;
    size_t *vec = xmalloc(2 * (size_t) p * sizeof(size_t));
    size_t *bytes = vec, *displs = vec + p;
    const size_t total = hagv_place(&l, pat, place, bytes, displs);
    const xccl_coll_args_t args = { .vec = vec, .nvec = 2 * (size_t) p, .in_place = in_place, .layout = &l,
                                    .shm_slot = slot };
    snprintf(what, sizeof(what), "allgatherv %s%s layout %s p=%d pattern=%d place=%d in_place=%d slot=%zu",
             combo < NHAGV ? "" : "catalog ", combo < NHAGV ? hagv_combos[combo].name : cat[combo - NHAGV]->name,
             lname(lay), p, pat, place, in_place, slot);
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        xccl_sched_t *s = &j.sched[r];
        const int rc = combo < NHAGV ? xccl_build_hier_allgatherv(s, &l, bytes, displs, in_place,
                                                                  hagv_combos[combo].inter, hagv_combos[combo].intra)
                                     : cat[combo - NHAGV]->build(s, &args);
        not_applicable += XCCL_NOT_APPLICABLE == rc && 0 == s->nacts && 0 == s->nsteps;
        bad_build |= (0 != rc && XCCL_NOT_APPLICABLE != rc) || (0 == rc && 0 != strcmp(s->algo, "hier"));
        j.rbuf[r] = xmalloc(total);
        memset(j.rbuf[r], 0xEE, total);
        j.sbuf[r] = in_place ? j.rbuf[r] + displs[r] : job_sbuf(&j, r, bytes[r]);
        for (size_t i = 0; i < bytes[r]; i++) {
            j.sbuf[r][i] = ag_pattern(r, i);
        }
    }
    ck_assert_msg(!bad_build, "%s: build failed or wrong name", what);
    const int applies = combo < NHAGV || !flat_layout(&l);
    ck_assert_msg(not_applicable == (applies ? 0 : p), "%s: %d ranks not applicable, applies=%d", what,
                  not_applicable, applies);
    if (applies) {
        job_run(&j, NULL, what);
        unsigned char *want = xmalloc(total);
        memset(want, 0xEE, total);
        for (int q = 0; q < p; q++) {
            for (size_t i = 0; i < bytes[q]; i++) {
                want[displs[q] + i] = ag_pattern(q, i);
            }
        }
        long bad = -1;
        for (int r = 0; r < p && bad < 0; r++) {
            for (size_t x = 0; x < total && bad < 0; x++) {
                bad = j.rbuf[r][x] != want[x] ? r * 100000L + (long) x : -1;
            }
            for (size_t i = 0; i < bytes[r] && bad < 0 && !in_place; i++) {
                bad = j.sbuf[r][i] != ag_pattern(r, i) ? r * 100000L + 99999 : -1;
            }
        }
        ck_assert_msg(bad < 0, "%s: rank %ld byte %ld wrong (99999: input changed)", what, bad / 100000,
                      bad % 100000);
        free(want);
    }
    free(vec);
    job_fini(&j);
    xccl_layout_fini(&l);
}

START_TEST(allgatherv_layouts)
{
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    const int ncat = catalog_hier(XCCL_COLL_ALLGATHERV, cat);
    /* Every catalog entry on every case; the stage combinations in turn. */
    for (int pat = 0; pat < HAGV_NPAT; pat++) {
        for (int place = 0; place < HAGV_NPLACE; place++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                for (int a = 0; a < NHAGV + ncat; a++) {
                    if (a >= NHAGV || a == (pat + place + in_place) % NHAGV) {
                        check_hier_agv(&lays[_i], a, pat, place, in_place, 0);
                    }
                }
            }
        }
    }
    for (int a = 0; a < ncat; a++) {
        check_hier_agv(&lays[_i], NHAGV + a, 1, 1, a & 1, 4096);
    }
}
END_TEST

/* A thousand ranks (big_layouts' three): the catalog's forms. */
START_TEST(reduce_allgatherv_big)
{
    static const lay_t big[] = { { "block:8", 1024, 0 }, { "cyclic:64", 1024, 0 }, { "block:12", 1000, 0 } };
    const xccl_algo_t *cat[XCCL_CATALOG_MAX];
    check_hier_reduce(&big[_i], NRD, RED_I32_SUM, 3000, 999, _i & 1, 0);
    check_hier_reduce(&big[_i], 0, RED_I64_BXOR, 100, 5, 0, 0);
    for (int k = catalog_hier(XCCL_COLL_ALLGATHERV, cat) - 1; k >= 0; k--) {
        check_hier_agv(&big[_i], NHAGV + k, 1, 2 * k + (_i & 1), k & 1, 0);
    }
}
END_TEST

/* The model prices the forms: reduce's two-level form ahead of the flat
 * ones for large vectors on several nodes (n/L bytes a rank between nodes),
 * the binomial tree still for small ones; allgatherv's hier_bruck (lg N
 * rounds between nodes) on many nodes, hier (ring) on two for large
 * blocks.  Layout block:8, elements of 4 bytes for reduce; "auto" is
 * xccl_pick over the catalog as the component does it. */
static void predict_rooted(xccl_coll_t c, int p, size_t bytes, double *t, int *n, size_t *vec)
{
    const xccl_cost_model_t intra = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA, 0, 0 };
    const xccl_cost_model_t inter = { XCCL_COST_INTER_ALPHA, XCCL_COST_INTER_BETA, XCCL_COST_GAMMA,
                                      XCCL_COST_DELTA, 0, 0 };
    xccl_layout_t l;
    ck_assert_int_eq(xccl_layout_parse(&l, "block:8", p, NULL, 0), 0);
    for (int r = 0; r < p; r++) {
        vec[r] = bytes / (size_t) p;
        vec[p + r] = (size_t) r * vec[r];
    }
    const xccl_algo_t *algos = xccl_coll_algos(c, n);
    cat_job_t j = { NULL, { .count = bytes / 4, .root = 1, .vec = vec, .nvec = 2 * (size_t) p, .layout = &l } };
    for (int i = 0; i < *n; i++) {
        j.algo = &algos[i];
        t[i] = xccl_predict_hier(&l, XCCL_COLL_REDUCE == c ? 4 : 1, build_cat, &j, NULL, 0, &intra, &inter);
    }
    xccl_layout_fini(&l);
}

START_TEST(cost_prices_reduce_allgatherv)
{
    static const struct {
        xccl_coll_t coll;
        int p;
        size_t bytes;
        const char *auto_pick;
    } cases[] = {
        { XCCL_COLL_REDUCE, 16, 16 << 20, "pipeline" },
        { XCCL_COLL_REDUCE, 64, 1 << 20, "hier" },
        { XCCL_COLL_REDUCE, 1024, 16 << 20, "hier" },
        { XCCL_COLL_REDUCE, 64, 8, "binomial" },
        { XCCL_COLL_ALLGATHERV, 16, 16 << 20, "hier" },
        { XCCL_COLL_ALLGATHERV, 128, 64 << 10, "hier_bruck" },
        { XCCL_COLL_ALLGATHERV, 1024, 1 << 20, "hier_bruck" },
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        double t[XCCL_CATALOG_MAX];
        int n;
        size_t *vec = xmalloc(2 * (size_t) cases[k].p * sizeof(size_t));
        predict_rooted(cases[k].coll, cases[k].p, cases[k].bytes, t, &n, vec);
        const xccl_algo_t *algos = xccl_coll_algos(cases[k].coll, &n);
        const int pick = xccl_pick(t, n, XCCL_MODEL_MARGIN);
        for (int i = 0; i < n; i++) {
            /* every form but the level's and the CUDA IPC ones (mapped
             * peers on one node) is priced */
            const int na = 0 == strcmp(algos[i].name, "shm") || 0 == strcmp(algos[i].name, "mesh") ||
                           0 == strcmp(algos[i].name, "leader");
            ck_assert_msg(na ? t[i] < 0 : t[i] > 0, "%s %s: %g", xccl_coll_name(cases[k].coll), algos[i].name,
                          t[i]);
        }
        ck_assert_msg(pick >= 0 && 0 == strcmp(algos[pick].name, cases[k].auto_pick),
                      "%s, %d ranks on nodes of 8, %zu bytes: auto %s, not %s", xccl_coll_name(cases[k].coll),
                      cases[k].p, cases[k].bytes, pick >= 0 ? algos[pick].name : "-", cases[k].auto_pick);
        free(vec);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Layouts                                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(layout_matches_spec)
{
    const lay_t *lay = &lays[_i];
    xccl_layout_t l;
    int p, nn;
    int *node = test_node_of(lay, &p, &nn);
    int *rail = xmalloc((size_t) nn * sizeof(int));
    char bad[128] = "";

    layout_of(lay, &l);
    if (l.size != p || l.nnodes != nn) {
        snprintf(bad, sizeof(bad), "size %d nnodes %d, want %d %d", l.size, l.nnodes, p, nn);
    }
    int minp = p, maxp = 0;
    int *mem = xmalloc((size_t) p * sizeof(int));
    for (int n = 0; n < nn && !bad[0]; n++) {
        /* Members: the ranks of node n in increasing order, rotated by rot. */
        int k = 0;
        for (int r = 0; r < p; r++) {
            if (node[r] == n) {
                mem[k++] = r;
            }
        }
        for (int i = 0; i < k && !bad[0]; i++) {
            int r = mem[(i + lay->rot) % k];
            if (l.node_of[r] != n || l.local_rank[r] != i || xccl_layout_rank_at(&l, n, i) != r) {
                snprintf(bad, sizeof(bad), "rank %d: node %d local %d", r, l.node_of[r], l.local_rank[r]);
            }
        }
        if (!bad[0] && (xccl_layout_node_size(&l, n) != k || xccl_layout_rank_at(&l, n, k) != -1)) {
            snprintf(bad, sizeof(bad), "node %d has %d ranks, want %d", n, xccl_layout_node_size(&l, n), k);
        }
        if (!bad[0] && xccl_layout_leader(&l, n) != mem[lay->rot % k]) {
            snprintf(bad, sizeof(bad), "leader of node %d", n);
        }
        minp = k < minp ? k : minp;
        maxp = k > maxp ? k : maxp;
    }
    free(mem);
    if (!bad[0] && (l.min_ppn != minp || l.max_ppn != maxp)) {
        snprintf(bad, sizeof(bad), "ppn %d..%d, want %d..%d", l.min_ppn, l.max_ppn, minp, maxp);
    }
    /* Rail j: for each node in order, its ((j + rot) mod size)-th rank, if
     * the node has more than j ranks. */
    for (int jj = 0; jj <= maxp && !bad[0]; jj++) {
        int got = xccl_layout_rail(&l, jj, rail), want = 0;
        for (int n = 0; n < nn && !bad[0]; n++) {
            int k = 0, seen = 0;
            for (int r = 0; r < p; r++) {
                k += node[r] == n;
            }
            for (int r = 0; r < p && jj < k; r++) {
                if (node[r] == n && seen++ == (jj + lay->rot) % k) {
                    if (want >= got || rail[want] != r) {
                        snprintf(bad, sizeof(bad), "rail %d entry %d", jj, want);
                    }
                    want++;
                    break;
                }
            }
        }
        if (!bad[0] && got != want) {
            snprintf(bad, sizeof(bad), "rail %d has %d ranks, want %d", jj, got, want);
        }
    }
    ck_assert_msg(!bad[0], "layout %s: %s", lname(lay), bad);
    xccl_layout_fini(&l);
    free(rail);
    free(node);
}
END_TEST

START_TEST(layout_parse_errors)
{
    static const struct {
        const char *spec;
        int size;
    } badspecs[] = {
        { "block:0", 8 }, { "block:", 8 }, { "block:x", 8 }, { "block:2", 0 }, { "cyclic:-1", 8 },
        { "cyclic:3x", 8 }, { "1,,2", 0 }, { "1,2,", 0 }, { "a", 0 }, { "", 0 }, { "0,1,2", 4 },
        { "-1,0", 0 }, { "mesh:4", 8 },
    };
    xccl_layout_t l;
    char err[160];
    int accepted = -1;
    for (size_t i = 0; i < sizeof(badspecs) / sizeof(badspecs[0]) && accepted < 0; i++) {
        err[0] = '\0';
        if (0 == xccl_layout_parse(&l, badspecs[i].spec, badspecs[i].size, err, sizeof(err))) {
            accepted = (int) i;
            xccl_layout_fini(&l);
        } else if ('\0' == err[0]) {
            accepted = (int) i;        /* rejected without a reason */
        }
    }
    ck_assert_msg(accepted < 0, "'%s' accepted or rejected silently", badspecs[accepted].spec);
    /* Blanks around list entries; ids of any value; size from the list. */
    ck_assert_int_eq(xccl_layout_parse(&l, "12, 12,3 ,3", 0, err, sizeof(err)), 0);
    ck_assert_int_eq(l.size, 4);
    ck_assert_int_eq(l.nnodes, 2);
    ck_assert_int_eq(l.node_of[3], 1);
    xccl_layout_fini(&l);
    /* block:K with K > size is one node; cyclic:N with N > size, one per rank. */
    ck_assert_int_eq(xccl_layout_parse(&l, "block:100", 5, err, sizeof(err)), 0);
    ck_assert_int_eq(l.nnodes, 1);
    xccl_layout_fini(&l);
    ck_assert_int_eq(xccl_layout_parse(&l, "cyclic:100", 5, err, sizeof(err)), 0);
    ck_assert_int_eq(l.nnodes, 5);
    ck_assert_int_eq(l.max_ppn, 1);
    xccl_layout_fini(&l);
    int ids[3] = { 4, -2, 4 };
    ck_assert_int_eq(xccl_layout_init(&l, 3, ids), -1);
    /* Reordering: only a permutation of the node's own ranks. */
    ck_assert_int_eq(xccl_layout_parse(&l, "0,1,0,1,0", 0, err, sizeof(err)), 0);
    const int good[3] = { 4, 0, 2 }, dup[3] = { 4, 0, 4 }, foreign[3] = { 4, 0, 1 };
    ck_assert_int_eq(xccl_layout_set_order(&l, 0, dup), -1);
    ck_assert_int_eq(xccl_layout_set_order(&l, 0, foreign), -1);
    ck_assert_int_eq(xccl_layout_set_order(&l, 2, good), -1);
    ck_assert_int_eq(xccl_layout_set_order(&l, 0, good), 0);
    ck_assert_int_eq(l.local_rank[4], 0);
    ck_assert_int_eq(l.local_rank[2], 2);
    ck_assert_int_eq(xccl_layout_leader(&l, 0), 4);
    xccl_layout_fini(&l);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Composition                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(append_translates_and_accounts)
{
    /* Parent of 8 ranks, rank 5; child: ring allgather on group {1, 5, 6}
     * (child rank 1), SEND at parent RECV+100, RECV at parent SCRATCH+64. */
    const int group[3] = { 1, 5, 6 };
    xccl_sched_t parent, child;
    xccl_sched_init(&parent, 5, 8, 4);
    xccl_sched_copy(&parent, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), 8);
    xccl_sched_init(&child, 1, 3, 4);
    ck_assert_int_eq(xccl_build_allgather_ring(&child, 10), 0);
    xccl_buf_map_t map;
    map.base[XCCL_BUF_SEND] = xccl_ref(XCCL_BUF_RECV, 100);
    map.base[XCCL_BUF_RECV] = xccl_ref(XCCL_BUF_SCRATCH, 64);
    map.base[XCCL_BUF_SCRATCH] = xccl_ref(XCCL_BUF_SCRATCH, 1000);
    ck_assert_int_eq(xccl_sched_append(&parent, &child, group, &map), 0);
    ck_assert_int_eq(xccl_sched_finalize(&parent), 0);
    /* The parent's copy, then the child's own-block copy in a new step,
     * then 2 ring steps to 6 and from 1. */
    ck_assert_uint_eq(parent.rounds, 2);
    ck_assert_uint_eq(parent.nsteps, 4);
    ck_assert_uint_eq(parent.scratch_bytes, 64 + 30);
    int bad = 0;
    for (size_t i = 0; i < parent.nacts; i++) {
        const xccl_action_t *a = &parent.acts[i];
        if (XCCL_ACT_SEND == a->kind) {
            bad |= a->peer != 6 || a->len != 10;
            bad |= !((a->a.buf == XCCL_BUF_RECV && a->a.off == 100) ||
                     (a->a.buf == XCCL_BUF_SCRATCH && (a->a.off - 64) % 10 == 0));
        } else if (XCCL_ACT_RECV == a->kind) {
            bad |= a->peer != 1 || a->dst.buf != XCCL_BUF_SCRATCH || a->dst.off < 64 || a->dst.off >= 94;
        } else if (i > 0) {
            bad |= a->dst.buf != XCCL_BUF_SCRATCH || a->dst.off != 64 + 10 || a->a.buf != XCCL_BUF_RECV ||
                   a->a.off != 100;
        }
    }
    ck_assert_msg(!bad, "actions not translated as expected");
    /* Two messages each way between the same pair keep distinct indices. */
    uint32_t seen = 0;
    for (size_t i = 0; i < parent.nacts; i++) {
        if (XCCL_ACT_SEND == parent.acts[i].kind) {
            seen |= 1u << parent.acts[i].idx;
        }
    }
    ck_assert_uint_eq(seen, 3);
    /* Not a member: refused, and the parent is marked failed. */
    const int other[3] = { 0, 2, 3 };
    ck_assert_int_eq(xccl_sched_append(&parent, &child, other, &map), -1);
    ck_assert_int_eq(parent.error, 1);
    xccl_sched_fini(&child);
    xccl_sched_fini(&parent);
}
END_TEST

/* Three phases in one parent, run on the simulator: phases 1 and 3 use the
 * same pairs, so phase 3's per-pair numbering must continue phase 1's. */
/* xccl_sched_zip: children side by side by round.  Rank 2 of 6: a ring
 * allgather on {1, 2, 3} (child rank 1: rounds 1, 2) zipped at round 0
 * with a ring allgather on {0, 2, 4, 5} (child rank 1: rounds 1..3) at
 * round 1: each child's round k lands on the parent's round at + k, where
 * the two meet they share a step (round 2), every message goes to the
 * peer its group names; a child with flags is refused. */
START_TEST(zip_places_steps_by_round)
{
    const int g1[3] = { 1, 2, 3 }, g2[4] = { 0, 2, 4, 5 };
    xccl_sched_t parent, c1, c2;
    xccl_sched_init(&parent, 2, 6, 1);
    xccl_sched_init(&c1, 1, 3, 1);
    xccl_sched_init(&c2, 1, 4, 1);
    ck_assert_int_eq(xccl_build_allgather_ring(&c1, 8), 0);
    ck_assert_int_eq(xccl_build_allgather_ring(&c2, 8), 0);
    xccl_zip_part_t parts[2];
    parts[0].child = &c1;
    parts[0].group = g1;
    for (int b = 0; b < XCCL_NBUF; b++) {
        parts[0].map.base[b] = parts[1].map.base[b] = xccl_ref((xccl_buf_id_t) b, 0);
    }
    parts[1].map.base[XCCL_BUF_RECV] = xccl_ref(XCCL_BUF_RECV, 100);
    parts[0].at = 0;
    parts[1].child = &c2;
    parts[1].group = g2;
    parts[1].at = 1;
    ck_assert_int_eq(xccl_sched_zip(&parent, parts, 2), 0);
    ck_assert_int_eq(xccl_sched_finalize(&parent), 0);
    ck_assert_uint_eq(parent.rounds, 4);
    /* round 0: c1's own-block copy; 1: c1 step 1 + c2's own-block copy;
     * 2: c1 step 2 + c2 step 1; 3: c2 step 2; 4: c2 step 3 */
    ck_assert_uint_eq(parent.nsteps, 5);
    int per_step[5][2] = { { 0 } };    /* [step][child]: transfers */
    for (size_t st = 0; st < parent.nsteps; st++) {
        const size_t end = st + 1 < parent.nsteps ? parent.step_start[st + 1] : parent.nacts;
        ck_assert_uint_eq(parent.step_round[st], st);
        for (size_t i = parent.step_start[st]; i < end; i++) {
            const xccl_action_t *a = &parent.acts[i];
            if (XCCL_ACT_SEND == a->kind || XCCL_ACT_RECV == a->kind) {
                const int in1 = 1 == a->peer || 3 == a->peer, in2 = 0 == a->peer || 4 == a->peer || 5 == a->peer;
                ck_assert(in1 || in2);
                per_step[st][in2]++;
            }
        }
    }
    const int want[5][2] = { { 0, 0 }, { 2, 0 }, { 2, 2 }, { 0, 2 }, { 0, 2 } };
    for (int st = 0; st < 5; st++) {
        ck_assert_msg(per_step[st][0] == want[st][0] && per_step[st][1] == want[st][1],
                      "step %d: %d and %d transfers", st, per_step[st][0], per_step[st][1]);
    }
    /* flags: refused */
    xccl_sched_t f, q;
    xccl_sched_init(&f, 1, 3, 1);
    xccl_sched_step(&f);
    xccl_sched_post(&f, 1);
    ck_assert_int_eq(xccl_sched_finalize(&f), 0);
    xccl_sched_init(&q, 2, 6, 1);
    parts[0].child = &f;
    ck_assert_int_eq(xccl_sched_zip(&q, parts, 1), -1);
    ck_assert_int_eq(q.error, 1);
    xccl_sched_fini(&f);
    xccl_sched_fini(&q);
    xccl_sched_fini(&c1);
    xccl_sched_fini(&c2);
    xccl_sched_fini(&parent);
}
END_TEST

START_TEST(append_phases_run)
{
    const int p = 6;
    job_t j;
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        /* 1: bruck allgather of SEND (4 bytes) in {0,2,4} or {1,3,5} into RECV[0..12);
         * 2: ring allgather of those 12 bytes in the pairs (0,1), (2,3), (4,5) into RECV[12..36);
         * 3: ring allgather of SEND in {4,2,0} or {5,3,1} into RECV[36..48). */
        const int h = r & 1;
        int g1[3] = { h, h + 2, h + 4 }, g2[2] = { r & ~1, r | 1 }, g3[3] = { h + 4, h + 2, h };
        xccl_sched_t c;
        xccl_buf_map_t m1 = { { xccl_ref(XCCL_BUF_SEND, 0), xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SCRATCH, 0) } };
        xccl_buf_map_t m2 = { { xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_RECV, 12),
                                xccl_ref(XCCL_BUF_SCRATCH, 0) } };
        xccl_buf_map_t m3 = { { xccl_ref(XCCL_BUF_SEND, 0), xccl_ref(XCCL_BUF_RECV, 36),
                                xccl_ref(XCCL_BUF_SCRATCH, 0) } };
        xccl_sched_init(&c, r / 2, 3, 1);
        ck_assert_int_eq(xccl_build_allgather_bruck(&c, 4), 0);
        ck_assert_int_eq(xccl_sched_append(&j.sched[r], &c, g1, &m1), 0);
        xccl_sched_fini(&c);
        xccl_sched_init(&c, h, 2, 1);
        ck_assert_int_eq(xccl_build_allgather_ring(&c, 12), 0);
        ck_assert_int_eq(xccl_sched_append(&j.sched[r], &c, g2, &m2), 0);
        xccl_sched_fini(&c);
        xccl_sched_init(&c, 2 - r / 2, 3, 1);
        ck_assert_int_eq(xccl_build_allgather_ring(&c, 4), 0);
        ck_assert_int_eq(xccl_sched_append(&j.sched[r], &c, g3, &m3), 0);
        xccl_sched_fini(&c);
        ck_assert_int_eq(xccl_sched_finalize(&j.sched[r]), 0);
        j.rbuf[r] = xmalloc(48);
        j.sbuf[r] = xmalloc(4);
        j.sbuf_owned[r] = 1;
        for (int i = 0; i < 4; i++) {
            j.sbuf[r][i] = (unsigned char) (r * 10 + i);
        }
    }
    job_run(&j, NULL, "three phases");
    int bad = -1;
    for (int r = 0; r < p && bad < 0; r++) {
        for (int x = 0; x < 48 && bad < 0; x++) {
            int from;
            if (x < 12) {
                from = 2 * (x / 4) + (r & 1);                  /* RECV[4k + i]: rank 2k + h */
            } else if (x < 36) {
                from = 2 * (((x - 12) % 12) / 4) + (x - 12) / 12;  /* RECV[12 + 12h' + 4k + i]: 2k + h' */
            } else {
                from = (r & 1) + 4 - 2 * ((x - 36) / 4);       /* RECV[36 + 4k + i]: g3[k] */
            }
            if (j.rbuf[r][x] != (unsigned char) (from * 10 + x % 4)) {
                bad = r * 100 + x;
            }
        }
    }
    ck_assert_msg(bad < 0, "rank %d byte %d wrong", bad / 100, bad % 100);
    job_fini(&j);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Traffic between nodes (block placement: node of r is r / L)              */
/* ------------------------------------------------------------------------ */

typedef struct {
    size_t inter_sent, intra_sent, inter_msgs, inter_recvd;
} traffic_t;

static traffic_t traffic(const xccl_sched_t *s, int L)
{
    traffic_t t = { 0, 0, 0, 0 };
    for (size_t i = 0; i < s->nacts; i++) {
        const xccl_action_t *a = &s->acts[i];
        int inter = a->peer / L != s->rank / L;
        if (XCCL_ACT_SEND == a->kind) {
            if (inter) {
                t.inter_sent += a->len;
                t.inter_msgs++;
            } else {
                t.intra_sent += a->len;
            }
        } else if (XCCL_ACT_RECV == a->kind && inter) {
            t.inter_recvd += a->len;
        }
    }
    return t;
}

START_TEST(allreduce_traffic)
{
    static const int shapes[][2] = { { 2, 4 }, { 4, 8 }, { 8, 2 }, { 16, 8 }, { 3, 5 } };
    for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++) {
        const int N = shapes[sh][0], L = shapes[sh][1], p = N * L;
        const size_t es = 4, count = (size_t) p * 96, n = count * es;
        char spec[16];
        xccl_layout_t l;
        snprintf(spec, sizeof(spec), "block:%d", L);
        ck_assert_int_eq(xccl_layout_parse(&l, spec, p, NULL, 0), 0);
        int bad = -1;
        for (int r = 0; r < p && bad < 0; r++) {
            for (int a = 0; a < 2 && bad < 0; a++) {
                xccl_sched_t s;
                xccl_sched_init(&s, r, p, es);
                /* ring and Rabenseifner (power-of-two N) on the rails */
                xccl_allreduce_build_fn ar = a ? xccl_build_allreduce_rabenseifner : xccl_build_allreduce_ring;
                if (a && (N & (N - 1))) {
                    xccl_sched_fini(&s);
                    continue;
                }
                ck_assert_int_eq(xccl_build_hier_allreduce(&s, &l, count, 0, xccl_build_reduce_scatter_ring, ar,
                                                           xccl_build_allgatherv_ring), 0);
                traffic_t t = traffic(&s, L);
                /* 2 (N-1)/N n/L between nodes; ring inside: 2 (L-1)/L n. */
                if (t.inter_sent != 2 * (size_t) (N - 1) * n / ((size_t) N * L) ||
                    t.inter_recvd != t.inter_sent || t.intra_sent != 2 * (size_t) (L - 1) * n / (size_t) L) {
                    bad = r;
                }
                xccl_sched_fini(&s);
            }
        }
        ck_assert_msg(bad < 0, "%d x %d: rank %d's traffic", N, L, bad);
        xccl_layout_fini(&l);
    }
}
END_TEST

START_TEST(other_collectives_traffic)
{
    const int N = 4, L = 4, p = N * L;
    const size_t b = 64, es = 4, c = 24;
    xccl_layout_t l;
    ck_assert_int_eq(xccl_layout_parse(&l, "block:4", p, NULL, 0), 0);
    size_t counts[16];
    for (int r = 0; r < p; r++) {
        counts[r] = c;
    }
    for (int r = 0; r < p; r++) {
        xccl_sched_t s;
        traffic_t t;
        /* reduce_scatter: (N-1)/N of n/L between nodes, ring on the rails. */
        xccl_sched_init(&s, r, p, es);
        ck_assert_int_eq(xccl_build_hier_reduce_scatter(&s, &l, counts, 0, xccl_build_reduce_scatter_ring,
                                                        xccl_build_reduce_scatter_ring), 0);
        t = traffic(&s, L);
        ck_assert_uint_eq(t.inter_sent, (size_t) (N - 1) * L * c * es / (size_t) L);
        ck_assert_uint_eq(t.inter_msgs, N - 1);
        xccl_sched_fini(&s);
        /* alltoall: N-1 messages of L blocks between nodes. */
        xccl_sched_init(&s, r, p, 1);
        ck_assert_int_eq(xccl_build_hier_alltoall(&s, &l, b, 0, xccl_build_alltoall_pairwise,
                                                  xccl_build_alltoall_pairwise), 0);
        t = traffic(&s, L);
        ck_assert_uint_eq(t.inter_msgs, N - 1);
        ck_assert_uint_eq(t.inter_sent, (size_t) (N - 1) * L * b);
        xccl_sched_fini(&s);
        /* allgather: N-1 blocks out between nodes, (L-1) N blocks inside;
         * ring on the rails in N-1 messages, Bruck in lg N. */
        for (int bruck = 0; bruck < 2; bruck++) {
            xccl_sched_init(&s, r, p, 1);
            ck_assert_int_eq(xccl_build_hier_allgather_any(&s, &l, b, bruck ? xccl_build_allgatherv_bruck
                                                                           : xccl_build_allgatherv_ring,
                                                           xccl_build_allgatherv_ring), 0);
            t = traffic(&s, L);
            ck_assert_uint_eq(t.inter_sent, (size_t) (N - 1) * b);
            ck_assert_uint_eq(t.inter_msgs, bruck ? 2 : N - 1);
            ck_assert_uint_eq(t.intra_sent, (size_t) (L - 1) * N * b);
            xccl_sched_fini(&s);
        }
        /* alltoall, Bruck on the rails: lg N messages; each of the N-1
         * other nodes' L blocks travels once per set bit of its distance
         * (1, 2, 3 -> 4 hops of L blocks). */
        xccl_sched_init(&s, r, p, 1);
        ck_assert_int_eq(xccl_build_hier_alltoall_any(&s, &l, b, 0, xccl_build_alltoallv_pairwise,
                                                      xccl_build_alltoallv_bruck), 0);
        t = traffic(&s, L);
        ck_assert_uint_eq(t.inter_msgs, 2);
        ck_assert_uint_eq(t.inter_sent, 4 * (size_t) L * b);
        xccl_sched_fini(&s);
        xccl_sched_init(&s, r, p, 1);
        ck_assert_int_eq(xccl_build_hier_alltoall_any(&s, &l, b, 1, xccl_build_alltoallv_pairwise,
                                                      xccl_build_alltoallv_pairwise), 0);
        t = traffic(&s, L);
        ck_assert_uint_eq(t.inter_msgs, N - 1);
        ck_assert_uint_eq(t.inter_sent, (size_t) (N - 1) * L * b);
        xccl_sched_fini(&s);
        /* bcast, rails: piece j (n/L) arrives once on every other node. */
        xccl_sched_init(&s, r, p, 1);
        ck_assert_int_eq(xccl_build_hier_bcast_rails(&s, &l, 4096, 5, xccl_build_bcast_binomial,
                                                     xccl_build_allgatherv_ring), 0);
        t = traffic(&s, L);
        ck_assert_uint_eq(t.inter_recvd, r / L == 1 ? 0 : 4096 / L);
        xccl_sched_fini(&s);
        /* bcast, leaders: only the root's rail (local rank 1) crosses nodes. */
        xccl_sched_init(&s, r, p, 1);
        ck_assert_int_eq(xccl_build_hier_bcast(&s, &l, 4096, 5, xccl_build_bcast_binomial,
                                               xccl_build_bcast_binomial), 0);
        t = traffic(&s, L);
        ck_assert_uint_eq(t.inter_recvd, r % L != 1 || r / L == 1 ? 0 : 4096);
        xccl_sched_fini(&s);
    }
    xccl_layout_fini(&l);

    /* Uneven, 3 3 3 1 (block:3 of 10): L = 1, only the leaders cross nodes,
     * once per other node. */
    ck_assert_int_eq(xccl_layout_parse(&l, "block:3", 10, NULL, 0), 0);
    for (int r = 0; r < 10; r++) {
        xccl_sched_t s;
        traffic_t t;
        size_t cnt[10];
        for (int q = 0; q < 10; q++) {
            cnt[q] = c;
        }
        xccl_sched_init(&s, r, 10, 1);
        ck_assert_int_eq(xccl_build_hier_alltoall_any(&s, &l, b, 0, xccl_build_alltoallv_pairwise,
                                                      xccl_build_alltoallv_pairwise), 0);
        t = traffic(&s, 3);
        ck_assert_uint_eq(t.inter_msgs, r % 3 ? 0 : 3);
        xccl_sched_fini(&s);
        xccl_sched_init(&s, r, 10, es);
        ck_assert_int_eq(xccl_build_hier_reduce_scatter(&s, &l, cnt, 0, xccl_build_reduce_scatter_ring,
                                                        xccl_build_reduce_scatter_ring), 0);
        t = traffic(&s, 3);
        ck_assert_uint_eq(t.inter_msgs, r % 3 ? 0 : 3);
        xccl_sched_fini(&s);
    }
    xccl_layout_fini(&l);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Cost with intra- and inter-node links                                    */
/* ------------------------------------------------------------------------ */

static const xccl_cost_model_t intra_m = { 1e-6, 1e-11, 3e-11, 1e-11, 0, 0 };
static const xccl_cost_model_t inter_m = { 5e-6, 1e-10, 3e-11, 1e-11, 0, 0 };

START_TEST(cost_hier)
{
    xccl_layout_t one, four;
    ck_assert_int_eq(xccl_layout_parse(&one, "block:32", 32, NULL, 0), 0);
    ck_assert_int_eq(xccl_layout_parse(&four, "block:8", 32, NULL, 0), 0);
    /* One node: the flat model with intra's parameters, exactly. */
    for (int r = 0; r < 32; r += 7) {
        xccl_sched_t s;
        xccl_sched_init(&s, r, 32, 4);
        ck_assert_int_eq(xccl_build_allreduce_rabenseifner(&s, 10000), 0);
        double flat = xccl_sched_cost(&s, &intra_m), hier = xccl_sched_cost_hier(&s, &one, &intra_m, &inter_m);
        ck_assert_msg(fabs(flat - hier) <= 1e-12 * flat, "rank %d: %g vs %g", r, hier, flat);
        xccl_sched_fini(&s);
    }
    /* One step with one intra and one inter transfer: the slower link. */
    {
        xccl_sched_t s;
        xccl_sched_init(&s, 0, 32, 1);
        xccl_sched_step(&s);
        xccl_sched_send(&s, 1, xccl_ref(XCCL_BUF_SEND, 0), 1000);      /* same node */
        xccl_sched_send(&s, 8, xccl_ref(XCCL_BUF_SEND, 0), 100);       /* other node */
        xccl_sched_recv(&s, 9, xccl_ref(XCCL_BUF_RECV, 0), 300);
        xccl_sched_copy(&s, xccl_ref(XCCL_BUF_RECV, 0), xccl_ref(XCCL_BUF_SEND, 0), 50);
        ck_assert_int_eq(xccl_sched_finalize(&s), 0);
        double want_intra = intra_m.alpha + 1000 * intra_m.beta, want_inter = inter_m.alpha + 300 * inter_m.beta;
        double want = (want_intra > want_inter ? want_intra : want_inter) + 50 * intra_m.delta;
        double got = xccl_sched_cost_hier(&s, &four, &intra_m, &inter_m);
        ck_assert_msg(fabs(got - want) <= 1e-12 * want, "%g vs %g", got, want);
        xccl_sched_fini(&s);
    }
    /* 4 nodes of 8, 4 MB: the two-level allreduce beats every flat one when
     * the links between nodes are 10x slower; at 64 bytes the flat
     * recursive doubling (5 rounds) beats it. */
    const size_t big = 1u << 20, small = 16;
    double flat_best[2] = { 1e30, 1e30 }, hier_cost[2] = { 0, 0 };
    xccl_allreduce_build_fn flats[] = { xccl_build_allreduce_ring, xccl_build_allreduce_rabenseifner,
                                        xccl_build_allreduce_recursive_doubling };
    for (int z = 0; z < 2; z++) {
        size_t count = z ? small : big;
        for (int f = 0; f < 3; f++) {
            double worst = 0;
            for (int r = 0; r < 32; r++) {
                xccl_sched_t s;
                xccl_sched_init(&s, r, 32, 4);
                ck_assert_int_eq(flats[f](&s, count), 0);
                double c = xccl_sched_cost_hier(&s, &four, &intra_m, &inter_m);
                worst = c > worst ? c : worst;
                xccl_sched_fini(&s);
            }
            flat_best[z] = worst < flat_best[z] ? worst : flat_best[z];
        }
        for (int r = 0; r < 32; r++) {
            xccl_sched_t s;
            xccl_sched_init(&s, r, 32, 4);
            ck_assert_int_eq(xccl_build_hier_allreduce(&s, &four, count, 0, xccl_build_reduce_scatter_ring,
                                                       xccl_build_allreduce_ring, xccl_build_allgatherv_ring), 0);
            double c = xccl_sched_cost_hier(&s, &four, &intra_m, &inter_m);
            hier_cost[z] = c > hier_cost[z] ? c : hier_cost[z];
            xccl_sched_fini(&s);
        }
    }
    ck_assert_msg(hier_cost[0] < 0.7 * flat_best[0], "large: hier %g, best flat %g", hier_cost[0], flat_best[0]);
    ck_assert_msg(hier_cost[1] > flat_best[1], "small: hier %g, best flat %g", hier_cost[1], flat_best[1]);
    xccl_layout_fini(&one);
    xccl_layout_fini(&four);
}
END_TEST

typedef struct {
    const xccl_layout_t *l;
    size_t count;
    xccl_allreduce_build_fn inter;
} ar_arg_t;

static int build_hier_ar(xccl_sched_t *s, void *arg)
{
    const ar_arg_t *a = arg;
    return xccl_build_hier_allreduce(s, a->l, a->count, 0, xccl_build_reduce_scatter_ring, a->inter,
                                     xccl_build_allgatherv_ring);
}

static int build_hier_a2a_arg(xccl_sched_t *s, void *arg)
{
    const ar_arg_t *a = arg;
    return xccl_build_hier_alltoall(s, a->l, a->count, 0, xccl_build_alltoall_pairwise,
                                    xccl_build_alltoall_pairwise);
}

/* The seeds' rule falls out of the model: on the rails, ring for few nodes,
 * halving-doubling (Rabenseifner) for many, at a mid-size message. */
START_TEST(cost_picks_inter_algorithm)
{
    const size_t count = 16384;        /* 64 KiB of floats */
    double t[2][2];
    for (int z = 0; z < 2; z++) {
        xccl_layout_t l;
        ck_assert_int_eq(xccl_layout_parse(&l, "block:8", z ? 128 : 16, NULL, 0), 0);
        for (int a = 0; a < 2; a++) {
            ar_arg_t arg = { &l, count, a ? xccl_build_allreduce_rabenseifner : xccl_build_allreduce_ring };
            t[z][a] = xccl_predict_hier(&l, 4, build_hier_ar, &arg, NULL, 0, &intra_m, &inter_m);
            ck_assert_msg(t[z][a] > 0, "prediction failed");
        }
        /* Explicit sample = the default one above 64 ranks. */
        if (z) {
            const int sample[] = { 0, 64, 127, 0, 7, 120, 127, 1 };
            ar_arg_t arg = { &l, count, xccl_build_allreduce_ring };
            ck_assert(t[z][0] == xccl_predict_hier(&l, 4, build_hier_ar, &arg, sample, 8, &intra_m, &inter_m));
        }
        xccl_layout_fini(&l);
    }
    ck_assert_msg(t[0][0] <= t[0][1], "2 nodes: ring %g, rabenseifner %g", t[0][0], t[0][1]);
    ck_assert_msg(t[1][1] < t[1][0], "16 nodes: rabenseifner %g, ring %g", t[1][1], t[1][0]);
    /* Not applicable (regular-layout alltoall on uneven nodes): negative. */
    xccl_layout_t u;
    ck_assert_int_eq(xccl_layout_parse(&u, "block:3", 10, NULL, 0), 0);
    ar_arg_t arg = { &u, 8, NULL };
    ck_assert(xccl_predict_hier(&u, 1, build_hier_a2a_arg, &arg, NULL, 0, &intra_m, &inter_m) < 0);
    xccl_layout_fini(&u);
}
END_TEST

/* The pipelined allreduce with ring/nhr/ring stages in pipe_k chunks. */
static int build_pipe_ar(xccl_sched_t *s, void *arg)
{
    const ar_arg_t *a = arg;
    return xccl_build_pipe_allreduce(s, a->l, a->count, 0, 1, pipe_k, xccl_build_reduce_scatter_ring,
                                     xccl_build_allreduce_nhr, xccl_build_allgatherv_ring);
}

/* Steps of rank r's pipelined allreduce (pipe_k chunks) that carry both an
 * intra-node and an inter-node transfer. */
static int mixed_steps(const xccl_layout_t *l, size_t count, int r)
{
    xccl_sched_t s;
    xccl_sched_init(&s, r, l->size, 4);
    ck_assert_int_eq(0, xccl_build_pipe_allreduce(&s, l, count, 0, 1, pipe_k, xccl_build_reduce_scatter_ring,
                                                  xccl_build_allreduce_nhr, xccl_build_allgatherv_ring));
    int mixed = 0;
    for (size_t st = 0; st < s.nsteps; st++) {
        const size_t end = st + 1 < s.nsteps ? s.step_start[st + 1] : s.nacts;
        int cls[2] = { 0, 0 };
        for (size_t i = s.step_start[st]; i < end; i++) {
            const xccl_action_t *a = &s.acts[i];
            if (XCCL_ACT_SEND == a->kind || XCCL_ACT_RECV == a->kind) {
                cls[l->node_of[a->peer] != l->node_of[r]] = 1;
            }
        }
        mixed += cls[0] && cls[1];
    }
    xccl_sched_fini(&s);
    return mixed;
}

/* The cost model sees the overlap: in one chunk the pipelined allreduce is
 * hier's schedule (the same steps, the same prediction); in 16 chunks its
 * steps carry an intra-node and an inter-node transfer at once (each of
 * the 16 rail stages beside intra-node steps) and the prediction drops
 * below hier's, the two lanes' sum, but never below the slower lane.  The
 * executor waits for all of a step's transfers, so the overlap is step by
 * step: a step costs its slower transfer (the model's max of the link
 * classes), and with the defaults at 16 MiB the intra-node lane stays the
 * slower one. */
START_TEST(cost_sees_pipeline_overlap)
{
    /* the defaults: bandwidth-bound at 16 MiB */
    const xccl_cost_model_t im = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA, 0, 0 };
    const xccl_cost_model_t em = { XCCL_COST_INTER_ALPHA, XCCL_COST_INTER_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA, 0, 0 };
    const xccl_cost_model_t free_m = { 0, 0, 0, 0, 0, 0 };
    xccl_layout_t l;
    ck_assert_int_eq(xccl_layout_parse(&l, "block:8", 64, NULL, 0), 0);
    const size_t count = (size_t) 4 << 20;         /* 16 MiB of floats */
    ar_arg_t arg = { &l, count, xccl_build_allreduce_nhr };
    const double hier = xccl_predict_hier(&l, 4, build_hier_ar, &arg, NULL, 0, &im, &em);
    pipe_k = 1;
    const double one = xccl_predict_hier(&l, 4, build_pipe_ar, &arg, NULL, 0, &im, &em);
    ck_assert_int_eq(0, mixed_steps(&l, count, 0));
    pipe_k = 16;
    const double many = xccl_predict_hier(&l, 4, build_pipe_ar, &arg, NULL, 0, &im, &em);
    const int mixed = mixed_steps(&l, count, 0);
    pipe_k = 3;
    /* The lanes alone: the intra-node stages (inter-node transfers free)
     * and the inter-node stage (intra-node ones free). */
    const double intra_only = xccl_predict_hier(&l, 4, build_hier_ar, &arg, NULL, 0, &im, &free_m);
    const double inter_only = xccl_predict_hier(&l, 4, build_hier_ar, &arg, NULL, 0, &free_m, &em);
    const double slower = intra_only > inter_only ? intra_only : inter_only;
    ck_assert_msg(hier > 0 && one > 0 && many > 0, "prediction failed");
    ck_assert_msg(fabs(one - hier) <= 1e-9 * hier, "one chunk %g us, hier %g us", one * 1e6, hier * 1e6);
    /* nhr on 8 nodes: 6 rounds per chunk, each beside an intra-node step */
    ck_assert_msg(mixed >= 16 * 6, "16 chunks: %d steps of both kinds", mixed);
    ck_assert_msg(many < 0.97 * hier && many < 0.97 * (intra_only + inter_only) && many >= slower,
                  "16 chunks %g us, hier %g us, lanes %g + %g us", many * 1e6, hier * 1e6, intra_only * 1e6,
                  inter_only * 1e6);
    xccl_layout_fini(&l);
}
END_TEST


static int catalog_index(xccl_coll_t c, const char *name)
{
    int n;
    const xccl_algo_t *algos = xccl_coll_algos(c, &n);
    for (int i = 0; i < n; i++) {
        if (0 == strcmp(algos[i].name, name)) {
            return i;
        }
    }
    ck_abort_msg("%s not in the catalog of %s", name, xccl_coll_name(c));
    return -1;
}

/* The catalog as the component sees it: every algorithm of c predicted on
 * "block:8" of p ranks for a call of `bytes` (allgather: total received,
 * alltoall: total sent per rank, bcast: the message) with the default cost
 * constants, into t[0..*n) (negative: not applicable). */
static void predict_catalog(xccl_coll_t c, int p, size_t bytes, double *t, int *n)
{
    const xccl_cost_model_t intra = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA, 0, 0 };
    const xccl_cost_model_t inter = { XCCL_COST_INTER_ALPHA, XCCL_COST_INTER_BETA, XCCL_COST_GAMMA,
                                      XCCL_COST_DELTA, 0, 0 };
    xccl_layout_t l;
    ck_assert_int_eq(xccl_layout_parse(&l, "block:8", p, NULL, 0), 0);
    const xccl_algo_t *algos = xccl_coll_algos(c, n);
    cat_job_t j = { NULL, { .block = bytes / (size_t) p, .bytes = bytes, .root = 0, .layout = &l } };
    for (int i = 0; i < *n; i++) {
        j.algo = &algos[i];
        t[i] = xccl_predict_hier(&l, 1, build_cat, &j, NULL, 0, &intra, &inter);
    }
    xccl_layout_fini(&l);
}

/* With the default constants, the model chooses the inter-node stage of
 * allgather and alltoall as it does for allreduce: the log-depth one
 * (Bruck) on many nodes with small messages, ring / pairwise on few nodes
 * with large ones; and for bcast scatter_allgather on the rails for large
 * messages on many nodes, binomial otherwise.  "auto" is xccl_pick over
 * the whole catalog with the default margin, as the component does. */
START_TEST(cost_picks_inter_stage_defaults)
{
    static const struct {
        xccl_coll_t coll;
        int p;                 /* ranks, 8 per node */
        size_t bytes;
        const char *base, *other;      /* base: picked over other between the two */
        const char *auto_pick;         /* the whole catalog's choice, or NULL: not `other` */
    } cases[] = {
        { XCCL_COLL_ALLGATHER, 128, 64 << 10, "hier_bruck", "hier", "hier_bruck" },
        { XCCL_COLL_ALLGATHER, 512, 1 << 20, "hier_bruck", "hier", "hier_bruck" },
        { XCCL_COLL_ALLGATHER, 16, 16 << 20, "hier", "hier_bruck", "hier" },
        /* (the pipelined form overlaps hier_bruck's stages: 7.07 ms
         * predicted against hier's 7.41) */
        { XCCL_COLL_ALLGATHER, 32, 16 << 20, "hier", "hier_bruck", "pipeline" },
        { XCCL_COLL_ALLTOALL, 128, 1 << 10, "hier_bruck", "hier", "hier_bruck" },
        { XCCL_COLL_ALLTOALL, 512, 64 << 10, "hier_bruck", "hier", "hier_bruck" },
        { XCCL_COLL_ALLTOALL, 16, 1 << 20, "hier", "hier_bruck", NULL },
        { XCCL_COLL_ALLTOALL, 32, 16 << 20, "hier", "hier_bruck", NULL },
        { XCCL_COLL_BCAST, 128, 16 << 20, "hier_sag", "hier_rails", "hier_sag" },
        { XCCL_COLL_BCAST, 1024, 16 << 20, "hier_sag", "hier_rails", "hier_sag" },
        { XCCL_COLL_BCAST, 16, 16 << 20, "hier_rails", "hier_sag", "hier_rails" },
        { XCCL_COLL_BCAST, 128, 64 << 10, "hier_rails", "hier_sag", "hier_rails" },
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        double t[XCCL_CATALOG_MAX];
        int n;
        predict_catalog(cases[k].coll, cases[k].p, cases[k].bytes, t, &n);
        const int b = catalog_index(cases[k].coll, cases[k].base), o = catalog_index(cases[k].coll, cases[k].other);
        const xccl_algo_t *algos = xccl_coll_algos(cases[k].coll, &n);
        const int pick = xccl_pick(t, n, XCCL_MODEL_MARGIN);
        char what[160];
        snprintf(what, sizeof(what), "%s, %d nodes of 8, %zu bytes: %s %.1f us, %s %.1f us, auto %s",
                 xccl_coll_name(cases[k].coll), cases[k].p / 8, cases[k].bytes, cases[k].base, t[b] * 1e6,
                 cases[k].other, t[o] * 1e6, pick >= 0 ? algos[pick].name : "-");
        ck_assert_msg(t[b] > 0 && t[o] > 0 && t[b] < t[o], "%s", what);
        if (cases[k].auto_pick) {
            ck_assert_msg(pick >= 0 && 0 == strcmp(algos[pick].name, cases[k].auto_pick), "%s", what);
        } else {
            ck_assert_msg(pick != o, "%s", what);
        }
    }
}
END_TEST

int main(void)
{
    build_lays();
    Suite *su = suite_create("hier_algos");
    TCase *tc = tcase_create("sim");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, layout_matches_spec, 0, nlays);
    tcase_add_test(tc, layout_parse_errors);
    tcase_add_test(tc, append_translates_and_accounts);
    tcase_add_test(tc, append_phases_run);
    tcase_add_loop_test(tc, allreduce_layouts, 0, nlays);
    tcase_add_loop_test(tc, reduce_scatter_layouts, 0, nlays);
    tcase_add_loop_test(tc, allgather_layouts, 0, nlays);
    tcase_add_loop_test(tc, alltoall_layouts, 0, nlays);
    tcase_add_loop_test(tc, bcast_layouts, 0, nlays);
    tcase_add_loop_test(tc, big_layouts, 0, 3);
    tcase_add_loop_test(tc, allgatherv_flat, 0, (int) (sizeof(flat_sizes) / sizeof(flat_sizes[0])));
    tcase_add_loop_test(tc, alltoallv_flat, 0, (int) (sizeof(flat_sizes) / sizeof(flat_sizes[0])));
    tcase_add_test(tc, allreduce_traffic);
    tcase_add_test(tc, other_collectives_traffic);
    tcase_add_test(tc, cost_hier);
    tcase_add_test(tc, cost_picks_inter_algorithm);
    tcase_add_test(tc, cost_picks_inter_stage_defaults);
    suite_add_tcase(su, tc);
    /* the pipelined forms (CK_RUN_CASE=pipe runs them alone) */
    TCase *tp = tcase_create("pipe");
    tcase_set_timeout(tp, 300);
    tcase_add_loop_test(tp, pipe_layouts, 0, nlays);
    tcase_add_test(tp, pipe_big);
    tcase_add_test(tp, pipe_short_slots);
    tcase_add_test(tp, cost_sees_pipeline_overlap);
    tcase_add_test(tp, zip_places_steps_by_round);
    suite_add_tcase(su, tp);
    /* reduce and allgatherv (CK_RUN_CASE=rooted_v runs them alone) */
    TCase *tr = tcase_create("rooted_v");
    tcase_set_timeout(tr, 300);
    tcase_add_loop_test(tr, reduce_layouts, 0, nlays);
    tcase_add_loop_test(tr, allgatherv_layouts, 0, nlays);
    tcase_add_loop_test(tr, reduce_allgatherv_big, 0, 3);
    tcase_add_test(tr, cost_prices_reduce_allgatherv);
    suite_add_tcase(su, tr);
    return xccl_check_run(su);
}
