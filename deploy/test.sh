#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test. Ends with
# ctest's summary line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/deploy/setup.sh"
bash "$root/deploy/build.sh"
cd "${CUTLINE_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" --timeout 300
