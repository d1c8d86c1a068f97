/*
 * The xccl module of one communicator: query, enable, teardown.
 *
 * Whether xccl takes a communicator must be decided the same way on every
 * member, or some ranks would run xccl's schedules while others run the
 * fallback's, and both would hang.  comm_query and module_enable therefore
 * decline only for reasons every member sees alike (intercommunicator,
 * context id or size beyond the tag layout, no fallback module), and
 * module_enable sends no message and waits for nobody: it may run inside
 * the progress engine (nonblocking communicator activation).  What needs
 * the other ranks (nodes, endpoints, the agreement on the transport) is
 * set up by the first call xccl runs itself (coll_xccl_setup.c), so a
 * communicator that never makes one costs no more than without xccl.
 * module_enable always returns success, since Open MPI 4.1 drops every
 * module of the communicator when one fails.
 */
#include "ompi_config.h"

#include <string.h>

#include "coll_xccl_exec.h"
#include "coll_xccl_gpu_ipc.h"
#include "coll_xccl_log.h"
#include "coll_xccl_select.h"
#include "coll_xccl_setup.h"
#include "coll_xccl_level.h"
#include "coll_xccl_persist.h"

static int xccl_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);

/* ------------------------------------------------------------ object */

static void module_construct(mca_coll_xccl_module_t *m)
{
    memset((char *) m + sizeof(m->super), 0, sizeof(*m) - sizeof(m->super));
    OBJ_CONSTRUCT(&m->setup_lock, opal_mutex_t);
    OBJ_CONSTRUCT(&m->cache_lock, opal_mutex_t);
}

/* Runs when the communicator is freed (COMM_WORLD's in MPI_Finalize, before
 * the component closes) and the last request of xccl's on it is done:
 * endpoints are released here, closed when no other communicator uses
 * them. */
static void module_destruct(mca_coll_xccl_module_t *m)
{
    mca_coll_xccl_gpu_ipc_fini(m);
    mca_coll_xccl_select_fini(m);
    mca_coll_xccl_setup_fini(m);
    OBJ_DESTRUCT(&m->setup_lock);
    OBJ_DESTRUCT(&m->cache_lock);
    free(m->scratch);
#define RELEASE_PREV(name, coll, nb)                     \
    if (NULL != m->prev.name##_module) {                 \
        OBJ_RELEASE(m->prev.name##_module);              \
        m->prev.name##_module = NULL;                    \
    }
    MCA_COLL_XCCL_ENTRIES(RELEASE_PREV)
#undef RELEASE_PREV
#define RELEASE_PREV_INIT(name)                          \
    if (NULL != m->prev_init.name##_module) {            \
        OBJ_RELEASE(m->prev_init.name##_module);         \
        m->prev_init.name##_module = NULL;               \
    }
    MCA_COLL_XCCL_INIT_ENTRIES(RELEASE_PREV_INIT)
#undef RELEASE_PREV_INIT
}

OBJ_CLASS_INSTANCE(mca_coll_xccl_module_t, mca_coll_base_module_t, module_construct,
                   module_destruct);

/* ------------------------------------------------------------ query */

mca_coll_base_module_t *mca_coll_xccl_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    const char *why = NULL;

    if (c->world_rank < 0) {
        c->world_rank = ompi_comm_rank(&ompi_mpi_comm_world.comm);
    }
    /* Only reasons that are the same on every member (see the top). */
    if (c->priority < 0) {
        why = "priority < 0";
    } else if (OMPI_COMM_IS_INTER(comm)) {
        why = "intercommunicator (not supported)";
    } else if (!xccl_compat_comm_cid_is_global(comm)) {
        why = "context id not the same on every member (MPI_Comm_create_from_group)";
    } else if (xccl_compat_comm_cid(comm) > XCCL_UCX_MAX_CID) {
        why = "context id beyond xccl's 16-bit tag field";
    } else if ((unsigned) ompi_comm_size(comm) > XCCL_UCX_MAX_RANKS) {
        why = "more ranks than xccl's 20-bit tag field";
    }
    if (why) {
        mca_coll_xccl_log(1, "comm comm=%u rank=%d declined: %s", xccl_compat_comm_cid(comm),
                          c->world_rank, why);
        return NULL;
    }

    mca_coll_xccl_module_t *m = OBJ_NEW(mca_coll_xccl_module_t);
    if (NULL == m) {
        return NULL;
    }
    *priority = c->priority;
    m->super.coll_module_enable = xccl_module_enable;
#define INSTALL(name, coll, nb) m->super.coll_##name = mca_coll_xccl_##name;
    MCA_COLL_XCCL_ENTRIES(INSTALL)
#undef INSTALL
#define INSTALL_INIT(name) m->super.coll_##name##_init = mca_coll_xccl_##name##_init;
    MCA_COLL_XCCL_INIT_ENTRIES(INSTALL_INIT)
#undef INSTALL_INIT
    return &m->super;
}

/* ------------------------------------------------------------ enable */

/* Every member selected the same modules: all decline alike. */
static void decline(mca_coll_xccl_module_t *m)
{
#define DECLINE(name, coll, nb) m->super.coll_##name = NULL;
    MCA_COLL_XCCL_ENTRIES(DECLINE)
#undef DECLINE
#define DECLINE_INIT(name) m->super.coll_##name##_init = NULL;
    MCA_COLL_XCCL_INIT_ENTRIES(DECLINE_INIT)
#undef DECLINE_INIT
}

/* Whether a fallback module is Open MPI's han, which runs its own
 * two-level algorithms between nodes: from its class's name. */
static unsigned two_level(const mca_coll_base_module_t *mod)
{
    const char *cls = mod->super.obj_class->cls_name;
    return NULL != cls && 0 == strncmp(cls, "mca_coll_han_", strlen("mca_coll_han_"));
}

static int xccl_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_xccl_module_t *m = (mca_coll_xccl_module_t *) module;
    const char *why = NULL;

    m->comm = comm;
    m->rank = ompi_comm_rank(comm);
    m->size = ompi_comm_size(comm);
    m->world_rank = mca_coll_xccl_component.world_rank;
    m->cid = xccl_compat_comm_cid(comm);
    m->setup = XCCL_SETUP_NONE;
    mca_coll_xccl_level_init(m);

#define SAVE_PREV(name, coll, nb)                                         \
    m->prev.name = comm->c_coll->coll_##name;                             \
    m->prev.name##_module = comm->c_coll->coll_##name##_module;           \
    if (NULL == m->prev.name || NULL == m->prev.name##_module) {          \
        why = "no fallback module for " #name;                            \
    } else {                                                              \
        OBJ_RETAIN(m->prev.name##_module);                                \
        *((nb) ? &m->prev_two_level_nb : &m->prev_two_level) |=           \
            two_level(m->prev.name##_module) << (coll);                   \
    }
    m->prev_two_level = 0;
    m->prev_two_level_nb = 0;
    m->nodes_settled = 0;
    MCA_COLL_XCCL_ENTRIES(SAVE_PREV)
#undef SAVE_PREV
#define SAVE_PREV_INIT(name)                                                  \
    m->prev_init.name = comm->c_coll->coll_##name##_init;                     \
    m->prev_init.name##_module = comm->c_coll->coll_##name##_init_module;     \
    if (NULL == m->prev_init.name || NULL == m->prev_init.name##_module) {    \
        m->prev_init.name = NULL;                                             \
        m->prev_init.name##_module = NULL;                                    \
    } else {                                                                  \
        OBJ_RETAIN(m->prev_init.name##_module);                               \
    }
    MCA_COLL_XCCL_INIT_ENTRIES(SAVE_PREV_INIT)
#undef SAVE_PREV_INIT
    if (NULL != why) {
        /* The same modules are selected on every member: all decline. */
        mca_coll_xccl_log(1, "comm comm=%u rank=%d size=%d disabled: %s", m->cid, m->world_rank,
                          m->size, why);
        decline(m);
        return OMPI_SUCCESS;
    }
    mca_coll_xccl_log(2, "comm comm=%u rank=%d size=%d enabled (name %s); set up on first use",
                      m->cid, m->world_rank, m->size, comm->c_name);
    return OMPI_SUCCESS;
}
