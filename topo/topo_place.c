/*
 * Placement: where the calling process runs inside its node (its GPU's
 * position on the node's ring, or package and CPU of its binding), as the
 * key the component exchanges when it sets a communicator up, and the
 * order of a node's ranks from everyone's keys (xccl_topo.h).  Builds on
 * the model's ring order; knows nothing of CUDA (the caller says which
 * device its context is on) or MPI.
 */
#define _GNU_SOURCE 1          /* sched_getaffinity, CPU_* */
#include "xccl_topo.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define KEY_CPU(k) ((k) & XCCL_TOPO_KEY_UNBOUND)

/* With a CUDA context: its ring position key, else XCCL_TOPO_KEY_CUDA.
 * Without one: -1. */
static int gpu_key(const xccl_topo_t *topo, const char *pci)
{
    int order[XCCL_TOPO_MAX_DEVS];
    if (NULL == pci) {
        return -1;
    }
    if (NULL == topo) {
        return XCCL_TOPO_KEY_CUDA;
    }
    int n = xccl_topo_ring_order(topo, order);
    for (int k = 0; k < n; k++) {
        if (0 == strcasecmp(topo->devs[order[k]].loc.pci, pci)) {
            return XCCL_TOPO_KEY_GPU + k;
        }
    }
    return XCCL_TOPO_KEY_CUDA;
}

/*
 * Every communicator's set-up asks for the key: three file reads in /sys
 * each time would be a tenth of the cost of a communicator created, used
 * once and freed (figures: docs/bench/churn.md).  The binding is asked each time (one system call:
 * a thread may be rebound between communicators); what the files say of
 * a CPU, and how many are online, is read once per process.  Racing
 * threads read the same values and store the same words.
 */
static _Atomic long ncpu_once;                  /* 0: not read yet */
static _Atomic int package_once[CPU_SETSIZE];   /* package + 1; 0: not read yet */

static long online_cpus(void)
{
    long n = atomic_load_explicit(&ncpu_once, memory_order_relaxed);
    if (n <= 0) {
        n = sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&ncpu_once, n, memory_order_relaxed);
    }
    return n;
}

/* Package of cpu (< CPU_SETSIZE); 0 where /sys does not say. */
static int package_of(int cpu)
{
    int p = atomic_load_explicit(&package_once[cpu], memory_order_relaxed);
    if (p > 0) {
        return p - 1;
    }
    char path[96];
    int package = 0;
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    FILE *f = fopen(path, "r");
    if (NULL != f) {
        /* below XCCL_TOPO_KEY_UNBOUND */
        if (1 != fscanf(f, "%d", &package) || package < 0 ||
            package >= XCCL_TOPO_KEY_UNBOUND / 65536) {
            package = 0;
        }
        fclose(f);
    }
    atomic_store_explicit(&package_once[cpu], package + 1, memory_order_relaxed);
    return package;
}

int xccl_topo_placement_key(const xccl_topo_t *topo, const char *cuda_pci)
{
    int gpu = gpu_key(topo, cuda_pci);
    if (gpu >= XCCL_TOPO_KEY_GPU) {
        return gpu;
    }
    const int cuda = gpu >= 0 ? XCCL_TOPO_KEY_CUDA : 0;
    cpu_set_t set;
    long ncpu = online_cpus();
    if (0 != sched_getaffinity(0, sizeof(set), &set) || ncpu <= 0 || CPU_COUNT(&set) >= ncpu) {
        return cuda | XCCL_TOPO_KEY_UNBOUND;
    }
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set)) {
        cpu++;
    }
    if (cpu >= CPU_SETSIZE || cpu >= 65536) {
        return cuda | XCCL_TOPO_KEY_UNBOUND;
    }
    return cuda | (package_of(cpu) * 65536 + cpu);
}

typedef struct {
    int key, rank;
} key_rank_t;

static int cmp_key_rank(const void *a, const void *b)
{
    const key_rank_t *x = a, *y = b;
    return x->key != y->key ? (x->key < y->key ? -1 : 1) : x->rank - y->rank;
}

int xccl_topo_placement_order(const int *keys, const int *ranks, int n, int *order)
{
    if (n < 2) {
        return XCCL_TOPO_ORDER_KEEP;
    }
    key_rank_t *kr = malloc((size_t) n * sizeof(*kr));
    if (NULL == kr) {
        return XCCL_TOPO_ORDER_KEEP;
    }
    int bound = 1, gpus = 0;
    for (int i = 0; i < n; i++) {
        kr[i].key = keys[i];
        kr[i].rank = ranks[i];
        gpus += kr[i].key >= XCCL_TOPO_KEY_GPU;
    }
    /* No GPU keys: package and CPU only (the CUDA flag says nothing of
     * where a rank runs). */
    for (int i = 0; i < n && 0 == gpus; i++) {
        kr[i].key = kr[i].key < 0 ? XCCL_TOPO_KEY_UNBOUND : KEY_CPU(kr[i].key);
        bound = bound && XCCL_TOPO_KEY_UNBOUND != kr[i].key;
    }
    if (!bound || (0 != gpus && n != gpus)) {
        free(kr);
        return XCCL_TOPO_ORDER_KEEP;
    }
    qsort(kr, (size_t) n, sizeof(*kr), cmp_key_rank);
    for (int i = 0; i < n; i++) {
        order[i] = kr[i].rank;
    }
    free(kr);
    return gpus ? XCCL_TOPO_ORDER_GPU : XCCL_TOPO_ORDER_CPU;
}
