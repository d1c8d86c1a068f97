# The eight further collectives (xccl_mpi_colls) in run_mpi_tests.sh's
# shell: sourced by it, its helpers (selected, run_mpi, per_rank_output,
# check_result, check_counts, check_forced, judge, indent, finish) and
# variables (bindir, logdir, common_args, common_base, run_timeout) in
# scope.
#
# xccl_mpi_colls (reduce, barrier, allgatherv, alltoallv, gather, gatherv,
# scatter, scatterv, blocking and nonblocking; see the program's header)
# runs at np 1, 2, 3, 4, 5, 8 with the same verdict; with -q and their
# algorithms forced (a set per run) at np 3 and 4, where every rank must
# have run each forced algorithm wherever xccl carried that collective;
# .ialltoallv_inplace_pairwise.np4: MPI_Ialltoallv in place on uneven
# blocks through xccl's pairwise alltoallv (stock Open MPI 4.1.4 takes
# blocks from the wrong peer there), and .stock_ialltoallv_inplace.np4,
# with xccl excluded, passes while stock is wrong; .carried.np4: xccl
# carried each of the sixteen calls of xccl_mpi_colls -V (algo= lines, no
# fallback= line), every algorithm but barrier's forced to one over the
# transport; .carried_auto.np4: the same with nothing forced (one node:
# the level's forms).

# ------------------------------------------- rooted collectives, barrier, v forms
# xccl_mpi_colls: reduce, barrier, allgatherv, alltoallv, gather, gatherv,
# scatter, scatterv, blocking and nonblocking, every result against the
# program's own reference (see its header).
colls_names="reduce barrier allgatherv alltoallv gather gatherv scatter scatterv"
# check_colls_forced <name> <np> "<coll>=<algo> ...": where xccl carried
# calls of a collective (verbose lines "xccl: <coll> ..." or "xccl:
# i<coll> ..."), every rank ran the forced algorithm at least once, and no
# blocking call of it ran another (shm: nonblocking calls and communicators
# without the level run another).  Where xccl carried none of the
# collective's calls, the results alone are judged (xccl_mpi_colls.carried
# is the run that requires xccl to carry them).
check_colls_forced() {
    local name=$1 np=$2 set=$3 r kv c a n wrong bad=0
    for kv in $set; do
        c=${kv%%=*}
        a=${kv#*=}
        # grep reads the files itself: grep -q at the end of a pipe exits at
        # its first match, and the writer's SIGPIPE failed the pipeline
        if ! grep -qsE "^xccl: i?$c comm=" "$logdir/$name.out"/*/rank.*/stdout \
            "$logdir/$name.out"/*/rank.*/stderr; then
            echo "$name: (xccl carried no $c call: results only for $kv)"
            continue
        fi
        for ((r = 0; r < np; r++)); do
            n=$(per_rank_output "$name" "$r" |
                awk -v c="$c" -v a="algo=$a" '$1 == "xccl:" && ($2 == c || $2 == "i" c) && $6 == a' | wc -l)
            if ((n == 0)); then
                echo "$name: rank $r: forced $kv, but no call ran it"
                bad=1
            fi
            # shm, mesh: nonblocking calls (no slot, no single copies)
            # and MPI_COMM_SELF run another
            [[ $a == shm || $a == mesh ]] && continue
            wrong=$(per_rank_output "$name" "$r" |
                awk -v c="$c" -v a="algo=$a" '$1 == "xccl:" && $2 == c && $6 ~ /^algo=/ && $6 != a' | head -n 1)
            if [[ -n $wrong ]]; then
                echo "$name: rank $r: forced $kv, got: $wrong"
                bad=1
            fi
        done
    done
    return "$bad"
}
# check_colls_carried <name> <np>: every rank's line "CALLS rank=<r>
# reduce=<n> ireduce=<n> ... iscatterv=<n>" (xccl_mpi_colls -V): for each
# of the 16 names at least that many verbose lines "xccl: <name> ...
# algo=<a>" and none "... fallback=<reason>"; one line per rank that fails.
check_colls_carried() {
    local name=$1 np=$2 r bad=0
    for ((r = 0; r < np; r++)); do
        per_rank_output "$name" "$r" | awk -v rank="$r" -v name="$name" -v colls="$colls_names" '
            $1 == "CALLS" && $2 == "rank=" rank { for (i = 3; i <= NF; i++) { split($i, kv, "="); calls[kv[1]] = kv[2] } seen = 1 }
            $1 == "xccl:" && $6 ~ /^algo=/ { algo[$2]++ }
            $1 == "xccl:" && $6 ~ /^fallback=/ { fb[$2]++; if (!($2 in why)) why[$2] = $6 }
            END {
                if (!seen) { print name ": rank " rank ": no CALLS line"; exit 1 }
                n = split(colls, cs, " ")
                msg = ""
                for (i = 1; i <= n; i++) for (nb = 0; nb < 2; nb++) {
                    c = (nb ? "i" : "") cs[i]
                    if (!(c in calls) || calls[c] + 0 == 0) { msg = msg " " c ": no calls;"; continue }
                    if (algo[c] + 0 < calls[c] + 0 || fb[c] + 0 > 0)
                        msg = msg sprintf(" %s: %d calls, %d algo=, %d fallback=%s;", c, calls[c], algo[c], fb[c],
                                          fb[c] ? " (" why[c] ")" : "")
                }
                if (msg != "") { print name ": rank " rank ":" msg; exit 1 }
            }' || bad=1
    done
    return "$bad"
}
# Every collective at np 1, 2, 3, 4, 5, 8 (the whole program: MPI_COMM_WORLD,
# a dup, an odd/even split, two threads).  At np 4 and more it includes the
# in-place MPI_Ialltoallv that stock Open MPI 4.1.4 gets wrong: those runs
# pass once xccl carries the call.
for np in 1 2 3 4 5 8; do
    name=xccl_mpi_colls.np$np
    selected "$name" || continue
    run_mpi "$name" "$np" "$bindir/xccl_mpi_colls"
    ok=0
    problems=$(check_result "$name" 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done
# Each algorithm of the eight collectives forced (a set per run), -q
# (fewer types and sizes), only the collectives of the set.
colls_algo_sets=(
    "reduce=binomial barrier=dissemination allgatherv=ring alltoallv=pairwise gather=binomial gatherv=linear scatter=binomial scatterv=linear"
    "reduce=rabenseifner barrier=shm allgatherv=direct alltoallv=direct gather=linear scatter=linear"
    "reduce=chain allgatherv=bruck"
    "reduce=shm allgatherv=shm alltoallv=shm gather=shm gatherv=shm scatter=shm scatterv=shm"
    # single copies (process_vm_readv / writev), blocking calls
    "allgatherv=mesh gather=mesh scatter=mesh"
)
for set in "${colls_algo_sets[@]}"; do
    force=()
    list=""
    for kv in $set; do
        force+=(--mca "coll_xccl_${kv%%=*}_algorithm" "${kv#*=}")
        list+=${list:+,}${kv%%=*}
    done
    tag=${set%% *}
    tag=${tag#*=}
    for np in 3 4; do
        name=xccl_mpi_colls.forced_$tag.np$np
        selected "$name" || continue
        run_mpi "$name" "$np" "${force[@]}" "$bindir/xccl_mpi_colls" -q -c "$list"
        ok=0
        problems=$({ check_result "$name" && check_colls_forced "$name" "$np" "$set"; } 2>&1) || ok=1
        indent "$problems"
        finish "$name" "$ok"
    done
done
# The two-level forms of reduce and allgatherv forced on two nodes of two
# ranks (coll_xccl_node_layout block:2), -q: results, and on every rank
# the calls on all 4 ranks that xccl ran, blocking and not, ran the forced
# one (the split communicators, one node each, run another).
# check_forced_nodes <name> <np> <coll=algo ...>: one line per rank that fails.
check_forced_nodes() {
    local name=$1 np=$2 r kv bad=0
    shift 2
    for ((r = 0; r < np; r++)); do
        for kv in "$@"; do
            per_rank_output "$name" "$r" | awk -v c="${kv%%=*}" -v a="algo=${kv#*=}" -v sz="size=$np" \
                -v who="$name: rank $r: $kv" '
                $1 == "xccl:" && ($2 == c || $2 == "i" c) && $6 ~ /^algo=/ && $7 == sz {
                    if ($6 == a) ran++; else { print who ", got: " $0; exit 1 } }
                END { if (!ran) { print who ": no call ran it"; exit 1 } }' || bad=1
        done
    done
    return "$bad"
}
for set in "reduce=hier allgatherv=hier" "reduce=pipeline allgatherv=hier_bruck"; do
    tag=${set%% *}
    tag=${tag#reduce=}
    name=xccl_mpi_colls.forced_$tag.nodes2.np4
    selected "$name" || continue
    force=()
    for kv in $set; do force+=(--mca "coll_xccl_${kv%%=*}_algorithm" "${kv#*=}"); done
    run_mpi "$name" 4 --mca coll_xccl_node_layout block:2 "${force[@]}" "$bindir/xccl_mpi_colls" -q \
        -c reduce,allgatherv
    ok=0
    # shellcheck disable=SC2086  # (the set's words are the pairs)
    problems=$({ check_result "$name" && check_forced_nodes "$name" 4 $set; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done
# Across nodes (two nodes of two ranks, coll_xccl_node_layout): xccl keeps
# the blocking allgatherv calls from 256 KiB received and the blocking
# reduce calls from 1 MiB (xccl_select_across_nodes, tuned the fallback)
# on the communicators of both nodes, the nonblocking ones of those sizes
# too once such a blocking call has run on the communicator (it settles
# the set-up), and hands every other allgatherv and reduce to the
# fallback ("not_faster").
# check_across_nodes <name> <np>: one line per rank that breaks this.
check_across_nodes() {
    local name=$1 np=$2 r bad=0
    for ((r = 0; r < np; r++)); do
        per_rank_output "$name" "$r" | awk -v rank="$r" -v name="$name" -v np="$np" '
            $1 != "xccl:" { next }
            { c = $2; nb = c ~ /^i/; if (nb) c = substr(c, 2) }
            c != "allgatherv" && c != "reduce" { next }
            { b = $5; sub(/^bytes=/, "", b)
              big = $7 == "size=" np && b + 0 >= (c == "reduce" ? 1048576 : 262144) }
            big && !nb { settled[$3] = 1 }
            big && (!nb || settled[$3]) {
                if ($6 ~ /^algo=/) kept[$2]++; else { wrong = $0; exit } next }
            $6 ~ /^algo=/ { wrong = $0; exit }
            END {
                if (wrong != "") { print name ": rank " rank ": " wrong; exit 1 }
                if (!kept["allgatherv"] || !kept["reduce"] || !kept["iallgatherv"] || !kept["ireduce"]) {
                    print name ": rank " rank ": no large allgatherv, reduce, iallgatherv or ireduce on " \
                        np " ranks ran xccl"; exit 1 }
            }' || bad=1
    done
    return "$bad"
}
name=xccl_mpi_colls.across_nodes.np4
if selected "$name"; then
    run_mpi "$name" 4 --mca coll_xccl_node_layout block:2 "$bindir/xccl_mpi_colls" -q -c allgatherv,reduce
    ok=0
    problems=$({ check_result "$name" && check_across_nodes "$name" 4; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi
# MPI_Ialltoallv with MPI_IN_PLACE on uneven blocks (zeros among them) at
# np 4: xccl's pairwise alltoallv must get it right (every rank's
# ialltoallv lines name it), where stock Open MPI 4.1.4's libnbc takes
# blocks from the wrong peer; .stock_ialltoallv_inplace, with xccl
# excluded, passes while stock is wrong and fails once it is right (then
# the stock comparison is stale).
name=xccl_mpi_colls.ialltoallv_inplace_pairwise.np4
if selected "$name"; then
    run_mpi "$name" 4 --mca coll_xccl_alltoallv_algorithm pairwise "$bindir/xccl_mpi_colls" -a
    ok=0
    problems=$({ check_result "$name" &&
        every_rank_logged "$name" 4 "^xccl: ialltoallv comm=[0-9]+ rank=RANK .*algo=pairwise" \
            "no ialltoallv ran algo=pairwise"; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi
name=xccl_mpi_colls.stock_ialltoallv_inplace.np4
if selected "$name"; then
    saved=("${common_args[@]}")
    common_args=()
    for ((i = 0; i < ${#saved[@]}; i++)); do
        if [[ ${saved[i]} == --mca && ${saved[i + 1]:-} == coll ]]; then
            i=$((i + 2))
            continue
        fi
        common_args+=("${saved[i]}")
    done
    common_args+=(--mca coll ^xccl)
    run_mpi "$name" 4 "$bindir/xccl_mpi_colls" --stock-ialltoallv-inplace
    common_args=("${saved[@]}")
    ok=0
    problems=$({ check_result "$name" &&
        { grep -q '^stock ialltoallv in place: wrong' "$logdir/$name.log" ||
          { echo "$name: no 'stock ialltoallv in place: wrong' line"; false; }; }; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi
# xccl carries each of the eight collectives, blocking and nonblocking
# (xccl_mpi_colls -V: calls on predefined types, MPI_COMM_WORLD).
# Each through an algorithm over the transport, forced (auto runs the
# level's forms on one node: .carried_auto below).
name=xccl_mpi_colls.carried.np4
if selected "$name"; then
    run_mpi "$name" 4 --mca coll_xccl_alltoallv_algorithm pairwise --mca coll_xccl_gatherv_algorithm linear \
        --mca coll_xccl_scatterv_algorithm linear --mca coll_xccl_reduce_algorithm binomial \
        --mca coll_xccl_allgatherv_algorithm ring --mca coll_xccl_gather_algorithm binomial \
        --mca coll_xccl_scatter_algorithm binomial "$bindir/xccl_mpi_colls" -V
    judge "$name" 4 check_colls_carried
fi
# The same with no algorithm forced (and these tests' small_msg_bytes 0):
# on one node xccl carries them through the shared-memory level (decide:
# level_local), no fallback= line.
name=xccl_mpi_colls.carried_auto.np4
if selected "$name"; then
    run_mpi "$name" 4 "$bindir/xccl_mpi_colls" -V
    judge "$name" 4 check_colls_carried
fi
