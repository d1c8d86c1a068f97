/* The alpha-beta-gamma cost of a schedule, read off the schedule itself. */
#include "xccl_sched.h"
#include "xccl_layout.h"
#include "xccl_cost.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of a local action read from peers' buffers. */
static size_t peer_bytes(const xccl_sched_t *s, const xccl_action_t *a)
{
    const int me = s->rank;
    size_t n = 0;
    if (XCCL_ACT_COPY == a->kind || XCCL_ACT_REDUCE == a->kind) {
        const int qa = xccl_ref_owner(a->a);
        n += qa >= 0 && qa != me ? a->len : 0;
    }
    if (XCCL_ACT_REDUCE == a->kind) {
        const int qb = xccl_ref_owner(a->b);
        n += qb >= 0 && qb != me ? a->len : 0;
    }
    return n;
}

/* A flag wait: counted as a receive (alpha) unless the model prices flags. */
static int flag_priced(const xccl_cost_model_t *m)
{
    return m->flag > 0.0 || m->peer > 0.0;
}

double xccl_sched_cost(const xccl_sched_t *s, const xccl_cost_model_t *m)
{
    double t = 0.0;
    size_t transfer_steps = 0, flag_steps = 0;
    for (size_t st = 0; st < s->nsteps; st++) {
        size_t begin = s->step_start[st];
        size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        size_t sends = 0, recvs = 0, sent = 0, received = 0, reduced = 0, copied = 0;
        size_t waits = 0, from_peers = 0;
        for (size_t i = begin; i < end; i++) {
            const xccl_action_t *a = &s->acts[i];
            from_peers += peer_bytes(s, a);
            switch (a->kind) {
            case XCCL_ACT_SEND: sends++; sent += a->len; break;
            case XCCL_ACT_RECV: recvs++; received += a->len; break;
            case XCCL_ACT_REDUCE: reduced += a->len; break;
            /* A flag wait costs a latency, like a message received (or
             * the model's flag); a peer's buffer is read at memory speed,
             * like a local copy (plus the model's peer). */
            case XCCL_ACT_WAIT:     /* (a previous call's flag: met already, as a rule) */
                if (0 == a->len) {
                    *(flag_priced(m) ? &waits : &recvs) += 1;
                }
                break;
            case XCCL_ACT_POST: break;
            default: copied += a->len; break;
            }
        }
        transfer_steps += (sends + recvs) > 0;
        flag_steps += 0 == sends + recvs && waits > 0;
        t += m->alpha * (double) (sends > recvs ? sends : recvs) +
             m->beta * (double) (sent > received ? sent : received) +
             m->gamma * (double) reduced + m->delta * (double) copied +
             m->flag * (double) waits + m->peer * (double) from_peers;
    }
    /* Rounds left empty by zero-length chunks still cost a latency each,
     * unless the whole call moves nothing. */
    /* (a round of flag waits priced as such is no empty round) */
    if (transfer_steps > 0 && s->rounds > transfer_steps + flag_steps) {
        t += m->alpha * (double) (s->rounds - transfer_steps - flag_steps);
    }
    return t;
}

/* The same model with a link class per transfer: intra-node or inter-node
 * by the layout.  The two classes use different links and overlap. */
double xccl_sched_cost_hier(const xccl_sched_t *s, const xccl_layout_t *l,
                            const xccl_cost_model_t *intra, const xccl_cost_model_t *inter)
{
    return xccl_sched_cost_shared(s, l, intra, inter, NULL, 0);
}

double xccl_sched_cost_shared(const xccl_sched_t *s, const xccl_layout_t *l,
                              const xccl_cost_model_t *intra, const xccl_cost_model_t *inter,
                              const double *shared, size_t nshared)
{
    double t = 0.0, alpha_sum = 0.0;
    size_t transfer_steps = 0, flag_steps = 0;
    const int me = l->node_of[s->rank];
    for (size_t st = 0; st < s->nsteps; st++) {
        size_t begin = s->step_start[st];
        size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        /* [0] intra, [1] inter */
        size_t sends[2] = { 0, 0 }, recvs[2] = { 0, 0 }, sent[2] = { 0, 0 }, received[2] = { 0, 0 };
        size_t reduced = 0, copied = 0, waits = 0, from_peers = 0;
        for (size_t i = begin; i < end; i++) {
            const xccl_action_t *a = &s->acts[i];
            int cls = (XCCL_ACT_SEND == a->kind || XCCL_ACT_RECV == a->kind) && l->node_of[a->peer] != me;
            from_peers += peer_bytes(s, a);
            switch (a->kind) {
            case XCCL_ACT_SEND: sends[cls]++; sent[cls] += a->len; break;
            case XCCL_ACT_RECV: recvs[cls]++; received[cls] += a->len; break;
            case XCCL_ACT_REDUCE: reduced += a->len; break;
            case XCCL_ACT_WAIT:     /* peers of one node; a previous call's flag: met already */
                if (0 == a->len) {
                    *(flag_priced(intra) ? &waits : &recvs[0]) += 1;
                }
                break;
            case XCCL_ACT_POST: break;
            default: copied += a->len; break;
            }
        }
        double link[2];
        for (int c = 0; c < 2; c++) {
            const xccl_cost_model_t *m = c ? inter : intra;
            double bytes = (double) (sent[c] > received[c] ? sent[c] : received[c]);
            /* between nodes, the busiest link this step's flows cross */
            if (c && st < nshared && shared[st] > bytes) {
                bytes = shared[st];
            }
            link[c] = m->alpha * (double) (sends[c] > recvs[c] ? sends[c] : recvs[c]) + m->beta * bytes;
        }
        flag_steps += 0 == sends[0] + recvs[0] + sends[1] + recvs[1] && waits > 0;
        if (sends[0] + recvs[0] + sends[1] + recvs[1] > 0) {
            transfer_steps++;
            alpha_sum += sends[1] + recvs[1] > 0 ? inter->alpha : intra->alpha;
        }
        t += (link[0] > link[1] ? link[0] : link[1]) + intra->gamma * (double) reduced +
             intra->delta * (double) copied + intra->flag * (double) waits + intra->peer * (double) from_peers;
    }
    if (transfer_steps > 0 && s->rounds > transfer_steps + flag_steps) {
        t += alpha_sum / (double) transfer_steps * (double) (s->rounds - transfer_steps - flag_steps);
    }
    return t;
}

int xccl_pick(const double *t, int n, double margin)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (t[i] >= 0 && (best < 0 || t[i] < t[best])) {
            best = i;
        }
    }
    if (best > 0 && t[0] >= 0 && t[best] > (1.0 - margin) * t[0]) {
        best = 0;
    }
    return best;
}

int xccl_cost_parse(const char *text, xccl_cost_model_t *m, char *err, size_t errlen)
{
    static const char *const keys[] = { "alpha", "beta", "gamma", "delta", "flag", "peer" };
    enum { NKEYS = sizeof(keys) / sizeof(keys[0]), REQUIRED = 3 };
    double val[NKEYS];
    int seen[NKEYS] = { 0 };
    const char *p = text;
    for (;;) {
        while (isspace((unsigned char) *p)) {
            p++;
        }
        if ('\0' == *p) {
            break;
        }
        const char *eq = p;
        while (*eq && '=' != *eq && !isspace((unsigned char) *eq)) {
            eq++;
        }
        const size_t klen = (size_t) (eq - p);
        int k = 0;
        while (k < NKEYS && !(strlen(keys[k]) == klen && 0 == strncmp(p, keys[k], klen))) {
            k++;
        }
        if ('=' != *eq || k == NKEYS) {
            snprintf(err, errlen, "\"%.*s\" is not one of alpha= beta= gamma= delta= flag= peer=",
                     (int) klen, p);
            return -1;
        }
        char *end;
        const double v = strtod(eq + 1, &end);
        if (end == eq + 1 || !(*end == '\0' || isspace((unsigned char) *end)) || !isfinite(v) ||
            v < 0.0) {
            snprintf(err, errlen, "%s= needs a number >= 0 (seconds)", keys[k]);
            return -1;
        }
        if (seen[k]++) {
            snprintf(err, errlen, "%s= given twice", keys[k]);
            return -1;
        }
        val[k] = v;
        p = end;
    }
    for (int k = 0; k < REQUIRED; k++) {
        if (!seen[k]) {
            snprintf(err, errlen, "%s= is missing", keys[k]);
            return -1;
        }
    }
    double *field[NKEYS] = { &m->alpha, &m->beta, &m->gamma, &m->delta, &m->flag, &m->peer };
    for (int k = 0; k < NKEYS; k++) {
        if (seen[k]) {
            *field[k] = val[k];
        }
    }
    return 0;
}

int xccl_cost_load(const char *path, xccl_cost_model_t *m, char *err, size_t errlen)
{
    char text[XCCL_COST_FILE_MAX + 1];
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        snprintf(err, errlen, "cannot open it");
        return -1;
    }
    const size_t n = fread(text, 1, sizeof(text) - 1, f);
    const int whole = feof(f) && !ferror(f);
    fclose(f);
    if (!whole) {
        snprintf(err, errlen, "cannot read it, or it is over %d bytes", XCCL_COST_FILE_MAX);
        return -1;
    }
    text[n] = '\0';
    return xccl_cost_parse(text, m, err, errlen);
}
