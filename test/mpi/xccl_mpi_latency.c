/*
 * xccl_mpi_latency: the shared-memory level's latency path under skew.
 *
 * usage: xccl_mpi_latency [-n ITERATIONS] [-s SEED] [-t | -b | -r]   (default 3000, 1)
 *
 * One long sequence of small blocking collectives with no barrier between
 * them, so that ranks drift apart and a fast rank starts calls while a slow
 * one still reads the last ones: every rank derives call i from (seed, i)
 * alone: the collective (allreduce, reduce_scatter, reduce_scatter_block,
 * allgather, alltoall, bcast), its size (mostly 1 byte to 64 KiB, the
 * latency path's parts; one call in eight past that, up to 64 KiB times the
 * number of ranks, the executor's schedules, so the two interleave), in
 * place or not, the bcast root (the same root for runs
 * of 1 to 4 calls: a root that gives data and waits for nobody runs
 * ahead), and which ranks sleep 1-60 us before the call (about one call in
 * eight).  Every element of every result is checked against values each
 * rank computes itself (integer sums: exact); the bytes after each result
 * must stay untouched.
 *
 * -t (tiny): the small calls give 1 to 64 bytes, and every other call is a
 * bcast, so that bcast roots run ahead through the calls whose payload
 * also travels in the root's latency line (at most 48 bytes).
 *
 * -b (bcast pieces): every call is a bcast of 16 KiB + 1 to 64 KiB, which
 * the latency path moves in 16 KiB pieces, each posted on its own: a
 * reader that copied a piece before its post would read the call's bytes
 * before the root wrote them (or an older call's).
 *
 * -r (roots): every call is a bcast whose root changes on three calls in
 * four, of a size kept for runs of 1 to 8 calls (1 to 48 bytes, 49 bytes
 * to 4 KiB, 4 KiB to 16 KiB, 16 KiB to 64 KiB: the pieces), one call in
 * four an MPI_Ibcast and its wait.  Two ranks move such a chain in the
 * same units of the small areas, each root writing over the part it has
 * just read; every byte is checked.  The ring's records protect a part
 * whatever the placement (planted at np 2, chains with the same root or
 * at more ranks gave right bytes, only slower), so what fails here is a
 * broken wait: planted, a root that skips the ring's wait gives wrong
 * bytes at np 3 (21 of 9000 checks).
 *
 * Output: "FAIL ..." lines (at most 10 per rank), then from rank 0
 *   RESULT: <passed> passed, <failed> failed
 * Exit status 0 when every check passed on every rank.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ALLREDUCE, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, ALLGATHER, ALLTOALL, BCAST, NCOLL };
static const char *const names[NCOLL] = { "allreduce", "reduce_scatter", "reduce_scatter_block",
                                          "allgather", "alltoall", "bcast" };
#define GUARD 64
#define LAT ((size_t) 65536)      /* the latency path's largest part per rank */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint64_t h3(uint64_t a, uint64_t b, uint64_t c)
{
    return mix(a * 0x9E3779B97F4A7C15ull ^ mix(b + 0x632BE59BD9B4E019ull) ^ mix(c + 17));
}

/* What rank r contributes at element k of call i. */
static int ival(uint64_t seed, long i, int r, size_t k)
{
    return (int) (h3(seed ^ (uint64_t) i, (uint64_t) r, k) & 0xffff) - 0x8000;
}

static unsigned char bval(uint64_t seed, long i, int r, size_t k)
{
    return (unsigned char) h3(seed ^ (uint64_t) i, (uint64_t) r + 1000, k);
}

static int rank, size, nfail;

static void fail(long i, const char *coll, const char *what, size_t k, long got, long want)
{
    if (nfail++ < 10) {
        printf("FAIL rank %d call %ld %s: %s at %zu: %ld, want %ld\n", rank, i, coll, what, k, got,
               want);
    }
}

static void check_guard(long i, int coll, const unsigned char *end)
{
    for (size_t k = 0; k < GUARD; k++) {
        if (end[k] != 0xA5) {
            fail(i, names[coll], "guard", k, end[k], 0xA5);
            return;
        }
    }
}

int main(int argc, char **argv)
{
    long iters = 3000;
    uint64_t seed = 1;
    int opt;
    int tiny = 0, pieces = 0, roots = 0;
    while ((opt = getopt(argc, argv, "n:s:tbr")) != -1) {
        if ('n' == opt) {
            iters = atol(optarg);
        } else if ('s' == opt) {
            seed = strtoull(optarg, NULL, 0);
        } else if ('t' == opt) {
            tiny = 1;
        } else if ('b' == opt) {
            pieces = 1;
        } else if ('r' == opt) {
            roots = 1;
        } else {
            fprintf(stderr, "usage: xccl_mpi_latency [-n ITERATIONS] [-s SEED] [-t | -b | -r]\n");
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t cap = LAT * (size_t) (size + 2) + GUARD;
    unsigned char *sb = malloc(cap), *rb = malloc(cap);
    int *counts = malloc((size_t) size * sizeof(int)), *displs = malloc((size_t) size * sizeof(int));
    if (!sb || !rb || !counts || !displs) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long passed = 0;
    int root = 0, run = 0, size_run = 0;
    size_t run_bytes = 1;
    for (long i = 0; i < iters; i++) {
        const uint64_t h = h3(seed, (uint64_t) i, 7);
        const int coll = pieces || roots || (tiny && (h >> 60) % 2) ? BCAST : (int) (h % NCOLL);
        if (roots && size_run-- <= 0) {
            static const size_t lo[4] = { 1, 49, 4097, 16385 }, hi[4] = { 48, 4096, 16384, LAT };
            const int c = (int) ((h >> 56) % 4);
            run_bytes = lo[c] + (h >> 16) % (hi[c] - lo[c] + 1);
            size_run = (int) ((h >> 52) % 8);
        }
        /* bytes: 1 in 8 calls past the latency path (allgather: past it
         * where a block is) */
        const size_t bytes = roots ? run_bytes
                             : pieces ? LAT / 4 + 1 + (h >> 16) % (LAT - LAT / 4)
                             : (h >> 8) % 8 == 0 ? LAT + 1 + (h >> 16) % (LAT * (size_t) size)
                                                 : 1 + (h >> 16) % (tiny ? 64 : LAT);
        const int inplace = (h >> 40) % 3 == 0;
        if (roots && size > 1) {
            if ((h >> 44) % 4 != 0) {        /* another root, three calls in four */
                root = (root + 1 + (int) ((h >> 46) % (uint64_t) (size - 1))) % size;
            }
        } else if (run-- <= 0) {
            root = (int) ((h >> 44) % (uint64_t) size);
            run = (int) ((h >> 50) % 4);
        }
        const uint64_t d = h3(seed, (uint64_t) i, (uint64_t) rank + 100);
        if (d % 8 == 0) {
            usleep((useconds_t) (1 + (d >> 8) % 60));
        }
        const int before = nfail;
        if (ALLREDUCE == coll || REDUCE_SCATTER == coll || REDUCE_SCATTER_BLOCK == coll) {
            /* ints: the whole message, and this rank's block */
            size_t n = bytes / sizeof(int) + 1, lo = 0, mine = n;
            if (REDUCE_SCATTER_BLOCK == coll) {
                n = (n + (size_t) size - 1) / (size_t) size * (size_t) size;
            }
            for (int r = 0, at = 0; r < size; r++) {
                counts[r] = REDUCE_SCATTER == coll ? (int) ((n + (size_t) r) / (size_t) size)
                                                   : (int) (n / (size_t) size);
                displs[r] = at;
                at += counts[r];
            }
            if (REDUCE_SCATTER == coll) {
                n = (size_t) displs[size - 1] + (size_t) counts[size - 1];
            }
            if (ALLREDUCE != coll) {
                lo = (size_t) displs[rank];
                mine = (size_t) counts[rank];
            }
            int *s = (int *) sb, *r = (int *) rb;
            memset(rb, 0xA5, cap);
            for (size_t k = 0; k < n; k++) {
                (inplace ? r : s)[k] = ival(seed, i, rank, k);
            }
            const void *src = inplace ? MPI_IN_PLACE : s;
            int rc = ALLREDUCE == coll
                         ? MPI_Allreduce(src, r, (int) n, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                     : REDUCE_SCATTER == coll
                         ? MPI_Reduce_scatter(src, r, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                         : MPI_Reduce_scatter_block(src, r, counts[0], MPI_INT, MPI_SUM,
                                                    MPI_COMM_WORLD);
            if (MPI_SUCCESS != rc) {
                fail(i, names[coll], "return code", 0, rc, MPI_SUCCESS);
            }
            for (size_t k = 0; k < mine; k++) {
                long want = 0;
                for (int q = 0; q < size; q++) {
                    want += ival(seed, i, q, lo + k);
                }
                if (r[k] != (int) want) {
                    fail(i, names[coll], "element", k, r[k], want);
                    break;
                }
            }
            /* in place, the rest of the input stays as it was given */
            check_guard(i, coll, rb + (inplace ? n : mine) * sizeof(int));
        } else if (BCAST == coll) {
            memset(rb, 0xA5, cap);
            for (size_t k = 0; k < bytes; k++) {
                rb[k] = rank == root ? bval(seed, i, root, k) : 0;
            }
            int rc;
            if (roots && (h >> 48) % 4 == 0) {
                MPI_Request req;
                rc = MPI_Ibcast(rb, (int) bytes, MPI_BYTE, root, MPI_COMM_WORLD, &req);
                if (MPI_SUCCESS == rc) {
                    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
                }
            } else {
                rc = MPI_Bcast(rb, (int) bytes, MPI_BYTE, root, MPI_COMM_WORLD);
            }
            if (MPI_SUCCESS != rc) {
                fail(i, names[coll], "return code", 0, rc, MPI_SUCCESS);
            }
            for (size_t k = 0; k < bytes; k++) {
                if (rb[k] != bval(seed, i, root, k)) {
                    fail(i, names[coll], "byte", k, rb[k], bval(seed, i, root, k));
                    break;
                }
            }
            check_guard(i, coll, rb + bytes);
        } else {
            /* allgather: blocks of bytes / size; alltoall: the same blocks
             * to each rank (block j of rank q: bval(q, j * block + k)) */
            const size_t block = bytes / (size_t) size + 1, total = block * (size_t) size;
            const int a2a = ALLTOALL == coll;
            memset(rb, 0xA5, cap);
            for (size_t k = 0; k < (a2a ? total : block); k++) {
                const unsigned char v = bval(seed, i, rank, k);
                if (!inplace) {
                    sb[k] = v;
                } else {
                    rb[(a2a ? 0 : (size_t) rank * block) + k] = v;
                }
            }
            const void *src = inplace ? MPI_IN_PLACE : sb;
            int rc = a2a ? MPI_Alltoall(src, (int) block, MPI_BYTE, rb, (int) block, MPI_BYTE,
                                        MPI_COMM_WORLD)
                         : MPI_Allgather(src, (int) block, MPI_BYTE, rb, (int) block, MPI_BYTE,
                                         MPI_COMM_WORLD);
            if (MPI_SUCCESS != rc) {
                fail(i, names[coll], "return code", 0, rc, MPI_SUCCESS);
            }
            for (int q = 0; q < size; q++) {
                for (size_t k = 0; k < block; k++) {
                    const unsigned char want =
                        bval(seed, i, q, (a2a ? (size_t) rank * block : 0) + k);
                    if (rb[(size_t) q * block + k] != want) {
                        fail(i, names[coll], "byte", (size_t) q * block + k,
                             rb[(size_t) q * block + k], want);
                        q = size;
                        break;
                    }
                }
            }
            check_guard(i, coll, rb + total);
        }
        passed += nfail == before;
    }
    long mine[2] = { passed, iters - passed }, all[2];
    MPI_Reduce(mine, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("RESULT: %ld passed, %ld failed\n", all[0], all[1]);
    }
    int bad = nfail > 0, anybad;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    free(sb);
    free(rb);
    free(counts);
    free(displs);
    MPI_Finalize();
    return anybad ? 1 : 0;
}
