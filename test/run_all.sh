#!/bin/bash
# The whole test suite from a fresh Debian 12 machine (root): packages,
# build with -Werror, then `make check` (Check unit tests of the algorithms
# and kernels, MPI integration tests under mpirun at np 1, 2, 3, 4, 7 and
# the bad-input tests).  Builds in ./build; exit status is the suite's.
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
echo "run_all: all tests passed"
