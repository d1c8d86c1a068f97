/*
 * Peer access ("mesh") schedules where they may not run, and where the
 * catalog offers them:
 *
 *   - without peer access the executor refuses such a schedule;
 *   - the catalog: "mesh" applies only with peer access on one node, so
 *     the cost model never predicts it otherwise;
 *   - the same for the "leader" forms (algos/mesh_leader.c), where they
 *     apply (not in place for alltoall and reduce_scatter); alltoallv has
 *     "mesh" only, and not in place;
 *   - the collective without such forms (barrier: not xccl_coll_mapped)
 *     has neither, and none of its algorithms names a peer's buffer even
 *     where peer access is offered (the level's shm barrier needs its
 *     slot);
 *   - a mesh allgather appended on sub-groups of a schedule, its peers
 *     and flags translated to the parent's ranks.
 */
#include <check.h>
#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh_sim.h"
#include "xccl_layout.h"
#include "xccl_build.h"
#include "xccl_cost.h"
#include "xccl_catalog.h"

/* ------------------------------------------------------------------------ */
/* Refused without peer access                                              */
/* ------------------------------------------------------------------------ */

START_TEST(refused_without_peer_access)
{
    const int p = 4;
    const size_t b = 16;
    xccl_sched_t s[4];
    xccl_exec_t e[4];
    unsigned char sbuf[4][16], rbuf[4][64];
    xccl_sim_t *sim = xccl_sim_create(p);
    for (int r = 0; r < p; r++) {
        xccl_sched_init(&s[r], r, p, 1);
        ck_assert_int_eq(xccl_build_allgather_mesh(&s[r], b), 0);
        ck_assert(s[r].peer_access);
        memset(sbuf[r], r, b);
        memset(rbuf[r], 0xEE, sizeof(rbuf[r]));
        void *bufs[XCCL_NBUF] = { sbuf[r], rbuf[r], NULL };
        ck_assert_int_eq(xccl_exec_init(&e[r], &s[r], xccl_sim_transport(sim, r), bufs, NULL, NULL, 1), 0);
    }
    /* No peer access at all, then one without flags: refused at once. */
    xccl_peer_t no_flags = *xccl_sim_peer(sim, 1);
    no_flags.test = NULL;
    xccl_exec_set_peer(&e[1], &no_flags);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_lt(xccl_exec_progress(&e[r]), 0);
        ck_assert_uint_eq(e[r].step, 0);
        for (size_t i = 0; i < sizeof(rbuf[r]); i++) {
            ck_assert_uint_eq(rbuf[r][i], 0xEE);
        }
    }
    /* One rank of p = 1 names only itself: no peer access needed. */
    xccl_sched_t one;
    xccl_sched_init(&one, 0, 1, 1);
    ck_assert_int_eq(xccl_build_allgather_mesh(&one, b), 0);
    ck_assert(!one.peer_access);
    xccl_sched_fini(&one);
    for (int r = 0; r < p; r++) {
        xccl_exec_fini(&e[r]);
        xccl_sched_fini(&s[r]);
    }
    xccl_sim_destroy(sim);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Catalog and selection                                                    */
/* ------------------------------------------------------------------------ */

typedef struct {
    const xccl_algo_t *algo;
    xccl_coll_args_t args;
} cat_job_t;

static int build_cat(xccl_sched_t *s, void *arg)
{
    const cat_job_t *j = arg;
    return j->algo->build(s, &j->args);
}

/* What the catalog tests share: p = 8 ranks, counts of 1000, the v
 * forms' vec (counts of 1000 bytes back to back, alltoallv's receive half
 * as its send half), a layout of one node and one of two. */
typedef struct {
    size_t counts[8];
    size_t vec[4 * 8];
    xccl_layout_t one, two;
} cat_env_t;

static void cat_env_init(cat_env_t *e)
{
    for (int r = 0; r < 8; r++) {
        e->counts[r] = 1000;
        e->vec[r] = e->vec[16 + r] = 1000;
        e->vec[8 + r] = e->vec[24 + r] = (size_t) r * 1000;
    }
    ck_assert_int_eq(xccl_layout_parse(&e->one, "block:8", 8, NULL, 0), 0);
    ck_assert_int_eq(xccl_layout_parse(&e->two, "block:4", 8, NULL, 0), 0);
}

/* Collective c's catalog (*algos, *n) and the index of `name` in it. */
static int cat_index(int c, const char *name, const xccl_algo_t **algos, int *n)
{
    int at = -1;
    *algos = xccl_coll_algos((xccl_coll_t) c, n);
    for (int i = 0; i < *n; i++) {
        at = 0 == strcmp((*algos)[i].name, name) ? i : at;
    }
    ck_assert_msg(at >= 0, "%s has no %s", xccl_coll_name((xccl_coll_t) c), name);
    return at;
}

START_TEST(catalog_mesh_needs_peer_access)
{
    const xccl_cost_model_t m = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA, 0, 0 };
    const int p = 8;
    cat_env_t env;
    cat_env_init(&env);
    size_t *counts = env.counts;
    xccl_layout_t one = env.one, two = env.two;
    for (int c = 0; c < XCCL_NCOLL; c++) {
        int n;
        const xccl_algo_t *algos;
        if (!xccl_coll_mapped((xccl_coll_t) c)) {
            continue;          /* no mesh: catalog_no_peer_forms */
        }
        const int mesh = cat_index(c, "mesh", &algos, &n);
        cat_job_t j = { &algos[mesh], { .count = 8000, .counts = counts, .block = 1000, .bytes = 8000,
                                         .root = 3, .vec = env.vec, .nvec = 4 * 8, .layout = &one } };
        /* Not applicable: no peer access (the default), or two nodes;
         * applicable with peer access on one node. */
        static const struct {
            int peer_access, two_nodes, rc;
        } cases[] = { { 0, 0, XCCL_NOT_APPLICABLE }, { 1, 1, XCCL_NOT_APPLICABLE }, { 0, 1, XCCL_NOT_APPLICABLE },
                      { 1, 0, 0 } };
        for (size_t v = 0; v < sizeof(cases) / sizeof(cases[0]); v++) {
            xccl_sched_t s;
            j.args.peer_access = cases[v].peer_access;
            j.args.layout = cases[v].two_nodes ? &two : &one;
            xccl_sched_init(&s, 0, p, 4);
            ck_assert_int_eq(algos[mesh].build(&s, &j.args), cases[v].rc);
            if (0 == cases[v].rc) {
                ck_assert_str_eq(s.algo, "mesh");
                ck_assert(s.peer_access);
            } else {
                ck_assert_uint_eq(s.nacts, 0);
            }
            xccl_sched_fini(&s);
        }
        /* Copied peers (the host paths' XCCL_PEER_COPY): the mesh of the
         * collectives xccl_coll_peer_copy names; reduce's (it reduces the
         * peers' inputs in place) and the v forms' (only the root knows
         * the sizes: no trial alike everywhere) need them mapped. */
        if (!xccl_coll_peer((xccl_coll_t) c)) {
            xccl_sched_t s;
            j.args.peer_access = XCCL_PEER_COPY;
            xccl_sched_init(&s, 0, p, 4);
            const int rc = algos[mesh].build(&s, &j.args);
            if (xccl_coll_peer_copy((xccl_coll_t) c)) {
                ck_assert_int_eq(rc, 0);
                ck_assert_str_eq(s.algo, "mesh");
            } else {
                ck_assert_int_eq(rc, XCCL_NOT_APPLICABLE);
            }
            xccl_sched_fini(&s);
            j.args.peer_access = XCCL_PEER_MAPPED;
        }
        /* The model: no prediction without peer access, so auto never
         * picks it; with it, a prediction. */
        double t[XCCL_CATALOG_MAX];
        j.args.layout = &one;
        for (int pa = 0; pa < 2; pa++) {
            j.args.peer_access = pa;
            for (int i = 0; i < n; i++) {
                cat_job_t ji = j;
                ji.algo = &algos[i];
                t[i] = xccl_predict_hier(&one, 4, build_cat, &ji, NULL, 0, &m, &m);
            }
            if (0 == pa) {
                ck_assert(t[mesh] < 0);
                ck_assert_int_ne(xccl_pick(t, n, XCCL_MODEL_MARGIN), mesh);
            } else {
                ck_assert(t[mesh] > 0);
            }
        }
    }
    xccl_layout_fini(&one);
    xccl_layout_fini(&two);
}
END_TEST

/* "leader" writes the peers' buffers: only with mapped peers (not with
 * peers that can only be read, not without peer access) on one node; not
 * in place for alltoall and reduce_scatter (in place for the further
 * collectives: the root's, or every rank's in allgatherv).  Alltoallv has
 * none (its mesh: not in place). */
START_TEST(catalog_leader_forms)
{
    const int p = 8;
    cat_env_t env;
    cat_env_init(&env);
    size_t *counts = env.counts;
    xccl_layout_t one = env.one, two = env.two;
    for (int c = 0; c < XCCL_NCOLL; c++) {
        int n;
        const xccl_algo_t *algos;
        if (!xccl_coll_mapped((xccl_coll_t) c)) {
            continue;          /* no leader: catalog_no_peer_forms */
        }
        if (XCCL_COLL_ALLTOALLV == c) {
            /* mesh only, and not in place */
            const int mesh = cat_index(c, "mesh", &algos, &n);
            for (int i = 0; i < n; i++) {
                ck_assert_str_ne(algos[i].name, "leader");
            }
            xccl_coll_args_t a = { .vec = env.vec, .nvec = 4 * 8, .in_place = 1, .peer_access = XCCL_PEER_MAPPED,
                                   .layout = &one };
            xccl_sched_t s;
            xccl_sched_init(&s, 1, p, 1);
            ck_assert_int_eq(algos[mesh].build(&s, &a), XCCL_NOT_APPLICABLE);
            xccl_sched_fini(&s);
            continue;
        }
        const int leader = cat_index(c, "leader", &algos, &n);
        static const struct {
            int peer_access, two_nodes, in_place;
        } cases[] = { { XCCL_PEER_NONE, 0, 0 }, { XCCL_PEER_COPY, 0, 0 }, { XCCL_PEER_MAPPED, 1, 0 },
                      { XCCL_PEER_MAPPED, 0, 0 }, { XCCL_PEER_MAPPED, 0, 1 } };
        for (size_t v = 0; v < sizeof(cases) / sizeof(cases[0]); v++) {
            const int no_in_place = XCCL_COLL_ALLTOALL == c || XCCL_COLL_REDUCE_SCATTER == c ||
                                    XCCL_COLL_REDUCE_SCATTER_BLOCK == c;
            const int applies = XCCL_PEER_MAPPED == cases[v].peer_access && !cases[v].two_nodes &&
                                !(cases[v].in_place && no_in_place);
            xccl_coll_args_t a = { .count = 8000, .counts = counts, .block = 1000, .bytes = 8000, .root = 1,
                                   .vec = env.vec, .nvec = 4 * 8, .in_place = cases[v].in_place,
                                   .peer_access = cases[v].peer_access, .layout = cases[v].two_nodes ? &two : &one };
            xccl_sched_t s;
            xccl_sched_init(&s, 1, p, 4);
            ck_assert_int_eq(algos[leader].build(&s, &a), applies ? 0 : XCCL_NOT_APPLICABLE);
            if (applies) {
                ck_assert_str_eq(s.algo, "leader");
                ck_assert(s.peer_access);
            }
            xccl_sched_fini(&s);
        }
    }
    xccl_layout_fini(&one);
    xccl_layout_fini(&two);
}
END_TEST

/* The collective without peer-access forms (barrier: not
 * xccl_coll_mapped): no "mesh" or
 * "leader" entry; with peer access offered (mapped, one node) and no
 * slot, every algorithm builds a schedule that names no peer's buffer and
 * gets a prediction, or (the level's "shm" forms, which need the slot,
 * and the two-level "hier" and "pipeline" ones, which need nodes) does
 * not apply.
 * Arguments as the tools give them: 1000 bytes a rank, root 3. */
START_TEST(catalog_no_peer_forms)
{
    const xccl_cost_model_t m = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA, 0, 0 };
    const int p = 8;
    cat_env_t env;
    cat_env_init(&env);
    int ncolls = 0;
    for (int c = 0; c < XCCL_NCOLL; c++) {
        int n;
        const xccl_algo_t *algos = xccl_coll_algos((xccl_coll_t) c, &n);
        if (xccl_coll_mapped((xccl_coll_t) c)) {
            continue;
        }
        ncolls++;
        ck_assert_int_gt(n, 0);
        for (int i = 0; i < n; i++) {
            const char *what = xccl_coll_name((xccl_coll_t) c);
            ck_assert_msg(0 != strcmp(algos[i].name, "mesh") && 0 != strcmp(algos[i].name, "leader"),
                          "%s has %s", what, algos[i].name);
            const int na = 0 == strncmp(algos[i].name, "shm", 3) || 0 == strncmp(algos[i].name, "hier", 4) ||
                           0 == strcmp(algos[i].name, "pipeline");
            cat_job_t j = { &algos[i], { .count = 250, .block = 1000, .bytes = 8000, .root = 3, .vec = env.vec,
                                         .nvec = 4 * 8, .layout = &env.one, .peer_access = XCCL_PEER_MAPPED } };
            for (int r = 0; r < p; r++) {
                xccl_sched_t s;
                xccl_sched_init(&s, r, p, XCCL_COLL_REDUCE == c ? 4 : 1);
                const int rc = algos[i].build(&s, &j.args);
                ck_assert_msg(rc == (na ? XCCL_NOT_APPLICABLE : 0), "%s %s rank %d: build returned %d", what,
                              algos[i].name, r, rc);
                ck_assert_msg(!s.peer_access, "%s %s rank %d names a peer's buffer", what, algos[i].name, r);
                xccl_sched_fini(&s);
            }
            const double t = xccl_predict_hier(&env.one, XCCL_COLL_REDUCE == c ? 4 : 1, build_cat, &j, NULL, 0,
                                               &m, &m);
            ck_assert_msg(na ? t < 0 : t > 0, "%s %s: predicted %g", what, algos[i].name, t);
        }
    }
    ck_assert_int_eq(ncolls, 1);    /* barrier */
    xccl_layout_fini(&env.one);
    xccl_layout_fini(&env.two);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Composition: a mesh stage appended on a sub-group                        */
/* ------------------------------------------------------------------------ */

/* p ranks in two halves (even and odd ranks); each half runs a mesh
 * allgather of its members' blocks into RECV, after a flag barrier of the
 * whole group (so that the child's flag values are offset).  Peers and
 * flags are translated to the parent's ranks. */
START_TEST(append_mesh_child)
{
    const int p = 7;
    const size_t b = 5;
    job_t j;
    job_init(&j, p, 1);
    for (int r = 0; r < p; r++) {
        xccl_sched_t *s = &j.sched[r];
        int group[8], g = 0, me = -1;
        for (int q = r % 2; q < p; q += 2) {
            me = q == r ? g : me;
            group[g++] = q;
        }
        /* a whole-group barrier first: flag 1 */
        xccl_sched_post(s, 1);
        xccl_sched_step(s);
        for (int q = 0; q < p; q++) {
            if (q != r) {
                xccl_sched_wait(s, q, 1);
            }
        }
        xccl_sched_t child;
        xccl_sched_init(&child, me, g, 1);
        ck_assert_int_eq(xccl_build_allgather_mesh(&child, b), 0);
        xccl_buf_map_t map = { { xccl_ref(XCCL_BUF_SEND, 0), xccl_ref(XCCL_BUF_RECV, 0),
                                 xccl_ref(XCCL_BUF_SCRATCH, 0) } };
        ck_assert_int_eq(xccl_sched_append(s, &child, group, &map), 0);
        xccl_sched_fini(&child);
        ck_assert_int_eq(xccl_sched_finalize(s), 0);
        ck_assert_uint_eq(s->flag_top, 3);      /* 1, then the child's 1 and 2 */
        const size_t total = (size_t) g * b;
        j.rbuf[r] = xmalloc(total);
        memset(j.rbuf[r], 0xEE, total);
        j.sbuf[r] = job_sbuf(&j, r, b);
        for (size_t i = 0; i < b; i++) {
            j.sbuf[r][i] = ag_pattern(r, i);
        }
    }
    job_run(&j, NULL, "append mesh allgather");
    for (int r = 0; r < p; r++) {
        int g = 0;
        for (int q = r % 2; q < p; q += 2, g++) {
            for (size_t i = 0; i < b; i++) {
                ck_assert_uint_eq(j.rbuf[r][(size_t) g * b + i], ag_pattern(q, i));
            }
        }
    }
    job_fini(&j);
}
END_TEST

int main(void)
{
    Suite *su;
    TCase *tc = mesh_tcase("mesh_catalog", &su);
    tcase_add_test(tc, refused_without_peer_access);
    tcase_add_test(tc, catalog_mesh_needs_peer_access);
    tcase_add_test(tc, catalog_leader_forms);
    tcase_add_test(tc, catalog_no_peer_forms);
    tcase_add_test(tc, append_mesh_child);
    return xccl_check_run(su);
}
