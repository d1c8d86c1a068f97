#!/bin/bash
# What a communicator costs, xccl against stock Open MPI: xccl_comm_churn
# (create, unused or used once, free) under
#   xccl   --mca coll xccl,tuned,basic,libnbc,self
#   stock  --mca coll tuned,basic,libnbc,self        (xccl not loaded)
# Each stack runs in its own mpirun (Open MPI picks its coll components
# per job); the runs alternate (for each round, for each NP: xccl, stock)
# so that the machine's drifts, and the other users of a shared machine,
# hit both alike.  Each run prints the median of its repetitions; the
# table gives, per mode and NP, the median over rounds of each stack, the
# range over rounds, the ratio of the medians xccl / stock, and the median
# over rounds of each round's own ratio (paired: the runs next to each
# other in time; what to read on a shared machine).  The goal: within
# 1.2x of stock, used or not.  A benchmark, not a test: nothing here
# passes or fails (wrong results are reported).
#
# The cycle by default: MPI_Comm_dup (-c split: MPI_Comm_split
# of the world, same processes, reversed order), one 4 KiB MPI_Allreduce
# (-a 1024 ints) and an MPI_Alltoall of one int per peer (-t 1), then
# MPI_Comm_free; "unused": create and free only.
#
# Usage: comm_churn.sh [-n NP[,NP...]] [-R ROUNDS] [-c dup|split] [-B DIR]
#                      [-o DIR] [-- xccl_comm_churn options]
#   -B DIR: also another build's component (DIR/component, e.g. the main
#   branch's build) as a third stack "before", in the same rotation
#   (default NP 2, ROUNDS 5, dup; xccl_comm_churn options after the
#   defaults -a 1024 -t 1 -n 2000 -r 5, so they override them)
# Every run takes ompi_base_args (test/lib/ompi_env.sh): --oversubscribe
# and mpi_yield_when_idle 1 for both stacks (np above the cores: say so
# with the numbers).
# Environment: XCCL_BUILDDIR (default ./build; holds xccl_comm_churn and
# component/mca_coll_xccl.so), OMPI_COMPONENT_DIR, MPIRUN_EXTRA (more
# mpirun arguments, e.g. --mca coll_xccl_shm_bytes 0).
# Writes DIR/raw/churn-npNP.<stack>.<round>.txt (default DIR: a new
# temporary directory) and prints the table.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/ompi_env.sh"
nps=2 rounds=5 out="" create=dup before=""
while getopts "n:R:c:B:o:h" c; do
    case $c in
    B) before=$OPTARG ;;
    n) nps=$OPTARG ;;
    R) rounds=$OPTARG ;;
    c) create=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,35p' "$0"; exit 2 ;;
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
stacks=(xccl stock)
if [[ -n $before ]]; then
    [[ -e $before/component/mca_coll_xccl.so ]] ||
        { echo "comm_churn: no $before/component/mca_coll_xccl.so" >&2; exit 2; }
    xccl_ompi_env "$before/component" "$out/before" benchmarking
    before_args=("${ompi_base_args[@]}")
    stacks=(xccl before stock)
fi

IFS=, read -r -a np_list <<<"$nps"
prog=("$bdir/xccl_comm_churn" -c "$create" -a 1024 -t 1 -n 2000 -r 5 "$@")
samples=$out/raw/churn.samples
: >"$samples"
echo "comm_churn: ${prog[*]}; $(uptime)" >&2
for ((i = 1; i <= rounds; i++)); do
    for np in "${np_list[@]}"; do
        for st in "${stacks[@]}"; do
            f=$out/raw/churn-np$np.$st.$i.txt
            case $st in
            xccl) args=("${xccl_args[@]}") ;;
            before) args=("${before_args[@]}") ;;
            *) args=("${stock_args[@]}") ;;
            esac
            timeout -k 10 600 mpirun "${args[@]}" "${extra[@]}" -np "$np" "${prog[@]}" >"$f" 2>&1 ||
                echo "comm_churn: np $np $st round $i failed (see $f)" >&2
            grep -q '^RESULT: [0-9]* passed, 0 failed' "$f" ||
                echo "comm_churn: np $np $st round $i: wrong results (see $f)" >&2
            awk -v st="$st" -v np="$np" -v i="$i" '$1 == "churn" {
                    for (k = 3; k <= NF; k++) if ($k ~ /^median_us=/) { split($k, kv, "="); print $2, np, st, kv[2], i }
                }' "$f" >>"$samples"
        done
        echo "comm_churn: round $i np $np done ($(cut -d, -f3- <<<"$(uptime)"))" >&2
    done
done

# mode, np: median over rounds of each stack (and its range), ratio
printf '%-8s %4s %-7s %6s %10s %17s %10s %17s %7s %7s' mode np create rounds xccl_us "(range)" \
    stock_us "(range)" ratio paired
[[ -z $before ]] && echo || printf ' %10s %17s %7s\n' before_us "(range)" b_ratio
for mode in unused used; do
    for np in "${np_list[@]}"; do
        grep -q "^$mode $np " "$samples" || continue
        stat() {
            awk -v m="$mode" -v np="$np" -v s="$1" '$1 == m && $2 == np && $3 == s { print $4 }' \
                "$samples" | sort -g |
                awk '{ v[NR] = $1 } END { if (NR == 0) { print "nan nan nan"; exit }
                      med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                      print med, v[1], v[NR] }'
        }
        read -r x xlo xhi <<<"$(stat xccl)"
        read -r s slo shi <<<"$(stat stock)"
        # each round's xccl / stock, their median
        paired=$(awk -v m="$mode" -v np="$np" '$1 == m && $2 == np { t[$5, $3] = $4; r[$5] = 1 }
                END { for (i in r) if (t[i, "stock"] > 0 && t[i, "xccl"] != "") print t[i, "xccl"] / t[i, "stock"] }' \
                "$samples" | sort -g |
            awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else printf "%.2f\n",
                  NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
        awk -v m="$mode" -v np="$np" -v c="$create" -v r="$rounds" -v x="$x" -v s="$s" \
            -v xr="$xlo-$xhi" -v sr="$slo-$shi" -v p="$paired" \
            'BEGIN { printf "%-8s %4d %-7s %6d %10.2f %17s %10.2f %17s %7s %7s", m, np, c, r, x, xr, s, sr,
                     (s > 0 ? sprintf("%.2f", x / s) : "nan"), p }'
        if [[ -z $before ]]; then
            echo
        else
            read -r b blo bhi <<<"$(stat before)"
            awk -v b="$b" -v s="$s" -v br="$blo-$bhi" \
                'BEGIN { printf " %10.2f %17s %7s\n", b, br, (s > 0 ? sprintf("%.2f", b / s) : "nan") }'
        fi
    done
done
echo "raw: $out/raw"
