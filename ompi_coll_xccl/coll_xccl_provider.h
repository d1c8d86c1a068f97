/*
 * Peer access inside a node: the interface of its providers.
 */
#ifndef MCA_COLL_XCCL_PROVIDER_H
#define MCA_COLL_XCCL_PROVIDER_H

#include "coll_xccl_call.h"
#include "coll_xccl_exec.h"

BEGIN_C_DECLS

/* A way for the ranks of a node to reach each other's buffers and flags,
 * as the peer_access path (coll_xccl_path.c, coll_xccl_peers.c) drives it: a
 * call a provider takes runs one of its collective's peer-access
 * schedules ("mesh", "leader") through the one executor, with the
 * provider's xccl_peer_t, copies and reductions.  Its provider is CUDA
 * IPC, mappings of device buffers (coll_xccl_gpu_ipc.c); host buffers
 * reach each other through the node's shared-memory level, which runs its
 * own schedules and is not a provider of this interface.
 *  wanted  whether every rank tries: from what all ranks share only (the
 *          call's form and size, parameters), before the set-up;
 *  usable  once the communicator is set up: whether it can (alike on
 *          every rank);
 *  form    the catalog name of the schedule to run (alike on every rank;
 *          it may set the provider up, collectively), NULL: not usable;
 *          *rc an error;
 *  open    this rank's conditions (its buffers), then the ranks' agreement:
 *          *go alike on every rank.  With go, hooks hold the schedule's
 *          buffers, copies, reductions and peer access, and *state what
 *          close releases; without, nothing has moved;
 *  close   after the execution (rc): releases, returns the call's code;
 *  start   a nonblocking call (c->request): this rank's conditions now,
 *          then the agreement and the schedule in the background (progress),
 *          never waiting for another rank; the provider completes
 *          *c->request; it logs the call's line when it runs the schedule
 *          (algo).  Takes the schedule reference.  Where not every rank
 *          can take part, each runs host(c, inner) from progress: the call
 *          on the paths after peer access, as a request in inner, with the
 *          call number taken at the start (c->seq) and no schedule of the
 *          shared-memory level (whose turns are taken in call order);
 *  progress  advances the calls started: how many completed. */
typedef int (*mca_coll_xccl_host_fn_t)(mca_coll_xccl_call_t *c, ompi_request_t **inner);
typedef struct {
    const char *name;                /* the verbose line's via= */
    int (*wanted)(const mca_coll_xccl_call_t *c);
    int (*usable)(const mca_coll_xccl_module_t *m);
    const char *(*form)(mca_coll_xccl_call_t *c, int *rc);
    int (*open)(mca_coll_xccl_call_t *c, const xccl_sched_t *s,
                mca_coll_xccl_exec_hooks_t *hooks, void **state, int *go);
    int (*close)(mca_coll_xccl_call_t *c, void *state, int rc);
    int (*start)(mca_coll_xccl_call_t *c, const xccl_sched_t *s, int algo,
                 mca_coll_xccl_host_fn_t host);
    int (*progress)(void);
} mca_coll_xccl_peer_provider_t;

END_C_DECLS

#endif
