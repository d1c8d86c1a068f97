#!/bin/bash
# The include arrows between the source directories (docs/design.md):
#
#   ompi_coll_xccl -> algos, topo, ucx_glue, segment, gpu, base
#   algos -> base        gpu -> base        ucx_glue -> gpu (at most)
#   base, topo, segment -> nothing of ours
#
# A quoted include resolves to a directory by its first path component
# ("base/xccl_base.h"), else to the including file's own directory when
# the header is there, else to the directory that holds a header of that
# name (algos/ is on the include path); anything else is not ours.  tools/
# and test/ sit above everything and are not checked.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
dirs=(ompi_coll_xccl algos topo ucx_glue segment gpu base)
declare -A allowed=(
    [ompi_coll_xccl]="algos topo ucx_glue segment gpu base"
    [algos]="base"
    [gpu]="base"
    [ucx_glue]="gpu"
    [topo]=""
    [segment]=""
    [base]=""
)
declare -A owner   # header name -> directory
for d in "${dirs[@]}"; do
    for h in "$d"/*.h; do
        [[ -e $h ]] && owner[$(basename "$h")]=$d
    done
done
fail=0
for d in "${dirs[@]}"; do
    for f in "$d"/*.c "$d"/*.h "$d"/*.cu; do
        [[ -e $f ]] || continue
        while read -r inc; do
            first=${inc%%/*}
            if [[ $inc == */* ]]; then
                to=$first
                [[ " ${dirs[*]} " == *" $to "* ]] || continue
            elif [[ -e $d/$inc ]]; then
                continue
            else
                to=${owner[$inc]:-}
                [[ -n $to ]] || continue
            fi
            [[ $to == "$d" ]] && continue
            if [[ " ${allowed[$d]} " != *" $to "* ]]; then
                echo "FAIL: $f includes \"$inc\" ($d -> $to)"
                fail=1
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
done
[[ $fail -eq 0 ]] && echo "ok: every include between directories follows an allowed arrow"
exit $fail
