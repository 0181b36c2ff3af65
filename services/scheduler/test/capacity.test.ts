/**
 * Freed capacity is used at once: a worker's slot report wakes the leader, so a backlog drains at
 * the speed of the work, not of the dispatch interval (set here far beyond the test's timeout).
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Cluster } from '../../gpu-worker/test/helpers.js';

let cluster: Cluster | undefined;
after(() => cluster?.stop());

test('a backlog behind a one-slot worker drains without waiting for the dispatch interval', async () => {
  cluster = await Cluster.start({ env: { TASKLINE_DISPATCH_INTERVAL_MS: '600000' } });
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant', TASKLINE_WORKER_SLOTS: '1' });
  // Wait for the worker to register: the first task runs once it does.
  const first = await cluster.create({ input: 'x' }, { model: 'instant' });
  await cluster.waitForEnd(first.id, 30_000);
  const backlog = await Promise.all(
    Array.from({ length: 8 }, () => cluster!.create({ input: 'x' }, { model: 'instant' })),
  );
  // Each of these is dispatched only when the previous one frees the slot: by the worker's report.
  for (const task of backlog) {
    const ended = await cluster.waitForEnd(task.id, 10_000);
    assert.equal(ended.status, 'succeeded');
  }
});
