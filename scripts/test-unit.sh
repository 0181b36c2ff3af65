#!/usr/bin/env bash
# `pnpm test:unit`: the unit tier of scripts/test-tiers.sh, what a developer runs on every edit
# (under a minute): no Redis, no processes (scripts/unit-guard.mjs fails any attempt). The files are
# CPU-bound in this process, so as many run at once as there are cores. `--no-build` skips the
# build when the caller (scripts/test.sh) has just built.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-tiers.sh

# Packages import each other's dist: a changed src must be built first (a no-op when nothing changed).
[ "${1:-}" = --no-build ] || pnpm -s build
mapfile -t files < <(tier_files unit)
run_tests --import ./scripts/unit-guard.mjs --test-concurrency="$(nproc)" --test-timeout=120000 -- "${files[@]}"
