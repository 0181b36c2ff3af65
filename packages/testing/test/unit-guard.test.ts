// The unit tier's guard (scripts/unit-guard.mjs): a file of `pnpm test:unit` that starts a process fails.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'taskline-unit-guard-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const testing = pathToFileURL(join(ROOT, 'packages/testing/dist/index.js')).href;
// A runner that sees this file's test context skips its files as a recursive run.
const { NODE_TEST_CONTEXT: _context, ...env } = process.env;

/** Runs `source` as a test file the way `pnpm test:unit` runs the unit tier. */
function runAsUnit(name: string, source: string) {
  const file = join(dir, name);
  writeFileSync(file, source);
  const run = spawnSync(
    process.execPath,
    ['--import', './scripts/unit-guard.mjs', '--test', '--test-force-exit', '--test-reporter=tap', file],
    { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 },
  );
  return { status: run.status, output: run.stdout + run.stderr };
}

test('a unit-tier file that starts Redis fails, naming the process', () => {
  const run = runAsUnit(
    'redis.test.mjs',
    `import { test } from 'node:test';
     import { startRedis } from '${testing}';
     test('starts Redis', async () => { const redis = await startRedis(); await redis.stop(); });`,
  );
  assert.notEqual(run.status, 0, run.output);
  assert.match(run.output, /unit tier: spawn\(redis-server\) starts a process/);
});

test('every way to start a process is refused, in worker threads too; in-process work passes', () => {
  writeFileSync(
    join(dir, 'worker.mjs'),
    `import { spawnSync } from 'node:child_process';
     import { parentPort } from 'node:worker_threads';
     try { spawnSync('true'); parentPort.postMessage('spawned'); }
     catch (err) { parentPort.postMessage(err.message); }`,
  );
  const run = runAsUnit(
    'ways.test.mjs',
    `import assert from 'node:assert/strict';
     import { execFile, execSync, fork } from 'node:child_process';
     import { createRequire } from 'node:module';
     import { test } from 'node:test';
     import { Worker } from 'node:worker_threads';
     test('refused', async () => {
       assert.throws(() => execFile('true'), /unit tier: execFile\\(true\\)/);
       assert.throws(() => execSync('true'), /unit tier: execSync\\(true\\)/);
       assert.throws(() => fork('x.js'), /unit tier: fork\\(x.js\\)/);
       const required = createRequire(import.meta.url)('child_process');
       assert.throws(() => required.spawnSync('true'), /unit tier: spawnSync\\(true\\)/);
       const worker = new Worker(new URL('./worker.mjs', import.meta.url));
       const [message] = await new Promise((resolve) => worker.once('message', (m) => resolve([m])));
       await worker.terminate();
       assert.match(message, /unit tier: spawnSync\\(true\\)/);
     });`,
  );
  assert.equal(run.status, 0, run.output);
  assert.match(run.output, /# pass 1/);
});
