/*
 * A stand-in for libnvidia-ml.so.1, dlopened by test_topo through
 * XCCL_NVML_LIBRARY so the real NVML glue (symbol names, the _v2 PCI info
 * layout, end-of-links handling) runs on a machine without a GPU.  Its
 * GPUs are those of test/fixtures/hwloc/gpu4-ib-2pkg.xml: each has 18
 * links, 0-11 to the NVSwitch fabric and 12-17 to the next GPU (mod 4).
 * FAKE_NVML_NO_TYPE=1 makes the remote type unknown, as on old drivers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} fake_pci_info_t;

enum { OK = 0, INVALID_ARGUMENT = 2, NOT_FOUND = 6, FUNCTION_NOT_FOUND = 13 };

static const unsigned buses[4] = { 0x18, 0x33, 0x98, 0xb3 };

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetHandleByPciBusId_v2(const char *busid, void **dev);
int nvmlDeviceGetNvLinkState(void *dev, unsigned link, int *active);
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, fake_pci_info_t *pci);
int nvmlDeviceGetNvLinkRemoteDeviceType(void *dev, unsigned link, int *type);

int nvmlInit_v2(void)
{
    return OK;
}

int nvmlShutdown(void)
{
    return OK;
}

/* Handles are 1 + the GPU's index. */
int nvmlDeviceGetHandleByPciBusId_v2(const char *busid, void **dev)
{
    unsigned domain, bus;
    if (sscanf(busid, "%x:%x", &domain, &bus) != 2) {
        return INVALID_ARGUMENT;
    }
    for (int i = 0; i < 4; i++) {
        if (buses[i] == bus) {
            *dev = (void *) (long) (i + 1);
            return OK;
        }
    }
    return NOT_FOUND;
}

int nvmlDeviceGetNvLinkState(void *dev, unsigned link, int *active)
{
    (void) dev;
    if (link >= 18) {
        return INVALID_ARGUMENT;
    }
    *active = 1;
    return OK;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, fake_pci_info_t *pci)
{
    int me = (int) (long) dev - 1;
    memset(pci, 0, sizeof(*pci));
    /* NVSwitch ports have PCI addresses of their own, none of our GPUs'. */
    snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0", link < 12 ? 0xffu : buses[(me + 1) % 4]);
    return OK;
}

int nvmlDeviceGetNvLinkRemoteDeviceType(void *dev, unsigned link, int *type)
{
    (void) dev;
    const char *no_type = getenv("FAKE_NVML_NO_TYPE");
    if (no_type && strcmp(no_type, "1") == 0) {
        return FUNCTION_NOT_FOUND;
    }
    *type = link < 12 ? 2 : 0;   /* NVML_NVLINK_DEVICE_TYPE_SWITCH, _GPU */
    return OK;
}
