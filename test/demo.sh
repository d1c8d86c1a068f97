#!/bin/bash
# The demo from a fresh Debian 12 machine (root): packages, build, install
# into Open MPI's component directory, then xccl_bench on 4 local ranks,
# comparing xccl with the stock Open MPI collectives in the same run.
# Extra arguments go to xccl_bench (e.g. -e 16M for a shorter sweep).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/test/build.sh"
cd "$top/build"
make install
mpirun --allow-run-as-root --oversubscribe -np 4 \
    --mca coll xccl,tuned,basic,libnbc,self \
    --mca mpi_yield_when_idle 1 \
    ./xccl_bench "$@"
