#!/usr/bin/env bash
# HTTP/2 through the gateway vs through nginx, side by side in one run.
# h2load drives streaming chat completions over h2c (prior knowledge) and over TLS (ALPN h2, the
# same self-signed certificate for both proxies) through cutline-gateway (parsing every chunk and
# enforcing a policy with deadline/ttft/idle timers that never fire) and through nginx
# (`http2`, proxy_buffering off), both in front of the same scripted fake upstream over HTTP/1.1.
# Each configuration runs ROUNDS times, alternating gateway and nginx, and the script reports the
# median of the rounds for requests/s and latency percentiles (from h2load's per-request log), and
# the gateway/nginx ratios, with each proxy's CPU time per request (from /proc: robust when the
# machine is busy, unlike the latencies).
#
#   tests/bench/run_h2_bench.sh [BUILD_DIR] [REQUESTS] [CLIENTS] [STREAMS_PER_CLIENT] [TOKENS]
#   (defaults: build 4000 10 10 50; ROUNDS=3 in the environment)
set -euo pipefail
BUILD=${1:-build}
REQUESTS=${2:-4000}
CLIENTS=${3:-10}
STREAMS=${4:-10}
TOKENS=${5:-50}
ROUNDS=${ROUNDS:-3}
NGINX=${NGINX:-/usr/sbin/nginx}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
command -v h2load >/dev/null || { echo "h2load missing (Debian package nghttp2-client)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/cutline-h2-bench-XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
ulimit -n 20000 2>/dev/null || true
free_port() { python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])"; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
  -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null

"$BUILD/tests/support/cutline-fake-upstream" --port 0 >"$WORK/fake.out" 2>"$WORK/fake.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q PORT "$WORK/fake.out" 2>/dev/null && break; sleep 0.05; done
FAKE_PORT=$(awk '/PORT/{print $2}' "$WORK/fake.out")

start_gateway() {  # name tls(0|1); sets GW_PORT (not a subshell: PIDS must see the process)
  local name=$1 tls=$2 tls_yaml=""
  if [[ $tls == 1 ]]; then
    tls_yaml="    tls: {cert: $WORK/cert.pem, key: $WORK/key.pem, min_version: \"1.2\"}"
  fi
  cat >"$WORK/$name.yaml" <<YAML
listen:
  - address: 127.0.0.1:0
$tls_yaml
admin:
  address: 127.0.0.1:0
access_log: $WORK/$name-access.log
upstreams:
  - name: fake
    url: http://127.0.0.1:$FAKE_PORT
    models: ["fake"]
policies:
  - name: bench
    match: {}
    budget: {max_output_tokens: 4096}
    deadline: 120s
    ttft_timeout: 30s
    idle_timeout: 30s
YAML
  "$BUILD/gateway/cutline-gateway" --config "$WORK/$name.yaml" --workers 2 \
    --ready-file "$WORK/$name.ready.json" 2>"$WORK/$name.err" &
  GW_PID=$!
  PIDS+=($GW_PID)
  for _ in $(seq 200); do [[ -s "$WORK/$name.ready.json" ]] && break; sleep 0.05; done
  GW_PORT=$(python3 -c "import json;print(json.load(open('$WORK/$name.ready.json'))['port'])")
}
start_gateway gw-h2c 0; GW_H2C=$GW_PORT; GW_H2C_PID=$GW_PID
start_gateway gw-tls 1; GW_TLS=$GW_PORT; GW_TLS_PID=$GW_PID

NG_H2C=$(free_port)
NG_TLS=$(free_port)
mkdir -p "$WORK/nginx/logs"
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes 2;
worker_rlimit_nofile 20000;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 20000; }
http {
  access_log $WORK/nginx/logs/access.log;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  http2_max_concurrent_streams 256;
  upstream fake { server 127.0.0.1:$FAKE_PORT; keepalive 1024; }
  server {
    listen 127.0.0.1:$NG_H2C http2;
    listen 127.0.0.1:$NG_TLS ssl http2;
    ssl_certificate $WORK/cert.pem;
    ssl_certificate_key $WORK/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 120s;
    }
  }
}
CONF
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' &
NGINX_PID=$!
PIDS+=($NGINX_PID)
for _ in $(seq 100); do [[ -s "$WORK/nginx/nginx.pid" ]] && break; sleep 0.05; done
sleep 0.3
NGINX_PIDS="$NGINX_PID $(pgrep -P "$NGINX_PID" | tr '\n' ' ')"

cpu_ticks() {  # utime+stime of the given processes, in clock ticks
  local t=0 p
  for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}

printf '{"model":"fake","messages":[{"role":"user","content":"hello"}],"stream":true,"max_tokens":%d}' \
  "$TOKENS" >"$WORK/body.json"

run() {  # name url round pids...
  local name=$1 url=$2 round=$3 log="$WORK/$1.$3.log"
  shift 3
  local before after
  before=$(cpu_ticks "$@")
  h2load -n "$REQUESTS" -c "$CLIENTS" -m "$STREAMS" -t 1 -d "$WORK/body.json" \
    -H 'content-type: application/json' -H "x-fake-script: tokens=$TOKENS" \
    --log-file="$log" "$url" >"$WORK/$name.$round.out" 2>&1 || true
  after=$(cpu_ticks "$@")
  python3 - "$name" "$log" "$WORK/$name.$round.out" "$((after - before))" "$(getconf CLK_TCK)" <<'PY' | tee -a "$WORK/results.jsonl"
import json, re, sys
name, log, out = sys.argv[1:4]
cpu_s = int(sys.argv[4]) / float(sys.argv[5])
text = open(out).read()
m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", text)
reqs = float(m.group(3)) if m else 0.0
st = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", text)
codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
lat = []
for line in open(log):
    parts = line.split()
    if len(parts) >= 3 and parts[1].startswith("2"):
        lat.append(int(parts[2]) / 1000.0)  # us -> ms
lat.sort()
def pct(p): return lat[min(len(lat) - 1, int(p / 100.0 * len(lat)))] if lat else float("nan")
print(json.dumps({"path": name, "req_per_s": reqs, "succeeded": int(st.group(4)) if st else 0,
                  "failed": int(st.group(5)) + int(st.group(6)) if st else -1,
                  "non_2xx": (int(codes.group(3)) + int(codes.group(4))) if codes else -1,
                  "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99),
                  "proxy_cpu_us_per_request": 1e6 * cpu_s / len(lat) if lat else float("nan")}))
PY
}

for r in $(seq "$ROUNDS"); do
  # shellcheck disable=SC2086
  {
    run gateway-h2c "http://127.0.0.1:$GW_H2C/v1/chat/completions" "$r" "$GW_H2C_PID"
    run nginx-h2c "http://127.0.0.1:$NG_H2C/v1/chat/completions" "$r" $NGINX_PIDS
    run gateway-tls "https://127.0.0.1:$GW_TLS/v1/chat/completions" "$r" "$GW_TLS_PID"
    run nginx-tls "https://127.0.0.1:$NG_TLS/v1/chat/completions" "$r" $NGINX_PIDS
  }
done

python3 - "$WORK/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows: by.setdefault(r["path"], []).append(r)
med = lambda name, k: statistics.median(r[k] for r in by[name])
print("\npath          req/s      p50 ms   p90 ms   p99 ms   cpu us/req   ok/failed/non-2xx (all rounds)")
for name in ("gateway-h2c", "nginx-h2c", "gateway-tls", "nginx-tls"):
    if name not in by: continue
    ok = sum(r["succeeded"] for r in by[name]); bad = sum(r["failed"] for r in by[name])
    n2 = sum(r["non_2xx"] for r in by[name])
    print(f"{name:12s} {med(name,'req_per_s'):8.1f} {med(name,'p50_ms'):8.2f} {med(name,'p90_ms'):8.2f} "
          f"{med(name,'p99_ms'):8.2f} {med(name,'proxy_cpu_us_per_request'):10.1f}   {ok}/{bad}/{n2}")
for proto in ("h2c", "tls"):
    g, x = f"gateway-{proto}", f"nginx-{proto}"
    if g in by and x in by:
        ratio = lambda k: med(g, k) / med(x, k) if med(x, k) else float("nan")
        print(f"{proto}: gateway/nginx req/s {ratio('req_per_s'):.2f} (target >= 1.0); latency p50 "
              f"{ratio('p50_ms'):.2f}, p90 {ratio('p90_ms'):.2f}, p99 {ratio('p99_ms'):.2f} (target <= 1.0); "
              f"proxy CPU per request {ratio('proxy_cpu_us_per_request'):.2f}")
PY
echo "results: $WORK/results.jsonl"
