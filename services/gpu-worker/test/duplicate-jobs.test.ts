/**
 * The jobs of a task as workers take them: a stale one (an older offer) whose claim is still in
 * flight when the valid one arrives must not make the worker drop the valid one as "running here";
 * a job taken by a worker that died before its claim goes back to the queue for another worker.
 */
import assert from 'node:assert/strict';
import { after, before, mock, test } from 'node:test';
import { Queue, Worker } from 'bullmq';
import { dispatchJobId, modelQueueName, queuePrefix, type DispatchJob } from '@taskline/control';
import { connectQueueRedis, TaskStore } from '@taskline/engine';
import { createInstantBackend } from '@taskline/inference';
import { createLogger } from '@taskline/log';
import { createMetrics } from '@taskline/metrics';
import { jobHold } from '@taskline/task-worker';
import { GpuWorker } from '../src/worker.js';
import { EngineStack, until } from '@taskline/test-support/engine-stack';
import { bounded, TEST_CONTROL_TOKEN } from '@taskline/testing';

let cluster: EngineStack;
const model = 'tiny-chat';
before(
  async () =>
    // No sweep re-offers the task within the test: only the job the scheduler dispatched can start it.
    (cluster = await EngineStack.start({
      env: { TASKLINE_RECONCILE_AFTER_MS: '600000', TASKLINE_INDEX_SWEEP_MS: '600000' },
    })),
);
after(() => cluster.stop());

test('a stale job mid-claim does not swallow the valid job of the same task: the task starts', async (t) => {
  const { store } = cluster;
  // Attempt 1 runs on a worker about to be lost.
  const task = await cluster.create({ input: 'Hello' }, { onRestart: 'retry' });
  await store.claim(task.id, 'w-gone', 60_000, { start: true });
  // A job of an older offer (attempt 0) waits in the queue.
  const queue = openQueue(t);
  const staleId = `${task.id}-stale`;
  await queue.add('dispatch', { taskId: task.id, tenant: task.tenant, attempt: 0 }, { jobId: staleId });

  // The worker's claims go to Redis, the stale one held back until the valid job was taken.
  const workerStore = new TaskStore(store.redis.duplicate(), store.options);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let staleClaiming!: () => void;
  const staleClaimed = new Promise<void>((resolve) => (staleClaiming = resolve));
  const claim = workerStore.claim.bind(workerStore);
  mock.method(workerStore, 'claim', async (...args: Parameters<TaskStore['claim']>) => {
    if (args[3]?.offered === 0) {
      staleClaiming();
      await held;
    }
    return claim(...args);
  });
  // Three slots: the create's own offer (attempt 0) reaches this worker too, a second stale job
  // held, and the valid job still finds a slot.
  const worker = inProcessWorker(workerStore, 'w-test', 5000, 3);
  await worker.start();
  t.after(async () => {
    await worker.drain(0);
    workerStore.redis.disconnect();
  });
  // Only once the stale claim is in flight is the task queued again, for attempt 2: the valid job
  // cannot come first (it would run, and the stale one be dropped behind it, which tests nothing).
  await bounded('the stale job to be claimed', 30_000, staleClaimed);
  assert.equal((await store.restart(task.id, 1, 'worker_lost'))?.status, 'queued');
  const valid = dispatchJobId((await store.get(task.id))!);

  // Dispatch offers attempt 2 to the registered worker: its job is taken while the stale claim waits.
  let dispatched = false;
  let state = '';
  await until('the valid job to be taken', async () => {
    state = await queue.getJobState(valid);
    dispatched ||= state !== 'unknown';
    // Active, or already done (removed): the worker took it.
    return dispatched && state !== 'waiting' && state !== 'prioritized' ? true : undefined;
  }).catch(async (err: Error) => {
    // Never dispatched, or dispatched and never taken: which, and what the scheduler said.
    const record = await store.get(task.id);
    const stale = await queue.getJob(staleId);
    const seen = {
      valid,
      state,
      record: record && dispatchJobId(record),
      status: record?.status,
      stale: { state: await stale?.getState(), stalled: stale?.stalledCounter },
      slots: worker.slots(),
      // Who claimed each attempt: this test's worker is w-test, and no other may take its jobs.
      claimedBy: (await cluster.events(task.id)).flatMap((e) => (e.worker ? [e.worker] : [])),
    };
    throw new Error(`${err.message}: ${JSON.stringify({ ...seen, scheduler: cluster.schedulerWarnings() })}`);
  });
  release();
  await cluster.waitFor(task.id, 'its claim by the valid job', (r) => r.attempt === 2, 30_000);
  const ended = await cluster.waitForEnd(task.id, 30_000);
  assert.equal(ended.status, 'succeeded', JSON.stringify(ended.error));
});

test('a job taken by a worker that died before its claim goes back to the queue: another worker runs the task', async (t) => {
  // The scheduler's dispatch of the task's offer, taken by a worker that then dies: it holds the
  // job as every worker does (jobHold) and never claims, renews or finishes it.
  const leaseMs = 1000;
  const task = await cluster.create({ input: 'Hello' });
  const jobId = dispatchJobId((await cluster.store.get(task.id))!);
  const queue = openQueue(t);
  await queue.add('run', { taskId: task.id, tenant: task.tenant, attempt: task.attempt }, { jobId });
  const connection = connectQueueRedis(cluster.redis.url, 'test-dead-worker');
  connection.on('error', () => undefined);
  const dead = new Worker<DispatchJob>(modelQueueName(model), undefined, {
    connection: connection as never,
    prefix: queuePrefix(model),
    autorun: false,
    ...jobHold(leaseMs),
  });
  assert.equal((await dead.getNextJob('dead-worker-token', { block: false }))?.id, jobId);
  await dead.disconnect();
  connection.disconnect();

  // A live worker registers: the scheduler's dispatch of the same offer names the same job (BullMQ
  // adds nothing), so only the taken job itself can start the task, once it is back in the queue.
  const workerStore = new TaskStore(cluster.store.redis.duplicate(), cluster.store.options);
  const worker = inProcessWorker(workerStore, 'w-live', leaseMs);
  await worker.start();
  t.after(async () => {
    await worker.drain(0);
    workerStore.redis.disconnect();
  });
  // Back within two leases of the death (lock lapse, then a stalled check): about a second alone,
  // five after the test above, whose worker's check (every 5 s) gates the queue's. Before, never.
  const ended = await cluster.waitForEnd(task.id, 30_000);
  assert.equal(ended.status, 'succeeded', JSON.stringify(ended.error));
  assert.equal(ended.attempt, 1);
});

/** A gpu-worker in this process serving `model` with an instant backend, its claims through `store`. */
function inProcessWorker(store: TaskStore, id: string, leaseMs: number, slots = 2): GpuWorker {
  return new GpuWorker({
    id,
    redisTarget: cluster.redis.url,
    store,
    log: createLogger({ service: 'gpu-worker' }, 'warn', () => undefined),
    metrics: createMetrics({ service: 'gpu-worker', defaultMetrics: false, tenantTopN: 10 }),
    models: [model],
    slots,
    fetchers: 2,
    acquire: async () => ({ model: createInstantBackend({ minStepMs: 0 }), release: async () => undefined }),
    isLoaded: () => true,
    leaseMs,
    schedulerAddrs: cluster.schedulerAddr.split(','),
    controlSecurity: { tokens: [TEST_CONTROL_TOKEN], tls: null },
    onControlRefused: (message) => assert.fail(message),
  });
}

/** The model's BullMQ queue, closed when test `t` ends. */
function openQueue(t: { after: (fn: () => Promise<void>) => void }): Queue<DispatchJob> {
  const connection = connectQueueRedis(cluster.redis.url, 'test-queue');
  connection.on('error', () => undefined); // the stack's stop closes it
  const queue = new Queue<DispatchJob>(modelQueueName(model), {
    connection: connection as never,
    prefix: queuePrefix(model),
  });
  t.after(async () => {
    await queue.close();
    connection.disconnect();
  });
  return queue;
}
