/*
 * test_gpu_kernels: xccl's GPU reduction kernels (gpu/xccl_kernels.cu,
 * loaded by gpu/xccl_gpu_kernels.c from the embedded fatbin) against its
 * host kernels (xccl_reduce_kernel), no MPI.
 *
 * 1. Host, always: the kernels' element operations (gpu/xccl_reduce_ops.h,
 *    compiled here for the host) against every instruction-set variant of
 *    the host kernels this CPU runs (xccl_reduce_kernel_isa; the others are
 *    skipped with a line saying so) for every pair the GPU supports; sizes
 *    and layouts of the element types; which pairs are supported (all of
 *    xccl_reduce_kernel's but long double).
 * 2. Device, where libcuda.so.1 loads and there is a device (else "SKIP:
 *    <reason>", exit 77): for every supported pair, counts 0, 1, 31, 1000,
 *    (1 << 20) + 7 and nsrc 1, 2, 3, 8 (and 17 up to count 1000: chained
 *    launches), sources full of edge cases (wrap-around, NaN, inf, -0.0,
 *    denormals, MINLOC/MAXLOC ties), xccl_gpu_reduce into a guarded
 *    destination, compared with the host kernel folded left to right over
 *    the same sources.  Also in place (dst = src0) and with every pointer
 *    one element off 16-byte alignment (the kernels' scalar path).
 *
 * 3. Device: xccl_copy_batch (xccl_gpu_copy_batch) with 1, 2, 7 and 32
 *    copies of lengths 0 .. 3 MiB + 5, aligned and not, out of one source
 *    buffer into distinct slices of a guarded destination: every byte
 *    copied, nothing outside touched; too many copies refused.
 *
 * Comparison: bit for bit, field by field (padding of the pair types is
 * not compared), except that a NaN result of SUM/PROD matches any NaN: the
 * sign and payload of an arithmetic NaN are the hardware's (x86 propagates
 * an operand's, NVIDIA GPUs give the canonical NaN).  MAX/MIN/MAXLOC/MINLOC
 * select operands and must match exactly, NaNs included.
 *
 * Any mismatch prints the pair, nsrc, count, index, got and want (and the
 * sources at that index) and the test exits 1.
 */
#define _GNU_SOURCE 1
#include "xccl_build_config.h"
#include "base/xccl_base.h"
#include "xccl_cuda.h"
#include "xccl_gpu_kernels.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NSRC 17
#define GUARD 64               /* bytes checked on both sides of dst */
#define GUARD_BYTE 0xa5

/* ------------------------------------------------------------------ the pairs */

#define EMU(DT, tn, T, opn, OP)                                                             \
    static void emu_##tn##_##opn(void *o_, const void *a_, const void *b_, size_t n)        \
    {                                                                                       \
        T *o = o_;                                                                          \
        const T *a = a_, *b = b_;                                                           \
        for (size_t i = 0; i < n; i++) {                                                    \
            o[i] = xccl_op_##tn##_##opn(a[i], b[i]);                                        \
        }                                                                                   \
    }
XCCL_GPU_PAIRS(EMU)

typedef struct {
    xccl_dtype_t dt;
    xccl_op_t op;
    const char *name;
    xccl_reduce_fn_t emu;
    size_t size, align;
} pair_t;

#define PAIR(DT, tn, T, opn, OP) { DT, OP, #tn "_" #opn, emu_##tn##_##opn, sizeof(T), _Alignof(T) },
static const pair_t pairs[] = { XCCL_GPU_PAIRS(PAIR) };
#define NPAIRS (sizeof(pairs) / sizeof(pairs[0]))

/* Fields of an element, compared one by one (padding is not). */
typedef enum { F_INT, F_FLT, F_DBL } fkind_t;
typedef struct {
    int n;
    struct {
        unsigned off, size;
        fkind_t kind;
    } f[2];
} layout_t;

#define L1(k, s) { 1, { { 0, s, k } } }
#define L2(T, k1, s1, k2, s2) { 2, { { offsetof(T, v), s1, k1 }, { offsetof(T, i), s2, k2 } } }
static const layout_t layouts[XCCL_DT_COUNT] = {
    [XCCL_DT_INT8] = L1(F_INT, 1), [XCCL_DT_UINT8] = L1(F_INT, 1),
    [XCCL_DT_INT16] = L1(F_INT, 2), [XCCL_DT_UINT16] = L1(F_INT, 2),
    [XCCL_DT_INT32] = L1(F_INT, 4), [XCCL_DT_UINT32] = L1(F_INT, 4),
    [XCCL_DT_INT64] = L1(F_INT, 8), [XCCL_DT_UINT64] = L1(F_INT, 8),
    [XCCL_DT_FLOAT] = L1(F_FLT, 4), [XCCL_DT_DOUBLE] = L1(F_DBL, 8),
    [XCCL_DT_FLOAT_COMPLEX] = { 2, { { 0, 4, F_FLT }, { 4, 4, F_FLT } } },
    [XCCL_DT_DOUBLE_COMPLEX] = { 2, { { 0, 8, F_DBL }, { 8, 8, F_DBL } } },
    [XCCL_DT_BOOL] = L1(F_INT, 1), [XCCL_DT_BYTE] = L1(F_INT, 1),
    [XCCL_DT_FLOAT_INT] = L2(xccl_gpu_float_int_t, F_FLT, 4, F_INT, 4),
    [XCCL_DT_DOUBLE_INT] = L2(xccl_gpu_double_int_t, F_DBL, 8, F_INT, 4),
    [XCCL_DT_LONG_INT] = L2(xccl_gpu_long_int_t, F_INT, 8, F_INT, 4),
    [XCCL_DT_2INT] = L2(xccl_gpu_2int_t, F_INT, 4, F_INT, 4),
    [XCCL_DT_SHORT_INT] = L2(xccl_gpu_short_int_t, F_INT, 2, F_INT, 4),
    [XCCL_DT_2FLOAT] = L2(xccl_gpu_2float_t, F_FLT, 4, F_FLT, 4),
    [XCCL_DT_2DOUBLE] = L2(xccl_gpu_2double_t, F_DBL, 8, F_DBL, 8),
};

static int is_loc(xccl_dtype_t dt)
{
    return dt >= XCCL_DT_FLOAT_INT;
}

/* ------------------------------------------------------------------ inputs */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static void put(void *p, uint64_t v, unsigned size)
{
    memcpy(p, &v, size);       /* little-endian: the low bytes */
}

/* An integer field: wrap-around and boundaries, or (loc) few values, so
 * that ties are frequent. */
static void gen_int(void *p, unsigned size, int loc)
{
    uint64_t r = rnd();
    unsigned bits = size * 8;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t v;
    if (loc) {
        v = r % 8 == 0 ? (r >> 8) : (uint64_t) ((int64_t) ((r >> 8) % 5) - 2);
    } else {
        switch (r % 16) {
        case 0: v = 0; break;
        case 1: v = 1; break;
        case 2: v = ~0ull; break;                          /* -1 / max unsigned */
        case 3: v = 1ull << (bits - 1); break;             /* min signed */
        case 4: v = (1ull << (bits - 1)) - 1; break;       /* max signed */
        case 5: v = (uint64_t) ((int64_t) ((r >> 8) % 5) - 2); break;
        case 6: v = 2; break;
        default: v = r >> 4; break;
        }
    }
    put(p, v & mask, size);
}

static const uint32_t f_special[] = {
    0x7fc00000u, 0xffc00000u, 0x7fc01234u, 0xff800001u, /* NaNs: quiet, negative, payload, signalling */
    0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, /* +-inf, +-0 */
    0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu, /* denormals, +-max */
    0x3f800000u, 0xbf800000u, 0x00800000u, 0x40000000u, /* +-1, min normal, 2 */
};
static const uint64_t d_special[] = {
    0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff8000000001234ull, 0xfff0000000000001ull,
    0x7ff0000000000000ull, 0xfff0000000000000ull, 0x0000000000000000ull, 0x8000000000000000ull,
    0x0000000000000001ull, 0x800fffffffffffffull, 0x7fefffffffffffffull, 0xffefffffffffffffull,
    0x3ff0000000000000ull, 0xbff0000000000000ull, 0x0010000000000000ull, 0x4000000000000000ull,
};

/* A float or double field: a special value one time in four (loc: one in
 * two, and small integers otherwise, for ties), else a random number of
 * moderate magnitude (sums and products mostly stay finite and round). */
static void gen_fp(void *p, fkind_t kind, int loc)
{
    uint64_t r = rnd();
    if (r % 4 == 0 || (loc && r % 2 == 0)) {
        unsigned k = (unsigned) (r >> 8) % 16;
        if (kind == F_FLT) {
            memcpy(p, &f_special[k], 4);
        } else {
            memcpy(p, &d_special[k], 8);
        }
        return;
    }
    if (loc) {
        int v = (int) ((r >> 8) % 5) - 2;
        if (kind == F_FLT) {
            float f = (float) v;
            memcpy(p, &f, 4);
        } else {
            double d = v;
            memcpy(p, &d, 8);
        }
        return;
    }
    uint64_t sign = (r >> 2) & 1, e = (r >> 3) % 41;
    if (kind == F_FLT) {
        uint32_t u = (uint32_t) (sign << 31) | (uint32_t) ((127 - 20 + e) << 23) | (uint32_t) ((r >> 16) & 0x7fffff);
        memcpy(p, &u, 4);
    } else {
        uint64_t u = sign << 63 | (1023 - 20 + e) << 52 | ((r >> 12) & 0xfffffffffffffull);
        memcpy(p, &u, 8);
    }
}

static void fill(const pair_t *pr, unsigned char *buf, size_t count)
{
    const layout_t *l = &layouts[pr->dt];
    memset(buf, 0, count * pr->size);
    for (size_t i = 0; i < count; i++) {
        unsigned char *e = buf + i * pr->size;
        if (pr->dt == XCCL_DT_BOOL) {
            uint64_t r = rnd();
            e[0] = r % 2 ? 0 : r % 4 == 0 ? 1 : (unsigned char) (r >> 8);
            continue;
        }
        for (int f = 0; f < l->n; f++) {
            int loc_value = is_loc(pr->dt);
            if (l->f[f].kind == F_INT) {
                gen_int(e + l->f[f].off, l->f[f].size, loc_value);
            } else {
                gen_fp(e + l->f[f].off, l->f[f].kind, loc_value);
            }
        }
    }
}

/* ------------------------------------------------------------------ comparison */

static int is_nan_field(const unsigned char *p, fkind_t kind)
{
    if (kind == F_FLT) {
        uint32_t u;
        memcpy(&u, p, 4);
        return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu);
    }
    if (kind == F_DBL) {
        uint64_t u;
        memcpy(&u, p, 8);
        return (u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (u & 0xfffffffffffffull);
    }
    return 0;
}

static void print_elem(const char *what, const unsigned char *e, const pair_t *pr)
{
    const layout_t *l = &layouts[pr->dt];
    fprintf(stderr, "    %-6s", what);
    for (int f = 0; f < l->n; f++) {
        fprintf(stderr, " 0x");
        for (int b = (int) l->f[f].size - 1; b >= 0; b--) {
            fprintf(stderr, "%02x", e[l->f[f].off + b]);
        }
        if (l->f[f].kind == F_FLT) {
            float v;
            memcpy(&v, e + l->f[f].off, 4);
            fprintf(stderr, " (%g)", (double) v);
        } else if (l->f[f].kind == F_DBL) {
            double v;
            memcpy(&v, e + l->f[f].off, 8);
            fprintf(stderr, " (%g)", v);
        }
    }
    fprintf(stderr, "\n");
}

static int failures;

/* Number of mismatching elements of got against want (both count elements),
 * the first few printed with srcs[0..nsrc) at that index. */
static size_t compare(const pair_t *pr, const char *where, int nsrc, size_t count, const unsigned char *got,
                      const unsigned char *want, unsigned char *const *srcs)
{
    const layout_t *l = &layouts[pr->dt];
    const int nan_any = pr->op == XCCL_OP_SUM || pr->op == XCCL_OP_PROD;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        const unsigned char *g = got + i * pr->size, *w = want + i * pr->size;
        int ok = 1;
        for (int f = 0; f < l->n && ok; f++) {
            const unsigned char *gf = g + l->f[f].off, *wf = w + l->f[f].off;
            if (memcmp(gf, wf, l->f[f].size) != 0 &&
                !(nan_any && is_nan_field(gf, l->f[f].kind) && is_nan_field(wf, l->f[f].kind))) {
                ok = 0;
            }
        }
        if (!ok) {
            if (bad < 3) {
                fprintf(stderr, "MISMATCH %s (%s) nsrc=%d count=%zu index=%zu:\n", pr->name, where, nsrc, count, i);
                print_elem("got", g, pr);
                print_elem("want", w, pr);
                for (int k = 0; k < nsrc && k < 8; k++) {
                    char name[16];
                    snprintf(name, sizeof(name), "src%d", k);
                    print_elem(name, srcs[k] + i * pr->size, pr);
                }
            }
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "FAIL %s (%s) nsrc=%d count=%zu: %zu of %zu elements differ\n", pr->name, where, nsrc,
                count, bad, count);
        failures++;
    }
    return bad;
}

/* want = srcs[0] op srcs[1] op ... op srcs[nsrc-1], with kernel fn. */
static void fold(xccl_reduce_fn_t fn, size_t size, unsigned char *want, unsigned char *const *srcs, int nsrc,
                 size_t count)
{
    memcpy(want, srcs[0], count * size);
    for (int k = 1; k < nsrc; k++) {
        fn(want, want, srcs[k], count);
    }
}

/* ------------------------------------------------------------------ host checks */

static void host_checks(void)
{
    /* Types and the supported set. */
    for (size_t p = 0; p < NPAIRS; p++) {
        if (pairs[p].size != xccl_dtype_size(pairs[p].dt)) {
            fprintf(stderr, "FAIL %s: element size %zu here, %zu in xccl_dtype_size\n", pairs[p].name,
                    pairs[p].size, xccl_dtype_size(pairs[p].dt));
            failures++;
        }
        /* what callers check before handing pointers to xccl_gpu_reduce */
        if (pairs[p].align != xccl_gpu_reduce_align(pairs[p].dt)) {
            fprintf(stderr, "FAIL %s: alignment %zu here, %zu in xccl_gpu_reduce_align\n",
                    pairs[p].name, pairs[p].align, xccl_gpu_reduce_align(pairs[p].dt));
            failures++;
        }
    }
    int nsupported = 0;
    for (int dt = 0; dt < XCCL_DT_COUNT; dt++) {
        for (int op = 0; op < XCCL_OP_COUNT; op++) {
            int host = NULL != xccl_reduce_kernel(dt, op);
            int longd = dt == XCCL_DT_LONG_DOUBLE || dt == XCCL_DT_LONG_DOUBLE_COMPLEX ||
                        dt == XCCL_DT_LONG_DOUBLE_INT;
            int sup = xccl_gpu_reduce_supported(dt, op);
            const char *name = xccl_gpu_reduce_kernel_name(dt, op);
            char want_name[64];
            snprintf(want_name, sizeof(want_name), "xccl_reduce_%s_%s", xccl_dtype_name(dt), xccl_op_name(op));
            if (sup != (host && !longd) || (sup && (NULL == name || strcmp(name, want_name) != 0))) {
                fprintf(stderr, "FAIL %s/%s: supported %d (host kernel %d), name %s (want %s)\n", xccl_dtype_name(dt),
                        xccl_op_name(op), sup, host, name ? name : "NULL", want_name);
                failures++;
            }
            nsupported += sup;
        }
    }
    if ((size_t) nsupported != NPAIRS) {
        fprintf(stderr, "FAIL: %d pairs supported, %zu kernels\n", nsupported, NPAIRS);
        failures++;
    }

    /* The element operations, against the host kernels. */
    const size_t count = 4099;
    const int nsrc = 4;
    unsigned char *srcs[4], *want = malloc(count * 16), *got = malloc(count * 16);
    for (int k = 0; k < nsrc; k++) {
        srcs[k] = malloc(count * 16);
    }
    /* Every variant: ranks on different CPUs run different ones, and the
     * GPU's results must equal each. */
    for (int isa = 0; isa < xccl_reduce_isa_count(); isa++) {
        if (!xccl_reduce_isa_usable(isa)) {
            printf("host: SKIP kernel variant %s: this CPU cannot run it (not compared)\n",
                   xccl_reduce_isa_name(isa));
            continue;
        }
        char where[64];
        snprintf(where, sizeof(where), "host emulation vs %s", xccl_reduce_isa_name(isa));
        int before = failures;
        for (size_t p = 0; p < NPAIRS; p++) {
            rng_state = 0x9e3779b97f4a7c15ull ^ (p * 0x100000001b3ull);
            for (int k = 0; k < nsrc; k++) {
                fill(&pairs[p], srcs[k], count);
            }
            fold(xccl_reduce_kernel_isa(isa, pairs[p].dt, pairs[p].op), pairs[p].size, want, srcs, nsrc, count);
            fold(pairs[p].emu, pairs[p].size, got, srcs, nsrc, count);
            compare(&pairs[p], where, nsrc, count, got, want, srcs);
        }
        printf("host: %zu GPU kernels; their element ops %s the %s variant of xccl_reduce_kernel\n", NPAIRS,
               failures == before ? "match" : "DO NOT match", xccl_reduce_isa_name(isa));
    }
    for (int k = 0; k < nsrc; k++) {
        free(srcs[k]);
    }
    free(want);
    free(got);
}

/* ------------------------------------------------------------------ device */

static struct {
    xccl_curesult_t (*Init)(unsigned);
    xccl_curesult_t (*DeviceGetCount)(int *);
    xccl_curesult_t (*DeviceGet)(xccl_cudevice_t *, int);
    xccl_curesult_t (*DeviceGetName)(char *, int, xccl_cudevice_t);
    xccl_curesult_t (*DeviceGetAttribute)(int *, int, xccl_cudevice_t);
    xccl_curesult_t (*DevicePrimaryCtxRetain)(xccl_cucontext_t *, xccl_cudevice_t);
    xccl_curesult_t (*DevicePrimaryCtxRelease)(xccl_cudevice_t);
    xccl_curesult_t (*CtxSetCurrent)(xccl_cucontext_t);
    xccl_curesult_t (*MemAlloc)(xccl_cudeviceptr_t *, size_t);
    xccl_curesult_t (*MemFree)(xccl_cudeviceptr_t);
    xccl_curesult_t (*MemcpyHtoD)(xccl_cudeviceptr_t, const void *, size_t);
    xccl_curesult_t (*MemcpyDtoH)(void *, xccl_cudeviceptr_t, size_t);
    xccl_curesult_t (*MemsetD8)(xccl_cudeviceptr_t, unsigned char, size_t);
    xccl_curesult_t (*StreamCreate)(xccl_custream_t *, unsigned);
    xccl_curesult_t (*StreamSynchronize)(xccl_custream_t);
    xccl_curesult_t (*StreamDestroy)(xccl_custream_t);
    xccl_curesult_t (*GetErrorString)(xccl_curesult_t, const char **);
    void *ModuleLoadData;      /* only checked for: the stand-in lacks it */
} cu;

static const char *const cu_syms[] = {
    "cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuMemAlloc_v2",
    "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemsetD8_v2", "cuStreamCreate",
    "cuStreamSynchronize", "cuStreamDestroy_v2", "cuGetErrorString", "cuModuleLoadData",
};
_Static_assert(sizeof(cu_syms) / sizeof(cu_syms[0]) == sizeof(cu) / sizeof(void *), "one symbol per member");

static void ck(xccl_curesult_t rc, const char *call, int line)
{
    if (XCCL_CUDA_SUCCESS != rc) {
        const char *s = NULL;
        cu.GetErrorString(rc, &s);
        fprintf(stderr, "FAIL: line %d: %s: %s (%d)\n", line, call, s ? s : "?", rc);
        exit(1);
    }
}
#define CK(call) ck((call), #call, __LINE__)

static void skip(const char *fmt, const char *arg)
{
    if (failures) {
        fprintf(stderr, "%d host check(s) failed\n", failures);
        exit(1);
    }
    printf("SKIP: ");
    printf(fmt, arg);
    printf("\n");
    exit(77);
}

static xccl_custream_t stream;

/* Runs xccl_gpu_reduce into dst (dst - GUARD .. dst + bytes + GUARD is the
 * caller's, set to GUARD_BYTE here unless in_place), copies the result to
 * got and checks the guards.  0, or -1 when it failed (counted). */
static int run(const pair_t *pr, const char *where, xccl_cudeviceptr_t dst, const xccl_cudeviceptr_t *src,
               int nsrc, size_t count, int in_place, unsigned char *got, unsigned char *guard_buf)
{
    const size_t bytes = count * pr->size;
    if (!in_place) {
        CK(cu.MemsetD8(dst - GUARD, GUARD_BYTE, bytes + 2 * GUARD));
    }
    const void *srcs[MAX_NSRC];
    for (int k = 0; k < nsrc; k++) {
        srcs[k] = (const void *) (uintptr_t) src[k];
    }
    const char *err = NULL;
    if (xccl_gpu_reduce(pr->dt, pr->op, (void *) (uintptr_t) dst, srcs, nsrc, count, stream, &err)) {
        fprintf(stderr, "FAIL %s (%s) nsrc=%d count=%zu: xccl_gpu_reduce: %s\n", pr->name, where, nsrc, count, err);
        failures++;
        return -1;
    }
    CK(cu.StreamSynchronize(stream));
    if (bytes) {
        CK(cu.MemcpyDtoH(got, dst, bytes));
    }
    if (!in_place) {
        CK(cu.MemcpyDtoH(guard_buf, dst - GUARD, GUARD));
        CK(cu.MemcpyDtoH(guard_buf + GUARD, dst + bytes, GUARD));
        for (int i = 0; i < 2 * GUARD; i++) {
            if (guard_buf[i] != GUARD_BYTE) {
                fprintf(stderr, "FAIL %s (%s) nsrc=%d count=%zu: wrote outside dst (guard byte %d: 0x%02x)\n",
                        pr->name, where, nsrc, count, i, guard_buf[i]);
                failures++;
                return -1;
            }
        }
    }
    return 0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    host_checks();

    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (NULL == h) {
        skip("cannot load libcuda.so.1 (%s)", dlerror());
    }
    void **slot = (void **) &cu;
    for (size_t i = 0; i < sizeof(cu_syms) / sizeof(cu_syms[0]); i++) {
        if (NULL == (slot[i] = dlsym(h, cu_syms[i]))) {
            skip("libcuda.so.1 has no %s (a stand-in driver?)", cu_syms[i]);
        }
    }
    const char *s = NULL;
    xccl_curesult_t rc = cu.Init(0);
    if (XCCL_CUDA_SUCCESS != rc) {
        cu.GetErrorString(rc, &s);
        skip("cuInit: %s", s ? s : "error");
    }
    int ndev = 0;
    if (XCCL_CUDA_SUCCESS != cu.DeviceGetCount(&ndev) || ndev < 1) {
        skip("%s", "no CUDA device");
    }
    xccl_cudevice_t dev;
    xccl_cucontext_t ctx;
    char name[128] = "?";
    int major = 0, minor = 0;
    CK(cu.DeviceGet(&dev, 0));
    CK(cu.DeviceGetName(name, sizeof(name), dev));
    CK(cu.DeviceGetAttribute(&major, 75, dev));   /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
    CK(cu.DeviceGetAttribute(&minor, 76, dev));   /* ..._MINOR */
    CK(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CK(cu.CtxSetCurrent(ctx));
    CK(cu.StreamCreate(&stream, XCCL_CU_STREAM_DEFAULT));
    printf("device 0: %s (sm_%d%d); %s\n", name, major, minor, xccl_gpu_kernels_status());

    const char *err = NULL;
    if (xccl_gpu_kernels_load(&err)) {
        if (strstr(err, "(209)")) {             /* CUDA_ERROR_NO_BINARY_FOR_GPU */
            char why[300];
            snprintf(why, sizeof(why), "sm_%d%d: %s", major, minor, err);
            skip("no kernel image for this device: %s", why);
        }
        fprintf(stderr, "FAIL: loading the kernels: %s\n", err);
        return 1;
    }

    static const size_t counts[] = { 0, 1, 31, 1000, (1u << 20) + 7 };
    static const int nsrcs[] = { 1, 2, 3, 8, 17 };
    const size_t maxcount = (1u << 20) + 7, maxbytes = maxcount * 16;
    const size_t alloc = maxbytes + 2 * GUARD + 16;

    xccl_cudeviceptr_t d_src[MAX_NSRC], d_mis[3], d_dst;
    unsigned char *h_src[MAX_NSRC];
    for (int k = 0; k < MAX_NSRC; k++) {
        CK(cu.MemAlloc(&d_src[k], alloc));
        if (NULL == (h_src[k] = malloc(maxbytes))) {
            fprintf(stderr, "FAIL: out of memory\n");
            return 1;
        }
    }
    for (int k = 0; k < 3; k++) {
        CK(cu.MemAlloc(&d_mis[k], alloc));
    }
    CK(cu.MemAlloc(&d_dst, alloc));
    unsigned char *want = malloc(maxbytes), *got = malloc(maxbytes), guard_buf[2 * GUARD];
    if (NULL == want || NULL == got) {
        fprintf(stderr, "FAIL: out of memory\n");
        return 1;
    }
    const xccl_cudeviceptr_t dst = d_dst + GUARD;     /* 16-byte aligned, guarded */
    unsigned long runs = 0;

    for (size_t p = 0; p < NPAIRS; p++) {
        const pair_t *pr = &pairs[p];
        const xccl_reduce_fn_t host = xccl_reduce_kernel(pr->dt, pr->op);
        const int failures_before = failures;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            const size_t count = counts[c], bytes = count * pr->size;
            const int maxn = count <= 1000 ? MAX_NSRC : 8;
            rng_state = 0x243f6a8885a308d3ull ^ (p << 32) ^ count;
            for (int k = 0; k < maxn; k++) {
                fill(pr, h_src[k], count);
                if (bytes) {
                    CK(cu.MemcpyHtoD(d_src[k], h_src[k], bytes));
                }
            }
            /* Separate destination, aligned: the vector path and its tail. */
            for (size_t j = 0; j < sizeof(nsrcs) / sizeof(nsrcs[0]); j++) {
                const int nsrc = nsrcs[j];
                if (nsrc > maxn) {
                    continue;
                }
                fold(host, pr->size, want, h_src, nsrc, count);
                if (0 == run(pr, "aligned", dst, d_src, nsrc, count, 0, got, guard_buf)) {
                    compare(pr, "aligned", nsrc, count, got, want, h_src);
                }
                runs++;
            }
            /* Every pointer one element off 16-byte alignment: scalar path. */
            xccl_cudeviceptr_t mis[3];
            for (int k = 0; k < 3; k++) {
                mis[k] = d_mis[k] + GUARD + pr->size;
                if (bytes) {
                    CK(cu.MemcpyHtoD(mis[k], h_src[k], bytes));
                }
            }
            fold(host, pr->size, want, h_src, 3, count);
            if (0 == run(pr, "misaligned", dst + pr->size, mis, 3, count, 0, got, guard_buf)) {
                compare(pr, "misaligned", 3, count, got, want, h_src);
            }
            /* In place: dst is the first source (last: it overwrites it). */
            if (0 == run(pr, "in place", d_src[0], d_src, 3, count, 1, got, guard_buf)) {
                compare(pr, "in place", 3, count, got, want, h_src);
            }
            runs += 2;
        }
        printf("%-24s %s\n", pr->name, failures == failures_before ? "ok" : "FAILED");
    }

    /* Batched copies: slices of d_src[0] (random bytes) into d_dst at
     * shuffled, disjoint places. */
    {
        static const int ns[] = { 1, 2, 7, XCCL_GPU_MAX_COPIES };
        const size_t cap = (alloc - 2 * GUARD) / 2;     /* source bytes used, dst span */
        unsigned char *h = malloc(cap), *back = malloc(alloc);
        if (NULL == h || NULL == back) {
            fprintf(stderr, "FAIL: out of memory\n");
            return 1;
        }
        rng_state = 0x13198a2e03707344ull;
        for (size_t i = 0; i < cap; i++) {
            h[i] = (unsigned char) rnd();
        }
        CK(cu.MemcpyHtoD(d_src[0], h, cap));
        for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
            xccl_gpu_copies_t c;
            memset(&c, 0, sizeof(c));
            c.n = ns[t];
            size_t at = 0;
            for (int e = 0; e < c.n; e++) {
                /* lengths 0, odd, and up to 3 MiB + 5 for the single copy */
                size_t len = 1 == c.n ? (3u << 20) + 5 : (e % 5 == 4 ? 0 : (size_t) (rnd() % 70000) + 1);
                len = len > (cap - at) / 2 ? (cap - at) / 2 : len;
                const size_t off = (e % 3 == 1) ? 1 : 0;    /* some off 16-byte alignment */
                c.src[e] = d_src[0] + at + off;
                c.dst[e] = d_dst + GUARD + at + off;
                c.len[e] = len;
                at += len + off + 16;
            }
            CK(cu.MemsetD8(d_dst, GUARD_BYTE, alloc));
            if (0 != xccl_gpu_copy_batch(&c, stream, &err)) {
                fprintf(stderr, "FAIL: xccl_gpu_copy_batch (%d copies): %s\n", c.n, err);
                failures++;
                continue;
            }
            CK(cu.StreamSynchronize(stream));
            CK(cu.MemcpyDtoH(back, d_dst, alloc));
            /* expected: GUARD_BYTE everywhere except the copies */
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < alloc; i++) {
                unsigned char want_b = GUARD_BYTE;
                for (int e = 0; e < c.n; e++) {
                    const size_t d = (size_t) (c.dst[e] - d_dst);
                    if (i >= d && i < d + c.len[e]) {
                        want_b = h[(size_t) (c.src[e] - d_src[0]) + (i - d)];
                    }
                }
                if (back[i] != want_b && 0 == bad++) {
                    first = i;
                }
            }
            printf("copy batch of %2d: %s\n", c.n, bad ? "FAILED" : "ok");
            if (bad) {
                fprintf(stderr, "FAIL: copy batch of %d: %zu bytes wrong, first at %zu\n", c.n, bad, first);
                failures++;
            }
            runs++;
        }
        xccl_gpu_copies_t none = { .n = XCCL_GPU_MAX_COPIES + 1 };
        if (0 == xccl_gpu_copy_batch(&none, stream, &err)) {
            fprintf(stderr, "FAIL: %d copies accepted\n", none.n);
            failures++;
        }
        free(h);
        free(back);
    }

    /* Refusals: no kernel for long double; count 0 touches nothing. */
    const void *one[1] = { (const void *) (uintptr_t) d_src[0] };
    if (0 == xccl_gpu_reduce(XCCL_DT_LONG_DOUBLE, XCCL_OP_SUM, (void *) (uintptr_t) dst, one, 1, 1, stream, &err)) {
        fprintf(stderr, "FAIL: long double SUM was accepted\n");
        failures++;
    } else {
        printf("long double SUM refused: %s\n", err);
    }

    for (int k = 0; k < MAX_NSRC; k++) {
        cu.MemFree(d_src[k]);
        free(h_src[k]);
    }
    for (int k = 0; k < 3; k++) {
        cu.MemFree(d_mis[k]);
    }
    cu.MemFree(d_dst);
    cu.StreamDestroy(stream);
    xccl_gpu_kernels_release();
    xccl_gpu_kernels_fini();
    cu.DevicePrimaryCtxRelease(dev);
    free(want);
    free(got);
    printf("%lu reductions on the device, %d failure(s)\n", runs, failures);
    return failures ? 1 : 0;
}
