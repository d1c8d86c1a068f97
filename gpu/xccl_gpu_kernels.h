/*
 * xccl's GPU reduction kernels (gpu/xccl_kernels.cu, gpu/README): built by
 * nvcc where configure finds CUDA (XCCL_HAVE_GPU_KERNELS), embedded in the
 * component as a fatbin and loaded through the driver API into each CUDA
 * context that uses them.  Without them every function below exists and
 * reports "not built with CUDA kernels"; callers fall back to the host.
 */
#ifndef XCCL_GPU_KERNELS_H
#define XCCL_GPU_KERNELS_H

#include <stddef.h>

#include "base/xccl_base.h"
#include "xccl_cuda.h"
#include "xccl_reduce_ops.h"      /* XCCL_GPU_MAX_SRCS */

/* 1 if (dt, op) has a GPU kernel in this build: every pair of
 * xccl_reduce_kernel except the long double ones (no long double on the
 * device).  Needs no driver. */
int xccl_gpu_reduce_supported(xccl_dtype_t dt, xccl_op_t op);

/* The kernel's name, "xccl_reduce_<dtype>_<op>", or NULL if unsupported. */
const char *xccl_gpu_reduce_kernel_name(xccl_dtype_t dt, xccl_op_t op);

/* The alignment xccl_gpu_reduce needs of dst and each source for
 * elements of dt (1 for a type without kernels).  Needs no driver. */
size_t xccl_gpu_reduce_align(xccl_dtype_t dt);

/* Enqueues on stream, in the calling thread's current CUDA context:
 *
 *     dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i]
 *
 * for i < count, folded left to right (the bits of xccl_reduce_kernel
 * applied in the same order; NaN results are NaN but their sign and
 * payload are the device's).  dst and srcs are device (or managed) pointers
 * of that context, aligned to the element type; dst may be exactly one of
 * the sources, otherwise nothing overlaps.  nsrc >= 1 (1: a copy); more
 * than XCCL_GPU_MAX_SRCS sources take several launches (then dst may only
 * be one of the first XCCL_GPU_MAX_SRCS).  count 0 enqueues nothing.
 * Asynchronous: the result is there once the stream gets past it.
 *
 * Returns 0, or -1 with *err (static text) without enqueuing anything:
 * unsupported pair, not built with kernels, no driver or no current
 * context, the driver lacks an entry point, the module does not load on
 * this device, misaligned pointer, bad argument; or the launch failed
 * (then the stream may have the first launches of a chained call).  The
 * caller falls back to the host path.  *err of a driver error is the
 * calling thread's (valid until its next call), the others are static. */
int xccl_gpu_reduce(xccl_dtype_t dt, xccl_op_t op, void *dst, const void *const *srcs, int nsrc,
                    size_t count, xccl_custream_t stream, const char **err);

/* Enqueues on stream, in the calling thread's current CUDA context, the
 * c->n (1..XCCL_GPU_MAX_COPIES) copies of c as one kernel launch: device
 * (or IPC-mapped) pointers of that context, no copy's destination
 * overlapping another's source or destination (they run concurrently).
 * 0, or -1 and *err as xccl_gpu_reduce (nothing queued). */
int xccl_gpu_copy_batch(const xccl_gpu_copies_t *c, xccl_custream_t stream, const char **err);

/* Loads the module into the current context now (otherwise the first
 * xccl_gpu_reduce does): 0, or -1 and *err. */
int xccl_gpu_kernels_load(const char **err);

/* "CUDA kernels for sm_75 ..." or "not built with CUDA kernels" for the log. */
const char *xccl_gpu_kernels_status(void);

/* Unloads the module of the calling thread's current context, if loaded
 * (e.g. before the application may destroy that context; a later
 * xccl_gpu_reduce loads it again). */
void xccl_gpu_kernels_release(void);

/* Forgets the per-context modules and functions (does not unload them: a
 * module goes with its context) and drops the driver handle. */
void xccl_gpu_kernels_fini(void);

#endif
