#!/usr/bin/env bash
# tests/python/run.sh BUILD_DIR install
#   Makes BUILD_DIR/python-venv as python/README.md says (Debian's python3 with its site packages,
#   so Debian's numpy and setuptools serve it) and installs the package into it:
#     python3 -m venv --system-site-packages VENV && VENV/bin/pip install --no-build-isolation ./python
# tests/python/run.sh BUILD_DIR SCRIPT ARGS...   (SCRIPT gets BUILD_DIR ARGS...)
#   Runs tests/python/SCRIPT with that venv's python (not the source tree: what was installed).
# Nothing is fetched: no index is reachable, and none is needed (the package has no dependencies).
set -euo pipefail
build=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
venv="$build/python-venv"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
if [ "$1" = install ]; then
  for tool in /usr/bin/python3; do
    [ -x "$tool" ] || { echo "run.sh: $tool is missing (bash deploy/deps.sh installs it)"; exit 1; }
  done
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  cd "$src"
  "$venv/bin/pip" install --no-build-isolation ./python
  rm -rf python/build python/deformd.egg-info  # what setuptools leaves beside the sources
  cd /
  "$venv/bin/python" -c "import deformd, numpy, sys; print('deformd', deformd.__version__, 'from', deformd.__file__); sys.exit(0 if deformd.__file__.startswith('$venv') else 1)"
  exit 0
fi
script="$1"
shift
[ -x "$venv/bin/python" ] || { echo "run.sh: no $venv: the install test runs first"; exit 1; }
cd "$build"
exec "$venv/bin/python" "$here/$script" "$build" "$@"
