/*
 * What the suites that run the shared-memory and peer-access schedules on
 * a simulated node share (test_shm_algos, test_shm_gather_scatter,
 * test_shm_reduce, test_shm_alltoallv, and through mesh_sim.h
 * test_mesh_algos, test_mesh_rooted, test_mesh_catalog), on top of
 * sim_harness.h (included first):
 *
 *   - seeds, sizes and count patterns;
 *   - one job run with its error as the case's report (job_try), and the
 *     inputs and result checks of allgather(v), alltoall, bcast, allreduce
 *     and reduce_scatter;
 *   - planting bugs: actions dropped from a built schedule, the entry
 *     post joined to the step of the entry waits;
 *   - successive calls on persistent slots and flags (shm_successive):
 *     virtual ranks each run a list of calls, progressed in a random order
 *     as far as each can go and into their next calls, so that fast ranks
 *     run ahead of slow ones; the calls of other layouts (the allreduce
 *     latency path, allgather, bcast) that a suite mixes into its own.
 */
#ifndef XCCL_TEST_SHM_SIM_H
#define XCCL_TEST_SHM_SIM_H

#ifndef XCCL_TEST_SIM_HARNESS_H
#error "include sim_harness.h before shm_sim.h"
#endif

#include "xccl_build.h"

static inline unsigned seed_of(int p, unsigned salt)
{
    return (unsigned) p * 2654435761u + SIM_SEED_SALT + salt * 40503u;
}

/* Sizes at p: 0, 1, around p, and large.  Returns how many. */
static inline size_t sizes_at(int p, size_t large, size_t *c)
{
    size_t n = counts_around(p, c);
    c[n++] = large;
    return n;
}

/* Count patterns: every rank base (reduce_scatter_block); irregular (every
 * third rank 0, the others base .. base+3); all on the last rank. */
enum { CNT_REGULAR, CNT_IRREGULAR, CNT_LAST_ONLY, NCNT };

static inline size_t make_counts(int p, int pat, size_t base, size_t *c)
{
    size_t total = 0;
    for (int r = 0; r < p; r++) {
        switch (pat) {
        case CNT_REGULAR: c[r] = base; break;
        case CNT_IRREGULAR: c[r] = r % 3 == 1 ? 0 : base + (size_t) (r % 4); break;
        default: c[r] = r == p - 1 ? base : 0; break;
        }
        total += c[r];
    }
    return total;
}

/* ------------------------------------------------------------------------ */
/* One job: its inputs, its run, its results                                */
/* ------------------------------------------------------------------------ */

/* Runs j under seed (fn NULL: no reductions); 0, or -1 with what and the
 * simulator's error in bad. */
static inline int job_try(job_t *j, xccl_reduce_fn_t fn, unsigned seed, const char *what, char *bad,
                          size_t badlen)
{
    char err[256];
    if (0 != job_exec(j, fn, seed, what, err, sizeof(err))) {
        snprintf(bad, badlen, "%s: %s", what, err);
        return -1;
    }
    return 0;
}

/* Rank r's buffers of an allgather of b bytes a rank (v: bytes[p] then
 * displs[p] of an allgatherv, RECV of total bytes; in place, SEND unused). */
static inline void job_fill_allgather(job_t *j, int r, size_t b, const size_t *v, size_t total, int in_place)
{
    const int p = j->p;
    const size_t mine = v ? v[r] : b, at = v ? v[p + r] : (size_t) r * b;
    j->rbuf[r] = xmalloc(total);
    memset(j->rbuf[r], 0xEE, total);
    j->sbuf[r] = in_place ? j->rbuf[r] + at : job_sbuf(j, r, mine);
    for (size_t i = 0; i < mine; i++) {
        j->sbuf[r][i] = ag_pattern(r, i);
    }
    if (v && in_place) {
        j->sbuf[r] = NULL;
    }
}

static inline int job_check_allgather(const job_t *j, size_t b, const size_t *v, const char *what, char *bad,
                                      size_t badlen)
{
    const int p = j->p;
    for (int r = 0; r < p; r++) {
        for (int q = 0; q < p; q++) {
            const size_t n = v ? v[q] : b, at = v ? v[p + q] : (size_t) q * b;
            for (size_t i = 0; i < n; i++) {
                if (j->rbuf[r][at + i] != ag_pattern(q, i)) {
                    snprintf(bad, badlen, "%s: rank %d block %d byte %zu wrong", what, r, q, i);
                    return -1;
                }
            }
        }
    }
    return 0;
}

/* Rank r's buffers of an alltoall of b-byte blocks. */
static inline void job_fill_alltoall(job_t *j, int r, size_t b, int in_place)
{
    const size_t total = (size_t) j->p * b;
    j->rbuf[r] = xmalloc(total);
    memset(j->rbuf[r], 0xEE, total);
    j->sbuf[r] = in_place ? j->rbuf[r] : job_sbuf(j, r, total);
    for (int to = 0; to < j->p; to++) {
        for (size_t i = 0; i < b; i++) {
            j->sbuf[r][(size_t) to * b + i] = pattern(r, to, i);
        }
    }
}

/* Every block from its sender; not in place the input survives. */
static inline int job_check_alltoall(const job_t *j, size_t b, int in_place, const char *what, char *bad,
                                     size_t badlen)
{
    const size_t total = (size_t) j->p * b;
    for (int r = 0; r < j->p; r++) {
        for (size_t i = 0; i < total; i++) {
            if (j->rbuf[r][i] != pattern((int) (i / b), r, i % b)) {
                snprintf(bad, badlen, "%s: rank %d byte %zu wrong", what, r, i);
                return -1;
            }
        }
        for (size_t i = 0; i < total && !in_place; i++) {
            if (j->sbuf[r][i] != pattern(r, (int) (i / b), i % b)) {
                snprintf(bad, badlen, "%s: rank %d changed its input", what, r);
                return -1;
            }
        }
    }
    return 0;
}

/* Rank r's RECV of a bcast of n bytes from root. */
static inline void job_fill_bcast(job_t *j, int r, size_t n, int root)
{
    j->rbuf[r] = xmalloc(n);
    for (size_t i = 0; i < n; i++) {
        j->rbuf[r][i] = r == root ? ag_pattern(root, i) : 0xEE;
    }
}

static inline int job_check_bcast(const job_t *j, size_t n, int root, const char *what, char *bad, size_t badlen)
{
    for (int r = 0; r < j->p; r++) {
        for (size_t i = 0; i < n; i++) {
            if (j->rbuf[r][i] != ag_pattern(root, i)) {
                snprintf(bad, badlen, "%s: rank %d byte %zu wrong", what, r, i);
                return -1;
            }
        }
    }
    return 0;
}

/* Rank r's buffers of an allreduce of count elements of kind k. */
static inline void job_fill_allreduce(job_t *j, int r, int k, size_t count, int in_place)
{
    const size_t bytes = count * kind_es(k);
    j->rbuf[r] = xmalloc(bytes);
    memset(j->rbuf[r], 0xEE, bytes);
    j->sbuf[r] = in_place ? j->rbuf[r] : job_sbuf(j, r, bytes);
    kind_fill(k, r, j->sbuf[r], count);
}

/* Every rank's RECV equals the reference bit for bit; not in place the
 * input survives. */
static inline int job_check_allreduce(const job_t *j, int k, size_t count, int in_place, const char *what,
                                      char *bad, size_t badlen)
{
    const size_t bytes = count * kind_es(k);
    unsigned char *want = xmalloc(bytes), *input = xmalloc(bytes);
    int rc = 0;
    kind_reference(k, j->p, want, count);
    for (int r = 0; r < j->p && 0 == rc; r++) {
        if (0 != memcmp(j->rbuf[r], want, bytes)) {
            snprintf(bad, badlen, "%s: rank %d has a wrong result", what, r);
            rc = -1;
        } else if (!in_place) {
            kind_fill(k, r, input, count);
            if (0 != memcmp(j->sbuf[r], input, bytes)) {
                snprintf(bad, badlen, "%s: rank %d changed its input", what, r);
                rc = -1;
            }
        }
    }
    free(want);
    free(input);
    return rc;
}

/* Rank r's buffers of a reduce_scatter of counts (total in all). */
static inline void job_fill_reduce_scatter(job_t *j, int r, int k, const size_t *counts, size_t total,
                                           int in_place)
{
    const size_t es = kind_es(k);
    j->rbuf[r] = xmalloc((in_place ? total : counts[r]) * es);
    j->sbuf[r] = in_place ? j->rbuf[r] : job_sbuf(j, r, total * es);
    if (!in_place) {
        memset(j->rbuf[r], 0xEE, counts[r] * es);
    }
    kind_fill(k, r, j->sbuf[r], total);
}

/* Rank r's block of the reference in its RECV; not in place the input
 * survives. */
static inline int job_check_reduce_scatter(const job_t *j, int k, const size_t *counts, size_t total,
                                           int in_place, const char *what, char *bad, size_t badlen)
{
    const size_t es = kind_es(k);
    unsigned char *want = xmalloc(total * es), *input = xmalloc(total * es);
    int rc = 0;
    size_t first = 0;
    kind_reference(k, j->p, want, total);
    for (int r = 0; r < j->p && 0 == rc; r++) {
        if (0 != memcmp(j->rbuf[r], want + first * es, counts[r] * es)) {
            snprintf(bad, badlen, "%s: rank %d has a wrong result", what, r);
            rc = -1;
        } else if (!in_place) {
            kind_fill(k, r, input, total);
            if (0 != memcmp(j->sbuf[r], input, total * es)) {
                snprintf(bad, badlen, "%s: rank %d changed its input", what, r);
                rc = -1;
            }
        }
        first += counts[r];
    }
    free(want);
    free(input);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Planting bugs into built schedules                                       */
/* ------------------------------------------------------------------------ */

/* Whether action a of step st of s goes. */
typedef int (*act_drop_t)(const xccl_sched_t *s, size_t st, const xccl_action_t *a, void *ctx);

/* The actions of s that drop says go removed, the steps kept (a step may
 * end up empty).  Returns whether anything changed. */
static inline int sched_drop(xccl_sched_t *s, act_drop_t drop, void *ctx)
{
    int changed = 0;
    size_t w = 0;
    for (size_t st = 0; st < s->nsteps; st++) {
        const size_t begin = s->step_start[st];
        const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        s->step_start[st] = w;
        for (size_t i = begin; i < end; i++) {
            if (drop(s, st, &s->acts[i], ctx)) {
                changed = 1;
                continue;
            }
            s->acts[w++] = s->acts[i];
        }
    }
    s->nacts = w;
    return changed;
}

/* A wait one call back (the entry's): len > 0. */
static inline int drop_entry_wait(const xccl_sched_t *s, size_t st, const xccl_action_t *a, void *ctx)
{
    (void) s, (void) st, (void) ctx;
    return XCCL_ACT_WAIT == a->kind && a->len > 0;
}

/* Steps 0 and 1 made one: the entry post, alone in step 0, joins the step
 * of the entry waits, behind them.  The caller says where that applies. */
static inline void sched_join_entry(xccl_sched_t *s)
{
    memmove(&s->step_start[1], &s->step_start[2], (s->nsteps - 2) * sizeof(s->step_start[0]));
    memmove(&s->step_round[1], &s->step_round[2], (s->nsteps - 2) * sizeof(s->step_round[0]));
    s->nsteps--;
}

/* ------------------------------------------------------------------------ */
/* Successive calls on persistent slots and flags                           */
/* ------------------------------------------------------------------------ */

/* One call of one rank.  A suite's record of a call begins with it. */
typedef struct {
    xccl_sched_t s;
    xccl_exec_t e;
    unsigned char *in, *out;           /* SEND and RECV (the same where in place), freed by the driver */
    int started;
} shm_call_t;

/* How a run of successive calls goes. */
typedef struct {
    int p, ncalls;
    size_t cap;                        /* every rank's slot */
    uint32_t seq0;                     /* call i runs with sequence number seq0 + i */
    int settle;                        /* what a call without an exit wait left owed is settled
                                        * before the next (xccl_exec_set_owed), as in the component */
    int ignore_seq;                    /* planted: flags compared without their call */
    int fresh_order;                   /* each round's order a fresh permutation, else the
                                        * last round's shuffled again */
    size_t call_size;                  /* bytes of the suite's record of a call */
    void *ctx;
    /* Builds rank r's call: c->s (elements, slot_cap and all), c->in, c->out. */
    void (*build)(void *ctx, shm_call_t *c, int r, int call);
    /* 0, or -1 with why in bad: rank r's result of its call. */
    int (*check)(void *ctx, const shm_call_t *c, int r, int call, char *bad, size_t badlen);
    /* Frees what build allocated beyond in and out (NULL: nothing). */
    void (*release)(void *ctx, shm_call_t *c);
} shm_run_t;

/* The flags in memory: each rank's last post. */
typedef struct {
    unsigned char **slot;
    struct {
        int posted;
        uint32_t seq, val;
    } *flag;
    int ignore_seq;
} shm_node_t;

/* ctx of rank r's peer provider. */
typedef struct {
    shm_node_t *node;
    int rank;
} shm_rank_t;

static inline void *shm_node_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    const shm_rank_t *me = ctx;
    return XCCL_BUF_SLOT == id ? me->node->slot[peer] : NULL;
}

static inline int shm_node_post(void *ctx, uint32_t seq, uint32_t val)
{
    const shm_rank_t *me = ctx;
    me->node->flag[me->rank].posted = 1;
    me->node->flag[me->rank].seq = seq;
    me->node->flag[me->rank].val = val;
    return 0;
}

static inline int shm_node_test(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    const shm_node_t *node = ((const shm_rank_t *) ctx)->node;
    const uint32_t fs = node->flag[peer].seq;
    if (node->ignore_seq) {
        return node->flag[peer].posted && node->flag[peer].val >= val;
    }
    return node->flag[peer].posted && (fs == seq ? node->flag[peer].val >= val : (int32_t) (fs - seq) > 0);
}

/* order[0..p-1] shuffled in place, *seed stepped once per swap. */
static inline void shm_shuffle(int p, unsigned *seed, int *order)
{
    for (int i = p - 1; i > 0; i--) {
        *seed = *seed * 1103515245u + 12345u;
        const int j = (int) ((*seed >> 16) % (unsigned) (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static inline void shm_call_free(const shm_run_t *run, shm_call_t *c)
{
    xccl_exec_fini(&c->e);
    xccl_sched_fini(&c->s);
    if (run->release) {
        run->release(run->ctx, c);
    }
    if (c->out != c->in) {
        free(c->out);
    }
    free(c->in);
    memset(c, 0, run->call_size);
}

/* Runs run->ncalls calls on every rank, each rank's calls on one slot of
 * run->cap bytes (stale bytes at first); in each round the ranks in a
 * random order, a random share of them skipped (they fall behind), each
 * progressed as far as it can go.  0, or -1 with why in bad (a wrong
 * result, a failed execution, a deadlock). */
static inline int shm_successive(const shm_run_t *run, unsigned seed, char *bad, size_t badlen)
{
    const int p = run->p;
    shm_node_t node = { xmalloc((size_t) p * sizeof(*node.slot)), calloc((size_t) p, sizeof(*node.flag)),
                        run->ignore_seq };
    shm_rank_t *ranks = xmalloc((size_t) p * sizeof(*ranks));
    xccl_peer_t *peer = xmalloc((size_t) p * sizeof(*peer));
    unsigned char *cur = calloc((size_t) p, run->call_size);
    int *at = calloc((size_t) p, sizeof(int)), *order = xmalloc((size_t) p * sizeof(int));
    xccl_exit_owed_t *owed = calloc((size_t) p, sizeof(*owed));      /* one per rank, all its calls */
    red_ctx_t rctx = { xccl_reduce_kernel(XCCL_DT_INT32, XCCL_OP_SUM), 4, 0 };
    ck_assert(node.flag && cur && at && owed);
    for (int r = 0; r < p; r++) {
        node.slot[r] = xmalloc(run->cap);
        memset(node.slot[r], 0xA5, run->cap);
        ranks[r] = (shm_rank_t) { &node, r };
        peer[r] = (xccl_peer_t) { &ranks[r], shm_node_buf, shm_node_post, shm_node_test, NULL, NULL };
        order[r] = r;
    }
    int rc = 0, idle = 0, left = p;
    while (left > 0 && 0 == rc) {
        if (run->fresh_order) {
            seed = seed * 1103515245u + 12345u;
            unsigned s = seed;
            for (int r = 0; r < p; r++) {
                order[r] = r;
            }
            shm_shuffle(p, &s, order);
        } else {
            shm_shuffle(p, &seed, order);
        }
        int moved = 0;
        for (int k = 0; k < p && 0 == rc; k++) {
            const int r = order[k];
            /* a random share of turns is skipped: some ranks fall behind */
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 3 == 0) {
                continue;
            }
            while (at[r] < run->ncalls && 0 == rc) {
                shm_call_t *c = (shm_call_t *) (cur + (size_t) r * run->call_size);
                if (!c->started) {
                    run->build(run->ctx, c, r, at[r]);
                    void *bufs[XCCL_NBUF] = { c->in, c->out, NULL, node.slot[r] };
                    ck_assert_int_eq(xccl_exec_init(&c->e, &c->s, NULL, bufs, reduce_cb, &rctx,
                                                    run->seq0 + (unsigned) at[r]),
                                     0);
                    xccl_exec_set_peer(&c->e, &peer[r]);
                    if (run->settle) {
                        xccl_exec_set_owed(&c->e, &owed[r]);
                    }
                    c->started = 1;
                }
                const size_t before = c->e.step;
                const int st = xccl_exec_progress(&c->e);
                moved |= c->e.step != before || st != 0;
                if (st < 0) {
                    snprintf(bad, badlen, "p=%d slot %zu rank %d call %d: execution failed", p, run->cap, r, at[r]);
                    rc = -1;
                } else if (0 == st) {
                    break;
                } else {
                    rc = run->check(run->ctx, c, r, at[r], bad, badlen);
                    shm_call_free(run, c);
                    if (++at[r] == run->ncalls) {
                        left--;
                    }
                }
            }
        }
        idle = moved ? 0 : idle + 1;
        if (idle > 50 && 0 == rc) {
            snprintf(bad, badlen, "p=%d slot %zu: deadlock (rank 0 in call %d)", p, run->cap, at[0]);
            rc = -1;
        }
    }
    ck_assert_msg(!rctx.bad_alias, "a reduction's ranges overlap partially");
    for (int r = 0; r < p; r++) {
        shm_call_t *c = (shm_call_t *) (cur + (size_t) r * run->call_size);
        if (c->started) {
            shm_call_free(run, c);
        }
        free(node.slot[r]);
    }
    free(node.slot);
    free(node.flag);
    free(ranks);
    free(peer);
    free(cur);
    free(at);
    free(order);
    free(owed);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Calls of other layouts mixed into a suite's successive calls             */
/* ------------------------------------------------------------------------ */

/* Element i of rank r's int32 input in call `call`. */
static inline int32_t mix_elem(int call, int r, size_t i)
{
    return (int32_t) (call * 100003 + r * 1009 + (int) i);
}

/* Byte i of what rank from gives rank to in call `call` (the suite's). */
typedef unsigned char (*mix_byte_t)(int call, int from, int to, size_t i);

/* Rank r's allreduce latency path of n int32 elements (c->s initialised);
 * the builder's answer. */
static inline int mix_build_allreduce_small(shm_call_t *c, size_t n, int r, int call)
{
    const int rc = xccl_build_allreduce_shm_small(&c->s, n);
    c->in = xmalloc(n * 4);
    c->out = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        ((int32_t *) c->in)[i] = mix_elem(call, r, i);
    }
    memset(c->out, 0xEE, n * 4);
    return rc;
}

/* Rank r's whole allgather of n bytes a rank. */
static inline int mix_build_allgather(shm_call_t *c, size_t n, int r, int call, mix_byte_t byte)
{
    const int p = c->s.size, rc = xccl_build_allgather_shm(&c->s, n);
    c->in = xmalloc(n);
    c->out = xmalloc((size_t) p * n);
    for (size_t i = 0; i < n; i++) {
        c->in[i] = byte(call, r, 0, i);
    }
    memset(c->out, 0xEE, (size_t) p * n);
    return rc;
}

/* Rank r's whole bcast of n bytes from root. */
static inline int mix_build_bcast(shm_call_t *c, size_t n, int root, int r, int call, mix_byte_t byte)
{
    const int rc = xccl_build_bcast_shm_whole(&c->s, n, root);
    c->in = NULL;
    c->out = xmalloc(n);
    for (size_t i = 0; i < n; i++) {
        c->out[i] = r == root ? byte(call, root, 0, i) : 0xEE;
    }
    return rc;
}

/* 0, or -1 with why in bad: out (NULL: nothing to check) holds the int32
 * sums of the p ranks' inputs. */
static inline int mix_check_sum(const unsigned char *out, size_t n, int p, int r, int call, const char *what,
                                char *bad, size_t badlen)
{
    for (size_t i = 0; out && i < n; i++) {
        uint32_t acc = 0;
        for (int q = 0; q < p; q++) {
            acc += (uint32_t) mix_elem(call, q, i);
        }
        if (((const int32_t *) out)[i] != (int32_t) acc) {
            snprintf(bad, badlen, "%s: rank %d element %zu wrong", what, r, i);
            return -1;
        }
    }
    return 0;
}

static inline int mix_check_allgather(const unsigned char *out, size_t n, int p, int r, int call, mix_byte_t byte,
                                      const char *what, char *bad, size_t badlen)
{
    for (size_t i = 0; i < (size_t) p * n; i++) {
        if (out[i] != byte(call, (int) (i / n), 0, i % n)) {
            snprintf(bad, badlen, "%s: rank %d byte %zu of block %zu wrong", what, r, i % n, i / n);
            return -1;
        }
    }
    return 0;
}

static inline int mix_check_bcast(const unsigned char *out, size_t n, int root, int r, int call, mix_byte_t byte,
                                  const char *what, char *bad, size_t badlen)
{
    for (size_t i = 0; i < n; i++) {
        if (out[i] != byte(call, root, 0, i)) {
            snprintf(bad, badlen, "%s: rank %d byte %zu wrong", what, r, i);
            return -1;
        }
    }
    return 0;
}

#endif /* XCCL_TEST_SHM_SIM_H */
