#!/usr/bin/env bash
# shellcheck disable=SC2054  # (commas inside --mca values)
# xccl_bench across two simulated hosts (netns_cluster.sh) x 2 ranks, over the
# shaped link: xccl against stock Open MPI, once with tuned as the stock stack
# and once with han (Open MPI's hierarchical component) as the stock stack.
#
# usage: bench_multinode.sh [xccl_bench options]
#        (default: -c allreduce,allgather,reduce_scatter,alltoall,bcast
#                  -b 64K -e 4M -f 4 -r 5; about 2 minutes per stack at 1 Gbit/s)
#
# Environment:
#   XCCL_BUILDDIR   build directory with xccl_bench and component/ (required)
#   BENCH_STACKS    stock stacks to compare with, of "tuned han" (default both)
#   BENCH_MAPS      placements, of "slot node" (default slot: ranks 0,1 on h0,
#                   2,3 on h1; node: 0,2 on h0, 1,3 on h1)
#   BENCH_PPN       ranks per host (default 2)
#   BENCH_RAILS     links per host (default 1; XCCLMN_RAILS of
#                   netns_cluster.sh): with R > 1 every host has R links of
#                   XCCLMN_RATE each, xccl's local rank i uses rail i % R
#                   (UCX_NET_DEVICES, see mn_common.sh) and stock Open MPI's
#                   TCP BTL may use all of them; bytes sent per host and rail
#                   are printed after each run.  bench_rails.sh runs the
#                   five-stack comparison (auto, hier, flat, tuned, han) on
#                   1 and 2 rails through this script.
#   BENCH_XCCL_ARGS more mpirun arguments for every run, e.g. a forced
#                   algorithm: "--mca coll_xccl_allreduce_algorithm hier"
#   BENCH_OUT       directory for the tables, a CSV and the plot (default: new
#                   temporary directory)
#   XCCLMN_RATE     link rate (default here 1gbit, not netns_cluster.sh's
#                   10gbit: on a small machine 4 oversubscribed ranks cannot
#                   drive 10 Gbit/s through veth and TCP, so the link is not
#                   the bottleneck and timings swing by up to 2x between runs
#                   (2 cores move about 0.3 GB/s); at
#                   1 Gbit/s the link dominates and repeated runs agree within
#                   ~10%)
#   XCCLMN_DELAY, ... more shaping (see netns_cluster.sh; the delay needs
#                   sch_netem, which some kernels lack: then rate only)
#
# How the stacks are compared.  xccl_bench times, in one run, every call with
# xccl on and off (MPI_T cvars coll_xccl_<coll>_enable); "off" is whatever
# module Open MPI would have used without xccl, so the stock stack is chosen
# by the coll list and priorities, not by naming it to xccl_bench (it has no
# option for extra stacks):
#   tuned: --mca coll xccl,tuned,basic,libnbc,self
#   han:   --mca coll xccl,han,tuned,basic,libnbc,self --mca coll_han_priority 79
# han's priority must be below xccl's (80) and above tuned's (30): with
# coll_han_priority 100 han sits above xccl on MPI_COMM_WORLD, xccl never sees
# the calls and both columns measure han (xccl then only runs inside han's
# sub-communicators).  han in Open MPI 4.1.4 has allreduce, allgather and
# bcast (and reduce, gather, scatter, barrier); reduce_scatter(_block) and
# alltoall go to tuned under it.
# Workaround (BENCH_HAN_ARGS, default --mca coll_han_use_simple_allreduce 1):
# han 4.1.4's default (segmented) allreduce crashes on MPI_IN_PLACE once a
# message has more than one segment (SIGSEGV in memcpy at address
# MPI_IN_PLACE + segsize, 0x10001), and xccl_bench checks an in-place
# allreduce; the "simple" han allreduce (intra-node reduce, inter-node
# allreduce, intra-node bcast) handles it.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=${XCCL_BUILDDIR:?set XCCL_BUILDDIR to a build directory}
bench=$builddir/xccl_bench
compdir=$builddir/component
if [[ ! -x $bench || ! -e $compdir/mca_coll_xccl.so ]]; then
    echo "$0: need $bench and $compdir/mca_coll_xccl.so (make)" >&2
    exit 1
fi
command -v "${MPIRUN:-mpirun}" >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
if [[ $# -eq 0 ]]; then
    set -- -c allreduce,allgather,reduce_scatter,alltoall,bcast -b 64K -e 4M -f 4 -r 5
fi
export XCCLMN_RATE=${XCCLMN_RATE:-1gbit}
export XCCLMN_RAILS=${BENCH_RAILS:-${XCCLMN_RAILS:-1}}
stacks=${BENCH_STACKS:-tuned han}
maps=${BENCH_MAPS:-slot}
ppn=${BENCH_PPN:-2}
read -r -a han_args <<<"${BENCH_HAN_ARGS:---mca coll_han_use_simple_allreduce 1}"
read -r -a xccl_args <<<"${BENCH_XCCL_ARGS:-}"

# shellcheck source=netns_cluster.sh
source "$here/netns_cluster.sh"
# shellcheck source=mn_common.sh
source "$here/mn_common.sh"
mn_check || exit 77

out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/xccl-bench-multinode.XXXXXX")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
chmod 755 "$out"

XCCLMN_SLOTS=$ppn mn_up 2 || { echo "bench: could not set up the simulated hosts"; exit 1; }
mn_mpirun_args "$(mn_component_path "$compdir" "$out")"
read -r -a mpirun <<<"${MPIRUN:-mpirun}"
np=$((2 * ppn))

echo "# bench_multinode: 2 simulated hosts x $ppn ranks; link: $XCCLMN_SHAPING"
[[ $XCCLMN_RAILS -eq 1 ]] || echo "# rails: $XCCLMN_RAILS ($XCCLMN_RAIL_IFACES), xccl local rank i on rail i % $XCCLMN_RAILS, btl_tcp on $XCCLMN_RAILS_CIDR"
echo "# xccl_bench $*"
echo "# output: $out"
rc=0
csv=$out/results.csv
echo "stack,map,collective,bytes,xccl_us,stock_us" >"$csv"
for map in $maps; do
    for stack in $stacks; do
        case $stack in
            tuned) coll=(--mca coll xccl,tuned,basic,libnbc,self) ;;
            han) coll=(--mca coll xccl,han,tuned,basic,libnbc,self --mca coll_han_priority 79 "${han_args[@]}") ;;
            *) echo "bench: unknown stack $stack (tuned, han)" >&2; rc=2; continue ;;
        esac
        name=$stack.map_by_$map
        echo
        echo "=============== stock = $stack, --map-by $map ($np ranks) ==============="
        before=$(mn_tx_bytes)
        rails_before=$(mn_rail_bytes)
        t0=$SECONDS
        mn_exec h0 timeout -k 10 1800 "${mpirun[@]}" "${mn_args[@]}" -np "$np" \
            --map-by "$map" "${coll[@]}" "${xccl_args[@]}" "${mn_launch[@]}" "$bench" "$@" \
            >"$out/$name.txt" 2>&1 &
        run_rc=0
        wait $! || run_rc=$?
        grep -v '^xccl: ' "$out/$name.txt"
        echo "# exit status $run_rc, $((SECONDS - t0)) s, $((($(mn_tx_bytes) - before) / 1048576)) MiB sent by h0 on the link"
        if [[ $XCCLMN_RAILS -gt 1 ]]; then
            # "hN xmnR bytes" before and after -> MiB sent per host and rail.
            paste <(echo "$rails_before") <(mn_rail_bytes) |
                awk '{ printf "%s%s %s %d MiB", sep, $1, $2, ($6 - $3) / 1048576; sep = ", " }
                     END { print "" }' | sed 's/^/# sent per host and rail: /'
        fi
        [[ $run_rc -eq 0 ]] || rc=1
        # Table rows -> CSV: "# <coll>  np=..." opens a table; rows are
        # "<bytes> <count> <xccl us> ... <stock us> ...".
        awk -v stack="$stack" -v map="$map" '
            /^# [a-z_]+  np=/ { coll = $2; next }
            coll != "" && $1 ~ /^[0-9]+$/ && NF >= 9 {
                printf "%s,%s,%s,%s,%s,%s\n", stack, map, coll, $1, $3, $6
            }' "$out/$name.txt" >>"$csv"
    done
done

# A plot per collective (time per call against size), where gnuplot exists:
# PNG (pngcairo) or else SVG.
if command -v gnuplot >/dev/null 2>&1 && [[ $(wc -l <"$csv") -gt 1 ]]; then
    colls=$(awk -F, 'NR > 1 && !seen[$3]++ { print $3 }' "$csv")
    ncoll=$(wc -w <<<"$colls")
    cols=$((ncoll < 3 ? ncoll : 3))
    rows=$(((ncoll + 2) / 3))
    if gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1; then
        plot=$out/bench_multinode.png
        term="set terminal pngcairo size $((480 * cols)),$((360 * rows)) font 'sans,9'"
    else
        plot=$out/bench_multinode.svg
        term="set terminal svg size $((480 * cols)),$((360 * rows)) font 'sans,9'"
    fi
    {
        echo "$term"
        echo "set termoption noenhanced"
        echo "set output '$plot'"
        echo "set datafile separator ','"
        echo "set logscale xy; set format x '%.0s%cB'; set key top left font ',8'"
        echo "set xlabel 'message size'; set ylabel 'time per call (us)'; set grid"
        echo "set multiplot layout $rows,$cols title \"xccl vs stock Open MPI, 2 hosts x $ppn ranks; link: ${XCCLMN_SHAPING//\"/}\" font ',9'"
        for c in $colls; do
            echo "set title '$c'"
            cmd="plot"
            sep=""
            for map in $maps; do
                for stack in $stacks; do
                    sel="(stringcolumn(1) eq '$stack' && stringcolumn(2) eq '$map' && stringcolumn(3) eq '$c')"
                    cmd+="$sep '$csv' using (\$4):($sel && \$5 > 0 ? \$5 : 1/0) with linespoints title 'xccl ($stack run, $map)'"
                    cmd+=", '$csv' using (\$4):($sel && \$6 > 0 ? \$6 : 1/0) with linespoints title '$stack ($map)'"
                    sep=","
                done
            done
            echo "$cmd"
        done
        echo "unset multiplot"
    } >"$out/plot.gp"
    if gnuplot "$out/plot.gp" 2>"$out/plot.err"; then
        echo
        echo "# plot: $plot"
    else
        echo "# gnuplot failed, see $out/plot.err"
    fi
fi
echo "# tables: $out/*.txt, csv: $csv"
exit "$rc"
