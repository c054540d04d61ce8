#!/usr/bin/env bash
# Configures a sanitizer build tree of Cutline, the same way for every caller:
#
#   tests/sanitize/configure.sh asan DIR   clang, ASan + UBSan, libFuzzer instrumentation
#                                          (-DCUTLINE_FUZZ=ON): the tree tests/fuzz/run.sh fuzzes
#                                          in and tests/sanitize/run.sh asan runs ctest in, so one
#                                          sanitizer build serves both
#   tests/sanitize/configure.sh tsan DIR   clang, ThreadSanitizer
#
# Both trees leave out CUDA and the benchmarks and compile with -O1 -gline-tables-only: fast enough
# to run the suite, cheap to build on a 2-core CI runner, and still file:line in every report.
# Assertions stay on (no NDEBUG). Extra configure arguments: CUTLINE_SANITIZE_CMAKE_ARGS.
set -euo pipefail
kind=${1:?usage: configure.sh asan|tsan DIR}
dir=${2:?usage: configure.sh asan|tsan DIR}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
flags="-O1 -gline-tables-only"
args=(-G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
      -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=$flags" "-DCMAKE_CXX_FLAGS_DEBUG=$flags"
      -DCUTLINE_CUDA=OFF -DCUTLINE_BUILD_BENCH=OFF -DCUTLINE_BUILD_TESTS=ON)
case "$kind" in
  asan) args+=(-DCUTLINE_FUZZ=ON -DCUTLINE_SANITIZE=address,undefined) ;;
  tsan) args+=(-DCUTLINE_FUZZ=OFF -DCUTLINE_SANITIZE=thread) ;;
  *) echo "configure.sh: unknown sanitizer build '$kind' (asan or tsan)" >&2; exit 2 ;;
esac
mkdir -p "$dir"
# shellcheck disable=SC2086
cmake -S "$root" -B "$dir" "${args[@]}" ${CUTLINE_SANITIZE_CMAKE_ARGS:-} >"$dir/configure.log" 2>&1 ||
  { cat "$dir/configure.log"; exit 1; }
