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
#                         [-k RAWDIR] [-T SECONDS] [-w CALLS] [-I|-p] [-P] [-F CALLS [-K]] [-M]
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
#   -K  with -F: each size's calls run first on another new communicator,
#       untimed (peer_bench -K): the first calls of a size the process has
#       called before, on a communicator that has not.
#   -M  xccl as on a machine where an earlier process timed its trials: an
#       untimed run of each rank count first (peer_bench -F 40 on the same
#       collectives and sizes) writes coll_xccl_picks_file, which every
#       xccl run then reads.  Without it every xccl run has none (every
#       process times its own trials, as the first on a machine).
# Environment: XCCL_BUILDDIR (default ./build), PYTHON (default python3),
# IMPI_PIP / MPICH_PIP (pip arguments; default "impi-rt impi-devel", "mpich"),
# MPICH_OVER_ROUNDS (default 1).
# Default run: 21 minutes here with others using 1.3 of the 2 cores; less idle.
set -euo pipefail

nps=2,4 rounds=5 reps=3 sizes="" colls="" configs=xccl,tuned,sm,impi,mpich
prefix="" rawkeep="" deadline=240 nonblocking=0 percall=0 warm=0 first=0 persist=0 known=0 machine=0
bdir=${XCCL_BUILDDIR:-$PWD/build}
envdir=""
while getopts "n:R:r:s:c:C:o:e:k:T:w:F:IKMPph" c; do
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
    K) known=1 ;;
    M) machine=1 ;;
    *) sed -n '2,/^# Default run/p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -eq 0 ]] || { echo "compare_peers: unexpected argument $1" >&2; exit 2; }
[[ $first =~ ^[0-9]+$ ]] || { echo "compare_peers: -F takes a number of calls" >&2; exit 2; }
((first > 0 && percall)) && { echo "compare_peers: -F and -P exclude each other" >&2; exit 2; }
((known && first == 0)) && { echo "compare_peers: -K goes with -F" >&2; exit 2; }
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
picks=none
((machine)) && picks=$work/picks
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
        xccl) cmd+=(--mca coll 'xccl,tuned,libnbc,basic,self' --mca coll_xccl_picks_file "$picks") ;;
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
if ((machine)); then
    desc[xccl]+="; the trials' picks of an earlier process (coll_xccl_picks_file)"
else
    desc[xccl]+="; coll_xccl_picks_file none (every process times its trials)"
fi
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
    ((known)) && peer_args+=(-K)
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
# -M: an earlier process on the machine times the trials (untimed here).
if ((machine)) && want xccl && [[ -z ${why[xccl]:-} ]]; then
    for np in "${np_list[@]}"; do
        launcher xccl "$np"
        prime=(-F 40 -T "$deadline" -c "$colls")
        [[ -n $sizes ]] && prime+=(-s "$sizes")
        timeout $((deadline + 300)) "${cmd[@]}" "${prime[@]}" > "$work/prime-np$np.txt" 2>&1 ||
            log "np $np: the run that writes coll_xccl_picks_file failed: $(tail -n 1 "$work/prime-np$np.txt")"
    done
    log "coll_xccl_picks_file: $(awk '!/^#/' "$work/picks" 2> /dev/null | wc -l) picks"
fi
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
# test/bench/compare_table.sh turns the raw outputs into the tables.
# shellcheck source=SCRIPTDIR/compare_table.sh
. "$srcdir/compare_table.sh"
compare_samples
status=0
for np in "${np_list[@]}"; do
    table=$work/table-np$np.txt
    compare_table "$np" > "$table"
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
