/*
 * xccl_mpi_trials: blocking MPI_Allgather, MPI_Alltoall, MPI_Bcast,
 * MPI_Allreduce and MPI_Reduce_scatter_block (MPI_INT sums, every other
 * call in place), MPI_Allgatherv (equal blocks), MPI_Gather and
 * MPI_Scatter of
 * one size class, enough calls for the shared-memory level's trials
 * (coll_xccl_shm_trials: shm and mesh in turn, then the agreed pick) and
 * some after them, every result checked.
 *
 * For each collective and each size (-s, default 24 KiB, 64 KiB and 2 MiB:
 * a class where shm is the latency path at np 2 and 3, and one of each
 * trial length), CALLS calls (-n, default 48: a long trial takes 40) on data that
 * depends on the rank, the call and the index, so that a stale result of
 * an earlier call, a block from the wrong peer or a byte off is caught;
 * the roots of bcast, gather and scatter change with every call.  Every
 * rank checks every byte of every call; the verdicts are summed with
 * MPI_Reduce on MPI_COMM_WORLD, which is not a collective under test.
 *
 * -L USEC: the last rank sleeps USEC before every call, late to each as a
 * descheduled rank is (the others wait for it in every call, whichever
 * candidate runs; the trials' agreed times must not count that), and
 * every rank prints each call's own clock (CLOCK_MONOTONIC, ns, read
 * just before and just after the MPI call, the clock xccl's trials read):
 *   xccl_mpi_trials: call <n> <before> <after>
 * n counting the calls from 0.
 *
 * -A dup: everything once more on a dup of MPI_COMM_WORLD, after the
 * calls on MPI_COMM_WORLD: its trials may take the picks the first
 * communicator's trials agreed on.  -A split (np >= 3): everything on a
 * communicator of world ranks 0 and 1, then on one of ranks 1 and 2
 * (other ranks idle): only rank 1 has picks from before, so the second
 * communicator's trials run in full.
 *
 * -c COLL,...: only the collectives named (allgather, alltoall, bcast,
 * allreduce, reduce_scatter_block, allgatherv, gather, scatter; they run
 * in that order), e.g. a run
 * that never calls MPI_Allreduce itself.
 *
 * run_mpi_tests.sh checks xccl's verbose lines: on every rank one
 * "xccl: trial <coll> ..." line per collective and size class, the same
 * pick on every rank, both candidates run before it, and only the pick
 * after it.
 *
 * Output (rank 0): RESULT: <passed> passed, <failed> failed.  Exit 0 when
 * every call was right on every rank.
 */
#include <mpi.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned char val(int rank, int call, size_t i)
{
    return (unsigned char) ((size_t) rank * 131u + (size_t) call * 17u + i * 7u + (i >> 9));
}

static int late_us;                         /* -L */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The MPI call `call`, its clock printed with -L. */
static unsigned long calls_made;
#define TIMED(call)                                                                        \
    do {                                                                                   \
        const uint64_t before_ = now_ns();                                                 \
        call;                                                                              \
        const uint64_t after_ = now_ns();                                                  \
        if (late_us > 0) {                                                                 \
            printf("xccl_mpi_trials: call %lu %" PRIu64 " %" PRIu64 "\n", calls_made, before_, \
                   after_);                                                                \
        }                                                                                  \
        calls_made++;                                                                      \
    } while (0)

/* Calls of one collective at one size; the number of wrong calls here. */

static int run(const char *coll, size_t bytes, int calls, MPI_Comm comm)
{
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    const size_t block = bytes / (size_t) p;
    unsigned char *s = malloc(bytes), *r = malloc(bytes);
    int *cnt = malloc((size_t) p * sizeof(int)), *dsp = malloc((size_t) p * sizeof(int));
    int bad = 0;
    if (NULL == s || NULL == r || NULL == cnt || NULL == dsp) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int c = 0; c < calls; c++) {
        const int root = c % p;
        memset(r, 0xee, bytes);
        if (late_us > 0 && rank == p - 1) {
            usleep((useconds_t) late_us);
        }
        if (0 == strcmp(coll, "allgather")) {
            for (size_t i = 0; i < block; i++) {
                s[i] = val(rank, c, i);
            }
            TIMED(MPI_Allgather(s, (int) block, MPI_BYTE, r, (int) block, MPI_BYTE, comm));
        } else if (0 == strcmp(coll, "alltoall")) {
            for (size_t i = 0; i < bytes; i++) {
                s[i] = val(rank, c, i);          /* block q goes to rank q */
            }
            TIMED(MPI_Alltoall(s, (int) block, MPI_BYTE, r, (int) block, MPI_BYTE, comm));
        } else if (0 == strcmp(coll, "allreduce") || 0 == strcmp(coll, "reduce_scatter_block")) {
            /* ints, every other call in place; sums of small values: exact.
             * reduce_scatter_block: bytes is what each rank sends, its
             * block of the sums (at `at`) is what it gets */
            const int ar = 0 == strcmp(coll, "allreduce");
            const size_t total = bytes / sizeof(int), n = ar ? total : total / (size_t) p;
            const size_t at = ar ? 0 : (size_t) rank * n;
            int *in = (int *) (void *) s, *out = (int *) (void *) r;
            for (size_t i = 0; i < total; i++) {
                (c & 1 ? out : in)[i] = val(rank, c, i);
            }
            if (ar) {
                TIMED(MPI_Allreduce(c & 1 ? MPI_IN_PLACE : in, out, (int) n, MPI_INT, MPI_SUM,
                                    comm));
            } else {
                TIMED(MPI_Reduce_scatter_block(c & 1 ? MPI_IN_PLACE : in, out, (int) n, MPI_INT,
                                               MPI_SUM, comm));
            }
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < n; i++) {
                int want = 0;
                for (int q = 0; q < p; q++) {
                    want += val(q, c, at + i);
                }
                if (out[i] != want && 0 == wrong++) {
                    first = i;
                }
            }
            if (wrong) {
                fprintf(stderr, "FAIL %s bytes=%zu call=%d rank=%d: %zu ints wrong, first at %zu\n", coll,
                        bytes, c, rank, wrong, first);
                bad++;
            }
            continue;
        } else if (0 == strcmp(coll, "allgatherv")) {
            for (int q = 0; q < p; q++) {
                cnt[q] = (int) block;
                dsp[q] = q * (int) block;
            }
            for (size_t i = 0; i < block; i++) {
                s[i] = val(rank, c, i);
            }
            TIMED(MPI_Allgatherv(s, (int) block, MPI_BYTE, r, cnt, dsp, MPI_BYTE, comm));
        } else if (0 == strcmp(coll, "gather")) {
            for (size_t i = 0; i < block; i++) {
                s[i] = val(rank, c, i);
            }
            TIMED(MPI_Gather(s, (int) block, MPI_BYTE, r, (int) block, MPI_BYTE, root, comm));
            if (rank != root) {
                continue;            /* nothing received */
            }
        } else if (0 == strcmp(coll, "scatter")) {
            if (rank == root) {
                for (size_t i = 0; i < bytes; i++) {
                    s[i] = val(root, c, i);  /* block q goes to rank q */
                }
            }
            TIMED(MPI_Scatter(s, (int) block, MPI_BYTE, r, (int) block, MPI_BYTE, root, comm));
        } else {
            if (rank == root) {
                for (size_t i = 0; i < bytes; i++) {
                    r[i] = val(root, c, i);
                }
            }
            TIMED(MPI_Bcast(r, (int) bytes, MPI_BYTE, root, comm));
        }
        /* what arrived: bcast the whole buffer; scatter this rank's block;
         * the others every block */
        const int sc = 0 == strcmp(coll, "scatter");
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < (0 == strcmp(coll, "bcast") ? bytes : sc ? block : block * (size_t) p); i++) {
            const size_t q = i / block, j = i % block;
            unsigned char want;
            if (0 == strcmp(coll, "allgather") || 0 == strcmp(coll, "allgatherv") ||
                0 == strcmp(coll, "gather")) {
                want = val((int) q, c, j);
            } else if (0 == strcmp(coll, "alltoall")) {
                want = val((int) q, c, (size_t) rank * block + j);
            } else if (sc) {
                want = val(root, c, (size_t) rank * block + i);
            } else {
                want = val(root, c, i);
            }
            if (r[i] != want && 0 == wrong++) {
                first = i;
            }
        }
        if (wrong) {
            fprintf(stderr, "FAIL %s bytes=%zu call=%d rank=%d: %zu bytes wrong, first at %zu\n", coll,
                    bytes, c, rank, wrong, first);
            bad++;
        }
    }
    free(s);
    free(r);
    free(cnt);
    free(dsp);
    return bad;
}

/* Whether name is one of the comma-separated list's names. */
static int listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *at = list; NULL != at; at = strchr(at, ',')) {
        at += ',' == *at;
        if (0 == strncmp(at, name, n) && (',' == at[n] || '\0' == at[n])) {
            return 1;
        }
    }
    return 0;
}

/* Every collective (or those of -c) at every size on comm: the cases run
 * and the cases with a wrong call, added to *cases and *bad. */
static void run_all(MPI_Comm comm, const char *only, const size_t *sizes, int nsizes, int calls,
                    int *cases, int *bad)
{
    static const char *const colls[] = { "allgather", "alltoall", "bcast", "allreduce",
                                         "reduce_scatter_block", "allgatherv", "gather", "scatter" };
    int p;
    MPI_Comm_size(comm, &p);
    for (int k = 0; k < (int) (sizeof(colls) / sizeof(colls[0])); k++) {
        if (NULL != only && !listed(only, colls[k])) {
            continue;
        }
        for (int z = 0; z < nsizes; z++) {
            /* whole blocks (of ints) */
            const size_t unit = (size_t) p * sizeof(int), bytes = sizes[z] / unit * unit;
            *bad += 0 != run(colls[k], bytes, calls, comm);
            (*cases)++;
        }
    }
}

int main(int argc, char **argv)
{
    size_t sizes[8] = { 24576, 65536, 2 << 20 };
    int nsizes = 3, calls = 48, opt;
    const char *only = NULL, *again = NULL;
    MPI_Init(&argc, &argv);
    while ((opt = getopt(argc, argv, "A:c:n:s:L:")) != -1) {
        if ('n' == opt) {
            calls = atoi(optarg);
        } else if ('A' == opt) {
            again = optarg;
        } else if ('c' == opt) {
            only = optarg;
        } else if ('L' == opt) {
            late_us = atoi(optarg);
        } else if ('s' == opt) {
            nsizes = 0;
            for (char *t = strtok(optarg, ","); t && nsizes < 8; t = strtok(NULL, ",")) {
                sizes[nsizes++] = strtoull(t, NULL, 0);
            }
        } else {
            nsizes = -1;
        }
    }
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    const int dup = NULL != again && 0 == strcmp(again, "dup");
    const int split = NULL != again && 0 == strcmp(again, "split");
    if (nsizes < 0 || (NULL != again && !dup && !split) || (split && p < 3)) {
        fprintf(stderr, "usage: xccl_mpi_trials [-c COLL,...] [-n CALLS] [-s BYTES,...] [-L USEC] "
                        "[-A dup|split (np >= 3)]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int cases = 0, bad = 0, all_bad = 0;
    if (split) {
        /* ranks 0 and 1, then ranks 1 and 2: only rank 1 has run the
         * calls of such a communicator before */
        for (int first = 0; first < 2; first++) {
            MPI_Comm c;
            const int in = rank == first || rank == first + 1;
            MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, rank, &c);
            if (in) {
                run_all(c, only, sizes, nsizes, calls, &cases, &bad);
                MPI_Comm_free(&c);
            }
        }
    } else {
        run_all(MPI_COMM_WORLD, only, sizes, nsizes, calls, &cases, &bad);
        if (dup) {
            MPI_Comm c;
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
            run_all(c, only, sizes, nsizes, calls, &cases, &bad);
            MPI_Comm_free(&c);
        }
    }
    int all_cases = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&cases, &all_cases, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        /* a case fails where any rank saw a wrong call (bad counts cases
         * per rank, so all_bad can exceed cases: cap it) */
        const int failed = all_bad < all_cases ? all_bad : all_cases;
        printf("RESULT: %d passed, %d failed\n", all_cases - failed, failed);
    }
    MPI_Finalize();
    return 0 != all_bad;
}
