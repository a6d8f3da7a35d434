#!/usr/bin/env bash
# deploy/bench_cgal.sh — `deform-bench solve` beside its CGAL peer (server/tools/peers/cgal_arap.cpp:
# CGAL 5.5's Surface_mesh_deformation, SRE_ARAP), run after run in turn on the same mesh with the
# same handle, drags and border, and the medians of each and of the pair-by-pair ratios.
#
#   bash deploy/bench_cgal.sh [-n RUNS] [-d DRAGS] [-b BUILD_DIR] MESH...
#
# Defaults: 5 runs, 30 drags, build/. For each MESH and run it prints deform-bench's JSON line
# (`deform-bench solve MESH --mode arap --roi all --iters 1 --drags D --border sharp --json`) and
# the peer's, then per mesh: the medians of prefactor and drag p50, and the median of the runs'
# ratios CGAL / deformd. The peer is compiled once into BUILD_DIR/peers/.
#
# Needs Debian's libcgal-dev and libeigen3-dev, which deformd and its tests do not:
# `bash deploy/deps.sh --peers` installs them. It DOES NOT install anything itself.
set -euo pipefail

runs=5 drags=30 build=build
while getopts "n:d:b:" opt; do
  case $opt in
    n) runs=$OPTARG ;;
    d) drags=$OPTARG ;;
    b) build=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "$#" -ge 1 ] || { echo "usage: bash deploy/bench_cgal.sh [-n RUNS] [-d DRAGS] [-b BUILD_DIR] MESH..." >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
bench="$build/bin/deform-bench"
[ -x "$bench" ] || { echo "bench_cgal: $bench is missing: build deformd first (cmake --build $build)" >&2; exit 1; }
if [ ! -f /usr/include/CGAL/Surface_mesh_deformation.h ] || [ ! -d /usr/include/eigen3 ]; then
  echo "bench_cgal: CGAL or Eigen headers missing: install them with 'bash deploy/deps.sh --peers'" \
       "(Debian libcgal-dev libeigen3-dev)" >&2
  exit 1
fi
peer="$build/peers/cgal_arap"
src="$root/server/tools/peers/cgal_arap.cpp"
if [ ! -x "$peer" ] || [ "$src" -nt "$peer" ]; then
  mkdir -p "$build/peers"
  echo "# compiling $peer (g++ -O3 -DNDEBUG)" >&2
  g++ -std=c++17 -O3 -DNDEBUG -DCGAL_EIGEN3_ENABLED -I/usr/include/eigen3 "$src" -o "$peer" -lgmp -lmpfr
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "# $(date -u +%FT%TZ) $(uptime)"
for mesh in "$@"; do
  for ((r = 1; r <= runs; r++)); do
    d=$("$bench" solve "$mesh" --mode arap --roi all --iters 1 --drags "$drags" --border sharp --json)
    c=$("$peer" "$mesh" --drags "$drags")
    echo "$d"
    echo "$c"
    printf '%s\t%s\n' "$d" "$c" >>"$out"
  done
done
python3 - "$out" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    d, c = (json.loads(x) for x in line.rstrip("\n").split("\t"))
    rows.setdefault(d["mesh"], []).append((d, c))
for mesh, pairs in rows.items():
    med = lambda f: statistics.median(f(d, c) for d, c in pairs)
    print(f"# {mesh}: {len(pairs)} runs in turn, medians")
    print(f"#   deformd prefactor {med(lambda d, c: d['prefactor_ms']):.1f} ms, drag p50 {med(lambda d, c: d['drag_p50_ms']):.2f} ms"
          f" (p95 {med(lambda d, c: d['drag_p95_ms']):.2f})")
    print(f"#   CGAL    prefactor {med(lambda d, c: c['prefactor_ms']):.1f} ms, drag p50 {med(lambda d, c: c['drag_p50_ms']):.2f} ms"
          f" (p95 {med(lambda d, c: c['drag_p95_ms']):.2f})")
    pre = [c["prefactor_ms"] / d["prefactor_ms"] for d, c in pairs]
    drag = [c["drag_p50_ms"] / d["drag_p50_ms"] for d, c in pairs]
    print(f"#   CGAL / deformd: prefactor {statistics.median(pre):.2f}x [{min(pre):.2f}-{max(pre):.2f}],"
          f" drag {statistics.median(drag):.2f}x [{min(drag):.2f}-{max(drag):.2f}]")
EOF
