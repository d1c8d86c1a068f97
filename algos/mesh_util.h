/*
 * Shared by the peer-access ("mesh") builders: flag barriers among all the
 * ranks of the group, and a reference to any rank's buffer.  Not part of
 * the public API (xccl_algos.h).
 */
#ifndef XCCL_MESH_UTIL_H
#define XCCL_MESH_UTIL_H

#include "hier_util.h"

/* Buffer buf of rank q, from this rank's point of view (its own when q is
 * this rank: then it needs no peer access). */
static inline xccl_ref_t mesh_ref(const xccl_sched_t *s, int q, xccl_buf_id_t buf, size_t off)
{
    return q == s->rank ? xccl_ref(buf, off) : xccl_ref_peer(q, buf, off);
}

/* A barrier among all ranks: this rank's flag becomes val once the
 * current step's local actions have run; the next step's local actions
 * run only once every peer's flag has reached val.  Values rise by one
 * per barrier, the same on every rank.  One rank: nothing to wait for. */
static inline void mesh_barrier(xccl_sched_t *s, uint32_t val)
{
    if (s->size < 2) {
        return;
    }
    xccl_sched_post(s, val);
    xccl_sched_step(s);
    /* Peers from r+1 on: not all ranks poll the same flag first. */
    for (int k = 1; k < s->size; k++) {
        xccl_sched_wait(s, mod(s->rank + k, s->size), val);
    }
}

#endif
