# shellcheck shell=bash
# The tables of test/bench/compare_peers.sh, which sources this file: the
# raw peer_bench outputs of its rounds turned into samples, and for each
# rank count a table: the run and its configurations, then either the
# median per-call times (best, ratio, paired, fast, busbw) or, under -F,
# the first calls.
#
#   compare_samples     $work/raw/np<np>.<cfg>.<round>.<coll>.txt and
#                       memcpy.<round>.txt into $work/samples
#   compare_table <np>  the table of np, on stdout
#
# It reads compare_peers.sh's options and results: work, first, rounds,
# reps, nonblocking, persist, percall, warm, ncores, configs, cfg_list,
# colls, over_rounds, desc, why, elapsed, load_before, load_after.
# shellcheck disable=SC2154  # those are the caller's

# All samples as "np cfg coll size bytes us" (T lines) or "np cfg coll size
# bytes round calls us..." (-F's F lines, as Q), plus checks, skips,
# failures, loads and memcpy figures.
compare_samples() {
    local f b np rest cfg rnd
    for f in "$work"/raw/np*.txt; do
        b=${f##*/}; b=${b%.txt}
        np=${b%%.*}; np=${np#np}; rest=${b#*.}; cfg=${rest%%.*}
        rest=${rest#*.}; rnd=${rest%%.*}
        awk -v np="$np" -v cfg="$cfg" -v rnd="$rnd" '
            $1 == "T" { print "T", np, cfg, $2, $3, $4, $7, rnd }
            $1 == "F" { s = ""; for (i = 6; i <= NF; i++) s = s " " $i; print "Q", np, cfg, $2, $3, $4, rnd, $5 s }
            $1 == "C" && $4 != "ok" { print "W", np, cfg, $2, $3 }
            $1 == "S" { print "S", np, cfg, $2, $3, $4 }
            $1 == "V" && $3 != "1" { print "X", np, cfg, $2, $3 }
            $1 == "#" && $2 == "FAILED" { print "F", np, cfg }
            $1 == "#" && $2 == "load" { print "L", np, cfg, $3 }
            $1 == "#" && $2 == "others" { print "O", np, cfg, $3 }
        ' "$f"
    done > "$work/samples"
    ((first > 0)) || cat "$work"/raw/memcpy.*.txt 2> /dev/null | awk '$1 == "M" { print "M", $5 }' >> "$work/samples"
}

# The table of np $1: its head, then the first calls (-F) or the steady state.
compare_table() {
    table_head "$1"
    if ((first > 0)); then
        first_table "$1"
    else
        steady_table "$1"
    fi
}

# The run: options, loads, each configuration or why it is unavailable.
table_head() {
    local np=$1 cfg cpu
    cpu=$(sed -n 's/^model name\s*:\s*//p' /proc/cpuinfo | head -n 1)
    echo "# xccl vs other MPI stacks, np=$np on $ncores cores ($cpu)$( ((np > ncores)) && echo ', oversubscribed')"
    if ((first > 0)); then
        echo "# test/bench/compare_peers.sh -F $first: $rounds rounds, interleaved; $(date -u +%Y-%m-%dT%H:%MZ), $elapsed s in all"
    else
        echo "# test/bench/compare_peers.sh: $rounds rounds x $reps reps, interleaved; $(date -u +%Y-%m-%dT%H:%MZ), $elapsed s in all"
    fi
    ((nonblocking)) && echo "# nonblocking forms: MPI_I<coll> then MPI_Wait (peer_bench -n)"
    ((persist)) && echo "# persistent view: p<cfg> = MPI_<Coll>_init per size, MPI_Start + MPI_Wait per call (peer_bench -i); subject pxccl, best over the others but xccl, px/x = pxccl / xccl"
    ((percall)) && echo "# each call timed alone: barrier, call; median over calls of the slowest rank; bcast root = call % p (peer_bench -P)"
    ((warm > 0 && first == 0)) && echo "# warm-up: at least $warm calls per size (peer_bench -w $warm)"
    echo "# load average (1/5/15 min) before: $load_before, after: $load_after"
    for cfg in "${cfg_list[@]}"; do
        if [[ -n ${why[$cfg]:-} ]]; then
            echo "#   $cfg: unavailable: ${why[$cfg]}"
        else
            echo "#   $cfg: ${desc[$cfg]}"
        fi
    done
}

# What both tables' awk programs share, put in front of each: the median
# of a list of numbers, sizes and times as printed, the samples of np
# (checks, skips, failures, loads; memcpy figures as mc), the lines on
# loads and on what failed or was not measured, and the order of the rows
# (collectives in the order asked for, sizes ascending: order[1..nk]).
# shellcheck disable=SC2016  # awk's fields, not the shell's
table_awk_lib='
        function median(list,   n, a, i, j, t) {
            n = split(list, a, " ")
            if (n == 0) return -1
            for (i = 2; i <= n; i++) {
                t = a[i] + 0
                for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]
                a[j + 1] = t
            }
            return n % 2 ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        function human(b) {
            if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) "M"
            if (b >= 1024 && b % 1024 == 0) return (b / 1024) "K"
            return b
        }
        function fmt_us(m) { return m < 0 ? "-" : sprintf(m < 100 ? "%.2f" : m < 10000 ? "%.1f" : "%.0f", m) }
        function print_load() {
            printf "# load average at the start of each invocation (counts the previous ones ranks): median %.2f, max %.2f\n", median(ld), ldmax
            printf "# CPU used by other processes during each invocation: median %.2f, max %.2f of %d cores\n", median(ot), otmax, cores
        }
        function print_notes(   c) {
            for (c in fail) printf "# %s: %d invocation(s) failed or timed out (their printed samples are kept)\n", c, fail[c]
            for (c in inactive) printf "# %s: %s: these are NOT xccl figures\n", c, inactive[c]
            for (c in skip) printf "# %s not measured:%s\n", c, skip[c]
        }
        function sort_keys(   ci, c, i, j, v) {
            for (ci = 1; ci <= ncl; ci++) {
                c = cl[ci]
                for (i = 2; i <= nsz[c]; i++) {
                    v = szs[c, i]
                    for (j = i - 1; j >= 1 && szs[c, j] > v; j--) szs[c, j + 1] = szs[c, j]
                    szs[c, j + 1] = v
                }
                for (i = 1; i <= nsz[c]; i++) order[++nk] = c SUBSEP szs[c, i]
            }
        }
        $1 == "M" { mc = mc " " $2; next }
        $2 != np { next }
        $1 == "W" { wrong[$4 SUBSEP $5, $3] = 1; nwrong++ }
        $1 == "S" { skip[$3] = skip[$3] " " $4 "@" human($5) "(" $6 ")" }
        $1 == "X" { inactive[$3] = $4 "=" $5 }
        $1 == "F" { fail[$3]++ }
        $1 == "L" { ld = ld " " $4; if ($4 + 0 > ldmax) ldmax = $4 + 0 }
        $1 == "O" { ot = ot " " $4; if ($4 + 0 > otmax) otmax = $4 + 0 }
'

# -F: the first-calls table of np $1.
first_table() {   # np
    awk -v np="$1" -v calls="$first" -v cores="$ncores" -v cfgs="$configs" -v colls="$colls" \
        -v mrounds="$over_rounds" "$table_awk_lib"'
        # the median of a[lo..hi]
        function gmed(a, lo, hi,   s, i) {
            s = ""
            for (i = lo; i <= hi; i++) s = s " " a[i]
            return median(s)
        }
        BEGIN {
            ncf = split(cfgs, cf, ","); ncl = split(colls, cl, ",")
            # the groups of calls: 1, 2-5, 6-20, 21-calls (those that exist)
            split("1 2 6 21", glo, " "); split("1 5 20 " calls, ghi, " ")
            for (ng = 0; ng < 4 && glo[ng + 1] <= calls; ng++)
                if (ghi[ng + 1] > calls) ghi[ng + 1] = calls
            sfrom = calls - int((calls + 2) / 3) + 1     # the last third
        }
        $1 == "Q" {
            key = $4 SUBSEP $5
            if (!(key in seen)) { seen[key] = 1; nsz[$4]++; szs[$4, nsz[$4]] = $5 + 0 }
            bytes[key] = $6
            s = ""
            for (i = 9; i <= NF; i++) s = s " " $i
            q[key, $3, $7] = s
            rl[key, $3] = rl[key, $3] " " $7
            have[$3] = 1
        }
        END {
            print_load()
            printf "# first calls (peer_bench -F %d): per size a new communicator (MPI_Comm_dup), %d calls on it, each\n", calls, calls
            printf "#   after a barrier and timed alone, no warm-up, inputs changing with the call, every result checked;\n"
            printf "#   rooted ones at root 0; us per call, the slowest rank\n"
            printf "# columns: call 1, and the median of the calls of each group, in each round; a cell: the median over rounds\n"
            printf "# worst: the slowest of calls 2-%d / the steady state (the median of calls %d-%d), in each round;\n", calls, sfrom, calls
            printf "#   the median over rounds; slowest call: which of calls 2-%d it was, in each round\n", calls
            printf "# reductions: MPI_FLOAT MPI_SUM; the others: MPI_BYTE; size as in the other tables; * = blocks rounded up\n"
            if (np > cores)
                printf "# mpich at np %d: %d ranks on %d cores, it busy-polls: first %d round(s) only\n", np, np, cores, mrounds
            print_notes()
            sort_keys()
            for (k = 1; k <= nk; k++) {
                key = order[k]
                split(key, kk, SUBSEP)
                printf "\n%s %s%s\n  %-8s", kk[1], human(kk[2]), bytes[key] != kk[2] ? "*" : "", "us"
                for (g = 1; g <= ng; g++)
                    printf " %9s", glo[g] == ghi[g] ? "call " glo[g] : glo[g] "-" ghi[g]
                printf " %7s %6s  %s\n", "worst", "rounds", "slowest call"
                for (i = 1; i <= ncf; i++) {
                    cc = cf[i]
                    if (!(cc in have) || !((key, cc) in rl)) continue
                    nr = split(rl[key, cc], rr, " ")
                    delete gv
                    wl = ""; at = ""
                    for (j = 1; j <= nr; j++) {
                        n = split(q[key, cc, rr[j]], a, " ")
                        for (g = 1; g <= ng; g++)
                            if (glo[g] <= n) gv[g] = gv[g] " " gmed(a, glo[g], ghi[g] < n ? ghi[g] : n)
                        if (n < 2) continue
                        st = gmed(a, n - int((n + 2) / 3) + 1, n)
                        wi = 2
                        for (c2 = 3; c2 <= n; c2++) if (a[c2] + 0 > a[wi] + 0) wi = c2
                        if (st > 0) { wl = wl " " a[wi] / st; at = at (at == "" ? "" : ",") wi }
                    }
                    printf "  %-8s", cc (((key, cc) in wrong) ? "!" : "")
                    for (g = 1; g <= ng; g++) printf " %9s", fmt_us(g in gv ? median(gv[g]) : -1)
                    printf " %7s %6d  %s\n", wl == "" ? "-" : sprintf("%.2f", median(wl)), nr,
                           at == "" ? "-" : at
                }
            }
            if (nwrong) printf "\n# ! = a WRONG result in at least one call (%d)\n", nwrong
        }
    ' "$work/samples"
}

# The steady-state table of np $1: median per-call times, best, ratio,
# paired, fast, busbw.
steady_table() {   # np
    awk -v np="$1" -v cores="$ncores" -v cfgs="$configs" -v colls="$colls" -v mrounds="$over_rounds" \
        -v persist="$persist" "$table_awk_lib"'
        function minv(s,   a, n, i, m) {
            n = split(s, a, " "); m = -1
            for (i = 1; i <= n; i++) if (m < 0 || a[i] + 0 < m) m = a[i] + 0
            return m
        }
        function factor(c) {
            if (c == "allreduce") return 2 * (np - 1) / np
            if (c == "bcast" || c == "reduce") return 1
            return (np - 1) / np
        }
        # out of best: the subject, xccl itself under -p (px/x has it), mpich oversubscribed
        function out(cc) { return cc == subj || (persist && cc == "xccl") || (excl != "" && (cc == excl || cc == "p" excl)) }
        BEGIN {
            ncf = split(cfgs, cf, ","); ncl = split(colls, cl, ",")
            subj = persist ? "pxccl" : "xccl"
        }
        $1 == "T" {
            key = $4 SUBSEP $5
            if (!(key in seen)) { seen[key] = 1; nsz[$4]++; szs[$4, nsz[$4]] = $5 + 0 }
            t[key, $3] = t[key, $3] " " $7
            tr[key, $3, $8] = tr[key, $3, $8] " " $7
            rnds[$8] = 1
            n[key, $3]++
            bytes[key] = $6
            have[$3] = 1
        }
        END {
            lim = median(mc)
            excl = (np > cores) ? "mpich" : ""
            print_load()
            printf "# one-copy limit: memcpy 64 MiB, all %d cores copying at once: %.2f GB/s per core (median of %d)\n", cores, lim, split(mc, dummy, " ")
            printf "# cells: median per-call time (us) over rounds x reps, each the slowest rank%s\n", ""
            printf "# reductions: MPI_FLOAT MPI_SUM; the others: MPI_BYTE; size: allreduce, bcast, reduce per rank,\n"
            printf "#   allgather(v) received, reduce_scatter, alltoall(v)(_moe) sent per rank (nccl-tests), gather(v) received\n"
            printf "#   and scatter(v) sent by root 0, barrier 0; * = blocks rounded up to one element\n"
            printf "# best = fastest of the others; ratio = %s / best (< 1: xccl faster)\n", subj
            printf "# paired = the median over rounds of xccl / the best other in that round, each from that round'"'"'s\n"
            printf "#   samples (a round runs the configurations within seconds of each other; a virtual machine that changes speed\n"
            printf "#   for minutes at a time can put one configuration'"'"'s samples in its fast spells, another'"'"'s in its slow)\n"
            printf "# fast = xccl'"'"'s fastest sample / the fastest sample of the best other: each at its best (a virtual machine whose\n"
            printf "#   cores pass cache lines in regimes 3x apart that change within a second, test/bench/line_probe.c,\n"
            printf "#   puts any configuration'"'"'s samples in any regime; the fastest are those of the fast regime)\n"
            printf "# busbw (GB/s, nccl-tests factors: allreduce 2(n-1)/n, bcast and reduce 1, the others (n-1)/n)\n"
            printf "#   and %%lim = busbw / one-copy limit, from 16 MiB\n"
            if (excl != "")
                printf "# mpich at np %d: %d ranks on %d cores, it busy-polls: shown in (), left out of best; first %d round(s) only\n", np, np, cores, mrounds
            print_notes()
            printf "%-15s %6s", "coll", "size"
            for (i = 1; i <= ncf; i++) if (cf[i] in have) printf " %10s", cf[i]
            printf " %6s %6s %6s %6s", "best", "ratio", "paired", "fast"
            if (persist) printf " %6s", "px/x"
            printf " %8s %5s %8s %5s\n", "bw_" subj, "%lim", "bw_best", "%lim"
            sort_keys()
            prev = ""
            for (k = 1; k <= nk; k++) {
                split(order[k], kk, SUBSEP); c = kk[1]; sz = kk[2]
                if (c != prev && prev != "") print ""
                prev = c
                printf "%-15s %6s", c, human(sz) (bytes[order[k]] != sz ? "*" : "")
                best = -1; bn = "-"; x = -1; xb = -1
                for (i = 1; i <= ncf; i++) {
                    cc = cf[i]
                    if (!(cc in have)) continue
                    m = median(t[order[k], cc])
                    cell = fmt_us(m)
                    if ((order[k], cc) in wrong) cell = cell "!"
                    if (excl != "" && (cc == excl || cc == "p" excl) && m >= 0) cell = "(" cell ")"
                    printf " %10s", cell
                    if (cc == "xccl") xb = m
                    if (cc == subj) { x = m; continue }
                    if (out(cc) || m < 0 || ((order[k], cc) in wrong)) continue
                    if (best < 0 || m < best) { best = m; bn = cc }
                }
                r = (x > 0 && best > 0) ? sprintf("%.2f", x / best) : "-"
                # per round: xccl against the best other of that round
                pl = ""
                for (rd in rnds) {
                    xr = median(tr[order[k], subj, rd]); br = -1
                    for (i = 1; i <= ncf; i++) {
                        cc = cf[i]
                        if (out(cc) || !(cc in have) || ((order[k], cc) in wrong)) continue
                        m = median(tr[order[k], cc, rd])
                        if (m > 0 && (br < 0 || m < br)) br = m
                    }
                    if (xr > 0 && br > 0) pl = pl " " (xr / br)
                }
                pr = pl != "" ? sprintf("%.2f", median(pl)) : "-"
                # the fastest sample of each configuration
                fx = minv(t[order[k], subj]); fb = -1
                for (i = 1; i <= ncf; i++) {
                    cc = cf[i]
                    if (out(cc) || !(cc in have) || ((order[k], cc) in wrong)) continue
                    m = minv(t[order[k], cc])
                    if (m > 0 && (fb < 0 || m < fb)) fb = m
                }
                fr = fx > 0 && fb > 0 ? sprintf("%.2f", fx / fb) : "-"
                printf " %6s %6s %6s %6s", bn, r, pr, fr
                if (persist) printf " %6s", ((x > 0 && xb > 0) ? sprintf("%.2f", x / xb) : "-")
                if (sz >= 16777216 && lim > 0) {
                    f = factor(c)
                    bx = x > 0 ? bytes[order[k]] / x / 1e3 * f : 0
                    bb = best > 0 ? bytes[order[k]] / best / 1e3 * f : 0
                    printf " %8.2f %4.0f%% %8.2f %4.0f%%", bx, 100 * bx / lim, bb, 100 * bb / lim
                    if (sz == 16777216 && x > 0)
                        goal = goal sprintf(" %s %.0f%%%s", c, 100 * bx / lim, bx >= 0.8 * lim ? "" : "(no)")
                }
                printf "\n"
            }
            if (goal != "") printf "# xccl at 16 MiB, busbw / one-copy limit (goal >= 80%%):%s\n", goal
            if (nwrong) printf "# ! = a WRONG result in at least one check (%d)\n", nwrong
        }
    ' "$work/samples"
}
