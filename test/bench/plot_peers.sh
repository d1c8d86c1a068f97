#!/bin/bash
# Plots of a compare_peers.sh table (PREFIX-npN.txt): per collective, the
# median time of every configuration against the message size (log-log)
# and, below, xccl's ratio to the best of the others (the table's "ratio"
# column; 1 is the goal line).  MPICH cells in parentheses (left out of
# "best" when oversubscribed) are drawn as they are.  Needs gnuplot
# (Debian: gnuplot-nox).
# Usage: test/bench/plot_peers.sh TABLE OUTDIR   (writes OUTDIR/<coll>-np<N>.png)
set -euo pipefail
table=$1 out=$2
command -v gnuplot >/dev/null || { echo "plot_peers: gnuplot not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$out"
np=$(sed -n 's/^# xccl vs other MPI stacks, np=\([0-9]*\).*/\1/p' "$table" | head -n 1)
[[ -n $np ]] || { echo "plot_peers: $table is not a compare_peers table" >&2; exit 1; }
read -r -a head < <(grep -m1 '^coll ' "$table")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# columns 3.. up to "best" are configurations
ncfg=0
for ((i = 2; i < ${#head[@]}; i++)); do
    [[ ${head[i]} == best ]] && break
    ncfg=$((ncfg + 1))
done
for c in $(awk '!/^#/ && NF > 3 && $1 != "coll" { print $1 }' "$table" | uniq); do
    dat=$work/$c.dat
    # bytes, the configurations' times ('-' missing), ratio
    awk -v c="$c" -v n="$ncfg" '
        function bytes(s,   m) { m = 1
            if (s ~ /K$/) m = 1024; else if (s ~ /M$/) m = 1048576; else if (s ~ /G$/) m = 1073741824
            sub(/[KMG]$/, "", s); return s * m }
        $1 == c { printf "%.0f", bytes($2)
                  for (i = 3; i < 3 + n; i++) { v = $i; gsub(/[()]/, "", v); printf " %s", v }
                  printf " %s\n", $(3 + n + 1) }' "$table" >"$dat"
    {
        echo "set terminal png noenhanced size 800,700; set output '$out/$c-np$np.png'"
        echo "set datafile missing '-'; set multiplot layout 2,1"
        echo "set logscale xy; set format x '%.0s%cB'; set ylabel 'time (us), median'; set key left top"
        echo "set title '$c, np $np: xccl and the other stacks (compare_peers.sh)'"
        printf "plot '%s' using 1:2 with linespoints lw 3 title '%s'" "$dat" "${head[2]}"
        for ((i = 1; i < ncfg; i++)); do
            printf ", '' using 1:%d with linespoints title '%s'" $((i + 2)) "${head[i + 2]}"
        done
        echo
        echo "unset logscale y; set logscale x; set ylabel 'xccl / best of the others'; set title ''"
        echo "set yrange [0:1.6]; set xlabel 'bytes'"
        printf "plot '%s' using 1:%d with linespoints lw 2 title 'xccl / best', 1 with lines dt 2 title 'goal'\n" \
            "$dat" $((ncfg + 2))
        echo "unset multiplot"
    } | gnuplot
done
echo "plot_peers: $out/*-np$np.png"
