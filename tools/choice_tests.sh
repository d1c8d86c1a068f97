#!/bin/bash
# xccl_simulate and xccl_info: the choice table the component's auto
# selection would make, on layouts that need not exist.
#   - one node: the two-level algorithms do not apply (n/a), nor do mesh,
#     shm and leader (no peer access, no segment: not without -P and -S;
#     leader needs mapped peers, -P mapped), auto
#     keeps a flat algorithm;
#   - one node with the level (-S) and single copies (-P read): mesh and
#     shm are predicted (the reductions' mesh copies pieces first), auto
#     is the level's rule;
#   - 8 nodes x 8 ranks: at 16 MiB the model prefers a two-level allreduce,
#     at 8 B recursive doubling (latency), as the textbook costs say;
#   - xccl_info on the DGX-like fixture prints a row for every collective.
set -uo pipefail
b=${XCCL_BUILDDIR:?}
fx=${XCCL_FIXTURES:?}
fail=0
check() {    # check <what> <command output> <awk condition on the rows>
    if ! awk "$3 { found = 1 } END { exit !found }" <<<"$2"; then
        echo "FAIL: $1"; printf '%s\n' "$2" | sed 's/^/   | /'; fail=1
    else
        echo "ok: $1"
    fi
}
out=$("$b/xccl_simulate" -c allreduce -n 16 -s 16M) || fail=1
check "one node: hier, mesh, shm and leader are n/a, auto flat" "$out" '$1 == 16777216 && gsub(/n\/a/, "&") == 6 && $NF !~ /^(hier|mesh|shm)/'
out=$("$b/xccl_simulate" -c allreduce -n 2 -S 1M -P read -s 16K,16M) || fail=1
check "level, single copies: only hier and leader n/a, auto shm_small (level)" "$out" '$1 == 16384 && gsub(/n\/a/, "&") == 3 && $(NF-1) == "shm_small" && $NF == "(level)"'
check "level, single copies, 16 MiB: auto shm (level)" "$out" '$1 == 16777216 && gsub(/n\/a/, "&") == 3 && $(NF-1) == "shm" && $NF == "(level)"'
out=$("$b/xccl_simulate" -c reduce_scatter -n 4 -S 1M -P read -s 1M) || fail=1
check "reduce_scatter, level, single copies: mesh predicted" "$out" '$1 == 1048576 && gsub(/n\/a/, "&") == 3 && $(NF-1) == "shm"'
out=$("$b/xccl_simulate" -c allreduce -n 2 -P bogus 2>&1); [[ $? -eq 2 ]] || { echo "FAIL: -P bogus not refused"; fail=1; }
out=$("$b/xccl_simulate" -c allreduce -n 64 -l block:8 -s 8,16M) || fail=1
check "8x8, 16 MiB: auto two-level" "$out" '$1 == 16777216 && $NF ~ /^hier/'
check "8x8, 8 B: auto recursive_doubling" "$out" '$1 == 8 && $NF == "recursive_doubling"'
# -F: a cost file's flag term reaches the shm and mesh predictions (1 ms per
# flag wait puts both past 1000 us); a bad file is refused
cost=$(mktemp)
echo "alpha=1e-6 beta=2e-10 gamma=2e-10 delta=1e-10 flag=1e-3 peer=0" >"$cost"
out=$("$b/xccl_simulate" -c allgather -n 2 -S 1M -P read -s 64K -F "$cost") || fail=1
check "-F: flag 1 ms prices shm and mesh past 1 ms" "$out" '$1 == 65536 && $(NF-3) > 1000 && $(NF-4) > 1000 && $(NF-2) != "shm" && $(NF-2) != "mesh"'
echo "alpha=1e-6 beta=2e-10" >"$cost"
out=$("$b/xccl_simulate" -c allgather -n 2 -F "$cost" 2>&1); [[ $? -eq 2 && $out == *"gamma= is missing"* ]] || { echo "FAIL: a cost file without gamma not refused: $out"; fail=1; }
rm -f "$cost"
out=$("$b/xccl_simulate" -c nosuch 2>&1); [[ $? -eq 2 ]] || { echo "FAIL: unknown collective not refused"; fail=1; }
out=$("$b/xccl_info" --topo-file "$fx/topo/dgx-h100-nvswitch-ib.topo" -n 32 --sizes 1M) || fail=1
n=$(grep -cE '^(allreduce|allgather|reduce_scatter|reduce_scatter_block|alltoall|bcast)$' <<<"$out")
[[ $n -eq 6 ]] && echo "ok: xccl_info prints 6 collectives" || { echo "FAIL: xccl_info printed $n collectives"; fail=1; }
check "xccl_info: 4 nodes of 8 from the fixture" "$out" '/^xccl.s choice for 32 ranks, layout block:8 \(4 nodes/'
exit $fail
