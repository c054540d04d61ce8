#!/usr/bin/env bash
# The Debian package, built and inspected the way an operator meets it: cpack in a scratch
# directory, dpkg-deb -I (control: Depends, maintainer scripts, conffiles) and -c (the files),
# cmake --install into a prefix (nothing outside it), systemd-analyze verify on the units (where
# systemd-analyze exists; required when CI=true), then
# the installed gateway run from the extracted tree (dpkg-deb -x) against the fake upstream until
# a chat completion answers 200.
# Usage: package_test.sh BUILD_DIR FAKE_UPSTREAM
set -euo pipefail
build=$1 fake=$2
scratch=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$scratch/pkg" -C RelWithDebInfo >"$scratch/cpack.log" 2>&1) ||
  { cat "$scratch/cpack.log"; fail "cpack failed"; }
deb=$(ls "$scratch"/pkg/cutline_*.deb 2>/dev/null | head -n1)
[[ -n "$deb" ]] || fail "no cutline_*.deb in $scratch/pkg"
echo "package: $(basename "$deb")"

info=$(dpkg-deb -I "$deb")
for want in "Package: cutline" "Depends:" "adduser" "libevent" "postinst" "prerm" "postrm" "conffiles"; do
  grep -qF "$want" <<<"$info" || fail "dpkg-deb -I lacks '$want'"
done
dpkg-deb -I "$deb" postinst | grep -q "adduser --system" || fail "postinst does not create the system user"
dpkg-deb -I "$deb" conffiles | grep -qx "/etc/cutline/cutline.yaml" || fail "cutline.yaml is not a conffile"

files=$(dpkg-deb -c "$deb")
for want in ./usr/bin/cutline-gateway ./usr/bin/cutline-backend ./usr/bin/cutline \
            ./etc/cutline/cutline.yaml ./etc/cutline/backend.env \
            ./usr/lib/systemd/system/cutline-gateway.service \
            ./usr/lib/systemd/system/cutline-backend.service \
            ./usr/share/cutline/grafana/cutline.json ./usr/share/cutline/prometheus/prometheus.yml \
            ./usr/share/cutline/prometheus/alerts.yml \
            ./usr/share/cutline/policies/cutline.yaml ./usr/share/cutline/policy.schema.json; do
  grep -qE " $want\$" <<<"$files" || fail "dpkg-deb -c lacks $want"
done
# The config follows the install prefix's sysconfdir: /etc for the package's /usr, never /usr/etc.
if grep -q " ./usr/etc/" <<<"$files"; then fail "the package puts configuration under /usr/etc"; fi

# `cmake --install --prefix X` keeps everything under X, the config in X/etc/cutline (staged
# under DESTDIR, so a path outside the prefix shows up here instead of on this machine).
DESTDIR="$scratch/staged" cmake --install "$build" --prefix /opt/cutline >"$scratch/install.log" ||
  { cat "$scratch/install.log"; fail "cmake --install failed"; }
[[ -f "$scratch/staged/opt/cutline/etc/cutline/cutline.yaml" ]] ||
  fail "cmake --install --prefix /opt/cutline did not put cutline.yaml in /opt/cutline/etc/cutline"
outside=$(cd "$scratch/staged" && find . -mindepth 1 -maxdepth 1 ! -name opt)
[[ -z "$outside" ]] || fail "cmake --install --prefix /opt/cutline wrote outside the prefix: $outside"

root=$scratch/root
dpkg-deb -x "$deb" "$root"
unit=$root/usr/lib/systemd/system/cutline-gateway.service
for want in "User=cutline" "ExecReload=/bin/kill -HUP \$MAINPID" "NoNewPrivileges=yes" \
            "ProtectSystem=strict" "ProtectHome=yes" "PrivateTmp=yes" "ReadWritePaths=/var/log/cutline"; do
  grep -qF "$want" "$unit" || fail "gateway unit lacks $want"
done

if command -v systemd-analyze >/dev/null 2>&1; then
  # verify --root would look for the whole OS (sysinit.target, /bin/kill) in the extracted tree:
  # verify each unit as shipped instead, with ExecStart pointed at the extracted binaries. It
  # exits 0 on unknown keys and unparsable values, so its messages are checked too.
  for u in cutline-gateway cutline-backend; do
    sed "s#/usr/bin/#$root/usr/bin/#g" "$root/usr/lib/systemd/system/$u.service" >"$scratch/$u.service"
    if ! out=$(systemd-analyze verify "$scratch/$u.service" 2>&1); then
      echo "$out"
      fail "systemd-analyze verify $u.service"
    fi
    if grep -qiE "unknown (key|section)|failed to parse|not executable|invalid|ignoring" <<<"$out"; then
      echo "$out"
      fail "systemd-analyze verify $u.service reported problems"
    fi
  done
  echo "systemd-analyze verify: both units clean"
elif [[ "${CI:-}" == true ]]; then
  fail "systemd-analyze is required in CI (apt-get install systemd)"
else
  echo "systemd-analyze not found: unit verification skipped"
fi

# The installed gateway, from the extracted tree, against the fake upstream.
"$fake" --port 0 >"$scratch/fake.out" 2>"$scratch/fake.err" &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^PORT ' "$scratch/fake.out" 2>/dev/null && break; sleep 0.05; done
fake_port=$(sed -n 's/^PORT //p' "$scratch/fake.out")
[[ -n "$fake_port" ]] || fail "fake upstream did not start"
sed -e "s#http://127.0.0.1:8081#http://127.0.0.1:$fake_port#" \
    -e "s#/var/log/cutline/access.log#$scratch/access.log#" \
    "$root/etc/cutline/cutline.yaml" >"$scratch/cutline.yaml"
"$root/usr/bin/cutline-gateway" --version | grep -q "^cutline-gateway " || fail "installed --version"
"$root/usr/bin/cutline-gateway" --config "$scratch/cutline.yaml" --port 0 --admin-port 0 \
  --ready-file "$scratch/ready.json" 2>"$scratch/gateway.err" &
pids+=($!)
for _ in $(seq 1 200); do [[ -s "$scratch/ready.json" ]] && break; sleep 0.05; done
[[ -s "$scratch/ready.json" ]] || { cat "$scratch/gateway.err"; fail "installed gateway did not start"; }
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$scratch/ready.json")
status=$(curl -s -o "$scratch/body" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
  -H 'Content-Type: application/json' \
  -d '{"model":"fake-tokens=3","messages":[{"role":"user","content":"hi"}],"max_tokens":8}')
[[ "$status" == 200 ]] || { cat "$scratch/body" "$scratch/gateway.err"; fail "status $status"; }
grep -q '"cutline"' "$scratch/body" || fail "no stop record in the answer"
grep -q '"cause"' "$scratch/access.log" || fail "no access-log line in the configured file"
echo "installed gateway answered 200 with a stop record"
