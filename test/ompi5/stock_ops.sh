#!/bin/bash
# `make check` entry: stock_ops (test/ompi5/stock_ops.c) at np 2 with the
# stock collectives only: the reductions xccl works around are still wrong
# in this Open MPI exactly when coll_xccl_compat.h says so.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
b=${XCCL_BUILDDIR:?run through make check}
# shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
. "$here/../lib/ompi_env.sh"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/xccl-stock-ops.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
xccl_ompi_env "$b/component" "$scratch" testing
read -r -a mpirun <<<"${MPIRUN:-mpirun}"
# the stock stack, as an application without xccl sees it
args=()
for ((i = 0; i < ${#ompi_base_args[@]}; i++)); do
    if [[ ${ompi_base_args[i]} == --mca && ${ompi_base_args[i + 1]} == coll ]]; then
        args+=(--mca coll tuned,basic,libnbc,self)
        i=$((i + 2))
    else
        args+=("${ompi_base_args[i]}")
    fi
done
out=$(timeout -k 10 120 "${mpirun[@]}" "${args[@]}" -np 2 "$b/stock_ops" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -vE 'process_repository_item|^\s+(lib)?pmix_mca_|^or$'
if [[ $rc -ne 0 ]] || ! grep -q '^RESULT: agree$' <<<"$out"; then
    echo "stock-ops: FAILED (exit $rc)"
    exit 1
fi
echo "stock-ops: $(grep '^STOCK ' <<<"$out")"
