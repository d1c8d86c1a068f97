/*
 * line_probe: what moving cache lines between two cores costs, interval by
 * interval, to tell a machine's regimes apart (no MPI, no xccl).
 *
 * Two threads pinned to CPUs A and B (default 0 and 1).  Every interval
 * (-i MS, default 100) prints:
 *   rtt      a flag passed there and back (ns), the one-line latency;
 *   write    this thread writes a 128 KiB block that the other thread has
 *            read in the previous round (its lines shared in the other
 *            core's cache), us: what a rank pays to refill a slot;
 *   read     the other thread then copies the block out, us: what a peer
 *            pays to read a slot;
 *   nt       the same round with non-temporal stores instead (the lines go
 *            to memory, the reader reads them from there), us, both halves.
 * Between the vCPUs of a virtual machine the rtt may come in regimes that
 * change within a second, write and read with it, nt less so: the time a
 * collective of 128-256 KiB takes then follows the regime more than the
 * code (figures: docs/bench/line-probe-amd.txt).
 *
 *   gcc -O2 -pthread -o line_probe test/bench/line_probe.c
 *   ./line_probe [-n INTERVALS] [-i MS] [-a CPU] [-b CPU]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define BLOCK ((size_t) 128 * 1024)
#define ROUNDS 500
#define PINGS 20000

static _Atomic uint64_t turn __attribute__((aligned(128)));
static _Atomic int copy __attribute__((aligned(128)));
static char *block, *out;
static int cpu_b = 1;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + 1e-9 * (double) t.tv_nsec;
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* The other thread: answers every odd turn, copying the block out first
 * when asked; turn 0 again ends it. */
static void *other(void *arg)
{
    uint64_t seen = 0;
    (void) arg;
    if (pin(cpu_b)) {
        fprintf(stderr, "line_probe: cannot run on CPU %d\n", cpu_b);
        exit(2);
    }
    for (;;) {
        uint64_t t;
        while ((t = atomic_load_explicit(&turn, memory_order_acquire)) == seen) {
        }
        if (UINT64_MAX == t) {
            return NULL;
        }
        if (atomic_load_explicit(&copy, memory_order_relaxed)) {
            memcpy(out, block, BLOCK);
        }
        seen = t + 1;
        atomic_store_explicit(&turn, seen, memory_order_release);
    }
}

static uint64_t my_turn;

static void ask(void)
{
    atomic_store_explicit(&turn, ++my_turn, memory_order_release);
    while (atomic_load_explicit(&turn, memory_order_acquire) == my_turn) {
    }
    my_turn++;
}

static void fill_nt(char *d, int c)
{
#if defined(__SSE2__)
    const __m128i v = _mm_set1_epi8((char) c);
    for (size_t i = 0; i < BLOCK; i += 16) {
        _mm_stream_si128((__m128i *) (d + i), v);
    }
    _mm_sfence();
#else
    memset(d, c, BLOCK);
#endif
}

int main(int argc, char **argv)
{
    int n = 50, ms = 100, cpu_a = 0, opt;
    pthread_t th;

    while ((opt = getopt(argc, argv, "n:i:a:b:")) != -1) {
        switch (opt) {
        case 'n': n = atoi(optarg); break;
        case 'i': ms = atoi(optarg); break;
        case 'a': cpu_a = atoi(optarg); break;
        case 'b': cpu_b = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: line_probe [-n INTERVALS] [-i MS] [-a CPU] [-b CPU]\n");
            return 2;
        }
    }
    block = aligned_alloc(4096, BLOCK);
    out = aligned_alloc(4096, BLOCK);
    if (NULL == block || NULL == out || pin(cpu_a)) {
        fprintf(stderr, "line_probe: no memory, or cannot run on CPU %d\n", cpu_a);
        return 2;
    }
    memset(block, 1, BLOCK);
    memset(out, 1, BLOCK);
    pthread_create(&th, NULL, other, NULL);
    printf("# CPUs %d and %d; 128 KiB blocks, %d rounds each\n", cpu_a, cpu_b, ROUNDS);
    printf("#  time_s   rtt_ns  write_us  read_us    nt_us\n");
    const double start = now();
    for (int k = 0; k < n; k++) {
        atomic_store(&copy, 0);
        double t0 = now();
        for (int i = 0; i < PINGS; i++) {
            ask();
        }
        const double rtt = (now() - t0) / PINGS;
        atomic_store(&copy, 1);
        double w = 0;
        t0 = now();
        for (int i = 0; i < ROUNDS; i++) {
            const double a = now();
            memset(block, i, BLOCK);
            w += now() - a;
            ask();
        }
        const double all = now() - t0;
        t0 = now();
        for (int i = 0; i < ROUNDS; i++) {
            fill_nt(block, i);
            ask();
        }
        const double nt = now() - t0;
        printf("%8.2f %8.0f %9.2f %8.2f %8.2f\n", t0 - start, 1e9 * rtt, 1e6 * w / ROUNDS,
               1e6 * (all - w) / ROUNDS, 1e6 * nt / ROUNDS);
        fflush(stdout);
        usleep((useconds_t) ms * 1000u);
    }
    atomic_store(&turn, UINT64_MAX);
    pthread_join(th, NULL);
    return 0;
}
