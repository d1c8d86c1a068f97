/*
 * A stand-in for a UCX built with CUDA, over the host-only UCX underneath,
 * for runs against the stand-in driver (test/gpu/fake's libcuda.so.1):
 * preloaded into the ranks (LD_PRELOAD, run_gpu_tests.sh), it
 *
 *  - makes ucp_context_query, called from xccl's component, report CUDA
 *    memory support (FAKE_UCX_CUDA=0: report what UCX says), so that xccl
 *    passes device pointers straight to UCX as it would with such a UCX;
 *  - checks every ucp_tag_send_nbx and ucp_tag_recv_nbx that xccl's
 *    component makes: the request must give the buffer's memory type
 *    (UCP_OP_ATTR_FIELD_MEMORY_TYPE), UCS_MEMORY_TYPE_CUDA exactly where
 *    the driver says the buffer is device memory (cuPointerGetAttribute)
 *    and UCS_MEMORY_TYPE_HOST elsewhere.  A real UCX with CUDA that is not
 *    told guesses, and can take a cuMemAlloc pointer for host memory (a
 *    crash);
 *  - passes the call on as host memory, which the stand-in's device
 *    memory is with FAKE_CUDA_HOST_ACCESS=1.
 *
 * Calls from anything else (Open MPI's own UCX components) go through
 * untouched.  Every wrong call is printed at once (the first 10), and at
 * exit one line per process, to stderr:
 *   fake_ucx_cuda[pid]: send cuda=N host=N recv cuda=N host=N unset=N wrong=N
 * (unset: no memory type given; wrong: the wrong one given).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

/* The driver's ABI (cuda.h): CU_POINTER_ATTRIBUTE_MEMORY_TYPE and
 * CU_MEMORYTYPE_DEVICE. */
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_MEMORYTYPE_DEVICE 2
typedef int (*cu_pointer_get_attribute_t)(void *data, int attribute, unsigned long long ptr);

typedef ucs_status_t (*context_query_t)(ucp_context_h, ucp_context_attr_t *);
typedef ucs_status_ptr_t (*tag_send_nbx_t)(ucp_ep_h, const void *, size_t, ucp_tag_t,
                                           const ucp_request_param_t *);
typedef ucs_status_ptr_t (*tag_recv_nbx_t)(ucp_worker_h, void *, size_t, ucp_tag_t, ucp_tag_t,
                                           const ucp_request_param_t *);

enum { SEND_CUDA, SEND_HOST, RECV_CUDA, RECV_HOST, UNSET, WRONG, NCOUNTS };
static atomic_ulong counts[NCOUNTS];
static atomic_int used;

/* The real function name from UCX (loaded by the time xccl calls it). */
static void *real(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (NULL == f) {
        void *ucp = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
        f = ucp ? dlsym(ucp, name) : NULL;
    }
    if (NULL == f) {
        fprintf(stderr, "fake_ucx_cuda[%d]: no %s in UCX\n", (int) getpid(), name);
        abort();
    }
    return f;
}

/* Whether the caller (the return address) lies in xccl's component. */
static int from_xccl(const void *ret)
{
    Dl_info info;
    return 0 != dladdr(ret, &info) && NULL != info.dli_fname &&
           NULL != strstr(info.dli_fname, "mca_coll_xccl");
}

/* Device memory, as the driver (loaded by the caller) says. */
static int is_device(const void *p)
{
    static cu_pointer_get_attribute_t get;
    if (NULL == get) {
        void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        get = cuda ? (cu_pointer_get_attribute_t) dlsym(cuda, "cuPointerGetAttribute") : NULL;
        if (NULL == get) {
            return 0;                /* no driver loaded: no device memory */
        }
    }
    unsigned int type = 0;
    return 0 == get(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (unsigned long long) (uintptr_t) p) &&
           CU_MEMORYTYPE_DEVICE == type;
}

static const char *type_name(ucs_memory_type_t t)
{
    return UCS_MEMORY_TYPE_HOST == t ? "host" : UCS_MEMORY_TYPE_CUDA == t ? "cuda" : "other";
}

/* Checks param for buf and returns the host-memory copy to pass on. */
static ucp_request_param_t check(const char *what, const void *buf, size_t len,
                                 const ucp_request_param_t *param, int send)
{
    ucp_request_param_t p = *param;
    const int device = is_device(buf);
    const ucs_memory_type_t want = device ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    atomic_store(&used, 1);
    if (!(param->op_attr_mask & UCP_OP_ATTR_FIELD_MEMORY_TYPE)) {
        if (atomic_fetch_add(&counts[UNSET], 1) < 10) {
            fprintf(stderr, "fake_ucx_cuda[%d]: WRONG %s %p len=%zu: no memory type given, "
                    "want %s\n", (int) getpid(), what, buf, len, type_name(want));
        }
    } else if (param->memory_type != want) {
        if (atomic_fetch_add(&counts[WRONG], 1) < 10) {
            fprintf(stderr, "fake_ucx_cuda[%d]: WRONG %s %p len=%zu: memory_type=%s, want %s\n",
                    (int) getpid(), what, buf, len, type_name(param->memory_type),
                    type_name(want));
        }
    }
    atomic_fetch_add(&counts[send ? (device ? SEND_CUDA : SEND_HOST)
                                  : (device ? RECV_CUDA : RECV_HOST)], 1);
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.memory_type = UCS_MEMORY_TYPE_HOST;
    return p;
}

ucs_status_t ucp_context_query(ucp_context_h context, ucp_context_attr_t *attr)
{
    static context_query_t f;
    if (NULL == f) {
        f = (context_query_t) real("ucp_context_query");
    }
    const int xccl = from_xccl(__builtin_return_address(0));
    ucs_status_t st = f(context, attr);
    if (xccl) {
        atomic_store(&used, 1);
    }
    const char *e = getenv("FAKE_UCX_CUDA");
    if (UCS_OK == st && xccl && (attr->field_mask & UCP_ATTR_FIELD_MEMORY_TYPES) &&
        !(e && 0 == strcmp(e, "0"))) {
        attr->memory_types |= UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    }
    return st;
}

ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void *buffer, size_t count, ucp_tag_t tag,
                                  const ucp_request_param_t *param)
{
    static tag_send_nbx_t f;
    if (NULL == f) {
        f = (tag_send_nbx_t) real("ucp_tag_send_nbx");
    }
    if (!from_xccl(__builtin_return_address(0))) {
        return f(ep, buffer, count, tag, param);
    }
    ucp_request_param_t p = check("ucp_tag_send_nbx", buffer, count, param, 1);
    return f(ep, buffer, count, tag, &p);
}

ucs_status_ptr_t ucp_tag_recv_nbx(ucp_worker_h worker, void *buffer, size_t count, ucp_tag_t tag,
                                  ucp_tag_t tag_mask, const ucp_request_param_t *param)
{
    static tag_recv_nbx_t f;
    if (NULL == f) {
        f = (tag_recv_nbx_t) real("ucp_tag_recv_nbx");
    }
    if (!from_xccl(__builtin_return_address(0))) {
        return f(worker, buffer, count, tag, tag_mask, param);
    }
    ucp_request_param_t p = check("ucp_tag_recv_nbx", buffer, count, param, 0);
    return f(worker, buffer, count, tag, tag_mask, &p);
}

__attribute__((destructor)) static void report(void)
{
    if (!atomic_load(&used)) {
        return;                      /* xccl did not set UCX up here */
    }
    fprintf(stderr, "fake_ucx_cuda[%d]: send cuda=%lu host=%lu recv cuda=%lu host=%lu "
            "unset=%lu wrong=%lu\n", (int) getpid(), atomic_load(&counts[SEND_CUDA]),
            atomic_load(&counts[SEND_HOST]), atomic_load(&counts[RECV_CUDA]),
            atomic_load(&counts[RECV_HOST]), atomic_load(&counts[UNSET]),
            atomic_load(&counts[WRONG]));
}
