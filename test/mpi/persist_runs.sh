# The persistent collectives (xccl_mpi_persist) in run_mpi_tests.sh's
# shell: sourced by it, its helpers (selected, run_mpi, per_rank_output,
# check_result, check_counts, check_forced, judge, indent, finish) and
# variables (bindir, logdir, common_args, common_base, run_timeout) in
# scope.
#
# xccl_mpi_persist (persistent collectives of the fourteen: one init and
# many starts each, MPI_Startall, requests never started or freed after
# their communicator, two threads; see the program's header) runs at np 1,
# 2, 3, 4 with the same verdict; .starts.np4: on every rank, for each of
# the fourteen, as many verbose lines "xccl: <coll> comm=<cid> rank=<r>
# ... persistent" as the program's line "STARTS rank=<r> ..." counts
# starts, for allreduce, allgather, bcast and barrier each an algo=
# line (xccl runs them itself, no fallback=), and for scatterv and
# alltoallv starts via=latency_path (the v forms' steps as requests,
# large blocks by single copies); .default_small.np{2,3}: the
# same program with xccl's default small-message size, where the calls
# xccl leaves to the fallback run the fallback's own persistent requests,
# and small gather, scatter, reduce and allgatherv stay with xccl
# (check_persist_small).

# ------------------------------------------------------ persistent collectives
# xccl_mpi_persist: MPI_<Coll>_init (MPIX_ on Open MPI 4.1) of the fourteen,
# MPI_Start / MPI_Startall, every result against the program's own
# reference (see its header).
persist_names="allreduce allgather reduce_scatter reduce_scatter_block alltoall bcast reduce barrier"
persist_names+=" allgatherv alltoallv gather gatherv scatter scatterv"
# check_persist_starts <name> <np>: every rank's line "STARTS rank=<r>
# allreduce=<n> ... scatterv=<n>": for each of the fourteen as many verbose
# lines "xccl: <coll> comm=<cid> rank=<r> ... persistent" (one per start,
# algo= or fallback=), and for the ones xccl runs itself (allreduce,
# allgather, bcast, barrier) no fallback= among them; one line per rank
# that fails.
check_persist_starts() {
    local name=$1 np=$2 r bad=0
    for ((r = 0; r < np; r++)); do
        per_rank_output "$name" "$r" | awk -v rank="$r" -v name="$name" -v colls="$persist_names" '
            $1 == "STARTS" && $2 == "rank=" rank { for (i = 3; i <= NF; i++) { split($i, kv, "="); starts[kv[1]] = kv[2] } seen = 1 }
            $1 == "xccl:" && $NF == "persistent" {
                if ($4 != "rank=" rank) { wrong++; if (!ex) ex = $0; next }
                lines[$2]++
                if ($6 ~ /^fallback=/) { fb[$2]++; if (!($2 in why)) why[$2] = $6 }
                if ($0 ~ / via=latency_path /) lat[$2]++
            }
            END {
                if (!seen) { print name ": rank " rank ": no STARTS line"; exit 1 }
                msg = ""
                if (wrong) msg = msg sprintf(" %d persistent lines of another rank (%s);", wrong, ex)
                n = split(colls, cs, " ")
                for (i = 1; i <= n; i++) {
                    c = cs[i]
                    if (starts[c] + 0 == 0) { msg = msg " " c ": no starts;"; continue }
                    if (lines[c] + 0 != starts[c] + 0)
                        msg = msg sprintf(" %s: %d starts, %d persistent lines;", c, starts[c], lines[c])
                    if (c ~ /^(allreduce|allgather|bcast|barrier)$/ && fb[c] + 0 > 0)
                        msg = msg sprintf(" %s: %d fallback= (%s);", c, fb[c], why[c])
                    if (c ~ /^(scatterv|alltoallv)$/ && lat[c] + 0 == 0)
                        msg = msg " " c ": no start via=latency_path;"
                }
                if (msg != "") { print name ": rank " rank ":" msg; exit 1 }
            }' || bad=1
    done
    return "$bad"
}
for np in 1 2 3 4; do
    name=xccl_mpi_persist.np$np
    selected "$name" || continue
    run_mpi "$name" "$np" "$bindir/xccl_mpi_persist"
    ok=0
    problems=$(check_result "$name" 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done
# Every start logged as persistent, one line per start (verbose 1 is in
# every run's arguments).
name=xccl_mpi_persist.starts.np4
if selected "$name"; then
    run_mpi "$name" 4 "$bindir/xccl_mpi_persist"
    judge "$name" 4 check_persist_starts
fi
# With the default small-message size: small calls of the collectives the
# level does not carry go to the fallback, through its own persistent
# requests; small gather, scatter, reduce and allgatherv, which the v
# forms' latency path carries, stay with xccl: on every rank no start of
# theirs with fallback=small_message and at least one via=latency_path.
check_persist_small() {
    local name=$1 np=$2 r bad=0
    for ((r = 0; r < np; r++)); do
        per_rank_output "$name" "$r" | awk -v name="$name" -v rank="$r" '
            $1 == "xccl:" && $NF == "persistent" && $2 ~ /^(gather|scatter|reduce|allgatherv)$/ {
                if ($6 == "fallback=small_message") fb[$2]++
                if ($0 ~ / via=latency_path /) lat[$2]++
            }
            END {
                msg = ""
                n = split("gather scatter reduce allgatherv", cs, " ")
                for (i = 1; i <= n; i++) {
                    c = cs[i]
                    if (fb[c] + 0 > 0) msg = msg sprintf(" %s: %d starts fallback=small_message;", c, fb[c])
                    if (lat[c] + 0 == 0) msg = msg " " c ": no start via=latency_path;"
                }
                if (msg != "") { print name ": rank " rank ":" msg; exit 1 }
            }' || bad=1
    done
    return "$bad"
}
for np in 2 3; do
    name=xccl_mpi_persist.default_small.np$np
    selected "$name" || continue
    saved_args=("${common_args[@]}")
    common_args=("${common_base[@]}" --mca coll_xccl_verbose 1)
    run_mpi "$name" "$np" "$bindir/xccl_mpi_persist" -q
    common_args=("${saved_args[@]}")
    judge "$name" "$np" check_persist_small
done
