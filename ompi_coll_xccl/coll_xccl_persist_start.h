/*
 * A persistent request of xccl's (coll_xccl_persist_start.c): what it
 * keeps of the call, its making, and the functions the inits
 * (coll_xccl_persist.c) use to describe the call and decide its way.
 */
#ifndef MCA_COLL_XCCL_PERSIST_START_H
#define MCA_COLL_XCCL_PERSIST_START_H

#include "ompi/mca/coll/base/coll_base_util.h"

#include "gpu/xccl_gpu.h"

#include "coll_xccl_call.h"
#include "coll_xccl_kept.h"
#include "coll_xccl_request.h"

BEGIN_C_DECLS

typedef struct {
    ompi_coll_base_nbc_request_t super;   /* Open MPI's init casts the request to it */
    mca_coll_xccl_module_t *m;       /* retained until the request is freed */
    xccl_coll_t coll;
    ompi_request_t *inner;           /* the last start's call; complete once this is */
    /* the arguments, as MPI_I<coll> takes them (the v forms' arrays copied) */
    const void *sbuf;
    void *rbuf;
    int scount, rcount, root;
    int *scounts, *sdispls, *rcounts, *rdispls;   /* NULL: not given */
    int *arrays;                     /* the copies' one allocation */
    struct ompi_datatype_t *sdtype, *rdtype;
    struct ompi_op_t *op;
    /* the call described at the init (call.m NULL: not described, each
     * start runs the entry point), and the way its starts take */
    mca_coll_xccl_call_t call;
    xccl_mem_info_t mem[2];          /* where sbuf and rbuf live (call.mem): asked at the init */
    int way;                         /* WAY_* */
    int algo;                        /* WAY_KEPT: the level's algorithm (the verbose line's) */
    double predicted_us;
    mca_coll_xccl_kept_t kept;       /* WAY_KEPT: the call */
    /* a call of the road that goes to the fallback: the fallback's own
     * persistent request (MPI_REQUEST_NULL: none), the reason */
    ompi_request_t *fb;
    const char *fb_why;
    int fb_started;                  /* fb was started since it was last waited for */
} persist_t;

enum {
    WAY_OPEN,                        /* not decided yet: the set-up or the level's vote runs */
    WAY_ROAD,                        /* mca_coll_xccl_call_run on a copy of call */
    WAY_KEPT                         /* the call straight, kept (mca_coll_xccl_kept_start) */
};

/* An inactive persistent request of coll on m (complete: a wait before
 * the first start returns at once; its starts and free are xccl's);
 * NULL: out of memory. */
persist_t *mca_coll_xccl_persist_new(mca_coll_xccl_module_t *m, xccl_coll_t coll);
/* MPI_Request_free of p (also the init's undoing). */
int mca_coll_xccl_persist_free(ompi_request_t **rptr);
/* The collective's nonblocking entry point on p's saved arguments. */
int mca_coll_xccl_persist_call(persist_t *p, ompi_request_t **in);
/* The way of p's starts (WAY_*; WAY_OPEN: ask again at the next start). */
int mca_coll_xccl_persist_way(persist_t *p);

END_C_DECLS

#endif
