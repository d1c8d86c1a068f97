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
#
# The runs, by subject, each file describing its own (sourced in this order):
#   check_runs.sh    the six collectives: every algorithm forced, placement,
#                    topology, network model, kill -9, nonblocking, errors
#   colls_runs.sh    reduce, barrier, the v forms, gather, scatter
#   persist_runs.sh  persistent collectives
# then, each run under a 60 s limit (hangs are what they catch; a timeout
# is a failure):
#   threads_runs.sh  every MPI thread level; mixed datatypes
#   latency_runs.sh  the shared-memory level's latency path under skew
#   trials_runs.sh   the level's trials and their picks
#   churn_runs.sh    communicators by the thousand; UCX missing on a rank
# and under the usual limit again:
#   bench_runs.sh    xccl_calibrate and xccl_bench as the docs use them
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


. "$(dirname "${BASH_SOURCE[0]}")/check_runs.sh"
. "$(dirname "${BASH_SOURCE[0]}")/colls_runs.sh"
. "$(dirname "${BASH_SOURCE[0]}")/persist_runs.sh"
run_timeout=60
. "$(dirname "${BASH_SOURCE[0]}")/threads_runs.sh"
. "$(dirname "${BASH_SOURCE[0]}")/latency_runs.sh"
. "$(dirname "${BASH_SOURCE[0]}")/trials_runs.sh"
. "$(dirname "${BASH_SOURCE[0]}")/churn_runs.sh"
run_timeout=300
. "$(dirname "${BASH_SOURCE[0]}")/bench_runs.sh"

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
