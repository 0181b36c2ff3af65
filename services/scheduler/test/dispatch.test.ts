/**
 * A pick becomes a BullMQ job named after the queued state its task was offered in, without a read
 * of the task; an entry that lost its state stays in flight until the reconciler offers it again.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { schedulerKeys } from '@taskline/engine/keys';
import { EngineStack, until } from '@taskline/test-support/engine-stack';

let cluster: EngineStack | undefined;
after(() => cluster?.stop());

test('tasks offered with and without their queued state run; one cancelled while waiting does not', async () => {
  cluster = await EngineStack.start();
  // No worker yet, so no capacity: the three wait in the ready index.
  const offered = await cluster.create({ input: 'x' }, { model: 'instant' });
  const legacy = await cluster.create({ input: 'x' }, { model: 'instant' });
  const cancelled = await cluster.create({ input: 'x' }, { model: 'instant' });
  const redis = cluster.store.redis;
  assert.equal(await redis.hget(schedulerKeys.offered, offered.id), '0:1', 'fresh: attempt 0, event 1');
  await redis.hdel(schedulerKeys.offered, legacy.id);
  await cluster.store.cancel(cancelled.id, 't1');
  assert.equal(await redis.hexists(schedulerKeys.offered, cancelled.id), 0, 'cancel withdraws the offer');

  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant' });
  for (const task of [offered, legacy])
    assert.equal((await cluster.waitForEnd(task.id, 30_000)).status, 'succeeded');
  const after = await cluster.store.get(cancelled.id);
  assert.equal(after?.status, 'cancelled');
  assert.equal(after?.attempt, 0, 'never claimed');
  assert.equal(await redis.exists(schedulerKeys.offered), 0);
  // The worker leaves the running set right after the end is written (another slot): wait for it.
  await until(
    't1 to leave the running set',
    async () => ((await redis.zcard(schedulerKeys.active('t1'))) === 0 ? true : undefined),
    10_000,
  );
});
