#!/usr/bin/env bash
# deploy/screenshots.sh BUILD_DIR — regenerates the README's pictures in docs/images/ with
# deform-view's headless capture (under Xvfb when there is no display): the neutral demo head,
# a smile (weights set through JSON-RPC), and a sculpted edit (an ARAP drag of the nose tip
# through deform.begin / deform.drag / deform.end).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
source deploy/xvfb.sh
bin="$build/server"
view="$build/viewer/deform-view"
out=$(mktemp)
"$bin/deformd" --demo --stream-port 0 --rpc-port 0 --log-level warn >"$out" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$out"; stop_xvfb' EXIT
for _ in $(seq 100); do grep -q rpc_port "$out" && break; sleep 0.1; done
read -r sp rp < <(sed -n 's/stream_port=\([0-9]*\) rpc_port=\([0-9]*\)/\1 \2/p' "$out")
ctl=("$bin/deformctl" --rpc "127.0.0.1:$rp" --stream "127.0.0.1:$sp")
for _ in $(seq 100); do "${ctl[@]}" mesh.info demo >/dev/null 2>&1 && break; sleep 0.1; done
[ -n "${DISPLAY:-}" ] || start_xvfb
mkdir -p docs/images
shot() { # shot NAME: the session as it is now
  local v
  v=$("${ctl[@]}" state.get demo | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
  "$view" --connect "127.0.0.1:$sp" --session demo --screenshot "docs/images/$1.png" --size 640x480 \
    --camera 25,5,0 --wait-version "$v"
  echo "wrote docs/images/$1.png (session version $v)"
}
shot neutral
"${ctl[@]}" weights.set demo smile_L=1 smile_R=1 jaw_open=0.2 >/dev/null
shot smile
"${ctl[@]}" weights.set demo smile_L=0 smile_R=0 jaw_open=0 >/dev/null
# Vertex 20400 is the generated head's nose tip (its largest z; the head is the same every run).
nose=20400
"${ctl[@]}" call deform.begin '{"session":"demo","gesture":1,"mode":"arap","pick":'"$nose"',"handle_radius":0.012,"roi_radius":0.06}' >/dev/null
"${ctl[@]}" call deform.drag '{"session":"demo","gesture":1,"translate":[0,-0.01,0.025]}' >/dev/null
"${ctl[@]}" call deform.end '{"session":"demo","gesture":1}' >/dev/null
shot sculpt
