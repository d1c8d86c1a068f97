/*
 * In-memory transport: N virtual ranks in one process.  A transfer completes
 * only when both sides are posted (rendezvous), so a schedule that would need
 * buffering to finish deadlocks here and the test says so.
 *
 * Unmatched requests live in a hash table keyed by the full message name
 * (src, dst, seq, idx, direction), so a post costs O(1) and a job of 1000
 * ranks (a million messages in an alltoall) runs in seconds.  They are also
 * kept in one list, newest first, to report a leftover at the end and to
 * free them all.
 */
#include "xccl_algos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rounds in a row without a match or a step before a deadlock is declared. */
#define SIM_IDLE_ROUNDS 3

typedef struct sim_req {
    struct sim_req *next;      /* in its hash bucket */
    struct sim_req *older, *newer;   /* in the list of unmatched requests */
    int is_send;
    int src, dst;
    uint32_t seq, idx;
    void *buf;
    size_t len;
    int done;                  /* 0 unmatched (in the table), 1 ok, -1 error */
} sim_req_t;

typedef struct {
    xccl_sim_t *sim;
    int rank;
} sim_rank_t;

struct xccl_sim {
    int n;
    sim_rank_t *ranks;
    xccl_transport_t *tr;
    sim_req_t **buckets;       /* nbuckets, a power of two */
    size_t nbuckets, nunmatched;
    sim_req_t *newest;         /* list of unmatched requests */
    unsigned long matches;
    char error[256];
};

#define SIM_MIN_BUCKETS 64

static sim_req_t **bucket_of(xccl_sim_t *sim, int is_send, int src, int dst,
                             uint32_t seq, uint32_t idx);
static int table_insert(xccl_sim_t *sim, sim_req_t *req);
static void table_remove(xccl_sim_t *sim, sim_req_t *req);

/* ------------------------------------------------------------------------ */
/* Transport entry points                                                   */
/* ------------------------------------------------------------------------ */

static int sim_post(sim_rank_t *r, int is_send, int peer, void *buf, size_t len,
                    uint32_t seq, uint32_t idx, void **req_out)
{
    xccl_sim_t *sim = r->sim;
    if (peer < 0 || peer >= sim->n) {
        snprintf(sim->error, sizeof(sim->error), "rank %d: peer %d out of range", r->rank, peer);
        return -1;
    }
    sim_req_t *req = calloc(1, sizeof(*req));
    if (NULL == req) {
        return -1;
    }
    req->is_send = is_send;
    req->src = is_send ? r->rank : peer;
    req->dst = is_send ? peer : r->rank;
    req->seq = seq;
    req->idx = idx;
    req->buf = buf;
    req->len = len;

    /* The partner has the same name and the other direction; the newest
     * such request matches first (bucket chains are newest first). */
    for (sim_req_t **pp = bucket_of(sim, !is_send, req->src, req->dst, seq, idx); *pp;
         pp = &(*pp)->next) {
        sim_req_t *o = *pp;
        if (o->is_send == is_send || o->src != req->src || o->dst != req->dst ||
            o->seq != seq || o->idx != idx) {
            continue;
        }
        table_remove(sim, o);
        sim_req_t *s = is_send ? req : o, *rv = is_send ? o : req;
        if (s->len != rv->len) {
            snprintf(sim->error, sizeof(sim->error),
                     "message %d->%d seq %u idx %u: send %zu bytes, recv %zu bytes",
                     s->src, s->dst, seq, idx, s->len, rv->len);
            s->done = rv->done = -1;
        } else {
            memcpy(rv->buf, s->buf, s->len);
            s->done = rv->done = 1;
        }
        sim->matches++;
        *req_out = req;
        return 0;
    }
    if (table_insert(sim, req) < 0) {
        free(req);
        return -1;
    }
    *req_out = req;
    return 0;
}

static int sim_isend(void *ctx, int peer, const void *buf, size_t len,
                     uint32_t seq, uint32_t idx, void **req)
{
    return sim_post(ctx, 1, peer, (void *) buf, len, seq, idx, req);
}

static int sim_irecv(void *ctx, int peer, void *buf, size_t len,
                     uint32_t seq, uint32_t idx, void **req)
{
    return sim_post(ctx, 0, peer, buf, len, seq, idx, req);
}

static int sim_test(void *ctx, void *reqp)
{
    (void) ctx;
    sim_req_t *req = reqp;
    int done = req->done;
    if (done) {
        free(req);
    }
    return done;
}

static void sim_progress(void *ctx)
{
    (void) ctx;
}

static void sim_cancel(void *ctx, void *reqp)
{
    sim_rank_t *r = ctx;
    sim_req_t *req = reqp;
    if (0 == req->done) {
        table_remove(r->sim, req);
    }
    free(req);
}

/* ------------------------------------------------------------------------ */
/* Public functions                                                         */
/* ------------------------------------------------------------------------ */

xccl_sim_t *xccl_sim_create(int nranks)
{
    xccl_sim_t *sim = calloc(1, sizeof(*sim));
    if (NULL == sim) {
        return NULL;
    }
    sim->n = nranks;
    sim->ranks = calloc((size_t) nranks, sizeof(*sim->ranks));
    sim->tr = calloc((size_t) nranks, sizeof(*sim->tr));
    sim->nbuckets = SIM_MIN_BUCKETS;
    sim->buckets = calloc(sim->nbuckets, sizeof(*sim->buckets));
    if (NULL == sim->ranks || NULL == sim->tr || NULL == sim->buckets) {
        xccl_sim_destroy(sim);
        return NULL;
    }
    for (int i = 0; i < nranks; i++) {
        sim->ranks[i].sim = sim;
        sim->ranks[i].rank = i;
        sim->tr[i].ctx = &sim->ranks[i];
        sim->tr[i].isend = sim_isend;
        sim->tr[i].irecv = sim_irecv;
        sim->tr[i].test = sim_test;
        sim->tr[i].progress = sim_progress;
        sim->tr[i].cancel = sim_cancel;
    }
    return sim;
}

void xccl_sim_destroy(xccl_sim_t *sim)
{
    if (NULL == sim) {
        return;
    }
    while (sim->newest) {
        sim_req_t *r = sim->newest;
        sim->newest = r->older;
        free(r);
    }
    free(sim->buckets);
    free(sim->ranks);
    free(sim->tr);
    free(sim);
}

const xccl_transport_t *xccl_sim_transport(xccl_sim_t *sim, int rank)
{
    return &sim->tr[rank];
}

const char *xccl_sim_error(const xccl_sim_t *sim)
{
    return sim->error;
}

int xccl_sim_run(xccl_sim_t *sim, xccl_exec_t *execs, int n, unsigned seed)
{
    int *order = malloc((size_t) n * sizeof(int));
    int rc = 0;
    if (NULL == order) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        order[i] = i;
    }
    int idle = 0;
    for (;;) {
        /* A new random order each round varies who posts first. */
        for (int i = n - 1; i > 0; i--) {
            seed = seed * 1103515245u + 12345u;
            int j = (int) ((seed >> 16) % (unsigned) (i + 1));
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        unsigned long before = sim->matches;
        size_t steps_before = 0, steps_after = 0;
        int running = 0;
        for (int i = 0; i < n; i++) {
            xccl_exec_t *e = &execs[order[i]];
            steps_before += e->step + (size_t) e->posted;
            int st = xccl_exec_progress(e);
            steps_after += e->step + (size_t) e->posted;
            if (st < 0) {
                if ('\0' == sim->error[0]) {
                    snprintf(sim->error, sizeof(sim->error), "rank %d failed: %d", order[i], st);
                }
                rc = -1;
                goto out;
            }
            running += (0 == st);
        }
        if (0 == running) {
            break;
        }
        /* A gate may answer "not yet" (a copy still in flight): rounds
         * without progress are a deadlock only when several follow. */
        idle = sim->matches == before && steps_after == steps_before ? idle + 1 : 0;
        if (idle >= SIM_IDLE_ROUNDS) {
            int pos = snprintf(sim->error, sizeof(sim->error), "deadlock; ranks at step:");
            for (int i = 0; i < n && pos < (int) sizeof(sim->error) - 16; i++) {
                pos += snprintf(sim->error + pos, sizeof(sim->error) - (size_t) pos, " %zu/%zu",
                                execs[i].step, execs[i].s->nsteps);
            }
            rc = -1;
            goto out;
        }
    }
    if (sim->newest) {
        sim_req_t *u = sim->newest;
        snprintf(sim->error, sizeof(sim->error), "unmatched %s %d->%d seq %u idx %u",
                 u->is_send ? "send" : "recv", u->src, u->dst, u->seq, u->idx);
        rc = -1;
    }
out:
    free(order);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Hash table of unmatched requests                                         */
/* ------------------------------------------------------------------------ */

static size_t hash_name(int is_send, int src, int dst, uint32_t seq, uint32_t idx)
{
    /* 64-bit multiply-xorshift mixing of the packed name. */
    uint64_t h = ((uint64_t) (uint32_t) src << 32) | (uint32_t) dst;
    h ^= ((uint64_t) seq << 33) ^ ((uint64_t) idx << 1) ^ (uint64_t) (is_send != 0);
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (size_t) h;
}

static sim_req_t **bucket_of(xccl_sim_t *sim, int is_send, int src, int dst,
                             uint32_t seq, uint32_t idx)
{
    return &sim->buckets[hash_name(is_send, src, dst, seq, idx) & (sim->nbuckets - 1)];
}

/* Double the buckets when the load passes 1; keeps every chain's order. */
static int table_grow(xccl_sim_t *sim)
{
    size_t nb = 2 * sim->nbuckets;
    sim_req_t **b = calloc(nb, sizeof(*b));
    if (NULL == b) {
        return -1;
    }
    /* Walk oldest to newest and push at the head: chains stay newest first. */
    sim_req_t *oldest = sim->newest;
    while (oldest && oldest->older) {
        oldest = oldest->older;
    }
    for (sim_req_t *r = oldest; r; r = r->newer) {
        size_t h = hash_name(r->is_send, r->src, r->dst, r->seq, r->idx) & (nb - 1);
        r->next = b[h];
        b[h] = r;
    }
    free(sim->buckets);
    sim->buckets = b;
    sim->nbuckets = nb;
    return 0;
}

static int table_insert(xccl_sim_t *sim, sim_req_t *req)
{
    if (sim->nunmatched >= sim->nbuckets && table_grow(sim) < 0) {
        return -1;
    }
    sim_req_t **b = bucket_of(sim, req->is_send, req->src, req->dst, req->seq, req->idx);
    req->next = *b;
    *b = req;
    req->older = sim->newest;
    req->newer = NULL;
    if (sim->newest) {
        sim->newest->newer = req;
    }
    sim->newest = req;
    sim->nunmatched++;
    return 0;
}

static void table_remove(xccl_sim_t *sim, sim_req_t *req)
{
    for (sim_req_t **pp = bucket_of(sim, req->is_send, req->src, req->dst, req->seq, req->idx);
         *pp; pp = &(*pp)->next) {
        if (*pp == req) {
            *pp = req->next;
            break;
        }
    }
    if (req->newer) {
        req->newer->older = req->older;
    } else {
        sim->newest = req->older;
    }
    if (req->older) {
        req->older->newer = req->newer;
    }
    req->next = req->older = req->newer = NULL;
    sim->nunmatched--;
}
