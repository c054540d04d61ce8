#!/usr/bin/env bash
# The GPU checks, in one run (about 8 minutes on an H200), everything written to $OUT:
#   build        configure and build with CUDA for this GPU's architecture (nvidia-smi compute_cap)
#   conformance  every device op and weight type, CUDA against the plain reference (gtest JSON)
#   invariance   the engine on the real synthesized model, run on the CUDA device
#   bandwidth    the GPU's read and copy bandwidth (tests/gpu/device_bandwidth.cu)
#   decode       batch-1 decode against the HBM roofline (bytes per token / measured bandwidth),
#                prefill at 512 tokens, aggregate decode at 1/8/32/64 concurrent, per weight type
#   e2e          cutline probe load through the gateway on a CUDA backend
# Without a usable GPU (no nvidia-smi, no GPU listed, no nvcc, or CUTLINE_GPU_DISABLE=1) it builds
# nothing, writes "SKIP <step>: <reason>" for every step and exits 0; a ctest test checks that.
# Exit status: 0 when every step that ran passed, 1 otherwise. $OUT/summary.txt lists each step.
#   OUT=/tmp/gpu-out BUILD=build-gpu TYPES=f16,q8_0,q4_k bash tests/gpu/run.sh
# With CUTLINE_GPU_PREBUILT=1 the build step is skipped and $BUILD's binaries run as they are
# (tests/gpu/bundle.sh packs them, with their libraries, for a machine without the build's
# dependencies).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$root/gpu-out}
BUILD=${BUILD:-$root/build-gpu}
TYPES=${TYPES:-f16,q8_0,q4_k}
mkdir -p "$OUT"
summary=$OUT/summary.txt
: >"$summary"
steps=(build conformance invariance bandwidth decode e2e)
failed=0

say() { echo "$*" | tee -a "$summary"; }

# run_step NAME SECONDS CMD...: the command's output goes to $OUT/NAME.log.
run_step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  # timeout runs programs, not shell functions: a step that is a function of this script runs in
  # a child bash given its definition (the variables it reads are exported below).
  if declare -F "$1" >/dev/null; then
    set -- bash -c "$(declare -f "$1"); $(printf '%q ' "$@")"
  fi
  if timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; then
    say "PASS $name ($((SECONDS - t0)) s)"
  else
    say "FAIL $name (exit $?, $((SECONDS - t0)) s; see $name.log)"
    failed=1
  fi
}

# Why there is no GPU to test on, or nothing when there is one.
no_gpu_reason() {
  if [[ "${CUTLINE_GPU_DISABLE:-}" == 1 ]]; then echo "CUTLINE_GPU_DISABLE=1"; return; fi
  if ! command -v nvidia-smi >/dev/null 2>&1; then echo "nvidia-smi not found (no NVIDIA driver)"; return; fi
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then echo "nvidia-smi lists no GPU"; return; fi
  if ! command -v nvcc >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
    echo "nvcc not found (no CUDA toolkit)"
    return
  fi
}

reason=$(no_gpu_reason)
if [[ -n "$reason" ]]; then
  say "no GPU: $reason"
  for s in "${steps[@]}"; do say "SKIP $s: $reason"; done
  say "verified on a GPU: nothing (every step skipped)"
  exit 0
fi

nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv >"$OUT/gpu.txt" 2>&1
say "GPU: $(sed -n 2p "$OUT/gpu.txt")"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
export PATH=$PATH:/usr/local/cuda/bin
export root OUT BUILD TYPES arch

configure_and_build() {
  cmake -S "$root" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUTLINE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCUTLINE_BUILD_TESTS=ON -DCUTLINE_BUILD_BENCH=ON &&
    cmake --build "$BUILD" -j "$(nproc)" --target device_unit_tests engine_tiny_model_tests \
      decode_bench device_bandwidth cutline-backend cutline-gateway cutline
}
# CUTLINE_GPU_PREBUILT=1: $BUILD already holds the binaries, built elsewhere for this GPU's
# architecture (tests/gpu/bundle.sh), for a GPU machine whose image cannot build Cutline.
if [[ "${CUTLINE_GPU_PREBUILT:-}" == 1 ]]; then
  say "SKIP build: prebuilt binaries in $BUILD (CUTLINE_GPU_PREBUILT=1)"
else
  run_step build 300 configure_and_build
fi
if [[ $failed == 1 ]]; then
  for s in "${steps[@]:1}"; do say "SKIP $s: the build failed"; done
  exit 1
fi

# The CUDA cases exist only when the device comes up: zero tests run is a failure, not a pass.
conformance() {
  "$BUILD/tests/unit/backend/device/device_unit_tests" --gtest_filter='*cuda*' \
    --gtest_output="json:$OUT/conformance.json" || return 1
  grep -q '"tests": [1-9]' "$OUT/conformance.json" || { echo "no CUDA test ran"; return 1; }
}
run_step conformance 120 conformance
run_step invariance 120 env CUTLINE_TEST_DEVICE=cuda \
  "$BUILD/tests/unit/backend/engine/tiny_model/engine_tiny_model_tests" --gtest_output="json:$OUT/invariance.json"
run_step bandwidth 60 "$BUILD/tests/gpu/device_bandwidth"
read_gbs=$(sed -n 's/^read_gbs=\([0-9.]*\).*/\1/p' "$OUT/bandwidth.log")
if [[ -n "$read_gbs" ]]; then
  run_step decode 240 "$BUILD/tests/bench/decode_bench" --device cuda --bandwidth-gbs "$read_gbs" \
    --types "$TYPES" --batches 1,8,32,64 --steps 64 --dir "${TMPDIR:-/tmp}"
else
  say "SKIP decode: no bandwidth figure to compute the roofline with"
fi

# End to end: a CUDA backend on a synthesized model, the gateway in front, the probe through it.
e2e() {
  local dir=$OUT/e2e bport=18181 gport=18180 aport=19190
  mkdir -p "$dir"
  "$BUILD/tools/cutline" model synth --out "$dir/model.gguf" --layers 8 --dim 1024 --heads 16 \
    --kv-heads 4 --ffn 2816 --type q8_0 || return 1
  cat >"$dir/gateway.yaml" <<YAML
listen:
  - address: 127.0.0.1:$gport
admin:
  address: 127.0.0.1:$aport
access_log: $dir/access.log
upstreams:
  - name: gpu
    url: http://127.0.0.1:$bport
    models: ["gpu"]
policies:
  - name: interactive
    match: {models: ["*"], routes: ["/v1/chat/completions", "/v1/completions"]}
    budget: {max_output_tokens: 128}
    deadline: 60s
    admission: {max_concurrent: 64, queue_depth: 256, queue_timeout: 30s}
YAML
  "$BUILD/backend/cutline-backend" --port "$bport" --model "gpu=$dir/model.gguf" --device cuda \
    >"$dir/backend.log" 2>&1 &
  local backend=$!
  "$BUILD/gateway/cutline-gateway" --config "$dir/gateway.yaml" >"$dir/gateway.log" 2>&1 &
  local gateway=$!
  local ok=1
  for _ in $(seq 120); do
    if curl -sf "http://127.0.0.1:$aport/readyz" >/dev/null; then ok=0; break; fi
    sleep 0.5
  done
  if [[ $ok == 0 ]]; then
    "$BUILD/tools/cutline" probe load --url "http://127.0.0.1:$gport" --model gpu \
      --admin-url "http://127.0.0.1:$aport" --concurrency 1,8,32 --max-tokens 64 \
      --out "$dir/probe" --no-progress
    ok=$?
  else
    echo "the gateway was not ready in 60 s"
  fi
  kill "$gateway" "$backend" 2>/dev/null
  wait "$gateway" "$backend" 2>/dev/null
  grep -q 'device: cuda\|cuda' "$dir/backend.log" || echo "note: the backend log does not name the CUDA device"
  return "$ok"
}
run_step e2e 180 e2e

verified=$(grep '^PASS' "$summary" | sed 's/^PASS \([a-z0-9]*\).*/\1/' | tr '\n' ' ')
say "verified on a GPU: ${verified:-nothing}"
exit "$failed"
