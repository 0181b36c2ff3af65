/**
 * Stalls past the leader lease with two scheduler replicas, of Redis (it stops answering without
 * closing a connection) or of the leader itself: leadership moves while the workers' streams stay
 * open to the old leader, and the workers must follow it.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, test } from 'node:test';
import { schedulerKeys } from '@taskline/engine/keys';
import { EngineStack, until } from '@taskline/test-support/engine-stack';

const clusters: EngineStack[] = [];
after(() => Promise.all(clusters.map((c) => c.stop())));

async function startCluster(): Promise<EngineStack> {
  const cluster = await EngineStack.start({ schedulers: 2 });
  clusters.push(cluster);
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant', TASKLINE_WORKER_SLOTS: '4' });
  const first = await cluster.create({ input: 'before' }, { model: 'instant' });
  assert.equal((await cluster.waitForEnd(first.id, 30_000)).status, 'succeeded');
  return cluster;
}

async function runAll(cluster: EngineStack, label: string): Promise<void> {
  const tasks = await Promise.all(
    Array.from({ length: 8 }, (_, i) => cluster.create({ input: `${label} ${i}` }, { model: 'instant' })),
  );
  for (const t of tasks)
    assert.equal((await cluster.waitForEnd(t.id, 30_000)).status, 'succeeded', `${label}: ${t.id}`);
}

test('after a Redis stall past the leader lease, the leader has the workers and tasks run again', async () => {
  const cluster = await startCluster();
  for (let stall = 0; stall < 2; stall++) {
    cluster.redis.pause();
    await sleep(2500); // past the leader lease (1 s) and the worker timeout
    cluster.redis.resume();
    await runAll(cluster, `after stall ${stall}`);
  }
  await until('the leader to list the worker', async () => {
    const snapshot = JSON.parse((await cluster.store.redis.get(schedulerKeys.workers)) ?? '{}') as {
      workers?: unknown[];
    };
    return snapshot.workers?.length === 1 ? true : undefined;
  });
});

test('a leader that hangs with workers attached loses them to the replica that takes over', async () => {
  const cluster = await startCluster();
  const value = (await cluster.store.redis.get(schedulerKeys.leader)) ?? '';
  const port = Number(value.slice(value.lastIndexOf(':') + 1));
  const hung = cluster.schedulers.get(port);
  assert.ok(hung, `the leader's process (${value})`);
  hung.kill('SIGSTOP'); // alive to the kernel, its connections open, answering nothing
  try {
    await runAll(cluster, 'while the old leader hangs');
  } finally {
    hung.kill('SIGCONT');
  }
});
