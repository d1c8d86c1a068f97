# The shared-memory level's trials (xccl_mpi_trials) in run_mpi_tests.sh's
# shell: sourced by it, its helpers (selected, run_mpi, per_rank_output,
# check_result, indent, finish) and variables (bindir, common_args) in
# scope.
#
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
# xccl_mpi_trials.quiet_agree.np2: bcast and allgather alone, with trials:
#   no allreduce line or summary (the trials' agreements are xccl's own
#   quiet allreduces), each summary's calls= its lines.

# The collectives xccl_mpi_trials calls, whose trials these runs check.
trial_colls='allgather|alltoall|bcast|allreduce|reduce_scatter_block|allgatherv|gather|scatter'
# trial_lines <name> <np> <ERE>: every rank's output lines that match ERE,
# each behind its rank.
trial_lines() {
    local name=$1 np=$2 ere=$3 r
    for ((r = 0; r < np; r++)); do
        per_rank_output "$name" "$r" | grep -E "$ere" | sed "s/^/$r /"
    done
}
# The level's trials (coll_xccl_shm_trials): 48 blocking calls each of
# allgather, alltoall, bcast, allreduce, reduce_scatter_block, allgatherv,
# gather and scatter at 24 KiB (shm is the latency path there for the
# first three), 64 KiB and 2 MiB (a short and a long trial), every result
# checked (xccl_mpi_trials); on every rank one "xccl: trial <coll> ..."
# line per collective and class, the same pick on every rank, shm and
# mesh both run before it and only the pick after it.
check_trial_lines() {
    local name=$1 np=$2
    trial_lines "$name" "$np" "^xccl: (trial )?($trial_colls) " | awk -v name="$name" -v np="$np" '
        # per rank: the trial state of the class of each call
        function cls(b,   k) { k = 0; while (b >= 2) { b = int(b / 2); k++ } return k }
        $3 == "trial" {
            split($7, bb, "[=.]"); c = $4 SUBSEP cls(bb[2])
            split($NF, pk, "="); pick[$1, c] = pk[2]; ntrial[$1, c]++; classes[c] = 1
            if (c in agreed && agreed[c] != pk[2]) { print name ": rank " $1 " picked " pk[2] " for " $4 " " $7 ", another rank " agreed[c]; bad = 1 }
            agreed[c] = pk[2]
            next
        }
        {
            split($6, bb, "="); c = $3 SUBSEP cls(bb[2]); split($7, al, "=")
            if (($1, c) in pick) {
                if (al[2] != pick[$1, c]) { print name ": rank " $1 " ran " al[2] " for " $3 " " bb[2] " B after picking " pick[$1, c]; bad = 1 }
                after[$1, c]++
            } else before[$1, c, al[2] == "shm_small" ? "shm" : al[2]]++   # allreduce below 32 KiB
        }
        END {
            n = 0
            for (c in classes) n++
            if (n != 24) { print name ": trials decided for " n " collective/class pairs, want 24"; bad = 1 }
            for (c in classes) for (r = 0; r < np; r++) {
                split(c, cc, SUBSEP)
                if (ntrial[r, c] != 1) { print name ": rank " r ": " ntrial[r, c] + 0 " trial lines for " cc[1] " class " cc[2]; bad = 1 }
                if (!before[r, c, "shm"] || !before[r, c, "mesh"]) { print name ": rank " r ": " cc[1] " class " cc[2] ": shm ran " before[r, c, "shm"] + 0 ", mesh " before[r, c, "mesh"] + 0 " times before the pick"; bad = 1 }
                if (!after[r, c]) { print name ": rank " r ": " cc[1] " class " cc[2] ": no call after the pick"; bad = 1 }
            }
            exit bad
        }'
}
# The vote sets the trials' mode: long ones ("chosen by long trials")
# where a rank yields when idle, else short ones ("chosen by trials").
# np 2 with mpi_yield_when_idle 0 fits the 2 cores: short; with 1
# (.yield): long; at np 3 with 0, Open MPI 5 still makes its ranks yield
# (oversubscribed), 4.1 does not: either, the same on every rank.  With
# coll_xccl_shm_trials 0 (.off), no trial line and no mesh call.
check_no_trials() {
    local name=$1 np=$2 r n
    for ((r = 0; r < np; r++)); do
        n=$(per_rank_output "$name" "$r" | grep -cE "^xccl: (trial |($trial_colls) .*algo=mesh)" || true)
        ((n == 0)) || { echo "$name: rank $r: $n trial or mesh lines, want none"; return 1; }
    done
}
# check_trials_as_voted <name> <np> <short|long|either>: the comm=0 set-up
# line of every rank names one mode, the one wanted; then check_trial_lines.
check_trials_as_voted() {
    local name=$1 np=$2 want=$3 r short=0 long=0 line
    for ((r = 0; r < np; r++)); do
        line=$(per_rank_output "$name" "$r" | grep -E "^xccl: comm comm=0 rank=$r: shared-memory level on " || true)
        case $line in
        *"chosen by trials"*) short=$((short + 1)) ;;
        *"chosen by long trials"*) long=$((long + 1)) ;;
        esac
    done
    local got=none
    ((short != np)) || got=short
    ((long != np)) || got=long
    if [[ $got == none || ($want != either && $want != "$got") ]]; then
        echo "$name: set-up lines: $short ranks with short trials, $long with long ones, of $np; want $want on all"
        return 1
    fi
    ((long == 0)) || echo "$name: (long trials: a rank yields when idle)"
    check_trial_lines "$name" "$np"
}
# check_trial_times <name> <np> <late_us>: xccl_mpi_trials -L late_us, the
# last rank late to every call by late_us; every rank prints each call's
# own clock ("xccl_mpi_trials: call <n> <before> <after>", ns) and xccl's
# readings of its trial calls ("xccl: trial clock", verbose 2, the same
# clock).  For each collective and size class, on every rank:
#   (a) each of xccl's readings lies inside one of that rank's calls, the
#       same call (n) on every rank;
#   (b) the agreed shm= and mesh= of the trial line are the medians of
#       the readings' spans from the last rank's start to the last rank's
#       end (to the line's 0.1 us);
#   (c) so they are at most the medians of the same calls' spans from the
#       last rank's "before" to the last rank's "after": the wait for the
#       late rank is not in them;
#   (d) each reading lasts at least 300 ns: the calls copy 24 KiB or more,
#       where a reading whose start is taken after the call's work lasts a
#       few tens of ns.
# Then at least one trial call where the late rank began late_us / 2
# after rank 0 (the wait was there to leave out).  These hold however
# loaded the host: a comparison of medians of the agreed and the own
# times holds only where the calls take less than the wait (on a loaded
# host the agreed median can come out above a rank's own).
check_trial_times() {
    local name=$1 np=$2 late=$3
    trial_lines "$name" "$np" "^(xccl_mpi_trials: call |xccl: trial (clock )?($trial_colls) )" | awk -v name="$name" -v np="$np" -v late="$late" '
        function median(v, n,    i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
            return n % 2 ? v[(n + 1) / 2] : int((v[n / 2] + v[n / 2 + 1]) / 2)
        }
        $2 == "xccl_mpi_trials:" { before[$1, $4] = $5 + 0; after[$1, $4] = $6 + 0; if ($4 + 1 > ncalls[$1]) ncalls[$1] = $4 + 1; next }
        $4 == "clock" {
            key = $5 " " $8; cand = $9; sub(/:$/, "", cand)
            n = 0
            for (i = 10; i <= NF; i++) {
                split($i, se, "-"); n++; s[$1, key, cand, n] = se[1] + 0; e[$1, key, cand, n] = se[2] + 0
                if (se[2] - se[1] < 300) { printf "%s: rank %d: %s %s reading %d lasts %.0f ns: not the call\047s work\n", name, $1, key, cand, n, se[2] - se[1]; bad = 1 }
            }
            samples[$1, key, cand] = n; keys[key] = 1
            next
        }
        {   key = $4 " " $7
            for (i = 1; i <= NF; i++) if ($i ~ /^(shm|mesh)=[0-9.]+us$/) {
                split($i, kv, "="); sub(/us$/, "", kv[2]); agreed[$1, key, kv[1]] = kv[2] + 0 }
        }
        # the call of rank r that holds reading [a, b], or -1
        function call_of(r, a, b,    k) {
            for (k = 0; k < ncalls[r]; k++) if (before[r, k] <= a && b <= after[r, k]) return k
            return -1
        }
        END {
            waited = 0; nk = 0
            for (key in keys) for (c = 0; c < 2; c++) {
                cand = c ? "mesh" : "shm"; nk++
                n = samples[0, key, cand]
                if (!n) { print name ": " key " " cand ": no readings on rank 0"; bad = 1; continue }
                for (i = 1; i <= n; i++) {
                    ls = 0; le = 0; lb = 0; la = 0
                    for (r = 0; r < np; r++) {
                        if (samples[r, key, cand] != n) { print name ": rank " r ": " key " " cand ": " samples[r, key, cand] + 0 " readings, rank 0 " n; bad = 1; break }
                        k = call_of(r, s[r, key, cand, i], e[r, key, cand, i])
                        if (k < 0) { printf "%s: rank %d: %s %s reading %d (%.0f-%.0f) in none of its calls\n", name, r, key, cand, i, s[r, key, cand, i], e[r, key, cand, i]; bad = 1; break }
                        if (r == 0) k0 = k
                        else if (k != k0) { print name ": rank " r ": " key " " cand " reading " i " in call " k ", rank 0 in call " k0; bad = 1; break }
                        if (s[r, key, cand, i] > ls) ls = s[r, key, cand, i]
                        if (e[r, key, cand, i] > le) le = e[r, key, cand, i]
                        if (before[r, k] > lb) lb = before[r, k]
                        if (after[r, k] > la) la = after[r, k]
                    }
                    if (r < np) break
                    span[i] = le > ls ? le - ls : 0
                    outer[i] = la - lb
                    if (before[np - 1, k0] - before[0, k0] >= late * 1000 / 2) waited++
                }
                if (i <= n) continue
                want = median(span, n) / 1e3; bound = median(outer, n) / 1e3
                for (r = 0; r < np; r++) {
                    if (!((r, key, cand) in agreed)) { print name ": rank " r ": " key ": no agreed " cand; bad = 1; continue }
                    got = agreed[r, key, cand]
                    if (got < want - 0.051 || got > want + 0.051) {
                        printf "%s: rank %d: %s %s agreed %.1f us, the median of the spans from the last start to the last end %.3f us\n", name, r, key, cand, got, want; bad = 1 }
                    if (got > bound + 0.051) {
                        printf "%s: rank %d: %s %s agreed %.1f us, above the median of the calls from the last rank in to the last out, %.3f us\n", name, r, key, cand, got, bound; bad = 1 }
                }
            }
            if (nk != 48) { print name ": " nk / 2 " collective/class trials with readings, want 24"; bad = 1 }
            if (!waited) { print name ": in no trial call did rank " np - 1 " begin " late / 2 " us after rank 0"; bad = 1 }
            exit bad
        }' || return 1
}
saved=("${common_args[@]}")
trial_base=()
for ((i = 0; i < ${#saved[@]}; i++)); do
    if [[ ${saved[i]} == --mca && ${saved[i + 1]:-} =~ ^(mpi_yield_when_idle|coll_xccl_verbose)$ ]]; then
        i=$((i + 2))
        continue
    fi
    trial_base+=("${saved[i]}")
done
# .late.np2: the last rank 5 ms late to every call (-L 5000): the agreed
# times leave the wait out (check_trial_times).
for run in np2:0:short np3:0:either yield.np2:1:long off.np2:0:none late.np2:0:short; do
    IFS=: read -r tag yield want <<<"$run"
    name=xccl_mpi_trials.$tag
    np=${tag#*np}
    selected "$name" || continue
    late=()
    [[ $tag != late.* ]] || late=(-L 5000)
    common_args=("${trial_base[@]}" --mca mpi_yield_when_idle "$yield" --mca coll_xccl_verbose 2)
    [[ $want != none ]] || common_args+=(--mca coll_xccl_shm_trials 0)
    run_mpi "$name" "$np" "$bindir/xccl_mpi_trials" "${late[@]}"
    common_args=("${saved[@]}")
    ok=0
    if ((${#late[@]})); then
        problems=$({ check_result "$name" && check_trials_as_voted "$name" "$np" "$want" &&
            check_trial_times "$name" "$np" 5000; } 2>&1) || ok=1
    elif [[ $want != none ]]; then
        problems=$({ check_result "$name" && check_trials_as_voted "$name" "$np" "$want"; } 2>&1) || ok=1
    else
        problems=$({ check_result "$name" && check_no_trials "$name" "$np"; } 2>&1) || ok=1
    fi
    indent "$problems"
    finish "$name" "$ok"
done

# xccl_mpi_trials.quiet_agree.np2: bcast and allgather alone (-c), 64 KiB
# and 2 MiB, 48 calls each, short trials.  The program never calls
# MPI_Allreduce; the trials' agreements run through xccl's own allreduce
# without a line or a count (m->quiet).  So on every rank: no allreduce
# line and no allreduce summary; one trial line per collective and class;
# each collective's summary counts its calls, as many as its lines.  (The
# fallback's allreduce would leave this output alike: test_trial_agree
# checks which allreduce the agreement takes.)
check_quiet_agreement() {
    local name=$1 np=$2 calls=$3 r c out n lines summary
    for ((r = 0; r < np; r++)); do
        out=$(per_rank_output "$name" "$r")
        n=$(grep -cE '^xccl: (i?allreduce |summary allreduce )' <<<"$out" || true)
        ((n == 0)) || { echo "$name: rank $r: $n allreduce lines, want none"; return 1; }
        n=$(grep -cE '^xccl: trial (bcast|allgather) ' <<<"$out" || true)
        ((n == 4)) || { echo "$name: rank $r: $n trial lines, want 4"; return 1; }
        for c in bcast allgather; do
            lines=$(grep -cE "^xccl: $c comm=" <<<"$out" || true)
            summary=$(sed -n "s/^xccl: summary $c rank=$r calls=\([0-9]*\) .*/\1/p" <<<"$out")
            [[ $lines == "$calls" && $summary == "$calls" ]] || {
                echo "$name: rank $r: $c: $lines lines, summary calls=${summary:-none}, want $calls"
                return 1
            }
        done
    done
}
name=xccl_mpi_trials.quiet_agree.np2
if selected "$name"; then
    common_args=("${trial_base[@]}" --mca mpi_yield_when_idle 0 --mca coll_xccl_verbose 1)
    run_mpi "$name" 2 "$bindir/xccl_mpi_trials" -c bcast,allgather -s 65536,2097152 -n 48
    common_args=("${saved[@]}")
    ok=0
    problems=$({ check_result "$name" && check_quiet_agreement "$name" 2 96; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi

# Picks kept for the process's later communicators (xccl_mpi_trials -A).
# .kept.np2 (-A dup): every collective and class timed on MPI_COMM_WORLD,
# then again on a dup: there every rank has one "kept from earlier
# communicators" line per collective and class with the pick its world
# trial agreed, no timed trial, and at most one call (the first) that
# ran another algorithm.  .kept_partial.np3 (-A split): ranks 0 and 1,
# then ranks 1 and 2: only rank 1 has a pick from before, so nobody takes
# a kept pick, and the second communicator's trials run timed, on ranks
# 1 and 2.
check_trials_kept() {
    local name=$1 np=$2 mode=$3
    trial_lines "$name" "$np" "^xccl: (trial )?($trial_colls) " | awk -v name="$name" -v np="$np" -v mode="$mode" '
        function cls(b,   k) { k = 0; while (b >= 2) { b = int(b / 2); k++ } return k }
        $3 == "trial" {
            split($5, cm, "="); split($7, bb, "[=.]"); c = $4 " class " cls(bb[2])
            split($NF, pk, "=")
            if ($0 ~ / kept from earlier communicators /) { kept[$1, cm[2], c] = pk[2]; nkept[$1]++ }
            else if ($0 ~ / shm=[0-9.]+us mesh=/) { timed[$1, cm[2], c] = pk[2]; ntimed[$1]++ }
            comms[$1, cm[2]] = 1; classes[c] = 1
            next
        }
        {   split($4, cm, "="); split($6, bb, "="); split($7, al, "=")
            c = $3 " class " cls(bb[2]); a = al[2] == "shm_small" ? "shm" : al[2]
            ran[$1, cm[2], c, a]++; calls[$1, cm[2], c]++; comms[$1, cm[2]] = 1
        }
        END {
            if (mode == "dup") {
                for (r = 0; r < np; r++) {
                    other = ""
                    for (k in comms) { split(k, kk, SUBSEP); if (kk[1] == r && kk[2] != "0") other = kk[2] }
                    if (other == "") { print name ": rank " r ": no calls on the dup"; bad = 1; continue }
                    for (c in classes) {
                        want = timed[r, "0", c]
                        if (want == "") { print name ": rank " r ": " c ": no timed trial on the world communicator"; bad = 1; continue }
                        if ((r, other, c) in timed) { print name ": rank " r ": " c ": timed again on the dup"; bad = 1 }
                        if (kept[r, other, c] != want) { print name ": rank " r ": " c ": kept pick \"" kept[r, other, c] "\" on the dup, the world trial picked " want; bad = 1 }
                        n = calls[r, other, c] - ran[r, other, c, want]
                        if (!calls[r, other, c] || n > 1) { print name ": rank " r ": " c ": " n " of " calls[r, other, c] + 0 " calls on the dup ran another algorithm than " want; bad = 1 }
                    }
                }
            } else {
                for (r = 0; r < np; r++) {
                    if (nkept[r]) { print name ": rank " r ": " nkept[r] " kept picks, want none (rank 2 had none)"; bad = 1 }
                    want = (r == 1 ? 2 : 1) * length(classes)
                    if (ntimed[r] != want) { print name ": rank " r ": " ntimed[r] + 0 " timed trials, want " want; bad = 1 }
                }
            }
            if (!length(classes)) { print name ": no trial lines"; bad = 1 }
            exit bad
        }'
}
for run in kept.np2:dup:0 kept_partial.np3:split:1; do
    IFS=: read -r tag mode yield <<<"$run"
    name=xccl_mpi_trials.$tag
    np=${tag#*np}
    selected "$name" || continue
    common_args=("${trial_base[@]}" --mca mpi_yield_when_idle "$yield" --mca coll_xccl_verbose 1)
    run_mpi "$name" "$np" "$bindir/xccl_mpi_trials" -A "$mode" -c allgather,bcast,allreduce -s 65536,2097152
    common_args=("${saved[@]}")
    ok=0
    problems=$({ check_result "$name" && check_trials_kept "$name" "$np" "$mode"; } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done

# Picks kept for later processes (coll_xccl_picks_file), np 2 on 2 cores,
# allgather, bcast and allreduce at 64 KiB and 2 MiB:
#   .picks.write.np2  a fresh file: every trial timed, and at MPI_Finalize
#                     the file holds each agreed pick as a line of the
#                     situation (2 ranks, 2 on the node, quiet);
#   .picks.read.np2   the same program again: every trial line on every
#                     rank "kept from earlier processes", with the file's
#                     pick, none timed;
#   .picks.differ.np2 rank 1's file holds the other candidate for every
#                     pick (test/lib/rank_env.sh; each rank read its own
#                     file: verbose 2's "init: 6 trial picks" line):
#                     every trial timed;
#   .picks.bad.np2    a file with a line that is not one: said on every
#                     rank, every trial timed, and the file rewritten
#                     with the picks.
# Each run checks its results too.  The suite runs with none
# (test/lib/ompi_env.sh) elsewhere.
picks_dir=$logdir/picks
# picks_trials <name> <np> <mode: kept|timed> [<file>]: every rank has a
# trial line per collective and class, all of the mode; kept ones with
# the pick <file> holds for the class.
picks_trials() {
    local name=$1 np=$2 mode=$3 file=${4:-/dev/null}
    trial_lines "$name" "$np" "^xccl: trial ($trial_colls) " |
        awk -v name="$name" -v np="$np" -v mode="$mode" -v file="$file" '
        function cls(b,   k) { k = 0; while (b >= 2) { b = int(b / 2); k++ } return k }   # + 1: the file'"'"'s class
        BEGIN { while ((getline l < file) > 0) { split(l, f, " "); if (f[1] !~ /^#/) want[f[1] " " f[2]] = f[6] } }
        {
            split($7, bb, "[=.]"); c = $4 " " cls(bb[2]) + 1; split($NF, pk, "=")
            n[$1]++
            kept = $0 ~ / kept from earlier processes \(coll_xccl_picks_file\) /
            timed = $0 ~ / shm=[0-9.]+us mesh=/
            if (mode == "kept" && !kept) { print name ": rank " $1 ": not a kept pick: " $0; bad = 1 }
            if (mode == "kept" && pk[2] != want[c]) { print name ": rank " $1 ": " c ": pick " pk[2] ", the file has " want[c]; bad = 1 }
            if (mode == "timed" && !timed) { print name ": rank " $1 ": not a timed trial: " $0; bad = 1 }
        }
        END {
            for (r = 0; r < np; r++) if (n[r] != 6) { print name ": rank " r ": " n[r] + 0 " trial lines, want 6"; bad = 1 }
            exit bad
        }'
}
# picks_file_holds <name> <file>: the file has a line per trial rank 0
# timed, with its pick, in the situation of 2 ranks on the node, quiet.
picks_file_holds() {
    local name=$1 file=$2
    [[ -s $file ]] || { echo "$name: no file $file"; return 1; }
    trial_lines "$name" 1 "^xccl: trial ($trial_colls) .* shm=[0-9.]+us mesh=" |
        awk -v name="$name" -v file="$file" '
        function cls(b,   k) { k = 0; while (b >= 2) { b = int(b / 2); k++ } return k }   # + 1: the file'"'"'s class
        BEGIN { while ((getline l < file) > 0) if (l !~ /^#/) have[l] = 1 }
        {
            split($7, bb, "[=.]"); split($NF, pk, "="); n++
            key = $4 " " cls(bb[2]) + 1 " 2 2 quiet " pk[2]
            found = 0
            for (l in have) if (index(l, key " ") == 1) found = 1
            if (!found) { print name ": " file " has no line \"" key " <time>\""; bad = 1 }
        }
        END { if (n != 6) { print name ": " n + 0 " timed trials on rank 0, want 6"; bad = 1 } exit bad }'
}
picks_args=(-c allgather,bcast,allreduce -s 65536,2097152)
for tag in write read differ bad; do
    name=xccl_mpi_trials.picks.$tag.np2
    selected "$name" || continue
    if [[ $tag == write ]] || [[ ! -s $picks_dir/picks ]]; then
        rm -rf "$picks_dir"         # .read and .differ without .write: a file of their own
        common_args=("${trial_base[@]}" --mca mpi_yield_when_idle 0)
        [[ $tag == write ]] || OMPI_MCA_coll_xccl_picks_file=$picks_dir/picks \
            run_mpi "$name.setup" 2 "$bindir/xccl_mpi_trials" "${picks_args[@]}"
    fi
    file=$picks_dir/picks
    common_args=("${trial_base[@]}" --mca mpi_yield_when_idle 0 --mca coll_xccl_verbose 1)
    ok=0
    case $tag in
    write | read)
        OMPI_MCA_coll_xccl_picks_file=$file run_mpi "$name" 2 "$bindir/xccl_mpi_trials" "${picks_args[@]}"
        if [[ $tag == write ]]; then
            problems=$({ check_result "$name" && picks_trials "$name" 2 timed &&
                picks_file_holds "$name" "$file"; } 2>&1) || ok=1
        else
            problems=$({ check_result "$name" && picks_trials "$name" 2 kept "$file"; } 2>&1) || ok=1
        fi
        ;;
    differ)
        other=$picks_dir/other
        awk '/^#/ { next } { $6 = $6 == "shm" ? "mesh" : "shm"; print }' "$file" >"$other"
        common_args=("${trial_base[@]}" --mca mpi_yield_when_idle 0 --mca coll_xccl_verbose 2)
        # rank 1's file through test/lib/rank_env.sh, not an MPMD line
        # (Open MPI 5.0.7's mpirun crashes on those)
        OMPI_MCA_coll_xccl_picks_file=$file run_mpi "$name" 2 \
            "$(cd "$(dirname "${BASH_SOURCE[0]}")/../lib" && pwd)/rank_env.sh" 1 \
            OMPI_MCA_coll_xccl_picks_file="$other" -- "$bindir/xccl_mpi_trials" "${picks_args[@]}"
        problems=$({
            check_result "$name" && picks_trials "$name" 2 timed &&
                for r in 0 1; do
                    per_rank_output "$name" "$r" | grep -c '^xccl: init: 6 trial picks from coll_xccl_picks_file' >/dev/null ||
                        { echo "$name: rank $r: no \"init: 6 trial picks\" line"; exit 1; }
                done
        } 2>&1) || ok=1
        ;;
    bad)
        printf 'bcast 17 2 2 quiet mesh\n' >"$file"
        OMPI_MCA_coll_xccl_picks_file=$file run_mpi "$name" 2 "$bindir/xccl_mpi_trials" "${picks_args[@]}"
        problems=$({
            check_result "$name" && picks_trials "$name" 2 timed && picks_file_holds "$name" "$file" &&
                for r in 0 1; do
                    per_rank_output "$name" "$r" | grep -c "^xccl: coll_xccl_picks_file $file: line 1 is not" >/dev/null ||
                        { echo "$name: rank $r: the bad file was not said"; exit 1; }
                done
        } 2>&1) || ok=1
        ;;
    esac
    common_args=("${saved[@]}")
    indent "$problems"
    finish "$name" "$ok"
done
