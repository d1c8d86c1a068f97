#!/usr/bin/env bash
# Run the xccl MPI integration tests against the xccl coll component.
#
# usage: run_mpi_tests.sh <dir-with-test-binaries> <component-dir>
#
#   <dir-with-test-binaries>  holds xccl_mpi_check, xccl_mpi_errors, xccl_mpi_nb
#   <component-dir>           holds mca_coll_xccl.so
#
# Environment:
#   MPIRUN        mpirun command (default: mpirun)
#   MPIRUN_ARGS   extra mpirun arguments, split on whitespace (default: none)
#   TEST_LOG_DIR  where logs go (default: a new temporary directory)
#   OMPI_COMPONENT_DIR  Open MPI's own component directory
#                 (default: /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3)
#
# xccl_mpi_check runs at np 1, 2, 3, 4, 7.  A run passes when
#   (a) it exits 0 and prints "RESULT: <n> passed, 0 failed", and
#   (b) for every world rank r and collective c, the number of verbose lines
#         xccl: <c> comm=<cid> rank=<r> bytes=<n> algo=<name>
#       equals the count on the program's line "EXPECT rank=<r> ... <c>=<n> ...",
#       and the number of those lines plus the lines
#         xccl: <c> comm=<cid> rank=<r> bytes=<n> fallback=<reason>
#       equals the count on its line "CALLS rank=<r> ..." (one line per call
#       that reaches the coll component).  Every line that starts with
#       "xccl: <c> " for one of the six collectives must have one of these
#       forms, with <r> the MPI_COMM_WORLD rank of the process that prints it;
#       more " key=value" fields may follow.
# With every algorithm forced in turn (a set of them per run), xccl_mpi_check -q runs
# at np 3 and 4, with the same checks and (c): every algo= line names the
# forced algorithm.  The pipelined ones run with -P (calls past
# 4 MiB: several 2 MiB chunks) on block:2 at np 3, 4, 7 and cyclic:2 at np 4.
# xccl_mpi_check.net_{fattree,bogus}.np4: coll_xccl_net named (verbose 2
# names it on every rank) or refused (reported, none used); results right.
# ompi_info.params: ompi_info lists 57 coll_xccl_* parameters, coll_xccl_net
# among them.
# xccl_mpi_nb (nonblocking collectives) runs at np 2, 3, 4; with -l (the
# shared-memory level voted on first, large calls and blocking calls among
# the nonblocking ones) too, where every rank must show at least NB_CALLS
# nonblocking calls of the level (algo=shm or shm_small), some of them
# through its latency path (via=latency_path: run from progress as
# requests in their turn).
# xccl_mpi_errors runs at np 2 and 3 with mpi_param_check 1 and 0 and must
# exit 0 and print "RESULT: <n> passed, 0 failed".
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
# xccl_mpi_persist (persistent collectives of the fourteen: one init and
# many starts each, MPI_Startall, requests never started or freed after
# their communicator, two threads; see the program's header) runs at np 1,
# 2, 3, 4 with the same verdict; .starts.np4: on every rank, for each of
# the fourteen, as many verbose lines "xccl: <coll> comm=<cid> rank=<r>
# ... persistent" as the program's line "STARTS rank=<r> ..." counts
# starts, and for allreduce, allgather, bcast and barrier each an algo=
# line (xccl runs them itself, no fallback=); .default_small.np{2,3}: the
# same program with xccl's default small-message size, where the calls
# xccl leaves to the fallback run the fallback's own persistent requests
# (its verdict alone).
#
#
# Thread levels and other runs that catch hangs (each run under a 60 s
# limit; a timeout is a failure):
# xccl_mpi_threads.<level>.np{2,4}: every MPI thread level (single, funneled,
#   serialized, multiple), communicators created and used, a nonblocking
#   first call, nonblocking initiation that must be local, 4 threads on
#   their own communicators at multiple; also multiple at the default
#   small-message size (.default_small).  Exit 0 and "RESULT: ... 0 failed".
# xccl_mpi_mixed.np{2,3,4} (and .default_small.np{2,3,4}): ranks describing
#   one message with different datatypes (MPI_INT on some ranks, a derived
#   type with gaps on others), blocking, nonblocking and persistent (three
#   starts of one init, new data each); results, and no
#   "fallback=noncontiguous_datatype" line for (i)bcast, (i)allgather,
#   (i)alltoall: xccl packs those itself.
# xccl_bench.nb_moving_root.np{2,3}: xccl_bench -i -t (the xccl column
#   nonblocking, bcast's root moving every call), 8 B .. 256 KiB: exit 0,
#   "# result: all xccl checks passed", nonblocking bcasts through xccl.
# xccl_bench.all_persistent.np3: xccl_bench -c all -P, 8 B .. 64 KiB: every
#   check of both columns and of the persistent ones passes, and persistent
#   allreduce starts run through xccl.
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
# xccl_mpi_trials.np{2,3}: the level's trials choose between shm and mesh
#   (results; one agreed pick per collective and size class, both ran before
#   it, only it after), with mpi_yield_when_idle 0: short trials (at np 3
#   Open MPI 5 still makes ranks yield: long ones, every rank alike);
#   .yield.np2 with 1: long trials; .off.np2 with coll_xccl_shm_trials 0:
#   no trials, no mesh; .late.np2: the last rank 5 ms late to every call,
#   the agreed trial times the medians of the spans from the last rank's
#   start to the last rank's end of xccl's readings, which lie inside the
#   calls' own clocks (they leave the wait for the late rank out).
# xccl_mpi_trials.kept.np2: everything again on a dup of MPI_COMM_WORLD:
#   there every rank takes the pick its world trial agreed ("kept from
#   earlier communicators"), times nothing, runs the pick from the second
#   call; .kept_partial.np3: ranks 0 and 1, then 1 and 2 (only rank 1 has
#   picks from before): no kept pick, the trials run in full.
# xccl_mpi_trials.picks.{write,read,differ,bad}.np2: picks kept for later
#   processes (coll_xccl_picks_file): a run writes its agreed picks, the
#   next reads them ("kept from earlier processes") and times nothing; a
#   rank whose file holds other picks, or a bad file (said on every rank,
#   then rewritten), leaves the trials timed.  Every other run has none.
#   (trials_runs.sh has the trials' runs.)
# xccl_mpi_trials.quiet_agree.np2: bcast and allgather alone, with trials:
#   no allreduce line or summary (the trials' agreements are xccl's own
#   quiet allreduces), each summary's calls= its lines.
# xccl_calibrate.np2: the cost file has the six terms, each within sane
#   bounds; xccl_simulate -F takes it; the component takes it (.component:
#   verbose 2 prints the file's values) or refuses a bad one with its reason
#   (.bad_file: the built-in model stays, the job runs).
# fallback_reasons: over every run's per-rank output, each verbose line with
#   "fallback=" gives a reason (fallback=<non-empty>).
#
# XCCL_MPI_ONLY=<extended regex>: only the runs whose name matches (e.g.
# XCCL_MPI_ONLY='threads|mixed|churn|errors' for the thread-level runs);
# fallback_reasons always runs, over the runs that ran.
#
# Each rank's output is also written to its own file (mpirun
# --output-filename): the merged stream of several ranks can split lines, the
# per-rank files cannot.  The verbose lines are counted from those files.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/ompi_env.sh"
# shellcheck source=SCRIPTDIR/../lib/verdict.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/verdict.sh"   # finish, check_bench

usage() {
    echo "usage: $0 <dir-with-test-binaries> <component-dir>" >&2
    exit 2
}

[[ $# -eq 2 ]] || usage
bindir=$1
compdir=$2
[[ -x $bindir/xccl_mpi_check && -x $bindir/xccl_mpi_errors && -x $bindir/xccl_mpi_nb &&
   -x $bindir/xccl_mpi_threads && -x $bindir/xccl_mpi_mixed && -x $bindir/xccl_comm_churn &&
   -x $bindir/xccl_mpi_latency && -x $bindir/xccl_mpi_trials && -x $bindir/xccl_mpi_colls &&
   -x $bindir/xccl_mpi_persist && -x $bindir/xccl_mpi_latency_v ]] ||
    { echo "$0: no test binaries in $bindir" >&2; exit 2; }
[[ -d $compdir ]] || { echo "$0: no directory $compdir" >&2; exit 2; }

read -r -a mpirun <<<"${MPIRUN:-mpirun}"
read -r -a extra_args <<<"${MPIRUN_ARGS:-}"
logdir=${TEST_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/xccl-mpi-tests.XXXXXX")}
mkdir -p "$logdir"

# Open MPI's components first, then the one under test (a private directory
# of links when an installed xccl would shadow it).
xccl_ompi_env "$compdir" "$logdir" testing
common_base=("${ompi_base_args[@]}")
common_args=("${common_base[@]}"
    --mca coll_xccl_verbose 1
    # xccl hands small messages to stock Open MPI by default; the tests
    # judge xccl's own algorithms, at every size
    --mca coll_xccl_small_msg_bytes 0)

passed=0
failed=0
only=${XCCL_MPI_ONLY:-}
ran=()   # names of the runs that ran

# selected <name>: whether XCCL_MPI_ONLY lets this run run.
selected() {
    [[ -z $only || $1 =~ $only ]]
}

# run_mpi <name> <np> [mpirun args...] -- <program> [args...]
# Runs one mpirun under a timeout ($run_timeout seconds, default 300).
# Leaves the merged output in $logdir/<name>.log, per-rank output under
# $logdir/<name>.out/, and the exit status in $run_rc.
run_rc=0
run_timeout=300
run_mpi() {
    local name=$1 np=$2
    shift 2
    local log=$logdir/$name.log out=$logdir/$name.out
    rm -rf "$out"
    echo "== $name"
    ran+=("$name")
    run_rc=0
    xccl_output_args "$out" "$@"
    timeout -k 10 "$run_timeout" "${mpirun[@]}" "${common_args[@]}" "${extra_args[@]}" \
        -np "$np" "${output_args[@]}" >"$log" 2>&1 || run_rc=$?
    if [[ $run_rc -eq 124 ]]; then
        echo "TIMEOUT after $run_timeout s" >>"$log"
    fi
}

# All output of one rank, stdout then stderr: per_rank_output <name> <rank>
per_rank_output() {
    local dir
    for dir in "$logdir/$1.out"/*/rank.*; do
        [[ -d $dir ]] || continue
        local r=${dir##*rank.}
        if [[ $((10#$r)) -eq $2 ]]; then
            cat "$dir"/stdout "$dir"/stderr 2>/dev/null || true
        fi
    done
}

# Checks (a): exit status 0 and "RESULT: ... 0 failed".  Prints the problem.
check_result() {
    local name=$1
    if [[ $run_rc -eq 124 ]]; then
        echo "$name: timed out after $run_timeout s"
        return 1
    fi
    if [[ $run_rc -ne 0 ]]; then
        echo "$name: exit status $run_rc"
        return 1
    fi
    local result
    # The per-rank files too: in the merged stream another rank's output
    # can split the line (seen at verbose 2).
    result=$(cat "$logdir/$name.log" "$logdir/$name.out"/*/rank.*/stdout 2>/dev/null |
        grep -E '^RESULT: [0-9]+ passed, [0-9]+ failed$' | tail -n 1 || true)
    if [[ -z $result ]]; then
        echo "$name: no RESULT line"
        return 1
    fi
    if [[ $result != *", 0 failed" ]]; then
        echo "$name: $result"
        return 1
    fi
}

# Checks (b): xccl's verbose lines against the EXPECT lines, per world rank
# and collective.  Prints one line per problem.
check_counts() {
    local name=$1 np=$2 r bad=0
    local expect_lines
    expect_lines=$(per_rank_output "$name" 0 | grep -E '^(EXPECT|CALLS) ' || true)
    for ((r = 0; r < np; r++)); do
        per_rank_output "$name" "$r" | awk -v rank="$r" -v name="$name" \
            -v expect="$(grep -E "^EXPECT rank=$r( |$)" <<<"$expect_lines" || true)" \
            -v calls="$(grep -E "^CALLS rank=$r( |$)" <<<"$expect_lines" || true)" '
            BEGIN {
                ncoll = split("allreduce reduce_scatter reduce_scatter_block allgather alltoall bcast", colls, " ")
                for (i = 1; i <= ncoll; i++) known[colls[i]] = 1
                # EXPECT rank=<r> allreduce=<n> ...   and   CALLS rank=<r> ...
                if (expect == "" || calls == "") { print name ": no EXPECT/CALLS line for rank " rank; exit 1 }
                n = split(expect, f, " ")
                for (i = 3; i <= n; i++) { split(f[i], kv, "="); want[kv[1]] = kv[2] }
                n = split(calls, f, " ")
                for (i = 3; i <= n; i++) { split(f[i], kv, "="); ncalls[kv[1]] = kv[2] }
                bad = 0
            }
            # Only lines about one of the six collectives are checked.
            /^xccl: / && ($2 in known) {
                if ($3 !~ /^comm=[0-9]+$/ || $4 !~ /^rank=[0-9]+$/ ||
                    $5 !~ /^bytes=[0-9]+$/ || $6 !~ /^(algo|fallback)=[^ =]+$/) {
                    if (nmalformed++ < 5) print name ": rank " rank ": malformed line: " $0
                    bad = 1
                    next
                }
                for (i = 7; i <= NF; i++)
                    if ($i !~ /^[A-Za-z_]+=/) {
                        if (nmalformed++ < 5) print name ": rank " rank ": malformed line: " $0
                        bad = 1
                        next
                    }
                split($4, kv, "=")
                if (kv[2] != rank) {
                    if (nwrongrank++ < 5)
                        print name ": rank " rank " printed rank=" kv[2] " (must be the MPI_COMM_WORLD rank): " $0
                    bad = 1
                }
                if ($6 ~ /^algo=/) algo[$2]++; else fallback[$2]++
            }
            END {
                if (expect == "" || calls == "") exit 1
                for (i = 1; i <= ncoll; i++) {
                    c = colls[i]
                    if (!(c in want) || !(c in ncalls)) {
                        print name ": EXPECT/CALLS line of rank " rank " lacks " c
                        bad = 1
                        continue
                    }
                    if (algo[c] + 0 != want[c] + 0) {
                        printf "%s: rank %d %s: %d algo= lines, EXPECT %d (%d fallback= lines)\n",
                            name, rank, c, algo[c], want[c], fallback[c]
                        bad = 1
                    }
                    if (algo[c] + fallback[c] != ncalls[c] + 0) {
                        printf "%s: rank %d %s: %d algo= + %d fallback= lines, CALLS %d\n",
                            name, rank, c, algo[c], fallback[c], ncalls[c]
                        bad = 1
                    }
                }
                exit bad
            }' || bad=1
    done
    return "$bad"
}

# Checks (c), forced runs: every algo= line names the forced algorithm.
# check_forced <name> <np> "<coll>=<algo> ..."
# A two-level algorithm (hier*) runs where the communicator spans several
# nodes with several ranks on some; elsewhere (MPI_COMM_SELF, splits inside
# one node) the collective's first algorithm stands in, and at least one
# call per rank must have been two-level.
declare -A first_algo=([allreduce]=ring [allgather]=ring [reduce_scatter]=ring
    [reduce_scatter_block]=ring [alltoall]=pairwise [bcast]=binomial)
check_forced() {
    local name=$1 np=$2 set=$3 r kv bad=0 wrong alt nforced
    for ((r = 0; r < np; r++)); do
        for kv in $set; do
            [[ ${kv%%=*} == layout || ${kv%%=*} == slot ]] && continue
            alt=algo=${kv#*=}
            [[ ${kv#*=} == hier* || ${kv#*=} == pipeline ]] && alt="algo=${first_algo[${kv%%=*}]}"
            # shm: nonblocking calls (no slot) and MPI_COMM_SELF run the
            # first; mesh too (single copies: blocking calls only)
            [[ ${kv#*=} == shm* || ${kv#*=} == mesh ]] && alt="algo=${first_algo[${kv%%=*}]}"
            wrong=$(per_rank_output "$name" "$r" |
                awk -v c="${kv%%=*}" -v a="algo=${kv#*=}" -v b="$alt" \
                    '$1 == "xccl:" && $2 == c && $6 ~ /^algo=/ && $6 != a && $6 != b' | head -n 1)
            if [[ -n $wrong ]]; then
                echo "$name: rank $r: forced ${kv}, got: $wrong"
                bad=1
            fi
            nforced=$(per_rank_output "$name" "$r" |
                awk -v c="${kv%%=*}" -v a="algo=${kv#*=}" '$1 == "xccl:" && $2 == c && $6 == a' | wc -l)
            if ((nforced == 0 && np > 1)); then
                echo "$name: rank $r: forced ${kv}, but no call ran it"
                bad=1
            fi
        done
    done
    return "$bad"
}

# Print a non-empty multi-line message indented.
indent() {
    [[ -z $1 ]] || printf '%s\n' "$1" | sed 's/^/   /'
}

# judge <name> <np> <check>: the verdict on a run: check_result and
# <check> <name> <np>, their problems indented.
judge() {
    local name=$1 np=$2 check=$3 ok=0 problems
    problems=$({ check_result "$name" && "$check" "$name" "$np"; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
}


for np in 1 2 3 4 7; do
    name=xccl_mpi_check.np$np
    selected "$name" || continue
    run_mpi "$name" "$np" "$bindir/xccl_mpi_check"
    ok=0
    problems=$({ check_result "$name" && check_counts "$name" "$np"; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done

# The shared-memory level off (coll_xccl_shm_bytes 0): every call inside
# the node over the transport, as before the level existed.
for np in 1 2 3 4 7; do
    name=xccl_mpi_check.shm_off.np$np
    selected "$name" || continue
    run_mpi "$name" "$np" --mca coll_xccl_shm_bytes 0 "$bindir/xccl_mpi_check" -q
    ok=0
    problems=$({ check_result "$name" && check_counts "$name" "$np" &&
        { ! grep -qE 'algo=(shm|shm_small) ' "$logdir/$name.log" ||
          { echo "$name: a shm algorithm ran with the level off"; false; }; }; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done

# The default configuration (small messages to the fallback): results
# only.  Stock Open MPI 4.1 is wrong for MAX/MIN on MPI_UNSIGNED_LONG and,
# with op/avx, for 8- and 16-bit sums; xccl must not hand those to it.
name=xccl_mpi_check.default_small.np2
saved_args=("${common_args[@]}")
common_args=("${common_base[@]}")
if selected "$name"; then
    run_mpi "$name" 2 "$bindir/xccl_mpi_check" -q
    ok=0
    problems=$(check_result "$name" 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi

# Ranks bound in the reverse of their rank order (rankfile): inside the
# node xccl orders them by placement, and the results stay right.
name=xccl_mpi_check.placement.np2
if ! selected "$name"; then
    :
elif [[ $(nproc) -ge 2 ]]; then
    xccl_rankfile_dir "$logdir"
    rankfile=$ompi_rankfile_dir/rankfile.reverse
    printf 'rank 0=%s slot=1\nrank 1=%s slot=0\n' "$(hostname)" "$(hostname)" >"$rankfile"
    run_mpi "$name" 2 "${ompi_bind_args[@]}" --rankfile "$rankfile" --mca coll_xccl_verbose 2 \
        --mca coll_xccl_small_msg_bytes 0 "$bindir/xccl_mpi_check" -q
    ok=0
    problems=$({ check_result "$name" &&
        { grep -q 'comm=0 node 0: ranks in placement order (cpu): 1 0' "$logdir/$name.log" ||
          { echo "$name: no 'ranks in placement order (cpu): 1 0' line"; false; }; }; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
    [[ $ompi_rankfile_dir == "$logdir" ]] || rm -rf "$ompi_rankfile_dir"
else
    echo "== $name: skipped (needs 2 processors to bind 2 ranks apart)"
fi
# The node's topology from a file (coll_xccl_topo_file), written back by
# coll_xccl_topo_dump: the start-up line names the file's classification
# and the dump is what xccl_info writes for the same file.
name=xccl_mpi_check.topo_file.np2
topo_fixture=$(cd "$(dirname "$0")/../fixtures/topo" && pwd)/dgx-h100-nvswitch-ib.topo
if selected "$name"; then
run_mpi "$name" 2 --mca coll_xccl_verbose 2 --mca coll_xccl_topo_file "$topo_fixture" \
    --mca coll_xccl_topo_dump "$logdir/topo_dump.topo" "$bindir/xccl_mpi_check" -q
ok=0
problems=$({ check_result "$name" &&
    { grep -q 'init: ucx ok .*node intra=NVSWITCH devices=8 fabric=IB' "$logdir/$name.log" ||
      { echo "$name: no init line with the file's topology"; false; }; } &&
    { "$bindir/xccl_info" --topo-file "$topo_fixture" --dump | cmp - "$logdir/topo_dump.topo" ||
      { echo "$name: coll_xccl_topo_dump differs from xccl_info --dump"; false; }; } &&
    # whether UCX moves CUDA memory (ucp_context_query) agrees with the
    # transports it opened: a cuda_* transport, or host memory only
    { init=$(grep -m1 'init: ucx ok tls=' "$logdir/$name.log") &&
      tls=${init#*tls=} && tls=${tls%% *} &&
      if [[ $tls == *cuda* ]]; then want='(moves cuda memory'; else want='(host memory only)'; fi &&
      [[ $init == *"tls=$tls $want"* ]] ||
      { echo "$name: init line '$init' does not say '$want' for transports '$tls'"; false; }; }
} 2>&1) || ok=1
indent "$problems"
finish "$name" "$ok"
fi

# More ranks than processors: xccl's UCX context takes the 256k rendezvous
# threshold (coll_xccl_ucx_rndv_thresh auto); bounded to small machines.
ncpu=$(nproc)
name=xccl_mpi_check.oversubscribed.np$((ncpu + 1))
if ! selected "$name"; then
    :
elif ((ncpu <= 4)); then
    run_mpi "$name" $((ncpu + 1)) --mca coll_xccl_verbose 2 "$bindir/xccl_mpi_check" -q
    ok=0
    problems=$({ check_result "$name" &&
        { grep -q "ucx: $((ncpu + 1)) ranks on this node, $ncpu processors: rendezvous threshold 256k" \
            "$logdir/$name.log" || { echo "$name: no 256k rendezvous threshold line"; false; }; }; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
else
    echo "== $name: skipped ($ncpu processors: too many ranks to oversubscribe in a test)"
fi
common_args=("${saved_args[@]}")

# Every algorithm, forced, over real transfers (quick mode: fewer counts).
# (one set per algorithm of a collective; more sets as algorithms land)
algo_sets=(
    "allreduce=ring allgather=ring reduce_scatter=ring reduce_scatter_block=ring alltoall=pairwise bcast=binomial"
    "allreduce=recursive_doubling allgather=bruck reduce_scatter=pairwise reduce_scatter_block=pairwise bcast=scatter_allgather"
    "allreduce=rabenseifner alltoall=linear bcast=chain"
    "allreduce=swing allgather=recursive_doubling reduce_scatter=recursive_halving reduce_scatter_block=recursive_halving alltoall=bruck"
    "allreduce=dbt"
    "allreduce=nhr allgather=nhr reduce_scatter=nhr reduce_scatter_block=nhr bcast=nhr"
    "allreduce=nb allgather=nb reduce_scatter=nb reduce_scatter_block=nb bcast=nb"
    # two-level, on synthetic node layouts (coll_xccl_node_layout)
    "layout=block:2 allreduce=hier allgather=hier reduce_scatter=hier reduce_scatter_block=hier alltoall=hier bcast=hier"
    "layout=cyclic:2 allreduce=hier_hd allgather=hier reduce_scatter=hier_hd reduce_scatter_block=hier_hd alltoall=hier bcast=hier_rails"
    "layout=block:2 allgather=hier_bruck alltoall=hier_bruck bcast=hier_sag"
    # pipelined, with xccl_mpi_check -P: calls past 4 MiB, in
    # several 2 MiB chunks; uneven nodes at np 3 and 7
    "layout=block:2 allreduce=pipeline allgather=pipeline reduce_scatter=pipeline reduce_scatter_block=pipeline"
    "layout=cyclic:2 allreduce=pipeline allgather=pipeline reduce_scatter=pipeline reduce_scatter_block=pipeline"
    # the shared-memory level; slot=: coll_xccl_shm_bytes, small
    # slots make every message past a few KiB a pipeline of chunks
    "allreduce=shm allgather=shm reduce_scatter=shm reduce_scatter_block=shm alltoall=shm bcast=shm"
    "slot=8192 allreduce=shm_small allgather=shm reduce_scatter=shm reduce_scatter_block=shm alltoall=shm bcast=shm"
    "slot=4096 layout=block:2 allreduce=hier allgather=hier reduce_scatter=hier_hd alltoall=hier bcast=hier"
    # single copies (process_vm_readv) from the peers' buffers, blocking
    # calls; the reductions reduce pieces copied into scratch
    "allreduce=mesh allgather=mesh reduce_scatter=mesh reduce_scatter_block=mesh alltoall=mesh bcast=mesh"
)
for set in "${algo_sets[@]}"; do
    force=()
    tag=""
    for kv in $set; do
        if [[ ${kv%%=*} == layout ]]; then
            force+=(--mca coll_xccl_node_layout "${kv#*=}")
            continue
        fi
        if [[ ${kv%%=*} == slot ]]; then
            force+=(--mca coll_xccl_shm_bytes "${kv#*=}")
            tag=slot${kv#*=}_
            continue
        fi
        force+=(--mca "coll_xccl_${kv%%=*}_algorithm" "${kv#*=}")
        [[ ${kv%%=*} == allreduce ]] && tag=$tag${kv#*=}
    done
    [[ -n $tag ]] || tag=${set##*=}
    nps="3 4"
    # the level on, forced, at every size of the issue
    [[ $set == *=shm* || $set == *=mesh* ]] && nps="1 2 3 4 7"
    # trees: the mirrored (even) and the shifted (odd) second tree, depth 3
    [[ $set == allreduce=dbt ]] && nps="3 4 7"
    # nhr, nb: windows of uneven halves, a missing block (3, 7) and none (4)
    [[ $set == allreduce=nhr* || $set == allreduce=nb* ]] && nps="3 4 7"
    # pipeline: big calls too; block:2 on uneven nodes (3, 7) and even (4)
    extra=()
    if [[ $set == *=pipeline* ]]; then
        extra=(-P)
        [[ $set == layout=block:2* ]] && nps="3 4 7" || nps="4"
        tag=${set%% *}_$tag
        tag=${tag#layout=}
        tag=${tag/:/}
    fi
    for np in $nps; do
        name=xccl_mpi_check.forced_$tag.np$np
        selected "$name" || continue
        run_mpi "$name" "$np" "${force[@]}" "$bindir/xccl_mpi_check" -q "${extra[@]}"
        ok=0
        problems=$({ check_result "$name" && check_counts "$name" "$np" &&
            check_forced "$name" "$np" "$set"; } 2>&1) || ok=1
        indent "$problems"
        finish "$name" "$ok"
    done
done

# The network model named by coll_xccl_net: the component says
# at verbose 2 which it uses (the description xccl_simulate -N takes), a
# bad one is reported and none used; the results stay right either way.
saved_args=("${common_args[@]}")
common_args=("${common_base[@]}" --mca coll_xccl_verbose 2 --mca coll_xccl_small_msg_bytes 0)
for net in fattree:1:4,nics=1 bogus:3; do
    name=xccl_mpi_check.net_${net%%:*}.np4
    selected "$name" || continue
    run_mpi "$name" 4 --mca coll_xccl_net "$net" --mca coll_xccl_node_layout block:2 \
        "$bindir/xccl_mpi_check" -q
    ok=0
    problems=$({ check_result "$name" && check_counts "$name" 4 &&
        if [[ $net == bogus* ]]; then
            grep -q "xccl: coll_xccl_net $net: .*; no network model" "$logdir/$name.log" ||
                { echo "$name: no line refusing coll_xccl_net $net"; exit 1; }
            want="network none"
        else
            want="network fattree:1:4,nics=1"
        fi
        for ((r = 0; r < 4; r++)); do
            per_rank_output "$name" "$r" | grep -c "init: cost model .*; $want\$" >/dev/null ||
                { echo "$name: rank $r: no \"init: cost model ...; $want\" line"; exit 1; }
        done; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done
common_args=("${saved_args[@]}")

# ompi_info lists every parameter: 59 (two for each of the 14
# collectives); a parameter added or removed changes this count, README's table and
# docs/parameters.md together.
name=ompi_info.params
if selected "$name"; then
    echo "== $name"
    ran+=("$name")
    OMPI_MCA_mca_base_component_path=$component_path ompi_info --param coll xccl --level 9 \
        >"$logdir/$name.log" 2>&1
    nparams=$(grep -oE 'parameter "coll_xccl_[a-z0-9_]+"' "$logdir/$name.log" | sort -u | wc -l)
    ok=0
    problems=$({
        [[ $nparams -eq 59 ]] || { echo "$name: $nparams coll_xccl_* parameters, want 59"; exit 1; }
        grep -q 'parameter "coll_xccl_net" (current value: "none"' "$logdir/$name.log" ||
            { echo "$name: no coll_xccl_net parameter with value none"; exit 1; }
    } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi

# A rank killed (SIGKILL) inside shared-memory collectives (allreduce and
# bcast forced to shm, 2 MiB through a 64 KiB slot: pipelines of chunks):
# the job must abort (mpirun exits non-zero, well inside the limit), no
# process of it may survive, and nothing new may stay in /dev/shm (xccl's
# segments have no name; Open MPI's own vader_segment.* files, which its
# vader BTL leaves after a killed job, are not xccl's and are ignored).
for np in 2 3; do
    name=xccl_mpi_kill.np$np
    selected "$name" || continue
    shm_before=$(ls /dev/shm | grep -v '^vader_segment\.' | sort || true)
    saved_timeout=$run_timeout
    run_timeout=60
    run_mpi "$name" "$np" --mca coll_xccl_shm_bytes 65536 \
        --mca coll_xccl_allreduce_algorithm shm --mca coll_xccl_bcast_algorithm shm \
        "$bindir/xccl_mpi_kill"
    run_timeout=$saved_timeout
    sleep 1
    shm_after=$(ls /dev/shm | grep -v '^vader_segment\.' | sort || true)
    ok=0
    problems=$({
        if [[ $run_rc -eq 124 ]]; then echo "$name: the job hung after the kill (timeout)"; exit 1; fi
        if [[ $run_rc -eq 0 ]]; then echo "$name: exit status 0: the rank was not killed"; exit 1; fi
        grep -q '^LOOPING' "$logdir/$name.log" || { echo "$name: no LOOPING line: the loop never ran"; exit 1; }
        grep -q 'allreduce comm=0 .*algo=shm ' "$logdir/$name.log" ||
            { echo "$name: no allreduce ran algo=shm"; exit 1; }
        if pgrep -f "$bindir/xccl_mpi_kill" >/dev/null; then
            echo "$name: processes of the job survive: $(pgrep -fa "$bindir/xccl_mpi_kill" | head -3)"
            exit 1
        fi
        new=$(comm -13 <(printf '%s\n' "$shm_before") <(printf '%s\n' "$shm_after"))
        if [[ -n $new ]]; then echo "$name: left in /dev/shm: $new"; exit 1; fi
    } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done

# Every rank of run NAME logged a line matching ERE (RANK in it stands for
# the rank's number); for each rank that did not, says WHAT.
every_rank_logged() {
    local name=$1 np=$2 ere=$3 what=$4 bad=0 r
    for ((r = 0; r < np; r++)); do
        # (grep -c reads to the end: no SIGPIPE under pipefail)
        if ! per_rank_output "$name" "$r" | grep -cE "${ere//RANK/$r}" >/dev/null; then
            echo "$name: rank $r: $what"
            bad=1
        fi
    done
    return "$bad"
}
# Nonblocking collectives: results, and every rank's nonblocking calls went
# through xccl (at least NB_CALLS "xccl: i<coll> ... algo=" lines; Open MPI
# adds its own, e.g. MPI_Comm_dup's nonblocking allreduce).
check_nb_lines() {
    local name=$1 np=$2 r want got bad=0
    want=$(grep -E '^NB_CALLS [0-9]+$' "$logdir/$name.log" | awk '{print $2}' | tail -n 1)
    [[ -n $want ]] || { echo "$name: no NB_CALLS line"; return 1; }
    for ((r = 0; r < np; r++)); do
        got=$(per_rank_output "$name" "$r" |
            grep -cE '^xccl: i(allreduce|allgather|reduce_scatter|reduce_scatter_block|alltoall|bcast) .* algo=' || true)
        if ((got < want)); then
            echo "$name: rank $r: $got nonblocking algo= lines, want at least $want"
            bad=1
        fi
    done
    return "$bad"
}
# The level's nonblocking calls (-l): at least NB_CALLS lines of its
# algorithms per rank (the calls on the communicators before the vote, such
# as MPI_Comm_dup's, do not count).
check_nb_level_lines() {
    local name=$1 np=$2 r want got bad=0
    want=$(grep -E '^NB_CALLS [0-9]+$' "$logdir/$name.log" | awk '{print $2}' | tail -n 1)
    [[ -n $want ]] || { echo "$name: no NB_CALLS line"; return 1; }
    for ((r = 0; r < np; r++)); do
        got=$(per_rank_output "$name" "$r" |
            grep -cE '^xccl: i[a-z_]+ .* algo=(shm|shm_small)( |$)' || true)
        if ((got < want)); then
            echo "$name: rank $r: $got nonblocking calls of the shared-memory level, want at least $want"
            bad=1
        fi
    done
    every_rank_logged "$name" "$np" "^xccl: i[a-z_]+ comm=[0-9]+ rank=RANK .*via=latency_path" \
        "no nonblocking call took the level's latency path" || bad=1
    return "$bad"
}
for np in 2 3 4; do
    for mode in plain level; do
        name=xccl_mpi_nb.np$np
        args=()
        check=check_nb_lines
        if [[ $mode == level ]]; then
            name=xccl_mpi_nb.level.np$np
            args=(-l)
            check=check_nb_level_lines
        fi
        selected "$name" || continue
        run_mpi "$name" "$np" "$bindir/xccl_mpi_nb" "${args[@]}"
        judge "$name" "$np" "$check"
    done
done

for check in 1 0; do
    for np in 2 3; do
        name=xccl_mpi_errors.param_check$check.np$np
        selected "$name" || continue
        run_mpi "$name" "$np" --mca mpi_param_check "$check" "$bindir/xccl_mpi_errors"
        ok=0
        problems=$(check_result "$name" 2>&1) || ok=1
        indent "$problems"
        finish "$name" "$ok"
    done
done

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
# requests.
for np in 2 3; do
    name=xccl_mpi_persist.default_small.np$np
    selected "$name" || continue
    saved_args=("${common_args[@]}")
    common_args=("${common_base[@]}" --mca coll_xccl_verbose 1)
    run_mpi "$name" "$np" "$bindir/xccl_mpi_persist" -q
    common_args=("${saved_args[@]}")
    ok=0
    problems=$(check_result "$name" 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done

# ------------------------------------------------------ thread levels
# Hangs are what these runs catch: a shorter limit, a timeout fails.
run_timeout=60

# Every thread level; with the default small-message size as well, where
# the small blocking calls and the small nonblocking ones of this one-node
# communicator take the level's latency path (each rank must log
# nonblocking calls below small_msg_bytes, 4096, there: they went to
# libnbc before), the rest of the small calls the fallback.
for level in single funneled serialized multiple; do
    for np in 2 4; do
        name=xccl_mpi_threads.$level.np$np
        selected "$name" || continue
        run_mpi "$name" "$np" "$bindir/xccl_mpi_threads" "$level"
        ok=0
        problems=$(check_result "$name" 2>&1) || ok=1
        indent "$problems"
        finish "$name" "$ok"
    done
done
name=xccl_mpi_threads.multiple.default_small.np2
if selected "$name"; then
    saved_args=("${common_args[@]}")
    common_args=("${common_base[@]}" --mca coll_xccl_verbose 1)
    run_mpi "$name" 2 "$bindir/xccl_mpi_threads" multiple
    common_args=("${saved_args[@]}")
    ok=0
    problems=$({ check_result "$name" &&
        every_rank_logged "$name" 2 \
            "^xccl: i[a-z_]+ comm=[0-9]+ rank=RANK bytes=([0-9]{1,3}|[1-3][0-9]{3}|40[0-8][0-9]|409[0-5]) .*via=latency_path" \
            "no nonblocking call below 4096 bytes took the level's latency path"; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi

# Mixed datatypes of one signature: results, and xccl runs the movement
# collectives itself (packing), never "fallback=noncontiguous_datatype".
check_no_noncontig_fallback() {
    local name=$1 np=$2 r n bad=0
    for ((r = 0; r < np; r++)); do
        n=$(per_rank_output "$name" "$r" |
            grep -cE '^xccl: i?(bcast|allgather|alltoall) .*fallback=noncontiguous_datatype' || true)
        if ((n > 0)); then
            echo "$name: rank $r: $n movement calls with fallback=noncontiguous_datatype"
            bad=1
        fi
    done
    return "$bad"
}
# run_small_modes <tag> <check> <program> [args]: <tag>.np{2,3,4} with the
# tests' small_msg_bytes 0 and <tag>.default_small.np{2,3,4} with xccl's
# defaults (verbose 1 both), each judged by check_result and
# <check> <name> <np>.
run_small_modes() {
    local tag=$1 check=$2 small np name saved
    shift 2
    for small in 0 default; do
        for np in 2 3 4; do
            name=$tag.np$np
            [[ $small == 0 ]] || name=$tag.default_small.np$np
            selected "$name" || continue
            saved=("${common_args[@]}")
            [[ $small == 0 ]] || common_args=("${common_base[@]}" --mca coll_xccl_verbose 1)
            run_mpi "$name" "$np" "$@"
            common_args=("${saved[@]}")
            judge "$name" "$np" "$check"
        done
    done
}
run_small_modes xccl_mpi_mixed check_no_noncontig_fallback "$bindir/xccl_mpi_mixed"

# The shared-memory level's latency path under skew: small blocking calls
# of all six collectives back to back, no barriers, random sleeps, bcast
# roots that run ahead, executor calls (past 64 KiB per rank) in between; with
# xccl's defaults (small calls take the latency path's fast way; the level's
# executor above small_msg_bytes) and with small_msg_bytes 0.  Results,
# and for every rank and collective at least one verbose line
# "via=latency_path" and one "algo=shm..." line without it (both paths ran);
# without -t, allreduce also "algo=shm ... via=latency_path" (its sliced
# form, past xccl_select_whole_max).
check_latency_lines() {
    local name=$1 np=$2 bad=0 r coll out
    for ((r = 0; r < np; r++)); do
        out=$(per_rank_output "$name" "$r")
        # every call names the algorithm it ran
        if grep -qE "^xccl: .*algo=\(null\)" <<<"$out"; then
            echo "$name: rank $r: calls logged without their algorithm (algo=(null))"
            bad=1
        fi
        for coll in allreduce reduce_scatter reduce_scatter_block allgather alltoall bcast; do
            if ! grep -qE "^xccl: $coll comm=0 rank=$r .*via=latency_path" <<<"$out"; then
                echo "$name: rank $r: no $coll call took the latency path"
                bad=1
            fi
            # (grep -c reads to the end: no SIGPIPE under pipefail)
            if (($(grep -E "^xccl: $coll comm=0 rank=$r .*algo=shm" <<<"$out" |
                   grep -cv via= || true) == 0)); then
                echo "$name: rank $r: no $coll call ran the level's executor"
                bad=1
            fi
        done
    done
    return "$bad"
}
# ... and allreduces past xccl_select_whole_max took its sliced form
check_latency_sliced() {
    local name=$1 np=$2 bad=0
    check_latency_lines "$name" "$np" || bad=1
    every_rank_logged "$name" "$np" "^xccl: allreduce comm=0 rank=RANK .*algo=shm size=.*via=latency_path" \
        "no allreduce took the latency path's sliced form (algo=shm)" || bad=1
    return "$bad"
}
run_small_modes xccl_mpi_latency check_latency_sliced "$bindir/xccl_mpi_latency" -n 3000
# The same with tiny calls, half of them bcasts (-t): payloads that also
# travel in the root's latency line, roots running ahead of the readers.
run_small_modes xccl_mpi_latency.tiny check_latency_lines "$bindir/xccl_mpi_latency" -n 3000 -t
# Bcasts of 16-64 KiB (-b), which the latency path moves in 16 KiB pieces
# posted one by one, the readers copying piece k while the root copies
# k + 1; trials off, so that no size class goes to the mesh.  Every rank
# must show such a bcast on the latency path.  (Planted, a reader that
# waits for the first piece's post only: 4 / 499 / 48 checks wrong at np 2
# / 3 / 4.)
check_latency_pieces() {
    every_rank_logged "$1" "$2" \
        "^xccl: bcast comm=0 rank=RANK bytes=(1[6-9][0-9]{3}|[2-6][0-9]{4}) .*via=latency_path" \
        "no bcast of more than 16 KiB took the latency path"
}
# xccl_mpi_latency in mode $2 at np 2, 3, 4 with the trials off, named
# xccl_mpi_latency.$1.npN, checked by check_result and $3.
run_latency_no_trials() {
    local tag=$1 mode=$2 check=$3 np name saved
    for np in 2 3 4; do
        name=xccl_mpi_latency.$tag.np$np
        selected "$name" || continue
        saved=("${common_args[@]}")
        common_args+=(--mca coll_xccl_shm_trials 0)
        run_mpi "$name" "$np" "$bindir/xccl_mpi_latency" -n 3000 "$mode"
        common_args=("${saved[@]}")
        judge "$name" "$np" "$check"
    done
}
run_latency_no_trials pieces -b check_latency_pieces

# Bcasts whose root changes on most calls (-r), sizes kept for runs, one
# in four an MPI_Ibcast: at two ranks such a chain moves through the same
# units of the small areas, each root writing over the part it has just
# read.  Trials off (no size class to the mesh).  Every rank must show a
# bcast of more than 48 bytes and an ibcast on the latency path.
# (Planted, a root that skips the ring's wait: 21 of 9000 checks wrong at
# np 3; at np 2 the chain's placement needs no wait of its own, see
# coll_xccl_latency.c.)
check_latency_roots() {
    every_rank_logged "$1" "$2" \
        "^xccl: bcast comm=0 rank=RANK bytes=(49|[5-9][0-9]|[1-9][0-9]{2,4}) .*via=latency_path" \
        "no bcast of more than 48 bytes took the latency path" &&
        every_rank_logged "$1" "$2" "^xccl: ibcast comm=0 rank=RANK .*via=latency_path" \
            "no ibcast took the latency path"
}
run_latency_no_trials roots -r check_latency_roots

# The v forms' latency path (xccl_mpi_latency_v: gatherv, scatterv and
# alltoallv under skew, small and large blocks, one rank's past the
# latency path's room while the others' fit, in place, the six's small
# calls, gather, scatter, reduce and allgatherv of up to about 4 KiB and
# nonblocking v calls in flight among them): results, and on every rank,
# for each of the seven, one verbose line per call (the program's CALLS
# line) and at least one via=latency_path (with xccl's default
# small-message size too: decide keeps those from the fallback), for
# gatherv at least one algo=shm without a via (the executor's schedule of
# the large blocks), for scatterv and alltoallv at least one
# via=latency_path+single_copy (a large block read straight from the
# sender's buffer), and with coll_xccl_shm_cma false (.no_cma) none of
# those but an algo=shm line of all three, one line per nonblocking
# call, at least one via=latency_path of each of igather, iscatter,
# ireduce and iallgatherv (a request of the latency path: all of theirs
# fit), and no call of gather, scatter, reduce or allgatherv on any
# communicator to the fallback (all of theirs fit, or pass 4 KiB in all;
# the first call on a new communicator takes the whole way).  (Planted: a rank without
# a large block that skips its executor flag hangs at np 3 and 4; a
# gatherv root that leaves the small blocks in the executor's counts
# gives wrong bytes there, a receiver that takes a block by its size
# where the sender's part had no room for it crashes there; a writer that
# skips the ring's wait gives wrong bytes at np 2, 3 and 4.)
check_latency_v() {
    local name=$1 np=$2 r bad=0 cma=1
    [[ $name != *.no_cma.* ]] || cma=0
    for ((r = 0; r < np; r++)); do
        per_rank_output "$name" "$r" | awk -v rank="$r" -v name="$name" -v cma="$cma" '
            $1 == "CALLS" && $2 == "rank=" rank { for (i = 3; i <= NF; i++) { split($i, kv, "="); calls[kv[1]] = kv[2] } seen = 1 }
            $1 == "xccl:" && $2 ~ /^(gather|scatter|reduce|allgatherv)$/ && $6 ~ /^fallback=/ { fb[$2]++ }
            $1 == "xccl:" && $2 ~ /^i?(gatherv|scatterv|alltoallv|gather|scatter|reduce|allgatherv)$/ && $3 == "comm=0" {
                lines[$2]++
                if ($0 ~ / via=latency_path/) lat[$2]++
                else if ($6 == "algo=shm") exe[$2]++
                if ($0 ~ / via=latency_path\+single_copy$/) single[$2]++
            }
            END {
                if (!seen) { print name ": rank " rank ": no CALLS line"; exit 1 }
                msg = ""
                n = split("gatherv scatterv alltoallv gather scatter reduce allgatherv", cs, " ")
                for (i = 1; i <= n; i++) for (nb = 0; nb < 2; nb++) {
                    c = (nb ? "i" : "") cs[i]
                    if (lines[c] + 0 != calls[c] + 0)
                        msg = msg sprintf(" %s: %d calls, %d verbose lines;", c, calls[c], lines[c])
                    if ((!nb || i > 3) && lat[c] + 0 == 0) msg = msg " " c ": none via=latency_path;"
                    if (!nb && (i == 1 || (i <= 3 && !cma)) && exe[c] + 0 == 0) msg = msg " " c ": none on the executor (algo=shm);"
                    if (!nb && i > 1 && i <= 3 && cma && single[c] + 0 == 0) msg = msg " " c ": none via=latency_path+single_copy;"
                    if (!cma && single[c] + 0 > 0) msg = msg " " c ": " single[c] " single copies with coll_xccl_shm_cma false;"
                    if (!nb && fb[c] + 0 > 0) msg = msg " " c ": " fb[c] " calls to the fallback;"
                }
                if (msg != "") { print name ": rank " rank ":" msg; exit 1 }
            }' || bad=1
    done
    return "$bad"
}
run_small_modes xccl_mpi_latency_v check_latency_v "$bindir/xccl_mpi_latency_v" -n 3000
for np in 2 3; do
    name=xccl_mpi_latency_v.no_cma.np$np
    selected "$name" || continue
    saved=("${common_args[@]}")
    common_args+=(--mca coll_xccl_shm_cma false)
    run_mpi "$name" "$np" "$bindir/xccl_mpi_latency_v" -n 3000
    common_args=("${saved[@]}")
    judge "$name" "$np" check_latency_v
done

. "$(dirname "${BASH_SOURCE[0]}")/trials_runs.sh"

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
run_timeout=300

# xccl_calibrate measures the cost model on this machine, the shared-memory
# level's flag and peer terms included; the component takes its file (the
# verbose-2 init line shows the file's six values) and xccl_simulate -F
# too.  A bad file is refused with a reason: the built-in model stays.
# check_cost_file <file>: xccl_calibrate's six terms in order, each within
# bounds no machine leaves (alpha 10 ns..1 ms, copies and reductions
# 0.01-1000 GB/s, a flag 1 ns..100 us, peer >= 0 and < 1 ns per byte).
check_cost_file() {
    awk '
        BEGIN { split("alpha beta gamma delta flag peer", want, " ")
                lo["alpha"] = 1e-8;  hi["alpha"] = 1e-3;  lo["flag"] = 1e-9; hi["flag"] = 1e-4
                lo["beta"] = lo["gamma"] = lo["delta"] = 1e-12
                hi["beta"] = hi["gamma"] = hi["delta"] = 1e-7
                lo["peer"] = 0;      hi["peer"] = 1e-9 }
        { for (i = 1; i <= NF; i++) {
              n++; eq = index($i, "="); k = substr($i, 1, eq - 1); v = substr($i, eq + 1)
              if (k != want[n]) { printf "term %d is \"%s\", want %s\n", n, $i, want[n]; bad = 1 }
              else if (v !~ /^[0-9.]+(e[-+]?[0-9]+)?$/ || v + 0 < lo[k] || v + 0 >= hi[k]) {
                  printf "%s outside [%g, %g)\n", $i, lo[k], hi[k]; bad = 1 } } }
        END { if (n != 6) { printf "%d terms, want 6\n", n; bad = 1 }; exit bad }' "$1"
}
name=xccl_calibrate.np2
if selected "$name"; then
    cost=$logdir/calibrate.cost
    run_mpi "$name" 2 "$bindir/xccl_calibrate" -o "$cost"
    ok=0
    problems=$({
        { [[ $run_rc -eq 0 ]] || { echo "$name: exit status $run_rc"; false; }; } &&
        check_cost_file "$cost" &&
        { sim=$("$bindir/xccl_simulate" -c allgather -n 2 -S 1M -P read -s 64K -F "$cost") &&
          grep -q 'shm flag' <<<"$sim" || { echo "$name: xccl_simulate -F refused the file"; false; }; }
    } 2>&1) || ok=1
    if ((ok == 0)); then
        saved=("${common_args[@]}")
        common_args=("${common_base[@]}" --mca coll_xccl_small_msg_bytes 0)
        # the component's model is the file's, every term
        run_mpi "$name.component" 2 --mca coll_xccl_verbose 2 --mca coll_xccl_cost_file "$cost" \
            "$bindir/xccl_mpi_check" -q
        problems=$({ check_result "$name.component" && {
            init=$(per_rank_output "$name.component" 1 | grep -m1 'init: cost model ' || true)
            [[ $init == *"init: cost model $cost: $(tr -s ' \n' ' ' <"$cost" | sed 's/ $//')"* ]] ||
                { echo "$name: rank 1's model line '$init' is not the file's '$(cat "$cost")'"; false; }; }
        } 2>&1) || ok=1
        # a bad file: said why, the built-in model kept, the job runs
        echo "alpha=1e-6 beta=2e-10 gamma=2e-10 flag=-1" >"$logdir/bad.cost"
        run_mpi "$name.bad_file" 2 --mca coll_xccl_verbose 2 --mca coll_xccl_cost_file "$logdir/bad.cost" \
            "$bindir/xccl_mpi_check" -q
        problems+=$({ check_result "$name.bad_file" && {
            out=$(per_rank_output "$name.bad_file" 0)
            grep -q "coll_xccl_cost_file $logdir/bad.cost: flag= needs a number >= 0" <<<"$out" &&
            grep -q 'init: cost model built-in: ' <<<"$out" ||
                { echo "$name: a bad cost file was not refused with its reason"; false; }; }
        } 2>&1) || ok=1
        common_args=("${saved[@]}")
    fi
    indent "$problems"
    finish "$name" "$ok"
fi

# xccl_bench as the GPU benchmark runs and the docs use it, a short sweep: the
# xccl column nonblocking (-i: MPI_I<collective> then MPI_Wait) and bcast's
# root moving on every call (-t); every xccl result checked by the bench
# ("# result: all xccl checks passed"), np 2 and 3.
for np in 2 3; do
    name=xccl_bench.nb_moving_root.np$np
    selected "$name" || continue
    run_mpi "$name" "$np" "$bindir/xccl_bench" -i -t -b 8 -e 256K -f 8 -r 2 -q
    ok=0
    problems=$({
        check_bench "$name" &&
        { grep -qE '^xccl: ibcast .* (algo|via)=' "$logdir/$name.log" ||
            { echo "$name: no nonblocking bcast ran through xccl"; false; }; }
    } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done

# The same bench over every collective with its persistent form (-P):
# every xccl and stock result checked, the persistent columns too; np 3.
name=xccl_bench.all_persistent.np3
if selected "$name"; then
    run_mpi "$name" 3 "$bindir/xccl_bench" -c all -P -b 8 -e 64K -f 16 -r 1 -q
    ok=0
    problems=$({
        check_bench "$name" &&
        { ! grep -qE '^ *[0-9].*FAIL' "$logdir/$name.log" || { echo "$name: a check failed"; false; }; } &&
        { grep -qE '^xccl: allreduce .* persistent$' "$logdir/$name.log" ||
            { echo "$name: no persistent start ran through xccl"; false; }; }
    } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi

# Every fallback= line of every run that ran names its reason.
name=fallback_reasons
echo "== $name"
ok=0
problems=$(
    for r in "${ran[@]}"; do
        for f in "$logdir/$r.out"/*/rank.*/stdout "$logdir/$r.out"/*/rank.*/stderr; do
            [[ -f $f ]] || continue
            { grep -H 'fallback=' "$f" | grep -vE 'fallback=[^ ]+' || true; } |
                head -n 3 | sed 's/^/empty reason: /'
        done
    done | head -n 20 || true)
if [[ -n $problems ]]; then
    ok=1
    echo "$problems" >"$logdir/$name.log"
fi
indent "$problems"
finish "$name" "$ok"

echo "logs: $logdir"
echo "mpi-tests: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
