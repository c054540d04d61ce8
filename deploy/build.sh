#!/usr/bin/env bash
# Configures and builds Cutline into ${CUTLINE_BUILD_DIR:-build} (Ninja, all cores).
# CUTLINE_CMAKE_ARGS: extra configure arguments; CUTLINE_BUILD_TARGETS: targets (default all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CUTLINE_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${CUTLINE_BUILD_TYPE:-RelWithDebInfo} \
  ${CUTLINE_CMAKE_ARGS:-} >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" ${CUTLINE_BUILD_TARGETS:+--target $CUTLINE_BUILD_TARGETS}
