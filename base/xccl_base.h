/*
 * xccl base: the types every layer shares and the host reduction kernels.
 * The lowest layer of the tree: algos/ and gpu/ include it, it includes
 * nothing of ours.  Pure C, no MPI, no UCX, no CUDA.
 *
 *   - element types (xccl_dtype_t) and reduction operations (xccl_op_t),
 *     their sizes and names (the GPU kernels' names are built from them);
 *   - the host reduction kernels, one table per instruction-set variant
 *     (reduce_kernels.c);
 *   - the intercepted collectives (xccl_coll_t) and their names.
 */
#ifndef XCCL_BASE_H
#define XCCL_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Element types and reduction operations                                   */
/* ------------------------------------------------------------------------ */

typedef enum {
    XCCL_DT_INT8, XCCL_DT_UINT8, XCCL_DT_INT16, XCCL_DT_UINT16,
    XCCL_DT_INT32, XCCL_DT_UINT32, XCCL_DT_INT64, XCCL_DT_UINT64,
    XCCL_DT_FLOAT, XCCL_DT_DOUBLE, XCCL_DT_LONG_DOUBLE,
    XCCL_DT_FLOAT_COMPLEX, XCCL_DT_DOUBLE_COMPLEX, XCCL_DT_LONG_DOUBLE_COMPLEX,
    XCCL_DT_BOOL,              /* C _Bool, 1 byte */
    XCCL_DT_BYTE,              /* opaque byte: bitwise ops only */
    /* value/index pairs for MINLOC/MAXLOC, laid out as the C structs */
    XCCL_DT_FLOAT_INT,         /* struct { float v; int i; } */
    XCCL_DT_DOUBLE_INT,        /* struct { double v; int i; } */
    XCCL_DT_LONG_INT,          /* struct { long v; int i; } */
    XCCL_DT_2INT,              /* struct { int v; int i; } */
    XCCL_DT_SHORT_INT,         /* struct { short v; int i; } */
    XCCL_DT_LONG_DOUBLE_INT,   /* struct { long double v; int i; } */
    XCCL_DT_2FLOAT,            /* struct { float v; float i; }   (MPI_2REAL) */
    XCCL_DT_2DOUBLE,           /* struct { double v; double i; } (MPI_2DOUBLE_PRECISION) */
    XCCL_DT_COUNT
} xccl_dtype_t;

typedef enum {
    XCCL_OP_SUM, XCCL_OP_PROD, XCCL_OP_MAX, XCCL_OP_MIN,
    XCCL_OP_LAND, XCCL_OP_LOR, XCCL_OP_LXOR,
    XCCL_OP_BAND, XCCL_OP_BOR, XCCL_OP_BXOR,
    XCCL_OP_MAXLOC, XCCL_OP_MINLOC,
    XCCL_OP_COUNT
} xccl_op_t;

/* out[i] = a[i] op b[i] for i < count.  out may be exactly a or exactly b;
 * otherwise the three ranges do not overlap.  MAXLOC/MINLOC keep the lower
 * index on ties (MPI semantics). */
typedef void (*xccl_reduce_fn_t)(void *out, const void *a, const void *b, size_t count);

/* The kernel for (dtype, op), or NULL where the pair is not defined. */
xccl_reduce_fn_t xccl_reduce_kernel(xccl_dtype_t dtype, xccl_op_t op);
size_t xccl_dtype_size(xccl_dtype_t dtype);
const char *xccl_dtype_name(xccl_dtype_t dtype);
const char *xccl_op_name(xccl_op_t op);

/* The kernels exist once per instruction-set variant, best first (x86-64
 * with GCC: "x86-64-v4", "avx2", "baseline"; elsewhere "baseline" only);
 * xccl_reduce_kernel hands out those of xccl_reduce_isa_best(), the first
 * one this CPU runs.  All variants give the same bits (the ranks of a job
 * may run different ones).  The others are for tests: a kernel of a
 * variant that is not usable here may fault. */
int xccl_reduce_isa_count(void);
const char *xccl_reduce_isa_name(int isa);      /* NULL when out of range */
int xccl_reduce_isa_usable(int isa);            /* this CPU runs it */
int xccl_reduce_isa_best(void);
xccl_reduce_fn_t xccl_reduce_kernel_isa(int isa, xccl_dtype_t dtype, xccl_op_t op);

/* ------------------------------------------------------------------------ */
/* Collectives                                                              */
/* ------------------------------------------------------------------------ */

/* The collectives xccl intercepts (the nonblocking forms share them). */
typedef enum {
    XCCL_COLL_ALLREDUCE,
    XCCL_COLL_ALLGATHER,
    XCCL_COLL_REDUCE_SCATTER,
    XCCL_COLL_REDUCE_SCATTER_BLOCK,
    XCCL_COLL_ALLTOALL,
    XCCL_COLL_BCAST,
    XCCL_COLL_REDUCE,
    XCCL_COLL_BARRIER,
    XCCL_COLL_ALLGATHERV,
    XCCL_COLL_ALLTOALLV,
    XCCL_COLL_GATHER,
    XCCL_COLL_GATHERV,
    XCCL_COLL_SCATTER,
    XCCL_COLL_SCATTERV,
    XCCL_NCOLL
} xccl_coll_t;

/* "allreduce", ..., "scatterv"; NULL if c is out of range. */
const char *xccl_coll_name(xccl_coll_t c);
/* The collective of that name, -1 if none. */
int xccl_coll_index(const char *name);

/* The collectives whose message sizes a rank does not know for the
 * others (alltoallv, and gatherv and scatterv off the root): nothing that
 * must be alike on every rank may rest on their sizes. */
static inline int xccl_coll_sizes_local(xccl_coll_t c)
{
    return XCCL_COLL_ALLTOALLV == c || XCCL_COLL_GATHERV == c || XCCL_COLL_SCATTERV == c;
}

/* The rooted collectives whose MPI_IN_PLACE only the root gives (reduce,
 * gather(v), scatter(v)): nothing that must be alike on every rank may
 * rest on it. */
static inline int xccl_coll_rooted(xccl_coll_t c)
{
    return XCCL_COLL_REDUCE == c || XCCL_COLL_GATHER == c || XCCL_COLL_GATHERV == c || XCCL_COLL_SCATTER == c ||
           XCCL_COLL_SCATTERV == c;
}

/* The collectives that the peer-access paths carry (the shared-memory
 * level's latency path and mesh, CUDA IPC): the first six.  The others run
 * their schedules over the transport, on host copies of device buffers. */
static inline int xccl_coll_peer(xccl_coll_t c)
{
    return c <= XCCL_COLL_BCAST;
}

/* The collectives the shared-memory level runs (its latency path, its
 * small calls): those and barrier, a flag barrier of the level. */
static inline int xccl_coll_level(xccl_coll_t c)
{
    return xccl_coll_peer(c) || XCCL_COLL_BARRIER == c;
}

/* The collectives whose "mesh" schedules also run on copied peers
 * (process_vm_readv and writev inside a node, blocking calls): those six,
 * and allgatherv, gather and scatter, pure copies whose sizes every rank
 * knows (the level's trials time them against shm alike everywhere). */
static inline int xccl_coll_peer_copy(xccl_coll_t c)
{
    return xccl_coll_peer(c) || XCCL_COLL_ALLGATHERV == c || XCCL_COLL_GATHER == c || XCCL_COLL_SCATTER == c;
}

/* The collectives with peer-access schedules on mapped buffers ("mesh",
 * "leader"), which the CUDA IPC provider runs on device buffers: those
 * six, reduce, allgatherv, alltoallv, gather(v) and scatter(v).  Alltoallv
 * has "mesh" only (each rank reads its own blocks: its peers tell it
 * where they keep them, xccl_build_alltoallv_mesh). */
static inline int xccl_coll_mapped(xccl_coll_t c)
{
    return xccl_coll_peer(c) || XCCL_COLL_REDUCE == c || XCCL_COLL_ALLGATHERV == c || XCCL_COLL_ALLTOALLV == c ||
           XCCL_COLL_GATHER == c || XCCL_COLL_GATHERV == c || XCCL_COLL_SCATTER == c || XCCL_COLL_SCATTERV == c;
}

#ifdef __cplusplus
}
#endif

#endif
