#!/bin/bash
# The shm level against Open MPI's coll/sm and the default stack (tuned over
# vader) on one node, interleaved so that a shared machine's load hits all
# alike: xccl_shm_bench (forked ranks on one segment, the schedules the
# component will run) and xccl_bench's stock column (mpirun, xccl not
# loaded).  Usage: test/bench/shm_vs_sm.sh [builddir] [rounds] [np] [sizes]
#   sizes: xccl_shm_bench sizes (default "8 1M 16M"); each round prints one
#   line per stack and size, times in us (medians inside each program).
set -uo pipefail
b=${1:-build}
rounds=${2:-3}
np=${3:-2}
sizes=${4:-8 1M 16M}
to_bytes() { numfmt --from=iec "$1"; }
for ((i = 0; i < rounds; i++)); do
    echo "# round $i, load $(cut -d' ' -f1 /proc/loadavg)"
    # shellcheck disable=SC2086
    "$b/xccl_shm_bench" -n "$np" -r 11 -m 1 $sizes |
        awk '/^# allreduce, float/ { on = 1; next } /^# / { on = 0 }
             on && /^  / { printf "shm       %10s  shm_small %10s  shm %10s  memcpy %10s\n", $1, $2, $3, $4 }'
    for s in $sizes; do
        bytes=$(to_bytes "$s")
        for stack in "sm,libnbc,basic,self" "tuned,libnbc,basic,self"; do
            t=$(timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$np" --mca coll "$stack" \
                    --mca coll_sm_priority 100 "$b/xccl_bench" -c allreduce -b "$bytes" -e "$bytes" -r 11 2>/dev/null |
                awk -v b="$bytes" '$1 == b && NF >= 8 { print $6 "us" }')
            printf '%-9s %10s  %s\n' "${stack%%,*}" "$s" "${t:-failed}"
        done
    done
done
