#!/bin/bash
# scale_table.sh: allreduce at scale as the cost model predicts it,
# in markdown, from xccl_simulate:
#   1. ring, rabenseifner, swing, dbt, nhr, nb, hier_hd and pipeline at p =
#      1024, 8192, 65536 for 8 B, 64 KiB, 16 MiB and 1 GiB, with the best
#      candidate and auto's pick, for each machine below;
#   2. the winning candidate for p = 8 .. 65536 and 8 B .. 1 GiB;
#   3. where the new algorithms win: the pipelined forms of allreduce,
#      reduce_scatter and allgather on nodes of 8, bcast nhr and nb on one
#      rank per node (their time over the best other candidate's).
# Machines: nodes of 8 ranks (the component's default alpha-beta pair per
# level, no network), one rank per node, and nodes of 8 on a two-tier fat
# tree of 16 nodes per leaf with 4:1 oversubscribed uplinks and one NIC per
# node (xccl_simulate -N; its table stops at 8192 ranks: the model reads the
# schedules of a leaf's 128 ranks per sampled rank).
#   test/bench/scale_table.sh > docs/bench/scale-allreduce.md
set -euo pipefail
b=${XCCL_BUILDDIR:-build}
sim=$b/xccl_simulate
[[ -x $sim ]] || { echo "no $sim (XCCL_BUILDDIR)" >&2; exit 2; }

# predicted <p> <layout> <net> <sizes> [collective]: xccl_simulate's rows,
# "size name=us ... best auto"
predicted() {
    "$sim" -c "${5:-allreduce}" -n "$1" -l "$2" -N "$3" -s "$4" | awk '
        /^# size/ { for (i = 3; i <= NF - 2; i++) name[i - 1] = $i; n = NF - 4; next }
        /^#/ { next }
        { line = $1; for (i = 2; i <= n + 1; i++) line = line " " name[i] "=" $i
          print line, $(NF - 1), $NF }'
}

human() {
    awk -v b="$1" 'BEGIN { u = "B"; split("KiB MiB GiB", us, " ");
        for (k = 1; k <= 3 && b >= 1024; k++) { b /= 1024; u = us[k] } printf "%g %s", b, u }'
}

header() {    # header <column>...: a markdown table's first two lines
    printf '|'
    for c in "$@"; do printf ' %s |' "$c"; done
    printf '\n|'
    for c in "$@"; do printf '%s' '---|'; done
    printf '\n'
}

table() {    # table <layout> <net> <p list>
    local algos="ring rabenseifner swing dbt nhr nb hier_hd pipeline"
    header p size $algos best auto
    for p in $3; do
        predicted "$p" "$1" "$2" 8,64K,16M,1G | while read -r size rest; do
            printf '| %s | %s |' "$p" "$(human "$size")"
            for a in $algos; do
                v=$(tr ' ' '\n' <<<"$rest" | awk -F= -v a="$a" '$1 == a { print $2 }')
                [[ $v == n/a ]] && printf ' n/a |' || printf ' %s |' "$(awk -v v="$v" 'BEGIN { printf (v >= 1e4 ? "%.0f" : "%.1f"), v }')"
            done
            set -- $rest
            printf ' %s | **%s** |\n' "${@: -2:1}" "${@: -1}"
        done
    done
}

winners() {    # winners <layout> <net> <p list>
    local sizes="8 64 512 4K 32K 256K 2M 16M 128M 1G"
    header p $sizes
    for p in $3; do
        printf '| %s |' "$p"
        predicted "$p" "$1" "$2" "$(tr ' ' , <<<"$sizes")" | while read -r size rest; do
            set -- $rest
            printf ' %s |' "${@: -2:1}"
        done
        printf '\n'
    done
}

# ratios <collective> <algo> <layout> <net> <p list>: per p and size, algo's
# predicted time over the best other candidate's; bold where it wins (< 1),
# "-" where it does not apply or nothing moves (fewer elements than ranks)
ratios() {
    local sizes="8 512 4K 32K 256K 2M 16M 128M 1G"
    header p $sizes
    for p in $5; do
        printf '| %s |' "$p"
        predicted "$p" "$3" "$4" "$(tr ' ' , <<<"$sizes")" "$1" | while read -r size rest; do
            tr ' ' '\n' <<<"$rest" | awk -F= -v a="$2" '
                NF == 2 && $2 != "n/a" { if ($1 == a) mine = $2; else if (best == "" || $2 + 0 < best + 0) best = $2 }
                END { if (mine == "" || best == "" || best + 0 == 0) printf " - |"
                      else if (mine + 0 < best + 0) printf " **%.2f** |", mine / best
                      else printf " %.2f |", mine / best }'
        done
        printf '\n'
    done
}

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cat <<EOF
# Allreduce at scale: predicted times

Predicted by the cost model, not measured: \`xccl_simulate\` at commit
$rev, the component's default constants (inside a node alpha 1.5 us,
beta 0.25 ns/B; between nodes alpha 20 us, beta 0.9 ns/B; gamma 0.2
ns/B, delta 0.13 ns/B), 4-byte floats, times in microseconds.  "best" is
the fastest candidate of the whole catalog (hier and hier_hd included: the
two-level forms over nodes of 8), "auto" the component's pick from the
same predictions (within 10 % of the best in every cell: test_select_scale).
Made by \`test/bench/scale_table.sh > docs/bench/scale-allreduce.md\`.
Plots of the same predictions at 1024 ranks (each candidate over the
best, 8 B .. 1 GiB): [nodes of 8](plots/scale-allreduce-1024.svg), [one
rank per node](plots/scale-allreduce-1024-flat.svg)
(\`test/bench/scale_plot.sh\`).

## Nodes of 8 ranks (\`-l block:8\`)

$(table block:8 none "1024 8192 65536")

## One rank per node (\`-l block:1\`): the flat algorithms alone

$(table block:1 none "1024 8192 65536")

## Nodes of 8, fat tree: 16 nodes per leaf, uplinks 4:1, one NIC per node (\`-N fattree:16:4,nics=1\`)

$(table block:8 fattree:16:4,nics=1 "1024 8192")

## Reading

- Nodes of 8 with one alpha-beta pair per level: the two-level hier_hd
  (reduce-scatter in the node, Rabenseifner on the rails, allgather)
  wins from 32 KiB at every p from 64, recursive doubling below 4 KiB,
  and from 16 MiB (up to 4096 ranks; at 1 GiB at every p) its pipelined
  form with nhr on the rails (13.2 against 14.7 ms at 1024
  ranks, 16 MiB; 0.76 against 0.92 s at 1 GiB); the flat candidates
  matter where there is no node level.
- One rank per node: nhr wins from 32 KiB where p is no power of two
  (100, 1000), where Rabenseifner's fold sends n more bytes from the
  folded ranks; at powers of two Rabenseifner stays a few per cent ahead
  (nhr copies half the vector and sends two messages where a range wraps
  past block p-1).  At 32 KiB from 32768 ranks, where most blocks are
  empty (8192 floats over 32768 ranks or more), nb is predicted fastest.
- With the network described (fat tree, 4:1 uplinks, one NIC per node),
  every rank of Rabenseifner and nhr sends half the vector across the
  machine in the first step: 8 ranks on one NIC, 128 on a leaf's 4 NICs of
  uplink, 25x slower; ring, swing, dbt and the rails keep their flows near,
  and auto turns to them.  nb, nhr's mirror, sends its largest pieces to
  the nearest ranks (stride 1, 2, 4, ...): about 10x faster than nhr
  there, close to it (plus its copies) without a network.  The component
  prices the network coll_xccl_net names (the description -N takes here;
  default none).
- pipeline takes over from hier_hd on nodes of 8 from 4 MiB:
  its chunks overlap the node's reduce-scatter and allgather with the
  rails' nhr.  The gain is bounded by the executor's step: a step waits
  for its slower transfer, so an intra-node step beside an inter-node one
  hides only the shorter of the two.

## Which candidate wins where

Nodes of 8 ranks, no network model:

$(winners block:8 none "8 64 512 1024 4096 8192 32768 65536")

One rank per node:

$(winners block:1 none "8 64 100 512 1000 1024 4096 8192 32768 65536")

## Where pipeline, bcast nhr and bcast nb win

Each cell: the algorithm's predicted time over the best other candidate's
(the whole catalog), bold where it is the fastest ("-": nothing moves,
the vector has fewer elements than ranks); sizes are the whole vector
(allreduce, reduce_scatter), the whole result (allgather) or the message
(bcast).

### pipeline: hier's stages on chunks of >= 2 MiB, overlapped

The intra-node stage of one chunk beside the inter-node stage of another,
step by step (algos/pipe_util.h).  Below 4 MiB it is one or two chunks,
hier's schedule with nhr (allreduce, reduce_scatter) or Bruck (allgather)
on the rails; above, it hides part of the faster stage, by as much as a
step's slower transfer allows.

allreduce, nodes of 8:

$(ratios allreduce pipeline block:8 none "16 64 128 1024 8192 65536")

reduce_scatter, nodes of 8:

$(ratios reduce_scatter pipeline block:8 none "16 64 128 1024 8192")

allgather, nodes of 8:

$(ratios allgather pipeline block:8 none "16 64 128 1024 8192")

allreduce, nodes of 8 on the fat tree above (\`-N fattree:16:4,nics=1\`):
its rail stage is nhr, whose far partners share the leaf's uplinks

$(ratios allreduce pipeline block:8 fattree:16:4,nics=1 "64 1024")

### bcast nhr and nb: a scatter by uneven halves, then nhr's or nb's allgather

One rank per node (the flat algorithms between servers, where HCCL uses
them):

bcast nhr:

$(ratios bcast nhr block:1 none "8 100 128 1000 1024 8192 65536")

bcast nb:

$(ratios bcast nb block:1 none "8 100 128 1000 1024 8192 65536")

On nodes of 8 the two-level bcasts (hier_rails, hier_sag) keep the node
level and win; nhr and nb ignore it:

$(ratios bcast nhr block:8 none "64 1024 8192")
EOF
