#!/usr/bin/env bash
# The GPU unit tests without MPI, under `make check`: test_gpu_classify
# (classification, staging sets), test_gpu_queue (a call's copies and
# reductions coalesced) and, where nvcc built it, test_gpu_kernels (every
# GPU reduction kernel against the host's), each
#   (1) against the fake libcuda.so.1 of <builddir>/test/gpu/fake: must pass;
#   (2) against the real driver: must pass where there is one, else prints
#       "SKIP real GPU: <reason>" (not a pass).
# usage: run_gpu_unit.sh [<builddir>]   (default $XCCL_BUILDDIR)
# Exit: 0 all runs passed (real ones possibly skipped), 1 otherwise.
set -uo pipefail

bindir=${1:-${XCCL_BUILDDIR:-}}
[[ -n $bindir && -d $bindir ]] || { echo "usage: $0 <builddir>" >&2; exit 2; }
fakedir=$bindir/test/gpu/fake
[[ -e $fakedir/libcuda.so.1 ]] || { echo "no $fakedir/libcuda.so.1 (make check builds it)"; exit 1; }

# LD_LIBRARY_PATH without the fake, for the real driver
real_ldp=$(tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}" | grep -vxF "$fakedir" | paste -sd: -)

# The fake's delays: a new seed each time unless given, printed for replay.
export FAKE_CUDA_SEED=${FAKE_CUDA_SEED:-$(( $(date +%s%N) / 1000 % 1000000 ))}
echo "fake_cuda seed: $FAKE_CUDA_SEED"

failed=0
for t in test_gpu_classify test_gpu_queue test_gpu_kernels; do
    if [[ ! -x $bindir/$t ]]; then
        echo "== $t: not built here (test_gpu_kernels needs nvcc at configure time)"
        [[ $t == test_gpu_kernels ]] || failed=1
        continue
    fi
    echo "== $t, fake driver"
    rc=0
    LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$bindir/$t" || rc=$?
    if [[ $rc -ne 0 ]]; then
        echo "$t against the fake: exit status $rc"
        failed=1
    fi
    echo "== $t, real driver"
    rc=0
    out=$(LD_LIBRARY_PATH=$real_ldp "$bindir/$t" 2>&1) || rc=$?
    printf '%s\n' "$out"
    if [[ $rc -eq 77 ]]; then
        echo "SKIP real GPU: $(grep -m1 '^SKIP: ' <<<"$out" | cut -c7-)"
    elif [[ $rc -ne 0 ]]; then
        echo "$t against the real driver: exit status $rc"
        failed=1
    fi
done
exit "$failed"
