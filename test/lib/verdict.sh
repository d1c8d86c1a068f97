# shellcheck shell=bash
# Sourced (bash) by test/mpi/run_mpi_tests.sh and test/gpu/run_gpu_tests.sh:
# the verdict line of one run.
#
# finish <name> <ok: 0 passed> [<problems>]
#   prints the problems (when given) indented, counts the run in the
#   caller's variables passed / failed, prints "passed", or "FAILED" and the
#   last 40 lines of $logdir/<name>.log.
#
# check_bench <name>
#   an xccl_bench run (the caller's $run_rc and $logdir/<name>.log) exited 0
#   and printed "# result: all xccl checks passed"; else prints why, returns 1.
# shellcheck disable=SC2154  # passed, failed, logdir, run_rc are the caller's
finish() {
    local name=$1 ok=$2 problems=${3:-}
    [[ -z $problems ]] || printf '%s\n' "$problems" | sed 's/^/   /'
    if [[ $ok -eq 0 ]]; then
        passed=$((passed + 1))
        echo "   passed"
    else
        failed=$((failed + 1))
        echo "   FAILED, last lines of $logdir/$name.log:"
        tail -n 40 "$logdir/$name.log" | sed 's/^/   | /'
    fi
}

check_bench() {
    local name=$1
    [[ $run_rc -eq 0 ]] || { echo "$name: exit status $run_rc"; return 1; }
    grep -q '^# result: all xccl checks passed' "$logdir/$name.log" ||
        { echo "$name: $(grep '^# result: ' "$logdir/$name.log" || echo 'no result line')"; return 1; }
}
