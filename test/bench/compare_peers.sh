#!/bin/bash
# xccl against other MPI stacks on this machine, in one interleaved run:
#
#   xccl   Open MPI (the system's) + xccl from $XCCL_BUILDDIR/component,
#          --mca coll xccl,tuned,libnbc,basic,self, xccl's defaults
#   tuned  the same Open MPI, --mca coll tuned,libnbc,basic,self
#   sm     the same Open MPI, --mca coll sm,tuned,libnbc,basic,self with
#          coll_sm_priority 100 (at its default 0, 4.1's sm is placed
#          first and disqualifies itself: "no underlying reduce"); sm has
#          allreduce, bcast, reduce and barrier, the others are tuned's
#   impi   Intel MPI from PyPI (impi-rt, impi-devel), I_MPI_FABRICS=shm
#   mpich  MPICH from PyPI (mpich)
#
# The PyPI wheels go into virtual environments, one per MPI (both wheels
# install bin/mpicc, bin/mpiexec, include/mpi.h and lib/libmpi.so.12 at the
# same places), only to measure: nothing of theirs is linked into xccl.
# test/bench/peer_bench.c and peer_bench_more.c (plain MPI) are built with
# each MPI's own mpicc.
# A configuration that cannot be installed, built or run is reported as
# unavailable, with the reason, and the others still run.
#
# Every round runs, for every np and collective, every configuration once
# (an mpirun or mpiexec of peer_bench over all sizes of that collective,
# REPS timed repetitions each), starting one configuration further each
# round and collective, so the configurations of a collective are measured
# within seconds of each other and slow drifts of a shared machine hit
# all of them alike; each round also
# measures the one-copy limit: memcpy of 64 MiB by every core at once
# (peer_bench -m under Open MPI, one rank per core).  A cell is the median
# over all its samples (ROUNDS x REPS); a sample is the per-call time
# (average of K calls) of the slowest rank.
#
# With more ranks than cores, Open MPI runs with --oversubscribe and
# mpi_yield_when_idle 1; MPICH busy-polls and collapses there (a call
# can take seconds), so it runs only in the first MPICH_OVER_ROUNDS rounds
# (default 1), skips the sizes whose call is predicted to take more than
# 0.25 s (peer_bench -L; everyone else: 4 s), and its column is shown but
# left out of "best".
#
# Usage: compare_peers.sh [-n 2,4] [-R ROUNDS] [-r REPS] [-s SIZES] [-c COLLS]
#                         [-C xccl,tuned,sm,impi,mpich] [-o PREFIX] [-e ENVDIR]
#                         [-k RAWDIR] [-T SECONDS] [-w CALLS] [-I|-p] [-P] [-F CALLS]
#   -n  rank counts (default 2,4)          -R  rounds (default 5)
#   -r  timed repetitions per size and invocation (default 3)
#   -s  sizes (peer_bench -s; default 8 B, 64 B, then powers of 4 up to 64 MiB)
#   -c  collectives (default allreduce,allgather,reduce_scatter,alltoall,bcast;
#       also reduce_scatter_block, reduce, barrier, allgatherv, alltoallv,
#       gather, gatherv, scatter, scatterv, alltoallv_moe: see peer_bench.c)
#   -C  configurations (default all five)
#   -o  also write the table of np N to PREFIX-npN.txt
#   -e  where the virtual environments live (default $XCCL_BUILDDIR/peers-venv;
#       kept, so later runs skip the download)
#   -k  keep the raw peer_bench outputs in RAWDIR
#   -I  time the nonblocking forms (peer_bench -n: MPI_I<coll>, MPI_Wait)
#   -p  the persistent view: every configuration runs twice a round, as
#       itself (blocking) and as p<configuration> (peer_bench -i: per size
#       MPI_<Coll>_init, or Open MPI 4.1's MPIX_<Coll>_init, on the same
#       buffers, then MPI_Start + MPI_Wait per call, checked through the
#       same requests); ptuned and psm are libnbc's persistent requests.
#       The table's subject is pxccl: best = the fastest of the others but
#       xccl, ratio = pxccl / best, px/x = pxccl / xccl.  An MPI without
#       the persistent forms is reported unavailable for them (peer_bench
#       -i exits with status 3 and says why).  The first six collectives
#       only (peer_bench -i); not with -I or -F.
#   -P  time each call alone (peer_bench -P: a barrier before every call, the
#       median over the calls of the slowest rank; bcast's root changes on
#       every call)
#   -w  warm up every size with at least CALLS calls (peer_bench -w; the
#       OSU benchmarks warm up large messages with 10): xccl's level trials
#       (coll_xccl_shm_trials) take 18-22 calls of a size class (where a rank
#       yields when idle 26-40); without it a
#       64 MiB size is warmed up with 3 calls and timed over 3
#   -T  an invocation starts no new size after SECONDS (default 240)
#   -F  first calls instead (peer_bench -F CALLS, a number is required): per
#       size a new communicator, CALLS calls on it, each after a barrier and
#       timed alone, inputs changing with the call, each result checked.
#       The table gives, per collective and size, each configuration's call 1
#       and the medians of calls 2-5, 6-20 and 21-CALLS (in each round, then
#       the median over rounds), and "worst": the slowest of calls 2..CALLS
#       over the steady state (the median of the last third of the calls),
#       the median over rounds, with the slowest call of each round.  -r, -w
#       do not apply, -I does; no -P; no memcpy figure.
# Environment: XCCL_BUILDDIR (default ./build), PYTHON (default python3),
# IMPI_PIP / MPICH_PIP (pip arguments; default "impi-rt impi-devel", "mpich"),
# MPICH_OVER_ROUNDS (default 1).
# Default run: 21 minutes here with others using 1.3 of the 2 cores; less idle.
set -euo pipefail

nps=2,4 rounds=5 reps=3 sizes="" colls="" configs=xccl,tuned,sm,impi,mpich
prefix="" rawkeep="" deadline=240 nonblocking=0 percall=0 warm=0 first=0 persist=0
bdir=${XCCL_BUILDDIR:-$PWD/build}
envdir=""
while getopts "n:R:r:s:c:C:o:e:k:T:w:F:IPph" c; do
    case $c in
    n) nps=$OPTARG ;;
    R) rounds=$OPTARG ;;
    r) reps=$OPTARG ;;
    s) sizes=$OPTARG ;;
    c) colls=$OPTARG ;;
    C) configs=$OPTARG ;;
    o) prefix=$OPTARG ;;
    e) envdir=$OPTARG ;;
    k) rawkeep=$OPTARG ;;
    T) deadline=$OPTARG ;;
    I) nonblocking=1 ;;
    P) percall=1 ;;
    p) persist=1 ;;
    w) warm=$OPTARG ;;
    F) first=$OPTARG ;;
    *) sed -n '2,/^# Default run/p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -eq 0 ]] || { echo "compare_peers: unexpected argument $1" >&2; exit 2; }
[[ $first =~ ^[0-9]+$ ]] || { echo "compare_peers: -F takes a number of calls" >&2; exit 2; }
((first > 0 && percall)) && { echo "compare_peers: -F and -P exclude each other" >&2; exit 2; }
((persist && (first > 0 || nonblocking))) && { echo "compare_peers: -p excludes -F and -I" >&2; exit 2; }
bdir=$(cd "$bdir" 2> /dev/null && pwd) || { echo "compare_peers: no build directory (XCCL_BUILDDIR)" >&2; exit 2; }
envdir=${envdir:-$bdir/peers-venv}
srcdir=$(cd "$(dirname "$0")" && pwd)
src=("$srcdir/peer_bench.c" "$srcdir/peer_bench_more.c")
over_rounds=${MPICH_OVER_ROUNDS:-1}
ncores=$(nproc)
cmd=()
IFS=, read -r -a np_list <<< "$nps"
IFS=, read -r -a cfg_list <<< "$configs"

work=$(mktemp -d "${TMPDIR:-/tmp}/compare_peers.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/raw" "$work/bin"
log() { echo "compare_peers: $*" >&2; }

# ---------------------------------------------------------------- set-up
declare -A why      # configuration -> why it is unavailable (unset: available)
declare -A desc     # configuration -> what it is, for the table

root_flag=""
[[ $(id -u) -eq 0 ]] && root_flag=--allow-run-as-root
ompi_dir=$(ompi_info --path pkglibdir --parsable 2> /dev/null | sed -n 's/^path:pkglibdir://p' || true)

# Install a PyPI MPI into its own venv (once); prints nothing, sets why[].
setup_venv() {   # name, pip arguments
    local name=$1 pkgs=$2 v=$envdir/$1
    if [[ ! -x $v/bin/mpicc ]]; then
        log "installing $pkgs into $v"
        mkdir -p "$envdir"
        if ! "${PYTHON:-python3}" -m venv "$v" > "$work/$name.pip" 2>&1; then
            why[$name]="${PYTHON:-python3} -m venv failed (python3-venv missing?): $(tail -n 1 "$work/$name.pip")"
            return
        fi
        # shellcheck disable=SC2086
        if ! "$v/bin/pip" install -q $pkgs >> "$work/$name.pip" 2>&1; then
            why[$name]="pip install $pkgs failed: $(grep -m1 -i error "$work/$name.pip" || tail -n 1 "$work/$name.pip")"
            return
        fi
    fi
    [[ -x $v/bin/mpicc && -x $v/bin/mpiexec ]] || why[$name]="no mpicc/mpiexec in $v/bin after pip install"
}

# cmd=(the command that starts NP ranks of peer_bench in configuration CFG).
launcher() {   # cfg np
    local cfg=${1#p} np=$2
    case $cfg in
    xccl | tuned | sm)
        cmd=(mpirun -np "$np" --mca mca_base_component_path "$ompi_dir:$bdir/component")
        [[ -n $root_flag ]] && cmd+=("$root_flag")
        ((np > ncores)) && cmd+=(--oversubscribe --mca mpi_yield_when_idle 1)
        case $cfg in
        xccl) cmd+=(--mca coll 'xccl,tuned,libnbc,basic,self') ;;
        tuned) cmd+=(--mca coll 'tuned,libnbc,basic,self') ;;
        sm) cmd+=(--mca coll 'sm,tuned,libnbc,basic,self' --mca coll_sm_priority 100) ;;
        esac
        cmd+=("$work/bin/pb-ompi") ;;
    impi) cmd=(env "I_MPI_ROOT=$envdir/impi" I_MPI_FABRICS=shm "$envdir/impi/bin/mpiexec" -n "$np" "$work/bin/pb-impi") ;;
    mpich) cmd=("$envdir/mpich/bin/mpiexec" -n "$np" "$work/bin/pb-mpich") ;;
    esac
}

# Build peer_bench with MPI M (ompi, impi, mpich).
build() {   # m
    local m=$1 cc
    case $m in
    ompi) cc=mpicc ;;
    *) cc=$envdir/$m/bin/mpicc ;;
    esac
    I_MPI_ROOT=$envdir/impi "$cc" -std=gnu11 -O2 -Wall -Wextra -o "$work/bin/pb-$m" "${src[@]}" \
        > "$work/build-$m.log" 2>&1
}

want() { [[ ,$configs, == *,$1,* ]]; }
if ! command -v mpirun > /dev/null || [[ -z $ompi_dir ]]; then
    log "no Open MPI (mpirun, ompi_info) on PATH"
    exit 2
fi
build ompi || { cat "$work/build-ompi.log" >&2; log "peer_bench does not build with Open MPI"; exit 2; }
ompi_ver=$(ompi_info --parsable 2> /dev/null | sed -n 's/^ompi:version:full://p' | head -n 1)
desc[xccl]="Open MPI $ompi_ver + xccl ($bdir/component, $(git -C "$srcdir" log -1 --format=%h 2> /dev/null || echo '?'))"
desc[tuned]="Open MPI $ompi_ver, coll tuned"
desc[sm]="Open MPI $ompi_ver, coll sm (allreduce, bcast, reduce, barrier; the rest tuned), coll_sm_priority 100"
[[ -f $bdir/component/mca_coll_xccl.so ]] || why[xccl]="no $bdir/component/mca_coll_xccl.so (build xccl first)"
for m in impi mpich; do
    want "$m" || continue
    if [[ $m == impi ]]; then setup_venv impi "${IMPI_PIP:-impi-rt impi-devel}"; else setup_venv mpich "${MPICH_PIP:-mpich}"; fi
    if [[ -z ${why[$m]:-} ]] && ! build "$m"; then
        why[$m]="peer_bench does not build with its mpicc: $(grep -m1 -i error "$work/build-$m.log" || tail -n 1 "$work/build-$m.log")"
    fi
    if [[ -n ${why[$m]:-} ]]; then log "$m unavailable: ${why[$m]}"; fi
    ver=$("$envdir/$m/bin/pip" list 2> /dev/null | awk -v m="$m" '$1 == (m == "impi" ? "impi-rt" : "mpich") { print $2 }' || true)
    case $m in
    impi) desc[impi]="Intel MPI ${ver:-?} (PyPI impi-rt), I_MPI_FABRICS=shm" ;;
    mpich) desc[mpich]="MPICH ${ver:-?} (PyPI mpich)" ;;
    esac
done
# -p: every configuration also as p<configuration>, its persistent forms.
if ((persist)); then
    for cfg in "${cfg_list[@]}"; do
        [[ -n ${desc[$cfg]:-} ]] || continue
        cfg_list+=("p$cfg")
        desc[p$cfg]="${desc[$cfg]}; persistent (MPI_<Coll>_init, MPI_Start + MPI_Wait)"
        [[ $cfg == tuned || $cfg == sm ]] && desc[p$cfg]+=": libnbc's"
        [[ -n ${why[$cfg]:-} ]] && why[p$cfg]=${why[$cfg]}
    done
    configs=$(IFS=,; echo "${cfg_list[*]}")
fi

# A short run of each configuration at np 2: anything that does not start,
# or gives a wrong result, is unavailable from here on.
for cfg in "${cfg_list[@]}"; do
    [[ -z ${why[$cfg]:-} ]] || continue
    [[ -n ${desc[$cfg]:-} ]] || { log "unknown configuration $cfg"; exit 2; }
    f=$work/smoke-$cfg.txt
    launcher "$cfg" 2
    smoke=(-s "8,64K" -r 1 -V coll_xccl_world_active)
    # a persistent one: whether this MPI has the forms (exit status 3: not)
    [[ $cfg == p* ]] && smoke+=(-i -c allreduce)
    rc=0
    timeout 120 "${cmd[@]}" "${smoke[@]}" > "$f" 2> "$f.err" || rc=$?
    if ((rc == 3)) && [[ $cfg == p* ]]; then
        why[$cfg]="no persistent collectives: $(grep -m1 'peer_bench: -i' "$f.err" || tail -n 1 "$f.err")"
    elif ((rc != 0)); then
        why[$cfg]="a short run failed: $(grep -v '^\s*$' "$f.err" | tail -n 1)"
    elif [[ ${cfg#p} == xccl ]] && ! grep -q '^V coll_xccl_world_active 1' "$f"; then
        why[$cfg]="xccl not active on MPI_COMM_WORLD: $(grep '^V' "$f" || echo 'no cvar')"
    fi
    if [[ -n ${why[$cfg]:-} ]]; then log "$cfg unavailable: ${why[$cfg]}"; fi
done

# ---------------------------------------------------------------- rounds
loadavg() { cut -d' ' -f1 /proc/loadavg; }
# CPU time (s) all processes have used so far: user, nice, system, irq, softirq.
busy_s() { awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.2f", ($2 + $3 + $4 + $7 + $8) / hz }' /proc/stat; }
TIMEFORMAT='%3R %3U %3S'
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)
if ((first > 0)); then
    peer_args=(-F "$first" -T "$deadline" -L 4)
else
    peer_args=(-r "$reps" -T "$deadline" -L 4)
    ((percall)) && peer_args+=(-P)
    ((warm > 0)) && peer_args+=(-w "$warm")
fi
[[ -n $sizes ]] && peer_args+=(-s "$sizes")
((nonblocking)) && peer_args+=(-n)
colls=${colls:-allreduce,allgather,reduce_scatter,alltoall,bcast}
IFS=, read -r -a coll_list <<< "$colls"
ncfg=${#cfg_list[@]}
for ((round = 1; round <= rounds; round++)); do
    # The one-copy limit: every core copies at once (not for -F's table).
    if ((first == 0)); then
        mpirun ${root_flag:+"$root_flag"} -np "$ncores" "$work/bin/pb-ompi" -m -r 3 > "$work/raw/memcpy.$round.txt" 2> /dev/null \
            || log "memcpy measurement failed in round $round"
    fi
    # One invocation per collective: the configurations of one collective
    # are measured within seconds of each other, whatever the machine does.
    for np in "${np_list[@]}"; do
      for ((ci = 0; ci < ${#coll_list[@]}; ci++)); do
        coll=${coll_list[ci]}
        for ((i = 0; i < ncfg; i++)); do
            cfg=${cfg_list[(i + round - 1 + ci) % ncfg]}
            [[ -z ${why[$cfg]:-} ]] || continue
            args=("${peer_args[@]}" -c "$coll")
            [[ $cfg == p* ]] && args+=(-i)
            if [[ ${cfg#p} == mpich ]] && ((np > ncores)); then
                ((round <= over_rounds)) || continue
                args+=(-L 0.25)
            fi
            [[ ${cfg#p} == xccl ]] && args+=(-V coll_xccl_world_active)
            f=$work/raw/np$np.$cfg.$round.$coll.txt
            echo "# load $(loadavg)" > "$f"
            launcher "$cfg" "$np"
            b0=$(busy_s)
            # time: wall, user and system seconds of the launcher and all
            # its ranks; the rest of the machine's busy time is others'.
            if ! { time timeout $((deadline + 300)) "${cmd[@]}" "${args[@]}" >> "$f" 2> "$f.err"; } 2> "$f.time"; then
                echo "# FAILED exit status, $(grep -v '^\s*$' "$f.err" | tail -n 1)" >> "$f"
                log "np $np $cfg round $round: failed (kept what it printed)"
            fi
            others=$(awk -v b0="$b0" -v b1="$(busy_s)" 'NF == 3 { o = (b1 - b0 - $2 - $3) / $1; printf "%.2f %.0f", o < 0 ? 0 : o, $1 }' "$f.time")
            echo "# others ${others% *}" >> "$f"
            log "round $round/$rounds np $np $coll $cfg: ${others#* } s, other processes used ${others% *} cores"
        done
      done
    done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(($(date +%s) - t_start))
[[ -n $rawkeep ]] && mkdir -p "$rawkeep" && cp "$work"/raw/* "$rawkeep"/

# ---------------------------------------------------------------- table
# All samples as "np cfg coll size bytes us" (T lines) or "np cfg coll size
# bytes round calls us..." (-F's F lines, as Q), plus checks, skips,
# failures, loads and memcpy figures.
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

# -F: the first-calls table of np $1 from the samples on stdin.
first_table() {   # np
    awk -v np="$1" -v calls="$first" -v cores="$ncores" -v cfgs="$configs" -v colls="$colls" \
        -v mrounds="$over_rounds" '
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
        # the median of a[lo..hi]
        function gmed(a, lo, hi,   s, i) {
            s = ""
            for (i = lo; i <= hi; i++) s = s " " a[i]
            return median(s)
        }
        function cell(m) { return m < 0 ? "-" : sprintf(m < 100 ? "%.2f" : m < 10000 ? "%.1f" : "%.0f", m) }
        function human(b) {
            if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) "M"
            if (b >= 1024 && b % 1024 == 0) return (b / 1024) "K"
            return b
        }
        BEGIN {
            ncf = split(cfgs, cf, ","); ncl = split(colls, cl, ",")
            # the groups of calls: 1, 2-5, 6-20, 21-calls (those that exist)
            split("1 2 6 21", glo, " "); split("1 5 20 " calls, ghi, " ")
            for (ng = 0; ng < 4 && glo[ng + 1] <= calls; ng++)
                if (ghi[ng + 1] > calls) ghi[ng + 1] = calls
            sfrom = calls - int((calls + 2) / 3) + 1     # the last third
        }
        $2 != np { next }
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
        $1 == "W" { wrong[$4 SUBSEP $5, $3] = 1; nwrong++ }
        $1 == "S" { skip[$3] = skip[$3] " " $4 "@" human($5) "(" $6 ")" }
        $1 == "X" { inactive[$3] = $4 "=" $5 }
        $1 == "F" { fail[$3]++ }
        $1 == "L" { ld = ld " " $4; if ($4 + 0 > ldmax) ldmax = $4 + 0 }
        $1 == "O" { ot = ot " " $4; if ($4 + 0 > otmax) otmax = $4 + 0 }
        END {
            printf "# load average at the start of each invocation (counts the previous ones ranks): median %.2f, max %.2f\n", median(ld), ldmax
            printf "# CPU used by other processes during each invocation: median %.2f, max %.2f of %d cores\n", median(ot), otmax, cores
            printf "# first calls (peer_bench -F %d): per size a new communicator (MPI_Comm_dup), %d calls on it, each\n", calls, calls
            printf "#   after a barrier and timed alone, no warm-up, inputs changing with the call, every result checked;\n"
            printf "#   rooted ones at root 0; us per call, the slowest rank\n"
            printf "# columns: call 1, and the median of the calls of each group, in each round; a cell: the median over rounds\n"
            printf "# worst: the slowest of calls 2-%d / the steady state (the median of calls %d-%d), in each round;\n", calls, sfrom, calls
            printf "#   the median over rounds; slowest call: which of calls 2-%d it was, in each round\n", calls
            printf "# reductions: MPI_FLOAT MPI_SUM; the others: MPI_BYTE; size as in the other tables; * = blocks rounded up\n"
            if (np > cores)
                printf "# mpich at np %d: %d ranks on %d cores, it busy-polls: first %d round(s) only\n", np, np, cores, mrounds
            for (c in fail) printf "# %s: %d invocation(s) failed or timed out (their printed samples are kept)\n", c, fail[c]
            for (c in inactive) printf "# %s: %s: these are NOT xccl figures\n", c, inactive[c]
            for (c in skip) printf "# %s not measured:%s\n", c, skip[c]
            for (ci = 1; ci <= ncl; ci++) {
                c = cl[ci]
                for (i = 2; i <= nsz[c]; i++) {
                    v = szs[c, i]
                    for (j = i - 1; j >= 1 && szs[c, j] > v; j--) szs[c, j + 1] = szs[c, j]
                    szs[c, j + 1] = v
                }
                for (i = 1; i <= nsz[c]; i++) order[++nk] = c SUBSEP szs[c, i]
            }
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
                    for (g = 1; g <= ng; g++) printf " %9s", cell(g in gv ? median(gv[g]) : -1)
                    printf " %7s %6d  %s\n", wl == "" ? "-" : sprintf("%.2f", median(wl)), nr,
                           at == "" ? "-" : at
                }
            }
            if (nwrong) printf "\n# ! = a WRONG result in at least one call (%d)\n", nwrong
        }
    '
}

cpu=$(sed -n 's/^model name\s*:\s*//p' /proc/cpuinfo | head -n 1)
status=0
for np in "${np_list[@]}"; do
    table=$work/table-np$np.txt
    {
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
    } > "$table"
    ((first > 0)) && first_table "$np" < "$work/samples" >> "$table"
    ((first > 0)) || awk -v np="$np" -v cores="$ncores" -v cfgs="$configs" -v colls="$colls" -v mrounds="$over_rounds" \
        -v persist="$persist" '
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
        function minv(s,   a, n, i, m) {
            n = split(s, a, " "); m = -1
            for (i = 1; i <= n; i++) if (m < 0 || a[i] + 0 < m) m = a[i] + 0
            return m
        }
        function human(b) {
            if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) "M"
            if (b >= 1024 && b % 1024 == 0) return (b / 1024) "K"
            return b
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
        $1 == "M" { mc = mc " " $2; next }
        $2 != np { next }
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
        $1 == "W" { wrong[$4 SUBSEP $5, $3] = 1; nwrong++ }
        $1 == "S" { skip[$3] = skip[$3] " " $4 "@" human($5) "(" $6 ")" }
        $1 == "X" { inactive[$3] = $4 "=" $5 }
        $1 == "F" { fail[$3]++ }
        $1 == "L" { ld = ld " " $4; if ($4 + 0 > ldmax) ldmax = $4 + 0 }
        $1 == "O" { ot = ot " " $4; if ($4 + 0 > otmax) otmax = $4 + 0 }
        END {
            lim = median(mc)
            excl = (np > cores) ? "mpich" : ""
            printf "# load average at the start of each invocation (counts the previous ones ranks): median %.2f, max %.2f\n", median(ld), ldmax
            printf "# CPU used by other processes during each invocation: median %.2f, max %.2f of %d cores\n", median(ot), otmax, cores
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
            for (c in fail) printf "# %s: %d invocation(s) failed or timed out (their printed samples are kept)\n", c, fail[c]
            for (c in inactive) printf "# %s: %s: these are NOT xccl figures\n", c, inactive[c]
            for (c in skip) printf "# %s not measured:%s\n", c, skip[c]
            printf "%-15s %6s", "coll", "size"
            for (i = 1; i <= ncf; i++) if (cf[i] in have) printf " %10s", cf[i]
            printf " %6s %6s %6s %6s", "best", "ratio", "paired", "fast"
            if (persist) printf " %6s", "px/x"
            printf " %8s %5s %8s %5s\n", "bw_" subj, "%lim", "bw_best", "%lim"
            # Collectives in the order asked for, sizes ascending.
            for (ci = 1; ci <= ncl; ci++) {
                c = cl[ci]
                for (i = 2; i <= nsz[c]; i++) {
                    v = szs[c, i]
                    for (j = i - 1; j >= 1 && szs[c, j] > v; j--) szs[c, j + 1] = szs[c, j]
                    szs[c, j + 1] = v
                }
                for (i = 1; i <= nsz[c]; i++) order[++nk] = c SUBSEP szs[c, i]
            }
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
                    cell = m < 0 ? "-" : sprintf(m < 100 ? "%.2f" : m < 10000 ? "%.1f" : "%.0f", m)
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
    ' "$work/samples" >> "$table"
    cat "$table"
    echo
    if [[ -n $prefix ]]; then
        mkdir -p "$(dirname "$prefix")"
        cp "$table" "$prefix-np$np.txt"
    fi
    grep -q '^# ! = a WRONG' "$table" && status=1
done
log "done in $elapsed s"
exit $status
