/*
 * Entry points of the intercepted collectives.  Each one, in this order:
 * validates its arguments (an MPI error code, before any data moves, also
 * with mpi_param_check 0), maps datatype and op, decides whether xccl runs
 * the call or hands it to the fallback (again before any data moves), then
 * builds the schedule and runs it over UCX.  Every call logs one line at
 * verbose >= 1.
 */
#include "ompi_config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/op/op.h"
#include "ompi/request/request.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/error.h"

#include "coll_xccl.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"

/* ------------------------------------------------------------ datatype and op maps */

#define SINT(T) (sizeof(T) == 1 ? XCCL_DT_INT8 : sizeof(T) == 2 ? XCCL_DT_INT16 \
                 : sizeof(T) == 4 ? XCCL_DT_INT32 : XCCL_DT_INT64)
#define UINT(T) (sizeof(T) == 1 ? XCCL_DT_UINT8 : sizeof(T) == 2 ? XCCL_DT_UINT16 \
                 : sizeof(T) == 4 ? XCCL_DT_UINT32 : XCCL_DT_UINT64)

static const struct {
    struct ompi_datatype_t *mpi;
    xccl_dtype_t x;
} dtype_map[] = {
    { MPI_CHAR, ((char) -1 < 0) ? XCCL_DT_INT8 : XCCL_DT_UINT8 },
    { MPI_SIGNED_CHAR, XCCL_DT_INT8 },
    { MPI_UNSIGNED_CHAR, XCCL_DT_UINT8 },
    { MPI_SHORT, SINT(short) },
    { MPI_UNSIGNED_SHORT, UINT(unsigned short) },
    { MPI_INT, SINT(int) },
    { MPI_UNSIGNED, UINT(unsigned) },
    { MPI_LONG, SINT(long) },
    { MPI_UNSIGNED_LONG, UINT(unsigned long) },
    { MPI_LONG_LONG_INT, SINT(long long) },
    { MPI_UNSIGNED_LONG_LONG, UINT(unsigned long long) },
    { MPI_INT8_T, XCCL_DT_INT8 },
    { MPI_UINT8_T, XCCL_DT_UINT8 },
    { MPI_INT16_T, XCCL_DT_INT16 },
    { MPI_UINT16_T, XCCL_DT_UINT16 },
    { MPI_INT32_T, XCCL_DT_INT32 },
    { MPI_UINT32_T, XCCL_DT_UINT32 },
    { MPI_INT64_T, XCCL_DT_INT64 },
    { MPI_UINT64_T, XCCL_DT_UINT64 },
    { MPI_AINT, SINT(MPI_Aint) },
    { MPI_OFFSET, SINT(MPI_Offset) },
    { MPI_COUNT, SINT(MPI_Count) },
    { MPI_FLOAT, XCCL_DT_FLOAT },
    { MPI_DOUBLE, XCCL_DT_DOUBLE },
    { MPI_LONG_DOUBLE, XCCL_DT_LONG_DOUBLE },
    { MPI_C_FLOAT_COMPLEX, XCCL_DT_FLOAT_COMPLEX },
    { MPI_C_DOUBLE_COMPLEX, XCCL_DT_DOUBLE_COMPLEX },
    { MPI_C_LONG_DOUBLE_COMPLEX, XCCL_DT_LONG_DOUBLE_COMPLEX },
    { MPI_C_BOOL, XCCL_DT_BOOL },
    { MPI_BYTE, XCCL_DT_BYTE },
    { MPI_FLOAT_INT, XCCL_DT_FLOAT_INT },
    { MPI_DOUBLE_INT, XCCL_DT_DOUBLE_INT },
    { MPI_LONG_INT, XCCL_DT_LONG_INT },
    { MPI_2INT, XCCL_DT_2INT },
    { MPI_SHORT_INT, XCCL_DT_SHORT_INT },
    { MPI_LONG_DOUBLE_INT, XCCL_DT_LONG_DOUBLE_INT },
    /* Fortran types with C equivalents (MPI_LOGICAL is not one: its truth
     * values are the compiler's, so it goes to the fallback) */
    { MPI_INTEGER, XCCL_DT_INT32 },
    { MPI_REAL, XCCL_DT_FLOAT },
    { MPI_DOUBLE_PRECISION, XCCL_DT_DOUBLE },
    { MPI_COMPLEX, XCCL_DT_FLOAT_COMPLEX },
    { MPI_DOUBLE_COMPLEX, XCCL_DT_DOUBLE_COMPLEX },
    { MPI_2INTEGER, XCCL_DT_2INT },
    { MPI_2REAL, XCCL_DT_2FLOAT },
    { MPI_2DOUBLE_PRECISION, XCCL_DT_2DOUBLE },
};

static const struct {
    struct ompi_op_t *mpi;
    xccl_op_t x;
} op_map[] = {
    { MPI_SUM, XCCL_OP_SUM }, { MPI_PROD, XCCL_OP_PROD },
    { MPI_MAX, XCCL_OP_MAX }, { MPI_MIN, XCCL_OP_MIN },
    { MPI_LAND, XCCL_OP_LAND }, { MPI_LOR, XCCL_OP_LOR }, { MPI_LXOR, XCCL_OP_LXOR },
    { MPI_BAND, XCCL_OP_BAND }, { MPI_BOR, XCCL_OP_BOR }, { MPI_BXOR, XCCL_OP_BXOR },
    { MPI_MAXLOC, XCCL_OP_MAXLOC }, { MPI_MINLOC, XCCL_OP_MINLOC },
};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int map_dtype(struct ompi_datatype_t *dt, xccl_dtype_t *out)
{
    for (size_t i = 0; i < NELEMS(dtype_map); i++) {
        if (dtype_map[i].mpi == dt) {
            ptrdiff_t lb, extent;
            ompi_datatype_get_extent(dt, &lb, &extent);
            /* The kernels assume the C layout; check it is Open MPI's. */
            if (0 != lb || (size_t) extent != xccl_dtype_size(dtype_map[i].x)) {
                return -1;
            }
            *out = dtype_map[i].x;
            return 0;
        }
    }
    return -1;
}

static int map_op(struct ompi_op_t *op, xccl_op_t *out)
{
    for (size_t i = 0; i < NELEMS(op_map); i++) {
        if (op_map[i].mpi == op) {
            *out = op_map[i].x;
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------ algorithms */

/* The builders' arguments (algos/catalog.c holds the algorithms). */
typedef xccl_coll_args_t build_args_t;

/* Index 0 is "auto", 1 "fallback", then the catalog's algorithms. */
const char *mca_coll_xccl_algo_name(xccl_coll_t c, int i)
{
    int n;
    const xccl_algo_t *list = xccl_coll_algos(c, &n);
    if (XCCL_ALGO_AUTO == i) {
        return "auto";
    }
    if (XCCL_ALGO_FALLBACK == i) {
        return "fallback";
    }
    return i >= 2 && i - 2 < n && i < XCCL_MAX_ALGOS ? list[i - 2].name : NULL;
}

static int build_algo(xccl_coll_t c, int i, xccl_sched_t *s, const build_args_t *a)
{
    int n;
    const xccl_algo_t *list = xccl_coll_algos(c, &n);
    return list[i - 2].build(s, a);
}

/* Predicted time of algorithm i for these arguments: the worst over the
 * ranks' schedules (every rank up to 64, else a fixed sample), with the
 * intra- and inter-node costs.  Depends only on values every rank shares. */
typedef struct {
    xccl_coll_t coll;
    int algo;
    const build_args_t *args;
} predict_job_t;

static int predict_build(xccl_sched_t *s, void *arg)
{
    const predict_job_t *j = arg;
    return build_algo(j->coll, j->algo, s, j->args);
}

static double predict(const mca_coll_xccl_module_t *m, xccl_coll_t coll, int i,
                      const build_args_t *a, size_t es)
{
    predict_job_t j = { coll, i, a };
    return xccl_predict_hier(&m->layout, es, predict_build, &j, NULL, 0,
                             &mca_coll_xccl_component.cost, &mca_coll_xccl_component.cost_inter);
}

/* The algorithm for this call: the forced one, else the cost model's
 * cheapest, decided once per power-of-two size class.  Every input of the
 * decision (parameters, communicator size, sizes, root) is the same on all
 * ranks, so all ranks choose alike. */
static int choose(mca_coll_xccl_module_t *m, xccl_coll_t coll, const build_args_t *a,
                  size_t bytes, size_t es, double *predicted_us)
{
    const int forced = mca_coll_xccl_component.forced[coll];
    const int cls = bytes ? 64 - __builtin_clzll((unsigned long long) bytes) : 0;
    *predicted_us = -1.0;
    if (forced > XCCL_ALGO_FALLBACK) {
        return forced;
    }
    const int tuned = mca_coll_xccl_tuned_algo(coll, m->size, bytes);
    if (tuned > XCCL_ALGO_FALLBACK) {
        return tuned;
    }
    if (0 == m->choice[coll][cls]) {
        double t[XCCL_MAX_ALGOS];
        int n = 0;
        for (int i = 2; mca_coll_xccl_algo_name(coll, i); i++, n++) {
            t[n] = predict(m, coll, i, a, es);
            mca_coll_xccl_log(2, "model %s comm=%u bytes=%zu %s=%.1fus", mca_coll_xccl_coll_name(coll),
                              m->cid, bytes, mca_coll_xccl_algo_name(coll, i), t[n] * 1e6);
        }
        int best = xccl_pick(t, n, mca_coll_xccl_component.model_margin);
        if (best < 0) {
            best = 0;              /* nothing predicted: the first algorithm */
        }
        m->choice[coll][cls] = (int8_t) (best + 2);
        m->predicted_us[coll][cls] = (float) (t[best] * 1e6);
    }
    *predicted_us = m->predicted_us[coll][cls];
    return m->choice[coll][cls];
}

/* ------------------------------------------------------------ reductions */

typedef struct {
    xccl_reduce_fn_t kernel;         /* predefined op on a predefined type */
    int xdt, xop;                    /* its xccl_dtype_t and xccl_op_t (-1: a user op) */
    int gaps;                        /* a user op on a datatype with gaps (layout_copy) */
    struct ompi_op_t *op;            /* otherwise a commutative user op */
    struct ompi_datatype_t *dtype;
} reduce_ctx_t;

static int reduce_cb(void *ctx, void *dst, const void *a, const void *b, size_t count)
{
    reduce_ctx_t *r = ctx;
    if (r->kernel) {
        r->kernel(dst, a, b, count);
        return 0;
    }
    /* ompi_op_reduce computes target = source op target.  The op is
     * commutative, so either operand may be the target. */
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(r->dtype, &lb, &extent);
    if (dst == b) {
        ompi_op_reduce(r->op, (void *) a, dst, count, r->dtype);
    } else {
        if (dst != a) {
            memcpy(dst, a, count * (size_t) extent);
        }
        ompi_op_reduce(r->op, (void *) b, dst, count, r->dtype);
    }
    return 0;
}

/* ------------------------------------------------------------ checks */

static int check_dtype(struct ompi_datatype_t *dt)
{
    if (NULL == dt || MPI_DATATYPE_NULL == dt || !ompi_datatype_is_committed(dt)) {
        return MPI_ERR_TYPE;
    }
    return MPI_SUCCESS;
}

static ptrdiff_t true_lb_of(struct ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_true_extent(dt, &lb, &extent);
    return lb;
}

/* A NULL buffer is an error when it would be dereferenced: count > 0 and
 * the type does not carry absolute addresses (MPI_BOTTOM use). */
static int check_buf(const void *buf, size_t count, struct ompi_datatype_t *dt)
{
    if (NULL == buf && count > 0 && 0 == true_lb_of(dt)) {
        return MPI_ERR_BUFFER;
    }
    return MPI_SUCCESS;
}

static int check_op(struct ompi_op_t *op, struct ompi_datatype_t *dt, const char *fn)
{
    char *msg = NULL;
    if (NULL == op || MPI_OP_NULL == op) {
        return MPI_ERR_OP;
    }
    if (!ompi_op_is_valid(op, dt, &msg, fn)) {
        free(msg);
        return MPI_ERR_OP;
    }
    return MPI_SUCCESS;
}

static size_t dtype_size(struct ompi_datatype_t *dt)
{
    size_t size = 0;
    ompi_datatype_type_size(dt, &size);
    return size;
}

static size_t dtype_extent(struct ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    return (size_t) extent;
}

/* Data movement needs count elements laid out without gaps. */
static int is_contiguous(struct ompi_datatype_t *dt, size_t count)
{
    return count <= INT_MAX && ompi_datatype_is_contiguous_memory_layout(dt, (int32_t) count) &&
           dtype_size(dt) == dtype_extent(dt);
}

/* ------------------------------------------------------------ log, stats */

static void log_call(mca_coll_xccl_module_t *m, xccl_coll_t coll, int nb, size_t bytes,
                     int algo_index, double predicted_us, const char *fallback)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    xccl_coll_stats_t *st = &c->stats[coll];
    /* Calls on several threads at once (MPI_THREAD_MULTIPLE) */
    __atomic_fetch_add(&st->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->bytes, bytes, __ATOMIC_RELAXED);
    if (fallback) {
        __atomic_fetch_add(&st->fallbacks, 1, __ATOMIC_RELAXED);
    } else if (algo_index >= 0 && algo_index < XCCL_MAX_ALGOS) {
        __atomic_fetch_add(&st->algo_calls[algo_index], 1, __ATOMIC_RELAXED);
    }
    if (c->verbose >= 1 && fallback) {
        mca_coll_xccl_log(1, "%s%s comm=%u rank=%d bytes=%zu fallback=%s size=%d", nb ? "i" : "",
                          mca_coll_xccl_coll_name(coll), m->cid, m->world_rank, bytes, fallback,
                          m->size);
    } else if (c->verbose >= 1) {
        char pred[48] = "";
        if (predicted_us >= 0) {
            snprintf(pred, sizeof(pred), " predicted_us=%.1f", predicted_us);
        }
        mca_coll_xccl_log(1, "%s%s comm=%u rank=%d bytes=%zu algo=%s size=%d%s", nb ? "i" : "",
                          mca_coll_xccl_coll_name(coll), m->cid, m->world_rank, bytes,
                          mca_coll_xccl_algo_name(coll, algo_index), m->size, pred);
    }
}

int mca_coll_xccl_error(mca_coll_xccl_module_t *m, xccl_coll_t coll, int err, const char *what)
{
    /* What the call returns, by name: an MPI error class, or Open MPI's
     * internal code (the MPI layer turns that into a class). */
    char code[MPI_MAX_ERROR_STRING] = "?";
    int len = 0;
    if (err > 0 && MPI_SUCCESS == PMPI_Error_string(err, code, &len)) {
        code[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    } else if (err < 0) {
        snprintf(code, sizeof(code), "%s", opal_strerror(err));
    }
    __atomic_fetch_add(&mca_coll_xccl_component.stats[coll].errors, 1, __ATOMIC_RELAXED);
    mca_coll_xccl_log(1, "error %s comm=%u rank=%d: %s; returns %s", mca_coll_xccl_coll_name(coll),
                      m->cid, m->world_rank, what, code);
    return err;
}
#define log_error mca_coll_xccl_error

/* Reasons every rank sees alike (parameters equal on all ranks by the
 * ALL_EQ scope) or that concern only this rank's buffers but must not
 * split the ranks: a device buffer on one rank and not another would, so
 * mixed placements are the application's error as in any MPI. */
static const char *common_fallback(const mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                   size_t bytes)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    if (!c->enable[coll]) {
        return "disabled";
    }
    if (XCCL_ALGO_FALLBACK == c->forced[coll]) {
        return "forced";
    }
    if (XCCL_ALGO_AUTO != c->forced[coll]) {
        return NULL;
    }
    int tuned = mca_coll_xccl_tuned_algo(coll, m->size, bytes);
    if (XCCL_ALGO_FALLBACK == tuned) {
        return "tuning_file";
    }
    /* The cost model does not model stock Open MPI: below this size, whose
     * default comes from xccl_bench here, stock's latency is lower. */
    if (XCCL_ALGO_AUTO == tuned && bytes < (size_t) c->small_bytes) {
        return "small_message";
    }
    return NULL;
}

/* Reductions that the stock Open MPI built against gets wrong (measured per
 * version, coll_xccl_compat.h): MAX/MIN on MPI_UNSIGNED_LONG compare as
 * signed (ompi#10525); op/avx saturates 8- and 16-bit integer sums instead
 * of wrapping (ompi#8045).  xccl runs these itself even where it would
 * hand a small message to the fallback. */
static int stock_gets_wrong(struct ompi_datatype_t *dt, struct ompi_op_t *op)
{
    if (XCCL_STOCK_UL_MAXMIN_SIGNED &&
        (&ompi_mpi_op_max.op == op || &ompi_mpi_op_min.op == op) &&
        &ompi_mpi_unsigned_long.dt == dt) {
        return 1;
    }
    return XCCL_STOCK_SUM_SATURATES && &ompi_mpi_op_sum.op == op &&
           (&ompi_mpi_char.dt == dt || &ompi_mpi_signed_char.dt == dt ||
            &ompi_mpi_unsigned_char.dt == dt || &ompi_mpi_int8_t.dt == dt ||
            &ompi_mpi_uint8_t.dt == dt || &ompi_mpi_short.dt == dt ||
            &ompi_mpi_unsigned_short.dt == dt || &ompi_mpi_int16_t.dt == dt ||
            &ompi_mpi_uint16_t.dt == dt);
}

/* The small-message fallback, unless the fallback would be wrong. */
static const char *reduction_fallback(const mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                      size_t bytes, struct ompi_datatype_t *dt,
                                      struct ompi_op_t *op)
{
    const char *why = common_fallback(m, coll, bytes);
    if (NULL != why && 0 == strcmp(why, "small_message") && stock_gets_wrong(dt, op)) {
        return NULL;
    }
    return why;
}

/* ------------------------------------------------------------ requests */

/* An active collective request of xccl's: the ompi_request_t at the start
 * of an object of `whole` bytes.  It must be an ompi_coll_base_nbc_request_t
 * first: for a derived datatype or a user op, Open MPI's MPI layer keeps
 * them alive through the request it got back (ompi_coll_base_retain_op,
 * _datatypes), writing into that struct's fields, which overwrote xccl's
 * own and crashed the progress of MPI_Iallreduce / MPI_Ibcast with derived
 * datatypes.  Zeroed past the ompi_request_t, as that constructor leaves
 * the rest. */
static void init_request(ompi_request_t *r, size_t whole, ompi_request_free_fn_t free_fn)
{
    memset((char *) r + sizeof(*r), 0, whole - sizeof(*r));
    OMPI_REQUEST_INIT(r, false);
    r->req_type = OMPI_REQUEST_COLL;
    r->req_state = OMPI_REQUEST_ACTIVE;
    r->req_free = free_fn;
    r->req_status.MPI_ERROR = MPI_SUCCESS;
    r->req_status._cancelled = 0;
}

/* ------------------------------------------------------------ device buffers */

/* Where a call's buffers live.  Device buffers never change which path a
 * call takes (xccl or the fallback): that decision must be the same on
 * every rank, and another rank may use host buffers.  xccl stages device
 * data through host memory on either path. */
typedef struct {
    int device;                      /* a buffer is device (or managed) memory */
    int all;                         /* every buffer given is, of one context */
    void *ctx;                       /* its CUDA context */
} where_t;

/* a or b may be NULL (no such buffer). */
static where_t where(const void *a, const void *b)
{
    xccl_mem_info_t ia, ib;
    xccl_gpu_classify(a, &ia);
    xccl_gpu_classify(b, &ib);
    const int da = XCCL_MEM_DEVICE == ia.type, db = XCCL_MEM_DEVICE == ib.type;
    where_t w = { da || db, (da || NULL == a) && (db || NULL == b) && (!da || !db || ia.ctx == ib.ctx),
                  da ? ia.ctx : ib.ctx };
    return w;
}

/* A call on device buffers runs as the same call on host copies of the
 * buffers' spans (gaps of a derived datatype included; RECV is copied in
 * too when it is read or has gaps that must survive the copy back).  The
 * copies happen while that call runs (stage_gate, stage_fill). */
typedef struct {
    const void *s;                   /* host copies, shifted like the user's pointers */
    void *r;
    mca_coll_xccl_gpu_stage_t gpu;
} staged_t;

/* copy_out: RECV goes back (not at a bcast root: its data has not changed). */
static int staged_begin(mca_coll_xccl_module_t *m, xccl_coll_t coll, staged_t *st,
                        const void *sbuf, size_t scount, struct ompi_datatype_t *sdt, void *rbuf,
                        size_t rcount, struct ompi_datatype_t *rdt, int copy_r, int copy_out,
                        const where_t *w)
{
    ptrdiff_t sgap = 0, rgap = 0;
    size_t sspan = 0;
    void *hs = NULL, *hr = NULL;
    const int has_send = NULL != sbuf && MPI_IN_PLACE != sbuf;
    if (has_send) {
        sspan = (size_t) opal_datatype_span(&sdt->super, scount, &sgap);
    }
    size_t rspan = (size_t) opal_datatype_span(&rdt->super, rcount, &rgap);
    copy_r = copy_r || MPI_IN_PLACE == sbuf || !is_contiguous(rdt, rcount);
    int err = mca_coll_xccl_gpu_stage_in(m, coll, &st->gpu, w->ctx,
                                         has_send ? (const char *) sbuf + sgap : NULL, sspan, &hs,
                                         (char *) rbuf + rgap, rspan, copy_r, copy_out, &hr);
    if (MPI_SUCCESS != err) {
        return err;
    }
    st->gpu.all_device = w->all;
    st->s = has_send ? (const char *) hs - sgap : sbuf;
    st->r = (char *) hr - rgap;
    mca_coll_xccl_log(2, "%s comm=%u rank=%d: device buffers, host copies of %zu + %zu bytes "
                      "ready", mca_coll_xccl_coll_name(coll), m->cid, m->world_rank,
                      sspan, rspan);
    return MPI_SUCCESS;
}

/* Completes the copies back when the call succeeded. */
static int staged_end(mca_coll_xccl_module_t *m, xccl_coll_t coll, staged_t *st, int rc)
{
    int rc2 = mca_coll_xccl_gpu_stage_out(m, coll, &st->gpu, MPI_SUCCESS == rc);
    return MPI_SUCCESS != rc ? rc : rc2;
}

/* A nonblocking call on device buffers: the host call's request (inner)
 * runs on the host copies; when it completes, its completion callback
 * completes the copies back and this request. */
typedef struct {
    ompi_coll_base_nbc_request_t super;   /* see init_request */
    ompi_request_t *inner;
    mca_coll_xccl_module_t *module;  /* retained while active */
    xccl_coll_t coll;
    staged_t st;
} staged_request_t;

static OBJ_CLASS_INSTANCE(staged_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static int staged_request_free(ompi_request_t **rptr)
{
    staged_request_t *req = (staged_request_t *) *rptr;
    if (req->inner) {
        ompi_request_free(&req->inner);
    }
    OMPI_REQUEST_FINI(&req->super.super);
    OBJ_RELEASE(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int staged_request_done(ompi_request_t *inner)
{
    staged_request_t *req = inner->req_complete_cb_data;
    int rc = staged_end(req->module, req->coll, &req->st, inner->req_status.MPI_ERROR);
    req->super.super.req_status.MPI_ERROR = rc;
    OBJ_RELEASE(req->module);
    ompi_request_complete(&req->super.super, true);
    return 0;
}

/* Ends a staged call: blocking (request NULL) or started (inner). */
static int staged_finish(mca_coll_xccl_module_t *m, xccl_coll_t coll, staged_t *st, int rc,
                         ompi_request_t *inner, ompi_request_t **request)
{
    if (NULL == request || MPI_SUCCESS != rc) {
        return staged_end(m, coll, st, rc);
    }
    staged_request_t *req = OBJ_NEW(staged_request_t);
    if (NULL == req) {
        /* The host call runs already: finish it here rather than leak it. */
        ompi_request_wait(&inner, MPI_STATUS_IGNORE);
        staged_end(m, coll, st, MPI_SUCCESS);
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for a request");
    }
    init_request(&req->super.super, sizeof(*req), staged_request_free);
    req->inner = inner;
    req->coll = coll;
    req->st = *st;
    OBJ_RETAIN(m);
    req->module = m;
    *request = &req->super.super;
    ompi_request_set_callback(inner, staged_request_done, req);
    return MPI_SUCCESS;
}

/* The call goes to Open MPI's module: log why; host copies of device data
 * must be complete before it reads them. */
static int fall_back(mca_coll_xccl_module_t *m, xccl_coll_t coll, int nb, size_t bytes,
                     const char *why)
{
    log_call(m, coll, nb, bytes, -1, -1.0, why);
    return m->stage ? mca_coll_xccl_gpu_stage_fill(m, coll, m->stage) : MPI_SUCCESS;
}

/* ------------------------------------------------------------ execution */

static int ensure_scratch(mca_coll_xccl_module_t *m, size_t bytes)
{
    if (bytes <= m->scratch_size) {
        return 0;
    }
    void *p = malloc(bytes);
    if (NULL == p) {
        return -1;
    }
    free(m->scratch);
    m->scratch = p;
    m->scratch_size = bytes;
    return 0;
}

/* An execution that ended in an error: a transfer (UCX says why), or a
 * step's reduction or staging copy (which logged why as it failed). */
static int exec_failed(mca_coll_xccl_module_t *m, xccl_coll_t coll)
{
    char what[300];
    const char *ucx = xccl_ucx_error();
    if (!m->ucx) {
        snprintf(what, sizeof(what), "a step failed (a transfer over the PML, or logged above)");
    } else if (ucx[0]) {
        snprintf(what, sizeof(what), "transfer failed: %s", ucx);
        xccl_ucx_clear_error();
    } else {
        snprintf(what, sizeof(what), "a step of the schedule failed (logged above)");
    }
    return log_error(m, coll, MPI_ERR_INTERN, what);
}

/* Sets up e to run s as hooks say, with the host's reductions (rctx)
 * where the hooks have none. */
static int exec_setup(xccl_exec_t *e, mca_coll_xccl_module_t *m, const xccl_sched_t *s,
                      const mca_coll_xccl_exec_hooks_t *h, reduce_ctx_t *rctx, void *scratch,
                      uint32_t seq)
{
    void *bufs[XCCL_NBUF] = { h->bufs[XCCL_BUF_SEND], h->bufs[XCCL_BUF_RECV],
                              h->bufs[XCCL_BUF_SCRATCH] ? h->bufs[XCCL_BUF_SCRATCH] : scratch };
    if (0 != xccl_exec_init(e, s, &m->transport, bufs, h->reduce ? h->reduce : reduce_cb,
                            h->reduce ? h->reduce_ctx : rctx, seq)) {
        return -1;
    }
    xccl_exec_set_gate(e, h->gate);
    xccl_exec_set_copy(e, h->copy, h->copy_ctx);
    return 0;
}

static int run(mca_coll_xccl_module_t *m, xccl_coll_t coll, xccl_sched_t *s,
               const mca_coll_xccl_exec_hooks_t *hooks, reduce_ctx_t *rctx)
{
    xccl_exec_t e;
    int rc;
    if (NULL == hooks->bufs[XCCL_BUF_SCRATCH] && 0 != ensure_scratch(m, s->scratch_bytes)) {
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for scratch");
    }
    if (0 != exec_setup(&e, m, s, hooks, rctx, m->scratch, m->seq++)) {
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for requests");
    }
    while (0 == (rc = xccl_exec_progress(&e))) {
        opal_progress();
    }
    xccl_exec_fini(&e);
    return 1 == rc ? MPI_SUCCESS : exec_failed(m, coll);
}

/* ------------------------------------------------------------ packed datatypes */

/* A rank's side of a call whose datatype has gaps: the schedule runs on
 * contiguous copies, packed before it starts and unpacked after it ends
 * (coll_xccl_pack.c).  A datatype is retained while a nonblocking call
 * holds it (the application may free it at once). */
typedef struct {
    void *s, *r;                     /* the packed copies, or NULL */
    void *rbuf;                      /* where r unpacks to, or NULL */
    size_t rcount, rbytes;
    struct ompi_datatype_t *rdt;
    int layout;                      /* r is in rdt's layout (layout_copy), not packed */
} packed_t;

/* Packs count elements of dt at buf into a new copy *copy of bytes bytes.
 * buf may be the host copy of device data (m->stage): then the schedule
 * runs on the packed copies, not on what staging copies while it runs, so
 * the device data is copied in whole first. */
static int pack_copy(mca_coll_xccl_module_t *m, xccl_coll_t coll, void **copy, size_t bytes,
                     const void *buf, size_t count, struct ompi_datatype_t *dt)
{
    if (NULL != m->stage) {
        int rc = mca_coll_xccl_gpu_stage_fill(m, coll, m->stage);
        if (MPI_SUCCESS != rc) {
            *copy = NULL;
            return rc;
        }
    }
    *copy = malloc(bytes ? bytes : 1);
    if (NULL == *copy) {
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory packing a datatype");
    }
    int rc = NULL != buf ? mca_coll_xccl_pack(*copy, bytes, buf, count, dt) : MPI_SUCCESS;
    return MPI_SUCCESS == rc ? rc : log_error(m, coll, rc, "packing a datatype failed");
}

/* The receive side: a copy of bytes bytes that unpacks into count elements
 * of dt at buf; in: it starts with buf's packed contents (in place). */
static int pack_recv(mca_coll_xccl_module_t *m, xccl_coll_t coll, packed_t *pk, void *buf,
                     size_t count, struct ompi_datatype_t *dt, size_t bytes, int in)
{
    pk->rbuf = buf;
    pk->rcount = count;
    pk->rbytes = bytes;
    pk->rdt = dt;
    return pack_copy(m, coll, &pk->r, bytes, in ? buf : NULL, count, dt);
}

static void packed_keep(packed_t *pk)
{
    if (NULL != pk->rbuf) {
        OBJ_RETAIN(pk->rdt);
    }
}

/* Unpacks what arrived (ok: the schedule succeeded), frees the copies;
 * kept: the datatype was retained. */
static int packed_end(mca_coll_xccl_module_t *m, xccl_coll_t coll, packed_t *pk, int ok,
                      int kept)
{
    int rc = MPI_SUCCESS;
    if (NULL != pk->rbuf && ok && pk->layout) {
        ptrdiff_t gap = 0;
        (void) opal_datatype_span(&pk->rdt->super, pk->rcount, &gap);
        rc = ompi_datatype_copy_content_same_ddt(pk->rdt, pk->rcount, pk->rbuf,
                                                 (char *) pk->r - gap);
        if (0 != rc) {
            rc = log_error(m, coll, MPI_ERR_INTERN, "copying the result into its datatype failed");
        }
    } else if (NULL != pk->rbuf && ok) {
        rc = mca_coll_xccl_unpack(pk->rbuf, pk->rcount, pk->rdt, pk->r, pk->rbytes);
        if (MPI_SUCCESS != rc) {
            rc = log_error(m, coll, rc, "unpacking a datatype failed");
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

/* ------------------------------------------------------------ nonblocking */

/* A nonblocking collective in flight: an Open MPI request that owns its
 * schedule, executor and scratch, progressed by xccl's progress callback.
 * One started before the communicator's set-up agreement is in waits for
 * it with its arguments, then builds its schedule (its sequence number is
 * taken when it starts, like every call's, so it is the same on all ranks). */
typedef struct xccl_request {
    ompi_coll_base_nbc_request_t super;   /* see init_request */
    struct xccl_request *next;       /* in the list of active requests */
    mca_coll_xccl_module_t *module;  /* retained while active */
    xccl_coll_t coll;
    uint32_t seq;
    int waiting;                     /* for the set-up: not built yet */
    build_args_t args;               /* while waiting */
    size_t *counts;                  /* args.counts, owned */
    size_t bytes, es;
    mca_coll_xccl_exec_hooks_t hooks;
    xccl_sched_t sched;
    xccl_exec_t exec;
    reduce_ctx_t rctx;
    packed_t pk;
    void *scratch;
} xccl_request_t;

static OBJ_CLASS_INSTANCE(xccl_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static xccl_request_t *active_requests;
static opal_mutex_t active_lock = OPAL_MUTEX_STATIC_INIT;
static int progressing;

static int request_free(ompi_request_t **rptr)
{
    /* MPI forbids freeing an active collective request: it is complete. */
    xccl_request_t *req = (xccl_request_t *) *rptr;
    OMPI_REQUEST_FINI(&req->super.super);
    OBJ_RELEASE(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* Everything a request holds besides its module. */
static void request_release(xccl_request_t *req)
{
    xccl_exec_fini(&req->exec);
    xccl_sched_fini(&req->sched);
    free(req->scratch);
    free(req->counts);
    if (req->rctx.op) {
        OBJ_RELEASE(req->rctx.op);
        OBJ_RELEASE(req->rctx.dtype);
    }
}

/* rc: 1 done, else the execution's error, or an MPI error code already
 * logged (err). */
static void request_finish(xccl_request_t *req, int rc, int err)
{
    mca_coll_xccl_module_t *m = req->module;
    request_release(req);
    if (MPI_SUCCESS != err) {
        req->super.super.req_status.MPI_ERROR = err;
    } else if (1 != rc) {
        req->super.super.req_status.MPI_ERROR = exec_failed(m, req->coll);
    }
    err = packed_end(m, req->coll, &req->pk, 1 == rc && MPI_SUCCESS == err, 1);
    if (MPI_SUCCESS == req->super.super.req_status.MPI_ERROR) {
        req->super.super.req_status.MPI_ERROR = err;
    }
    OBJ_RELEASE(m);
    ompi_request_complete(&req->super.super, true);
}

/* Scratch and executor of a request whose schedule is built: 0 or -1. */
static int request_launch(xccl_request_t *req)
{
    const int host_scratch = req->sched.scratch_bytes && NULL == req->hooks.bufs[XCCL_BUF_SCRATCH];
    req->scratch = host_scratch ? malloc(req->sched.scratch_bytes) : NULL;
    if (host_scratch && NULL == req->scratch) {
        return -1;
    }
    return exec_setup(&req->exec, req->module, &req->sched, &req->hooks, &req->rctx,
                      req->scratch, req->seq);
}

static int build_sched(mca_coll_xccl_module_t *m, xccl_coll_t coll, const build_args_t *a,
                       size_t bytes, size_t es, xccl_sched_t *s, int *algo, double *predicted_us);

/* A waiting request whose communicator is set up now: build and launch.
 * MPI_SUCCESS, or an error code (logged). */
static int request_build(xccl_request_t *req)
{
    mca_coll_xccl_module_t *m = req->module;
    double predicted_us;
    int algo;
    int rc = build_sched(m, req->coll, &req->args, req->bytes, req->es, &req->sched, &algo,
                         &predicted_us);
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    log_call(m, req->coll, 1, req->bytes, algo, predicted_us, NULL);
    req->waiting = 0;
    return 0 == request_launch(req)
               ? MPI_SUCCESS
               : log_error(m, req->coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for a request");
}

int mca_coll_xccl_requests_active(void)
{
    return NULL != __atomic_load_n(&active_requests, __ATOMIC_RELAXED);
}

/* Called from Open MPI's progress loop (and from xccl's own waits). */
int mca_coll_xccl_progress_requests(void)
{
    xccl_request_t *done = NULL;
    int events = 0;
    if (NULL == active_requests) {
        return 0;
    }
    OPAL_THREAD_LOCK(&active_lock);
    if (progressing) {                 /* a reduction callback re-entered progress */
        OPAL_THREAD_UNLOCK(&active_lock);
        return 0;
    }
    progressing = 1;
    for (xccl_request_t **pp = &active_requests; *pp;) {
        xccl_request_t *req = *pp;
        int rc = 0, err = MPI_SUCCESS;
        if (req->waiting && mca_coll_xccl_setup_test(req->module)) {
            err = request_build(req);
        }
        if (MPI_SUCCESS == err && !req->waiting) {
            rc = xccl_exec_progress(&req->exec);
        }
        if (0 == rc && MPI_SUCCESS == err) {
            pp = &req->next;
            continue;
        }
        *pp = req->next;               /* unlink; complete outside the lock */
        req->exec.status = rc;
        req->super.super.req_status.MPI_ERROR = err;
        req->next = done;
        done = req;
        events++;
    }
    progressing = 0;
    OPAL_THREAD_UNLOCK(&active_lock);
    while (done) {
        xccl_request_t *req = done;
        done = req->next;
        request_finish(req, req->exec.status, req->super.super.req_status.MPI_ERROR);
    }
    return events;
}

/* A request for a call of m that runs as hooks say, with rctx's reduction
 * and pk's packed copies (both taken over). */
static xccl_request_t *request_new(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                   const mca_coll_xccl_exec_hooks_t *hooks,
                                   const reduce_ctx_t *rctx, packed_t *pk)
{
    xccl_request_t *req = OBJ_NEW(xccl_request_t);
    if (NULL == req) {
        return NULL;
    }
    init_request(&req->super.super, sizeof(*req), request_free);
    req->coll = coll;
    req->hooks = *hooks;
    if (rctx) {
        req->rctx = *rctx;
        if (NULL == req->rctx.kernel) {
            /* A user op and its datatype may be freed before completion. */
            OBJ_RETAIN(req->rctx.op);
            OBJ_RETAIN(req->rctx.dtype);
        } else {
            req->rctx.op = NULL;
        }
    }
    if (pk) {
        req->pk = *pk;
        packed_keep(&req->pk);
        memset(pk, 0, sizeof(*pk));
    }
    OBJ_RETAIN(m);
    req->module = m;
    req->seq = m->seq++;
    return req;
}

static void request_enqueue(xccl_request_t *req, ompi_request_t **request)
{
    *request = &req->super.super;
    OPAL_THREAD_LOCK(&active_lock);
    req->next = active_requests;
    active_requests = req;
    OPAL_THREAD_UNLOCK(&active_lock);
    mca_coll_xccl_progress_requests();   /* post the first step now */
}

/* Undoes request_new for a request that never started. */
static int request_drop(xccl_request_t *req, int err)
{
    mca_coll_xccl_module_t *m = req->module;
    const xccl_coll_t coll = req->coll;
    request_release(req);
    packed_end(m, coll, &req->pk, 0, 1);
    OBJ_RELEASE(req);
    err = log_error(m, coll, err, "out of memory for a request");
    OBJ_RELEASE(m);
    return err;
}

/* Starts s in the background (takes it over). */
static int start(mca_coll_xccl_module_t *m, xccl_coll_t coll, xccl_sched_t *s,
                 const mca_coll_xccl_exec_hooks_t *hooks, const reduce_ctx_t *rctx, packed_t *pk,
                 ompi_request_t **request)
{
    xccl_request_t *req = request_new(m, coll, hooks, rctx, pk);
    if (NULL == req) {
        xccl_sched_fini(s);
        packed_end(m, coll, pk, 0, 0);
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for a request");
    }
    req->sched = *s;
    if (0 != request_launch(req)) {
        return request_drop(req, OMPI_ERR_OUT_OF_RESOURCE);
    }
    request_enqueue(req, request);
    return MPI_SUCCESS;
}

/* Queues a call whose schedule can only be built once the communicator's
 * set-up agreement is in (a copy of the arguments). */
static int start_waiting(mca_coll_xccl_module_t *m, xccl_coll_t coll, const build_args_t *a,
                         size_t bytes, size_t es, const mca_coll_xccl_exec_hooks_t *hooks,
                         const reduce_ctx_t *rctx, packed_t *pk, ompi_request_t **request)
{
    xccl_request_t *req = request_new(m, coll, hooks, rctx, pk);
    if (NULL == req) {
        packed_end(m, coll, pk, 0, 0);
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for a request");
    }
    req->args = *a;
    req->bytes = bytes;
    req->es = es;
    req->waiting = 1;
    if (NULL != a->counts) {
        const size_t n = (size_t) m->size * sizeof(size_t);
        if (NULL == (req->counts = malloc(n))) {
            return request_drop(req, OMPI_ERR_OUT_OF_RESOURCE);
        }
        memcpy(req->counts, a->counts, n);
        req->args.counts = req->counts;
    }
    mca_coll_xccl_log(2, "i%s comm=%u rank=%d: waits for the communicator's set-up",
                      mca_coll_xccl_coll_name(coll), m->cid, m->world_rank);
    request_enqueue(req, request);
    return MPI_SUCCESS;
}

/* Chooses the algorithm and builds its schedule. */
static int build_sched(mca_coll_xccl_module_t *m, xccl_coll_t coll, const build_args_t *a,
                       size_t bytes, size_t es, xccl_sched_t *s, int *algo, double *predicted_us)
{
    int rc;
    *algo = choose(m, coll, a, bytes, es, predicted_us);
    xccl_sched_init(s, m->rank, m->size, es);
    rc = build_algo(coll, *algo, s, a);
    if (XCCL_NOT_APPLICABLE == rc) {
        /* A two-level algorithm forced (or named by a tuning rule) where
         * the layout is flat: the collective's first algorithm does it.
         * The layout is the same on all ranks, so they all switch. */
        xccl_sched_fini(s);
        xccl_sched_init(s, m->rank, m->size, es);
        *algo = 2;
        rc = build_algo(coll, *algo, s, a);
    }
    if (0 != rc) {
        xccl_sched_fini(s);
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory building the schedule");
    }
    return MPI_SUCCESS;
}

/* Runs a call xccl has taken: sets the communicator up on first use,
 * chooses the algorithm, builds its schedule, logs the call and runs it:
 * to completion, or, with a request, in the background (nonblocking).
 * sbuf and rbuf are what the schedule works on (host copies of device
 * buffers, packed copies of datatypes with gaps); pk (may be NULL) is
 * unpacked and freed at the end. */
static int build_and_run(mca_coll_xccl_module_t *m, xccl_coll_t coll, const build_args_t *a,
                         size_t bytes, size_t es, void *sbuf, void *rbuf, reduce_ctx_t *rctx,
                         packed_t *pk, ompi_request_t **request)
{
    double predicted_us;
    int algo;
    xccl_sched_t s;
    mca_coll_xccl_exec_hooks_t hooks = { .bufs = { sbuf, rbuf, NULL } };
    packed_t none = { 0 };
    pk = pk ? pk : &none;
    int rc = mca_coll_xccl_setup(m, NULL == request);
    if (MPI_SUCCESS != rc) {
        packed_end(m, coll, pk, 0, 0);
        return log_error(m, coll, rc, "setting the communicator up failed");
    }
    if (!mca_coll_xccl_setup_test(m)) {
        /* Nonblocking, before the agreement is in: device data is copied
         * in now, and the schedule is built later. */
        if (m->stage && MPI_SUCCESS != (rc = mca_coll_xccl_gpu_stage_fill(m, coll, m->stage))) {
            packed_end(m, coll, pk, 0, 0);
            return rc;
        }
        return start_waiting(m, coll, a, bytes, es, &hooks, rctx, pk, request);
    }
    rc = build_sched(m, coll, a, bytes, es, &s, &algo, &predicted_us);
    if (MPI_SUCCESS != rc) {
        packed_end(m, coll, pk, 0, 0);
        return rc;
    }
    log_call(m, coll, NULL != request, bytes, algo, predicted_us, NULL);
    /* Device data: sbuf and rbuf are host copies; the schedule runs on the
     * device buffers, or on the copies while they arrive and leave. */
    if (m->stage) {
        rc = mca_coll_xccl_gpu_stage_gate(m, coll, m->stage, &s, rctx ? rctx->xdt : -1,
                                          rctx ? rctx->xop : -1, &hooks);
        if (MPI_SUCCESS != rc) {
            xccl_sched_fini(&s);
            packed_end(m, coll, pk, 0, 0);
            return rc;
        }
    }
    if (request) {
        return start(m, coll, &s, &hooks, rctx, pk, request);   /* takes the schedule */
    }
    rc = run(m, coll, &s, &hooks, rctx);
    xccl_sched_fini(&s);
    int rc2 = packed_end(m, coll, pk, MPI_SUCCESS == rc, 0);
    return MPI_SUCCESS != rc ? rc : rc2;
}

/* ------------------------------------------------------------ reductions: shared part */

/* Decides how a reduction of this type and op runs: fills rctx and the
 * element size, or returns a fallback reason. */
static const char *plan_reduction(struct ompi_datatype_t *dt, struct ompi_op_t *op, size_t count,
                                  reduce_ctx_t *rctx, size_t *elem_size)
{
    xccl_dtype_t xdt;
    xccl_op_t xop;
    rctx->kernel = NULL;
    rctx->xdt = rctx->xop = -1;
    rctx->gaps = 0;
    rctx->op = op;
    rctx->dtype = dt;
    if (ompi_op_is_intrinsic(op)) {
        if (0 != map_dtype(dt, &xdt)) {
            return "unsupported_datatype";
        }
        if (0 != map_op(op, &xop) || NULL == (rctx->kernel = xccl_reduce_kernel(xdt, xop))) {
            return "unsupported_op";
        }
        rctx->xdt = (int) xdt;
        rctx->xop = (int) xop;
        *elem_size = xccl_dtype_size(xdt);
        return NULL;
    }
    if (!ompi_op_is_commute(op)) {
        return "noncommutative_op";
    }
    /* A user op reads the datatype's own layout: one with gaps runs on
     * copies of that layout (layout_copy), element i at i * extent. */
    ptrdiff_t lb, extent, tlb, textent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &tlb, &textent);
    if (extent <= 0) {
        return "empty_datatype";
    }
    if (textent > extent) {
        return "overlapping_datatype";   /* elements overlap: no slices */
    }
    *elem_size = (size_t) extent;
    rctx->gaps = !is_contiguous(dt, count ? count : 1);
    return NULL;
}

/* A reduction on a datatype with gaps: the schedule runs on copies of the
 * layout (gaps included) of nin elements from in (the send buffer, or the
 * receive buffer in place), and the nout elements of the result are copied
 * back into out's layout without touching its gaps. */
static int layout_copy(mca_coll_xccl_module_t *m, xccl_coll_t coll, packed_t *pk, const void *in,
                       size_t nin, int in_place, void *out, size_t nout,
                       struct ompi_datatype_t *dt, char **s, char **r)
{
    const size_t extent = dtype_extent(dt);
    ptrdiff_t gap = 0;
    const size_t span = (size_t) opal_datatype_span(&dt->super, nin, &gap);
    int err = pack_copy(m, coll, in_place ? &pk->r : &pk->s, nin * extent, NULL, 0, dt);
    if (MPI_SUCCESS != err) {
        return err;
    }
    char *copy = in_place ? pk->r : pk->s;
    memcpy(copy, (const char *) in + gap, span);
    if (!in_place && MPI_SUCCESS != (err = pack_copy(m, coll, &pk->r, nout * extent, NULL, 0, dt))) {
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

/* ------------------------------------------------------------ CUDA IPC reductions */

/* CUDA IPC is tried, by every rank alike, for blocking calls of at least
 * coll_xccl_gpu_ipc_bytes where the communicator can (m->gpu_ipc), which
 * is known once it is set up: such a call sets it up first.  Calls that
 * go to the fallback whatever their buffers (the collective disabled or
 * forced to the fallback) do not. */
static int ipc_setup(mca_coll_xccl_module_t *m, xccl_coll_t coll, size_t bytes,
                     ompi_request_t **request)
{
    const mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    if (NULL != request || NULL != m->stage || 0 == c->gpu_ipc_bytes ||
        bytes < c->gpu_ipc_bytes || m->size < 2 || !c->enable[coll] ||
        XCCL_ALGO_FALLBACK == c->forced[coll] || mca_coll_xccl_setup_test(m)) {
        return MPI_SUCCESS;
    }
    int rc = mca_coll_xccl_setup(m, 1);
    return MPI_SUCCESS == rc ? rc : log_error(m, coll, rc, "setting the communicator up failed");
}

/* A reduction through CUDA IPC (*done) or nothing.  Whether every rank
 * tries depends only on inputs all ranks share (the communicator, the
 * call's form and size); whether it happens, also on each rank's own
 * conditions (device buffers, a predefined op on a predefined type),
 * which the ranks agree on.  counts: each rank's block (reduce_scatter),
 * or NULL for allreduce of count elements (then slices of count). */
static int ipc_reduction(mca_coll_xccl_module_t *m, struct ompi_communicator_t *comm,
                         ompi_request_t **request, xccl_coll_t coll, const void *sbuf,
                         void *rbuf, size_t count, const size_t *counts,
                         struct ompi_datatype_t *dtype, struct ompi_op_t *op, int *done)
{
    const int in_place = MPI_IN_PLACE == sbuf;
    const size_t P = (size_t) m->size;
    size_t total = count;
    *done = 0;
    for (size_t j = 0; NULL != counts && j < P; j++) {
        total += counts[j];
    }
    if (!m->gpu_ipc || NULL != m->stage || NULL != request ||
        0 == mca_coll_xccl_component.gpu_ipc_bytes ||
        total * dtype_size(dtype) < mca_coll_xccl_component.gpu_ipc_bytes ||
        m->size > XCCL_GPU_MAX_SRCS || (in_place && XCCL_COLL_ALLREDUCE != coll)) {
        return MPI_SUCCESS;
    }
    size_t *slices = NULL;
    if (NULL == counts) {
        if (NULL == (slices = malloc(P * sizeof(size_t)))) {
            return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
        }
        for (size_t j = 0; j < P; j++) {
            slices[j] = count / P + (j < count % P);
        }
    }
    xccl_dtype_t xdt = XCCL_DT_BYTE;
    xccl_op_t xop = XCCL_OP_SUM;
    int ok = ompi_op_is_intrinsic(op) && 0 == map_dtype(dtype, &xdt) && 0 == map_op(op, &xop);
    char *r = (char *) rbuf + true_lb_of(dtype);
    const char *s = in_place ? r : (const char *) sbuf + true_lb_of(dtype);
    int rc = mca_coll_xccl_gpu_ipc_reduce(m, comm, coll, s, r, counts ? counts : slices,
                                          dtype_extent(dtype), (int) xdt, (int) xop, ok, done);
    free(slices);
    return rc;
}

/* ------------------------------------------------------------ allreduce */

static int allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                     struct ompi_op_t *op, struct ompi_communicator_t *comm,
                     mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    const xccl_coll_t coll = XCCL_COLL_ALLREDUCE;
    const int in_place = MPI_IN_PLACE == sbuf;
    int err;

    if (count < 0) {
        return log_error(m, coll, MPI_ERR_COUNT, "negative count");
    }
    if (MPI_SUCCESS != (err = check_dtype(dtype))) {
        return log_error(m, coll, err, "invalid datatype");
    }
    if (MPI_SUCCESS != (err = check_op(op, dtype, "MPI_Allreduce"))) {
        return log_error(m, coll, err, "invalid op for this datatype");
    }
    if (MPI_IN_PLACE == rbuf) {
        return log_error(m, coll, MPI_ERR_BUFFER, "MPI_IN_PLACE as the receive buffer");
    }
    if (MPI_SUCCESS != (err = check_buf(rbuf, (size_t) count, dtype)) ||
        (!in_place && MPI_SUCCESS != (err = check_buf(sbuf, (size_t) count, dtype)))) {
        return log_error(m, coll, err, "NULL buffer with a nonzero count");
    }
    if (MPI_SUCCESS != (err = ipc_setup(m, coll, (size_t) count * dtype_size(dtype), request))) {
        return err;
    }

    int done;
    err = ipc_reduction(m, comm, request, coll, sbuf, rbuf, (size_t) count, NULL, dtype, op,
                        &done);
    if (done) {
        return err;
    }
    const where_t w = where(in_place ? NULL : sbuf, rbuf);
    if (w.device) {
        staged_t st;
        if (MPI_SUCCESS != (err = staged_begin(m, coll, &st, sbuf, (size_t) count, dtype, rbuf,
                                               (size_t) count, dtype, 0, 1, &w))) {
            return err;
        }
        ompi_request_t *inner = NULL;
        m->stage = &st.gpu;   /* the host call finds its copies */
        err = allreduce(st.s, st.r, count, dtype, op, comm, m, request ? &inner : NULL);
        m->stage = NULL;
        return staged_finish(m, coll, &st, err, inner, request);
    }

    const size_t bytes = (size_t) count * dtype_size(dtype);
    reduce_ctx_t rctx;
    size_t es = 0;
    const char *why = reduction_fallback(m, coll, bytes, dtype, op);
    if (NULL == why) {
        why = plan_reduction(dtype, op, (size_t) count, &rctx, &es);
    }
    if (why) {
        if (MPI_SUCCESS != (err = fall_back(m, coll, NULL != request, bytes, why))) {
            return err;
        }
        return request ? m->prev_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                            m->prev_iallreduce_module)
                       : m->prev_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                           m->prev_allreduce_module);
    }

    ptrdiff_t lb = true_lb_of(dtype);
    char *r = (char *) rbuf + lb;
    char *s = in_place ? r : (char *) sbuf + lb;
    packed_t pk = { 0 };
    if (rctx.gaps && MPI_SUCCESS != (err = layout_copy(m, coll, &pk, in_place ? rbuf : sbuf,
                                                       (size_t) count, in_place, rbuf,
                                                       (size_t) count, dtype, &s, &r))) {
        packed_end(m, coll, &pk, 0, 0);
        return err;
    }
    build_args_t a = { .count = (size_t) count, .in_place = in_place, .layout = &m->layout,
                       .segment = mca_coll_xccl_component.segment_bytes };
    return build_and_run(m, coll, &a, bytes, es, s, r, &rctx, &pk, request);
}

/* ------------------------------------------------------------ reduce_scatter (_block) */

static int reduce_scatter_common(mca_coll_xccl_module_t *m, xccl_coll_t coll, const void *sbuf,
                                 void *rbuf, const size_t *counts, struct ompi_datatype_t *dtype,
                                 struct ompi_op_t *op, int *fell_back, ompi_request_t **request)
{
    const int in_place = MPI_IN_PLACE == sbuf;
    size_t total = 0;
    *fell_back = 0;
    for (int i = 0; i < m->size; i++) {
        total += counts[i];
    }
    const size_t bytes = total * dtype_size(dtype);
    reduce_ctx_t rctx;
    size_t es = 0;
    const char *why = reduction_fallback(m, coll, bytes, dtype, op);
    if (NULL == why) {
        why = plan_reduction(dtype, op, total, &rctx, &es);
    }
    if (why) {
        *fell_back = 1;
        return fall_back(m, coll, NULL != request, bytes, why);
    }
    ptrdiff_t lb = true_lb_of(dtype);
    char *r = (char *) rbuf + lb;
    char *s = in_place ? r : (char *) sbuf + lb;
    packed_t pk = { 0 };
    int err;
    /* in place, the result is the start of the receive buffer */
    if (rctx.gaps && MPI_SUCCESS != (err = layout_copy(m, coll, &pk, in_place ? rbuf : sbuf, total,
                                                       in_place, rbuf, counts[m->rank], dtype,
                                                       &s, &r))) {
        packed_end(m, coll, &pk, 0, 0);
        return err;
    }
    build_args_t a = { .counts = counts, .in_place = in_place, .layout = &m->layout };
    return build_and_run(m, coll, &a, bytes, es, s, r, &rctx, &pk, request);
}

static int check_reduction_args(mca_coll_xccl_module_t *m, xccl_coll_t coll, const void *sbuf,
                                void *rbuf, size_t my_count, size_t total,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                const char *fn)
{
    int err;
    if (MPI_SUCCESS != (err = check_dtype(dtype))) {
        return log_error(m, coll, err, "invalid datatype");
    }
    if (MPI_SUCCESS != (err = check_op(op, dtype, fn))) {
        return log_error(m, coll, err, "invalid op for this datatype");
    }
    if (MPI_IN_PLACE == rbuf) {
        return log_error(m, coll, MPI_ERR_BUFFER, "MPI_IN_PLACE as the receive buffer");
    }
    if (MPI_IN_PLACE == sbuf) {
        err = check_buf(rbuf, total, dtype);
    } else {
        err = check_buf(rbuf, my_count, dtype);
        if (MPI_SUCCESS == err) {
            err = check_buf(sbuf, total, dtype);
        }
    }
    if (MPI_SUCCESS != err) {
        return log_error(m, coll, err, "NULL buffer with a nonzero count");
    }
    return MPI_SUCCESS;
}

static int reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                          struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                          struct ompi_communicator_t *comm, mca_coll_xccl_module_t *m,
                          ompi_request_t **request)
{
    const xccl_coll_t coll = XCCL_COLL_REDUCE_SCATTER;
    size_t total = 0;
    int err, fell_back;

    if (NULL == rcounts) {
        return log_error(m, coll, MPI_ERR_ARG, "recvcounts is NULL");
    }
    size_t *counts = malloc((size_t) m->size * sizeof(size_t));
    if (NULL == counts) {
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
    }
    for (int i = 0; i < m->size; i++) {
        if (rcounts[i] < 0) {
            free(counts);
            return log_error(m, coll, MPI_ERR_COUNT, "negative recvcount");
        }
        counts[i] = (size_t) rcounts[i];
        total += counts[i];
    }
    err = check_reduction_args(m, coll, sbuf, rbuf, counts[m->rank], total, dtype, op,
                               "MPI_Reduce_scatter");
    if (MPI_SUCCESS == err) {
        err = ipc_setup(m, coll, total * dtype_size(dtype), request);
    }
    int done = 0;
    if (MPI_SUCCESS == err) {
        err = ipc_reduction(m, comm, request, coll, sbuf, rbuf, 0, counts, dtype, op, &done);
    }
    if (done) {
        free(counts);
        return err;
    }
    const where_t w = where(MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf);
    if (MPI_SUCCESS == err && w.device) {
        staged_t st;
        size_t rn = MPI_IN_PLACE == sbuf ? total : counts[m->rank];
        err = staged_begin(m, coll, &st, sbuf, total, dtype, rbuf, rn, dtype, 0, 1, &w);
        if (MPI_SUCCESS == err) {
            ompi_request_t *inner = NULL;
            m->stage = &st.gpu;   /* the host call finds its copies */
            err = reduce_scatter(st.s, st.r, rcounts, dtype, op, comm, m, request ? &inner : NULL);
            m->stage = NULL;
            err = staged_finish(m, coll, &st, err, inner, request);
        }
    } else if (MPI_SUCCESS == err) {
        err = reduce_scatter_common(m, coll, sbuf, rbuf, counts, dtype, op, &fell_back, request);
        if (fell_back && MPI_SUCCESS == err) {
            err = request ? m->prev_ireduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, request,
                                                    m->prev_ireduce_scatter_module)
                          : m->prev_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm,
                                                   m->prev_reduce_scatter_module);
        }
    }
    free(counts);
    return err;
}

static int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, mca_coll_xccl_module_t *m,
                                ompi_request_t **request)
{
    const xccl_coll_t coll = XCCL_COLL_REDUCE_SCATTER_BLOCK;
    int err, fell_back;

    if (rcount < 0) {
        return log_error(m, coll, MPI_ERR_COUNT, "negative recvcount");
    }
    err = check_reduction_args(m, coll, sbuf, rbuf, (size_t) rcount,
                               (size_t) rcount * (size_t) m->size, dtype, op,
                               "MPI_Reduce_scatter_block");
    if (MPI_SUCCESS != err) {
        return err;
    }
    size_t *counts = malloc((size_t) m->size * sizeof(size_t));
    if (NULL == counts) {
        return log_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory");
    }
    for (int i = 0; i < m->size; i++) {
        counts[i] = (size_t) rcount;
    }
    const size_t total = (size_t) rcount * (size_t) m->size;
    int done;
    if (MPI_SUCCESS != (err = ipc_setup(m, coll, total * dtype_size(dtype), request))) {
        free(counts);
        return err;
    }
    err = ipc_reduction(m, comm, request, coll, sbuf, rbuf, 0, counts, dtype, op, &done);
    if (done) {
        free(counts);
        return err;
    }
    const where_t w = where(MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf);
    if (w.device) {
        staged_t st;
        free(counts);
        size_t rn = MPI_IN_PLACE == sbuf ? total : (size_t) rcount;
        err = staged_begin(m, coll, &st, sbuf, total, dtype, rbuf, rn, dtype, 0, 1, &w);
        if (MPI_SUCCESS == err) {
            ompi_request_t *inner = NULL;
            m->stage = &st.gpu;   /* the host call finds its copies */
            err = reduce_scatter_block(st.s, st.r, rcount, dtype, op, comm, m,
                                       request ? &inner : NULL);
            m->stage = NULL;
            err = staged_finish(m, coll, &st, err, inner, request);
        }
        return err;
    }
    err = reduce_scatter_common(m, coll, sbuf, rbuf, counts, dtype, op, &fell_back, request);
    free(counts);
    if (fell_back && MPI_SUCCESS == err) {
        err = request ? m->prev_ireduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, request,
                                                      m->prev_ireduce_scatter_block_module)
                      : m->prev_reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm,
                                                     m->prev_reduce_scatter_block_module);
    }
    return err;
}

/* ------------------------------------------------------------ allgather, alltoall */

/* Shared checks of the (send, recv) argument pairs. */
static int check_pair_args(mca_coll_xccl_module_t *m, xccl_coll_t coll, const void *sbuf,
                           int scount, struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                           struct ompi_datatype_t *rdtype, size_t send_blocks)
{
    int err;
    const int in_place = MPI_IN_PLACE == sbuf;
    if (rcount < 0 || (!in_place && scount < 0)) {
        return log_error(m, coll, MPI_ERR_COUNT, "negative count");
    }
    if (MPI_SUCCESS != (err = check_dtype(rdtype)) ||
        (!in_place && MPI_SUCCESS != (err = check_dtype(sdtype)))) {
        return log_error(m, coll, err, "invalid datatype");
    }
    if (MPI_IN_PLACE == rbuf) {
        return log_error(m, coll, MPI_ERR_BUFFER, "MPI_IN_PLACE as the receive buffer");
    }
    if (MPI_SUCCESS != (err = check_buf(rbuf, (size_t) rcount * (size_t) m->size, rdtype)) ||
        (!in_place &&
         MPI_SUCCESS != (err = check_buf(sbuf, (size_t) scount * send_blocks, sdtype)))) {
        return log_error(m, coll, err, "NULL buffer with a nonzero count");
    }
    /* A correct program sends what every rank receives from it, in bytes
     * at least (type signatures match); anything else would leave some
     * ranks waiting, so it is this rank's error. */
    if (!in_place && (size_t) scount * dtype_size(sdtype) != (size_t) rcount * dtype_size(rdtype)) {
        return log_error(m, coll, MPI_ERR_TRUNCATE,
                         "the send and receive blocks differ in size (type signatures differ)");
    }
    return MPI_SUCCESS;
}

/* Allgather and alltoall share everything but the fallback functions.  The
 * decision (xccl or the fallback) rests on the bytes alone, which type
 * signatures make equal on every rank; a datatype with gaps is packed. */
static int movement(xccl_coll_t coll, const void *sbuf, int scount,
                    struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                    struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                    mca_coll_xccl_module_t *m, ompi_request_t **request)
{
    const int in_place = MPI_IN_PLACE == sbuf;
    const size_t P = (size_t) m->size;
    const size_t send_blocks = XCCL_COLL_ALLTOALL == coll ? P : 1;
    int err = check_pair_args(m, coll, sbuf, scount, sdtype, rbuf, rcount, rdtype, send_blocks);
    if (MPI_SUCCESS != err) {
        return err;
    }
    const size_t block = (size_t) rcount * dtype_size(rdtype), bytes = block * P;
    const size_t sn = (size_t) scount * send_blocks, rn = (size_t) rcount * P;
    if (MPI_SUCCESS != (err = ipc_setup(m, coll, bytes, request))) {
        return err;
    }
    /* Inputs every rank shares decide whether all try CUDA IPC. */
    if (m->gpu_ipc && NULL == m->stage && NULL == request &&
        mca_coll_xccl_component.gpu_ipc_bytes > 0 &&
        bytes >= mca_coll_xccl_component.gpu_ipc_bytes &&
        !(XCCL_COLL_ALLTOALL == coll && in_place)) {
        char *r = (char *) rbuf + true_lb_of(rdtype);
        const char *exp = in_place ? r + (size_t) m->rank * block
                                   : (const char *) sbuf + true_lb_of(sdtype);
        int done, contig = is_contiguous(rdtype, rn) && (in_place || is_contiguous(sdtype, sn));
        err = mca_coll_xccl_gpu_ipc(m, comm, coll, exp, r, block, -1, contig, &done);
        if (done) {
            return err;
        }
    }
    const where_t w = where(in_place ? NULL : sbuf, rbuf);
    if (w.device) {
        staged_t st;
        err = staged_begin(m, coll, &st, sbuf, sn, sdtype, rbuf, rn, rdtype, 0, 1, &w);
        if (MPI_SUCCESS != err) {
            return err;
        }
        ompi_request_t *inner = NULL;
        m->stage = &st.gpu;   /* the host call finds its copies */
        err = movement(coll, st.s, scount, sdtype, st.r, rcount, rdtype, comm, m,
                       request ? &inner : NULL);
        m->stage = NULL;
        return staged_finish(m, coll, &st, err, inner, request);
    }
    const char *why = common_fallback(m, coll, bytes);
    if (why) {
        if (MPI_SUCCESS != (err = fall_back(m, coll, NULL != request, bytes, why))) {
            return err;
        }
        if (XCCL_COLL_ALLGATHER == coll) {
            return request ? m->prev_iallgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                                request, m->prev_iallgather_module)
                           : m->prev_allgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                               m->prev_allgather_module);
        }
        return request ? m->prev_ialltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                           request, m->prev_ialltoall_module)
                       : m->prev_alltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                          m->prev_alltoall_module);
    }
    packed_t pk = { 0 };
    char *s = NULL, *r = (char *) rbuf + true_lb_of(rdtype);
    if (!is_contiguous(rdtype, rn)) {
        /* in place: the input is in the receive buffer too */
        if (MPI_SUCCESS != (err = pack_recv(m, coll, &pk, rbuf, rn, rdtype, bytes, in_place))) {
            packed_end(m, coll, &pk, 0, 0);
            return err;
        }
        r = pk.r;
    }
    if (in_place) {
        /* allgather: the own block already sits in place; alltoall: SEND is RECV */
        s = XCCL_COLL_ALLGATHER == coll ? r + (size_t) m->rank * block : r;
    } else if (!is_contiguous(sdtype, sn)) {
        if (MPI_SUCCESS != (err = pack_copy(m, coll, &pk.s, block * send_blocks, sbuf, sn,
                                            sdtype))) {
            packed_end(m, coll, &pk, 0, 0);
            return err;
        }
        s = pk.s;
    } else {
        s = (char *) sbuf + true_lb_of(sdtype);
    }
    build_args_t a = { .block = block, .in_place = in_place, .layout = &m->layout };
    return build_and_run(m, coll, &a, bytes, 1, s, r, NULL, &pk, request);
}

/* ------------------------------------------------------------ bcast */

static int bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                 struct ompi_communicator_t *comm, mca_coll_xccl_module_t *m,
                 ompi_request_t **request)
{
    const xccl_coll_t coll = XCCL_COLL_BCAST;
    int err;
    if (count < 0) {
        return log_error(m, coll, MPI_ERR_COUNT, "negative count");
    }
    if (MPI_SUCCESS != (err = check_dtype(dtype))) {
        return log_error(m, coll, err, "invalid datatype");
    }
    if (root < 0 || root >= m->size) {
        return log_error(m, coll, MPI_ERR_ROOT, "root out of range");
    }
    if (MPI_IN_PLACE == buf) {
        return log_error(m, coll, MPI_ERR_BUFFER, "MPI_IN_PLACE as the buffer");
    }
    if (MPI_SUCCESS != (err = check_buf(buf, (size_t) count, dtype))) {
        return log_error(m, coll, err, "NULL buffer with a nonzero count");
    }
    const size_t bytes = (size_t) count * dtype_size(dtype);
    if (MPI_SUCCESS != (err = ipc_setup(m, coll, bytes, request))) {
        return err;
    }
    if (m->gpu_ipc && NULL == m->stage && NULL == request &&
        mca_coll_xccl_component.gpu_ipc_bytes > 0 &&
        bytes >= mca_coll_xccl_component.gpu_ipc_bytes) {
        char *b = (char *) buf + true_lb_of(dtype);
        int done;
        err = mca_coll_xccl_gpu_ipc(m, comm, coll, m->rank == root ? b : NULL, b, bytes, root,
                                    is_contiguous(dtype, (size_t) count), &done);
        if (done) {
            return err;
        }
    }
    const where_t w = where(buf, NULL);
    if (w.device) {
        staged_t st;
        /* The root's data is read and does not change: in, not out. */
        if (MPI_SUCCESS != (err = staged_begin(m, coll, &st, NULL, 0, dtype, buf, (size_t) count,
                                               dtype, m->rank == root, m->rank != root, &w))) {
            return err;
        }
        ompi_request_t *inner = NULL;
        m->stage = &st.gpu;   /* the host call finds its copies */
        err = bcast(st.r, count, dtype, root, comm, m, request ? &inner : NULL);
        m->stage = NULL;
        return staged_finish(m, coll, &st, err, inner, request);
    }
    const char *why = common_fallback(m, coll, bytes);
    if (why) {
        if (MPI_SUCCESS != (err = fall_back(m, coll, NULL != request, bytes, why))) {
            return err;
        }
        return request ? m->prev_ibcast(buf, count, dtype, root, comm, request,
                                        m->prev_ibcast_module)
                       : m->prev_bcast(buf, count, dtype, root, comm, m->prev_bcast_module);
    }
    packed_t pk = { 0 };
    char *b = (char *) buf + true_lb_of(dtype);
    if (!is_contiguous(dtype, (size_t) count)) {
        /* The root packs and keeps its data; the others unpack what came. */
        err = m->rank == root ? pack_copy(m, coll, &pk.r, bytes, buf, (size_t) count, dtype)
                              : pack_recv(m, coll, &pk, buf, (size_t) count, dtype, bytes, 0);
        if (MPI_SUCCESS != err) {
            packed_end(m, coll, &pk, 0, 0);
            return err;
        }
        b = pk.r;
    }
    build_args_t a = { .bytes = bytes, .root = root, .layout = &m->layout };
    return build_and_run(m, coll, &a, bytes, 1, NULL, b, NULL, &pk, request);
}

/* ------------------------------------------------------------ entry points */

#define XM(module) ((mca_coll_xccl_module_t *) (module))

int mca_coll_xccl_allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                            struct ompi_op_t *op, struct ompi_communicator_t *comm,
                            mca_coll_base_module_t *module)
{
    return allreduce(sbuf, rbuf, count, dtype, op, comm, XM(module), NULL);
}

int mca_coll_xccl_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                             struct ompi_op_t *op, struct ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    return allreduce(sbuf, rbuf, count, dtype, op, comm, XM(module), request);
}

int mca_coll_xccl_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, XM(module), NULL);
}

int mca_coll_xccl_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm, ompi_request_t **request,
                                  mca_coll_base_module_t *module)
{
    return reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, XM(module), request);
}

int mca_coll_xccl_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       mca_coll_base_module_t *module)
{
    return reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, XM(module), NULL);
}

int mca_coll_xccl_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                        struct ompi_communicator_t *comm,
                                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    return reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, XM(module), request);
}

int mca_coll_xccl_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return movement(XCCL_COLL_ALLGATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                    XM(module), NULL);
}

int mca_coll_xccl_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    return movement(XCCL_COLL_ALLGATHER, sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                    XM(module), request);
}

int mca_coll_xccl_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return movement(XCCL_COLL_ALLTOALL, sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                    XM(module), NULL);
}

int mca_coll_xccl_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    return movement(XCCL_COLL_ALLTOALL, sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                    XM(module), request);
}

int mca_coll_xccl_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return bcast(buf, count, dtype, root, comm, XM(module), NULL);
}

int mca_coll_xccl_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    return bcast(buf, count, dtype, root, comm, XM(module), request);
}
