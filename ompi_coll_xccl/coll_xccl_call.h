/*
 * One intercepted call, described once: what an entry point
 * (coll_xccl_entry_*.c) fills after checking the arguments, and what every
 * path a call can take (coll_xccl_path.c) reads.  Header only: the
 * vocabulary of the files below the call path.
 */
#ifndef MCA_COLL_XCCL_CALL_H
#define MCA_COLL_XCCL_CALL_H

#include "coll_xccl.h"
#include "coll_xccl_dtype.h"
#include "coll_xccl_log.h"

BEGIN_C_DECLS

/* ------------------------------------------------------------ the call */

typedef struct mca_coll_xccl_call {
    mca_coll_xccl_module_t *m;
    xccl_coll_t coll;
    ompi_request_t **request;        /* nonblocking: where its request goes; NULL blocking */
    /* the user's arguments, as the fallback takes them (reductions and
     * bcast: one datatype, rdtype; count in rcount) */
    const void *sbuf;
    void *rbuf;
    int scount, rcount;
    const int *rcounts;              /* reduce_scatter, the v forms */
    const int *scounts, *sdispls, *rdispls;   /* the v forms */
    struct ompi_datatype_t *sdtype, *rdtype;
    struct ompi_op_t *op;
    int root;
    /* what the entry point derived */
    int in_place;
    int reduction;                   /* allreduce, reduce_scatter(_block) */
    size_t bytes;                    /* as in the verbose line */
    size_t sn, rn;                   /* elements of sdtype at sbuf (0: none), of rdtype at rbuf */
    size_t rout;                     /* elements of the result at rbuf (reductions) */
    int copy_r, copy_out;            /* device staging: RECV is read, RECV goes back */
    int ipc_said;                    /* CUDA IPC's agreement has this rank's word (gpu_ipc_pass) */
    int64_t seq;                     /* its call number, taken already (-1: not yet) */
    int no_level;                    /* never a schedule of the shared-memory level */
    size_t total;                    /* reductions: elements reduced */
    size_t es;                       /* bytes per element of the schedule */
    xccl_coll_args_t args;           /* the builders' (layout set when it runs) */
    size_t *counts;                  /* args.counts, owned (reduce_scatter); args.vec, owned
                                      * (the v forms: one allocation) */
    ptrdiff_t slo, rlo;              /* the v forms: sbuf and rbuf are the user's moved by
                                      * slo and rlo elements (the lowest displacement where
                                      * it is negative, else 0) */
    int persistent;                  /* a persistent request's start (m->persistent) */
    const struct xccl_mem_info *mem; /* where sbuf [0] and rbuf [1] live, found out once
                                      * (a persistent request's, at its init); NULL:
                                      * the driver is asked (xccl_gpu_classify) */
    mca_coll_xccl_reduce_t red;      /* reductions, once planned (set by the run) */
} mca_coll_xccl_call_t;

/* What every entry point starts from; it sets the rest.  Field by field:
 * zeroing the whole descriptor (rep stos) was the largest single cost of
 * a call that goes to the fallback. */
static inline void mca_coll_xccl_call_init(mca_coll_xccl_call_t *c, mca_coll_xccl_module_t *m,
                                           xccl_coll_t coll, ompi_request_t **request,
                                           const void *sbuf, void *rbuf)
{
    c->m = m;
    c->coll = coll;
    c->request = request;
    c->sbuf = sbuf;
    c->rbuf = rbuf;
    c->scount = c->rcount = 0;
    c->rcounts = c->scounts = c->sdispls = c->rdispls = NULL;
    c->sdtype = c->rdtype = NULL;
    c->op = NULL;
    c->root = 0;
    c->in_place = MPI_IN_PLACE == sbuf;
    c->reduction = 0;
    c->bytes = c->sn = c->rn = c->rout = c->total = 0;
    c->copy_r = 0;
    c->copy_out = 1;
    c->ipc_said = 0;
    c->seq = -1;
    c->no_level = 0;
    c->es = 1;
    c->args = (xccl_coll_args_t) { .in_place = c->in_place };
    c->counts = NULL;
    c->slo = c->rlo = 0;
    c->persistent = m->persistent;
    c->mem = NULL;
}

/* The kind of call the verbose line names: 0 blocking, 1 nonblocking
 * (i<coll>), 2 a persistent request's start (<coll> ... persistent). */
static inline int mca_coll_xccl_call_nb(const mca_coll_xccl_call_t *c)
{
    return NULL == c->request ? 0 : c->persistent ? 2 : 1;
}

/* Whether the send side is MPI_IN_PLACE (scatter's in place is the
 * root's receive side: its send side is as given). */
static inline int mca_coll_xccl_send_in_place(const mca_coll_xccl_call_t *c)
{
    return c->in_place && XCCL_COLL_SCATTER != c->coll && XCCL_COLL_SCATTERV != c->coll;
}

/* An argument error of the call: logged, counted, returned. */
static inline int mca_coll_xccl_call_error(const mca_coll_xccl_call_t *c, int err, const char *what)
{
    return mca_coll_xccl_error(c->m, c->coll, err, what);
}

END_C_DECLS

#endif
