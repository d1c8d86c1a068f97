/*
 * Schedules on the node segment, on real shared memory without MPI:
 * forked ranks (shm_ranks.h, N = 1..8) run calls (shm_call.h) through the
 * executor.
 *
 *   - the mesh builders (xccl_build_*_mesh) unchanged, in "mirror" mode,
 *     and over cross-memory attach (single copies, messages much larger
 *     than the slot); a reduction over CMA refused;
 *   - the shm builders (xccl_build_*_shm): user buffers private, the
 *     slot shared, messages of 0, 1, odd sizes and larger than the slot
 *     (chunks), in place and not, every root, bit-exact against scalar
 *     references; many successive calls on one segment, with random
 *     delays, mixing collectives; memfd and SysV;
 *   - planted bugs fail on real memory: the entry barrier removed, flags
 *     tested without their sequence number (a flag of the previous call
 *     satisfies a wait), the post moved before the copy into the slot (a
 *     slow copy shows it);
 *   - kill -9: a rank killed mid-call: the others notice (no hang), and
 *     nothing was ever in /dev/shm (memfd), or the SysV segment is gone
 *     once the processes are; a creator killed at random moments during
 *     create/attach leaves nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include "check_main.h"

#include "segment/xccl_segment.h"
#include "shm_call.h"
#include "shm_ranks.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Collectives on the segment                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
    int mesh;                  /* mesh builders in mirror mode */
    int delays;                /* random small delays between calls */
} calls_arg_t;

/* The calls every rank makes, the same list on all (call numbers rise:
 * one segment, successive calls). */
static int make_calls(int p, int mesh, call_t *out)
{
    /* "large": past the slot (many chunks) */
    const size_t red_sizes[] = { 0, 1, 7, (size_t) p * 3 + 1, 1000, 3 * SLOT / 4 + 123 };
    const size_t byte_sizes[] = { 0, 1, 13, 1000, 3 * SLOT + 77 };
    int n = 0;
    unsigned call = 1;
    for (int coll = 0; coll < NC; coll++) {
        if ((mesh && C_AR_SMALL == coll) ||
            (USE_MESH_CMA == mesh && (C_AR == coll || C_RS == coll))) {    /* CMA: copies only */
            continue;
        }
        const int red = C_AR == coll || C_AR_SMALL == coll || C_RS == coll;
        const size_t *sz = red ? red_sizes : byte_sizes;
        const int nsz = red ? 6 : 5;
        for (int si = 0; si < nsz; si++) {
            size_t size = sz[si];
            if (USE_MESH_MIRROR == mesh) {
                /* mirror mode: everything in the slot */
                const size_t most = red ? 300 : 400;
                size = size > most ? most : size;
            } else if (C_A2A == coll && si >= 4) {
                size = SLOT / 2 + 77;                  /* p blocks: several chunks */
            }
            for (int in_place = 0; in_place < 2; in_place++) {
                /* (mirror mode places every rank's SEND alike: not the
                 * in-place allgather's RECV + r * block) */
                if (in_place && (C_BC == coll || (C_AG == coll && USE_MESH_CMA != mesh))) {
                    continue;
                }
                for (int ek = EK_I32; ek <= (red ? EK_FLT : EK_I32); ek++) {
                    const int roots = C_BC == coll ? p : 1;
                    for (int root = 0; root < roots; root++) {
                        call_t k = { (coll_t) coll, mesh, size, in_place, root, ek, call++ };
                        out[n++] = k;
                    }
                }
            }
        }
    }
    return n;
}

#define MAXCALLS 512

static int calls_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *argp)
{
    const calls_arg_t *arg = argp;
    static call_t calls[MAXCALLS];
    const int n = make_calls(p, arg->mesh, calls);
    unsigned rng = 12345u + (unsigned) r * 7919u;
    for (int i = 0; i < n; i++) {
        if (arg->delays) {
            rng = rng * 1103515245u + 12345u;
            if ((rng >> 16) % 4 == 0) {
                usleep((rng >> 8) % 300);
            }
        }
        if (run_call(c, seg, r, p, &calls[i], BUG_NONE, 0)) {
            return 1;
        }
        atomic_store(&c->progress[r], i + 1);
    }
    return 0;
}

START_TEST(shm_builders_on_segment)
{
    const int p = _i;
    char why[400];
    const calls_arg_t arg = { 0, 1 };
    const int failed = run_ranks(p, XCCL_SEGMENT_AUTO, SLOT, calls_body, &arg, 300, why, sizeof(why));
    ck_assert_msg(0 == failed, "p=%d: %d ranks failed; %s", p, failed, why);
}
END_TEST

START_TEST(mesh_builders_mirror_mode)
{
    const int p = _i;
    char why[400];
    const calls_arg_t arg = { USE_MESH_MIRROR, 0 };
    const int failed = run_ranks(p, XCCL_SEGMENT_AUTO, SLOT, calls_body, &arg, 300, why, sizeof(why));
    ck_assert_msg(0 == failed, "p=%d: %d ranks failed; %s", p, failed, why);
}
END_TEST

/* The mesh allgather, alltoall and bcast with cross-memory attach: the
 * peers' own buffers read with process_vm_readv (and, in the split bcast,
 * written with process_vm_writev), single copies, messages much larger
 * than the slot. */
START_TEST(mesh_builders_cma)
{
    const int p = _i;
    char why[400];
    const calls_arg_t arg = { USE_MESH_CMA, 1 };
    const int failed = run_ranks(p, XCCL_SEGMENT_AUTO, SLOT, calls_body, &arg, 300, why, sizeof(why));
    ck_assert_msg(0 == failed, "p=%d: %d ranks failed; %s", p, failed, why);
}
END_TEST

/* A reduction cannot read a peer through CMA: the execution fails (it is
 * never run wrong). */
static int cma_reduce_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *arg)
{
    (void) arg;
    call_t k = { C_AR, USE_MESH_CMA, 100, 0, 0, EK_I32, 1 };
    if (0 == run_call(c, seg, r, p, &k, BUG_NONE, 0) || NULL == strstr(c->msg[r], "execution failed")) {
        return failf(c, r, "allreduce mesh over CMA did not fail: %s", c->msg[r]);
    }
    c->msg[r][0] = '\0';
    return 0;
}

START_TEST(cma_refuses_reductions)
{
    char why[400];
    ck_assert_msg(0 == run_ranks(2, XCCL_SEGMENT_AUTO, SLOT, cma_reduce_body, NULL, 30, why, sizeof(why)), "%s", why);
}
END_TEST

/* The same on a SysV segment, a few p. */
START_TEST(shm_builders_sysv)
{
    const int ps[] = { 2, 5 };
    char why[400];
    const calls_arg_t arg = { 0, 0 };
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        const int failed = run_ranks(ps[i], XCCL_SEGMENT_SYSV, SLOT, calls_body, &arg, 300, why, sizeof(why));
        ck_assert_msg(0 == failed, "p=%d: %d ranks failed; %s", ps[i], failed, why);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Planted bugs on real memory                                              */
/* ------------------------------------------------------------------------ */

typedef struct {
    bug_t bug;
    coll_t coll;
} bug_arg_t;

/* Two successive calls (the stale slot then holds the first call's data);
 * in the second the last rank starts late.  With the bug, a rank reads a
 * slot before its owner wrote it. */
static int bug_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *argp)
{
    const bug_arg_t *a = argp;
    const size_t n = C_AR == a->coll || C_AR_SMALL == a->coll ? 1000 : 999;
    call_t k1 = { a->coll, 0, n, 0, 0, EK_I32, 1 }, k2 = k1;
    k2.call = 2;
    if (run_call(c, seg, r, p, &k1, BUG_NONE, 0)) {
        return 1;
    }
    return run_call(c, seg, r, p, &k2, a->bug, r == p - 1);
}

START_TEST(planted_bugs_fail)
{
    static const bug_t bugs[] = { BUG_NONE, BUG_NO_ENTRY_WAIT, BUG_SEQLESS, BUG_POST_BEFORE_COPY };
    static const char *const names[] = { "none", "entry barrier removed", "flags without sequence numbers",
                                         "post before the copy into the slot" };
    const coll_t colls[] = { C_AR, C_AR_SMALL, C_AG };
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
        for (size_t b = 0; b < sizeof(bugs) / sizeof(bugs[0]); b++) {
            for (int p = 2; p <= 3; p++) {
                char why[400];
                const bug_arg_t arg = { bugs[b], colls[ci] };
                const int failed = run_ranks(p, XCCL_SEGMENT_AUTO, SLOT, bug_body, &arg, 60, why, sizeof(why));
                fprintf(stderr, "planted %s, %s, p=%d: %d ranks failed%s%s\n", coll_names[colls[ci]], names[b], p,
                        failed, failed ? ": " : "", failed ? why : "");
                if (BUG_NONE == bugs[b]) {
                    ck_assert_msg(0 == failed, "intact: %s", why);
                } else {
                    ck_assert_msg(failed > 0, "%s, %s, p=%d: not caught", coll_names[colls[ci]], names[b], p);
                }
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* kill -9                                                                  */
/* ------------------------------------------------------------------------ */

/* Names in /dev/shm that contain "xccl" (others' jobs may come and go). */
static int dev_shm_xccl(void)
{
    DIR *d = opendir("/dev/shm");
    int n = 0;
    if (NULL == d) {
        return 0;
    }
    for (struct dirent *e; NULL != (e = readdir(d));) {
        n += NULL != strstr(e->d_name, "xccl");
    }
    closedir(d);
    return n;
}

/* Whether process pid maps anything from /dev/shm; sets *memfd if it maps
 * the segment's memfd. */
static int maps_dev_shm(pid_t pid, int *memfd)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int) pid);
    FILE *f = fopen(path, "r");
    int n = 0;
    if (NULL == f) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        n += NULL != strstr(line, "/dev/shm/");
        *memfd |= NULL != strstr(line, "/memfd:xccl_shm");
    }
    fclose(f);
    return n;
}

/* SysV segments created by pid (column cpid of /proc/sysvipc/shm). */
static int sysv_of(pid_t pid)
{
    FILE *f = fopen("/proc/sysvipc/shm", "r");
    char line[512];
    int n = 0;
    if (NULL == f) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        long key, id, perms, size, cpid;
        if (5 == sscanf(line, "%ld %ld %lo %ld %ld", &key, &id, &perms, &size, &cpid) && cpid == pid) {
            n++;
        }
    }
    fclose(f);
    return n;
}

/* Endless allreduces; a rank whose peer is gone fails its wait: exit 3. */
static int endless_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *arg)
{
    (void) arg;
    for (unsigned i = 1;; i++) {
        call_t k = { C_AR_SMALL, 0, 100, 0, 0, EK_I32, i };
        if (run_call(c, seg, r, p, &k, BUG_NONE, 0)) {
            return strstr(c->msg[r], "execution failed") ? 3 : 1;
        }
        atomic_store(&c->progress[r], (int) i);
    }
}

START_TEST(kill9_mid_call)
{
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        const int p = 3, before = dev_shm_xccl();
        ctl_t *c = ctl_new();
        pid_t pids[MAXR];
        for (int r = 0; r < p; r++) {
            pids[r] = fork();
            if (0 == pids[r]) {
                child(c, (xccl_segment_kind_t) kind, SLOT, r, p, endless_body, NULL);
            }
        }
        /* wait until they run calls, look at them, kill rank 1 */
        while (atomic_load(&c->progress[0]) < 20 || atomic_load(&c->progress[2]) < 20) {
            usleep(1000);
        }
        int memfd = 0, devshm = 0;
        for (int r = 0; r < p; r++) {
            devshm += maps_dev_shm(pids[r], &memfd);
        }
        ck_assert_int_eq(devshm, 0);
        ck_assert_int_eq(memfd, XCCL_SEGMENT_MEMFD == kind);
        ck_assert_int_eq(dev_shm_xccl(), before);
        if (XCCL_SEGMENT_SYSV == kind) {
            ck_assert_int_eq(sysv_of(pids[0]), 1);       /* there, marked for removal */
        }
        kill(pids[1], SIGKILL);
        /* The survivors notice (memfd: the dead rank's pid is checked; SysV:
         * no liveness check, they spin: killed after a while). */
        int status[MAXR];
        char why[400];
        const int failed = reap(c, pids, p, XCCL_SEGMENT_MEMFD == kind ? 60 : 3, status, why, sizeof(why));
        ck_assert_int_eq(failed, p);
        ck_assert(WIFSIGNALED(status[1]));
        if (XCCL_SEGMENT_MEMFD == kind) {
            for (int r = 0; r < p; r += 2) {
                ck_assert_msg(WIFEXITED(status[r]) && 3 == WEXITSTATUS(status[r]), "rank %d did not notice: %s", r,
                              c->msg[r]);
            }
        }
        ck_assert_int_eq(dev_shm_xccl(), before);
        ck_assert_int_eq(sysv_of(pids[0]), 0);           /* gone with its processes */
        munmap(c, sizeof(*c));
    }
}
END_TEST

/* A creator killed at random moments while it creates and a peer attaches:
 * no name ever, no SysV segment left. */
START_TEST(kill9_during_setup)
{
    const int before = dev_shm_xccl();
    unsigned rng = 99u;
    for (int it = 0; it < 40; it++) {
        ctl_t *c = ctl_new();
        pid_t pid = fork();
        if (0 == pid) {
            for (;;) {
                xccl_segment_t *s, *t;
                xccl_segment_desc_t d;
                if (0 == xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 0, 1 << 20, &s, &d)) {
                    if (0 == xccl_segment_attach(&d, 1, &t)) {
                        memset(xccl_segment_slot(t, 1), 1, 1 << 20);
                        xccl_segment_detach(t);
                    }
                    xccl_segment_detach(s);
                }
                atomic_fetch_add(&c->arrived, 1);
            }
        }
        rng = rng * 1103515245u + 12345u;
        usleep(500 + (rng >> 16) % 5000);
        int memfd = 0;
        ck_assert_int_eq(maps_dev_shm(pid, &memfd), 0);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        ck_assert_int_eq(sysv_of(pid), 0);
        ck_assert_int_eq(dev_shm_xccl(), before);
        munmap(c, sizeof(*c));
    }
}
END_TEST

/* Test cases by subject (CK_RUN_CASE=kill ./test_shm_exec runs one). */
static TCase *tcase(Suite *su, const char *name)
{
    return xccl_check_tcase(su, name, 900);
}

int main(void)
{
    Suite *su = suite_create("shm_exec");
    TCase *tc = tcase(su, "cma");
    tcase_add_test(tc, cma_refuses_reductions);
    tcase_add_loop_test(tc, mesh_builders_cma, 1, MAXR + 1);
    tc = tcase(su, "kill");
    tcase_add_test(tc, kill9_mid_call);
    tcase_add_test(tc, kill9_during_setup);
    tc = tcase(su, "planted");
    tcase_add_test(tc, planted_bugs_fail);
    tc = tcase(su, "shm");
    tcase_add_loop_test(tc, shm_builders_on_segment, 1, MAXR + 1);
    tcase_add_test(tc, shm_builders_sysv);
    tc = tcase(su, "mesh");
    tcase_add_loop_test(tc, mesh_builders_mirror_mode, 1, MAXR + 1);
    return xccl_check_run(su);
}
