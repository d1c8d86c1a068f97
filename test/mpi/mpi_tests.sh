#!/bin/bash
# `make check` entry for the MPI integration tests: runs them against the
# component just built (not an installed one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
builddir=${XCCL_BUILDDIR:?run through make check}
exec "$here/run_mpi_tests.sh" "$builddir" "$builddir/component"
