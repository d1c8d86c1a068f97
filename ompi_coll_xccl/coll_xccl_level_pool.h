/*
 * Inside the shared-memory level: what coll_xccl_level_pool.c gives the
 * level's other files (coll_xccl_level_vote.c).
 */
#ifndef MCA_COLL_XCCL_LEVEL_POOL_H
#define MCA_COLL_XCCL_LEVEL_POOL_H

#include "coll_xccl_level.h"

BEGIN_C_DECLS

/* Off for good: what the level held goes (m->level freed); a segment of a
 * level that was on (every rank attached, and each releases it) to the
 * pool.  The state becomes XCCL_LEVEL_OFF. */
void mca_coll_xccl_level_disable(mca_coll_xccl_module_t *m);

END_C_DECLS

#endif
