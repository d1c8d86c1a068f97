/*
 * fake_cuda.c: a stand-in libcuda.so.1 (CUDA driver API) for machines
 * without a GPU, built only for `make check`.  Its job is to make bugs in
 * the caller visible (test/gpu/README has the full list of rules):
 *
 *  - "Device" memory (cuMemAlloc) is a memfd mapping with PROT_NONE: any
 *    host load or store through a device pointer segfaults.  Only the
 *    fake's own copy and memset functions lift the protection (mprotect),
 *    for the duration of one copy.
 *  - Calls that need a current context fail with CUDA_ERROR_INVALID_CONTEXT
 *    without one (per-thread context stacks); everything but
 *    cuDriverGetVersion/cuGetError* fails with CUDA_ERROR_NOT_INITIALIZED
 *    before cuInit.
 *  - Work on a stream runs late, on a thread of that stream's own, after a
 *    pseudo-random delay (FAKE_CUDA_SEED; sometimes milliseconds), reading
 *    its sources - a peer's IPC-mapped memory too - when it runs.  Nothing
 *    has run except what CUDA guarantees: a stream's work in order, the
 *    legacy default stream against blocking streams (each waits for the
 *    other's earlier work), cuStreamWaitEvent, and completion seen through
 *    a synchronisation or a query that answered CUDA_SUCCESS.  Copies and
 *    memsets without a stream argument go on the legacy default stream and
 *    return as the driver may: before they ran (device to device, memset
 *    of device memory, host to device from pageable memory - its bytes
 *    taken at the call), or once done (to host memory, from pinned memory).
 *  - Copies check their pointers: a "device" side must lie inside one
 *    device allocation (or pinned host memory, as with UVA), a host side must
 *    not touch device memory; otherwise CUDA_ERROR_INVALID_VALUE.
 *  - xccl's GPU reduction kernels run by emulation: cuModuleLoadData
 *    accepts any image, cuModuleGetFunction knows every
 *    xccl_reduce_<dtype>_<op> of XCCL_GPU_PAIRS (gpu/xccl_reduce_ops.h,
 *    whose host element ops are the kernels' expressions), cuLaunchKernel
 *    checks the kernel's pointers and queues the reduction like an async
 *    copy (protection lifted while it runs).
 *
 * Threads: a global mutex serializes the calls; every stream (and each
 * context's legacy default stream) has a worker thread.  Device memory is
 * mapped twice: the address the caller sees (PROT_NONE) and a private
 * read-write view the workers use, so no protection is ever lifted.
 *
 * Environment:
 *   FAKE_CUDA_DEVICES=N   number of devices (default 1, at most 16; 0: cuInit
 *                         succeeds, cuDeviceGetCount gives 0, cuDeviceGet
 *                         fails with CUDA_ERROR_NO_DEVICE)
 *   FAKE_CUDA_VERSION=V   what cuDriverGetVersion reports (default 12080)
 *   FAKE_CUDA_STATS=1     at exit, print the calls per function and what is
 *                         still allocated to stderr
 *   FAKE_CUDA_TRACE=1     print every call that fails to stderr
 *   FAKE_CUDA_SEED=S      seed of the delays (default 1), mixed with the
 *                         MPI rank from the environment where there is one
 *   FAKE_CUDA_DELAY=0     queued work runs as soon as its turn comes (still
 *                         on the streams' threads); default 1: delayed
 *   FAKE_CUDA_FAIL=F:N    the N-th call (from 1) of entry point F (its C
 *                         name, e.g. cuEventQuery) fails with
 *                         CUDA_ERROR_UNKNOWN and does nothing else
 *   FAKE_CUDA_HOST_ACCESS=1  device memory stays readable and writable by
 *                         the host (no PROT_NONE), as a transport that
 *                         moves CUDA memory sees it: lets a UCX without
 *                         CUDA stand in for one that has it.  The caller's
 *                         own stray accesses then go unnoticed; the
 *                         deferred asynchronous work still shows a missing
 *                         wait.
 */
#define _GNU_SOURCE
#include "fake_cuda.h"
#include "../../gpu/xccl_reduce_ops.h"   /* the kernels' element ops, XCCL_GPU_PAIRS */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEVICES 16
#define MAX_CTX_STACK 32
#define CTX_MAGIC 0x43545846u
#define STREAM_MAGIC 0x53545246u
#define EVENT_MAGIC 0x45565446u
#define IPC_MAGIC 0x49504346u
#define MODULE_MAGIC 0x444f4d46u
#define FUNC_MAGIC 0x434e5546u

/* ------------------------------------------------------------ state */
struct fake_stream;

struct fake_ctx {
    unsigned magic;
    int device;
    int refs;                  /* primary context retain count */
    unsigned long long id;     /* cuCtxGetId: new each time refs goes 0 -> 1 */
    struct fake_stream *legacy;   /* its legacy default stream (made on first use) */
};

enum { R_DEVICE, R_HOST_ALLOC, R_HOST_REGISTER, R_IPC };
static const char *const region_kind_names[] = { "device", "host_alloc", "host_register", "ipc" };

typedef struct region {
    uintptr_t base;
    size_t size;               /* as requested */
    size_t maplen;             /* mapped (page multiple) */
    int kind;
    int fd;                    /* R_DEVICE: the memfd, kept for IPC */
    int refs;                  /* R_IPC: opens of the same handle */
    int ipc_pid;               /* R_IPC: exporter */
    unsigned long long ipc_id; /* R_IPC: exporter's buffer id */
    char *view;                /* device kinds: the workers' read-write mapping */
    fcu_ctx ctx;
    unsigned long long id;     /* BUFFER_ID, never reused */
    struct region *next;
} region;

/* Work waits for stream s to have completed its first seq operations. */
typedef struct {
    struct fake_stream *s;
    unsigned long long seq;
} dep;

enum { OP_COPY, OP_MEMSET, OP_KERNEL, OP_MARKER, OP_WAIT_VALUE, OP_WRITE_VALUE };
typedef struct op {
    struct op *next;
    int kind;
    char *dst;
    const char *src;
    size_t width, height, dpitch, spitch;
    unsigned char value;
    void *staged;                     /* OP_COPY: the bytes of a pageable source, taken at the call */
    int kernel;                       /* OP_KERNEL: index in kernels[] */
    int nsrc;                         /* OP_KERNEL: its parameters, by value */
    unsigned long long count;
    xccl_gpu_srcs_t srcs;             /* (dst is dst) */
    unsigned value32, flags32;        /* OP_WAIT_VALUE, OP_WRITE_VALUE (at dst) */
    unsigned long long delay_ns;      /* before it runs */
    int ndeps;
    dep *deps;                        /* what must have completed first */
} op;

/* A created stream, or a context's legacy default stream.  Never freed:
 * a destroyed stream drains and its thread ends, but events recorded on it
 * keep pointing at it. */
struct fake_stream {
    unsigned magic;
    unsigned flags;
    int legacy;                /* the context's legacy default stream */
    int destroyed;
    fcu_ctx ctx;
    op *head, *tail;           /* head: next to run (or running) */
    unsigned long long enqueued, done;
    struct fake_stream *next;
};

/* An interprocess event's shared words (a memfd page): records issued
 * (at the call) and records its stream has passed. */
typedef struct {
    unsigned recorded, completed;
} ipc_event_words;

struct fake_event {
    unsigned magic;
    unsigned flags;
    struct fake_stream *stream;  /* NULL: complete */
    unsigned long long seq;
    ipc_event_words *ipc;        /* CU_EVENT_INTERPROCESS, exported or opened */
    int ipc_fd;                  /* the exporter's memfd (-1: none) */
    int opened;                  /* opened from another process's handle */
    struct fake_event *next;
};

typedef struct {
    unsigned magic;
    int pid;
    int fd;
    unsigned pad;
    unsigned long long id;
    unsigned long long size;
    unsigned long long maplen;
} ipc_payload;
_Static_assert(sizeof(ipc_payload) <= FCU_IPC_HANDLE_SIZE, "ipc payload");

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;   /* an operation completed, or was queued */
static int initialized;
static int ndevices = 1;
static int driver_version = 12080;
static int trace;
static int host_access;        /* FAKE_CUDA_HOST_ACCESS: device memory never PROT_NONE */
static int delays = 1;         /* FAKE_CUDA_DELAY */
static unsigned long long seed = 1, rng_state;
static struct fake_ctx contexts[MAX_DEVICES];
static region *regions;
static struct fake_stream *streams;   /* every stream: created, destroyed, legacy */
static struct fake_event *events;
static unsigned long long next_buffer_id = 1;
static unsigned long long next_ctx_id = 1;
static size_t page_size;

static __thread fcu_ctx ctx_stack[MAX_CTX_STACK];
static __thread int ctx_depth;

/* ------------------------------------------------------------ emulated kernels */
/* The host version of each kernel of gpu/xccl_kernels.cu:
 *
 *   xccl_reduce_<dtype>_<op>(void *dst, xccl_gpu_srcs_t srcs, int nsrc,
 *                            unsigned long long count)
 *   dst[i] = ((src0[i] op src1[i]) op src2[i]) ... op src(nsrc-1)[i]
 *
 * element by element (every source read before dst[i] is written, so dst
 * may be one of the sources), with the very element op the kernel uses. */
#define FAKE_KERNEL(DT, tn, T, opn, OP)                                                     \
    static void fk_##tn##_##opn(void *dst_, const unsigned long long *src, int nsrc,        \
                                unsigned long long count)                                   \
    {                                                                                       \
        T *dst = dst_;                                                                      \
        for (unsigned long long i = 0; i < count; i++) {                                    \
            T acc = ((const T *) (uintptr_t) src[0])[i];                                    \
            for (int k = 1; k < nsrc; k++) {                                                \
                acc = xccl_op_##tn##_##opn(acc, ((const T *) (uintptr_t) src[k])[i]);       \
            }                                                                               \
            dst[i] = acc;                                                                   \
        }                                                                                   \
    }
XCCL_GPU_PAIRS(FAKE_KERNEL)
#undef FAKE_KERNEL

typedef struct {
    const char *name;
    size_t size, align;        /* of the element type */
    void (*run)(void *dst, const unsigned long long *src, int nsrc, unsigned long long count);
} kernel_def;

#define FAKE_KERNEL_DEF(DT, tn, T, opn, OP) \
    { "xccl_reduce_" #tn "_" #opn, sizeof(T), _Alignof(T), fk_##tn##_##opn },
/* The last: xccl_copy_batch (gpu/xccl_kernels.cu), its own parameter
 * (xccl_gpu_copies_t) and run (run NULL). */
static const kernel_def kernels[] = { XCCL_GPU_PAIRS(FAKE_KERNEL_DEF) { "xccl_copy_batch", 1, 1, NULL } };
#undef FAKE_KERNEL_DEF
#define NKERNELS (sizeof(kernels) / sizeof(kernels[0]))

/* The kernels' launch bound (__launch_bounds__(256)) and static shared
 * memory (the source pointers); dynamic shared memory up to the rest of
 * 48 KiB is accepted. */
#define KERNEL_MAX_THREADS 256
#define KERNEL_MAX_DYN_SHARED (48 * 1024 - XCCL_GPU_MAX_SRCS * 8)

/* A module: every kernel's function, whatever the image.  Unloaded (or
 * gone with its context) modules stay in the list, dead, so that their
 * stale handles are recognized (CUDA_ERROR_INVALID_HANDLE), never reused. */
struct fake_function {
    unsigned magic;
    int kernel;
    struct fake_module *mod;
};

struct fake_module {
    unsigned magic;
    int dead;
    fcu_ctx ctx;
    unsigned long long ctx_id;
    struct fake_function fn[NKERNELS];
    struct fake_module *next;
};
static struct fake_module *modules;

/* ------------------------------------------------------------ call counts */
typedef struct counter {
    const char *name;
    unsigned long long calls;
    struct counter *next;
} counter;
static counter *counters;

static int lock_guard(counter *c)
{
    pthread_mutex_lock(&lock);
    if (0 == c->calls++) {
        c->next = counters;
        counters = c;
    }
    return 0;
}

static void unlock_guard(int *unused)
{
    (void) unused;
    pthread_mutex_unlock(&lock);
}

/* Not CUDA: the fake's own, for tests that count driver calls
 * (test/gpu/xccl_gpu_budget.c; dlsym them, a real driver has none).  The
 * calls of entry point `name` so far, 0 if none; name NULL: of all;
 * "host<->device copies": the copies queued between host and device
 * memory (any entry point). */
static unsigned long long host_device_copies;

unsigned long long fake_cuda_calls(const char *name);
unsigned long long fake_cuda_calls(const char *name)
{
    unsigned long long n = 0;
    pthread_mutex_lock(&lock);
    if (name && 0 == strcmp(name, "host<->device copies")) {
        n = host_device_copies;
        pthread_mutex_unlock(&lock);
        return n;
    }
    for (counter *c = counters; c; c = c->next) {
        if (NULL == name || 0 == strcmp(c->name, name)) {
            n += c->calls;
        }
    }
    pthread_mutex_unlock(&lock);
    return n;
}

/* FAKE_CUDA_FAIL: the entry point and the call that fails. */
static char fail_fn[64];
static unsigned long long fail_call;

static int injected(const counter *c)
{
    return fail_call && c->calls == fail_call && 0 == strcmp(c->name, fail_fn);
}

/* Every entry point starts with ENTER (count, lock until return, the
 * injected failure) and returns through RET (trace failures). */
#define ENTER()                                                          \
    static counter counter_ = { __func__, 0, NULL };                     \
    int guard_ __attribute__((cleanup(unlock_guard))) = lock_guard(&counter_); \
    (void) guard_;                                                       \
    if (injected(&counter_))                                             \
        RET(FCU_ERROR_UNKNOWN)
#define RET(x) return ret_(__func__, (x))

static const char *error_name(fcu_result r);

static fcu_result ret_(const char *fn, fcu_result r)
{
    if (r != FCU_SUCCESS && trace) {
        fprintf(stderr, "fake_cuda[%d]: %s -> %s (%d)\n", (int) getpid(), fn,
                error_name(r) ? error_name(r) : "?", r);
    }
    return r;
}

/* ------------------------------------------------------------ errors */
static const struct {
    fcu_result code;
    const char *name, *text;
} error_table[] = {
    { FCU_SUCCESS, "CUDA_SUCCESS", "no error" },
    { FCU_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { FCU_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { FCU_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { FCU_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { FCU_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { FCU_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { FCU_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed" },
    { FCU_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { FCU_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { FCU_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
    { FCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
      "part or all of the requested memory range is already mapped" },
    { FCU_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
      "pointer does not correspond to a registered memory region" },
    { FCU_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { FCU_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static const char *error_name(fcu_result r)
{
    for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++) {
        if (error_table[i].code == r) {
            return error_table[i].name;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ helpers */
static fcu_ctx current_ctx(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

/* Initialized, and a current context that is alive. */
static fcu_result need_ctx(void)
{
    if (!initialized) {
        return FCU_ERROR_NOT_INITIALIZED;
    }
    fcu_ctx c = current_ctx();
    if (NULL == c || c->refs <= 0) {
        return FCU_ERROR_INVALID_CONTEXT;
    }
    return FCU_SUCCESS;
}

static int valid_ctx(fcu_ctx c)
{
    return c >= &contexts[0] && c < &contexts[MAX_DEVICES] && CTX_MAGIC == c->magic;
}

static size_t round_page(size_t n)
{
    return (n + page_size - 1) / page_size * page_size;
}

/* The region holding address a, or NULL. */
static region *find_region(uintptr_t a)
{
    for (region *r = regions; r; r = r->next) {
        if (a >= r->base && a < r->base + r->size) {
            return r;
        }
    }
    return NULL;
}

static int is_device_kind(const region *r)
{
    return r && (R_DEVICE == r->kind || R_IPC == r->kind);
}

/* A device region overlapping [a, a+n), or NULL (n > 0). */
static region *overlapping_device(uintptr_t a, size_t n)
{
    for (region *r = regions; r; r = r->next) {
        if (is_device_kind(r) && a < r->base + r->maplen && r->base < a + n) {
            return r;
        }
    }
    return NULL;
}

static region *overlapping_host(uintptr_t a, size_t n)
{
    for (region *r = regions; r; r = r->next) {
        if (!is_device_kind(r) && a < r->base + r->size && r->base < a + n) {
            return r;
        }
    }
    return NULL;
}

static void unlink_region(region *dead)
{
    for (region **pp = &regions; *pp; pp = &(*pp)->next) {
        if (*pp == dead) {
            *pp = dead->next;
            return;
        }
    }
}

/* ------------------------------------------------------------ delays */
/* splitmix64: the delays of one process follow from the seed and its rank. */
static unsigned long long rng(void)
{
    unsigned long long z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Before an operation runs: mostly at once or within tens of
 * microseconds, now and then up to a millisecond, 1 in 100 up to 10 ms. */
static unsigned long long draw_delay(void)
{
    if (!delays) {
        return 0;
    }
    const unsigned long long r = rng() % 1000;
    if (r < 600) {
        return 0;
    }
    if (r < 900) {
        return rng() % 50000;
    }
    if (r < 990) {
        return 50000 + rng() % 950000;
    }
    return 1000000 + rng() % 9000000;
}

static void sleep_ns(unsigned long long ns)
{
    struct timespec t = { (time_t) (ns / 1000000000ull), (long) (ns % 1000000000ull) };
    while (0 != nanosleep(&t, &t) && EINTR == errno) {
    }
}

/* ------------------------------------------------------------ work */
static int deps_met(const op *o)
{
    for (int i = 0; i < o->ndeps; i++) {
        if (o->deps[i].s->done < o->deps[i].seq) {
            return 0;
        }
    }
    return 1;
}

static void free_op(op *o)
{
    free(o->staged);
    free(o->deps);
    free(o);
}

static int in_region(const region *r, const void *p)
{
    return (uintptr_t) p >= r->base && (uintptr_t) p < r->base + r->maplen;
}

/* Work queued (or running) on any stream that reads or writes r. */
static int queued_work_uses(const region *r)
{
    for (const struct fake_stream *s = streams; s; s = s->next) {
        for (const op *o = s->head; o; o = o->next) {
            int uses = in_region(r, o->dst) || (OP_COPY == o->kind && !o->staged && in_region(r, o->src));
            for (int k = 0; OP_KERNEL == o->kind && k < o->nsrc && !uses; k++) {
                uses = in_region(r, (const void *) (uintptr_t) o->srcs.p[k]);
            }
            if (OP_KERNEL == o->kind && NULL == kernels[o->kernel].run) {
                const xccl_gpu_copies_t *c = o->staged;
                for (int k = 0; k < c->n && !uses; k++) {
                    uses = in_region(r, (const void *) (uintptr_t) c->dst[k]) ||
                           in_region(r, (const void *) (uintptr_t) c->src[k]);
                }
            }
            if (uses) {
                return 1;
            }
        }
    }
    return 0;
}

/* Where a worker reads or writes address a: a device allocation (or IPC
 * mapping) through its read-write view, anything else as it is.  Work was
 * checked when queued: each side lies inside one allocation, and
 * allocations outlive the work that uses them (frees wait for it). */
static char *worker_addr(uintptr_t a)
{
    region *r = find_region(a);
    return is_device_kind(r) ? r->view + (a - r->base) : (char *) a;
}

/* cuStreamWaitValue32's conditions (CU_STREAM_WAIT_VALUE_GEQ 0, EQ 1,
 * AND 2, NOR 3; GEQ compares cyclically, as the driver does). */
static int wait_value_met(unsigned have, unsigned want, unsigned flags)
{
    switch (flags & 0xf) {
    case 0:
        return (int) (have - want) >= 0;
    case 1:
        return have == want;
    case 2:
        return 0 != (have & want);
    default:
        return 0 != ~(have | want);
    }
}

/* Runs o with the lock released (the addresses translated under it). */
static void execute(op *o)
{
    if (OP_MARKER == o->kind) {
        return;
    }
    if (OP_WRITE_VALUE == o->kind) {
        __atomic_store_n((unsigned *) (void *) worker_addr((uintptr_t) o->dst), o->value32,
                         __ATOMIC_RELEASE);
        return;
    }
    if (OP_WAIT_VALUE == o->kind) {
        /* Polls the word (another process may write it), the lock
         * released, at an uneven pace. */
        const unsigned *w = (const unsigned *) (void *) worker_addr((uintptr_t) o->dst);
        while (!wait_value_met(__atomic_load_n(w, __ATOMIC_ACQUIRE), o->value32, o->flags32)) {
            const unsigned long long pause = 2000 + rng() % 30000;
            pthread_mutex_unlock(&lock);
            sleep_ns(pause);
            pthread_mutex_lock(&lock);
        }
        return;
    }
    if (OP_KERNEL == o->kind && NULL == kernels[o->kernel].run) {
        /* xccl_copy_batch: independent copies (checked at the launch), in
         * a drawn order: a grid runs them all at once */
        const xccl_gpu_copies_t *c = o->staged;
        char *dst[XCCL_GPU_MAX_COPIES];
        const char *src[XCCL_GPU_MAX_COPIES];
        const int first = (int) (rng() % (unsigned long long) c->n);
        for (int e = 0; e < c->n; e++) {
            dst[e] = worker_addr((uintptr_t) c->dst[e]);
            src[e] = worker_addr((uintptr_t) c->src[e]);
        }
        pthread_mutex_unlock(&lock);
        for (int k = 0; k < c->n; k++) {
            const int e = (first + k) % c->n;
            memmove(dst[e], src[e], (size_t) c->len[e]);
        }
        pthread_mutex_lock(&lock);
        return;
    }
    if (OP_KERNEL == o->kind) {
        if (0 == o->count) {
            return;
        }
        unsigned long long src[XCCL_GPU_MAX_SRCS];
        for (int k = 0; k < o->nsrc; k++) {
            src[k] = (unsigned long long) (uintptr_t) worker_addr((uintptr_t) o->srcs.p[k]);
        }
        char *dst = worker_addr((uintptr_t) o->dst);
        pthread_mutex_unlock(&lock);
        kernels[o->kernel].run(dst, src, o->nsrc, o->count);
        pthread_mutex_lock(&lock);
        return;
    }
    if (0 == o->width || 0 == o->height) {
        return;
    }
    char *dst = worker_addr((uintptr_t) o->dst);
    const char *src = o->staged ? o->staged : OP_COPY == o->kind ? worker_addr((uintptr_t) o->src) : NULL;
    pthread_mutex_unlock(&lock);
    for (size_t y = 0; y < o->height; y++) {
        if (OP_COPY == o->kind) {
            memmove(dst + y * o->dpitch, src + y * o->spitch, o->width);
        } else {
            memset(dst + y * o->dpitch, o->value, o->width);
        }
    }
    pthread_mutex_lock(&lock);
}

/* A stream's thread: its operations in order, each once what it depends
 * on has completed and its delay has passed. */
static void *stream_worker(void *arg)
{
    struct fake_stream *s = arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (NULL == s->head && !s->destroyed) {
            pthread_cond_wait(&progress, &lock);
        }
        op *o = s->head;
        if (NULL == o) {
            break;                      /* destroyed and drained */
        }
        while (!deps_met(o)) {
            pthread_cond_wait(&progress, &lock);
        }
        if (o->delay_ns) {
            pthread_mutex_unlock(&lock);
            sleep_ns(o->delay_ns);
            pthread_mutex_lock(&lock);
        }
        execute(o);
        s->head = o->next;
        if (NULL == s->head) {
            s->tail = NULL;
        }
        s->done++;
        free_op(o);
        pthread_cond_broadcast(&progress);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static struct fake_stream *new_stream(fcu_ctx ctx, unsigned flags, int legacy)
{
    struct fake_stream *s = calloc(1, sizeof(*s));
    pthread_t t;
    pthread_attr_t attr;
    if (NULL == s) {
        return NULL;
    }
    s->magic = STREAM_MAGIC;
    s->flags = flags;
    s->legacy = legacy;
    s->ctx = ctx;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, stream_worker, s);
    pthread_attr_destroy(&attr);
    if (0 != rc) {
        free(s);
        return NULL;
    }
    s->next = streams;
    streams = s;
    return s;
}

/* Until s has completed its first seq operations (lock held once). */
static void wait_for(struct fake_stream *s, unsigned long long seq)
{
    while (s->done < seq) {
        pthread_cond_wait(&progress, &lock);
    }
}

/* Everything queued so far, on streams of ctx (NULL: of every context). */
static void wait_all(fcu_ctx ctx)
{
    for (struct fake_stream *s = streams; s; s = s->next) {
        if (NULL == ctx || s->ctx == ctx) {
            wait_for(s, s->enqueued);
        }
    }
}

static int is_default_stream(fcu_stream s)
{
    return NULL == s || FCU_STREAM_LEGACY == s || FCU_STREAM_PER_THREAD == s;
}

static int valid_stream(fcu_stream s)
{
    for (struct fake_stream *t = streams; t; t = t->next) {
        if (t == s) {
            return STREAM_MAGIC == t->magic && !t->legacy && !t->destroyed;
        }
    }
    return 0;
}

/* The stream h names: a created one, or the current context's legacy
 * default stream for NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD (one
 * thread per process is the fake's use; the per-thread stream then orders
 * as the legacy one).  NULL with *err set when it is none. */
static struct fake_stream *resolve_stream(fcu_stream h, fcu_result *err)
{
    if (!is_default_stream(h)) {
        *err = valid_stream(h) ? FCU_SUCCESS : FCU_ERROR_INVALID_HANDLE;
        return *err ? NULL : h;
    }
    fcu_ctx c = current_ctx();
    if (NULL == c->legacy && NULL == (c->legacy = new_stream(c, 0, 1))) {
        *err = FCU_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    *err = FCU_SUCCESS;
    return c->legacy;
}

static int add_dep(op *o, struct fake_stream *s, unsigned long long seq)
{
    if (s->done >= seq) {
        return 0;
    }
    dep *d = realloc(o->deps, (size_t) (o->ndeps + 1) * sizeof(*d));
    if (NULL == d) {
        return -1;
    }
    o->deps = d;
    o->deps[o->ndeps++] = (dep) { s, seq };
    return 0;
}

/* Queues a copy of o on s, after what CUDA orders it after: the legacy
 * default stream waits for earlier work of every blocking stream of its
 * context, a blocking stream for earlier work of the legacy one.
 * wait_s/wait_seq: a further dependency (cuStreamWaitEvent), or NULL.
 * Returns the operation's sequence number on s (0: out of memory; o's
 * staged bytes then stay the caller's). */
static unsigned long long enqueue(struct fake_stream *s, const op *o, struct fake_stream *wait_s,
                                  unsigned long long wait_seq)
{
    op *q = malloc(sizeof(*q));
    if (NULL == q) {
        return 0;
    }
    *q = *o;
    q->next = NULL;
    q->ndeps = 0;
    q->deps = NULL;
    int bad = wait_s ? add_dep(q, wait_s, wait_seq) : 0;
    for (struct fake_stream *t = streams; t && !bad; t = t->next) {
        if (t != s && t->ctx == s->ctx && !(t->flags & FCU_STREAM_NON_BLOCKING) &&
            !(s->flags & FCU_STREAM_NON_BLOCKING) && (s->legacy || t->legacy)) {
            bad = add_dep(q, t, t->enqueued);
        }
    }
    if (bad) {
        free(q->deps);
        free(q);
        return 0;
    }
    q->delay_ns = draw_delay();
    if (s->tail) {
        s->tail->next = q;
    } else {
        s->head = q;
    }
    s->tail = q;
    pthread_cond_broadcast(&progress);
    return ++s->enqueued;
}

/* Where host memory at [a, a + n) is page-locked (cuMemHostAlloc,
 * cuMemHostRegister): the driver's DMA reaches it directly. */
static int is_pinned(uintptr_t a, size_t n)
{
    const region *r = find_region(a);
    return r && !is_device_kind(r) && a + n <= r->base + r->size;
}

/* Queues o on stream h (async) or on the legacy default stream (a call
 * without a stream argument); then returns when the driver would.
 *  - host side pageable, device side written: the source is taken now
 *    (the driver stages it), the copy runs later;
 *  - a call without a stream whose destination is host memory, or whose
 *    source is pinned host memory, returns once the copy is done; device
 *    to device copies and memsets of device memory return at once.
 * dst_dev/src_dev: whether each side is device memory. */
static fcu_result submit(op *o, fcu_stream h, int async, int dst_dev, int src_dev)
{
    fcu_result err;
    struct fake_stream *s = resolve_stream(async ? h : NULL, &err);
    if (NULL == s) {
        return err;
    }
    const size_t ext = o->height ? (o->height - 1) * o->spitch + o->width : 0;
    const int pageable_src = OP_COPY == o->kind && !src_dev && ext && !is_pinned((uintptr_t) o->src, ext);
    if (OP_COPY == o->kind && dst_dev != src_dev) {
        host_device_copies++;          /* fake_cuda_calls("host<->device copies") */
    }
    if (pageable_src && dst_dev) {
        if (NULL == (o->staged = malloc(ext))) {
            return FCU_ERROR_OUT_OF_MEMORY;
        }
        memcpy(o->staged, o->src, ext);
    }
    unsigned long long seq = enqueue(s, o, NULL, 0);
    if (0 == seq) {
        free(o->staged);
        return FCU_ERROR_OUT_OF_MEMORY;
    }
    if (!async && (!dst_dev || (OP_COPY == o->kind && !src_dev && !pageable_src))) {
        wait_for(s, seq);
    }
    return FCU_SUCCESS;
}

/* One side of a copy: start address, extent in bytes, memory type.  Device
 * sides must lie inside one device allocation or pinned host memory; host
 * sides must not touch device memory.  *dev: the side is device memory. */
static fcu_result check_side(int type, uintptr_t a, size_t extent, int *dev)
{
    region *r = find_region(a);
    *dev = is_device_kind(r);
    if (0 == extent) {
        return FCU_SUCCESS;
    }
    if (0 == a || a + extent < a) {
        return FCU_ERROR_INVALID_VALUE;
    }
    switch (type) {
    case FCU_MT_HOST:
        *dev = 0;
        return overlapping_device(a, extent) ? FCU_ERROR_INVALID_VALUE : FCU_SUCCESS;
    case FCU_MT_DEVICE:
        if (NULL == r || a + extent > r->base + r->size) {
            return FCU_ERROR_INVALID_VALUE;
        }
        return FCU_SUCCESS;
    case FCU_MT_UNIFIED:
        if (is_device_kind(r)) {
            return a + extent > r->base + r->size ? FCU_ERROR_INVALID_VALUE : FCU_SUCCESS;
        }
        return overlapping_device(a, extent) ? FCU_ERROR_INVALID_VALUE : FCU_SUCCESS;
    case FCU_MT_ARRAY:
        return FCU_ERROR_NOT_SUPPORTED;
    default:
        return FCU_ERROR_INVALID_VALUE;
    }
}

static fcu_result copy2d(const fcu_memcpy2d *c, fcu_stream s, int async)
{
    fcu_result r = need_ctx();
    if (r) {
        return r;
    }
    if (NULL == c) {
        return FCU_ERROR_INVALID_VALUE;
    }
    if (c->Height > 1 && (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes)) {
        return FCU_ERROR_INVALID_VALUE;
    }
    uintptr_t sb = FCU_MT_HOST == c->srcMemoryType ? (uintptr_t) c->srcHost : (uintptr_t) c->srcDevice;
    uintptr_t db = FCU_MT_HOST == c->dstMemoryType ? (uintptr_t) c->dstHost : (uintptr_t) c->dstDevice;
    size_t spitch = c->Height > 1 ? c->srcPitch : c->WidthInBytes;
    size_t dpitch = c->Height > 1 ? c->dstPitch : c->WidthInBytes;
    uintptr_t sa = sb + c->srcY * spitch + c->srcXInBytes;
    uintptr_t da = db + c->dstY * dpitch + c->dstXInBytes;
    size_t sext = 0, dext = 0;
    int sdev, ddev;
    if (c->WidthInBytes && c->Height) {
        sext = (c->Height - 1) * spitch + c->WidthInBytes;
        dext = (c->Height - 1) * dpitch + c->WidthInBytes;
    }
    if ((r = check_side(c->srcMemoryType, sa, sext, &sdev)) ||
        (r = check_side(c->dstMemoryType, da, dext, &ddev))) {
        return r;
    }
    op o = { .kind = OP_COPY, .dst = (char *) da, .src = (const char *) sa,
             .width = c->WidthInBytes, .height = c->Height, .dpitch = dpitch, .spitch = spitch };
    if (0 == sext) {
        o.height = 0;
    }
    return submit(&o, s, async, ddev, sdev);
}

static fcu_result copy1d(int dtype, uintptr_t dst, int stype, uintptr_t src, size_t n,
                         fcu_stream s, int async)
{
    fcu_memcpy2d c;
    memset(&c, 0, sizeof(c));
    c.srcMemoryType = stype;
    c.srcHost = (const void *) src;
    c.srcDevice = src;
    c.dstMemoryType = dtype;
    c.dstHost = (void *) dst;
    c.dstDevice = dst;
    c.WidthInBytes = n;
    c.Height = 1;
    return copy2d(&c, s, async);
}

static fcu_result memset_d8(fcu_dptr dst, unsigned char v, size_t n, fcu_stream s, int async)
{
    int dev;
    fcu_result r = need_ctx();
    if (r || (r = check_side(FCU_MT_DEVICE, (uintptr_t) dst, n, &dev))) {
        return r;
    }
    op o = { .kind = OP_MEMSET, .dst = (char *) (uintptr_t) dst, .width = n,
             .height = n ? 1 : 0, .dpitch = n, .value = v };
    return submit(&o, s, async, dev, 0);
}

/* ------------------------------------------------------------ init, devices */
fcu_result cuInit(unsigned int Flags);
fcu_result cuInit(unsigned int Flags)
{
    ENTER();
    if (Flags != 0) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (!initialized) {
        const char *e = getenv("FAKE_CUDA_DEVICES");
        if (e && *e) {
            ndevices = atoi(e);
            ndevices = ndevices < 0 ? 0 : ndevices > MAX_DEVICES ? MAX_DEVICES : ndevices;
        }
        for (int i = 0; i < MAX_DEVICES; i++) {
            contexts[i].magic = CTX_MAGIC;
            contexts[i].device = i;
            contexts[i].refs = 0;
        }
        initialized = 1;
    }
    RET(FCU_SUCCESS);
}

fcu_result cuDriverGetVersion(int *driverVersion);
fcu_result cuDriverGetVersion(int *driverVersion)
{
    ENTER();
    if (NULL == driverVersion) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    *driverVersion = driver_version;
    RET(FCU_SUCCESS);
}

fcu_result cuDeviceGetCount(int *count);
fcu_result cuDeviceGetCount(int *count)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (NULL == count) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    *count = ndevices;
    RET(FCU_SUCCESS);
}

fcu_result cuDeviceGet(fcu_device *device, int ordinal);
fcu_result cuDeviceGet(fcu_device *device, int ordinal)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (NULL == device) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (0 == ndevices) {
        RET(FCU_ERROR_NO_DEVICE);
    }
    if (ordinal < 0 || ordinal >= ndevices) {
        RET(FCU_ERROR_INVALID_DEVICE);
    }
    *device = ordinal;
    RET(FCU_SUCCESS);
}

/* A few attributes, for callers that want them (not in the required set). */
fcu_result cuDeviceGetAttribute(int *pi, int attrib, fcu_device dev);
fcu_result cuDeviceGetAttribute(int *pi, int attrib, fcu_device dev)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (dev < 0 || dev >= ndevices) {
        RET(FCU_ERROR_INVALID_DEVICE);
    }
    if (NULL == pi) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    switch (attrib) {
    case FCU_DA_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case FCU_DA_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 48 * 1024; break;
    case FCU_DA_WARP_SIZE: *pi = 32; break;
    case FCU_DA_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case 33: *pi = 0x10 + dev; break;   /* PCI_BUS_ID */
    case 34: *pi = 0; break;            /* PCI_DEVICE_ID */
    case 41: *pi = 1; break;            /* UNIFIED_ADDRESSING */
    case 50: *pi = 0; break;            /* PCI_DOMAIN_ID */
    case 75: *pi = 9; break;            /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *pi = 0; break;            /* COMPUTE_CAPABILITY_MINOR */
    default: *pi = 0; break;
    }
    RET(FCU_SUCCESS);
}

fcu_result cuDeviceGetName(char *name, int len, fcu_device dev);
fcu_result cuDeviceGetName(char *name, int len, fcu_device dev)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (dev < 0 || dev >= ndevices) {
        RET(FCU_ERROR_INVALID_DEVICE);
    }
    if (NULL == name || len <= 0) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    snprintf(name, (size_t) len, "fake_cuda device %d", dev);
    RET(FCU_SUCCESS);
}

fcu_result cuDeviceGetPCIBusId(char *pciBusId, int len, fcu_device dev);
fcu_result cuDeviceGetPCIBusId(char *pciBusId, int len, fcu_device dev)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (dev < 0 || dev >= ndevices) {
        RET(FCU_ERROR_INVALID_DEVICE);
    }
    if (NULL == pciBusId || len <= 0) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    snprintf(pciBusId, (size_t) len, "0000:%02x:00.0", 0x10 + dev);
    RET(FCU_SUCCESS);
}

/* ------------------------------------------------------------ contexts */
fcu_result cuDevicePrimaryCtxRetain(fcu_ctx *pctx, fcu_device dev);
fcu_result cuDevicePrimaryCtxRetain(fcu_ctx *pctx, fcu_device dev)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (NULL == pctx) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (dev < 0 || dev >= ndevices) {
        RET(FCU_ERROR_INVALID_DEVICE);
    }
    if (0 == contexts[dev].refs++) {
        contexts[dev].id = next_ctx_id++;    /* a new context behind the same handle */
    }
    *pctx = &contexts[dev];
    RET(FCU_SUCCESS);
}

fcu_result cuDevicePrimaryCtxRelease_v2(fcu_device dev);
fcu_result cuDevicePrimaryCtxRelease_v2(fcu_device dev)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (dev < 0 || dev >= ndevices) {
        RET(FCU_ERROR_INVALID_DEVICE);
    }
    if (contexts[dev].refs <= 0) {
        RET(FCU_ERROR_INVALID_CONTEXT);
    }
    if (0 == --contexts[dev].refs) {
        wait_all(&contexts[dev]);   /* the context is gone: its work has finished */
        for (struct fake_module *m = modules; m; m = m->next) {
            if (m->ctx == &contexts[dev]) {
                m->dead = 1;           /* and its modules with it */
            }
        }
    }
    RET(FCU_SUCCESS);
}

fcu_result cuCtxGetCurrent(fcu_ctx *pctx);
fcu_result cuCtxGetCurrent(fcu_ctx *pctx)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (NULL == pctx) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    *pctx = current_ctx();
    RET(FCU_SUCCESS);
}

fcu_result cuCtxSetCurrent(fcu_ctx ctx);
fcu_result cuCtxSetCurrent(fcu_ctx ctx)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (NULL == ctx) {              /* pops the top, if any */
        if (ctx_depth > 0) {
            ctx_depth--;
        }
        RET(FCU_SUCCESS);
    }
    if (!valid_ctx(ctx) || ctx->refs <= 0) {
        RET(FCU_ERROR_INVALID_CONTEXT);
    }
    if (0 == ctx_depth) {
        ctx_depth = 1;
    }
    ctx_stack[ctx_depth - 1] = ctx;
    RET(FCU_SUCCESS);
}

fcu_result cuCtxPushCurrent_v2(fcu_ctx ctx);
fcu_result cuCtxPushCurrent_v2(fcu_ctx ctx)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (!valid_ctx(ctx) || ctx->refs <= 0) {
        RET(FCU_ERROR_INVALID_CONTEXT);
    }
    if (ctx_depth >= MAX_CTX_STACK) {
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    ctx_stack[ctx_depth++] = ctx;
    RET(FCU_SUCCESS);
}

fcu_result cuCtxPopCurrent_v2(fcu_ctx *pctx);
fcu_result cuCtxPopCurrent_v2(fcu_ctx *pctx)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (0 == ctx_depth) {
        RET(FCU_ERROR_INVALID_CONTEXT);
    }
    fcu_ctx c = ctx_stack[--ctx_depth];
    if (pctx) {
        *pctx = c;
    }
    RET(FCU_SUCCESS);
}

fcu_result cuCtxGetDevice(fcu_device *device);
fcu_result cuCtxGetDevice(fcu_device *device)
{
    ENTER();
    fcu_result r = need_ctx();
    if (r) {
        RET(r);
    }
    if (NULL == device) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    *device = current_ctx()->device;
    RET(FCU_SUCCESS);
}

fcu_result cuCtxSynchronize(void);
fcu_result cuCtxSynchronize(void)
{
    ENTER();
    fcu_result r = need_ctx();
    if (r) {
        RET(r);
    }
    wait_all(current_ctx());
    RET(FCU_SUCCESS);
}

/* Not in the required set (CUDA 12.0): a context's unique id, new each time
 * a primary context is created again behind the same handle.  NULL: the
 * current context.  FAKE_CUDA_VERSION below 12000: CUDA_ERROR_NOT_SUPPORTED
 * (the symbol cannot be hidden; a caller treating it as optional is then
 * exercised without it). */
fcu_result cuCtxGetId(fcu_ctx ctx, unsigned long long *ctxId);
fcu_result cuCtxGetId(fcu_ctx ctx, unsigned long long *ctxId)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (driver_version < 12000) {
        RET(FCU_ERROR_NOT_SUPPORTED);
    }
    if (NULL == ctx) {
        ctx = current_ctx();
    }
    if (NULL == ctx || !valid_ctx(ctx) || ctx->refs <= 0) {
        RET(FCU_ERROR_INVALID_CONTEXT);
    }
    if (NULL == ctxId) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    *ctxId = ctx->id;
    RET(FCU_SUCCESS);
}

/* ------------------------------------------------------------ errors */
fcu_result cuGetErrorString(fcu_result error, const char **pStr);
fcu_result cuGetErrorString(fcu_result error, const char **pStr)
{
    ENTER();
    if (NULL == pStr) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++) {
        if (error_table[i].code == error) {
            *pStr = error_table[i].text;
            RET(FCU_SUCCESS);
        }
    }
    *pStr = NULL;
    RET(FCU_ERROR_INVALID_VALUE);
}

fcu_result cuGetErrorName(fcu_result error, const char **pStr);
fcu_result cuGetErrorName(fcu_result error, const char **pStr)
{
    ENTER();
    if (NULL == pStr) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    *pStr = error_name(error);
    RET(*pStr ? FCU_SUCCESS : FCU_ERROR_INVALID_VALUE);
}

/* ------------------------------------------------------------ pointer attributes */
/* Writes one attribute of ptr (in region r, or NULL: unknown) to data.
 * Returns FCU_ERROR_INVALID_VALUE for an attribute not known here, and
 * for values the singular call must refuse (strict). */
static fcu_result get_attribute(void *data, fcu_pattr attr, uintptr_t ptr, const region *r, int strict)
{
    int dev = r && valid_ctx(r->ctx) ? r->ctx->device : 0;
    int device = is_device_kind(r);
    switch (attr) {
    case FCU_PA_CONTEXT:
        *(fcu_ctx *) data = r ? r->ctx : NULL;
        break;
    case FCU_PA_MEMORY_TYPE:
        *(unsigned int *) data = r ? (device ? FCU_MT_DEVICE : FCU_MT_HOST) : 0;
        break;
    case FCU_PA_DEVICE_POINTER:
        *(fcu_dptr *) data = r ? ptr : 0;
        break;
    case FCU_PA_HOST_POINTER:
        if (strict && device) {
            return FCU_ERROR_INVALID_VALUE;
        }
        *(void **) data = r && !device ? (void *) ptr : NULL;
        break;
    case FCU_PA_SYNC_MEMOPS:
        *(unsigned int *) data = 0;
        break;
    case FCU_PA_BUFFER_ID:
        *(unsigned long long *) data = r ? r->id : 0;
        break;
    case FCU_PA_IS_MANAGED:
        *(unsigned int *) data = 0;
        break;
    case FCU_PA_DEVICE_ORDINAL:
        *(int *) data = r ? dev : -2;
        break;
    case FCU_PA_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(unsigned int *) data = r && R_DEVICE == r->kind;
        break;
    case FCU_PA_RANGE_START_ADDR:
        *(fcu_dptr *) data = r ? r->base : 0;
        break;
    case FCU_PA_RANGE_SIZE:
        *(size_t *) data = r ? r->size : 0;
        break;
    case FCU_PA_MAPPED:
        *(unsigned int *) data = r != NULL;
        break;
    default:
        return FCU_ERROR_INVALID_VALUE;
    }
    return FCU_SUCCESS;
}

fcu_result cuPointerGetAttribute(void *data, fcu_pattr attribute, fcu_dptr ptr);
fcu_result cuPointerGetAttribute(void *data, fcu_pattr attribute, fcu_dptr ptr)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (NULL == data) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    region *r = find_region((uintptr_t) ptr);
    if (NULL == r) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    RET(get_attribute(data, attribute, (uintptr_t) ptr, r, 1));
}

fcu_result cuPointerGetAttributes(unsigned int numAttributes, fcu_pattr *attributes, void **data,
                                  fcu_dptr ptr);
fcu_result cuPointerGetAttributes(unsigned int numAttributes, fcu_pattr *attributes, void **data,
                                  fcu_dptr ptr)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (0 == numAttributes || NULL == attributes || NULL == data) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    region *r = find_region((uintptr_t) ptr);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (NULL == data[i]) {
            RET(FCU_ERROR_INVALID_VALUE);
        }
        fcu_result e = get_attribute(data[i], attributes[i], (uintptr_t) ptr, r, 0);
        if (e) {
            RET(e);
        }
    }
    RET(FCU_SUCCESS);
}

/* ------------------------------------------------------------ memory */
static region *new_region(int kind, uintptr_t base, size_t size, size_t maplen, int fd)
{
    region *r = calloc(1, sizeof(*r));
    if (NULL == r) {
        return NULL;
    }
    r->kind = kind;
    r->base = base;
    r->size = size;
    r->maplen = maplen;
    r->fd = fd;
    r->refs = 1;
    r->ctx = current_ctx();
    r->id = next_buffer_id++;
    r->next = regions;
    regions = r;
    return r;
}

fcu_result cuMemAlloc_v2(fcu_dptr *dptr, size_t bytesize);
fcu_result cuMemAlloc_v2(fcu_dptr *dptr, size_t bytesize)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (NULL == dptr || 0 == bytesize) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    size_t maplen = round_page(bytesize);
    char name[64];
    snprintf(name, sizeof(name), "fake_cuda_%d_%llu", (int) getpid(), next_buffer_id);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    if (0 != ftruncate(fd, (off_t) maplen)) {
        close(fd);
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    void *p = mmap(NULL, maplen, host_access ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_SHARED,
                   fd, 0);
    void *view = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    region *r = MAP_FAILED == p || MAP_FAILED == view
                    ? NULL : new_region(R_DEVICE, (uintptr_t) p, bytesize, maplen, fd);
    if (NULL == r) {
        if (MAP_FAILED != p) {
            munmap(p, maplen);
        }
        if (MAP_FAILED != view) {
            munmap(view, maplen);
        }
        close(fd);
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    r->view = view;
    *dptr = (fcu_dptr) (uintptr_t) p;
    RET(FCU_SUCCESS);
}

fcu_result cuMemAllocManaged(fcu_dptr *dptr, size_t bytesize, unsigned int flags);
fcu_result cuMemAllocManaged(fcu_dptr *dptr, size_t bytesize, unsigned int flags)
{
    ENTER();
    (void) dptr, (void) bytesize, (void) flags;
    fcu_result e = need_ctx();
    RET(e ? e : FCU_ERROR_NOT_SUPPORTED);
}

fcu_result cuMemFree_v2(fcu_dptr dptr);
fcu_result cuMemFree_v2(fcu_dptr dptr)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    region *r = find_region((uintptr_t) dptr);
    if (NULL == r || R_DEVICE != r->kind || r->base != (uintptr_t) dptr) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    wait_all(NULL);            /* cuMemFree synchronizes */
    unlink_region(r);
    munmap((void *) r->base, r->maplen);
    munmap(r->view, r->maplen);
    close(r->fd);
    free(r);
    RET(FCU_SUCCESS);
}

fcu_result cuMemGetAddressRange_v2(fcu_dptr *pbase, size_t *psize, fcu_dptr dptr);
fcu_result cuMemGetAddressRange_v2(fcu_dptr *pbase, size_t *psize, fcu_dptr dptr)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    region *r = find_region((uintptr_t) dptr);
    if (!is_device_kind(r)) {
        RET(FCU_ERROR_NOT_FOUND);
    }
    if (pbase) {
        *pbase = r->base;
    }
    if (psize) {
        *psize = r->size;
    }
    RET(FCU_SUCCESS);
}

fcu_result cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
fcu_result cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (NULL == pp || 0 == bytesize || (Flags & ~7u)) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    size_t maplen = round_page(bytesize);
    void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (MAP_FAILED == p) {
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    if (NULL == new_region(R_HOST_ALLOC, (uintptr_t) p, bytesize, maplen, -1)) {
        munmap(p, maplen);
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    *pp = p;
    RET(FCU_SUCCESS);
}

fcu_result cuMemFreeHost(void *p);
fcu_result cuMemFreeHost(void *p)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    region *r = find_region((uintptr_t) p);
    if (NULL == r || R_HOST_ALLOC != r->kind || r->base != (uintptr_t) p) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    wait_all(NULL);
    unlink_region(r);
    munmap(p, r->maplen);
    free(r);
    RET(FCU_SUCCESS);
}

fcu_result cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags);
fcu_result cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (NULL == p || 0 == bytesize || (Flags & ~15u) || (uintptr_t) p + bytesize < (uintptr_t) p) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (overlapping_device((uintptr_t) p, bytesize)) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (overlapping_host((uintptr_t) p, bytesize)) {
        RET(FCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    }
    if (NULL == new_region(R_HOST_REGISTER, (uintptr_t) p, bytesize, bytesize, -1)) {
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    RET(FCU_SUCCESS);
}

fcu_result cuMemHostUnregister(void *p);
fcu_result cuMemHostUnregister(void *p)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    region *r = find_region((uintptr_t) p);
    if (NULL == r || R_HOST_REGISTER != r->kind || r->base != (uintptr_t) p) {
        RET(FCU_ERROR_HOST_MEMORY_NOT_REGISTERED);
    }
    wait_all(NULL);
    unlink_region(r);
    free(r);
    RET(FCU_SUCCESS);
}

/* ------------------------------------------------------------ copies */
fcu_result cuMemcpy(fcu_dptr dst, fcu_dptr src, size_t ByteCount);
fcu_result cuMemcpy(fcu_dptr dst, fcu_dptr src, size_t ByteCount)
{
    ENTER();
    RET(copy1d(FCU_MT_UNIFIED, dst, FCU_MT_UNIFIED, src, ByteCount, NULL, 0));
}

fcu_result cuMemcpyAsync(fcu_dptr dst, fcu_dptr src, size_t ByteCount, fcu_stream hStream);
fcu_result cuMemcpyAsync(fcu_dptr dst, fcu_dptr src, size_t ByteCount, fcu_stream hStream)
{
    ENTER();
    RET(copy1d(FCU_MT_UNIFIED, dst, FCU_MT_UNIFIED, src, ByteCount, hStream, 1));
}

fcu_result cuMemcpyHtoD_v2(fcu_dptr dstDevice, const void *srcHost, size_t ByteCount);
fcu_result cuMemcpyHtoD_v2(fcu_dptr dstDevice, const void *srcHost, size_t ByteCount)
{
    ENTER();
    RET(copy1d(FCU_MT_DEVICE, dstDevice, FCU_MT_HOST, (uintptr_t) srcHost, ByteCount, NULL, 0));
}

fcu_result cuMemcpyDtoH_v2(void *dstHost, fcu_dptr srcDevice, size_t ByteCount);
fcu_result cuMemcpyDtoH_v2(void *dstHost, fcu_dptr srcDevice, size_t ByteCount)
{
    ENTER();
    RET(copy1d(FCU_MT_HOST, (uintptr_t) dstHost, FCU_MT_DEVICE, srcDevice, ByteCount, NULL, 0));
}

fcu_result cuMemcpyDtoD_v2(fcu_dptr dstDevice, fcu_dptr srcDevice, size_t ByteCount);
fcu_result cuMemcpyDtoD_v2(fcu_dptr dstDevice, fcu_dptr srcDevice, size_t ByteCount)
{
    ENTER();
    RET(copy1d(FCU_MT_DEVICE, dstDevice, FCU_MT_DEVICE, srcDevice, ByteCount, NULL, 0));
}

fcu_result cuMemcpyHtoDAsync_v2(fcu_dptr dstDevice, const void *srcHost, size_t ByteCount,
                                fcu_stream hStream);
fcu_result cuMemcpyHtoDAsync_v2(fcu_dptr dstDevice, const void *srcHost, size_t ByteCount,
                                fcu_stream hStream)
{
    ENTER();
    RET(copy1d(FCU_MT_DEVICE, dstDevice, FCU_MT_HOST, (uintptr_t) srcHost, ByteCount, hStream, 1));
}

fcu_result cuMemcpyDtoHAsync_v2(void *dstHost, fcu_dptr srcDevice, size_t ByteCount,
                                fcu_stream hStream);
fcu_result cuMemcpyDtoHAsync_v2(void *dstHost, fcu_dptr srcDevice, size_t ByteCount,
                                fcu_stream hStream)
{
    ENTER();
    RET(copy1d(FCU_MT_HOST, (uintptr_t) dstHost, FCU_MT_DEVICE, srcDevice, ByteCount, hStream, 1));
}

fcu_result cuMemcpyDtoDAsync_v2(fcu_dptr dstDevice, fcu_dptr srcDevice, size_t ByteCount,
                                fcu_stream hStream);
fcu_result cuMemcpyDtoDAsync_v2(fcu_dptr dstDevice, fcu_dptr srcDevice, size_t ByteCount,
                                fcu_stream hStream)
{
    ENTER();
    RET(copy1d(FCU_MT_DEVICE, dstDevice, FCU_MT_DEVICE, srcDevice, ByteCount, hStream, 1));
}

fcu_result cuMemcpy2D_v2(const fcu_memcpy2d *pCopy);
fcu_result cuMemcpy2D_v2(const fcu_memcpy2d *pCopy)
{
    ENTER();
    RET(copy2d(pCopy, NULL, 0));
}

fcu_result cuMemcpy2DAsync_v2(const fcu_memcpy2d *pCopy, fcu_stream hStream);
fcu_result cuMemcpy2DAsync_v2(const fcu_memcpy2d *pCopy, fcu_stream hStream)
{
    ENTER();
    RET(copy2d(pCopy, hStream, 1));
}

fcu_result cuMemsetD8_v2(fcu_dptr dstDevice, unsigned char uc, size_t N);
fcu_result cuMemsetD8_v2(fcu_dptr dstDevice, unsigned char uc, size_t N)
{
    ENTER();
    RET(memset_d8(dstDevice, uc, N, NULL, 0));
}

fcu_result cuMemsetD8Async(fcu_dptr dstDevice, unsigned char uc, size_t N, fcu_stream hStream);
fcu_result cuMemsetD8Async(fcu_dptr dstDevice, unsigned char uc, size_t N, fcu_stream hStream)
{
    ENTER();
    RET(memset_d8(dstDevice, uc, N, hStream, 1));
}

/* ------------------------------------------------------------ streams */
fcu_result cuStreamCreate(fcu_stream *phStream, unsigned int Flags);
fcu_result cuStreamCreate(fcu_stream *phStream, unsigned int Flags)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (NULL == phStream || Flags > FCU_STREAM_NON_BLOCKING) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    struct fake_stream *s = new_stream(current_ctx(), Flags, 0);
    if (NULL == s) {
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    *phStream = s;
    RET(FCU_SUCCESS);
}

/* As the driver: returns at once; queued work still runs, then the
 * stream's thread ends. */
fcu_result cuStreamDestroy_v2(fcu_stream hStream);
fcu_result cuStreamDestroy_v2(fcu_stream hStream)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (!valid_stream(hStream)) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    hStream->destroyed = 1;
    pthread_cond_broadcast(&progress);
    RET(FCU_SUCCESS);
}

fcu_result cuStreamSynchronize(fcu_stream hStream);
fcu_result cuStreamSynchronize(fcu_stream hStream)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    struct fake_stream *s = resolve_stream(hStream, &e);
    if (NULL == s) {
        RET(e);
    }
    wait_for(s, s->enqueued);
    RET(FCU_SUCCESS);
}

fcu_result cuStreamQuery(fcu_stream hStream);
fcu_result cuStreamQuery(fcu_stream hStream)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    struct fake_stream *s = resolve_stream(hStream, &e);
    if (NULL == s) {
        RET(e);
    }
    RET(s->done < s->enqueued ? FCU_ERROR_NOT_READY : FCU_SUCCESS);
}

/* ------------------------------------------------------------ stream memory operations */
/* cuStreamWaitValue32 / cuStreamWriteValue32 (and their _v2 names, which
 * CUDA 12's cuda.h maps them to): an operation of the stream like any
 * other (late, in its stream's order).  The word must lie in device memory
 * (an allocation or an IPC mapping: a peer process writes it) or in
 * page-locked host memory, 4-byte aligned.  A wait holds its stream (and
 * whatever waits for the stream) until the condition holds, polled while
 * it runs; a write is a release store after the stream's earlier work. */
static fcu_result value_op(fcu_stream h, fcu_dptr addr, unsigned value, unsigned flags, int kind)
{
    fcu_result e = need_ctx();
    if (e) {
        return e;
    }
    const region *r = find_region((uintptr_t) addr);
    const unsigned known = OP_WAIT_VALUE == kind ? 0xfu | (1u << 30) : 1u;
    if (0 != (addr & 3) || NULL == r || (uintptr_t) addr + 4 > r->base + r->size ||
        (flags & ~known) || (OP_WAIT_VALUE == kind && (flags & 0xf) > 3)) {
        return FCU_ERROR_INVALID_VALUE;
    }
    struct fake_stream *s = resolve_stream(h, &e);
    if (NULL == s) {
        return e;
    }
    op o = { .kind = kind, .dst = (char *) (uintptr_t) addr, .value32 = value, .flags32 = flags };
    return enqueue(s, &o, NULL, 0) ? FCU_SUCCESS : FCU_ERROR_OUT_OF_MEMORY;
}

fcu_result cuStreamWaitValue32_v2(fcu_stream stream, fcu_dptr addr, unsigned value, unsigned flags);
fcu_result cuStreamWaitValue32_v2(fcu_stream stream, fcu_dptr addr, unsigned value, unsigned flags)
{
    ENTER();
    RET(value_op(stream, addr, value, flags, OP_WAIT_VALUE));
}

fcu_result cuStreamWriteValue32_v2(fcu_stream stream, fcu_dptr addr, unsigned value, unsigned flags);
fcu_result cuStreamWriteValue32_v2(fcu_stream stream, fcu_dptr addr, unsigned value, unsigned flags)
{
    ENTER();
    RET(value_op(stream, addr, value, flags, OP_WRITE_VALUE));
}

/* The unversioned names (before CUDA 12's cuda.h mapped them to _v2). */
fcu_result cuStreamWaitValue32(fcu_stream stream, fcu_dptr addr, unsigned value, unsigned flags)
    __attribute__((alias("cuStreamWaitValue32_v2")));
fcu_result cuStreamWriteValue32(fcu_stream stream, fcu_dptr addr, unsigned value, unsigned flags)
    __attribute__((alias("cuStreamWriteValue32_v2")));

/* ------------------------------------------------------------ events */
static int valid_event(fcu_event e)
{
    for (struct fake_event *t = events; t; t = t->next) {
        if (t == e) {
            return EVENT_MAGIC == t->magic;
        }
    }
    return 0;
}

static int event_done(fcu_event e)
{
    if (e->opened) {
        const unsigned want = __atomic_load_n(&e->ipc->recorded, __ATOMIC_ACQUIRE);
        return (int) (__atomic_load_n(&e->ipc->completed, __ATOMIC_ACQUIRE) - want) >= 0;
    }
    return NULL == e->stream || e->stream->done >= e->seq;
}

/* Not in the required set: later work on hStream waits for hEvent. */
fcu_result cuStreamWaitEvent(fcu_stream hStream, fcu_event hEvent, unsigned int Flags);
fcu_result cuStreamWaitEvent(fcu_stream hStream, fcu_event hEvent, unsigned int Flags)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (!valid_event(hEvent) || Flags > 1) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    struct fake_stream *s = resolve_stream(hStream, &e);
    if (NULL == s) {
        RET(e);
    }
    if (event_done(hEvent)) {
        RET(FCU_SUCCESS);
    }
    if (hEvent->opened) {
        /* another process's record, the latest one issued now: its
         * stream's progress is seen through the shared words, polled */
        op w = { .kind = OP_WAIT_VALUE, .dst = (char *) &hEvent->ipc->completed,
                 .value32 = __atomic_load_n(&hEvent->ipc->recorded, __ATOMIC_ACQUIRE) };
        RET(enqueue(s, &w, NULL, 0) ? FCU_SUCCESS : FCU_ERROR_OUT_OF_MEMORY);
    }
    op o = { .kind = OP_MARKER };
    RET(enqueue(s, &o, hEvent->stream, hEvent->seq) ? FCU_SUCCESS : FCU_ERROR_OUT_OF_MEMORY);
}

fcu_result cuEventCreate(fcu_event *phEvent, unsigned int Flags);
fcu_result cuEventCreate(fcu_event *phEvent, unsigned int Flags)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (NULL == phEvent || Flags > 7 ||
        ((Flags & FCU_EVENT_INTERPROCESS) && !(Flags & FCU_EVENT_DISABLE_TIMING))) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    struct fake_event *ev = calloc(1, sizeof(*ev));
    if (NULL == ev) {
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    ev->ipc_fd = -1;
    if (Flags & FCU_EVENT_INTERPROCESS) {
        static unsigned long long n;
        char name[64];
        snprintf(name, sizeof(name), "fake_cuda_ev_%d_%llu", (int) getpid(), ++n);
        ev->ipc_fd = memfd_create(name, 0);
        void *p = ev->ipc_fd < 0 || 0 != ftruncate(ev->ipc_fd, (off_t) page_size)
                      ? MAP_FAILED
                      : mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_SHARED, ev->ipc_fd, 0);
        if (MAP_FAILED == p) {
            if (ev->ipc_fd >= 0) {
                close(ev->ipc_fd);
            }
            free(ev);
            RET(FCU_ERROR_OUT_OF_MEMORY);
        }
        ev->ipc = p;
    }
    ev->magic = EVENT_MAGIC;
    ev->flags = Flags;
    ev->next = events;
    events = ev;
    *phEvent = ev;
    RET(FCU_SUCCESS);
}

/* The event completes when a marker queued on the stream now has run (on
 * the legacy default stream: after the blocking streams' earlier work). */
fcu_result cuEventRecord(fcu_event hEvent, fcu_stream hStream);
fcu_result cuEventRecord(fcu_event hEvent, fcu_stream hStream)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (!valid_event(hEvent) || hEvent->opened) {
        RET(FCU_ERROR_INVALID_HANDLE);   /* (the fake records only the exporter's) */
    }
    struct fake_stream *s = resolve_stream(hStream, &e);
    if (NULL == s) {
        RET(e);
    }
    op o = { .kind = OP_MARKER };
    if (hEvent->ipc) {
        /* issued now, passed when the stream gets there */
        const unsigned n = __atomic_load_n(&hEvent->ipc->recorded, __ATOMIC_RELAXED) + 1;
        o = (op) { .kind = OP_WRITE_VALUE, .dst = (char *) &hEvent->ipc->completed, .value32 = n };
        __atomic_store_n(&hEvent->ipc->recorded, n, __ATOMIC_RELEASE);
    }
    unsigned long long seq = enqueue(s, &o, NULL, 0);
    if (0 == seq) {
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    hEvent->stream = s;
    hEvent->seq = seq;
    RET(FCU_SUCCESS);
}

fcu_result cuEventQuery(fcu_event hEvent);
fcu_result cuEventQuery(fcu_event hEvent)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (!valid_event(hEvent)) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    RET(event_done(hEvent) ? FCU_SUCCESS : FCU_ERROR_NOT_READY);
}

fcu_result cuEventSynchronize(fcu_event hEvent);
fcu_result cuEventSynchronize(fcu_event hEvent)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (!valid_event(hEvent)) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    while (hEvent->opened && !event_done(hEvent)) {
        pthread_mutex_unlock(&lock);
        sleep_ns(20000);
        pthread_mutex_lock(&lock);
    }
    if (hEvent->stream) {
        wait_for(hEvent->stream, hEvent->seq);
    }
    RET(FCU_SUCCESS);
}

fcu_result cuEventDestroy_v2(fcu_event hEvent);
fcu_result cuEventDestroy_v2(fcu_event hEvent)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    if (!valid_event(hEvent)) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    for (struct fake_event **pp = &events; *pp; pp = &(*pp)->next) {
        if (*pp == hEvent) {
            *pp = hEvent->next;
            break;
        }
    }
    hEvent->magic = 0;
    if (hEvent->ipc) {
        munmap(hEvent->ipc, page_size);
    }
    if (hEvent->ipc_fd >= 0) {
        close(hEvent->ipc_fd);
    }
    free(hEvent);
    RET(FCU_SUCCESS);
}

/* Interprocess events: the handle names the exporter's memfd of shared
 * words; the opener maps it (through /proc/<pid>/fd, as memory handles). */
typedef struct {
    unsigned magic;
    int pid, fd;
} ipc_event_payload;
#define IPC_EVENT_MAGIC 0x45435046u

fcu_result cuIpcGetEventHandle(fcu_ipc_event_handle *pHandle, fcu_event event);
fcu_result cuIpcGetEventHandle(fcu_ipc_event_handle *pHandle, fcu_event event)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (NULL == pHandle || !valid_event(event) || event->opened || NULL == event->ipc) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    ipc_event_payload pl = { IPC_EVENT_MAGIC, (int) getpid(), event->ipc_fd };
    memset(pHandle, 0, sizeof(*pHandle));
    memcpy(pHandle->reserved, &pl, sizeof(pl));
    RET(FCU_SUCCESS);
}

fcu_result cuIpcOpenEventHandle(fcu_event *phEvent, fcu_ipc_event_handle handle);
fcu_result cuIpcOpenEventHandle(fcu_event *phEvent, fcu_ipc_event_handle handle)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    ipc_event_payload pl;
    memcpy(&pl, handle.reserved, sizeof(pl));
    if (NULL == phEvent || IPC_EVENT_MAGIC != pl.magic) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (pl.pid == (int) getpid()) {
        RET(FCU_ERROR_INVALID_CONTEXT);   /* as the driver: not in the exporting process */
    }
    char path[64], link[256], want[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pl.pid, pl.fd);
    snprintf(want, sizeof(want), "/memfd:fake_cuda_ev_%d_", pl.pid);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n < 0) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    link[n] = 0;
    int fd = 0 == strncmp(link, want, strlen(want)) ? open(path, O_RDWR | O_CLOEXEC) : -1;
    void *p = fd < 0 ? MAP_FAILED : mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) {
        close(fd);
    }
    struct fake_event *ev = MAP_FAILED == p ? NULL : calloc(1, sizeof(*ev));
    if (NULL == ev) {
        if (MAP_FAILED != p) {
            munmap(p, page_size);
        }
        RET(fd < 0 ? FCU_ERROR_INVALID_HANDLE : FCU_ERROR_MAP_FAILED);
    }
    ev->magic = EVENT_MAGIC;
    ev->flags = FCU_EVENT_INTERPROCESS | FCU_EVENT_DISABLE_TIMING;
    ev->ipc = p;
    ev->ipc_fd = -1;
    ev->opened = 1;
    ev->next = events;
    events = ev;
    *phEvent = ev;
    RET(FCU_SUCCESS);
}

/* ------------------------------------------------------------ modules, kernels */
/* Not in the required set: what gpu/xccl_gpu_kernels.c uses to run xccl's
 * reduction kernels, emulated on the host (see "emulated kernels" above). */
static struct fake_module *live_module(fcu_module m)
{
    for (struct fake_module *t = modules; t; t = t->next) {
        if (t == m) {
            return MODULE_MAGIC == t->magic && !t->dead ? t : NULL;
        }
    }
    return NULL;
}

static struct fake_function *live_function(fcu_function f)
{
    for (struct fake_module *m = modules; m; m = m->next) {
        if ((uintptr_t) f >= (uintptr_t) &m->fn[0] && (uintptr_t) f < (uintptr_t) &m->fn[NKERNELS]) {
            return !m->dead && FUNC_MAGIC == f->magic && f == &m->fn[f->kernel] ? f : NULL;
        }
    }
    return NULL;
}

/* Any image: the module has every kernel of XCCL_GPU_PAIRS. */
fcu_result cuModuleLoadData(fcu_module *module, const void *image);
fcu_result cuModuleLoadData(fcu_module *module, const void *image)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (NULL == module || NULL == image) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    struct fake_module *m = calloc(1, sizeof(*m));
    if (NULL == m) {
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    m->magic = MODULE_MAGIC;
    m->ctx = current_ctx();
    m->ctx_id = m->ctx->id;
    for (size_t i = 0; i < NKERNELS; i++) {
        m->fn[i].magic = FUNC_MAGIC;
        m->fn[i].kernel = (int) i;
        m->fn[i].mod = m;
    }
    m->next = modules;
    modules = m;
    *module = m;
    RET(FCU_SUCCESS);
}

fcu_result cuModuleUnload(fcu_module hmod);
fcu_result cuModuleUnload(fcu_module hmod)
{
    ENTER();
    if (!initialized) {
        RET(FCU_ERROR_NOT_INITIALIZED);
    }
    struct fake_module *m = live_module(hmod);
    if (NULL == m) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    m->dead = 1;               /* queued launches keep their host function */
    RET(FCU_SUCCESS);
}

fcu_result cuModuleGetFunction(fcu_function *hfunc, fcu_module hmod, const char *name);
fcu_result cuModuleGetFunction(fcu_function *hfunc, fcu_module hmod, const char *name)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    if (NULL == hfunc || NULL == name) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    struct fake_module *m = live_module(hmod);
    if (NULL == m) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    for (size_t i = 0; i < NKERNELS; i++) {
        if (0 == strcmp(name, kernels[i].name)) {
            *hfunc = &m->fn[i];
            RET(FCU_SUCCESS);
        }
    }
    RET(FCU_ERROR_NOT_FOUND);
}

/* A kernel's pointer p with bytes after it: aligned to the element, inside
 * one allocation the device can reach (device, IPC-mapped or pinned host
 * memory). */
static int kernel_range_ok(uintptr_t p, size_t bytes, size_t align)
{
    if (0 == p || 0 != p % align || p + bytes < p) {
        return 0;
    }
    const region *r = find_region(p);
    return NULL != r && p + bytes <= r->base + r->size;
}

/* kernelParams as gpu/xccl_kernels.cu declares the kernels:
 *   [0] -> void *dst   [1] -> xccl_gpu_srcs_t (128 bytes, by value)
 *   [2] -> int nsrc    [3] -> unsigned long long count
 * read (copied) at the launch, as the driver does.  Refused with
 * CUDA_ERROR_INVALID_VALUE where the kernel would fault or misbehave
 * (the driver would report ILLEGAL_ADDRESS/MISALIGNED_ADDRESS later): nsrc
 * outside 1..16; dst or a source outside the allocations, past the end of
 * one or not aligned to the element; dst overlapping a source other than
 * exactly; more than 256 threads a block (the kernels' launch bound). */
/* xccl_copy_batch's launch: 1..XCCL_GPU_MAX_COPIES copies, each inside
 * allocations the device reaches, none writing what another reads or
 * writes (they run concurrently on a GPU): else CUDA_ERROR_INVALID_VALUE. */
static fcu_result launch_copies(struct fake_function *fn, void **kernelParams, fcu_stream hStream)
{
    xccl_gpu_copies_t *c = malloc(sizeof(*c));
    if (NULL == c) {
        return FCU_ERROR_OUT_OF_MEMORY;
    }
    if (NULL == kernelParams[0]) {
        free(c);
        return FCU_ERROR_INVALID_VALUE;
    }
    memcpy(c, kernelParams[0], sizeof(*c));
    int bad = c->n < 1 || c->n > XCCL_GPU_MAX_COPIES;
    for (int e = 0; !bad && e < c->n; e++) {
        const uintptr_t d = (uintptr_t) c->dst[e], s = (uintptr_t) c->src[e];
        const size_t n = (size_t) c->len[e];
        bad = !kernel_range_ok(d, n, 1) || !kernel_range_ok(s, n, 1);
        for (int f = 0; !bad && f < c->n; f++) {
            const uintptr_t d2 = (uintptr_t) c->dst[f], s2 = (uintptr_t) c->src[f];
            const size_t n2 = (size_t) c->len[f];
            bad = n && n2 && ((d < s2 + n2 && s2 < d + n) || (f != e && d < d2 + n2 && d2 < d + n));
        }
    }
    if (bad) {
        free(c);
        return FCU_ERROR_INVALID_VALUE;
    }
    op o = { .kind = OP_KERNEL, .kernel = fn->kernel, .staged = c };
    fcu_result r = submit(&o, hStream, 1, 1, 1);
    if (FCU_SUCCESS != r && FCU_ERROR_OUT_OF_MEMORY != r) {
        free(c);                       /* (submit frees it when it runs out of memory) */
    }
    return r;
}

fcu_result cuLaunchKernel(fcu_function f, unsigned int gridDimX, unsigned int gridDimY,
                          unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                          unsigned int blockDimZ, unsigned int sharedMemBytes, fcu_stream hStream,
                          void **kernelParams, void **extra);
fcu_result cuLaunchKernel(fcu_function f, unsigned int gridDimX, unsigned int gridDimY,
                          unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                          unsigned int blockDimZ, unsigned int sharedMemBytes, fcu_stream hStream,
                          void **kernelParams, void **extra)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    struct fake_function *fn = live_function(f);
    if (NULL == fn || fn->mod->ctx != current_ctx()) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    if (NULL == kernelParams) {
        RET(extra ? FCU_ERROR_NOT_SUPPORTED : FCU_ERROR_INVALID_VALUE);
    }
    if (extra) {
        RET(FCU_ERROR_INVALID_VALUE);      /* both */
    }
    if (0 == gridDimX || 0 == gridDimY || 0 == gridDimZ || gridDimX > 0x7fffffffu ||
        gridDimY > 65535 || gridDimZ > 65535 || 0 == blockDimX || 0 == blockDimY || 0 == blockDimZ ||
        (unsigned long long) blockDimX * blockDimY * blockDimZ > KERNEL_MAX_THREADS ||
        sharedMemBytes > KERNEL_MAX_DYN_SHARED) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    const kernel_def *k = &kernels[fn->kernel];
    if (NULL == k->run) {
        RET(launch_copies(fn, kernelParams, hStream));
    }
    for (int i = 0; i < 4; i++) {
        if (NULL == kernelParams[i]) {
            RET(FCU_ERROR_INVALID_VALUE);
        }
    }
    void *dst;
    op o = { .kind = OP_KERNEL, .kernel = fn->kernel };
    memcpy(&dst, kernelParams[0], sizeof(dst));
    memcpy(&o.srcs, kernelParams[1], sizeof(o.srcs));
    memcpy(&o.nsrc, kernelParams[2], sizeof(o.nsrc));
    memcpy(&o.count, kernelParams[3], sizeof(o.count));
    o.dst = dst;
    if (o.nsrc < 1 || o.nsrc > XCCL_GPU_MAX_SRCS) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (o.count) {
        if (o.count > SIZE_MAX / k->size) {
            RET(FCU_ERROR_INVALID_VALUE);
        }
        const size_t bytes = (size_t) o.count * k->size;
        const uintptr_t d = (uintptr_t) dst;
        if (!kernel_range_ok(d, bytes, k->align)) {
            RET(FCU_ERROR_INVALID_VALUE);
        }
        for (int j = 0; j < o.nsrc; j++) {
            const uintptr_t p = (uintptr_t) o.srcs.p[j];
            if (!kernel_range_ok(p, bytes, k->align) || (p != d && p < d + bytes && d < p + bytes)) {
                RET(FCU_ERROR_INVALID_VALUE);
            }
        }
    }
    RET(submit(&o, hStream, 1, 1, 1));
}

/* ------------------------------------------------------------ IPC */
/* A handle names the exporter's memfd: (pid, fd, buffer id, size).  The
 * importer opens /proc/<pid>/fd/<fd> (same user, or root) and maps it. */
fcu_result cuIpcGetMemHandle(fcu_ipc_mem_handle *pHandle, fcu_dptr dptr);
fcu_result cuIpcGetMemHandle(fcu_ipc_mem_handle *pHandle, fcu_dptr dptr)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    region *r = find_region((uintptr_t) dptr);
    if (NULL == pHandle || NULL == r || R_DEVICE != r->kind) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    ipc_payload pl = { .magic = IPC_MAGIC, .pid = (int) getpid(), .fd = r->fd,
                       .id = r->id, .size = r->size, .maplen = r->maplen };
    memset(pHandle, 0, sizeof(*pHandle));
    memcpy(pHandle->reserved, &pl, sizeof(pl));
    RET(FCU_SUCCESS);
}

fcu_result cuIpcOpenMemHandle_v2(fcu_dptr *pdptr, fcu_ipc_mem_handle handle, unsigned int Flags);
fcu_result cuIpcOpenMemHandle_v2(fcu_dptr *pdptr, fcu_ipc_mem_handle handle, unsigned int Flags)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    ipc_payload pl;
    memcpy(&pl, handle.reserved, sizeof(pl));
    if (NULL == pdptr || Flags > 1 || IPC_MAGIC != pl.magic || 0 == pl.maplen) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (pl.pid == (int) getpid()) {
        RET(FCU_ERROR_INVALID_CONTEXT);   /* as the driver: not in the exporting process */
    }
    for (region *r = regions; r; r = r->next) {
        if (R_IPC == r->kind && r->ipc_pid == pl.pid && r->ipc_id == pl.id) {
            r->refs++;
            *pdptr = r->base;
            RET(FCU_SUCCESS);
        }
    }
    char path[64], link[256], want[96];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pl.pid, pl.fd);
    snprintf(want, sizeof(want), "/memfd:fake_cuda_%d_%llu ", pl.pid, pl.id);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n < 0) {
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    link[n] = 0;
    if (0 != strncmp(link, want, strlen(want))) {  /* freed, fd reused */
        RET(FCU_ERROR_INVALID_HANDLE);
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        RET(FCU_ERROR_MAP_FAILED);
    }
    void *p = mmap(NULL, pl.maplen, host_access ? PROT_READ | PROT_WRITE : PROT_NONE,
                   MAP_SHARED, fd, 0);
    void *view = mmap(NULL, pl.maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (MAP_FAILED == p || MAP_FAILED == view) {
        if (MAP_FAILED != p) {
            munmap(p, pl.maplen);
        }
        if (MAP_FAILED != view) {
            munmap(view, pl.maplen);
        }
        RET(FCU_ERROR_MAP_FAILED);
    }
    region *r = new_region(R_IPC, (uintptr_t) p, pl.size, pl.maplen, -1);
    if (NULL == r) {
        munmap(p, pl.maplen);
        munmap(view, pl.maplen);
        RET(FCU_ERROR_OUT_OF_MEMORY);
    }
    r->view = view;
    r->ipc_pid = pl.pid;
    r->ipc_id = pl.id;
    *pdptr = (fcu_dptr) (uintptr_t) p;
    RET(FCU_SUCCESS);
}

fcu_result cuIpcCloseMemHandle(fcu_dptr dptr);
fcu_result cuIpcCloseMemHandle(fcu_dptr dptr)
{
    ENTER();
    fcu_result e = need_ctx();
    if (e) {
        RET(e);
    }
    region *r = find_region((uintptr_t) dptr);
    if (NULL == r || R_IPC != r->kind || r->base != (uintptr_t) dptr) {
        RET(FCU_ERROR_INVALID_VALUE);
    }
    if (--r->refs > 0) {
        RET(FCU_SUCCESS);
    }
    /* The driver unmaps at once: work still queued on the mapping would
     * fault on a GPU (the call does not wait for it). */
    if (queued_work_uses(r)) {
        fprintf(stderr, "fake_cuda[%d]: cuIpcCloseMemHandle(%p) while queued work still uses the "
                "mapping (seed %llu)\n", (int) getpid(), (void *) r->base, seed);
        abort();
    }
    unlink_region(r);
    munmap((void *) r->base, r->maplen);
    munmap(r->view, r->maplen);
    free(r);
    RET(FCU_SUCCESS);
}

/* ------------------------------------------------------------ set-up, stats */
__attribute__((constructor)) static void fake_cuda_load(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    page_size = ps > 0 ? (size_t) ps : 4096;
    const char *e = getenv("FAKE_CUDA_VERSION");
    if (e && *e) {
        driver_version = atoi(e);
    }
    e = getenv("FAKE_CUDA_TRACE");
    trace = e && *e && strcmp(e, "0");
    e = getenv("FAKE_CUDA_HOST_ACCESS");
    host_access = e && *e && strcmp(e, "0");
    e = getenv("FAKE_CUDA_DELAY");
    delays = !(e && 0 == strcmp(e, "0"));
    e = getenv("FAKE_CUDA_SEED");
    if (e && *e) {
        seed = strtoull(e, NULL, 0);
    }
    /* The ranks of one job draw different delays, the same ones again
     * with the same seed. */
    e = getenv("OMPI_COMM_WORLD_RANK");
    e = e ? e : getenv("PMIX_RANK");
    rng_state = seed * 0x100000001b3ull + (e ? strtoull(e, NULL, 10) + 1 : 0);
    e = getenv("FAKE_CUDA_FAIL");
    const char *colon = e ? strchr(e, ':') : NULL;
    if (colon && (size_t) (colon - e) < sizeof(fail_fn)) {
        memcpy(fail_fn, e, (size_t) (colon - e));
        fail_call = strtoull(colon + 1, NULL, 10);
    }
}

/* One line of the stats, written with a single write(2): the processes of
 * a job share stderr (mpirun merges their output), and a line written in
 * pieces can be cut by another process's line. */
typedef struct {
    char s[4096];
    size_t n;
} line_t;

static void line_add(line_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_add(line_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->s + l->n, sizeof(l->s) - l->n, fmt, ap);
    va_end(ap);
    if (k > 0) {
        l->n = l->n + (size_t) k < sizeof(l->s) - 1 ? l->n + (size_t) k : sizeof(l->s) - 2;
    }
}

static void line_write(line_t *l)
{
    l->s[l->n++] = '\n';
    ssize_t w = write(STDERR_FILENO, l->s, l->n);
    (void) w;
    l->n = 0;
}

__attribute__((destructor)) static void fake_cuda_unload(void)
{
    const char *e = getenv("FAKE_CUDA_STATS");
    if (!(e && *e && strcmp(e, "0"))) {
        return;
    }
    static line_t line;
    pthread_mutex_lock(&lock);
    int pid = (int) getpid();
    line_add(&line, "fake_cuda[%d]: seed=%llu delays=%d", pid, seed, delays);
    line_write(&line);
    line_add(&line, "fake_cuda[%d]: calls:", pid);
    for (counter *c = counters; c; c = c->next) {
        line_add(&line, " %s=%llu", c->name, c->calls);
    }
    line_write(&line);
    unsigned long nkind[4] = { 0 }, bytes[4] = { 0 };
    for (region *r = regions; r; r = r->next) {
        nkind[r->kind]++;
        bytes[r->kind] += r->size;
    }
    unsigned long nstreams = 0, nevents = 0, pending = 0;
    for (struct fake_stream *s = streams; s; s = s->next) {
        nstreams += !s->legacy && !s->destroyed;
        pending += s->enqueued - s->done;
    }
    for (struct fake_event *ev = events; ev; ev = ev->next) {
        nevents++;
    }
    int refs = 0;
    for (int i = 0; i < MAX_DEVICES; i++) {
        refs += contexts[i].refs;
    }
    line_add(&line, "fake_cuda[%d]: outstanding:", pid);
    for (int k = 0; k < 4; k++) {
        line_add(&line, " %s=%lu (%lu bytes)", region_kind_names[k], nkind[k], bytes[k]);
    }
    unsigned long nmodules = 0;
    for (struct fake_module *m = modules; m; m = m->next) {
        nmodules += !m->dead;
    }
    line_add(&line, " modules=%lu streams=%lu events=%lu pending_ops=%lu primary_ctx_refs=%d",
             nmodules, nstreams, nevents, pending, refs);
    line_write(&line);
    pthread_mutex_unlock(&lock);
}
