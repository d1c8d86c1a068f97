# The six collectives (xccl_mpi_check, xccl_mpi_nb, xccl_mpi_errors) in run_mpi_tests.sh's
# shell: sourced by it, its helpers (selected, run_mpi, per_rank_output,
# check_result, check_counts, check_forced, judge, indent, finish) and
# variables (bindir, logdir, common_args, common_base, run_timeout) in
# scope.
#
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
