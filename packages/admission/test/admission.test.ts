/** The one admission path, against a real Redis of the test's own: the cap, a create's place, a task's end and a caller's departure. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Redis } from 'ioredis';
import { connectRedis, EventHub, TaskStore, TasklineError, type NewTask } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { startRedis, type RedisServer } from '@taskline/testing';
import { Admission, TenantLimits } from '../src/index.js';

let server: RedisServer;
let redis: Redis;
let store: TaskStore;
let hub: EventHub;
let admission: Admission;

before(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, 'admission-test');
  store = new TaskStore(redis, {
    taskRetentionMs: 60_000,
    eventRetentionMs: 60_000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
  });
  hub = new EventHub(store);
  const limits = new TenantLimits(redis, {
    ratePerS: 100,
    burst: 100,
    maxActiveTasks: 2,
    maxStreams: 2,
    streamLeaseMs: 1000,
  });
  admission = new Admission({
    store,
    hub,
    limits,
    logger: createLogger({ service: 'test' }, 'error', () => undefined),
  });
});
after(async () => {
  hub.close();
  redis.disconnect();
  await server.stop();
});

const input = (tenant: string): NewTask => ({
  tenant,
  kind: 'response',
  model: 'tiny-chat',
  onRestart: 'fail',
  request: { model: 'tiny-chat', input: 'hello' },
});
const write = (tenant: string) => async () => ({ task: await store.create(input(tenant)), replayed: false });

test('creates hold places up to the cap; past it a create is refused, or gets the task its earlier try made', async () => {
  const first = await admission.create('capped', null, write('capped'));
  await admission.create('capped', null, write('capped'));
  await assert.rejects(
    admission.create('capped', null, write('capped')),
    (err) => err instanceof TasklineError && err.code === 'rate_limited',
  );
  const replayed = await admission.create('capped', null, write('capped'), async () => first.task);
  assert.deepEqual([replayed.task.id, replayed.replayed], [first.task.id, true]);
  const members = await redis.zrange('tl:api:active:{capped}', 0, -1);
  assert.equal(members.length, 2, 'the two tasks, no reservation left behind');
  assert.ok(members.every((m) => m.startsWith('task_')));
});

test('a create that fails frees its place at once', async () => {
  await assert.rejects(
    admission.create('failing', null, () => Promise.reject(new Error('write failed'))),
    /write failed/,
  );
  assert.deepEqual(await redis.zrange('tl:api:active:{failing}', 0, -1), []);
});

test('awaitEnd answers with the task as it ended, an end already written included', async () => {
  const { task } = await admission.create('ending', null, write('ending'));
  const waiting = admission.awaitEnd(task, new AbortController().signal);
  await store.cancel(task.id, task.tenant);
  assert.equal((await waiting)?.status, 'cancelled');
  assert.equal((await admission.awaitEnd(task, new AbortController().signal))?.status, 'cancelled');
});

test('a caller that leaves cancels its task (settled waits for the write); one that stopped listening does not', async () => {
  const { task } = await admission.create('leaving', null, write('leaving'));
  const left = new AbortController();
  admission.cancelOnLeave(task, left.signal);
  const waiting = admission.awaitEnd(task, left.signal);
  left.abort(new Error('caller left'));
  await assert.rejects(waiting, /caller left/);
  await admission.settled();
  assert.equal((await store.get(task.id))?.status, 'cancelled');

  const { task: kept } = await admission.create('staying', null, write('staying'));
  const gone = new AbortController();
  admission.cancelOnLeave(kept, gone.signal)();
  gone.abort();
  await admission.settled();
  assert.equal((await store.get(kept.id))?.status, 'queued');
});
