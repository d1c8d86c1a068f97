#!/bin/bash
# The arrows between the component's own files (ompi_coll_xccl/), as
# docs/design.md draws them: no circle.  A file and the header of the same
# name are one unit (coll_xccl_level.c + coll_xccl_level.h: "level"); an arrow
# runs from unit A to unit B where a file of A includes a header of B
# (quoted includes of ompi_coll_xccl/), or where A's object calls a
# function B's object defines (nm: A's undefined text symbols against B's
# defined ones; data such as the component's parameters is read by every
# unit and is not an arrow).  The units must sort (tsort): a circle fails
# and is printed.  Needs the build directory (objects in
# <builddir>/ompi_coll_xccl/.libs): $XCCL_BUILDDIR or the first argument.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${XCCL_BUILDDIR:-$top/build}}
src=$top/ompi_coll_xccl
objs=$build/ompi_coll_xccl/.libs
ls "$objs"/mca_coll_xccl_la-*.o >/dev/null 2>&1 || { echo "FAIL: no objects in $objs (build first)"; exit 1; }
unit() { local b; b=$(basename "$1"); b=${b#mca_coll_xccl_la-}; b=${b%.*}; echo "${b#coll_xccl_}"; }
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
# include arrows
for f in "$src"/*.c "$src"/*.h; do
    from=$(unit "$f")
    echo "$from $from" >>"$edges"
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"/]*\)".*/\1/p' "$f" | while read -r inc; do
        [[ -e $src/$inc ]] && echo "$from $(unit "$inc")" >>"$edges"
    done
done
# call arrows (objects of sources that exist: a build directory may keep
# the object of a file since renamed)
objects=()
for o in "$objs"/mca_coll_xccl_la-*.o; do
    [[ -e $src/coll_xccl_$(unit "$o").c ]] && objects+=("$o")
done
declare -A definer
for o in "${objects[@]}"; do
    u=$(unit "$o")
    while read -r sym; do definer[$sym]=$u; done < <(nm --defined-only -g "$o" | awk '$2 == "T" { print $3 }')
done
for o in "${objects[@]}"; do
    u=$(unit "$o")
    while read -r sym; do
        to=${definer[$sym]:-}
        [[ -n $to && $to != "$u" ]] && echo "$u $to" >>"$edges"
    done < <(nm -u "$o" | awk '{ print $2 }')
done
if ! out=$(tsort "$edges" 2>&1 >/dev/null) || [[ -n $out ]]; then
    echo "FAIL: the component's units form a circle (a unit above another also below it):"
    printf '%s\n' "$out" | sed 's/^/  /'
    exit 1
fi
echo "ok: the component's $(awk '{ print $1 }' "$edges" | sort -u | wc -l) units and their arrows (includes, calls) form no circle; from the top:"
tsort "$edges" | paste -sd' ' | fold -s -w 72 | sed 's/^/  /'
# (A unit's arrows, to read why it sits where it does:
#  awk '$1 == "UNIT" && $2 != $1' of the edges above.)
