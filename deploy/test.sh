#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test. Ends with
# the time each step took and the overall result.
#
# In CI (CI=true), or when CUTLINE_FUZZ_RUNS is set, every libFuzzer target is also built with
# clang and fuzzed briefly before ctest: CUTLINE_FUZZ_RUNS inputs per target (20000 in CI) from a
# fixed seed, so the run is reproducible (tests/fuzz/run.sh SECONDS explores for longer). Without
# clang that step is skipped. ctest always replays each fuzz target over its seed corpus.
#
# In CI (or with CUTLINE_SANITIZERS=1) the tests also run under sanitizers after the main ctest
# (tests/sanitize/run.sh): the whole suite under ASan + UBSan in the fuzz build's tree (one
# sanitizer build serves fuzzing and tests), and the threaded gateway and engine tests under
# ThreadSanitizer. CUTLINE_SANITIZERS=0 leaves them out. To keep the three builds within CI's
# 45 minutes on 2 cores, CI's main tree compiles without debug info (-DCUTLINE_DEBUG_INFO=OFF),
# and every tree precompiles the test binaries' common headers (CUTLINE_PCH).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=()
step() {  # step NAME COMMAND...: runs it, records its wall time and result, never exits early
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  steps+=("$(printf '%-14s %5ds  %s' "$name" $((SECONDS - start)) "$([[ $rc == 0 ]] && echo ok || echo "FAILED ($rc)")")")
  return "$rc"
}
summary() {
  echo "== deploy/test.sh steps"
  printf '  %s\n' "${steps[@]}"
}
trap summary EXIT

step setup bash "$root/deploy/setup.sh" test
# Tests and benchmarks on, whatever an earlier deploy/run.sh configured in the same build dir.
ci=${CI:-}
build_args="-DCUTLINE_BUILD_TESTS=ON -DCUTLINE_BUILD_BENCH=ON"
if [[ "$ci" == true ]]; then build_args+=" -DCUTLINE_DEBUG_INFO=OFF"; fi
step build env CUTLINE_CMAKE_ARGS="$build_args ${CUTLINE_CMAKE_ARGS:-}" bash "$root/deploy/build.sh"
fuzz_runs=${CUTLINE_FUZZ_RUNS:-}
if [[ -z "$fuzz_runs" && "$ci" == true ]]; then fuzz_runs=20000; fi
sanitizers=${CUTLINE_SANITIZERS:-$([[ "$ci" == true ]] && echo 1 || echo 0)}

failed=0
if [[ -n "$fuzz_runs" && "$fuzz_runs" != 0 ]]; then
  step fuzz env FUZZ_RUNS="$fuzz_runs" FUZZ_SEED=1 bash "$root/tests/fuzz/run.sh" || failed=1
fi
build_dir=${CUTLINE_BUILD_DIR:-$root/build}
step ctest bash -c 'cd "$1" && ctest --output-on-failure -j "$(nproc)" --timeout 300' _ "$build_dir" ||
  failed=1
if [[ "$sanitizers" == 1 ]]; then
  step ctest-asan env JOBS="$(nproc)" bash "$root/tests/sanitize/run.sh" asan || failed=1
  step ctest-tsan env JOBS="$(nproc)" bash "$root/tests/sanitize/run.sh" tsan || failed=1
fi
exit "$failed"
