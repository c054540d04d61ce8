#!/bin/sh
# CPU decode benchmark: writes ~1.2 GiB models per weight type under $BENCH_DIR, then
# measures in one run, side by side: STREAM-style memory bandwidth, batch-1 decode tokens/s and
# its share of the bandwidth roofline, batch-8 vs batch-1 throughput, prefill tokens/s at 512,
# with CPU milliseconds per token beside each (on a shared machine compare those and the ratios;
# the load average is printed at start and end). First, matmul_bench: the matmul kernels alone in
# the calling thread's CPU time (1 thread), per type (the same --types) and batch size. Its
# batch-1 w_GB/s times the thread count estimates how fast the cores can run the kernels at all:
# where that is near or below 80 % of read_GB/s, batch-1 decode is bound by the kernels'
# arithmetic as much as by memory, and its roofline share stays near that ratio.
#   BUILD=build tests/bench/run_decode_bench.sh [--types f16,q8_0,q4_k] [--layers 10] [--keep]
#                                               [--repeats N]
# --repeats N alternates batch-1 decode with the bandwidth run N times (3 unless given):
# dec1_tok/s, read_GB/s and the roofline are then medians (the roofline the median of each pair's
# ratio).
# --types takes any weight type by name: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q2_k q3_k q4_k q5_k q6_k
# iq4_nl iq4_xs (the quantized models are written with Cutline's reference quantizers).
# Models are written once and reused with --keep. To pin the run: taskset -c 0,1 nice -n -5 ...
set -eu
BUILD=${BUILD:-build}
BENCH_DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/cutline-decode-bench}
mkdir -p "$BENCH_DIR"
cmake --build "$BUILD" --target decode_bench matmul_bench >/dev/null
types=f16,q8_0,q4_k prev=
for a in "$@"; do
  if [ "$prev" = --types ]; then types=$a; fi
  prev=$a
done
"$BUILD/tests/bench/matmul_bench" --reps 50 --types "$types"
exec "$BUILD/tests/bench/decode_bench" --dir "$BENCH_DIR" --repeats 3 "$@"
