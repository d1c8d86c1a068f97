/*
 * NVLink state through NVML, loaded with dlopen so that nothing needs
 * nvml.h to build and a machine without the driver just has no NVLink
 * information.  Only the few types and entry points used are declared,
 * as the NVML API reference documents them.
 */
#include "xccl_topo.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return_t;                  /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_device *nvml_device_t;  /* nvmlDevice_t: opaque */

/* nvmlPciInfo_t (the _v2 functions' layout). */
typedef struct {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nvml_pci_info_t;

enum { NVML_FEATURE_ENABLED = 1 };                                  /* nvmlEnableState_t */
enum { NVML_NVLINK_GPU = 0, NVML_NVLINK_IBMNPU = 1, NVML_NVLINK_SWITCH = 2 }; /* nvmlIntNvLinkDeviceType_t */

typedef struct {
    void *lib;
    nvml_return_t (*init)(void);
    nvml_return_t (*shutdown)(void);
    nvml_return_t (*by_pci)(const char *busid, nvml_device_t *dev);
    nvml_return_t (*link_state)(nvml_device_t dev, unsigned link, int *active);
    nvml_return_t (*remote_pci)(nvml_device_t dev, unsigned link, nvml_pci_info_t *pci);
    nvml_return_t (*remote_type)(nvml_device_t dev, unsigned link, int *type);   /* may be absent */
    char last_busid[32];
    nvml_device_t last_dev;
} nvml_t;

static void *sym(void *lib, const char *name, const char *fallback)
{
    void *p = dlsym(lib, name);
    return p || fallback == NULL ? p : dlsym(lib, fallback);
}

static int nvml_open(void *ctx)
{
    nvml_t *n = ctx;
    memset(n, 0, sizeof(*n));
    /* XCCL_NVML_LIBRARY: NVML outside the loader's path, or the stand-in
     * of the unit tests. */
    const char *path = getenv("XCCL_NVML_LIBRARY");
    n->lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (n->lib == NULL) {
        return -1;
    }
    *(void **) &n->init = sym(n->lib, "nvmlInit_v2", "nvmlInit");
    *(void **) &n->shutdown = sym(n->lib, "nvmlShutdown", NULL);
    *(void **) &n->by_pci = sym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2", NULL);
    *(void **) &n->link_state = sym(n->lib, "nvmlDeviceGetNvLinkState", NULL);
    /* Only the _v2 entry point has the layout above. */
    *(void **) &n->remote_pci = sym(n->lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", NULL);
    *(void **) &n->remote_type = sym(n->lib, "nvmlDeviceGetNvLinkRemoteDeviceType", NULL);
    if (!n->init || !n->shutdown || !n->by_pci || !n->link_state || !n->remote_pci || n->init() != 0) {
        dlclose(n->lib);
        n->lib = NULL;
        return -1;
    }
    return 0;
}

static int nvml_link(void *ctx, const char *busid, unsigned link, xccl_topo_nvlink_t *out)
{
    nvml_t *n = ctx;
    int state = 0, type = -1;
    nvml_pci_info_t pci;
    if (strcmp(busid, n->last_busid) != 0) {
        if (n->by_pci(busid, &n->last_dev) != 0) {
            n->last_busid[0] = '\0';
            return -1;
        }
        snprintf(n->last_busid, sizeof(n->last_busid), "%s", busid);
    }
    /* Past the last link NVML answers INVALID_ARGUMENT; without NVLink
     * NOT_SUPPORTED: either way, no more links. */
    if (n->link_state(n->last_dev, link, &state) != 0) {
        return -1;
    }
    memset(out, 0, sizeof(*out));
    out->active = state == NVML_FEATURE_ENABLED;
    out->remote = XCCL_TOPO_REMOTE_UNKNOWN;
    if (!out->active) {
        return 0;
    }
    memset(&pci, 0, sizeof(pci));
    if (n->remote_pci(n->last_dev, link, &pci) == 0) {
        pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
        snprintf(out->remote_pci, sizeof(out->remote_pci), "%s", pci.bus_id);
    }
    if (n->remote_type && n->remote_type(n->last_dev, link, &type) == 0) {
        out->remote = type == NVML_NVLINK_GPU ? XCCL_TOPO_REMOTE_GPU
                    : type == NVML_NVLINK_SWITCH ? XCCL_TOPO_REMOTE_SWITCH : XCCL_TOPO_REMOTE_OTHER;
    }
    return 0;
}

static void nvml_close(void *ctx)
{
    nvml_t *n = ctx;
    if (n->lib) {
        n->shutdown();
        dlclose(n->lib);
        n->lib = NULL;
    }
}

static nvml_t nvml_state;
static const xccl_topo_nvml_ops_t nvml_ops = { &nvml_state, nvml_open, nvml_link, nvml_close };

const xccl_topo_nvml_ops_t *xccl_topo_nvml_default(void)
{
    return &nvml_ops;
}
