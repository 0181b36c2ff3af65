#!/usr/bin/env bash
# Installs what Taskline needs on a fresh Debian machine with Node 20: pnpm (pinned, through npm:
# corepack fails this registry's signature check), redis-server, promtool, haproxy, podman,
# buildah, runc and debootstrap (`pnpm test:images`), Debian's chromium (the console's browser
# tests), then the workspace's packages. Safe to run again; it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PNPM_VERSION=10.34.8
if [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
  npm install -g "pnpm@$PNPM_VERSION" >/dev/null
fi

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v promtool >/dev/null || missing+=(prometheus)
command -v haproxy >/dev/null || missing+=(haproxy)
for tool in podman buildah debootstrap runc; do command -v "$tool" >/dev/null || missing+=("$tool"); done
# The operator console's browser tests drive the system browser (playwright-core, nothing downloaded).
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# onnxruntime-node's install step downloads CUDA binaries; `skip` keeps the bundled CPU build.
# GPU images install the CUDA build (deploy/docker/gpu-worker.Dockerfile).
export ONNXRUNTIME_NODE_INSTALL=skip
pnpm install --frozen-lockfile
pnpm build
