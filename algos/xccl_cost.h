/*
 * xccl algorithms, cost model: alpha-beta parameters, the predicted time
 * of a schedule (flat, and per link class on a node layout), cost files,
 * the defaults, auto's pick.  Section of the algos API; algos/xccl_algos.h
 * includes every section.
 */
#ifndef XCCL_COST_H
#define XCCL_COST_H

#include <stddef.h>

#include "xccl_layout.h"
#include "xccl_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Cost model                                                               */
/* ------------------------------------------------------------------------ */

/* alpha-beta-gamma parameters of one link level. */
typedef struct {
    double alpha;              /* seconds per message (latency, per message a rank posts) */
    double beta;               /* seconds per byte on the wire */
    double gamma;              /* seconds per byte reduced */
    double delta;              /* seconds per byte copied locally */
    /* Peer access (the node's shared segment).  0 keeps the
     * first reading, which suits CUDA IPC: a flag wait costs alpha like a
     * message received, a peer's buffer is read like a local one.  Set,
     * a flag wait costs flag (a peer's cache line, polled; not a message)
     * and every byte a copy or reduction reads from a peer's buffer costs
     * peer on top of delta or gamma (another core's cache or memory). */
    double flag;
    double peer;
} xccl_cost_model_t;

/* Predicted time of one rank's schedule: each step costs
 *   alpha * max(sends, receives) + beta * max(bytes sent, bytes received)
 *   + gamma * bytes reduced + delta * bytes copied,
 * i.e. a rank's messages of a step go out one after the other, sending and
 * receiving overlap (full duplex), and reductions follow the transfers.
 * Dependencies between ranks are modelled only through rounds: a rank that
 * moves any data pays alpha for every round of its algorithm, also for the
 * rounds whose transfers were empty (zero-length chunks of a small message:
 * the data still waits for the ranks before it, e.g. around a ring).  For
 * symmetric algorithms a rank's cost is the collective's; callers take the
 * max over a few ranks otherwise (e.g. the root and a leaf of a tree).
 * With m->flag or m->peer set (peer access), a step also costs
 *   flag * flag waits + peer * bytes read from peers' buffers
 * and flag waits are no receives. */
double xccl_sched_cost(const xccl_sched_t *s, const xccl_cost_model_t *m);

/* A cost file (xccl_calibrate writes one; coll_xccl_cost_file,
 * xccl_simulate -F): whitespace-separated key=value, keys alpha, beta,
 * gamma, delta, flag, peer (the fields above, seconds), each at most once;
 * alpha, beta and gamma must be there.  0 and *m updated with the values
 * given (the others keep theirs), or -1 with *m untouched and why in err:
 * an unknown key, a value that is no finite number >= 0, a key given
 * twice, a required key missing. */
int xccl_cost_parse(const char *text, xccl_cost_model_t *m, char *err, size_t errlen);
/* xccl_cost_parse of the file at path (at most XCCL_COST_FILE_MAX bytes):
 * 0, or -1 with *m untouched and why in err (also a file that cannot be
 * read, or a longer one). */
#define XCCL_COST_FILE_MAX 4095
int xccl_cost_load(const char *path, xccl_cost_model_t *m, char *err, size_t errlen);

/* Defaults (coll_xccl_cost_*, xccl_simulate, xccl_info): xccl_calibrate's
 * readings plus xccl's per-message software overhead; between nodes a
 * 10 Gb/s Ethernet-class TCP link (figures: docs/bench/select-figures.md). */
#define XCCL_COST_ALPHA 1.5e-6
#define XCCL_COST_BETA 2.5e-10
#define XCCL_COST_GAMMA 2.0e-10
#define XCCL_COST_DELTA 1.3e-10            /* memcpy, one core, 64 MiB */
/* The shared-memory level (flag, peer of the intra-node model): a flag
 * seen by a peer core of one socket plus the executor's poll; bytes from
 * another core's cache.  xccl_calibrate measures both (a cost file sets
 * them); the defaults are close to its readings (figures:
 * docs/bench/select-figures.md). */
#define XCCL_COST_SHM_FLAG 2.0e-7
#define XCCL_COST_SHM_PEER 5.0e-11
#define XCCL_COST_INTER_ALPHA 2.0e-5
#define XCCL_COST_INTER_BETA 9.0e-10
/* Auto keeps the measured default (the first algorithm) unless another is
 * predicted faster by this fraction: at 0.09 auto is within 1/(1 - 0.09)
 * < 1.1 of the best candidate in every cell of xccl_simulate's p = 8 ..
 * 65536, 8 B .. 1 GiB (test_select_scale); a larger margin keeps ring well
 * behind the best (figures: docs/bench/select-figures.md). */
#define XCCL_MODEL_MARGIN 0.09
#define XCCL_RING_SEGMENT ((size_t) 256 * 1024)

/* Auto selection among n predicted times t[i] (negative: the algorithm
 * does not apply): the cheapest, except that algorithm 0, the measured
 * default, stays unless the cheapest beats it by the fraction margin.
 * Returns the index, or -1 if none applies. */
int xccl_pick(const double *t, int n, double margin);

/* Cost with a link class per peer: a transfer between ranks of one node
 * costs intra's alpha and beta, between nodes inter's.  Per step the two
 * classes overlap (different links): max(intra time, inter time), each
 * alpha * max(sends, receives) + beta * max(bytes sent, received), then
 * intra's gamma and delta for local work.  Empty rounds cost the mean
 * alpha of the transfer steps.  With every peer on one node, or intra ==
 * inter and one class per step, this is xccl_sched_cost. */
double xccl_sched_cost_hier(const xccl_sched_t *s, const xccl_layout_t *l,
                            const xccl_cost_model_t *intra, const xccl_cost_model_t *inter);

/* xccl_sched_cost_hier where links are shared: shared[st] (st < nshared),
 * when more than the bytes this rank sends or receives between nodes in
 * step st, takes their place in the step's inter-node term: the bytes of
 * the busiest link the step's inter-node flows of this rank cross, in
 * units of one NIC's time (algos/net.c computes them from a network,
 * xccl_net_t).  shared NULL: xccl_sched_cost_hier. */
double xccl_sched_cost_shared(const xccl_sched_t *s, const xccl_layout_t *l,
                              const xccl_cost_model_t *intra, const xccl_cost_model_t *inter,
                              const double *shared, size_t nshared);

/* ------------------------------------------------------------------------ */
/* Network: what links the nodes share                                      */
/* ------------------------------------------------------------------------ */

/* Without a network (XCCL_NET_NONE, zeroed memory) every rank's inter-node
 * transfers run at inter.beta whatever the others do: one pair of alpha
 * and beta per level.  With one, a step's inter-node bytes cost what the
 * busiest link its flows cross carries, every link a whole number of NICs
 * (a NIC moves 1/inter.beta bytes a second each way):
 *   node link     a node's traffic to and from other nodes, over nics NICs
 *                 (0: one per rank, the rails: then only ranks that send
 *                 more than their share slow down);
 *   fat tree      two tiers: leaf switches of leaf_nodes nodes (node n on
 *                 leaf n / leaf_nodes), whose uplinks carry what leaves the
 *                 leaf with the bandwidth of the leaf's NICs / oversub;
 *   2D torus      nodes on an x by y torus (node n at n % x, n / x), a
 *                 link of a node's NIC bandwidth to each of 4 neighbours,
 *                 routes x first then y the short way round.
 * The flows of a step are read off the schedules of the ranks that share
 * the links (those of the rank's leaf; for a torus those of its node,
 * every node taken to do what its node does: a shift by d nodes puts |d|
 * flows on every link of that direction).  Steps of different ranks with
 * one index are taken to run together, as the cost model does throughout.
 * xccl_simulate -N, the selection policy's net and the cost model all read
 * this one description. */
typedef enum { XCCL_NET_NONE, XCCL_NET_FAT_TREE, XCCL_NET_TORUS } xccl_net_kind_t;
typedef struct {
    int kind;                  /* xccl_net_kind_t */
    int nics;                  /* NICs per node; 0: one per rank */
    int leaf_nodes;            /* fat tree: nodes per leaf switch */
    double oversub;            /* fat tree: leaf down bandwidth / up bandwidth, >= 1 */
    int x, y;                  /* torus: nodes x by y */
} xccl_net_t;

/* "none", "fattree:LEAF[:OVERSUB]" (nodes per leaf, oversubscription,
 * default 1) or "torus:XxY", each optionally followed by ",nics=N".  0, or
 * -1 with *n untouched and why in err. */
int xccl_net_parse(xccl_net_t *n, const char *spec, char *err, size_t errlen);
/* The spec of n (as parsed) into buf. */
void xccl_net_format(const xccl_net_t *n, char *buf, size_t len);
/* 0 if n fits layout l (a torus has room for every node), else -1 and
 * why in err. */
int xccl_net_check(const xccl_net_t *n, const xccl_layout_t *l, char *err, size_t errlen);

/* Predicted time of a collective on layout l: the largest
 * xccl_sched_cost_hier over the schedules that build makes for the ranks
 * in ranks[0..n) (xccl_sched_init'ed with the rank, l->size, elem_size).
 * n = 0: every rank up to 64 ranks, else a fixed sample (first, middle and
 * last ranks, the first and last member of the first and last node).  The
 * answer depends only on the arguments, so ranks that choose an algorithm
 * from it choose the same.  Negative if a build fails or returns
 * XCCL_NOT_APPLICABLE. */
typedef int (*xccl_rank_build_fn)(xccl_sched_t *s, void *arg);
double xccl_predict_hier(const xccl_layout_t *l, size_t elem_size, xccl_rank_build_fn build, void *arg,
                         const int *ranks, int n, const xccl_cost_model_t *intra,
                         const xccl_cost_model_t *inter);

/* xccl_predict_hier on network net (NULL or XCCL_NET_NONE: the same): each
 * sampled rank's steps priced with the sharing of their links
 * (xccl_sched_cost_shared).  It builds the schedules of every rank that
 * shares a link with a sampled one: a leaf's ranks on a fat tree. */
double xccl_predict_net(const xccl_layout_t *l, const xccl_net_t *net, size_t elem_size,
                        xccl_rank_build_fn build, void *arg, const int *ranks, int n,
                        const xccl_cost_model_t *intra, const xccl_cost_model_t *inter);

#ifdef __cplusplus
}
#endif

#endif
