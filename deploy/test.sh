#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test. Ends with
# ctest's summary line.
#
# In CI (CI=true), or when CUTLINE_FUZZ_RUNS is set, every libFuzzer target is also built with
# clang and fuzzed briefly before ctest: CUTLINE_FUZZ_RUNS inputs per target (20000 in CI) from a
# fixed seed, so the run is reproducible (tests/fuzz/run.sh SECONDS explores for longer). Without
# clang that step is skipped. ctest always replays each fuzz target over its seed corpus.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/deploy/setup.sh" test
# Tests and benchmarks on, whatever an earlier deploy/run.sh configured in the same build dir.
CUTLINE_CMAKE_ARGS="-DCUTLINE_BUILD_TESTS=ON -DCUTLINE_BUILD_BENCH=ON ${CUTLINE_CMAKE_ARGS:-}" \
  bash "$root/deploy/build.sh"
fuzz_runs=${CUTLINE_FUZZ_RUNS:-}
if [[ -z "$fuzz_runs" && "${CI:-}" == true ]]; then fuzz_runs=20000; fi
if [[ -n "$fuzz_runs" && "$fuzz_runs" != 0 ]]; then
  FUZZ_RUNS=$fuzz_runs FUZZ_SEED=1 bash "$root/tests/fuzz/run.sh"
fi
cd "${CUTLINE_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" --timeout 300
