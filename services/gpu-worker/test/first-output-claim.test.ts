/**
 * A generation on a loaded model runs before its claim and claims with its first delta (claim.lua
 * with the attempt's first output): one durable write on the way to the first token where there
 * were two. A cancel that ends the task while it is still queued leaves the attempt nothing to write.
 * A task its create dispatched (a lent slot) runs on the record its job carried, unread.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { JobQueues } from '@taskline/control';
import { schedulerKeys, taskKeys } from '@taskline/engine/keys';
import { connectQueueRedis, TaskStore } from '@taskline/engine';
import { createInstantBackend, type ModelBackend } from '@taskline/inference';
import { createLogger } from '@taskline/log';
import { createMetrics } from '@taskline/metrics';
import { TEST_CONTROL_TOKEN } from '@taskline/testing';
import { EngineStack, until } from '@taskline/test-support/engine-stack';
import { GpuWorker } from '../src/worker.js';

let cluster: EngineStack;
before(async () => (cluster = await EngineStack.start()));
after(() => cluster.stop());

/** An instant backend whose generations wait for `open` before their first step; `started` counts them. */
function gatedBackend() {
  const inner = createInstantBackend({ minStepMs: 20, outputTokens: 8 });
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const state = { started: 0, open };
  const backend: ModelBackend = {
    ...inner,
    async generate(req, opts) {
      state.started++;
      await gate;
      return inner.generate(req, opts);
    },
  };
  return { backend, state };
}

/** A gpu-worker in this process on `backend` (loaded: its tasks start before their claims). */
async function startWorker(
  t: { after: (fn: () => Promise<void>) => void },
  id: string,
  backend: ModelBackend,
  logs: string[] = [],
  /** Told of every record the worker reads. */
  onRead: (id: string) => void = () => undefined,
) {
  const store = new TaskStore(cluster.store.redis.duplicate(), cluster.store.options);
  const get = store.get.bind(store);
  store.get = (id, tenant) => {
    onRead(id);
    return get(id, tenant);
  };
  const worker = new GpuWorker({
    id,
    redisTarget: cluster.redis.url,
    store,
    log: createLogger({ service: 'gpu-worker' }, 'info', (line) => logs.push(line)),
    metrics: createMetrics({ service: 'gpu-worker', defaultMetrics: false, tenantTopN: 10 }),
    models: ['tiny-chat'],
    slots: 2,
    acquire: async () => ({ model: backend, release: async () => undefined }),
    isLoaded: () => true,
    leaseMs: 5000,
    flushMs: 50,
    schedulerAddrs: cluster.schedulerAddr.split(','),
    controlSecurity: { tokens: [TEST_CONTROL_TOKEN], tls: null },
    onControlRefused: (message) => assert.fail(message),
  });
  await worker.start();
  t.after(async () => {
    await worker.drain(0);
    store.redis.disconnect();
  });
}

test('a generation runs before its claim, which writes its first delta in the same step', async (t) => {
  const { backend, state } = gatedBackend();
  await startWorker(t, 'w-early', backend);
  const task = await cluster.create({ input: 'Hello' });
  await until('the generation to start', async () => (state.started > 0 ? true : undefined));
  const early = await cluster.store.get(task.id);
  assert.deepEqual(
    [early!.status, early!.attempt, early!.leaseOwner],
    ['queued', 0, null],
    'unclaimed while it runs',
  );
  state.open();
  const ended = await cluster.waitForEnd(task.id, 30_000);
  assert.equal(ended.status, 'succeeded', JSON.stringify(ended.error));
  assert.equal(ended.attempt, 1);
  // The claim's stream entry (its events numbered in one write) holds the first delta too.
  const entries = await cluster.store.redis.xrange(taskKeys(task.id).events, '-', '+');
  const claimEntry = entries.find(([, fields]) =>
    fields.includes('{"task_status":"loading","worker":"w-early"}'),
  );
  assert.ok(claimEntry, 'the claim wrote its loading event');
  // An entry's fields: `type`, the event's type, `data`, its JSON, for each event in turn.
  const types = claimEntry[1].filter((_, i) => i % 4 === 1);
  assert.deepEqual(types.slice(0, 2), ['response.in_progress', 'response.in_progress']);
  assert.ok(types.includes('response.output_text.delta'), `the first delta is in the claim's step: ${types}`);
  const deltas = (await cluster.events(task.id)).filter((e) => e.type === 'response.output_text.delta');
  assert.ok(deltas.length > 1, 'later deltas are appended after the claim');
});

test('a task cancelled while its generation waits for its first token ends cancelled; the attempt writes nothing', async (t) => {
  const { backend, state } = gatedBackend();
  const logs: string[] = [];
  await startWorker(t, 'w-cancelled', backend, logs);
  const task = await cluster.create({ input: 'Hello' });
  await until('the generation to start', async () => (state.started > 0 ? true : undefined));
  const { task: cancelled } = await cluster.store.cancel(task.id, 't1');
  assert.equal(cancelled.status, 'cancelled');
  state.open();
  // The claim its first delta carried is refused: nothing of the attempt is written.
  await until('the first delta to be refused as a claim', async () =>
    logs.some((l) => l.includes('"claim_refused"') && l.includes(task.id)) ? true : undefined,
  );
  const events = await cluster.events(task.id);
  assert.deepEqual(
    events.map((e) => [e.type, e.task_status]),
    [
      ['response.created', 'queued'],
      ['response.cancelled', 'cancelled'],
    ],
  );
  const record = await cluster.store.get(task.id);
  assert.deepEqual([record!.status, record!.attempt, record!.leaseOwner], ['cancelled', 0, null]);
  assert.deepEqual(await cluster.store.snapshot(task.id), [], 'no output tokens stored');
});

test('a task its create dispatched on a lent slot runs on the record its job carried, not read back', async (t) => {
  const asked: string[] = [];
  const inner = createInstantBackend({ outputTokens: 4 });
  const backend: ModelBackend = {
    ...inner,
    generate(req, opts) {
      asked.push(req.messages.map((m) => m.content).join('|'));
      return inner.generate(req, opts);
    },
  };
  const reads: string[] = [];
  await startWorker(t, 'w-carried', backend, [], (id) => reads.push(id));
  await until('a slot lent', async () =>
    Number(await cluster.store.redis.hget(schedulerKeys.loans, 'm:tiny-chat')) > 0 ? true : undefined,
  );
  // A store that hands its creates' jobs to BullMQ itself, as the api's does.
  const jobs = new JobQueues(() => connectQueueRedis(cluster.redis.url, 'test-queue'));
  t.after(() => jobs.close());
  const creates = new TaskStore(cluster.store.redis, {
    ...cluster.store.options,
    handOff: (task) => jobs.handOff(task.model, task),
  });
  const task = await creates.create({
    tenant: 'tenant-a',
    kind: 'response',
    model: 'tiny-chat',
    onRestart: 'fail',
    request: { model: 'tiny-chat', input: 'carried' },
  });
  const ended = await cluster.waitForEnd(task.id, 30_000);
  assert.equal(ended.status, 'succeeded', JSON.stringify(ended.error));
  assert.deepEqual(asked, ['carried'], 'generated from the request the job carried');
  assert.deepEqual(reads, [], 'the worker read no record of the task');
});
