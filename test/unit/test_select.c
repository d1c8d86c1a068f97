/* Selection (algos/select.c): names, the fallback decision, forced ->
 * tuning rule -> cost model, and the per-communicator cache of choices and
 * schedules. */
#include "base/xccl_base.h"
#include "xccl_sched.h"
#include "xccl_layout.h"
#include "xccl_build.h"
#include "xccl_exec.h"
#include "xccl_sim.h"
#include "xccl_cost.h"
#include "xccl_tuning.h"
#include "xccl_catalog.h"
#include "xccl_select.h"

#include <check.h>
#include "check_main.h"
#include <stdlib.h>
#include <string.h>

static xccl_layout_t one_node(int p)
{
    xccl_layout_t l;
    int *id = calloc((size_t) p, sizeof(int));
    ck_assert_ptr_nonnull(id);
    ck_assert_int_eq(xccl_layout_init(&l, p, id), 0);
    free(id);
    return l;
}

START_TEST(names_and_indices)
{
    ck_assert_str_eq(xccl_select_name(XCCL_COLL_ALLREDUCE, XCCL_SEL_AUTO), "auto");
    ck_assert_str_eq(xccl_select_name(XCCL_COLL_BCAST, XCCL_SEL_FALLBACK), "fallback");
    ck_assert_str_eq(xccl_select_name(XCCL_COLL_ALLREDUCE, XCCL_SEL_FIRST), "ring");
    ck_assert_str_eq(xccl_select_name(XCCL_COLL_ALLTOALL, XCCL_SEL_FIRST), "pairwise");
    for (int c = 0; c < XCCL_NCOLL; c++) {
        int n;
        const xccl_algo_t *list = xccl_coll_algos((xccl_coll_t) c, &n);
        /* every catalog entry has an index, the last ones ("mesh") too */
        for (int i = 0; i < n; i++) {
            ck_assert_int_eq(xccl_select_index((xccl_coll_t) c, list[i].name), XCCL_SEL_FIRST + i);
        }
        ck_assert_ptr_null(xccl_select_name((xccl_coll_t) c, XCCL_SEL_FIRST + n));
        ck_assert_int_lt(XCCL_SEL_FIRST + n, XCCL_SEL_MAX + 1);
    }
    ck_assert_int_eq(xccl_select_index(XCCL_COLL_ALLREDUCE, "mesh"), XCCL_SEL_FIRST + 6);
    ck_assert_int_eq(xccl_select_index(XCCL_COLL_ALLREDUCE, "bruck"), -1);
    ck_assert_int_eq(xccl_select_index(XCCL_COLL_ALLREDUCE, NULL), -1);
}
END_TEST

START_TEST(fallback_decision)
{
    xccl_select_policy_t p;
    char err[128];
    xccl_select_policy_defaults(&p);
    p.small_bytes = 4096;
    ck_assert_str_eq(xccl_select_fallback(&p, XCCL_COLL_ALLREDUCE, 4, 8, 0), "small_message");
    ck_assert_ptr_null(xccl_select_fallback(&p, XCCL_COLL_ALLREDUCE, 4, 8, 1));
    ck_assert_ptr_null(xccl_select_fallback(&p, XCCL_COLL_ALLREDUCE, 4, 4096, 0));
    /* a forced algorithm runs at every size, a forced fallback never */
    p.forced[XCCL_COLL_ALLREDUCE] = XCCL_SEL_FIRST + 1;
    ck_assert_ptr_null(xccl_select_fallback(&p, XCCL_COLL_ALLREDUCE, 4, 8, 0));
    p.forced[XCCL_COLL_ALLREDUCE] = XCCL_SEL_FALLBACK;
    ck_assert_str_eq(xccl_select_fallback(&p, XCCL_COLL_ALLREDUCE, 4, 1 << 20, 1), "forced");
    p.forced[XCCL_COLL_ALLREDUCE] = XCCL_SEL_AUTO;
    /* a rule naming an algorithm keeps small messages; one saying fallback
     * sends large ones away */
    ck_assert_int_eq(xccl_tuning_parse("allreduce ranks=* bytes=0-1K algo=recursive_doubling\n"
                                       "allreduce ranks=* bytes=1M-* algo=fallback\n",
                                       &p.tuning, err, sizeof(err)), 0);
    ck_assert_int_eq(xccl_select_check_tuning(&p.tuning, err, sizeof(err)), 0);
    ck_assert_ptr_null(xccl_select_fallback(&p, XCCL_COLL_ALLREDUCE, 4, 8, 0));
    ck_assert_str_eq(xccl_select_fallback(&p, XCCL_COLL_ALLREDUCE, 4, 2 << 20, 0), "tuning_file");
    ck_assert_str_eq(xccl_select_fallback(&p, XCCL_COLL_ALLREDUCE, 4, 2048, 0), "small_message");
    ck_assert_int_eq(xccl_select_tuned(&p, XCCL_COLL_ALLREDUCE, 4, 100), XCCL_SEL_FIRST + 1);
    ck_assert_int_eq(xccl_select_tuned(&p, XCCL_COLL_BCAST, 4, 100), XCCL_SEL_AUTO);
    xccl_tuning_free(&p.tuning);
    /* rules are checked against the catalog */
    ck_assert_int_eq(xccl_tuning_parse("bcast ranks=* bytes=* algo=ring\n", &p.tuning, err,
                                       sizeof(err)), 0);
    ck_assert_int_eq(xccl_select_check_tuning(&p.tuning, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "line 1"));
    xccl_tuning_free(&p.tuning);
}
END_TEST

START_TEST(fallback_of_the_further_collectives)
{
    xccl_select_policy_t p;
    xccl_select_cache_t *c = calloc(1, sizeof(*c));
    char err[128];
    xccl_layout_t l = one_node(4);
    size_t vec[16] = { 0 };
    xccl_coll_args_t a = { .layout = &l, .vec = vec, .nvec = 16 };
    ck_assert_ptr_nonnull(c);
    xccl_select_policy_defaults(&p);
    p.small_bytes = 4096;
    /* without a form of the level or of peer access: the fallback at every
     * size, unless it would be wrong or an algorithm is forced */
    const xccl_coll_t further[] = { XCCL_COLL_REDUCE, XCCL_COLL_ALLGATHERV, XCCL_COLL_ALLTOALLV,
                                    XCCL_COLL_GATHER, XCCL_COLL_GATHERV, XCCL_COLL_SCATTER,
                                    XCCL_COLL_SCATTERV };
    for (size_t i = 0; i < sizeof(further) / sizeof(further[0]); i++) {
        const xccl_coll_t k = further[i];
        ck_assert(!xccl_coll_level(k) && !xccl_coll_peer(k));
        ck_assert_str_eq(xccl_select_fallback(&p, k, 4, 8, 0), "not_faster");
        ck_assert_str_eq(xccl_select_fallback(&p, k, 4, 64 << 20, 0), "not_faster");
        ck_assert_ptr_null(xccl_select_fallback(&p, k, 4, 64 << 20, 1));
        p.forced[k] = XCCL_SEL_FIRST;
        ck_assert_ptr_null(xccl_select_fallback(&p, k, 4, 8, 0));
        p.forced[k] = XCCL_SEL_AUTO;
    }
    /* barrier is the level's: small (0 bytes) like the six */
    ck_assert(xccl_coll_level(XCCL_COLL_BARRIER) && !xccl_coll_peer(XCCL_COLL_BARRIER));
    ck_assert_str_eq(xccl_select_fallback(&p, XCCL_COLL_BARRIER, 4, 0, 0), "small_message");
    /* across nodes: allgatherv from 256 KiB received, reduce from 1 MiB
     * but where the fallback has two levels of its own (han) */
    for (int han = 0; han < 2; han++) {
        ck_assert(xccl_select_across_nodes(XCCL_COLL_ALLGATHERV, 256 << 10, han));
        ck_assert(!xccl_select_across_nodes(XCCL_COLL_ALLGATHERV, (256 << 10) - 1, han));
        ck_assert_int_eq(xccl_select_across_nodes(XCCL_COLL_REDUCE, 1 << 20, han), !han);
        ck_assert(!xccl_select_across_nodes(XCCL_COLL_REDUCE, (1 << 20) - 1, han));
        ck_assert(!xccl_select_across_nodes(XCCL_COLL_ALLTOALLV, 64 << 20, han));
    }
    /* a rule may name an algorithm by size, but never by the sizes that
     * differ between ranks */
    ck_assert_int_eq(xccl_tuning_parse("reduce ranks=* bytes=1K-* algo=rabenseifner\n"
                                       "alltoallv ranks=* bytes=1K-* algo=direct\n",
                                       &p.tuning, err, sizeof(err)), 0);
    ck_assert_int_eq(xccl_select_check_tuning(&p.tuning, err, sizeof(err)), 0);
    ck_assert_ptr_null(xccl_select_fallback(&p, XCCL_COLL_REDUCE, 4, 4096, 0));
    ck_assert_str_eq(xccl_select_fallback(&p, XCCL_COLL_REDUCE, 4, 8, 0), "not_faster");
    ck_assert_str_eq(xccl_select_fallback(&p, XCCL_COLL_ALLTOALLV, 4, 4096, 0), "not_faster");
    /* kept where the fallback is wrong (alltoallv in place): the first
     * algorithm, whatever the size and the rules */
    xccl_selection_t s = xccl_select_algo(&p, c, XCCL_COLL_ALLTOALLV, &a, 4, 4096, 1);
    ck_assert_int_eq(s.algo, XCCL_SEL_FIRST);
    ck_assert_int_eq(s.by, XCCL_BY_FIRST);
    s = xccl_select_algo(&p, c, XCCL_COLL_REDUCE, &a, 4, 4096, 4);
    ck_assert_int_eq(s.algo, xccl_select_index(XCCL_COLL_REDUCE, "rabenseifner"));
    ck_assert_int_eq(s.by, XCCL_BY_TUNING);
    p.forced[XCCL_COLL_GATHERV] = XCCL_SEL_FIRST;
    s = xccl_select_algo(&p, c, XCCL_COLL_GATHERV, &a, 4, 4096, 1);
    ck_assert_int_eq(s.by, XCCL_BY_FORCE);
    xccl_tuning_free(&p.tuning);
    xccl_select_cache_fini(c);
    free(c);
    xccl_layout_fini(&l);
}
END_TEST

/* The rooted collectives over the transport (no segment): the root in
 * place and the other ranks (never in place there) pick the same
 * algorithm by the model, at every size and root. */
START_TEST(rooted_in_place_alike)
{
    static const xccl_coll_t colls[] = { XCCL_COLL_REDUCE, XCCL_COLL_GATHER, XCCL_COLL_SCATTER };
    xccl_select_policy_t p;
    xccl_layout_t l = one_node(4);
    xccl_select_policy_defaults(&p);
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
        for (size_t n = 1; n <= ((size_t) 1 << 24); n *= 4) {
            for (int root = 0; root < 4; root++) {
                int picked[2];
                for (int in_place = 0; in_place < 2; in_place++) {
                    xccl_select_cache_t *c = calloc(1, sizeof(*c));
                    ck_assert_ptr_nonnull(c);
                    xccl_coll_args_t a = { .count = n, .block = n, .bytes = 4 * n, .root = root,
                                           .in_place = in_place, .layout = &l };
                    picked[in_place] = xccl_select_algo(&p, c, colls[i], &a, 4, 4 * n, 4).algo;
                    free(c);
                }
                ck_assert_msg(picked[0] == picked[1], "%s n=%zu root=%d: %s in place, %s not",
                              xccl_coll_name(colls[i]), n, root, xccl_select_name(colls[i], picked[1]),
                              xccl_select_name(colls[i], picked[0]));
            }
        }
    }
    xccl_layout_fini(&l);
}
END_TEST

START_TEST(forced_then_rule_then_model)
{
    xccl_select_policy_t p;
    xccl_select_cache_t *c = calloc(1, sizeof(*c));
    char err[128];
    xccl_layout_t l = one_node(4);
    xccl_coll_args_t a = { .count = 1 << 20, .layout = &l, .segment = XCCL_RING_SEGMENT };
    ck_assert_ptr_nonnull(c);
    xccl_select_policy_defaults(&p);

    /* the model: what xccl_select_model picks, decided once per size class */
    double t[XCCL_CATALOG_MAX];
    int n, best = xccl_select_model(&p, XCCL_COLL_ALLREDUCE, &a, 4, t, &n);
    ck_assert_int_ge(best, XCCL_SEL_FIRST);
    ck_assert_int_eq(best - XCCL_SEL_FIRST, xccl_pick(t, n, p.margin));
    /* mesh does not apply without peer access */
    ck_assert(t[xccl_select_index(XCCL_COLL_ALLREDUCE, "mesh") - XCCL_SEL_FIRST] < 0);
    xccl_selection_t s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 4 << 20, 4);
    ck_assert_int_eq(s.algo, best);
    ck_assert_int_eq(s.by, XCCL_BY_MODEL);
    ck_assert_int_eq(s.fresh, 1);
    ck_assert(s.predicted_us > 0);
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 4 << 20, 4);
    ck_assert_int_eq(s.fresh, 0);
    ck_assert_int_eq(s.algo, best);
    /* the cache decides per size class: plant another choice, it is used */
    c->algo[XCCL_COLL_ALLREDUCE][23][0] = XCCL_SEL_FIRST + 2;
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, (4 << 20) + 8, 4);
    ck_assert_int_eq(s.algo, XCCL_SEL_FIRST + 2);
    /* ... and per layout of the call: in place is its own entry */
    a.in_place = 1;
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, (4 << 20) + 8, 4);
    ck_assert_int_eq(s.fresh, 1);
    a.in_place = 0;

    /* a rule wins over the model, a forced algorithm over both */
    ck_assert_int_eq(xccl_tuning_parse("allreduce ranks=* bytes=* algo=swing\n", &p.tuning, err,
                                       sizeof(err)), 0);
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 4 << 20, 4);
    ck_assert_int_eq(s.algo, xccl_select_index(XCCL_COLL_ALLREDUCE, "swing"));
    ck_assert_int_eq(s.by, XCCL_BY_TUNING);
    ck_assert(s.predicted_us < 0);
    p.forced[XCCL_COLL_ALLREDUCE] = xccl_select_index(XCCL_COLL_ALLREDUCE, "rabenseifner");
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 4 << 20, 4);
    ck_assert_int_eq(s.algo, p.forced[XCCL_COLL_ALLREDUCE]);
    ck_assert_int_eq(s.by, XCCL_BY_FORCE);
    xccl_tuning_free(&p.tuning);
    xccl_select_cache_fini(c);
    free(c);
    xccl_layout_fini(&l);
}
END_TEST

/* The policy's network (coll_xccl_net) reaches the model's
 * prediction: parsed by xccl_net_parse as xccl_simulate -N parses it, a
 * 4:1 fat tree of 2-node leaves slows Rabenseifner's far partners at 64
 * ranks on nodes of 8, 16 MiB, more than twice, and not ring (one flow per
 * node); one NIC per node on a 4x2 torus slows Rabenseifner, whose 8
 * ranks of a node all send between nodes at once; a torus with no room
 * for the 8 nodes is priced as none. */
START_TEST(policy_net_reaches_the_model)
{
    xccl_select_policy_t pol;
    xccl_select_policy_defaults(&pol);
    xccl_layout_t l;
    char err[128];
    ck_assert_int_eq(xccl_layout_parse(&l, "block:8", 64, err, sizeof(err)), 0);
    xccl_coll_args_t a = { .count = (size_t) 4 << 20, .layout = &l, .segment = XCCL_RING_SEGMENT };
    const int ring = xccl_select_index(XCCL_COLL_ALLREDUCE, "ring") - XCCL_SEL_FIRST;
    const int rab = xccl_select_index(XCCL_COLL_ALLREDUCE, "rabenseifner") - XCCL_SEL_FIRST;
    double none[XCCL_CATALOG_MAX], tree[XCCL_CATALOG_MAX], small[XCCL_CATALOG_MAX];
    int n;
    (void) xccl_select_model(&pol, XCCL_COLL_ALLREDUCE, &a, 4, none, &n);
    ck_assert_int_eq(0, xccl_net_parse(&pol.net, "fattree:2:4", err, sizeof(err)));
    (void) xccl_select_model(&pol, XCCL_COLL_ALLREDUCE, &a, 4, tree, &n);
    ck_assert_msg(tree[rab] > 2 * none[rab] && tree[ring] < 1.01 * none[ring],
                  "rabenseifner %g -> %g us, ring %g -> %g us", none[rab] * 1e6, tree[rab] * 1e6,
                  none[ring] * 1e6, tree[ring] * 1e6);
    /* one NIC per node on a torus that fits: Rabenseifner's 8 flows of a
     * node share it */
    ck_assert_int_eq(0, xccl_net_parse(&pol.net, "torus:4x2,nics=1", err, sizeof(err)));
    (void) xccl_select_model(&pol, XCCL_COLL_ALLREDUCE, &a, 4, tree, &n);
    ck_assert_msg(tree[rab] > 4 * none[rab], "rabenseifner %g -> %g us", none[rab] * 1e6, tree[rab] * 1e6);
    ck_assert_int_eq(0, xccl_net_parse(&pol.net, "torus:2x2,nics=1", err, sizeof(err)));
    (void) xccl_select_model(&pol, XCCL_COLL_ALLREDUCE, &a, 4, small, &n);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(small[i] == none[i], "algorithm %d: %g against %g us", i, small[i] * 1e6, none[i] * 1e6);
    }
    xccl_layout_fini(&l);
}
END_TEST

static int same_ref(xccl_ref_t x, xccl_ref_t y)
{
    return x.buf == y.buf && x.off == y.off && x.peer_plus1 == y.peer_plus1;
}

static int same_action(const xccl_action_t *x, const xccl_action_t *y)
{
    return x->kind == y->kind && x->peer == y->peer && x->idx == y->idx && x->len == y->len &&
           same_ref(x->a, y->a) && same_ref(x->b, y->b) && same_ref(x->dst, y->dst);
}

START_TEST(schedules_are_kept_while_arguments_repeat)
{
    xccl_select_cache_t *c = calloc(1, sizeof(*c));
    xccl_layout_t l = one_node(4);
    size_t counts[4] = { 3, 0, 5, 7 };
    xccl_coll_args_t a = { .counts = counts, .layout = &l };
    const int rs = XCCL_SEL_FIRST;     /* reduce_scatter ring */
    int used;
    ck_assert_ptr_nonnull(c);

    const xccl_sched_t *s1 = xccl_select_schedule(c, XCCL_COLL_REDUCE_SCATTER, rs, &a, 1, 4, 4, &used);
    ck_assert_ptr_nonnull(s1);
    ck_assert_int_eq(used, rs);
    const xccl_sched_t *s2 = xccl_select_schedule(c, XCCL_COLL_REDUCE_SCATTER, rs, &a, 1, 4, 4, &used);
    ck_assert_ptr_eq(s1, s2);
    ck_assert_uint_eq(c->hits, 1);
    ck_assert_uint_eq(c->builds, 1);
    /* other counts (the same array, changed): another schedule */
    counts[1] = 1;
    const xccl_sched_t *s3 = xccl_select_schedule(c, XCCL_COLL_REDUCE_SCATTER, rs, &a, 1, 4, 4, &used);
    ck_assert_ptr_ne(s3, s1);
    ck_assert_uint_eq(c->builds, 2);
    /* a two-level algorithm on one node: the first one is built instead */
    const int hier = xccl_select_index(XCCL_COLL_REDUCE_SCATTER, "hier");
    const xccl_sched_t *s4 = xccl_select_schedule(c, XCCL_COLL_REDUCE_SCATTER, hier, &a, 1, 4, 4, &used);
    ck_assert_int_eq(used, rs);
    ck_assert_str_eq(s4->algo, "ring");

    /* Enough other calls push s1 out of the cache; its user still holds it. */
    xccl_sched_t fresh;
    counts[1] = 0;
    xccl_sched_init(&fresh, 1, 4, 4);
    ck_assert_int_eq(xccl_build_reduce_scatter_ring(&fresh, counts, 0), 0);
    for (int k = 0; k < XCCL_SEL_SCHEDS + 2; k++) {
        xccl_coll_args_t b = { .count = 100 + (size_t) k, .layout = &l };
        const xccl_sched_t *t = xccl_select_schedule(c, XCCL_COLL_ALLREDUCE, XCCL_SEL_FIRST, &b, 1,
                                                     4, 4, &used);
        ck_assert_ptr_nonnull(t);
        xccl_select_put(t);
    }
    ck_assert_uint_eq(s1->nacts, fresh.nacts);
    ck_assert_uint_eq(s1->nsteps, fresh.nsteps);
    for (size_t i = 0; i < fresh.nacts; i++) {
        ck_assert_msg(same_action(&s1->acts[i], &fresh.acts[i]), "action %zu differs", i);
    }
    xccl_sched_fini(&fresh);
    /* the same arguments again: built anew, s1 is gone from the cache */
    const xccl_sched_t *s5 = xccl_select_schedule(c, XCCL_COLL_REDUCE_SCATTER, rs, &a, 1, 4, 4, &used);
    ck_assert_ptr_ne(s5, s1);
    xccl_select_put(s1);
    xccl_select_put(s2);
    xccl_select_put(s3);
    xccl_select_put(s4);
    xccl_select_put(s5);
    /* without a cache: built, handed out, freed at the put */
    const xccl_sched_t *s6 = xccl_select_schedule(NULL, XCCL_COLL_BCAST, XCCL_SEL_FIRST,
                                                  &(xccl_coll_args_t) { .bytes = 64, .root = 2 },
                                                  0, 4, 1, &used);
    ck_assert_ptr_nonnull(s6);
    xccl_select_put(s6);
    xccl_select_cache_fini(c);
    free(c);
    xccl_layout_fini(&l);
}
END_TEST

/* The node segment (args.shm_slot): a schedule built without it is not
 * handed out for a call with it (the two-level algorithms take shm intra
 * stages then), and the model, with the default policy, prefers the
 * latency path for small allreduces on one node. */
START_TEST(shm_slot_in_cache_key_and_model)
{
    xccl_select_cache_t *c = calloc(1, sizeof(*c));
    xccl_layout_t two;
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(xccl_layout_parse(&two, "block:4", 8, NULL, 0), 0);
    xccl_coll_args_t a = { .count = 1000, .layout = &two };
    const int hier = xccl_select_index(XCCL_COLL_ALLREDUCE, "hier");
    int used;
    const xccl_sched_t *s0 = xccl_select_schedule(c, XCCL_COLL_ALLREDUCE, hier, &a, 1, 8, 4, &used);
    a.shm_slot = 65536;
    const xccl_sched_t *s1 = xccl_select_schedule(c, XCCL_COLL_ALLREDUCE, hier, &a, 1, 8, 4, &used);
    ck_assert_ptr_nonnull(s0);
    ck_assert_ptr_nonnull(s1);
    ck_assert_ptr_ne(s0, s1);
    ck_assert_uint_eq(s0->slot_bytes, 0);
    ck_assert(s1->slot_bytes > 0 && s1->slot_bytes <= 65536);
    xccl_select_put(s0);
    xccl_select_put(s1);

    xccl_select_policy_t p;
    xccl_select_policy_defaults(&p);
    ck_assert(p.intra.flag > 0 && p.intra.peer > 0 && 0 == p.inter.flag);
    for (int n = 2; n <= 8; n *= 2) {
        xccl_layout_t one = one_node(n);
        xccl_coll_args_t b = { .count = 2, .layout = &one, .shm_slot = 1 << 20 };
        double t[XCCL_CATALOG_MAX];
        int k, best = xccl_select_model(&p, XCCL_COLL_ALLREDUCE, &b, 4, t, &k);
        ck_assert_str_eq(xccl_select_name(XCCL_COLL_ALLREDUCE, best), "shm_small");
        b.shm_slot = 0;                /* no segment: never shm */
        best = xccl_select_model(&p, XCCL_COLL_ALLREDUCE, &b, 4, t, &k);
        ck_assert_int_ne(strncmp(xccl_select_name(XCCL_COLL_ALLREDUCE, best), "shm", 3), 0);
        xccl_layout_fini(&one);
    }
    xccl_select_cache_fini(c);
    free(c);
    xccl_layout_fini(&two);
}
END_TEST

/* Allreduce's whole-vector form (shm_small) ends at 4 KiB at np 2, 8 KiB
 * at np 3-7, and shrinks with the node's rank count from np 8
 * (xccl_select_whole_max): every rank reduces (n - 1) x bytes there;
 * (n - 3) x bytes <= 32 KiB. */
START_TEST(shm_small_shrinks_with_ranks)
{
    xccl_select_policy_t p;
    xccl_select_policy_defaults(&p);
    static const struct {
        int n;
        size_t bytes;
        const char *want;
    } cases[] = {
        { 2, 4096, "shm_small" },  { 2, 4097, "shm" },      { 2, 32768, "shm" },
        { 3, 8192, "shm_small" },  { 3, 8193, "shm" },      { 4, 8192, "shm_small" },
        { 4, 8193, "shm" },        { 7, 8192, "shm_small" },
        { 8, 6553, "shm_small" },  { 8, 6554, "shm" },      { 8, 16384, "shm" },
        { 16, 2520, "shm_small" }, { 16, 2521, "shm" },     { 16, 4096, "shm" },
        { 16, 8, "shm_small" },    { 64, 8, "shm_small" },  { 64, 4096, "shm" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        xccl_select_cache_t *c = calloc(1, sizeof(*c));
        xccl_layout_t one = one_node(cases[i].n);
        ck_assert_ptr_nonnull(c);
        xccl_coll_args_t a = { .count = 2, .layout = &one, .shm_slot = 1 << 20 };
        xccl_selection_t s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, cases[i].n, cases[i].bytes, 4);
        ck_assert_msg(0 == strcmp(xccl_select_name(XCCL_COLL_ALLREDUCE, s.algo), cases[i].want),
                      "np %d, %zu B: %s, want %s", cases[i].n, cases[i].bytes,
                      xccl_select_name(XCCL_COLL_ALLREDUCE, s.algo), cases[i].want);
        xccl_select_cache_fini(c);
        free(c);
        xccl_layout_fini(&one);
    }
}
END_TEST

/* Inside the shared-memory level of one node a measured rule chooses
 * (select.c shm_rule); a forced algorithm and tuning rules still win;
 * off the level (no slot, several nodes) the model decides, and its
 * choices are kept apart from those made with the level. */
START_TEST(shm_level_rule)
{
    xccl_select_policy_t p;
    xccl_select_cache_t *c = calloc(1, sizeof(*c));
    xccl_layout_t one = one_node(4), two;
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(xccl_layout_parse(&two, "block:2", 4, NULL, 0), 0);
    xccl_select_policy_defaults(&p);
    static const struct {
        xccl_coll_t coll;
        size_t bytes;
        int peer_access;
        const char *want;
    } cases[] = {
        { XCCL_COLL_ALLREDUCE, 8, 0, "shm_small" },
        { XCCL_COLL_ALLREDUCE, 8192, 0, "shm_small" },
        { XCCL_COLL_ALLREDUCE, 8193, 0, "shm" },
        { XCCL_COLL_ALLREDUCE, 16 << 20, 0, "shm" },
        { XCCL_COLL_REDUCE_SCATTER, 8, 0, "shm" },
        { XCCL_COLL_REDUCE_SCATTER_BLOCK, 16 << 20, 0, "shm" },
        { XCCL_COLL_ALLGATHER, 4096, 1, "shm" },
        { XCCL_COLL_ALLGATHER, 32768, 1, "shm" },
        { XCCL_COLL_ALLGATHER, 32768, 0, "shm" },
        { XCCL_COLL_ALLTOALL, 1 << 20, 1, "shm" },
        { XCCL_COLL_BCAST, 1 << 20, 0, "shm" },
        { XCCL_COLL_BCAST, 16 << 20, 1, "shm" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        xccl_coll_args_t a = { .count = 2, .layout = &one, .shm_slot = 1 << 20,
                               .peer_access = cases[i].peer_access };
        xccl_selection_t s = xccl_select_algo(&p, c, cases[i].coll, &a, 4, cases[i].bytes, 4);
        ck_assert_msg(0 == strcmp(xccl_select_name(cases[i].coll, s.algo), cases[i].want),
                      "case %zu: %s %zu B: %s, want %s", i, xccl_coll_name(cases[i].coll),
                      cases[i].bytes, xccl_select_name(cases[i].coll, s.algo), cases[i].want);
        ck_assert_int_eq(s.by, XCCL_BY_LEVEL);
    }
    /* several nodes, or no slot: the model */
    xccl_coll_args_t a = { .count = 1 << 18, .layout = &two, .shm_slot = 1 << 20 };
    xccl_selection_t s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 1 << 20, 4);
    ck_assert_int_eq(s.by, XCCL_BY_MODEL);
    const int with_level = s.algo;
    a.layout = &one;
    a.shm_slot = 0;
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 1 << 20, 4);
    ck_assert_int_eq(s.by, XCCL_BY_MODEL);
    ck_assert_int_ne(strncmp(xccl_select_name(XCCL_COLL_ALLREDUCE, s.algo), "shm", 3), 0);
    /* the level's choice of the two-node call is its own cache entry */
    a.layout = &two;
    c->algo[XCCL_COLL_ALLREDUCE][21][0] = XCCL_SEL_FIRST + 2;
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 1 << 20, 4);
    ck_assert_int_eq(s.algo, XCCL_SEL_FIRST + 2);
    a.shm_slot = 1 << 20;
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 1 << 20, 4);
    ck_assert_int_eq(s.algo, with_level);
    /* forced wins over the level */
    a.layout = &one;
    p.forced[XCCL_COLL_ALLREDUCE] = xccl_select_index(XCCL_COLL_ALLREDUCE, "ring");
    s = xccl_select_algo(&p, c, XCCL_COLL_ALLREDUCE, &a, 4, 8, 4);
    ck_assert_int_eq(s.by, XCCL_BY_FORCE);
    xccl_select_cache_fini(c);
    free(c);
    xccl_layout_fini(&one);
    xccl_layout_fini(&two);
}
END_TEST

/* Level trials (xccl_trial_t): where shm and mesh both apply (a->trial,
 * peer access), the calls of a collective and size class run shm, mesh,
 * shm, mesh untimed, then blocks of three calls of one candidate, shm's
 * first, each block's first call untimed (large classes: blocks of four,
 * the first two untimed); the pick is the lower of the
 * agreed medians (of each call's span, last start to last end; a tie:
 * shm; noisy trials too) and stays.  Each class has its own trial; large ones are
 * shorter, noisy ones longer; without a->trial, peer access or policy
 * trials the rule stands; forced and tuning rules win. */
static xccl_selection_t trial_sel(const xccl_select_policy_t *p, xccl_select_cache_t *c,
                                  xccl_coll_t coll, size_t bytes, int trial, int peer)
{
    xccl_layout_t one = one_node(4);
    xccl_coll_args_t a = { .count = 2, .layout = &one, .shm_slot = 1 << 20, .peer_access = peer,
                           .trial = trial };
    xccl_selection_t s = xccl_select_algo(p, c, coll, &a, 4, bytes, 1);
    xccl_layout_fini(&one);
    return s;
}

/* Runs one trial to its end: the calls must follow seq ('s' shm, 'm'
 * mesh; upper case: timed), the timed calls of each candidate take
 * t_shm[k] and t_mesh[k] in turn, the untimed ones 5 ms (a median that
 * took one would show it); call i starts at 10 ms x i plus late[i] (late
 * NULL: 0).  Returns the trial (decided by the caller). */
static xccl_trial_t *run_trial_late(const xccl_select_policy_t *p, xccl_select_cache_t *c,
                                    xccl_coll_t coll, size_t bytes, int mode, const char *seq,
                                    const uint64_t *t_shm, const uint64_t *t_mesh,
                                    const uint64_t *late)
{
    const int shm = xccl_select_index(coll, "shm"), mesh = xccl_select_index(coll, "mesh");
    const int n = (int) strlen(seq);
    int ks = 0, km = 0;
    xccl_trial_t *t = NULL;
    for (int i = 0; i < n; i++) {
        xccl_selection_t s = trial_sel(p, c, coll, bytes, mode, 1);
        ck_assert_int_eq(s.by, XCCL_BY_TRIAL);
        ck_assert_ptr_nonnull(s.trial);
        const char want = seq[i];
        ck_assert_msg(s.algo == ('s' == (want | 0x20) ? shm : mesh), "call %d of %s: algo %d", i,
                      seq, s.algo);
        uint64_t ns = 5000000;
        if ('S' == want) {
            ns = t_shm[ks++];
        } else if ('M' == want) {
            ns = t_mesh[km++];
        }
        const uint64_t t0 = 10000000u * (uint64_t) i + (late ? late[i] : 0);
        t = s.trial;
        /* the ranks agree at the last call, and at the early check after
         * the first block of each candidate where more blocks follow */
        const int per = t->block - t->untimed;
        const int check = !t->noisy && t->samples > per && i == t->warm + 2 * t->block - 1;
        ck_assert_int_eq(xccl_trial_record(s.trial, t0, t0 + ns), i == n - 1 || check);
        ck_assert_int_eq(t->have, check ? per : i == n - 1 ? t->samples : t->have);
    }
    return t;
}

/* What the component's agreement does with one more rank's readings: the
 * MAX, element by element, into last. */
static void agree_max(uint64_t last[2][2][XCCL_TRIAL_MAX], const xccl_trial_t *t)
{
    for (int e = 0; e < 2; e++) {
        for (int j = 0; j < 2; j++) {
            for (int i = 0; i < XCCL_TRIAL_MAX; i++) {
                last[e][j][i] = t->at[e][j][i] > last[e][j][i] ? t->at[e][j][i] : last[e][j][i];
            }
        }
    }
}

static xccl_trial_t *run_trial(const xccl_select_policy_t *p, xccl_select_cache_t *c,
                               xccl_coll_t coll, size_t bytes, int mode, const char *seq,
                               const uint64_t *t_shm, const uint64_t *t_mesh)
{
    return run_trial_late(p, c, coll, bytes, mode, seq, t_shm, t_mesh, NULL);
}

/* The early check (xccl_trial_clear): after the first block of each
 * candidate the ranks agree, and where every span of one is at least
 * XCCL_TRIAL_CLEAR times every span of the other, the faster is the pick;
 * else the trial runs to its end.  Noisy trials have no check. */
START_TEST(level_trials_early)
{
    xccl_select_policy_t p;
    xccl_select_policy_defaults(&p);
    p.trials = 5;
    const xccl_coll_t ag = XCCL_COLL_ALLGATHER;
    const int shm = xccl_select_index(ag, "shm"), mesh = xccl_select_index(ag, "mesh");
    const char *first = "smsm" "sSSmMM";        /* up to the check */
    struct {
        uint64_t s[2], m[2];
        int pick;                                /* 0: not clear */
    } cases[] = {
        { { 100, 110 }, { 200, 190 }, 1 },     /* mesh 1.73x shm's slowest */
        { { 300, 310 }, { 100, 120 }, 2 },     /* shm 2.5x */
        { { 100, 150 }, { 200, 190 }, 0 },     /* 190 < 1.5 x 150 */
        { { 100, 400 }, { 200, 210 }, 0 },     /* a slow shm call: not clear either way */
        { { 100, 100 }, { 150, 150 }, 1 },     /* exactly the margin */
        { { 100, 100 }, { 149, 190 }, 0 },     /* one mesh call under it */
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        xccl_select_cache_t *c = calloc(1, sizeof(*c));
        ck_assert_ptr_nonnull(c);
        const int mode = XCCL_TRIAL_QUIET;
        xccl_trial_t *t = run_trial(&p, c, ag, 65536, mode, first, cases[k].s, cases[k].m);
        ck_assert_int_eq(t->have, 2);
        ck_assert_int_lt(t->have, t->samples);
        ck_assert_int_eq(xccl_trial_clear(t, t->at), 0 != cases[k].pick);
        if (cases[k].pick) {
            uint64_t med[2];
            xccl_trial_medians(t, t->at, med);
            ck_assert_uint_eq(med[0], (cases[k].s[0] + cases[k].s[1]) / 2);
            const int want = 1 == cases[k].pick ? shm : mesh;
            ck_assert_int_eq(xccl_trial_decide(t, med), want);
            xccl_selection_t s = trial_sel(&p, c, ag, 65536, mode, 1);
            ck_assert_int_eq(s.algo, want);
            ck_assert_ptr_null(s.trial);
        } else {
            /* the trial goes on: the next block is shm's again, timed */
            xccl_selection_t s = trial_sel(&p, c, ag, 65536, mode, 1);
            ck_assert_ptr_nonnull(s.trial);
            ck_assert_int_eq(s.algo, shm);
        }
        xccl_select_cache_fini(c);
        free(c);
    }
    /* noisy trials: no agreement at the first blocks, however clear */
    {
        xccl_select_cache_t *c = calloc(1, sizeof(*c));
        ck_assert_ptr_nonnull(c);
        const uint64_t s1[2] = { 100, 100 }, m1[2] = { 1000, 1000 };
        xccl_trial_t *t = NULL;
        for (int i = 0; i < 10; i++) {
            xccl_selection_t s = trial_sel(&p, c, ag, 65536, XCCL_TRIAL_NOISY, 1);
            ck_assert_ptr_nonnull(s.trial);
            t = s.trial;
            const uint64_t ns = i < 4 || 4 == i || 7 == i ? 5000 : s.algo == shm ? s1[0] : m1[0];
            ck_assert_int_eq(xccl_trial_record(t, 1000000u * (uint64_t) i, 1000000u * (uint64_t) i + ns), 0);
        }
        ck_assert_int_eq(t->have, 0);
        ck_assert_ptr_nonnull(trial_sel(&p, c, ag, 65536, XCCL_TRIAL_NOISY, 1).trial);
        xccl_select_cache_fini(c);
        free(c);
    }
    /* the check reads the agreed readings it is given, not this rank's */
    xccl_select_cache_t *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    const uint64_t s2[2] = { 100, 100 }, m2[2] = { 300, 300 };
    xccl_trial_t *t = run_trial(&p, c, ag, 65536, XCCL_TRIAL_QUIET, first, s2, m2);
    ck_assert(xccl_trial_clear(t, t->at));
    uint64_t last[2][2][XCCL_TRIAL_MAX];
    memcpy(last, t->at, sizeof(last));
    last[1][0][1] += 200;                       /* another rank ended an shm call late */
    ck_assert(!xccl_trial_clear(t, last));
    xccl_select_cache_fini(c);
    free(c);
}
END_TEST

START_TEST(level_trials)
{
    xccl_select_policy_t p;
    xccl_select_cache_t *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    xccl_select_policy_defaults(&p);
    p.trials = 5;
    const xccl_coll_t ag = XCCL_COLL_ALLGATHER, bc = XCCL_COLL_BCAST;
    const int shm = xccl_select_index(ag, "shm"), mesh = xccl_select_index(ag, "mesh");
    /* 64 KiB, 5 trials: 6 timed calls of each (whole blocks); outliers */
    const char *quiet = "smsm" "sSSmMM" "sSSmMM" "sSSmMM";
    const uint64_t t_shm[6] = { 100, 100, 900000, 100, 101, 100 },
                   t_mesh[6] = { 80, 79, 81, 80000, 80, 80 };
    xccl_trial_t *t = run_trial(&p, c, ag, 65536, XCCL_TRIAL_QUIET, quiet, t_shm, t_mesh);
    uint64_t med[2];
    xccl_trial_medians(t, t->at, med);
    ck_assert_uint_eq(med[0], 100);          /* 100 100 100 100 101 900000 */
    ck_assert_uint_eq(med[1], 80);           /* 79 80 80 80 81 80000 */
    /* the agreed medians decide */
    const uint64_t agreed[2] = { 100, 120 };
    ck_assert_int_eq(xccl_trial_decide(t, agreed), shm);
    for (int i = 0; i < 3; i++) {
        xccl_selection_t s = trial_sel(&p, c, ag, 65536 + 4096 * (size_t) i, 1, 1);
        ck_assert_int_eq(s.algo, shm);
        ck_assert_int_eq(s.by, XCCL_BY_TRIAL);
        ck_assert_ptr_null(s.trial);
    }
    /* Agreement (the component's allreduce MAX of every rank's readings):
     * each call's span from its last start to its last end. */
    {
        xccl_select_cache_t *c2[3] = { calloc(1, sizeof(*c)), calloc(1, sizeof(*c)),
                                       calloc(1, sizeof(*c)) };
        ck_assert(c2[0] && c2[1] && c2[2]);
        /* Two ranks, rank 1 starts every call 20 us late (descheduled):
         * rank 0 waits for it whichever candidate runs (each call ends 100
         * ns (shm) or 400 ns (mesh) after rank 1's start), rank 1 for
         * nobody.  The slowest rank's medians would pick the mesh (shm
         * 20100 against 20080 on rank 0 in this trial); the span shows
         * shm at 100 against 400. */
        const int n = (int) strlen(quiet);
        uint64_t late[32] = { 0 };
        for (int i = 0; i < n; i++) {
            late[i] = 20000;
        }
        const uint64_t r0_shm[6] = { 20100, 20100, 20100, 20100, 20100, 20100 },
                       r0_mesh[6] = { 20080, 20080, 20080, 20080, 20080, 20080 },
                       r1_shm[6] = { 100, 100, 100, 100, 100, 100 },
                       r1_mesh[6] = { 400, 400, 400, 400, 400, 400 };
        xccl_trial_t *t0 = run_trial(&p, c2[0], ag, 65536, XCCL_TRIAL_QUIET, quiet, r0_shm, r0_mesh),
                     *t1 = run_trial_late(&p, c2[1], ag, 65536, XCCL_TRIAL_QUIET, quiet, r1_shm,
                                          r1_mesh, late);
        uint64_t m0[2], m1[2];
        xccl_trial_medians(t0, t0->at, m0);
        xccl_trial_medians(t1, t1->at, m1);
        ck_assert_uint_eq(m0[1], 20080);
        ck_assert_uint_lt(m0[1] > m1[1] ? m0[1] : m1[1], m0[0] > m1[0] ? m0[0] : m1[0]);
        uint64_t last[2][2][XCCL_TRIAL_MAX] = { { { 0 } } };
        agree_max(last, t0);
        agree_max(last, t1);
        xccl_trial_medians(t0, last, med);
        ck_assert_uint_eq(med[0], 100);
        ck_assert_uint_eq(med[1], 400);
        ck_assert_int_eq(xccl_trial_decide(t0, med), shm);
        /* A third rank (a bcast's reader) that ends 580 ns after the others
         * with mesh: the span counts it (980 ns against 400; each call's
         * fastest rank would not). */
        const uint64_t r2_shm[6] = { 20100, 20100, 20100, 20100, 20100, 20100 },
                       r2_mesh[6] = { 20980, 20980, 20980, 20980, 20980, 20980 };
        xccl_trial_t *t2 = run_trial(&p, c2[2], ag, 65536, XCCL_TRIAL_QUIET, quiet, r2_shm, r2_mesh);
        agree_max(last, t2);
        xccl_trial_medians(t0, last, med);
        ck_assert_uint_eq(med[0], 100);
        ck_assert_uint_eq(med[1], 980);
        for (int k = 0; k < 3; k++) {
            xccl_select_cache_fini(c2[k]);
            free(c2[k]);
        }
    }
    /* the next class has its own trial; mesh lower */
    const uint64_t fast[6] = { 50, 50, 50, 50, 50, 50 }, slow[6] = { 60, 60, 60, 60, 60, 60 };
    t = run_trial(&p, c, ag, 131072, XCCL_TRIAL_QUIET, quiet, slow, fast);
    xccl_trial_medians(t, t->at, med);
    ck_assert_int_eq(xccl_trial_decide(t, med), mesh);
    ck_assert_int_eq(trial_sel(&p, c, ag, 131072, 1, 1).algo, mesh);
    ck_assert_int_eq(trial_sel(&p, c, ag, 65536, 1, 1).algo, shm);
    /* large classes: 2 untimed calls, then blocks of four, the first two
     * untimed (the second call after a switch still pays for it), at most
     * 3 timed of each (4: whole blocks); the medians are the timed calls'
     * alone (an untimed one takes 5 ms here), the mesh wins by its steady
     * state; a tie goes to shm */
    const uint64_t l_shm[4] = { 1800, 1750, 1790, 1740 }, l_mesh[4] = { 1400, 1320, 1450, 1330 };
    t = run_trial(&p, c, bc, 4 << 20, XCCL_TRIAL_QUIET, "sm" "ssSSmmMM" "ssSSmmMM", l_shm, l_mesh);
    ck_assert_int_eq(t->samples, 4);
    xccl_trial_medians(t, t->at, med);
    ck_assert_uint_eq(med[0], 1770);
    ck_assert_uint_eq(med[1], 1365);
    ck_assert_int_eq(xccl_trial_decide(t, med), xccl_select_index(bc, "mesh"));
    const uint64_t tie[2] = { 1000, 1000 };
    ck_assert_int_eq(xccl_trial_decide(t, tie), xccl_select_index(bc, "shm"));
    /* an even number of samples: the mean of the middle two */
    p.trials = 4;
    const uint64_t a_shm[4] = { 1006, 1000, 1004, 1002 }, a_mesh[4] = { 70, 10, 50, 30 };
    t = run_trial(&p, c, XCCL_COLL_ALLTOALL, 32768, XCCL_TRIAL_QUIET, "smsm" "sSSmMM" "sSSmMM",
                  a_shm, a_mesh);
    xccl_trial_medians(t, t->at, med);
    ck_assert_uint_eq(med[0], 1003);
    ck_assert_uint_eq(med[1], 40);
    /* noisy (a rank yields when idle): 2n+1 = 11 timed calls, 12 in whole
     * blocks; the lower median wins, however close */
    p.trials = 5;
    const char *noisy = "smsm" "sSSmMM" "sSSmMM" "sSSmMM" "sSSmMM" "sSSmMM" "sSSmMM";
    const uint64_t n_shm[12] = { 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000 };
    const uint64_t n_mesh[12] = { 890, 890, 890, 890, 890, 890, 890, 890, 890, 890, 890, 890 };
    t = run_trial(&p, c, ag, 1 << 18, XCCL_TRIAL_NOISY, noisy, n_shm, n_mesh);
    xccl_trial_medians(t, t->at, med);
    ck_assert_uint_eq(med[1], 890);
    ck_assert_int_eq(xccl_trial_decide(t, med), mesh);
    ck_assert_int_eq(trial_sel(&p, c, ag, 1 << 18, XCCL_TRIAL_NOISY, 1).algo, mesh);
    t = run_trial(&p, c, XCCL_COLL_ALLTOALL, 1 << 18, XCCL_TRIAL_NOISY, noisy, n_shm, n_mesh);
    const uint64_t close[2] = { 1000, 999 };
    ck_assert_int_eq(xccl_trial_decide(t, close), xccl_select_index(XCCL_COLL_ALLTOALL, "mesh"));
    ck_assert_int_eq(xccl_trial_decide(t, tie), xccl_select_index(XCCL_COLL_ALLTOALL, "shm"));
    /* quiet, the same times: the mesh */
    t = run_trial(&p, c, ag, 1 << 19, XCCL_TRIAL_QUIET, quiet, n_shm, n_mesh);
    xccl_trial_medians(t, t->at, med);
    ck_assert_int_eq(xccl_trial_decide(t, med), mesh);
    /* noisy and large: at most 6 timed calls of each */
    t = run_trial(&p, c, bc, 16 << 20, XCCL_TRIAL_NOISY, "sm" "ssSSmmMM" "ssSSmmMM" "ssSSmmMM",
                  n_shm, n_mesh);
    ck_assert_int_eq(t->samples, 6);
    /* no trial: without a->trial, without peer access, with trials off;
     * forced and tuning rules win; every collective takes part */
    xccl_selection_t s = trial_sel(&p, c, ag, 1 << 16, 0, 1);
    ck_assert_int_eq(s.by, XCCL_BY_LEVEL);
    ck_assert_int_eq(s.algo, shm);
    s = trial_sel(&p, c, ag, 1 << 16, 1, 0);
    ck_assert_int_eq(s.by, XCCL_BY_LEVEL);
    s = trial_sel(&p, c, XCCL_COLL_REDUCE_SCATTER_BLOCK, 1 << 20, 1, 1);
    ck_assert_int_eq(s.by, XCCL_BY_TRIAL);
    ck_assert_int_eq(s.trial->cand[1], xccl_select_index(XCCL_COLL_REDUCE_SCATTER_BLOCK, "mesh"));
    /* allreduce: the rule's choice (shm_small up to 8 KiB) against mesh */
    const xccl_coll_t ar = XCCL_COLL_ALLREDUCE;
    s = trial_sel(&p, c, ar, 6000, 1, 1);
    ck_assert_int_eq(s.by, XCCL_BY_TRIAL);
    ck_assert_int_eq(s.algo, xccl_select_index(ar, "shm_small"));
    ck_assert_int_eq(s.trial->cand[1], xccl_select_index(ar, "mesh"));
    s = trial_sel(&p, c, ar, 1 << 20, 1, 1);
    ck_assert_int_eq(s.algo, xccl_select_index(ar, "shm"));
    p.trials = 0;
    s = trial_sel(&p, c, ag, 1 << 24, 1, 1);
    ck_assert_int_eq(s.by, XCCL_BY_LEVEL);
    ck_assert_ptr_null(s.trial);
    p.trials = 5;
    p.forced[ag] = mesh;
    s = trial_sel(&p, c, ag, 65536, 1, 1);
    ck_assert_int_eq(s.by, XCCL_BY_FORCE);
    ck_assert_ptr_null(s.trial);
    xccl_select_cache_fini(c);
    free(c);
}
END_TEST

/* A cached schedule runs as often as the call repeats: four ranks each
 * with its own cache (as each process has), the same allreduce three
 * times on the simulator, right every time. */
static int sum_cb(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    (void) ctx;
    xccl_reduce_kernel(XCCL_DT_INT32, XCCL_OP_SUM)(dst, a, b, count);
    return 0;
}

START_TEST(cached_schedule_runs_again)
{
    enum { P = 4, N = 1001 };
    xccl_layout_t l = one_node(P);
    xccl_coll_args_t a = { .count = N, .layout = &l };
    xccl_select_cache_t *cache = calloc(P, sizeof(*cache));
    int32_t *in = malloc(P * N * sizeof(int32_t)), *out = malloc(P * N * sizeof(int32_t));
    void *scratch[P] = { NULL };
    ck_assert(cache && in && out);
    for (int round = 0; round < 3; round++) {
        xccl_sim_t *sim = xccl_sim_create(P);
        xccl_exec_t e[P];
        const xccl_sched_t *s[P];
        for (int r = 0; r < P; r++) {
            int used;
            s[r] = xccl_select_schedule(&cache[r], XCCL_COLL_ALLREDUCE, XCCL_SEL_FIRST + 2, &a, r,
                                        P, sizeof(int32_t), &used);
            ck_assert_ptr_nonnull(s[r]);
            for (int i = 0; i < N; i++) {
                in[r * N + i] = (r + 1) * (i + round);
            }
            free(scratch[r]);
            scratch[r] = malloc(s[r]->scratch_bytes + 1);
            void *bufs[XCCL_NBUF] = { &in[r * N], &out[r * N], scratch[r] };
            ck_assert_int_eq(xccl_exec_init(&e[r], s[r], xccl_sim_transport(sim, r), bufs, sum_cb,
                                            NULL, (uint32_t) round), 0);
        }
        ck_assert_msg(0 == xccl_sim_run(sim, e, P, 7u + (unsigned) round), "%s",
                      xccl_sim_error(sim));
        for (int r = 0; r < P; r++) {
            for (int i = 0; i < N; i++) {
                ck_assert_int_eq(out[r * N + i], 10 * (i + round));
            }
            xccl_exec_fini(&e[r]);
            xccl_select_put(s[r]);
        }
        xccl_sim_destroy(sim);
    }
    for (int r = 0; r < P; r++) {
        ck_assert_uint_eq(cache[r].builds, 1);
        ck_assert_uint_eq(cache[r].hits, 2);
        xccl_select_cache_fini(&cache[r]);
        free(scratch[r]);
    }
    free(cache);
    free(in);
    free(out);
    xccl_layout_fini(&l);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("select");
    TCase *tc = tcase_create("select");
    tcase_add_test(tc, names_and_indices);
    tcase_add_test(tc, fallback_decision);
    tcase_add_test(tc, fallback_of_the_further_collectives);
    tcase_add_test(tc, forced_then_rule_then_model);
    tcase_add_test(tc, rooted_in_place_alike);
    tcase_add_test(tc, schedules_are_kept_while_arguments_repeat);
    tcase_add_test(tc, cached_schedule_runs_again);
    tcase_add_test(tc, shm_slot_in_cache_key_and_model);
    tcase_add_test(tc, shm_level_rule);
    tcase_add_test(tc, shm_small_shrinks_with_ranks);
    tcase_add_test(tc, level_trials);
    tcase_add_test(tc, level_trials_early);
    tcase_add_test(tc, policy_net_reaches_the_model);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
