/**
 * A worker's slots are shared out among several BullMQ workers per model, so a burst of jobs is
 * taken in parallel rather than one round trip after another, and never beyond the slots.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { shareSlots } from '../src/worker.js';
import { EngineStack, LONG, until } from '@taskline/test-support/engine-stack';

test('slots are shared out among the fetchers, each with one at least', () => {
  assert.deepEqual(shareSlots(10, 4), [3, 3, 2, 2]);
  assert.deepEqual(shareSlots(64, 4), [16, 16, 16, 16]);
  assert.deepEqual(shareSlots(2, 4), [1, 1]);
  assert.deepEqual(shareSlots(5, 1), [5]);
  for (let slots = 1; slots <= 20; slots++)
    for (let fetchers = 1; fetchers <= 6; fetchers++)
      assert.equal(
        shareSlots(slots, fetchers).reduce((a, b) => a + b, 0),
        slots,
      );
});

let cluster: EngineStack | undefined;
after(() => cluster?.stop());

test('a burst fills every slot of a worker with several fetchers, and the next task waits for one', async () => {
  cluster = await EngineStack.start();
  cluster.startWorker({
    TASKLINE_WORKER_SLOTS: '6',
    TASKLINE_WORKER_FETCHERS: '4',
    TASKLINE_WORKER_MIN_STEP_MS: '20',
  });
  const burst = await Promise.all(Array.from({ length: 7 }, () => cluster!.create(LONG)));
  const running = async () => {
    const tasks = await Promise.all(burst.map((t) => cluster!.store.get(t.id)));
    return tasks.filter((t) => t?.status === 'running').length;
  };
  await until('six tasks running at once', async () => ((await running()) === 6 ? true : undefined), 30_000);
  const waiting = (await Promise.all(burst.map((t) => cluster!.store.get(t.id)))).filter(
    (t) => t?.status === 'queued',
  );
  assert.equal(waiting.length, 1, 'one task waits for a free slot');
  // It runs once a slot frees, and not before: when it leaves the queue, one of the six has ended
  // (tasks only move on, so a later read still shows it). Seeing six running once could be a
  // moment on the way to seven; this cannot.
  const seventh = waiting[0]!.id;
  await cluster.waitFor(seventh, 'leaving the queue', (t) => t.status !== 'queued', 60_000);
  const others = await Promise.all(
    burst.filter((t) => t.id !== seventh).map((t) => cluster!.store.get(t.id)),
  );
  assert.ok(
    others.some((t) => t?.status === 'succeeded'),
    `the seventh task started while ${others.map((t) => t?.status).join(', ')}`,
  );
  assert.equal((await cluster.waitForEnd(seventh, 60_000)).status, 'succeeded');
});
