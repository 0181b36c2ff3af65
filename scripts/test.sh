#!/usr/bin/env bash
# The one test command (`pnpm test`): type-check and build, type-check the tests, lint and format
# check, then the tiers of scripts/test-tiers.sh (unit, integration in parallel, integration alone),
# then the suites. Tests start their own redis-server processes (AOF, temporary folders, free
# ports) and never touch a Redis already running here.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-tiers.sh

pnpm build
pnpm lint

bash scripts/test-unit.sh --no-build

# Integration files wait on Redis, processes and timers far more than they compute: one more file
# than there are cores keeps the CPUs busy without starving the timers (see docs/testing.md).
concurrency=${TASKLINE_TEST_CONCURRENCY:-$(($(nproc) + 1))}
mapfile -t parallel < <(tier_files parallel)
# A file's timeout catches a hang, not slowness: a file sharing the cores takes longer than alone.
run_tests --test-concurrency="$concurrency" --test-timeout=600000 -- "${parallel[@]}"
mapfile -t alone < <(tier_files alone)
run_tests --test-concurrency=1 --test-timeout=300000 -- "${alone[@]}"

# The deploy checks and the benchmark harness at toy sizes (it must run and write a well-formed
# report; speed is not judged) share nothing (ports are free ones, folders their own): side by side.
bench_log=$(mktemp)
pnpm bench:smoke >"$bench_log" 2>&1 &
bench=$!
deploy=0
pnpm test:deploy || deploy=$?
smoke=0
wait "$bench" || smoke=$?
echo "--- pnpm bench:smoke (run beside test:deploy)"
cat "$bench_log"
rm -f "$bench_log"
[ "$deploy" = 0 ] && [ "$smoke" = 0 ] || { echo "test:deploy exited $deploy, bench:smoke $smoke" >&2; exit 1; }

pnpm test:conformance
# The chaos run at reduced length: faults, invariants and overload on the local multi-replica cluster.
TASKLINE_CHAOS_SECONDS=20 pnpm test:chaos
