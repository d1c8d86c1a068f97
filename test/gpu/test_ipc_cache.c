/*
 * The CUDA IPC handle caches (gpu/xccl_ipc_cache.c) without a GPU: "open"
 * and "close" are counted stand-ins that hand out distinct addresses and
 * remember which are open.
 */
#include "xccl_ipc_cache.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

#include "check_main.h"

#define SLOTS 256

typedef struct {
    int opens, closes, fail_next;
    int open[SLOTS];           /* slot i is mapped (address base + i) */
    int next;
    char base[SLOTS];
    void *last_ctx;
} stub_t;

static char *stub_open(void *cbctx, const xccl_cuipc_handle_t *h, void *ctx)
{
    stub_t *s = cbctx;
    (void) h;
    if (s->fail_next) {
        s->fail_next = 0;
        return NULL;
    }
    ck_assert_int_lt(s->next, SLOTS);
    s->opens++;
    s->last_ctx = ctx;
    s->open[s->next] = 1;
    return &s->base[s->next++];
}

static void stub_close(void *cbctx, char *p, void *ctx)
{
    stub_t *s = cbctx;
    (void) ctx;
    int i = (int) (p - s->base);
    ck_assert_msg(i >= 0 && i < SLOTS && s->open[i], "close of something not open");
    s->open[i] = 0;
    s->closes++;
}

static xccl_cuipc_handle_t handle(int v)
{
    xccl_cuipc_handle_t h;
    memset(&h, 0, sizeof(h));
    memcpy(h.reserved, &v, sizeof(v));
    return h;
}

static int is_open(const stub_t *s, const char *p)
{
    return s->open[p - s->base];
}

static void *const CTX = (void *) 0x1000;

START_TEST(hits_and_reallocations)
{
    stub_t s = { 0 };
    xccl_ipc_cache_t c;
    xccl_ipc_cache_init(&c, 4, stub_open, stub_close, &s);
    xccl_cuipc_handle_t h1 = handle(1), h2 = handle(2);
    xccl_ipc_cache_begin(&c);
    char *a = xccl_ipc_cache_get(&c, 1, 100, &h1, CTX);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_eq(s.last_ctx, CTX);
    xccl_ipc_cache_begin(&c);
    ck_assert_ptr_eq(xccl_ipc_cache_get(&c, 1, 100, &h1, CTX), a);   /* hit */
    ck_assert_int_eq(s.opens, 1);
    /* the same handle bytes but another allocation (buffer id), another
     * peer or another context: not the same mapping */
    char *b = xccl_ipc_cache_get(&c, 1, 101, &h1, CTX);
    char *d = xccl_ipc_cache_get(&c, 2, 100, &h1, CTX);
    char *e = xccl_ipc_cache_get(&c, 1, 100, &h1, (void *) 0x2000);
    char *f = xccl_ipc_cache_get(&c, 1, 100, &h2, CTX);
    ck_assert_int_eq(s.opens, 5);
    ck_assert(a != b && b != d && d != e && e != f);
    xccl_ipc_cache_fini(&c);
    ck_assert_int_eq(s.closes, 5);
}
END_TEST

/* Between calls: no more than keep stay open, the least recently used go. */
START_TEST(least_recently_used_goes)
{
    stub_t s = { 0 };
    xccl_ipc_cache_t c;
    xccl_ipc_cache_init(&c, 3, stub_open, stub_close, &s);
    xccl_cuipc_handle_t h = handle(7);
    char *p[4];
    for (int i = 0; i < 3; i++) {
        xccl_ipc_cache_begin(&c);
        p[i] = xccl_ipc_cache_get(&c, i, 10 + (unsigned) i, &h, CTX);
    }
    xccl_ipc_cache_begin(&c);
    ck_assert_ptr_eq(xccl_ipc_cache_get(&c, 0, 10, &h, CTX), p[0]);  /* 0 is fresh again */
    xccl_ipc_cache_begin(&c);
    p[3] = xccl_ipc_cache_get(&c, 3, 13, &h, CTX);                   /* evicts 1 */
    ck_assert_int_eq(s.closes, 1);
    ck_assert(!is_open(&s, p[1]));
    ck_assert(is_open(&s, p[0]) && is_open(&s, p[2]) && is_open(&s, p[3]));
    ck_assert_int_eq(c.n, 3);
    xccl_ipc_cache_fini(&c);
    ck_assert_int_eq(s.closes, 4);
    ck_assert_int_eq(s.opens, 4);
}
END_TEST

/* One call that needs more mappings than keep: none of them is closed
 * while the call may still use it; the cache grows, and the next call
 * evicts the old ones first. */
START_TEST(a_call_keeps_what_it_uses)
{
    stub_t s = { 0 };
    xccl_ipc_cache_t c;
    xccl_ipc_cache_init(&c, 4, stub_open, stub_close, &s);
    xccl_cuipc_handle_t h = handle(3);
    char *p[40];
    xccl_ipc_cache_begin(&c);
    for (int i = 0; i < 40; i++) {             /* e.g. 2 buffers of 20 peers */
        p[i] = xccl_ipc_cache_get(&c, i / 2, 1000 + (unsigned) i, &h, CTX);
        ck_assert_ptr_nonnull(p[i]);
    }
    ck_assert_int_eq(s.closes, 0);
    for (int i = 0; i < 40; i++) {
        ck_assert(is_open(&s, p[i]));
        ck_assert_ptr_eq(xccl_ipc_cache_get(&c, i / 2, 1000 + (unsigned) i, &h, CTX), p[i]);
    }
    ck_assert_int_eq(c.n, 40);
    xccl_ipc_cache_begin(&c);
    char *q = xccl_ipc_cache_get(&c, 99, 5, &h, CTX);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(s.closes, 1);
    ck_assert(!is_open(&s, p[0]));             /* the least recently used */
    xccl_ipc_cache_fini(&c);
    ck_assert_int_eq(s.closes, s.opens);
}
END_TEST

START_TEST(a_failed_open_caches_nothing)
{
    stub_t s = { 0 };
    xccl_ipc_cache_t c;
    xccl_ipc_cache_init(&c, 4, stub_open, stub_close, &s);
    xccl_cuipc_handle_t h = handle(9);
    xccl_ipc_cache_begin(&c);
    s.fail_next = 1;
    ck_assert_ptr_null(xccl_ipc_cache_get(&c, 1, 1, &h, CTX));
    ck_assert_int_eq(c.n, 0);
    ck_assert_ptr_nonnull(xccl_ipc_cache_get(&c, 1, 1, &h, CTX));   /* tried again */
    ck_assert_int_eq(s.opens, 1);
    xccl_ipc_cache_fini(&c);
    ck_assert_int_eq(s.closes, 1);
}
END_TEST

START_TEST(exports)
{
    xccl_ipc_exports_t x;
    memset(&x, 0, sizeof(x));
    char bufs[XCCL_IPC_EXPORTS + 1] = { 0 };
    xccl_cuipc_handle_t h[XCCL_IPC_EXPORTS + 1];
    for (int i = 0; i <= XCCL_IPC_EXPORTS; i++) {
        h[i] = handle(100 + i);
    }
    ck_assert_ptr_null(xccl_ipc_exports_find(&x, &bufs[0], 1));
    xccl_ipc_exports_add(&x, &bufs[0], 1, &h[0]);
    const xccl_cuipc_handle_t *f = xccl_ipc_exports_find(&x, &bufs[0], 1);
    ck_assert_ptr_nonnull(f);
    ck_assert_mem_eq(f, &h[0], sizeof(h[0]));
    /* the same address, a new allocation: not known */
    ck_assert_ptr_null(xccl_ipc_exports_find(&x, &bufs[0], 2));
    for (int i = 1; i <= XCCL_IPC_EXPORTS; i++) {
        xccl_ipc_exports_add(&x, &bufs[i], 1, &h[i]);
    }
    /* the first one was replaced in turn, the others are there */
    ck_assert_ptr_null(xccl_ipc_exports_find(&x, &bufs[0], 1));
    for (int i = 1; i <= XCCL_IPC_EXPORTS; i++) {
        f = xccl_ipc_exports_find(&x, &bufs[i], 1);
        ck_assert_ptr_nonnull(f);
        ck_assert_mem_eq(f, &h[i], sizeof(h[i]));
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("ipc_cache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, hits_and_reallocations);
    tcase_add_test(tc, least_recently_used_goes);
    tcase_add_test(tc, a_call_keeps_what_it_uses);
    tcase_add_test(tc, a_failed_open_caches_nothing);
    tcase_add_test(tc, exports);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
