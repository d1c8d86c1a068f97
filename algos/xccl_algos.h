/*
 * xccl algorithms: pure C, no MPI, no UCX, no CUDA.
 *
 * A collective call becomes a schedule (xccl_sched_t): a list of steps, each
 * step a set of sends and receives between buffer regions plus local
 * reductions and copies.  One executor (xccl_exec_t) runs any schedule over a
 * small transport interface (xccl_transport_t); the in-memory simulated
 * transport (xccl_sim_*) runs N virtual ranks in one process for tests.
 *
 * This header is the umbrella: it includes base/xccl_base.h and every
 * section of the API, lower sections first (a section includes only
 * sections above it in this list):
 *
 *   xccl_sched.h    schedules: xccl_sched_t, building, references,
 *                   composition (xccl_sched_append); step semantics
 *   xccl_layout.h   node layout (xccl_layout_t)
 *   xccl_build.h    flat builders, buffer conventions, builder types
 *   xccl_hier.h     two-level builders
 *   xccl_exec.h     transport interface, gate, peer access, executor
 *   xccl_stage.h    staging plan (device buffers through host copies)
 *   xccl_sim.h      simulated transport
 *   xccl_cost.h     cost model (flat and per link class), cost files
 *   xccl_tuning.h   tuning files
 *   xccl_catalog.h  catalog: algorithms by name, xccl_coll_args_t
 *   xccl_select.h   selection, level trials, choice and schedule cache
 *
 * Code inside algos/, tools/ and test/ includes the sections it uses.
 */
#ifndef XCCL_ALGOS_H
#define XCCL_ALGOS_H

#include "base/xccl_base.h"        /* element types, ops, host kernels, collectives */

#include "xccl_sched.h"
#include "xccl_layout.h"
#include "xccl_build.h"
#include "xccl_hier.h"
#include "xccl_exec.h"
#include "xccl_stage.h"
#include "xccl_sim.h"
#include "xccl_cost.h"
#include "xccl_tuning.h"
#include "xccl_catalog.h"
#include "xccl_select.h"

#endif
