#!/usr/bin/env bash
# Routing with model residency, side by side in one run: three real cutline-backend processes,
# two synthesized models (model-a, model-b) of which each backend holds ONE resident (its
# --weights-memory fits one), so serving the other model is an eviction and a load. Three
# gateways over the same three backends differ only in how their pool picks an endpoint:
#   round_robin     balance: round_robin, no load reports (residency unknown to the gateway)
#   least_request   balance: least_request, no load reports
#   residency       balance: least_request, load_report: cutline (prefers an endpoint where the
#                   model is resident; routed_cold when none has it)
# In each round every policy gets the same request sequence (seeded: model-a and model-b mixed,
# B_SHARE of them model-b) from CONCURRENCY clients: streamed /v1/completions of a few prompt
# tokens, MAX_TOKENS tokens each (ignore_eos; tests/bench/routing_load.py). Before each policy the
# backends are put back to their starting residency (model-a, model-b, model-a) by direct
# requests; the loads those take are not counted.
#
#   tests/bench/run_routing_bench.sh [BUILD_DIR]
#
# Prints per policy: TTFT p50/p99 as the client saw it (request sent -> first text),
# model loads (the backends' cutline_backend_model_load_seconds_count{phase="total"}, summed,
# after minus before), the share of requests the backends served cold (the stop record's
# model_state: cold / evicted_then_loaded), the share the gateway routed cold (its
# cutline_upstream_endpoint_picked_cold_total; only the residency gateway knows), then the
# ratios round_robin / residency for loads and TTFT p99. Beside them, where the backends say the
# time to first token went, summed over the policy's requests: queue (waiting for a batch slot or
# for the evicted model's running sequences to end), load + warmup, prefill + first decode.
#
# Environment: REQUESTS (per policy and round, default 60), CONCURRENCY (3), B_SHARE (0.33: the
# traffic split matches the placement, 2 backends of model-a, 1 of model-b), MAX_TOKENS (4),
# LAYERS and DIM (model shape, default 8 x 1024: 179 MiB F16 each), KV_MEMORY (each backend's
# --kv-memory, default the backend's 256MiB), MODEL_DIR (where the models are written, once;
# default a temp dir), ROUNDS (2; the policies' order rotates each round, the table shows the
# median over rounds).
#
# What a load costs here: the files stay in the page cache, so a load is a copy at ~2 GB/s plus
# one warm-up step, ~100-200 ms for 179 MiB on this 2-core VM; a warm request's prefill of a
# few tokens plus its first decode step is ~100-150 ms with three backends sharing the cores.
# A load costs about one warm time to first token, not ten: the TTFT ratios are this host's.
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
REQUESTS=${REQUESTS:-60}
CONCURRENCY=${CONCURRENCY:-3}
B_SHARE=${B_SHARE:-0.33}
MAX_TOKENS=${MAX_TOKENS:-4}
KV_MEMORY=${KV_MEMORY:-256MiB}
LAYERS=${LAYERS:-8}
DIM=${DIM:-1024}
ROUNDS=${ROUNDS:-2}
WORK=$(mktemp -d /tmp/cutline-routing-bench-XXXXXX)
MODEL_DIR=${MODEL_DIR:-$WORK}
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

for m in a b; do
  f="$MODEL_DIR/model-$m.gguf"
  [[ -s "$f" ]] || "$BUILD/tools/cutline" model synth --out "$f" --layers "$LAYERS" --dim "$DIM" \
    --seed "$([[ $m = a ]] && echo 1 || echo 2)" --name "model-$m" >/dev/null 2>&1
done
BYTES=$(stat -c %s "$MODEL_DIR/model-a.gguf")
BUDGET=$((BYTES + 1048576))  # room for one model, not two
echo "models: 2 x $((BYTES / 1048576)) MiB ($LAYERS layers, dim $DIM, F16); weights budget $((BUDGET / 1048576)) MiB per backend"

# Backend i starts with HOME[i] resident (the first --model is loaded at start-up).
HOME_MODEL=(a b a)
BACKEND_PORTS=()
for i in 0 1 2; do
  first=${HOME_MODEL[$i]}; second=$([[ $first = a ]] && echo b || echo a)
  "$BUILD/backend/cutline-backend" --port 0 --device cpu --threads 1 --kv-memory "$KV_MEMORY" \
    --weights-memory "$BUDGET" --cache-dir "$WORK/cache" \
    --model "model-$first=$MODEL_DIR/model-$first.gguf" \
    --model "model-$second=$MODEL_DIR/model-$second.gguf" >"$WORK/backend$i.out" 2>"$WORK/backend$i.err" &
  PIDS+=($!)
done
for i in 0 1 2; do
  for _ in $(seq 600); do grep -q "listening on" "$WORK/backend$i.out" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$WORK/backend$i.out")
  [[ -n "$port" ]] || { echo "backend $i did not start:"; cat "$WORK/backend$i.err"; exit 1; }
  BACKEND_PORTS+=("$port")
done
ENDPOINTS=$(printf '"http://127.0.0.1:%s", ' "${BACKEND_PORTS[@]}")
ENDPOINTS="[${ENDPOINTS%, }]"

POLICIES=(round_robin least_request residency)
declare -A GW_PORT GW_ADMIN
for p in "${POLICIES[@]}"; do
  case $p in
    round_robin) keys="    balance: round_robin" ;;
    least_request) keys="    balance: least_request" ;;
    residency) keys=$'    balance: least_request\n    load_report: {from: cutline, interval: 100ms, stale_after: 1s}' ;;
  esac
  cat >"$WORK/$p.yaml" <<YAML
listen:
  - address: 127.0.0.1:0
admin:
  address: 127.0.0.1:0
access_log: "off"
upstreams:
  - name: backends
    endpoints: $ENDPOINTS
    models: ["model-*"]
$keys
policies:
  - name: bench
    match: {}
YAML
  "$BUILD/gateway/cutline-gateway" --config "$WORK/$p.yaml" --workers 1 \
    --ready-file "$WORK/$p.ready" >"$WORK/$p.out" 2>"$WORK/$p.err" &
  PIDS+=($!)
  for _ in $(seq 200); do [[ -s "$WORK/$p.ready" ]] && break; sleep 0.05; done
  [[ -s "$WORK/$p.ready" ]] || { echo "gateway $p did not start:"; cat "$WORK/$p.err"; exit 1; }
  GW_PORT[$p]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$WORK/$p.ready")
  GW_ADMIN[$p]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["admin_port"])' "$WORK/$p.ready")
done

# The backends' model loads so far (every model, phase total).
loads() {
  local sum=0 port n
  for port in "${BACKEND_PORTS[@]}"; do
    n=$(curl -s "http://127.0.0.1:$port/metrics" |
        awk '/^cutline_backend_model_load_seconds_count\{.*phase="total"/{s += $2} END{print s + 0}')
    sum=$((sum + n))
  done
  echo "$sum"
}
picked_cold() {
  curl -s "http://127.0.0.1:$1/metrics" |
    awk '/^cutline_upstream_endpoint_picked_cold_total\{/{s += $2} END{print s + 0}'
}
# Back to the starting residency: one direct request per backend for its home model.
reset_residency() {
  local i
  for i in 0 1 2; do
    curl -s -o /dev/null "http://127.0.0.1:${BACKEND_PORTS[$i]}/v1/chat/completions" \
      -H 'Content-Type: application/json' \
      -d "{\"model\":\"model-${HOME_MODEL[$i]}\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"reset\"}]}"
  done
  sleep 1  # the residency gateway's reports catch up (polled every 100 ms)
}

: >"$WORK/results.txt"
for round in $(seq "$ROUNDS"); do
  order=("${POLICIES[@]:$(( (round - 1) % 3 ))}" "${POLICIES[@]:0:$(( (round - 1) % 3 ))}")
  for p in "${order[@]}"; do
    reset_residency
    before=$(loads); cold_before=$(picked_cold "${GW_ADMIN[$p]}")
    python3 "$ROOT/tests/bench/routing_load.py" --port "${GW_PORT[$p]}" --requests "$REQUESTS" \
      --concurrency "$CONCURRENCY" --b-share "$B_SHARE" --max-tokens "$MAX_TOKENS" \
      --seed "$round" >"$WORK/$p.$round.json"
    after=$(loads); cold_after=$(picked_cold "${GW_ADMIN[$p]}")
    echo "$p $round $((after - before)) $((cold_after - cold_before)) $(cat "$WORK/$p.$round.json")" |
      tee -a "$WORK/results.txt" >&2
  done
done

python3 - "$WORK/results.txt" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, rnd, loads, picked_cold, js = line.split(" ", 4)
    r = json.loads(js)
    r["loads"] = int(loads)
    r["picked_cold"] = int(picked_cold)
    rows.setdefault(name, []).append(r)

def med(name, key):
    return statistics.median(r[key] for r in rows[name])

print()
print(f"{'policy':<14} {'requests':>8} {'errors':>6} {'ttft p50 ms':>11} {'ttft p99 ms':>11} "
      f"{'loads':>6} {'served cold':>11} {'routed cold':>11}   backend TTFT phases, s in all")
for name in ("round_robin", "least_request", "residency"):
    n = med(name, "requests")
    routed = (f"{med(name, 'picked_cold') / n:.0%}" if name == "residency" else "unknown")
    ph = {k: statistics.median(r["phase_ms"][k] for r in rows[name]) / 1000
          for k in ("queue", "load", "compute")}
    print(f"{name:<14} {n:>8.0f} {med(name, 'errors'):>6.0f} {med(name, 'ttft_p50_ms'):>11.0f} "
          f"{med(name, 'ttft_p99_ms'):>11.0f} {med(name, 'loads'):>6.0f} "
          f"{med(name, 'served_cold') / n:>11.0%} {routed:>11}   queue {ph['queue']:.1f} "
          f"load+warmup {ph['load']:.1f} prefill+decode {ph['compute']:.1f}")
rr_loads, res_loads = med("round_robin", "loads"), med("residency", "loads")
rr_p99, res_p99 = med("round_robin", "ttft_p99_ms"), med("residency", "ttft_p99_ms")
lr_loads, lr_p99 = med("least_request", "loads"), med("least_request", "ttft_p99_ms")
ratio = lambda a, b: f"{a / b:.1f}x" if b > 0 else f"{a:.0f} vs 0"
print()
print(f"round_robin / residency: loads {ratio(rr_loads, res_loads)}, ttft p99 {ratio(rr_p99, res_p99)}")
print(f"least_request / residency: loads {ratio(lr_loads, res_loads)}, ttft p99 {ratio(lr_p99, res_p99)}")
PY
