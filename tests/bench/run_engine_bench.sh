#!/bin/sh
# Engine benchmarks, side by side in one run on synthesized models through the real
# LlamaRunner on the CPU device:
#   stall:      ITL of 4 decoding streams before (steady), during and after the prefill of a
#               2,048-token prompt, for several scheduler settings BUDGET[:ATTN] (max-step-tokens
#               and, optionally, attention_positions_per_token); the first setting is the chunked
#               one judged against the target (during p99 <= 1.5x steady p50), the last one is
#               the one-step (unchunked) prefill; a summary line gives both as ratios.
#   throughput: aggregate output tokens/s at concurrency 1, 2, 4, 8, 16 and the ratio to 1
# Models are synthesized once under $BENCH_DIR (the large one is ~1.1 GiB, F16).
# On a shared or loaded machine measure compute, not wall time: --threads 1 --clock cpu (every
# time is the engine thread's CPU time, and with one thread the whole step runs on it).
#   BUILD=build-engine tests/bench/run_engine_bench.sh --models tiny,medium --scenario stall \
#       --budgets 8,16,64:128,4096 --threads 1 --clock cpu
#   BUILD=build-engine tests/bench/run_engine_bench.sh --models tiny,large --scenario throughput \
#       --levels 1,2,4,8,16 --gen 32 [--threads 1 --clock cpu]
set -eu
BUILD=${BUILD:-build}
BENCH_DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/cutline-engine-bench}
mkdir -p "$BENCH_DIR"
cmake --build "$BUILD" --target engine_bench >/dev/null
echo "load: $(cat /proc/loadavg)"
"$BUILD/tests/bench/engine_bench" --dir "$BENCH_DIR" "$@"
echo "load: $(cat /proc/loadavg)"
