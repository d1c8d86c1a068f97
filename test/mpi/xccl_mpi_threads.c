/*
 * xccl_mpi_threads: xccl under every MPI thread level.
 *
 * usage: xccl_mpi_threads single|funneled|serialized|multiple
 *
 * MPI_Init_thread at the level asked for, then:
 *   dup    MPI_Comm_dup and MPI_Comm_split of MPI_COMM_WORLD, each used by an
 *          allreduce (the first communicator creation after MPI_Init is what
 *          hung under xccl at the threaded levels: its module_enable waited
 *          for the other ranks inside the progress engine);
 *   first  on fresh communicators, a nonblocking collective as the very first
 *          collective, then point-to-point work, then the wait;
 *   local  a nonblocking collective's initiation must be local: rank 0 starts
 *          it, then receives from rank 1, while rank 1 sends to rank 0
 *          (MPI_Ssend: completes only once rank 0 receives) before it starts
 *          the collective.  Any waiting for other ranks inside the
 *          initiation deadlocks here;
 *   mix    the intercepted collectives (allreduce, allgather, alltoall,
 *          bcast, reduce_scatter_block; blocking and nonblocking, several in
 *          flight at once) from 8 B to about 1 MiB, so that both xccl's
 *          algorithms and the small-message fallback run.  At MULTIPLE, 4
 *          threads at once, each on its own communicator (dup'ed by the
 *          main thread) and on a dup of that made inside the thread
 *          (communicators created concurrently); at the other levels the
 *          main thread does the same work for the 4 communicators in turn.
 * Every result is integer data checked exactly against values computed
 * locally.
 *
 * Output: "step <name>" lines (rank 0) as it goes, so that a hang shows
 * where; "FAIL ..." lines; then from rank 0
 *   RESULT: <passed> passed, <failed> failed
 * Exit status 0 when every check passed on every rank.
 */
#include <mpi.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 4

static int world_rank, world_size;
static int level_asked;

/* Per-thread counters (slot NTHREADS: the main thread outside the mix). */
static int checks[NTHREADS + 1], fails[NTHREADS + 1];

static void expect(int slot, int ok, const char *what, const char *detail)
{
    checks[slot]++;
    if (!ok) {
        fails[slot]++;
        printf("FAIL rank=%d thread=%d %s: %s\n", world_rank, slot, what, detail);
    }
}

static void step(const char *name)
{
    if (0 == world_rank) {
        printf("step %s\n", name);
        fflush(stdout);
    }
}

/* The value rank r contributes at index i of a call tagged t. */
static int val(int r, size_t i, int t)
{
    return (int) ((uint32_t) (r + 1) * 1000003u + (uint32_t) i * 7u + (uint32_t) t * 131u) & 0xfffff;
}

/* ------------------------------------------------------------ checks */

static void check_allreduce(int slot, const char *what, const int *out, size_t n, int size, int t,
                            const int *ranks)
{
    char d[160] = "";
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        int want = 0;
        for (int r = 0; r < size; r++) {
            want += val(ranks ? ranks[r] : r, i, t);
        }
        if (out[i] != want) {
            ok = 0;
            snprintf(d, sizeof d, "n=%zu index=%zu got=%d want=%d", n, i, out[i], want);
        }
    }
    expect(slot, ok, what, d);
}

/* ------------------------------------------------------------ mix */

/* Element counts per call: 2 ints (8 B) up to 256 Ki ints (1 MiB) in all. */
static const size_t mix_bytes[] = { 8, 64, 1024, 8192, 65536, 262144, 1048576 };
#define NSIZES (sizeof mix_bytes / sizeof mix_bytes[0])

/* One round of every collective at every size on comm; t tags the data. */
static void mix(int slot, MPI_Comm comm, int t0)
{
    int rank, size;
    char what[96], d[160];
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    /* the world ranks of comm's members, for the expected sums */
    int *ranks = malloc((size_t) size * sizeof(int));
    MPI_Group g, wg;
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int *idx = malloc((size_t) size * sizeof(int));
    for (int i = 0; i < size; i++) {
        idx[i] = i;
    }
    MPI_Group_translate_ranks(g, size, idx, wg, ranks);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    free(idx);
    const int me = ranks[rank];

    for (size_t k = 0; k < NSIZES; k++) {
        const int t = t0 + (int) k;
        const size_t n = mix_bytes[k] / sizeof(int);             /* allreduce, bcast */
        const size_t blk = n / (size_t) size ? n / (size_t) size : 1;  /* per rank */
        int *a_in = malloc(n * sizeof(int)), *a_out = malloc(n * sizeof(int));
        int *ia_out = malloc(n * sizeof(int)), *b = malloc(n * sizeof(int));
        int *ag_in = malloc(blk * sizeof(int)), *ag_out = malloc(blk * size * sizeof(int));
        int *aa_in = malloc(blk * size * sizeof(int)), *aa_out = malloc(blk * size * sizeof(int));
        int *rs_in = malloc(blk * size * sizeof(int)), *rs_out = malloc(blk * sizeof(int));
        const int root = (int) ((k + (size_t) slot) % (size_t) size);
        for (size_t i = 0; i < n; i++) {
            a_in[i] = val(me, i, t);
            a_out[i] = ia_out[i] = -1;
            b[i] = rank == root ? val(me, i, t + 1) : -1;
        }
        for (size_t i = 0; i < blk; i++) {
            ag_in[i] = val(me, i, t + 2);
        }
        for (size_t i = 0; i < blk * size; i++) {
            aa_in[i] = val(me, i, t + 3);
            rs_in[i] = val(me, i, t + 4);
            ag_out[i] = aa_out[i] = -1;
        }

        /* blocking */
        MPI_Allreduce(a_in, a_out, (int) n, MPI_INT, MPI_SUM, comm);
        snprintf(what, sizeof what, "allreduce bytes=%zu", n * sizeof(int));
        check_allreduce(slot, what, a_out, n, size, t, ranks);
        MPI_Bcast(b, (int) n, MPI_INT, root, comm);
        int ok = 1;
        d[0] = '\0';
        for (size_t i = 0; i < n && ok; i++) {
            if (b[i] != val(ranks[root], i, t + 1)) {
                ok = 0;
                snprintf(d, sizeof d, "root=%d index=%zu got=%d", root, i, b[i]);
            }
        }
        snprintf(what, sizeof what, "bcast bytes=%zu", n * sizeof(int));
        expect(slot, ok, what, d);

        /* nonblocking, several in flight, then blocking forms of the rest */
        MPI_Request req[4];
        for (size_t i = 0; i < n; i++) {
            b[i] = rank == root ? val(me, i, t + 5) : -1;
        }
        MPI_Iallgather(ag_in, (int) blk, MPI_INT, ag_out, (int) blk, MPI_INT, comm, &req[0]);
        MPI_Ialltoall(aa_in, (int) blk, MPI_INT, aa_out, (int) blk, MPI_INT, comm, &req[1]);
        MPI_Iallreduce(a_in, ia_out, (int) n, MPI_INT, MPI_SUM, comm, &req[2]);
        MPI_Ibcast(b, (int) n, MPI_INT, root, comm, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        snprintf(what, sizeof what, "iallreduce bytes=%zu", n * sizeof(int));
        check_allreduce(slot, what, ia_out, n, size, t, ranks);
        ok = 1;
        d[0] = '\0';
        for (size_t i = 0; i < n && ok; i++) {
            if (b[i] != val(ranks[root], i, t + 5)) {
                ok = 0;
                snprintf(d, sizeof d, "root=%d index=%zu got=%d", root, i, b[i]);
            }
        }
        snprintf(what, sizeof what, "ibcast bytes=%zu", n * sizeof(int));
        expect(slot, ok, what, d);
        ok = 1;
        d[0] = '\0';
        for (int r = 0; r < size && ok; r++) {
            for (size_t i = 0; i < blk && ok; i++) {
                if (ag_out[r * blk + i] != val(ranks[r], i, t + 2)) {
                    ok = 0;
                    snprintf(d, sizeof d, "block=%d index=%zu got=%d", r, i, ag_out[r * blk + i]);
                }
            }
        }
        snprintf(what, sizeof what, "iallgather bytes=%zu", blk * size * sizeof(int));
        expect(slot, ok, what, d);
        ok = 1;
        d[0] = '\0';
        for (int r = 0; r < size && ok; r++) {
            for (size_t i = 0; i < blk && ok; i++) {
                int want = val(ranks[r], (size_t) rank * blk + i, t + 3);
                if (aa_out[r * blk + i] != want) {
                    ok = 0;
                    snprintf(d, sizeof d, "from=%d index=%zu got=%d want=%d", r, i,
                             aa_out[r * blk + i], want);
                }
            }
        }
        snprintf(what, sizeof what, "ialltoall bytes=%zu", blk * size * sizeof(int));
        expect(slot, ok, what, d);

        /* reduce_scatter_block: blocking on even sizes, nonblocking on odd */
        if (k % 2) {
            MPI_Request r1;
            MPI_Ireduce_scatter_block(rs_in, rs_out, (int) blk, MPI_INT, MPI_SUM, comm, &r1);
            MPI_Wait(&r1, MPI_STATUS_IGNORE);
        } else {
            MPI_Reduce_scatter_block(rs_in, rs_out, (int) blk, MPI_INT, MPI_SUM, comm);
        }
        ok = 1;
        d[0] = '\0';
        for (size_t i = 0; i < blk && ok; i++) {
            int want = 0;
            for (int r = 0; r < size; r++) {
                want += val(ranks[r], (size_t) rank * blk + i, t + 4);
            }
            if (rs_out[i] != want) {
                ok = 0;
                snprintf(d, sizeof d, "index=%zu got=%d want=%d", i, rs_out[i], want);
            }
        }
        snprintf(what, sizeof what, "%sreduce_scatter_block bytes=%zu", k % 2 ? "i" : "",
                 blk * size * sizeof(int));
        expect(slot, ok, what, d);

        /* blocking allgather and alltoall too */
        MPI_Allgather(ag_in, (int) blk, MPI_INT, ag_out, (int) blk, MPI_INT, comm);
        MPI_Alltoall(aa_in, (int) blk, MPI_INT, aa_out, (int) blk, MPI_INT, comm);
        ok = 1;
        d[0] = '\0';
        for (int r = 0; r < size && ok; r++) {
            for (size_t i = 0; i < blk && ok; i++) {
                if (ag_out[r * blk + i] != val(ranks[r], i, t + 2) ||
                    aa_out[r * blk + i] != val(ranks[r], (size_t) rank * blk + i, t + 3)) {
                    ok = 0;
                    snprintf(d, sizeof d, "block=%d index=%zu", r, i);
                }
            }
        }
        snprintf(what, sizeof what, "allgather+alltoall bytes=%zu", blk * size * sizeof(int));
        expect(slot, ok, what, d);

        free(a_in); free(a_out); free(ia_out); free(b); free(ag_in); free(ag_out);
        free(aa_in); free(aa_out); free(rs_in); free(rs_out);
    }
    free(ranks);
}

typedef struct {
    int slot;
    MPI_Comm comm;
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *a = p;
    MPI_Comm mine;
    mix(a->slot, a->comm, 100 * a->slot);
    /* a communicator created while the other threads create theirs */
    MPI_Comm_dup(a->comm, &mine);
    mix(a->slot, mine, 100 * a->slot + 50);
    MPI_Comm_free(&mine);
    return NULL;
}

/* ------------------------------------------------------------ first, local */

/* A nonblocking collective as the first collective on a fresh communicator,
 * point-to-point work in between. */
static void first_nonblocking(size_t bytes, int t)
{
    const int slot = NTHREADS;
    const size_t n = bytes / sizeof(int);
    MPI_Comm c;
    MPI_Request req, pr[2];
    char what[96];
    int *in = malloc(n * sizeof(int)), *out = malloc(n * sizeof(int));
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    for (size_t i = 0; i < n; i++) {
        in[i] = val(world_rank, i, t);
        out[i] = -1;
    }
    MPI_Iallreduce(in, out, (int) n, MPI_INT, MPI_SUM, c, &req);
    /* a ring exchange on the same communicator while it is in flight */
    int to = (world_rank + 1) % world_size, from = (world_rank + world_size - 1) % world_size;
    int sent = world_rank * 10 + t, got = -1;
    MPI_Irecv(&got, 1, MPI_INT, from, 5, c, &pr[0]);
    MPI_Isend(&sent, 1, MPI_INT, to, 5, c, &pr[1]);
    MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    snprintf(what, sizeof what, "first call iallreduce bytes=%zu", bytes);
    check_allreduce(slot, what, out, n, world_size, t, NULL);
    snprintf(what, sizeof what, "p2p while the first iallreduce is in flight bytes=%zu", bytes);
    expect(slot, got == from * 10 + t, what, "wrong value");
    MPI_Comm_free(&c);
    free(in);
    free(out);
}

/* Rank 0: Iallreduce, then Recv from 1.  Rank 1: Ssend to 0, then
 * Iallreduce.  Others: Iallreduce.  Then every rank waits. */
static void local_initiation(size_t bytes, int t, int fresh)
{
    const int slot = NTHREADS;
    const size_t n = bytes / sizeof(int);
    MPI_Comm c = MPI_COMM_WORLD;
    MPI_Request req;
    char what[128];
    int *in = malloc(n * sizeof(int)), *out = malloc(n * sizeof(int));
    int token = 4242 + t, got = -1;
    if (fresh) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
    }
    for (size_t i = 0; i < n; i++) {
        in[i] = val(world_rank, i, t);
        out[i] = -1;
    }
    if (1 == world_rank) {
        MPI_Ssend(&token, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
    }
    MPI_Iallreduce(in, out, (int) n, MPI_INT, MPI_SUM, c, &req);
    if (0 == world_rank) {
        MPI_Recv(&got, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    snprintf(what, sizeof what, "iallreduce initiation is local (%s comm) bytes=%zu",
             fresh ? "fresh" : "world", bytes);
    check_allreduce(slot, what, out, n, world_size, t, NULL);
    if (0 == world_rank) {
        expect(slot, got == token, what, "rank 1's message");
    }
    if (fresh) {
        MPI_Comm_free(&c);
    }
    free(in);
    free(out);
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = { { "single", MPI_THREAD_SINGLE }, { "funneled", MPI_THREAD_FUNNELED },
                   { "serialized", MPI_THREAD_SERIALIZED }, { "multiple", MPI_THREAD_MULTIPLE } };
    int provided = -1;
    const char *lname = argc == 2 ? argv[1] : "";
    level_asked = -1;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (0 == strcmp(lname, levels[i].name)) {
            level_asked = levels[i].level;
        }
    }
    if (level_asked < 0) {
        fprintf(stderr, "usage: %s single|funneled|serialized|multiple\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init_thread(&argc, &argv, level_asked, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (0 == world_rank) {
        printf("level %s: asked %d, provided %d\n", lname, level_asked, provided);
    }
    if (provided < level_asked) {
        if (0 == world_rank) {
            printf("FAIL the MPI library provides thread level %d < %d\n", provided, level_asked);
            printf("RESULT: 0 passed, 1 failed\n");
        }
        MPI_Finalize();
        return 1;
    }

    /* dup, split */
    const int slot = NTHREADS;
    MPI_Comm dup, split;
    step("dup");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    step("dup allreduce");
    {
        int in[4], out[4];
        for (int i = 0; i < 4; i++) {
            in[i] = val(world_rank, (size_t) i, 1);
        }
        MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, dup);
        check_allreduce(slot, "allreduce on the first dup", out, 4, world_size, 1, NULL);
    }
    step("split");
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_size - world_rank, &split);
    {
        int ssize, in = world_rank + 1, out = -1, want = 0;
        MPI_Comm_size(split, &ssize);
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, split);
        for (int r = world_rank % 2; r < world_size; r += 2) {
            want += r + 1;
        }
        char d[64];
        snprintf(d, sizeof d, "got=%d want=%d", out, want);
        expect(slot, out == want, "allreduce on a split", d);
    }
    MPI_Comm_free(&split);

    /* first, local */
    step("first nonblocking");
    first_nonblocking(8, 2);
    first_nonblocking(1 << 20, 3);
    if (world_size >= 2) {
        step("local initiation");
        local_initiation(8, 4, 1);
        local_initiation(256 * 1024, 5, 1);
        local_initiation(256 * 1024, 6, 0);
    }

    /* mix */
    MPI_Comm comms[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        MPI_Comm_dup(i % 2 ? dup : MPI_COMM_WORLD, &comms[i]);
    }
    if (MPI_THREAD_MULTIPLE == level_asked) {
        step("mix: threads");
        pthread_t th[NTHREADS];
        thread_arg_t args[NTHREADS];
        for (int i = 0; i < NTHREADS; i++) {
            args[i].slot = i;
            args[i].comm = comms[i];
            if (0 != pthread_create(&th[i], NULL, thread_main, &args[i])) {
                printf("FAIL rank=%d: pthread_create\n", world_rank);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        for (int i = 0; i < NTHREADS; i++) {
            pthread_join(th[i], NULL);
        }
    } else {
        step("mix: main thread");
        for (int i = 0; i < NTHREADS; i++) {
            thread_arg_t a = { i, comms[i] };
            thread_main(&a);
        }
    }
    for (int i = 0; i < NTHREADS; i++) {
        MPI_Comm_free(&comms[i]);
    }
    MPI_Comm_free(&dup);
    step("done");

    int mine[2] = { 0, 0 }, all[2] = { 0, 0 };
    for (int i = 0; i <= NTHREADS; i++) {
        mine[0] += checks[i];
        mine[1] += fails[i];
    }
    MPI_Reduce(mine, all, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == world_rank) {
        printf("RESULT: %d passed, %d failed\n", all[0] - all[1], all[1]);
    }
    MPI_Finalize();
    return all[1] ? 1 : 0;
}
