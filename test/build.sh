#!/bin/bash
# Shared by test/run_all.sh and test/demo.sh: Debian packages, then an
# out-of-tree build in ./build.  Arguments go to configure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/test/deps.sh"
cd "$top"
./autogen.sh
mkdir -p build
cd build
../configure "$@"
make -j"$(nproc)"
