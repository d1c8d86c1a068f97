/*
 * Entry points of the v forms: MPI_(I)Allgatherv, MPI_(I)Alltoallv,
 * MPI_(I)Gatherv, MPI_(I)Scatterv.  Each checks its arguments (an MPI
 * error code before any data moves), turns counts and displacements into
 * bytes (xccl_coll_args_t.vec: counts then displacements, in the packed
 * bytes of the work buffers) and hands the call to mca_coll_xccl_call_run.
 *
 * A side's work buffer is the span from its lowest to its highest element
 * (negative displacements move the base: c->slo, c->rlo), so staging and
 * packing see one region; element i of a datatype sits at i * size in the
 * packed copy, which the displacements become.  Counts that differ
 * between ranks are the point of these collectives: alltoallv, gatherv and
 * scatterv sizes are local to each rank (xccl_coll_sizes_local), and no
 * choice rests on them.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "coll_xccl_path.h"

#define XM(module) ((mca_coll_xccl_module_t *) (module))

/* One side of a v form: n counts and displacements of a datatype of es
 * bytes, checked and turned into vec's counts and displacements of that
 * side in one pass over the counts.  bytes[i]: counts[i] * es; offs[i]:
 * block i's place in bytes from the span's base (0 for an empty block),
 * which a second pass moves to only where a displacement is negative.
 * *lo_out, *hi_out: the span in elements (lo <= 0 only where a
 * displacement is negative); *total_out: the sum of the counts.  MPI
 * error code (logged); bytes and offs then partly written. */
static int side_vec(mca_coll_xccl_call_t *c, int n, const int *counts, const int *displs, size_t es,
                    size_t *bytes, size_t *offs, ptrdiff_t *lo_out, ptrdiff_t *hi_out, size_t *total_out)
{
    if (n > 0 && (NULL == counts || NULL == displs)) {
        return mca_coll_xccl_call_error(c, MPI_ERR_ARG, "NULL counts or displacements");
    }
    ptrdiff_t lo = 0, hi = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const int k = counts[i];
        bytes[i] = (size_t) k * es;
        offs[i] = 0;
        if (k <= 0) {
            if (k < 0) {
                return mca_coll_xccl_call_error(c, MPI_ERR_COUNT, "negative count");
            }
            continue;
        }
        const ptrdiff_t a = displs[i], b = a + k;
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
        total += (size_t) k;
        offs[i] = (size_t) a * es;   /* from 0; below, from lo where lo < 0 */
    }
    if (lo < 0) {
        for (int i = 0; i < n; i++) {
            offs[i] = bytes[i] ? (size_t) (displs[i] - lo) * es : 0;
        }
    }
    *lo_out = lo;
    *hi_out = hi;
    *total_out = total;
    return MPI_SUCCESS;
}

static int check_type(mca_coll_xccl_call_t *c, struct ompi_datatype_t *dt)
{
    const int err = mca_coll_xccl_check_dtype(dt);
    return MPI_SUCCESS == err ? err : mca_coll_xccl_call_error(c, err, "invalid datatype");
}

static int check_root(mca_coll_xccl_call_t *c, int root)
{
    if (root < 0 || root >= c->m->size) {
        return mca_coll_xccl_call_error(c, MPI_ERR_ROOT, "root out of range");
    }
    if (c->in_place && c->m->rank != root) {
        return mca_coll_xccl_call_error(c, MPI_ERR_BUFFER, "MPI_IN_PLACE off the root");
    }
    return MPI_SUCCESS;
}

/* vec of n entries, zeroed where zero says (side_vec fills its side's
 * entries itself): a blocking call's in the entry's own room (VEC_ROOM
 * entries: it ends before the entry returns, and the schedule cache
 * copies what it keeps; a heap block and its free cost a small call of
 * these a tenth of its time), else owned by the call (c->counts, freed
 * on every way out of mca_coll_xccl_call_run: a request or a persistent
 * request's description keeps it). */
#define VEC_ROOM 64
static size_t *new_vec_of(mca_coll_xccl_call_t *c, size_t n, size_t *room, int zero)
{
    size_t *v = room;
    if (NULL == c->request && XCCL_CALL_DESCRIBE != c->persistent && n <= VEC_ROOM) {
        if (zero) {
            memset(v, 0, n * sizeof(size_t));
        }
    } else if (NULL == (v = calloc(n ? n : 1, sizeof(size_t)))) {
        (void) mca_coll_xccl_call_error(c, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for the counts");
        return NULL;
    } else {
        c->counts = v;
    }
    c->args.vec = v;
    c->args.nvec = n;
    return v;
}

/* An argument error found once the call owns its vec: that freed. */
static int vec_error(mca_coll_xccl_call_t *c, int err, const char *what)
{
    free(c->counts);
    c->counts = NULL;
    return NULL == what ? err : mca_coll_xccl_call_error(c, err, what);
}

/* A user buffer moved by lo elements of dt (the span's base). */
static void *moved(const void *buf, ptrdiff_t lo, struct ompi_datatype_t *dt)
{
    return NULL == buf || MPI_IN_PLACE == buf
               ? (void *) buf
               : (char *) buf + lo * (ptrdiff_t) mca_coll_xccl_dtype_extent(dt);
}

/* ------------------------------------------------------------ allgatherv */

static int allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                      const int *rcounts, const int *displs, struct ompi_datatype_t *rdtype,
                      mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    const int P = m->size;
    mca_coll_xccl_call_init(&c, m, XCCL_COLL_ALLGATHERV, request, sbuf, rbuf);
    c.scount = scount;
    c.sdtype = sdtype;
    c.rdtype = rdtype;
    c.rcounts = rcounts;
    c.rdispls = displs;
    int err;
    if (MPI_SUCCESS != (err = check_type(&c, rdtype)) ||
        (!c.in_place && MPI_SUCCESS != (err = check_type(&c, sdtype)))) {
        return err;
    }
    size_t room[VEC_ROOM];
    size_t *v = new_vec_of(&c, 2 * (size_t) P, room, 0);
    if (NULL == v) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    const size_t rs = mca_coll_xccl_dtype_size(rdtype);
    ptrdiff_t lo, hi;
    size_t total;
    if (MPI_SUCCESS != (err = side_vec(&c, P, rcounts, displs, rs, v, v + P, &lo, &hi, &total))) {
        return vec_error(&c, err, NULL);
    }
    if (MPI_IN_PLACE == rbuf) {
        return vec_error(&c, MPI_ERR_BUFFER, "MPI_IN_PLACE as the receive buffer");
    }
    if (!c.in_place && scount < 0) {
        return vec_error(&c, MPI_ERR_COUNT, "negative count");
    }
    if (!c.in_place && (size_t) scount * mca_coll_xccl_dtype_size(sdtype) != v[m->rank]) {
        return vec_error(&c, MPI_ERR_TRUNCATE,
                         "the send count differs from this rank's receive count "
                         "(type signatures differ)");
    }
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_buf(rbuf, (size_t) (hi - lo), rdtype)) ||
        (!c.in_place && MPI_SUCCESS != (err = mca_coll_xccl_check_buf(sbuf, (size_t) scount, sdtype)))) {
        return vec_error(&c, err, "NULL buffer with a nonzero count");
    }
    c.rlo = lo;
    c.rbuf = moved(rbuf, lo, rdtype);
    if (c.in_place) {
        c.sdtype = rdtype;           /* MPI_IN_PLACE's datatype may be anything */
    }
    c.bytes = total * rs;
    c.sn = c.in_place ? 0 : (size_t) scount;
    c.rn = (size_t) (hi - lo);
    c.copy_r = 1;                    /* the gaps go back as they were */
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ alltoallv */

static int alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                     struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                     const int *rdispls, struct ompi_datatype_t *rdtype, mca_coll_xccl_module_t *m,
                     ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    const int P = m->size;
    mca_coll_xccl_call_init(&c, m, XCCL_COLL_ALLTOALLV, request, sbuf, rbuf);
    c.sdtype = sdtype;
    c.rdtype = rdtype;
    c.scounts = scounts;
    c.sdispls = sdispls;
    c.rcounts = rcounts;
    c.rdispls = rdispls;
    int err;
    if (MPI_SUCCESS != (err = check_type(&c, rdtype)) ||
        (!c.in_place && MPI_SUCCESS != (err = check_type(&c, sdtype)))) {
        return err;
    }
    size_t room[VEC_ROOM];
    size_t *v = new_vec_of(&c, 4 * (size_t) P, room, 0);
    if (NULL == v) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    const size_t rs = mca_coll_xccl_dtype_size(rdtype);
    const size_t ss = c.in_place ? 0 : mca_coll_xccl_dtype_size(sdtype);
    ptrdiff_t slo = 0, shi = 0, rlo, rhi;
    size_t stotal = 0, rtotal;
    if (MPI_SUCCESS != (err = side_vec(&c, P, rcounts, rdispls, rs, v + 2 * P, v + 3 * P, &rlo, &rhi,
                                       &rtotal)) ||
        (!c.in_place &&
         MPI_SUCCESS != (err = side_vec(&c, P, scounts, sdispls, ss, v, v + P, &slo, &shi, &stotal)))) {
        return vec_error(&c, err, NULL);
    }
    if (MPI_IN_PLACE == rbuf) {
        return vec_error(&c, MPI_ERR_BUFFER, "MPI_IN_PLACE as the receive buffer");
    }
    if (MPI_SUCCESS != (err = mca_coll_xccl_check_buf(rbuf, (size_t) (rhi - rlo), rdtype)) ||
        (!c.in_place && MPI_SUCCESS != (err = mca_coll_xccl_check_buf(sbuf, (size_t) (shi - slo), sdtype)))) {
        return vec_error(&c, err, "NULL buffer with a nonzero count");
    }
    if (c.in_place) {
        /* The input is the receive buffer, laid out as the output: the work
         * buffers give SEND as a copy of RECV (coll_xccl_pack.c). */
        memcpy(v, v + 2 * P, 2 * (size_t) P * sizeof(size_t));
        stotal = rtotal;
        c.sdtype = rdtype;
    }
    c.slo = slo;
    c.rlo = rlo;
    c.sbuf = moved(sbuf, slo, sdtype);
    c.rbuf = moved(rbuf, rlo, rdtype);
    c.bytes = c.in_place ? rtotal * rs : stotal * ss;
    c.sn = c.in_place ? 0 : (size_t) (shi - slo);
    c.rn = (size_t) (rhi - rlo);
    c.copy_r = 1;
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ gatherv */

/* The root's vec comes out of its one pass over the counts (side_vec);
 * the others' holds their own block's size alone. */
static int gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                   const int *rcounts, const int *displs, struct ompi_datatype_t *rdtype, int root,
                   mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    const int P = m->size, is_root = m->rank == root;
    mca_coll_xccl_call_init(&c, m, XCCL_COLL_GATHERV, request, sbuf, is_root ? rbuf : NULL);
    c.scount = scount;
    c.sdtype = sdtype;
    c.rdtype = rdtype;
    c.rcounts = rcounts;
    c.rdispls = displs;
    c.root = root;
    int err;
    if (MPI_SUCCESS != (err = check_root(&c, root)) ||
        (!c.in_place && MPI_SUCCESS != (err = check_type(&c, sdtype))) ||
        (is_root && MPI_SUCCESS != (err = check_type(&c, rdtype)))) {
        return err;
    }
    size_t room[VEC_ROOM];
    size_t *v = new_vec_of(&c, 2 * (size_t) P, room, !is_root);
    if (NULL == v) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    const size_t ss = c.in_place ? 0 : mca_coll_xccl_dtype_size(sdtype);
    if (is_root) {
        const size_t rs = mca_coll_xccl_dtype_size(rdtype);
        ptrdiff_t lo, hi;
        size_t total;
        if (MPI_SUCCESS != (err = side_vec(&c, P, rcounts, displs, rs, v, v + P, &lo, &hi, &total))) {
            return vec_error(&c, err, NULL);
        }
        if (!c.in_place && scount < 0) {
            return vec_error(&c, MPI_ERR_COUNT, "negative count");
        }
        if (MPI_IN_PLACE == rbuf) {
            return vec_error(&c, MPI_ERR_BUFFER, "MPI_IN_PLACE as the receive buffer");
        }
        if (!c.in_place && (size_t) scount * ss != v[root]) {
            return vec_error(&c, MPI_ERR_TRUNCATE,
                             "the root's send count differs from its receive count "
                             "(type signatures differ)");
        }
        if (MPI_SUCCESS != (err = mca_coll_xccl_check_buf(rbuf, (size_t) (hi - lo), rdtype)) ||
            (!c.in_place && MPI_SUCCESS != (err = mca_coll_xccl_check_buf(sbuf, (size_t) scount, sdtype)))) {
            return vec_error(&c, err, "NULL buffer with a nonzero count");
        }
        c.rlo = lo;
        c.rbuf = lo ? moved(rbuf, lo, rdtype) : rbuf;
        c.rn = (size_t) (hi - lo);
        c.bytes = total * rs;
    } else {
        if (!c.in_place && scount < 0) {
            return vec_error(&c, MPI_ERR_COUNT, "negative count");
        }
        if (!c.in_place && MPI_SUCCESS != (err = mca_coll_xccl_check_buf(sbuf, (size_t) scount, sdtype))) {
            return vec_error(&c, err, "NULL buffer with a nonzero count");
        }
        v[m->rank] = (size_t) scount * ss;
        c.bytes = v[m->rank];
        c.rdtype = sdtype;           /* not significant here: may be anything */
    }
    if (c.in_place) {
        c.sdtype = rdtype;
    }
    c.args.root = root;
    c.sn = c.in_place ? 0 : (size_t) scount;
    c.copy_r = is_root;
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ scatterv */

/* As gatherv: the root's vec out of its one pass over the counts. */
static int scatterv(const void *sbuf, const int *scounts, const int *displs,
                    struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                    struct ompi_datatype_t *rdtype, int root, mca_coll_xccl_module_t *m,
                    ompi_request_t **request)
{
    mca_coll_xccl_call_t c;
    const int P = m->size, is_root = m->rank == root;
    /* In place (the root's receive buffer MPI_IN_PLACE): its block stays
     * in the send buffer. */
    const int in_place = is_root && MPI_IN_PLACE == rbuf;
    mca_coll_xccl_call_init(&c, m, XCCL_COLL_SCATTERV, request, is_root ? sbuf : NULL,
                            in_place ? NULL : rbuf);
    c.in_place = c.args.in_place = in_place;
    c.rcount = rcount;
    c.sdtype = sdtype;
    c.rdtype = rdtype;
    c.scounts = scounts;
    c.sdispls = displs;
    c.root = root;
    int err;
    if (root < 0 || root >= P) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_ROOT, "root out of range");
    }
    if (!is_root && MPI_IN_PLACE == rbuf) {
        return mca_coll_xccl_call_error(&c, MPI_ERR_BUFFER, "MPI_IN_PLACE off the root");
    }
    if ((!in_place && MPI_SUCCESS != (err = check_type(&c, rdtype))) ||
        (is_root && MPI_SUCCESS != (err = check_type(&c, sdtype)))) {
        return err;
    }
    size_t room[VEC_ROOM];
    size_t *v = new_vec_of(&c, 2 * (size_t) P, room, !is_root);
    if (NULL == v) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    const size_t rs = in_place ? 0 : mca_coll_xccl_dtype_size(rdtype);
    if (is_root) {
        const size_t ss = mca_coll_xccl_dtype_size(sdtype);
        ptrdiff_t lo, hi;
        size_t total;
        if (MPI_SUCCESS != (err = side_vec(&c, P, scounts, displs, ss, v, v + P, &lo, &hi, &total))) {
            return vec_error(&c, err, NULL);
        }
        if (!in_place && rcount < 0) {
            return vec_error(&c, MPI_ERR_COUNT, "negative count");
        }
        if (!in_place && (size_t) rcount * rs != v[root]) {
            return vec_error(&c, MPI_ERR_TRUNCATE,
                             "the root's receive count differs from its send count "
                             "(type signatures differ)");
        }
        if (MPI_SUCCESS != (err = mca_coll_xccl_check_buf(sbuf, (size_t) (hi - lo), sdtype)) ||
            (!in_place && MPI_SUCCESS != (err = mca_coll_xccl_check_buf(rbuf, (size_t) rcount, rdtype)))) {
            return vec_error(&c, err, "NULL buffer with a nonzero count");
        }
        c.slo = lo;
        c.sbuf = lo ? moved(sbuf, lo, sdtype) : sbuf;
        c.sn = (size_t) (hi - lo);
        c.bytes = total * ss;
    } else {
        if (rcount < 0) {
            return vec_error(&c, MPI_ERR_COUNT, "negative count");
        }
        if (MPI_SUCCESS != (err = mca_coll_xccl_check_buf(rbuf, (size_t) rcount, rdtype))) {
            return vec_error(&c, err, "NULL buffer with a nonzero count");
        }
        v[m->rank] = (size_t) rcount * rs;
        c.bytes = v[m->rank];
        c.sdtype = rdtype;           /* not significant here: may be anything */
    }
    if (in_place) {
        c.rdtype = sdtype;
    }
    c.args.root = root;
    c.rn = in_place ? 0 : (size_t) rcount;
    return mca_coll_xccl_call_run(&c);
}

/* ------------------------------------------------------------ entry points */

int mca_coll_xccl_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, const int *rcounts, const int *displs,
                             struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                             mca_coll_base_module_t *module)
{
    (void) comm;
    return allgatherv(sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype, XM(module), NULL);
}

int mca_coll_xccl_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, const int *rcounts, const int *displs,
                              struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                              ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void) comm;
    return allgatherv(sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype, XM(module), request);
}

int mca_coll_xccl_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                            struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                            const int *rdispls, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return alltoallv(sbuf, scounts, sdispls, sdtype, rbuf, rcounts, rdispls, rdtype, XM(module), NULL);
}

int mca_coll_xccl_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                             struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                             const int *rdispls, struct ompi_datatype_t *rdtype,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    (void) comm;
    return alltoallv(sbuf, scounts, sdispls, sdtype, rbuf, rcounts, rdispls, rdtype, XM(module),
                     request);
}

int mca_coll_xccl_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, const int *rcounts, const int *displs,
                          struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return gatherv(sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype, root, XM(module), NULL);
}

int mca_coll_xccl_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, const int *rcounts, const int *displs,
                           struct ompi_datatype_t *rdtype, int root,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    (void) comm;
    return gatherv(sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype, root, XM(module), request);
}

int mca_coll_xccl_scatterv(const void *sbuf, const int *scounts, const int *displs,
                           struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                           struct ompi_datatype_t *rdtype, int root,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    return scatterv(sbuf, scounts, displs, sdtype, rbuf, rcount, rdtype, root, XM(module), NULL);
}

int mca_coll_xccl_iscatterv(const void *sbuf, const int *scounts, const int *displs,
                            struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                            struct ompi_datatype_t *rdtype, int root,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    (void) comm;
    return scatterv(sbuf, scounts, displs, sdtype, rbuf, rcount, rdtype, root, XM(module), request);
}
