/**
 * A pick becomes a BullMQ job named after the queued state its task was offered in, without a read
 * of the task; an entry that lost its state stays in flight until the reconciler offers it again.
 * On an idle stack an offer is its own pick (enqueue.lua's fast path) and the wake queues its job.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { schedulerKeys } from '@taskline/engine/keys';
import { listenForOffers, type Pick } from '@taskline/engine';
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

test("on an idle stack a task's offer is its own pick: its job is queued from the wake, with no round", async () => {
  await cluster?.stop();
  cluster = await EngineStack.start();
  const redis = cluster.store.redis;
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant' });
  // The leader grants what its rounds leave free once the worker has reported its slots.
  await until('a grant for instant', async () =>
    Number(await redis.hget(schedulerKeys.grants, 'instant')) > 0 ? true : undefined,
  );
  const wakes: { model: string; pick: Pick | null }[] = [];
  const sub = await listenForOffers(redis, (model, pick) => wakes.push({ model, pick }));
  try {
    const task = await cluster.create({ input: 'x' }, { model: 'instant' });
    assert.equal((await cluster.waitForEnd(task.id, 30_000)).status, 'succeeded');
    assert.deepEqual(
      wakes.map((w) => w.pick?.id ?? null),
      [task.id],
      'one wake, naming the pick: no ready entry for a round to take',
    );
    assert.equal(await redis.zscore(schedulerKeys.inflight, task.id), null, 'handed over');
  } finally {
    sub.disconnect();
  }
});

test('a model whose last worker died is granted no slot: its offers wait ready, not in a job', async () => {
  await cluster?.stop();
  cluster = await EngineStack.start();
  const redis = cluster.store.redis;
  const worker = cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant' });
  // Another worker keeps other models granted, so the grants (one key, one expiry) stay.
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'tiny-chat' });
  const granted = async () => Number(await redis.hget(schedulerKeys.grants, 'instant'));
  await until('a grant for instant', async () => ((await granted()) > 0 ? true : undefined));
  await until('a grant for tiny-chat', async () =>
    Number(await redis.hget(schedulerKeys.grants, 'tiny-chat')) > 0 ? true : undefined,
  );
  worker.kill('SIGKILL');
  // The leader drops the worker once its heartbeats stop, and its next round grants the model none.
  await until(
    'no grant for instant',
    async () => ((await redis.hget(schedulerKeys.grants, 'instant')) === '0' ? true : undefined),
    30_000,
  );
  const task = await cluster.create({ input: 'x' }, { model: 'instant' });
  assert.ok(await redis.zscore(schedulerKeys.ready('t1', 'instant'), task.id), 'waits in the ready index');
});
