#!/usr/bin/env bash
# deploy/demo.sh BUILD_DIR — what `make demo` runs after building.
#
# Writes the bundled demo head to demo.glb (any glTF viewer opens it: Blender, three.js
# editor, `f3d`) and prints what the mesh core sees in it.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
"$build/server/deformd" --write-demo demo.glb
echo "mesh statistics (deformd --check-mesh demo.glb):"
"$build/server/deformd" --check-mesh demo.glb
echo
echo "demo head written to $(pwd)/demo.glb"
