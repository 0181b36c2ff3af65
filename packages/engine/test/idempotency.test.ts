import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TasklineError, type TaskStore } from '../src/index.js';
import { newId } from '../src/ids.js';
import { schedulerKeys, taskKeys } from '../src/keys.js';
import { harness, newTask, until, type Harness } from './helpers.js';

// LMSP 1.0 section 9.2 with task retention far shorter than the key's: a key whose task has
// expired is free again (ARCHITECTURE.md, "Idempotency"), so a retry never brings the old task
// id back with a new run under it.
let h: Harness;
before(async () => (h = await harness({ taskRetentionMs: 200, eventRetentionMs: 200 })));
after(() => h.close());

/** Creates a task with `key`, runs it to `succeeded` and waits until Redis has expired it. */
async function expiredTask(store: TaskStore, tenant: string, key: string): Promise<string> {
  const first = await store.createIdempotent(newTask({ tenant }), key, 'print');
  const { attempt } = await store.claim(first.task.id, 'w1', 60_000, { start: true });
  await store.finish(first.task.id, attempt, { status: 'succeeded', result: { text: 'old run' } });
  await until('the finished task to expire', async () =>
    (await h.redis.exists(taskKeys(first.task.id).task, taskKeys(first.task.id).events)) === 0
      ? true
      : undefined,
  );
  return first.task.id;
}

test('a key whose task expired makes a new task under a new id, and then names that task', async () => {
  const old = await expiredTask(h.store, 'tenant-x', 'key-expired');

  const retried = await h.store.createIdempotent(newTask({ tenant: 'tenant-x' }), 'key-expired', 'print');
  assert.equal(retried.replayed, false);
  assert.notEqual(retried.task.id, old, 'a new task id, not the expired one');
  assert.equal(retried.task.status, 'queued');
  assert.deepEqual(
    (await h.store.eventsAfter(retried.task.id, 0)).map((e) => [e.seq, e.type]),
    [[1, 'response.created']],
  );
  assert.equal(await h.store.get(old), null, 'the old id stays absent');
  assert.equal(await h.redis.exists(taskKeys(old).events), 0);

  // Later retries with the key get the new task.
  const again = await h.store.createIdempotent(newTask({ tenant: 'tenant-x' }), 'key-expired', 'print');
  assert.equal(again.replayed, true);
  assert.equal(again.task.id, retried.task.id);
  assert.equal((await h.store.findIdempotent('tenant-x', 'key-expired', 'print'))?.id, retried.task.id);
  // The body is still compared: the key stays the first request's.
  await assert.rejects(
    h.store.createIdempotent(newTask({ tenant: 'tenant-x' }), 'key-expired', 'other'),
    (e: unknown) => (e as TasklineError).code === 'idempotency_key_reused',
  );
});

test('begin on a key whose task expired reserves a new id; a second begin meanwhile is told the key is in use', async () => {
  const old = await expiredTask(h.store, 'tenant-y', 'key-begin');

  const begun = await h.store.beginIdempotent('tenant-y', 'key-begin', 'print');
  assert.equal(begun.replay, null);
  assert.notEqual(begun.taskId, old);
  // The record now names the new id, pending: the expired id can no longer be taken by anyone.
  await assert.rejects(
    h.store.beginIdempotent('tenant-y', 'key-begin', 'print'),
    (e: unknown) => (e as TasklineError).code === 'idempotency_key_in_use',
  );
  const task = await h.store.create({ ...newTask({ tenant: 'tenant-y' }), id: begun.taskId });
  await h.store.finishIdempotent(begun.recordKey, task.id);
  const replay = await h.store.beginIdempotent('tenant-y', 'key-begin', 'print');
  assert.equal(replay.replay?.id, begun.taskId);
  assert.equal(await h.store.get(old), null);
});

test('concurrent retries of a key whose task expired make one new task', async () => {
  const old = await expiredTask(h.store, 'tenant-z', 'key-race');
  // The old task was claimed here without dispatch: its ready entry is still there.
  const ready = schedulerKeys.ready('tenant-z', 'tiny-chat');
  const offered = async () => (await h.redis.zrange(ready, 0, -1)).filter((t) => t !== old);
  assert.deepEqual(await offered(), []);

  const results = await Promise.allSettled(
    Array.from({ length: 30 }, () =>
      h.store.createIdempotent(
        newTask({ tenant: 'tenant-z', id: newId('task'), fresh: true }),
        'key-race',
        'print',
      ),
    ),
  );
  const ids = new Set<string>();
  for (const r of results) {
    if (r.status === 'fulfilled') ids.add(r.value.task.id);
    else assert.equal((r.reason as TasklineError).code, 'idempotency_key_in_use');
  }
  assert.equal(ids.size, 1, 'every accepted retry got the same task');
  const [id] = [...ids];
  assert.notEqual(id, old);
  assert.deepEqual(await offered(), [id], 'one task was created and queued');
  assert.equal(await h.store.get(old), null);
  assert.equal(
    (await h.store.createIdempotent(newTask({ tenant: 'tenant-z' }), 'key-race', 'print')).task.id,
    id,
  );
});
