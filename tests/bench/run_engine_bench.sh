#!/bin/sh
# Engine benchmarks (issue 6), side by side in one run on synthesized models through the real
# LlamaRunner on the CPU device:
#   stall:      ITL p50/p99 of 4 decoding streams while a 2,048-token prompt is prefilled, for
#               several --max-step-tokens values (the largest = one-step prefill, the spike)
#   throughput: aggregate output tokens/s at concurrency 1, 2, 4, 8, 16 and the ratio to 1
# Models are synthesized once under $BENCH_DIR (the large one is ~1.1 GiB).
#   BUILD=build tests/bench/run_engine_bench.sh [--models tiny,medium,large] [--scenario stall]
#       [--budgets 16,32,64,512,4096] [--levels 1,2,4,8,16] [--gen 32] [--threads N]
set -eu
BUILD=${BUILD:-build}
BENCH_DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/cutline-engine-bench}
mkdir -p "$BENCH_DIR"
cmake --build "$BUILD" --target engine_bench >/dev/null
exec "$BUILD/tests/bench/engine_bench" --dir "$BENCH_DIR" "$@"
