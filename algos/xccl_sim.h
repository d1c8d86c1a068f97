/*
 * xccl algorithms, simulated transport: N virtual ranks in one process,
 * with transfers and peer access, for tests and tools.  Section of the
 * algos API; algos/xccl_algos.h includes every section.
 */
#ifndef XCCL_SIM_H
#define XCCL_SIM_H

#include "xccl_exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Simulated transport: N virtual ranks in one process                      */
/* ------------------------------------------------------------------------ */

typedef struct xccl_sim xccl_sim_t;

xccl_sim_t *xccl_sim_create(int nranks);
void xccl_sim_destroy(xccl_sim_t *sim);
const xccl_transport_t *xccl_sim_transport(xccl_sim_t *sim, int rank);
/* Drive execs[0..n) (rank i's executor is execs[i]) until all are done.
 * Transfers complete only when matched (no buffering), in an order varied by
 * seed.  Returns 0, or -1 on deadlock, mismatch (same name, different
 * length) or a message left unmatched; sim_error() says which. */
int xccl_sim_run(xccl_sim_t *sim, xccl_exec_t *execs, int n, unsigned seed);
const char *xccl_sim_error(const xccl_sim_t *sim);
/* Peer access among the virtual ranks (xccl_exec_set_peer): a peer's
 * buffers are its executor's, flags are in memory.  A rank's buffers may
 * be touched by others only while it takes part in the call: after
 * xccl_sim_run first progressed it and before it finished; a touch
 * outside that window fails the run.  Each round of xccl_sim_run
 * progresses the ranks in a new random order, each as far as it can go
 * (past every flag already posted), so a schedule that reads a buffer
 * before its owner wrote it, or overwrites one a peer still has to read,
 * gets the wrong data under some seeds (missing synchronisation shows as
 * a data error; tests run several seeds). */
const xccl_peer_t *xccl_sim_peer(xccl_sim_t *sim, int rank);
/* From now on the peers' SEND, RECV and SCRATCH are only copied from and
 * to (read() and write(), as process_vm_readv / writev: XCCL_PEER_COPY),
 * never mapped (buf() gives NULL, so a reduction that names one fails the
 * run); slots stay mapped. */
void xccl_sim_peer_read_only(xccl_sim_t *sim, int on);

#ifdef __cplusplus
}
#endif

#endif
