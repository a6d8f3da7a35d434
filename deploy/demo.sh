#!/usr/bin/env bash
# deploy/demo.sh BUILD_DIR — what `make demo` runs after building.
#
# Starts deformd on the bundled demo head (ports chosen by the system) and shows it:
#   - with a display: deform-view opens a window on the session while its clip "smile-frown"
#     loops (4 s: smile, frown), the skin blushing with the smile and wrinkling with the frown
#     (its texture clip "blush-wrinkles"); close the window to stop; anim.stop it, then drag,
#     brush and move sliders yourself: see viewer/README.md;
#   - without one: starts Xvfb, shows the clip at its smile (1 s), and writes demo.png with
#     deform-view's headless capture, then says where it is.
# Either way it writes the demo head as demo.glb, and stops the server at the end.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
source deploy/xvfb.sh
source deploy/serve.sh
bin="$build/bin"
view="$build/bin/deform-view"
trap 'stop_demo_server; stop_xvfb' EXIT
start_demo_server "$bin"

echo "== deformd is serving the demo head: stream port $sp, JSON-RPC port $rp; in a browser: http://127.0.0.1:$hp/?session=demo"
"${ctl[@]}" mesh.info demo | head -c 300
echo

play() { # the demo session's clip, looping; its texture clip follows it
  "${ctl[@]}" call anim.play '{"session":"demo","clip":"smile-frown","loop":true}' >/dev/null
}

# The texture clip is compressed on the server's pool after the session opens (about a second):
# wait for it, so that the picture shows the blush (without it the head is drawn, skin only).
texclip=0
for _ in $(seq 1 60); do
  if "${ctl[@]}" call texclip.list '{"session":"demo"}' 2>/dev/null | grep -q blush-wrinkles; then texclip=1; break; fi
  sleep 0.5
done
[ "$texclip" = 1 ] || echo "== the demo's texture clip is not ready after 30 s: the picture shows the skin alone"

if [ -n "${DISPLAY:-}" ] && [ "${DEFORMD_DEMO_HEADLESS:-0}" != 1 ]; then
  echo "== deform-view: close its window to stop (keys: viewer/README.md)"
  (sleep 2; play) &
  "$view" --connect "127.0.0.1:$sp" --session demo || true
else
  echo "== no display: starting Xvfb for a headless picture"
  start_xvfb
  play
  "${ctl[@]}" call anim.pause '{"session":"demo"}' >/dev/null
  "${ctl[@]}" call anim.seek '{"session":"demo","time":1.0}' >/dev/null
  version=$("${ctl[@]}" state.get demo | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
  "$view" --connect "127.0.0.1:$sp" --session demo --screenshot demo.png --size 1280x720 \
    --camera 15,5,0 --wait-version "$version" --wait-texclips "$texclip"
  echo "Wrote $(pwd)/demo.png (the demo head smiling and blushing, rendered by deform-view under Xvfb)."
fi
"$bin/deformd" --write-demo demo.glb
echo "Wrote $(pwd)/demo.glb (the neutral head with its 68 blendshapes, for any glTF viewer)."
echo "Run the server yourself:  $bin/deformd --demo"
echo "watch and sculpt it:      $view"
echo "and script it:            $bin/deformctl weights.set demo jaw_open=0.6"
