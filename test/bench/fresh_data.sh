#!/bin/bash
# Fresh against unchanged data (docs/shm-level.md): xccl's auto, xccl with
# mesh and with shm forced, and tuned, interleaved, for allgather, alltoall
# and bcast at 64 KiB, 1 MiB and 8 MiB, each call timed alone
# (test/bench/fresh_data.c); medians over rounds of each run's median.
# Usage: test/bench/fresh_data.sh [builddir] [np] [rounds]
set -uo pipefail
b=$(cd "${1:-build}" && pwd)
np=${2:-2}
rounds=${3:-3}
ompi_dir=${OMPI_COMPONENT_DIR:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/fresh_data" "$(dirname "$0")/fresh_data.c" || exit 1
root_flag=; [[ $(id -u) -eq 0 ]] && root_flag=--allow-run-as-root
over=(); ((np > $(nproc))) && over=(--oversubscribe --mca mpi_yield_when_idle 1)
x=xccl,tuned,libnbc,basic,self
run() { timeout 300 mpirun $root_flag -np "$np" "${over[@]}" --mca mca_base_component_path "$ompi_dir:$b/component" \
            --mca coll "$@" 2>/dev/null || echo nan; }
raw=$work/raw
for ((r = 0; r < rounds; r++)); do
    for coll in allgather alltoall bcast; do
        for n in 65536 1048576 8388608; do
            it=200; ((n > 4000000)) && it=60
            for f in 0 1; do
                echo "$coll $n $f auto $(run $x "$work/fresh_data" $coll $n $it $f)"
                echo "$coll $n $f mesh $(run $x --mca coll_xccl_${coll}_algorithm mesh "$work/fresh_data" $coll $n $it $f)"
                echo "$coll $n $f shm $(run $x --mca coll_xccl_${coll}_algorithm shm "$work/fresh_data" $coll $n $it $f)"
                echo "$coll $n $f tuned $(run tuned,libnbc,basic,self "$work/fresh_data" $coll $n $it $f)"
            done
        done
    done >> "$raw"
done
echo "# fresh_data.sh np $np, $rounds rounds, us per call (median), auto/best: against the faster of forced mesh and shm"
printf "%-10s %9s %5s %9s %9s %9s %9s %9s %8s\n" coll bytes fresh auto mesh shm tuned auto/best auto/tu
awk '{ v[$1 " " $2 " " $3 " " $4] = v[$1 " " $2 " " $3 " " $4] " " $5; k[$1 " " $2 " " $3] = 1 }
     function med(s,   a, n, i, j, t) { n = split(s, a, " ")
         for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
         return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     END { for (key in k) { split(key, f, " ")
               a = med(v[key " auto"]); m = med(v[key " mesh"]); s = med(v[key " shm"]); t = med(v[key " tuned"])
               printf "%-10s %9d %5d %9.1f %9.1f %9.1f %9.1f %9.2f %8.2f\n", f[1], f[2], f[3], a, m, s, t, a / (m < s ? m : s), a / t } }' "$raw" |
    sort -k1,1 -k2,2n -k3,3n
