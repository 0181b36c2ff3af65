// Service: a test's service processes end with its stack, every one it started.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bounded, exited, Service } from '../src/index.js';

test('stop ends every process a service started, not only its latest', async () => {
  // A second start while the first process runs (a test's restart without a kill): the first one,
  // left running, would go on serving whatever later takes its Redis's ports.
  const service = new Service({ kind: 'scheduler', entry: 'packages/testing/test/fixtures/idle-service.ts' });
  await service.start();
  const first = service.child!;
  await service.start();
  try {
    await service.stop();
    // Ended by its SIGKILL: a process that exits on its own would say nothing of stop.
    assert.equal(await bounded('the first process to end', 10_000, exited(first)), 'SIGKILL');
  } finally {
    first.kill('SIGKILL');
  }
});
