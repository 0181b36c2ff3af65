import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TasklineError, TaskStore } from '../src/index.js';
import { recordKeyOf } from '../src/idempotency.js';
import { newId } from '../src/ids.js';
import { schedulerKeys, taskKeys } from '../src/keys.js';
import { harness, newTask, until, type Harness } from './helpers.js';

// LMSP 1.0 section 9.2 with task retention far shorter than the key's: a key whose task has
// expired is free again (docs/engine.md, "Idempotency"), so a retry never brings the old task
// id back with a new run under it.
let h: Harness;
// The same Redis with a short Idempotency-Key hold, for retries that take over a create. Its store
// reads a clock the test moves: a hold is "still held" or "past" because the test says so, not
// because a starved host was quick enough between two calls (races.test.ts does the same).
let held: TaskStore;
const HOLD_MS = 300;
const clock = { ms: Date.now() };
before(async () => {
  h = await harness({ taskRetentionMs: 200, eventRetentionMs: 200 });
  held = new TaskStore(h.redis, { ...h.store.options, idempotencyPendingMs: HOLD_MS, now: () => clock.ms });
});
after(() => h.close());

/** Creates a task with `key`, runs it to `succeeded` and waits until Redis has expired it. */
async function expiredTask(store: TaskStore, tenant: string, key: string): Promise<string> {
  const first = await store.createIdempotent(newTask({ tenant }), key, 'print');
  await runAndExpire(store, first.task.id);
  return first.task.id;
}

/** Runs the task to `succeeded` and waits until Redis has expired it. */
async function runAndExpire(store: TaskStore, id: string): Promise<void> {
  const { attempt } = await store.claim(id, 'w1', 60_000, { start: true });
  await store.finish(id, attempt, { status: 'succeeded', result: { text: 'old run' } });
  await until('the finished task to expire', async () =>
    (await h.redis.exists(taskKeys(id).task, taskKeys(id).events)) === 0 ? true : undefined,
  );
}

/** Moves the held store's clock past its hold. */
const pastTheHold = () => void (clock.ms += HOLD_MS + 50);

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

test('a create that wrote its task and died before marking its key: a retry after the task expired makes a new id', async () => {
  // The first request goes as createIdempotent does, and dies after its task is written.
  const first = await held.beginIdempotent('tenant-t', 'key-crashed', 'print');
  await held.create({
    ...newTask({ tenant: 'tenant-t' }),
    id: first.taskId,
    fresh: true,
    idempotencyKey: 'key-crashed',
  });
  await runAndExpire(held, first.taskId);
  pastTheHold();

  // The retry takes the key over: the record still names the old id, whose task has come and gone.
  const drawn = newId('task');
  const retried = await held.createIdempotent(
    newTask({ tenant: 'tenant-t', id: drawn, fresh: true }),
    'key-crashed',
    'print',
  );
  assert.equal(retried.replayed, false);
  assert.equal(retried.task.id, drawn, 'a new task id, the one the retry drew, not the expired one');
  assert.deepEqual(
    (await held.eventsAfter(retried.task.id, 0)).map((e) => [e.seq, e.type]),
    [[1, 'response.created']],
  );
  assert.equal(await held.get(first.taskId), null, 'the old id stays absent');
  assert.equal(await h.redis.exists(taskKeys(first.taskId).task, taskKeys(first.taskId).events), 0);
  const again = await held.createIdempotent(newTask({ tenant: 'tenant-t' }), 'key-crashed', 'print');
  assert.equal(again.replayed, true);
  assert.equal(again.task.id, retried.task.id);
});

test('a create that stalls past its hold and lands after the retry task expired makes a new id, not that one', async () => {
  // The first request reserves the key with the id it drew, then stalls before its create lands.
  let land = () => {};
  const landed = new Promise<void>((r) => (land = r));
  const stalling = new TaskStore(h.redis, held.options);
  stalling.create = async (input) => {
    await landed;
    return TaskStore.prototype.create.call(stalling, input);
  };
  const drawn = newId('task');
  const first = stalling.createIdempotent(
    newTask({ tenant: 'tenant-s', id: drawn, fresh: true }),
    'key-stalled',
    'print',
  );
  await until('the first request to reserve the key', async () =>
    (await h.redis.hget(recordKeyOf('tenant-s', 'key-stalled'), 'task')) === drawn ? true : undefined,
  );
  pastTheHold();
  const retry = await held.createIdempotent(
    newTask({ tenant: 'tenant-s', id: newId('task'), fresh: true }),
    'key-stalled',
    'print',
  );
  assert.equal(retry.task.id, drawn, 'the retry took over the first id');
  await runAndExpire(held, drawn);

  land();
  const late = await first;
  assert.equal(late.replayed, false);
  assert.notEqual(late.task.id, drawn, 'a new task id, not the expired one');
  assert.deepEqual(
    (await held.eventsAfter(late.task.id, 0)).map((e) => [e.seq, e.type]),
    [[1, 'response.created']],
  );
  assert.equal(await held.get(drawn), null, 'the old id stays absent');
  assert.equal(await h.redis.exists(taskKeys(drawn).task, taskKeys(drawn).events), 0);
  const again = await held.createIdempotent(newTask({ tenant: 'tenant-s' }), 'key-stalled', 'print');
  assert.equal(again.task.id, late.task.id);
});

test('a retry that takes over a create that never wrote its task creates it under the reserved id, once', async () => {
  const first = await held.beginIdempotent('tenant-u', 'key-unwritten', 'print');
  pastTheHold();
  const results = await Promise.allSettled(
    Array.from({ length: 10 }, () =>
      held.createIdempotent(
        newTask({ tenant: 'tenant-u', id: newId('task'), fresh: true }),
        'key-unwritten',
        'print',
      ),
    ),
  );
  const ids = new Set<string>();
  for (const r of results) {
    if (r.status === 'fulfilled') ids.add(r.value.task.id);
    else assert.equal((r.reason as TasklineError).code, 'idempotency_key_in_use');
  }
  assert.deepEqual([...ids], [first.taskId], 'every accepted retry got the reserved id');
  assert.deepEqual(
    (await held.eventsAfter(first.taskId, 0)).map((e) => [e.seq, e.type]),
    [[1, 'response.created']],
    'one task, created once',
  );
  assert.deepEqual(await h.redis.zrange(schedulerKeys.ready('tenant-u', 'tiny-chat'), 0, -1), [first.taskId]);
});
