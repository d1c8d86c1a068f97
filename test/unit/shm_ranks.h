/*
 * Forked ranks on one node segment, for the tests of the segment and of
 * the schedules on it (test_shm, test_shm_exec): N processes (N = 1..8),
 * rank 0 creates the segment and publishes its descriptor, the others
 * attach with it, each runs a function; the parent reaps them with a
 * timeout (a rank that hangs is killed and counted as failed).
 */
#ifndef XCCL_TEST_SHM_RANKS_H
#define XCCL_TEST_SHM_RANKS_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "segment/xccl_segment.h"

#define MAXR 8
#define SLOT ((size_t) 16384)      /* the slot of the tests' segments */

/* Test control between the parent and its ranks (not the data path: an
 * anonymous shared mapping made before fork). */
typedef struct {
    _Atomic int ready;             /* the descriptor is published */
    _Atomic int create_rc;
    xccl_segment_desc_t desc;
    _Atomic int arrived;           /* a simple counter for test-level sync */
    _Atomic int progress[MAXR];    /* calls done by each rank */
    uint64_t addr[MAXR];           /* published private addresses (CMA) */
    pid_t pid[MAXR];
    char msg[MAXR][320];
} ctl_t;

typedef int (*rank_fn)(ctl_t *c, xccl_segment_t *seg, int rank, int n, const void *arg);

/* A zeroed ctl_t shared with the children to come (munmap it after). */
ctl_t *ctl_new(void);
/* Rank's message (the first failure's words): returns 1. */
int failf(ctl_t *c, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Child r: rank 0 creates (kind, slot) and publishes the blob, the others
 * attach with it; then fn; exits with fn's result. */
void child(ctl_t *c, xccl_segment_kind_t kind, size_t slot, int rank, int n, rank_fn fn, const void *arg)
    __attribute__((noreturn));
/* Waits for the children, killing them all after timeout_s: the number of
 * ranks that failed (exit status != 0, a signal, the timeout). */
int reap(ctl_t *c, const pid_t *pids, int n, int timeout_s, int *status, char *why, size_t whylen);
/* Runs fn on n forked ranks; returns the failures, the first in why. */
int run_ranks(int n, xccl_segment_kind_t kind, size_t slot, rank_fn fn, const void *arg, int timeout_s, char *why,
              size_t whylen);

#endif
