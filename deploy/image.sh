#!/usr/bin/env bash
# Builds the container image the Kubernetes manifests (deploy/k8s) run: cutline:latest from
# deploy/Dockerfile, with the repository as the context (.dockerignore keeps build trees out).
# CUTLINE_IMAGE overrides the name (then change deploy/k8s's image: lines to match);
# CUTLINE_IMAGE_BUILDER picks the builder (default: docker, else podman, else buildah).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
image=${CUTLINE_IMAGE:-cutline:latest}
builder=${CUTLINE_IMAGE_BUILDER:-}
if [[ -z "$builder" ]]; then
  for b in docker podman buildah; do
    if command -v "$b" >/dev/null 2>&1; then builder=$b; break; fi
  done
fi
[[ -n "$builder" ]] || { echo "image.sh: no docker, podman or buildah on PATH" >&2; exit 1; }
case $builder in
  buildah) exec buildah bud -f "$root/deploy/Dockerfile" -t "$image" "$root" ;;
  *) exec "$builder" build -f "$root/deploy/Dockerfile" -t "$image" "$root" ;;
esac
