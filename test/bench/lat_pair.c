/*
 * lat_pair: where two ranks should write the parts they exchange through
 * shared memory (no MPI, no xccl).  Two processes pinned to CPUs 0 and 1
 * run an allgather and a float-sum allreduce of the given size through
 * two areas, in two layouts, interleaved round by round:
 *
 *   own   each rank writes its own area, the peer reads it (the latency
 *         path's layout before the pair layout; of more than two ranks
 *         still): every line a rank writes was last read by the peer;
 *   pair  each rank writes the area the peer wrote last (it read those
 *         lines last), as coll_xccl_latency.c does for two ranks;
 *         the allreduce's reducer writes its piece back in place.
 *
 * A core that reads a line another core modified may take it over (AMD
 * does); writing it again then pulls it back: "own" moves every line
 * between the cores twice per call, "pair" once.  Figures:
 * docs/bench/latency-path.md.
 *
 *   gcc -O2 -march=x86-64-v3 -o lat_pair test/bench/lat_pair.c
 *   ./lat_pair [BYTES [ROUNDS]]      (default 65536, 15)
 * Prints min / median / max us per call over the rounds.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AREA ((size_t) 4 << 20)

typedef struct {
    _Atomic uint64_t v;
    char pad[120];
} flag_t;

static flag_t *flags;   /* one per rank */
static char *areas;     /* two areas of AREA bytes */
static int me;
static uint64_t seq;

static void post(uint64_t v)
{
    atomic_store_explicit(&flags[me].v, v, memory_order_release);
}

static void wait_peer(uint64_t v)
{
    while (atomic_load_explicit(&flags[1 - me].v, memory_order_acquire) < v) {
        __builtin_ia32_pause();
    }
}

static char *area(int a)
{
    return areas + (size_t) a * AREA;
}

static void sum(float *d, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        d[i] = a[i] + b[i];
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

/* Allgather of b bytes per rank; flip says which area rank s writes
 * (s ^ flip); own: flip 0 always, pair: flip alternates. */
static void allgather(const char *snd, char *rcv, size_t b, int flip)
{
    const uint64_t f = ++seq * 2;
    memcpy(area(me ^ flip), snd, b);
    post(f + 1);
    memcpy(rcv + (size_t) me * b, snd, b);
    wait_peer(f + 1);
    memcpy(rcv + (size_t) (1 - me) * b, area((1 - me) ^ flip), b);
    post(f + 2);
    wait_peer(f + 2);
}

/* Allreduce of n floats, sliced: rank s reduces piece s.  own: each rank
 * writes its whole vector into its area, the reducer writes its result
 * over its own copy there, the other copies it out.  pair: each rank
 * writes the other's piece into area s ^ flip (flip fixed: the reducer
 * writes back in place, so the giver read those lines last). */
static void allreduce(const float *snd, float *rcv, size_t n, int pair)
{
    const size_t h = n / 2, mo = (size_t) me * h, po = (size_t) (1 - me) * h;
    const uint64_t f = ++seq * 2;
    if (pair) {
        float *give = (float *) area(me), *got = (float *) area(1 - me);
        memcpy(give, snd + po, h * sizeof(float));
        post(f + 1);
        wait_peer(f + 1);
        sum(rcv + mo, snd + mo, got, h);
        memcpy(got, rcv + mo, h * sizeof(float));
        post(f + 2);
        wait_peer(f + 2);
        memcpy(rcv + po, give, h * sizeof(float));
        return;
    }
    float *mine = (float *) area(me), *peer = (float *) area(1 - me);
    memcpy(mine, snd, n * sizeof(float));
    post(f + 1);
    wait_peer(f + 1);
    sum(rcv + mo, mine + mo, peer + mo, h);
    memcpy(mine + mo, rcv + mo, h * sizeof(float));
    post(f + 2);
    wait_peer(f + 2);
    memcpy(rcv + po, peer + po, h * sizeof(float));
    /* the exit barrier: the next call rewrites this area */
    post(f + 3);
    wait_peer(f + 3);
    seq++;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 0) : 65536;
    const int rounds = argc > 2 ? atoi(argv[2]) : 15;
    const size_t n = bytes / sizeof(float);
    if (n < 2 || rounds < 1 || bytes > AREA) {
        fprintf(stderr, "usage: lat_pair [BYTES (8 .. 4 MiB) [ROUNDS]]\n");
        return 2;
    }
    flags = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    areas = mmap(NULL, 2 * AREA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (MAP_FAILED == flags || MAP_FAILED == areas) {
        perror("mmap");
        return 1;
    }
    const pid_t child = fork();
    me = 0 == child;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(me, &cs);
    if (0 != sched_setaffinity(0, sizeof cs, &cs)) {
        perror("sched_setaffinity");
    }
    memset(area(me), 0, AREA);
    float *snd = aligned_alloc(4096, 2 * bytes), *rcv = aligned_alloc(4096, 2 * bytes);
    for (size_t i = 0; i < 2 * n; i++) {
        snd[i] = (float) (i % 97) + (float) me;
        rcv[i] = 0;
    }
    static const char *const names[4] = { "allgather own", "allgather pair", "allreduce own",
                                          "allreduce pair" };
    int calls = (int) (((size_t) 8 << 20) / bytes);
    calls = calls < 20 ? 20 : calls > 4000 ? 4000 : calls;
    double *t = calloc((size_t) 4 * rounds, sizeof(double));
    int flip = 0, bad = 0;
    for (int r = 0; r < rounds; r++) {
        for (int v = 0; v < 4; v++) {
            for (int k = -10; k < calls; k++) {
                const double t0 = k == 0 ? now_us() : 0;
                if (v < 2) {
                    allgather((const char *) snd, (char *) rcv, bytes, 1 == v ? (flip ^= 1) : 0);
                } else {
                    allreduce(snd, rcv, n, 3 == v);
                }
                if (0 == k) {
                    t[v * rounds + r] = -t0;
                }
            }
            t[v * rounds + r] = (t[v * rounds + r] + now_us()) / calls;
            /* the last call's results, both layouts */
            for (size_t i = 0; i < n && v >= 2; i++) {
                bad += (n / 2) * 2 == n && rcv[i] != 2.0f * (float) (i % 97) + 1.0f;
            }
        }
    }
    if (bad) {
        fprintf(stderr, "lat_pair: rank %d: %d wrong elements\n", me, bad);
    }
    if (0 == me) {
        for (int v = 0; v < 4; v++) {
            double *x = t + v * rounds;
            qsort(x, (size_t) rounds, sizeof(double), cmp);
            printf("%-15s %8zu B  min %8.2f  median %8.2f  max %8.2f us\n", names[v], bytes, x[0],
                   x[rounds / 2], x[rounds - 1]);
        }
        waitpid(child, NULL, 0);
    }
    return bad ? 1 : 0;
}
