#!/bin/bash
# The whole test suite from a fresh Debian 12 machine (root): packages,
# build with -Werror, then `make check` (Check unit tests of the algorithms
# and kernels, MPI integration tests under mpirun at np 1, 2, 3, 4, 7 and
# the bad-input tests) against Debian 12's Open MPI 4.1.4; then the same
# against Open MPI 5.0.7 in a Debian 13 root made with debootstrap
# (test/ompi5/run_trixie.sh: root and debootstrap needed; with CI=true it
# must run, without, it is skipped with a note; XCCL_SKIP_OMPI5=1 skips it
# outside CI).  Builds in ./build; exit status is the suite's.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/test/build.sh" --enable-werror
cd "$top/build"
if ! make -j1 check; then
    # show why, then fail
    for f in test-suite.log test/mpi/mpi_tests.sh.log; do
        [[ -f $f ]] && tail -n 80 "$f"
    done
    exit 1
fi
for f in test_*.log test/mpi/mpi_tests.sh.log test/gpu/run_gpu_tests.sh.log; do
    # (a skipped test's log has no such line)
    [[ -f $f ]] && { grep -E '^(100%|[0-9]+%: Checks|mpi-tests:|gpu-tests:|SKIP)' "$f" || true; } |
        sed "s|^|$f: |"
done
echo "run_all: Open MPI 4.1 (Debian 12): all tests passed"

# ------------------------------------------------------------ Open MPI 5.0
ompi5_why=
if [[ ${XCCL_SKIP_OMPI5:-0} == 1 ]]; then
    ompi5_why="XCCL_SKIP_OMPI5=1"
elif [[ $(id -u) -ne 0 ]]; then
    ompi5_why="not root (debootstrap, chroot and mount need it)"
elif ! command -v debootstrap >/dev/null; then
    ompi5_why="debootstrap is not installed"
fi
if [[ -n $ompi5_why ]]; then
    if [[ ${CI:-} == true ]]; then
        echo "run_all: FAILED: the Open MPI 5 stage cannot run in CI: $ompi5_why"
        exit 1
    fi
    echo "run_all: SKIPPED the Open MPI 5 stage (Debian 13 root): $ompi5_why"
    exit 0
fi
"$top/test/ompi5/run_trixie.sh" || { echo "run_all: FAILED in the Open MPI 5 stage"; exit 1; }
echo "run_all: all tests passed (Open MPI 4.1.4 on Debian 12, Open MPI 5.0.7 in Debian 13)"
