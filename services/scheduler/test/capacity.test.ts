/**
 * Freed capacity is used at once: a worker's slot report wakes the leader, so a backlog drains at
 * the speed of the work, not of the dispatch interval (set here far beyond the test's timeout).
 * And rounds do no more than they need: none when nothing is ready, no BullMQ count when the
 * jobs queued since the last count cannot fill the free slots.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { schedulerKeys } from '@taskline/engine/keys';
import { monitorRedis } from '@taskline/testing';
import { EngineStack } from '@taskline/test-support/engine-stack';

const clusters: EngineStack[] = [];
after(() => Promise.all(clusters.map((c) => c.stop())));

/**
 * A scheduler whose interval never comes within a test, and an `instant` worker that has
 * registered; `workerEnv` on top of the worker's settings.
 */
async function clusterWithWorker(
  slots: number,
  workerEnv: Record<string, string> = {},
): Promise<EngineStack> {
  // The previous test's cluster is done: stopping it leaves this one the host's cores.
  await Promise.all(clusters.splice(0).map((c) => c.stop()));
  const cluster = await EngineStack.start({ env: { TASKLINE_DISPATCH_INTERVAL_MS: '600000' } });
  clusters.push(cluster);
  cluster.startWorker({
    TASKLINE_WORKER_MODELS: 'instant',
    TASKLINE_WORKER_SLOTS: String(slots),
    ...workerEnv,
  });
  // The first task runs once the worker has registered.
  const first = await cluster.create({ input: 'x' }, { model: 'instant' });
  await cluster.waitForEnd(first.id, 30_000);
  return cluster;
}

/**
 * Creates `n` instant tasks one after another, each once the previous one has succeeded and
 * `pauseMs` more have passed.
 */
async function runOneAtATime(cluster: EngineStack, n: number, pauseMs = 0): Promise<void> {
  for (let i = 0; i < n; i++) {
    const task = await cluster.create({ input: 'x' }, { model: 'instant' });
    assert.equal((await cluster.waitForEnd(task.id, 10_000)).status, 'succeeded');
    await sleep(pauseMs);
  }
}

test('a backlog behind a one-slot worker drains without waiting for the dispatch interval', async () => {
  const cluster = await clusterWithWorker(1);
  const backlog = await Promise.all(
    Array.from({ length: 8 }, () => cluster.create({ input: 'x' }, { model: 'instant' })),
  );
  // Each of these is dispatched only when the previous one frees the slot: by the worker's report.
  for (const task of backlog) {
    const ended = await cluster.waitForEnd(task.id, 10_000);
    assert.equal(ended.status, 'succeeded');
  }
});

test('with nothing ready, freed capacity starts no dispatch round', async () => {
  // Each task takes 16 steps of 25 ms: its end frees its slot well after the round that dispatched
  // it has ended. An instant task could end first on a busy host, and a slot freed while a round
  // is still under way starts one more, by design (the round has not yet seen that nothing waits).
  const cluster = await clusterWithWorker(4, { TASKLINE_WORKER_MIN_STEP_MS: '25' });
  // Count the rounds: each ends by reading how many models still have ready tasks.
  let rounds = 0;
  const monitor = monitorRedis(cluster.redis.url, (args) => {
    if (args[0]?.toLowerCase() === 'scard' && args[1] === schedulerKeys.models) rounds++;
  });
  await monitor.ready;
  // The first task's end can be reported after a round under way, as below: counted from a half
  // second without a round.
  for (let seen = -1; seen !== rounds;) {
    seen = rounds;
    await sleep(500);
  }
  rounds = 0;
  const tasks = 6;
  // Three heartbeats between a task's end and the next create: the worker reports the slot freed
  // while nothing waits. A report that came after the next task's offer would find a round under
  // way, not yet known to leave nothing, and start one more (seen beside pnpm test's other lane).
  await runOneAtATime(cluster, tasks, 300);
  // The last round's read of the ready index is awaited, then five heartbeats, each of which
  // would report the last slot freed.
  const deadline = Date.now() + 10_000;
  while (rounds < tasks && Date.now() < deadline) await sleep(20);
  await sleep(500);
  monitor.stop();
  // Each task's offer wakes one round; its end frees a slot while nothing waits, which needs none.
  assert.ok(rounds >= tasks, `${rounds} rounds for ${tasks} tasks`);
  assert.ok(rounds <= tasks + 1, `${rounds} rounds for ${tasks} tasks`);
});

test('an offer to an idle worker is dispatched without reading a BullMQ count first', async () => {
  const cluster = await clusterWithWorker(4);
  // In order: each task's offer (enqueue.lua), BullMQ counts of its queue, its pick (dispatch.lua).
  const seen: string[] = [];
  const monitor = monitorRedis(cluster.redis.url, (args) => {
    if (args[0]?.toLowerCase() !== 'evalsha') return;
    // dispatch.lua is told apart by its round-robin cursor (enqueue.lua names the model's tenants
    // and the leader key too).
    if (args.includes(schedulerKeys.rr('instant'))) seen.push('pick');
    else if (args.includes(schedulerKeys.ready('t1', 'instant')))
      seen.push(`offer ${args[args.indexOf(schedulerKeys.offered) + 1]}`);
    else if (args.includes('prioritized') && args.some((a) => a.startsWith('bull:{tl-model-instant}')))
      seen.push('count');
  });
  await monitor.ready;
  const tasks = 6;
  await runOneAtATime(cluster, tasks);
  monitor.stop();
  // Four free slots: the jobs queued since a count leave room for the next three or four tasks.
  // What follows a pick (a later round's count, an interval tick on a slow host) is not the offer's.
  const direct = seen
    .join(' ')
    .split(/offer \S+/)
    .slice(1)
    .filter((after) => after.trim().split(' ')[0] === 'pick').length;
  assert.ok(direct >= tasks / 2, `${direct} of ${tasks} offers went straight to a pick: ${seen.join(', ')}`);
});

test("a round's picks leave the in-flight index together, in one command, once their jobs are queued", async () => {
  await Promise.all(clusters.splice(0).map((c) => c.stop()));
  const cluster = await EngineStack.start({ env: { TASKLINE_DISPATCH_INTERVAL_MS: '600000' } });
  clusters.push(cluster);
  // No worker yet: the six wait, and the worker's first report of its slots starts one round.
  const tasks = await Promise.all(
    Array.from({ length: 6 }, () => cluster.create({ input: 'x' }, { model: 'instant' })),
  );
  const removals: string[][] = [];
  const monitor = monitorRedis(cluster.redis.url, (args) => {
    if (args[0]?.toLowerCase() === 'zrem' && args[1] === schedulerKeys.inflight) removals.push(args.slice(2));
  });
  await monitor.ready;
  cluster.startWorker({ TASKLINE_WORKER_MODELS: 'instant', TASKLINE_WORKER_SLOTS: '8' });
  for (const task of tasks) assert.equal((await cluster.waitForEnd(task.id, 30_000)).status, 'succeeded');
  monitor.stop();
  assert.deepEqual(
    removals.map((ids) => new Set(ids)),
    [new Set(tasks.map((t) => t.id))],
  );
});
