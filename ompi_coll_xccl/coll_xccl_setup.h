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
 * with the set-up done and the shared-memory level's vote over
 * (mca_coll_xccl_setup_settle); nonblocking (wait 0) it only starts the agreement
 * and never waits for another rank.  MPI error codes.  setup_test: 1 when
 * done (finishing a pending agreement that has arrived), never waits; safe
 * from Open MPI's progress engine. */
int mca_coll_xccl_setup(mca_coll_xccl_module_t *m, int wait);
int mca_coll_xccl_setup_test(mca_coll_xccl_module_t *m);
/* What set-up holds (endpoints, layout, agreement buffers), at destruction. */
void mca_coll_xccl_setup_fini(mca_coll_xccl_module_t *m);

/* A blocking call where the set-up has started: waits until it is done
 * and the shared-memory level's state is settled (its vote over). */
void mca_coll_xccl_setup_settle(mca_coll_xccl_module_t *m);

END_C_DECLS

#endif
