/*
 * Every difference between the Open MPI versions xccl builds against, in
 * one place: the rest of ompi_coll_xccl/ uses only the names defined here
 * and never tests a version itself.
 *
 * configure reads the version from the installed headers and passes (on
 * the component's command line, not through xccl_build_config.h, whose
 * PACKAGE_* macros clash with ompi_config.h's)
 *   XCCL_OMPI_MAJOR  the Open MPI major version (4 or 5)
 *   XCCL_COLL_API    the coll framework's module API, 0xMMmmpp:
 *                    0x020300 in Open MPI 4.1 (mca_coll_base_module_2_3_0_t,
 *                    component 2.0.0), 0x020400 in 5.0 (module and component
 *                    2.4.0, with the fault-tolerant agree/iagree members).
 *
 * What differs, and what stays the same (both read from the headers and the
 * coll/base, coll/ucc and coll/han sources of 4.1.4 and 5.0.7):
 *  - the component struct and its version macro (2_0_0 -> 2_4_0), and
 *    OMPI_MODULE_DECLSPEC (gone in 5.0: OMPI_DECLSPEC); the
 *    unversioned typedefs mca_coll_base_component_t and
 *    mca_coll_base_module_t name the right one in both;
 *  - the context id: a 32-bit c_contextid in 4.1; in 5.0 a 128-bit
 *    "extended" id, with a 32-bit local index that is the same on every
 *    member only when the communicator has OMPI_COMM_GLOBAL_INDEX (all
 *    communicators derived from MPI_COMM_WORLD or MPI_COMM_SELF; not those
 *    of MPI_Comm_create_from_group, whose members' indices differ);
 *  - opal's threads moved: opal/threads/mutex.h -> opal/mca/threads/mutex.h;
 *  - the modex: opal/mca/pmix/pmix.h and opal_pmix.commit() in 4.1,
 *    opal/mca/pmix/pmix-internal.h and PMIx_Commit() in 5.0 (PMIx's own
 *    scope constants);
 *  - opal_get_proc_hostname: a cached string in 4.1, a new one the caller
 *    frees in 5.0;
 *  - the same in both: how a component saves the previous module (base
 *    selection enables modules in increasing priority and then copies each
 *    module's non-NULL pointers into comm->c_coll, so module_enable reads
 *    the lower-priority modules from comm->c_coll and retains them, as
 *    coll/ucc does), the collective function signatures (int counts), the
 *    request and op interfaces, MCA variable registration.
 *  - stock reductions that compute wrong results: see
 *    XCCL_STOCK_UL_MAXMIN_SIGNED and XCCL_STOCK_SUM_SATURATES below.
 */
#ifndef MCA_COLL_XCCL_COMPAT_H
#define MCA_COLL_XCCL_COMPAT_H

#include "ompi_config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "opal/util/proc.h"

#if !defined(XCCL_COLL_API)
#error "XCCL_COLL_API is not defined: configure passes it (XCCL_OMPI_DEFS)"
#endif

#if XCCL_COLL_API >= 0x020400
/* ---------------------------------------------------------- Open MPI 5.0 */
#include "opal/mca/pmix/pmix-internal.h"
#include "opal/mca/threads/mutex.h"

#define XCCL_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_4_0
/* OMPI_MODULE_DECLSPEC is gone; components are exported as the library is */
#define XCCL_COMPONENT_DECLSPEC OMPI_DECLSPEC
#define XCCL_MODEX_SCOPE PMIX_GLOBAL

/* The id xccl puts into its tags: the local index, the same on every
 * member of a communicator with a global index. */
static inline uint32_t xccl_compat_comm_cid(const struct ompi_communicator_t *comm)
{
    return ompi_comm_get_local_cid(comm);
}

/* Whether xccl_compat_comm_cid is the same on every member.  All members
 * see the same answer (the flag comes from how the id was allocated). */
static inline bool xccl_compat_comm_cid_is_global(const struct ompi_communicator_t *comm)
{
    return 0 != OMPI_COMM_IS_GLOBAL_INDEX(comm);
}

/* Makes what OPAL_MODEX_SEND posted visible to the other processes. */
static inline int xccl_compat_modex_commit(void)
{
    return PMIX_SUCCESS == PMIx_Commit() ? OPAL_SUCCESS : OPAL_ERROR;
}

/* The host name of a process.  5.0's opal_get_proc_hostname returns a new
 * string (a copy of PMIx's value, or strdup) that the caller frees, as its
 * own btl/tcp does; kept, it leaked ~800 bytes per communicator set-up. */
static inline const char *xccl_compat_proc_hostname(opal_proc_t *proc)
{
    return opal_get_proc_hostname(proc);
}

static inline void xccl_compat_proc_hostname_release(const char *host)
{
    free((char *) host);
}

#else
/* ---------------------------------------------------------- Open MPI 4.1 */
#include "opal/mca/pmix/pmix.h"
#include "opal/threads/mutex.h"

#define XCCL_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_0_0
#define XCCL_COMPONENT_DECLSPEC OMPI_MODULE_DECLSPEC
#define XCCL_MODEX_SCOPE OPAL_PMIX_GLOBAL

static inline uint32_t xccl_compat_comm_cid(const struct ompi_communicator_t *comm)
{
    return comm->c_contextid;
}

static inline bool xccl_compat_comm_cid_is_global(const struct ompi_communicator_t *comm)
{
    (void) comm;
    return true;
}

static inline int xccl_compat_modex_commit(void)
{
    return opal_pmix.commit();
}

/* 4.1: the string cached in the proc (never to be freed). */
static inline const char *xccl_compat_proc_hostname(opal_proc_t *proc)
{
    return opal_get_proc_hostname(proc);
}

static inline void xccl_compat_proc_hostname_release(const char *host)
{
    (void) host;
}

#endif

/* ------------------------------------------------------ stock reductions
 * Reductions the stock op framework computes wrongly, which xccl runs
 * itself even below coll_xccl_small_msg_bytes.  Each is set from a
 * measurement on that version (test/ompi5/stock_ops.c, run by make check,
 * fails when the library and these values disagree), never assumed:
 *  - MPI_MAX/MPI_MIN on MPI_UNSIGNED_LONG compared as signed (ompi#10525);
 *  - MPI_SUM on 8- and 16-bit integers saturated by op/avx instead of
 *    wrapping (ompi#8045). */
#if XCCL_COLL_API >= 0x020400
/* Open MPI 5.0.7 (Debian 13, measured with test/ompi5/stock_ops at np 2,
 * MPI_Reduce_local and MPI_Allreduce over tuned): MAX/MIN on
 * MPI_UNSIGNED_LONG compare unsigned (fixed); op/avx still saturates every
 * 8- and 16-bit sum from 31 elements on (its vector loop). */
#define XCCL_STOCK_UL_MAXMIN_SIGNED 0
#define XCCL_STOCK_SUM_SATURATES 1
#else
/* Open MPI 4.1.4 (Debian 12, same measurement): both. */
#define XCCL_STOCK_UL_MAXMIN_SIGNED 1
#define XCCL_STOCK_SUM_SATURATES 1
#endif

#endif
