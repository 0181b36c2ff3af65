/**
 * A drained worker exits even when one of its resources never finishes closing: chaos saw a
 * drained gpu-worker stay up past its 30 s bound, still connected to Redis (the metrics listener's
 * close had not returned). The process here holds a close that never settles.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const PROCESS = fileURLToPath(new URL('../dist/process.js', import.meta.url));

test('closeAndExit exits 0 within its bound when a close hangs, naming the step', async () => {
  const script = `
    import { closeAndExit } from ${JSON.stringify(PROCESS)};
    setInterval(() => {}, 1000); // the open handle a hung close leaves
    await closeAndExit({
      metricsServer: { close: () => new Promise(() => {}) },
      metrics: { close() {} },
      hub: { close() {} },
      redis: { disconnect() {} },
      tracing: { shutdown: async () => {} },
    }, { warn: (msg, fields) => console.log(JSON.stringify({ msg, ...fields })) });
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  // Without the bound the process never exits: the test's own timeout fails it.
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  assert.equal(code, 0, out);
  assert.match(out, /"msg":"close_forced"/);
  assert.match(out, /"step":"metrics listener"/);
});
