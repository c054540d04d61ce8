#!/usr/bin/env bash
# What one short request costs the gateway and nginx, side by side in one run, on two routes:
#
#   chat         POST /v1/chat/completions, a 1-token non-streamed answer: the gateway parses
#                the request, applies the policy (max_tokens clamp), asks the upstream for a
#                stream, assembles the answer, writes its stop record and metrics; nginx relays
#                the upstream's JSON body.
#   passthrough  GET /health, relayed as is by both: the cost of the HTTP/1.1 proxy core alone.
#
#   tests/bench/run_gateway_request_cost.sh [BUILD_DIR]
#
# Each proxy runs one worker in front of the same fake upstream, keep-alive on both sides;
# h2load (HTTP/1.1, 16 connections) sends REQUESTS (default 20000) per run after a warm-up.
# CPU per request (user and system microseconds) comes from the worker's /proc/PID/stat;
# ROUNDS (default 3) alternates which proxy runs first, and the medians end the output.
#
# On the chat route a third proxy runs where nginx's Lua module is installed (Debian packages
# libnginx-mod-http-lua and lua-cjson): nginx-lua, nginx doing the gateway's OpenAI work in Lua
# (nginx_lua_gateway.lua: parse and clamp the request, ask for a stream, parse every event,
# assemble the answer with a stop record, count metrics), the way OpenResty-based gateways
# (Kong, Apache APISIX) do it. nginx relays bytes; nginx-lua does the same work as the gateway.
# LUA=0 leaves it out, LUA=1 fails when the module is missing.
#
# INSTR=1 also counts the instructions each proxy executes per request (valgrind's callgrind,
# INSTR_REQUESTS per run, default 2000, after a warm-up): a figure that, unlike CPU time, does not
# move with what else runs on the machine. Needs valgrind (Debian package valgrind).
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-20000}
INSTR_REQUESTS=${INSTR_REQUESTS:-2000}
NGINX=${NGINX:-/usr/sbin/nginx}
NGINX_MODULES=${NGINX_MODULES:-/usr/lib/nginx/modules}
LUA=${LUA:-auto}
if [[ "$LUA" != 0 && ! -e "$NGINX_MODULES/ngx_http_lua_module.so" ]]; then
  [[ "$LUA" == 1 ]] && { echo "LUA=1: nginx's Lua module missing (Debian packages libnginx-mod-http-lua lua-cjson)" >&2; exit 2; }
  echo "nginx's Lua module is not installed: the nginx-lua comparison is left out" >&2
  LUA=0
fi
command -v h2load >/dev/null || { echo "h2load missing (Debian package nghttp2-client)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/cutline-request-cost-XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$BUILD/tests/support/cutline-fake-upstream" --port 0 >"$WORK/fake.out" 2>"$WORK/fake.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q PORT "$WORK/fake.out" 2>/dev/null && break; sleep 0.05; done
FAKE_PORT=$(awk '/PORT/{print $2}' "$WORK/fake.out")
free_port() { python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])"; }

cat >"$WORK/gateway.yaml" <<YAML
listen:
  - address: 127.0.0.1:0
access_log: "off"
# The passthrough route measures GET /health, an operational path the gateway keeps from clients
# unless allowed.
passthrough_operational: [/health]
upstreams:
  - name: fake
    url: http://127.0.0.1:$FAKE_PORT
    models: ["*"]
policies:
  - name: bench
    match: {}
    budget: {max_output_tokens: 64}
YAML
# nginx.conf for PORT, with extra top-level lines (e.g. "master_process off;"); LUA_CHAT=1 runs
# the chat route through nginx_lua_gateway.lua.
nginx_conf() {
  mkdir -p "$WORK/nginx$1/logs"
  local lua_main="" lua_http="" lua_chat=""
  if [[ "${LUA_CHAT:-0}" == 1 ]]; then
    lua_main="load_module $NGINX_MODULES/ndk_http_module.so;
load_module $NGINX_MODULES/ngx_http_lua_module.so;"
    lua_http="lua_package_path '$ROOT/tests/bench/?.lua;;';
  lua_shared_dict metrics 1m;
  init_by_lua_block { gateway = require 'nginx_lua_gateway' }"
    lua_chat="location = /v1/chat/completions {
      client_body_buffer_size 64k;
      access_by_lua_block { gateway.access() }
      header_filter_by_lua_block { gateway.header() }
      body_filter_by_lua_block { gateway.body() }
      log_by_lua_block { gateway.log() }
      proxy_set_header X-Request-Id \$request_id;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_pass http://fake; proxy_http_version 1.1; proxy_set_header Connection \"\";
      proxy_buffering off;
    }"
  fi
  cat >"$WORK/nginx$1/nginx.conf" <<CONF
$lua_main
worker_processes 1;
$2
pid $WORK/nginx$1/nginx.pid;
error_log $WORK/nginx$1/logs/error.log warn;
events { worker_connections 2000; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx$1/body;
  proxy_temp_path $WORK/nginx$1/proxy;
  upstream fake { server 127.0.0.1:$FAKE_PORT; keepalive 64; }
  $lua_http
  server {
    listen 127.0.0.1:$1;
    $lua_chat
    location / { proxy_pass http://fake; proxy_http_version 1.1; proxy_set_header Connection "";
                 proxy_buffering off; }
  }
}
CONF
}
# Starts the gateway (under PREFIX..., e.g. valgrind) and prints "PID PORT".
start_gateway() {
  local ready="$WORK/ready.$RANDOM.json"
  "$@" "$BUILD/gateway/cutline-gateway" --config "$WORK/gateway.yaml" --workers 1 \
    --ready-file "$ready" >>"$WORK/gateway.out" 2>>"$WORK/gateway.err" &
  local pid=$!
  PIDS+=($pid)
  for _ in $(seq 600); do [[ -s "$ready" ]] && break; sleep 0.05; done
  echo "$pid $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ports"][0])' "$ready")"
}

echo '{"model":"fake-tokens=1","messages":[{"role":"user","content":"hi"}]}' >"$WORK/body.json"
load() {  # load PORT ROUTE N: h2load's "requests:" line
  local args=(--h1 -n "$3" -c 16 -t 1)
  if [[ "$2" == chat ]]; then
    args+=(-d "$WORK/body.json" -H 'Content-Type: application/json'
           "http://127.0.0.1:$1/v1/chat/completions")
  else
    args+=("http://127.0.0.1:$1/health")
  fi
  h2load "${args[@]}" | grep -E '^requests:'
}

read -r GW_PID GW_PORT < <(start_gateway)
NG_PORT=$(free_port)
nginx_conf "$NG_PORT" ""
"$NGINX" -p "$WORK/nginx$NG_PORT" -c "$WORK/nginx$NG_PORT/nginx.conf" -g 'daemon off;' &
PIDS+=($!)
sleep 0.5
NG_WORKER=$(pgrep -P "${PIDS[-1]}" | head -1)
if [[ "$LUA" != 0 ]]; then
  NL_PORT=$(free_port)
  LUA_CHAT=1 nginx_conf "$NL_PORT" ""
  "$NGINX" -p "$WORK/nginx$NL_PORT" -c "$WORK/nginx$NL_PORT/nginx.conf" -g 'daemon off;' &
  PIDS+=($!)
  sleep 0.5
  NL_WORKER=$(pgrep -P "${PIDS[-1]}" | head -1)
  # The same answer's shape as the gateway's, or the comparison means nothing.
  curl -sf -d @"$WORK/body.json" -H 'Content-Type: application/json' \
    "http://127.0.0.1:$NL_PORT/v1/chat/completions" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["object"] == "chat.completion" and r["choices"][0]["message"]["content"] == "t0 ", r
assert r["cutline"]["cause"] == "eos" and r["cutline"]["output_tokens"] == 1, r
' || { echo "nginx-lua: unexpected answer" >&2; cat "$WORK/nginx$NL_PORT/logs/error.log" >&2; exit 1; }
fi

cpu_run() {  # cpu_run NAME PID PORT ROUTE: one line "NAME ROUTE ok user sys" (us per request)
  load "$3" "$4" 2000 >/dev/null
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$2/stat")
  local line
  line=$(load "$3" "$4" "$REQUESTS")
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$2/stat")
  local hz
  hz=$(getconf CLK_TCK)
  python3 -c "
n, hz = $REQUESTS, $hz
print('$1 $4 $(echo "$line" | awk '{print $8}')', '%.2f %.2f' % (($u1 - $u0) * 1e6 / hz / n, ($s1 - $s0) * 1e6 / hz / n))
" | tee -a "$WORK/cpu.txt"
}
echo "proxy route ok user_us sys_us (per request)"
for round in $(seq "$ROUNDS"); do
  for route in chat passthrough; do
    proxies=(gateway nginx)
    [[ "$LUA" != 0 && $route == chat ]] && proxies+=(nginx-lua)
    ((round % 2)) || proxies=($(printf '%s\n' "${proxies[@]}" | tac))
    for proxy in "${proxies[@]}"; do
      case $proxy in
        gateway) cpu_run gateway "$GW_PID" "$GW_PORT" "$route" ;;
        nginx) cpu_run nginx "$NG_WORKER" "$NG_PORT" "$route" ;;
        nginx-lua) cpu_run nginx-lua "$NL_WORKER" "$NL_PORT" "$route" ;;
      esac
    done
  done
done
python3 - "$WORK/cpu.txt" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    proxy, route, ok, user, system = line.split()
    by.setdefault((proxy, route), []).append((float(user), float(system)))
print(f"\nmedian CPU per request over {len(by[('gateway', 'chat')])} rounds (us):")
for route in ("chat", "passthrough"):
    med = {p: [statistics.median(x[i] for x in by[(p, route)]) for i in (0, 1)] for p in ("gateway", "nginx")}
    g, n = sum(med["gateway"]), sum(med["nginx"])
    print(f"  {route:12s} gateway user {med['gateway'][0]:.1f} sys {med['gateway'][1]:.1f} total {g:.1f}; "
          f"nginx user {med['nginx'][0]:.1f} sys {med['nginx'][1]:.1f} total {n:.1f}; ratio {g / n:.2f}")
    if ("nginx-lua", route) in by:
        lua = [statistics.median(x[i] for x in by[("nginx-lua", route)]) for i in (0, 1)]
        print(f"  {'':12s} nginx-lua (the same work) user {lua[0]:.1f} sys {lua[1]:.1f} total {sum(lua):.1f}; "
              f"gateway / nginx-lua {g / sum(lua):.2f}, nginx-lua / nginx {sum(lua) / n:.2f}")
PY

if [[ "${INSTR:-0}" == 1 ]]; then
  command -v valgrind >/dev/null || { echo "INSTR=1: valgrind missing (Debian package valgrind)" >&2; exit 2; }
  # instr NAME PID PORT: instructions per request on each route, counted from a reset to a dump
  # with instrumentation on only while the measured requests run.
  instr() {
    local route
    for route in chat passthrough; do
      load "$3" "$route" 300 >/dev/null
      callgrind_control -z "$2" >/dev/null
      callgrind_control -i on "$2" >/dev/null
      load "$3" "$route" "$INSTR_REQUESTS" >/dev/null
      callgrind_control -i off "$2" >/dev/null
      callgrind_control -d "$2" >/dev/null
      local f
      f=$(ls -t "$WORK"/cg."$1".*.* | head -1)  # the part file this dump wrote
      awk -v n="$INSTR_REQUESTS" -v who="$1" -v route="$route" \
        '/^totals:/ {printf "%s %s %.0f\n", who, route, $2 / n}' "$f" | tee -a "$WORK/instr.txt"
    done
  }
  read -r VG_PID VG_PORT < <(start_gateway valgrind --tool=callgrind --instr-atstart=no \
                                           --callgrind-out-file="$WORK/cg.gateway.%p")
  instr gateway "$VG_PID" "$VG_PORT"
  kill "$VG_PID"
  VN_PORT=$(free_port)
  nginx_conf "$VN_PORT" "master_process off;"
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/cg.nginx.%p" \
    "$NGINX" -p "$WORK/nginx$VN_PORT" -c "$WORK/nginx$VN_PORT/nginx.conf" -g 'daemon off;' \
    2>"$WORK/nginx-valgrind.err" &
  VN_PID=$!; PIDS+=($VN_PID)
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$VN_PORT/health" && break; sleep 0.1; done
  instr nginx "$VN_PID" "$VN_PORT"
  kill "$VN_PID"
  python3 - "$WORK/instr.txt" <<'PY'
import sys
d = {}
for line in open(sys.argv[1]):
    who, route, n = line.split()
    d[(who, route)] = float(n)
print("\ninstructions per request (callgrind):")
for route in ("chat", "passthrough"):
    g, n = d[("gateway", route)], d[("nginx", route)]
    print(f"  {route:12s} gateway {g:,.0f}  nginx {n:,.0f}  ratio {g / n:.2f}")
PY
fi
echo "work dir: $WORK"
