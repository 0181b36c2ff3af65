#!/usr/bin/env bash
# The one test command (`pnpm test`): type-check and build, type-check the tests, lint and format
# check, then every test file of every package and service. Tests start their own redis-server
# processes (AOF, temporary folders, free ports) and never touch a Redis already running here.
set -euo pipefail
cd "$(dirname "$0")/.."

pnpm build
pnpm lint

mapfile -t files < <(find packages services test -path '*/node_modules' -prune -o -path '*/test/*.test.ts' -print | sort)
# --test-force-exit: a file whose cleanup failed (a server it started still running) ends as a
# failure instead of holding the run open until CI's limit.
node --import tsx --test --test-concurrency=1 --test-timeout=300000 --test-force-exit "${files[@]}"

pnpm test:deploy
pnpm test:conformance
# The benchmark harness at toy sizes: it must run and write a well-formed report (speed is not judged).
pnpm bench:smoke
# The chaos run at reduced length: faults, invariants and overload on the local multi-replica cluster.
TASKLINE_CHAOS_SECONDS=20 pnpm test:chaos
