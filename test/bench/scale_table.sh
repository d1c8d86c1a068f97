#!/bin/bash
# scale_table.sh: allreduce at scale as the cost model predicts it
# (issue 31), in markdown, from xccl_simulate:
#   1. ring, rabenseifner, swing, dbt, nhr and nb at p = 1024, 8192, 65536 for
#      8 B, 64 KiB, 16 MiB and 1 GiB, with the best candidate and auto's
#      pick, for each machine below;
#   2. the winning candidate for p = 8 .. 65536 and 8 B .. 1 GiB.
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

# predicted <p> <layout> <net> <sizes>: xccl_simulate's rows, "size name=us ... best auto"
predicted() {
    "$sim" -c allreduce -n "$1" -l "$2" -N "$3" -s "$4" | awk '
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
    local algos="ring rabenseifner swing dbt nhr nb"
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

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cat <<EOF
# Allreduce at scale: predicted times (issue 31)

Predicted by the cost model, not measured: \`xccl_simulate\` at commit
$rev, the component's default constants (inside a node alpha 1.5 us,
beta 0.25 ns/B; between nodes alpha 20 us, beta 0.9 ns/B; gamma 0.2
ns/B, delta 0.13 ns/B), 4-byte floats, times in microseconds.  "best" is
the fastest candidate of the whole catalog (hier and hier_hd included: the
two-level forms over nodes of 8), "auto" the component's pick from the
same predictions (within 10 % of the best in every cell: test_select).
Made by \`test/bench/scale_table.sh > docs/bench/scale-allreduce.md\`.

## Nodes of 8 ranks (\`-l block:8\`)

$(table block:8 none "1024 8192 65536")

## One rank per node (\`-l block:1\`): the flat algorithms alone

$(table block:1 none "1024 8192 65536")

## Nodes of 8, fat tree: 16 nodes per leaf, uplinks 4:1, one NIC per node (\`-N fattree:16:4,nics=1\`)

$(table block:8 fattree:16:4,nics=1 "1024 8192")

## Reading

- Nodes of 8 with one alpha-beta pair per level: the two-level hier_hd
  (reduce-scatter in the node, Rabenseifner on the rails, allgather)
  wins from 32 KiB at every p from 64, recursive doubling below 4 KiB;
  the flat candidates matter where there is no node level.
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
  prices no network yet: its policy's net is none until a parameter sets
  it (xccl_simulate -N here).

## Which candidate wins where

Nodes of 8 ranks, no network model:

$(winners block:8 none "8 64 512 1024 4096 8192 32768 65536")

One rank per node:

$(winners block:1 none "8 64 100 512 1000 1024 4096 8192 32768 65536")
EOF
