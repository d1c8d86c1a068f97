#!/bin/bash
# xccl against several stock Open MPI stacks: tuned (the default), sm
# (coll_sm_priority 100, the fastest stock choice for large messages at
# np 2 here) and, where it selects itself (several hosts), han.
#
# A component's priority is read once (MPI_T scope "readonly"), so each
# stock stack needs its own mpirun.  Each invocation of xccl_bench measures
# xccl and that stack's collectives back to back, interleaved, medians of
# its rounds; invocations cycle through the stacks OUTER times (tuned, sm,
# tuned, sm, ...), so the machine's drifts hit every stack alike.  The
# table takes, per size, the median over invocations of each column.
#
# The xccl column comes from the tuned invocations: xccl as a user loads it
# (--mca coll xccl,tuned,...), whose fallback for the calls it declines is
# tuned.  In the sm (han) invocations xccl sits above sm (han) at priority
# 101; those xccl times are kept in the raw files.
#
# -t FILE writes a tuning file (coll_xccl_tuning_file format) that sends
# to the fallback every measured size where xccl's median was more than 5%
# slower than its own fallback (tuned) in the tuned invocations, for
# communicators of NP ranks; a rule covers a measured size up to the next.
#
# Usage: compare_stacks.sh [-n NP] [-R OUTER] [-s tuned,sm[,han]] [-o DIR]
#                          [-t FILE] [-- xccl_bench options]
# Environment: XCCL_BUILDDIR (default ./build), MPIRUN_EXTRA (more mpirun
# arguments, e.g. a hostfile and an rsh agent for the multi-host runs).
# Writes DIR/raw/*.txt, DIR/table-npNP.txt, DIR/<coll>-npNP.png (gnuplot).
set -euo pipefail
np=2 outer=3 stacks=tuned,sm out=docs/bench tune=""
while getopts "n:R:s:o:t:h" c; do
    case $c in
    n) np=$OPTARG ;;
    R) outer=$OPTARG ;;
    s) stacks=$OPTARG ;;
    o) out=$OPTARG ;;
    t) tune=$OPTARG ;;
    *) sed -n '2,29p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
bdir=${XCCL_BUILDDIR:-$PWD/build}
[[ -x $bdir/xccl_bench ]] || { echo "compare_stacks: no $bdir/xccl_bench (set XCCL_BUILDDIR)" >&2; exit 2; }
mkdir -p "$out/raw"
IFS=, read -r -a stack_list <<< "$stacks"

stack_args() {
    case $1 in
    tuned) echo "--mca coll xccl,tuned,basic,libnbc,self" ;;
    sm) echo "--mca coll xccl,sm,tuned,basic,libnbc,self --mca coll_sm_priority 100 --mca coll_xccl_priority 101" ;;
    han) echo "--mca coll xccl,han,sm,tuned,basic,libnbc,self --mca coll_han_priority 100 --mca coll_xccl_priority 101" ;;
    *) echo "compare_stacks: unknown stack $1" >&2; exit 2 ;;
    esac
}

# Open MPI's own component directory (Debian 12: .../openmpi3, 13: .../openmpi40)
ompi_dir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
raws=()
for ((i = 1; i <= outer; i++)); do
    for st in "${stack_list[@]}"; do
        f=$out/raw/np$np.$st.$i.txt
        # shellcheck disable=SC2046,SC2086
        mpirun --allow-run-as-root --oversubscribe -np "$np" \
            --mca mca_base_component_path "$ompi_dir:$bdir/component" \
            --mca mpi_yield_when_idle 1 $(stack_args "$st") ${MPIRUN_EXTRA:-} \
            "$bdir/xccl_bench" "$@" > "$f"
        echo "compare_stacks: np $np stack $st round $i done" >&2
        raws+=("$st:$f")
    done
done

# One line per (collective, size, stack, invocation): the xccl and stock
# times, the busbw factor and the checks.
table=$out/table-np$np.txt
for rf in "${raws[@]}"; do
    st=${rf%%:*} f=${rf#*:}
    awk -v st="$st" '
        /^# memcpy:/ { print "MEMCPY", $3 }
        /^# [a-z_]+  np=/ { coll = $2; fac = $NF }
        /^ +[0-9]+ +[0-9]+ / && coll != "" { print coll, $1, st, $3, $6, fac, $10 }
    ' "$f"
done > "$out/raw/np$np.samples"

# Median of a space-separated list, for both awk programs below.
awk_median='
    function median(list,   n, a, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }'

awk -v np="$np" -v stacks="$stacks" "$awk_median"'
    $1 == "MEMCPY" { mc = mc " " $2; next }
    {
        key = $1 SUBSEP $2
        if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
        stock[key, $3] = stock[key, $3] " " $5
        if ($3 == "tuned") xccl[key] = xccl[key] " " $4
        fac[$1] = $6
        if ($7 !~ /^ok/) bad[key] = 1
    }
    END {
        ns = split(stacks, sl, ",")
        mcbw = median(mc)
        printf "# xccl vs stock Open MPI stacks, np=%d, medians over invocations (compare_stacks.sh)\n", np
        printf "# memcpy one core: %.2f GB/s (median over invocations)\n", mcbw
        printf "# ratio = xccl time / best stock time (<= 1.05 goal; <= 0.80 at >= 1 MiB for allreduce, allgather, reduce_scatter)\n"
        prev = ""
        for (k = 1; k <= nk; k++) {
            split(order[k], kk, SUBSEP); c = kk[1]; sz = kk[2]
            if (c != prev) {
                printf "#\n# %s  np=%d  busbw factor %s\n# %12s %10s %8s", c, np, fac[c], "size(B)", "xccl(us)", "busbw"
                if (c == "allreduce") printf " %7s", "%memcpy"
                for (s = 1; s <= ns; s++) printf " %10s", sl[s] "(us)"
                printf " %6s %6s %s\n", "best", "ratio", "check"
                prev = c
            }
            x = median(xccl[order[k]])
            bus = x > 0 ? sz / x / 1e3 * fac[c] : 0
            printf "  %12d %10.2f %8.2f", sz, x, bus
            if (c == "allreduce") printf " %6.0f%%", 100 * bus / mcbw
            best = -1; bn = ""
            for (s = 1; s <= ns; s++) {
                t = median(stock[order[k], sl[s]])
                printf " %10.2f", t
                if (best < 0 || t < best) { best = t; bn = sl[s] }
            }
            printf " %6s %6.2f %s\n", bn, x / best, (order[k] in bad) ? "WRONG" : "ok"
        }
    }
' "$out/raw/np$np.samples" > "$table"
cat "$table"

if [[ -n $tune ]]; then
    awk -v np="$np" "$awk_median"'
        $1 == "MEMCPY" || $3 != "tuned" { next }
        {
            key = $1 SUBSEP $2
            if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
            x[key] = x[key] " " $4; t[key] = t[key] " " $5
        }
        END {
            printf "# written by compare_stacks.sh -t: sizes where xccl (auto) was > 5%% slower\n"
            printf "# than its fallback (tuned) at np %d on this machine; medians of invocations\n", np
            for (k = 1; k <= nk; k++) {
                split(order[k], kk, SUBSEP); c = kk[1]; sz = kk[2]
                # up to the next measured size; the last one up to the same step again
                if (k < nk && (split(order[k + 1], nn, SUBSEP)) && nn[1] == c) hi = nn[2]
                else hi = (c == prevc) ? sz * sz / prevsz : 2 * sz
                prevc = c; prevsz = sz
                if (median(x[order[k]]) > 1.05 * median(t[order[k]]))
                    printf "%-20s ranks=%d-%d bytes=%s-%s algo=fallback\n", c, np, np, sz, hi
            }
        }
    ' "$out/raw/np$np.samples" > "$tune"
    echo "compare_stacks: tuning rules in $tune" >&2
fi

# One plot per collective: time against size, log-log.
if command -v gnuplot > /dev/null; then
    for c in $(awk '/^# [a-z_]+  np=/ { print $2 }' "$table"); do
        dat=$out/raw/np$np.$c.dat
        awk -v c="$c" '/^# [a-z_]+  np=/ { on = ($2 == c) } on && /^ +[0-9]/' "$table" > "$dat"
        xcol=2
        first=$([[ $c == allreduce ]] && echo 5 || echo 4)
        {
            echo "set terminal png size 800,500; set output '$out/$c-np$np.png'"
            echo "set logscale xy; set xlabel 'bytes'; set ylabel 'time (us), median'; set key left top"
            echo "set title '$c, np $np: xccl vs stock Open MPI'"
            printf "plot '%s' using 1:%d with linespoints lw 2 title 'xccl'" "$dat" "$xcol"
            for ((s = 0; s < ${#stack_list[@]}; s++)); do
                printf ", '' using 1:%d with linespoints title 'stock %s'" $((first + s)) "${stack_list[s]}"
            done
            echo
        } | gnuplot
    done
else
    echo "compare_stacks: gnuplot not installed, no plots" >&2
fi
