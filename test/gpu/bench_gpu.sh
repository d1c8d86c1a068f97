#!/usr/bin/env bash
# xccl on CUDA device buffers vs the way a user of a non-CUDA-aware MPI does
# it (cuMemcpyDtoH, stock collective, cuMemcpyHtoD): `xccl_bench -g` at
# np 1, 2 and 4 - all ranks on one node, several ranks per GPU when there
# are fewer GPUs than ranks (the point of the exercise) - for allreduce,
# allgather, reduce_scatter, alltoall and bcast, 64 KiB .. 64 MiB.  xccl is
# loaded as test/gpu/run_gpu_tests.sh loads it.  Writes one table per np to
# the output directory and prints them, then the goal line: allreduce at
# >= 1 MiB with 2 and 4 ranks, staged/xccl >= 2.
#
# usage: bench_gpu.sh [<builddir> [<outdir>]]
#   <builddir>  has xccl_bench and component/mca_coll_xccl.so
#               (default: $XCCL_BUILDDIR, else the current directory)
#   <outdir>    default: $BENCH_OUT_DIR, else <builddir>/bench-gpu-<date>
#
# Works from the Open MPI of test/gpu/device_bundle.sh (a machine without
# Open MPI):   . test/gpu/.device/env.sh && test/gpu/bench_gpu.sh build-bench
# mpirun is whatever `mpirun` PATH gives (env.sh puts the bundle's first).
#
# Environment:
#   MPIRUN            mpirun command (default: mpirun from PATH)
#   MPIRUN_ARGS       extra mpirun arguments, split on whitespace
#   OMPI_COMPONENT_DIR  Open MPI's own components (env.sh sets it; default
#                     /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3)
#   XCCL_COMPONENT_DIR  the xccl under test (default <builddir>/component)
#   BENCH_NPS         np values (default "1 2 4")
#   BENCH_COLLS       collectives (default allreduce,allgather,reduce_scatter,alltoall,bcast)
#   BENCH_MIN, BENCH_MAX  sizes (default 64K, 64M)
#   BENCH_ARGS        more xccl_bench arguments, e.g. "-p" (pinned staging),
#                     "-r 9" (rounds), "-q"
#   BENCH_TIMEOUT     seconds per run (default 900)
#   BENCH_STAGED=0    skip the two np 2 runs of the staged path (CUDA IPC
#                     off) with and without overlapped copies
#                     (BENCH_STAGED_COLLS: default allreduce,allgather,bcast)
#   BENCH_FAKE=1      use <builddir>/test/gpu/fake/libcuda.so.1 (no GPU: the
#                     code paths only, the timings mean nothing)
# Exit: 0 every run passed its checks (the goal is reported, not enforced),
#       1 a run failed, 2 usage, 77 no CUDA driver/device ("SKIP: ...").
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/ompi_env.sh"

bindir=${1:-${XCCL_BUILDDIR:-$PWD}}
[[ -d $bindir ]] || { echo "$0: no directory $bindir" >&2; exit 2; }
bindir=$(cd "$bindir" && pwd)
prog=$bindir/xccl_bench
compdir=${XCCL_COMPONENT_DIR:-$bindir/component}
[[ -x $prog ]] || { echo "$0: no $prog (make xccl_bench in the build dir)" >&2; exit 2; }
[[ -e $compdir/mca_coll_xccl.so ]] || { echo "$0: no $compdir/mca_coll_xccl.so" >&2; exit 2; }
compdir=$(cd "$compdir" && pwd)
outdir=${2:-${BENCH_OUT_DIR:-$bindir/bench-gpu-$(date +%Y%m%d-%H%M%S)}}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

read -r -a mpirun <<<"${MPIRUN:-mpirun}"
command -v "${mpirun[0]}" >/dev/null ||
    { echo "$0: no ${mpirun[0]} in PATH (on the GPU machine: . test/gpu/.device/env.sh)" >&2; exit 2; }
read -r -a extra_args <<<"${MPIRUN_ARGS:-}"
read -r -a bench_args <<<"${BENCH_ARGS:-}"
read -r -a nps <<<"${BENCH_NPS:-1 2 4}"
colls=${BENCH_COLLS:-allreduce,allgather,reduce_scatter,alltoall,bcast}
minb=${BENCH_MIN:-64K}
maxb=${BENCH_MAX:-64M}
tmo=${BENCH_TIMEOUT:-900}

if [[ ${BENCH_FAKE:-0} == 1 ]]; then
    fakedir=$bindir/test/gpu/fake
    [[ -e $fakedir/libcuda.so.1 ]] || { echo "$0: no $fakedir/libcuda.so.1" >&2; exit 2; }
    export LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# Open MPI's components first, then the xccl under test (a private directory
# of links when an installed xccl would shadow it).
xccl_ompi_env "$compdir" "$outdir" benchmarking
common_args=("${ompi_base_args[@]}"
    --mca op ^avx)
[[ -z ${LD_LIBRARY_PATH:-} ]] || common_args+=(-x LD_LIBRARY_PATH)

# What ran where, for the report.
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(uname -n) $(uname -r)"
    echo "mpirun: $(command -v "${mpirun[0]}")"
    echo "xccl component: $compdir/mca_coll_xccl.so"
    echo "xccl_bench: $prog"
    rev=$(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || true)
    [[ -z $rev ]] || echo "source: $rev"
    [[ ${BENCH_FAKE:-0} != 1 ]] || echo "driver: FAKE ($bindir/test/gpu/fake/libcuda.so.1)"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi -L 2>&1 | sed 's/^/gpu: /'
        nvidia-smi --query-gpu=driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader \
            2>&1 | sed 's/^/gpu driver, max clocks: /'
    fi
    echo "command: mpirun ${common_args[*]} ${extra_args[*]} -np N $prog -g -c $colls -b $minb -e $maxb ${bench_args[*]}"
} >"$outdir/info.txt"
cat "$outdir/info.txt"

failed=0
declare -A rcs=()
for np in "${nps[@]}"; do
    out=$outdir/np$np.txt err=$outdir/np$np.err
    echo
    echo "== xccl_bench -g, np=$np -> $out"
    rc=0
    timeout -k 10 "$tmo" "${mpirun[@]}" "${common_args[@]}" "${extra_args[@]}" -np "$np" \
        "$prog" -g -c "$colls" -b "$minb" -e "$maxb" "${bench_args[@]}" >"$out" 2>"$err" || rc=$?
    rcs[$np]=$rc
    cat "$out"
    if [[ $rc -eq 77 ]]; then
        grep -q '^SKIP: ' "$out" || echo "SKIP: xccl_bench exit 77"
        exit 77
    fi
    if [[ $rc -ne 0 ]]; then
        failed=1
        [[ $rc -ne 124 ]] || echo "TIMEOUT after $tmo s" | tee -a "$err"
        echo "np=$np: exit status $rc; stderr ($err):"
        tail -n 30 "$err" | sed 's/^/   | /'
    fi
done

# The staged path (what calls across nodes take; CUDA IPC off here) with
# its copies overlapping the algorithm (pieces of coll_xccl_gpu_chunk_bytes)
# and without (chunk 0: everything in, then the algorithm, then everything
# out), each against the user's staging in its own run: compare the ratios.
if [[ ${BENCH_STAGED:-1} == 1 && " ${nps[*]} " == *" 2 "* ]]; then
    for variant in pipelined:1M whole:0; do
        tag=${variant%%:*} chunk=${variant#*:}
        out=$outdir/np2-staged-$tag.txt err=$outdir/np2-staged-$tag.err
        echo
        echo "== xccl_bench -g, np=2, CUDA IPC off, staging $tag (gpu_chunk_bytes $chunk) -> $out"
        rc=0
        timeout -k 10 "$tmo" "${mpirun[@]}" "${common_args[@]}" "${extra_args[@]}" \
            --mca coll_xccl_gpu_ipc_bytes 0 --mca coll_xccl_gpu_chunk_bytes "$chunk" -np 2 \
            "$prog" -g -c "${BENCH_STAGED_COLLS:-allreduce,allgather,bcast}" -b 1M -e "$maxb" \
            "${bench_args[@]}" >"$out" 2>"$err" || rc=$?
        cat "$out"
        if [[ $rc -ne 0 ]]; then
            failed=1
            echo "staged $tag: exit status $rc; stderr ($err):"
            tail -n 30 "$err" | sed 's/^/   | /'
        fi
    done
fi

# The goal: allreduce, sizes >= 1 MiB, np 2 and 4: staged/xccl >= 2, checks ok.
echo
echo "== goal: allreduce staged/xccl >= 2 at >= 1 MiB (np 2, 4), results ok"
for np in "${nps[@]}"; do
    [[ $np -ge 2 ]] || continue
    awk -v np="$np" -v rc="${rcs[$np]}" '
        /^# allreduce  np=/ { in_ar = 1; next }
        /^# [a-z_]+  np=/   { in_ar = 0 }
        in_ar && $0 !~ /^#/ && NF >= 10 && $1 + 0 >= 1048576 {
            n++; r = $9 + 0
            if (n == 1 || r < min) { min = r; at = $1 }
            if ($10 != "ok/ok") bad++
        }
        END {
            if (!n) { printf "np=%d: no allreduce rows >= 1 MiB (exit %s)\n", np, rc; exit }
            printf "np=%d: %d sizes, min ratio %.2f (at %d B), checks %s, exit %s: %s\n",
                   np, n, min, at, bad ? bad " not ok/ok" : "ok", rc,
                   (min >= 2 && !bad && rc == 0) ? "MET" : "NOT MET"
        }' "$outdir/np$np.txt"
done | tee "$outdir/goal.txt"
echo "tables: $outdir"
exit "$failed"
