/*
 * xccl_comm_churn: what a communicator costs from MPI_Comm_dup to
 * MPI_Comm_free, unused or used once.  A benchmark program (it prints
 * numbers; test/bench/comm_churn.sh compares xccl with stock Open MPI),
 * also used by test/mpi/run_mpi_tests.sh for what must hold whatever the
 * speed: results, resident memory, a time limit.
 *
 * usage: xccl_comm_churn [-m unused|used|both] [-n cycles] [-r reps] [-b ints]
 *                        [-a ints] [-t ints] [-c dup|split|alt] [-R cycles] [-T seconds]
 *   -m  which cycles to time (default both):
 *         unused  MPI_Comm_dup, MPI_Comm_free
 *         used    MPI_Comm_dup, one MPI_Allreduce and one MPI_Alltoall, MPI_Comm_free
 *   -n  cycles per repetition (default 2000); -r repetitions (default 5)
 *   -b  ints per rank each use moves (default 4: a small message): sets -a
 *       and -t both
 *   -a  ints of the allreduce (default -b; comm_churn.sh's cycle: -a 1024, 4 KiB)
 *   -t  ints per peer of the alltoall (default -b; comm_churn.sh's cycle: -t 1)
 *   -c  how a cycle creates its communicator: dup (MPI_Comm_dup of
 *       MPI_COMM_WORLD, default), split (MPI_Comm_split of MPI_COMM_WORLD,
 *       one color, key the reversed rank: the same processes in another
 *       order) or alt (dup and split in turn: each communicator's ranks
 *       are in the other order than the one before)
 *   -R  then (or with -n 0: only) the resident-memory run: 200 used cycles
 *       to warm up, the resident set size (/proc/self/statm), R used and
 *       R unused cycles, the resident set size again
 *   -T  fail when the timed cycles (all repetitions) took longer than this
 *
 * Output (rank 0; times are the slowest rank's, per cycle):
 *   churn <mode> np=<p> cycles=<n> reps=<r> median_us=<t> min_us=<t> max_us=<t> total_s=<s>
 *   rss cycles=<R> start_kib=<a> end_kib=<b> growth_kib=<largest growth of any rank>
 *   RESULT: <passed> passed, <failed> failed
 * The results of every use are checked.  Exit status 0 when every check
 * passed on every rank.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, checks, fails, ar_n = 4, aa_n = 4;
static int split;                    /* 0 dup, 1 split, 2 alternate */
static unsigned long ncycles;
static int *ar_in, *ar_out, *aa_in, *aa_out;

static void expect(int ok, const char *what)
{
    checks++;
    if (!ok && fails++ < 10) {
        printf("FAIL rank=%d %s\n", rank, what);
    }
}

/* One cycle: create, maybe use once (results checked), free. */
static void cycle(int used, int t)
{
    MPI_Comm c;
    if (1 == split || (2 == split && ncycles++ % 2)) {
        MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &c);
    } else {
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
    }
    if (used) {
        int me, p;
        MPI_Comm_rank(c, &me);
        MPI_Comm_size(c, &p);
        for (int i = 0; i < ar_n; i++) {
            ar_in[i] = me + i + t;
        }
        for (int i = 0; i < aa_n * p; i++) {
            aa_in[i] = me * 1000 + i + t;
        }
        MPI_Allreduce(ar_in, ar_out, ar_n, MPI_INT, MPI_SUM, c);
        MPI_Alltoall(aa_in, aa_n, MPI_INT, aa_out, aa_n, MPI_INT, c);
        int ok = 1;
        for (int i = 0; i < ar_n && ok; i++) {
            ok = ar_out[i] == p * (i + t) + p * (p - 1) / 2;
        }
        expect(ok, "allreduce on a fresh communicator");
        ok = 1;
        for (int r = 0; r < p && ok; r++) {
            for (int i = 0; i < aa_n && ok; i++) {
                ok = aa_out[r * aa_n + i] == r * 1000 + me * aa_n + i + t;
            }
        }
        expect(ok, "alltoall on a fresh communicator");
    }
    MPI_Comm_free(&c);
}

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (NULL == f) {
        return -1;
    }
    if (2 != fscanf(f, "%ld %ld", &pages, &resident)) {
        resident = -1;
    }
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int cycles = 2000, reps = 5, rss_cycles = 0, do_unused = 1, do_used = 1;
    double limit = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (NULL == v) {
            goto usage;
        }
        i++;
        if (0 == strcmp(a, "-m")) {
            do_unused = 0 == strcmp(v, "unused") || 0 == strcmp(v, "both");
            do_used = 0 == strcmp(v, "used") || 0 == strcmp(v, "both");
            if (!do_used && !do_unused) {
                goto usage;
            }
        } else if (0 == strcmp(a, "-n")) {
            cycles = atoi(v);
        } else if (0 == strcmp(a, "-r")) {
            reps = atoi(v);
        } else if (0 == strcmp(a, "-b")) {
            ar_n = aa_n = atoi(v);
        } else if (0 == strcmp(a, "-a")) {
            ar_n = atoi(v);
        } else if (0 == strcmp(a, "-t")) {
            aa_n = atoi(v);
        } else if (0 == strcmp(a, "-c")) {
            split = 0 == strcmp(v, "split") ? 1 : 0 == strcmp(v, "alt") ? 2 : 0;
            if (!split && 0 != strcmp(v, "dup")) {
                goto usage;
            }
        } else if (0 == strcmp(a, "-R")) {
            rss_cycles = atoi(v);
        } else if (0 == strcmp(a, "-T")) {
            limit = atof(v);
        } else {
            goto usage;
        }
    }
    if (cycles < 0 || reps < 1 || ar_n < 1 || aa_n < 1 || rss_cycles < 0) {
        goto usage;
    }
    ar_in = malloc((size_t) ar_n * sizeof(int));
    ar_out = malloc((size_t) ar_n * sizeof(int));
    aa_in = malloc((size_t) aa_n * size * sizeof(int));
    aa_out = malloc((size_t) aa_n * size * sizeof(int));

    double total = 0;
    int t = 0;
    for (int used = 0; used < 2 && cycles > 0; used++) {
        if (!(used ? do_used : do_unused)) {
            continue;
        }
        double *per = malloc((size_t) reps * sizeof(double));
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < cycles; i++) {
                cycle(used, t++ % 1000);
            }
            double mine = MPI_Wtime() - t0, slowest = 0;
            MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            per[r] = slowest / cycles * 1e6;
            total += slowest;
        }
        if (0 == rank) {
            qsort(per, (size_t) reps, sizeof(double), cmp_double);
            double med = reps % 2 ? per[reps / 2] : (per[reps / 2 - 1] + per[reps / 2]) / 2;
            printf("churn %s np=%d cycles=%d reps=%d median_us=%.2f min_us=%.2f max_us=%.2f "
                   "total_s=%.3f\n", used ? "used" : "unused", size, cycles, reps, med, per[0],
                   per[reps - 1], total);
        }
        free(per);
    }
    if (limit > 0) {
        MPI_Bcast(&total, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        char what[128];
        snprintf(what, sizeof what, "timed cycles took %.2f s, limit %.2f s", total, limit);
        expect(total <= limit, what);
    }

    if (rss_cycles > 0) {
        for (int i = 0; i < 200; i++) {
            cycle(1, i);
        }
        long start = rss_kib();
        for (int i = 0; i < rss_cycles; i++) {
            cycle(1, i % 1000);
        }
        for (int i = 0; i < rss_cycles; i++) {
            cycle(0, 0);
        }
        long end = rss_kib(), growth = end - start, max_growth = 0, start0 = start, end0 = end;
        MPI_Reduce(&growth, &max_growth, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        if (0 == rank) {
            printf("rss cycles=%d start_kib=%ld end_kib=%ld growth_kib=%ld\n", rss_cycles, start0,
                   end0, max_growth);
        }
        expect(start > 0 && end > 0, "read /proc/self/statm");
    }

    int mine[2] = { checks, fails }, all[2] = { 0, 0 };
    MPI_Reduce(mine, all, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("RESULT: %d passed, %d failed\n", all[0] - all[1], all[1]);
    }
    free(ar_in);
    free(ar_out);
    free(aa_in);
    free(aa_out);
    MPI_Finalize();
    return all[1] ? 1 : 0;

usage:
    if (0 == rank) {
        fprintf(stderr, "usage: %s [-m unused|used|both] [-n cycles] [-r reps] [-b ints] "
                        "[-a ints] [-t ints] [-c dup|split|alt] [-R cycles] [-T seconds]\n", argv[0]);
    }
    MPI_Finalize();
    return 2;
}
