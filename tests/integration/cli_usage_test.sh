#!/usr/bin/env bash
# The command line of every binary, run for real: --help (exit 0, on every command and
# subcommand), --version (version and git commit), and usage errors (unknown flag, missing value,
# bad number, bad duration or size, unreadable file) -> exactly one line on stderr and exit 2.
# Usage: cli_usage_test.sh GATEWAY BACKEND CUTLINE
set -u
gateway=$1 backend=$2 cutline=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_usage WANT_TEXT CMD...: exit 2, one line on stderr containing WANT_TEXT, nothing on stdout.
expect_usage() {
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [[ $rc != 2 ]]; then fail "$* -> exit $rc, want 2 ($(cat "$tmp/err"))"; return; fi
  if [[ $lines != 1 ]]; then fail "$* -> $lines stderr lines, want 1:"; cat "$tmp/err"; return; fi
  if ! grep -qF -- "$want" "$tmp/err"; then fail "$* -> '$(cat "$tmp/err")' lacks '$want'"; fi
  if [[ -s "$tmp/out" ]]; then fail "$* wrote to stdout"; fi
}

# expect_help CMD...: exit 0, a "Usage:" text on stdout that names every WANT word.
expect_help() {
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [[ $rc != 0 ]]; then fail "$* -> exit $rc, want 0 ($(cat "$tmp/err"))"; return; fi
  for w in $want; do
    grep -qF -- "$w" "$tmp/out" || fail "$* help lacks '$w'"
  done
}

expect_version() {
  local name=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  [[ $rc == 0 ]] || fail "$* -> exit $rc"
  grep -qE "^$name [0-9]+\.[0-9]+\.[0-9]+ \(git [0-9a-f]{7,}|unknown\)" "$tmp/out" ||
    fail "$* printed '$(cat "$tmp/out")'"
}

echo 'listen: [{address: "127.0.0.1:0"}]' >"$tmp/p.yaml"
echo '{"model":"tiny","messages":[]}' >"$tmp/req.json"

# --help everywhere, also where a subcommand has required options (probe, explain).
expect_help "--config --port --admin-port --drain-timeout Exit" "$gateway" --help
expect_help "--model --kv-memory --drain-timeout" "$backend" --help
expect_help "policy probe model" "$cutline" --help
expect_help "check explain diff advise schema" "$cutline" policy --help
expect_help "JSON Schema" "$cutline" policy schema --help
expect_help "FILE" "$cutline" policy check --help
expect_help "--request --tenant --header" "$cutline" policy explain F --help
expect_help "load switch" "$cutline" probe --help
expect_help "--url --concurrency --timeout OPENAI_API_KEY" "$cutline" probe load --help
expect_help "--models" "$cutline" probe switch --help
expect_help "synth info" "$cutline" model --help
expect_help "--out --layers --type" "$cutline" model synth --help
expect_help "FILE" "$cutline" model info --help

expect_version cutline-gateway "$gateway" --version
expect_version cutline-backend "$backend" --version
expect_version cutline "$cutline" --version

# cutline-gateway
expect_usage "--config" "$gateway"
expect_usage "--port" "$gateway" --config "$tmp/p.yaml" --port abc
expect_usage "--port" "$gateway" --config "$tmp/p.yaml" --port 70000
expect_usage "--port needs a value" "$gateway" --config "$tmp/p.yaml" --port
expect_usage "unknown option '--frobnicate'" "$gateway" --config "$tmp/p.yaml" --frobnicate
expect_usage "not a duration: '5 minutes'" "$gateway" --config "$tmp/p.yaml" --drain-timeout "5 minutes"
expect_usage "--workers" "$gateway" --config "$tmp/p.yaml" --workers 0
expect_usage "cannot read '$tmp/missing.yaml'" "$gateway" --config "$tmp/missing.yaml"

# cutline-backend
expect_usage "--port" "$backend" --port abc
expect_usage "not a size: 'lots'" "$backend" --kv-memory lots
expect_usage "not a duration" "$backend" --drain-timeout soon
expect_usage "NAME=PATH" "$backend" --model tiny
expect_usage "unexpected argument 'stray'" "$backend" stray
expect_usage "--threads" "$backend" --threads -1

# cutline
expect_usage "unknown command 'frobnicate'" "$cutline" frobnicate
expect_usage "subcommand" "$cutline"
expect_usage "subcommand" "$cutline" policy
expect_usage "cannot read" "$cutline" policy check "$tmp/missing.yaml"
expect_usage "--request" "$cutline" policy explain "$tmp/p.yaml"
expect_usage "cannot read" "$cutline" policy explain "$tmp/p.yaml" --request "$tmp/nope.json"
expect_usage "--queue-depth" "$cutline" policy explain "$tmp/p.yaml" --request "$tmp/req.json" --queue-depth many
expect_usage "NAME:VALUE" "$cutline" policy explain "$tmp/p.yaml" --request "$tmp/req.json" --header nocolon
expect_usage "--format" "$cutline" policy check --format yaml "$tmp/p.yaml"
expect_usage "--format" "$cutline" policy explain "$tmp/p.yaml" --request "$tmp/req.json" --format xml
expect_usage "NEW" "$cutline" policy diff "$tmp/p.yaml"
expect_usage "cannot read" "$cutline" policy diff "$tmp/p.yaml" "$tmp/missing.yaml"
: >"$tmp/empty.log"
expect_usage "empty" "$cutline" policy advise "$tmp/empty.log"
expect_usage "not a JSON object" "$cutline" policy advise "$tmp/p.yaml"
expect_usage "--target-cut-rate" "$cutline" policy advise "$tmp/empty.log" --target-cut-rate 200%
expect_usage "--url" env -u OPENAI_BASE_URL "$cutline" probe load
expect_usage "--concurrency" "$cutline" probe load --url http://127.0.0.1:1 --concurrency 1,x
expect_usage "not a duration" "$cutline" probe load --url http://127.0.0.1:1 --timeout forever
expect_usage "--top-p" "$cutline" probe load --url http://127.0.0.1:1 --top-p 2
expect_usage "--models" "$cutline" probe switch --url http://127.0.0.1:1
expect_usage "--out" "$cutline" model synth
expect_usage "--layers" "$cutline" model synth --out "$tmp/m.gguf" --layers zero
expect_usage "--type" "$cutline" model synth --out "$tmp/m.gguf" --type f64
expect_usage "cannot read" "$cutline" model info "$tmp/missing.gguf"

# The root help names every policy subcommand; --format's help reads as its values, not as
# the parser's internals (ENUM:value in {json->1,text->0}).
"$cutline" --help >"$tmp/out" 2>&1
grep -qF "check, explain, diff, advise, schema" "$tmp/out" ||
  fail "cutline --help lacks policy's subcommands: '$(grep policy "$tmp/out")'"
for cmd in check explain; do
  "$cutline" policy "$cmd" F --help >"$tmp/out" 2>&1
  grep -qF -- "--format text|json" "$tmp/out" || fail "policy $cmd --help: '$(grep -- --format "$tmp/out")'"
  grep -qE "ENUM|json->" "$tmp/out" && fail "policy $cmd --help shows '$(grep -E "ENUM|json->" "$tmp/out")'"
done

# explain infers the route from the body (input -> the Responses API) and exits 4 when no rule
# matches, as the gateway would refuse the request.
printf '%s\n' 'listen: [{address: "127.0.0.1:0"}]' 'upstreams: [{name: u, url: "http://127.0.0.1:1"}]' \
  'policies: [{name: chat, match: {routes: [/v1/chat/completions]}}]' >"$tmp/chat.yaml"
echo '{"model":"m","input":"hi"}' >"$tmp/input.json"
"$cutline" policy explain "$tmp/chat.yaml" --request "$tmp/input.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 4 ]] || fail "policy explain with no matching rule -> exit $rc, want 4 ($(cat "$tmp/err"))"
grep -qF "route /v1/responses" "$tmp/out" || fail "policy explain route: '$(cat "$tmp/out")'"

# Environment fallbacks: OPENAI_BASE_URL stands in for --url (nothing listens on port 1: every
# request ends upstream_disconnect, and the run itself completes).
OPENAI_BASE_URL=http://127.0.0.1:1 OPENAI_API_KEY=k "$cutline" probe load --concurrency 1 \
  --repeat 1 --max-tokens 1 --timeout 2s --no-progress >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 0 ]] || fail "probe with OPENAI_BASE_URL -> exit $rc, want 0 ($(cat "$tmp/err"))"
grep -q "upstream_disconnect" "$tmp/out" || fail "probe with OPENAI_BASE_URL: '$(cat "$tmp/out")'"

# Progress of long work: synth reports tensor bytes written of the total on stderr (a log line,
# as stderr is not a terminal here), and the file is written.
"$cutline" model synth --out "$tmp/tiny.gguf" >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 0 ]] || fail "model synth -> exit $rc ($(cat "$tmp/err"))"
grep -qE "^writing $tmp/tiny.gguf +100% .* in [0-9.]+ s$" "$tmp/err" ||
  fail "model synth progress: '$(cat "$tmp/err")'"

# --device cuda where CUDA is not usable (no CUDA plugin here, or a build without CUDA): exit 1
# with the reason, not a crash.
CUTLINE_CUDA_PLUGIN=$tmp/absent/libcutline_cuda.so "$backend" --port 0 --device cuda \
  --cache-dir "$tmp/cache" >"$tmp/cuda.out" 2>"$tmp/cuda.err" </dev/null
rc=$?
if [[ $rc != 1 ]]; then fail "backend --device cuda without CUDA -> exit $rc, want 1 ($(cat "$tmp/cuda.err"))"; fi
grep -qE "^cutline-backend: cuda: (no CUDA plugin|this build has no CUDA)" "$tmp/cuda.err" ||
  fail "backend --device cuda without CUDA: '$(cat "$tmp/cuda.err")'"

# model info at a context beyond the model's: not "serve: yes".
"$cutline" model info "$tmp/tiny.gguf" --context 1073741824 >"$tmp/out" 2>"$tmp/err"
grep -q "^serve: no: context 1073741824 is beyond the model's context length" "$tmp/out" ||
  fail "model info --context beyond the model: '$(grep serve "$tmp/out")'"

# The backend's model load reports bytes read of the file (a log line: stderr is not a terminal).
"$backend" --port 0 --device cpu --cache-dir "$tmp/cache" >"$tmp/be.out" 2>"$tmp/be.err" &
be=$!
for _ in $(seq 1 300); do grep -q "listening on" "$tmp/be.out" 2>/dev/null && break; sleep 0.1; done
kill "$be" 2>/dev/null
wait "$be" 2>/dev/null
grep -qE "^cutline-backend: reading tiny +100% .* in [0-9.]+ s$" "$tmp/be.err" ||
  fail "backend load progress: '$(cat "$tmp/be.err")'"

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all command-line checks passed"
