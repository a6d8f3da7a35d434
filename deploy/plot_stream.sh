#!/usr/bin/env bash
# deploy/plot_stream.sh [BUILD_DIR] [RESULTS.json] — the plot of docs/performance.md's
# "deform-bench stream" section: docs/images/stream.png.
#
# Runs `BUILD_DIR/bin/deform-bench stream --json` (BUILD_DIR defaults to build) unless a file of
# its output is given, then draws with gnuplot (Debian's gnuplot-nox, installed by deploy/deps.sh):
# left, the bytes a viewer's join costs per mesh and codec; right, the bytes per changed vertex
# of the ARAP drag and brush traces, against sparse float32 and the goal of 4.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${2:-}" ]; then
  cp "$2" "$tmp/results.json"
else
  "$build/bin/deform-bench" stream --json > "$tmp/results.json"
fi
python3 - "$tmp" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(out + "/results.json") if l.startswith("{")]
codecs = ["raw", "lossless", "quantised"]
joins = {}
traces = {}
for r in rows:
    if r.get("kind") == "join":
        joins.setdefault(r["mesh"], {})[r["codec"]] = r["bytes"] / 1e6
    if r.get("kind") == "trace" and "bytes_per_changed_vertex" in r:
        traces.setdefault(r["trace"], {})[r["codec"]] = r["bytes_per_changed_vertex"]
with open(out + "/joins.dat", "w") as f:
    f.write("mesh " + " ".join(codecs) + "\n")
    for m, v in joins.items():
        f.write(m + " " + " ".join("%.4f" % v[c] for c in codecs) + "\n")
with open(out + "/deltas.dat", "w") as f:
    f.write("trace " + " ".join(codecs) + "\n")
    for t, v in traces.items():
        label = {"arap_drag": "ARAP drag", "brush_strokes": "brush strokes"}.get(t, t.replace("_", " "))
        f.write('"%s" ' % label + " ".join("%.3f" % v[c] for c in codecs) + "\n")
PY
gnuplot <<GP
set terminal pngcairo size 1100,420 font "DejaVu Sans,10" noenhanced
set output "docs/images/stream.png"
set multiplot layout 1,2 title "deform-bench stream: what a viewer receives (protocol 1 raw, protocol 2 lossless and quantised)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left
set grid ytics
set ylabel "MB per join (WELCOME + SNAPSHOT)"
set title "joins"
set logscale y
set yrange [0.1:40]
set arrow 3 from graph 0, first 0.5 to graph 1, first 0.5 nohead dt 3 lc rgb "#2e7d32" lw 2
set label 3 "goal: 500 KB" at graph 0.02, first 0.56 tc rgb "#2e7d32"
plot "$tmp/joins.dat" using 2:xtic(1) title col lc rgb "#9e9e9e", '' using 3 title col lc rgb "#4f81bd", '' using 4 title col lc rgb "#c0504d"
unset logscale y
unset arrow 3
unset label 3
set key right center
set yrange [0:18]
set ylabel "bytes per changed vertex (whole DELTA frames)"
set title "sculpt traces on the demo head"
set arrow 1 from graph 0, first 16 to graph 1, first 16 nohead dt 2 lc rgb "#555555"
set label 1 "sparse float32: 16" at graph 0.02, first 16.5
set arrow 2 from graph 0, first 4 to graph 1, first 4 nohead dt 3 lc rgb "#2e7d32" lw 2
set label 2 "goal: 4" at graph 0.02, first 4.6 tc rgb "#2e7d32"
plot "$tmp/deltas.dat" using 2:xtic(1) title col lc rgb "#9e9e9e", '' using 3 title col lc rgb "#4f81bd", '' using 4 title col lc rgb "#c0504d"
unset multiplot
GP
echo "wrote docs/images/stream.png" >&2
