#!/bin/bash
# scale_plot.sh: one SVG (no plotting package: awk writes it) of allreduce
# at scale as the cost model predicts it: for p ranks on a
# layout, each candidate's predicted time over the best candidate's, 8 B to
# 1 GiB, log scales.  From xccl_simulate, as scale_table.sh.
#   test/bench/scale_plot.sh [p] [layout] [net] > docs/bench/plots/scale-allreduce-1024.svg
set -euo pipefail
b=${XCCL_BUILDDIR:-build}
sim=$b/xccl_simulate
[[ -x $sim ]] || { echo "no $sim (XCCL_BUILDDIR)" >&2; exit 2; }
p=${1:-1024} layout=${2:-block:8} net=${3:-none}
algos="ring rabenseifner swing dbt nhr nb hier_hd pipeline"
"$sim" -c allreduce -n "$p" -l "$layout" -N "$net" -s 8..1G | awk -v algos="$algos" -v p="$p" \
    -v layout="$layout" -v net="$net" '
    BEGIN { na = split(algos, want, " ")
            split("#1f77b4 #d62728 #2ca02c #9467bd #ff7f0e #8c564b #17becf #e377c2", color, " ")
            W = 760; H = 440; L = 70; R = 170; T = 40; B = 60 }
    /^# size/ { for (i = 3; i <= NF - 2; i++) col[$i] = i - 1; next }
    /^#/ { next }
    { n++; size[n] = $1; best = -1
      for (a = 1; a <= na; a++) { v = $(col[want[a]]); t[n, a] = v
          if (v != "n/a" && (best < 0 || v + 0 < best)) best = v + 0 }
      # the best of the whole catalog is in the "best" column: take its time
      bt = $(col[$(NF - 1)]); if (bt != "n/a") best = bt + 0
      for (a = 1; a <= na; a++) r[n, a] = t[n, a] == "n/a" || best <= 0 ? -1 : t[n, a] / best }
    function x(i) { return L + (W - L - R) * (log(size[i]) - log(size[1])) / (log(size[n]) - log(size[1])) }
    function y(v) { if (v > 100) v = 100; return T + (H - T - B) * (1 - log(v) / log(100)) }
    END {
        printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H
        printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
        printf "<text x=\"%d\" y=\"22\" font-size=\"14\">allreduce, %d ranks (%s, network %s): predicted time / best candidate&#39;s</text>\n", L, p, layout, net
        for (v = 1; v <= 100; v *= 10) {
            for (m = 1; m <= 9 && v * m <= 100; m++) {
                printf "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", L, W - R, y(v * m), y(v * m), m == 1 ? "#bbb" : "#eee"
            }
            printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%gx</text>\n", L - 6, y(v) + 4, v
        }
        split("B KiB MiB GiB", u, " ")
        for (i = 1; i <= n; i += 3) {
            s = size[i]; k = 1; while (s >= 1024) { s /= 1024; k++ }
            printf "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n", x(i), x(i), T, H - B
            printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g %s</text>\n", x(i), H - B + 16, s, u[k]
        }
        printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">message size</text>\n", (L + W - R) / 2, H - 18
        for (a = 1; a <= na; a++) {
            d = ""
            for (i = 1; i <= n; i++) if (r[i, a] > 0) d = d sprintf("%s%.1f,%.1f", d == "" ? "M" : " L", x(i), y(r[i, a]))
            if (d != "") printf "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", d, color[a]
            printf "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n", W - R + 12, W - R + 36, T + 12 + 18 * a, T + 12 + 18 * a, color[a]
            printf "<text x=\"%d\" y=\"%d\">%s</text>\n", W - R + 42, T + 16 + 18 * a, want[a]
        }
        printf "<text x=\"%d\" y=\"%d\" fill=\"#666\">above 100x: at 100x</text>\n", W - R + 12, T + 30 + 18 * na
        printf "</svg>\n"
    }'
