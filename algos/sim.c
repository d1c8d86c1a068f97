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
#include "xccl_sched.h"
#include "xccl_exec.h"
#include "xccl_sim.h"

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

/* A rank's flag: the last (seq, val) it posted. */
typedef struct {
    int posted;
    uint32_t seq, val;
} sim_flag_t;

struct xccl_sim {
    int n;
    sim_rank_t *ranks;
    xccl_transport_t *tr;
    xccl_peer_t *peer;         /* [n] peer access of each rank */
    sim_flag_t *flags;         /* [n] */
    /* During xccl_sim_run: the executors, and which ranks have entered the
     * call (progressed once): a rank's buffers are valid between its entry
     * and its end. */
    xccl_exec_t *execs;
    int nexecs;
    char *entered;
    sim_req_t **buckets;       /* nbuckets, a power of two */
    size_t nbuckets, nunmatched;
    sim_req_t *newest;         /* list of unmatched requests */
    unsigned long matches;
    int read_only;             /* peers' buffers copied (read(), write()), never mapped (buf()) */
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
/* Peer access: the other virtual ranks' buffers, flags in memory           */
/* ------------------------------------------------------------------------ */

static void *peer_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    sim_rank_t *r = ctx;
    xccl_sim_t *sim = r->sim;
    const char *why = NULL;
    if (NULL == sim->execs || peer < 0 || peer >= sim->nexecs || (int) id < 0 || id >= XCCL_NBUF) {
        why = "not a rank of the run";
    } else if (!sim->entered[peer] && !(XCCL_BUF_SLOT == id && sim->execs[r->rank].s->slot_swap)) {
        /* (where the two slots trade places from call to call, a rank
         * writes the other's from the start: the last call's exit barrier
         * kept it safe) */
        why = "before it entered the call";
    } else if (sim->execs[peer].status > 0 &&
               !(XCCL_BUF_SLOT == id && (sim->execs[peer].s->slot_flip || sim->execs[peer].s->no_exit))) {
        /* (a schedule alternating slot regions, or without an exit barrier,
         * leaves its slot readable after it ends: test_shm_algos'
         * successive calls check that the next calls leave it alone) */
        why = "after it finished the call";
    }
    if (why) {
        snprintf(sim->error, sizeof(sim->error), "rank %d touched buffer %d of rank %d %s",
                 r->rank, (int) id, peer, why);
        return NULL;
    }
    return sim->execs[peer].bufs[id];
}

static void *sim_peer_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    const sim_rank_t *r = ctx;
    if (r->sim->read_only && XCCL_BUF_SLOT != id) {
        return NULL;                 /* copied only: sim_peer_read, sim_peer_write */
    }
    return peer_buf(ctx, peer, id);
}

static int sim_peer_read(void *ctx, int peer, xccl_buf_id_t id, size_t off, void *dst, size_t len)
{
    const char *src = peer_buf(ctx, peer, id);
    if (NULL == src) {
        return -1;
    }
    memmove(dst, src + off, len);
    return 0;
}

static int sim_peer_write(void *ctx, int peer, xccl_buf_id_t id, size_t off, const void *src, size_t len)
{
    char *dst = peer_buf(ctx, peer, id);
    if (NULL == dst) {
        return -1;
    }
    memmove(dst + off, src, len);
    return 0;
}

void xccl_sim_peer_read_only(xccl_sim_t *sim, int on)
{
    sim->read_only = on;
}

static int sim_post_flag(void *ctx, uint32_t seq, uint32_t val)
{
    sim_rank_t *r = ctx;
    sim_flag_t *f = &r->sim->flags[r->rank];
    f->posted = 1;
    f->seq = seq;
    f->val = val;
    return 0;
}

static int sim_test_flag(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    sim_rank_t *r = ctx;
    xccl_sim_t *sim = r->sim;
    if (peer < 0 || peer >= sim->n) {
        snprintf(sim->error, sizeof(sim->error), "rank %d: waits for flag of rank %d, out of range",
                 r->rank, peer);
        return -1;
    }
    const sim_flag_t *f = &sim->flags[peer];
    /* Serial number arithmetic: a later call's flag has passed this one. */
    return f->posted && (f->seq == seq ? f->val >= val : (int32_t) (f->seq - seq) > 0);
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
    sim->peer = calloc((size_t) nranks, sizeof(*sim->peer));
    sim->flags = calloc((size_t) nranks, sizeof(*sim->flags));
    sim->nbuckets = SIM_MIN_BUCKETS;
    sim->buckets = calloc(sim->nbuckets, sizeof(*sim->buckets));
    if (NULL == sim->ranks || NULL == sim->tr || NULL == sim->peer || NULL == sim->flags ||
        NULL == sim->buckets) {
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
        sim->peer[i].ctx = &sim->ranks[i];
        sim->peer[i].buf = sim_peer_buf;
        sim->peer[i].post = sim_post_flag;
        sim->peer[i].test = sim_test_flag;
        sim->peer[i].read = sim_peer_read;
        sim->peer[i].write = sim_peer_write;
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
    free(sim->peer);
    free(sim->flags);
    free(sim);
}

const xccl_peer_t *xccl_sim_peer(xccl_sim_t *sim, int rank)
{
    return &sim->peer[rank];
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
    sim->entered = calloc((size_t) n, 1);
    if (NULL == order || NULL == sim->entered) {
        free(order);
        free(sim->entered);
        sim->entered = NULL;
        return -1;
    }
    sim->execs = execs;
    sim->nexecs = n;
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
            sim->entered[order[i]] = 1;
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
    free(sim->entered);
    sim->entered = NULL;
    sim->execs = NULL;
    sim->nexecs = 0;
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
