#!/bin/bash
# What a communicator costs, xccl against stock Open MPI: xccl_comm_churn
# (MPI_Comm_dup + MPI_Comm_free, unused or used once by one allreduce and
# one alltoall) under
#   xccl   --mca coll xccl,tuned,basic,libnbc,self
#   stock  --mca coll tuned,basic,libnbc,self
# The runs alternate (xccl, stock, xccl, stock, ...) for ROUNDS rounds so
# that the machine's drifts hit both alike.  Each run prints the median of
# its repetitions; the table gives, per mode, the median over rounds and
# the ratio xccl / stock.  The goal: an unused communicator within 1.2x of
# stock.  A benchmark, not a test: nothing here passes or fails.
#
# Usage: comm_churn.sh [-n NP] [-R ROUNDS] [-o DIR] [-- xccl_comm_churn options]
#   (default NP 2, ROUNDS 5; xccl_comm_churn default -n 2000 -r 5)
# Environment: XCCL_BUILDDIR (default ./build; holds xccl_comm_churn and
# component/mca_coll_xccl.so), OMPI_COMPONENT_DIR, MPIRUN_EXTRA (more
# mpirun arguments, e.g. --mca coll_xccl_small_msg_bytes 0).
# Writes DIR/raw/churn-npNP.<stack>.<round>.txt (default DIR: a new
# temporary directory) and prints the table.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/ompi_env.sh"
np=2 rounds=5 out=""
while getopts "n:R:o:h" c; do
    case $c in
    n) np=$OPTARG ;;
    R) rounds=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
bdir=${XCCL_BUILDDIR:-$PWD/build}
[[ -x $bdir/xccl_comm_churn ]] ||
    { echo "comm_churn: no $bdir/xccl_comm_churn (set XCCL_BUILDDIR)" >&2; exit 2; }
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/xccl-churn.XXXXXX")}
mkdir -p "$out/raw"
xccl_ompi_env "$bdir/component" "$out" benchmarking
xccl_args=("${ompi_base_args[@]}")
stock_args=("${ompi_base_args[@]}")
# the same arguments but the coll list (the last --mca coll pair)
stock_args[${#stock_args[@]} - 1]=tuned,basic,libnbc,self
read -r -a extra <<<"${MPIRUN_EXTRA:-}"

samples=$out/raw/churn-np$np.samples
: >"$samples"
for ((i = 1; i <= rounds; i++)); do
    for st in xccl stock; do
        f=$out/raw/churn-np$np.$st.$i.txt
        if [[ $st == xccl ]]; then args=("${xccl_args[@]}"); else args=("${stock_args[@]}"); fi
        timeout -k 10 600 mpirun "${args[@]}" "${extra[@]}" -np "$np" \
            "$bdir/xccl_comm_churn" "$@" >"$f" 2>&1 ||
            echo "comm_churn: np $np $st round $i failed (see $f)" >&2
        grep -q '^RESULT: [0-9]* passed, 0 failed' "$f" ||
            echo "comm_churn: np $np $st round $i: wrong results (see $f)" >&2
        awk -v st="$st" '$1 == "churn" {
                for (k = 3; k <= NF; k++) if ($k ~ /^median_us=/) { split($k, kv, "="); print $2, st, kv[2] }
            }' "$f" >>"$samples"
        echo "comm_churn: np $np $st round $i done" >&2
    done
done

# mode, median over rounds of each stack, ratio
printf '%-8s %4s %6s %12s %12s %8s\n' mode np rounds xccl_us stock_us ratio
for mode in unused used; do
    grep -q "^$mode " "$samples" || continue
    med() {
        awk -v m="$mode" -v s="$1" '$1 == m && $2 == s { print $3 }' "$samples" | sort -g |
            awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
                  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
    }
    x=$(med xccl) s=$(med stock)
    awk -v m="$mode" -v np="$np" -v r="$rounds" -v x="$x" -v s="$s" \
        'BEGIN { printf "%-8s %4d %6d %12.2f %12.2f %8s\n", m, np, r, x, s,
                 (s > 0 ? sprintf("%.2f", x / s) : "nan") }'
done
echo "raw: $out/raw"
