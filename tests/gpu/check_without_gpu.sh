#!/usr/bin/env bash
# tests/gpu/run.sh on a machine without a GPU (forced with CUTLINE_GPU_DISABLE=1, so the check
# means the same on a machine that has one): exit 0, nothing built, and every step named as
# skipped with the reason, in the output and in $OUT/summary.txt.
#   check_without_gpu.sh RUN_SH OUT_DIR
set -euo pipefail
run_sh=$1 out=$2
rm -rf "$out"
output=$(CUTLINE_GPU_DISABLE=1 OUT="$out" BUILD="$out/build" bash "$run_sh")
echo "$output"
for step in build conformance invariance bandwidth decode e2e; do
  grep -qx "SKIP $step: CUTLINE_GPU_DISABLE=1" "$out/summary.txt" ||
    { echo "FAIL: step '$step' is not reported as skipped"; exit 1; }
done
grep -qx "verified on a GPU: nothing (every step skipped)" <<<"$output" ||
  { echo "FAIL: the output does not say that nothing was verified"; exit 1; }
[[ ! -e "$out/build" ]] || { echo "FAIL: the script configured a build without a GPU"; exit 1; }
echo "run.sh without a GPU: every step skipped by name, exit 0"
