/*
 * xccl_calibrate: measures the alpha-beta-gamma parameters of xccl's cost
 * model on this machine and writes them as a cost file that the component
 * reads (coll_xccl_cost_file):
 *
 *     alpha=<s per message> beta=<s per byte> gamma=<s per byte reduced>
 *     delta=<s per byte copied>
 *
 * alpha and beta come from ping-pongs between ranks 0 and 1 over xccl's own
 * transport (ucx_glue, same UCX settings as the component's defaults),
 * gamma from xccl's float SUM kernel on 16 MiB, delta from memcpy of 16 MiB.
 * Medians of repeated runs.
 *
 *     mpirun -np 2 ./xccl_calibrate [-o FILE] [-t TLS]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algos/xccl_algos.h"
#include "ucx_glue/xccl_ucx.h"

#define REPS 11

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
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
                xccl_ucx_isend(ep, buf, len, to_peer, &req);
                wait_req(req);
                xccl_ucx_irecv(buf, len, from_peer, &req);
                wait_req(req);
            } else {
                xccl_ucx_irecv(buf, len, from_peer, &req);
                wait_req(req);
                xccl_ucx_isend(ep, buf, len, to_peer, &req);
                wait_req(req);
            }
        }
        t[rep] = (MPI_Wtime() - t0) / iters / 2;
    }
    qsort(t, REPS, sizeof(double), cmp_double);
    return t[REPS / 2];
}

static double copy_time_per_byte(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    double t[REPS];
    if (NULL == a || NULL == b) {
        fprintf(stderr, "xccl_calibrate: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int rep = 0; rep < REPS; rep++) {
        double t0 = MPI_Wtime();
        memcpy(b, a, bytes);
        t[rep] = (MPI_Wtime() - t0) / (double) bytes;
    }
    free(a);
    free(b);
    qsort(t, REPS, sizeof(double), cmp_double);
    return t[REPS / 2];
}

static double reduce_time_per_byte(size_t bytes)
{
    size_t n = bytes / sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);
    double t[REPS];
    xccl_reduce_fn_t fn = xccl_reduce_kernel(XCCL_DT_FLOAT, XCCL_OP_SUM);
    if (NULL == a || NULL == b) {
        fprintf(stderr, "xccl_calibrate: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
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
    qsort(t, REPS, sizeof(double), cmp_double);
    return t[REPS / 2];
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
    free(buf);

    if (0 == rank) {
        FILE *f = out ? fopen(out, "w") : stdout;
        if (NULL == f) {
            perror(out);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(f, "alpha=%.3e beta=%.3e gamma=%.3e delta=%.3e\n", alpha, beta, gamma, delta);
        if (out) {
            fclose(f);
            printf("xccl_calibrate: alpha %.2f us, %.2f GB/s on the wire, %.2f GB/s reduced -> %s\n",
                   alpha * 1e6, 1e-9 / beta, 1e-9 / gamma, out);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    xccl_ucx_ep_put((uint64_t) (1 - rank));
    xccl_ucx_fini();
    MPI_Finalize();
    return 0;
}
