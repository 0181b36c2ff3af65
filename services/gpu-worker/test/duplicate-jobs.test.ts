/**
 * Two jobs of one task on one worker: a stale one (an older offer) whose claim is still in flight
 * when the valid one arrives must not make the worker drop the valid one as "running here".
 */
import assert from 'node:assert/strict';
import { after, before, mock, test } from 'node:test';
import { Queue } from 'bullmq';
import { dispatchJobId, modelQueueName, queuePrefix, type DispatchJob } from '@taskline/control';
import { connectQueueRedis, TaskStore } from '@taskline/engine';
import { createInstantBackend } from '@taskline/inference';
import { createLogger } from '@taskline/log';
import { createMetrics } from '@taskline/metrics';
import { GpuWorker } from '../src/worker.js';
import { EngineStack, until } from '@taskline/test-support/engine-stack';
import { TEST_CONTROL_TOKEN } from '@taskline/testing';

let cluster: EngineStack;
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
  const model = 'tiny-chat';
  // Attempt 1 lost; the restart queues the task for attempt 2 (its offer: the job of attempt 1).
  const task = await cluster.create({ input: 'Hello' }, { onRestart: 'retry' });
  await store.claim(task.id, 'w-gone', 60_000, { start: true });
  assert.equal((await store.restart(task.id, 1, 'worker_lost'))?.status, 'queued');
  const valid = dispatchJobId((await store.get(task.id))!);
  // A job of the older offer (attempt 0) waits in the queue ahead of the one dispatch will add.
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
  await queue.add(
    'dispatch',
    { taskId: task.id, tenant: task.tenant, attempt: 0 },
    { jobId: `${task.id}-stale` },
  );

  // The worker's claims go to Redis, the stale one held back until the valid job was taken.
  const workerStore = new TaskStore(store.redis.duplicate(), store.options);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const claim = workerStore.claim.bind(workerStore);
  mock.method(workerStore, 'claim', async (...args: Parameters<TaskStore['claim']>) => {
    if (args[3]?.offered === 0) await held;
    return claim(...args);
  });
  const worker = new GpuWorker({
    id: 'w-test',
    redisTarget: cluster.redis.url,
    store: workerStore,
    log: createLogger({ service: 'gpu-worker' }, 'warn', () => undefined),
    metrics: createMetrics({ service: 'gpu-worker', defaultMetrics: false, tenantTopN: 10 }),
    models: [model],
    slots: 2,
    fetchers: 2,
    acquire: async () => ({ model: createInstantBackend({ minStepMs: 0 }), release: async () => undefined }),
    isLoaded: () => true,
    leaseMs: 5000,
    schedulerAddrs: cluster.schedulerAddr.split(','),
    controlSecurity: { tokens: [TEST_CONTROL_TOKEN], tls: null },
    onControlRefused: (message) => assert.fail(message),
  });
  await worker.start();
  t.after(async () => {
    await worker.drain(0);
    workerStore.redis.disconnect();
  });

  // Dispatch offers attempt 2 to the registered worker: its job is taken while the stale claim waits.
  let dispatched = false;
  await until('the valid job to be taken', async () => {
    const state = await queue.getJobState(valid);
    dispatched ||= state !== 'unknown';
    // Active, or already done (removed): the worker took it.
    return dispatched && state !== 'waiting' && state !== 'prioritized' ? true : undefined;
  });
  release();
  await cluster.waitFor(task.id, 'its claim by the valid job', (r) => r.attempt === 2, 30_000);
  const ended = await cluster.waitForEnd(task.id, 30_000);
  assert.equal(ended.status, 'succeeded', JSON.stringify(ended.error));
});
