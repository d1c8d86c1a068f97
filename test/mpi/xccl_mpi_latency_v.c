/*
 * xccl_mpi_latency_v: the latency path of the v forms (gatherv, scatterv,
 * alltoallv; ompi_coll_xccl/coll_xccl_latency_v.c) under skew, among the
 * six collectives' latency-path calls and nonblocking v calls.
 *
 * usage: xccl_mpi_latency_v [-n ITERATIONS] [-s SEED]   (default 3000, 1)
 *
 * One long sequence of calls on MPI_COMM_WORLD with no barrier between
 * them; every rank derives call i from (seed, i) alone:
 *   - which: MPI_Gatherv, MPI_Scatterv or MPI_Alltoallv (most calls), a
 *     small MPI_Allreduce, MPI_Bcast (its root kept for runs of calls, so
 *     that a root runs ahead) or MPI_Alltoall, MPI_Gather, MPI_Scatter,
 *     MPI_Reduce or MPI_Allgatherv of up to about 4 KiB a rank (the
 *     latency path's, where all of a call fits, else the executor's or
 *     the fallback's; see fixed_call), or the start of a nonblocking v
 *     call (MPI_Igatherv, _Iscatterv, _Ialltoallv) that stays in flight
 *     over the next one to three calls, then is waited for, or of a
 *     nonblocking MPI_Igather, _Iscatter, _Ireduce or _Iallgatherv of the
 *     sizes below (in flight likewise, beside a v call that may be);
 *   - the sizes, from each sender to each receiver: all small (0 to about
 *     1 KiB, a quarter of them 0, now and then 4080 to 4110 bytes: around
 *     the 4096 bytes of blocks a rank's part of the latency path holds,
 *     where a sender's part also runs out of room); one rank's blocks
 *     past that (5 to 20 KiB: the executor's) and the others' small (the
 *     latency path's, in the same call); or every block up to 20 KiB;
 *   - the blocking v calls come in runs of 1 to 16 of one collective and
 *     root (other calls among them), one run in eight of 100 to 199
 *     calls with nothing else among them, all blocks small (at most
 *     1100 bytes: no executor call stops a rank), before whose first call a
 *     receiver (gatherv: the root, scatterv: the rank after the root)
 *     sleeps 3 ms, so that the senders run ahead through the latency
 *     path's ring (100 calls pass through it twice where a call takes a
 *     slot of 4 KiB, as gatherv's at any size and the others' at np 2);
 *   - the root (every rank in turn), MPI_IN_PLACE where the standard
 *     allows it (gatherv's and scatterv's root; alltoallv, whose sizes are
 *     then the same both ways), the blocks in a random order with gaps
 *     between them (on each side its own layout), in one call of four
 *     (each rank its own) the buffer passed from about its middle, the
 *     blocks before it at negative displacements;
 *   - which ranks sleep 1-60 us before the call (about one call in eight).
 * Before them, each of gather, scatter, reduce and allgatherv is twice the
 * first call on a new communicator (MPI_Comm_dup), which takes the whole
 * way (its set-up and vote in the call).
 * Every byte of every result is checked against values each rank computes
 * itself; the gaps, the bytes after the blocks, the receive buffer off
 * gatherv's root and every send buffer must come back untouched.
 *
 * Output: "FAIL ..." lines (at most 10 per rank); every rank
 *   CALLS rank=<r> gatherv=<n> scatterv=<n> alltoallv=<n> igatherv=<n> iscatterv=<n> ialltoallv=<n>
 *         gather=<n> scatter=<n> reduce=<n> allgatherv=<n> igather=<n> iscatter=<n>
 *         ireduce=<n> iallgatherv=<n>
 * (what reached MPI, for counting verbose lines); then from rank 0
 *   RESULT: <passed> passed, <failed> failed
 * Exit status 0 when every check passed on every rank.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xccl_mpi_latency_v.h"

enum { GATHERV, SCATTERV, ALLTOALLV, NV };
static const char *const vname[NV] = { "gatherv", "scatterv", "alltoallv" };
int rank, size, nfail;
uint64_t seed = 1;

void fail(long i, const char *coll, const char *what, long k, long got, long want)
{
    if (nfail++ < 10) {
        printf("FAIL rank %d call %ld %s: %s at %ld: %ld, want %ld\n", rank, i, coll, what, k, got, want);
    }
}

/* One v call: its sizes (cnt[s * size + d]: bytes from s to d), root,
 * in place, this rank's layouts and buffers. */
typedef struct {
    long i;
    int which, root, inplace;
    int *cnt;
    int *sc, *sd, *rc, *rd;        /* this rank's counts and displacements */
    int *sdm, *rdm;                /* the displacements the call passes: sd and rd less
                                    * sshift and rshift, from sb and rb moved by them */
    int sshift, rshift;            /* bytes (about half the span in some calls: some
                                    * displacements negative), else 0 */
    unsigned char *sb, *rb, *sref; /* send, receive; a copy of the send buffer */
    size_t sspan, rspan;
    MPI_Request req;
} vcall_t;

/* Bytes from s to d in call i: mode 0 all small, 3 the same without
 * the ones around the latency path's largest block, 1 one rank's blocks
 * large (the agreement case: scatterv's root's block for rank big, the
 * blocks rank big sends in the others; in place, where it receives too),
 * 2 every block up to MAXB; symmetric in place (alltoallv). */
static int bytes_of(long i, int which, int mode, int big, int s, int d, int sym)
{
    if (sym && s > d) {
        const int t = s;
        s = d;
        d = t;
    }
    const uint64_t h = h3(seed ^ (uint64_t) i, (uint64_t) s * 131 + (uint64_t) d, 99);
    const int large = SCATTERV == which ? d == big : s == big || (sym && d == big);
    if (2 == mode || (1 == mode && large)) {
        return 1 == mode ? 5000 + (int) (h % (MAXB - 5000)) : (int) (h % (MAXB + 1));
    }
    if (h % 4 == 0) {
        return 0;
    }
    if (h % 16 == 1 && 3 != mode) {
        return 4080 + (int) ((h >> 8) % 31);
    }
    return (int) ((h >> 8) % 1100);
}

size_t layout(long i, int salt, const int *cnt, int *displs, int n)
{
    int order[64];
    for (int j = 0; j < n; j++) {
        order[j] = j;
    }
    for (int j = n - 1; j > 0; j--) {
        const int k = (int) (h3(seed ^ (uint64_t) i, (uint64_t) salt, (uint64_t) j) % (uint64_t) (j + 1));
        const int t = order[j];
        order[j] = order[k];
        order[k] = t;
    }
    size_t at = 0;
    for (int j = 0; j < n; j++) {
        at += h3(seed ^ (uint64_t) i, (uint64_t) salt + 7, (uint64_t) j) % (GAP + 1);
        displs[order[j]] = (int) at;
        at += (size_t) cnt[order[j]];
    }
    return at + GAP;
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (NULL == p) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* Sets up v for call i: the collective and root from the hash pick, the
 * mode (tiny: 3) and in place from h. */
static void v_prepare(vcall_t *v, long i, uint64_t h, uint64_t pick, int tiny)
{
    const int p = size, me = rank;
    v->i = i;
    v->which = (int) (pick % NV);
    v->root = (int) ((pick >> 8) % (uint64_t) p);
    v->inplace = (h >> 12) % 4 == 0;
    const int mode = tiny ? 3 : (h >> 16) % 8 < 5 ? 0 : (h >> 16) % 8 < 7 ? 1 : 2;
    const int big = (int) ((h >> 20) % (uint64_t) p);
    const int sym = ALLTOALLV == v->which && v->inplace;
    for (int s = 0; s < p; s++) {
        for (int d = 0; d < p; d++) {
            v->cnt[s * p + d] = bytes_of(i, v->which, mode, big, s, d, sym);
        }
    }
    /* this rank's sides: gatherv sends cnt[me][root] and the root receives
     * cnt[s][root]; scatterv the other way; alltoallv all */
    for (int q = 0; q < p; q++) {
        v->sc[q] = GATHERV == v->which ? (q == v->root ? v->cnt[me * p + q] : 0)
                   : SCATTERV == v->which ? (me == v->root ? v->cnt[me * p + q] : 0)
                                          : v->cnt[me * p + q];
        v->rc[q] = GATHERV == v->which ? (me == v->root ? v->cnt[q * p + me] : 0)
                   : SCATTERV == v->which ? (q == v->root ? v->cnt[q * p + me] : 0)
                                          : v->cnt[q * p + me];
    }
    v->sspan = layout(i, 1000 + me, v->sc, v->sd, p);
    v->rspan = layout(i, 2000 + me, v->rc, v->rd, p);
    if (sym) {
        memcpy(v->sd, v->rd, (size_t) p * sizeof(int));
        v->sspan = v->rspan;
    }
    /* one call in four passes the buffers from about their middle, the
     * blocks before it at negative displacements (each rank its own) */
    const int neg = (h3(seed ^ (uint64_t) i, 3000 + (uint64_t) me, 0) & 3) == 0;
    v->sshift = neg && !sym ? (int) (v->sspan / 2) : 0;
    v->rshift = neg ? (int) (v->rspan / 2) : 0;
    if (sym) {
        v->sshift = v->rshift;
    }
    for (int q = 0; q < p; q++) {
        v->sdm[q] = v->sd[q] - v->sshift;
        v->rdm[q] = v->rd[q] - v->rshift;
    }
    memset(v->rb, FILL, v->rspan + GAP);
    memset(v->sb, FILL, v->sspan + GAP);
    for (int q = 0; q < p; q++) {
        for (int k = 0; k < v->sc[q]; k++) {
            v->sb[v->sd[q] + k] = bval(i, me, q, (size_t) k);
        }
    }
    memcpy(v->sref, v->sb, v->sspan + GAP);
    if (v->inplace && GATHERV == v->which && me == v->root) {
        /* the root's own block already in place */
        for (int k = 0; k < v->rc[me]; k++) {
            v->rb[v->rd[me] + k] = bval(i, me, me, (size_t) k);
        }
    } else if (v->inplace && ALLTOALLV == v->which) {
        memcpy(v->rb, v->sb, v->rspan + GAP);
    }
}

/* Starts v (nonblocking: into v->req) or runs it. */
static int v_call(vcall_t *v, int nb)
{
    const int me = rank, root = v->root, ip = v->inplace;
    MPI_Request *r = nb ? &v->req : NULL;
    unsigned char *sb = v->sb + v->sshift, *rb = v->rb + v->rshift;
    switch (v->which) {
    case GATHERV: {
        const void *s = ip && me == root ? MPI_IN_PLACE : v->sb + v->sd[root];
        return nb ? MPI_Igatherv(s, v->sc[root], MPI_BYTE, rb, v->rc, v->rdm, MPI_BYTE, root, MPI_COMM_WORLD, r)
                  : MPI_Gatherv(s, v->sc[root], MPI_BYTE, rb, v->rc, v->rdm, MPI_BYTE, root, MPI_COMM_WORLD);
    }
    case SCATTERV: {
        void *d = ip && me == root ? MPI_IN_PLACE : v->rb + v->rd[root];
        return nb ? MPI_Iscatterv(sb, v->sc, v->sdm, MPI_BYTE, d, v->rc[root], MPI_BYTE, root, MPI_COMM_WORLD, r)
                  : MPI_Scatterv(sb, v->sc, v->sdm, MPI_BYTE, d, v->rc[root], MPI_BYTE, root, MPI_COMM_WORLD);
    }
    default: {
        const void *s = ip ? MPI_IN_PLACE : sb;
        return nb ? MPI_Ialltoallv(s, v->sc, v->sdm, MPI_BYTE, rb, v->rc, v->rdm, MPI_BYTE, MPI_COMM_WORLD, r)
                  : MPI_Alltoallv(s, v->sc, v->sdm, MPI_BYTE, rb, v->rc, v->rdm, MPI_BYTE, MPI_COMM_WORLD);
    }
    }
}

/* Every byte of v's receive buffer (blocks, gaps, the bytes after) and
 * its send buffer. */
static void v_check(const vcall_t *v)
{
    const int p = size, me = rank;
    const char *name = vname[v->which];
    unsigned char *want = xmalloc(v->rspan + GAP);
    memset(want, FILL, v->rspan + GAP);
    /* scatterv's root in place receives nothing; a gatherv off the root
     * neither */
    const int receives = !(SCATTERV == v->which && v->inplace && me == v->root);
    for (int q = 0; receives && q < p; q++) {
        for (int k = 0; k < v->rc[q]; k++) {
            want[v->rd[q] + k] = bval(v->i, q, me, (size_t) k);
        }
    }
    for (size_t k = 0; k < v->rspan + GAP; k++) {
        if (v->rb[k] != want[k]) {
            fail(v->i, name, "receive buffer", (long) k, v->rb[k], want[k]);
            break;
        }
    }
    free(want);
    if (!(ALLTOALLV == v->which && v->inplace)) {
        for (size_t k = 0; k < v->sspan + GAP; k++) {
            if (v->sb[k] != v->sref[k]) {
                fail(v->i, name, "send buffer", (long) k, v->sb[k], v->sref[k]);
                break;
            }
        }
    }
}

static void v_alloc(vcall_t *v)
{
    const size_t p = (size_t) size, span = p * (MAXB + GAP) + 2 * GAP;
    v->cnt = xmalloc(p * p * sizeof(int));
    v->sc = xmalloc(p * sizeof(int));
    v->sd = xmalloc(p * sizeof(int));
    v->rc = xmalloc(p * sizeof(int));
    v->rd = xmalloc(p * sizeof(int));
    v->sdm = xmalloc(p * sizeof(int));
    v->rdm = xmalloc(p * sizeof(int));
    v->sb = xmalloc(span);
    v->rb = xmalloc(span);
    v->sref = xmalloc(span);
}

/* A small call of the six: allreduce of 1-64 ints, bcast of 1-200 bytes
 * from a root kept for runs of calls, alltoall of 1-256 bytes a block. */
static void six_call(long i, uint64_t h, int broot)
{
    const int p = size;
    static int s6[64 * 256], r6[64 * 256];
    const int kind = (int) (h % 3);
    if (0 == kind) {
        const int n = 1 + (int) ((h >> 8) % 64);
        for (int k = 0; k < n; k++) {
            s6[k] = (int) (h3(seed ^ (uint64_t) i, (uint64_t) rank, (uint64_t) k) & 0xffff);
        }
        MPI_Allreduce(s6, r6, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (int k = 0; k < n; k++) {
            long want = 0;
            for (int q = 0; q < p; q++) {
                want += (long) (h3(seed ^ (uint64_t) i, (uint64_t) q, (uint64_t) k) & 0xffff);
            }
            if (r6[k] != (int) want) {
                fail(i, "allreduce", "element", k, r6[k], want);
                break;
            }
        }
    } else if (1 == kind) {
        const int n = 1 + (int) ((h >> 8) % 200);
        unsigned char *b = (unsigned char *) r6;
        for (int k = 0; k < n; k++) {
            b[k] = rank == broot ? bval(i, broot, 0, (size_t) k) : 0;
        }
        MPI_Bcast(b, n, MPI_BYTE, broot, MPI_COMM_WORLD);
        for (int k = 0; k < n; k++) {
            if (b[k] != bval(i, broot, 0, (size_t) k)) {
                fail(i, "bcast", "byte", k, b[k], bval(i, broot, 0, (size_t) k));
                break;
            }
        }
    } else {
        const int n = 1 + (int) ((h >> 8) % 256);
        unsigned char *sb = (unsigned char *) s6, *rb = (unsigned char *) r6;
        for (int q = 0; q < p; q++) {
            for (int k = 0; k < n; k++) {
                sb[q * n + k] = bval(i, rank, q, (size_t) k);
            }
        }
        MPI_Alltoall(sb, n, MPI_BYTE, rb, n, MPI_BYTE, MPI_COMM_WORLD);
        for (int q = 0; q < p; q++) {
            for (int k = 0; k < n; k++) {
                if (rb[q * n + k] != bval(i, q, rank, (size_t) k)) {
                    fail(i, "alltoall", "byte", q * n + k, rb[q * n + k], bval(i, q, rank, (size_t) k));
                    q = p;
                    break;
                }
            }
        }
    }
}

int main(int argc, char **argv)
{
    long iters = 3000;
    int opt;
    while ((opt = getopt(argc, argv, "n:s:")) != -1) {
        if ('n' == opt) {
            iters = atol(optarg);
        } else if ('s' == opt) {
            seed = strtoull(optarg, NULL, 0);
        } else {
            fprintf(stderr, "usage: xccl_mpi_latency_v [-n ITERATIONS] [-s SEED]\n");
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 64) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    vcall_t v, pend;
    fcall_t f, fpend;
    v_alloc(&v);
    v_alloc(&pend);
    f_alloc(&f);
    f_alloc(&fpend);
    long passed = 0, calls[2][NV] = { { 0 } }, fcalls[2][NF] = { { 0 } };
    int pending = 0, pend_left = 0, fpending = 0, fpend_left = 0, broot = 0, brun = 0, vrun = 0, pure = 0,
        slow = 0;
    uint64_t vpick = 0;
    /* Each of gather, scatter, reduce, allgatherv as the first call on a
     * new communicator (twice): before its set-up, the whole way, where
     * decide must keep it from the fallback as the fast way of later
     * calls would take it. */
    long first[NF] = { 0 };
    for (int k = 0; k < 2 * NF; k++) {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        const int before = nfail;
        fixed_call(&f, -1 - k, (h3(seed, (uint64_t) k, 99) & ~(uint64_t) 3) | (uint64_t) (k % NF), first, d);
        passed += nfail == before;
        MPI_Comm_free(&d);
    }
    /* Three nonblocking calls of the four started as the first calls on a
     * new communicator, one rank testing each for 2 ms before its next
     * start: made while the set-up runs, which so ends sooner on that rank
     * than on the others; each call decides as the path would have once
     * the set-up is over, alike on every rank. */
    fcall_t early[3];
    long early_calls[NF] = { 0 };    /* (not on comm 0: not in CALLS) */
    for (int j = 0; j < 3; j++) {
        f_alloc(&early[j]);
    }
    for (int k = 0; k < 2 * NF; k++) {
        MPI_Comm d;
        MPI_Request r[3];
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        const int before = nfail;
        for (int j = 0; j < 3; j++) {
            const long i = -100 - 3 * k - j;
            fixed_start(&early[j], i, (h3(seed, (uint64_t) -i, 98) & ~(uint64_t) 3) | (uint64_t) ((k + j) % NF),
                        early_calls, d, 1);
            r[j] = early[j].req;
            if (rank == k % size) {
                /* this rank's set-up may end now, before its next start */
                int done;
                const double t0 = MPI_Wtime();
                while (MPI_Wtime() - t0 < 2e-3) {
                    MPI_Test(&r[j], &done, MPI_STATUS_IGNORE);
                    if (done) {
                        r[j] = MPI_REQUEST_NULL;
                        break;
                    }
                }
            }
        }
        MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
        for (int j = 0; j < 3; j++) {
            fixed_check(&early[j]);
        }
        passed += nfail == before;
        MPI_Comm_free(&d);
    }
    for (long i = 0; i < iters; i++) {
        const uint64_t h = h3(seed, (uint64_t) i, 7);
        const uint64_t d = h3(seed, (uint64_t) i, (uint64_t) rank + 100);
        if (d % 8 == 0) {
            usleep((useconds_t) (1 + (d >> 8) % 60));
        }
        if (brun-- <= 0) {
            broot = (int) ((h >> 44) % (uint64_t) size);
            brun = (int) ((h >> 50) % 4);
        }
        const int before = nfail;
        const int kind = (int) ((h >> 32) % 16);
        if (kind < 3 && !pure) {
            six_call(i, h >> 36, broot);
        } else if (kind == 12 && !fpending && !pure) {
            fixed_start(&fpend, i, h >> 36, fcalls[1], MPI_COMM_WORLD, 1);
            fpending = 1;
            fpend_left = 1 + (int) ((h >> 40) % 3);
        } else if (kind >= 13 && !pure) {
            fixed_call(&f, i, h >> 36, fcalls[0], MPI_COMM_WORLD);
        } else if (kind < 5 && !pending && !pure) {
            v_prepare(&pend, i, h >> 36, h >> 36, 0);
            if (MPI_SUCCESS != v_call(&pend, 1)) {
                fail(i, vname[pend.which], "return code", 0, 1, 0);
            }
            calls[1][pend.which]++;
            pending = 1;
            pend_left = 1 + (int) ((h >> 40) % 3);
        } else {
            if (vrun-- <= 0) {
                const uint64_t g = h3(seed, (uint64_t) i, 11);
                vpick = h >> 36;
                pure = g % 8 == 0;
                vrun = pure ? 100 + (int) ((g >> 8) % 100) : (int) (g % 16);
                slow = pure;
            }
            v_prepare(&v, i, h >> 36, vpick, pure);
            if (slow && rank == (GATHERV == v.which ? v.root : (v.root + 1) % size)) {
                usleep(3000);        /* the others run ahead through the ring */
            }
            slow = 0;
            if (MPI_SUCCESS != v_call(&v, 0)) {
                fail(i, vname[v.which], "return code", 0, 1, 0);
            }
            calls[0][v.which]++;
            v_check(&v);
        }
        pure &= vrun > 0;
        if (pending && (pend_left-- <= 0 || i == iters - 1)) {
            MPI_Wait(&pend.req, MPI_STATUS_IGNORE);
            v_check(&pend);
            pending = 0;
        }
        if (fpending && (fpend_left-- <= 0 || i == iters - 1)) {
            MPI_Wait(&fpend.req, MPI_STATUS_IGNORE);
            fixed_check(&fpend);
            fpending = 0;
        }
        passed += nfail == before;
    }
    passed += ahead_run(&f, iters, AHEAD, fcalls[1]);
    /* (reduce: and the one below) */
    printf("CALLS rank=%d gatherv=%ld scatterv=%ld alltoallv=%ld igatherv=%ld iscatterv=%ld ialltoallv=%ld "
           "gather=%ld scatter=%ld reduce=%ld allgatherv=%ld igather=%ld iscatter=%ld ireduce=%ld "
           "iallgatherv=%ld\n",
           rank, calls[0][GATHERV], calls[0][SCATTERV], calls[0][ALLTOALLV], calls[1][GATHERV],
           calls[1][SCATTERV], calls[1][ALLTOALLV], fcalls[0][F_GATHER], fcalls[0][F_SCATTER],
           fcalls[0][F_REDUCE] + 1, fcalls[0][F_ALLGATHERV], fcalls[1][F_GATHER], fcalls[1][F_SCATTER],
           fcalls[1][F_REDUCE], fcalls[1][F_ALLGATHERV]);
    long mine[2] = { passed, iters + 4 * NF + AHEAD - passed }, all[2];
    MPI_Reduce(mine, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("RESULT: %ld passed, %ld failed\n", all[0], all[1]);
    }
    int bad = nfail > 0, anybad;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return anybad ? 1 : 0;
}
