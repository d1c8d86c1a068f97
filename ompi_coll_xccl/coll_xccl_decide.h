/*
 * Whether a call goes to the fallback, from what every rank shares only,
 * before any data moves (step 2 of a call's road, coll_xccl_path.h).
 */
#ifndef MCA_COLL_XCCL_DECIDE_H
#define MCA_COLL_XCCL_DECIDE_H

#include "coll_xccl_call.h"

BEGIN_C_DECLS

/* The fallback's reason for the call c, or NULL: xccl runs it.  A small
 * blocking call may first wait for the level's vote (the same answer on
 * every rank). */
const char *mca_coll_xccl_call_decide(mca_coll_xccl_call_t *c);

/* The same decision without waiting for anything (policy and decide):
 * the reason, or NULL. */
const char *mca_coll_xccl_call_fallback(const mca_coll_xccl_call_t *c);

/* How the path table runs the nonblocking call c (a persistent request's
 * described call, on host buffers) where that is a schedule of the level
 * without transfers: its reference and algorithm, its work buffers, and
 * whether path_latency takes it (the latency path for algo instead;
 * latency_v: the v forms', coll_xccl_latency_v.h, as a request).  1
 * (plan filled; c's reduction planned), 0 another way (the fallback, a
 * provider, packing, a schedule over the transport), -1 not known yet
 * (the communicator's set-up or the level's vote still runs). */
typedef struct {
    const xccl_sched_t *sched;
    int algo, latency, latency_v;
    double predicted_us;
    char *ws, *wr;
} mca_coll_xccl_level_plan_t;
int mca_coll_xccl_call_level_plan(mca_coll_xccl_call_t *c, mca_coll_xccl_level_plan_t *plan);

END_C_DECLS

#endif
