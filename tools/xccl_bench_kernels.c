/*
 * xccl_bench_kernels.c: -k, a table of the local reduction kernels instead
 * of the collectives: xccl's xccl_reduce_kernel() against Open MPI's op
 * framework (MPI_Reduce_local), timed and compared element by element.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xccl_base.h"
#include "xccl_bench_call.h"

#define KERNEL_REPS   7
#define KERNEL_WORK   ((size_t)32 << 20) /* operand bytes per timing sample */

static const size_t kernel_sizes[] = { 4096, (size_t)1 << 20, (size_t)16 << 20 };
#define NKSIZES (sizeof(kernel_sizes) / sizeof(kernel_sizes[0]))

/* Kernel-table rows: an MPI (type, op) pair and its xccl equivalent. */
typedef struct {
    const char *tname, *oname;
    MPI_Datatype mt;
    MPI_Op mo;
    xccl_dtype_t xt;
    xccl_op_t xo;
} kcase_t;

/* Value/index pairs as MPI_FLOAT_INT and MPI_DOUBLE_INT lay them out. */
typedef struct { float v; int i; } float_int_t;
typedef struct { double v; int i; } double_int_t;

static int kernel_cases(kcase_t *k)
{
    int n = 0;
#define KC(T, O, XT, XO) k[n++] = (kcase_t){ #T, #O, T, O, XT, XO }
    KC(MPI_INT8_T, MPI_SUM, XCCL_DT_INT8, XCCL_OP_SUM);
    KC(MPI_UINT8_T, MPI_SUM, XCCL_DT_UINT8, XCCL_OP_SUM);
    KC(MPI_INT16_T, MPI_SUM, XCCL_DT_INT16, XCCL_OP_SUM);
    KC(MPI_INT32_T, MPI_SUM, XCCL_DT_INT32, XCCL_OP_SUM);
    KC(MPI_INT64_T, MPI_SUM, XCCL_DT_INT64, XCCL_OP_SUM);
    KC(MPI_FLOAT, MPI_SUM, XCCL_DT_FLOAT, XCCL_OP_SUM);
    KC(MPI_DOUBLE, MPI_SUM, XCCL_DT_DOUBLE, XCCL_OP_SUM);
    KC(MPI_FLOAT, MPI_MAX, XCCL_DT_FLOAT, XCCL_OP_MAX);
    KC(MPI_DOUBLE, MPI_MAX, XCCL_DT_DOUBLE, XCCL_OP_MAX);
    KC(MPI_INT32_T, MPI_BXOR, XCCL_DT_INT32, XCCL_OP_BXOR);
    KC(MPI_INT32_T, MPI_LAND, XCCL_DT_INT32, XCCL_OP_LAND);
    KC(MPI_FLOAT_INT, MPI_MAXLOC, XCCL_DT_FLOAT_INT, XCCL_OP_MAXLOC);
    KC(MPI_DOUBLE_INT, MPI_MINLOC, XCCL_DT_DOUBLE_INT, XCCL_OP_MINLOC);
#undef KC
    return n;
}
#define MAX_KCASES 16

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: plenty for test inputs */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* Operand values for the comparison.  Narrow integer sums are made to
 * overflow (wrap vs saturate shows); float values are small integers so
 * results are exact; pair values repeat often so index tie-breaks matter. */
static void fill_operand(const kcase_t *kc, void *buf, size_t count, uint64_t seed)
{
    uint64_t s = seed | 1;
    memset(buf, 0, count * xccl_dtype_size(kc->xt));  /* defined padding bytes */
    for (size_t i = 0; i < count; i++) {
        uint64_t r = rng_next(&s);
        switch (kc->xt) {
        case XCCL_DT_INT8: ((int8_t *)buf)[i] = (int8_t)(100 + r % 28); break;
        case XCCL_DT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(200 + r % 56); break;
        case XCCL_DT_INT16: ((int16_t *)buf)[i] = (int16_t)(20000 + r % 12768); break;
        case XCCL_DT_INT32:
            ((int32_t *)buf)[i] = kc->xo == XCCL_OP_LAND && r % 3 == 0 ? 0 : (int32_t)(uint32_t)r;
            break;
        case XCCL_DT_INT64: ((int64_t *)buf)[i] = (int64_t)r; break;
        case XCCL_DT_FLOAT: ((float *)buf)[i] = (float)(r % 2001) - 1000.0f; break;
        case XCCL_DT_DOUBLE: ((double *)buf)[i] = (double)(r % 2001) - 1000.0; break;
        case XCCL_DT_FLOAT_INT:
            ((float_int_t *)buf)[i].v = (float)(r % 8);
            ((float_int_t *)buf)[i].i = (int)((r >> 8) % 1000);
            break;
        case XCCL_DT_DOUBLE_INT:
            ((double_int_t *)buf)[i].v = (double)(r % 8);
            ((double_int_t *)buf)[i].i = (int)((r >> 8) % 1000);
            break;
        default: break;
        }
    }
}

/* Do elements X and Y hold the same result?  Integers and floats bitwise;
 * pairs compare value and index only (padding is not part of the result). */
static bool same_elem(xccl_dtype_t t, const void *x, const void *y, size_t esize)
{
    if (t == XCCL_DT_FLOAT_INT) {
        const float_int_t *a = x, *b = y;
        return memcmp(&a->v, &b->v, sizeof a->v) == 0 && a->i == b->i;
    }
    if (t == XCCL_DT_DOUBLE_INT) {
        const double_int_t *a = x, *b = y;
        return memcmp(&a->v, &b->v, sizeof a->v) == 0 && a->i == b->i;
    }
    return memcmp(x, y, esize) == 0;
}

/* Is V the saturated (clamped) sum of A and B, for the narrow integer sums? */
static bool is_saturated_sum(xccl_dtype_t t, const void *a, const void *b, const void *v,
                             size_t i)
{
    long s, lo, hi, got;
    switch (t) {
    case XCCL_DT_INT8:
        s = (long)((const int8_t *)a)[i] + ((const int8_t *)b)[i];
        got = ((const int8_t *)v)[i]; lo = INT8_MIN; hi = INT8_MAX; break;
    case XCCL_DT_UINT8:
        s = (long)((const uint8_t *)a)[i] + ((const uint8_t *)b)[i];
        got = ((const uint8_t *)v)[i]; lo = 0; hi = UINT8_MAX; break;
    case XCCL_DT_INT16:
        s = (long)((const int16_t *)a)[i] + ((const int16_t *)b)[i];
        got = ((const int16_t *)v)[i]; lo = INT16_MIN; hi = INT16_MAX; break;
    default:
        return false;
    }
    return got == (s < lo ? lo : s > hi ? hi : s);
}

/* Seconds per call of one implementation: xccl (b = a op b through the
 * kernel) or stock (MPI_Reduce_local, which also computes b = a op b). */
static double time_kernel(const kcase_t *kc, xccl_reduce_fn_t fn, bool xccl, const void *a,
                          void *b, size_t count, size_t inner)
{
    double t0 = MPI_Wtime();
    for (size_t j = 0; j < inner; j++) {
        if (xccl)
            fn(b, a, b, count);
        else
            MPI_Reduce_local(a, b, (int)count, kc->mt, kc->mo);
    }
    return (MPI_Wtime() - t0) / (double)inner;
}

void run_kernel_table(void)
{
    kcase_t cases[MAX_KCASES];
    const int ncases = kernel_cases(cases);
    const size_t maxb = kernel_sizes[NKSIZES - 1];
    /* a, b: timing operands; b1, b2: the two results of the comparison. */
    char *a = xmalloc(maxb), *b = xmalloc(maxb), *b1 = xmalloc(maxb), *b2 = xmalloc(maxb);
    bool any_sat = false;

    printf("# kernel table (rank 0): xccl_reduce_kernel() computing b = a op b vs\n"
           "#   MPI_Reduce_local(a, b) (Open MPI op framework, op/avx where it applies)\n"
           "# GB/s = bytes of one operand / time per call (GB = 1e9 B), median of %d\n"
           "#   interleaved samples of >= %zu MiB each; ratio = xccl GB/s / stock GB/s\n"
           "# result: both results compared element by element (exact inputs)\n",
           KERNEL_REPS, KERNEL_WORK >> 20);
    printf("# %-16s %-10s %9s %9s %10s %11s %6s  %s\n", "type", "op", "size(B)", "count",
           "xccl GB/s", "stock GB/s", "ratio", "result");

    for (int c = 0; c < ncases; c++) {
        const kcase_t *kc = &cases[c];
        const xccl_reduce_fn_t fn = xccl_reduce_kernel(kc->xt, kc->xo);
        const size_t esize = xccl_dtype_size(kc->xt);
        MPI_Aint lb, extent;
        MPI_Type_get_extent(kc->mt, &lb, &extent);
        for (size_t s = 0; s < NKSIZES; s++) {
            const size_t bytes = kernel_sizes[s], count = bytes / esize;
            printf("  %-16s %-10s %9zu %9zu ", kc->tname, kc->oname, bytes, count);
            if (!fn || (size_t)extent != esize || lb != 0) {
                printf("%10s %11s %6s  %s\n", "-", "-", "-",
                       fn ? "layout differs from MPI's" : "no xccl kernel");
                continue;
            }

            /* Correctness: the same operands through both. */
            fill_operand(kc, a, count, 0x1234 + s);
            fill_operand(kc, b1, count, 0x5678 + s);
            memcpy(b2, b1, count * esize);
            memcpy(b, b1, count * esize);   /* the untouched b, for the saturation test */
            fn(b1, a, b1, count);
            MPI_Reduce_local(a, b2, (int)count, kc->mt, kc->mo);
            size_t ndiff = 0;
            bool all_sat = true;
            for (size_t i = 0; i < count; i++) {
                if (same_elem(kc->xt, b1 + i * esize, b2 + i * esize, esize))
                    continue;
                ndiff++;
                all_sat = all_sat && kc->xo == XCCL_OP_SUM && is_saturated_sum(kc->xt, a, b, b2, i);
            }

            /* Timing: alternate which goes first; warm both up once. */
            const size_t inner = bytes >= KERNEL_WORK ? 1 : KERNEL_WORK / bytes;
            double gbs[NMODE][KERNEL_REPS];
            time_kernel(kc, fn, true, a, b, count, 1);
            time_kernel(kc, fn, false, a, b, count, 1);
            for (int r = 0; r < KERNEL_REPS; r++)
                for (int k = 0; k < NMODE; k++) {
                    int m = (r % 2 == 0) ? k : NMODE - 1 - k;
                    double t = time_kernel(kc, fn, m == M_XCCL, a, b, count, inner);
                    gbs[m][r] = (double)bytes / t / 1e9;
                }
            double gx = median(gbs[M_XCCL], KERNEL_REPS), gs = median(gbs[M_STOCK], KERNEL_REPS);

            char result[64];
            if (!ndiff)
                snprintf(result, sizeof result, "same");
            else
                snprintf(result, sizeof result, "DIFFERS %zu/%zu%s", ndiff, count,
                         all_sat ? " (a)" : "");
            any_sat |= ndiff && all_sat;
            printf("%10.2f %11.2f %6.2f  %s\n", gx, gs, gx / gs, result);
            fflush(stdout);
        }
    }
    if (any_sat)
        printf("# (a) stock op/avx saturates (ompi#8045): every differing stock element is the\n"
               "#     clamped sum; xccl wraps modulo 2^N, as Open MPI's own C loops (op/base) do\n");
    free(a);
    free(b);
    free(b1);
    free(b2);
}
