#!/usr/bin/env bash
# `pnpm test:cluster`: the integration suites again, each test file on a Redis Cluster of its own
# (3 primaries, 3 replicas, AOF; TASKLINE_TEST_REDIS=cluster makes @taskline/testing's startRedis
# start one). Files that watch one Redis from outside (MONITOR, raw connections to a single node,
# a replica of their own) stay on one Redis: their start asks for it explicitly or they are left
# out below. `pnpm test` runs packages/engine/test/cluster.test.ts (failover, WAIT per node) always.
# A file's timeout is longer than in `pnpm test`: six nodes per file, and a cluster costs more
# round trips per task.
set -euo pipefail
cd "$(dirname "$0")/.."

pnpm build

files=(
  packages/engine/test/*.test.ts
  packages/tools/test/*.test.ts
  packages/mcp/test/*.test.ts
  packages/client/test/*.test.ts
  services/gpu-worker/test/*.test.ts
  services/scheduler/test/dispatch.test.ts
  services/api/test/tasks.test.ts
  services/api/test/errors.test.ts
  services/api/test/responses-retry.test.ts
  services/api/test/openai-sdk.test.ts
  services/api/test/mcp-listen.test.ts
)
TASKLINE_TEST_REDIS=cluster node --import tsx --test --test-concurrency=1 --test-timeout=900000 "${files[@]}"
