#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs Cutline in the
# foreground — cutline-gateway with deploy/local/cutline.yaml, which starts and supervises a
# co-located cutline-backend serving the built-in tiny model. Once the gateway is ready it prints
# the URLs and a curl line to paste. Ctrl-C stops both (streams may finish for --drain-timeout).
#
# Environment: CUTLINE_CONFIG (default deploy/local/cutline.yaml), CUTLINE_BUILD_DIR (default
# build/; the config's build/backend/ path is then pointed at that build),
# CUTLINE_SKIP_BUILD=1 (skip setup and build), CUTLINE_BUILD_ONLY=1 (set up and build, then exit),
# CUTLINE_CACHE_DIR (where tiny=builtin is written).
#
# Root is needed only to install missing packages: deploy/setup.sh asks sudo for that step alone.
# Started with sudo (`sudo bash deploy/run.sh`), it installs as root, then builds and runs the
# gateway and backend as the user who called sudo ($SUDO_USER), never as root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"   # relative paths in the config (build/backend/cutline-backend) start here
build=${CUTLINE_BUILD_DIR:-$root/build}
config=${CUTLINE_CONFIG:-deploy/local/cutline.yaml}

if [[ $(id -u) == 0 && -n "${SUDO_USER:-}" && "${SUDO_USER}" != root ]]; then
  if [[ "${CUTLINE_SKIP_BUILD:-0}" != 1 ]]; then bash deploy/setup.sh runtime; fi
  echo "run.sh: packages are in place; building and running as $SUDO_USER, not root" >&2
  exec runuser -u "$SUDO_USER" -- env -u SUDO_USER CUTLINE_SETUP_DONE=1 bash "$root/deploy/run.sh"
fi

if [[ "${CUTLINE_SKIP_BUILD:-0}" != 1 ]]; then
  # Only what running needs, and only the product's binaries (deploy/test.sh adds the rest).
  if [[ "${CUTLINE_SETUP_DONE:-0}" != 1 ]]; then bash deploy/setup.sh runtime; fi
  CUTLINE_BUILD_DIR=$build CUTLINE_BUILD_TARGETS="cutline-gateway cutline-backend cutline" \
    CUTLINE_CMAKE_ARGS="-DCUTLINE_BUILD_TESTS=OFF -DCUTLINE_BUILD_BENCH=OFF ${CUTLINE_CMAKE_ARGS:-}" \
    bash deploy/build.sh
fi
if [[ "${CUTLINE_BUILD_ONLY:-0}" == 1 ]]; then exit 0; fi

if [[ "$(cd "$build" && pwd)" != "$root/build" ]]; then
  rewritten=$(mktemp /tmp/cutline-config-XXXXXX.yaml)
  sed "s#build/backend/#$build/backend/#g" "$config" >"$rewritten"
  config=$rewritten
fi

# Addresses from the config, for the banner.
listen=$(sed -n '/^listen:/,/^[a-z]/s/^ *- address: *\([^ #]*\).*/\1/p' "$config" | head -n1)
admin=$(sed -n '/^admin:/,/^[a-z]/s/^ *address: *\([^ #]*\).*/\1/p' "$config" | head -n1)

# The banner waits in the background for /readyz (the first start synthesizes the tiny model);
# the gateway itself runs in the foreground so that Ctrl-C reaches it (and only it: the backend
# has its own process group and is stopped by the gateway).
(
  for _ in $(seq 1 600); do
    if curl -sf "http://$admin/readyz" >/dev/null 2>&1; then
      cat >&2 <<BANNER

  Cutline is ready.
    OpenAI base URL   http://$listen/v1
    admin / metrics   http://$admin/metrics   (also /readyz /v1/cutline/streams /v1/cutline/policy)

  Stream a chat completion (tokens, then the last chunk with finish_reason and the "cutline"
  stop record, then [DONE]):

    curl -N http://$listen/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":16,"stream":true}'

  Ctrl-C stops the gateway and the backend.

BANNER
      exit 0
    fi
    sleep 0.2
  done
  echo "run.sh: the gateway did not become ready in 120 s (see the log above)" >&2
) &

exec "$build/gateway/cutline-gateway" --config "$config"
