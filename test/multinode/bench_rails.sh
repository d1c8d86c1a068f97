#!/usr/bin/env bash
# shellcheck disable=SC2054  # (commas inside --mca values)
# Five stacks on 1 and on 2 rails (links per simulated host), 2 hosts x 2
# ranks, through bench_multinode.sh:
#
#   auto   xccl, algorithm chosen by the cost model   (run "auto", stock tuned)
#   hier   xccl forced to its two-level algorithms    (run "hier", stock han)
#   flat   xccl forced to its best flat algorithms    (run "flat", stock tuned)
#   tuned  stock Open MPI, coll tuned                 (stock column of auto, flat)
#   han    stock Open MPI, coll han (priority 79,     (stock column of hier)
#          coll_han_use_simple_allreduce 1)
#
# xccl_bench times xccl and the stock module interleaved inside each run;
# the three runs are interleaved too (rails R: auto, hier, flat, auto, hier,
# flat, ...), BENCH_REPS times, and every cell of the table is the median
# over the repetitions of xccl_bench's medians (tuned: over the auto and the
# flat runs).  Forced algorithms:
#   hier: allreduce, allgather, reduce_scatter(_block), alltoall: hier;
#         bcast: hier_rails (root's node scatters, every rail broadcasts a
#         piece, allgather inside: the rail-parallel one)
#   flat: allreduce, allgather, reduce_scatter(_block): ring; alltoall:
#         pairwise; bcast: scatter_allgather
#
# usage: bench_rails.sh [xccl_bench options]
#        (default: -c allreduce,allgather,reduce_scatter,alltoall,bcast
#                  -b 64K -e 16M -f 4 -r 3 -n 3)
# Environment:
#   XCCL_BUILDDIR      build directory (required)
#   BENCH_RAILS_LIST   rail counts to compare (default "1 2")
#   BENCH_REPS         repetitions of the three runs (default 3)
#   BENCH_COMMON_ARGS  more mpirun arguments for every run (e.g.
#                      "--mca coll_xccl_ucx_rndv_thresh inf")
#   BENCH_OUT          output directory (default: new temporary directory):
#                      R<r>/rep<k>/<run>/ (bench_multinode.sh's output),
#                      summary.txt (the table), summary.csv, rails.png
#   XCCLMN_RATE        rate of every link (default 1gbit), XCCLMN_* as usual
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${XCCL_BUILDDIR:?set XCCL_BUILDDIR to a build directory}"
rails_list=${BENCH_RAILS_LIST:-1 2}
reps=${BENCH_REPS:-3}
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/xccl-bench-rails.XXXXXX")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ $# -eq 0 ]]; then
    set -- -c allreduce,allgather,reduce_scatter,alltoall,bcast -b 64K -e 16M -f 4 -r 3 -n 3
fi
export XCCLMN_RATE=${XCCLMN_RATE:-1gbit}

# forced <allreduce> <allgather> <reduce_scatter> <alltoall> <bcast>
forced() {
    echo "--mca coll_xccl_allreduce_algorithm $1 --mca coll_xccl_allgather_algorithm $2" \
        "--mca coll_xccl_reduce_scatter_algorithm $3" \
        "--mca coll_xccl_reduce_scatter_block_algorithm $3" \
        "--mca coll_xccl_alltoall_algorithm $4 --mca coll_xccl_bcast_algorithm $5"
}
declare -A run_stack=([auto]=tuned [hier]=han [flat]=tuned)
declare -A run_args=([auto]="--mca coll_xccl_verbose 1"
    [hier]=$(forced hier hier hier hier hier_rails)
    [flat]=$(forced ring ring ring pairwise scatter_allgather))
runs="auto hier flat"

echo "# bench_rails: rails {$rails_list} x $reps repetitions of runs {$runs}; xccl_bench $*"
echo "# common mpirun arguments: ${BENCH_COMMON_ARGS:-(none)}; output: $out"
all=$out/all.csv
echo "rails,rep,run,collective,bytes,xccl_us,stock_us" >"$all"
rc=0
for rails in $rails_list; do
    for ((rep = 1; rep <= reps; rep++)); do
        for run in $runs; do
            dir=$out/R$rails/rep$rep/$run
            mkdir -p "$dir"
            echo "== rails $rails, repetition $rep, run $run (stock ${run_stack[$run]})"
            run_rc=0
            BENCH_RAILS=$rails BENCH_STACKS=${run_stack[$run]} BENCH_OUT=$dir \
                BENCH_XCCL_ARGS="${run_args[$run]} ${BENCH_COMMON_ARGS:-}" \
                "$here/bench_multinode.sh" -q "$@" >"$dir/log.txt" 2>&1 || run_rc=$?
            grep -E '^# (exit status|sent per host)' "$dir/log.txt" || true
            if [[ $run_rc -ne 0 ]]; then
                echo "   FAILED (exit $run_rc), see $dir/log.txt"
                rc=1
            fi
            [[ -f $dir/results.csv ]] || continue
            awk -F, -v r="$rails" -v k="$rep" -v run="$run" 'NR > 1 {
                printf "%s,%s,%s,%s,%s,%s,%s\n", r, k, run, $3, $4, $5, $6 }' \
                "$dir/results.csv" >>"$all"
        done
    done
done

# What auto chose (rank 0's finalize summaries of the first auto run per R).
for rails in $rails_list; do
    f=$out/R$rails/rep1/auto/tuned.map_by_slot.txt
    [[ -f $f ]] || continue
    echo "# auto's choices, rails $rails (rank 0, calls per algorithm over all sizes):"
    grep -E '^xccl: summary [a-z_]+ rank=0 ' "$f" |
        awk '{ s = "#   " $3 ":"; for (i = 7; i <= NF; i++) if ($i !~ /=0$/ && $i !~ /^errors=/) s = s " " $i; print s }'
done | tee "$out/auto_choices.txt"

# Medians -> summary.csv (rails,collective,bytes,auto,hier,flat,tuned,han)
# and the table.
awk -F, '
    function median(key,   n, i, j, t, a) {
        n = split(samples[key], a, " ")
        if (n == 0) return ""
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function add(stack, v) {
        if (v + 0 <= 0) return
        samples[$1 SUBSEP $4 SUBSEP $5 SUBSEP stack] = samples[$1 SUBSEP $4 SUBSEP $5 SUBSEP stack] " " v
    }
    NR == 1 { next }
    {
        if (!(($1 SUBSEP $4 SUBSEP $5) in seen)) { seen[$1 SUBSEP $4 SUBSEP $5] = 1; order[++n] = $1 SUBSEP $4 SUBSEP $5 }
        add($3, $6)
        add($3 == "hier" ? "han" : "tuned", $7)
    }
    END {
        print "rails,collective,bytes,auto_us,hier_us,flat_us,tuned_us,han_us"
        for (i = 1; i <= n; i++) {
            split(order[i], k, SUBSEP)
            printf "%s,%s,%s", k[1], k[2], k[3]
            ns = split("auto hier flat tuned han", st, " ")
            for (j = 1; j <= ns; j++) printf ",%s", median(order[i] SUBSEP st[j])
            print ""
        }
    }' "$all" | sort -t, -k1,1n -k2,2 -k3,3n >"$out/summary.csv"

{
    echo "# Median time per call (us) over $reps repetitions; 2 hosts x 2 ranks, $XCCLMN_RATE per rail."
    echo "# hier/X = hier's time divided by X's (< 1: hier faster; the goal, 1.5x faster, is <= 0.67)."
    echo "# flat = xccl's best flat algorithm (ring; alltoall pairwise; bcast scatter_allgather)."
    awk -F, 'function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
    NR > 1 {
        if ($1 != rails || $2 != coll) {
            rails = $1; coll = $2
            printf "\n# %s, %s rail(s)\n", coll, rails
            printf "%10s %10s %10s %10s %10s %10s %9s %9s %9s\n", "bytes", "auto", "hier", "flat",
                "tuned", "han", "hier/flat", "hier/han", "hier/tun"
        }
        printf "%10d %10.0f %10.0f %10.0f %10.0f %10.0f %9s %9s %9s\n", $3, $4, $5, $6, $7, $8,
            ratio($5, $6), ratio($5, $8), ratio($5, $7)
    }' "$out/summary.csv"
} | tee "$out/summary.txt"

# Plot: a panel per collective, time against size, every stack, solid lines
# for the largest rail count and dashed for the others.
if command -v gnuplot >/dev/null 2>&1 && [[ $(wc -l <"$out/summary.csv") -gt 1 ]]; then
    colls=$(awk -F, 'NR > 1 && !seen[$2]++ { print $2 }' "$out/summary.csv")
    ncoll=$(wc -w <<<"$colls")
    cols=$((ncoll < 3 ? ncoll : 3))
    rows=$(((ncoll + 2) / 3))
    maxr=$(tr ' ' '\n' <<<"$rails_list" | sort -n | tail -n 1)
    {
        echo "set terminal pngcairo size $((520 * cols)),$((400 * rows)) font 'sans,9'"
        echo "set termoption noenhanced"
        echo "set output '$out/rails.png'"
        echo "set datafile separator ','"
        echo "set logscale xy; set format x '%.0s%cB'; set key top left font ',7'"
        echo "set xlabel 'message size'; set ylabel 'time per call (us)'; set grid"
        echo "set multiplot layout $rows,$cols title 'xccl auto/hier/flat vs stock tuned/han, 2 hosts x 2 ranks, $XCCLMN_RATE per rail; solid: $maxr rails, dashed: fewer' font ',9'"
        for c in $colls; do
            echo "set title '$c'"
            cmd="plot"
            sep=""
            for rails in $rails_list; do
                dt=1
                [[ $rails -eq $maxr ]] || dt=2
                col=4
                for st in auto hier flat tuned han; do
                    sel="(stringcolumn(2) eq '$c' && \$1 == $rails)"
                    cmd+="$sep '$out/summary.csv' using (\$3):($sel && \$$col > 0 ? \$$col : 1/0)"
                    cmd+=" with linespoints dt $dt lc $((col - 3)) title '$st R=$rails'"
                    sep=","
                    col=$((col + 1))
                done
            done
            echo "$cmd"
        done
        echo "unset multiplot"
    } >"$out/rails.gp"
    if gnuplot "$out/rails.gp" 2>"$out/rails.gp.err"; then
        echo "# plot: $out/rails.png"
    else
        echo "# gnuplot failed, see $out/rails.gp.err"
    fi
fi
echo "# summary: $out/summary.txt, $out/summary.csv; all samples: $all"
exit "$rc"
