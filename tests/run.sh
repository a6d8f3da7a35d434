#!/usr/bin/env bash
# tests/run.sh BUILD_DIR — runs the whole suite with ctest, in parallel on the machine's cores.
#
# This is what `make test` and `make test-asan` call, so CI runs exactly what a user runs.
# It starts what the tests need and stops it afterwards: when DISPLAY is empty, an Xvfb server
# for the viewer's GL tests (hidden GLFW windows on Mesa's llvmpipe), killed on exit. The browser
# viewer's tests (label web) start their own headless Chromium and deformd per test (tests/web/);
# they need no display but the deform-views they compare with do. Xvfb's own messages go to
# BUILD_DIR/xvfb.log, whose end is printed when a test failed. The exit status is ctest's.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."

# Sanitizer settings for the ASan build (harmless for the normal one): fail on the first error,
# and detect leaks. Leaks allocated inside Mesa (its GLX library, DRI driver, LLVM) are theirs,
# not ours: tests/lsan.supp names only those libraries.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}

# start_xvfb / stop_xvfb (shared with deploy/demo.sh).
source deploy/xvfb.sh
trap stop_xvfb EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -z "${DISPLAY:-}" ]; then
  case "$build" in /*) log_dir=$build ;; *) log_dir=$PWD/$build ;; esac
  export XVFB_LOG=${XVFB_LOG:-$log_dir/xvfb.log} # kept, and its end shown if a test fails
  : >"$XVFB_LOG" 2>/dev/null || XVFB_LOG=/dev/null
  if start_xvfb; then
    echo "tests/run.sh: started Xvfb on DISPLAY=$DISPLAY (pid $xvfb_pid) for the viewer GL tests" >&2
  else
    echo "tests/run.sh: no display and no Xvfb: the viewer GL tests will fail" >&2
  fi
fi

jobs=$(nproc 2>/dev/null || echo 2)
status=0
ctest --test-dir "$build" --output-on-failure -j"$jobs" "${@:2}" || status=$?
if [ "$status" -ne 0 ] && [ -s "${XVFB_LOG:-/dev/null}" ]; then
  echo "tests/run.sh: the end of Xvfb's log ($XVFB_LOG):" >&2
  tail -n 20 "$XVFB_LOG" >&2
fi
exit "$status"
