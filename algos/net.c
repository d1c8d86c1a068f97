/*
 * The network between nodes (xccl_net_t, algos/xccl_cost.h): which links a
 * step's inter-node flows share, read off the schedules of the ranks that
 * share them, as bytes of the busiest link per step for the cost model
 * (xccl_sched_cost_shared).  The description, its parser and the
 * prediction over sampled ranks that xccl_simulate, xccl_info and the
 * component's selection all use.
 */
#include "xccl_sched.h"
#include "xccl_layout.h"
#include "xccl_cost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One step's bytes on the links of one node: its link to the network, its
 * leaf's uplinks (fat tree), the torus links of each direction (bytes times
 * hops: the load every link of that direction carries when every node does
 * what this one does). */
enum { DIR_XP, DIR_XM, DIR_YP, DIR_YM, NDIR };
typedef struct {
    double up, down;
    double leaf_up, leaf_down;
    double dir[NDIR];
} step_load_t;

typedef struct {
    step_load_t *v;
    size_t n, cap;
    int node;                  /* whose loads; -1: none yet */
} loads_t;

/* ------------------------------------------------------------ description */

/* A whole number in [1, max] at *s, *s moved past it; -1 if none. */
static int count_at(const char **s, long max)
{
    char *end;
    const long v = strtol(*s, &end, 10);
    if (end == *s || v < 1 || v > max) {
        return -1;
    }
    *s = end;
    return (int) v;
}

int xccl_net_parse(xccl_net_t *n, const char *spec, char *err, size_t errlen)
{
    xccl_net_t t = { 0 };
    const char *rest = spec;
    if (0 == strncmp(spec, "none", 4)) {
        rest = spec + 4;
    } else if (0 == strncmp(spec, "fattree:", 8)) {
        t.kind = XCCL_NET_FAT_TREE;
        t.oversub = 1.0;
        rest = spec + 8;
        if ((t.leaf_nodes = count_at(&rest, 1 << 20)) < 0) {
            snprintf(err, errlen, "fattree: needs the nodes per leaf switch (>= 1)");
            return -1;
        }
        if (':' == *rest) {
            char *end;
            t.oversub = strtod(rest + 1, &end);
            if (end == rest + 1 || !(t.oversub >= 1.0 && t.oversub <= 1e6)) {
                snprintf(err, errlen, "fattree: oversubscription must be a number >= 1");
                return -1;
            }
            rest = end;
        }
    } else if (0 == strncmp(spec, "torus:", 6)) {
        t.kind = XCCL_NET_TORUS;
        rest = spec + 6;
        if ((t.x = count_at(&rest, 1 << 20)) < 0 || 'x' != *rest++ || (t.y = count_at(&rest, 1 << 20)) < 0) {
            snprintf(err, errlen, "torus: needs XxY, both >= 1");
            return -1;
        }
    } else {
        snprintf(err, errlen, "\"%s\" is not none, fattree:LEAF[:OVERSUB] or torus:XxY", spec);
        return -1;
    }
    if (0 == strncmp(rest, ",nics=", 6) && XCCL_NET_NONE != t.kind) {
        rest += 6;
        if ((t.nics = count_at(&rest, 1 << 16)) < 0) {
            snprintf(err, errlen, "nics= needs a number >= 1");
            return -1;
        }
    }
    if ('\0' != *rest) {
        snprintf(err, errlen, "unexpected \"%s\" in the network", rest);
        return -1;
    }
    *n = t;
    return 0;
}

void xccl_net_format(const xccl_net_t *n, char *buf, size_t len)
{
    int k = 0;
    switch (n->kind) {
    case XCCL_NET_FAT_TREE: k = snprintf(buf, len, "fattree:%d:%g", n->leaf_nodes, n->oversub); break;
    case XCCL_NET_TORUS: k = snprintf(buf, len, "torus:%dx%d", n->x, n->y); break;
    default: snprintf(buf, len, "none"); return;
    }
    if (k >= 0 && (size_t) k < len && n->nics) {
        snprintf(buf + k, len - (size_t) k, ",nics=%d", n->nics);
    }
}

int xccl_net_check(const xccl_net_t *n, const xccl_layout_t *l, char *err, size_t errlen)
{
    if (XCCL_NET_TORUS == n->kind && (long long) n->x * n->y < l->nnodes) {
        snprintf(err, errlen, "a %dx%d torus has no room for %d nodes", n->x, n->y, l->nnodes);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ prediction */

static int net_on(const xccl_net_t *net)
{
    return NULL != net && XCCL_NET_NONE != net->kind;
}

/* The NICs of a node: its link, and a torus link, carry that many NICs' bytes. */
static double node_cap(const xccl_net_t *net, const xccl_layout_t *l, int node)
{
    return net->nics ? net->nics : xccl_layout_node_size(l, node);
}

/* Whether a flow between nodes a and b leaves their leaf switch (a fat
 * tree's; other networks have no leaves). */
static int crosses_leaf(const xccl_net_t *net, int a, int b)
{
    return XCCL_NET_FAT_TREE == net->kind && a / net->leaf_nodes != b / net->leaf_nodes;
}

/* The nodes [*first, *last) of node's leaf. */
static void leaf_nodes(const xccl_net_t *net, const xccl_layout_t *l, int node, int *first, int *last)
{
    const int per = XCCL_NET_FAT_TREE == net->kind ? net->leaf_nodes : 1;
    *first = node / per * per;
    *last = *first + per < l->nnodes ? *first + per : l->nnodes;
}

static double leaf_cap(const xccl_net_t *net, const xccl_layout_t *l, int node)
{
    int first, last;
    double cap = 0.0;
    leaf_nodes(net, l, node, &first, &last);
    for (int k = first; k < last; k++) {
        cap += node_cap(net, l, k);
    }
    return cap / net->oversub;
}

/* The shortest way from a to b in a ring of n (ties: forward). */
static int ring_delta(int a, int b, int n)
{
    int d = ((b - a) % n + n) % n;
    return d <= n / 2 ? d : d - n;
}

/* The hops of the torus route from node a to node b, by direction. */
static void torus_hops(const xccl_net_t *net, int a, int b, int hops[NDIR])
{
    const int dx = ring_delta(a % net->x, b % net->x, net->x);
    const int dy = ring_delta(a / net->x, b / net->x, net->y);
    hops[DIR_XP] = dx > 0 ? dx : 0;
    hops[DIR_XM] = dx < 0 ? -dx : 0;
    hops[DIR_YP] = dy > 0 ? dy : 0;
    hops[DIR_YM] = dy < 0 ? -dy : 0;
}

static step_load_t *load_at(loads_t *ld, size_t st)
{
    if (st >= ld->cap) {
        size_t cap = ld->cap ? ld->cap : 64;
        while (cap <= st) {
            cap *= 2;
        }
        step_load_t *v = realloc(ld->v, cap * sizeof(*v));
        if (NULL == v) {
            return NULL;
        }
        memset(v + ld->cap, 0, (cap - ld->cap) * sizeof(*v));
        ld->v = v;
        ld->cap = cap;
    }
    ld->n = st + 1 > ld->n ? st + 1 : ld->n;
    return &ld->v[st];
}

/* Adds rank d's inter-node flows (its schedule s) to the loads of node. */
static int add_flows(const xccl_net_t *net, const xccl_layout_t *l, const xccl_sched_t *s, int node,
                     loads_t *ld)
{
    const int me = l->node_of[s->rank];
    for (size_t st = 0; st < s->nsteps; st++) {
        const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        for (size_t i = s->step_start[st]; i < end; i++) {
            const xccl_action_t *a = &s->acts[i];
            const int send = XCCL_ACT_SEND == a->kind;
            if ((!send && XCCL_ACT_RECV != a->kind) || l->node_of[a->peer] == me) {
                continue;
            }
            step_load_t *v = load_at(ld, st);
            if (NULL == v) {
                return -1;
            }
            const double len = (double) a->len;
            const int there = l->node_of[a->peer];
            if (crosses_leaf(net, me, there)) {
                *(send ? &v->leaf_up : &v->leaf_down) += len;
            }
            if (me != node) {
                continue;
            }
            *(send ? &v->up : &v->down) += len;
            if (XCCL_NET_TORUS == net->kind && send) {
                int hops[NDIR];
                torus_hops(net, me, there, hops);
                for (int k = 0; k < NDIR; k++) {
                    v->dir[k] += hops[k] * len;
                }
            }
        }
    }
    return 0;
}

/* The loads of node's links: the flows of every rank of its leaf. */
static int node_loads(const xccl_net_t *net, const xccl_layout_t *l, int node, size_t es,
                      xccl_rank_build_fn build, void *arg, loads_t *ld)
{
    int first, last;
    ld->n = 0;
    if (ld->v) {
        memset(ld->v, 0, ld->cap * sizeof(ld->v[0]));
    }
    ld->node = node;
    leaf_nodes(net, l, node, &first, &last);
    for (int k = l->node_first[first]; k < l->node_first[last]; k++) {
        xccl_sched_t s;
        xccl_sched_init(&s, l->members[k], l->size, es);
        int rc = build(&s, arg);
        if (0 == rc) {
            rc = add_flows(net, l, &s, node, ld);
        }
        xccl_sched_fini(&s);
        if (0 != rc) {
            return -1;
        }
    }
    return 0;
}

/* shared[st] for rank s->rank: the bytes of the busiest link (in NICs'
 * time) its inter-node flows of step st cross. */
static void rank_shared(const xccl_net_t *net, const xccl_layout_t *l, const xccl_sched_t *s,
                        const loads_t *ld, double *shared)
{
    const int me = l->node_of[s->rank];
    const double ncap = node_cap(net, l, me);
    const double lcap = XCCL_NET_FAT_TREE == net->kind ? leaf_cap(net, l, me) : 1.0;
    for (size_t st = 0; st < s->nsteps; st++) {
        const size_t end = st + 1 < s->nsteps ? s->step_start[st + 1] : s->nacts;
        double worst = 0.0;
        for (size_t i = s->step_start[st]; i < end && st < ld->n; i++) {
            const xccl_action_t *a = &s->acts[i];
            const int send = XCCL_ACT_SEND == a->kind;
            if ((!send && XCCL_ACT_RECV != a->kind) || l->node_of[a->peer] == me) {
                continue;
            }
            const step_load_t *v = &ld->v[st];
            const int there = l->node_of[a->peer];
            double t = (send ? v->up : v->down) / ncap;
            if (crosses_leaf(net, me, there)) {
                const double u = (send ? v->leaf_up : v->leaf_down) / lcap;
                t = u > t ? u : t;
            }
            if (XCCL_NET_TORUS == net->kind) {
                /* a receive comes the other way: every node's flow of that
                 * direction loads its links alike */
                int hops[NDIR];
                torus_hops(net, send ? me : there, send ? there : me, hops);
                for (int k = 0; k < NDIR; k++) {
                    const double u = hops[k] ? v->dir[k] / ncap : 0.0;
                    t = u > t ? u : t;
                }
            }
            worst = t > worst ? t : worst;
        }
        shared[st] = worst;
    }
}

/* One sampled rank's time: its schedule priced with the loads of its node. */
static double rank_time(const xccl_layout_t *l, const xccl_net_t *net, int r, size_t es,
                        xccl_rank_build_fn build, void *arg, loads_t *ld,
                        const xccl_cost_model_t *intra, const xccl_cost_model_t *inter)
{
    xccl_sched_t s;
    double t = -1.0;
    xccl_sched_init(&s, r, l->size, es);
    if (0 != build(&s, arg)) {
        xccl_sched_fini(&s);
        return -1.0;
    }
    if (!net_on(net)) {
        t = xccl_sched_cost_hier(&s, l, intra, inter);
    } else if (ld->node == l->node_of[r] || 0 == node_loads(net, l, l->node_of[r], es, build, arg, ld)) {
        double *shared = malloc((s.nsteps ? s.nsteps : 1) * sizeof(double));
        if (NULL != shared) {
            rank_shared(net, l, &s, ld, shared);
            t = xccl_sched_cost_shared(&s, l, intra, inter, shared, s.nsteps);
            free(shared);
        }
    }
    xccl_sched_fini(&s);
    return t;
}

double xccl_predict_net(const xccl_layout_t *l, const xccl_net_t *net, size_t elem_size,
                        xccl_rank_build_fn build, void *arg, const int *ranks, int n,
                        const xccl_cost_model_t *intra, const xccl_cost_model_t *inter)
{
    int sample[8];
    if (0 == n && l->size > 64) {
        const int last = l->nnodes - 1;
        sample[0] = 0;
        sample[1] = l->size / 2;
        sample[2] = l->size - 1;
        sample[3] = xccl_layout_leader(l, 0);
        sample[4] = xccl_layout_rank_at(l, 0, xccl_layout_node_size(l, 0) - 1);
        sample[5] = xccl_layout_leader(l, last);
        sample[6] = xccl_layout_rank_at(l, last, xccl_layout_node_size(l, last) - 1);
        sample[7] = 1;
        ranks = sample;
        n = 8;
    }
    const int count = 0 == n ? l->size : n;
    int *order = malloc((size_t) count * sizeof(int));
    if (NULL == order) {
        return -1.0;
    }
    for (int i = 0; i < count; i++) {
        /* every rank by node (l->members), so that a node's loads serve all
         * its sampled ranks */
        order[i] = 0 == n ? l->members[i] : ranks[i];
        if (order[i] < 0 || order[i] >= l->size) {
            free(order);
            return -1.0;
        }
        /* (insertion: a sample is a few ranks) */
        for (int k = i; k > 0 && l->node_of[order[k - 1]] > l->node_of[order[k]]; k--) {
            const int x = order[k];
            order[k] = order[k - 1];
            order[k - 1] = x;
        }
    }
    loads_t ld = { NULL, 0, 0, -1 };
    double worst = 0.0;
    for (int i = 0; i < count; i++) {
        const double t = rank_time(l, net, order[i], elem_size, build, arg, &ld, intra, inter);
        if (t < 0) {
            worst = -1.0;
            break;
        }
        worst = t > worst ? t : worst;
    }
    free(ld.v);
    free(order);
    return worst;
}

/* (here, not in cost.c: the prediction with links shared is this file's,
 * and cost.c stays below it) */
double xccl_predict_hier(const xccl_layout_t *l, size_t elem_size, xccl_rank_build_fn build, void *arg,
                         const int *ranks, int n, const xccl_cost_model_t *intra,
                         const xccl_cost_model_t *inter)
{
    return xccl_predict_net(l, NULL, elem_size, build, arg, ranks, n, intra, inter);
}
