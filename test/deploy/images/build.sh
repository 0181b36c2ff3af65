#!/usr/bin/env bash
# Builds the four images offline with podman on the local base (base.sh): no registry, no
# network. pnpm installs from this machine's pnpm store, mounted into the build. The worker is its
# CPU variant: the CUDA variant's install step downloads CUDA binaries, which needs the network.
# crun refuses this host's cgroups, hence runc with cgroupfs; chroot isolation cannot take
# --network=none, so pnpm's --offline is what keeps the build off the network. Tags: localhost/taskline/<svc>:local.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BASE=$(bash test/deploy/images/base.sh)
STORE=$(dirname "$(pnpm store path)")
for svc in ${*:-api scheduler gpu-worker tool-worker}; do
  extra=()
  [ "$svc" = gpu-worker ] && extra=(--build-arg ONNXRUNTIME_NODE_INSTALL=skip)
  echo "building $svc on $BASE" >&2
  podman --runtime runc --cgroup-manager=cgroupfs build \
    --pull=never --isolation=chroot \
    --build-arg "BUILD_BASE=$BASE" --build-arg "RUNTIME_BASE=$BASE" \
    --build-arg "PNPM_INSTALL_FLAGS=--offline --store-dir=/pnpm-store" \
    --build-arg "REVISION=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    --volume "$STORE:/pnpm-store" \
    "${extra[@]}" \
    -f "deploy/docker/$svc.Dockerfile" --ignorefile "deploy/docker/$svc.Dockerfile.dockerignore" \
    -t "localhost/taskline/$svc:local" . >&2
done
