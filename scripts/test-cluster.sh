#!/usr/bin/env bash
# `pnpm test:cluster`: the integration suites again, each test file on a Redis Cluster of its own
# (3 primaries, 3 replicas, AOF; TASKLINE_TEST_REDIS=cluster makes @taskline/testing's startRedis
# start one), then a 20-second chaos run on a cluster (two primaries SIGKILLed, one CLUSTER
# FAILOVER, service kills). CI runs it after `pnpm test`.
#
# Every test file of `pnpm test` runs, except those with nothing to run on a cluster:
# - packages that never touch Redis (config, console, control, inference, log, metrics) and the
#   harness's own tests (testing);
# - files that watch one Redis from outside and start theirs explicitly (durability: AOF and
#   fsync settings of one server; unavailable: one node answering OOM, BUSY, READONLY;
#   mcp-listen-round-trips and the gpu-worker's redis-faults: a proxy in front of one Redis; the scheduler's fairness-e2e and
#   capacity: MONITOR), and packages/engine/test/cluster.test.ts,
#   which starts a cluster of its own in `pnpm test` already.
# A file's timeout is longer than in `pnpm test`: six nodes per file, and a cluster costs more
# round trips per task.
set -euo pipefail
cd "$(dirname "$0")/.."

pnpm build

skip='^packages/(config|console|control|inference|log|metrics|testing)/'
skip+='|/(durability|unavailable|mcp-listen-round-trips|redis-faults)\.test\.ts$|^services/scheduler/test/(fairness-e2e|capacity)\.test\.ts$'
skip+='|^packages/engine/test/cluster\.test\.ts$'
mapfile -t files < <(
  find packages services test -path '*/node_modules' -prune -o -path '*/test/*.test.ts' -print | sort | grep -Ev "$skip"
)
TASKLINE_TEST_REDIS=cluster node --import tsx --test --test-concurrency=1 --test-timeout=900000 --test-force-exit "${files[@]}"

TASKLINE_CHAOS_SECONDS=20 pnpm test:chaos:cluster
