#!/usr/bin/env bash
# `pnpm test:images`: builds the four images offline (build.sh; the Debian base is cached, and
# podman reuses unchanged layers), then runs the three services together against a Redis through
# the README's create, stream and cancel flow (flow.test.ts); the tool-worker image is only built.
# About 10 minutes from scratch on 2 shared cores.
set -euo pipefail
cd "$(dirname "$0")/../../.."
for tool in podman debootstrap runc; do
  command -v "$tool" >/dev/null || { echo "$tool missing: run scripts/bootstrap.sh" >&2; exit 1; }
done
bash test/deploy/images/build.sh
node --import tsx --test --test-timeout=600000 test/deploy/images/flow.test.ts
