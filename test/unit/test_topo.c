/*
 * Topology detection and files.  Detection runs the real hwloc and sysfs
 * parsing on fixtures (hwloc XML files, sysfs trees) with NVLink answers
 * injected through the NVML ops table; topology files are loaded, checked,
 * dumped and re-loaded; malformed files must fail with a line number;
 * detection on this machine must simply work; and the placement keys and
 * the order of a node's ranks follow the ring and the bindings.
 */
#include "xccl_topo.h"

#include <check.h>
#include "check_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef XCCL_TOP_SRCDIR
#define XCCL_TOP_SRCDIR "."
#endif
#ifndef XCCL_TOP_BUILDDIR
#define XCCL_TOP_BUILDDIR "."
#endif

static xccl_topo_t topo, topo2;   /* some 20 KiB each: not on the stack */
static char err[512];

/* XCCL_FIXTURES (set by make check), else the source tree's. */
static const char *fixture(const char *rel)
{
    static char path[4][1024];
    static int next;
    const char *dir = getenv("XCCL_FIXTURES");
    char *p = path[next++ % 4];
    if (dir && *dir) {
        snprintf(p, sizeof(path[0]), "%s/%s", dir, rel);
    } else {
        snprintf(p, sizeof(path[0]), "%s/test/fixtures/%s", XCCL_TOP_SRCDIR, rel);
    }
    return p;
}

/* "gpu0:mlx5_0 gpu1:mlx5_1 ..." */
static const char *pairing(const xccl_topo_t *t)
{
    static char buf[2048];
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->ndevs; d++) {
        int n = t->devs[d].nic;
        used += (size_t) snprintf(buf + used, sizeof(buf) - used, "%s%s:%s", d ? " " : "",
                                  t->devs[d].name, n >= 0 ? t->nics[n].name : "-");
    }
    return buf;
}

static char *dump_to_string(const xccl_topo_t *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(xccl_topo_dump(t, f), 0);
    fclose(f);
    return buf;
}

static int load_string(const char *text, xccl_topo_t *t)
{
    FILE *f = fmemopen((void *) text, strlen(text), "r");
    ck_assert_ptr_nonnull(f);
    int rc = xccl_topo_load_stream(f, "mem", t, err, sizeof(err));
    fclose(f);
    return rc;
}

/* dump -> load -> dump gives the same bytes; 0 when it does. */
static int round_trip_differs(const xccl_topo_t *t)
{
    char *first = dump_to_string(t);
    int rc = load_string(first, &topo2);
    char *second = rc == 0 ? dump_to_string(&topo2) : NULL;
    int differs = rc != 0 || strcmp(first, second) != 0;
    free(first);
    free(second);
    return differs;
}

/* ------------------------------------------------------------ fake NVML */

typedef enum { FAKE_SWITCH, FAKE_MESH, FAKE_MESH_UNTYPED, FAKE_PAIR, FAKE_BROKEN } fake_mode_t;

typedef struct {
    fake_mode_t mode;
    int opened, closed, queries;
} fake_nvml_t;

/* The GPUs of gpu4-ib-2pkg.xml, as NVML spells bus ids. */
static const char *const fake_gpus[4] = {
    "00000000:18:00.0", "00000000:33:00.0", "00000000:98:00.0", "00000000:B3:00.0"
};

static int fake_index(const char *busid)
{
    unsigned b;
    if (sscanf(busid, "%*x:%x", &b) != 1) {
        return -1;
    }
    return b == 0x18 ? 0 : b == 0x33 ? 1 : b == 0x98 ? 2 : b == 0xb3 ? 3 : -1;
}

static int fake_open(void *ctx)
{
    fake_nvml_t *f = ctx;
    f->opened++;
    return f->mode == FAKE_BROKEN ? -1 : 0;
}

static void fake_close(void *ctx)
{
    ((fake_nvml_t *) ctx)->closed++;
}

/* SWITCH: 18 links to NVSwitch.  MESH: links 0..5, two to each peer, and
 * link 6 inactive.  PAIR: gpu0 and gpu1 joined by 4 links, nothing else. */
static int fake_link(void *ctx, const char *busid, unsigned link, xccl_topo_nvlink_t *out)
{
    fake_nvml_t *f = ctx;
    int me = fake_index(busid);
    f->queries++;
    if (me < 0) {
        return -1;
    }
    switch (f->mode) {
    case FAKE_SWITCH:
        if (link >= 18) {
            return -1;
        }
        out->active = 1;
        out->remote = XCCL_TOPO_REMOTE_SWITCH;
        return 0;
    case FAKE_MESH:
    case FAKE_MESH_UNTYPED:
        if (link > 6) {
            return -1;
        }
        out->active = link < 6;
        out->remote = f->mode == FAKE_MESH ? XCCL_TOPO_REMOTE_GPU : XCCL_TOPO_REMOTE_UNKNOWN;
        snprintf(out->remote_pci, sizeof(out->remote_pci), "%s", fake_gpus[(me + 1 + (int) link / 2) % 4]);
        return 0;
    case FAKE_PAIR:
        if (link >= 4 || me > 1) {
            return -1;
        }
        out->active = 1;
        out->remote = XCCL_TOPO_REMOTE_GPU;
        snprintf(out->remote_pci, sizeof(out->remote_pci), "%s", fake_gpus[1 - me]);
        return 0;
    case FAKE_BROKEN:
        break;
    }
    return -1;
}

static int detect_gpu4(fake_nvml_t *fake, const char *sysfs)
{
    xccl_topo_nvml_ops_t ops = { fake, fake_open, fake_link, fake_close };
    xccl_topo_detect_opts_t opts = { fixture("hwloc/gpu4-ib-2pkg.xml"), fixture(sysfs), &ops, 0, 0 };
    return xccl_topo_detect(&topo, &opts, err, sizeof(err));
}

/* ------------------------------------------------------------ detection */

START_TEST(xml_gpus_nvswitch_ib)
{
    fake_nvml_t fake = { FAKE_SWITCH, 0, 0, 0 };
    ck_assert_msg(detect_gpu4(&fake, "sysfs/ib") == 0, "%s", err);
    ck_assert_int_eq(fake.opened, 1);
    ck_assert_int_eq(fake.closed, 1);
    ck_assert_int_eq(fake.queries, 4 * 19);
    ck_assert_str_eq(topo.name, "gpu4-ib-fixture");
    ck_assert_int_eq(topo.packages, 2);
    ck_assert_int_eq(topo.numa_nodes, 2);
    ck_assert_int_eq(topo.cores, 8);
    ck_assert_int_eq(topo.pus, 16);
    /* The BMC's VGA is not an accelerator. */
    ck_assert_int_eq(topo.ndevs, 4);
    ck_assert_str_eq(topo.devs[3].loc.pci, "0000:b3:00.0");
    ck_assert_int_eq(topo.devs[3].loc.numa, 1);
    ck_assert_int_eq(topo.devs[3].loc.package, 1);
    ck_assert_int_eq(topo.devs[0].switch_links, 18);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_NVSWITCH);
    /* 4 IB NICs from sysfs, eno1 from hwloc. */
    ck_assert_int_eq(topo.nnics, 5);
    ck_assert_str_eq(topo.nics[4].name, "eno1");
    ck_assert_int_eq(topo.nics[4].type, XCCL_TOPO_NIC_ETH);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_IB);
    ck_assert_int_eq(topo.fabric_links, 4);
    ck_assert(topo.fabric_rate_gbps == 400.0);
    ck_assert_str_eq(pairing(&topo), "gpu0:mlx5_0 gpu1:mlx5_1 gpu2:mlx5_2 gpu3:mlx5_3");
    ck_assert_str_eq(topo.nics[2].loc.pci, "0000:97:00.0");
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 4), XCCL_TOPO_PATH_PIX);    /* gpu0, mlx5_0 */
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 5), XCCL_TOPO_PATH_PHB);    /* gpu0, mlx5_1 */
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 6), XCCL_TOPO_PATH_SYS);    /* gpu0, mlx5_2 */
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 1), XCCL_TOPO_PATH_SW);
}
END_TEST

START_TEST(xml_gpus_full_mesh)
{
    fake_nvml_t fake = { FAKE_MESH, 0, 0, 0 };
    ck_assert_msg(detect_gpu4(&fake, "sysfs/ib") == 0, "%s", err);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_FULL_MESH);
    ck_assert_int_eq(topo.links[0][3].count, 2);
    ck_assert_int_eq(topo.links[3][0].count, 2);
    ck_assert_int_eq(topo.devs[0].switch_links, 0);
    ck_assert_int_eq(xccl_topo_path(&topo, 1, 2), XCCL_TOPO_PATH_NV);

    /* A driver that cannot name the remote type: peers found by PCI id. */
    fake_nvml_t untyped = { FAKE_MESH_UNTYPED, 0, 0, 0 };
    ck_assert_msg(detect_gpu4(&untyped, "sysfs/ib") == 0, "%s", err);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_FULL_MESH);
    ck_assert_int_eq(topo.links[1][2].count, 2);
}
END_TEST

START_TEST(xml_gpus_pcie_without_or_with_partial_nvlink)
{
    fake_nvml_t broken = { FAKE_BROKEN, 0, 0, 0 };
    ck_assert_msg(detect_gpu4(&broken, "sysfs/ib") == 0, "%s", err);
    ck_assert_int_eq(broken.queries, 0);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_PCIE);
    ck_assert_int_eq(topo.ndevs, 4);
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 1), XCCL_TOPO_PATH_PHB);
    ck_assert_int_eq(xccl_topo_path(&topo, 1, 2), XCCL_TOPO_PATH_SYS);
    ck_assert_int_eq(topo.pcie_groups, 4);    /* one switch per GPU */

    fake_nvml_t pair = { FAKE_PAIR, 0, 0, 0 };
    ck_assert_msg(detect_gpu4(&pair, "sysfs/ib") == 0, "%s", err);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_PCIE);
    ck_assert_int_eq(topo.links[0][1].count, 4);
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 1), XCCL_TOPO_PATH_NV);

    /* No RDMA devices under this root: TCP over eno1, still rails. */
    ck_assert_msg(detect_gpu4(&pair, "sysfs/none") == 0, "%s", err);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_TCP);
    ck_assert_str_eq(pairing(&topo), "gpu0:eno1 gpu1:eno1 gpu2:eno1 gpu3:eno1");
}
END_TEST

START_TEST(xml_cpu_only_roce)
{
    xccl_topo_detect_opts_t opts = { fixture("hwloc/cpu-2pkg.xml"), fixture("sysfs/roce"), NULL, 1, 0 };
    ck_assert_msg(xccl_topo_detect(&topo, &opts, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(topo.ndevs, 0);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_SHM);
    ck_assert_int_eq(topo.packages, 2);
    ck_assert_int_eq(topo.nnuma, 2);
    ck_assert_int_eq(topo.numa[1].package, 1);
    ck_assert_int_eq(topo.numa[1].cores, 4);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_ROCE);
    /* The RDMA devices own the Ethernet functions: no separate eth NICs. */
    ck_assert_int_eq(topo.nnics, 2);
    ck_assert_int_eq(topo.fabric_links, 2);
    ck_assert(topo.fabric_rate_gbps == 100.0);
    /* Found through the sysfs device links (no OpenFabrics OS devices). */
    ck_assert_str_eq(topo.nics[1].loc.pci, "0000:41:00.1");
    ck_assert_int_eq(topo.nics[1].loc.numa, 1);
    ck_assert_int_eq(topo.nics[1].loc.package, 1);
}
END_TEST

START_TEST(xml_cpu_only_tcp)
{
    xccl_topo_detect_opts_t opts = { fixture("hwloc/cpu-2pkg.xml"), fixture("sysfs/none"), NULL, 0, 0 };
    ck_assert_msg(xccl_topo_detect(&topo, &opts, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_SHM);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_TCP);
    ck_assert_int_eq(topo.nnics, 2);
    ck_assert_str_eq(topo.nics[0].name, "ens1f0np0");
    ck_assert_int_eq(topo.cores, 8);
    ck_assert_int_eq(topo.pus, 16);
}
END_TEST

/* io_if_needed on this machine's hwloc with a sysfs fixture: no
 * accelerator and no RDMA device in it, so no hwloc I/O discovery, and the
 * Ethernet NICs come from the fixture's class/net: the interface under an
 * Ethernet-class PCI function (behind a virtio device, as in a virtual
 * machine), not the one under a network-other function (0x0280) nor a
 * virtual one. */
START_TEST(io_skipped_eth_from_sysfs)
{
    xccl_topo_detect_opts_t opts = { NULL, fixture("sysfs/eth-only"), NULL, 1, 1 };
    ck_assert_msg(xccl_topo_detect(&topo, &opts, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(topo.ndevs, 0);
    ck_assert_int_eq(topo.nnics, 1);
    ck_assert_str_eq(topo.nics[0].name, "fxeth0");
    ck_assert_int_eq(topo.nics[0].type, XCCL_TOPO_NIC_ETH);
    ck_assert_int_eq(topo.nics[0].ports, 1);
    ck_assert(topo.nics[0].rate_gbps == 25.0);
    ck_assert_str_eq(topo.nics[0].loc.pci, "0000:00:03.0");
    ck_assert_int_eq(topo.nics[0].loc.numa, 0);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_TCP);
    ck_assert_int_eq(topo.fabric_links, 1);
}
END_TEST

/* The same fixture with an NVIDIA 3D controller among its PCI functions:
 * hwloc's I/O discovery runs, and the NICs are this machine's (none of
 * them the fixture's fxeth0); so they are with io_if_needed off. */
START_TEST(io_kept_for_accelerators)
{
    xccl_topo_detect_opts_t opts = { NULL, fixture("sysfs/eth-accel"), NULL, 1, 1 };
    for (int off = 0; off < 2; off++) {
        if (off) {
            opts.sysfs_root = fixture("sysfs/eth-only");
            opts.io_if_needed = 0;
        }
        ck_assert_msg(xccl_topo_detect(&topo, &opts, err, sizeof(err)) == 0, "%s", err);
        for (int i = 0; i < topo.nnics; i++) {
            ck_assert_msg(strcmp(topo.nics[i].name, "fxeth0") != 0, "off %d: a fixture NIC", off);
        }
    }
}
END_TEST

START_TEST(xml_missing_is_an_error)
{
    xccl_topo_detect_opts_t opts = { fixture("hwloc/no-such-file.xml"), NULL, NULL, 1, 0 };
    ck_assert_int_eq(xccl_topo_detect(&topo, &opts, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "no-such-file.xml"));
}
END_TEST

/* The real NVML glue, on the stand-in library of test/unit/fake_nvml.c:
 * 12 links to NVSwitch and 6 to the next GPU from each GPU. */
START_TEST(nvml_through_dlopen)
{
    xccl_topo_detect_opts_t opts = { fixture("hwloc/gpu4-ib-2pkg.xml"), fixture("sysfs/ib"), NULL, 0, 0 };
    ck_assert_int_eq(setenv("XCCL_NVML_LIBRARY", XCCL_TOP_BUILDDIR "/.libs/libxccl_fake_nvml.so", 1), 0);
    unsetenv("FAKE_NVML_NO_TYPE");
    int rc = xccl_topo_detect(&topo, &opts, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_NVSWITCH);
    ck_assert_int_eq(topo.devs[2].switch_links, 12);
    ck_assert_int_eq(topo.links[1][2].count, 6);
    ck_assert_int_eq(topo.links[3][0].count, 6);
    ck_assert_int_eq(topo.links[0][2].count, 0);
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 2), XCCL_TOPO_PATH_SW);

    /* A driver without the remote type: NVSwitch guessed from a peer that
     * is none of the GPUs, GPU peers found by PCI address. */
    ck_assert_int_eq(setenv("FAKE_NVML_NO_TYPE", "1", 1), 0);
    rc = xccl_topo_detect(&topo2, &opts, err, sizeof(err));
    unsetenv("FAKE_NVML_NO_TYPE");
    ck_assert_msg(rc == 0, "%s", err);
    char *a = dump_to_string(&topo), *b = dump_to_string(&topo2);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);

    /* No such library: no NVLink information, no failure. */
    ck_assert_int_eq(setenv("XCCL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1), 0);
    rc = xccl_topo_detect(&topo, &opts, err, sizeof(err));
    unsetenv("XCCL_NVML_LIBRARY");
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_PCIE);
}
END_TEST

/* This machine: whatever it has, detection works and round-trips. */
START_TEST(this_machine)
{
    xccl_topo_node_t node;
    ck_assert_msg(xccl_topo_detect(&topo, NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_ge(topo.pus, 1);
    ck_assert_int_ge(topo.cores, 1);
    ck_assert(topo.intra == XCCL_TOPO_INTRA_SHM || topo.ndevs > 0);
    ck_assert(topo.fabric == XCCL_TOPO_FABRIC_TCP || topo.nnics > 0);
    ck_assert_int_eq(round_trip_differs(&topo), 0);
    ck_assert_int_eq(xccl_topo_detect_node(&node), 0);
    ck_assert_int_eq(node.pus, topo.pus);
    ck_assert_ptr_nonnull(strstr(node.summary, xccl_topo_intra_name(topo.intra)));
}
END_TEST

/* ------------------------------------------------------------ files */

static void load_fixture(const char *rel)
{
    ck_assert_msg(xccl_topo_load(fixture(rel), &topo, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(file_dgx_nvswitch_ib)
{
    load_fixture("topo/dgx-h100-nvswitch-ib.topo");
    ck_assert_int_eq(topo.ndevs, 8);
    ck_assert_int_eq(topo.nnics, 8);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_NVSWITCH);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_IB);
    ck_assert_int_eq(topo.fabric_links, 8);
    ck_assert(topo.fabric_total_gbps == 3200.0);
    ck_assert_str_eq(pairing(&topo), "gpu0:mlx5_0 gpu1:mlx5_1 gpu2:mlx5_2 gpu3:mlx5_3 "
                                     "gpu4:mlx5_4 gpu5:mlx5_5 gpu6:mlx5_6 gpu7:mlx5_7");
    ck_assert_int_eq(xccl_topo_path(&topo, 5, 8 + 5), XCCL_TOPO_PATH_PIX);
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 8 + 4), XCCL_TOPO_PATH_SYS);
}
END_TEST

/* The pairing follows the PCIe location, not the order of declaration:
 * move mlx5_0 and mlx5_1, then take mlx5_0 down. */
START_TEST(file_pairing_follows_location)
{
    load_fixture("topo/dgx-h100-nvswitch-ib.topo");
    xccl_topo_loc_t l = topo.nics[0].loc;
    topo.nics[0].loc = topo.nics[1].loc;
    topo.nics[1].loc = l;
    xccl_topo_finalize(&topo);
    ck_assert_int_eq(topo.devs[0].nic, 1);
    ck_assert_int_eq(topo.devs[1].nic, 0);
    topo.nics[1].ports = 0;
    xccl_topo_finalize(&topo);
    /* gpu0 loses its switch: a NIC of its NUMA node, never one across
     * the sockets; gpu1 keeps its own. */
    ck_assert_int_ge(topo.devs[0].nic, 0);
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 8 + topo.devs[0].nic), XCCL_TOPO_PATH_NODE);
    ck_assert_int_eq(topo.devs[1].nic, 0);
    ck_assert_int_eq(topo.fabric_links, 7);
}
END_TEST

START_TEST(file_ascend_full_mesh_roce)
{
    load_fixture("topo/ascend-fullmesh-roce.topo");
    ck_assert_int_eq(topo.ndevs, 8);
    ck_assert_int_eq(topo.devs[7].kind, XCCL_TOPO_DEV_NPU);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_FULL_MESH);
    ck_assert_int_eq(topo.links[2][6].type, XCCL_TOPO_LINK_HCCS);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_ROCE);
    ck_assert_int_eq(topo.fabric_links, 8);
    ck_assert(topo.fabric_rate_gbps == 200.0);
    ck_assert_str_eq(pairing(&topo), "npu0:roce0 npu1:roce1 npu2:roce2 npu3:roce3 "
                                     "npu4:roce4 npu5:roce5 npu6:roce6 npu7:roce7");
}
END_TEST

START_TEST(file_pcie_two_sockets_one_nic)
{
    load_fixture("topo/pcie-4gpu-2socket.topo");
    ck_assert_int_eq(topo.ndevs, 4);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_PCIE);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_IB);
    ck_assert_int_eq(topo.fabric_links, 1);
    ck_assert_str_eq(pairing(&topo), "gpu0:mlx5_0 gpu1:mlx5_0 gpu2:mlx5_0 gpu3:mlx5_0");
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 1), XCCL_TOPO_PATH_PIX);
    ck_assert_int_eq(xccl_topo_path(&topo, 1, 2), XCCL_TOPO_PATH_SYS);
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 4), XCCL_TOPO_PATH_NODE);
    ck_assert_int_eq(xccl_topo_path(&topo, 3, 4), XCCL_TOPO_PATH_SYS);
    /* Switch / socket grouping. */
    ck_assert_int_eq(topo.pcie_groups, 2);
    ck_assert_int_eq(topo.devs[1].pcie_group, 0);
    ck_assert_int_eq(topo.devs[2].pcie_group, 1);
    ck_assert_int_eq(topo.devs[3].pcie_group, 1);
}
END_TEST

START_TEST(file_cpu_only_tcp)
{
    load_fixture("topo/cpu-2socket-tcp.topo");
    ck_assert_int_eq(topo.ndevs, 0);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_SHM);
    ck_assert_int_eq(topo.fabric, XCCL_TOPO_FABRIC_TCP);
    ck_assert_int_eq(topo.packages, 2);
    ck_assert_int_eq(topo.numa[1].cores, 32);
    ck_assert(topo.fabric_rate_gbps == 25.0);
}
END_TEST

/* PXB: paths that part more than one bridge below their last common one. */
START_TEST(path_classes)
{
    xccl_topo_init(&topo);
    const char *paths[5] = { "hb0/rp/usp/dsp1/usp2/dsp", "hb0/rp/usp/dsp2", "hb0/rp/usp/dsp1/usp2/dsp", "hb1",
                             "hb0/rp/usp/dsp1/usp2" };
    for (int i = 0; i < 5; i++) {
        xccl_topo_dev_t *d = &topo.devs[topo.ndevs++];
        snprintf(d->name, sizeof(d->name), "gpu%d", i);
        snprintf(d->loc.pcie, sizeof(d->loc.pcie), "%s", paths[i]);
        d->loc.numa = d->loc.package = 0;
    }
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 1), XCCL_TOPO_PATH_PXB);
    ck_assert_int_eq(xccl_topo_path(&topo, 4, 1), XCCL_TOPO_PATH_PXB);
    ck_assert_int_eq(xccl_topo_path(&topo, 4, 0), XCCL_TOPO_PATH_PIX);
    ck_assert_int_eq(xccl_topo_path(&topo, 0, 2), XCCL_TOPO_PATH_PIX);
    ck_assert_int_eq(xccl_topo_path(&topo, 1, 3), XCCL_TOPO_PATH_NODE);
    topo.devs[3].loc.numa = topo.devs[3].loc.package = 1;
    ck_assert_int_eq(xccl_topo_path(&topo, 1, 3), XCCL_TOPO_PATH_SYS);
    ck_assert_int_eq(xccl_topo_path(&topo, 2, 2), XCCL_TOPO_PATH_SELF);
}
END_TEST

START_TEST(dump_load_dump_is_identical)
{
    static const char *const files[] = {
        "topo/dgx-h100-nvswitch-ib.topo", "topo/ascend-fullmesh-roce.topo",
        "topo/pcie-4gpu-2socket.topo", "topo/cpu-2socket-tcp.topo", "topo/dgx1-v100-cubemesh.topo"
    };
    const char *bad = NULL;
    int nbad = 0;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        if (xccl_topo_load(fixture(files[i]), &topo, err, sizeof(err)) != 0 || round_trip_differs(&topo)) {
            bad = files[i];
            nbad++;
        }
    }
    ck_assert_msg(nbad == 0, "%d files do not round-trip, e.g. %s", nbad, bad);

    /* Detected topologies too, links and all. */
    fake_nvml_t fake = { FAKE_MESH, 0, 0, 0 };
    ck_assert_msg(detect_gpu4(&fake, "sysfs/ib") == 0, "%s", err);
    ck_assert_int_eq(round_trip_differs(&topo), 0);
    fake_nvml_t sw = { FAKE_SWITCH, 0, 0, 0 };
    ck_assert_msg(detect_gpu4(&sw, "sysfs/ib") == 0, "%s", err);
    char *a = dump_to_string(&topo);
    ck_assert_int_eq(load_string(a, &topo2), 0);
    ck_assert_int_eq(topo2.intra, XCCL_TOPO_INTRA_NVSWITCH);
    ck_assert_str_eq(pairing(&topo2), pairing(&topo));
    char *b = dump_to_string(&topo2);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
}
END_TEST

START_TEST(malformed_files_fail_with_line_numbers)
{
    static const struct {
        const char *text, *where;
    } cases[] = {
        { "", "mem:0:" },
        { "node x\n", "mem:1:" },
        { "# c\n\nxccl_topo 2\n", "mem:3:" },
        { "xccl_topo 1\nnode a\nbogus line\n", "mem:3:" },
        { "xccl_topo 1\nnode a packages=two\n", "mem:2:" },
        { "xccl_topo 1\nnode a\nnode b\n", "mem:3:" },
        { "xccl_topo 1\ndevice gpu0 kind=gpu\ndevice gpu0 kind=gpu\n", "mem:3:" },
        { "xccl_topo 1\ndevice nvswitch\n", "mem:2:" },
        { "xccl_topo 1\ndevice gpu0 kind=fpga\n", "mem:2:" },
        { "xccl_topo 1\ndevice gpu0 color=red\n", "mem:2:" },
        { "xccl_topo 1\ndevice gpu0 pci=zz\n", "mem:2:" },
        { "xccl_topo 1\ndevice gpu0 pcie=a//b\n", "mem:2:" },
        { "xccl_topo 1\ndevice gpu0 numa=-5\n", "mem:2:" },
        { "xccl_topo 1\ndevice gpu0\nlink gpu0 gpu1 nvlink 2\n", "mem:3:" },
        { "xccl_topo 1\ndevice gpu0\ndevice gpu1\nlink gpu0 gpu1 nvlink 0\n", "mem:4:" },
        { "xccl_topo 1\ndevice gpu0\ndevice gpu1\nlink gpu0 gpu1 pcie 1\n", "mem:4:" },
        { "xccl_topo 1\ndevice gpu0\nlink gpu0 gpu0 nvlink 1\n", "mem:3:" },
        { "xccl_topo 1\ndevice gpu0\nlink gpu0 nvswitch nvlink\n", "mem:3:" },
        { "xccl_topo 1\nnic mlx5_0 ports=1\n", "mem:2:" },
        { "xccl_topo 1\nnic mlx5_0 type=ib rate=fast\n", "mem:2:" },
        { "xccl_topo 1\nnic mlx5_0 type=ib\nnic mlx5_0 type=ib\n", "mem:3:" },
        { "xccl_topo 1\nnic m type=ib a=1 a=1 a=1 a=1 a=1 a=1 a=1 a=1 a=1 a=1 a=1 a=1 a=1 a=1\n", "mem:2:" },
        { "xccl_topo 1\ndevice a_name_that_is_far_too_long_for_the_model\n", "mem:2:" },
        { "xccl_topo 1\nnuma x\n", "mem:2:" },
    };
    int nbad = 0;
    char first[600] = "";
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        err[0] = '\0';
        if (load_string(cases[i].text, &topo) != -1 || strncmp(err, cases[i].where, strlen(cases[i].where)) != 0) {
            if (nbad++ == 0) {
                snprintf(first, sizeof(first), "case %zu: '%s'", i, err);
            }
        }
    }
    ck_assert_msg(nbad == 0, "%d malformed files not rejected at their line; first %s", nbad, first);

    /* An overlong line, and a file that does not exist. */
    char *longline = malloc(4096);
    ck_assert_ptr_nonnull(longline);
    memset(longline, 'x', 4095);
    longline[4095] = '\0';
    memcpy(longline, "xccl_topo 1\n#", 13);
    ck_assert_int_eq(load_string(longline, &topo), -1);
    ck_assert_ptr_nonnull(strstr(err, "mem:2:"));
    free(longline);
    ck_assert_int_eq(xccl_topo_load(fixture("topo/no-such.topo"), &topo, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "no-such.topo"));
}
END_TEST

START_TEST(matrix_looks_like_nvidia_smi)
{
    char *buf = NULL;
    size_t len = 0;
    load_fixture("topo/dgx-h100-nvswitch-ib.topo");
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    xccl_topo_print_matrix(&topo, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "SW18"));
    ck_assert_ptr_nonnull(strstr(buf, "mlx5_7"));
    ck_assert_ptr_nonnull(strstr(buf, "gpu3     -> mlx5_3     PIX"));
    free(buf);

    load_fixture("topo/ascend-fullmesh-roce.topo");
    f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    xccl_topo_print_matrix(&topo, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "HC1"));
    ck_assert_ptr_null(strstr(buf, "SW1"));
    free(buf);
}
END_TEST


/* ------------------------------------------------------------ ring order
 * Properties, not fixed answers: a permutation; on the cube mesh every hop
 * an NVLink; on two PCIe sockets exactly two crossings and the devices of
 * a PCIe switch adjacent; without a ring over links, as few unlinked hops
 * as the best of every ring (enumerated here); local ranks of a device
 * adjacent. */

static int is_permutation(const int *order, int n)
{
    int seen[64] = { 0 };
    for (int i = 0; i < n; i++) {
        if (order[i] < 0 || order[i] >= n || seen[order[i]]++) {
            return 0;
        }
    }
    return 1;
}

static int ring_of(const xccl_topo_t *t, int *order)
{
    int n = xccl_topo_ring_order(t, order);
    ck_assert_int_eq(n, t->ndevs);
    ck_assert_msg(is_permutation(order, n), "%s: not a permutation", t->name);
    return n;
}

/* Hops (the closing one included) whose ends satisfy what. */
enum { HOP_UNLINKED, HOP_SOCKET, HOP_SWITCH };

static int count_hops(const xccl_topo_t *t, const int *order, int n, int what)
{
    int c = 0;
    for (int k = 0; k < n && n > 1; k++) {
        const int a = order[k], b = order[(k + 1) % n];
        switch (what) {
        case HOP_UNLINKED: c += 0 == t->links[a][b].count && !(t->devs[a].switch_links && t->devs[b].switch_links); break;
        case HOP_SOCKET: c += t->devs[a].loc.package != t->devs[b].loc.package; break;
        default: c += t->devs[a].pcie_group != t->devs[b].pcie_group; break;
        }
    }
    return c;
}

START_TEST(ring_switch_and_full_mesh)
{
    int order[XCCL_TOPO_MAX_DEVS];
    load_fixture("topo/dgx-h100-nvswitch-ib.topo");
    int n = ring_of(&topo, order);
    ck_assert_int_eq(count_hops(&topo, order, n, HOP_UNLINKED), 0);
    load_fixture("topo/ascend-fullmesh-roce.topo");
    n = ring_of(&topo, order);
    ck_assert_int_eq(count_hops(&topo, order, n, HOP_UNLINKED), 0);
    load_fixture("topo/cpu-2socket-tcp.topo");
    ck_assert_int_eq(xccl_topo_ring_order(&topo, order), 0);
}
END_TEST

START_TEST(ring_cube_mesh_over_nvlink)
{
    int order[XCCL_TOPO_MAX_DEVS];
    load_fixture("topo/dgx1-v100-cubemesh.topo");
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_PCIE);
    ck_assert_int_eq(topo.ndevs, 8);
    for (int d = 0; d < 8; d++) {
        int peers = 0;
        for (int e = 0; e < 8; e++) {
            peers += topo.links[d][e].count > 0;
        }
        ck_assert_int_eq(peers, 4);
    }
    int n = ring_of(&topo, order);
    ck_assert_msg(0 == count_hops(&topo, order, n, HOP_UNLINKED), "a hop of the ring is not an NVLink");
    /* The DGX-1 has a ring of double links only (NCCL's): it is taken. */
    for (int k = 0; k < n; k++) {
        ck_assert_int_eq(topo.links[order[k]][order[(k + 1) % n]].count, 2);
    }
}
END_TEST

START_TEST(ring_pcie_two_sockets)
{
    int order[XCCL_TOPO_MAX_DEVS];
    load_fixture("topo/pcie-4gpu-2socket.topo");
    int n = ring_of(&topo, order);
    ck_assert_int_eq(count_hops(&topo, order, n, HOP_SOCKET), 2);
    ck_assert_int_eq(count_hops(&topo, order, n, HOP_SWITCH), topo.pcie_groups);

    /* 24 devices (the local search): 3 switches of 4 per socket, numbered
     * across sockets and switches so that the identity is a bad ring. */
    xccl_topo_init(&topo);
    snprintf(topo.name, sizeof(topo.name), "pcie24");
    for (int d = 0; d < 24; d++) {
        xccl_topo_dev_t *dev = &topo.devs[topo.ndevs++];
        const int sock = d % 2, sw = (d / 2) % 3;
        snprintf(dev->name, sizeof(dev->name), "gpu%d", d);
        dev->loc.numa = dev->loc.package = sock;
        snprintf(dev->loc.pcie, sizeof(dev->loc.pcie), "hb%d/rp%d/sw/p%d", sock, sw, d);
    }
    xccl_topo_finalize(&topo);
    ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_PCIE);
    n = ring_of(&topo, order);
    ck_assert_int_eq(count_hops(&topo, order, n, HOP_SOCKET), 2);
    ck_assert_int_eq(count_hops(&topo, order, n, HOP_SWITCH), 6);

    /* The cube mesh without its links: a PCIe node of 4 switches on 2
     * sockets, the exact search. */
    load_fixture("topo/dgx1-v100-cubemesh.topo");
    memset(topo.links, 0, sizeof(topo.links));
    xccl_topo_finalize(&topo);
    n = ring_of(&topo, order);
    ck_assert_int_eq(count_hops(&topo, order, n, HOP_SOCKET), 2);
    ck_assert_int_eq(count_hops(&topo, order, n, HOP_SWITCH), 4);
}
END_TEST

/* The fewest unlinked hops of any ring starting at device 0, by trying
 * every permutation (n <= 8). */
static int best_unlinked(const xccl_topo_t *t, int *perm, int k, int n)
{
    if (k == n) {
        return count_hops(t, perm, n, HOP_UNLINKED);
    }
    int best = n + 1;
    for (int i = k; i < n; i++) {
        int x = perm[k];
        perm[k] = perm[i];
        perm[i] = x;
        int c = best_unlinked(t, perm, k + 1, n);
        best = c < best ? c : best;
        perm[i] = perm[k];
        perm[k] = x;
    }
    return best;
}

START_TEST(ring_partial_mesh_fewest_unlinked_hops)
{
    /* Cube meshes with links taken away (no NVLink ring is left in some):
     * a star around gpu0, the two quads without the i <-> i+4 links, the
     * quads joined by one link, a path. */
    static const char *const cuts[] = { "star", "quads", "bridge", "path" };
    int order[XCCL_TOPO_MAX_DEVS];
    for (int c = 0; c < 4; c++) {
        load_fixture("topo/dgx1-v100-cubemesh.topo");
        for (int a = 0; a < 8; a++) {
            for (int b = 0; b < 8; b++) {
                int keep = topo.links[a][b].count > 0;
                switch (c) {
                case 0: keep = (0 == a) != (0 == b); break;
                case 1: keep &= a / 4 == b / 4; break;
                case 2: keep &= a / 4 == b / 4 || (0 == a && 4 == b) || (4 == a && 0 == b); break;
                default: keep = b == a + 1 || a == b + 1; break;
                }
                if (!keep) {
                    topo.links[a][b].count = 0;
                } else if (0 == topo.links[a][b].count) {
                    topo.links[a][b].count = 1;
                    topo.links[a][b].type = XCCL_TOPO_LINK_NVLINK;
                }
            }
        }
        xccl_topo_finalize(&topo);
        ck_assert_int_eq(topo.intra, XCCL_TOPO_INTRA_PCIE);
        const int n = ring_of(&topo, order);
        int perm[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
        const int want = best_unlinked(&topo, perm, 1, 8), got = count_hops(&topo, order, n, HOP_UNLINKED);
        ck_assert_msg(got == want, "%s: %d unlinked hops, the best ring has %d", cuts[c], got, want);
    }
}
END_TEST

START_TEST(rank_ring_keeps_a_device_together)
{
    int order[64], dring[XCCL_TOPO_MAX_DEVS], pos[XCCL_TOPO_MAX_DEVS];
    load_fixture("topo/dgx1-v100-cubemesh.topo");
    const int n = ring_of(&topo, dring);
    for (int k = 0; k < n; k++) {
        pos[dring[k]] = k;
    }
    /* 16 ranks, two per GPU in scrambled order, one without a device, one
     * on a device the node does not have; and rank 0 on gpu5. */
    int dev[18];
    for (int r = 0; r < 16; r++) {
        dev[r] = (r * 5 + 5) % 8;
    }
    dev[16] = -1;
    dev[17] = 12;
    ck_assert_int_eq(xccl_topo_rank_ring(&topo, dev, 18, order), 18);
    ck_assert(is_permutation(order, 18));
    ck_assert_int_eq(order[0], 0);
    /* Devices in a run each, the runs in ring order from rank 0's device;
     * the two ranks without a device last, in rank order. */
    int runs = 1;
    for (int k = 1; k < 16; k++) {
        const int a = dev[order[k - 1]], b = dev[order[k]];
        if (a != b) {
            runs++;
            ck_assert_int_eq(pos[b], (pos[a] + 1) % n);
        } else {
            ck_assert_int_lt(order[k - 1], order[k]);
        }
    }
    ck_assert_int_eq(runs, 8);
    ck_assert_int_eq(order[16], 16);
    ck_assert_int_eq(order[17], 17);

    /* One rank per device on two PCIe sockets: two socket crossings. */
    load_fixture("topo/pcie-4gpu-2socket.topo");
    const int dev4[4] = { 2, 0, 3, 1 };
    int devs_in_order[4];
    ck_assert_int_eq(xccl_topo_rank_ring(&topo, dev4, 4, order), 4);
    ck_assert(is_permutation(order, 4));
    for (int k = 0; k < 4; k++) {
        devs_in_order[k] = dev4[order[k]];
    }
    ck_assert_int_eq(count_hops(&topo, devs_in_order, 4, HOP_SOCKET), 2);
    /* No devices at all (a CPU node): the ranks keep their order. */
    load_fixture("topo/cpu-2socket-tcp.topo");
    const int none[3] = { -1, -1, -1 };
    ck_assert_int_eq(xccl_topo_rank_ring(&topo, none, 3, order), 3);
    ck_assert(order[0] == 0 && order[1] == 1 && order[2] == 2);
}
END_TEST

/* ------------------------------------------------------------ placement */

/* A rank with a CUDA context on a device of the topology: its key is its
 * device's position on the ring (bus ids compared without case); on an
 * unknown device, or without a topology, the CUDA flag on a CPU key;
 * without a context no flag.  The CPU part depends on this process's
 * binding: only its range is checked. */
START_TEST(placement_key_follows_the_ring)
{
    int order[XCCL_TOPO_MAX_DEVS];
    load_fixture("topo/dgx1-v100-cubemesh.topo");
    int n = ring_of(&topo, order);
    for (int k = 0; k < n; k++) {
        char pci[32];
        snprintf(pci, sizeof(pci), "%s", topo.devs[order[k]].loc.pci);
        for (char *c = pci; *c; c++) {
            *c = (char) (*c >= 'a' && *c <= 'f' ? *c - 'a' + 'A' : *c);
        }
        int key = xccl_topo_placement_key(&topo, pci);
        ck_assert_int_eq(key, XCCL_TOPO_KEY_GPU + k);
        ck_assert(xccl_topo_key_has_cuda(key));
    }
    const int unknown = xccl_topo_placement_key(&topo, "0000:ff:00.0");
    ck_assert(unknown >= XCCL_TOPO_KEY_CUDA && unknown < XCCL_TOPO_KEY_GPU);
    ck_assert(xccl_topo_key_has_cuda(unknown));
    const int no_topo = xccl_topo_placement_key(NULL, "0000:06:00.0");
    ck_assert(no_topo >= XCCL_TOPO_KEY_CUDA && no_topo < XCCL_TOPO_KEY_GPU);
    const int host = xccl_topo_placement_key(&topo, NULL);
    ck_assert(host >= 0 && host <= XCCL_TOPO_KEY_UNBOUND);
    ck_assert(!xccl_topo_key_has_cuda(host));
    ck_assert(!xccl_topo_key_has_cuda(-1));
}
END_TEST

/* The order of a node's ranks from their keys. */
START_TEST(placement_order_from_keys)
{
    const int ranks[4] = { 2, 5, 6, 9 };
    int order[4] = { -1, -1, -1, -1 };
    /* package 1 CPU 3, package 0 CPU 1 (with a CUDA context on a device
     * the topology does not know: ignored), package 0 CPU 0, package 1 CPU 2 */
    const int cpu[4] = { 65536 + 3, XCCL_TOPO_KEY_CUDA | 1, 0, 65536 + 2 };
    ck_assert_int_eq(xccl_topo_placement_order(cpu, ranks, 4, order), XCCL_TOPO_ORDER_CPU);
    ck_assert(order[0] == 6 && order[1] == 5 && order[2] == 9 && order[3] == 2);
    /* GPU ring positions; ranks sharing a device stay in rank order */
    const int gpu[4] = { XCCL_TOPO_KEY_GPU + 1, XCCL_TOPO_KEY_GPU + 0, XCCL_TOPO_KEY_GPU + 1,
                         XCCL_TOPO_KEY_GPU + 0 };
    ck_assert_int_eq(xccl_topo_placement_order(gpu, ranks, 4, order), XCCL_TOPO_ORDER_GPU);
    ck_assert(order[0] == 5 && order[1] == 9 && order[2] == 2 && order[3] == 6);
    /* nothing to follow: the communicator's order stays */
    const int unbound[4] = { 1, XCCL_TOPO_KEY_UNBOUND, 0, 2 };
    const int unknown[4] = { 1, -1, 0, 2 };
    const int mixed[4] = { XCCL_TOPO_KEY_GPU + 1, 0, XCCL_TOPO_KEY_GPU, 1 };
    const int cuda_unbound[4] = { 1, XCCL_TOPO_KEY_CUDA | XCCL_TOPO_KEY_UNBOUND, 0, 2 };
    for (int i = 0; i < 4; i++) {
        order[i] = -1;
    }
    ck_assert_int_eq(xccl_topo_placement_order(unbound, ranks, 4, order), XCCL_TOPO_ORDER_KEEP);
    ck_assert_int_eq(xccl_topo_placement_order(unknown, ranks, 4, order), XCCL_TOPO_ORDER_KEEP);
    ck_assert_int_eq(xccl_topo_placement_order(mixed, ranks, 4, order), XCCL_TOPO_ORDER_KEEP);
    ck_assert_int_eq(xccl_topo_placement_order(cuda_unbound, ranks, 4, order), XCCL_TOPO_ORDER_KEEP);
    ck_assert_int_eq(xccl_topo_placement_order(cpu, ranks, 1, order), XCCL_TOPO_ORDER_KEEP);
    ck_assert_int_eq(order[0], -1);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("topo");
    TCase *det = tcase_create("detect");
    tcase_add_test(det, xml_gpus_nvswitch_ib);
    tcase_add_test(det, xml_gpus_full_mesh);
    tcase_add_test(det, xml_gpus_pcie_without_or_with_partial_nvlink);
    tcase_add_test(det, xml_cpu_only_roce);
    tcase_add_test(det, xml_cpu_only_tcp);
    tcase_add_test(det, xml_missing_is_an_error);
    tcase_add_test(det, io_skipped_eth_from_sysfs);
    tcase_add_test(det, io_kept_for_accelerators);
    tcase_add_test(det, nvml_through_dlopen);
    tcase_add_test(det, this_machine);
    tcase_set_timeout(det, 60);
    suite_add_tcase(su, det);
    TCase *files = tcase_create("files");
    tcase_add_test(files, file_dgx_nvswitch_ib);
    tcase_add_test(files, file_pairing_follows_location);
    tcase_add_test(files, file_ascend_full_mesh_roce);
    tcase_add_test(files, file_pcie_two_sockets_one_nic);
    tcase_add_test(files, file_cpu_only_tcp);
    tcase_add_test(files, path_classes);
    tcase_add_test(files, dump_load_dump_is_identical);
    tcase_add_test(files, malformed_files_fail_with_line_numbers);
    tcase_add_test(files, matrix_looks_like_nvidia_smi);
    tcase_add_test(files, ring_switch_and_full_mesh);
    tcase_add_test(files, ring_cube_mesh_over_nvlink);
    tcase_add_test(files, ring_pcie_two_sockets);
    tcase_add_test(files, ring_partial_mesh_fewest_unlinked_hops);
    tcase_add_test(files, rank_ring_keeps_a_device_together);
    tcase_add_test(files, placement_key_follows_the_ring);
    tcase_add_test(files, placement_order_from_keys);
    suite_add_tcase(su, files);
    return xccl_check_run(su);
}
