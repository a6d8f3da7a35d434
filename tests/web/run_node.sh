#!/usr/bin/env bash
# tests/web/run_node.sh FIXTURE_WRITER — writes the C codec's fixtures into a temporary folder and
# runs the JavaScript protocol tests on them with node's built-in test runner, and tools.test.mjs (the
# page's stroke stabiliser: no fixtures needed).
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$1" "$dir"
cd "$(dirname "$0")"
WEB_FIXTURES="$dir/fixtures.jsonl" node --test protocol.test.mjs tools.test.mjs
