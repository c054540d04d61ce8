#!/usr/bin/env bash
# Builds the libFuzzer build of Cutline and runs every fuzz target for a while.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET (default 20)] [TARGET_REGEX (default: all)]
#
# With FUZZ_RUNS=N set, each target runs N inputs with a fixed FUZZ_SEED (default 1) instead of
# for a time: the run is then reproducible, which is what CI uses (deploy/test.sh) so that a
# developer's passing run is exactly what CI repeats. Time-based runs explore; fixed runs check.
#
# The build (clang, -DCUTLINE_FUZZ=ON, ASan + UBSan, every library compiled with
# -fsanitize=fuzzer-no-link so that libFuzzer sees coverage inside the parsers, not only in the
# target file; tests/sanitize/configure.sh asan) goes to $CUTLINE_FUZZ_BUILD (default build-fuzz/),
# where tests/sanitize/run.sh asan also runs the whole test suite. Each target starts from a copy of
# its seed corpus tests/fuzz/corpus/<target>/ and may add inputs to that copy only. A crash leaves
# its reproducer under build-fuzz/fuzz-artifacts/<target>/; fix the bug, then copy the reproducer
# into tests/fuzz/corpus/<target>/ so that every build replays it (ctest fuzz_replay.<target>).
# Exit status: 0 when every target ran clean, 1 otherwise.
set -uo pipefail

seconds="${1:-20}"
filter="${2:-.}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${CUTLINE_FUZZ_BUILD:-$root/build-fuzz}"
jobs="${JOBS:-2}"

if ! command -v clang++ >/dev/null; then
  echo "run.sh: clang++ not found; fuzz targets are only replayed over their corpus (ctest)" >&2
  exit 0
fi

# The same tree as tests/sanitize/run.sh asan (tests/sanitize/configure.sh), so that CI builds
# the libraries once for fuzzing and for the ASan + UBSan test suite.
bash "$root/tests/sanitize/configure.sh" asan "$build" || exit 1

targets=()
for src in "$root"/tests/fuzz/*_fuzz.cc; do
  name="$(basename "$src" .cc)"
  [[ "$name" =~ $filter ]] && targets+=("$name")
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

failed=()
for t in "${targets[@]}"; do
  # A target whose library is not part of this build (e.g. a module not built) is skipped.
  if ! cmake --build "$build" --target "$t" -j"$jobs" >"$build/$t.build.log" 2>&1; then
    if grep -q "unknown target" "$build/$t.build.log"; then
      echo "== $t: not in this build, skipped"
      continue
    fi
    echo "== $t: BUILD FAILED (see $build/$t.build.log)"
    tail -20 "$build/$t.build.log"
    failed+=("$t")
    continue
  fi
  work="$build/fuzz-corpus/$t"
  artifacts="$build/fuzz-artifacts/$t"
  mkdir -p "$work" "$artifacts"
  [[ -d "$root/tests/fuzz/corpus/$t" ]] && cp -n "$root/tests/fuzz/corpus/$t"/* "$work"/ 2>/dev/null
  if [[ -n "${FUZZ_RUNS:-}" ]]; then
    budget=(-runs="$FUZZ_RUNS" -seed="${FUZZ_SEED:-1}")
    echo "== $t: ${FUZZ_RUNS} runs, seed ${FUZZ_SEED:-1}"
  else
    budget=(-max_total_time="$seconds")
    echo "== $t: ${seconds}s"
  fi
  if "$build/tests/fuzz/$t" "${budget[@]}" -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$artifacts/" "$work" >"$build/$t.fuzz.log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$build/$t.fuzz.log" | tail -2
  else
    echo "== $t: FAILED; reproducer(s) in $artifacts/:"
    ls "$artifacts"
    grep -E "ERROR|SUMMARY|runtime error" "$build/$t.fuzz.log" | head -5
    failed+=("$t")
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) ran clean"
