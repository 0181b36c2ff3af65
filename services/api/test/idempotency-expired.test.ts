/**
 * LMSP 1.0 section 9.2 against task retention (`TASKLINE_TASK_RETENTION_S`) far shorter than the
 * key's (`TASKLINE_IDEMPOTENCY_TTL_S`): a key whose task has expired is free again, so a retry
 * makes a new task under a new id, never the old id back with a new run (and event numbers
 * restarting at 1) under it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TaskStore } from '@taskline/engine';
import { until } from '@taskline/testing';
import {
  call,
  createTask,
  nextQueued,
  openSse,
  runWorker,
  startApi,
  startRedisAndStore,
  TASK_BODY,
  type InProcessApi,
  type RedisAndStore,
} from './helpers.js';

let stack: RedisAndStore;
let api: InProcessApi;
/** The worker's store, ending tasks with the api's retention (1 s), as a deployed worker would. */
let worker: TaskStore;
before(async () => {
  stack = await startRedisAndStore();
  api = await startApi(stack, { TASKLINE_TASK_RETENTION_S: '1', TASKLINE_EVENT_RETENTION_S: '1' });
  worker = new TaskStore(stack.redis, {
    taskRetentionMs: 1000,
    eventRetentionMs: 1000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
  });
});
after(async () => {
  await api?.close();
  await stack?.close();
});

test('an Idempotency-Key reused after its task expired makes a new task under a new id', async () => {
  const headers = { 'idempotency-key': 'expires-1' };
  const first = await createTask(api.base, TASK_BODY, headers);
  assert.equal(await nextQueued(stack.redis), first.id);
  await runWorker(worker, first.id, ['old ', 'run']);
  await until('the finished task to expire', async () =>
    (await call(api.base, 'GET', `/lmsp/v1/tasks/${first.id}`)).status === 404 ? true : undefined,
  );

  const retried = await createTask(api.base, TASK_BODY, headers);
  assert.notEqual(retried.id, first.id, 'a new task id');
  assert.equal(retried.status, 'queued');

  const old = await call(api.base, 'GET', `/lmsp/v1/tasks/${first.id}`);
  assert.equal(old.status, 404, old.text);
  assert.equal((old.body as { code: string }).code, 'task_not_found');
  // A client resuming the old run is told it is gone, not handed the new run's events.
  const resumed = await call(api.base, 'GET', `/lmsp/v1/tasks/${first.id}/events`, {
    headers: { 'last-event-id': '2' },
  });
  assert.equal(resumed.status, 404, resumed.text);

  const events = await openSse(api.base, retried.events_url);
  await events.waitFor(1);
  events.abort();
  await events.done;
  assert.deepEqual([events.events[0]?.id, events.events[0]?.event], ['1', 'response.created']);

  // Later retries get the new task.
  const again = await createTask(api.base, TASK_BODY, headers);
  assert.equal(again.id, retried.id);
});
