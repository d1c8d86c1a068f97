/* Schedule construction: a growable array of actions split into steps. */
#include "xccl_sched.h"

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
    free(s->step_round);
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
    /* An empty step is merged with the next one (and takes its round). */
    if (s->nsteps > 0 && s->step_start[s->nsteps - 1] == s->nacts) {
        s->step_round[s->nsteps - 1] = s->rounds;
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
        p = realloc(s->step_round, cap * sizeof(*p));
        if (NULL == p) {
            s->error = 1;
            return;
        }
        s->step_round = p;
        s->steps_cap = cap;
    }
    s->step_round[s->nsteps] = s->rounds;
    s->step_start[s->nsteps++] = s->nacts;
}

/* A reference to another rank's buffer needs peer access. */
static void note_ref(xccl_sched_t *s, xccl_ref_t r)
{
    const int q = xccl_ref_owner(r);
    if (q >= 0 && q != s->rank) {
        s->peer_access = 1;
    }
}

static xccl_action_t *sched_append(xccl_sched_t *s, xccl_act_kind_t kind, size_t len)
{
    const int flag = XCCL_ACT_POST == kind || XCCL_ACT_WAIT == kind;
    if (s->error || (0 == len && !flag)) {
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
        note_ref(s, src);
    }
}

void xccl_sched_recv(xccl_sched_t *s, int peer, xccl_ref_t dst, size_t len)
{
    xccl_action_t *a = sched_append(s, XCCL_ACT_RECV, len);
    if (a) {
        a->peer = peer;
        a->dst = dst;
        note_ref(s, dst);
    }
}

void xccl_sched_copy(xccl_sched_t *s, xccl_ref_t dst, xccl_ref_t src, size_t len)
{
    xccl_action_t *a = sched_append(s, XCCL_ACT_COPY, len);
    if (a) {
        a->a = src;
        a->dst = dst;
        note_ref(s, src);
        note_ref(s, dst);
    }
}

void xccl_sched_reduce(xccl_sched_t *s, xccl_ref_t dst, xccl_ref_t a, xccl_ref_t b, size_t len)
{
    xccl_action_t *r = sched_append(s, XCCL_ACT_REDUCE, len);
    if (r) {
        r->a = a;
        r->b = b;
        r->dst = dst;
        note_ref(s, a);
        note_ref(s, b);
        note_ref(s, dst);
    }
}

void xccl_sched_post(xccl_sched_t *s, uint32_t val)
{
    xccl_action_t *a = sched_append(s, XCCL_ACT_POST, 0);
    if (a) {
        /* A flag only rises: a smaller value would be a wait already met. */
        if (val < s->flag_top) {
            s->error = 1;
        }
        a->idx = val;
        s->flag_top = val;
        s->peer_access = 1;
    }
}

void xccl_sched_wait(xccl_sched_t *s, int peer, uint32_t val)
{
    xccl_action_t *a = sched_append(s, XCCL_ACT_WAIT, 0);
    if (a) {
        a->peer = peer;
        a->idx = val;
        s->peer_access = 1;
    }
}

void xccl_sched_wait_before(xccl_sched_t *s, int peer)
{
    xccl_sched_wait(s, peer, 0);
    if (!s->error && s->nacts > 0) {
        s->acts[s->nacts - 1].len = 1;         /* one call back */
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

/* A peer's buffer is placed by the same map as this rank's: the ranks of a
 * child build it alike, so a region means the same on all of them. */
static xccl_ref_t map_ref(const xccl_buf_map_t *map, const int *group, xccl_ref_t r)
{
    /* The slot is the rank's one slot of the node segment, the same for
     * the child as for the parent: never moved by the map. */
    const int slot = XCCL_BUF_SLOT == r.buf;
    const xccl_buf_id_t b = slot ? XCCL_BUF_SLOT : (xccl_buf_id_t) map->base[r.buf].buf;
    const size_t off = (slot ? 0 : map->base[r.buf].off) + r.off;
    const int q = xccl_ref_owner(r);
    return q < 0 ? xccl_ref(b, off) : xccl_ref_peer(group[q], b, off);
}

static int bad_peer(const xccl_sched_t *parent, const xccl_sched_t *child, const int *group, int q)
{
    return q < 0 || q >= child->size || group[q] < 0 || group[q] >= parent->size;
}

/* Whether child fits parent under group and map (peers exist in the
 * parent, reductions mean the same); if so, the parent's scratch and slot
 * grow to hold what the child uses.  0, or -1 with the parent failed. */
static int child_fits(xccl_sched_t *parent, const xccl_sched_t *child, const int *group,
                      const xccl_buf_map_t *map)
{
    if (parent->error) {
        return -1;
    }
    if (child->error || child->rank < 0 || child->rank >= child->size ||
        group[child->rank] != parent->rank || child->slot_flip > 0 || child->slot_alt > 0 ||
        child->slot_swap || child->no_exit) {
        parent->error = 1;
        return -1;
    }
    size_t extent[XCCL_NBUF] = { 0, 0, child->scratch_bytes, 0 };
    for (size_t i = 0; i < child->nacts; i++) {
        const xccl_action_t *a = &child->acts[i];
        if (XCCL_ACT_SEND == a->kind || XCCL_ACT_RECV == a->kind || XCCL_ACT_WAIT == a->kind) {
            if (bad_peer(parent, child, group, a->peer)) {
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
            if (used[k] && xccl_ref_owner(*refs[k]) >= 0 &&
                bad_peer(parent, child, group, xccl_ref_owner(*refs[k]))) {
                parent->error = 1;
                return -1;
            }
            if (XCCL_ACT_POST == a->kind || XCCL_ACT_WAIT == a->kind) {
                continue;
            }
            if (used[k] && refs[k]->buf < XCCL_NBUF && refs[k]->off + a->len > extent[refs[k]->buf]) {
                extent[refs[k]->buf] = refs[k]->off + a->len;
            }
        }
    }
    if (child->slot_bytes > parent->slot_bytes) {
        parent->slot_bytes = child->slot_bytes;
    }
    for (int b = 0; b < XCCL_NBUF; b++) {
        if (XCCL_BUF_SLOT != b && XCCL_BUF_SCRATCH == map->base[b].buf && extent[b] > 0 &&
            map->base[b].off + extent[b] > parent->scratch_bytes) {
            parent->scratch_bytes = map->base[b].off + extent[b];
        }
    }
    return 0;
}

/* Child action a, translated, to the parent's current step. */
static void put_action(xccl_sched_t *parent, const xccl_action_t *a, const int *group,
                       const xccl_buf_map_t *map, uint32_t flag_base)
{
    switch (a->kind) {
    case XCCL_ACT_SEND:
        xccl_sched_send(parent, group[a->peer], map_ref(map, group, a->a), a->len);
        break;
    case XCCL_ACT_RECV:
        xccl_sched_recv(parent, group[a->peer], map_ref(map, group, a->dst), a->len);
        break;
    case XCCL_ACT_COPY:
        xccl_sched_copy(parent, map_ref(map, group, a->dst), map_ref(map, group, a->a), a->len);
        break;
    case XCCL_ACT_POST:
        xccl_sched_post(parent, flag_base + a->idx);
        break;
    case XCCL_ACT_WAIT:
        if (a->len > 0 && flag_base > 0) {
            /* "done with what came before": the earlier phases */
            xccl_sched_wait(parent, group[a->peer], flag_base);
        } else if (a->len > 0) {
            xccl_sched_wait_before(parent, group[a->peer]);
        } else {
            xccl_sched_wait(parent, group[a->peer], flag_base + a->idx);
        }
        break;
    default:
        xccl_sched_reduce(parent, map_ref(map, group, a->dst), map_ref(map, group, a->a),
                          map_ref(map, group, a->b), a->len);
        break;
    }
}

/* The parent's current step began at round r. */
static void set_round(xccl_sched_t *parent, size_t r)
{
    if (!parent->error && parent->nsteps > 0) {
        parent->step_round[parent->nsteps - 1] = r;
    }
}

int xccl_sched_append(xccl_sched_t *parent, const xccl_sched_t *child, const int *group,
                      const xccl_buf_map_t *map)
{
    if (child_fits(parent, child, group, map) < 0) {
        return -1;
    }
    /* The child's flag values continue the parent's.  Ranks that wait for
     * each other inside the child must have posted the same highest value
     * before it: true when the earlier phases are the same on all of them. */
    const uint32_t flag_base = parent->flag_top;
    /* Every child step starts a new parent step: the parent's pending local
     * actions run before the child's first transfers. */
    for (size_t st = 0; st < child->nsteps; st++) {
        size_t end = st + 1 < child->nsteps ? child->step_start[st + 1] : child->nacts;
        new_step(parent);
        set_round(parent, parent->rounds + child->step_round[st]);
        for (size_t i = child->step_start[st]; i < end; i++) {
            put_action(parent, &child->acts[i], group, map, flag_base);
        }
    }
    parent->rounds += child->rounds;
    return parent->error ? -1 : 0;
}

/* The parent round (relative) of step st of part p, whose step st-1 went
 * to round last: the rounds of a part's steps rise strictly (an appended
 * phase may start at its parent's last round: its steps keep their order). */
static size_t zip_round(const xccl_zip_part_t *p, size_t st, size_t last)
{
    const size_t k = p->at + p->child->step_round[st];
    return st > 0 && k <= last ? last + 1 : k;
}

int xccl_sched_zip(xccl_sched_t *parent, const xccl_zip_part_t *parts, size_t n)
{
    int *ident = NULL;
    size_t *next = calloc(n + 1, sizeof(size_t)), *key = calloc(n + 1, sizeof(size_t));
    int maxsize = 0;
    if (NULL == next || NULL == key) {
        parent->error = 1;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        maxsize = parts[i].child->size > maxsize ? parts[i].child->size : maxsize;
    }
    ident = malloc(((size_t) maxsize + 1) * sizeof(int));
    if (NULL == ident) {
        parent->error = 1;
        goto out;
    }
    for (int q = 0; q < maxsize; q++) {
        ident[q] = q;
    }
    size_t end_round = 0;
    for (size_t i = 0; i < n; i++) {
        const xccl_sched_t *c = parts[i].child;
        if (c->peer_access || c->slot_bytes > 0 ||
            child_fits(parent, c, parts[i].group ? parts[i].group : ident, &parts[i].map) < 0) {
            parent->error = 1;
            goto out;
        }
        if (parts[i].at + c->rounds > end_round) {
            end_round = parts[i].at + c->rounds;
        }
    }
    /* key[i]: the parent round of part i's last step emitted */
    const size_t base = parent->rounds;
    for (;;) {
        size_t now = (size_t) -1;
        for (size_t i = 0; i < n; i++) {
            const xccl_sched_t *c = parts[i].child;
            if (next[i] < c->nsteps) {
                const size_t k = zip_round(&parts[i], next[i], key[i]);
                now = k < now ? k : now;
            }
        }
        if ((size_t) -1 == now) {
            break;
        }
        new_step(parent);
        set_round(parent, base + now);
        end_round = now > end_round ? now : end_round;
        for (size_t i = 0; i < n; i++) {
            const xccl_sched_t *c = parts[i].child;
            if (next[i] >= c->nsteps) {
                continue;
            }
            if (zip_round(&parts[i], next[i], key[i]) == now) {
                const size_t st = next[i]++, e = st + 1 < c->nsteps ? c->step_start[st + 1] : c->nacts;
                key[i] = now;
                for (size_t a = c->step_start[st]; a < e; a++) {
                    put_action(parent, &c->acts[a], parts[i].group ? parts[i].group : ident, &parts[i].map, 0);
                }
            }
        }
    }
    parent->rounds += end_round;
out:
    free(next);
    free(key);
    free(ident);
    return parent->error ? -1 : 0;
}
