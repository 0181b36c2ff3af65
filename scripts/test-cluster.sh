#!/usr/bin/env bash
# `pnpm test:cluster`: the integration suites again, each test file on a Redis Cluster of its own
# (3 primaries, 3 replicas, AOF; TASKLINE_TEST_REDIS=cluster makes @taskline/testing's startRedis
# start one), then a 20-second chaos run on a cluster (two primaries SIGKILLed, one CLUSTER
# FAILOVER, service kills). CI runs it after `pnpm test`.
#
# The integration tier of `pnpm test` runs (scripts/test-tiers.sh: its parallel files in parallel, its
# ALONE files one at a time), except files with nothing to run on a cluster:
# - packages that never touch Redis (config, console, control, inference, log, metrics) and the
#   harness's own tests (testing); the unit tier starts no Redis at all;
# - files that watch one Redis from outside and start theirs explicitly (durability: AOF and
#   fsync settings of one server; the webhooks' replicas: one primary and its replica; unavailable: one node answering OOM, BUSY, READONLY;
#   mcp-listen-round-trips and the gpu-worker's redis-faults: a proxy in front of one Redis;
#   mcp-streams: ACL rules set through one connection, which reach one node; the engine's unconfirmed:
#   one paused or out-of-memory Redis; the scheduler's fairness-e2e, capacity and lent-slots:
#   MONITOR), and packages/engine/test/cluster.test.ts,
#   which starts a cluster of its own in `pnpm test` already.
# A file's timeout is longer than in `pnpm test`: six nodes per file, and a cluster costs more
# round trips per task. Six redis-servers a file: the parallel pass runs one file per core.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/test-tiers.sh

pnpm build

skip='^packages/(config|console|control|inference|log|metrics|testing)/'
skip+='|^packages/webhooks/test/replicas\.test\.ts$|/(durability|unavailable|unconfirmed|mcp-listen-round-trips|mcp-streams|redis-faults)\.test\.ts$|^services/scheduler/test/(fairness-e2e|capacity|lent-slots)\.test\.ts$'
skip+='|^packages/engine/test/cluster\.test\.ts$'
mapfile -t parallel < <(tier_files parallel | grep -Ev "$skip")
TASKLINE_TEST_REDIS=cluster run_tests --test-concurrency="${TASKLINE_TEST_CONCURRENCY:-$(nproc)}" --test-timeout=900000 -- "${parallel[@]}"
mapfile -t alone < <(tier_files alone | grep -Ev "$skip")
TASKLINE_TEST_REDIS=cluster run_tests --test-concurrency=1 --test-timeout=900000 -- "${alone[@]}"

TASKLINE_CHAOS_SECONDS=20 pnpm test:chaos:cluster
