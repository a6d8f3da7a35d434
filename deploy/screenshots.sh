#!/usr/bin/env bash
# deploy/screenshots.sh BUILD_DIR — regenerates the README's pictures in docs/images/ with
# deform-view's headless capture (under Xvfb when there is no display): the neutral demo head,
# a smile (weights set through JSON-RPC), a sculpted edit (an ARAP drag of the nose tip
# through deform.begin / deform.drag / deform.end, smooth border by default), a brush stroke
# (brush.stroke: a draw stroke's path across the cheek), and the README drag with
# "border": "sharp" against the default, close up (drag_border.png).
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
"${ctl[@]}" call deform.reset '{"session":"demo"}' >/dev/null
# A draw stroke across the right cheek: 8 points of the path, on the surface; the server places
# the dabs a tenth of the radius apart (19 of them) and raises the cheek by about a quarter of
# the radius.
"${ctl[@]}" call brush.stroke '{"session":"demo","brush":"draw","radius":0.03,"samples":[{"center":[0.022,-0.045,0.086446]},{"center":[0.027714,-0.039286,0.082786]},{"center":[0.033429,-0.033571,0.0797]},{"center":[0.039143,-0.027857,0.075984]},{"center":[0.044857,-0.022143,0.073303]},{"center":[0.050571,-0.016429,0.072226]},{"center":[0.056286,-0.010714,0.071296]},{"center":[0.062,-0.005,0.067197]}]}' >/dev/null
shot stroke
# The README's drag (pick 20400, handle_radius 0.01, roi_radius 0.05, 1 cm up) with the plain
# solve and with the default smooth border, the nose close up, side by side.
closeup() { # closeup NAME BORDER
  "${ctl[@]}" call deform.reset '{"session":"demo"}' >/dev/null
  "${ctl[@]}" call deform.begin '{"session":"demo","gesture":2,"pick":'"$nose"',"handle_radius":0.01,"roi_radius":0.05,"border":"'"$2"'"}' >/dev/null
  "${ctl[@]}" call deform.drag '{"session":"demo","gesture":2,"translate":[0,0.01,0]}' >/dev/null
  "${ctl[@]}" call deform.end '{"session":"demo","gesture":2}' >/dev/null
  local v
  v=$("${ctl[@]}" state.get demo | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
  "$view" --connect "127.0.0.1:$sp" --session demo --screenshot "$1" --size 1600x1200 --camera 50,12,0.32 --wait-version "$v"
}
if command -v convert >/dev/null && command -v montage >/dev/null; then
  tmp=$(mktemp -d)
  closeup "$tmp/sharp.png" sharp
  closeup "$tmp/smooth.png" smooth
  convert "$tmp/sharp.png" -crop 600x450+100+250 +repage "$tmp/a.png"
  convert "$tmp/smooth.png" -crop 600x450+100+250 +repage "$tmp/b.png"
  montage "$tmp/a.png" "$tmp/b.png" -tile 2x1 -geometry +2+2 -background '#292a30' docs/images/drag_border.png
  rm -rf "$tmp"
  echo "wrote docs/images/drag_border.png (sharp border, smooth border)"
else
  echo "skipped docs/images/drag_border.png: ImageMagick's convert and montage are not installed" >&2
fi
