#!/usr/bin/env bash
# Model load throughput vs file-read bandwidth (target >= 80%).
#   tests/bench/run_residency_load_bench.sh [BUILD_DIR] [bench options...]
# Options: --model PATH (a real GGUF) or --layers N --dim D for the synthesized one (default
# 12 x 1024, ~290 MB F16), --reps R, --dir DIR (where the synthesized file goes; pick a real disk,
# not tmpfs, to measure a disk).
set -euo pipefail
BUILD_DIR=${1:-build}
shift || true
cmake --build "$BUILD_DIR" --target residency_load_bench -j2 >/dev/null
exec "$BUILD_DIR/tests/bench/residency_load_bench" "$@"
