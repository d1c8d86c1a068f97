/*
 * Selection: which algorithm runs a call, and its schedule.  Order of
 * precedence: a forced algorithm -> a tuning rule -> the cost
 * model.  Everything a choice reads is the same on every rank (parameters,
 * communicator size, sizes, layout), so all ranks choose alike.  The
 * component, xccl_simulate and xccl_info choose through these functions.
 *
 * Per communicator a cache keeps each choice of the cost model (once per
 * size class and layout of the call: predicting builds a schedule per
 * sampled rank and algorithm) and the schedules of the latest argument
 * sets: a training loop calls the same allreduce every step, and building
 * the schedule again each time is work thrown away.
 */
#include "base/xccl_base.h"
#include "xccl_sched.h"
#include "xccl_build.h"
#include "xccl_cost.h"
#include "xccl_tuning.h"
#include "xccl_catalog.h"
#include "xccl_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cached schedule; handed out as &e->s. */
struct xccl_sched_entry {
    xccl_sched_t s;
    int refs;                          /* the cache's, and each user's */
    xccl_coll_t coll;
    int algo, used;                    /* asked for, built */
    int rank, size;
    size_t es;
    xccl_coll_args_t args;             /* args.counts points to counts, args.vec to vec */
    size_t *counts, *vec;
};

/* ------------------------------------------------------------ names */

const char *xccl_select_name(xccl_coll_t c, int i)
{
    int n;
    const xccl_algo_t *list = xccl_coll_algos(c, &n);
    if (NULL == list) {
        return NULL;
    }
    if (XCCL_SEL_AUTO == i) {
        return "auto";
    }
    if (XCCL_SEL_FALLBACK == i) {
        return "fallback";
    }
    return i >= XCCL_SEL_FIRST && i - XCCL_SEL_FIRST < n ? list[i - XCCL_SEL_FIRST].name : NULL;
}

int xccl_select_index(xccl_coll_t c, const char *name)
{
    for (int i = 0; NULL != name && xccl_select_name(c, i); i++) {
        if (0 == strcmp(name, xccl_select_name(c, i))) {
            return i;
        }
    }
    return -1;
}

/* ------------------------------------------------------------ policy, rules */

void xccl_select_policy_defaults(xccl_select_policy_t *p)
{
    memset(p, 0, sizeof(*p));
    p->small_bytes = 0;
    /* inside a node the shared-memory level's flag and peer terms (they
     * price only schedules with flags or peer reads: shm, mesh) */
    p->intra = (xccl_cost_model_t) { .alpha = XCCL_COST_ALPHA, .beta = XCCL_COST_BETA,
                                     .gamma = XCCL_COST_GAMMA, .delta = XCCL_COST_DELTA,
                                     .flag = XCCL_COST_SHM_FLAG, .peer = XCCL_COST_SHM_PEER };
    p->inter = p->intra;
    p->inter.alpha = XCCL_COST_INTER_ALPHA;
    p->inter.beta = XCCL_COST_INTER_BETA;
    p->inter.flag = p->inter.peer = 0.0;
    p->margin = XCCL_MODEL_MARGIN;
}

int xccl_select_check_tuning(const xccl_tuning_t *t, char *err, size_t errlen)
{
    for (size_t i = 0; i < t->n; i++) {
        const xccl_tuning_rule_t *r = &t->rules[i];
        int c = xccl_coll_index(r->coll);
        if (c < 0 || xccl_select_index((xccl_coll_t) c, r->algo) < 0) {
            snprintf(err, errlen, "line %d: unknown collective or algorithm \"%s %s\"", r->line,
                     r->coll, r->algo);
            return -1;
        }
    }
    return 0;
}

int xccl_select_tuned(const xccl_select_policy_t *p, xccl_coll_t c, int ranks, size_t bytes)
{
    if (0 == p->tuning.n) {
        return XCCL_SEL_AUTO;          /* the common case: no file */
    }
    const xccl_tuning_rule_t *r = xccl_tuning_lookup(&p->tuning, xccl_coll_name(c), ranks, bytes);
    int i = NULL != r ? xccl_select_index(c, r->algo) : -1;
    return i < 0 ? XCCL_SEL_AUTO : i;  /* names were checked when the file was read */
}

const char xccl_select_why_forced[] = "forced";
const char xccl_select_why_tuning[] = "tuning_file";
const char xccl_select_why_small[] = "small_message";
const char xccl_select_why_slower[] = "not_faster";

/* ------------------------------------------------------------ cost model */

typedef struct {
    const xccl_algo_t *algo;
    const xccl_coll_args_t *args;
} predict_job_t;

static int predict_build(xccl_sched_t *s, void *arg)
{
    const predict_job_t *j = arg;
    return j->algo->build(s, j->args);
}

int xccl_select_model(const xccl_select_policy_t *p, xccl_coll_t c, const xccl_coll_args_t *a,
                      size_t es, double t[XCCL_CATALOG_MAX], int *n)
{
    const xccl_algo_t *list = xccl_coll_algos(c, n);
    /* A network with no room for this layout's nodes (a torus smaller than
     * the communicator): priced without one.  The layout is every rank's. */
    char err[96];
    const xccl_net_t *net = NULL != a->layout && 0 == xccl_net_check(&p->net, a->layout, err, sizeof(err))
                                ? &p->net : NULL;
    for (int i = 0; i < *n; i++) {
        predict_job_t j = { &list[i], a };
        t[i] = xccl_predict_net(a->layout, net, es, predict_build, &j, NULL, 0, &p->intra, &p->inter);
    }
    int best = xccl_pick(t, *n, p->margin);
    return best < 0 ? -1 : XCCL_SEL_FIRST + best;
}

/* The shared-memory level of a one-node communicator (a->shm_slot): the
 * algorithm measured fastest inside it (tools/xccl_bench and
 * test/bench/compare_peers.sh; docs/shm-level.md, docs/bench/compare-np2.txt
 * and -np4.txt), or -1 where the model decides.  The model's shm terms
 * price every copy at memory speed and predict ring over UCX ahead of the
 * level at every size from a few KiB, where the level is faster: its
 * chunks stay in cache.  So inside the level a measured rule decides, like
 * the fallback threshold (figures: docs/bench/select-figures.md):
 *   allreduce       shm_small up to 8 KiB (every rank reduces the whole
 *                   message: no slice exchange), shm above; at np 2 4 KiB,
 *                   from np 8 less (xccl_select_whole_max);
 *   the others      shm; for allgather, alltoall and bcast, where the
 *                   mesh over single copies (process_vm_readv,
 *                   a->peer_access) may run too, the level's trials choose
 *                   between the two (trial_rule, xccl_trial_t): on some
 *                   machines the mesh is slower than shm's two pipelined
 *                   copies (the kernel pins every page it copies; shm's
 *                   pieces stay in cache), on others faster. */
#define XCCL_SHM_SMALL_MAX (8u << 10)
#define XCCL_SHM_FIT_BYTES ((size_t) 32 << 10)

/* Where the whole-vector forms (shm_small, and the latency path in
 * ompi_coll_xccl/coll_xccl_latency.c) end: each rank reads and
 * reduces (n - 1) x bytes there, against about 2.5 x bytes, half the
 * reduction and two more barriers in shm: up to 8 KiB the whole vector
 * is faster; from np 8, (n - 3) x bytes <= 32 KiB (6.5 KiB at np 8,
 * 2.5 KiB at np 16), fitted with a barrier worth 32 KiB of reading.
 * Since the latency path runs shm too (its sliced form, no executor), np 2
 * ends at 4 KiB, where the sliced form catches up.  np 3-7 keep 8 KiB
 * (on shared cores the sliced form's second post costs a turn of the
 * scheduler).  Figures: docs/bench/select-figures.md. */
#define XCCL_SHM_SMALL_MAX_NP2 (4u << 10)
size_t xccl_select_whole_max(int ranks)
{
    if (2 == ranks) {
        return XCCL_SHM_SMALL_MAX_NP2;
    }
    const size_t fit = ranks > 3 ? XCCL_SHM_FIT_BYTES / (size_t) (ranks - 3) : XCCL_SHM_SMALL_MAX;
    return fit < XCCL_SHM_SMALL_MAX ? fit : XCCL_SHM_SMALL_MAX;
}

int xccl_select_level_cache[XCCL_NCOLL][XCCL_LEVEL_NALGOS];

int xccl_select_level_lookup(xccl_coll_t coll, xccl_level_algo_t which)
{
    static const char *const names[XCCL_LEVEL_NALGOS] = { "shm_small", "shm", "mesh" };
    const int i = xccl_select_index(coll, names[which]);
    __atomic_store_n(&xccl_select_level_cache[coll][which], i, __ATOMIC_RELAXED);
    return i;
}

static int shm_rule(xccl_coll_t coll, const xccl_coll_args_t *a, int ranks, size_t bytes)
{
    if (0 == a->shm_slot || (NULL != a->layout && a->layout->nnodes > 1)) {
        return -1;
    }
    switch (coll) {
    case XCCL_COLL_ALLREDUCE:
        return xccl_select_level_index(coll, bytes <= xccl_select_whole_max(ranks) ? XCCL_LEVEL_SHM_SMALL
                                                                                   : XCCL_LEVEL_SHM);
    default:
        return xccl_select_level_index(coll, XCCL_LEVEL_SHM);
    }
}

/* ---------------------------------------------------------- level trials */

/* The level's choice sel (its rule's) where a trial decides (xccl_trial_t):
 * the trial's next candidate, or its pick once made.  Without memory for
 * the trial, the rule's choice stands (on this rank only: then the
 * process is out of memory, and the next schedule fails the call). */
static void trial_rule(const xccl_select_policy_t *p, xccl_select_cache_t *c, xccl_coll_t coll,
                       const xccl_coll_args_t *a, size_t bytes, xccl_selection_t *sel)
{
    if (!a->trial || !a->peer_access || p->trials <= 0) {
        return;
    }
    xccl_trial_t **tp = &c->trial[coll][xccl_size_class(bytes)], *t = *tp;
    if (NULL == t) {
        if (NULL == (t = calloc(1, sizeof(*t)))) {
            return;
        }
        const int large = bytes >= XCCL_TRIAL_LARGE;
        t->noisy = XCCL_TRIAL_NOISY == a->trial;
        t->warm = large ? 2 : 4;
        t->block = large ? XCCL_TRIAL_LARGE_BLOCK : XCCL_TRIAL_BLOCK;
        t->untimed = large ? XCCL_TRIAL_LARGE_UNTIMED : XCCL_TRIAL_UNTIMED;
        int n = t->noisy ? 2 * p->trials + 1 : p->trials;
        const int large_max = t->noisy ? XCCL_TRIAL_NOISY_LARGE : 3;
        if (large && n > large_max) {
            n = large_max;
        }
        /* whole blocks: up to a multiple of their timed calls */
        const int per = t->block - t->untimed;
        n = (n + per - 1) / per * per;
        t->samples = n < XCCL_TRIAL_MAX ? n : XCCL_TRIAL_MAX;
        t->cand[0] = sel->algo;
        t->cand[1] = xccl_select_index(coll, "mesh");
        *tp = t;
    }
    sel->by = XCCL_BY_TRIAL;
    if (t->pick) {
        sel->algo = t->pick;
    } else {
        sel->algo = xccl_trial_next(t);
        sel->trial = t;
    }
}

int xccl_trial_record(xccl_trial_t *t, uint64_t t0, uint64_t t1)
{
    const int i = t->calls++ - t->warm;
    if (i < 0) {
        return 0;
    }
    const int per = t->block - t->untimed;             /* timed calls of a block */
    const int blk = i / t->block, pos = i % t->block - t->untimed;
    if (pos >= 0) {
        t->at[0][blk & 1][blk / 2 * per + pos] = t0;
        t->at[1][blk & 1][blk / 2 * per + pos] = t1;
    }
    if (i == 2 * (t->samples / per) * t->block - 1) {
        t->have = t->samples;                          /* the last call */
        return 1;
    }
    if (i == 2 * t->block - 1 && !t->noisy) {
        t->have = per;                                 /* the early check */
        return 1;
    }
    return 0;
}

int xccl_trial_clear(const xccl_trial_t *t, const uint64_t at[2][2][XCCL_TRIAL_MAX])
{
    uint64_t lo[2] = { UINT64_MAX, UINT64_MAX }, hi[2] = { 0, 0 };
    for (int j = 0; j < 2; j++) {
        for (int i = 0; i < t->have; i++) {
            const uint64_t v = at[1][j][i] > at[0][j][i] ? at[1][j][i] - at[0][j][i] : 0;
            lo[j] = v < lo[j] ? v : lo[j];
            hi[j] = v > hi[j] ? v : hi[j];
        }
    }
    return t->have > 0 && ((hi[0] > 0 && (double) lo[1] >= XCCL_TRIAL_CLEAR * (double) hi[0]) ||
                           (hi[1] > 0 && (double) lo[0] >= XCCL_TRIAL_CLEAR * (double) hi[1]));
}

static int cmp_u64(const void *x, const void *y)
{
    const uint64_t a = *(const uint64_t *) x, b = *(const uint64_t *) y;
    return (a > b) - (a < b);
}

void xccl_trial_medians(const xccl_trial_t *t, const uint64_t at[2][2][XCCL_TRIAL_MAX],
                        uint64_t med[2])
{
    const int n = t->have;
    for (int j = 0; j < 2; j++) {
        uint64_t v[XCCL_TRIAL_MAX];
        for (int i = 0; i < n; i++) {
            v[i] = at[1][j][i] > at[0][j][i] ? at[1][j][i] - at[0][j][i] : 0;
        }
        qsort(v, (size_t) n, sizeof(v[0]), cmp_u64);
        med[j] = n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
}

int xccl_trial_decide(xccl_trial_t *t, const uint64_t med[2])
{
    const uint64_t shm = med[0], mesh = med[1];
    t->pick = mesh < shm ? t->cand[1] : t->cand[0];
    return t->pick;
}

xccl_selection_t xccl_select_algo(const xccl_select_policy_t *p, xccl_select_cache_t *c,
                                  xccl_coll_t coll, const xccl_coll_args_t *a, int ranks,
                                  size_t bytes, size_t es)
{
    xccl_selection_t sel = { p->forced[coll], XCCL_BY_FORCE, -1.0f, 0, NULL };
    if (sel.algo >= XCCL_SEL_FIRST) {
        return sel;
    }
    if (xccl_coll_sizes_local(coll)) {
        /* the level's rule reads no size of these; else the first */
        sel.algo = shm_rule(coll, a, ranks, 0);
        sel.by = XCCL_BY_LEVEL;
        if (sel.algo < XCCL_SEL_FIRST) {
            sel.algo = XCCL_SEL_FIRST;
            sel.by = XCCL_BY_FIRST;
        }
        return sel;
    }
    sel.algo = xccl_select_tuned(p, coll, ranks, bytes);
    sel.by = XCCL_BY_TUNING;
    if (sel.algo >= XCCL_SEL_FIRST) {
        return sel;
    }
    sel.algo = shm_rule(coll, a, ranks, bytes);
    sel.by = XCCL_BY_LEVEL;
    if (sel.algo >= XCCL_SEL_FIRST) {
        trial_rule(p, c, coll, a, bytes, &sel);
        return sel;
    }
    const int cls = xccl_size_class(bytes);
    const int v = (a->in_place ? 1 : 0) | (a->root ? 2 : 0) | (a->shm_slot ? 4 : 0);
    sel.by = XCCL_BY_MODEL;
    if (0 == c->algo[coll][cls][v]) {
        /* The rooted collectives' MPI_IN_PLACE is the root's alone: the
         * model prices them as not in place on every rank, which then all
         * pick the same algorithm. */
        xccl_coll_args_t alike = *a;
        alike.in_place = alike.in_place && !xccl_coll_rooted(coll);
        double t[XCCL_CATALOG_MAX];
        int n, best = xccl_select_model(p, coll, &alike, es, t, &n);
        if (best < 0) {
            best = XCCL_SEL_FIRST;     /* nothing predicted: the first algorithm */
        }
        c->predicted_us[coll][cls][v] = (float) (t[best - XCCL_SEL_FIRST] * 1e6);
        c->algo[coll][cls][v] = (int8_t) best;
        sel.fresh = 1;
    }
    sel.algo = c->algo[coll][cls][v];
    sel.predicted_us = c->predicted_us[coll][cls][v];
    return sel;
}

/* ------------------------------------------------------------ schedules */

static int build(xccl_coll_t coll, int algo, xccl_sched_t *s, const xccl_coll_args_t *a, int rank,
                 int size, size_t es, int *used)
{
    int n;
    const xccl_algo_t *list = xccl_coll_algos(coll, &n);
    xccl_sched_init(s, rank, size, es);
    *used = algo;
    int rc = list[algo - XCCL_SEL_FIRST].build(s, a);
    if (XCCL_NOT_APPLICABLE == rc) {
        /* Forced (or named by a rule) where the layout or the peer access
         * does not allow it: the collective's first algorithm does it.  The
         * layout is the same on all ranks, so they all switch. */
        xccl_sched_fini(s);
        xccl_sched_init(s, rank, size, es);
        *used = XCCL_SEL_FIRST;
        rc = list[0].build(s, a);
    }
    if (0 != rc) {
        xccl_sched_fini(s);
        return -1;
    }
    return 0;
}

static void entry_put(struct xccl_sched_entry *e)
{
    if (NULL != e && 0 == __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL)) {
        xccl_sched_fini(&e->s);
        free(e->counts);
        free(e->vec);
        free(e);
    }
}

/* Every input of the builders is equal. */
static int same_call(const struct xccl_sched_entry *e, xccl_coll_t coll, int algo,
                     const xccl_coll_args_t *a, int rank, int size, size_t es)
{
    const xccl_coll_args_t *b = &e->args;
    if (e->coll != coll || e->algo != algo || e->rank != rank || e->size != size || e->es != es ||
        a->count != b->count || a->block != b->block || a->bytes != b->bytes ||
        a->in_place != b->in_place || a->root != b->root || a->layout != b->layout ||
        a->segment != b->segment || a->peer_access != b->peer_access || a->shm_slot != b->shm_slot ||
        (NULL == a->counts) != (NULL == b->counts) || a->nvec != b->nvec) {
        return 0;
    }
    return (NULL == a->counts || 0 == memcmp(a->counts, b->counts, (size_t) size * sizeof(size_t))) &&
           (0 == a->nvec || 0 == memcmp(a->vec, b->vec, a->nvec * sizeof(size_t)));
}

static struct xccl_sched_entry *entry_new(xccl_coll_t coll, int algo, const xccl_coll_args_t *a,
                                          int rank, int size, size_t es)
{
    struct xccl_sched_entry *e = calloc(1, sizeof(*e));
    if (NULL == e) {
        return NULL;
    }
    e->args = *a;
    if (NULL != a->counts) {
        e->counts = malloc((size_t) size * sizeof(size_t));
        if (NULL == e->counts) {
            free(e);
            return NULL;
        }
        memcpy(e->counts, a->counts, (size_t) size * sizeof(size_t));
        e->args.counts = e->counts;
    }
    if (0 != a->nvec) {
        if (NULL == (e->vec = malloc(a->nvec * sizeof(size_t)))) {
            free(e->counts);
            free(e);
            return NULL;
        }
        memcpy(e->vec, a->vec, a->nvec * sizeof(size_t));
        e->args.vec = e->vec;
    }
    if (0 != build(coll, algo, &e->s, &e->args, rank, size, es, &e->used)) {
        free(e->counts);
        free(e->vec);
        free(e);
        return NULL;
    }
    e->refs = 1;
    e->coll = coll;
    e->algo = algo;
    e->rank = rank;
    e->size = size;
    e->es = es;
    return e;
}

const xccl_sched_t *xccl_select_schedule(xccl_select_cache_t *c, xccl_coll_t coll, int algo,
                                         const xccl_coll_args_t *a, int rank, int size,
                                         size_t es, int *used)
{
    struct xccl_sched_entry *e = NULL;
    int k = 0;
    while (NULL != c && k < XCCL_SEL_SCHEDS && NULL != c->sched[k] &&
           !same_call(c->sched[k], coll, algo, a, rank, size, es)) {
        k++;
    }
    if (NULL != c && k < XCCL_SEL_SCHEDS && NULL != c->sched[k]) {
        e = c->sched[k];
        c->hits++;
    } else {
        if (NULL == (e = entry_new(coll, algo, a, rank, size, es))) {
            return NULL;
        }
        if (NULL == c) {
            *used = e->used;
            return &e->s;              /* the caller's only */
        }
        c->builds++;
        k = XCCL_SEL_SCHEDS - 1;       /* the least recently used goes */
        entry_put(c->sched[k]);
        c->sched[k] = e;
    }
    /* Most recently used first. */
    memmove(&c->sched[1], &c->sched[0], (size_t) k * sizeof(c->sched[0]));
    c->sched[0] = e;
    __atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
    *used = e->used;
    return &e->s;
}

void xccl_select_put(const xccl_sched_t *s)
{
    entry_put((struct xccl_sched_entry *) s);
}

void xccl_select_cache_fini(xccl_select_cache_t *c)
{
    for (int k = 0; k < XCCL_NCOLL; k++) {
        for (int cls = 0; cls < 65; cls++) {
            free(c->trial[k][cls]);
            c->trial[k][cls] = NULL;
        }
    }
    for (int k = 0; k < XCCL_SEL_SCHEDS; k++) {
        entry_put(c->sched[k]);
        c->sched[k] = NULL;
    }
}
