/*
 * xccl's GPU reduction kernels, one per (dtype, op) pair of
 * XCCL_GPU_PAIRS (gpu/xccl_reduce_ops.h):
 *
 *   extern "C" __global__ void
 *   xccl_reduce_<dtype>_<op>(void *dst, xccl_gpu_srcs_t srcs, int nsrc,
 *                            unsigned long long count);
 *
 *   dst[i] = ((src0[i] op src1[i]) op src2[i]) ... op src(nsrc-1)[i]
 *
 * for i < count, folded left to right in that order, so the bits depend
 * only on the inputs and their order (not on the grid), and equal those of
 * xccl's host kernels folded the same way.  nsrc is 1..XCCL_GPU_MAX_SRCS
 * (1: a copy).  dst may be exactly one of the sources (each element is
 * read from every source before it is written); otherwise no overlap.
 * Pointers must be aligned to the element type (the loader checks); when
 * all are 16-byte aligned each thread moves 16 bytes per source at a time.
 *
 * Built by nvcc -fatbin with -fmad=false (no FMA contraction) and without
 * fast math (IEEE rounding, denormals kept), as Makefile.am does; the
 * fatbin is embedded in the component and loaded through the driver API
 * (gpu/xccl_gpu_kernels.c).
 */
#include "xccl_reduce_ops.h"

namespace {

template <typename T>
struct xccl_vec {
    static constexpr int n = 16 / sizeof(T);
    struct alignas(16) type {
        T v[n];
    };
};

template <typename T, typename Op>
__device__ __forceinline__ void reduce(void *dst_, const xccl_gpu_srcs_t &srcs, int nsrc,
                                       unsigned long long count)
{
    static_assert(16 % sizeof(T) == 0, "element sizes divide 16");
    typedef typename xccl_vec<T>::type V;
    constexpr int n = xccl_vec<T>::n;
    const Op op;
    const unsigned long long stride = (unsigned long long) gridDim.x * blockDim.x;
    const unsigned long long tid = (unsigned long long) blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long done = 0;

    /* The pointers in shared memory: indexing the parameter by a variable
     * would copy it to every thread's stack. */
    __shared__ unsigned long long src[XCCL_GPU_MAX_SRCS];
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < XCCL_GPU_MAX_SRCS; k++) {
            src[k] = srcs.p[k];
        }
    }
    __syncthreads();

    unsigned long long bits = (unsigned long long) dst_;
    for (int k = 0; k < nsrc; k++) {
        bits |= src[k];
    }
    if ((bits & 15) == 0) {
        const unsigned long long nv = count / n;
        V *dst = (V *) dst_;
        for (unsigned long long j = tid; j < nv; j += stride) {
            V acc = ((const V *) src[0])[j];
            for (int k = 1; k < nsrc; k++) {
                const V b = ((const V *) src[k])[j];
#pragma unroll
                for (int e = 0; e < n; e++) {
                    acc.v[e] = op(acc.v[e], b.v[e]);
                }
            }
            dst[j] = acc;
        }
        done = nv * n;
    }
    T *dst = (T *) dst_;
    for (unsigned long long i = done + tid; i < count; i += stride) {
        T acc = ((const T *) src[0])[i];
        for (int k = 1; k < nsrc; k++) {
            acc = op(acc, ((const T *) src[k])[i]);
        }
        dst[i] = acc;
    }
}

} // namespace

#define XCCL_KERNEL(DT, tn, T, opn, OP)                                                     \
    namespace {                                                                             \
    struct op_##tn##_##opn {                                                                \
        __device__ __forceinline__ T operator()(T x, T y) const                             \
        {                                                                                   \
            return xccl_op_##tn##_##opn(x, y);                                              \
        }                                                                                   \
    };                                                                                      \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(256)                                       \
        xccl_reduce_##tn##_##opn(void *dst, xccl_gpu_srcs_t srcs, int nsrc,                 \
                                 unsigned long long count)                                  \
    {                                                                                       \
        reduce<T, op_##tn##_##opn>(dst, srcs, nsrc, count);                                 \
    }

XCCL_GPU_PAIRS(XCCL_KERNEL)

/*
 *   extern "C" __global__ void xccl_copy_batch(xccl_gpu_copies_t c);
 *
 * The n copies of c (independent: none writes what another reads or
 * writes), every thread of the grid on each in turn, 16 bytes at a time
 * where both sides are 16-byte aligned: many small copies in one launch
 * (a collective on one GPU moves p^2 blocks) instead of one copy-engine
 * operation each.
 */
extern "C" __global__ void __launch_bounds__(256) xccl_copy_batch(xccl_gpu_copies_t c)
{
    __shared__ unsigned long long dst[XCCL_GPU_MAX_COPIES], src[XCCL_GPU_MAX_COPIES],
        len[XCCL_GPU_MAX_COPIES];
    if (threadIdx.x < XCCL_GPU_MAX_COPIES) {
        dst[threadIdx.x] = c.dst[threadIdx.x];
        src[threadIdx.x] = c.src[threadIdx.x];
        len[threadIdx.x] = c.len[threadIdx.x];
    }
    __syncthreads();
    const unsigned long long stride = (unsigned long long) gridDim.x * blockDim.x;
    const unsigned long long tid = (unsigned long long) blockIdx.x * blockDim.x + threadIdx.x;
    for (int e = 0; e < c.n; e++) {
        unsigned long long done = 0;
        if (((dst[e] | src[e]) & 15) == 0) {
            const unsigned long long nv = len[e] / 16;
            uint4 *d = (uint4 *) dst[e];
            const uint4 *s = (const uint4 *) src[e];
            for (unsigned long long j = tid; j < nv; j += stride) {
                d[j] = s[j];
            }
            done = nv * 16;
        }
        char *d = (char *) dst[e];
        const char *s = (const char *) src[e];
        for (unsigned long long i = done + tid; i < len[e]; i += stride) {
            d[i] = s[i];
        }
    }
}
