/**
 * Redis stalls (stops answering without closing a connection) past the leader lease, with two
 * scheduler replicas: leadership may move while the workers' streams stay open to the old leader.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, test } from 'node:test';
import { operatorKeys } from '@taskline/engine/keys';
import { Cluster, until } from '../../gpu-worker/test/helpers.js';

let cluster: Cluster | undefined;
after(() => cluster?.stop());

test('after a stall past the leader lease, the leader has the workers and tasks run again', async () => {
  cluster = await Cluster.start({ schedulers: 2 });
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant', TASKLINE_WORKER_SLOTS: '4' });
  const first = await cluster.create({ input: 'before' }, { model: 'instant' });
  assert.equal((await cluster.waitForEnd(first.id, 30_000)).status, 'succeeded');

  for (let stall = 0; stall < 2; stall++) {
    cluster.redis.pause();
    await sleep(2500); // past the leader lease (1 s) and the worker timeout
    cluster.redis.resume();
    const tasks = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        cluster!.create({ input: `after ${stall}.${i}` }, { model: 'instant' }),
      ),
    );
    for (const t of tasks)
      assert.equal((await cluster.waitForEnd(t.id, 30_000)).status, 'succeeded', `stall ${stall}: ${t.id}`);
  }
  await until('the leader to list the worker', async () => {
    const snapshot = JSON.parse((await cluster!.store.redis.get(operatorKeys.workers)) ?? '{}') as {
      workers?: unknown[];
    };
    return snapshot.workers?.length === 1 ? true : undefined;
  });
});
