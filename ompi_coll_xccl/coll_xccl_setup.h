/*
 * Set-up of a communicator on first use (coll_xccl_setup.c): endpoints,
 * layout, the agreement, and the shared-memory level's set-up and vote
 * riding on it.
 */
#ifndef MCA_COLL_XCCL_SETUP_H
#define MCA_COLL_XCCL_SETUP_H

#include "coll_xccl.h"

BEGIN_C_DECLS

/* A call that runs one of xccl's
 * schedules calls mca_coll_xccl_setup first: blocking (wait 1) it returns
 * with the set-up done; nonblocking (wait 0) it only starts the agreement
 * and never waits for another rank.  MPI error codes.  setup_test: 1 when
 * done (finishing a pending agreement that has arrived), never waits; safe
 * from Open MPI's progress engine. */
int mca_coll_xccl_setup(mca_coll_xccl_module_t *m, int wait);
/* The set-up of a communicator not set up yet (XCCL_SETUP_NONE, size > 1,
 * at most XCCL_AGREE_MAX_KEYS), blocking, with the first call's input
 * folded into the agreement (issue 30: one exchange instead of two for a
 * communicator used once): every rank sends its record and `bytes` more,
 * its input (payload) or, where it has none to give (NULL: device or
 * non-contiguous buffers), as many zeros and says so in its record.  bytes
 * must be the same on every rank (a function of what all ranks share).
 * Returns an MPI error code; *all (the caller frees it, also on errors)
 * holds every rank's payload, rank r's at
 * *all + r * *stride + XCCL_AGREE_INTS * sizeof(int), and
 * *everyone is 1 where every rank gave one (the same answer on every
 * rank), else 0. */
int mca_coll_xccl_setup_folded(mca_coll_xccl_module_t *m, const void *payload, size_t bytes,
                               char **all, size_t *stride, int *everyone);
int mca_coll_xccl_setup_test(mca_coll_xccl_module_t *m);
/* What set-up holds (endpoints, layout, agreement buffers), at destruction. */
void mca_coll_xccl_setup_fini(mca_coll_xccl_module_t *m);

/* A blocking call where the set-up has started: waits until it is done
 * and the shared-memory level's state is settled (its vote over). */
void mca_coll_xccl_setup_settle(mca_coll_xccl_module_t *m);

END_C_DECLS

#endif
