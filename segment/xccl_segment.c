/* The node's shared segment: layout, creation, attachment, reuse (xccl_segment.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE            /* memfd_create */
#endif
#include "segment_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x78636331736d6831ull     /* "xccl1smh" */
#define SHM_VERSION 3u
#define DESC_MAGIC 0x7863736du              /* "xcsm" */

/* ------------------------------------------------------------------------ */
/* Layout                                                                   */
/* ------------------------------------------------------------------------ */

static size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

/* Sizes of the layout for nranks slots of slot_bytes; 0 on overflow. */
static size_t layout(xccl_segment_t *s, int nranks, size_t slot_bytes)
{
    s->nranks = nranks;
    s->slot_bytes = slot_bytes;
    s->slot_stride = round_up(slot_bytes, PAGE);
    s->flags_off = round_up(sizeof(shm_header_t) + (size_t) nranks * sizeof(shm_info_t), PAGE);
    s->small_off = s->flags_off + round_up((size_t) nranks * sizeof(shm_flag_t), PAGE);
    s->slots_off = s->small_off + (size_t) nranks * XCCL_SEGMENT_SMALL_BYTES;
    if (s->slot_stride < slot_bytes || (SIZE_MAX - s->slots_off) / (size_t) nranks < s->slot_stride) {
        return 0;
    }
    s->total = s->slots_off + (size_t) nranks * s->slot_stride;
    return s->total;
}

static void random_key(uint8_t key[16])
{
    if (getrandom(key, 16, GRND_NONBLOCK) == 16) {
        return;
    }
    /* No entropy yet (early boot): unique enough to tell segments apart. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t a = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 30) ^ ((uint64_t) getpid() << 16);
    uint64_t b = (uint64_t) (uintptr_t) key * 0x9E3779B97F4A7C15ull ^ a;
    memcpy(key, &a, 8);
    memcpy(key + 8, &b, 8);
}

/* A segment handle for rank `rank`, nothing mapped yet; NULL: no memory. */
static xccl_segment_t *seg_alloc(int rank)
{
    xccl_segment_t *s = calloc(1, sizeof(*s));
    if (NULL != s) {
        s->fd = -1;
        s->rank = rank;
    }
    return s;
}

/* This process is rank r of the mapped segment: publish pid and probe. */
static int join(xccl_segment_t *s)
{
    shm_info_t *me = info(s, s->rank);
    s->probe_word = probe_value(s->key, s->rank);
    uint32_t expected = 0;
    me->pid = (int32_t) getpid();
    me->probe_addr = (uint64_t) (uintptr_t) &s->probe_word;
    if (!atomic_compare_exchange_strong(&me->attached, &expected, 1u)) {
        return -EBUSY;
    }
    atomic_fetch_add_explicit(&header(s)->nattached, 1u, memory_order_release);
    return 0;
}

static void unmap(xccl_segment_t *s)
{
    if (NULL == s->base) {
        return;
    }
    if (XCCL_SEGMENT_SYSV == s->kind) {
        shmdt(s->base);
    } else {
        munmap(s->base, s->total);
    }
    s->base = NULL;
}

/* ------------------------------------------------------------------------ */
/* Creation and attachment                                                  */
/* ------------------------------------------------------------------------ */

static int create_memfd(xccl_segment_t *s)
{
    s->fd = memfd_create("xccl_shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (s->fd < 0) {
        return -errno;
    }
    if (ftruncate(s->fd, (off_t) s->total) != 0) {
        return -errno;
    }
    /* No peer can shrink it under the others (SIGBUS) or grow it. */
    (void) fcntl(s->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    void *p = mmap(NULL, s->total, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (MAP_FAILED == p) {
        return -errno;
    }
    s->base = p;
    return 0;
}

static int create_sysv(xccl_segment_t *s)
{
    int id = shmget(IPC_PRIVATE, s->total, IPC_CREAT | IPC_EXCL | 0600);
    if (id < 0) {
        return -errno;
    }
    void *p = shmat(id, NULL, 0);
    int err = (void *) -1 == p ? errno : 0;
    /* Marked for removal at once: it goes away with its last attachment
     * (peers may still attach it: Linux allows that). */
    shmctl(id, IPC_RMID, NULL);
    if (err) {
        return -err;
    }
    s->base = p;
    s->fd = -1;
    return id;
}

int xccl_segment_create(xccl_segment_kind_t kind, int nranks, int rank, size_t slot_bytes, xccl_segment_t **seg,
                    xccl_segment_desc_t *desc)
{
    *seg = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks || 0 == slot_bytes || NULL == desc ||
        (kind != XCCL_SEGMENT_AUTO && kind != XCCL_SEGMENT_MEMFD && kind != XCCL_SEGMENT_SYSV)) {
        return -EINVAL;
    }
    xccl_segment_t *s = seg_alloc(rank);
    if (NULL == s) {
        return -ENOMEM;
    }
    s->creator = 1;
    if (0 == layout(s, nranks, slot_bytes)) {
        free(s);
        return -EOVERFLOW;
    }
    random_key(s->key);

    int rc = -ENOSYS, shmid = -1;
    if (XCCL_SEGMENT_SYSV != kind) {
        rc = create_memfd(s);
        s->kind = XCCL_SEGMENT_MEMFD;
        if (rc < 0) {
            if (s->fd >= 0) {
                close(s->fd);
                s->fd = -1;
            }
            unmap(s);
        }
    }
    if ((XCCL_SEGMENT_SYSV == kind) || (XCCL_SEGMENT_AUTO == kind && -ENOSYS == rc)) {
        s->kind = XCCL_SEGMENT_SYSV;
        rc = shmid = create_sysv(s);
    }
    if (rc < 0) {
        free(s);
        return rc;
    }

    shm_header_t *h = header(s);
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->nranks = (uint32_t) nranks;
    h->slot_bytes = slot_bytes;
    h->slot_stride = s->slot_stride;
    h->flags_off = s->flags_off;
    h->slots_off = s->slots_off;
    memcpy(h->key, s->key, sizeof(h->key));
    atomic_store_explicit(&h->users, (uint32_t) nranks, memory_order_relaxed);
    (void) join(s);

    shm_wire_t w;
    memset(&w, 0, sizeof(w));
    w.magic = DESC_MAGIC;
    w.version = (uint16_t) SHM_VERSION;
    w.kind = (uint16_t) s->kind;
    w.pid = (int32_t) getpid();
    w.fd = s->fd;
    w.shmid = shmid;
    w.nranks = (uint32_t) nranks;
    w.slot_bytes = slot_bytes;
    w.total = s->total;
    memcpy(w.key, s->key, sizeof(w.key));
    memset(desc, 0, sizeof(*desc));
    memcpy(desc->bytes, &w, sizeof(w));
    s->desc = *desc;
    *seg = s;
    return 0;
}

static int attach_memfd(xccl_segment_t *s, const shm_wire_t *w)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int) w->pid, (int) w->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        /* ENOENT: no such process or fd (gone, or another PID namespace) */
        return ENOENT == errno ? -ESTALE : -errno;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t) st.st_size != w->total) {
        close(fd);
        return -ESTALE;
    }
    void *p = mmap(NULL, s->total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = MAP_FAILED == p ? errno : 0;
    close(fd);                 /* the mapping keeps the memory */
    if (err) {
        return -err;
    }
    s->base = p;
    return 0;
}

static int attach_sysv(xccl_segment_t *s, const shm_wire_t *w)
{
    struct shmid_ds ds;
    if (shmctl(w->shmid, IPC_STAT, &ds) != 0) {
        return EINVAL == errno || EIDRM == errno ? -ESTALE : -errno;
    }
    if ((uint64_t) ds.shm_segsz != w->total) {
        return -ESTALE;
    }
    void *p = shmat(w->shmid, NULL, 0);
    if ((void *) -1 == p) {
        return EINVAL == errno || EIDRM == errno ? -ESTALE : -errno;
    }
    s->base = p;
    return 0;
}

int xccl_segment_attach(const xccl_segment_desc_t *desc, int rank, xccl_segment_t **seg)
{
    shm_wire_t w;
    *seg = NULL;
    if (NULL == desc) {
        return -EINVAL;
    }
    memcpy(&w, desc->bytes, sizeof(w));
    if (DESC_MAGIC != w.magic || SHM_VERSION != w.version || rank < 0 || (uint32_t) rank >= w.nranks ||
        (XCCL_SEGMENT_MEMFD != w.kind && XCCL_SEGMENT_SYSV != w.kind)) {
        return -EINVAL;
    }
    xccl_segment_t *s = seg_alloc(rank);
    if (NULL == s) {
        return -ENOMEM;
    }
    s->kind = (xccl_segment_kind_t) w.kind;
    if (0 == layout(s, (int) w.nranks, (size_t) w.slot_bytes) || s->total != w.total) {
        free(s);
        return -EINVAL;
    }
    memcpy(s->key, w.key, sizeof(s->key));
    int rc = XCCL_SEGMENT_MEMFD == s->kind ? attach_memfd(s, &w) : attach_sysv(s, &w);
    if (0 == rc) {
        /* The key tells this segment from any other the numbers may name
         * (a reused pid or id). */
        const shm_header_t *h = header(s);
        if (SHM_MAGIC != h->magic || h->nranks != w.nranks || h->slot_bytes != w.slot_bytes ||
            0 != memcmp(h->key, w.key, sizeof(w.key))) {
            rc = -ESTALE;
        }
    }
    if (0 == rc) {
        rc = join(s);
    }
    if (rc < 0) {
        unmap(s);
        free(s);
        return rc;
    }
    s->desc = *desc;
    *seg = s;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reuse                                                                    */
/* ------------------------------------------------------------------------ */

int xccl_segment_claim(xccl_segment_t *seg, int rank)
{
    shm_header_t *h = header(seg);
    uint32_t none = 0;
    if (rank < 0 || rank >= seg->nranks) {
        return -EINVAL;
    }
    /* acquire: every access of the users that released comes before */
    if (!atomic_compare_exchange_strong_explicit(&h->users, &none, (uint32_t) seg->nranks,
                                                 memory_order_acquire, memory_order_relaxed)) {
        return -EBUSY;
    }
    /* As created: no rank attached, no flag or line ever posted, nothing
     * published.  The small areas and slots keep stale bytes, which
     * nothing reads before a post of this use says they were written. */
    atomic_store_explicit(&h->nattached, 0u, memory_order_relaxed);
    memset(info(seg, 0), 0, (size_t) seg->nranks * sizeof(shm_info_t));
    memset(flag(seg, 0), 0, (size_t) seg->nranks * sizeof(shm_flag_t));
    atomic_thread_fence(memory_order_release);
    return xccl_segment_rejoin(seg, rank);
}

int xccl_segment_rejoin(xccl_segment_t *seg, int rank)
{
    if (rank < 0 || rank >= seg->nranks) {
        return -EINVAL;
    }
    const int was = seg->rank;
    seg->rank = rank;
    const int rc = join(seg);
    if (0 != rc) {
        seg->rank = was;
    }
    return rc;
}

void xccl_segment_release(xccl_segment_t *seg)
{
    /* release: this rank's last reads and writes come before a claim */
    atomic_fetch_sub_explicit(&header(seg)->users, 1u, memory_order_release);
}

void xccl_segment_desc_of(const xccl_segment_t *seg, xccl_segment_desc_t *desc)
{
    *desc = seg->desc;
}

int xccl_segment_desc_names(const xccl_segment_desc_t *desc, const xccl_segment_t *seg)
{
    shm_wire_t w;
    memcpy(&w, desc->bytes, sizeof(w));
    return DESC_MAGIC == w.magic && 0 == memcmp(w.key, seg->key, sizeof(w.key));
}

int xccl_segment_desc_same(const xccl_segment_desc_t *a, const xccl_segment_desc_t *b)
{
    shm_wire_t x, y;
    memcpy(&x, a->bytes, sizeof(x));
    memcpy(&y, b->bytes, sizeof(y));
    return DESC_MAGIC == x.magic && DESC_MAGIC == y.magic && 0 == memcmp(x.key, y.key, sizeof(x.key));
}

xccl_segment_kind_t xccl_segment_desc_kind(const xccl_segment_desc_t *desc)
{
    shm_wire_t w;
    memcpy(&w, desc->bytes, sizeof(w));
    return (xccl_segment_kind_t) w.kind;
}

void xccl_segment_detach(xccl_segment_t *seg)
{
    if (NULL == seg) {
        return;
    }
    xccl_segment_release_fd(seg);
    unmap(seg);
    free(seg->faulted);
    free(seg);
}

int xccl_segment_all_attached(const xccl_segment_t *seg)
{
    return atomic_load_explicit(&header(seg)->nattached, memory_order_acquire) == (uint32_t) seg->nranks;
}

void xccl_segment_release_fd(xccl_segment_t *seg)
{
    if (seg->fd >= 0) {
        close(seg->fd);
        seg->fd = -1;
    }
}
