#!/usr/bin/env bash
# deploy/demo.sh BUILD_DIR — what `make demo` runs after building.
#
# Starts deformd on the bundled demo head (ports chosen by the system), shows what it serves
# through deformctl, animates a smile while a headless viewer (`deformctl watch`) follows it,
# writes the demo head (demo.glb) and the smiling shape (demo-smile.obj), and stops the server.
# The windowed viewer joins this script when it exists.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
bin="$build/server"
out=$(mktemp)
"$bin/deformd" --demo --stream-port 0 --rpc-port 0 --log-level warn >"$out" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 100); do grep -q rpc_port "$out" && break; sleep 0.1; done
read -r sp rp < <(sed -n 's/stream_port=\([0-9]*\) rpc_port=\([0-9]*\)/\1 \2/p' "$out")
ctl=("$bin/deformctl" --rpc "127.0.0.1:$rp" --stream "127.0.0.1:$sp")
for _ in $(seq 100); do "${ctl[@]}" mesh.info demo >/dev/null 2>&1 && break; sleep 0.1; done

echo "== deformd is serving the demo head: stream port $sp, JSON-RPC port $rp"
echo "== deformctl mesh.info demo"
"${ctl[@]}" mesh.info demo
echo "== a headless viewer follows while a script animates smile_L and smile_R"
"${ctl[@]}" watch demo --count 10 --dump demo-smile.obj &
watcher=$!
sleep 0.5
for w in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0; do
  "${ctl[@]}" weights.set demo smile_L=$w smile_R=$w >/dev/null
  sleep 0.05
done
wait $watcher
"$bin/deformd" --write-demo demo.glb
echo
echo "Wrote $(pwd)/demo.glb (the neutral head with its 16 blendshapes, for any glTF viewer)"
echo "  and $(pwd)/demo-smile.obj (the shape the viewer rebuilt at the end)."
echo "Run the server yourself:  $bin/deformd --demo"
echo "and script it:            $bin/deformctl weights.set demo jaw_open=0.6"
