#!/usr/bin/env bash
# tests/run.sh BUILD_DIR — runs the whole suite with ctest, in parallel on the machine's cores.
#
# This is what `make test` and `make test-asan` call, so CI runs exactly what a user runs.
# It starts what the tests need and stops it afterwards.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."

# Sanitizer settings for the ASan build (harmless for the normal one): fail on the first error,
# and detect leaks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

jobs=$(nproc 2>/dev/null || echo 2)
exec ctest --test-dir "$build" --output-on-failure -j"$jobs"
