/* UCP context, worker, endpoint cache and tagged transfers for xccl. */
#include "xccl_ucx.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kept in the request area UCP reserves in front of every request. */
typedef struct {
    size_t len;                /* posted length */
    int is_recv;
} xccl_ucx_req_t;

typedef struct {
    uint64_t key;
    ucp_ep_h ep;
    int refs;                  /* 0: free slot; the cache holds 1 of a live one */
} ep_slot_t;

static struct {
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_address_t *address;
    size_t address_len;
    ep_slot_t *eps;            /* open addressing, linear probing */
    size_t neps_cap, neps;
    pthread_mutex_t lock;      /* guards the endpoint cache */
    char tls[256];
    int cuda_memory;           /* the context moves CUDA memory */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Per thread: calls on several threads fail (and say why) on their own. */
static __thread char error[256];

static void set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, sizeof(error), fmt, ap);
    va_end(ap);
}

const char *xccl_ucx_error(void)
{
    return error;
}

void xccl_ucx_clear_error(void)
{
    error[0] = '\0';
}

const char *xccl_ucx_tls(void)
{
    return g.tls;
}

int xccl_ucx_cuda_memory(void)
{
    return NULL != g.context && g.cuda_memory;
}

static int query_cuda_memory(void)
{
    ucp_context_attr_t attr;
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (UCS_OK != ucp_context_query(g.context, &attr)) {
        return 0;
    }
    return 0 != (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA));
}

int xccl_ucx_ready(void)
{
    return NULL != g.worker;
}

/* Which transports the context really opened, read from its printed info
 * (UCP has no query for it): lines "#  resource 3 : md 2 dev 3 flags -- posix/memory". */
static void record_transports(void)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    g.tls[0] = '\0';
    if (NULL == f) {
        return;
    }
    ucp_context_print_info(g.context, f);
    fclose(f);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *p = strstr(line, "resource");
        char name[64];
        if (NULL == p || NULL == (p = strstr(p, "-- ")) || 1 != sscanf(p + 3, "%63[^/ ]", name)) {
            continue;
        }
        size_t used = strlen(g.tls), n = strlen(name);
        int seen = 0;
        for (const char *q = g.tls; (q = strstr(q, name)) != NULL; q += n) {
            if ((q == g.tls || q[-1] == ',') && (q[n] == ',' || q[n] == '\0')) {
                seen = 1;
            }
        }
        if (!seen) {
            snprintf(g.tls + used, sizeof(g.tls) - used, "%s%s", used ? "," : "", name);
        }
    }
    free(text);
}

int xccl_ucx_init(const char *tls, const char *rndv_scheme, const char *rndv_thresh,
                  int multi_thread)
{
    ucp_config_t *config = NULL;
    ucs_status_t st;

    st = ucp_config_read("XCCL", NULL, &config);
    if (UCS_OK != st) {
        set_error("ucp_config_read: %s", ucs_status_string(st));
        return -1;
    }
    if (tls && tls[0]) {
        st = ucp_config_modify(config, "TLS", tls);
        if (UCS_OK != st) {
            set_error("UCX transports \"%s\": %s", tls, ucs_status_string(st));
            ucp_config_release(config);
            return -1;
        }
    }

    if (rndv_scheme && rndv_scheme[0]) {
        st = ucp_config_modify(config, "RNDV_SCHEME", rndv_scheme);
        if (UCS_OK != st) {
            set_error("UCX rendezvous scheme \"%s\": %s", rndv_scheme, ucs_status_string(st));
            ucp_config_release(config);
            return -1;
        }
    }

    if (rndv_thresh && rndv_thresh[0]) {
        st = ucp_config_modify(config, "RNDV_THRESH", rndv_thresh);
        if (UCS_OK != st) {
            set_error("UCX rendezvous threshold \"%s\": %s", rndv_thresh, ucs_status_string(st));
            ucp_config_release(config);
            return -1;
        }
    }

    ucp_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                        UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG;
    params.request_size = sizeof(xccl_ucx_req_t);
    params.mt_workers_shared = 0;
    st = ucp_init(&params, config, &g.context);
    ucp_config_release(config);
    if (UCS_OK != st) {
        set_error("ucp_init: %s", ucs_status_string(st));
        g.context = NULL;
        return -1;
    }
    g.cuda_memory = query_cuda_memory();

    ucp_worker_params_t wparams;
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = multi_thread ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(g.context, &wparams, &g.worker);
    if (UCS_OK != st) {
        set_error("ucp_worker_create: %s", ucs_status_string(st));
        g.worker = NULL;
        xccl_ucx_fini();
        return -1;
    }
    st = ucp_worker_get_address(g.worker, &g.address, &g.address_len);
    if (UCS_OK != st) {
        set_error("ucp_worker_get_address: %s", ucs_status_string(st));
        g.address = NULL;
        xccl_ucx_fini();
        return -1;
    }
    record_transports();
    return 0;
}

static void close_ep(ucp_ep_h ep)
{
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *req = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(req)) {
        while (UCS_INPROGRESS == ucp_request_check_status(req)) {
            ucp_worker_progress(g.worker);
        }
        ucp_request_free(req);
    }
}

void xccl_ucx_fini(void)
{
    pthread_mutex_lock(&g.lock);
    for (size_t i = 0; i < g.neps_cap; i++) {
        if (g.eps[i].refs > 0) {
            close_ep(g.eps[i].ep);
        }
    }
    free(g.eps);
    g.eps = NULL;
    g.neps = g.neps_cap = 0;
    pthread_mutex_unlock(&g.lock);
    if (g.address) {
        ucp_worker_release_address(g.worker, g.address);
        g.address = NULL;
    }
    if (g.worker) {
        ucp_worker_destroy(g.worker);
        g.worker = NULL;
    }
    if (g.context) {
        ucp_cleanup(g.context);
        g.context = NULL;
    }
    g.cuda_memory = 0;
}

int xccl_ucx_address(const void **addr, size_t *len)
{
    if (NULL == g.address) {
        return -1;
    }
    *addr = g.address;
    *len = g.address_len;
    return 0;
}

unsigned xccl_ucx_progress(void)
{
    return g.worker ? ucp_worker_progress(g.worker) : 0;
}

/* ------------------------------------------------------------ endpoints */

static ep_slot_t *find_slot(ep_slot_t *tab, size_t cap, uint64_t key)
{
    size_t i = (size_t) (key * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (tab[i].refs > 0 && tab[i].key != key) {
        i = (i + 1) & (cap - 1);
    }
    return &tab[i];
}

static int grow(void)
{
    size_t cap = g.neps_cap ? 2 * g.neps_cap : 64;
    ep_slot_t *tab = calloc(cap, sizeof(*tab));
    if (NULL == tab) {
        return -1;
    }
    for (size_t i = 0; i < g.neps_cap; i++) {
        if (g.eps[i].refs > 0) {
            *find_slot(tab, cap, g.eps[i].key) = g.eps[i];
        }
    }
    free(g.eps);
    g.eps = tab;
    g.neps_cap = cap;
    return 0;
}


int xccl_ucx_ep_get(uint64_t key, const void *addr, size_t len, ucp_ep_h *ep)
{
    int rc = 0;
    (void) len;
    pthread_mutex_lock(&g.lock);
    if (2 * (g.neps + 1) > g.neps_cap && grow() != 0) {
        set_error("out of memory");
        rc = -1;
        goto out;
    }
    ep_slot_t *slot = find_slot(g.eps, g.neps_cap, key);
    if (slot->refs > 0) {
        slot->refs++;
        *ep = slot->ep;
        goto out;
    }
    ucp_ep_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address = (const ucp_address_t *) addr;
    ucs_status_t st = ucp_ep_create(g.worker, &params, ep);
    if (UCS_OK != st) {
        set_error("ucp_ep_create: %s", ucs_status_string(st));
        rc = -1;
        goto out;
    }
    slot->key = key;
    slot->ep = *ep;
    slot->refs = 2;            /* the caller's and the cache's own (until fini) */
    g.neps++;
out:
    pthread_mutex_unlock(&g.lock);
    return rc;
}

int xccl_ucx_ep_ref(uint64_t key, ucp_ep_h *ep)
{
    int rc = -1;
    pthread_mutex_lock(&g.lock);
    if (g.neps_cap > 0) {
        ep_slot_t *slot = find_slot(g.eps, g.neps_cap, key);
        if (slot->refs > 0) {
            slot->refs++;
            *ep = slot->ep;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&g.lock);
    return rc;
}

void xccl_ucx_ep_put(uint64_t key)
{
    pthread_mutex_lock(&g.lock);
    if (g.neps_cap > 0) {
        ep_slot_t *slot = find_slot(g.eps, g.neps_cap, key);
        if (slot->refs > 1) {
            slot->refs--;      /* the cache's own stays: open until fini */
        }
    }
    pthread_mutex_unlock(&g.lock);
}

/* ------------------------------------------------------------ transfers */

/* Says mem in param; -1 (error set by what) where UCX cannot take it. */
static int memory_type(ucp_request_param_t *param, xccl_ucx_mem_t mem, const char *what)
{
    if (XCCL_UCX_MEM_CUDA == mem && !g.cuda_memory) {
        set_error("%s: a device buffer, and this UCX lacks cuda memory support", what);
        return -1;
    }
    param->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param->memory_type = XCCL_UCX_MEM_CUDA == mem ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    return 0;
}

int xccl_ucx_isend(ucp_ep_h ep, const void *buf, size_t len, ucp_tag_t tag, xccl_ucx_mem_t mem,
                   void **req)
{
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    if (0 != memory_type(&param, mem, "ucp_tag_send_nbx")) {
        return -1;
    }
    void *r = ucp_tag_send_nbx(ep, buf, len, tag, &param);
    if (UCS_PTR_IS_ERR(r)) {
        set_error("ucp_tag_send_nbx: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        return -1;
    }
    if (r) {
        ((xccl_ucx_req_t *) r)->len = len;
        ((xccl_ucx_req_t *) r)->is_recv = 0;
    }
    *req = r;
    return 0;
}

int xccl_ucx_irecv(void *buf, size_t len, ucp_tag_t tag, xccl_ucx_mem_t mem, void **req)
{
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    /* Always a request, so that the received length can be checked. */
    param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    if (0 != memory_type(&param, mem, "ucp_tag_recv_nbx")) {
        return -1;
    }
    void *r = ucp_tag_recv_nbx(g.worker, buf, len, tag, (ucp_tag_t) -1, &param);
    if (UCS_PTR_IS_ERR(r) || NULL == r) {
        set_error("ucp_tag_recv_nbx: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        return -1;
    }
    ((xccl_ucx_req_t *) r)->len = len;
    ((xccl_ucx_req_t *) r)->is_recv = 1;
    *req = r;
    return 0;
}

int xccl_ucx_test(void *req)
{
    xccl_ucx_req_t *r = req;
    ucs_status_t st;
    int rc = 1;
    if (r->is_recv) {
        ucp_tag_recv_info_t info;
        st = ucp_tag_recv_request_test(req, &info);
        if (UCS_INPROGRESS == st) {
            return 0;
        }
        if (UCS_OK == st && info.length != r->len) {
            set_error("message tag %#llx: received %zu bytes, expected %zu",
                      (unsigned long long) info.sender_tag, info.length, r->len);
            rc = -1;
        }
    } else {
        st = ucp_request_check_status(req);
        if (UCS_INPROGRESS == st) {
            return 0;
        }
    }
    if (UCS_OK != st) {
        set_error("%s: %s", r->is_recv ? "receive" : "send", ucs_status_string(st));
        rc = -1;
    }
    ucp_request_free(req);
    return rc;
}

void xccl_ucx_cancel(void *req)
{
    /* UCP cancels only receives; a send is released and UCP frees it
     * when it completes. */
    if (((xccl_ucx_req_t *) req)->is_recv && UCS_INPROGRESS == ucp_request_check_status(req)) {
        ucp_request_cancel(g.worker, req);
        while (UCS_INPROGRESS == ucp_request_check_status(req)) {
            ucp_worker_progress(g.worker);
        }
    }
    ucp_request_free(req);
}
