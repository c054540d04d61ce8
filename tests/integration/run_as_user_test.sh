#!/usr/bin/env bash
# `sudo bash deploy/run.sh` runs the services as the user who called sudo, not as root: run.sh is
# started as root with SUDO_USER=nobody (what sudo sets), and the "gateway" it starts (a stub in
# a scratch build dir that records its uid) must run as nobody. Needs root to play sudo's part
# (exit 77: skipped otherwise).
#   run_as_user_test.sh REPO_ROOT
set -euo pipefail
repo=${1:?usage: run_as_user_test.sh REPO_ROOT}
if [[ $(id -u) != 0 ]]; then
  echo "run_as_user_test: not root, cannot play sudo's part: skipped"
  exit 77
fi
if ! id nobody >/dev/null 2>&1; then
  echo "run_as_user_test: FAIL: no user nobody to run as"
  exit 1
fi
tmp=$(mktemp -d)
chmod 755 "$tmp"
mkdir -p "$tmp/build/gateway"
cat >"$tmp/build/gateway/cutline-gateway" <<'STUB'
#!/bin/sh
id -u >"$CUTLINE_RUN_AS_TEST_OUT"
STUB
chmod 755 "$tmp/build/gateway/cutline-gateway"
touch "$tmp/uid"
chmod 666 "$tmp/uid"
SUDO_USER=nobody CUTLINE_SKIP_BUILD=1 CUTLINE_BUILD_DIR="$tmp/build" \
  CUTLINE_RUN_AS_TEST_OUT="$tmp/uid" setsid bash "$repo/deploy/run.sh" >"$tmp/out" 2>&1 &
leader=$!
for _ in $(seq 1 100); do
  [[ -s "$tmp/uid" ]] && break
  sleep 0.1
done
kill -- -"$leader" 2>/dev/null || true   # run.sh's readiness banner waits in the background
wait "$leader" 2>/dev/null || true
uid=$(cat "$tmp/uid")
status=0
if [[ "$uid" != "$(id -u nobody)" ]]; then
  echo "run_as_user_test: FAIL: the gateway ran as uid '${uid}', not nobody's $(id -u nobody)"
  cat "$tmp/out"
  status=1
elif ! grep -q "running as nobody, not root" "$tmp/out"; then
  echo "run_as_user_test: FAIL: run.sh did not say it dropped root"
  cat "$tmp/out"
  status=1
else
  echo "run_as_user_test: the services ran as nobody"
fi
rm -rf "$tmp"
exit "$status"
