#!/usr/bin/env bash
# The Debian package, built and inspected the way an operator meets it: cpack in a scratch
# directory, dpkg-deb -I (control: Depends, maintainer scripts, conffiles) and -c (the files),
# cmake --install into a prefix (nothing outside it), systemd-analyze verify on the units (where
# systemd-analyze exists; required when CI=true), then
# the installed gateway run from the extracted tree (dpkg-deb -x) against the fake upstream until
# a chat completion answers 200. Also: the main package's binaries NEED no CUDA library and its
# backend starts on the tiny model without the CUDA plugin (a host without CUDA); in a CUDA build
# the cutline-backend-cuda package holds the plugin and Depends on what it NEEDs; the logrotate
# file; postinst/postrm run against a scratch /var with the user tools stubbed (purge removes
# /var/{lib,log,cache}/cutline and the user and group, remove keeps them).
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
dpkg-deb -I "$deb" conffiles | grep -qx "/etc/logrotate.d/cutline" || fail "the logrotate file is not a conffile"
if grep -qiE "cuda|cublas" <<<"$(dpkg-deb -f "$deb" Depends)"; then
  fail "cutline Depends on CUDA: $(dpkg-deb -f "$deb" Depends)"
fi

files=$(dpkg-deb -c "$deb")
for want in ./usr/bin/cutline-gateway ./usr/bin/cutline-backend ./usr/bin/cutline \
            ./etc/cutline/cutline.yaml ./etc/cutline/backend.env \
            ./usr/lib/systemd/system/cutline-gateway.service \
            ./usr/lib/systemd/system/cutline-backend.service \
            ./usr/share/cutline/grafana/cutline.json ./usr/share/cutline/prometheus/prometheus.yml \
            ./usr/share/cutline/prometheus/alerts.yml \
            ./usr/share/cutline/policies/cutline.yaml ./usr/share/cutline/policy.schema.json \
            ./etc/logrotate.d/cutline; do
  grep -qE " $want\$" <<<"$files" || fail "dpkg-deb -c lacks $want"
done
# The config follows the install prefix's sysconfdir: /etc for the package's /usr, never /usr/etc.
if grep -q " ./usr/etc/" <<<"$files"; then fail "the package puts configuration under /usr/etc"; fi
if grep -q "libcutline_cuda" <<<"$files"; then fail "the CUDA plugin is in the main package"; fi

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

# A host without CUDA: no binary of the main package NEEDs libcudart or libcublas, and its
# backend, with no CUDA plugin and no CUDA library directory on the search path, answers --help
# and serves the tiny model on the CPU, saying why CUDA is not used.
for b in "$root"/usr/bin/*; do
  needed=$(objdump -p "$b" | awk '/NEEDED/ {print $2}')
  if grep -qE "libcudart|libcublas|libcuda\." <<<"$needed"; then
    fail "$(basename "$b") NEEDs a CUDA library: $(tr '\n' ' ' <<<"$needed")"
  fi
done
nocuda=(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH=/nonexistent
        PATH=/usr/sbin:/usr/bin:/sbin:/bin CUTLINE_CUDA_PLUGIN="$root/usr/lib/cutline/libcutline_cuda.so")
"${nocuda[@]}" "$root/usr/bin/cutline-backend" --help >"$scratch/backend-help" 2>&1 ||
  { cat "$scratch/backend-help"; fail "packaged cutline-backend --help"; }
"${nocuda[@]}" "$root/usr/bin/cutline-backend" --port 0 --model tiny=builtin --kv-memory 64MiB \
  --cache-dir "$scratch/cache" >"$scratch/backend.out" 2>"$scratch/backend.err" &
pids+=($!)
for _ in $(seq 1 600); do grep -q "listening on" "$scratch/backend.out" 2>/dev/null && break; sleep 0.1; done
backend_url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$scratch/backend.out")
[[ -n "$backend_url" ]] || { cat "$scratch/backend.err"; fail "packaged backend did not start without CUDA"; }
curl -sf "$backend_url/v1/models" | grep -q '"tiny"' ||
  { cat "$scratch/backend.err"; fail "packaged backend does not list the tiny model"; }
grep -q "device cpu" "$scratch/backend.err" || { cat "$scratch/backend.err"; fail "backend not on the CPU"; }
echo "packaged backend serves the tiny model without CUDA: $(grep -m1 "CUDA not usable" "$scratch/backend.err" || echo "(no CUDA build)")"

# The CUDA package (CUDA builds): the plugin at the path the backend looks in, and Depends naming
# a package for each CUDA library it NEEDs (NVIDIA's repository's names: cuda-cudart-13-0 holds
# libcudart.so.13, libcublas-13-0 libcublas.so.13).
cuda_deb=$(ls "$scratch"/pkg/cutline-backend-cuda_*.deb 2>/dev/null | head -n1 || true)
if [[ -n "$cuda_deb" ]]; then
  dpkg-deb -c "$cuda_deb" | grep -qE " ./usr/lib/cutline/libcutline_cuda.so\$" ||
    fail "cutline-backend-cuda lacks /usr/lib/cutline/libcutline_cuda.so"
  depends=$(dpkg-deb -f "$cuda_deb" Depends)
  grep -qE "(^|, )cutline \(= " <<<"$depends" || fail "cutline-backend-cuda does not depend on cutline: $depends"
  dpkg-deb -x "$cuda_deb" "$scratch/cuda"
  needed=$(objdump -p "$scratch/cuda/usr/lib/cutline/libcutline_cuda.so" | awk '/NEEDED/ {print $2}')
  grep -q "libcudart.so" <<<"$needed" || fail "the plugin does not NEED libcudart (is it the CUDA device?)"
  for lib in $(grep -E "^lib(cudart|cublas|cublasLt)\.so\.[0-9]+$" <<<"$needed"); do
    base=${lib%%.so.*} major=${lib##*.so.}
    case $base in libcudart) pkg=cuda-cudart-$major- ;; *) pkg=$base-$major- ;; esac
    grep -qE "(^|, )$pkg[0-9]+" <<<"$depends" || fail "plugin NEEDs $lib but Depends lacks $pkg*: $depends"
  done
  echo "cutline-backend-cuda: Depends $depends"
  # Both packages in one tree: the backend finds the plugin where the package puts it (no
  # CUTLINE_CUDA_PLUGIN) and gets past loading it (here: no GPU or no CUDA library, logged).
  both=$scratch/both
  dpkg-deb -x "$deb" "$both" && dpkg-deb -x "$cuda_deb" "$both"
  env -u CUTLINE_CUDA_PLUGIN "$both/usr/bin/cutline-backend" --port 0 --model tiny=builtin \
    --kv-memory 64MiB --cache-dir "$scratch/cache" >"$scratch/both.out" 2>"$scratch/both.err" &
  pids+=($!)
  for _ in $(seq 1 600); do grep -qE "device (cuda|cpu)" "$scratch/both.err" 2>/dev/null && break; sleep 0.1; done
  grep -qE "device (cuda|cpu)" "$scratch/both.err" || { cat "$scratch/both.err"; fail "backend with the plugin did not start"; }
  if grep -q "no CUDA plugin" "$scratch/both.err"; then
    cat "$scratch/both.err"; fail "the backend does not find the installed plugin"
  fi
  echo "with cutline-backend-cuda: $(grep -m1 -E "CUDA not usable|device cuda" "$scratch/both.err")"
  # Both packages on a host without libcudart: where a private mount namespace is allowed (root),
  # the directories holding the CUDA libraries are hidden and the backend must still serve on
  # the CPU, naming the missing library.
  cudart_dirs=$(ldconfig -p 2>/dev/null | awk '/libcudart\.so|libcublas\.so/ {print $NF}' |
                xargs -r -n1 dirname | xargs -r -n1 readlink -f | sort -u | tr '\n' ' ')
  if [[ -n "$cudart_dirs" ]] && unshare -m true 2>/dev/null; then
    mkdir -p "$scratch/empty"
    unshare -m sh -c 'for d in $1; do mount --bind "$2" "$d"; done; shift 2; exec "$@"' sh \
      "$cudart_dirs /usr/local/cuda" "$scratch/empty" env -u LD_LIBRARY_PATH \
      "$both/usr/bin/cutline-backend" --port 0 --model tiny=builtin --kv-memory 64MiB \
      --cache-dir "$scratch/cache" >"$scratch/nolib.out" 2>"$scratch/nolib.err" &
    pids+=($!)
    for _ in $(seq 1 600); do grep -q "listening on" "$scratch/nolib.out" 2>/dev/null && break; sleep 0.1; done
    grep -q "listening on" "$scratch/nolib.out" ||
      { cat "$scratch/nolib.err"; fail "backend with the plugin but no libcudart did not start"; }
    grep -qE "CUDA not usable \(cuda: cannot load .*libcutline_cuda.so: libcu(dart|blas)" "$scratch/nolib.err" ||
      { cat "$scratch/nolib.err"; fail "no clear log line for the missing CUDA library"; }
    echo "plugin without libcudart: $(grep -m1 "CUDA not usable" "$scratch/nolib.err")"
  fi
fi

# logrotate: the access log the packaged config writes, compressed, and the gateway told to
# reopen (SIGUSR1) rather than copytruncate; the new file keeps 0640 cutline:adm.
lr=$root/etc/logrotate.d/cutline
for want in "/var/log/cutline/*.log" compress "create 0640 cutline adm" "su cutline adm" \
            "--signal=USR1 cutline-gateway.service"; do
  grep -qF -- "$want" "$lr" || fail "logrotate file lacks '$want'"
done
grep -qE "^ *(daily|weekly|size|maxsize) " "$lr" || grep -qE "^ *(daily|weekly)$" "$lr" ||
  fail "logrotate file rotates neither by time nor by size"

# The maintainer scripts against a scratch /var, the user tools stubbed to record their calls.
stubs=$scratch/stubs var=$scratch/var
mkdir -p "$stubs" "$var"
for tool in adduser deluser delgroup chown systemctl; do
  printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$tool" "$scratch/calls" >"$stubs/$tool"
done
printf '#!/bin/sh\n[ -e "%s" ]\n' "$scratch/user-exists" >"$stubs/getent"
chmod +x "$stubs"/*
scripted() {  # scripted SCRIPT ARG: the package's maintainer script with /var/ in the scratch
  dpkg-deb -I "$deb" "$1" | sed "s#/var/#$var/#g" >"$scratch/$1"
  PATH="$stubs:$PATH" sh -e "$scratch/$1" "$2"
}
scripted postinst configure || fail "postinst configure failed"
grep -q "^adduser --system --group .* cutline" "$scratch/calls" || fail "postinst made no system user"
grep -q "^chown cutline:adm $var/log/cutline" "$scratch/calls" || fail "postinst: log dir not cutline:adm"
[[ "$(stat -c %a "$var/log/cutline")" == 2750 ]] || fail "log dir mode $(stat -c %a "$var/log/cutline"), want 2750"
for d in lib log cache; do [[ -d "$var/$d/cutline" ]] || fail "postinst made no $var/$d/cutline"; done
touch "$scratch/user-exists" "$var/log/cutline/access.log" "$var/lib/cutline/state"
: >"$scratch/calls"
scripted postrm remove || fail "postrm remove failed"
[[ -f "$var/lib/cutline/state" && -f "$var/log/cutline/access.log" ]] || fail "postrm remove deleted data"
if grep -qE "^(deluser|delgroup)" "$scratch/calls"; then fail "postrm remove deleted the user"; fi
scripted postrm purge || fail "postrm purge failed"
for d in lib log cache; do [[ ! -e "$var/$d/cutline" ]] || fail "purge left $var/$d/cutline"; done
grep -q "^deluser --system .*cutline" "$scratch/calls" || fail "purge did not delete the user"
grep -q "^delgroup --system .*cutline" "$scratch/calls" || fail "purge did not delete the group"
echo "maintainer scripts: postinst makes the user and dirs, purge removes them, remove keeps them"
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
gateway_pid=$!
pids+=($gateway_pid)
for _ in $(seq 1 200); do [[ -s "$scratch/ready.json" ]] && break; sleep 0.05; done
[[ -s "$scratch/ready.json" ]] || { cat "$scratch/gateway.err"; fail "installed gateway did not start"; }
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$scratch/ready.json")
chat() {
  curl -s -o "$scratch/body" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
    -H 'Content-Type: application/json' \
    -d '{"model":"fake-tokens=3","messages":[{"role":"user","content":"hi"}],"max_tokens":8}'
}
status=$(chat)
[[ "$status" == 200 ]] || { cat "$scratch/body" "$scratch/gateway.err"; fail "status $status"; }
grep -q '"cutline"' "$scratch/body" || fail "no stop record in the answer"
grep -q '"cause"' "$scratch/access.log" || fail "no access-log line in the configured file"
echo "installed gateway answered 200 with a stop record"
[[ "$(stat -c %a "$scratch/access.log")" == 640 ]] ||
  fail "the gateway created the access log $(stat -c %a "$scratch/access.log"), want 640"

# The packaged logrotate file, run for real on that log (its user, group and the systemctl call
# pointed at this user and this gateway): the log is renamed, the gateway reopens its path, and
# the next request's line lands in the new file.
if command -v logrotate >/dev/null 2>&1; then
  me=$(id -un) grp=$(id -gn)
  sed -e "s#^/var/log/cutline/\*\.log #$scratch/access.log #" \
      -e "s#su cutline adm#su $me $grp#" -e "s#create 0640 cutline adm#create 0640 $me $grp#" \
      -e "s#if \[ -d /run/systemd/system \]#if true#" \
      -e "s#systemctl kill .*cutline-gateway.service.*#kill -USR1 $gateway_pid#" "$lr" >"$scratch/logrotate.conf"
  logrotate --force --state "$scratch/logrotate.state" "$scratch/logrotate.conf" ||
    fail "logrotate failed on the packaged file"
  grep -q '"cause"' "$scratch/access.log.1" 2>/dev/null || fail "logrotate did not rotate the access log"
  for _ in $(seq 1 100); do grep -q "access log reopened" "$scratch/gateway.err" && break; sleep 0.05; done
  grep -q "access log reopened" "$scratch/gateway.err" || fail "the gateway did not reopen its log"
  [[ "$(chat)" == 200 ]] || fail "status after rotation"
  for _ in $(seq 1 100); do grep -q '"cause"' "$scratch/access.log" && break; sleep 0.05; done
  grep -q '"cause"' "$scratch/access.log" || fail "no line in the new access log after rotation"
  [[ "$(stat -c %a "$scratch/access.log")" == 640 ]] || fail "the rotated-in access log is not 0640"
  echo "logrotate: the access log rotated, reopened, and written again"
elif [[ "${CI:-}" == true ]]; then
  fail "logrotate is required in CI (apt-get install logrotate)"
else
  echo "logrotate not found: the rotation run skipped"
fi
