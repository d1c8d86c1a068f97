/*
 * The buffers a schedule runs on.  Ranks may describe the same message
 * with different datatypes of one type signature (MPI_INT on one rank, a
 * vector of MPI_INT on another), so whether xccl runs a call cannot depend
 * on a datatype's layout: a rank whose layout has gaps packs its data into
 * contiguous bytes through Open MPI's convertor, the schedule moves those,
 * and it unpacks what arrived.  A user op reads the datatype's own layout:
 * its reduction runs on copies of that layout, gaps included.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/datatype/opal_convertor.h"

#include "coll_xccl_pack.h"
#include "coll_xccl_gpu.h"

/* ------------------------------------------------------------ convertor */

int mca_coll_xccl_pack(void *dst, size_t bytes, const void *buf, size_t count,
                       struct ompi_datatype_t *dt)
{
    opal_convertor_t conv;
    struct iovec iov = { .iov_base = dst, .iov_len = bytes };
    uint32_t niov = 1;
    size_t max = bytes;
    int rc;

    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    rc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dt->super, count,
                                                  buf, 0, &conv);
    if (OPAL_SUCCESS == rc) {
        rc = opal_convertor_pack(&conv, &iov, &niov, &max) < 0 || max != bytes
                 ? OPAL_ERROR : OPAL_SUCCESS;
    }
    OBJ_DESTRUCT(&conv);
    return OPAL_SUCCESS == rc ? MPI_SUCCESS : MPI_ERR_TYPE;
}

int mca_coll_xccl_unpack(void *buf, size_t count, struct ompi_datatype_t *dt, const void *src,
                         size_t bytes)
{
    opal_convertor_t conv;
    struct iovec iov = { .iov_base = (void *) src, .iov_len = bytes };
    uint32_t niov = 1;
    size_t max = bytes;
    int rc;

    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    rc = opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor, &dt->super, count,
                                                  buf, 0, &conv);
    if (OPAL_SUCCESS == rc) {
        rc = opal_convertor_unpack(&conv, &iov, &niov, &max) < 0 || max != bytes
                 ? OPAL_ERROR : OPAL_SUCCESS;
    }
    OBJ_DESTRUCT(&conv);
    return OPAL_SUCCESS == rc ? MPI_SUCCESS : MPI_ERR_TYPE;
}

/* ------------------------------------------------------------ copies */

typedef struct {
    mca_coll_xccl_module_t *m;
    xccl_coll_t coll;
    mca_coll_xccl_gpu_stage_t *stage;
} pack_ctx_t;

/* A new copy *copy of bytes bytes, packed from count elements of dt at buf
 * (buf NULL: left as it is).  buf may be a host copy of device data: the
 * schedule then runs on the packed copy, not on what staging copies while
 * it runs, so the device data is copied in whole first. */
static int pack_copy(const pack_ctx_t *x, void **copy, size_t bytes, const void *buf,
                     size_t count, struct ompi_datatype_t *dt)
{
    if (NULL != x->stage) {
        int rc = mca_coll_xccl_gpu_stage_fill(x->m, x->coll, x->stage);
        if (MPI_SUCCESS != rc) {
            *copy = NULL;
            return rc;
        }
    }
    *copy = malloc(bytes ? bytes : 1);
    if (NULL == *copy) {
        return mca_coll_xccl_error(x->m, x->coll, OMPI_ERR_OUT_OF_RESOURCE,
                                   "out of memory packing a datatype");
    }
    int rc = NULL != buf ? mca_coll_xccl_pack(*copy, bytes, buf, count, dt) : MPI_SUCCESS;
    return MPI_SUCCESS == rc ? rc : mca_coll_xccl_error(x->m, x->coll, rc, "packing a datatype failed");
}

/* The receive side: a copy of bytes bytes that unpacks into count elements
 * of dt at buf; in: it starts with buf's packed contents (in place). */
static int pack_recv(const pack_ctx_t *x, mca_coll_xccl_packed_t *pk, void *buf, size_t count,
                     struct ompi_datatype_t *dt, size_t bytes, int in)
{
    pk->rbuf = buf;
    pk->rcount = count;
    pk->rbytes = bytes;
    pk->rdt = dt;
    return pack_copy(x, &pk->r, bytes, in ? buf : NULL, count, dt);
}

/* A reduction on a datatype with gaps: copies of the layout (gaps
 * included) of nin elements from in (the send buffer, or the receive
 * buffer in place); the nout elements of the result go back into out's
 * layout without touching its gaps. */
static int layout_copy(const pack_ctx_t *x, mca_coll_xccl_packed_t *pk, const void *in,
                       size_t nin, int in_place, void *out, size_t nout,
                       struct ompi_datatype_t *dt, char **s, char **r)
{
    const size_t extent = mca_coll_xccl_dtype_extent(dt);
    ptrdiff_t gap = 0;
    const size_t span = (size_t) opal_datatype_span(&dt->super, nin, &gap);
    int err = pack_copy(x, in_place ? &pk->r : &pk->s, nin * extent, NULL, 0, dt);
    if (MPI_SUCCESS != err) {
        return err;
    }
    char *copy = in_place ? pk->r : pk->s;
    memcpy(copy, (const char *) in + gap, span);
    if (!in_place && MPI_SUCCESS != (err = pack_copy(x, &pk->r, nout * extent, NULL, 0, dt))) {
        return err;
    }
    pk->rbuf = out;
    pk->rcount = nout;
    pk->rdt = dt;
    pk->layout = 1;
    *s = copy;
    *r = pk->r;
    return MPI_SUCCESS;
}

/* The collectives that move data: each side packed where its datatype has
 * gaps.  A receive side with gaps between its blocks (the v forms) starts
 * as a copy of the user's, so that the gaps go back as they were. */
static int move_buffers(const pack_ctx_t *x, const mca_coll_xccl_call_t *c, const void *sbuf,
                        void *rbuf, mca_coll_xccl_packed_t *pk, char **s, char **r)
{
    const size_t block = c->args.block;
    const size_t rbytes = c->rn * mca_coll_xccl_dtype_size(c->rdtype);
    *r = (char *) rbuf + mca_coll_xccl_true_lb(c->rdtype);
    if (!mca_coll_xccl_is_contiguous(c->rdtype, c->rn)) {
        /* in place: the input is in the receive buffer too */
        int err = pack_recv(x, pk, rbuf, c->rn, c->rdtype, rbytes, c->in_place || NULL != c->args.vec);
        if (MPI_SUCCESS != err) {
            return err;
        }
        *r = pk->r;
    }
    const int send_in_place = mca_coll_xccl_send_in_place(c);
    if (send_in_place && XCCL_COLL_ALLTOALLV == c->coll) {
        /* SEND is a copy of RECV (the builders' buffers do not overlap) */
        int err = pack_copy(x, &pk->s, rbytes, NULL, 0, c->rdtype);
        if (MPI_SUCCESS != err) {
            return err;
        }
        memcpy(pk->s, *r, rbytes);
        *s = pk->s;
    } else if (send_in_place) {
        /* allgather: the own block already sits in place; alltoall: SEND
         * is RECV; allgatherv, gather(v): the builders read RECV */
        *s = XCCL_COLL_ALLGATHER == c->coll ? *r + (size_t) c->m->rank * block : *r;
    } else if (!mca_coll_xccl_is_contiguous(c->sdtype, c->sn)) {
        int err = pack_copy(x, &pk->s, c->sn * mca_coll_xccl_dtype_size(c->sdtype), sbuf, c->sn,
                            c->sdtype);
        if (MPI_SUCCESS != err) {
            return err;
        }
        *s = pk->s;
    } else {
        *s = NULL != sbuf ? (char *) sbuf + mca_coll_xccl_true_lb(c->sdtype) : NULL;
    }
    return MPI_SUCCESS;
}

int mca_coll_xccl_work_buffers(mca_coll_xccl_call_t *c, const void *sbuf, void *rbuf,
                               mca_coll_xccl_gpu_stage_t *stage, mca_coll_xccl_packed_t *pk,
                               char **s, char **r)
{
    const pack_ctx_t x = { c->m, c->coll, stage };
    struct ompi_datatype_t *dt = c->rdtype;
    int err = MPI_SUCCESS;
    memset(pk, 0, sizeof(*pk));
    if (c->reduction) {
        *r = (char *) rbuf + mca_coll_xccl_true_lb(dt);
        *s = c->in_place ? *r : (char *) sbuf + mca_coll_xccl_true_lb(dt);
        if (c->red.gaps) {
            /* in place, the result is the start of the receive buffer */
            err = layout_copy(&x, pk, c->in_place ? rbuf : sbuf, c->total, c->in_place, rbuf,
                              c->rout, dt, s, r);
        }
    } else if (XCCL_COLL_BCAST == c->coll) {
        *s = NULL;
        *r = (char *) rbuf + mca_coll_xccl_true_lb(dt);
        if (!mca_coll_xccl_is_contiguous(dt, c->rn)) {
            /* The root packs and keeps its data; the others unpack what came. */
            err = c->m->rank == c->root ? pack_copy(&x, &pk->r, c->bytes, rbuf, c->rn, dt)
                                        : pack_recv(&x, pk, rbuf, c->rn, dt, c->bytes, 0);
            *r = pk->r;
        }
    } else {
        err = move_buffers(&x, c, sbuf, rbuf, pk, s, r);
    }
    if (MPI_SUCCESS != err) {
        mca_coll_xccl_packed_end(c->m, c->coll, pk, 0, 0);
    }
    return err;
}

void mca_coll_xccl_packed_keep(mca_coll_xccl_packed_t *pk)
{
    if (NULL != pk->rbuf) {
        OBJ_RETAIN(pk->rdt);
    }
}

int mca_coll_xccl_packed_end(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                             mca_coll_xccl_packed_t *pk, int ok, int kept)
{
    int rc = MPI_SUCCESS;
    if (NULL != pk->rbuf && ok && pk->layout) {
        ptrdiff_t gap = 0;
        (void) opal_datatype_span(&pk->rdt->super, pk->rcount, &gap);
        rc = ompi_datatype_copy_content_same_ddt(pk->rdt, pk->rcount, pk->rbuf,
                                                 (char *) pk->r - gap);
        if (0 != rc) {
            rc = mca_coll_xccl_error(m, coll, MPI_ERR_INTERN,
                                     "copying the result into its datatype failed");
        }
    } else if (NULL != pk->rbuf && ok) {
        rc = mca_coll_xccl_unpack(pk->rbuf, pk->rcount, pk->rdt, pk->r, pk->rbytes);
        if (MPI_SUCCESS != rc) {
            rc = mca_coll_xccl_error(m, coll, rc, "unpacking a datatype failed");
        }
    }
    if (NULL != pk->rbuf && kept) {
        OBJ_RELEASE(pk->rdt);
    }
    free(pk->s);
    free(pk->r);
    memset(pk, 0, sizeof(*pk));
    return rc;
}
