#!/usr/bin/env bash
# deploy/screenshots.sh BUILD_DIR — regenerates the README's pictures in docs/images/ with
# deform-view's headless capture (under Xvfb when there is no display): the neutral demo head,
# a smile (weights set through JSON-RPC), and a sculpted edit (an ARAP drag of the nose tip
# through deform.begin / deform.drag / deform.end).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
source deploy/xvfb.sh
source deploy/serve.sh
bin="$build/bin"
view="$build/bin/deform-view"
trap 'stop_demo_server; stop_xvfb' EXIT
start_demo_server "$bin"
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
"${ctl[@]}" call deform.begin '{"session":"demo","gesture":1,"mode":"arap","pick":'"$nose"',"handle_radius":0.012,"roi_radius":0.06,"detached":true}' >/dev/null
"${ctl[@]}" call deform.drag '{"session":"demo","gesture":1,"translate":[0,-0.01,0.025]}' >/dev/null
"${ctl[@]}" call deform.end '{"session":"demo","gesture":1}' >/dev/null
shot sculpt
