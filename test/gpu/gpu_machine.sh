#!/usr/bin/env bash
# What a GPU machine runs, one command per phase (the
# machine has CUDA but no Open MPI, and a command may run 10 minutes):
#
#   test/gpu/gpu_machine.sh <builddir> tests [<outdir>]
#       run_gpu_unit.sh (classification, staging sets, every GPU kernel:
#       fake driver, then the real one) and run_gpu_tests.sh at np 1, 2, 4
#       (xccl_mpi_gpu and xccl_mpi_gpu_user: fake, then the real driver)
#   test/gpu/gpu_machine.sh <builddir> bench [<outdir>]
#       bench_gpu.sh (xccl_bench -g at np 1, 2, 4 against the user's own
#       staging, the goal line, the staged path pipelined and whole);
#       BENCH_* variables pass through (e.g. BENCH_MAX=16M to be quicker)
#   test/gpu/gpu_machine.sh <builddir> transport [<outdir>]
#       the CUDA IPC transport on the real driver: xccl_mpi_gpu_user at
#       np 2, 3 and 4 with CUDA IPC at every size, then xccl_bench -g at np
#       2 and 4 from 8 B to 64 MiB with CUDA IPC at every size, against
#       the user's staging and a device-to-device copy of each size (the
#       d2d and bound columns), without MPS and, where the machine has
#       nvidia-cuda-mps-control, under MPS (TRANSPORT_MPS=0: not); the
#       user test also nonblocking (-N; -M: a rank on host buffers) and the
#       bench once more with -i (nonblocking calls);
#       TRANSPORT_BENCH_COLLS (TRANSPORT_MPS_COLLS under MPS),
#       TRANSPORT_BENCH_ARGS, TRANSPORT_TIMEOUT (seconds per run, default 150)
#   test/gpu/gpu_machine.sh <builddir> host [<outdir>]
#       host buffers on the machine's cores: test/bench/compare_stacks.sh
#       (xccl against tuned and sm, interleaved) at HOST_NPS (default
#       "8 16"), HOST_BENCH_ARGS (xccl_bench options), HOST_TIMEOUT (per np)
#
# <outdir> defaults to $OUT (the device tool brings it back: at most 8
# files, so each phase writes <phase>.txt, its summary, and
# <phase>-logs.tar.gz, everything else; info.txt says what ran where).
#
# Here, before the GPU machine's runs (Debian 12, as root):
#   test/gpu/device_bundle.sh                       # Open MPI runtime
#   mkdir -p build-gpu && cd build-gpu && ../configure && make -j4 &&
#       make -j4 check TESTS= && cd ..               # nvcc: the kernels
# Then the device tool's run, from the repository root, with
#   carry: ["build-gpu", "test/gpu/.device/ompi-prefix", "test/gpu/.device/env.sh"]
#   command: test/gpu/gpu_machine.sh build-gpu tests
# (about 40 MiB travel; the limit is 64).
# Exit: the phase's exit status (0 passed; 77 no GPU found).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[[ $# -ge 2 ]] || { echo "usage: $0 <builddir> tests|bench|transport|host [<outdir>]" >&2; exit 2; }
bindir=$(cd "$1" && pwd) || exit 2
phase=$2
out=${3:-${OUT:-}}
[[ -n $out ]] || { echo "$0: no <outdir> and no \$OUT" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/xccl-gpu-run.XXXXXX")

# Open MPI from the bundle where it travelled (the Open MPI the build was
# made against, and the libraries of the unit tests: libsubunit), else the
# machine's own.  (The machine's own Open MPI may be another build, against
# which test_gpu_classify cannot load: the bundle comes first.)
if [[ -e $here/.device/env.sh ]]; then
    # shellcheck source=/dev/null
    . "$here/.device/env.sh" || { echo "$0: $here/.device/env.sh failed" >&2; exit 2; }
elif ! command -v mpirun >/dev/null; then
    echo "$0: no mpirun and no $here/.device/env.sh (device_bundle.sh)" >&2
    exit 2
fi

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(uname -n) $(uname -r); $(nproc) cores"
    echo "phase: $phase; build: $bindir"
    echo "source: $(git -C "$here" describe --always --dirty 2>/dev/null || echo '?')"
    echo "mpirun: $(command -v mpirun)"
    command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | sed 's/^/gpu: /'
    command -v nvidia-smi >/dev/null &&
        nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>&1 |
        sed 's/^/gpu driver, memory: /'
} >"$out/info.txt"
cat "$out/info.txt"

rc=0
case $phase in
tests)
    {
        r=0
        echo "== run_gpu_unit.sh"
        "$here/run_gpu_unit.sh" "$bindir" || r=1
        echo
        echo "== run_gpu_tests.sh (np 1 2 4)"
        GPU_TESTS_NPS="1 2 4" TEST_LOG_DIR=$work/gpu-tests XCCL_BUILDDIR=$bindir \
            "$here/run_gpu_tests.sh" "$bindir" "$bindir/component" || r=1
        exit $r
    } 2>&1 | tee "$work/tests.txt"
    rc=${PIPESTATUS[0]}
    # the summary: every verdict line
    grep -E '^(== |   passed|   FAILED|SKIP|gpu-tests:|RESULT|[0-9]+ reductions|100%|[0-9]+%: )' \
        "$work/tests.txt" >"$out/tests.txt"
    ;;
bench)
    BENCH_OUT_DIR=$work/bench "$here/bench_gpu.sh" "$bindir" 2>&1 | tee "$work/bench.txt"
    rc=${PIPESTATUS[0]}
    cp "$work/bench.txt" "$out/bench.txt"
    ;;
transport)
    tmo=${TRANSPORT_TIMEOUT:-150}
    {
        r=0
        # shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
        . "$here/../lib/ompi_env.sh"
        xccl_ompi_env "$bindir/component" "$work" testing
        for v in "2 " "3 " "4 " "2 -N" "4 -N" "3 -N -M"; do
            read -r np uargs <<<"$v"
            t=np$np${uargs// /}
            echo "== xccl_mpi_gpu_user np $np $uargs, cuda ipc at every size"
            # shellcheck disable=SC2086
            timeout -k 5 "$tmo" mpirun "${ompi_base_args[@]}" --mca op ^avx --mca coll_xccl_verbose 1 \
                --mca coll_xccl_gpu_ipc_bytes 1 -np "$np" "$bindir/xccl_mpi_gpu_user" $uargs \
                >"$work/user-$t.log" 2>&1 || r=1
            grep -E '^RESULT: ' "$work/user-$t.log" | tail -n 1
            echo "   $(grep -cE 'via=cuda_ipc' "$work/user-$t.log") calls through cuda ipc" \
                "($(grep -cE '^xccl: i[a-z_]+ .*via=cuda_ipc' "$work/user-$t.log") nonblocking), forms:" \
                "$(grep -oE 'algo=[a-z_]+ size=[0-9]+ via=cuda_ipc' "$work/user-$t.log" | sort | uniq -c | tr '\n' ';')"
            grep -E 'FAIL|wrong|error' "$work/user-$t.log" | head -n 5
        done
        bench() {     # <tag> <more mpirun arguments> [<collectives>]
            local tag=$1 more=$2 colls=${3:-${TRANSPORT_BENCH_COLLS:-allreduce,allgather,reduce_scatter,alltoall,bcast}}
            echo "== xccl_bench -g ($tag), np 2 4, cuda ipc at every size"
            BENCH_OUT_DIR="$work/bench-$tag" BENCH_NPS="2 4" BENCH_MIN=8 BENCH_MAX="${BENCH_MAX_OVERRIDE:-64M}" \
                BENCH_STAGED=0 BENCH_TIMEOUT="$tmo" BENCH_ARGS="${TRANSPORT_BENCH_ARGS:--r 3}" \
                BENCH_COLLS="$colls" \
                MPIRUN_ARGS="--mca coll_xccl_gpu_ipc_bytes 1 $more ${MPIRUN_ARGS:-}" \
                "$here/bench_gpu.sh" "$bindir" >"$work/bench-$tag.txt" 2>&1 || r=1
            cat "$work/bench-$tag.txt"
        }
        bench nomps ""
        # nonblocking (xccl_bench -i: MPI_I<collective> + MPI_Wait) against
        # the same staging; MPI_Wait should cost no more than the blocking call
        TRANSPORT_BENCH_ARGS="${TRANSPORT_BENCH_ARGS:--r 3} -i" bench nomps-nonblocking ""
        # small sizes against staging that waits for its upload (-S), as
        # xccl's result is on the device when the call returns
        TRANSPORT_BENCH_ARGS="${TRANSPORT_BENCH_ARGS:--r 3} -S" BENCH_MAX_OVERRIDE=64K \
            bench nomps-staged-sync ""
        if [[ ${TRANSPORT_MPS:-1} == 1 ]] && command -v nvidia-cuda-mps-control >/dev/null; then
            export CUDA_MPS_PIPE_DIRECTORY=$work/mps CUDA_MPS_LOG_DIRECTORY=$work/mps-log
            mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
            if timeout 10 nvidia-cuda-mps-control -d; then
                bench mps "-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY" "${TRANSPORT_MPS_COLLS:-}"
                echo quit | timeout 10 nvidia-cuda-mps-control || true
            else
                echo "MPS did not start"
            fi
        fi
        exit $r
    } 2>&1 | tee "$work/transport.txt"
    rc=${PIPESTATUS[0]}
    cp "$work/transport.txt" "$out/transport.txt"
    ;;
host)
    {
        r=0
        for np in ${HOST_NPS:-8 16}; do
            echo "== compare_stacks.sh np $np (xccl, tuned, sm; host buffers)"
            XCCL_BUILDDIR=$bindir timeout -k 5 "${HOST_TIMEOUT:-120}" "$here/../bench/compare_stacks.sh" \
                -n "$np" -R 1 -s tuned,sm -o "$work/host" -- \
                ${HOST_BENCH_ARGS:--c allreduce,allgather,reduce_scatter,alltoall,bcast -b 8 -e 16M -r 3} \
                >"$work/host-np$np.log" 2>&1 || r=1
            cat "$work/host/table-np$np.txt" 2>/dev/null || tail -n 20 "$work/host-np$np.log"
        done
        exit $r
    } 2>&1 | tee "$work/host.txt"
    rc=${PIPESTATUS[0]}
    cp "$work/host.txt" "$out/host.txt"
    ;;
*)
    echo "$0: phase '$phase': tests, bench, transport or host" >&2
    exit 2
    ;;
esac
tar -C "$work" -czf "$out/$phase-logs.tar.gz" . 2>/dev/null
rm -rf "$work"
echo "$phase: exit $rc; $out: $(ls "$out" | tr '\n' ' ')"
exit "$rc"
