#!/usr/bin/env bash
# Measured against the cost model: allreduce on N simulated
# hosts of one rank each (netns_cluster.sh, behind a bridge), every flat
# algorithm forced in turn, xccl_bench's median per size, beside
# xccl_simulate's prediction for the same layout (-n N -l block:1):
#   - with the component's default constants (inter alpha 20 us, beta 0.9
#     ns/B), and
#   - with alpha and beta fitted to the measured ring (its 8 B and its
#     largest size: the model is linear in them), the other algorithms then
#     predicted, not fitted.
# On a 2-core machine N ranks share 2 cores (yielding when idle): every
# message waits for its receiver to be scheduled, so alpha is far from a
# network's; that is what the fitted model absorbs.
#
# usage: bench_scale.sh [N (default 8)]
# Environment: XCCL_BUILDDIR (required), BENCH_ALGOS (default ring
#   recursive_doubling rabenseifner swing dbt nhr nb), BENCH_ARGS (xccl_bench
#   sizes and rounds; default -b 8 -e 2M -f 8 -r 3), BENCH_OUT (directory),
#   XCCLMN_RATE (default 10gbit) and the rest of netns_cluster.sh's.
# Prints a markdown table (measured us, default-model us, fitted-model us,
# fitted/measured) per algorithm and size.  Root only (SKIP, 77, otherwise).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
builddir=${XCCL_BUILDDIR:?set XCCL_BUILDDIR to a build directory}
bench=$builddir/xccl_bench sim=$builddir/xccl_simulate compdir=$builddir/component
[[ -x $bench && -x $sim && -e $compdir/mca_coll_xccl.so ]] ||
    { echo "$0: need $bench, $sim and $compdir/mca_coll_xccl.so (make)" >&2; exit 1; }
nh=${1:-8}
algos=${BENCH_ALGOS:-ring recursive_doubling rabenseifner swing dbt nhr nb}
read -r -a bargs <<<"${BENCH_ARGS:--b 8 -e 2M -f 8 -r 3}"
export XCCLMN_RATE=${XCCLMN_RATE:-10gbit}
# shellcheck source=netns_cluster.sh
source "$here/netns_cluster.sh"
# shellcheck source=mn_common.sh
source "$here/mn_common.sh"
mn_check || exit 77
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/xccl-bench-scale.XXXXXX")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
chmod 755 "$out"
XCCLMN_SLOTS=1 mn_up "$nh" || { echo "bench: could not set up $nh simulated hosts"; exit 1; }
mn_mpirun_args "$(mn_component_path "$compdir" "$out")"
read -r -a mpirun <<<"${MPIRUN:-mpirun}"
echo "# bench_scale: $nh simulated hosts x 1 rank; link: $XCCLMN_SHAPING; xccl_bench ${bargs[*]}"
meas=$out/measured.csv
: >"$meas"
for a in $algos; do
    t0=$SECONDS
    mn_exec h0 timeout -k 10 900 "${mpirun[@]}" "${mn_args[@]}" -np "$nh" --map-by node \
        --mca coll xccl,tuned,basic,libnbc,self --mca coll_xccl_small_msg_bytes 0 \
        --mca coll_xccl_allreduce_algorithm "$a" "$bench" -c allreduce -q "${bargs[@]}" \
        >"$out/$a.txt" 2>&1 &
    rc=0
    wait $! || rc=$?
    echo "# $a: exit status $rc, $((SECONDS - t0)) s"
    awk -v a="$a" '$1 ~ /^[0-9]+$/ && NF >= 9 && $NF ~ /^ok/ { print a "," $1 "," $3 }' "$out/$a.txt" >>"$meas"
done
mn_down
sizes=$(awk -F, '!seen[$2]++ { printf "%s%s", sep, $2; sep = "," }' "$meas")
[[ -n $sizes ]] || { echo "bench: nothing measured (see $out)"; exit 1; }
# predict <alpha> <beta>: "algo,size,us" for every algorithm and size
predict() {
    "$sim" -c allreduce -n "$nh" -l block:1 -s "$sizes" -A "$1" -B "$2" | awk -v algos="$algos" '
        BEGIN { n = split(algos, w, " "); for (i = 1; i <= n; i++) want[w[i]] = 1 }
        /^# size/ { for (i = 3; i <= NF - 2; i++) name[i - 1] = $i; next }
        /^#/ { next }
        { for (i = 2; i <= NF - 2; i++) if (name[i] in want) print name[i] "," $1 "," $i }'
}
predict 2e-5 9e-10 >"$out/default.csv"
# ring's coefficients: t = t0 + ca * alpha + cb * beta at its smallest and largest size
predict 0 0 >"$out/p00.csv"
predict 1e-5 0 >"$out/pa.csv"
predict 0 1e-9 >"$out/pb.csv"
fit=$(awk -F, -v lo="${sizes%%,*}" -v hi="${sizes##*,}" '
    FILENAME ~ /measured/ && $1 == "ring" { m[$2] = $3 }
    FILENAME ~ /p00/ && $1 == "ring" { z[$2] = $3 }
    FILENAME ~ /pa.csv/ && $1 == "ring" { ca[$2] = ($3 - z[$2]) / 1e-5 }
    FILENAME ~ /pb.csv/ && $1 == "ring" { cb[$2] = ($3 - z[$2]) / 1e-9 }
    END { a1 = ca[lo]; b1 = cb[lo]; r1 = m[lo] - z[lo]; a2 = ca[hi]; b2 = cb[hi]; r2 = m[hi] - z[hi]
          det = a1 * b2 - a2 * b1
          if (det == 0) { print "2e-5 9e-10"; exit }
          al = (r1 * b2 - r2 * b1) / det; be = (a1 * r2 - a2 * r1) / det
          if (al <= 0) al = 1e-7; if (be <= 0) be = 1e-12
          printf "%.3g %.3g\n", al, be }' \
    "$meas" "$out/p00.csv" "$out/pa.csv" "$out/pb.csv")
read -r fa fb <<<"$fit"
predict "$fa" "$fb" >"$out/fitted.csv"
echo "# fitted to ring (8 B and the largest size): inter alpha $fa s, beta $fb s/B"
echo
echo "| algorithm | size (B) | measured us | model us (defaults) | model us (fitted) | fitted / measured |"
echo "|---|---|---|---|---|---|"
awk -F, '
    FILENAME ~ /default/ { d[$1 "," $2] = $3; next }
    FILENAME ~ /fitted/ { f[$1 "," $2] = $3; next }
    { k = $1 "," $2; r = $3 > 0 ? f[k] / $3 : 0
      printf "| %s | %s | %.1f | %.1f | %.1f | %.2f |\n", $1, $2, $3, d[k], f[k], r }' \
    "$out/default.csv" "$out/fitted.csv" "$meas"
echo
echo "# raw: $out"
