#!/usr/bin/env bash
# Builds Cutline with sanitizers and runs its tests there (deploy/test.sh runs both when
# CUTLINE_SANITIZERS=1).
#
#   tests/sanitize/run.sh asan   ASan + UBSan (LeakSanitizer included): the whole ctest suite, in
#                                the libFuzzer tree $CUTLINE_FUZZ_BUILD (default build-fuzz/) that
#                                tests/fuzz/run.sh fuzzes in: one sanitizer build serves both.
#   tests/sanitize/run.sh tsan   ThreadSanitizer: the tests that run threads (ctest label `tsan`:
#                                gateway unit and integration tests, the engine's unit tests), in
#                                $CUTLINE_TSAN_BUILD (default build-tsan/); only their targets
#                                are built.
#
# Every process a test starts (the gateway, the backend, the fake upstream) inherits the sanitizer
# options, which write each report to $TREE/sanitizer-reports/<kind>.<pid> instead of stderr,
# where a child's report could go unseen. The run fails when a test fails or when any report was
# written, and prints the reports. A report is a bug to fix, not to suppress:
# tests/sanitize/*.supp hold only documented false positives in third-party code.
# JOBS (default 2) sets build and ctest parallelism.
set -uo pipefail
kind=${1:?usage: tests/sanitize/run.sh asan|tsan}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
jobs="${JOBS:-2}"
if ! command -v clang++ >/dev/null; then
  echo "sanitize: clang++ not found" >&2
  [[ "${CI:-}" == true ]] && exit 1
  exit 0
fi

case "$kind" in
  asan)
    tree="${CUTLINE_FUZZ_BUILD:-$root/build-fuzz}"
    targets=(all)
    ctest_filter=()
    ;;
  tsan)
    tree="${CUTLINE_TSAN_BUILD:-$root/build-tsan}"
    # What the `tsan`-labelled tests run: their binaries and the processes they start.
    targets=(gateway_unit_tests engine_unit_tests gateway_integration_tests gateway_http2_tests
             cutline-gateway cutline-fake-upstream)
    ctest_filter=(-L tsan)
    ;;
  *) echo "sanitize: unknown kind '$kind' (asan or tsan)" >&2; exit 2 ;;
esac

bash "$root/tests/sanitize/configure.sh" "$kind" "$tree" || exit 1
echo "== sanitize $kind: building ${targets[*]} in $tree"
if ! cmake --build "$tree" -j"$jobs" --target "${targets[@]}" >"$tree/build.log" 2>&1; then
  tail -40 "$tree/build.log"
  echo "sanitize $kind: BUILD FAILED (see $tree/build.log)"
  exit 1
fi

reports="$tree/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
supp="$root/tests/sanitize"
case "$kind" in
  asan)
    export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
    export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp"
    ;;
  tsan)
    export TSAN_OPTIONS="log_path=$reports/tsan:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
    ;;
esac

echo "== sanitize $kind: ctest ${ctest_filter[*]}"
(cd "$tree" && ctest --output-on-failure -j "$jobs" --timeout 600 "${ctest_filter[@]}")
status=$?
# A test that runs out of descriptors opens its report file ahead (accept_backoff_test.cc): an
# empty file is no report.
find "$reports" -type f -empty -delete
shopt -s nullglob
found=("$reports"/*)
if ((${#found[@]})); then
  echo "sanitize $kind: ${#found[@]} report(s):"
  for f in "${found[@]}"; do
    echo "---- $f"
    head -60 "$f"
  done
  status=1
fi
if ((status == 0)); then
  echo "sanitize $kind: clean"
else
  echo "sanitize $kind: FAILED"
fi
exit "$status"
