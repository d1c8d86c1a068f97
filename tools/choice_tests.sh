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
#   - 8 nodes x 8 ranks: at 16 MiB the model prefers a two-level allreduce
#     (the pipelined one),
#     at 8 B recursive doubling (latency), as the textbook costs say;
#   - reduce, barrier, the v forms, gather and scatter at 65536 ranks
#     (nodes of 8 but barrier): every algorithm predicted but shm (only
#     with the level on one node: n/a) and, where they have them, mesh
#     and leader (only with mapped peers on one node: n/a); with -P mapped
#     on one node, gatherv's and reduce's mesh and leader predicted;
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
check "one node: hier, mesh, shm, leader and pipeline are n/a, auto flat" "$out" '$1 == 16777216 && gsub(/n\/a/, "&") == 7 && $NF !~ /^(hier|mesh|shm|pipeline)/'
out=$("$b/xccl_simulate" -c allreduce -n 2 -S 1M -P read -s 4K,8K,16M) || fail=1
check "level, single copies: only hier, leader and pipeline n/a, auto shm_small (level) at 4 KiB" "$out" '$1 == 4096 && gsub(/n\/a/, "&") == 4 && $(NF-1) == "shm_small" && $NF == "(level)"'
check "level, single copies, 8 KiB: auto shm (level), past shm_small's 4 KiB at np 2" "$out" '$1 == 8192 && gsub(/n\/a/, "&") == 4 && $(NF-1) == "shm" && $NF == "(level)"'
check "level, single copies, 16 MiB: auto shm (level)" "$out" '$1 == 16777216 && gsub(/n\/a/, "&") == 4 && $(NF-1) == "shm" && $NF == "(level)"'
out=$("$b/xccl_simulate" -c reduce_scatter -n 4 -S 1M -P read -s 1M) || fail=1
check "reduce_scatter, level, single copies: mesh predicted" "$out" '$1 == 1048576 && gsub(/n\/a/, "&") == 4 && $(NF-1) == "shm"'
out=$("$b/xccl_simulate" -c allreduce -n 2 -P bogus 2>&1); [[ $? -eq 2 ]] || { echo "FAIL: -P bogus not refused"; fail=1; }
out=$("$b/xccl_simulate" -c allreduce -n 64 -l block:8 -s 8,16M) || fail=1
check "8x8, 16 MiB: auto two-level (pipelined)" "$out" '$1 == 16777216 && $NF == "pipeline"'
check "8x8, 8 B: auto recursive_doubling" "$out" '$1 == 8 && $NF == "recursive_doubling"'
# -F: a cost file's flag term reaches the shm and mesh predictions (1 ms per
# flag wait puts both past 1000 us); a bad file is refused
cost=$(mktemp)
echo "alpha=1e-6 beta=2e-10 gamma=2e-10 delta=1e-10 flag=1e-3 peer=0" >"$cost"
out=$("$b/xccl_simulate" -c allgather -n 2 -S 1M -P read -s 64K -F "$cost") || fail=1
# (columns by name: the header's names sit one field right of the rows')
check "-F: flag 1 ms prices shm and mesh past 1 ms" "$out" '/^# size/ { for (i = 3; i <= NF; i++) col[$i] = i - 1 }
    $1 == 65536 && $col["shm"] > 1000 && $col["mesh"] > 1000 && $col["best"] != "shm" && $col["best"] != "mesh"'
echo "alpha=1e-6 beta=2e-10" >"$cost"
out=$("$b/xccl_simulate" -c allgather -n 2 -F "$cost" 2>&1); [[ $? -eq 2 && $out == *"gamma= is missing"* ]] || { echo "FAIL: a cost file without gamma not refused: $out"; fail=1; }
rm -f "$cost"
# -N: the network.  Rabenseifner's far partners (8 and 16 nodes away)
# leave their leaf of 2 nodes all at once: a 4:1 oversubscribed fat tree
# slows it at 16 MiB; ring (one flow per node) barely; a bad network and a
# torus too small for the nodes are refused
base=$("$b/xccl_simulate" -c allreduce -n 64 -l block:8 -s 16M) || fail=1
tree=$("$b/xccl_simulate" -c allreduce -n 64 -l block:8 -s 16M -N fattree:2:4) || fail=1
rab0=$(awk '$1 == 16777216 { print $4 }' <<<"$base"); rab1=$(awk '$1 == 16777216 { print $4 }' <<<"$tree")
ring0=$(awk '$1 == 16777216 { print $2 }' <<<"$base"); ring1=$(awk '$1 == 16777216 { print $2 }' <<<"$tree")
if awk -v a="$rab0" -v b="$rab1" -v c="$ring0" -v d="$ring1" 'BEGIN { exit !(b > 2 * a && d < 1.01 * c) }'; then
    echo "ok: -N fattree:2:4 slows rabenseifner ($rab0 -> $rab1 us), not ring ($ring0 -> $ring1 us)"
else
    echo "FAIL: -N fattree:2:4: rabenseifner $rab0 -> $rab1 us, ring $ring0 -> $ring1 us"; fail=1
fi
check "-N: the network in the header" "$tree" '/network fattree:2:4;/'
out=$("$b/xccl_simulate" -c allreduce -n 64 -l block:8 -N torus:2x2 2>&1); [[ $? -eq 2 && $out == *"no room"* ]] || { echo "FAIL: a torus too small not refused: $out"; fail=1; }
out=$("$b/xccl_simulate" -c allreduce -n 64 -N mesh:4 2>&1); [[ $? -eq 2 ]] || { echo "FAIL: -N mesh:4 not refused"; fail=1; }
# the sweep: -n and -s ranges print a table per rank count, a
# row per power of two, and in every row auto is within 10 % of the best
out=$("$b/xccl_simulate" -c allreduce -n 8..512 -l block:8 -s 8..1G) || fail=1
tables=$(grep -c '^# size' <<<"$out"); rows=$(grep -vc '^#' <<<"$out")
[[ $tables -eq 7 && $rows -eq $((7 * 28)) ]] && echo "ok: -n 8..512 -s 8..1G: 7 tables of 28 rows" ||
    { echo "FAIL: -n 8..512 -s 8..1G: $tables tables, $rows rows"; fail=1; }
worst=$(awk '/^# size/ { for (i = 3; i <= NF - 2; i++) name[i - 1] = $i; n = NF - 4; next }
    /^#/ { next }
    { best = -1; for (i = 2; i <= n + 1; i++) if ($i != "n/a") { t[name[i]] = $i; if (best < 0 || $i + 0 < best) best = $i + 0 }
      r = best > 0 ? t[$NF] / best : 1; if (r > w) { w = r; at = $0 } }
    END { printf "%.3f %s\n", w, at }' <<<"$out")
awk -v w="${worst%% *}" 'BEGIN { exit !(w <= 1.1) }' && echo "ok: sweep: auto within 10 % of the best (worst ${worst%% *})" ||
    { echo "FAIL: sweep: auto past 10 % of the best: $worst"; fail=1; }
out=$("$b/xccl_simulate" -c allreduce -s 8..4 2>&1); [[ $? -eq 2 ]] || { echo "FAIL: -s 8..4 not refused"; fail=1; }
out=$("$b/xccl_info" -n 64 --layout block:8 --sizes 16M --net fattree:2:4,nics=1) || fail=1
check "xccl_info --net: the fat tree prices rabenseifner past 100 ms at 16 MiB" "$out" '$1 == 16777216 && $4 > 100000'
out=$("$b/xccl_info" -n 8 --net torus:1x1 --layout block:1 2>&1); [[ $? -eq 2 && $out == *"no room"* ]] || { echo "FAIL: xccl_info --net torus:1x1 on 8 nodes not refused: $out"; fail=1; }
# the further collectives at 65536 ranks on nodes of 8: every algorithm
# predicted (the two-level ones of reduce and allgatherv too) but shm,
# which runs only with the level on one node, and mesh and leader (the
# CUDA IPC forms, after it; alltoallv has mesh only), which need mapped
# peers on one node (n/a)
for c in reduce allgatherv alltoallv gather gatherv scatter scatterv; do
    out=$("$b/xccl_simulate" -c $c -n 65536 -l block:8 -s 1M) || fail=1
    if [[ $c == alltoallv ]]; then
        check "$c, 65536 ranks: every algorithm but shm and mesh predicted" "$out" \
            '$1 == 1048576 && $2 > 0 && $(NF - 3) == "n/a" && $(NF - 2) == "n/a" && gsub(/n\/a/, "&") == 2'
    else
        check "$c, 65536 ranks: every algorithm but shm, mesh and leader predicted" "$out" \
            '$1 == 1048576 && $2 > 0 && $(NF - 4) == "n/a" && $(NF - 3) == "n/a" && $(NF - 2) == "n/a" &&
             gsub(/n\/a/, "&") == 3'
    fi
done
for c in gatherv reduce; do
    out=$("$b/xccl_simulate" -c $c -n 8 -P mapped -s 1M) || fail=1
    check "$c, one node, mapped peers: mesh and leader predicted" "$out" \
        '$1 == 1048576 && $(NF - 3) + 0 > 0 && $(NF - 2) + 0 > 0'
done
out=$("$b/xccl_simulate" -c alltoallv -n 8 -P mapped -s 1M) || fail=1
check "alltoallv, one node, mapped peers: mesh predicted" "$out" '$1 == 1048576 && $(NF - 2) + 0 > 0'

out=$("$b/xccl_simulate" -c barrier -n 65536 -s 8) || fail=1
check "barrier, 65536 ranks: dissemination predicted, shm n/a" "$out" '$1 == 8 && $2 > 0 && $3 == "n/a"'
out=$("$b/xccl_simulate" -c nosuch 2>&1); [[ $? -eq 2 ]] || { echo "FAIL: unknown collective not refused"; fail=1; }
out=$("$b/xccl_info" --topo-file "$fx/topo/dgx-h100-nvswitch-ib.topo" -n 32 --sizes 1M) || fail=1
n=$(grep -cE '^(allreduce|allgather|reduce_scatter|reduce_scatter_block|alltoall|bcast|reduce|barrier|allgatherv|alltoallv|gather|gatherv|scatter|scatterv)$' <<<"$out")
[[ $n -eq 14 ]] && echo "ok: xccl_info prints 14 collectives" || { echo "FAIL: xccl_info printed $n collectives"; fail=1; }
check "xccl_info: 4 nodes of 8 from the fixture" "$out" '/^xccl.s choice for 32 ranks, layout block:8 \(4 nodes/'
exit $fail
