/*
 * xccl_mpi_persist: persistent collectives (MPI_<Coll>_init, MPI_Start,
 * MPI_Startall) of the fourteen collectives xccl carries: allreduce,
 * allgather, reduce_scatter, reduce_scatter_block, alltoall, bcast, reduce,
 * barrier, allgatherv, alltoallv, gather, gatherv, scatter, scatterv.
 * Every result is compared with a reference computed here.
 *
 * usage: xccl_mpi_persist [-q] [-c coll,coll,...] [--skip-alltoallv-inplace]
 *
 *   (none)  for each collective one init and many starts (MPI_Start,
 *           MPI_Wait), new values at every start, on MPI_COMM_WORLD: every
 *           root of the rooted ones, MPI_IN_PLACE wherever the standard
 *           allows it, the insignificant buffers and count arrays NULL,
 *           sizes of 3 ints, past 64 KiB and about 1 MiB per rank, the v
 *           forms with uneven counts (zeros among them) and blocks in
 *           another order than the ranks with gaps between them; the
 *           fourteen at once through MPI_Startall, completed with
 *           MPI_Waitall and, in other rounds, with MPI_Test loops (also on
 *           an odd/even split in reverse rank order); the collectives of
 *           the level's latency path at sizes across its range, made on a
 *           new communicator before its first call (the level's vote still
 *           to run), with blocking calls between starts and waits and waits
 *           in reverse order; MPI_Test and MPI_Wait
 *           on requests never started (complete at once) and MPI_Request_free
 *           of them; requests on a dup started, completed, the dup freed,
 *           then the requests freed; two threads (MPI_THREAD_MULTIPLE), each
 *           on its own dup, MPI_Startall / MPI_Waitall loops at once.
 *   -q      the sweep with fewer starts and without the 1 MiB size.
 *   -c LIST only these collectives in the sweep (names as above).
 *   --skip-alltoallv-inplace
 *           leaves out alltoallv with MPI_IN_PLACE: for runs by hand against
 *           stock Open MPI 4.1.4 (--mca coll ^xccl), whose libnbc takes
 *           in-place alltoallv blocks from the wrong peer at np 4.
 *
 * Values carry a start counter, so each start's data differs from the one
 * before.  Before each start the receive buffer (with guards around it and
 * gaps between blocks) is filled with a sentinel; after each completion
 * the send buffer must be unchanged and is overwritten at once, and every
 * element of the receive buffer is compared with the reference (guards
 * and gaps still the sentinel).  Reductions (MPI_SUM, MPI_MAX) run on
 * small integers, exact in any order.
 *
 * The first wrong value ends the job: "FAIL rank=<r> comm=<c> np=<p>
 * coll=<c> root=<r> inplace=<0|1> count=<n> start=<k>: <where>: got <x>,
 * want <y>" and MPI_Abort.  At the end every rank prints "STARTS rank=<r>
 * allreduce=<n> ... scatterv=<n>" (its starts of each collective, every
 * communicator and thread counted; the verbose run compares them with
 * xccl's "persistent" lines) and rank 0 "RESULT: <n> passed, 0 failed".
 */
#include <mpi.h>

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/xccl_mpi_pnames.h"

#if !XCCL_MPI_HAVE_PERSIST
#error "no persistent collectives: neither MPI_<Coll>_init (MPI-4) nor MPIX_<Coll>_init (Open MPI pcollreq)"
#endif

enum {
    C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_REDUCE_SCATTER_BLOCK, C_ALLTOALL, C_BCAST, C_REDUCE,
    C_BARRIER, C_ALLGATHERV, C_ALLTOALLV, C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV, NCOLL
};
static const char *const coll_name[NCOLL] = {
    "allreduce", "allgather", "reduce_scatter", "reduce_scatter_block", "alltoall", "bcast", "reduce",
    "barrier", "allgatherv", "alltoallv", "gather", "gatherv", "scatter", "scatterv",
};

static int rooted(int c)
{
    return C_BCAST == c || C_REDUCE == c || C_GATHER == c || C_GATHERV == c || C_SCATTER == c ||
           C_SCATTERV == c;
}

static int has_inplace(int c)
{
    return C_BCAST != c && C_BARRIER != c;
}

static int reduction(int c)
{
    return C_ALLREDUCE == c || C_REDUCE_SCATTER == c || C_REDUCE_SCATTER_BLOCK == c || C_REDUCE == c;
}

/* Whether the count is per rank's block (the buffers hold size blocks). */
static int blocked(int c)
{
    return C_ALLREDUCE != c && C_BCAST != c && C_REDUCE != c && C_BARRIER != c;
}

static int opt_quick, opt_skip_a2av_inplace;
static int coll_on[NCOLL];
static int world_rank, world_size;

/* ---------------------------------------------------------------- values */

#define GUARD 8             /* ints of guard before and after each buffer */
#define SENTINEL (-7)       /* guards, gaps, receive buffers before a start */
#define SCRIBBLE (-99)      /* a send buffer once the start completed */
#define DONTCARE INT_MIN    /* reference: not checked (in place, past the result) */

/* Element i of the data rank src has for rank dst at start it: 20 bits,
 * so sums over 64 ranks stay exact. */
static int val(int src, int dst, size_t i, unsigned it)
{
    return (int) (((uint32_t) src * 7919u + (uint32_t) dst * 104729u + (uint32_t) i * 31u + it * 1009u + 1u) &
                  0xfffffu);
}

/* Elements rank q contributes to a v form (reduce_scatter's counts too):
 * uneven, zero on every third rank. */
static int vcnt(int q, int n)
{
    return 1 == q % 3 ? 0 : n + (q * 7) % (n / 4 + 1);
}

/* Elements s sends to d (alltoallv); sym: the same both ways, as
 * MPI_IN_PLACE needs.  Zeros among them, where they lie depending on n
 * (stock Open MPI 4.1.4 gets in-place alltoallv wrong with some of
 * these patterns at np 4). */
static int a2a_count(int s, int d, int n, int sym)
{
    if (sym) {
        return n % 3 == (s + d) % 3 ? 0 : n + ((s + d) * 7 + s * d) % (n / 4 + 1);
    }
    return 1 == (s + 2 * d) % 3 ? 0 : n + (s * 7 + d * 3) % (n / 4 + 1);
}

/* Displacements of P blocks: in rank order without gaps, or (permuted)
 * in reverse order rotated by salt with gaps of one or two ints before
 * each block.  Returns the ints from the buffer's start to its end. */
static size_t place(int P, const int *counts, int permuted, int salt, int *displs)
{
    int at = 0;
    for (int q = 0; q < P; q++) {
        int b = permuted ? (P - 1 - q + salt) % P : q;
        if (permuted) {
            at += 1 + q % 2;
        }
        displs[b] = at;
        at += counts[b];
    }
    return (size_t) at;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("FAIL rank=%d: out of memory (%zu bytes)\n", world_rank, bytes);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void fill(int *a, size_t n, int v)
{
    for (size_t i = 0; i < n; i++) {
        a[i] = v;
    }
}

/* ------------------------------------------------------------ requests */

typedef struct {
    MPI_Comm comm;
    const char *name;
    int rank, size;
    unsigned it;            /* stamps each start's values, the same on every rank */
    long starts[NCOLL];
    long checks;
} ctx_t;

/* One persistent request with its buffers and the arguments it was made
 * with. */
typedef struct {
    ctx_t *x;
    int coll, root, inplace, n, opmax;
    int send_ip, recv_ip;   /* this rank passes MPI_IN_PLACE as send / receive buffer */
    int send_sig, recv_sig; /* this rank's send / receive buffer is significant */
    size_t slen, rlen;      /* ints between the guards */
    int *smem, *sref, *rmem, *want;   /* slen / rlen + 2 GUARD ints each */
    int *sbuf, *rbuf;       /* smem / rmem + GUARD */
    int *arr;               /* the four count and displacement arrays */
    int *scnt, *sdsp, *rcnt, *rdsp;
    size_t rs_off;          /* reduce_scatter: where this rank's block starts */
    unsigned it;            /* the start under way */
    MPI_Request req;
} pc_t;

static void fail_rc(const ctx_t *x, const char *what, int coll, int rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    printf("FAIL rank=%d comm=%s np=%d coll=%s: %s returned %d (%s)\n", world_rank, x->name, x->size,
           coll >= 0 ? coll_name[coll] : "-", what, rc, msg);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void fail_pc(const pc_t *p, const char *where, long got, long want)
{
    printf("FAIL rank=%d comm=%s np=%d coll=%s root=%d inplace=%d count=%d op=%s start=%u: %s: got %ld, "
           "want %ld\n",
           world_rank, p->x->name, p->x->size, coll_name[p->coll], p->root, p->inplace, p->n,
           !reduction(p->coll) ? "-" : p->opmax ? "MPI_MAX" : "MPI_SUM", p->it, where, got, want);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void fail_msg(const pc_t *p, const char *msg)
{
    printf("FAIL rank=%d comm=%s np=%d coll=%s root=%d inplace=%d count=%d: %s\n", world_rank, p->x->name,
           p->x->size, coll_name[p->coll], p->root, p->inplace, p->n, msg);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The element counts, displacements and buffer lengths of p. */
static void pc_layout(pc_t *p)
{
    const int P = p->x->size, r = p->x->rank, n = p->n, ip = p->inplace;
    const int is_root = r == p->root;
    size_t span;
    p->send_sig = p->recv_sig = 1;
    switch (p->coll) {
    case C_ALLREDUCE:
        p->send_ip = ip;
        p->slen = (size_t) n, p->rlen = (size_t) n;
        break;
    case C_REDUCE:
        p->send_ip = ip && is_root;
        p->recv_sig = is_root;
        p->slen = (size_t) n, p->rlen = is_root ? (size_t) n : 0;
        break;
    case C_BCAST:
        p->send_sig = 0;
        p->rlen = (size_t) n;
        break;
    case C_BARRIER:
        p->send_sig = p->recv_sig = 0;
        break;
    case C_ALLGATHER:
        p->send_ip = ip;
        p->slen = (size_t) n, p->rlen = (size_t) P * (size_t) n;
        break;
    case C_GATHER:
        p->send_ip = ip && is_root;
        p->recv_sig = is_root;
        p->slen = (size_t) n, p->rlen = is_root ? (size_t) P * (size_t) n : 0;
        break;
    case C_ALLTOALL:
        p->send_ip = ip;
        p->slen = p->rlen = (size_t) P * (size_t) n;
        break;
    case C_SCATTER:
        p->send_sig = is_root;
        p->recv_ip = ip && is_root;
        p->slen = is_root ? (size_t) P * (size_t) n : 0, p->rlen = (size_t) n;
        break;
    case C_REDUCE_SCATTER:
        p->send_ip = ip;
        span = 0;
        for (int q = 0; q < P; q++) {
            p->rcnt[q] = vcnt(q, n);
            if (q < r) {
                p->rs_off += (size_t) p->rcnt[q];
            }
            span += (size_t) p->rcnt[q];
        }
        p->slen = span;
        p->rlen = ip ? span : (size_t) p->rcnt[r];
        break;
    case C_REDUCE_SCATTER_BLOCK:
        p->send_ip = ip;
        p->slen = (size_t) P * (size_t) n;
        p->rlen = ip ? (size_t) P * (size_t) n : (size_t) n;
        break;
    case C_ALLGATHERV:
    case C_GATHERV:
        p->send_ip = ip && (C_ALLGATHERV == p->coll || is_root);
        p->recv_sig = C_ALLGATHERV == p->coll || is_root;
        for (int q = 0; q < P; q++) {
            p->rcnt[q] = vcnt(q, n);
        }
        span = place(P, p->rcnt, 1, r + 1, p->rdsp);
        p->slen = (size_t) vcnt(r, n);
        p->rlen = p->recv_sig ? span : 0;
        break;
    case C_SCATTERV:
        p->send_sig = is_root;
        p->recv_ip = ip && is_root;
        for (int q = 0; q < P; q++) {
            p->scnt[q] = vcnt(q, n);
        }
        span = place(P, p->scnt, 1, r + 2, p->sdsp);
        p->slen = is_root ? span : 0;
        p->rlen = (size_t) vcnt(r, n);
        break;
    case C_ALLTOALLV:
        p->send_ip = ip;
        for (int q = 0; q < P; q++) {
            p->scnt[q] = a2a_count(r, q, n, ip);
            p->rcnt[q] = a2a_count(q, r, n, ip);
        }
        p->slen = place(P, p->scnt, 0, 0, p->sdsp);
        p->rlen = place(P, p->rcnt, 1, r, p->rdsp);
        break;
    }
    if (p->send_ip || !p->send_sig) {
        p->slen = 0;
    }
    if (p->recv_ip || !p->recv_sig) {
        p->rlen = 0;
    }
}

/* The persistent request of p's collective on p's buffers. */
static int pc_make(pc_t *p)
{
    MPI_Comm comm = p->x->comm;
    const void *sb = p->send_ip ? MPI_IN_PLACE : p->send_sig ? (const void *) p->sbuf : NULL;
    void *rb = p->recv_ip ? MPI_IN_PLACE : p->recv_sig ? (void *) p->rbuf : NULL;
    const int is_root = p->x->rank == p->root, n = p->n;
    MPI_Op op = p->opmax ? MPI_MAX : MPI_SUM;
    MPI_Info info = MPI_INFO_NULL;
    MPI_Request *req = &p->req;
    switch (p->coll) {
    case C_ALLREDUCE: return MPI_Allreduce_init(sb, rb, n, MPI_INT, op, comm, info, req);
    case C_ALLGATHER: return MPI_Allgather_init(sb, n, MPI_INT, rb, n, MPI_INT, comm, info, req);
    case C_REDUCE_SCATTER: return MPI_Reduce_scatter_init(sb, rb, p->rcnt, MPI_INT, op, comm, info, req);
    case C_REDUCE_SCATTER_BLOCK: return MPI_Reduce_scatter_block_init(sb, rb, n, MPI_INT, op, comm, info, req);
    case C_ALLTOALL: return MPI_Alltoall_init(sb, n, MPI_INT, rb, n, MPI_INT, comm, info, req);
    case C_BCAST: return MPI_Bcast_init(p->rbuf, n, MPI_INT, p->root, comm, info, req);
    case C_REDUCE: return MPI_Reduce_init(sb, rb, n, MPI_INT, op, p->root, comm, info, req);
    case C_BARRIER: return MPI_Barrier_init(comm, info, req);
    case C_ALLGATHERV:
        return MPI_Allgatherv_init(sb, vcnt(p->x->rank, n), MPI_INT, rb, p->rcnt, p->rdsp, MPI_INT, comm, info,
                                   req);
    case C_ALLTOALLV:
        if (p->send_ip) {
            return MPI_Alltoallv_init(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, rb, p->rcnt, p->rdsp, MPI_INT,
                                      comm, info, req);
        }
        return MPI_Alltoallv_init(sb, p->scnt, p->sdsp, MPI_INT, rb, p->rcnt, p->rdsp, MPI_INT, comm, info, req);
    case C_GATHER:
        /* the receive arguments are not significant off the root */
        return MPI_Gather_init(sb, n, MPI_INT, rb, is_root ? n : 0, is_root ? MPI_INT : MPI_DATATYPE_NULL,
                               p->root, comm, info, req);
    case C_GATHERV:
        return MPI_Gatherv_init(sb, vcnt(p->x->rank, n), MPI_INT, rb, is_root ? p->rcnt : NULL,
                                is_root ? p->rdsp : NULL, is_root ? MPI_INT : MPI_DATATYPE_NULL, p->root, comm,
                                info, req);
    case C_SCATTER:
        return MPI_Scatter_init(sb, is_root ? n : 0, is_root ? MPI_INT : MPI_DATATYPE_NULL, rb, n, MPI_INT,
                                p->root, comm, info, req);
    case C_SCATTERV:
        return MPI_Scatterv_init(sb, is_root ? p->scnt : NULL, is_root ? p->sdsp : NULL,
                                 is_root ? MPI_INT : MPI_DATATYPE_NULL, rb, vcnt(p->x->rank, n), MPI_INT, p->root,
                                 comm, info, req);
    default:
        return MPI_ERR_ARG;
    }
}

static void pc_init(pc_t *p, ctx_t *x, int coll, int n, int root, int inplace, int opmax)
{
    const int P = x->size;
    memset(p, 0, sizeof(*p));
    p->x = x;
    p->coll = coll;
    p->n = n;
    p->root = rooted(coll) ? root : -1;
    p->inplace = inplace && has_inplace(coll);
    p->opmax = opmax;
    p->arr = xmalloc(4 * (size_t) P * sizeof(int));
    fill(p->arr, 4 * (size_t) P, 0);
    p->scnt = p->arr, p->sdsp = p->arr + P, p->rcnt = p->arr + 2 * P, p->rdsp = p->arr + 3 * P;
    pc_layout(p);
    p->smem = xmalloc((p->slen + 2 * GUARD) * sizeof(int));
    p->sref = xmalloc((p->slen + 2 * GUARD) * sizeof(int));
    p->rmem = xmalloc((p->rlen + 2 * GUARD) * sizeof(int));
    p->want = xmalloc((p->rlen + 2 * GUARD) * sizeof(int));
    p->sbuf = p->smem + GUARD;
    p->rbuf = p->rmem + GUARD;
    p->req = MPI_REQUEST_NULL;
    int rc = pc_make(p);
    if (MPI_SUCCESS != rc) {
        fail_rc(x, "MPI_<Coll>_init", coll, rc);
    }
    if (MPI_REQUEST_NULL == p->req) {
        fail_msg(p, "the init returned MPI_REQUEST_NULL");
    }
}

/* Frees the request (inactive) and the buffers. */
static void pc_free(pc_t *p)
{
    int rc = MPI_Request_free(&p->req);
    if (MPI_SUCCESS != rc) {
        fail_rc(p->x, "MPI_Request_free", p->coll, rc);
    }
    if (MPI_REQUEST_NULL != p->req) {
        fail_msg(p, "MPI_Request_free left the handle set");
    }
    free(p->smem);
    free(p->sref);
    free(p->rmem);
    free(p->want);
    free(p->arr);
}

/* The reduction of element idx over the ranks' contributions. */
static int red(const pc_t *p, size_t idx)
{
    int acc = val(0, 0, idx, p->it);
    for (int s = 1; s < p->x->size; s++) {
        int v = val(s, 0, idx, p->it);
        acc = p->opmax ? (v > acc ? v : acc) : acc + v;
    }
    return acc;
}

/* This rank's input of start it into its send buffer (or, in place, its
 * receive buffer), the receive buffer's other elements the sentinel, and
 * the reference the receive buffer must hold once the start completed. */
static void pc_fill(pc_t *p)
{
    const int P = p->x->size, r = p->x->rank, n = p->n, root = p->root;
    const unsigned it = p->x->it++;
    p->it = it;
    fill(p->smem, p->slen + 2 * GUARD, SENTINEL);
    fill(p->rmem, p->rlen + 2 * GUARD, SENTINEL);
    fill(p->want, p->rlen + 2 * GUARD, SENTINEL);
    int *in = p->send_ip ? p->rbuf : p->sbuf, *w = p->want + GUARD;
    const int has_in = p->send_ip || p->slen > 0;
    switch (p->coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
        for (size_t i = 0; has_in && i < (size_t) n; i++) {
            in[i] = val(r, 0, i, it);
        }
        for (size_t i = 0; i < p->rlen; i++) {
            w[i] = red(p, i);
        }
        break;
    case C_BCAST:
        for (size_t i = 0; i < (size_t) n; i++) {
            if (r == root) {
                p->rbuf[i] = val(root, 0, i, it);
            }
            w[i] = val(root, 0, i, it);
        }
        break;
    case C_BARRIER:
        break;
    case C_ALLGATHER:
    case C_GATHER:
        for (size_t i = 0; has_in && i < (size_t) n; i++) {
            in[(p->send_ip ? (size_t) r * (size_t) n : 0) + i] = val(r, 0, i, it);
        }
        for (size_t i = 0; i < p->rlen; i++) {
            w[i] = val((int) (i / (size_t) n), 0, i % (size_t) n, it);
        }
        break;
    case C_ALLTOALL:
        for (size_t i = 0; i < (size_t) P * (size_t) n; i++) {
            in[i] = val(r, (int) (i / (size_t) n), i % (size_t) n, it);
            w[i] = val((int) (i / (size_t) n), r, i % (size_t) n, it);
        }
        break;
    case C_SCATTER:
        for (size_t i = 0; r == root && i < (size_t) P * (size_t) n; i++) {
            in[i] = val(root, (int) (i / (size_t) n), i % (size_t) n, it);
        }
        for (size_t i = 0; i < p->rlen; i++) {
            w[i] = val(root, r, i, it);
        }
        break;
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_BLOCK: {
        const size_t off = C_REDUCE_SCATTER == p->coll ? p->rs_off : (size_t) r * (size_t) n;
        const size_t mine = C_REDUCE_SCATTER == p->coll ? (size_t) p->rcnt[r] : (size_t) n;
        size_t all = 0;
        for (int q = 0; q < P; q++) {
            all += C_REDUCE_SCATTER == p->coll ? (size_t) p->rcnt[q] : (size_t) n;
        }
        for (size_t i = 0; i < all; i++) {
            in[i] = val(r, 0, i, it);
        }
        for (size_t i = 0; i < p->rlen; i++) {
            w[i] = i < mine ? red(p, off + i) : DONTCARE;   /* in place: past the result */
        }
        break;
    }
    case C_ALLGATHERV:
    case C_GATHERV: {
        const size_t at = p->send_ip ? (size_t) p->rdsp[r] : 0;
        for (size_t i = 0; has_in && i < (size_t) vcnt(r, n); i++) {
            in[at + i] = val(r, 0, i, it);
        }
        for (int s = 0; p->rlen > 0 && s < P; s++) {
            for (size_t i = 0; i < (size_t) p->rcnt[s]; i++) {
                w[(size_t) p->rdsp[s] + i] = val(s, 0, i, it);
            }
        }
        break;
    }
    case C_SCATTERV:
        for (int d = 0; r == root && d < P; d++) {
            for (size_t i = 0; i < (size_t) p->scnt[d]; i++) {
                in[(size_t) p->sdsp[d] + i] = val(root, d, i, it);
            }
        }
        for (size_t i = 0; i < p->rlen; i++) {
            w[i] = val(root, r, i, it);
        }
        break;
    case C_ALLTOALLV:
        for (int d = 0; d < P; d++) {
            const int *cnt = p->send_ip ? p->rcnt : p->scnt, *dsp = p->send_ip ? p->rdsp : p->sdsp;
            for (size_t i = 0; i < (size_t) cnt[d]; i++) {
                in[(size_t) dsp[d] + i] = val(r, d, i, it);
            }
        }
        for (int s = 0; s < P; s++) {
            for (size_t i = 0; i < (size_t) p->rcnt[s]; i++) {
                w[(size_t) p->rdsp[s] + i] = val(s, r, i, it);
            }
        }
        break;
    }
    memcpy(p->sref, p->smem, (p->slen + 2 * GUARD) * sizeof(int));
}

/* Which part of the receive buffer element idx (from the buffer's start)
 * is, into out. */
static void where(const pc_t *p, ptrdiff_t idx, char *out, size_t len)
{
    const int P = p->x->size;
    if (idx < 0) {
        snprintf(out, len, "receive buffer: guard before it, element %td", idx);
        return;
    }
    if ((size_t) idx >= p->rlen) {
        snprintf(out, len, "receive buffer: guard after it, element %td (buffer %zu ints)", idx, p->rlen);
        return;
    }
    const int *cnt = NULL, *dsp = NULL;
    if (C_ALLGATHERV == p->coll || C_GATHERV == p->coll || C_ALLTOALLV == p->coll) {
        cnt = p->rcnt, dsp = p->rdsp;
    } else if (C_ALLGATHER == p->coll || C_GATHER == p->coll || C_ALLTOALL == p->coll) {
        snprintf(out, len, "receive buffer: block from rank %td, element %td", idx / p->n, idx % p->n);
        return;
    }
    for (int s = 0; cnt && s < P; s++) {
        if (idx >= dsp[s] && idx < (ptrdiff_t) dsp[s] + cnt[s]) {
            snprintf(out, len, "receive buffer: block from rank %d (displacement %d, count %d), element %td", s,
                     dsp[s], cnt[s], idx - dsp[s]);
            return;
        }
    }
    if (cnt) {
        snprintf(out, len, "receive buffer: gap between blocks, element %td", idx);
    } else {
        snprintf(out, len, "receive buffer: element %td", idx);
    }
}

/* After a completion: the send buffer unchanged (then overwritten), the
 * receive buffer the reference, guards and gaps untouched. */
static void pc_done(pc_t *p)
{
    char w[160];
    for (size_t i = 0; i < p->slen + 2 * GUARD; i++) {
        if (p->smem[i] != p->sref[i]) {
            snprintf(w, sizeof(w), "send buffer element %td changed", (ptrdiff_t) i - GUARD);
            fail_pc(p, w, p->smem[i], p->sref[i]);
        }
    }
    fill(p->sbuf, p->slen, SCRIBBLE);
    for (size_t i = 0; i < p->rlen + 2 * GUARD; i++) {
        if (DONTCARE != p->want[i] && p->rmem[i] != p->want[i]) {
            where(p, (ptrdiff_t) i - GUARD, w, sizeof(w));
            fail_pc(p, w, p->rmem[i], p->want[i]);
        }
    }
    p->x->checks++;
}

static void pc_start(pc_t *p)
{
    int rc = MPI_Start(&p->req);
    if (MPI_SUCCESS != rc) {
        fail_rc(p->x, "MPI_Start", p->coll, rc);
    }
    p->x->starts[p->coll]++;
}

static void pc_wait(pc_t *p)
{
    MPI_Request before = p->req;
    int rc = MPI_Wait(&p->req, MPI_STATUS_IGNORE);
    if (MPI_SUCCESS != rc) {
        fail_rc(p->x, "MPI_Wait", p->coll, rc);
    }
    if (p->req != before) {
        fail_msg(p, "MPI_Wait changed the persistent request's handle");
    }
}

/* ---------------------------------------------------------------- sweep */

/* The count of size class si: 3 ints, past 64 KiB, about 1 MiB per rank. */
static int size_of(int coll, int si, int P)
{
    switch (si) {
    case 0: return 3;
    case 1: return 17000;
    default: return blocked(coll) ? (1 << 18) / P : 1 << 18;
    }
}

static void step(const ctx_t *x, const char *what)
{
    if (0 == world_rank) {
        printf("step %s: %s\n", x->name, what);
        fflush(stdout);
    }
}

/* One init, nstarts starts of it, each checked; then the request freed. */
static void run_case(ctx_t *x, int coll, int n, int root, int inplace, int opmax, int nstarts)
{
    pc_t p;
    pc_init(&p, x, coll, n, root, inplace, opmax);
    for (int k = 0; k < nstarts; k++) {
        pc_fill(&p);
        pc_start(&p);
        pc_wait(&p);
        pc_done(&p);
    }
    pc_free(&p);
}

static void sweep(ctx_t *x)
{
    const int nsize = opt_quick ? 2 : 3;
    for (int c = 0; c < NCOLL; c++) {
        if (!coll_on[c]) {
            continue;
        }
        step(x, coll_name[c]);
        for (int si = 0; si < nsize; si++) {
            const int n = size_of(c, si, x->size);
            const int nstarts = opt_quick ? (si ? 4 : 10) : (si < 2 ? 20 : 4);
            for (int root = 0; root < (rooted(c) ? x->size : 1); root++) {
                for (int ip = 0; ip <= has_inplace(c); ip++) {
                    if (C_ALLTOALLV == c && ip && opt_skip_a2av_inplace) {
                        continue;
                    }
                    run_case(x, c, n, root, ip, (si + ip + root) % 2, nstarts);
                }
            }
        }
    }
}

/* ------------------------------------------------------------- startall */

typedef struct {
    int coll, n, root, inplace, opmax;
} spec_t;

/* Requests of the k specs started together (MPI_Startall) rounds times,
 * completed with MPI_Waitall or (by_test) MPI_Test loops, each checked. */
static void startall_rounds(ctx_t *x, const spec_t *sp, int k, int rounds, int by_test)
{
    pc_t *p = xmalloc((size_t) k * sizeof(*p));
    MPI_Request *reqs = xmalloc((size_t) k * sizeof(*reqs));
    int *done = xmalloc((size_t) k * sizeof(*done));
    for (int i = 0; i < k; i++) {
        int ip = sp[i].inplace && !(C_ALLTOALLV == sp[i].coll && opt_skip_a2av_inplace);
        pc_init(&p[i], x, sp[i].coll, sp[i].n, sp[i].root % x->size, ip, sp[i].opmax);
    }
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < k; i++) {
            pc_fill(&p[i]);
            reqs[i] = p[i].req;
            done[i] = 0;
        }
        int rc = MPI_Startall(k, reqs);
        if (MPI_SUCCESS != rc) {
            fail_rc(x, "MPI_Startall", -1, rc);
        }
        for (int i = 0; i < k; i++) {
            x->starts[p[i].coll]++;
        }
        if (!by_test) {
            rc = MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
            if (MPI_SUCCESS != rc) {
                fail_rc(x, "MPI_Waitall", -1, rc);
            }
        } else {
            /* each checked as soon as its test says it completed */
            for (int left = k; left > 0;) {
                for (int i = 0; i < k; i++) {
                    int flag = 0;
                    if (done[i]) {
                        continue;
                    }
                    rc = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
                    if (MPI_SUCCESS != rc) {
                        fail_rc(x, "MPI_Test", p[i].coll, rc);
                    }
                    if (flag) {
                        done[i] = 1;
                        left--;
                        if (reqs[i] != p[i].req) {
                            fail_msg(&p[i], "MPI_Test changed the persistent request's handle");
                        }
                        pc_done(&p[i]);
                    }
                }
            }
        }
        for (int i = 0; i < k && !by_test; i++) {
            if (reqs[i] != p[i].req) {
                fail_msg(&p[i], "MPI_Waitall changed the persistent request's handle");
            }
            pc_done(&p[i]);
        }
    }
    for (int i = 0; i < k; i++) {
        pc_free(&p[i]);
    }
    free(p);
    free(reqs);
    free(done);
}

/* The fourteen, sizes, roots and in place mixed. */
static const spec_t all_kinds[NCOLL] = {
    { C_ALLREDUCE, 17000, 0, 1, 0 },
    { C_ALLGATHER, 3, 0, 0, 0 },
    { C_REDUCE_SCATTER, 17000, 0, 1, 1 },
    { C_REDUCE_SCATTER_BLOCK, 3, 0, 0, 0 },
    { C_ALLTOALL, 17000, 0, 0, 0 },
    { C_BCAST, 17000, 1, 0, 0 },
    { C_REDUCE, 3, 2, 1, 1 },
    { C_BARRIER, 0, 0, 0, 0 },
    { C_ALLGATHERV, 17000, 0, 1, 0 },
    { C_ALLTOALLV, 3, 0, 1, 0 },
    { C_GATHER, 17000, 3, 0, 0 },
    { C_GATHERV, 3, 1, 1, 0 },
    { C_SCATTER, 3, 0, 1, 0 },
    { C_SCATTERV, 17000, 2, 0, 0 },
};

/* --------------------------------------------------------- request life */

/* Requests never started: MPI_Test says complete, MPI_Wait returns at
 * once, MPI_Request_free frees them. */
static void unstarted(ctx_t *x)
{
    for (int c = 0; c < NCOLL; c++) {
        pc_t p;
        pc_init(&p, x, c, 5, x->size - 1, c % 2, 0);
        MPI_Request before = p.req;
        int flag = 0, rc = MPI_Test(&p.req, &flag, MPI_STATUS_IGNORE);
        if (MPI_SUCCESS != rc) {
            fail_rc(x, "MPI_Test on a request never started", c, rc);
        }
        if (!flag) {
            fail_msg(&p, "MPI_Test on a request never started: not complete");
        }
        if (0 == c % 3) {
            pc_wait(&p);
        }
        if (p.req != before) {
            fail_msg(&p, "MPI_Test on a request never started changed the handle");
        }
        pc_free(&p);
        x->checks++;
    }
}

static void ctx_init(ctx_t *x, MPI_Comm comm, const char *name);

/* Requests on a dup of x's communicator (context d), started and
 * completed, some never started; the dup freed, then the requests.  Then
 * a start on x's communicator. */
static void freed_comm(ctx_t *x, ctx_t *d)
{
    static const spec_t kinds[] = {
        { C_ALLREDUCE, 17000, 0, 0, 0 }, { C_BCAST, 3, 1, 0, 0 },  { C_ALLTOALLV, 17000, 0, 0, 0 },
        { C_GATHERV, 3, 0, 1, 0 },       { C_BARRIER, 0, 0, 0, 0 }, { C_SCATTER, 17000, 3, 1, 0 },
        { C_ALLGATHER, 3, 0, 0, 0 },     { C_REDUCE, 3, 2, 0, 1 },
    };
    enum { K = sizeof(kinds) / sizeof(kinds[0]), STARTED = 6 };
    MPI_Comm dup;
    MPI_Comm_dup(x->comm, &dup);
    ctx_init(d, dup, "dup_freed");
    pc_t p[K];
    for (int i = 0; i < K; i++) {
        pc_init(&p[i], d, kinds[i].coll, kinds[i].n, kinds[i].root % d->size, kinds[i].inplace, kinds[i].opmax);
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < STARTED; i++) {
            pc_fill(&p[i]);
            pc_start(&p[i]);
            pc_wait(&p[i]);
            pc_done(&p[i]);
        }
    }
    int rc = MPI_Comm_free(&dup);
    if (MPI_SUCCESS != rc) {
        fail_rc(d, "MPI_Comm_free", -1, rc);
    }
    d->comm = MPI_COMM_NULL;
    for (int i = K - 1; i >= 0; i--) {
        pc_free(&p[i]);
    }
    run_case(x, C_ALLREDUCE, 3, 0, 0, 0, 2);
}

/* ---------------------------------------------------------- latency path */

/* A blocking call between a start and its wait, checked: an allreduce of
 * one int and a bcast of two from a root that moves with the round. */
static void blocking_between(ctx_t *x, int round)
{
    int in = x->rank + round, sum = 0, b[2] = { -1, -1 };
    const int root = round % x->size, want = x->size * (x->size - 1) / 2 + x->size * round;
    int rc = MPI_Allreduce(&in, &sum, 1, MPI_INT, MPI_SUM, x->comm);
    if (MPI_SUCCESS != rc) {
        fail_rc(x, "MPI_Allreduce between a start and its wait", C_ALLREDUCE, rc);
    }
    if (x->rank == root) {
        b[0] = round, b[1] = -round;
    }
    rc = MPI_Bcast(b, 2, MPI_INT, root, x->comm);
    if (MPI_SUCCESS != rc) {
        fail_rc(x, "MPI_Bcast between a start and its wait", C_BCAST, rc);
    }
    if (sum != want || b[0] != round || b[1] != -round) {
        printf("FAIL rank=%d comm=%s np=%d round=%d: blocking calls between a start and its wait: "
               "allreduce got %d want %d, bcast got %d,%d want %d,%d\n",
               world_rank, x->name, x->size, round, sum, want, b[0], b[1], round, -round);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Requests of the collectives the level's latency path runs, made on a
 * new communicator before any call on it (its set-up and the level's vote
 * still to come: a start decides its way once the vote is over, each rank
 * at a start of its own), at sizes across the latency path's range (one
 * int, in the root's line; a few KiB; 48 KB: the sliced allreduce, bcast
 * in pieces).  Each is started many times, new values at every start; the
 * rounds take turns: one request at a time; all started one by one, a
 * blocking allreduce and bcast on the communicator, then the waits in
 * reverse order; all started one by one, then MPI_Test loops. */
static void latency_path(ctx_t *world, ctx_t *x)
{
    static const spec_t kinds[] = {
        { C_ALLREDUCE, 1, 0, 0, 0 },   { C_ALLREDUCE, 1000, 0, 1, 1 },  { C_ALLREDUCE, 12000, 0, 0, 0 },
        { C_BCAST, 1, 0, 0, 0 },       { C_BCAST, 12000, 1, 0, 0 },     { C_ALLGATHER, 1000, 0, 1, 0 },
        { C_ALLTOALL, 300, 0, 0, 0 },  { C_REDUCE_SCATTER_BLOCK, 500, 0, 0, 1 },
        { C_REDUCE_SCATTER, 3, 0, 1, 0 }, { C_BARRIER, 0, 0, 0, 0 },
    };
    enum { K = sizeof(kinds) / sizeof(kinds[0]) };
    MPI_Comm c;
    MPI_Comm_dup(world->comm, &c);
    ctx_init(x, c, "dup_new");
    pc_t p[K];
    for (int i = 0; i < K; i++) {
        pc_init(&p[i], x, kinds[i].coll, kinds[i].n, kinds[i].root % x->size, kinds[i].inplace, kinds[i].opmax);
    }
    const int rounds = opt_quick ? 12 : 60;
    for (int round = 0; round < rounds; round++) {
        const int mode = round % 3;
        if (0 == mode) {
            for (int i = 0; i < K; i++) {
                pc_fill(&p[i]);
                pc_start(&p[i]);
                pc_wait(&p[i]);
                pc_done(&p[i]);
            }
            continue;
        }
        for (int i = 0; i < K; i++) {
            pc_fill(&p[i]);
            pc_start(&p[i]);
        }
        if (1 == mode) {
            blocking_between(x, round);
            for (int i = K - 1; i >= 0; i--) {
                pc_wait(&p[i]);
                pc_done(&p[i]);
            }
            continue;
        }
        int done[K] = { 0 };
        for (int left = K; left > 0;) {
            for (int i = 0; i < K; i++) {
                int flag = 0, rc;
                if (done[i]) {
                    continue;
                }
                if (MPI_SUCCESS != (rc = MPI_Test(&p[i].req, &flag, MPI_STATUS_IGNORE))) {
                    fail_rc(x, "MPI_Test", p[i].coll, rc);
                }
                if (flag) {
                    done[i] = 1;
                    left--;
                    pc_done(&p[i]);
                }
            }
        }
    }
    for (int i = 0; i < K; i++) {
        pc_free(&p[i]);
    }
    MPI_Comm_free(&x->comm);
}

/* -------------------------------------------------------------- threads */

typedef struct {
    ctx_t x;
    const spec_t *sp;
    int k;
} thread_arg_t;

static const spec_t thread_kinds[2][7] = {
    {
        { C_ALLREDUCE, 17000, 0, 0, 1 }, { C_BCAST, 3, 1, 0, 0 }, { C_ALLTOALLV, 3, 0, 0, 0 },
        { C_GATHER, 17000, 0, 1, 0 }, { C_BARRIER, 0, 0, 0, 0 }, { C_REDUCE_SCATTER, 3, 0, 0, 0 },
        { C_SCATTER, 17000, 1, 0, 0 },
    },
    {
        { C_ALLGATHER, 17000, 0, 0, 0 }, { C_REDUCE, 3, 1, 0, 0 }, { C_SCATTERV, 3, 0, 1, 0 },
        { C_REDUCE_SCATTER_BLOCK, 17000, 0, 1, 0 }, { C_ALLGATHERV, 3, 0, 0, 0 }, { C_ALLTOALL, 3, 0, 1, 0 },
        { C_GATHERV, 17000, 1, 0, 0 },
    },
};

static void *thread_main(void *arg)
{
    thread_arg_t *t = arg;
    startall_rounds(&t->x, t->sp, t->k, opt_quick ? 10 : 30, 0);
    return NULL;
}

/* ----------------------------------------------------------------- main */

static void ctx_init(ctx_t *x, MPI_Comm comm, const char *name)
{
    memset(x, 0, sizeof(*x));
    x->comm = comm;
    x->name = name;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &x->rank);
    MPI_Comm_size(comm, &x->size);
}

static void usage(const char *prog)
{
    if (0 == world_rank) {
        fprintf(stderr, "usage: %s [-q] [-c coll,...] [--skip-alltoallv-inplace]\n", prog);
    }
    MPI_Finalize();
    exit(2);
}

static void parse(int argc, char **argv)
{
    for (int c = 0; c < NCOLL; c++) {
        coll_on[c] = 1;
    }
    for (int i = 1; i < argc; i++) {
        if (0 == strcmp(argv[i], "-q")) {
            opt_quick = 1;
        } else if (0 == strcmp(argv[i], "--skip-alltoallv-inplace")) {
            opt_skip_a2av_inplace = 1;
        } else if (0 == strcmp(argv[i], "-c") && i + 1 < argc) {
            char *save = NULL;
            for (int c = 0; c < NCOLL; c++) {
                coll_on[c] = 0;
            }
            for (char *tok = strtok_r(argv[++i], ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int found = 0;
                for (int c = 0; c < NCOLL; c++) {
                    if (0 == strcmp(tok, coll_name[c])) {
                        coll_on[c] = found = 1;
                    }
                }
                if (!found) {
                    usage(argv[0]);
                }
            }
        } else {
            usage(argv[0]);
        }
    }
}

static void add_counts(long *starts, long *checks, const ctx_t *x)
{
    for (int c = 0; c < NCOLL; c++) {
        starts[c] += x->starts[c];
    }
    *checks += x->checks;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    parse(argc, argv);

    long starts[NCOLL] = { 0 }, checks = 0;
    ctx_t world;
    ctx_init(&world, MPI_COMM_WORLD, "world");
    sweep(&world);

    step(&world, "MPI_Startall, MPI_Waitall");
    startall_rounds(&world, all_kinds, NCOLL, 10, 0);
    step(&world, "MPI_Startall, MPI_Test loops");
    startall_rounds(&world, all_kinds, NCOLL, 10, 1);

    step(&world, "latency path: requests made before the level's vote, blocking calls between");
    ctx_t fresh;
    latency_path(&world, &fresh);
    add_counts(starts, &checks, &fresh);

    step(&world, "requests never started");
    unstarted(&world);
    step(&world, "requests freed after their communicator");
    ctx_t freed;
    freed_comm(&world, &freed);
    add_counts(starts, &checks, &freed);
    add_counts(starts, &checks, &world);

    /* odd and even ranks, each in reverse order */
    MPI_Comm split;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_size - world_rank, &split);
    ctx_t xs;
    ctx_init(&xs, split, "split");
    step(&xs, "MPI_Startall, MPI_Waitall and MPI_Test loops");
    startall_rounds(&xs, all_kinds, NCOLL, 5, 0);
    startall_rounds(&xs, all_kinds, NCOLL, 5, 1);
    add_counts(starts, &checks, &xs);
    MPI_Comm_free(&split);

    int failed = 0;
    step(&world, "two threads, MPI_Startall / MPI_Waitall each");
    if (provided < MPI_THREAD_MULTIPLE) {
        printf("FAIL rank=%d: MPI_THREAD_MULTIPLE asked for, %d provided: the two-thread part cannot run\n",
               world_rank, provided);
        failed = 1;
    } else {
        thread_arg_t ta[2];
        pthread_t th[2];
        static const char *const tname[2] = { "thread0", "thread1" };
        for (int i = 0; i < 2; i++) {
            MPI_Comm c;
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
            ctx_init(&ta[i].x, c, tname[i]);
            ta[i].sp = thread_kinds[i];
            ta[i].k = (int) (sizeof(thread_kinds[i]) / sizeof(thread_kinds[i][0]));
        }
        for (int i = 0; i < 2; i++) {
            if (pthread_create(&th[i], NULL, thread_main, &ta[i])) {
                printf("FAIL rank=%d: pthread_create\n", world_rank);
                fflush(stdout);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        for (int i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            add_counts(starts, &checks, &ta[i].x);
            MPI_Comm_free(&ta[i].x.comm);
        }
    }

    printf("STARTS rank=%d", world_rank);
    for (int c = 0; c < NCOLL; c++) {
        printf(" %s=%ld", coll_name[c], starts[c]);
    }
    printf("\n");
    fflush(stdout);
    long all = 0;
    int any_failed = 0;
    MPI_Allreduce(&checks, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (0 == world_rank) {
        printf("RESULT: %ld passed, %d failed\n", all, any_failed);
    }
    MPI_Finalize();
    return any_failed;
}
