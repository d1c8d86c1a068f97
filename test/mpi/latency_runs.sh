# The shared-memory level's latency path in run_mpi_tests.sh's
# shell: sourced by it, its helpers (selected, run_mpi, per_rank_output,
# check_result, check_counts, check_forced, judge, indent, finish) and
# variables (bindir, logdir, common_args, common_base, run_timeout) in
# scope.
#
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
# gatherv, scatterv and alltoallv at least one
# via=latency_path+single_copy (a large block written straight into the
# gatherv root's buffer, or read straight from the sender's), and with
# coll_xccl_shm_cma false (.no_cma) none of those but an algo=shm line
# (the executor's schedule of the large blocks) of all three, one line per nonblocking
# call, at least one via=latency_path of each of igather, iscatter,
# ireduce and iallgatherv (a request of the latency path: all of theirs
# fit), every igatherv, iscatterv and ialltoallv via=latency_path (a
# request of the latency path, its blocks past the room by single
# copies), with .no_cma every one on the executor, and
# no call of gather, scatter, reduce or allgatherv on any
# communicator to the fallback (all of theirs fit, or pass 4 KiB in all;
# the first call on a new communicator takes the whole way).  (Planted: a rank without
# a large block that skips its executor flag hangs at np 3 and 4; a
# gatherv root that leaves the small blocks in the executor's counts
# gives wrong bytes there, a receiver that takes a block by its size
# where the sender's part had no room for it crashes there; a writer that
# skips the ring's wait gives wrong bytes at np 2, 3 and 4; a request
# that ends before its single copies' readers posted gives wrong bytes at
# np 2, 3 and 4.)
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
                    if ((!nb || i > 3 || cma) && lat[c] + 0 == 0) msg = msg " " c ": none via=latency_path;"
                    if (nb && i <= 3 && cma && lat[c] + 0 != lines[c] + 0)
                        msg = msg sprintf(" %s: %d of %d calls not via=latency_path;", c, lines[c] - lat[c], lines[c])
                    if (nb && i <= 3 && !cma && exe[c] + 0 != lines[c] + 0)
                        msg = msg sprintf(" %s: %d of %d calls not on the executor with coll_xccl_shm_cma false;", c, lines[c] - exe[c], lines[c])
                    if (!nb && i <= 3 && !cma && exe[c] + 0 == 0) msg = msg " " c ": none on the executor (algo=shm);"
                    if (!nb && i <= 3 && cma && single[c] + 0 == 0) msg = msg " " c ": none via=latency_path+single_copy;"
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
