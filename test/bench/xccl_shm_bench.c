/*
 * xccl_shm_bench: what the intra-node shared-memory level gets, without
 * MPI.  Forks np processes (default 2) on one node segment and times
 * allreduce (float sum) through it with the shm builders, the schedules
 * the component will run, against a plain memcpy of the same bytes in one
 * process (the bound: any copy-in scheme moves at least that); allgather
 * through the slot and by direct reads of the peers' buffers (the mesh
 * builder over cross-memory attach, where the kernel allows it).  Also the
 * flag latency: one post seen by the peer (half a ping-pong).
 *
 *   xccl_shm_bench [-n np] [-s slot_bytes] [-r reps] [-m min_seconds] [-y] [-u] [-p] [-b] [sizes...]
 *
 * Sizes default to 8 1M 16M (K, M suffixes).  Each cell: the median (-b:
 * the best) over reps of the mean time of a batch of calls (at least
 * min_seconds / reps of work per batch).  Ranks spin on flags as MPI's progress loop does
 * (-y: sched_yield every 256 spins, for oversubscribed runs), rank r
 * bound to CPU r mod CPUs as mpirun binds by default (-u: unbound); on a loaded
 * machine the times include other processes' turns.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/xccl_base.h"
#include "xccl_sched.h"
#include "xccl_build.h"
#include "xccl_exec.h"
#include "segment/xccl_cma.h"
#include "segment/xccl_segment.h"
#include "ompi_coll_xccl/coll_xccl_level_peer.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXNP 64
#define MAXSIZES 16
#define MAXREPS 101

/* What is timed: allreduce through the slot (two builders); allgather
 * through the slot, and the mesh allgather reading the peers' own buffers
 * with cross-memory attach (single copy; where the kernel allows it). */
enum { V_AR_SMALL, V_AR_SHM, V_AG_SHM, V_AG_CMA, NVAR };

typedef struct {
    _Atomic int ready;
    xccl_segment_desc_t desc;
    double t[NVAR][MAXSIZES][MAXREPS]; /* rank 0's batch means: [variant][size][rep] */
    double work[NVAR][MAXSIZES][MAXREPS];  /* of which in copies and reductions (not waiting) */
    _Atomic int cma_bad;               /* some rank cannot read some peer with CMA */
    double flag_lat[MAXREPS];
    _Atomic int failed;
    char msg[256];
} ctl_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t) n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double best(double *v, int n)
{
    qsort(v, (size_t) n, sizeof(double), cmp_double);
    return v[0];
}

/* -b: the best of the reps instead of the median (a loaded machine) */
static double (*pick)(double *, int) = median;

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if ('K' == *end || 'k' == *end) {
        v *= 1024;
    } else if ('M' == *end || 'm' == *end) {
        v *= 1024 * 1024;
    } else if ('G' == *end || 'g' == *end) {
        v *= 1024.0 * 1024 * 1024;
    }
    return (size_t) v;
}

static int null_isend(void *c, int p, const void *b, size_t l, uint32_t s, uint32_t i, void **r)
{
    (void) c, (void) p, (void) b, (void) l, (void) s, (void) i, (void) r;
    return -1;
}
static int null_irecv(void *c, int p, void *b, size_t l, uint32_t s, uint32_t i, void **r)
{
    (void) c, (void) p, (void) b, (void) l, (void) s, (void) i, (void) r;
    return -1;
}
static int null_test(void *c, void *r)
{
    (void) c, (void) r;
    return -1;
}
static void null_progress(void *c)
{
    (void) c;
}
static void null_cancel(void *c, void *r)
{
    (void) c, (void) r;
}
static const xccl_transport_t null_tr = { NULL, null_isend, null_irecv, null_test, null_progress, null_cancel };

/* Time spent in copies and reductions: the work of a call without its
 * waits, which on a loaded machine include other processes' turns. */
static double busy;

static int reduce_cb(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    const double t0 = now();
    ((xccl_reduce_fn_t) ctx)(dst, a, b, count);
    busy += now() - t0;
    return 0;
}

static int copy_cb(void *ctx, void *dst, const void *src, size_t len)
{
    (void) ctx;
    const double t0 = now();
    xccl_memmove(dst, src, len);
    busy += now() - t0;
    return 0;
}

/* Spin as MPI's progress loop does (no yield unless -y: then every 256
 * spins, for oversubscribed runs). */
static int yield_every;
/* pause in the spin loop (-p); off by default: in a virtual machine, pause loops may
 * exit to the hypervisor (PLE), which costs microseconds. */
static int use_pause;

static inline void relax(unsigned *spins)
{
    if (yield_every && ++*spins % (unsigned) yield_every == 0) {
        sched_yield();
    }
#if defined(__x86_64__) || defined(__i386__)
    if (use_pause) {
        __builtin_ia32_pause();
    }
#endif
}

/* One call of schedule s; returns 0 or <0. */
static int run(const xccl_sched_t *s, void *const bufs[XCCL_NBUF], xccl_level_peer_t *sp, uint32_t seq,
               xccl_reduce_fn_t fn)
{
    xccl_exec_t e;
    int rc;
    unsigned spins = 0;
    if (sp->cma) {
        xccl_level_peer_publish(sp, seq, bufs);
    }
    xccl_exec_init(&e, s, &null_tr, bufs, reduce_cb, (void *) fn, seq);
    xccl_exec_set_peer(&e, &sp->peer);
    xccl_exec_set_copy(&e, copy_cb, NULL);
    while (0 == (rc = xccl_exec_progress(&e))) {
        relax(&spins);
    }
    xccl_exec_fini(&e);
    return rc < 0 ? rc : 0;
}

/* All ranks meet: flag 1 of call seq. */
static void barrier(xccl_segment_t *seg, int np, uint32_t seq)
{
    xccl_segment_flag_post(seg, seq, 1);
    for (int q = 0; q < np; q++) {
        unsigned spins = 0;
        while (!xccl_segment_flag_test(seg, q, seq, 1)) {
            relax(&spins);
        }
    }
}

typedef struct {
    int np, reps, bind;
    size_t slot;
    double min_s;
    size_t sizes[MAXSIZES];
    int nsizes;
} opts_t;

static void rank_main(ctl_t *c, const opts_t *o, int r)
{
    xccl_segment_t *seg;
    int rc;
    if (o->bind) {
        /* as mpirun binds ranks to cores by default */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r % (int) sysconf(_SC_NPROCESSORS_ONLN), &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
    if (0 == r) {
        rc = xccl_segment_create(XCCL_SEGMENT_AUTO, o->np, 0, o->slot, &seg, &c->desc);
        atomic_store(&c->ready, rc < 0 ? -1 : 1);
    } else {
        while (0 == atomic_load(&c->ready)) {
            usleep(100);
        }
        rc = atomic_load(&c->ready) < 0 ? -1 : xccl_segment_attach(&c->desc, r, &seg);
    }
    if (rc < 0) {
        snprintf(c->msg, sizeof(c->msg), "rank %d: segment: %s", r, strerror(-rc));
        atomic_store(&c->failed, 1);
        _exit(1);
    }
    xccl_level_peer_t sp;
    xccl_level_peer_init(&sp, seg, NULL, o->np);
    const xccl_reduce_fn_t fn = xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM);
    uint32_t seq = 1;

    /* flag latency: rank 0 posts, rank 1 answers; half the round trip */
    if (o->np >= 2 && r < 2) {
        for (int rep = 0; rep < o->reps; rep++) {
            const int n = 20000;
            double t0 = now();
            for (int i = 1; i <= n; i++) {
                unsigned spins = 0;
                if (0 == r) {
                    xccl_segment_flag_post(seg, seq, (uint32_t) i);
                    while (!xccl_segment_flag_test(seg, 1, seq, (uint32_t) i)) {
                        relax(&spins);
                    }
                } else {
                    while (!xccl_segment_flag_test(seg, 0, seq, (uint32_t) i)) {
                        relax(&spins);
                    }
                    xccl_segment_flag_post(seg, seq, (uint32_t) i);
                }
            }
            if (0 == r) {
                c->flag_lat[rep] = (now() - t0) / n / 2;
            }
            seq++;
        }
    }

    /* (ranks 2.. took no part in the latency test) */
    seq = 1u + (uint32_t) o->reps;
    barrier(seg, o->np, seq++);            /* every rank attached */
    /* CMA: every rank probes every peer; all must say yes */
    for (int q = 0; q < o->np; q++) {
        if (1 != xccl_cma_probe(seg, q)) {
            atomic_store(&c->cma_bad, 1);
        }
    }
    barrier(seg, o->np, seq++);
    const int cma = !atomic_load(&c->cma_bad);

    for (int si = 0; si < o->nsizes; si++) {
        const size_t count = o->sizes[si] / sizeof(float), bytes = count * sizeof(float);
        float *sbuf = malloc(bytes + 64), *rbuf = malloc((size_t) o->np * bytes + 64);
        for (size_t i = 0; i < count; i++) {
            sbuf[i] = (float) (r + 1) + (float) (i % 100);
        }
        memset(rbuf, 0, (size_t) o->np * bytes);
        for (int v = 0; v < NVAR; v++) {
            xccl_sched_t s;
            const int ag = V_AG_SHM == v || V_AG_CMA == v;
            if (V_AG_CMA == v && !cma) {
                continue;
            }
            xccl_sched_init(&s, r, o->np, ag ? 1 : sizeof(float));
            s.slot_cap = o->slot;
            switch (v) {
            case V_AR_SMALL: rc = xccl_build_allreduce_shm_small(&s, count); break;
            case V_AR_SHM: rc = xccl_build_allreduce_shm(&s, count); break;
            case V_AG_SHM: rc = xccl_build_allgather_shm(&s, bytes); break;
            default: rc = xccl_build_allgather_mesh(&s, bytes); break;
            }
            xccl_level_peer_cma(&sp, V_AG_CMA == v);
            void *scratch = malloc(s.scratch_bytes + 1);
            void *bufs[XCCL_NBUF] = { sbuf, rbuf, scratch, xccl_segment_slot(seg, r) };
            /* calls per batch: about min_s / reps of work, from a trial */
            double t0 = now();
            for (int i = 0; i < 3 && 0 == rc; i++) {
                rc = run(&s, bufs, &sp, seq++, fn);
            }
            double one = (now() - t0) / 3;
            long batch = (long) (o->min_s / o->reps / (one > 1e-7 ? one : 1e-7));
            batch = batch < 1 ? 1 : batch > 100000 ? 100000 : batch;
            /* every rank runs rank 0's batch: it goes through rank 0's
             * slot, free between calls (the last call's exit barrier) */
            if (0 == r) {
                memcpy(xccl_segment_slot(seg, 0), &batch, sizeof(batch));
            }
            barrier(seg, o->np, seq++);
            memcpy(&batch, xccl_segment_slot(seg, 0), sizeof(batch));
            barrier(seg, o->np, seq++);
            for (int rep = 0; rep < o->reps && 0 == rc; rep++) {
                t0 = now();
                busy = 0;
                for (long i = 0; i < batch && 0 == rc; i++) {
                    rc = run(&s, bufs, &sp, seq++, fn);
                }
                if (0 == r) {
                    c->t[v][si][rep] = (now() - t0) / (double) batch;
                    c->work[v][si][rep] = busy / (double) batch;
                }
            }
            /* the result, once */
            for (size_t i = 0; i < count && 0 == rc && !ag; i++) {
                float want = 0;
                for (int q = 0; q < o->np; q++) {
                    want = want + ((float) (q + 1) + (float) (i % 100));
                }
                if (rbuf[i] != want) {
                    rc = -EINVAL;
                }
            }
            for (int q = 0; q < o->np && 0 == rc && ag; q++) {
                for (size_t i = 0; i < count; i++) {
                    if (rbuf[(size_t) q * count + i] != (float) (q + 1) + (float) (i % 100)) {
                        rc = -EINVAL;
                        break;
                    }
                }
            }
            free(scratch);
            xccl_sched_fini(&s);
            if (rc < 0) {
                static const char *const names[NVAR] = { "allreduce shm_small", "allreduce shm", "allgather shm",
                                                         "allgather mesh+cma" };
                snprintf(c->msg, sizeof(c->msg), "rank %d: %s %zu bytes failed (%d)", r, names[v], bytes, rc);
                atomic_store(&c->failed, 1);
                _exit(1);
            }
        }
        free(sbuf);
        free(rbuf);
    }
    xccl_segment_detach(seg);
    _exit(0);
}

/* One process copying bytes from one buffer to another, warm. */
static double memcpy_time(size_t bytes, int reps, double min_s)
{
    char *a = malloc(bytes + 64), *b = malloc(bytes + 64);
    double t[MAXREPS];
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double t0 = now();
    for (int i = 0; i < 3; i++) {
        memcpy(b, a, bytes);
        __asm__ __volatile__("" ::: "memory");
    }
    double one = (now() - t0) / 3;
    long batch = (long) (min_s / reps / (one > 1e-9 ? one : 1e-9));
    batch = batch < 1 ? 1 : batch > 10000000 ? 10000000 : batch;
    for (int rep = 0; rep < reps; rep++) {
        t0 = now();
        for (long i = 0; i < batch; i++) {
            memcpy(b, a, bytes);
            __asm__ __volatile__("" ::: "memory");
        }
        t[rep] = (now() - t0) / (double) batch;
    }
    free(a);
    free(b);
    return pick(t, reps);
}

static void human(char *out, size_t len, size_t bytes)
{
    if (bytes >= 1024 * 1024 && 0 == bytes % (1024 * 1024)) {
        snprintf(out, len, "%zuM", bytes >> 20);
    } else if (bytes >= 1024 && 0 == bytes % 1024) {
        snprintf(out, len, "%zuK", bytes >> 10);
    } else {
        snprintf(out, len, "%zu", bytes);
    }
}

int main(int argc, char **argv)
{
    opts_t o = { 2, 15, 1, 1 << 20, 2.0, { 0 }, 0 };
    int opt;
    while ((opt = getopt(argc, argv, "n:s:r:m:yupbh")) != -1) {
        switch (opt) {
        case 'n': o.np = atoi(optarg); break;
        case 's': o.slot = parse_size(optarg); break;
        case 'r': o.reps = atoi(optarg); break;
        case 'm': o.min_s = atof(optarg); break;
        case 'y': yield_every = 256; break;
        case 'u': o.bind = 0; break;
        case 'p': use_pause = 1; break;
        case 'b': pick = best; break;
        default:
            fprintf(stderr, "usage: %s [-n np] [-s slot_bytes] [-r reps] [-m min_seconds] [-y] [-u] [-p] [-b] [sizes...]\n", argv[0]);
            return 'h' == opt ? 0 : 2;
        }
    }
    for (int i = optind; i < argc && o.nsizes < MAXSIZES; i++) {
        o.sizes[o.nsizes++] = parse_size(argv[i]);
    }
    if (0 == o.nsizes) {
        o.sizes[o.nsizes++] = 8;
        o.sizes[o.nsizes++] = 1 << 20;
        o.sizes[o.nsizes++] = 16 << 20;
    }
    if (o.np < 1 || o.np > MAXNP || o.reps < 1 || o.reps > MAXREPS) {
        fprintf(stderr, "np 1..%d, reps 1..%d\n", MAXNP, MAXREPS);
        return 2;
    }
    ctl_t *c = mmap(NULL, sizeof(ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (MAP_FAILED == c) {
        perror("mmap");
        return 1;
    }
    memset(c, 0, sizeof(*c));
    pid_t pids[MAXNP];
    for (int r = 0; r < o.np; r++) {
        pids[r] = fork();
        if (0 == pids[r]) {
            rank_main(c, &o, r);
        }
    }
    int bad = 0;
    for (int r = 0; r < o.np; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        bad |= !WIFEXITED(st) || 0 != WEXITSTATUS(st);
    }
    if (bad || atomic_load(&c->failed)) {
        fprintf(stderr, "failed: %s\n", c->msg);
        return 1;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double load[3] = { 0, 0, 0 };
    getloadavg(load, 3);
    printf("# xccl_shm_bench: np %d, slot %zu bytes, %d reps, %s; %ld CPUs online, load %.2f, %s, %s%s\n",
           o.np, o.slot, o.reps, pick == best ? "best of them" : "medians", ncpu, load[0],
           o.bind ? "bound" : "unbound", yield_every ? "yielding" : "spinning", use_pause ? " with pause" : "");
    if (o.np >= 2) {
        printf("# flag latency (post seen by the peer): %.0f ns\n", 1e9 * pick(c->flag_lat, o.reps));
    }
    printf("# allreduce, float sum, bytes per rank; bound: memcpy of those bytes in one process\n");
    printf("# %-8s %12s %12s %12s %10s %10s %12s\n", "bytes", "shm_small", "shm", "memcpy", "small/mcp",
           "shm/mcp", "shm GB/s");
    for (int si = 0; si < o.nsizes; si++) {
        char h[32];
        human(h, sizeof(h), o.sizes[si]);
        const double ts = pick(c->t[V_AR_SMALL][si], o.reps), tl = pick(c->t[V_AR_SHM][si], o.reps);
        const double tm = memcpy_time(o.sizes[si], o.reps, o.min_s / 4);
        printf("  %-8s %10.2fus %10.2fus %10.2fus %10.2f %10.2f %12.2f\n", h, 1e6 * ts, 1e6 * tl, 1e6 * tm, ts / tm,
               tl / tm, (double) o.sizes[si] / tl / 1e9);
    }
    printf("# allreduce work: rank 0's time in copies and reductions per call (no waiting: what an\n"
           "# unloaded machine approaches for large messages); CMA reads are not counted\n");
    printf("# %-8s %12s %12s %12s %10s %10s\n", "bytes", "shm_small", "shm", "memcpy", "small/mcp", "shm/mcp");
    for (int si = 0; si < o.nsizes; si++) {
        char h[32];
        human(h, sizeof(h), o.sizes[si]);
        const double ws = pick(c->work[V_AR_SMALL][si], o.reps), wl = pick(c->work[V_AR_SHM][si], o.reps);
        const double tm = memcpy_time(o.sizes[si], o.reps, o.min_s / 4);
        printf("  %-8s %10.2fus %10.2fus %10.2fus %10.2f %10.2f\n", h, 1e6 * ws, 1e6 * wl, 1e6 * tm, ws / tm, wl / tm);
    }
    printf("# allgather, bytes per rank's block; bound: memcpy of the (np-1) blocks a rank receives\n");
    printf("# %-8s %12s %12s %12s %10s %10s\n", "bytes", "shm", "mesh+cma", "memcpy", "shm/mcp", "cma/mcp");
    for (int si = 0; si < o.nsizes && o.np > 1; si++) {
        char h[32];
        human(h, sizeof(h), o.sizes[si]);
        const double ta = pick(c->t[V_AG_SHM][si], o.reps);
        const double tc = atomic_load(&c->cma_bad) ? 0.0 : pick(c->t[V_AG_CMA][si], o.reps);
        const double tm = memcpy_time((size_t) (o.np - 1) * o.sizes[si], o.reps, o.min_s / 4);
        printf("  %-8s %10.2fus %10.2fus %10.2fus %10.2f %10.2f\n", h, 1e6 * ta, 1e6 * tc, 1e6 * tm, ta / tm,
               tc / tm);
    }
    if (atomic_load(&c->cma_bad)) {
        printf("# mesh+cma: not measured, process_vm_readv refused (ptrace_scope %d)\n", xccl_cma_ptrace_scope());
    }
    return 0;
}
