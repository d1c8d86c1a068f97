/*
 * Predicted time of every algorithm of a collective, and the one the
 * component's auto selection would take, for a communicator that need not
 * exist: ranks, node layout, intra- and inter-node costs.  Shared by
 * xccl_simulate and xccl_info; the algorithms come from the same catalog
 * (algos/catalog.c) the component uses.
 */
#ifndef XCCL_CHOICE_H
#define XCCL_CHOICE_H

#include "base/xccl_base.h"
#include "algos/xccl_layout.h"
#include "algos/xccl_cost.h"

#include <stdio.h>

/* Sizes as in xccl_bench: bytes per rank (allgather: total received,
 * reduce_scatter/alltoall: total sent); reductions on 4-byte floats. */
typedef struct {
    xccl_coll_t coll;
    const xccl_layout_t *layout;       /* never NULL: one node is a layout too */
    xccl_cost_model_t intra, inter;
    xccl_net_t net;                    /* links between nodes (XCCL_NET_NONE: one beta) */
    double margin;                     /* auto keeps the first algorithm unless ... */
    size_t segment;                    /* ring allreduce segment */
    size_t shm_slot;                   /* the shared-memory level's slot bytes; 0: no level */
    int peer_access;                   /* XCCL_PEER_*: the "mesh" algorithms (with a level:
                                        * single copies, XCCL_PEER_COPY) */
} xccl_choice_t;

/* The component's defaults (XCCL_COST_*, margin, ring segment); coll and
 * layout still to set. */
static inline xccl_choice_t xccl_choice_defaults(void)
{
    xccl_choice_t c = { .intra = { XCCL_COST_ALPHA, XCCL_COST_BETA, XCCL_COST_GAMMA, XCCL_COST_DELTA,
                                   XCCL_COST_SHM_FLAG, XCCL_COST_SHM_PEER },
                        .inter = { XCCL_COST_INTER_ALPHA, XCCL_COST_INTER_BETA, XCCL_COST_GAMMA,
                                   XCCL_COST_DELTA, 0, 0 },
                        .margin = XCCL_MODEL_MARGIN, .segment = XCCL_RING_SEGMENT };
    return c;
}

/* One line per size: every algorithm's predicted us ("n/a" where it does
 * not apply), then the best and auto's choice (the component's selection
 * without forced algorithms or tuning rules: inside the level its rule,
 * marked "(level)", whose blocking calls the component's trials then time
 * against mesh where single copies apply; else the model).  Returns 0, or
 * -1 (memory). */
int xccl_choice_print(const xccl_choice_t *c, const size_t *sizes, int nsizes, FILE *out);

/* "8,1K,1M" -> sizes, "8..1G" every power of two times 8 up to 1 GiB;
 * returns how many, -1 on a bad token or more than max. */
int xccl_choice_parse_sizes(const char *list, size_t *sizes, int max);

#endif
