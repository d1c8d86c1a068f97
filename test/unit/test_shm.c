/*
 * The node segment on real shared memory, without MPI: forked ranks
 * (shm_ranks.h) create and attach it.
 *
 *   - segment: create / attach through the blob, slots, flags (sequence
 *     numbers of successive calls, serial wrap), errors (bad blob, creator
 *     gone, rank attached twice), reuse, the small areas' and the slots'
 *     pages mapped ahead, memfd and SysV;
 *   - CMA: the probe, reads and writes; a non-dumpable process refuses
 *     /proc/<pid>/fd (memfd attach fails, SysV works) and CMA.
 *
 * The schedules that run on the segment, and kill -9: test_shm_exec.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include "check_main.h"

#include "segment/xccl_cma.h"
#include "segment/xccl_segment.h"
#include "shm_ranks.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Segment basics                                                           */
/* ------------------------------------------------------------------------ */

START_TEST(segment_layout_and_flags)
{
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        xccl_segment_t *a, *b;
        xccl_segment_desc_t d;
        ck_assert_int_eq(xccl_segment_create((xccl_segment_kind_t) kind, 3, 0, 1000, &a, &d), 0);
        ck_assert_int_eq(xccl_segment_kind(a), kind);
        ck_assert_int_eq(xccl_segment_desc_kind(&d), kind);
        ck_assert_int_eq(xccl_segment_attach(&d, 2, &b), 0);
        ck_assert_int_eq(xccl_segment_nranks(b), 3);
        ck_assert_int_eq(xccl_segment_rank(b), 2);
        ck_assert_uint_eq(xccl_segment_slot_bytes(b), 1000);
        ck_assert(!xccl_segment_all_attached(a));
        /* a rank attaches once */
        xccl_segment_t *again;
        ck_assert_int_eq(xccl_segment_attach(&d, 2, &again), -EBUSY);
        ck_assert_int_eq(xccl_segment_attach(&d, 3, &again), -EINVAL);
        /* slots: aligned, disjoint, the same memory through both mappings */
        for (int r = 0; r < 3; r++) {
            unsigned char *s = xccl_segment_slot(a, r);
            ck_assert_uint_eq((uintptr_t) s % XCCL_SEGMENT_SLOT_ALIGN, 0);
            memset(s, 0x10 + r, 1000);
        }
        for (int r = 0; r < 3; r++) {
            const unsigned char *s = xccl_segment_slot(b, r);
            for (size_t i = 0; i < 1000; i++) {
                ck_assert_uint_eq(s[i], 0x10 + r);
            }
        }
        ck_assert_ptr_null(xccl_segment_slot(a, 3));
        /* latency lines and small areas (the component's latency path):
         * zero at creation, aligned, shared, apart from each other, from
         * the flags (tested below: never posted) and from the slots */
        for (int r = 0; r < 3; r++) {
            const unsigned char *l = xccl_segment_line(b, r), *sm = xccl_segment_small(b, r);
            ck_assert_uint_eq((uintptr_t) l % 64, 0);
            ck_assert_uint_eq((uintptr_t) sm % XCCL_SEGMENT_SLOT_ALIGN, 0);
            for (size_t i = 0; i < XCCL_SEGMENT_LINE_BYTES; i++) {
                ck_assert_uint_eq(l[i], 0);
            }
            for (size_t i = 0; i < XCCL_SEGMENT_SMALL_BYTES; i++) {
                ck_assert_uint_eq(sm[i], 0);
            }
        }
        for (int r = 0; r < 3; r++) {
            memset(xccl_segment_line(a, r), 0x20 + r, XCCL_SEGMENT_LINE_BYTES);
            memset(xccl_segment_small(a, r), 0x30 + r, XCCL_SEGMENT_SMALL_BYTES);
        }
        for (int r = 0; r < 3; r++) {
            const unsigned char *l = xccl_segment_line(b, r), *sm = xccl_segment_small(b, r);
            const unsigned char *slot = xccl_segment_slot(b, r);
            for (size_t i = 0; i < XCCL_SEGMENT_LINE_BYTES; i++) {
                ck_assert_uint_eq(l[i], 0x20 + r);
            }
            for (size_t i = 0; i < XCCL_SEGMENT_SMALL_BYTES; i++) {
                ck_assert_uint_eq(sm[i], 0x30 + r);
            }
            for (size_t i = 0; i < 1000; i++) {
                ck_assert_uint_eq(slot[i], 0x10 + r);
            }
        }
        ck_assert_ptr_null(xccl_segment_line(a, 3));
        ck_assert_ptr_null(xccl_segment_small(a, 3));
        ck_assert_ptr_null(xccl_segment_small(a, -1));
        ck_assert_int_eq(xccl_segment_pid(b, 0), getpid());
        ck_assert_int_eq(xccl_segment_pid(b, 1), 0);         /* not attached */
        /* flags: never posted, then (seq, val) of the same call, earlier
         * and later calls, serial wrap */
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0x80000001u, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_post(a, 7, 3), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 7, 3), 1);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 7, 2), 1);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 7, 4), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 8, 1), 0);  /* a later call: not yet */
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 6, 100), 1); /* an earlier call: passed */
        ck_assert_int_eq(xccl_segment_flag_test(b, 2, 7, 0), 0);  /* rank 2 never posted */
        ck_assert_int_eq(xccl_segment_flag_post(a, 0xFFFFFFFFu, 5), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0, 1), 0);  /* the next call, across the wrap */
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0xFFFFFFFEu, 9), 1);
        ck_assert_int_eq(xccl_segment_flag_post(a, 0, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0xFFFFFFFFu, 99), 1);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 0, 0), 1);
        ck_assert_int_eq(xccl_segment_flag_post(a, 1, UINT32_MAX), -EINVAL);
        /* the flags are alone on their cache lines */
        ck_assert_int_eq(xccl_segment_flag_post(b, 1, 1), 0);
        ck_assert_int_eq(xccl_segment_flag_test(a, 2, 1, 1), 1);
        ck_assert_int_eq(xccl_segment_flag_test(a, 0, 1, 1), 0);   /* rank 0's (0, 0) is of an earlier call */
        xccl_segment_detach(b);
        xccl_segment_detach(a);
    }
}
END_TEST

/* Reuse: a segment every user released is claimed by one
 * process, reset to what creation leaves, and rejoined by the others that
 * kept it mapped, at any rank; it cannot be claimed while any user holds
 * it. */
START_TEST(segment_reuse)
{
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        xccl_segment_t *a, *b, *other;
        xccl_segment_desc_t d, da, dother;
        ck_assert_int_eq(xccl_segment_create((xccl_segment_kind_t) kind, 2, 0, 1000, &a, &d), 0);
        ck_assert_int_eq(xccl_segment_attach(&d, 1, &b), 0);
        ck_assert_int_eq(xccl_segment_create((xccl_segment_kind_t) kind, 2, 0, 1000, &other, &dother), 0);
        /* the descriptors name the segment, in every process that maps it */
        xccl_segment_desc_of(b, &da);
        ck_assert(xccl_segment_desc_same(&d, &da));
        ck_assert(xccl_segment_desc_names(&da, a));
        ck_assert(!xccl_segment_desc_names(&dother, a));
        ck_assert(!xccl_segment_desc_same(&d, &dother));
        xccl_segment_desc_t zero;
        memset(&zero, 0, sizeof(zero));
        ck_assert(!xccl_segment_desc_same(&zero, &zero));
        /* a use: flags of late calls, lines, publications */
        const void *addrs[1] = { &kind };
        ck_assert_int_eq(xccl_segment_flag_post(a, 900, 3), 0);
        ck_assert_int_eq(xccl_segment_flag_post(b, 900, 1), 0);
        memset(xccl_segment_line(a, 0), 0x55, XCCL_SEGMENT_LINE_BYTES);
        memset(xccl_segment_line(b, 1), 0x66, XCCL_SEGMENT_LINE_BYTES);
        ck_assert_int_eq(xccl_segment_publish(b, 900, 1, addrs), 0);
        memset(xccl_segment_slot(a, 0), 0x77, 1000);
        /* held: by both, then by one */
        ck_assert_int_eq(xccl_segment_claim(a, 0), -EBUSY);
        xccl_segment_release(a);
        ck_assert_int_eq(xccl_segment_claim(b, 1), -EBUSY);
        ck_assert_int_eq(xccl_segment_claim(a, 0), -EBUSY);
        xccl_segment_release(b);
        /* free: claimed as rank 1 by the process that was rank 0 */
        ck_assert_int_eq(xccl_segment_claim(a, 2), -EINVAL);
        ck_assert_int_eq(xccl_segment_claim(a, 1), 0);
        ck_assert_int_eq(xccl_segment_rank(a), 1);
        ck_assert_int_eq(xccl_segment_claim(b, 0), -EBUSY);      /* one claim wins */
        /* as created: the old calls' flags, lines and publications gone */
        for (int r = 0; r < 2; r++) {
            ck_assert_int_eq(xccl_segment_flag_test(a, r, 1, 0), 0);
            const unsigned char *l = xccl_segment_line(b, r);
            for (size_t i = 0; i < XCCL_SEGMENT_LINE_BYTES; i++) {
                ck_assert_uint_eq(l[i], 0);
            }
        }
        uint64_t addr = 0;
        ck_assert_int_eq(xccl_segment_published(a, 1, 900, 0, &addr), -ESTALE);
        ck_assert_int_eq(xccl_segment_pid(b, 0), 0);              /* rank 0 not rejoined yet */
        ck_assert_int_eq(xccl_segment_pid(b, 1), getpid());
        ck_assert(!xccl_segment_all_attached(a));
        /* the other rejoins as rank 0, once */
        ck_assert_int_eq(xccl_segment_rejoin(b, 0), 0);
        ck_assert_int_eq(xccl_segment_rejoin(b, 0), -EBUSY);
        ck_assert_int_eq(xccl_segment_rejoin(b, 2), -EINVAL);
        ck_assert(xccl_segment_all_attached(a));
        /* flags of the new use's first calls, at the new ranks */
        ck_assert_int_eq(xccl_segment_flag_post(a, 1, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_test(b, 1, 1, 0), 1);
        ck_assert_int_eq(xccl_segment_flag_test(b, 0, 1, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_post(b, 1, 0), 0);
        ck_assert_int_eq(xccl_segment_flag_test(a, 0, 1, 0), 1);
        /* the slots are the same memory still */
        ck_assert_uint_eq(((unsigned char *) xccl_segment_slot(b, 0))[999], 0x77);
        /* held again by its two new users */
        ck_assert_int_eq(xccl_segment_claim(b, 0), -EBUSY);
        xccl_segment_release(a);
        xccl_segment_release(b);
        ck_assert_int_eq(xccl_segment_claim(b, 0), 0);
        xccl_segment_detach(b);
        xccl_segment_detach(a);
        xccl_segment_detach(other);
    }
}
END_TEST

/* Pages of [a, a + len) mapped in this process (/proc/self/pagemap's
 * present bit, readable without privileges), or -1 where it cannot tell. */
static long pages_present(const void *a, size_t len)
{
    const long pg = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/pagemap", "rb");
    if (NULL == f) {
        return -1;
    }
    long n = 0;
    for (uintptr_t v = (uintptr_t) a; v < (uintptr_t) a + len; v += (uintptr_t) pg) {
        uint64_t e;
        if (0 != fseek(f, (long) (v / (uintptr_t) pg * 8), SEEK_SET) || 1 != fread(&e, 8, 1, f)) {
            fclose(f);
            return -1;
        }
        n += (long) (e >> 63);
    }
    fclose(f);
    return n;
}

/* xccl_segment_prefault_small maps a small area's pages here (allocating the
 * ones nobody made), and leaves its data and the other areas alone. */
START_TEST(small_area_prefault)
{
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        xccl_segment_t *a, *b;
        xccl_segment_desc_t d;
        ck_assert_int_eq(xccl_segment_create((xccl_segment_kind_t) kind, 2, 0, 1000, &a, &d), 0);
        ck_assert_int_eq(xccl_segment_attach(&d, 1, &b), 0);
        const size_t n = XCCL_SEGMENT_SMALL_BYTES / (size_t) sysconf(_SC_PAGESIZE);
        unsigned char *a0 = xccl_segment_small(a, 0), *b0 = xccl_segment_small(b, 0), *b1 = xccl_segment_small(b, 1);
        if (pages_present(a0, XCCL_SEGMENT_SMALL_BYTES) < 0) {
            fprintf(stderr, "small_area_prefault: /proc/self/pagemap unreadable: not checked\n");
            ck_assert_int_eq(xccl_segment_prefault_small(a, 0), 0);
        } else {
            ck_assert_int_eq(pages_present(a0, XCCL_SEGMENT_SMALL_BYTES), 0); /* nothing touched */
            a0[5] = 0x5a;                                      /* one page made by its rank */
            ck_assert_int_eq(pages_present(a0, XCCL_SEGMENT_SMALL_BYTES), 1);
            ck_assert_int_eq(xccl_segment_prefault_small(a, 0), 0);
            ck_assert_int_eq(pages_present(a0, XCCL_SEGMENT_SMALL_BYTES), (long) n);
            ck_assert_int_eq(pages_present(b0, XCCL_SEGMENT_SMALL_BYTES), 0); /* another mapping */
            ck_assert_int_eq(xccl_segment_prefault_small(b, 0), 0);
            ck_assert_int_eq(pages_present(b0, XCCL_SEGMENT_SMALL_BYTES), (long) n);
            ck_assert_int_eq(pages_present(b1, XCCL_SEGMENT_SMALL_BYTES), 0); /* the other area */
        }
        for (size_t i = 0; i < XCCL_SEGMENT_SMALL_BYTES; i++) {
            ck_assert_uint_eq(b0[i], 5 == i ? 0x5a : 0);
        }
        ck_assert_int_eq(xccl_segment_prefault_small(b, 2), -EINVAL);
        xccl_segment_detach(b);
        xccl_segment_detach(a);
    }
}
END_TEST

/* xccl_segment_prefault_slots maps the first bytes of this rank's own slot
 * here, in whole steps up to the slot's end, once; the data and the other
 * slots stay as they were. */
START_TEST(slot_prefault)
{
    const size_t step = XCCL_SEGMENT_PREFAULT_STEP, page = (size_t) sysconf(_SC_PAGESIZE);
    const size_t slot = 3 * step + 3 * page;   /* the last step short */
    xccl_segment_t *a, *b;
    xccl_segment_desc_t d;
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_MEMFD, 2, 0, slot, &a, &d), 0);
    ck_assert_int_eq(xccl_segment_attach(&d, 1, &b), 0);
    unsigned char *a0 = xccl_segment_slot(a, 0), *a1 = xccl_segment_slot(a, 1);
    unsigned char *b0 = xccl_segment_slot(b, 0), *b1 = xccl_segment_slot(b, 1);
    b1[7] = 0x77;
    if (pages_present(a0, slot) < 0) {
        fprintf(stderr, "slot_prefault: /proc/self/pagemap unreadable: not checked\n");
        ck_assert_int_eq(xccl_segment_prefault_slots(b, 1), 0);
    } else {
        ck_assert_int_eq(pages_present(b1, slot), 1);
        ck_assert_int_eq(xccl_segment_prefault_slots(b, 1), 0);         /* one step */
        ck_assert_int_eq(pages_present(b1, step), (long) (step / page));
        ck_assert_int_eq(pages_present(b1 + step, slot - step), 0);
        ck_assert_int_eq(pages_present(b0, slot), 0);                    /* a peer's slot */
        ck_assert_int_eq(pages_present(a1, slot), 0);                    /* another mapping */
        ck_assert_int_eq(xccl_segment_prefault_slots(b, step), 0);       /* no more */
        ck_assert_int_eq(pages_present(b1 + step, slot - step), 0);
        ck_assert_int_eq(xccl_segment_prefault_slots(b, 2 * step + 1), 0);
        ck_assert_int_eq(pages_present(b1, slot), (long) (3 * step / page));
        ck_assert_int_eq(xccl_segment_prefault_slots(b, SIZE_MAX), 0);   /* to the slot's end */
        ck_assert_int_eq(pages_present(b1, slot), (long) (slot / page));
        ck_assert_int_eq(pages_present(b0, slot), 0);
        ck_assert_int_eq(xccl_segment_prefault_slots(a, slot), 0);       /* rank 0's own, there */
        ck_assert_int_eq(pages_present(a0, slot), (long) (slot / page));
    }
    for (size_t i = 0; i < slot; i++) {
        ck_assert_uint_eq(a1[i], 7 == i ? 0x77 : 0);
        ck_assert_uint_eq(a0[i], 0);
    }
    xccl_segment_detach(b);
    xccl_segment_detach(a);
}
END_TEST

START_TEST(segment_errors)
{
    xccl_segment_t *a;
    xccl_segment_desc_t d;
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_AUTO, 0, 0, 100, &a, &d), -EINVAL);
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 2, 100, &a, &d), -EINVAL);
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 0, 0, &a, &d), -EINVAL);
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 0, SIZE_MAX / 2, &a, &d), -EOVERFLOW);
    /* garbage blob */
    xccl_segment_desc_t junk;
    memset(&junk, 0x5A, sizeof(junk));
    ck_assert_int_eq(xccl_segment_attach(&junk, 1, &a), -EINVAL);
    /* the blob of a segment whose creator is gone (and whose memory with it) */
    for (int kind = XCCL_SEGMENT_MEMFD; kind <= XCCL_SEGMENT_SYSV; kind++) {
        ctl_t *c = ctl_new();
        pid_t pid = fork();
        if (0 == pid) {
            xccl_segment_t *s;
            _exit(xccl_segment_create((xccl_segment_kind_t) kind, 2, 0, 4096, &s, &c->desc) ? 1 : 0);
        }
        int st;
        waitpid(pid, &st, 0);
        ck_assert(WIFEXITED(st) && 0 == WEXITSTATUS(st));
        ck_assert_int_eq(xccl_segment_attach(&c->desc, 1, &a), -ESTALE);
        munmap(c, sizeof(*c));
    }
    /* a blob with the right numbers but another key: not that segment */
    xccl_segment_t *s;
    ck_assert_int_eq(xccl_segment_create(XCCL_SEGMENT_MEMFD, 2, 0, 4096, &s, &d), 0);
    xccl_segment_desc_t other = d;
    other.bytes[XCCL_SEGMENT_DESC_BYTES - 20] ^= 0xFF; /* inside the key */
    other.bytes[sizeof(uint32_t) * 6 + 16 + 3] ^= 0x01;
    ck_assert_int_ne(xccl_segment_attach(&other, 1, &a), 0);
    xccl_segment_detach(s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Cross-memory attach                                                      */
/* ------------------------------------------------------------------------ */

static char cma_buf[4096];

static int cma_body(ctl_t *c, xccl_segment_t *seg, int r, int p, const void *arg)
{
    (void) arg, (void) p;
    for (size_t i = 0; i < sizeof(cma_buf); i++) {
        cma_buf[i] = (char) (r * 11 + i);
    }
    c->addr[r] = (uint64_t) (uintptr_t) cma_buf;
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < 2) {
        usleep(100);
    }
    const int peer = 1 - r;
    int ok = xccl_cma_probe(seg, peer);
    if (1 != ok) {
        return failf(c, r, "probe of rank %d: %d (ptrace_scope %d)", peer, ok, xccl_cma_ptrace_scope());
    }
    char got[4096];
    if (0 != xccl_cma_read(xccl_segment_pid(seg, peer), got, (void *) (uintptr_t) c->addr[peer], sizeof(got))) {
        return failf(c, r, "cma read failed");
    }
    for (size_t i = 0; i < sizeof(got); i++) {
        if (got[i] != (char) (peer * 11 + i)) {
            return failf(c, r, "cma read: byte %zu wrong", i);
        }
    }
    /* rank 0 writes into rank 1's buffer; rank 1 checks */
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < 4) {
        usleep(100);
    }
    if (0 == r) {
        memset(got, 0x77, 100);
        if (0 != xccl_cma_write(xccl_segment_pid(seg, 1), (void *) (uintptr_t) (c->addr[1] + 10), got, 100)) {
            return failf(c, r, "cma write failed");
        }
    }
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < 6) {
        usleep(100);
    }
    if (1 == r && (cma_buf[10] != 0x77 || cma_buf[109] != 0x77 || cma_buf[110] != (char) (11 + 110))) {
        return failf(c, r, "cma write not seen");
    }
    /* reading an unmapped address fails cleanly */
    if (0 == xccl_cma_read(xccl_segment_pid(seg, peer), got, (void *) (uintptr_t) 16, 8)) {
        return failf(c, r, "cma read of address 16 succeeded");
    }
    return 0;
}

START_TEST(cma_probe_read_write)
{
    const int scope = xccl_cma_ptrace_scope();
    ck_assert(scope >= -1 && scope <= 3);
    fprintf(stderr, "ptrace_scope: %d (-1: no Yama)\n", scope);
    char why[400];
    /* where Yama forbids it the probe says so; the test needs it allowed */
    if (scope >= 1 && 0 != geteuid()) {
        fprintf(stderr, "cma_probe_read_write: ptrace_scope %d, not root: skipped\n", scope);
        return;
    }
    ck_assert_msg(0 == run_ranks(2, XCCL_SEGMENT_AUTO, 4096, cma_body, NULL, 30, why, sizeof(why)), "%s", why);
}
END_TEST

/* A creator that is not dumpable (and, when the test runs as root, ranks
 * without root's CAP_SYS_PTRACE): its /proc/<pid>/fd is closed to the
 * peer, so memfd attach fails with EACCES, SysV works, and CMA into it is
 * refused while the other direction works. */
START_TEST(not_dumpable_refuses)
{
    ctl_t *c = ctl_new();
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (0 == pids[r]) {
            if (0 == geteuid() && (0 != setresgid(65534, 65534, 65534) || 0 != setresuid(65534, 65534, 65534))) {
                _exit(failf(c, r, "cannot become nobody"));
            }
            /* a change of credentials clears "dumpable": rank 1 sets it again */
            prctl(PR_SET_DUMPABLE, 0 == r ? 0 : 1, 0, 0, 0);
            xccl_segment_t *seg;
            int rc;
            if (0 == r) {
                rc = xccl_segment_create(XCCL_SEGMENT_MEMFD, 2, 0, 4096, &seg, &c->desc);
                atomic_store(&c->ready, 1);
                while (atomic_load(&c->arrived) < 1) {
                    usleep(100);
                }
                xccl_segment_detach(seg);
                /* then SysV */
                rc = xccl_segment_create(XCCL_SEGMENT_SYSV, 2, 0, 4096, &seg, &c->desc);
                atomic_store(&c->ready, 2);
                while (atomic_load(&c->arrived) < 2) {
                    usleep(100);
                }
                int probe = xccl_cma_probe(seg, 1);
                atomic_store(&c->ready, 3);        /* rank 1 may leave */
                xccl_segment_detach(seg);
                _exit(0 == rc && 1 == probe ? 0 : failf(c, r, "sysv create %d, probe of the dumpable peer %d", rc, probe));
            }
            while (atomic_load(&c->ready) < 1) {
                usleep(100);
            }
            rc = xccl_segment_attach(&c->desc, 1, &seg);
            atomic_fetch_add(&c->arrived, 1);
            if (-EACCES != rc && -EPERM != rc) {
                _exit(failf(c, r, "memfd attach to a non-dumpable creator: %d, not EACCES", rc));
            }
            while (atomic_load(&c->ready) < 2) {
                usleep(100);
            }
            rc = xccl_segment_attach(&c->desc, 1, &seg);
            if (0 != rc) {
                atomic_fetch_add(&c->arrived, 1);
                _exit(failf(c, r, "sysv attach: %d", rc));
            }
            int probe = xccl_cma_probe(seg, 0);
            atomic_fetch_add(&c->arrived, 1);
            while (atomic_load(&c->ready) < 3) {
                usleep(100);
            }
            xccl_segment_detach(seg);
            _exit(0 == probe ? 0 : failf(c, r, "cma probe of a non-dumpable peer: %d", probe));
        }
    }
    int status[2];
    char why[400];
    ck_assert_msg(0 == reap(c, pids, 2, 30, status, why, sizeof(why)), "%s", why);
    munmap(c, sizeof(*c));
}
END_TEST

/* Test cases by subject (CK_RUN_CASE=cma ./test_shm runs one). */
static TCase *tcase(Suite *su, const char *name)
{
    return xccl_check_tcase(su, name, 900);
}

int main(void)
{
    Suite *su = suite_create("shm");
    TCase *tc = tcase(su, "segment");
    tcase_add_test(tc, segment_layout_and_flags);
    tcase_add_test(tc, segment_errors);
    tcase_add_test(tc, segment_reuse);
    tcase_add_test(tc, small_area_prefault);
    tcase_add_test(tc, slot_prefault);
    tc = tcase(su, "cma");
    tcase_add_test(tc, cma_probe_read_write);
    tcase_add_test(tc, not_dumpable_refuses);
    return xccl_check_run(su);
}
