/**
 * Slots the leader lends to the creates, end to end: a real scheduler and worker, and a store that
 * hands its tasks to BullMQ itself (as the api's does). A create on an idle model runs without a
 * dispatch round, and the loan is made again as its slot frees; with tasks waiting, creates are
 * offered behind them and the rounds pick fairly as before (fairness-e2e.test.ts holds the full
 * proof, on the rounds alone).
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { JobQueues } from '@taskline/control';
import { connectQueueRedis, TaskStore } from '@taskline/engine';
import { schedulerKeys } from '@taskline/engine/keys';
import { monitorRedis } from '@taskline/testing';
import { EngineStack, until } from '@taskline/test-support/engine-stack';

const MODEL = 'instant';
let cluster: EngineStack | undefined;
let jobs: JobQueues | undefined;
after(async () => {
  await jobs?.close();
  await cluster?.stop();
});

/** A store on the cluster's Redis that queues the jobs of the tasks it dispatches on lent slots. */
function handingOffStore(stack: EngineStack): TaskStore {
  jobs = new JobQueues(() => connectQueueRedis(stack.redis.url, 'test-queue'));
  const queues = jobs;
  return new TaskStore(stack.store.redis, {
    taskRetentionMs: 3_600_000,
    eventRetentionMs: 3_600_000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
    handOff: (task) => queues.handOff(task.model, task),
  });
}

const create = (store: TaskStore, tenant: string) =>
  store.create({
    tenant,
    kind: 'response',
    model: MODEL,
    onRestart: 'fail',
    request: { model: MODEL, input: 'x' },
  });

test('a create on an idle model runs on a lent slot without a round, and the slot is lent again', async () => {
  cluster = await EngineStack.start({ env: { TASKLINE_DISPATCH_INTERVAL_MS: '600000' } });
  cluster.startWorker({ TASKLINE_WORKER_MODELS: MODEL, TASKLINE_WORKER_SLOTS: '2' });
  const redis = cluster.store.redis;
  const lent = async () => Number((await redis.hget(schedulerKeys.loans, `m:${MODEL}`)) ?? 0);
  // The worker's first report of its slots, with nothing ready, is lent at once.
  await until('a loan of both slots', async () => ((await lent()) === 2 ? true : undefined), 20_000);
  const store = handingOffStore(cluster);
  // Every dispatch round of the model runs dispatch.lua (told by its round-robin cursor); none may.
  let rounds = 0;
  const monitor = monitorRedis(cluster.redis.url, (args) => {
    if (args[0]?.toLowerCase() === 'evalsha' && args.includes(schedulerKeys.rr(MODEL))) rounds++;
  });
  await monitor.ready;
  for (let i = 0; i < 4; i++) {
    const task = await create(store, 't1');
    assert.equal((await cluster.waitForEnd(task.id, 10_000)).status, 'succeeded');
    assert.equal(await redis.hexists(schedulerKeys.offered, task.id), 0);
    // Its end frees the slot, which the leader lends again (the worker's report of it). Two tasks
    // on two slots take the first loan whole: the third and fourth run on slots lent again.
    await until('a slot lent', async () => ((await lent()) >= 1 ? true : undefined), 10_000);
  }
  monitor.stop();
  assert.equal(rounds, 0, 'no dispatch round ran');
  assert.equal(await redis.zcard(schedulerKeys.inflight), 0);
  assert.equal(await redis.zcard(schedulerKeys.active('t1')), 0);
});

test('with tasks waiting, creates are offered behind them and the rounds stay fair', async () => {
  await jobs?.close();
  await cluster?.stop();
  // Each task takes 16 steps of 25 ms: two slots hold twelve of A's tasks for about two seconds.
  cluster = await EngineStack.start({ env: { TASKLINE_DISPATCH_INTERVAL_MS: '600000' } });
  cluster.startWorker({
    TASKLINE_WORKER_MODELS: MODEL,
    TASKLINE_WORKER_SLOTS: '2',
    TASKLINE_WORKER_MIN_STEP_MS: '25',
  });
  const redis = cluster.store.redis;
  await until(
    'a loan',
    async () => ((await redis.hget(schedulerKeys.loans, `m:${MODEL}`)) === '2' ? true : undefined),
    20_000,
  );
  const store = handingOffStore(cluster);
  // A's first two creates may take the two lent slots; the rest wait, and B's create behind them.
  const backlog = await Promise.all(Array.from({ length: 12 }, () => create(store, 'a')));
  const late = await create(store, 'b');
  const ended = [];
  for (const task of [...backlog, late]) ended.push(await cluster.waitForEnd(task.id, 30_000));
  assert.ok(
    ended.every((t) => t.status === 'succeeded'),
    'every task succeeded',
  );
  const bEnd = ended.at(-1)!.updatedAt;
  const aAfterB = ended.slice(0, -1).filter((t) => t.updatedAt > bEnd).length;
  // Round robin: B's task is picked within a round or two of its offer, not after A's backlog
  // (a round may queue a pick or two past the free slots: the worker reports a slot taken on its
  // next heartbeat). First in, first out, none would end after it.
  assert.ok(aAfterB >= 6, `only ${aAfterB} of A's 12 tasks ended after B's`);
});
