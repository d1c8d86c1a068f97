# shellcheck shell=bash
# Sourced (bash) by run_gpu_tests.sh, after gpu_checks.sh: the runs against
# the fake driver (test/gpu/fake), a function each, in the order
# run_gpu_tests.sh calls them.  Each runs its programs with run() or
# run_prog(), checks the logs and gives its verdicts to finish
# (test/lib/verdict.sh).

# xccl_mpi_gpu at each np of GPU_TESTS_NPS (np 3 on two fake devices):
# results as in check_result, and nothing left allocated.
fake_np_runs() {
    for np in "${nps[@]}"; do
        name=fake.np$np
        # np 3 on two fake devices (ranks 0 and 2 on one, rank 1 on the
        # other; and buffers on the other device than the current one)
        devices=1
        [[ $np -ne 3 ]] || devices=2
        run "$name" "$np" "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices --
        ok=0
        problems=$({ check_result "$name" && check_leaks "$name" "$np"; } 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
    done
}

# no device: exit 77 with a SKIP line
fake_no_device() {
    name=fake.no_device.np2
    run "$name" 2 "$fake_ldp" FAKE_CUDA_DEVICES=0 --
    ok=0
    problems=$({ [[ $run_rc -eq 77 ]] || { echo "$name: exit status $run_rc, want 77"; false; }; } &&
        { grep -q '^SKIP: ' "$logdir/$name.log" || { echo "$name: no SKIP line"; false; }; } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# The driver loaded after MPI_Init and after host calls on stack buffers
# (-L: xccl has looked for it and found none): device buffers must be
# noticed on the next calls, staged and right (with the driver taken for
# absent they reach host code and the fake's PROT_NONE pages crash it).
fake_late_driver() {
    name=fake.late_driver.np2
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_verbose 2)
    run "$name" 2 "$fake_ldp" FAKE_CUDA_STATS=1 -- -L -n 1048576
    extra_args=("${saved_extra[@]}")
    ok=0
    problems=$({
        check_result "$name" && check_leaks "$name" 2 &&
        for r in 0 1; do
            p=$(grep -cE "^xccl: [a-z_]+ comm=[0-9]+ rank=$r: device buffers, host copies of" \
                "$logdir/$name.log" || true)
            [[ $p -gt 0 ]] || { echo "$name: rank $r: no staged call"; exit 1; }
        done &&
        echo "$name: $(grep -c ': device buffers, host copies of' "$logdir/$name.log") calls staged"
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# Ring order inside a node that follows the GPU wiring: 4 ranks on 4 fake
# GPUs (rank r on device r, PCI ids as the fake reports them) in a topology
# that alternates sockets: gpu0 and gpu2 on package 0, gpu1 and gpu3 on
# package 1.  Communicator order crosses the sockets 4 times around the
# ring; the order xccl logs must pair ranks 0-2 and 1-3 (2 crossings).
fake_gpu_ring() {
    topo=$logdir/alternate-sockets.topo
    cat >"$topo" <<'TOPO'
xccl_topo 1
node alt4 packages=2 numa=2 cores=4 pus=4
numa 0 package=0 cores=2 pus=2
numa 1 package=1 cores=2 pus=2
device gpu0 kind=gpu vendor=10de pci=0000:10:00.0 numa=0 package=0 pcie=hb0/sw0/p0
device gpu1 kind=gpu vendor=10de pci=0000:11:00.0 numa=1 package=1 pcie=hb1/sw0/p0
device gpu2 kind=gpu vendor=10de pci=0000:12:00.0 numa=0 package=0 pcie=hb0/sw0/p1
device gpu3 kind=gpu vendor=10de pci=0000:13:00.0 numa=1 package=1 pcie=hb1/sw0/p1
TOPO
    name=fake.gpu_ring.np4
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_topo_file "$topo" --mca coll_xccl_verbose 2)
    run "$name" 4 "$fake_ldp" FAKE_CUDA_DEVICES=4 -- -n 65536
    extra_args=("${saved_extra[@]}")
    ok=0
    problems=$({
        check_result "$name" &&
        line=$(grep -m1 'comm=0 node 0: ranks in placement order (gpu ring):' "$logdir/$name.log") ||
            { echo "$name: no 'comm=0 node 0: ranks in placement order (gpu ring)' line"; false; } &&
        read -r -a order <<<"${line##*:}" &&
        { [[ ${#order[@]} -eq 4 ]] && adjacent 0 2 "${order[@]}" && adjacent 1 3 "${order[@]}" ||
            { echo "$name: ring order '${order[*]}' does not keep gpu0/gpu2 and gpu1/gpu3 together"; false; }; }
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# Staging pipelined in small pieces: CUDA IPC off, so every call on device
# buffers is staged (in pinned memory up to 1 MiB per call, pageable
# above); pieces of 256 bytes, so a call's copies are many and
# the steps of the schedule wait for them (the fake runs each copy late,
# on its stream's thread).  The log must
# show pipelined calls with more than one copy in and out.  A UCX with
# CUDA is played (fake_ucx_cuda.c) with coll_xccl_gpu_direct 0: staged
# calls must give UCX host memory only (the pinned copies, and the host
# buffers of the mixed calls), each transfer saying so.
fake_pipeline() {
    name=fake.pipeline.np3
    saved_extra=("${extra_args[@]}")
    # (The shared-memory level is off here and in the direct and fault runs
    # below: with it, blocking calls inside a node run on host copies filled
    # whole first; the pipeline and the direct path serve the other calls.)
    extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0 --mca coll_xccl_gpu_chunk_bytes 256
        --mca coll_xccl_gpu_pool_bytes 1048576 --mca coll_xccl_verbose 2 --mca coll_xccl_shm_bytes 0
        --mca coll_xccl_gpu_direct 0)
    run "$name" 3 "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=2 "LD_PRELOAD=$fake_ucx" --
    extra_args=("${saved_extra[@]}")
    ok=0
    problems=$({
        check_result "$name" && check_leaks "$name" 3 && check_memtypes "$name" 3 host &&
        n=$(grep -cE 'staging pipelined: ([2-9]|[1-9][0-9]+) copies in, ([2-9]|[1-9][0-9]+) out' \
            "$logdir/$name.log" || true) &&
        { [[ $n -gt 0 ]] || { echo "$name: no call pipelined in several pieces"; false; }; } &&
        echo "$name: $n calls pipelined in several pieces"
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# Device pointers straight to UCX (coll_xccl_gpu_direct -1, the default:
# wherever UCX reports CUDA memory support).  Debian's UCX cannot move
# CUDA memory, so fake_ucx_cuda.c (preloaded) plays a UCX that can: it
# reports CUDA support to xccl, checks that every transfer of xccl's
# gives its buffer's memory type (cuda for the fake's device memory, host
# for the host buffers of the mixed calls; with the direct path's CUDA
# transport planted out, 1896 transfers at np 2 came as host), and hands
# it to the real UCX as host memory, which the fake's device memory is
# with FAKE_CUDA_HOST_ACCESS=1.  xccl runs every copy and reduction of the
# schedule on the fake's streams and kernels, which run late, on their
# streams' threads: a step that started before the work of the step
# before it had run reads stale data (with that wait planted out, 110 of
# 699 checks failed).  CUDA IPC is off, so every call on device buffers
# runs a schedule; two devices at np 3.  The log must show direct calls,
# and the fake must have run kernels.
fake_direct() {
    name=fake.direct.np3
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0
        --mca coll_xccl_verbose 2 --mca coll_xccl_shm_bytes 0)
    run "$name" 3 "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=2 FAKE_CUDA_HOST_ACCESS=1 \
        "LD_PRELOAD=$fake_ucx" --
    extra_args=("${saved_extra[@]}")
    ok=0
    problems=$({
        check_result "$name" && check_leaks "$name" 3 && check_memtypes "$name" 3 cuda &&
        n=$(grep -c 'device buffers straight to ucx, copies and reductions on the gpu' \
            "$logdir/$name.log" || true) &&
        { [[ $n -gt 0 ]] || { echo "$name: no call ran straight on the device buffers"; false; }; } &&
        k=$(grep -oE '^fake_cuda\[[0-9]+\]: calls:.* cuLaunchKernel=[0-9]+' "$logdir/$name.log" |
            sed 's/.*cuLaunchKernel=//' | awk '{ k += $1 } END { print k + 0 }') &&
        { [[ ${k:-0} -gt 0 ]] || { echo "$name: no kernel launched"; false; }; } &&
        echo "$name: $n calls straight to ucx, $k kernels launched"
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# coll_xccl_gpu_direct 1 and Debian's UCX, which cannot move CUDA memory:
# direct mode is refused (the init line at verbose 1 says why, on every
# rank) and device buffers are staged.  The fake's device memory stays
# PROT_NONE to the host, so a device pointer handed to this UCX would
# crash the run, as it does on a real GPU (with direct mode forced, every
# rank ends in an MPI error instead: the glue refuses a device buffer that
# this UCX cannot take).
fake_direct_refused() {
    name=fake.direct_refused.np2
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0 --mca coll_xccl_gpu_direct 1
        --mca coll_xccl_verbose 2 --mca coll_xccl_shm_bytes 0)
    run "$name" 2 "$fake_ldp" FAKE_CUDA_STATS=1 --
    extra_args=("${saved_extra[@]}")
    ok=0
    problems=$({
        check_result "$name" && check_leaks "$name" 2 &&
        n=$(grep -c '^xccl: init: coll_xccl_gpu_direct 1 refused: ucx lacks cuda memory support: device buffers staged through host copies$' \
            "$logdir/$name.log" || true) &&
        { [[ $n -eq 2 ]] || { echo "$name: $n refusal lines for 2 ranks"; false; }; } &&
        d=$(grep -c 'device buffers straight to ucx' "$logdir/$name.log" || true) &&
        { [[ $d -eq 0 ]] || { echo "$name: $d calls straight to ucx despite the refusal"; false; }; } &&
        p=$(grep -c 'staging pipelined' "$logdir/$name.log" || true) &&
        { [[ $p -gt 0 ]] || { echo "$name: no staged call"; false; }; } &&
        echo "$name: refused on both ranks, $p calls staged, none straight to ucx"
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# CUDA IPC inside the node: calls of at least coll_xccl_gpu_ipc_bytes run
# their collective's mesh schedule on the peers' mapped buffers (verbose
# line "algo=mesh ... via=cuda_ipc"), every collective at least once per
# rank, on two fake devices at np 3; results and leaks as in (1).
fake_ipc() {
    name=fake.ipc.np3
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_verbose 1)
    run "$name" 3 "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=2 --
    extra_args=("${saved_extra[@]}")
    ok=0
    problems=$({
        check_result "$name" && check_leaks "$name" 3 &&
        for coll in allreduce reduce_scatter reduce_scatter_block allgather alltoall bcast; do
            for r in 0 1 2; do
                n=$(grep -cE "^xccl: $coll comm=[0-9]+ rank=$r bytes=[0-9]+ algo=mesh .* via=cuda_ipc" \
                    "$logdir/$name.log" || true)
                [[ $n -gt 0 ]] || { echo "$name: rank $r: no $coll call through cuda ipc"; exit 1; }
            done
        done &&
        echo "$name: $(grep -c 'via=cuda_ipc' "$logdir/$name.log") calls through cuda ipc"
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# Driver failures in the middle of a staged call (FAKE_CUDA_FAIL: one call
# of one entry point fails): the job must end promptly with an MPI error
# that names the failed driver call, not hang or crash.  An event query of
# the pipeline, and a copy queued by it; a reduction kernel of a call
# straight to UCX.
fake_faults() {
    for fault in cuEventQuery:30 cuMemcpy2DAsync_v2:40 cuLaunchKernel:25:direct; do
        fn=${fault%%:*}
        name=fake.fault.$fn
        saved_extra=("${extra_args[@]}")
        extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0 --mca coll_xccl_gpu_chunk_bytes 256
            --mca coll_xccl_verbose 1 --mca coll_xccl_shm_bytes 0)
        envs=(FAKE_CUDA_FAIL=${fault%:direct})
        if [[ $fault == *:direct ]]; then
            name=$name.direct
            extra_args+=(--mca coll_xccl_gpu_direct 1)
            envs+=(FAKE_CUDA_HOST_ACCESS=1 "LD_PRELOAD=$fake_ucx")
        fi
        run "$name" 2 "$fake_ldp" "${envs[@]}" --
        extra_args=("${saved_extra[@]}")
        ok=0
        problems=$(fault_check "$name" "$fn" 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
    done
}

# The same for a nonblocking call through CUDA IPC (xccl_mpi_gpu_user -N,
# CUDA IPC at every size): an event query of a call run from progress
# fails; the flags still go up, the rank's wait returns MPI_ERR_INTERN
# naming it, nobody hangs.
fake_fault_ipc_nonblocking() {
    name=fake.fault.cuEventQuery.ipc_nonblocking
    saved_extra=("${extra_args[@]}")
    extra_args+=(--mca coll_xccl_verbose 1)
    PROG=$user_prog
    PROG_ARGS=(-N)
    run "$name" 2 "$fake_ldp" FAKE_CUDA_FAIL=cuEventQuery:30 --
    PROG=
    PROG_ARGS=()
    extra_args=("${saved_extra[@]}")
    ok=0
    problems=$(fault_check "$name" cuEventQuery 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# User-style use of device buffers (xccl_mpi_gpu_user): every collective,
# in place and not, sizes around every threshold, several iterations with
# new data each, the send buffer overwritten (cuMemsetD8) as soon as a call
# returns and results read back at once.  np 2, 3 (two fake devices), 4,
# each with CUDA IPC from 64 KiB (gpu_ipc_bytes 65536: both sides of a
# threshold), as configured (every size), and off (0): results and leaks as in (1), and the verbose lines
# must show calls through CUDA IPC in the first two and none in the last.
fake_user() {
    for np in "${user_nps[@]}"; do
        devices=1
        [[ $np -ne 3 ]] || devices=2
        for config in ipc default off; do
            name=fake.user.np$np.$config
            user_run "$name" "$np" "$fake_ldp" "$config" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices
            ok=0
            problems=$(user_check "$name" "$np" "$config" 1 2>&1) || ok=1
            finish "$name" "$ok" "$problems"
        done
    done
}

# Nonblocking (xccl_mpi_gpu_user -N): the iterations of a case in flight
# together, the last one blocking behind them; np 2 and 4 on one fake
# device (leader form), np 3 on two and np 4 on four (one rank per GPU,
# the production case: mesh, GPU events), as configured: nonblocking calls
# must go through CUDA IPC; np 3 with rank 1 on host buffers (-M): none
# can, every call must still be right (the host paths, started from
# progress).
fake_user_nonblocking() {
    for v in "2 1 nb" "3 2 nb" "4 1 nb" "4 4 nb" "3 2 nbmixed"; do
        read -r np devices config <<<"$v"
        name=fake.user.np$np.d$devices.$config
        user_run "$name" "$np" "$fake_ldp" "$config" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices
        ok=0
        problems=$(user_check "$name" "$np" "$config" 1 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
    done
}

# The eight further collectives (xccl_mpi_gpu_colls): reduce, barrier,
# allgatherv, alltoallv, gather, gatherv, scatter, scatterv, blocking and
# nonblocking, on device buffers with guards in the gaps, insignificant
# buffers NULL, send buffers overwritten as soon as a call is done, calls of
# every kind in flight together, and a training step (allreduce, reduce,
# gather, alltoallv, barrier).  np 2 and 4 on one fake device, each with
# CUDA IPC from 64 KiB, as configured (every size) and off, and "carried":
# xccl's own algorithms forced (auto hands most of these calls to the
# fallback, on host copies), staged in pieces of 4 KiB, CUDA IPC off (it
# would take most of them first).  Results and leaks as in (1); with CUDA
# IPC off no call through it, otherwise the step's
# allreduce at least, and with CUDA IPC from 64 KiB and as configured
# reduce, gather, gatherv, scatter, scatterv, allgatherv and alltoallv,
# blocking and nonblocking, through CUDA IPC on every rank (their leader
# form on one device; alltoallv's mesh, its only one); carried: each of
# the sixteen calls ran one of xccl's algorithms, none went to the
# fallback; mixed (-M: the last rank on host
# buffers, as configured): results and leaks, and no call through CUDA IPC
# (on one device a rank on host buffers can take part in none); mesh (two
# fake devices, as configured): the mesh form with interprocess events,
# checked as the configured run.
fake_colls() {
    colls_prog=$bindir/xccl_mpi_gpu_colls
    [[ -x $colls_prog ]] || { echo "$0: no $colls_prog (make check builds it)" >&2; exit 2; }
    for np in 2 4; do
        for config in ipc default off carried mixed mesh; do
            name=fake.colls.np$np.$config
            saved_extra=("${extra_args[@]}")
            extra_args+=(--mca coll_xccl_verbose 1)
            case $config in
            ipc) extra_args+=(--mca coll_xccl_gpu_ipc_bytes 65536) ;;
            off) extra_args+=(--mca coll_xccl_gpu_ipc_bytes 0) ;;
            carried)
                extra_args+=(--mca coll_xccl_reduce_algorithm binomial
                    --mca coll_xccl_allgatherv_algorithm ring --mca coll_xccl_alltoallv_algorithm pairwise
                    --mca coll_xccl_gather_algorithm binomial --mca coll_xccl_gatherv_algorithm linear
                    --mca coll_xccl_scatter_algorithm binomial --mca coll_xccl_scatterv_algorithm linear
                    --mca coll_xccl_gpu_chunk_bytes 4096 --mca coll_xccl_gpu_ipc_bytes 0)
                ;;
            esac
            PROG=$colls_prog
            PROG_ARGS=()
            [[ $config != mixed ]] || PROG_ARGS=(-M)
            devices=1
            [[ $config != mesh ]] || devices=2
            run "$name" "$np" "$fake_ldp" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices --
            PROG_ARGS=()
            PROG=
            extra_args=("${saved_extra[@]}")
            ok=0
            problems=$({
                check_result "$name" && check_leaks "$name" "$np" &&
                n=$(grep -cE '^xccl: .* via=cuda_ipc' "$logdir/$name.log" || true) &&
                if [[ $config == off || $config == carried || $config == mixed ]]; then
                    [[ $n -eq 0 ]] ||
                        { echo "$name: $n calls through cuda ipc ($config)"; false; }
                else
                    [[ $n -gt 0 ]] || { echo "$name: no call through cuda ipc"; false; }
                fi &&
                { [[ $config != carried ]] || check_carried "$name"; } &&
                { [[ $config != ipc && $config != default && $config != mesh ]] ||
                    check_colls_ipc "$name" "$np"; } &&
                echo "$name: $(grep -E '^RESULT: ' "$logdir/$name.log" | tail -n 1)," \
                    "$n calls through cuda ipc, ${run_s} s"
            } 2>&1) || ok=1
            finish "$name" "$ok" "$problems"
        done
    done
}

# Nonblocking device calls from two threads at once, a communicator each
# (xccl_mpi_gpu_threads, MPI_THREAD_MULTIPLE): np 2 on one fake device, np
# 3 on two; right results, leaks as in (1), and calls through CUDA IPC.
fake_threads() {
    for v in "2 1" "3 2"; do
        read -r np devices <<<"$v"
        name=fake.threads.np$np
        run_prog "$name" "$np" 1 "$bindir/xccl_mpi_gpu_threads" FAKE_CUDA_STATS=1 FAKE_CUDA_DEVICES=$devices
        ok=0
        problems=$({
            check_result "$name" && check_leaks "$name" "$np" &&
            { grep -qE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log" ||
                { echo "$name: no nonblocking call through cuda ipc"; false; }; } &&
            echo "$name: $(grep -E '^RESULT: ' "$logdir/$name.log" | tail -n 1)," \
                "$(grep -cE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log") nonblocking calls through cuda ipc"
        } 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
    done
}

# Communicators made, used once on device buffers (blocking, through CUDA
# IPC) and freed, then host calls on the next one of that context id
# (xccl_mpi_gpu_churn): right results, and no communicator freed while its
# shared-memory vote ran (its peers' vote messages would be left behind
# under the tags of that context id: coll_xccl_level_vote.c, vote_gen).  np 2 on
# one fake device, np 3 on two.
fake_churn() {
    for v in "2 1" "3 2"; do
        read -r np devices <<<"$v"
        name=fake.churn.np$np
        run_prog "$name" "$np" 2 "$bindir/xccl_mpi_gpu_churn" FAKE_CUDA_DEVICES=$devices
        ok=0
        problems=$({
            check_result "$name" &&
            { grep -qE '^xccl: allreduce .* via=cuda_ipc' "$logdir/$name.log" ||
                { echo "$name: no allreduce through cuda ipc"; false; }; } &&
            { ! grep -E 'freed while its shared-memory vote ran' "$logdir/$name.log" ||
                { echo "$name: a communicator was freed while its vote ran"; false; }; } &&
            { ! grep -E 'unexpected tag-receive descriptor .* was not matched' "$logdir/$name.log" ||
                { echo "$name: messages left unmatched in UCX at the end"; false; }; } &&
            echo "$name: $(grep -E '^RESULT: ' "$logdir/$name.log" | tail -n 1)," \
                "$(grep -cE '^xccl: allreduce .* via=cuda_ipc' "$logdir/$name.log") calls through cuda ipc," \
                "$(grep -cE 'shared-memory level on' "$logdir/$name.log") level-on decisions"
        } 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
    done
}

# xccl_bench on device buffers as the GPU machine's bench phase runs it
# (-g): the xccl column nonblocking (-i), the staged column waiting for its
# upload (-S), 8 B .. 32 KiB, np 2 on one fake device: every xccl result checked by the
# bench, and its nonblocking calls through CUDA IPC.
fake_bench() {
    name=fake.bench.np2
    PROG_ARGS=(-g -i -S -b 8 -e 32K -f 8 -r 2)
    run_prog "$name" 2 1 "$bindir/xccl_bench" FAKE_CUDA_DEVICES=1
    PROG_ARGS=()
    ok=0
    problems=$({
        check_bench "$name" &&
        { grep -qE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log" ||
            { echo "$name: no nonblocking call through cuda ipc"; false; }; } &&
        echo "$name: $(grep -cE '^xccl: i[a-z_]+ .* via=cuda_ipc' "$logdir/$name.log") nonblocking calls through cuda ipc"
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
}

# The driver calls of a warm CUDA IPC call (xccl_gpu_budget.c, counted by
# the fake): per call no IPC handle opened or exported, at most one host
# synchronisation (none in a nonblocking call or a persistent start), a bounded number of calls that does not grow with the
# size, no copy between host and device memory (nothing staged: every
# counted call went through CUDA IPC), and per persistent start no
# cuPointerGetAttribute(s) (the init found out where the buffers live); np 2 and 4 on one fake device (the
# leader form), np 3 on two (the mesh): the summary lines at verbose 1 name
# the form.
fake_budget() {
    for np in 2 3 4; do
        devices=1
        [[ $np -ne 3 ]] || devices=2
        name=fake.budget.np$np
        run_prog "$name" "$np" 1 "$bindir/xccl_gpu_budget" FAKE_CUDA_DEVICES=$devices
        ok=0
        problems=$(
            check_result "$name" || exit 1
            form=leader
            [[ $np -ne 3 ]] || form=mesh
            grep -qE "summary allreduce rank=[0-9]+ calls=[0-9]+ .* $form=[1-9]" "$logdir/$name.log" ||
                { echo "$name: no allreduce through the $form form in the summaries"; exit 1; }
            grep -E '^(budget|FAIL):' "$logdir/$name.log" | sed 's/^/   /'
        ) || ok=1
        finish "$name" "$ok" "$problems"
    done
}
