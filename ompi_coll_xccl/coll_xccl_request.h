/*
 * Nonblocking calls and their requests (coll_xccl_request.c).
 */
#ifndef MCA_COLL_XCCL_REQUEST_H
#define MCA_COLL_XCCL_REQUEST_H

#include "coll_xccl_call.h"
#include "coll_xccl_exec.h"
#include "coll_xccl_latency.h"
#include "coll_xccl_latency_v.h"
#include "coll_xccl_pack.h"
#include "coll_xccl_promise.h"

BEGIN_C_DECLS

/* Nonblocking collectives in flight (coll_xccl_request.c): advances them,
 * returns how many completed; whether any is in flight (a racy read: one
 * started on another thread is seen at the next progress call). */
int mca_coll_xccl_progress_requests(void);
int mca_coll_xccl_requests_active(int *transfers);
/* Frees the memory kept of freed requests (component close). */
void mca_coll_xccl_requests_fini(void);

/* Starts s in the background (takes the schedule reference and pk); a
 * schedule of the shared-memory level (level) takes its turn first.  seq:
 * the call number its transfers are tagged with (taken at the call, the
 * same on every rank), or -1: the communicator's next. */
int mca_coll_xccl_request_start(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                const xccl_sched_t *s, const mca_coll_xccl_exec_hooks_t *hooks,
                                const mca_coll_xccl_reduce_t *red, mca_coll_xccl_packed_t *pk,
                                int level, int64_t seq, ompi_request_t **request);
/* Queues a call whose schedule is built once the communicator's set-up
 * agreement is in (copies the arguments; takes pk). */
int mca_coll_xccl_request_start_waiting(mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                        const mca_coll_xccl_exec_hooks_t *hooks,
                                        mca_coll_xccl_packed_t *pk);

/* Queues a small call of the level for its latency path
 * (coll_xccl_latency.h), run from progress in its turn (copies the
 * arguments; takes pk); algo: the level's algorithm. */
int mca_coll_xccl_request_start_lat(mca_coll_xccl_module_t *m, const mca_coll_xccl_call_t *c,
                                    const mca_coll_xccl_exec_hooks_t *hooks,
                                    mca_coll_xccl_packed_t *pk, int algo, ompi_request_t **request);

END_C_DECLS

#endif
