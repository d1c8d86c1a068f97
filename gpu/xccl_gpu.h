/*
 * CUDA support, loaded at run time: the component never links against
 * libcuda, so it loads and works on machines without a driver.
 *
 * For now xccl only classifies buffers, so that a device buffer is handed to
 * the fallback instead of being touched by host code.  Device data paths
 * (GPU reductions, staging, IPC) come later.
 */
#ifndef XCCL_GPU_H
#define XCCL_GPU_H

typedef enum {
    XCCL_MEM_HOST = 0,         /* ordinary or pinned host memory */
    XCCL_MEM_DEVICE = 1        /* device or managed memory: left to the fallback for now */
} xccl_mem_type_t;

/* Where ptr lives.  Costs one dlopen(RTLD_NOLOAD) probe while the process
 * has not loaded libcuda.so.1 (then no device memory can exist), one driver
 * query per pointer afterwards. */
xccl_mem_type_t xccl_gpu_mem_type(const void *ptr);
/* "no driver loaded", "driver loaded", ... for the log. */
const char *xccl_gpu_status(void);
void xccl_gpu_fini(void);

#endif
