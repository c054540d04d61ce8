#!/usr/bin/env bash
# Gateway vs direct vs nginx (proxy_buffering off), side by side in one run, in front of the same
# scripted fake upstream emitting timestamped tokens. For each concurrency level it runs
# gateway_load against the upstream directly, through cutline-gateway (parsing every chunk and
# enforcing a policy with deadline/ttft/idle timers that never fire) and through nginx, and prints
# one JSON line per run plus a table of ratios.
#
#   tests/bench/run_gateway_bench.sh [BUILD_DIR] ["100 1000"] [TOKENS] [INTERVAL_MS]
#
# RAMP_MS=R opens the streams evenly over R ms instead of all at once (see gateway_load). The fake
# upstream keeps each stream's token cadence fixed, so the phases the streams start with hold for
# the whole run: all at once is one burst of N tokens per interval (as a batching backend's decode
# steps produce), R equal to the interval spreads them evenly. GW_WORKERS sets the gateway's
# --workers (default 2, nginx runs 2 worker processes).
#
# SETTLE_S (default 2) is the pause after each run.
#
# ROUNDS=N repeats every level N times (the two proxies swap order each round) and ends with the
# median of the per-round ratios: on a 2-core machine one round's latency ratio is noisy.
#
# SYSCALLS=1 also counts each proxy's system calls during its run (perf stat on the
# raw_syscalls:sys_enter tracepoint; needs perf and tracepoint access) and prints them per relayed
# token: a figure that, unlike latency, holds up on a busy machine.
#
# POOL_CPU=1 runs instead the endpoint-pool comparison: the gateway's CPU per request with an
# upstream of 1 endpoint (url:) and of 16 (endpoints:, 16 fake upstreams, least_request), side by
# side in one run (h2load, HTTP/1.1, short non-streaming requests; POOL_REQUESTS each, default
# 20000; ROUNDS alternating the order), CPU from the gateway's /proc/PID/stat. A third gateway,
# "16same", has 16 endpoints that are all one fake upstream (127.0.0.1..16, the fake bound to
# 0.0.0.0): the upstream side is then the same process as with 1 endpoint, so its difference from
# 1 is the gateway's own cost of a 16-endpoint pool, while "16" also includes what 16 upstream
# processes sharing the cores do to the gateway (fewer responses per wake-up). nginx (1 worker
# process, proxy_pass to an upstream block of 1 and of 16 servers, least_conn, keep-alive) runs
# the same two ways in the same rounds: its 16-to-1 ratio is what 16 upstream processes cost a
# proxy that does no picking of its own worth measuring, the baseline for the gateway's. SWITCHES=1 counts
# the gateway's context switches per request (perf stat, a software counter that does not slow
# it); SYSCALLS=1 also its connect() and epoll_wait() calls and all its system calls (syscall
# tracepoints: every system call gets slower, which changes the batching being measured).
set -euo pipefail
BUILD=${1:-build}
LEVELS=${2:-"100 1000"}
TOKENS=${3:-200}
INTERVAL=${4:-25}
ROUNDS=${ROUNDS:-1}
NGINX=${NGINX:-/usr/sbin/nginx}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
WORK=$(mktemp -d /tmp/cutline-gw-bench-XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
ulimit -n 20000 2>/dev/null || true

FAKE_BIND=127.0.0.1
[[ "${POOL_CPU:-0}" = 1 ]] && FAKE_BIND=0.0.0.0  # reachable as 127.0.0.2.. too ("16same")
"$BUILD/tests/support/cutline-fake-upstream" --port 0 --bind "$FAKE_BIND" >"$WORK/fake.out" \
  2>"$WORK/fake.err" &
FAKE_PID=$!; PIDS+=($FAKE_PID)
for _ in $(seq 100); do grep -q PORT "$WORK/fake.out" 2>/dev/null && break; sleep 0.05; done
FAKE_PORT=$(awk '/PORT/{print $2}' "$WORK/fake.out")

if [[ "${POOL_CPU:-0}" = 1 ]]; then
  command -v h2load >/dev/null || { echo "h2load missing (Debian package nghttp2-client)" >&2; exit 2; }
  POOL_REQUESTS=${POOL_REQUESTS:-20000}
  ENDPOINTS="\"http://127.0.0.1:$FAKE_PORT\""
  for i in $(seq 2 16); do
    "$BUILD/tests/support/cutline-fake-upstream" --port 0 >"$WORK/fake$i.out" 2>"$WORK/fake$i.err" &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q PORT "$WORK/fake$i.out" 2>/dev/null && break; sleep 0.05; done
    ENDPOINTS="$ENDPOINTS, \"http://127.0.0.1:$(awk '/PORT/{print $2}' "$WORK/fake$i.out")\""
  done
  SAME="\"http://127.0.0.1:$FAKE_PORT\""
  for i in $(seq 2 16); do SAME="$SAME, \"http://127.0.0.$i:$FAKE_PORT\""; done
  CONFIGS="1 16 16same"
  declare -A GW_PORT GW_PID
  # nginx with one worker, two servers: upstream of 1 endpoint, upstream of the 16.
  NG1=$(python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
  NG16=$(python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
  mkdir -p "$WORK/nginx/logs"
  SERVERS16=$(echo "$ENDPOINTS" | tr -d '"' | tr ',' '\n' | sed -E 's#^ *http://##; s#^(.*)$#server \1;#' | tr '\n' ' ')
  cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile 20000;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 20000; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  upstream one { server 127.0.0.1:$FAKE_PORT; keepalive 64; }
  upstream sixteen { least_conn; $SERVERS16 keepalive 64; }
  server {
    listen 127.0.0.1:$NG1;
    location / { proxy_pass http://one; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; }
  }
  server {
    listen 127.0.0.1:$NG16;
    location / { proxy_pass http://sixteen; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; }
  }
}
CONF
  "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' &
  NGINX_PID=$!; PIDS+=($NGINX_PID)
  sleep 0.5
  NGINX_WORKER=$(pgrep -P "$NGINX_PID" | head -1)
  GW_PORT[nginx1]=$NG1; GW_PID[nginx1]=$NGINX_WORKER
  GW_PORT[nginx16]=$NG16; GW_PID[nginx16]=$NGINX_WORKER
  for n in $CONFIGS; do
    case $n in
      1) UP="url: http://127.0.0.1:$FAKE_PORT" ;;
      16) UP="endpoints: [$ENDPOINTS]" ;;
      16same) UP="endpoints: [$SAME]" ;;
    esac
    cat >"$WORK/pool$n.yaml" <<YAML
listen:
  - address: 127.0.0.1:0
access_log: "off"
upstreams:
  - name: fake
    $UP
    models: ["*"]
policies:
  - name: bench
    match: {}
    budget: {max_output_tokens: 64}
YAML
    "$BUILD/gateway/cutline-gateway" --config "$WORK/pool$n.yaml" --workers 1 \
      --ready-file "$WORK/ready$n.json" >"$WORK/gw$n.out" 2>"$WORK/gw$n.err" &
    GW_PID[$n]=$!; PIDS+=($!)
    for _ in $(seq 200); do [[ -s "$WORK/ready$n.json" ]] && break; sleep 0.05; done
    GW_PORT[$n]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ports"][0])' "$WORK/ready$n.json" 2>/dev/null ||
                  sed -E 's/[^0-9]*([0-9]+).*/\1/' "$WORK/ready$n.json")
  done
  echo '{"model":"fake-tokens=1","messages":[{"role":"user","content":"hi"}]}' >"$WORK/pool_body.json"
  cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  echo "endpoints  requests  ok  proxy cpu us/request  [per request: connects syscalls epoll_waits context_switches]"
  for round in $(seq "$ROUNDS"); do
    order="1 16 16same nginx1 nginx16"; (( round % 2 == 0 )) && order="nginx16 nginx1 16same 16 1"
    for n in $order; do
      perf_pid=""
      if [[ "${SYSCALLS:-0}" = 1 || "${SWITCHES:-0}" = 1 ]]; then
        events=context-switches  # a software counter: costs the gateway nothing per system call
        [[ "${SYSCALLS:-0}" = 1 ]] && events="syscalls:sys_enter_connect,raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,$events"
        perf stat -x, -e "$events" -p "${GW_PID[$n]}" -o "$WORK/perf.$n.$round" 2>/dev/null &
        perf_pid=$!
        sleep 0.3
      fi
      before=$(cpu_ticks "${GW_PID[$n]}")
      ok=$(h2load --h1 -n "$POOL_REQUESTS" -c 16 -t 1 -d "$WORK/pool_body.json" \
             -H 'Content-Type: application/json' \
             "http://127.0.0.1:${GW_PORT[$n]}/v1/chat/completions" 2>&1 |
           awk '/^requests:/{for(i=1;i<=NF;i++) if($(i+1)=="succeeded,") print $i}')
      after=$(cpu_ticks "${GW_PID[$n]}")
      us=$(python3 -c "import os,sys; t=os.sysconf('SC_CLK_TCK'); print(f'{($after-$before)/t*1e6/max(1,int(sys.argv[1])):.1f}')" "${ok:-0}")
      counts=""
      if [[ -n "$perf_pid" ]]; then
        kill -INT "$perf_pid" 2>/dev/null || true
        wait "$perf_pid" 2>/dev/null || true
        counts=$(python3 -c '
import sys
ok = max(1, int(sys.argv[2]))
got = {}
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].isdigit():
        got[f[2]] = int(f[0])
keys = ["syscalls:sys_enter_connect", "raw_syscalls:sys_enter",
        "syscalls:sys_enter_epoll_wait", "context-switches"]
print(" ".join(f"{got[k] / ok:.3f}" if k in got else "-" for k in keys))' "$WORK/perf.$n.$round" "${ok:-0}")
      fi
      echo "$n $POOL_REQUESTS ${ok:-0} $us $counts" | tee -a "$WORK/pool_cpu.txt" |
        awk '{printf "%9s  %8d  %6d  %10s  %s %s %s %s\n", $1, $2, $3, $4, $5, $6, $7, $8}'
      sleep "${SETTLE_S:-2}"
    done
  done
  python3 - "$WORK/pool_cpu.txt" <<'PY'
import statistics, sys
by, counts = {}, {}
for line in open(sys.argv[1]):
    n, _, ok, us, *rest = line.split()
    by.setdefault(n, []).append(float(us))
    if rest:
        counts.setdefault(n, []).append([float(x) if x != "-" else "-" for x in rest])
one = statistics.median(by["1"])
for n, label in (("16", "16 endpoints (16 processes)"), ("16same", "16 endpoints (one process)")):
    m = statistics.median(by[n])
    print(f"median gateway CPU per request: 1 endpoint {one:.1f} us, {label} {m:.1f} us "
          f"(difference {m - one:+.1f} us, ratio {m / one:.3f})")
ng1, ng16 = statistics.median(by["nginx1"]), statistics.median(by["nginx16"])
print(f"median nginx CPU per request: 1 endpoint {ng1:.1f} us, 16 endpoints (16 processes) "
      f"{ng16:.1f} us (difference {ng16 - ng1:+.1f} us, ratio {ng16 / ng1:.3f})")
gw = statistics.median(by["16"]) / one
print(f"16-to-1 ratio, gateway {gw:.3f} vs nginx {ng16 / ng1:.3f}: "
      f"the gateway's own share {gw / (ng16 / ng1):.3f}")
names = ["connects", "syscalls", "epoll_waits", "context switches"]
for n, rows in counts.items():
    med = [statistics.median(col) if "-" not in col else None
           for col in zip(*[[x if x != "-" else "-" for x in r] for r in rows])]
    print(f"median per request, {n}: " +
          ", ".join(f"{name} {m:.3f}" for name, m in zip(names, med) if m is not None))
PY
  exit 0
fi

cat >"$WORK/gateway.yaml" <<YAML
listen:
  - address: 127.0.0.1:0
admin:
  address: 127.0.0.1:0
access_log: $WORK/gateway-access.log
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
"$BUILD/gateway/cutline-gateway" --config "$WORK/gateway.yaml" --workers "${GW_WORKERS:-2}" \
  --ready-file "$WORK/ready.json" 2>"$WORK/gateway.err" &
GW_PID=$!; PIDS+=($GW_PID)
for _ in $(seq 100); do [[ -s "$WORK/ready.json" ]] && break; sleep 0.05; done
GW_PORT=$(python3 -c "import json;print(json.load(open('$WORK/ready.json'))['port'])")

NGINX_PORT=$(python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
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
  upstream fake { server 127.0.0.1:$FAKE_PORT; keepalive 1024; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
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
NGINX_PID=$!; PIDS+=($NGINX_PID)
sleep 0.5
NGINX_WORKERS=$(pgrep -P "$NGINX_PID" | tr '\n' ' ')

run() {  # name port streams pids...
  local name=$1 port=$2 n=$3; shift 3
  local args=()
  for p in "$@"; do args+=(--pid "$p"); done
  local out perf_pid="" syscalls=null
  if [[ "${SYSCALLS:-0}" = 1 ]]; then
    perf stat -x, -e raw_syscalls:sys_enter -p "$(echo "$@" | tr ' ' ',')" \
      -o "$WORK/syscalls.$name.$n" 2>/dev/null &
    perf_pid=$!
    sleep 0.3
  fi
  out=$("$BUILD/tests/bench/gateway_load" --port "$port" --streams "$n" --tokens "$TOKENS" \
        --interval-ms "$INTERVAL" --ramp-ms "${RAMP_MS:-0}" "${args[@]}" || true)
  if [[ -n "$perf_pid" ]]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    syscalls=$(awk -F, '/sys_enter/{print $1}' "$WORK/syscalls.$name.$n" 2>/dev/null)
    [[ "$syscalls" =~ ^[0-9]+$ ]] || syscalls=null
  fi
  echo "{\"path\":\"$name\",\"round\":$ROUND,\"syscalls\":$syscalls,\"result\":$out}" | tee -a "$WORK/results.jsonl"
  # Let the run's teardown (N connections closing through every process) finish before the
  # next run starts: otherwise whichever path runs next pays for it.
  sleep "${SETTLE_S:-2}"
}

# Warm-up: each proxy serves a few short streams first, so that the RSS figure is what an open
# stream costs and not also the one-time growth of a process's first requests (thread buffers,
# allocator arenas, the event maps).
for target in "$GW_PORT" "$NGINX_PORT"; do
  "$BUILD/tests/bench/gateway_load" --port "$target" --streams 100 --tokens 5 --interval-ms 5 \
    >/dev/null || true
done

# ROUNDS rounds; the proxies swap places every other round so that neither always runs first.
for ROUND in $(seq "$ROUNDS"); do
  for n in $LEVELS; do
    run direct "$FAKE_PORT" "$n" "$FAKE_PID"
    if ((ROUND % 2 == 1)); then
      run gateway "$GW_PORT" "$n" "$GW_PID"
      # shellcheck disable=SC2086
      run nginx "$NGINX_PORT" "$n" $NGINX_WORKERS
    else
      # shellcheck disable=SC2086
      run nginx "$NGINX_PORT" "$n" $NGINX_WORKERS
      run gateway "$GW_PORT" "$n" "$GW_PID"
    fi
  done
done

python3 - "$WORK/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rounds = sorted({r.get("round", 1) for r in rows})
medians = {}  # streams -> list of per-round ratio dicts
for rnd in rounds:
  by = {}
  syscalls = {}
  for r in rows:
    if r.get("round", 1) != rnd: continue
    by.setdefault(r["result"]["streams"], {})[r["path"]] = r["result"]
    syscalls[(r["result"]["streams"], r["path"])] = r.get("syscalls")
  print(f"\nround {rnd}")
  print("streams  path     done/fail  ttft p50/p99 ms   token lat p50/p99 ms  streams/s  cpu us/token  rss KiB/stream  syscalls/token")
  for n, paths in sorted(by.items()):
      for name in ("direct", "gateway", "nginx"):
          r = paths.get(name)
          if not r: continue
          rss = (r["proxy_rss_kb_mid"] - r["proxy_rss_kb_before"]) / max(1, n)
          calls = syscalls.get((n, name))
          sc = f"{calls / r['tokens']:.2f}" if calls is not None and r["tokens"] else "-"
          print(f"{n:7d}  {name:8s} {r['completed']:5d}/{r['failed']:<4d} {r['ttft_p50_ms']:7.2f}/{r['ttft_p99_ms']:<8.2f} "
                f"{r['token_latency_p50_ms']:8.3f}/{r['token_latency_p99_ms']:<9.3f} {r['streams_per_s']:9.1f} "
                f"{r['cpu_us_per_token']:12.2f} {rss:14.2f}  {sc}")
      d, g, x = paths.get("direct"), paths.get("gateway"), paths.get("nginx")
      if d and g and x:
          add = lambda r, k: r[k] - d[k]
          def ratio(a, b): return a / b if b else float("nan")
          print(f"  added token latency p50: gateway {add(g,'token_latency_p50_ms'):.3f} ms vs nginx {add(x,'token_latency_p50_ms'):.3f} ms "
                f"(ratio {ratio(add(g,'token_latency_p50_ms'), add(x,'token_latency_p50_ms')):.2f}); "
                f"p99: {add(g,'token_latency_p99_ms'):.3f} vs {add(x,'token_latency_p99_ms'):.3f} ms "
                f"(ratio {ratio(add(g,'token_latency_p99_ms'), add(x,'token_latency_p99_ms')):.2f})")
          print(f"  added ttft p50: gateway {add(g,'ttft_p50_ms'):.3f} vs nginx {add(x,'ttft_p50_ms'):.3f} ms; "
                f"cpu per token gateway/nginx {ratio(g['cpu_us_per_token'], x['cpu_us_per_token']):.2f}")
          medians.setdefault(n, []).append({
              "itl_p50": ratio(add(g,'token_latency_p50_ms'), add(x,'token_latency_p50_ms')),
              "itl_p99": ratio(add(g,'token_latency_p99_ms'), add(x,'token_latency_p99_ms')),
              "cpu": ratio(g['cpu_us_per_token'], x['cpu_us_per_token']),
              "rss_kib": (g["proxy_rss_kb_mid"] - g["proxy_rss_kb_before"]) / max(1, n),
              "ttft_added_ms": add(g, 'ttft_p50_ms'), "ttft_added_nginx_ms": add(x, 'ttft_p50_ms'),
              "failed": g["failed"] + x["failed"]})
if len(rounds) > 1:
    print(f"\nmedian over {len(rounds)} rounds (gateway / nginx; targets at 1000 streams: ITL p50 <= 0.8, "
          "p99 <= 1.0, CPU <= 1.0, RSS <= 8 KiB per stream)")
    for n, lst in sorted(medians.items()):
        m = lambda k: statistics.median(d[k] for d in lst)
        # RSS per stream only from round 1 (after the warm-up): later rounds reuse the memory
        # the first one grew.
        print(f"  {n:5d} streams: added ITL p50 {m('itl_p50'):.2f}, p99 {m('itl_p99'):.2f}; CPU per token "
              f"{m('cpu'):.2f}; gateway RSS {lst[0]['rss_kib']:.2f} KiB/stream (round 1); added TTFT p50 "
              f"{m('ttft_added_ms'):.1f} vs {m('ttft_added_nginx_ms'):.1f} ms; failed {sum(d['failed'] for d in lst)}")
PY
echo "results: $WORK/results.jsonl"
