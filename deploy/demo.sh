#!/usr/bin/env bash
# deploy/demo.sh BUILD_DIR — what `make demo` runs after building.
#
# Starts deformd on the bundled demo head (ports chosen by the system) and shows it:
#   - with a display: deform-view opens a window on the session while a script animates a smile
#     (close the window to stop; then drag, brush and move sliders yourself: see viewer/README.md);
#   - without one: starts Xvfb, animates the smile, and writes demo.png with deform-view's
#     headless capture, then says where it is.
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

smile() { # a smile in 20 steps, then the jaw, as any script would drive it
  for w in 0.05 0.1 0.15 0.2 0.25 0.3 0.35 0.4 0.45 0.5 0.55 0.6 0.65 0.7 0.75 0.8 0.85 0.9 0.95 1.0; do
    "${ctl[@]}" weights.set demo smile_L=$w smile_R=$w >/dev/null
    sleep "${1:-0.05}"
  done
  "${ctl[@]}" weights.set demo jaw_open=0.25 >/dev/null
}

if [ -n "${DISPLAY:-}" ] && [ "${DEFORMD_DEMO_HEADLESS:-0}" != 1 ]; then
  echo "== deform-view: close its window to stop (keys: viewer/README.md)"
  (sleep 2; smile 0.1) &
  "$view" --connect "127.0.0.1:$sp" --session demo || true
else
  echo "== no display: starting Xvfb for a headless picture"
  start_xvfb
  smile 0.01
  version=$("${ctl[@]}" state.get demo | sed -n 's/.*"version":\([0-9]*\).*/\1/p')
  "$view" --connect "127.0.0.1:$sp" --session demo --screenshot demo.png --size 1280x720 \
    --camera 15,5,0 --wait-version "$version"
  echo "Wrote $(pwd)/demo.png (the demo head smiling, rendered by deform-view under Xvfb)."
fi
"$bin/deformd" --write-demo demo.glb
echo "Wrote $(pwd)/demo.glb (the neutral head with its 68 blendshapes, for any glTF viewer)."
echo "Run the server yourself:  $bin/deformd --demo"
echo "watch and sculpt it:      $view"
echo "and script it:            $bin/deformctl weights.set demo jaw_open=0.6"
