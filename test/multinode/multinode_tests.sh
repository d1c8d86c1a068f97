#!/usr/bin/env bash
# Multi-node integration test on one machine (`make check` entry): two
# simulated hosts (network namespaces joined by a shaped veth link, each with
# its own hostname and shared memory; see netns_cluster.sh), mpirun across
# them through a plm_rsh_agent wrapper (see mn_common.sh), and the xccl
# correctness program on 2 hosts x 2 ranks.
#
# Environment:
#   XCCL_BUILDDIR   build directory with xccl_mpi_check and component/ (required)
#   TEST_LOG_DIR    where logs go (default: a new temporary directory)
#   OMPI_COMPONENT_DIR, MPIRUN, XCCLMN_* (netns_cluster.sh) as usual
#
# Runs (each under a 150 s timeout):
#   hostname.map_by_{node,slot}  mpirun -np 4 hostname: ranks land on h0 and
#                                h1 as the placement says
#   stock.map_by_node            xccl_mpi_check -q -k with the stock
#                                collectives only, op ^avx (checks the launch
#                                itself)
#   xccl.map_by_{node,slot}      xccl_mpi_check -q with coll
#                                xccl,tuned,basic,libnbc,self, verbose 1,
#                                small_msg_bytes 0; passes like
#                                test/mpi/run_mpi_tests.sh judges it: exit 0,
#                                "RESULT: <n> passed, 0 failed", and per world
#                                rank and collective the algo=/fallback= lines
#                                match the EXPECT/CALLS lines, no communicator
#                                runs on the PML transport (for lack of UCX
#                                connectivity between hosts), and bytes
#                                crossed the simulated link.
#   xccl.above_han               xccl_mpi_check -q -k with han as xccl's
#                                fallback: passes, and calls made from
#                                inside xccl's set-up went to han
#   xccl.colls.{tuned,han}       xccl_mpi_colls -q -c allgatherv,reduce
#                                with tuned or han as the fallback: passes,
#                                every rank ran some allgatherv calls on 4
#                                ranks with xccl, and reduce calls under
#                                tuned, none under han
#   xccl.gpu_staged.map_by_node  xccl_mpi_gpu -n 1 MiB against the fake
#                                libcuda.so.1, staged copies in 64 KiB
#                                pieces: exit 0, "0 failed", ranks on both
#                                hosts log pipelined calls
#   xccl.gpu_direct.map_by_node  the same, device pointers straight to UCX:
#                                ranks on both hosts log direct calls
#   xccl.gpu_colls_{staged,direct}.map_by_node
#                                xccl_mpi_gpu_colls (reduce, barrier, the v
#                                forms, gather, scatter; up to 1 MiB + 5
#                                elements) the same two ways: passes, and
#                                ranks on both hosts ran reduce and
#                                allgatherv calls of 4 ranks with xccl
#   xccl.3hosts.np5.map_by_node  the same on three hosts behind a bridge,
#                                5 ranks: uneven (2, 2, 1), non-contiguous
#                                (XCCLMN_TEST_3HOSTS=0: not run)
#   xccl.forced_pipelined.map_by_node, xccl.3hosts.forced_pipelined.np5
#                                the pipelined and nonuniform algorithms
#                                forced across the hosts: allreduce, allgather and
#                                reduce_scatter(_block) pipeline, bcast nhr
#                                (2 hosts) or nb (3 hosts), xccl_mpi_check
#                                -q -P (calls past 4 MiB: several chunks);
#                                as xccl.* and every rank ran each forced
#                                algorithm, and no call another (but the
#                                collective's first, on one host)
# Exit: 0 all passed, 1 a failure, 77 (with "SKIP: <reason>") when not root
# or network namespaces / unshare do not work here.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=${XCCL_BUILDDIR:?set XCCL_BUILDDIR (run through make check)}
prog=$builddir/xccl_mpi_check
compdir=$builddir/component
if [[ ! -x $prog || ! -e $compdir/mca_coll_xccl.so ]]; then
    echo "$0: need $prog and $compdir/mca_coll_xccl.so (make; make xccl_mpi_check)" >&2
    exit 1
fi
command -v "${MPIRUN:-mpirun}" >/dev/null || { echo "SKIP: no mpirun"; exit 77; }

# shellcheck source=netns_cluster.sh
source "$here/netns_cluster.sh"
# shellcheck source=mn_common.sh
source "$here/mn_common.sh"

mn_check || exit 77

t_start=$SECONDS
logdir=${TEST_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/xccl-multinode.XXXXXX")}
mkdir -p "$logdir"
logdir=$(cd "$logdir" && pwd)
chmod 755 "$logdir"

mn_up 2 || { echo "multinode: could not set up the simulated hosts"; exit 1; }
echo "multinode: hosts $XCCLMN_HOSTS, link $XCCLMN_SHAPING"

mn_mpirun_args "$(mn_component_path "$compdir" "$logdir")"
read -r -a mpirun <<<"${MPIRUN:-mpirun}"

passed=0
failed=0
results=()

# run_job <name> <np> [mpirun args...] -- program args: mpirun on h0 under a
# timeout; merged output in $logdir/<name>.log, per-rank files under
# $logdir/<name>.out; exit status in $run_rc, link bytes in $run_bytes,
# seconds in $run_secs.
run_job() {
    local name=$1 np=$2
    shift 2
    local log=$logdir/$name.log out=$logdir/$name.out before t0=$SECONDS
    rm -rf "$out"
    echo "== $name"
    before=$(mn_tx_bytes)
    run_rc=0
    # Waited for in the background: a TERM to this script then cleans up at
    # once (bash defers traps while a foreground child runs).
    xccl_output_args "$out" "$@"
    mn_exec h0 timeout -k 10 150 "${mpirun[@]}" "${mn_args[@]}" -np "$np" \
        "${output_args[@]}" >"$log" 2>&1 &
    wait $! || run_rc=$?
    [[ $run_rc -ne 124 ]] || echo "TIMEOUT after 150 s" >>"$log"
    run_bytes=$(($(mn_tx_bytes) - before))
    run_secs=$((SECONDS - t0))
}

# All output of one rank: per_rank_output <name> <rank>
per_rank_output() {
    local dir
    for dir in "$logdir/$1.out"/*/rank.*; do
        [[ -d $dir ]] || continue
        if [[ $((10#${dir##*rank.})) -eq $2 ]]; then
            cat "$dir"/stdout "$dir"/stderr 2>/dev/null
        fi
    done
}

check_exit_result() {
    local name=$1 result
    [[ $run_rc -eq 0 ]] || { echo "$name: exit status $run_rc"; return 1; }
    # The per-rank files too: in the merged stream another rank's verbose
    # lines can split the line.
    result=$(cat "$logdir/$name.log" "$logdir/$name.out"/*/rank.*/stdout 2>/dev/null |
        grep -E '^RESULT: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    [[ -n $result ]] || { echo "$name: no RESULT line"; return 1; }
    [[ $result == *", 0 failed" ]] || { echo "$name: $result"; return 1; }
}

# Hostname per rank matches the placement: check_hosts <name> <node|slot>
check_hosts() {
    local name=$1 map=$2 r want got bad=0
    [[ $run_rc -eq 0 ]] || { echo "$name: exit status $run_rc"; return 1; }
    for r in 0 1 2 3; do
        if [[ $map == node ]]; then want=h$((r % 2)); else want=h$((r / 2)); fi
        got=$(per_rank_output "$name" "$r" | head -n 1)
        if [[ $got != "$want" ]]; then
            echo "$name: rank $r ran on '$got', want $want"
            bad=1
        fi
    done
    return "$bad"
}

# The algo=/fallback= lines of every rank against the EXPECT/CALLS lines (as
# in test/mpi/run_mpi_tests.sh, check (b)).
check_counts() {
    local name=$1 np=$2 r bad=0 lines
    lines=$(per_rank_output "$name" 0 | grep -E '^(EXPECT|CALLS) ')
    for ((r = 0; r < np; r++)); do
        per_rank_output "$name" "$r" | awk -v rank="$r" -v name="$name" \
            -v expect="$(grep -E "^EXPECT rank=$r( |$)" <<<"$lines")" \
            -v calls="$(grep -E "^CALLS rank=$r( |$)" <<<"$lines")" '
            BEGIN {
                ncoll = split("allreduce reduce_scatter reduce_scatter_block allgather alltoall bcast", colls, " ")
                for (i = 1; i <= ncoll; i++) known[colls[i]] = 1
                if (expect == "" || calls == "") { print name ": no EXPECT/CALLS line for rank " rank; exit 1 }
                n = split(expect, f, " ")
                for (i = 3; i <= n; i++) { split(f[i], kv, "="); want[kv[1]] = kv[2] }
                n = split(calls, f, " ")
                for (i = 3; i <= n; i++) { split(f[i], kv, "="); ncalls[kv[1]] = kv[2] }
            }
            /^xccl: / && ($2 in known) {
                if ($3 !~ /^comm=[0-9]+$/ || $4 != "rank=" rank || $5 !~ /^bytes=[0-9]+$/ ||
                    $6 !~ /^(algo|fallback)=[^ =]+$/) {
                    if (nbad++ < 5) print name ": rank " rank ": unexpected line: " $0
                    bad = 1
                    next
                }
                if ($6 ~ /^algo=/) algo[$2]++; else fallback[$2]++
            }
            /^xccl: comm .* disabled/ { print name ": rank " rank ": " $0 }
            # UCX between the hosts is what this test is about
            /^xccl: comm .* transport=pml/ { print name ": rank " rank ": " $0; bad = 1 }
            END {
                if (expect == "" || calls == "") exit 1
                for (i = 1; i <= ncoll; i++) {
                    c = colls[i]
                    if (algo[c] + 0 != want[c] + 0 || algo[c] + fallback[c] != ncalls[c] + 0) {
                        printf "%s: rank %d %s: %d algo= + %d fallback= lines, EXPECT %d, CALLS %d\n",
                            name, rank, c, algo[c], fallback[c], want[c], ncalls[c]
                        bad = 1
                    }
                }
                exit bad
            }' || bad=1
    done
    return "$bad"
}

finish() {
    local name=$1 ok=$2 problems=$3
    [[ -z $problems ]] || printf '%s\n' "$problems" | sed 's/^/   /'
    local what="${run_secs}s, $((run_bytes / 1024)) KiB over the link"
    if [[ $ok -eq 0 ]]; then
        passed=$((passed + 1))
        results+=("PASS  $name ($what)")
        echo "   passed ($what)"
    else
        failed=$((failed + 1))
        results+=("FAIL  $name ($what)")
        echo "   FAILED ($what), last lines of $logdir/$name.log:"
        tail -n 30 "$logdir/$name.log" | sed 's/^/   | /'
    fi
}

# 1. Placement: two distinct hosts, ranks where --map-by puts them.
for map in node slot; do
    name=hostname.map_by_$map
    run_job "$name" 4 --map-by "$map" hostname
    ok=0
    problems=$(check_hosts "$name" "$map") || ok=1
    finish "$name" "$ok" "$problems"
done

# 2. The launch with Open MPI's own collectives (no xccl): -k skips the cases
#    that hit known bugs of stock Open MPI 4.1 (see xccl_mpi_check.c), and
#    op ^avx avoids another: op/avx's 8- and 16-bit MPI_SUM saturates instead
#    of wrapping (ompi#8045), on any machine with AVX2.
name=stock.map_by_node
run_job "$name" 4 --map-by node --mca coll tuned,basic,libnbc,self --mca op ^avx "$prog" -q -k
ok=0
problems=$(check_exit_result "$name") || ok=1
finish "$name" "$ok" "$problems"

# 3. xccl across the hosts, both placements.
for map in node slot; do
    name=xccl.map_by_$map
    run_job "$name" 4 --map-by "$map" \
        --mca coll xccl,tuned,basic,libnbc,self \
        --mca coll_xccl_verbose 1 --mca coll_xccl_small_msg_bytes 0 \
        "$prog" -q
    ok=0
    problems=$({ check_exit_result "$name" && check_counts "$name" 4; } 2>&1) || ok=1
    if [[ $ok -eq 0 && $run_bytes -lt 1048576 ]]; then
        problems="$name: only $run_bytes bytes crossed the simulated link"
        ok=1
    fi
    finish "$name" "$ok" "$problems"
done

# 3a. xccl above han (Open MPI's hierarchical component, priority between
#     tuned's and xccl's), han as xccl's fallback: xccl's set-up agreement
#     runs han's allgather, whose first call creates han's sub-communicators
#     with collectives on the same communicator; xccl hands those to han
#     ("fallback=inside_set_up").  -k and op ^avx: stock's known bugs, as in
#     step 2; han's segmented allreduce crashes on MPI_IN_PLACE, its simple
#     one does not.
name=xccl.above_han
run_job "$name" 4 --map-by node \
    --mca coll xccl,han,tuned,basic,libnbc,self --mca coll_han_priority 79 \
    --mca coll_han_use_simple_allreduce 1 --mca op ^avx \
    --mca coll_xccl_verbose 1 "$prog" -q -k
ok=0
problems=$(check_exit_result "$name") || ok=1
# (grep -c, not -q, behind a pipe: -q stops reading at the first match, and
#  under pipefail the writer's SIGPIPE would read as "not found")
if [[ $ok -eq 0 ]] && ! per_rank_output "$name" 0 | grep -c 'fallback=inside_set_up' >/dev/null; then
    problems="$name: rank 0 logged no call made from inside the set-up (han took none?)"
    ok=1
fi
finish "$name" "$ok" "$problems"

# check_forced_mn <name> <np> <coll=algo ...>: every rank ran each forced
# algorithm at least once and no algo= line of that collective names
# another one but the collective's first (a pipeline on a sub-communicator
# inside one host does not apply).
check_forced_mn() {
    local name=$1 np=$2 r kv c a n other bad=0
    shift 2
    declare -A first=([allreduce]=ring [allgather]=ring [reduce_scatter]=ring
        [reduce_scatter_block]=ring [bcast]=binomial)
    for ((r = 0; r < np; r++)); do
        for kv in "$@"; do
            c=${kv%%=*} a=${kv#*=}
            n=$(per_rank_output "$name" "$r" | awk -v c="$c" -v a="algo=$a" '$1 == "xccl:" && $2 == c && $6 == a' | wc -l)
            other=$(per_rank_output "$name" "$r" | awk -v c="$c" -v a="algo=$a" -v b="algo=${first[$c]}" \
                '$1 == "xccl:" && $2 == c && $6 ~ /^algo=/ && $6 != a && $6 != b' | head -n 1)
            if ((n == 0)); then echo "$name: rank $r: forced $kv, but no call ran it"; bad=1; fi
            if [[ -n $other ]]; then echo "$name: rank $r: forced $kv, got: $other"; bad=1; fi
        done
    done
    return "$bad"
}

# 3b. The pipelined and nonuniform algorithms forced across the two hosts
#     (--map-by node: each host's ranks non-contiguous), with calls past
#     4 MiB (-P).
forced_pipe=(allreduce=pipeline allgather=pipeline reduce_scatter=pipeline reduce_scatter_block=pipeline)
forced_mca() {    # forced_mca <coll=algo ...>: the --mca arguments
    local kv
    mca=()
    for kv in "$@"; do mca+=(--mca "coll_xccl_${kv%%=*}_algorithm" "${kv#*=}"); done
}
name=xccl.forced_pipelined.map_by_node
forced_mca "${forced_pipe[@]}" bcast=nhr
run_job "$name" 4 --map-by node \
    --mca coll xccl,tuned,basic,libnbc,self \
    --mca coll_xccl_verbose 1 --mca coll_xccl_small_msg_bytes 0 "${mca[@]}" \
    "$prog" -q -P
ok=0
problems=$({ check_exit_result "$name" && check_counts "$name" 4 &&
    check_forced_mn "$name" 4 "${forced_pipe[@]}" bcast=nhr; } 2>&1) || ok=1
finish "$name" "$ok" "$problems"

# 3c. Allgatherv and reduce across the hosts (xccl_mpi_colls -q, --map-by
#     node), tuned and then han as the fallback: right on every rank; on
#     the communicators of all 4 ranks every rank's larger allgatherv
#     calls ran xccl (the two nodes' own layout, from the host names), its
#     reduce calls of 1 MiB and more too under tuned, none under han (on
#     the split communicators inside one host the level may take them).
#     Under han, xccl_bench's calls (han 4.1.4's reduce crashes on the
#     NULL and in-place buffers xccl_mpi_colls passes), both below and
#     above the two thresholds.
for stack in tuned han; do
    name=xccl.colls.$stack
    if [[ $stack == han ]]; then
        stack_mca=(--mca coll xccl,han,tuned,basic,libnbc,self --mca coll_han_priority 79)
        want_reduce=0
        job=("$builddir/xccl_bench" -c allgatherv,reduce -b 128K -e 2M -f 16 -r 1 -n 2 -w 1)
    else
        stack_mca=(--mca coll xccl,tuned,basic,libnbc,self)
        want_reduce=1
        job=("$builddir/xccl_mpi_colls" -q -c allgatherv,reduce)
    fi
    run_job "$name" 4 --map-by node "${stack_mca[@]}" --mca coll_xccl_verbose 1 "${job[@]}"
    ok=0
    if [[ $stack == han ]]; then
        if [[ $run_rc -ne 0 ]] || ! grep -qs '^# result: all xccl checks passed' \
            "$logdir/$name.log" "$logdir/$name.out"/*/rank.*/stdout; then
            problems="$name: exit status $run_rc, or xccl_bench's checks failed"
            ok=1
        fi
    else
        problems=$(check_exit_result "$name") || ok=1
    fi
    for ((r = 0; ok == 0 && r < 4; r++)); do
        lines=$(per_rank_output "$name" "$r")
        reduce_kept=$(grep -cE '^xccl: reduce .* algo=[^ ]+ size=4 ' <<<"$lines")
        if ! grep -qE '^xccl: allgatherv .* algo=[^ ]+ size=4 ' <<<"$lines"; then
            problems="$name: rank $r: no allgatherv call ran xccl"
            ok=1
        elif (( (reduce_kept > 0) != want_reduce )); then
            problems="$name: rank $r: $reduce_kept reduce calls on 4 ranks ran xccl"
            ok=1
        fi
    done
    finish "$name" "$ok" "$problems"
done

# 4. Device buffers across the hosts, against the fake libcuda.so.1 (no
#    GPU needed): xccl_mpi_gpu at np 4 --map-by node.  No CUDA IPC between
#    hosts, so every call on device buffers is staged, its copies in 64 KiB
#    pieces overlapping the two-level schedules; ranks on both hosts must
#    log pipelined calls.  Then the same with device pointers straight to
#    UCX (coll_xccl_gpu_direct 1; Debian's UCX cannot move CUDA memory, so
#    test/gpu/fake_ucx_cuda.c, preloaded, plays a UCX that can, and the
#    fake's device memory is host-addressable): the two-level schedules
#    run on the device buffers with their copies and reductions on the
#    fake's streams; ranks on both hosts must log direct calls.  Each way
#    then runs xccl_mpi_gpu_colls, whose largest class (1 MiB + 5 elements)
#    takes reduce and allgatherv onto xccl's two-level schedules on device
#    buffers; the smaller calls go to the fallback on host copies.  Skipped
#    (said) when the fake, the UCX stand-in or a test program is not built.
gpuprog=$builddir/xccl_mpi_gpu fakedir=$builddir/test/gpu/fake
collsprog=$builddir/xccl_mpi_gpu_colls
fake_ucx=$builddir/.libs/libxccl_fake_ucx_cuda.so
for mode in staged direct; do
    name=xccl.gpu_$mode.map_by_node
    if [[ ! -x $gpuprog || ! -e $fakedir/libcuda.so.1 ]]; then
        echo "== $name: SKIP (no $gpuprog or $fakedir/libcuda.so.1)"
        continue
    fi
    mode_args=(--mca coll_xccl_gpu_chunk_bytes 65536)
    want='staging pipelined'
    if [[ $mode == direct ]]; then
        if [[ ! -e $fake_ucx ]]; then
            echo "== $name: SKIP (no $fake_ucx)"
            continue
        fi
        mode_args=(--mca coll_xccl_gpu_direct 1 -x FAKE_CUDA_HOST_ACCESS=1
            -x "LD_PRELOAD=$fake_ucx")
        want='device buffers straight to ucx'
    fi
    run_job "$name" 4 --map-by node \
        --mca coll xccl,tuned,basic,libnbc,self --mca op ^avx \
        --mca coll_xccl_verbose 2 "${mode_args[@]}" \
        -x "LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$gpuprog" -q -n 1048576
    ok=0
    problems=$({
        check_exit_result "$name" &&
        for r in 0 1; do      # rank 0 on h0, rank 1 on h1
            n=$(per_rank_output "$name" "$r" | grep -c "$want" || true)
            [[ $n -gt 0 ]] || { echo "$name: rank $r logged no '$want' call"; exit 1; }
            echo "$name: rank $r: $n '$want' calls"
        done
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
    name=xccl.gpu_colls_$mode.map_by_node
    if [[ ! -x $collsprog ]]; then
        echo "== $name: SKIP (no $collsprog)"
        continue
    fi
    run_job "$name" 4 --map-by node \
        --mca coll xccl,tuned,basic,libnbc,self --mca op ^avx \
        --mca coll_xccl_verbose 1 "${mode_args[@]}" \
        -x "LD_LIBRARY_PATH=$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$collsprog" -q -n 1048640
    ok=0
    problems=$({
        check_exit_result "$name" &&
        for r in 0 1; do
            lines=$(per_rank_output "$name" "$r")
            for coll in reduce allgatherv; do
                grep -qE "^xccl: $coll .* algo=[^ ]+ size=4 " <<<"$lines" ||
                    { echo "$name: rank $r ran no $coll call of 4 ranks with xccl"; exit 1; }
            done
        done
    } 2>&1) || ok=1
    finish "$name" "$ok" "$problems"
done

# 5. Three hosts behind a bridge, 5 ranks --map-by node: uneven (2, 2, 1)
#    and non-contiguous nodes.  XCCLMN_TEST_3HOSTS=0 leaves it out.
if [[ ${XCCLMN_TEST_3HOSTS:-1} != 0 ]]; then
    mn_down
    if XCCLMN_QUIET=1 mn_up 3; then
        mn_mpirun_args "$(mn_component_path "$compdir" "$logdir")"
        name=xccl.3hosts.np5.map_by_node
        run_job "$name" 5 --map-by node \
            --mca coll xccl,tuned,basic,libnbc,self \
            --mca coll_xccl_verbose 1 --mca coll_xccl_small_msg_bytes 0 \
            "$prog" -q
        ok=0
        problems=$({ check_exit_result "$name" && check_counts "$name" 5; } 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
        name=xccl.3hosts.forced_pipelined.np5
        forced_mca "${forced_pipe[@]}" bcast=nb
        run_job "$name" 5 --map-by node \
            --mca coll xccl,tuned,basic,libnbc,self \
            --mca coll_xccl_verbose 1 --mca coll_xccl_small_msg_bytes 0 "${mca[@]}" \
            "$prog" -q -P
        ok=0
        problems=$({ check_exit_result "$name" && check_counts "$name" 5 &&
            check_forced_mn "$name" 5 "${forced_pipe[@]}" bcast=nb; } 2>&1) || ok=1
        finish "$name" "$ok" "$problems"
    else
        run_secs=0 run_bytes=0
        finish xccl.3hosts.setup 1 "could not set up 3 simulated hosts"
    fi
fi

echo
echo "multinode summary (link: $XCCLMN_SHAPING):"
printf '  %s\n' "${results[@]}"
echo "logs: $logdir"
echo "multinode-tests: $passed passed, $failed failed ($((SECONDS - t_start)) s)"
[[ $failed -eq 0 ]]
