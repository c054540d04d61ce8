#!/usr/bin/env bash
# The fault soak at full size: tests/soak/run.sh N [BUILD_DIR] (N streams, default 100000;
# BUILD_DIR default ./build). Extra soak.py options go in SOAK_ARGS (e.g. "--concurrency 96
# --seed 7"). Prints the figures (streams/s, per-cause counts, descriptors and memory before and
# after) and exits 1 on any miss; they are also written to BUILD_DIR/soak-N.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=${1:-100000}
build=${2:-$here/../../build}
gateway=$build/gateway/cutline-gateway
if [ ! -x "$gateway" ]; then
  echo "run.sh: $gateway not found: build the cutline-gateway target first" >&2
  exit 2
fi
# shellcheck disable=SC2086
exec python3 "$here/soak.py" --gateway "$gateway" --streams "$n" --json "$build/soak-$n.json" \
  ${SOAK_ARGS:-}
