#!/usr/bin/env bash
# Installs exactly the Debian 12 packages Cutline needs. Idempotent: only what is missing is
# installed, from Debian's archive. Run as root (or with sudo).
#
#   bash deploy/setup.sh runtime   what building and running the binaries needs (deploy/run.sh)
#   bash deploy/setup.sh [test]    that, plus everything the tests and benchmarks use (default;
#                                  deploy/test.sh)
set -euo pipefail
selection=${1:-test}
if [[ "$selection" != runtime && "$selection" != test ]]; then
  echo "usage: deploy/setup.sh [runtime|test]" >&2
  exit 2
fi

packages=(
  # build
  build-essential cmake ninja-build pkg-config git
  # libraries (CLI11 is header-only)
  libevent-dev node-llhttp libnghttp2-dev libssl-dev libyaml-cpp-dev libsimdjson-dev
  prometheus-cpp-dev libhiredis-dev libcli11-dev
  # run.sh's readiness banner
  curl
)
if [[ "$selection" == test ]]; then
  packages+=(
    libgtest-dev libgmock-dev libbenchmark-dev
    # tests and benchmarks: redis for shared pools, nginx/wrk/h2load to compare, clang to fuzz,
    # systemd-analyze to verify the package's units, logrotate to run its logrotate file
    redis-server nginx-light wrk nghttp2-client clang systemd logrotate
    # tokenizer tests: PCRE2 as the pre-tokenizer oracle, the Unicode data the tables come from
    libpcre2-dev unicode-data python3
    # tool-calling prompt test: the reference-style chat templates rendered with Jinja2
    python3-jinja2
    # metrics tests: promtool (check metrics, check/test rules) and a real Prometheus server
    prometheus
    # the policy's JSON Schema: every shipped policy validates against it
    python3-jsonschema python3-yaml
  )
  # `kubectl kustomize` renders deploy/k8s in a test; any kubectl already installed will do
  if ! command -v kubectl >/dev/null 2>&1; then packages+=(kubernetes-client); fi
  if [[ "${CUTLINE_SETUP_BROWSER:-1}" == 1 ]]; then
    packages+=(chromium)   # headless rendering test of the probe's HTML report
  fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
else
  SUDO=""
  if [[ $(id -u) != 0 ]]; then SUDO=sudo; fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Debian starts the services it installs; Cutline's scripts start their own instances.
  for svc in nginx redis-server prometheus; do
    if [[ " ${missing[*]} " == *" ${svc}"* ]] && command -v systemctl >/dev/null 2>&1; then
      $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
    fi
  done
fi

# The official openai npm client for the gateway's client-compatibility test
# (tests/integration/openai_npm, version pinned in its package-lock.json). Fetched here, at setup,
# never at build or test time; the test is skipped where node/npm are absent.
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "$selection" == runtime ]]; then
  exit 0
fi
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  npm install --prefix "$repo_root/tests/integration/openai_npm" --no-audit --no-fund
else
  echo "setup: node/npm not found: the openai npm client test will be skipped"
fi
