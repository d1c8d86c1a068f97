#!/bin/bash
# The whole test suite from a fresh Debian 12 machine (root): packages,
# build with -Werror, then `make check` (Check unit tests of the algorithms
# and kernels, MPI integration tests under mpirun at np 1, 2, 3, 4, 7 and
# the bad-input tests) against Debian 12's Open MPI 4.1.4; then the Debian
# package, built here, installed into a fresh Debian 12 root and used there
# (test/deb/deb_check.sh bookworm); then the suite and the package against
# Open MPI 5.0.7 in a Debian 13 root made with debootstrap
# (test/ompi5/run_trixie.sh).  The last two need root and debootstrap: with
# CI=true they must run, without, they are skipped with a note; outside CI
# XCCL_SKIP_DEB=1 and XCCL_SKIP_OMPI5=1 skip them.  Builds in ./build;
# exit status is the suite's.
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

# The stages below make Debian roots: root and debootstrap.
root_why=
if [[ $(id -u) -ne 0 ]]; then
    root_why="not root (debootstrap, chroot and mount need it)"
elif ! command -v debootstrap >/dev/null; then
    root_why="debootstrap is not installed"
fi
# skip_or_fail <stage> <why>: in CI a stage that cannot run fails the run
skip_or_fail() {
    if [[ ${CI:-} == true ]]; then
        echo "run_all: FAILED: the $1 stage cannot run in CI: $2"
        exit 1
    fi
    echo "run_all: SKIPPED the $1 stage: $2"
}

# ------------------------------------------------------------ Debian 12 package
# The .deb built here, lintian, installed with apt-get into a fresh Debian
# 12 root and used there by default, purged (test/deb/deb_check.sh).
deb_why=$root_why
[[ ${XCCL_SKIP_DEB:-0} == 1 ]] && deb_why="XCCL_SKIP_DEB=1"
if [[ -n $deb_why ]]; then
    skip_or_fail "Debian 12 package" "$deb_why"
else
    "$top/test/deb/deb_check.sh" bookworm || { echo "run_all: FAILED in the Debian 12 package stage"; exit 1; }
fi

# ------------------------------------------------------------ Open MPI 5.0
ompi5_why=$root_why
[[ ${XCCL_SKIP_OMPI5:-0} == 1 ]] && ompi5_why="XCCL_SKIP_OMPI5=1"
if [[ -n $ompi5_why ]]; then
    skip_or_fail "Open MPI 5 (Debian 13 root)" "$ompi5_why"
    exit 0
fi
"$top/test/ompi5/run_trixie.sh" || { echo "run_all: FAILED in the Open MPI 5 stage"; exit 1; }
echo "run_all: all tests passed (Open MPI 4.1.4 on Debian 12, Open MPI 5.0.7 in Debian 13, the Debian package on both)"
