/*
 * The fallback of a call (coll_xccl_previous.c).
 */
#ifndef MCA_COLL_XCCL_PREVIOUS_H
#define MCA_COLL_XCCL_PREVIOUS_H

#include "coll_xccl_call.h"

BEGIN_C_DECLS

/* The saved module's function for c, on buffers s and r (host copies of
 * device buffers, or the user's; a v form's moved to their span's base,
 * as the call describes them); request: where a nonblocking call's
 * request goes.  The one place that calls the fallback for a call. */
int mca_coll_xccl_call_previous(const mca_coll_xccl_call_t *c, const void *s, void *r,
                                ompi_request_t **request);

END_C_DECLS

#endif
