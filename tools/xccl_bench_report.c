/*
 * xccl_bench_report.c: what rank 0 prints: the header, one table per
 * collective (time, algbw, busbw, ratio, check; -P: then the persistent
 * columns), the summary (geometric means of the ratios, check counts),
 * and the small arithmetic they need.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xccl_bench_call.h"

#define LINE_MAX_W    120

static double busbw_factor(int coll, int p);
static double exp_any(double x);

/* ------------------------------------------------------------------------ */
/* Header                                                                   */
/* ------------------------------------------------------------------------ */

/* First line of MPI_Get_library_version, cut to fit a header line. */
void library_version(char *buf, size_t cap)
{
    char full[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(full, &len);
    full[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    full[strcspn(full, "\r\n")] = '\0';
    size_t keep = LINE_MAX_W - 12;    /* room for "# library: " */
    if (keep > cap - 1)
        keep = cap - 1;
    snprintf(buf, cap, "%.*s", (int)keep, full);
}

/* Median GB/s of MEMCPY_REPS copies of 64 MiB on this core. */
double memcpy_bandwidth(void)
{
    char *src = xmalloc(MEMCPY_BYTES), *dst = xmalloc(MEMCPY_BYTES);
    memset(src, 1, MEMCPY_BYTES);     /* fault every page in before timing */
    memset(dst, 2, MEMCPY_BYTES);
    double gbs[MEMCPY_REPS];
    volatile char sink = 0;
    for (int r = 0; r < MEMCPY_REPS; r++) {
        double t0 = MPI_Wtime();
        memcpy(dst, src, MEMCPY_BYTES);
        double t = MPI_Wtime() - t0;
        sink ^= dst[(size_t)r * 4099];   /* keep the copy observable */
        gbs[r] = (double)MEMCPY_BYTES / t / 1e9;
    }
    (void)sink;
    free(src);
    free(dst);
    return median(gbs, MEMCPY_REPS);
}

void print_header(const bench_t *B, const char *libver, double memcpy_gbs,
                  bool xccl_loaded)
{
    if (B->rank != 0)
        return;
    const opts_t *o = B->o;
    printf("# xccl_bench: %s\n",
           o->kernels ? "reduction kernels, xccl vs Open MPI op framework"
           : o->gpu   ? "CUDA device buffers: xccl vs staged through host + stock Open MPI,\n"
                        "#   same run, interleaved"
                      : "xccl vs stock Open MPI collectives, same run, interleaved");
    printf("# library: %s\n", libver);
    printf("# memcpy: %.2f GB/s (one core, %zu MiB, median of %d)\n", memcpy_gbs,
           MEMCPY_BYTES >> 20, MEMCPY_REPS);
    if (o->kernels)
        return;
    char iters[64];
    if (o->iters)
        snprintf(iters, sizeof iters, "%d", o->iters);
    else
        snprintf(iters, sizeof iters, "auto (%u MiB per round, %d..%d)", AUTO_PAYLOAD >> 20,
                 AUTO_MIN_IT, AUTO_MAX_IT);
    printf("# np=%d  rounds=%d  iters/round=%s  warmup=%d  sizes %zu..%zu x%u\n", B->size,
           o->rounds, iters, o->warmup, o->minbytes, o->maxbytes, o->factor);
    if (!xccl_loaded)
        printf("xccl_bench: xccl not loaded (cvar %s not found): measuring the stock stack only\n",
               colls[C_ALLREDUCE].cvar);
    else
        printf("# xccl on/off per call: MPI_T cvars coll_xccl_<collective>_enable = 1/0\n");
    if (o->nonblocking_all)
        printf("# both columns: nonblocking calls, MPI_I<collective> then MPI_Wait (-I)\n");
    else if (o->nonblocking)
        printf("# xccl column: nonblocking calls, MPI_I<collective> then MPI_Wait (-i)\n");
    if (o->persistent)
        printf("# -P: also persistent requests (init once per size, MPI_Start + MPI_Wait per\n"
               "#   call), xccl and %s, in the same interleaved rounds\n", mode_names[M_STOCK]);
    if (o->quiet)
        return;
    const char *st = mode_names[M_STOCK];
    printf("# time: per-call average over ITERS calls, max over ranks, median over rounds;\n"
           "#   rounds alternate xccl-first / %s-first; time in us\n"
           "# algbw = size / time, busbw = algbw * factor (nccl-tests): allreduce 2(p-1)/p;\n"
           "#   allgather, reduce_scatter(_block), alltoall (p-1)/p; bcast 1; GB/s, GB = 1e9 B\n"
           "# ratio = %s time / xccl time (> 1: xccl faster)\n"
           "# check = xccl/%s: every element of one call per size checked on every rank\n"
           "#   (allreduce also in place); - = not run.  Datatype MPI_FLOAT, op MPI_SUM;\n"
           "#   bcast root rotates per round (round %% p), its check uses root p-1\n",
           st, st, st);
    if (o->persistent)
        printf("# persistent columns (-P): pxccl, pstock = time per MPI_Start + MPI_Wait of one\n"
               "#   request (rooted ones at root 0, bcast too); px/x = pxccl / xccl time\n"
               "#   (< 1: the persistent form is faster); ps/px = pstock / pxccl (> 1: xccl\n"
               "#   faster); pcheck = xccl/%s persistent: one start per size checked\n", st);
    if (o->gpu)
        printf("# -g: the check copies the device result back (cuMemcpyDtoH) and also runs\n"
               "#   allreduce on order-sensitive float inputs: the result must be close to the\n"
               "#   host reference and bitwise identical on every rank (hash min = max)\n");
}

/* ------------------------------------------------------------------------ */
/* Table output (rank 0)                                                    */
/* ------------------------------------------------------------------------ */

/* Columns: size count | xccl time algbw busbw | stock time algbw busbw | ratio check */
#define ROW_FMT "%12s %11s  %10s %7s %7s  %10s %7s %7s  %6s  %s\n"
/* -P: then the persistent ones (after check: scripts read the columns before) */
#define ROW_FMT_P "%12s %11s  %10s %7s %7s  %10s %7s %7s  %6s  %-9s  %10s %10s %6s %6s  %s\n"
/* -g: then the copy reference (after check: scripts read the columns before) */
#define ROW_FMT_GPU "%12s %11s  %10s %7s %7s  %10s %7s %7s  %6s  %-9s %9s %10s %10s\n"

void print_table_header(const bench_t *B, int coll)
{
    if (B->rank != 0)
        return;
    char factor[32];
    if (coll == C_ALLREDUCE)
        snprintf(factor, sizeof factor, "2(p-1)/p = %.3f", busbw_factor(coll, B->size));
    else if (coll == C_BCAST || coll == C_REDUCE)
        snprintf(factor, sizeof factor, "1");
    else if (coll == C_BARRIER)
        snprintf(factor, sizeof factor, "-");
    else
        snprintf(factor, sizeof factor, "(p-1)/p = %.3f", busbw_factor(coll, B->size));
    bool reduces = coll == C_ALLREDUCE || coll == C_REDUCE_SCATTER ||
                   coll == C_REDUCE_SCATTER_BLOCK || coll == C_REDUCE;
    printf("#\n# %s  np=%d  MPI_FLOAT%s  rounds=%d (median)  busbw factor %s\n",
           colls[coll].name, B->size, reduces ? " MPI_SUM" : "", B->o->rounds, factor);
    if (!B->o->quiet)
        printf("# size = %s\n", colls[coll].size_means);
    if (!B->o->quiet && coll == C_ALLTOALLV_MOE)
        moe_describe(B);
    if (!B->cv[coll].found && B->cv[C_ALLREDUCE].found)
        printf("# cvar %s not found: stock only\n", colls[coll].cvar);
    printf("#%25s%s  %s%s\n", "", "----------- xccl ---------",
           B->o->gpu ? "--------- staged ---------" : "---------- stock ---------",
           B->o->persistent ? "                     ------------ persistent -----------" : "");
    if (B->o->gpu) {
        printf("# d2d: one device-to-device copy of size on rank 0's device, same run; bound: the\n"
               "#   least traffic on that device's memory at the copy's speed (per rank sharing it:\n"
               "#   allreduce, alltoall 1 copy of size; allgather, reduce_scatter (p+1)/2p; bcast\n"
               "#   1/2); xccl/bound: xccl's time over it\n");
        printf(ROW_FMT_GPU, "#    size(B)", "count", "time(us)", "algbw", "busbw", "time(us)", "algbw",
               "busbw", "ratio", "check", "d2d(us)", "bound(us)", "xccl/bound");
    } else if (B->o->persistent) {
        printf(ROW_FMT_P, "#    size(B)", "count", "time(us)", "algbw", "busbw", "time(us)",
               "algbw", "busbw", "ratio", "check", "pxccl(us)", "pstock(us)", "px/x", "ps/px",
               "pcheck");
    } else {
        printf(ROW_FMT, "#    size(B)", "count", "time(us)", "algbw", "busbw", "time(us)", "algbw",
               "busbw", "ratio", "check");
    }
    fflush(stdout);
}

/* GB/s in a 7-wide column; large values (np=1 no-ops) lose the decimals. */
static void fmt_bw(char *buf, size_t cap, double gbs)
{
    snprintf(buf, cap, gbs < 1000.0 ? "%.2f" : "%.0f", gbs);
}

/* A / B with two decimals, or "-" when either was not measured. */
static void fmt_ratio(char *buf, size_t cap, double a, double b)
{
    if (a > 0.0 && b > 0.0)
        snprintf(buf, cap, "%.2f", a / b);
    else
        snprintf(buf, cap, "-");
}

static const char *const ck_name[] = { [CK_NONE] = "-", [CK_OK] = "ok", [CK_FAIL] = "FAIL" };

/* -P's columns after check. */
static void print_row_persistent(const row_t *r, const char *const first[10])
{
    char pt[NMODE][16], blk[16], stock[16], check[16];
    for (int m = 0; m < NMODE; m++)
        if (r->pt[m] > 0.0)
            snprintf(pt[m], sizeof pt[m], "%.2f", r->pt[m] * 1e6);
        else
            snprintf(pt[m], sizeof pt[m], "-");
    fmt_ratio(blk, sizeof blk, r->pt[M_XCCL], r->t[M_XCCL]);
    fmt_ratio(stock, sizeof stock, r->pt[M_STOCK], r->pt[M_XCCL]);
    snprintf(check, sizeof check, "%s/%s", ck_name[r->pcheck[M_XCCL]], ck_name[r->pcheck[M_STOCK]]);
    printf(ROW_FMT_P, first[0], first[1], first[2], first[3], first[4], first[5], first[6],
           first[7], first[8], first[9], pt[M_XCCL], pt[M_STOCK], blk, stock, check);
}

void print_row(const bench_t *B, int coll, const row_t *r)
{
    char size[24], count[24], cell[NMODE][3][16], ratio[16], check[16];
    const double bus = busbw_factor(coll, B->size);
    const char *const *ck = ck_name;

    snprintf(size, sizeof size, "%zu", r->bytes);
    snprintf(count, sizeof count, "%zu", r->count);
    for (int m = 0; m < NMODE; m++) {
        if (r->t[m] > 0.0) {
            double algbw = (double)r->bytes / r->t[m] / 1e9;
            snprintf(cell[m][0], sizeof cell[m][0], "%.2f", r->t[m] * 1e6);
            fmt_bw(cell[m][1], sizeof cell[m][1], algbw);
            fmt_bw(cell[m][2], sizeof cell[m][2], algbw * bus);
            if (r->bytes == 0)     /* barrier: a time, no bandwidth */
                for (int j = 1; j < 3; j++)
                    snprintf(cell[m][j], sizeof cell[m][j], "-");
        } else {               /* not measured (or below the timer's resolution) */
            for (int j = 0; j < 3; j++)
                snprintf(cell[m][j], sizeof cell[m][j], "-");
        }
    }
    fmt_ratio(ratio, sizeof ratio, r->t[M_STOCK], r->t[M_XCCL]);
    snprintf(check, sizeof check, "%s/%s", ck[r->check[M_XCCL]], ck[r->check[M_STOCK]]);

    if (B->o->gpu) {
        char d2d[16] = "-", bound[16] = "-", over[16] = "-";
        if (r->d2d > 0.0) {
            snprintf(d2d, sizeof d2d, "%.2f", r->d2d * 1e6);
            snprintf(bound, sizeof bound, "%.2f", r->bound * 1e6);
            if (r->t[M_XCCL] > 0.0)
                snprintf(over, sizeof over, "%.2f", r->t[M_XCCL] / r->bound);
        }
        printf(ROW_FMT_GPU, size, count, cell[M_XCCL][0], cell[M_XCCL][1], cell[M_XCCL][2],
               cell[M_STOCK][0], cell[M_STOCK][1], cell[M_STOCK][2], ratio, check, d2d, bound, over);
    } else if (B->o->persistent) {
        const char *const first[10] = { size, count, cell[M_XCCL][0], cell[M_XCCL][1],
                                         cell[M_XCCL][2], cell[M_STOCK][0], cell[M_STOCK][1],
                                         cell[M_STOCK][2], ratio, check };
        print_row_persistent(r, first);
    } else {
        printf(ROW_FMT, size, count, cell[M_XCCL][0], cell[M_XCCL][1], cell[M_XCCL][2],
               cell[M_STOCK][0], cell[M_STOCK][1], cell[M_STOCK][2], ratio, check);
    }
    fflush(stdout);
}

/* Count ROW into its collective's summary. */
void summary_add(summary_t *sum, const row_t *row)
{
    for (int m = 0; m < NMODE; m++) {
        sum->run[m] += row->check[m] != CK_NONE;
        sum->fail[m] += row->check[m] == CK_FAIL;
        sum->prun[m] += row->pcheck[m] != CK_NONE;
        sum->pfail[m] += row->pcheck[m] == CK_FAIL;
    }
    if (row->t[M_XCCL] > 0 && row->t[M_STOCK] > 0) {
        double l = ln_pos(row->t[M_STOCK] / row->t[M_XCCL]);
        sum->logsum_all += l;
        sum->n_all++;
        if (row->bytes >= ((size_t)1 << 20)) {
            sum->logsum_big += l;
            sum->n_big++;
        }
    }
    if (row->pt[M_XCCL] > 0 && row->t[M_XCCL] > 0) {
        sum->plog_blk += ln_pos(row->pt[M_XCCL] / row->t[M_XCCL]);
        sum->pn_blk++;
    }
    if (row->pt[M_XCCL] > 0 && row->pt[M_STOCK] > 0) {
        sum->plog_stock += ln_pos(row->pt[M_STOCK] / row->pt[M_XCCL]);
        sum->pn_stock++;
    }
}

/* "mean (n)" of a geometric mean from a log sum, or "- (0)". */
static void fmt_gmean(char *buf, size_t cap, double logsum, int n)
{
    if (n)
        snprintf(buf, cap, "%.3f (%d)", exp_any(logsum / n), n);
    else
        snprintf(buf, cap, "- (0)");
}

/* "<mode> ok n/n", "<mode> FAIL f/n" or "<mode> -". */
static void fmt_checks(char *buf, size_t cap, int m, int run, int fail)
{
    if (!run)
        snprintf(buf, cap, "%s -", mode_names[m]);
    else
        snprintf(buf, cap, "%s %s %d/%d", mode_names[m], fail ? "FAIL" : "ok",
                 fail ? fail : run, run);
}

/* -P: the persistent form's geometric means and checks per collective. */
static void print_summary_persistent(const bench_t *B, const summary_t *sums)
{
    const opts_t *o = B->o;
    printf("#\n# persistent (-P): geometric means over the sizes; px/x = xccl persistent /\n"
           "#   xccl blocking (< 1: persistent faster); ps/px = %s persistent / xccl\n"
           "#   persistent (> 1: xccl faster)\n", mode_names[M_STOCK]);
    printf("# %-22s %16s %16s   %s\n", "collective", "px/x", "ps/px",
           "checks (sizes ok or FAIL / checked)");
    for (int k = 0; k < o->ncolls; k++) {
        const summary_t *s = &sums[o->colls[k]];
        char blk[32], stock[32], checks[NMODE][32];
        fmt_gmean(blk, sizeof blk, s->plog_blk, s->pn_blk);
        fmt_gmean(stock, sizeof stock, s->plog_stock, s->pn_stock);
        for (int m = 0; m < NMODE; m++)
            fmt_checks(checks[m], sizeof checks[m], m, s->prun[m], s->pfail[m]);
        printf("# %-22s %16s %16s   %s, %s\n", colls[o->colls[k]].name, blk, stock,
               checks[M_XCCL], checks[M_STOCK]);
    }
}

void print_summary(const bench_t *B, const summary_t *sums)
{
    const opts_t *o = B->o;
    printf("#\n# summary: geometric mean of ratio = %s time / xccl time (> 1: xccl faster)\n",
           mode_names[M_STOCK]);
    printf("# %-22s %16s %16s   %s\n", "collective", "sizes >= 1 MiB", "all sizes",
           "checks (sizes ok or FAIL / checked)");
    int xfail = 0, sfail = 0;
    for (int k = 0; k < o->ncolls; k++) {
        const summary_t *s = &sums[o->colls[k]];
        char big[32], all[32], checks[NMODE][32];
        fmt_gmean(big, sizeof big, s->logsum_big, s->n_big);
        fmt_gmean(all, sizeof all, s->logsum_all, s->n_all);
        for (int m = 0; m < NMODE; m++)
            fmt_checks(checks[m], sizeof checks[m], m, s->run[m], s->fail[m]);
        printf("# %-22s %16s %16s   %s, %s\n", colls[o->colls[k]].name, big, all,
               checks[M_XCCL], checks[M_STOCK]);
        xfail += s->fail[M_XCCL] + s->pfail[M_XCCL];
        sfail += s->fail[M_STOCK] + s->pfail[M_STOCK];
    }
    if (o->persistent)
        print_summary_persistent(B, sums);
    if (sfail)
        printf("# NOTE: %d %s-only check failure(s): Open MPI's own result was wrong; this\n"
               "#   does not count against xccl (exit status unaffected)\n", sfail,
               mode_names[M_STOCK]);
    printf("# result: %s\n", xfail ? "FAIL (xccl produced wrong results; see stderr)"
                                   : "all xccl checks passed (or xccl not measured)");
}

/* ------------------------------------------------------------------------ */
/* Arithmetic                                                               */
/* ------------------------------------------------------------------------ */

/* nccl-tests bus bandwidth factors (doc/PERFORMANCE.md). */
static double busbw_factor(int coll, int p)
{
    switch (coll) {
    case C_ALLREDUCE: return 2.0 * (p - 1) / p;
    case C_BCAST: return 1.0;
    default: return (double)(p - 1) / p;
    }
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median of v[0..n); reorders v. */
double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ln and exp for the geometric means, without libm (the build line links
 * no -lm).  Accurate to ~1e-15, far beyond the noise of the timings. */
#define LN2 0.69314718055994530942
double ln_pos(double x)
{
    int k = 0;
    while (x >= 2.0) { x *= 0.5; k++; }
    while (x < 1.0) { x *= 2.0; k--; }
    /* x in [1, 2): ln x = 2 atanh(y), y = (x - 1)/(x + 1) in [0, 1/3) */
    double y = (x - 1.0) / (x + 1.0), y2 = y * y, term = y, sum = 0.0;
    for (int n = 1; n < 70; n += 2) {
        sum += term / n;
        term *= y2;
    }
    return 2.0 * sum + k * LN2;
}

static double exp_any(double x)
{
    int k = 0;
    while (x > LN2) { x -= LN2; k++; }
    while (x < 0.0) { x += LN2; k--; }
    /* x in [0, ln 2]: Taylor series */
    double term = 1.0, sum = 1.0;
    for (int n = 1; n < 30; n++) {
        term *= x / n;
        sum += term;
    }
    for (; k > 0; k--) sum *= 2.0;
    for (; k < 0; k++) sum *= 0.5;
    return sum;
}
