#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS [TARGET...]] — what `make fuzz FUZZ_SECONDS=N` runs.
#
# Builds the libFuzzer targets with clang 14 in build-fuzz (-DDEFORMD_FUZZ=ON: ASan + UBSan
# and the fuzzer's coverage on every project target), then runs each target (frames, rpc,
# import, config, face; default all) for SECONDS (default 60) from its seed corpus
# (tests/fuzz/corpus/NAME) and its kept findings (tests/fuzz/regress/NAME). New inputs go to
# build-fuzz/fuzz/NAME/corpus, crashes to build-fuzz/fuzz/NAME/artifacts. The import target
# also starts from the small files of Debian's assimp-testmodels, and runs with -fork so that a
# crash inside assimp (what the import worker process is for) is recorded and fuzzing goes on.
#
# Prints one line per target: coverage, features, corpus size, executions per second, and the
# findings. Exit status 1 when any target found a crash (outside assimp for import: see
# tests/fuzz/README.md for turning findings into regression inputs).
set -euo pipefail
secs=${1:-60}
shift || true
targets=${*:-frames rpc import config image face}
cd "$(dirname "$0")/../.."
build=${FUZZ_BUILD:-build-fuzz}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEFORMD_FUZZ=ON \
  -DDEFORMD_WERROR=ON >/dev/null
# shellcheck disable=SC2046
cmake --build "$build" -j"$jobs" --target $(printf 'fuzz-%s ' $targets)

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}

status=0
summary=()
for t in $targets; do
  work=$build/fuzz/$t
  mkdir -p "$work/corpus" "$work/artifacts"
  dirs=("$work/corpus" "tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regress/$t" ] && dirs+=("tests/fuzz/regress/$t")
  opts=(-max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=262144
        -artifact_prefix="$work/artifacts/" -print_final_stats=1)
  [ -f "tests/fuzz/$t.dict" ] && opts+=(-dict="tests/fuzz/$t.dict")
  if [ "$t" = import ]; then
    # Seeds from the packaged test models: every file of a format the server reads, up to
    # 64 KiB, with the byte that picks its extension in fuzz_import.c in front.
    seeds=$work/assimp-seeds
    mkdir -p "$seeds"
    i=0
    for ext in obj ply off stl gltf glb md2 md3; do
      while IFS= read -r f; do
        { printf "\\x$(printf %02x $i)"; cat "$f"; } >"$seeds/$ext-$(basename "$f")"
      done < <(find /usr/share/assimp/models -iname "*.$ext" -size -64k 2>/dev/null | sort)
      i=$((i + 1))
    done
    dirs+=("$seeds")
    opts+=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  fi
  # assimp is built without frame pointers: only the slow unwinder finds its frames in a leak's
  # stack, which lsan.supp needs to tell its leaks from ours.
  asan=$ASAN_OPTIONS
  [ "$t" = import ] && asan="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
  log=$work/log.txt
  echo "fuzz: $t for ${secs}s ($log)" >&2
  set +e
  ASAN_OPTIONS=$asan "$build/tests/fuzz-$t" "${opts[@]}" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  set -e
  last=$(grep -E 'cov: [0-9]+' "$log" | tail -1 || true)
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.*corp: ([0-9]+).*/\1/p' <<<"$last")
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  eps=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
  if [ -z "$execs" ]; then
    # -fork mode prints no final stats: runs from the last "#N:" line, over the time it gives.
    execs=$(sed -nE 's/^#([0-9]+):.*/\1/p' <<<"$last")
    t_s=$(sed -nE 's/.*time: ([0-9]+)s.*/\1/p' <<<"$last")
    [ -n "$execs" ] && [ -n "$t_s" ] && [ "$t_s" -gt 0 ] && eps=$((execs / t_s))
  fi
  crashes=$(find "$work/artifacts" -type f | wc -l)
  summary+=("$(printf '%-7s cov %6s  ft %7s  corpus %6s  exec/s %6s  runs %9s  findings %s  (exit %s)' \
    "$t" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${eps:-?}" "${execs:-?}" "$crashes" "$rc")")
  if [ "$t" != import ] && [ "$rc" -ne 0 ]; then status=1; fi
done
printf '%s\n' "${summary[@]}"
exit $status
