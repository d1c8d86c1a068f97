# Thread levels and mixed datatypes in run_mpi_tests.sh's
# shell: sourced by it, its helpers (selected, run_mpi, per_rank_output,
# check_result, check_counts, check_forced, judge, indent, finish) and
# variables (bindir, logdir, common_args, common_base, run_timeout) in
# scope.
#
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
