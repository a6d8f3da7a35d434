#!/usr/bin/env bash
# tests/fuzz/coverage.sh [TARGET...] — the line coverage each fuzz target's corpus reaches in
# the files it is aimed at (docs/fuzzing.md has the figures).
#
# Builds the replay programs (fuzz-replay-NAME) with clang's source-based coverage in
# build-fuzz-cov, runs each over its seeds, its kept findings and the corpus `make fuzz` grew
# (build-fuzz/fuzz/NAME/corpus), and prints llvm-cov's report for that target's files.
set -euo pipefail
targets=${*:-frames rpc import config image face}
cd "$(dirname "$0")/../.."
build=build-fuzz-cov
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEFORMD_COVERAGE=ON >/dev/null
# shellcheck disable=SC2046
cmake --build "$build" -j"$jobs" --target $(printf 'fuzz-replay-%s ' $targets) >/dev/null

declare -A files=(
  [frames]="protocol/proto_msg.c protocol/proto_frame.c server/client/client_replica.c"
  [rpc]="server/deformd/srv_rpc_conn.c server/deformd/srv_json_text.c server/deformd/srv_rpc.c server/deformd/srv_methods.c server/deformd/srv_edit_rpc.c server/deformd/srv_blend_rpc.c server/deformd/srv_anim_rpc.c"
  [import]="shared/mesh_import.c shared/mesh_ply.c shared/mesh_off.c shared/mesh_md2.c shared/mesh_md3.c shared/mesh_gltf_anim.c shared/mesh_blob.c server/deformd/srv_import.c"
  [config]="server/deformd/srv_config.c server/deformd/srv_json_text.c"
  [face]="protocol/proto_osc.c protocol/proto_livelink.c"
)
for t in $targets; do
  prof=$build/fuzz-$t.profraw
  dirs=(tests/fuzz/corpus/"$t")
  [ -d tests/fuzz/regress/"$t" ] && dirs+=(tests/fuzz/regress/"$t")
  [ -d build-fuzz/fuzz/"$t"/corpus ] && dirs+=(build-fuzz/fuzz/"$t"/corpus)
  LLVM_PROFILE_FILE=$prof "$build/tests/fuzz-replay-$t" "${dirs[@]}" >/dev/null 2>&1 || true
  llvm-profdata-14 merge -sparse "$prof" -o "$build/fuzz-$t.profdata"
  echo "== $t ($(for d in "${dirs[@]}"; do find "$d" -type f; done | wc -l) inputs)"
  # shellcheck disable=SC2086
  llvm-cov-14 report "$build/tests/fuzz-replay-$t" -instr-profile="$build/fuzz-$t.profdata" ${files[$t]} |
    awk 'BEGIN {printf "%-40s %8s %8s %8s\n", "file", "lines", "missed", "cover"}
         /\.c / || /^TOTAL/ {printf "%-40s %8s %8s %8s\n", $1, $(NF-5), $(NF-4), $(NF-3)}'
done
