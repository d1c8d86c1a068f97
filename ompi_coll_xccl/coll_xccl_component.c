/*
 * The xccl component: MCA parameters, UCX set-up at MPI_Init, the worker
 * address published through the modex, teardown at MPI_Finalize.
 */
#include "ompi_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#include "coll_xccl.h"
#include "coll_xccl_gpu.h"
#include "coll_xccl_gpu_direct.h"
#include "coll_xccl_log.h"
#include "coll_xccl_path.h"
#include "coll_xccl_request.h"
#include "coll_xccl_level.h"
#include "coll_xccl_picks.h"
#include "gpu/xccl_gpu.h"
#include "gpu/xccl_gpu_kernels.h"
#include "topo/xccl_topo.h"

static int xccl_register(void);
static int xccl_open(void);
static int xccl_close(void);
static int xccl_init_query(bool enable_progress_threads, bool enable_mpi_threads);

mca_coll_xccl_component_t mca_coll_xccl_component = {
    .super = {
        .collm_version = {
            XCCL_COLL_BASE_VERSION,
            .mca_component_name = "xccl",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_open_component = xccl_open,
            .mca_close_component = xccl_close,
            .mca_register_component_params = xccl_register,
        },
        .collm_data = {
            MCA_BASE_METADATA_PARAM_NONE
        },
        .collm_init_query = xccl_init_query,
        .collm_comm_query = mca_coll_xccl_comm_query,
    },
    .priority = 80,
    .output = -1,
    .world_rank = -1,
};

/* Shared memory (posix) for eager messages, cma for rendezvous, put_zcopy
 * rendezvous (faster than UCX's default choice from 256 KiB:
 * docs/parameters.md); tcp stays in the list for peers on other nodes. */
#define XCCL_DEFAULT_TLS "posix,cma,tcp,self"
#define XCCL_DEFAULT_RNDV_SCHEME "put_zcopy"
#define XCCL_OVERSUB_RNDV_THRESH "256k"

/* A parameter fixed at start-up that must be equal on all ranks. */
static void reg_all_eq(const char *name, const char *help, mca_base_var_type_t type,
                       mca_base_var_info_lvl_t level, void *storage)
{
    (void) mca_base_component_var_register(&mca_coll_xccl_component.super.collm_version, name,
                                           help, type, NULL, 0, 0, level,
                                           MCA_BASE_VAR_SCOPE_ALL_EQ, storage);
}

/* A parameter fixed at start-up that may differ between ranks. */
static void reg_local(const char *name, const char *help, mca_base_var_type_t type, void *storage)
{
    (void) mca_base_component_var_register(&mca_coll_xccl_component.super.collm_version, name, help, type,
                                           NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL, storage);
}

static int xccl_register(void)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    const mca_base_component_t *v = &c->super.collm_version;
    char name[64], help[512];

    c->priority = 80;
    (void) mca_base_component_var_register(v, "priority",
        "Priority of xccl (above tuned's 30 and self's 75 so that it wraps them; "
        "the module it displaces becomes the fallback)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_READONLY,
        &c->priority);
    c->verbose = 0;
    (void) mca_base_component_var_register(v, "verbose",
        "0: silent; 1: one line per intercepted call (\"xccl: <coll> comm=<cid> rank=<world rank> "
        "bytes=<n> algo=<name>|fallback=<reason>\") and a per-collective summary at finalize; "
        "2: also communicator set-up decisions",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_LOCAL, &c->verbose);

    for (int i = 0; i < XCCL_NCOLL; i++) {
        c->enable[i] = true;
        snprintf(name, sizeof(name), "%s_enable", xccl_coll_name((xccl_coll_t) i));
        snprintf(help, sizeof(help),
                 "Let xccl run MPI_%s (false: every call goes to the fallback module). "
                 "Settable at run time through MPI_T; must be equal on all ranks", xccl_coll_name((xccl_coll_t) i));
        (void) mca_base_component_var_register(v, name, help, MCA_BASE_VAR_TYPE_BOOL, NULL, 0,
            MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_ALL_EQ, &c->enable[i]);

        c->algorithm[i] = "auto";
        snprintf(name, sizeof(name), "%s_algorithm", xccl_coll_name((xccl_coll_t) i));
        int n = snprintf(help, sizeof(help), "Algorithm for MPI_%s: ", xccl_coll_name((xccl_coll_t) i));
        for (int a = 0; xccl_select_name((xccl_coll_t) i, a); a++) {
            n += snprintf(help + n, sizeof(help) - (size_t) n, "%s%s", a ? ", " : "",
                          xccl_select_name((xccl_coll_t) i, a));
        }
        snprintf(help + n, sizeof(help) - (size_t) n,
                 " (auto: the cost model chooses; fallback: always the next module)");
        (void) mca_base_component_var_register(v, name, help, MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0,
            OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_ALL_EQ, &c->algorithm[i]);
    }

    xccl_select_policy_defaults(&c->policy);
    c->policy.small_bytes = 4096;
    (void) mca_base_component_var_register(v, "small_msg_bytes",
        "With algorithm auto, calls moving fewer bytes than this go to the fallback module, "
        "whose latency is lower there, except on a communicator of one node with the "
        "shared-memory level, whose latency path takes them (coll_xccl_shm_small; gather, "
        "scatter, reduce and allgatherv where all of a call fits it); 0: xccl runs every size",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->policy.small_bytes);

    c->shm_bytes = 1 << 20;
    (void) mca_base_component_var_register(v, "shm_bytes",
        "Shared-memory level inside a node: each rank's slot of its node's segment, per "
        "communicator (pages are touched only as calls use them); blocking and nonblocking "
        "calls run algorithms that copy through the slots and synchronise with flags, one at "
        "a time per communicator in call order, messages larger "
        "than a slot go through it in pipelined chunks (0: off, every call inside a node "
        "goes over the transport)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->shm_bytes);
    c->shm_kind = 0;
    (void) mca_base_component_var_register(v, "shm_kind",
        "Shared-memory segments: 0 auto (memfd, else System V), 1 memfd (peers open "
        "/proc/<pid>/fd of the creator: same user, dumpable), 2 System V (IPC_PRIVATE, "
        "removed at once).  Neither ever has a name: a killed job leaves nothing in /dev/shm",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_6,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->shm_kind);
    c->shm_cma = true;
    (void) mca_base_component_var_register(v, "shm_cma",
        "Shared-memory level: allow the mesh schedules of the collectives to read "
        "the peers' buffers directly with process_vm_readv (one copy instead of two through "
        "the slots; a bcast from 8 MiB also writes a share of each reader's buffer from the "
        "root, process_vm_writev) where every rank of the node can (Yama ptrace_scope 0, or CAP_SYS_PTRACE); "
        "blocking calls from 16 KiB then choose between them and the slots' pipelines (or "
        "the latency path) by trials (coll_xccl_shm_trials), or run them where forced "
        "(coll_xccl_<coll>_algorithm mesh)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->shm_cma);
    c->policy.trials = 5;
    (void) mca_base_component_var_register(v, "shm_trials",
        "Shared-memory level, blocking calls of every collective from 16 KiB where single "
        "copies are allowed (coll_xccl_shm_cma): the first calls "
        "of each collective and size class (powers of two) time the slots' pipeline or the "
        "latency path (shm) against single copies (mesh): after two untimed calls of each "
        "(from 1 MiB: one), blocks of three calls of one, the first untimed (from 1 MiB: of four, "
        "the first two untimed), until each has "
        "this many timed calls (rounded up to even; from 1 MiB at most 4), and "
        "keep the one with the lower median of each call's span from its last rank's start to its "
        "last rank's end (a rank late to the calls makes the others wait, whichever runs; one "
        "clock on a node; which wins depends on the "
        "machine: docs/shm-level.md).  Where a rank yields when idle (oversubscribed), "
        "twice this many plus one (from 1 MiB at most 6).  "
        "Verbose 1 logs each decision.  0: no trials, shm unless forced; at most 16",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->policy.trials);
    c->shm_small = true;
    (void) mca_base_component_var_register(v, "shm_small",
        "Calls of the five collectives on a communicator whose ranks share one node, "
        "where each rank gives at most 64 KiB, run xccl's latency path through the shared "
        "segment (each rank's data next to its sequence word or in its small area; no "
        "executor, no transport; nonblocking ones from progress, in call order) instead of "
        "the fallback, even below small_msg_bytes; false: small calls go to the fallback, "
        "larger ones run the level's schedules",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->shm_small);

    c->segment_bytes = XCCL_RING_SEGMENT;
    (void) mca_base_component_var_register(v, "segment_bytes",
        "Pipelining: the reduce-scatter phase of ring allreduce moves and reduces its chunks "
        "in segments of this many bytes, so each is reduced while still in cache (0: whole "
        "chunks)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->segment_bytes);

    c->gpu_pool_bytes = 64 << 20;
    (void) mca_base_component_var_register(v, "gpu_pool_bytes",
        "Device buffers (staged through host memory, the transport moves host memory only): "
        "the most pinned host memory one call keeps for its copies (kept for reuse per CUDA "
        "context and concurrent call); a call needing more uses pageable memory",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_LOCAL, &c->gpu_pool_bytes);

    c->gpu_chunk_bytes = 1 << 20;
    (void) mca_base_component_var_register(v, "gpu_chunk_bytes",
        "Device buffers staged through host memory: the copies between device and host run "
        "in pieces of this many bytes (at most 256 per buffer) while the algorithm runs; "
        "each step waits only for the pieces it touches, each piece goes back once the "
        "algorithm has finished writing it (0: copy everything in before the algorithm and "
        "back after it)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_LOCAL, &c->gpu_chunk_bytes);

    c->gpu_direct = -1;
    (void) mca_base_component_var_register(v, "gpu_direct",
        "Device buffers on a call xccl runs itself: pass the device pointers straight to UCX, "
        "with the algorithm's copies and reductions on the GPU, instead of staging through "
        "host memory.  Only where UCX reports that it moves CUDA memory (Debian's UCX does "
        "not).  -1: wherever it does; 0: never; 1: wherever it does, and where it does not "
        "say so at verbose 1 and stage",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_LOCAL, &c->gpu_direct);

    c->gpu_ipc_bytes = 1;
    (void) mca_base_component_var_register(v, "gpu_ipc_bytes",
        "Device buffers, every rank of the communicator on one node with a CUDA context: "
        "calls moving at least this many bytes (alltoallv, gatherv and scatterv at every size; "
        "alltoall(v) and reduce_scatter not in place; "
        "nonblocking ones once a blocking call set CUDA IPC up) run a peer-access schedule of the collective straight on the ranks' device "
        "buffers through CUDA IPC (ranks on one GPU: one rank does the work, \"leader\"; "
        "else \"mesh\") (0: never); two rounds of flags in host shared memory per call agree",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->gpu_ipc_bytes);

    /* Defaults: what xccl_calibrate measures on one node, plus xccl's own
     * per-message overhead (docs/parameters.md). */
    c->cost_alpha = XCCL_COST_ALPHA;
    c->cost_beta = XCCL_COST_BETA;
    c->cost_gamma = XCCL_COST_GAMMA;
    c->cost_delta = XCCL_COST_DELTA;
    c->cost_file = NULL;
    /* Between nodes: TCP over a 10 Gb/s Ethernet-class link (~1.1 GB/s,
     * tens of us per message); set them for the fabric at hand. */
    c->cost_inter_alpha = XCCL_COST_INTER_ALPHA;
    c->cost_inter_beta = XCCL_COST_INTER_BETA;
    c->net = "none";
    c->node_layout = NULL;
    c->ucx_tls = XCCL_DEFAULT_TLS;
    c->ucx_rndv_scheme = XCCL_DEFAULT_RNDV_SCHEME;
    c->ucx_rndv_thresh = "auto";
    reg_all_eq("cost_alpha", "Cost model: seconds per message (see xccl_calibrate)",
               MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &c->cost_alpha);
    reg_all_eq("cost_beta", "Cost model: seconds per byte on the wire",
               MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &c->cost_beta);
    reg_all_eq("cost_gamma", "Cost model: seconds per byte reduced",
               MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &c->cost_gamma);
    reg_all_eq("cost_delta", "Cost model: seconds per byte copied locally",
               MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &c->cost_delta);
    reg_all_eq("model_margin",
               "auto keeps each collective's first algorithm (ring, pairwise, binomial) unless "
               "another is predicted faster by at least this fraction (0..1): the model "
               "ignores oversubscription and cache effects",
               MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &c->policy.margin);
    reg_all_eq("cost_inter_alpha", "Cost model between nodes: seconds per message",
               MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &c->cost_inter_alpha);
    reg_all_eq("cost_inter_beta", "Cost model between nodes: seconds per byte on the wire",
               MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &c->cost_inter_beta);
    reg_all_eq("net",
               "The network between the nodes, for the cost model (the description "
               "xccl_simulate -N and xccl_info --net take): none (one alpha-beta pair between "
               "nodes), fattree:LEAF[:OVERSUB] (two tiers: LEAF nodes per leaf switch, uplinks "
               "oversubscribed OVERSUB:1) or torus:XxY (nodes on a 2D torus), each optionally "
               "followed by ,nics=N (NICs per node; default one per rank).  Nodes are numbered "
               "in each communicator's order.  Must be the same on all ranks",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &c->net);
    reg_all_eq("node_layout",
               "Impose which ranks of each communicator share a node instead of the host "
               "names: block:K (every K consecutive ranks), cyclic:N (rank r on node r % N) "
               "or a list of node ids, one per rank (0,0,1,1); for tests and experiments on "
               "one machine.  Must be the same on all ranks",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->node_layout);
    reg_all_eq("cost_file",
               "File written by xccl_calibrate (\"alpha=<s> beta=<s/B> gamma=<s/B> "
               "delta=<s/B> flag=<s> peer=<s/B>\", the last three optional); overrides "
               "cost_alpha/beta/gamma/delta and the shared-memory level's terms.  Must be the "
               "same on all ranks",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->cost_file);
    c->tuning_file = NULL;
    reg_all_eq("tuning_file",
               "Rules \"<collective> ranks=<lo>-<hi> bytes=<lo>-<hi> algo=<name>\" (first match "
               "wins; see docs/parameters.md) applied before the cost model; a forced algorithm still "
               "wins.  Must be the same on all ranks",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->tuning_file);
    c->picks_file = "auto";
    reg_local("picks_file",
              "Where the shared-memory level's trial picks are kept for later processes on the node "
              "(read at start, written at MPI_Finalize where a process timed trials): a path, auto "
              "($XDG_CACHE_HOME/xccl/picks-<host>, else $HOME/.cache/xccl/picks-<host>) or none.  "
              "A pick is used where every rank of the communicator has the same; else the trial runs",
              MCA_BASE_VAR_TYPE_STRING, &c->picks_file);
    c->picks_days = 7;
    reg_local("picks_days", "Picks in coll_xccl_picks_file older than this many days are timed again (0: never)",
              MCA_BASE_VAR_TYPE_INT, &c->picks_days);
    c->world_active = false;
    (void) mca_base_component_var_register(v, "world_active",
        "Read-only: whether xccl runs MPI_COMM_WORLD's collectives (false until MPI_Init has "
        "enabled it, or if its set-up failed there); xccl_bench reads it through MPI_T",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, MCA_BASE_VAR_FLAG_DEFAULT_ONLY, OPAL_INFO_LVL_9,
        MCA_BASE_VAR_SCOPE_CONSTANT, &c->world_active);
    reg_all_eq("topo_file",
               "Topology file to use instead of detecting the node (format: docs/tools.md, "
               "xccl_info --dump writes one)",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->topo_file);
    reg_all_eq("topo_dump",
               "Write the node's topology, as detected or loaded, to this file (\"-\": "
               "standard output); the first rank of each node writes it",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->topo_dump);
    reg_all_eq("ucx_tls",
               "UCX transports of xccl's own UCP context (UCX_TLS syntax; empty: UCX's "
               "default).  The PML's UCX settings are not affected",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->ucx_tls);
    reg_all_eq("ucx_rndv_scheme",
               "UCX rendezvous protocol of xccl's own UCP context (UCX_RNDV_SCHEME values: "
               "put_zcopy, get_zcopy, auto; empty: UCX's default)",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->ucx_rndv_scheme);
    reg_all_eq("ucx_rndv_thresh",
               "Size from which xccl's UCP context uses rendezvous (UCX_RNDV_THRESH values).  "
               "auto: " XCCL_OVERSUB_RNDV_THRESH " when the node runs more ranks than it has "
               "online processors (a rendezvous handshake then waits for the peer to be "
               "scheduled), else UCX's default; XCCL_UCX_RNDV_THRESH or UCX_RNDV_THRESH in "
               "the environment win over auto",
               MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->ucx_rndv_thresh);
    return OMPI_SUCCESS;
}

static int parse_algorithm(xccl_coll_t coll, const char *s)
{
    return NULL == s || '\0' == s[0] ? XCCL_SEL_AUTO : xccl_select_index(coll, s);
}

/* A bad file is reported and the parameters stay as they were (every
 * rank reads the same file, so every rank keeps or takes the same model). */
static int read_cost_file(const char *path, xccl_cost_model_t *cost)
{
    char err[160];
    if (0 != xccl_cost_load(path, cost, err, sizeof(err))) {
        opal_output(0, "xccl: coll_xccl_cost_file %s: %s; using the built-in cost model", path, err);
        return 0;
    }
    return 1;
}

/* Reads and checks the whole file; on any error it is reported and ignored,
 * so that every rank (reading the same file) ends up with the same rules. */
static void read_tuning_file(const char *path, xccl_tuning_t *tuning)
{
    char err[256] = "";
    char *text = NULL;
    size_t size = 0;
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        opal_output(0, "xccl: cannot open coll_xccl_tuning_file %s; no tuning rules", path);
        return;
    }
    FILE *mem = open_memstream(&text, &size);
    int ch;
    while (mem && EOF != (ch = fgetc(f))) {
        fputc(ch, mem);
    }
    fclose(f);
    if (NULL == mem) {
        return;
    }
    fclose(mem);
    if (0 != xccl_tuning_parse(text, tuning, err, sizeof(err))) {
        opal_output(0, "xccl: %s: %s; no tuning rules", path, err);
        free(text);
        return;
    }
    free(text);
    if (0 != xccl_select_check_tuning(tuning, err, sizeof(err))) {
        opal_output(0, "xccl: %s: %s; no tuning rules", path, err);
        xccl_tuning_free(tuning);
    }
}

static int xccl_open(void)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    /* Our own stream: no "[host:pid]" prefix, so every line starts "xccl: ". */
    opal_output_stream_t lds;
    OBJ_CONSTRUCT(&lds, opal_output_stream_t);
    lds.lds_want_stderr = true;
    c->output = opal_output_open(&lds);
    OBJ_DESTRUCT(&lds);
    for (int i = 0; i < XCCL_NCOLL; i++) {
        c->policy.forced[i] = parse_algorithm((xccl_coll_t) i, c->algorithm[i]);
        if (c->policy.forced[i] < 0) {
            opal_output(0, "xccl: unknown algorithm \"%s\" in coll_xccl_%s_algorithm; using auto",
                        c->algorithm[i], xccl_coll_name((xccl_coll_t) i));
            c->policy.forced[i] = XCCL_SEL_AUTO;
        }
    }
    if (c->policy.trials < 0 || c->policy.trials > XCCL_TRIAL_MAX) {
        opal_output(0, "xccl: coll_xccl_shm_trials %d is outside 0..%d; using %d", c->policy.trials,
                    XCCL_TRIAL_MAX, c->policy.trials < 0 ? 0 : XCCL_TRIAL_MAX);
        c->policy.trials = c->policy.trials < 0 ? 0 : XCCL_TRIAL_MAX;
    }
    memset(c->stats, 0, sizeof(c->stats));
    xccl_cost_model_t *intra = &c->policy.intra, *inter = &c->policy.inter;
    intra->alpha = c->cost_alpha;
    intra->beta = c->cost_beta;
    intra->gamma = c->cost_gamma;
    intra->delta = c->cost_delta;
    *inter = *intra;
    inter->alpha = c->cost_inter_alpha;
    inter->beta = c->cost_inter_beta;
    inter->flag = inter->peer = 0.0;   /* no flags or peer reads between nodes */
    c->cost_from_file = c->cost_file && c->cost_file[0] && read_cost_file(c->cost_file, intra);
    /* A bad description is reported and none is used: every rank reads
     * the same string, so every rank prices alike. */
    char err[160];
    memset(&c->policy.net, 0, sizeof(c->policy.net));
    if (c->net && c->net[0] && 0 != xccl_net_parse(&c->policy.net, c->net, err, sizeof(err))) {
        opal_output(0, "xccl: coll_xccl_net %s: %s; no network model", c->net, err);
    }
    if (c->tuning_file && c->tuning_file[0]) {
        read_tuning_file(c->tuning_file, &c->policy.tuning);
    }
    mca_coll_xccl_picks_open();
    return OMPI_SUCCESS;
}

/* xccl's nonblocking calls progress with Open MPI's, whatever the
 * transport (UCX, or the PML where some rank has no UCX).  With none in
 * flight there is nothing to do: a blocking call progresses its own
 * transfers, and every opal_progress of the application (a communicator
 * being created, stock collectives) would otherwise pay for a UCX worker
 * progress too. */
static int progress(void)
{
    int transfers;
    /* (the providers' calls move nothing over UCX; one that falls back to
     * a host schedule is a request below) */
    int n = mca_coll_xccl_peer_progress();
    if (!mca_coll_xccl_requests_active(&transfers)) {
        return n;
    }
    /* (the shared-memory level's schedules move nothing over UCX) */
    n += transfers && mca_coll_xccl_component.ucx_ok ? (int) xccl_ucx_progress() : 0;
    return n + mca_coll_xccl_progress_requests();
}

/* The node's topology: loaded from coll_xccl_topo_file, else detected;
 * written to coll_xccl_topo_dump by the node's first local rank.  A failure
 * leaves an empty topology (SHM, TCP) and says why: never fatal. */
static void load_topology(mca_coll_xccl_component_t *c)
{
    char err[160] = "";
    int rc;
    c->topo = malloc(sizeof(*c->topo));
    if (NULL == c->topo) {
        snprintf(c->topo_summary, sizeof(c->topo_summary), "out of memory");
        return;
    }
    if (NULL != c->topo_file && c->topo_file[0]) {
        rc = xccl_topo_load(c->topo_file, c->topo, err, sizeof(err));
    } else {
        /* hwloc's I/O discovery only where an accelerator or RDMA device
         * is: it reads every PCI function's configuration space, tens of
         * milliseconds of a job's start, for nothing on a host without */
        static const xccl_topo_detect_opts_t opts = { NULL, NULL, NULL, 0, 1 };
        rc = xccl_topo_detect(c->topo, &opts, err, sizeof(err));
    }
    if (0 != rc) {
        mca_coll_xccl_log(1, "topology %s failed (%s): assuming plain shared memory and TCP",
                          c->topo_file && c->topo_file[0] ? "file" : "detection", err);
        xccl_topo_init(c->topo);
    }
    xccl_topo_summary(c->topo, c->topo_summary, sizeof(c->topo_summary));
    if (NULL != c->topo_dump && c->topo_dump[0] && 0 == opal_process_info.my_local_rank) {
        FILE *f = 0 == strcmp(c->topo_dump, "-") ? stdout : fopen(c->topo_dump, "w");
        if (NULL == f || 0 != xccl_topo_dump(c->topo, f)) {
            mca_coll_xccl_log(0, "cannot write the topology to %s", c->topo_dump);
        }
        if (NULL != f && stdout != f) {
            fclose(f);
        }
    }
}

/*
 * Runs once per process in MPI_Init, before the modex.  It never fails:
 * whether xccl runs a call must be the same decision on every rank, so a
 * process whose UCX set-up failed still takes part.  It publishes a
 * one-byte marker instead of its address, so that its peers learn it at
 * once (a missing key would stall every communicator's set-up in the
 * modex), and the communicators it belongs to run xccl's schedules over
 * Open MPI's PML (coll_xccl_setup.c).
 */
static int xccl_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    const void *addr;
    size_t len;
    int rc;

    c->ucx_ok = false;
    const char *thresh = c->ucx_rndv_thresh;
    if (NULL != thresh && 0 == strcmp(thresh, "auto")) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int oversubscribed = cpus > 0 && opal_process_info.num_local_peers + 1 > cpus;
        thresh = oversubscribed && NULL == getenv("XCCL_UCX_RNDV_THRESH") &&
                 NULL == getenv("UCX_RNDV_THRESH") ? XCCL_OVERSUB_RNDV_THRESH : NULL;
        mca_coll_xccl_log(2, "ucx: %d ranks on this node, %ld processors: rendezvous "
                          "threshold %s", opal_process_info.num_local_peers + 1, cpus,
                          thresh ? thresh : "from UCX");
    }
    if (0 != xccl_ucx_init(c->ucx_tls, c->ucx_rndv_scheme, thresh,
                           enable_progress_threads || enable_mpi_threads)) {
        snprintf(c->ucx_error, sizeof(c->ucx_error), "%s", xccl_ucx_error());
    } else if (0 != xccl_ucx_address(&addr, &len)) {
        snprintf(c->ucx_error, sizeof(c->ucx_error), "no worker address");
    } else {
        OPAL_MODEX_SEND(rc, XCCL_MODEX_SCOPE, &c->super.collm_version, addr, len);
        if (OPAL_SUCCESS == rc) {
            rc = xccl_compat_modex_commit();
        }
        if (OPAL_SUCCESS != rc) {
            snprintf(c->ucx_error, sizeof(c->ucx_error), "modex send failed (%d)", rc);
        } else {
            c->ucx_ok = true;
        }
    }
    if (!c->ucx_ok) {
        static const char marker[1] = { 0 };
        OPAL_MODEX_SEND(rc, XCCL_MODEX_SCOPE, &c->super.collm_version, marker, sizeof(marker));
        if (OPAL_SUCCESS == rc) {
            rc = xccl_compat_modex_commit();
        }
        mca_coll_xccl_log(1, "UCX set-up failed (%s): xccl runs its schedules over Open MPI's "
                          "PML on every communicator of this process%s", c->ucx_error,
                          OPAL_SUCCESS == rc ? "" : " (and could not tell its peers)");
    }
    c->progress_registered = OPAL_SUCCESS == opal_progress_register(progress);
    mca_coll_xccl_gpu_init();
    load_topology(c);
    const xccl_cost_model_t *im = &c->policy.intra;
    char net[96];
    xccl_net_format(&c->policy.net, net, sizeof(net));
    mca_coll_xccl_log(2, "init: cost model %s: alpha=%.3e beta=%.3e gamma=%.3e delta=%.3e "
                      "flag=%.3e peer=%.3e; network %s", c->cost_from_file ? c->cost_file : "built-in",
                      im->alpha, im->beta, im->gamma, im->delta, im->flag, im->peer, net);
    double al_us = 0.0, as_us = 0.0;
    const int pieces = xccl_memmove_pieces(&al_us, &as_us);
    mca_coll_xccl_log(2, "init: host copies %s (32 KiB in cache: %.3f us, 16 bytes past its "
                      "source modulo 4 KiB %.3f us%s)", pieces ? "in 2 KiB pieces where the destination "
                      "lies 1..63 bytes past the source modulo 4 KiB" : "by memmove", al_us, as_us,
                      pieces ? ": memmove's rep movsb trap on this CPU" : "");
    mca_coll_xccl_log(2, "init: ucx %s tls=%s%s; node %s; %s; %s; device buffers %s",
                      c->ucx_ok ? "ok" : "failed",
                      xccl_ucx_tls(),
                      xccl_ucx_cuda_memory() ? " (moves cuda memory)" : " (host memory only)",
                      c->topo_summary, xccl_gpu_status(), xccl_gpu_kernels_status(),
                      mca_coll_xccl_gpu_direct_wanted() ? "straight to ucx"
                                                        : "staged through host memory");
    if (c->ucx_ok && NULL != mca_coll_xccl_gpu_direct_refused()) {
        mca_coll_xccl_log(1, "init: coll_xccl_gpu_direct 1 refused: %s",
                          mca_coll_xccl_gpu_direct_refused());
    }
    return OMPI_SUCCESS;
}

static int xccl_close(void)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    if (c->verbose > 0 && c->output >= 0) {
        mca_coll_xccl_log_summary();
    }
    mca_coll_xccl_picks_close();
    if (c->progress_registered) {
        opal_progress_unregister(progress);
        c->progress_registered = false;
    }
    c->ucx_ok = false;
    /* Endpoints of communicators never freed are closed here, before the
     * worker and the context. */
    xccl_ucx_fini();
    mca_coll_xccl_level_pool_fini();   /* every communicator is gone */
    mca_coll_xccl_requests_fini();
    xccl_gpu_kernels_fini();
    xccl_gpu_fini();
    xccl_tuning_free(&c->policy.tuning);
    free(c->topo);
    c->topo = NULL;
    if (c->output >= 0) {
        opal_output_close(c->output);
        c->output = -1;
    }
    return OMPI_SUCCESS;
}
