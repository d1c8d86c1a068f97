/*
 * Forked ranks on one node segment (shm_ranks.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>

#include "shm_ranks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

ctl_t *ctl_new(void)
{
    ctl_t *c = mmap(NULL, sizeof(ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(c, MAP_FAILED);
    memset(c, 0, sizeof(*c));
    return c;
}

int failf(ctl_t *c, int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg[rank], sizeof(c->msg[rank]), fmt, ap);
    va_end(ap);
    return 1;
}

void child(ctl_t *c, xccl_segment_kind_t kind, size_t slot, int rank, int n, rank_fn fn, const void *arg)
{
    xccl_segment_t *seg = NULL;
    int rc;
    c->pid[rank] = getpid();
    if (0 == rank) {
        rc = xccl_segment_create(kind, n, 0, slot, &seg, &c->desc);
        atomic_store(&c->create_rc, rc);
        atomic_store(&c->ready, 1);
        if (rc < 0) {
            _exit(failf(c, rank, "create: %s", strerror(-rc)));
        }
    } else {
        while (!atomic_load(&c->ready)) {
            usleep(100);
        }
        if (atomic_load(&c->create_rc) < 0) {
            _exit(failf(c, rank, "creator failed"));
        }
        rc = xccl_segment_attach(&c->desc, rank, &seg);
        if (rc < 0) {
            _exit(failf(c, rank, "attach: %s", strerror(-rc)));
        }
    }
    rc = fn(c, seg, rank, n, arg);
    xccl_segment_detach(seg);
    _exit(rc);
}

int reap(ctl_t *c, const pid_t *pids, int n, int timeout_s, int *status, char *why, size_t whylen)
{
    int left = n, failed = 0;
    const time_t end = time(NULL) + timeout_s;
    int done[MAXR] = { 0 };
    why[0] = '\0';
    while (left > 0) {
        int progressed = 0;
        for (int r = 0; r < n; r++) {
            if (done[r]) {
                continue;
            }
            int st;
            if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
                done[r] = 1;
                left--;
                progressed = 1;
                status[r] = st;
                if (!WIFEXITED(st) || 0 != WEXITSTATUS(st)) {
                    failed++;
                    if ('\0' == why[0]) {
                        snprintf(why, whylen, "rank %d: %s", r,
                                 c->msg[r][0] ? c->msg[r] : WIFSIGNALED(st) ? "killed by a signal" : "failed");
                    }
                }
            }
        }
        if (left > 0 && time(NULL) > end) {
            for (int r = 0; r < n; r++) {
                if (!done[r]) {
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], &status[r], 0);
                    failed++;
                }
            }
            snprintf(why, whylen, "timeout after %d s (a rank hangs)", timeout_s);
            break;
        }
        if (!progressed) {
            usleep(1000);
        }
    }
    return failed;
}

int run_ranks(int n, xccl_segment_kind_t kind, size_t slot, rank_fn fn, const void *arg, int timeout_s,
              char *why, size_t whylen)
{
    ctl_t *c = ctl_new();
    pid_t pids[MAXR];
    int status[MAXR];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        ck_assert_int_ge(pids[r], 0);
        if (0 == pids[r]) {
            child(c, kind, slot, r, n, fn, arg);
        }
    }
    int failed = reap(c, pids, n, timeout_s, status, why, whylen);
    munmap(c, sizeof(*c));
    return failed;
}
