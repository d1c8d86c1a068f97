#!/usr/bin/env bash
# xccl on CUDA device buffers: runs xccl_mpi_gpu under mpirun with xccl
# loaded, at np 1, 2, 3, 4,
#   (1) against the fake libcuda.so.1 (test/gpu/fake, host memory with
#       PROT_NONE "device" pages; always available after `make check`
#       built it; one fake device, two at np 3), and
#   (2) against the real driver, when libcuda.so.1 loads and reports a
#       device; otherwise prints "SKIP real GPU: <reason>" (not a pass).
# Plus one fake run with FAKE_CUDA_DEVICES=0, which must exit 77 with a
# "SKIP:" line, one at np 2 that loads the driver after MPI_Init (-L),
# one at np 3 that stages every call in small pieces, one at np 3 that
# passes device pointers straight to UCX (a UCX with CUDA
# played by fake_ucx_cuda.c, which checks the memory type of every
# transfer), one at np 2 where coll_xccl_gpu_direct 1 meets a UCX without
# CUDA (refused, staged), one at np 3 whose large calls must go through
# CUDA IPC, and three at np 2 in which one driver call fails (an MPI
# error, no hang).  Then xccl_mpi_gpu_user
# (buffers overwritten as soon as a call returns, data changing from call
# to call) at np 2, 3, 4 against the fake and at each np >= 2 of
# GPU_TESTS_NPS against the real driver, each with CUDA IPC from 64 KiB
# (coll_xccl_gpu_ipc_bytes 65536: both sides of a threshold), as
# configured (every size), and off (0); nonblocking (-N) at np 2, 3, 4
# and with one rank on host buffers (-M).  xccl_mpi_gpu_colls (reduce,
# barrier, the v forms, gather, scatter) at np 2 and 4, CUDA IPC from 64
# KiB, as configured and off, with xccl's own algorithms forced, with the
# last rank on host buffers, and on two fake devices (the mesh form).
#
# usage: run_gpu_tests.sh [<dir-with-xccl_mpi_gpu> [<component-dir>]]
#   defaults: $XCCL_BUILDDIR (set by make check) and <dir>/component
#
# Environment:
#   MPIRUN        mpirun command (default: mpirun)
#   MPIRUN_ARGS   extra mpirun arguments, split on whitespace
#   GPU_TEST_ARGS extra xccl_mpi_gpu arguments (e.g. "-l", "-n 4194304")
#   TEST_LOG_DIR  where logs go (default: a new temporary directory)
#   OMPI_COMPONENT_DIR  Open MPI's own component directory
#                 (default: /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3)
#   GPU_TESTS_ALLOW_LEAKS=1  do not fail a fake run whose processes end with
#                 device or pinned allocations outstanding (FAKE_CUDA_STATS)
#   GPU_TESTS_NPS  the np values (default "1 2 3 4")
#   GPU_USER_NPS  the np values of xccl_mpi_gpu_user against the fake
#                 (default "2 3 4"; two fake devices at np 3)
#   GPU_USER_TEST_ARGS  extra xccl_mpi_gpu_user arguments (e.g. "-n 1048576")
#
# A run passes when it exits 0 and prints "RESULT: <n> passed, 0 failed";
# a fake run also needs every process to end with nothing allocated.
# Exit status: 0 when every run passed, 1 otherwise.
# The runs against the fake driver are the functions of gpu_fake_runs.sh;
# running a program and checking its log, gpu_checks.sh.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/ompi_env.sh"
# shellcheck source=SCRIPTDIR/../lib/verdict.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/verdict.sh"   # finish, check_bench
# shellcheck source=SCRIPTDIR/gpu_checks.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_checks.sh"     # run, run_prog, user_run, check_*
# shellcheck source=SCRIPTDIR/gpu_fake_runs.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_fake_runs.sh"  # fake_*: the runs against the fake driver

bindir=${1:-${XCCL_BUILDDIR:-}}
[[ -n $bindir ]] || { echo "usage: $0 <dir-with-xccl_mpi_gpu> [<component-dir>]" >&2; exit 2; }
compdir=${2:-$bindir/component}
bindir=$(cd "$bindir" && pwd)
prog=$bindir/xccl_mpi_gpu
user_prog=$bindir/xccl_mpi_gpu_user
fakedir=$bindir/test/gpu/fake
[[ -x $prog ]] || { echo "$0: no $prog (make check builds it)" >&2; exit 2; }
[[ -x $user_prog ]] || { echo "$0: no $user_prog (make check builds it)" >&2; exit 2; }
[[ -e $fakedir/libcuda.so.1 ]] || { echo "$0: no $fakedir/libcuda.so.1 (make check builds it)" >&2; exit 2; }
[[ -e $compdir/mca_coll_xccl.so ]] || { echo "$0: no $compdir/mca_coll_xccl.so" >&2; exit 2; }
# a UCX with CUDA, as xccl sees it (fake_ucx_cuda.c), preloaded into the ranks
fake_ucx=$bindir/.libs/libxccl_fake_ucx_cuda.so
[[ -e $fake_ucx ]] || { echo "$0: no $fake_ucx (make check builds it)" >&2; exit 2; }
compdir=$(cd "$compdir" && pwd)

read -r -a mpirun <<<"${MPIRUN:-mpirun}"
read -r -a extra_args <<<"${MPIRUN_ARGS:-}"
read -r -a test_args <<<"${GPU_TEST_ARGS:-}"
read -r -a nps <<<"${GPU_TESTS_NPS:-1 2 3 4}"
read -r -a user_test_args <<<"${GPU_USER_TEST_ARGS:-}"
read -r -a user_nps <<<"${GPU_USER_NPS:-2 3 4}"
logdir=${TEST_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/xccl-gpu-tests.XXXXXX")}
mkdir -p "$logdir"

# The default component directory first, then the one under test (a
# private directory of links when an installed xccl would shadow it).
xccl_ompi_env "$compdir" "$logdir" testing
# The fake's delays (test/gpu/README): a new seed each time unless given,
# printed so that a failure can be replayed with FAKE_CUDA_SEED=<seed>.
export FAKE_CUDA_SEED=${FAKE_CUDA_SEED:-$(( $(date +%s%N) / 1000 % 1000000 ))}
echo "fake_cuda seed: $FAKE_CUDA_SEED (replay: FAKE_CUDA_SEED=$FAKE_CUDA_SEED $0 ...)"
common_args=("${ompi_base_args[@]}"
    # stock 4.1.4's op/avx saturates 8/16-bit sums (a fallback must not use it)
    --mca op ^avx -x FAKE_CUDA_SEED)

passed=0
failed=0
skipped=0

fake_ldp=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# (1) the fake driver
fake_np_runs
fake_no_device
fake_late_driver
fake_gpu_ring
fake_pipeline
fake_direct
fake_direct_refused
fake_ipc
fake_faults
fake_fault_ipc_nonblocking
fake_user
fake_user_nonblocking
fake_colls
fake_threads
fake_churn
fake_bench
fake_budget

# (2) the real driver, where there is one
real_ldp=-
if [[ ${LD_LIBRARY_PATH:-} == *"$fakedir"* ]]; then
    real_ldp=$(tr ':' '\n' <<<"$LD_LIBRARY_PATH" | grep -vxF "$fakedir" | paste -sd: -)
    real_ldp=${real_ldp:-/nonexistent}
fi
real_skip=""
for np in "${nps[@]}"; do
    name=real.np$np
    run "$name" "$np" "$real_ldp" --
    if [[ $run_rc -eq 77 ]]; then
        real_skip=$(grep -m1 '^SKIP: ' "$logdir/$name.log" | sed 's/^SKIP: //' || true)
        echo "SKIP real GPU: ${real_skip:-exit 77}"
        skipped=1
        break
    fi
    ok=0
    problems=$(check_result "$name" 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
done
# the user-style test on the real driver, at each np >= 2, three configurations
if [[ -z $real_skip && $skipped -eq 0 ]]; then
    for np in "${nps[@]}"; do
        [[ $np -ge 2 ]] || continue
        for config in ipc default off; do
            name=real.user.np$np.$config
            user_run "$name" "$np" "$real_ldp" "$config"
            ok=0
            problems=$(user_check "$name" "$np" "$config" 0 2>&1) || ok=1
            finish "$name" "$ok" "$problems"
        done
    done
fi

echo "logs: $logdir"
echo "gpu-tests: $passed passed, $failed failed${real_skip:+, real GPU skipped ($real_skip)}"
[[ $failed -eq 0 ]]
