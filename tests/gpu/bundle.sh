#!/usr/bin/env bash
# Packs what tests/gpu/run.sh runs, built here, for a GPU machine that cannot build Cutline (its
# image lacks the Debian packages the build needs):
#   tests/gpu/bundle.sh BUILD DEST
# copies the binaries run.sh calls from BUILD (a CUDA build for the GPU's architecture) to
# DEST/real/, every shared library they load except the CUDA ones (glibc and its loader included)
# to DEST/lib/, and puts a wrapper at each binary's path under DEST/build/ that starts the real
# one through the carried loader, with the CUDA plugin (libcutline_cuda.so, dlopen'd by the
# device code) carried too and named by CUTLINE_CUDA_PLUGIN. On the GPU machine:
#   CUDA_LIBS=<dirs of libcudart and libcublas there> CUTLINE_GPU_PREBUILT=1 BUILD=DEST/build \
#     bash tests/gpu/run.sh
set -euo pipefail
build=$(cd "${1:?usage: bundle.sh BUILD DEST}" && pwd)
dest=${2:?usage: bundle.sh BUILD DEST}
bins=(tests/unit/backend/device/device_unit_tests
      tests/unit/backend/engine/tiny_model/engine_tiny_model_tests
      tests/bench/decode_bench tests/gpu/device_bandwidth
      backend/cutline-backend gateway/cutline-gateway tools/cutline)
rm -rf "$dest"
mkdir -p "$dest/real" "$dest/lib" "$dest/build"
dest=$(cd "$dest" && pwd)
plugin=backend/device/libcutline_cuda.so
cp "$build/$plugin" "$dest/lib/"
ldd "$build/$plugin" | awk '/=>/ {print $3}' | grep -vE 'libcuda|libcudart|libcublas|libnvidia' |
  while read -r lib; do [[ -f "$lib" ]] && cp -L -n "$lib" "$dest/lib/"; done
for b in "${bins[@]}"; do
  name=$(basename "$b")
  cp "$build/$b" "$dest/real/$name"
  strip --strip-debug "$dest/real/$name" 2>/dev/null || true
  # The CUDA runtime and cuBLAS come from the GPU machine's toolkit (CUDA_LIBS), matching its
  # driver; everything else, the C library included, comes from here.
  ldd "$build/$b" | awk '/=>/ {print $3} !/=>/ && /\// {print $1}' |
    grep -vE 'libcuda|libcudart|libcublas|libnvidia' | while read -r lib; do
      [[ -f "$lib" ]] && cp -L -n "$lib" "$dest/lib/"
    done
  mkdir -p "$dest/build/$(dirname "$b")"
  cat >"$dest/build/$b" <<WRAP
#!/bin/sh
here=\$(cd "\$(dirname "\$0")" && pwd)
root=\${here%/build/$(dirname "$b")}
export CUTLINE_CUDA_PLUGIN=\${CUTLINE_CUDA_PLUGIN:-\$root/lib/libcutline_cuda.so}
exec "\$root/lib/$(basename "$(ldd "$build/$b" | awk '/ld-linux/ {print $1}')")" \\
  --library-path "\$root/lib:\${CUDA_LIBS:-/usr/local/cuda/lib64}:\${LD_LIBRARY_PATH:-}" \\
  "\$root/real/$name" "\$@"
WRAP
  chmod +x "$dest/build/$b"
done
du -sh "$dest"
