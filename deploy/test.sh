#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test. Ends with
# ctest's summary line.
#
# In CI (CI=true), or when CUTLINE_FUZZ_SECONDS is set, every libFuzzer target is also built with
# clang and fuzzed briefly (CUTLINE_FUZZ_SECONDS per target, 10 in CI) before ctest; without
# clang that step is skipped. ctest always replays each fuzz target over its seed corpus.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/deploy/setup.sh"
bash "$root/deploy/build.sh"
fuzz_seconds=${CUTLINE_FUZZ_SECONDS:-}
if [[ -z "$fuzz_seconds" && "${CI:-}" == true ]]; then fuzz_seconds=10; fi
if [[ -n "$fuzz_seconds" && "$fuzz_seconds" != 0 ]]; then
  bash "$root/tests/fuzz/run.sh" "$fuzz_seconds"
fi
cd "${CUTLINE_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" --timeout 300
