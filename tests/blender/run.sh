#!/usr/bin/env bash
# tests/blender/run.sh BUILD_DIR SOURCE_DIR — the Blender add-on's test (tests/blender/test_link.py)
# in a headless Blender: `blender -b --factory-startup`, with a HOME of its own so that nothing of
# the user's Blender configuration is read or written. A missing Blender fails the test
# (deploy/deps.sh installs Debian's blender); it never skips.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
command -v blender >/dev/null || { echo "FAIL: blender is missing (deploy/deps.sh installs it)" >&2; exit 1; }
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
out="$home/blender.log"
status=0
HOME="$home" blender -b --factory-startup --python-exit-code 1 --python "$src/tests/blender/test_link.py" \
  -- "$build" "$src" >"$out" 2>&1 || status=$?
grep -v '^$' "$out"
# Blender exits 0 when a script fails in some setups: the last line is the verdict.
grep -q '^blender link: all checks passed$' "$out" || { echo "FAIL: the Blender test did not finish (status $status)" >&2; exit 1; }
exit "$status"
