/*
 * xccl_calibrate: measures the alpha-beta-gamma parameters of xccl's cost
 * model on this machine and writes them as a cost file that the component
 * reads (coll_xccl_cost_file):
 *
 *     alpha=<s per message> beta=<s per byte> gamma=<s per byte reduced>
 *     delta=<s per byte copied> flag=<s per flag wait> peer=<s per byte>
 *
 * alpha and beta come from ping-pongs between ranks 0 and 1 over xccl's own
 * transport (ucx_glue, same UCX settings as the component's defaults),
 * gamma from xccl's float SUM kernel on 16 MiB, delta from memcpy of 16 MiB.
 * The shared-memory level's terms come from a segment of the level's own
 * (segment/, the flags the executor polls): flag is half the
 * round trip of a flag ping-pong between the two ranks; peer is what a
 * byte the other rank has just written into its slot costs to copy out,
 * over the same copy of bytes this rank has just written (PEER_BYTES at a
 * time, a piece of the level's pipelines: the other core's cache).  The
 * two ranks must share a node for those.  Medians of repeated runs.
 *
 *     mpirun -np 2 ./xccl_calibrate [-o FILE] [-t TLS]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/xccl_base.h"
#include "segment/xccl_segment.h"
#include "ucx_glue/xccl_ucx.h"

#define REPS 11

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* The median of REPS runs (reorders t). */
static double median(double t[REPS])
{
    qsort(t, REPS, sizeof(double), cmp_double);
    return t[REPS / 2];
}

/* malloc, or the job ends. */
static void *must_malloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (NULL == p) {
        fprintf(stderr, "xccl_calibrate: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

static void wait_req(void *req)
{
    if (NULL == req) {
        return;
    }
    int rc;
    while (0 == (rc = xccl_ucx_test(req))) {
        xccl_ucx_progress();
    }
    if (rc < 0) {
        fprintf(stderr, "xccl_calibrate: transfer failed: %s\n", xccl_ucx_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Median one-way time of a message of len bytes (half a round trip). */
static double pingpong(ucp_ep_h ep, int rank, char *buf, size_t len, int iters)
{
    double t[REPS];
    uint32_t seq = 0;
    for (int rep = 0; rep < REPS; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++, seq++) {
            void *req = NULL;
            ucp_tag_t to_peer = xccl_ucx_tag(0, (uint32_t) rank, seq, 0);
            ucp_tag_t from_peer = xccl_ucx_tag(0, (uint32_t) (1 - rank), seq, 0);
            if (0 == rank) {
                xccl_ucx_isend(ep, buf, len, to_peer, XCCL_UCX_MEM_HOST, &req);
                wait_req(req);
                xccl_ucx_irecv(buf, len, from_peer, XCCL_UCX_MEM_HOST, &req);
                wait_req(req);
            } else {
                xccl_ucx_irecv(buf, len, from_peer, XCCL_UCX_MEM_HOST, &req);
                wait_req(req);
                xccl_ucx_isend(ep, buf, len, to_peer, XCCL_UCX_MEM_HOST, &req);
                wait_req(req);
            }
        }
        t[rep] = (MPI_Wtime() - t0) / iters / 2;
    }
    return median(t);
}

static double copy_time_per_byte(size_t bytes)
{
    char *a = must_malloc(bytes), *b = must_malloc(bytes);
    double t[REPS];
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int rep = 0; rep < REPS; rep++) {
        double t0 = MPI_Wtime();
        memcpy(b, a, bytes);
        t[rep] = (MPI_Wtime() - t0) / (double) bytes;
    }
    free(a);
    free(b);
    return median(t);
}

static double reduce_time_per_byte(size_t bytes)
{
    size_t n = bytes / sizeof(float);
    float *a = must_malloc(bytes), *b = must_malloc(bytes);
    double t[REPS];
    xccl_reduce_fn_t fn = xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM);
    for (size_t i = 0; i < n; i++) {
        a[i] = (float) (i & 1023);
        b[i] = 1.0f;
    }
    for (int rep = 0; rep < REPS; rep++) {
        double t0 = MPI_Wtime();
        fn(b, a, b, n);
        t[rep] = (MPI_Wtime() - t0) / (double) bytes;
    }
    free(a);
    free(b);
    return median(t);
}

/* Spins until rank peer's flag reaches (seq, val). */
static void flag_wait(xccl_segment_t *seg, int peer, uint32_t seq, uint32_t val)
{
    while (!xccl_segment_flag_test(seg, peer, seq, val)) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
}

#define FLAG_ITERS 20000
#define PEER_BYTES ((size_t) 256 * 1024)
#define PEER_ITERS 200

/* The shared-memory level's flag and peer terms (see the top): rank 0
 * creates a segment, rank 1 attaches to it (the descriptor goes over MPI). */
static void shm_terms(int rank, double *flag, double *peer)
{
    xccl_segment_t *seg = NULL;
    xccl_segment_desc_t desc;
    int rc = 0;
    if (0 == rank) {
        rc = xccl_segment_create(XCCL_SEGMENT_AUTO, 2, 0, PEER_BYTES, &seg, &desc);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&desc, (int) sizeof(desc), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (0 == rc && 1 == rank) {
        rc = xccl_segment_attach(&desc, 1, &seg);
    }
    int bad = 0 != rc, anybad;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (anybad) {
        fprintf(stderr, "xccl_calibrate: rank %d: no shared segment (%d): are both ranks on one "
                "node?\n", rank, rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);       /* both attached */
    xccl_segment_release_fd(seg);

    /* flag: (seq k, 1) goes 0 -> 1 -> 0; REPS runs of FLAG_ITERS */
    const int other = 1 - rank;
    uint32_t seq = 0;
    double t[REPS];
    for (int rep = 0; rep < REPS; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < FLAG_ITERS; i++) {
            seq++;
            if (0 == rank) {
                xccl_segment_flag_post(seg, seq, 1);
                flag_wait(seg, other, seq, 1);
            } else {
                flag_wait(seg, other, seq, 1);
                xccl_segment_flag_post(seg, seq, 1);
            }
        }
        t[rep] = (MPI_Wtime() - t0) / FLAG_ITERS / 2;
    }
    *flag = median(t);

    /* peer: rank 1 writes its slot, val 1; rank 0 copies it out, val 2; the
     * same copy of a buffer rank 0 has just written, for the difference */
    char *dst = must_malloc(PEER_BYTES), *src = must_malloc(PEER_BYTES);
    char *slot = xccl_segment_slot(seg, 1);
    double tp[REPS], tl[REPS];
    memset(dst, 0, PEER_BYTES);
    memset(src, 0, PEER_BYTES);
    for (int rep = 0; rep < REPS; rep++) {
        double sum_peer = 0.0, sum_local = 0.0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < PEER_ITERS; i++) {
            seq++;
            if (1 == rank) {
                memset(slot, (int) (seq & 0xff), PEER_BYTES);
                xccl_segment_flag_post(seg, seq, 1);
                flag_wait(seg, other, seq, 2);
            } else {
                flag_wait(seg, other, seq, 1);
                double t0 = MPI_Wtime();
                memcpy(dst, slot, PEER_BYTES);
                sum_peer += MPI_Wtime() - t0;
                xccl_segment_flag_post(seg, seq, 2);
                memset(src, (int) (seq & 0xff), PEER_BYTES);
                t0 = MPI_Wtime();
                memcpy(dst, src, PEER_BYTES);
                sum_local += MPI_Wtime() - t0;
            }
        }
        tp[rep] = sum_peer / PEER_ITERS / (double) PEER_BYTES;
        tl[rep] = sum_local / PEER_ITERS / (double) PEER_BYTES;
    }
    const double from_peer = median(tp), local = median(tl);
    *peer = from_peer > local ? from_peer - local : 0.0;
    MPI_Bcast(peer, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    free(dst);
    free(src);
    MPI_Barrier(MPI_COMM_WORLD);       /* nobody touches the segment any more */
    xccl_segment_detach(seg);
}

int main(int argc, char **argv)
{
    const char *out = NULL, *tls = "posix,cma,tcp,self";
    int rank, size, opt;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "o:t:h")) != -1) {
        switch (opt) {
        case 'o': out = optarg; break;
        case 't': tls = optarg; break;
        default:
            if (0 == rank) {
                fprintf(stderr, "usage: mpirun -np 2 %s [-o FILE] [-t UCX_TLS]\n", argv[0]);
            }
            MPI_Finalize();
            return 'h' == opt ? 0 : 2;
        }
    }
    if (2 != size) {
        if (0 == rank) {
            fprintf(stderr, "xccl_calibrate: run it with exactly 2 ranks\n");
        }
        MPI_Finalize();
        return 2;
    }
    if (0 != xccl_ucx_init(tls, "put_zcopy", NULL, 0)) {
        fprintf(stderr, "xccl_calibrate: UCX: %s\n", xccl_ucx_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Exchange worker addresses (stock point-to-point). */
    const void *addr;
    size_t len;
    xccl_ucx_address(&addr, &len);
    int mylen = (int) len, peerlen = 0;
    MPI_Sendrecv(&mylen, 1, MPI_INT, 1 - rank, 0, &peerlen, 1, MPI_INT, 1 - rank, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    char *peer = malloc((size_t) peerlen);
    MPI_Sendrecv(addr, mylen, MPI_BYTE, 1 - rank, 1, peer, peerlen, MPI_BYTE, 1 - rank, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ucp_ep_h ep;
    if (0 != xccl_ucx_ep_get((uint64_t) (1 - rank), peer, (size_t) peerlen, &ep)) {
        fprintf(stderr, "xccl_calibrate: %s\n", xccl_ucx_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    free(peer);

    const size_t big = 16u << 20;
    char *buf = calloc(1, big);
    pingpong(ep, rank, buf, big, 2);                    /* warm up, wire up */
    double alpha = pingpong(ep, rank, buf, 8, 1000);
    double t_big = pingpong(ep, rank, buf, big, 5);
    double beta = (t_big - alpha) / (double) big;
    double gamma = reduce_time_per_byte(big);
    double delta = copy_time_per_byte(big);
    double flag, peer_byte;
    shm_terms(rank, &flag, &peer_byte);
    free(buf);

    if (0 == rank) {
        FILE *f = out ? fopen(out, "w") : stdout;
        if (NULL == f) {
            perror(out);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(f, "alpha=%.3e beta=%.3e gamma=%.3e delta=%.3e flag=%.3e peer=%.3e\n", alpha, beta,
                gamma, delta, flag, peer_byte);
        if (out) {
            fclose(f);
            printf("xccl_calibrate: alpha %.2f us, %.2f GB/s on the wire, %.2f GB/s reduced, "
                   "%.2f GB/s copied, flag %.3f us, peer's fresh bytes +%.3g ns/KiB -> %s\n",
                   alpha * 1e6, 1e-9 / beta, 1e-9 / gamma, 1e-9 / delta, flag * 1e6,
                   peer_byte * 1024 * 1e9, out);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    xccl_ucx_ep_put((uint64_t) (1 - rank));
    xccl_ucx_fini();
    MPI_Finalize();
    return 0;
}
