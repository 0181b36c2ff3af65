/** The leader's retention sweep bounds and expires the operator index that creates only add to. */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { operatorKeys, schedulerKeys } from '@taskline/engine/keys';
import { Cluster, until } from '@taskline/test-support/cluster';

const clusters: Cluster[] = [];
after(() => Promise.all(clusters.map((c) => c.stop())));

async function start(env: Record<string, string>): Promise<Cluster> {
  const cluster = await Cluster.start({ env });
  clusters.push(cluster);
  return cluster;
}

test("the leader bounds a tenant's operator index and sets it to expire, as creates go on", async () => {
  const cluster = await start({ TASKLINE_RETENTION_SWEEP_MS: '200', TASKLINE_OPERATOR_INDEX_MAX: '100' });
  const redis = cluster.store.redis;
  const key = operatorKeys.tasks('t1');
  for (let round = 0; round < 2; round++) {
    // Each round's tasks are newer than the last round's: the bound keeps this round's alone.
    const ids = new Set<string>();
    for (let i = 0; i < 103; i++) ids.add((await cluster.create({ input: 'x' }, { model: 'instant' })).id);
    await until(
      'the index bounded to its hundred newest',
      async () => {
        const members = await redis.zrange(key, 0, -1);
        return members.length === 100 && members.every((m) => ids.has(m)) ? true : undefined;
      },
      10_000,
    );
    assert.ok((await redis.pttl(key)) > 0, 'expires');
  }
});

test("a failing operator index sweep leaves the running sets' repair to go on", async () => {
  const cluster = await start({ TASKLINE_RETENTION_SWEEP_MS: '200' });
  const redis = cluster.store.redis;
  // A throughput key of the wrong type makes every index sweep fail (HKEYS answers WRONGTYPE).
  await redis.set(operatorKeys.throughput, 'not a hash');
  const running = schedulerKeys.active('t1');
  await redis.zadd(running, 1, 'task_without_a_record');
  await until(
    'the running set repaired',
    async () => ((await redis.zcard(running)) === 0 ? true : undefined),
    5_000,
  );
});
