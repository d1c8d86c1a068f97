/*
 * The shared-memory level's trial picks (xccl_trial_t) kept for later
 * trials of the same situation: this process's later communicators, and
 * through a file (coll_xccl_picks_file) later processes on the node.
 *
 * Which candidate wins depends on the machine and on how many ranks share
 * the node, not on the communicator or the process, so a situation is a
 * collective, a size class and (ranks of the communicator, ranks of it on
 * the node, QUIET or NOISY trials).  A kept pick is only offered: the
 * trial's ranks use it where every one of them has the same
 * (coll_xccl_level_trials.c), so a file that differs between ranks, or
 * holds nonsense, costs a trial and nothing else.
 *
 * The file, one situation a line ('#' starts a comment):
 *
 *     <collective> <size class> <ranks> <ranks on the node> quiet|noisy <algorithm> <unix time>
 *
 * Read when the component opens; lines older than coll_xccl_picks_days
 * are dropped.  Written at MPI_Finalize by a process that ended trials of
 * its own: the file as it is then, with this process's picks replacing
 * those of the same situations, through a new file renamed over it (the
 * processes of a node each write the same picks).
 */
#ifndef COLL_XCCL_PICKS_H
#define COLL_XCCL_PICKS_H

#include <stddef.h>
#include <time.h>

#include "base/xccl_base.h"

typedef struct xccl_situation {
    int ranks;                         /* of the communicator */
    int node;                          /* of them on this node (0: no level) */
    int noisy;                         /* XCCL_TRIAL_NOISY trials */
} xccl_situation_t;

/* The pick kept for (coll, size class k, s), 0 if none; *from_file
 * (where not NULL) is set where it came from the file. */
int xccl_picks_get(xccl_coll_t coll, int k, const xccl_situation_t *s, int *from_file);
/* Keeps this process's pick for (coll, k, s), replacing an earlier one. */
void xccl_picks_put(xccl_coll_t coll, int k, const xccl_situation_t *s, int pick);

/* The path coll_xccl_picks_file names: NULL for "none" or ""; for "auto",
 * picks-<host name> in $XDG_CACHE_HOME/xccl or else $HOME/.cache/xccl
 * (NULL where neither is set).  The caller frees it. */
char *xccl_picks_path(const char *param);
/* Reads the file's picks made since `since` (unix time; 0: all): the
 * number kept, 0 where there is no file, -1 on a bad file (nothing kept,
 * err says why). */
int xccl_picks_load(const char *path, time_t since, char *err, size_t errlen);
/* Writes the file where this process kept picks of its own (now: their
 * time), creating its directory: the number of lines written, 0 where
 * there was nothing to write, -1 on failure (err says why). */
int xccl_picks_save(const char *path, time_t since, time_t now, char *err, size_t errlen);
/* Forgets every pick (tests). */
void xccl_picks_clear(void);

/* The component's open: the file coll_xccl_picks_file names is read (a bad
 * one is said at verbose 0 and not used); its close: written where this
 * process ended trials (a failure is said at verbose 1). */
void mca_coll_xccl_picks_open(void);
void mca_coll_xccl_picks_close(void);

#endif
