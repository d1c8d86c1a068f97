# shellcheck shell=bash
# Sourced (bash) by run_gpu_tests.sh: one run of a program under mpirun
# (run, run_prog, user_run) and the checks of its log (check_result,
# check_leaks, check_memtypes, fault_check, user_check, check_colls_ipc,
# check_carried), with the variables they share with the runs
# (gpu_fake_runs.sh) and the driver.

# run <name> <np> <ld_library_path or -> [env VAR=value...] -- [program args]
# runs $PROG (default xccl_mpi_gpu) with -q and $PROG_ARGS (default
# GPU_TEST_ARGS); run_s: its wall time in seconds
run_rc=0
run_s=0
PROG=
PROG_ARGS=()
run() {
    local name=$1 np=$2 ldp=$3
    shift 3
    local envs=()
    while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
    [[ ${1:-} == -- ]] && shift
    local log=$logdir/$name.log
    echo "== $name"
    run_rc=0
    local xargs=()
    for e in "${envs[@]}"; do xargs+=(-x "$e"); done
    if [[ $ldp != - ]]; then
        xargs+=(-x "LD_LIBRARY_PATH=$ldp")
    fi
    local envcmd=(env)
    [[ $ldp == - ]] || envcmd+=("LD_LIBRARY_PATH=$ldp")
    local p=${PROG:-$prog} started=$SECONDS
    local pargs=("${test_args[@]}")
    [[ -z $PROG ]] || pargs=("${PROG_ARGS[@]}")
    timeout -k 10 300 "${envcmd[@]}" \
        "${mpirun[@]}" "${common_args[@]}" "${extra_args[@]}" "${xargs[@]}" \
        -np "$np" "$p" -q "${pargs[@]}" "$@" >"$log" 2>&1 || run_rc=$?
    run_s=$((SECONDS - started))
    [[ $run_rc -ne 124 ]] || echo "TIMEOUT after 300 s" >>"$log"
}

# run_prog <name> <np> <verbose level> <program> [VAR=value...]: run() of
# <program> (with $PROG_ARGS, as set) against the fake driver, with
# coll_xccl_verbose at that level; extra_args and PROG as they were after.
run_prog() {
    local name=$1 np=$2 level=$3 program=$4
    shift 4
    local saved=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_verbose "$level")
    PROG=$program
    run "$name" "$np" "$fake_ldp" "$@" --
    PROG=
    extra_args=("${saved[@]}")
}

# Exit 0 and "RESULT: ... 0 failed".
check_result() {
    local name=$1 result
    # Not anchored: in the merged stream another rank's verbose line, written
    # in pieces, can end up in front of it.
    result=$(grep -oE 'RESULT: [0-9]+ passed, [0-9]+ failed$' "$logdir/$name.log" | tail -n 1 || true)
    if [[ $run_rc -ne 0 ]]; then
        echo "$name: exit status $run_rc${result:+ ($result)}"
        return 1
    fi
    [[ -n $result ]] || { echo "$name: no RESULT line"; return 1; }
    [[ $result == *", 0 failed" ]] || { echo "$name: $result"; return 1; }
}

# Every process of a fake run ended with nothing allocated.
check_leaks() {
    local name=$1 np=$2 lines bad
    lines=$(grep -E '^fake_cuda\[[0-9]+\]: outstanding:' "$logdir/$name.log" || true)
    if [[ $(grep -c . <<<"$lines") -lt $np ]]; then
        echo "$name: $(grep -c . <<<"$lines") FAKE_CUDA_STATS lines for $np processes"
        return 1
    fi
    bad=$(grep -vE ' device=0 .* host_alloc=0 .* host_register=0 .* ipc=0 .* modules=0 streams=0 events=0 pending_ops=0 primary_ctx_refs=0$' <<<"$lines" || true)
    if [[ -n $bad && ${GPU_TESTS_ALLOW_LEAKS:-0} != 1 ]]; then
        echo "$name: allocations outstanding at exit (GPU_TESTS_ALLOW_LEAKS=1 to ignore):"
        printf '%s\n' "$bad" | head -n 4
        return 1
    fi
}

# The memory types xccl gave UCX, from fake_ucx_cuda.c's line per process
# ("fake_ucx_cuda[pid]: send cuda=N host=N recv cuda=N host=N unset=N
# wrong=N"): one line per process, none unset or wrong, and with want=cuda
# device buffers sent and received as cuda, with want=host none.
check_memtypes() {
    local name=$1 np=$2 want=$3 lines sums
    lines=$(grep -E '^fake_ucx_cuda\[[0-9]+\]: send cuda=' "$logdir/$name.log" || true)
    if [[ $(grep -c . <<<"$lines") -lt $np ]]; then
        echo "$name: $(grep -c . <<<"$lines") fake_ucx_cuda lines for $np processes"
        return 1
    fi
    sums=$(sed -E 's/.*send cuda=([0-9]+) host=([0-9]+) recv cuda=([0-9]+) host=([0-9]+) unset=([0-9]+) wrong=([0-9]+)$/\1 \2 \3 \4 \5 \6/' <<<"$lines" |
        awk '{ for (i = 1; i <= 6; i++) s[i] += $i } END { print s[1]+0, s[2]+0, s[3]+0, s[4]+0, s[5]+0, s[6]+0 }')
    local sc sh rc rh unset wrong
    read -r sc sh rc rh unset wrong <<<"$sums"
    if [[ $unset -ne 0 || $wrong -ne 0 ]]; then
        echo "$name: transfers without their memory type: $unset, with the wrong one: $wrong"
        grep -m 4 '^fake_ucx_cuda\[[0-9]*\]: WRONG' "$logdir/$name.log" || true
        return 1
    fi
    if [[ $want == cuda && ($sc -eq 0 || $rc -eq 0) ]]; then
        echo "$name: no device buffer sent and received as cuda memory (send $sc, recv $rc)"
        return 1
    fi
    if [[ $want == host && ($sc -ne 0 || $rc -ne 0 || $sh -eq 0) ]]; then
        echo "$name: want host memory only: send cuda=$sc host=$sh, recv cuda=$rc"
        return 1
    fi
    echo "$name: memory types given to ucx: send cuda=$sc host=$sh, recv cuda=$rc host=$rh"
}

# adjacent A B ORDER...: A and B are neighbours on the ring ORDER
adjacent() {
    local a=$1 b=$2
    shift 2
    local o=("$@") n=$# i
    for ((i = 0; i < n; i++)); do
        local x=${o[i]} y=${o[(i + 1) % n]}
        if [[ ($x == "$a" && $y == "$b") || ($x == "$b" && $y == "$a") ]]; then
            return 0
        fi
    done
    return 1
}

# fault_check <name> <entry point>: an MPI error exit and the rank's own
# line naming the failed call (Open MPI's abort message may be lost when
# several ranks abort at once).
fault_check() {
    local name=$1 fn=$2
    { [[ $run_rc -ne 0 && $run_rc -ne 124 && $run_rc -lt 128 ]] ||
        { echo "$name: exit status $run_rc, want an MPI error exit"; false; }; } &&
    { grep -qE "xccl: .*${fn%_v2}: unknown error \(999\); returns MPI_ERR_INTERN" \
        "$logdir/$name.log" ||
        { echo "$name: no xccl line naming the failed $fn and MPI_ERR_INTERN"; false; }; }
}

# user_run <name> <np> <ld_library_path or -> <config> [env VAR=value...]
user_run() {
    local name=$1 np=$2 ldp=$3 config=$4
    shift 4
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_verbose 1)
    case $config in
    ipc) extra_args+=(--mca coll_xccl_gpu_ipc_bytes 65536) ;;
    off) extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0) ;;
    esac
    PROG=$user_prog
    PROG_ARGS=("${user_test_args[@]}")
    case $config in
    nb) PROG_ARGS+=(-N) ;;
    nbmixed) PROG_ARGS+=(-N -M) ;;
    esac
    run "$name" "$np" "$ldp" "$@" --
    PROG=
    PROG_ARGS=()
    extra_args=("${saved_extra[@]}")
}
# user_check <name> <np> <config> <fake: 1 or 0>
user_check() {
    local name=$1 np=$2 config=$3 fake=$4 n
    check_result "$name" || return 1
    [[ $fake -eq 0 ]] || check_leaks "$name" "$np" || return 1
    n=$(grep -cE '^xccl: .* via=cuda_ipc' "$logdir/$name.log" || true)
    if [[ $config == off && $n -ne 0 ]]; then
        echo "$name: $n calls through cuda ipc with coll_xccl_gpu_ipc_bytes 0"
        return 1
    fi
    if [[ $config == nbmixed && $n -ne 0 ]]; then
        echo "$name: $n calls through cuda ipc with a rank on host buffers"
        return 1
    fi
    if [[ $config == nb ]] && ! grep -qE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log"; then
        echo "$name: no nonblocking call through cuda ipc"
        return 1
    fi
    if [[ $fake -eq 1 && $config != off && $config != nbmixed && $n -eq 0 ]]; then
        echo "$name: no call through cuda ipc"
        return 1
    fi
    echo "$name: $(grep -E '^RESULT: ' "$logdir/$name.log" | tail -n 1), $n calls through cuda ipc, ${run_s} s"
}

colls_names=(reduce barrier allgatherv alltoallv gather gatherv scatter scatterv)
colls_ipc=(reduce gather gatherv scatter scatterv allgatherv alltoallv)
# check_colls_ipc <name> <np>: every rank ran each of colls_ipc, blocking
# and nonblocking, through CUDA IPC at least once.
check_colls_ipc() {
    local name=$1 np=$2 coll f r
    for coll in "${colls_ipc[@]}"; do
        for f in "$coll" "i$coll"; do
            for ((r = 0; r < np; r++)); do
                grep -qE "^xccl: $f comm=[0-9]+ rank=$r bytes=[0-9]+ algo=(leader|mesh) .* via=cuda_ipc" \
                    "$logdir/$name.log" ||
                    { echo "$name: rank $r: no $f call through cuda ipc"; return 1; }
            done
        done
    done
}
# check_carried <name>: every blocking and nonblocking form has algo=
# lines and none has fallback= lines.
check_carried() {
    local name=$1 coll f n
    for coll in "${colls_names[@]}"; do
        for f in "$coll" "i$coll"; do
            grep -qE "^xccl: $f comm=[0-9]+ rank=[0-9]+ bytes=[0-9]+ algo=" "$logdir/$name.log" ||
                { echo "$name: no $f call ran an algorithm of xccl's"; return 1; }
            n=$(grep -cE "^xccl: $f comm=[0-9]+ rank=[0-9]+ bytes=[0-9]+ fallback=" \
                "$logdir/$name.log" || true)
            [[ $n -eq 0 ]] || { echo "$name: $n $f calls went to the fallback"; return 1; }
        done
    done
}
