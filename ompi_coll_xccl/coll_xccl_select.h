/*
 * The algorithm and schedule of a call (coll_xccl_select.c), from the
 * communicator's cache.
 */
#ifndef MCA_COLL_XCCL_SELECT_H
#define MCA_COLL_XCCL_SELECT_H

#include "coll_xccl.h"

BEGIN_C_DECLS

/* The algorithm and schedule for a call of coll with args a (layout set):
 * algo an index to run (the mesh of peer access), or -1 for the policy's
 * choice.  *used: the algorithm built; *predicted_us the model's (or
 * negative); *trial (where trial is not NULL): the level trial this call is
 * one of (time it: mca_coll_xccl_level_trial_end), or NULL.  Put back with
 * xccl_select_put.  NULL: out of memory (logged). */
const xccl_sched_t *mca_coll_xccl_select_schedule(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                                  const xccl_coll_args_t *a, size_t bytes,
                                                  size_t es, int algo, int *used,
                                                  double *predicted_us, xccl_trial_t **trial);
void mca_coll_xccl_select_fini(mca_coll_xccl_module_t *m);

END_C_DECLS

#endif
