/* Schedule construction: a growable array of actions split into steps. */
#include "xccl_algos.h"

#include <stdlib.h>
#include <string.h>

void xccl_sched_init(xccl_sched_t *s, int rank, int size, size_t elem_size)
{
    memset(s, 0, sizeof(*s));
    s->rank = rank;
    s->size = size;
    s->elem_size = elem_size ? elem_size : 1;
}

void xccl_sched_fini(xccl_sched_t *s)
{
    free(s->acts);
    free(s->step_start);
    memset(s, 0, sizeof(*s));
}

static void new_step(xccl_sched_t *s);

void xccl_sched_step(xccl_sched_t *s)
{
    if (!s->error) {
        s->rounds++;
        new_step(s);
    }
}

static void new_step(xccl_sched_t *s)
{
    /* An empty step is merged with the next one. */
    if (s->nsteps > 0 && s->step_start[s->nsteps - 1] == s->nacts) {
        return;
    }
    if (s->nsteps + 1 >= s->steps_cap) {
        size_t cap = s->steps_cap ? 2 * s->steps_cap : 16;
        size_t *p = realloc(s->step_start, cap * sizeof(*p));
        if (NULL == p) {
            s->error = 1;
            return;
        }
        s->step_start = p;
        s->steps_cap = cap;
    }
    s->step_start[s->nsteps++] = s->nacts;
}

static xccl_action_t *sched_append(xccl_sched_t *s, xccl_act_kind_t kind, size_t len)
{
    if (s->error || 0 == len) {
        return NULL;
    }
    if (0 == s->nsteps) {
        new_step(s);            /* implicit first step: not a round */
        if (s->error) {
            return NULL;
        }
    }
    if (s->nacts == s->acts_cap) {
        size_t cap = s->acts_cap ? 2 * s->acts_cap : 32;
        xccl_action_t *p = realloc(s->acts, cap * sizeof(*p));
        if (NULL == p) {
            s->error = 1;
            return NULL;
        }
        s->acts = p;
        s->acts_cap = cap;
    }
    xccl_action_t *a = &s->acts[s->nacts++];
    memset(a, 0, sizeof(*a));
    a->kind = (uint8_t) kind;
    a->len = len;
    a->peer = -1;
    return a;
}

void xccl_sched_send(xccl_sched_t *s, int peer, xccl_ref_t src, size_t len)
{
    xccl_action_t *a = sched_append(s, XCCL_ACT_SEND, len);
    if (a) {
        a->peer = peer;
        a->a = src;
    }
}

void xccl_sched_recv(xccl_sched_t *s, int peer, xccl_ref_t dst, size_t len)
{
    xccl_action_t *a = sched_append(s, XCCL_ACT_RECV, len);
    if (a) {
        a->peer = peer;
        a->dst = dst;
    }
}

void xccl_sched_copy(xccl_sched_t *s, xccl_ref_t dst, xccl_ref_t src, size_t len)
{
    xccl_action_t *a = sched_append(s, XCCL_ACT_COPY, len);
    if (a) {
        a->a = src;
        a->dst = dst;
    }
}

void xccl_sched_reduce(xccl_sched_t *s, xccl_ref_t dst, xccl_ref_t a, xccl_ref_t b, size_t len)
{
    xccl_action_t *r = sched_append(s, XCCL_ACT_REDUCE, len);
    if (r) {
        r->a = a;
        r->b = b;
        r->dst = dst;
    }
}

int xccl_sched_finalize(xccl_sched_t *s)
{
    if (s->error) {
        return -1;
    }
    if (0 == s->nsteps) {
        new_step(s);            /* implicit first step: not a round */
        if (s->error) {
            return -1;
        }
    }
    /* Message i from A to B gets index i on both sides: builders emit the
     * sends of a pair in the same order as the receives. */
    uint32_t *sent = calloc((size_t) s->size * 2, sizeof(uint32_t));
    if (NULL == sent) {
        s->error = 1;
        return -1;
    }
    uint32_t *recvd = sent + s->size;
    s->max_xfers = 0;
    for (size_t st = 0; st < s->nsteps; st++) {
        size_t end = (st + 1 < s->nsteps) ? s->step_start[st + 1] : s->nacts;
        size_t xfers = 0;
        for (size_t i = s->step_start[st]; i < end; i++) {
            xccl_action_t *a = &s->acts[i];
            if (XCCL_ACT_SEND == a->kind) {
                a->idx = sent[a->peer]++;
                xfers++;
            } else if (XCCL_ACT_RECV == a->kind) {
                a->idx = recvd[a->peer]++;
                xfers++;
            }
        }
        if (xfers > s->max_xfers) {
            s->max_xfers = xfers;
        }
    }
    free(sent);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Composition: a child schedule on a sub-group, appended to its parent.    */
/* ------------------------------------------------------------------------ */

static xccl_ref_t map_ref(const xccl_buf_map_t *map, xccl_ref_t r)
{
    return xccl_ref((xccl_buf_id_t) map->base[r.buf].buf, map->base[r.buf].off + r.off);
}

int xccl_sched_append(xccl_sched_t *parent, const xccl_sched_t *child, const int *group,
                      const xccl_buf_map_t *map)
{
    if (parent->error) {
        return -1;
    }
    if (child->error || child->rank < 0 || child->rank >= child->size ||
        group[child->rank] != parent->rank) {
        parent->error = 1;
        return -1;
    }
    /* Peers must exist in the parent; reductions must mean the same. */
    size_t extent[XCCL_NBUF] = { 0, 0, child->scratch_bytes };
    for (size_t i = 0; i < child->nacts; i++) {
        const xccl_action_t *a = &child->acts[i];
        if (XCCL_ACT_SEND == a->kind || XCCL_ACT_RECV == a->kind) {
            if (a->peer < 0 || a->peer >= child->size || group[a->peer] < 0 ||
                group[a->peer] >= parent->size) {
                parent->error = 1;
                return -1;
            }
        }
        if (XCCL_ACT_REDUCE == a->kind && child->elem_size != parent->elem_size) {
            parent->error = 1;
            return -1;
        }
        const xccl_ref_t *refs[3] = { &a->a, &a->b, &a->dst };
        int used[3] = { XCCL_ACT_RECV != a->kind, XCCL_ACT_REDUCE == a->kind,
                        XCCL_ACT_SEND != a->kind };
        for (int k = 0; k < 3; k++) {
            if (used[k] && refs[k]->buf < XCCL_NBUF && refs[k]->off + a->len > extent[refs[k]->buf]) {
                extent[refs[k]->buf] = refs[k]->off + a->len;
            }
        }
    }
    for (int b = 0; b < XCCL_NBUF; b++) {
        if (XCCL_BUF_SCRATCH == map->base[b].buf && extent[b] > 0 &&
            map->base[b].off + extent[b] > parent->scratch_bytes) {
            parent->scratch_bytes = map->base[b].off + extent[b];
        }
    }
    /* Every child step starts a new parent step: the parent's pending local
     * actions run before the child's first transfers. */
    for (size_t st = 0; st < child->nsteps; st++) {
        size_t end = st + 1 < child->nsteps ? child->step_start[st + 1] : child->nacts;
        new_step(parent);
        for (size_t i = child->step_start[st]; i < end; i++) {
            const xccl_action_t *a = &child->acts[i];
            switch (a->kind) {
            case XCCL_ACT_SEND:
                xccl_sched_send(parent, group[a->peer], map_ref(map, a->a), a->len);
                break;
            case XCCL_ACT_RECV:
                xccl_sched_recv(parent, group[a->peer], map_ref(map, a->dst), a->len);
                break;
            case XCCL_ACT_COPY:
                xccl_sched_copy(parent, map_ref(map, a->dst), map_ref(map, a->a), a->len);
                break;
            default:
                xccl_sched_reduce(parent, map_ref(map, a->dst), map_ref(map, a->a),
                                  map_ref(map, a->b), a->len);
                break;
            }
        }
    }
    parent->rounds += child->rounds;
    return parent->error ? -1 : 0;
}
