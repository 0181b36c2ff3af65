#!/usr/bin/env bash
# The one test command (`pnpm test`): build, the unit tier, then two lanes side by side until both
# end, then the chaos run. The alone lane runs the ALONE tier of scripts/test-tiers.sh one file at a
# time at normal priority, then (at the lowest priority from there) the deploy checks beside the
# benchmark smoke run and MCP conformance; the background lane, at the lowest CPU priority
# (nice 19), runs the lint and format checks and the parallel integration tier. Tests start their
# own redis-server processes (AOF, temporary folders, free ports) and never touch a Redis already
# running here.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-tiers.sh

# Where the run's minutes go: each phase's end, in seconds since the start (a lane's own tiers
# print their files' times).
mark() { echo "# $1 at $SECONDS s"; }

pnpm build
mark 'build done'
bash scripts/test-unit.sh --no-build
mark 'unit tier done'

# The background lane. At nice 19 it takes only the CPU the alone lane leaves idle (an alone file
# mostly waits on leases, timers and processes), so the alone files keep the machine they need while
# the rest of the run fills the gaps. Its processes (redis-server, services) inherit the priority.
background_lane() {
  renice -n 19 -p "$BASHPID" >/dev/null
  local cli rest
  mapfile -t cli < <(tier_files parallel | grep -E "$MACHINE_NODE_FILES")
  mapfile -t rest < <(tier_files parallel | grep -Ev "$MACHINE_NODE_FILES")
  # A file's timeout catches a hang, not slowness: a file sharing the cores takes longer than alone.
  # The CLI's files (their own runner, on the machine's Node.js: see run_tests) beside the lint:
  # run first in the tier, its longest file alone for a minute would leave a core idle.
  pnpm lint &
  local lint=$! cli_rc=0
  run_tests --test-concurrency="${#cli[@]}" --test-timeout=600000 -- "${cli[@]}" || cli_rc=$?
  wait "$lint"
  mark 'lint done'
  # Integration files wait on Redis, processes and timers far more than they compute: one more file
  # than there are cores keeps the CPUs busy without starving the timers (see docs/testing.md).
  local concurrency=${TASKLINE_TEST_CONCURRENCY:-$(($(nproc) + 1))}
  run_tests --test-concurrency="$concurrency" --test-timeout=600000 -- "${rest[@]}"
  mark 'parallel tier done'
  return "$cli_rc"
}

# The alone lane: the alone tier, then, at the background lane's priority, the deploy checks beside
# the benchmark harness at toy sizes (it must run and write a well-formed report; speed is not
# judged; they share nothing), then MCP conformance.
alone_lane() {
  local alone
  mapfile -t alone < <(tier_files alone)
  run_tests --test-concurrency=1 --test-timeout=300000 -- "${alone[@]}"
  mark 'alone tier done'
  # The suites at the background lane's priority: at normal priority their CPU-bound steps (Helm
  # renders) starved the parallel tier, whose replica-ack test then timed out its 400 ms WAIT.
  renice -n 19 -p "$BASHPID" >/dev/null
  local bench_log bench deploy=0 smoke=0
  bench_log=$(mktemp)
  pnpm bench:smoke >"$bench_log" 2>&1 &
  bench=$!
  bash test/deploy/run.sh || deploy=$?
  wait "$bench" || smoke=$?
  echo "--- pnpm bench:smoke (run beside test:deploy)"
  cat "$bench_log"
  rm -f "$bench_log"
  [ "$deploy" = 0 ] && [ "$smoke" = 0 ] || { echo "test:deploy exited $deploy, bench:smoke $smoke" >&2; return 1; }
  mark 'deploy and bench:smoke done'
  # Built above: the suite's entry without `pnpm test:conformance`'s own `tsc -b`.
  "$TEST_NODE" --import tsx test/conformance/run.ts
  mark 'conformance done'
}

# The background lane's output goes to a file, shown once both lanes end, so the two lanes' reports
# do not interleave; `tail` of the file shows its progress meanwhile.
lane_log=$(mktemp)
echo "--- background lane (lint, parallel tier) logs to $lane_log"
set +e
(set -e; background_lane) >"$lane_log" 2>&1 &
lane=$!
(set -e; alone_lane)
alone_rc=$?
wait "$lane"
lane_rc=$?
set -e
echo "--- background lane"
cat "$lane_log"
rm -f "$lane_log"
[ "$alone_rc" = 0 ] && [ "$lane_rc" = 0 ] || { echo "alone lane exited $alone_rc, background lane $lane_rc" >&2; exit 1; }

# The chaos run at reduced length (faults, invariants and overload on the local multi-replica
# cluster) runs by itself: overload is its point.
mark 'both lanes done'
TASKLINE_CHAOS_SECONDS=20 "$TEST_NODE" --import tsx test/chaos/src/run.ts
mark 'chaos done'
