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
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/ompi_env.sh"
# shellcheck source=SCRIPTDIR/../lib/verdict.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/verdict.sh"   # finish, check_bench

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

# run <name> <np> <ld_library_path or -> [env VAR=value...] -- [program args]
# runs $PROG (default xccl_mpi_gpu) with -q and $PROG_ARGS (default
# GPU_TEST_ARGS); run_s: its wall time in seconds
run_rc=0
run_s=0
PROG=
PROG_ARGS=()
run() {
    local name=$1 np=$2 ldp=$3
    shift 3
    local envs=()
    while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
    [[ ${1:-} == -- ]] && shift
    local log=$logdir/$name.log
    echo "== $name"
    run_rc=0
    local xargs=()
    for e in "${envs[@]}"; do xargs+=(-x "$e"); done
    if [[ $ldp != - ]]; then
        xargs+=(-x "LD_LIBRARY_PATH=$ldp")
    fi
    local envcmd=(env)
    [[ $ldp == - ]] || envcmd+=("LD_LIBRARY_PATH=$ldp")
    local p=${PROG:-$prog} started=$SECONDS
    local pargs=("${test_args[@]}")
    [[ -z $PROG ]] || pargs=("${PROG_ARGS[@]}")
    timeout -k 10 300 "${envcmd[@]}" \
        "${mpirun[@]}" "${common_args[@]}" "${extra_args[@]}" "${xargs[@]}" \
        -np "$np" "$p" -q "${pargs[@]}" "$@" >"$log" 2>&1 || run_rc=$?
    run_s=$((SECONDS - started))
    [[ $run_rc -ne 124 ]] || echo "TIMEOUT after 300 s" >>"$log"
}

# run_prog <name> <np> <verbose level> <program> [VAR=value...]: run() of
# <program> (with $PROG_ARGS, as set) against the fake driver, with
# coll_xccl_verbose at that level; extra_args and PROG as they were after.
run_prog() {
    local name=$1 np=$2 level=$3 program=$4
    shift 4
    local saved=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_verbose "$level")
    PROG=$program
    run "$name" "$np" "$fake_ldp" "$@" --
    PROG=
    extra_args=("${saved[@]}")
}

# Exit 0 and "RESULT: ... 0 failed".
check_result() {
    local name=$1 result
    # Not anchored: in the merged stream another rank's verbose line, written
    # in pieces, can end up in front of it.
    result=$(grep -oE 'RESULT: [0-9]+ passed, [0-9]+ failed$' "$logdir/$name.log" | tail -n 1 || true)
    if [[ $run_rc -ne 0 ]]; then
        echo "$name: exit status $run_rc${result:+ ($result)}"
        return 1
    fi
    [[ -n $result ]] || { echo "$name: no RESULT line"; return 1; }
    [[ $result == *", 0 failed" ]] || { echo "$name: $result"; return 1; }
}

# Every process of a fake run ended with nothing allocated.
check_leaks() {
    local name=$1 np=$2 lines bad
    lines=$(grep -E '^fake_cuda\[[0-9]+\]: outstanding:' "$logdir/$name.log" || true)
    if [[ $(grep -c . <<<"$lines") -lt $np ]]; then
        echo "$name: $(grep -c . <<<"$lines") FAKE_CUDA_STATS lines for $np processes"
        return 1
    fi
    bad=$(grep -vE ' device=0 .* host_alloc=0 .* host_register=0 .* ipc=0 .* modules=0 streams=0 events=0 pending_ops=0 primary_ctx_refs=0$' <<<"$lines" || true)
    if [[ -n $bad && ${GPU_TESTS_ALLOW_LEAKS:-0} != 1 ]]; then
        echo "$name: allocations outstanding at exit (GPU_TESTS_ALLOW_LEAKS=1 to ignore):"
        printf '%s\n' "$bad" | head -n 4
        return 1
    fi
}

# The memory types xccl gave UCX, from fake_ucx_cuda.c's line per process
# ("fake_ucx_cuda[pid]: send cuda=N host=N recv cuda=N host=N unset=N
# wrong=N"): one line per process, none unset or wrong, and with want=cuda
# device buffers sent and received as cuda, with want=host none.
check_memtypes() {
    local name=$1 np=$2 want=$3 lines sums
    lines=$(grep -E '^fake_ucx_cuda\[[0-9]+\]: send cuda=' "$logdir/$name.log" || true)
    if [[ $(grep -c . <<<"$lines") -lt $np ]]; then
        echo "$name: $(grep -c . <<<"$lines") fake_ucx_cuda lines for $np processes"
        return 1
    fi
    sums=$(sed -E 's/.*send cuda=([0-9]+) host=([0-9]+) recv cuda=([0-9]+) host=([0-9]+) unset=([0-9]+) wrong=([0-9]+)$/\1 \2 \3 \4 \5 \6/' <<<"$lines" |
        awk '{ for (i = 1; i <= 6; i++) s[i] += $i } END { print s[1]+0, s[2]+0, s[3]+0, s[4]+0, s[5]+0, s[6]+0 }')
    local sc sh rc rh unset wrong
    read -r sc sh rc rh unset wrong <<<"$sums"
    if [[ $unset -ne 0 || $wrong -ne 0 ]]; then
        echo "$name: transfers without their memory type: $unset, with the wrong one: $wrong"
        grep -m 4 '^fake_ucx_cuda\[[0-9]*\]: WRONG' "$logdir/$name.log" || true
        return 1
    fi
    if [[ $want == cuda && ($sc -eq 0 || $rc -eq 0) ]]; then
        echo "$name: no device buffer sent and received as cuda memory (send $sc, recv $rc)"
        return 1
    fi
    if [[ $want == host && ($sc -ne 0 || $rc -ne 0 || $sh -eq 0) ]]; then
        echo "$name: want host memory only: send cuda=$sc host=$sh, recv cuda=$rc"
        return 1
    fi
    echo "$name: memory types given to ucx: send cuda=$sc host=$sh, recv cuda=$rc host=$rh"
}

fake_ldp=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# (1) the fake driver
for np in "${nps[@]}"; do
    name=fake.np$np
    # np 3 on two fake devices (ranks 0 and 2 on one, rank 1 on the
    # other; and buffers on the other device than the current one)
    devices=1
    [[ $np -ne 3 ]] || devices=2
    run "$name" "$np" "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices --
    ok=0
    problems=$({ check_result "$name" && check_leaks "$name" "$np"; } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
done

# no device: exit 77 with a SKIP line
name=fake.no_device.np2
run "$name" 2 "$fake_ldp" FAKE_CUDA_DEVICES=0 --
ok=0
problems=$({ [[ $run_rc -eq 77 ]] || { echo "$name: exit status $run_rc, want 77"; false; }; } &&
    { grep -q '^SKIP: ' "$logdir/$name.log" || { echo "$name: no SKIP line"; false; }; } 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# The driver loaded after MPI_Init and after host calls on stack buffers
# (-L: xccl has looked for it and found none): device buffers must be
# noticed on the next calls, staged and right (with the driver taken for
# absent they reach host code and the fake's PROT_NONE pages crash it).
name=fake.late_driver.np2
saved_extra=("${extra_args[@]}")
extra_args+=(--mca coll_xccl_verbose 2)
run "$name" 2 "$fake_ldp" FAKE_CUDA_STATS=1 -- -L -n 1048576
extra_args=("${saved_extra[@]}")
ok=0
problems=$({
    check_result "$name" && check_leaks "$name" 2 &&
    for r in 0 1; do
        p=$(grep -cE "^xccl: [a-z_]+ comm=[0-9]+ rank=$r: device buffers, host copies of" \
            "$logdir/$name.log" || true)
        [[ $p -gt 0 ]] || { echo "$name: rank $r: no staged call"; exit 1; }
    done &&
    echo "$name: $(grep -c ': device buffers, host copies of' "$logdir/$name.log") calls staged"
} 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# Ring order inside a node that follows the GPU wiring: 4 ranks on 4 fake
# GPUs (rank r on device r, PCI ids as the fake reports them) in a topology
# that alternates sockets: gpu0 and gpu2 on package 0, gpu1 and gpu3 on
# package 1.  Communicator order crosses the sockets 4 times around the
# ring; the order xccl logs must pair ranks 0-2 and 1-3 (2 crossings).
topo=$logdir/alternate-sockets.topo
cat >"$topo" <<'TOPO'
xccl_topo 1
node alt4 packages=2 numa=2 cores=4 pus=4
numa 0 package=0 cores=2 pus=2
numa 1 package=1 cores=2 pus=2
device gpu0 kind=gpu vendor=10de pci=0000:10:00.0 numa=0 package=0 pcie=hb0/sw0/p0
device gpu1 kind=gpu vendor=10de pci=0000:11:00.0 numa=1 package=1 pcie=hb1/sw0/p0
device gpu2 kind=gpu vendor=10de pci=0000:12:00.0 numa=0 package=0 pcie=hb0/sw0/p1
device gpu3 kind=gpu vendor=10de pci=0000:13:00.0 numa=1 package=1 pcie=hb1/sw0/p1
TOPO
name=fake.gpu_ring.np4
saved_extra=("${extra_args[@]}")
extra_args+=(--mca coll_xccl_topo_file "$topo" --mca coll_xccl_verbose 2)
run "$name" 4 "$fake_ldp" FAKE_CUDA_DEVICES=4 -- -n 65536
extra_args=("${saved_extra[@]}")
# adjacent A B ORDER...: A and B are neighbours on the ring ORDER
adjacent() {
    local a=$1 b=$2
    shift 2
    local o=("$@") n=$# i
    for ((i = 0; i < n; i++)); do
        local x=${o[i]} y=${o[(i + 1) % n]}
        if [[ ($x == "$a" && $y == "$b") || ($x == "$b" && $y == "$a") ]]; then
            return 0
        fi
    done
    return 1
}
ok=0
problems=$({
    check_result "$name" &&
    line=$(grep -m1 'comm=0 node 0: ranks in placement order (gpu ring):' "$logdir/$name.log") ||
        { echo "$name: no 'comm=0 node 0: ranks in placement order (gpu ring)' line"; false; } &&
    read -r -a order <<<"${line##*:}" &&
    { [[ ${#order[@]} -eq 4 ]] && adjacent 0 2 "${order[@]}" && adjacent 1 3 "${order[@]}" ||
        { echo "$name: ring order '${order[*]}' does not keep gpu0/gpu2 and gpu1/gpu3 together"; false; }; }
} 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# Staging pipelined in small pieces: CUDA IPC off, so every call on device
# buffers is staged (in pinned memory up to 1 MiB per call, pageable
# above); pieces of 256 bytes, so a call's copies are many and
# the steps of the schedule wait for them (the fake runs each copy late,
# on its stream's thread).  The log must
# show pipelined calls with more than one copy in and out.  A UCX with
# CUDA is played (fake_ucx_cuda.c) with coll_xccl_gpu_direct 0: staged
# calls must give UCX host memory only (the pinned copies, and the host
# buffers of the mixed calls), each transfer saying so.
name=fake.pipeline.np3
saved_extra=("${extra_args[@]}")
# (The shared-memory level is off here and in the direct and fault runs
# below: with it, blocking calls inside a node run on host copies filled
# whole first; the pipeline and the direct path serve the other calls.)
extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0 --mca coll_xccl_gpu_chunk_bytes 256
    --mca coll_xccl_gpu_pool_bytes 1048576 --mca coll_xccl_verbose 2 --mca coll_xccl_shm_bytes 0
    --mca coll_xccl_gpu_direct 0)
run "$name" 3 "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=2 "LD_PRELOAD=$fake_ucx" --
extra_args=("${saved_extra[@]}")
ok=0
problems=$({
    check_result "$name" && check_leaks "$name" 3 && check_memtypes "$name" 3 host &&
    n=$(grep -cE 'staging pipelined: ([2-9]|[1-9][0-9]+) copies in, ([2-9]|[1-9][0-9]+) out' \
        "$logdir/$name.log" || true) &&
    { [[ $n -gt 0 ]] || { echo "$name: no call pipelined in several pieces"; false; }; } &&
    echo "$name: $n calls pipelined in several pieces"
} 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# Device pointers straight to UCX (coll_xccl_gpu_direct -1, the default:
# wherever UCX reports CUDA memory support).  Debian's UCX cannot move
# CUDA memory, so fake_ucx_cuda.c (preloaded) plays a UCX that can: it
# reports CUDA support to xccl, checks that every transfer of xccl's
# gives its buffer's memory type (cuda for the fake's device memory, host
# for the host buffers of the mixed calls; with the direct path's CUDA
# transport planted out, 1896 transfers at np 2 came as host), and hands
# it to the real UCX as host memory, which the fake's device memory is
# with FAKE_CUDA_HOST_ACCESS=1.  xccl runs every copy and reduction of the
# schedule on the fake's streams and kernels, which run late, on their
# streams' threads: a step that started before the work of the step
# before it had run reads stale data (with that wait planted out, 110 of
# 699 checks failed).  CUDA IPC is off, so every call on device buffers
# runs a schedule; two devices at np 3.  The log must show direct calls,
# and the fake must have run kernels.
name=fake.direct.np3
saved_extra=("${extra_args[@]}")
extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0
    --mca coll_xccl_verbose 2 --mca coll_xccl_shm_bytes 0)
run "$name" 3 "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=2 FAKE_CUDA_HOST_ACCESS=1 \
    "LD_PRELOAD=$fake_ucx" --
extra_args=("${saved_extra[@]}")
ok=0
problems=$({
    check_result "$name" && check_leaks "$name" 3 && check_memtypes "$name" 3 cuda &&
    n=$(grep -c 'device buffers straight to ucx, copies and reductions on the gpu' \
        "$logdir/$name.log" || true) &&
    { [[ $n -gt 0 ]] || { echo "$name: no call ran straight on the device buffers"; false; }; } &&
    k=$(grep -oE '^fake_cuda\[[0-9]+\]: calls:.* cuLaunchKernel=[0-9]+' "$logdir/$name.log" |
        sed 's/.*cuLaunchKernel=//' | awk '{ k += $1 } END { print k + 0 }') &&
    { [[ ${k:-0} -gt 0 ]] || { echo "$name: no kernel launched"; false; }; } &&
    echo "$name: $n calls straight to ucx, $k kernels launched"
} 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# coll_xccl_gpu_direct 1 and Debian's UCX, which cannot move CUDA memory:
# direct mode is refused (the init line at verbose 1 says why, on every
# rank) and device buffers are staged.  The fake's device memory stays
# PROT_NONE to the host, so a device pointer handed to this UCX would
# crash the run, as it does on a real GPU (with direct mode forced, every
# rank ends in an MPI error instead: the glue refuses a device buffer that
# this UCX cannot take).
name=fake.direct_refused.np2
saved_extra=("${extra_args[@]}")
extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0 --mca coll_xccl_gpu_direct 1
    --mca coll_xccl_verbose 2 --mca coll_xccl_shm_bytes 0)
run "$name" 2 "$fake_ldp" FAKE_CUDA_STATS=1 --
extra_args=("${saved_extra[@]}")
ok=0
problems=$({
    check_result "$name" && check_leaks "$name" 2 &&
    n=$(grep -c '^xccl: init: coll_xccl_gpu_direct 1 refused: ucx lacks cuda memory support: device buffers staged through host copies$' \
        "$logdir/$name.log" || true) &&
    { [[ $n -eq 2 ]] || { echo "$name: $n refusal lines for 2 ranks"; false; }; } &&
    d=$(grep -c 'device buffers straight to ucx' "$logdir/$name.log" || true) &&
    { [[ $d -eq 0 ]] || { echo "$name: $d calls straight to ucx despite the refusal"; false; }; } &&
    p=$(grep -c 'staging pipelined' "$logdir/$name.log" || true) &&
    { [[ $p -gt 0 ]] || { echo "$name: no staged call"; false; }; } &&
    echo "$name: refused on both ranks, $p calls staged, none straight to ucx"
} 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# CUDA IPC inside the node: calls of at least coll_xccl_gpu_ipc_bytes run
# their collective's mesh schedule on the peers' mapped buffers (verbose
# line "algo=mesh ... via=cuda_ipc"), every collective at least once per
# rank, on two fake devices at np 3; results and leaks as in (1).
name=fake.ipc.np3
saved_extra=("${extra_args[@]}")
extra_args+=(--mca coll_xccl_verbose 1)
run "$name" 3 "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=2 --
extra_args=("${saved_extra[@]}")
ok=0
problems=$({
    check_result "$name" && check_leaks "$name" 3 &&
    for coll in allreduce reduce_scatter reduce_scatter_block allgather alltoall bcast; do
        for r in 0 1 2; do
            n=$(grep -cE "^xccl: $coll comm=[0-9]+ rank=$r bytes=[0-9]+ algo=mesh .* via=cuda_ipc" \
                "$logdir/$name.log" || true)
            [[ $n -gt 0 ]] || { echo "$name: rank $r: no $coll call through cuda ipc"; exit 1; }
        done
    done &&
    echo "$name: $(grep -c 'via=cuda_ipc' "$logdir/$name.log") calls through cuda ipc"
} 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# Driver failures in the middle of a staged call (FAKE_CUDA_FAIL: one call
# of one entry point fails): the job must end promptly with an MPI error
# that names the failed driver call, not hang or crash.  An event query of
# the pipeline, and a copy queued by it; a reduction kernel of a call
# straight to UCX.
# fault_check <name> <entry point>: an MPI error exit and the rank's own
# line naming the failed call (Open MPI's abort message may be lost when
# several ranks abort at once).
fault_check() {
    local name=$1 fn=$2
    { [[ $run_rc -ne 0 && $run_rc -ne 124 && $run_rc -lt 128 ]] ||
        { echo "$name: exit status $run_rc, want an MPI error exit"; false; }; } &&
    { grep -qE "xccl: .*${fn%_v2}: unknown error \(999\); returns MPI_ERR_INTERN" \
        "$logdir/$name.log" ||
        { echo "$name: no xccl line naming the failed $fn and MPI_ERR_INTERN"; false; }; }
}
for fault in cuEventQuery:30 cuMemcpy2DAsync_v2:40 cuLaunchKernel:25:direct; do
    fn=${fault%%:*}
    name=fake.fault.$fn
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0 --mca coll_xccl_gpu_chunk_bytes 256
        --mca coll_xccl_verbose 1 --mca coll_xccl_shm_bytes 0)
    envs=(FAKE_CUDA_FAIL=${fault%:direct})
    if [[ $fault == *:direct ]]; then
        name=$name.direct
        extra_args+=(--mca coll_xccl_gpu_direct 1)
        envs+=(FAKE_CUDA_HOST_ACCESS=1 "LD_PRELOAD=$fake_ucx")
    fi
    run "$name" 2 "$fake_ldp" "${envs[@]}" --
    extra_args=("${saved_extra[@]}")
    ok=0
    problems=$(fault_check "$name" "$fn" 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
done

# The same for a nonblocking call through CUDA IPC (xccl_mpi_gpu_user -N,
# CUDA IPC at every size): an event query of a call run from progress
# fails; the flags still go up, the rank's wait returns MPI_ERR_INTERN
# naming it, nobody hangs.
name=fake.fault.cuEventQuery.ipc_nonblocking
saved_extra=("${extra_args[@]}")
extra_args+=(--mca coll_xccl_verbose 1)
PROG=$user_prog
PROG_ARGS=(-N)
run "$name" 2 "$fake_ldp" FAKE_CUDA_FAIL=cuEventQuery:30 --
PROG=
PROG_ARGS=()
extra_args=("${saved_extra[@]}")
ok=0
problems=$(fault_check "$name" cuEventQuery 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# User-style use of device buffers (xccl_mpi_gpu_user): every collective,
# in place and not, sizes around every threshold, several iterations with
# new data each, the send buffer overwritten (cuMemsetD8) as soon as a call
# returns and results read back at once.  np 2, 3 (two fake devices), 4,
# each with CUDA IPC from 64 KiB (gpu_ipc_bytes 65536: both sides of a
# threshold), as configured (every size), and off (0): results and leaks as in (1), and the verbose lines
# must show calls through CUDA IPC in the first two and none in the last.
# user_run <name> <np> <ld_library_path or -> <config> [env VAR=value...]
user_run() {
    local name=$1 np=$2 ldp=$3 config=$4
    shift 4
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_verbose 1)
    case $config in
    ipc) extra_args+=(--mca coll_xccl_gpu_ipc_bytes 65536) ;;
    off) extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0) ;;
    esac
    PROG=$user_prog
    PROG_ARGS=("${user_test_args[@]}")
    case $config in
    nb) PROG_ARGS+=(-N) ;;
    nbmixed) PROG_ARGS+=(-N -M) ;;
    esac
    run "$name" "$np" "$ldp" "$@" --
    PROG=
    PROG_ARGS=()
    extra_args=("${saved_extra[@]}")
}
# user_check <name> <np> <config> <fake: 1 or 0>
user_check() {
    local name=$1 np=$2 config=$3 fake=$4 n
    check_result "$name" || return 1
    [[ $fake -eq 0 ]] || check_leaks "$name" "$np" || return 1
    n=$(grep -cE '^xccl: .* via=cuda_ipc' "$logdir/$name.log" || true)
    if [[ $config == off && $n -ne 0 ]]; then
        echo "$name: $n calls through cuda ipc with coll_xccl_gpu_ipc_bytes 0"
        return 1
    fi
    if [[ $config == nbmixed && $n -ne 0 ]]; then
        echo "$name: $n calls through cuda ipc with a rank on host buffers"
        return 1
    fi
    if [[ $config == nb ]] && ! grep -qE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log"; then
        echo "$name: no nonblocking call through cuda ipc"
        return 1
    fi
    if [[ $fake -eq 1 && $config != off && $config != nbmixed && $n -eq 0 ]]; then
        echo "$name: no call through cuda ipc"
        return 1
    fi
    echo "$name: $(grep -E '^RESULT: ' "$logdir/$name.log" | tail -n 1), $n calls through cuda ipc, ${run_s} s"
}
for np in "${user_nps[@]}"; do
    devices=1
    [[ $np -ne 3 ]] || devices=2
    for config in ipc default off; do
        name=fake.user.np$np.$config
        user_run "$name" "$np" "$fake_ldp" "$config" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices
        ok=0
        problems=$(user_check "$name" "$np" "$config" 1 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
    done
done

# Nonblocking (xccl_mpi_gpu_user -N): the iterations of a case in flight
# together, the last one blocking behind them; np 2 and 4 on one fake
# device (leader form), np 3 on two and np 4 on four (one rank per GPU,
# the production case: mesh, GPU events), as configured: nonblocking calls
# must go through CUDA IPC; np 3 with rank 1 on host buffers (-M): none
# can, every call must still be right (the host paths, started from
# progress).
for v in "2 1 nb" "3 2 nb" "4 1 nb" "4 4 nb" "3 2 nbmixed"; do
    read -r np devices config <<<"$v"
    name=fake.user.np$np.d$devices.$config
    user_run "$name" "$np" "$fake_ldp" "$config" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices
    ok=0
    problems=$(user_check "$name" "$np" "$config" 1 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
done

# The eight further collectives (xccl_mpi_gpu_colls): reduce, barrier,
# allgatherv, alltoallv, gather, gatherv, scatter, scatterv, blocking and
# nonblocking, on device buffers with guards in the gaps, insignificant
# buffers NULL, send buffers overwritten as soon as a call is done, calls of
# every kind in flight together, and a training step (allreduce, reduce,
# gather, alltoallv, barrier).  np 2 and 4 on one fake device, each with
# CUDA IPC from 64 KiB, as configured (every size) and off, and "carried":
# xccl's own algorithms forced (auto hands most of these calls to the
# fallback, on host copies), staged in pieces of 4 KiB, CUDA IPC off (it
# would take most of them first).  Results and leaks as in (1); with CUDA
# IPC off no call through it, otherwise the step's
# allreduce at least, and with CUDA IPC from 64 KiB and as configured
# reduce, gather, gatherv, scatter, scatterv and allgatherv, blocking and
# nonblocking, through CUDA IPC on every rank (their leader form: one
# device); carried: each of the sixteen calls ran one of xccl's
# algorithms, none went to the fallback; mixed (-M: the last rank on host
# buffers, as configured): results and leaks, and no call through CUDA IPC
# (on one device a rank on host buffers can take part in none); mesh (two
# fake devices, as configured): the mesh form with interprocess events,
# checked as the configured run.
colls_prog=$bindir/xccl_mpi_gpu_colls
[[ -x $colls_prog ]] || { echo "$0: no $colls_prog (make check builds it)" >&2; exit 2; }
colls_names=(reduce barrier allgatherv alltoallv gather gatherv scatter scatterv)
colls_ipc=(reduce gather gatherv scatter scatterv allgatherv)
# check_colls_ipc <name> <np>: every rank ran each of colls_ipc, blocking
# and nonblocking, through CUDA IPC at least once.
check_colls_ipc() {
    local name=$1 np=$2 coll f r
    for coll in "${colls_ipc[@]}"; do
        for f in "$coll" "i$coll"; do
            for ((r = 0; r < np; r++)); do
                grep -qE "^xccl: $f comm=[0-9]+ rank=$r bytes=[0-9]+ algo=(leader|mesh) .* via=cuda_ipc" \
                    "$logdir/$name.log" ||
                    { echo "$name: rank $r: no $f call through cuda ipc"; return 1; }
            done
        done
    done
}
# check_carried <name>: every blocking and nonblocking form has algo=
# lines and none has fallback= lines.
check_carried() {
    local name=$1 coll f n
    for coll in "${colls_names[@]}"; do
        for f in "$coll" "i$coll"; do
            grep -qE "^xccl: $f comm=[0-9]+ rank=[0-9]+ bytes=[0-9]+ algo=" "$logdir/$name.log" ||
                { echo "$name: no $f call ran an algorithm of xccl's"; return 1; }
            n=$(grep -cE "^xccl: $f comm=[0-9]+ rank=[0-9]+ bytes=[0-9]+ fallback=" \
                "$logdir/$name.log" || true)
            [[ $n -eq 0 ]] || { echo "$name: $n $f calls went to the fallback"; return 1; }
        done
    done
}
for np in 2 4; do
    for config in ipc default off carried mixed mesh; do
        name=fake.colls.np$np.$config
        saved_extra=("${extra_args[@]}")
        extra_args+=(--mca coll_xccl_verbose 1)
        case $config in
        ipc) extra_args+=(--mca coll_xccl_gpu_ipc_bytes 65536) ;;
        off) extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0) ;;
        carried)
            extra_args+=(--mca coll_xccl_reduce_algorithm binomial
                --mca coll_xccl_allgatherv_algorithm ring --mca coll_xccl_alltoallv_algorithm pairwise
                --mca coll_xccl_gather_algorithm binomial --mca coll_xccl_gatherv_algorithm linear
                --mca coll_xccl_scatter_algorithm binomial --mca coll_xccl_scatterv_algorithm linear
                --mca coll_xccl_gpu_chunk_bytes 4096 --mca coll_xccl_gpu_ipc_bytes 0)
            ;;
        esac
        PROG=$colls_prog
        PROG_ARGS=()
        [[ $config != mixed ]] || PROG_ARGS=(-M)
        devices=1
        [[ $config != mesh ]] || devices=2
        run "$name" "$np" "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices --
        PROG_ARGS=()
        PROG=
        extra_args=("${saved_extra[@]}")
        ok=0
        problems=$({
            check_result "$name" && check_leaks "$name" "$np" &&
            n=$(grep -cE '^xccl: .* via=cuda_ipc' "$logdir/$name.log" || true) &&
            if [[ $config == off || $config == carried || $config == mixed ]]; then
                [[ $n -eq 0 ]] ||
                    { echo "$name: $n calls through cuda ipc ($config)"; false; }
            else
                [[ $n -gt 0 ]] || { echo "$name: no call through cuda ipc"; false; }
            fi &&
            { [[ $config != carried ]] || check_carried "$name"; } &&
            { [[ $config != ipc && $config != default && $config != mesh ]] ||
                check_colls_ipc "$name" "$np"; } &&
            echo "$name: $(grep -E '^RESULT: ' "$logdir/$name.log" | tail -n 1)," \
                "$n calls through cuda ipc, ${run_s} s"
        } 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
    done
done

# Nonblocking device calls from two threads at once, a communicator each
# (xccl_mpi_gpu_threads, MPI_THREAD_MULTIPLE): np 2 on one fake device, np
# 3 on two; right results, leaks as in (1), and calls through CUDA IPC.
for v in "2 1" "3 2"; do
    read -r np devices <<<"$v"
    name=fake.threads.np$np
    run_prog "$name" "$np" 1 "$bindir/xccl_mpi_gpu_threads" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices
    ok=0
    problems=$({
        check_result "$name" && check_leaks "$name" "$np" &&
        { grep -qE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log" ||
            { echo "$name: no nonblocking call through cuda ipc"; false; }; } &&
        echo "$name: $(grep -E '^RESULT: ' "$logdir/$name.log" | tail -n 1)," \
            "$(grep -cE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log") nonblocking calls through cuda ipc"
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
done

# Communicators made, used once on device buffers (blocking, through CUDA
# IPC) and freed, then host calls on the next one of that context id
# (xccl_mpi_gpu_churn): right results, and no communicator freed while its
# shared-memory vote ran (its peers' vote messages would be left behind
# under the tags of that context id: coll_xccl_level_vote.c, vote_gen).  np 2 on
# one fake device, np 3 on two.
for v in "2 1" "3 2"; do
    read -r np devices <<<"$v"
    name=fake.churn.np$np
    run_prog "$name" "$np" 2 "$bindir/xccl_mpi_gpu_churn" FAKE_CUDA_DEVICES=$devices
    ok=0
    problems=$({
        check_result "$name" &&
        { grep -qE '^xccl: allreduce .* via=cuda_ipc' "$logdir/$name.log" ||
            { echo "$name: no allreduce through cuda ipc"; false; }; } &&
        { ! grep -E 'freed while its shared-memory vote ran' "$logdir/$name.log" ||
            { echo "$name: a communicator was freed while its vote ran"; false; }; } &&
        { ! grep -E 'unexpected tag-receive descriptor .* was not matched' "$logdir/$name.log" ||
            { echo "$name: messages left unmatched in UCX at the end"; false; }; } &&
        echo "$name: $(grep -E '^RESULT: ' "$logdir/$name.log" | tail -n 1)," \
            "$(grep -cE '^xccl: allreduce .* via=cuda_ipc' "$logdir/$name.log") calls through cuda ipc," \
            "$(grep -cE 'shared-memory level on' "$logdir/$name.log") level-on decisions"
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
done

# xccl_bench on device buffers as the GPU machine's bench phase runs it
# (-g): the xccl column nonblocking (-i), the staged column waiting for its
# upload (-S), 8 B .. 32 KiB, np 2 on one fake device: every xccl result checked by the
# bench, and its nonblocking calls through CUDA IPC.
name=fake.bench.np2
PROG_ARGS=(-g -i -S -b 8 -e 32K -f 8 -r 2)
run_prog "$name" 2 1 "$bindir/xccl_bench" FAKE_CUDA_DEVICES=1
PROG_ARGS=()
ok=0
problems=$({
    check_bench "$name" &&
    { grep -qE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log" ||
        { echo "$name: no nonblocking call through cuda ipc"; false; }; } &&
    echo "$name: $(grep -cE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log") nonblocking calls through cuda ipc"
} 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# The driver calls of a warm CUDA IPC call (xccl_gpu_budget.c, counted by
# the fake): per call no IPC handle opened or exported, at most one host
# synchronisation (none in a nonblocking call or a persistent start), a bounded number of calls that does not grow with the
# size, no copy between host and device memory (nothing staged: every
# counted call went through CUDA IPC), and per persistent start no
# cuPointerGetAttribute(s) (the init found out where the buffers live); np 2 and 4 on one fake device (the
# leader form), np 3 on two (the mesh): the summary lines at verbose 1 name
# the form.
for np in 2 3 4; do
    devices=1
    [[ $np -ne 3 ]] || devices=2
    name=fake.budget.np$np
    run_prog "$name" "$np" 1 "$bindir/xccl_gpu_budget" FAKE_CUDA_DEVICES=$devices
    ok=0
    problems=$(
        check_result "$name" || exit 1
        form=leader
        [[ $np -ne 3 ]] || form=mesh
        grep -qE "summary allreduce rank=[0-9]+ calls=[0-9]+ .* $form=[1-9]" "$logdir/$name.log" ||
            { echo "$name: no allreduce through the $form form in the summaries"; exit 1; }
        grep -E '^(budget|FAIL):' "$logdir/$name.log" | sed 's/^/   /'
    ) || ok=1
    finish "$name" "$ok" "$problems"
done

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
