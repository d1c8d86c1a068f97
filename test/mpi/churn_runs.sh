# Communicators by the thousand, UCX missing on a rank in run_mpi_tests.sh's
# shell: sourced by it, its helpers (selected, run_mpi, per_rank_output,
# check_result, check_counts, check_forced, judge, indent, finish) and
# variables (bindir, logdir, common_args, common_base, run_timeout) in
# scope.
#
# xccl_comm_churn.rss.np2: resident memory grows by less than 2 MiB over
#   20 000 used and 20 000 unused communicators (after 200 to warm up).
# xccl_comm_churn.reuse.np{2,3}: 40 communicators in turn from MPI_Comm_dup
#   and a reversed MPI_Comm_split (each the other order of the one before:
#   its node segment changes leader and ranks), each used once (4 KiB
#   allreduce, alltoall of one int per peer) and freed: right results;
#   on every rank the level on in each, and in each after the first two
#   on a pooled segment without the vote ("reused, no vote", verbose 2;
#   the second's MPI_Comm_split sets the world up, which takes the
#   first's segment); at most one UCX endpoint created per peer process
#   ("new UCX endpoint", verbose 2: the endpoints outlive communicators).
# xccl_comm_churn.ucx_one_rank.np2: rank 1's UCX cannot start
#   (coll_xccl_ucx_tls names no transport, on rank 1 only): 50 communicators
#   created, used, freed in under 10 s with right results, and rank 1 says
#   so in exactly one "xccl: " line mentioning UCX.

# Resident memory flat over 20 000 used and 20 000 unused communicators.
name=xccl_comm_churn.rss.np2
# Open MPI 5.0.7: its PMIx leaks ~100 bytes per PMIx_Get, and the node map
# of each new communicator asks for every peer's host name (~2.1 MiB over
# these 20000 communicators, measured; xccl's own allocations do not grow)
rss_limit=2048
((ompi_major < 5)) || rss_limit=4096
if selected "$name"; then
    run_mpi "$name" 2 "$bindir/xccl_comm_churn" -n 0 -R 20000
    ok=0
    problems=$({ check_result "$name" && {
        line=$(grep -E '^rss cycles=' "$logdir/$name.log" | tail -n 1) &&
        growth=${line##*growth_kib=} && [[ $growth =~ ^-?[0-9]+$ ]] ||
            { echo "$name: no rss line"; false; }; } && {
        ((growth < rss_limit)) || { echo "$name: resident memory grew by $growth KiB (limit $rss_limit): $line"; false; }; }
    } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi

# The level's segments pooled and reused by the next communicator of the
# same processes, without a vote.  The default small-message
# size, as users run it.
saved_args=("${common_args[@]}")
common_args=("${common_base[@]}" --mca coll_xccl_verbose 2)
for np in 2 3; do
    name=xccl_comm_churn.reuse.np$np
    selected "$name" || continue
    run_mpi "$name" "$np" "$bindir/xccl_comm_churn" -m used -c alt -a 1024 -t 1 -n 40 -r 1
    ok=0
    problems=$({ check_result "$name" && for ((r = 0; r < np; r++)); do
        lines=$(per_rank_output "$name" "$r" | grep -v 'comm comm=0 ' || true)
        on=$(grep -c 'shared-memory level on' <<<"$lines" || true)
        reused=$(grep -c 'shared-memory level on (memfd segment reused, no vote' <<<"$lines" || true)
        ((on == 40 && reused >= 38)) ||
            { echo "$name: rank $r: level on in $on communicators (want 40), $reused of them reused without a vote (want 38 or more)"; false; }
        eps=$(per_rank_output "$name" "$r" | grep -c 'new UCX endpoint to rank' || true)
        ((eps <= np - 1)) ||
            { echo "$name: rank $r: $eps UCX endpoints created (want at most $((np - 1)): one per peer process)"; false; }
    done; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done
common_args=("${saved_args[@]}")

# UCX fails to start on rank 1 only (a transport list naming nothing there):
# every communicator falls back, costs what stock's costs (50 in < 10 s,
# where a stall in the modex for rank 1's missing address took ~1-2 s each),
# and rank 1 says it has no UCX once, not once per communicator.
name=xccl_comm_churn.ucx_one_rank.np2
if selected "$name"; then
    churn=("$bindir/xccl_comm_churn" -m used -n 50 -r 1 -T 10)
    if ((ompi_major < 5)); then
        run_mpi "$name" 1 "${churn[@]}" : -np 1 -x OMPI_MCA_coll_xccl_ucx_tls=no_such_transport "${churn[@]}"
    else
        # Open MPI 5.0.7's mpirun crashes on any MPMD command line
        run_mpi "$name" 2 "$(cd "$(dirname "${BASH_SOURCE[0]}")/../lib" && pwd)/rank_env.sh" 1 \
            OMPI_MCA_coll_xccl_ucx_tls=no_such_transport -- "${churn[@]}"
    fi
    ok=0
    problems=$({ check_result "$name" && {
        n=$(per_rank_output "$name" 1 | grep -cE '^xccl: .*UCX' || true)
        ((n == 1)) || { echo "$name: rank 1 printed $n 'xccl: ... UCX' lines, want exactly 1"; false; }; }
    } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi
