/** The leader's index sweep bounds and expires the operator index that creates only add to. */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { indexToolTask, TaskStore, toolTaskIndex } from '@taskline/engine';
import { operatorKeys, schedulerKeys } from '@taskline/engine/keys';
import { EngineStack, until } from '@taskline/test-support/engine-stack';

const clusters: EngineStack[] = [];
after(() => Promise.all(clusters.map((c) => c.stop())));

async function start(env: Record<string, string>): Promise<EngineStack> {
  const cluster = await EngineStack.start({ env });
  clusters.push(cluster);
  return cluster;
}

test("the leader bounds a tenant's operator index and sets it to expire, as creates go on", async () => {
  const cluster = await start({ TASKLINE_INDEX_SWEEP_MS: '200', TASKLINE_OPERATOR_INDEX_MAX: '100' });
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
  const cluster = await start({ TASKLINE_INDEX_SWEEP_MS: '200' });
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

test('the sweep bounds and expires the indexes of an api whose clock is 90 s behind, and drops quiet tenants without the console', async () => {
  const cluster = await start({ TASKLINE_INDEX_SWEEP_MS: '200', TASKLINE_OPERATOR_INDEX_MAX: '100' });
  const redis = cluster.store.redis;
  // The leader has swept once (a create of its own seen): later sweeps look back from there.
  const first = await cluster.create({ input: 'x' }, { model: 'instant' });
  await until('a first sweep', async () =>
    (await redis.pttl(operatorKeys.tasks('t1'))) > 0 ? true : undefined,
  );
  await cluster.store.cancel(first.id, 't1');
  // A tenant quiet for longer than a task retention (by Redis's clock), which no console reads.
  const [seconds] = await redis.time();
  await redis.zadd(operatorKeys.tenants, Number(seconds) * 1000 - 2 * 86_400_000, 'quiet');

  // An api replica whose host clock runs 90 s behind the scheduler's creates tool tasks.
  const api = new TaskStore(redis, { ...cluster.store.options, now: () => Date.now() - 90_000 });
  for (let i = 0; i < 103; i++) {
    const task = await api.create({
      tenant: 'behind',
      kind: 'tool',
      model: 'instant',
      onRestart: 'fail',
      request: { tool: 't', arguments: {} },
    });
    await indexToolTask(redis, 'behind', `${String(task.createdAt).padStart(15, '0')}:${task.id}`);
    await api.cancel(task.id, 'behind');
  }
  const operatorIndex = operatorKeys.tasks('behind');
  await until(
    `${operatorIndex} bounded to its hundred newest and expiring`,
    async () =>
      (await redis.zcard(operatorIndex)) === 100 && (await redis.pttl(operatorIndex)) > 0 ? true : undefined,
    20_000,
  );
  // The tool-task index keeps every task tasks/get still serves (docs/mcp.md): all 103 are stored
  // yet, so the bound drops none; it is found by the sweep all the same, and expires.
  const toolIndex = toolTaskIndex('behind');
  await until(
    `${toolIndex} found by the sweep and expiring`,
    async () =>
      (await redis.zcard(toolIndex)) === 103 && (await redis.pttl(toolIndex)) > 0 ? true : undefined,
    20_000,
  );
  await until(
    'the quiet tenant dropped by the sweep',
    async () => ((await redis.zscore(operatorKeys.tenants, 'quiet')) === null ? true : undefined),
    20_000,
  );
});
