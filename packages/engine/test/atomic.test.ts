import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TasklineError, type TaskStore } from '../src/index.js';
import { taskKeys } from '../src/keys.js';
import { harness, newTask, type Harness } from './helpers.js';

// Redis does not roll a script back: writes made before a failing command stay. Every script must
// therefore find out whether its writes can fail before it makes the first one.
let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

/** Every key of the task, dumped: type and content, to compare before and after a refused script. */
const snapshot = (id: string) => snapshotOf(h, id);

async function snapshotOf(h: Harness, id: string): Promise<string> {
  const keys = taskKeys(id);
  const out: Record<string, unknown> = {};
  for (const key of [keys.task, keys.events, keys.inputs, keys.tokens]) {
    const type = await h.redis.type(key);
    out[key] =
      type === 'hash'
        ? await h.redis.hgetall(key)
        : type === 'stream'
          ? await h.redis.xrange(key, '-', '+')
          : type === 'string'
            ? await h.redis.get(key)
            : type;
  }
  return JSON.stringify(out);
}

const delta = (text: string) => ({ type: 'response.output_text.delta', data: { delta: text } });

async function runToEnd(store: TaskStore, id: string): Promise<void> {
  const { attempt } = await store.claim(id, 'w1', 60_000, { start: true });
  await store.append(id, attempt, [1, 2], [delta('old '), delta('run')]);
  await store.finish(id, attempt, { status: 'succeeded', result: { text: 'old run' } });
}

test('an evicted task hash with its stream left: the idempotent retry makes a new task, no old event replayed', async () => {
  const input = newTask();
  const first = await h.store.createIdempotent(input, 'key-evicted', 'print');
  await runToEnd(h.store, first.task.id);
  const old = await h.store.eventsAfter(first.task.id, 0);
  assert.ok(old.length >= 4, 'old.length >= 4');
  // What `allkeys-lru` eviction (or a key expiry racing the stream's) leaves: the log, no record.
  await h.redis.del(taskKeys(first.task.id).task);
  await h.redis.persist(taskKeys(first.task.id).events);

  // The task reads as gone, so its key is free again: a new task under a new id (LMSP 1.0
  // section 9.2, docs/engine.md "Idempotency"), whose log starts clean at 1.
  const retried = await h.store.createIdempotent(input, 'key-evicted', 'print');
  assert.notEqual(retried.task.id, first.task.id, 'a new task, not the evicted one again');
  assert.equal(retried.task.status, 'queued');
  assert.equal(retried.task.seq, 1);
  assert.deepEqual(
    (await h.store.eventsAfter(retried.task.id, 0)).map((e) => [e.seq, e.type]),
    [[1, 'response.created']],
  );
  assert.equal(await h.store.get(first.task.id), null, 'the evicted id stays gone');

  const again = await h.store.createIdempotent(input, 'key-evicted', 'print');
  assert.equal(again.replayed, true);
  assert.equal(again.task.id, retried.task.id);

  // A create under an id not drawn for it (a takeover's) drops what a vanished task left there
  // instead of failing half-way on the XADD or replaying the old run.
  const reused = await h.store.create({ ...input, id: first.task.id });
  assert.equal(reused.seq, 1);
  assert.deepEqual(
    (await h.store.eventsAfter(first.task.id, 0)).map((e) => [e.seq, e.type]),
    [[1, 'response.created']],
    'only the new task: the old run is gone',
  );
});

/** A refused script must throw a stable error and leave every key of the task as it was. */
async function refusedWithoutWrites(id: string, what: string, act: () => Promise<unknown>): Promise<void> {
  const before = await snapshot(id);
  await assert.rejects(act(), (err) => {
    assert.ok(err instanceof TasklineError, `${what}: ${String(err)}`);
    assert.equal(err.code, 'internal_error', what);
    return true;
  });
  assert.equal(await snapshot(id), before, `${what} wrote nothing`);
}

test('every state change writes nothing when its event cannot be appended (log of the wrong type)', async () => {
  const queued = await h.store.create(newTask());
  const running = await h.store.create(newTask({ kind: 'tool', model: 'tools' }));
  const { attempt } = await h.store.claim(running.id, 'w1', 60_000, { start: true });
  const asking = await h.store.create(newTask({ kind: 'tool', model: 'tools' }));
  const asked = await h.store.claim(asking.id, 'w1', 60_000, { start: true });
  await h.store.requestInput(asking.id, asked.attempt, { confirm: { type: 'confirm' } });
  // Something else took the log's key: an XADD there fails.
  for (const task of [queued, running, asking]) {
    await h.redis.del(taskKeys(task.id).events);
    await h.redis.set(taskKeys(task.id).events, 'not a stream');
  }
  await refusedWithoutWrites(queued.id, 'claim', () =>
    h.store.claim(queued.id, 'w2', 60_000, { start: true }),
  );
  await refusedWithoutWrites(queued.id, 'cancel (queued)', () => h.store.cancel(queued.id, 'tenant-a'));
  await refusedWithoutWrites(running.id, 'append', () =>
    h.store.append(running.id, attempt, [7], [delta('x')]),
  );
  await refusedWithoutWrites(running.id, 'finish', () =>
    h.store.finish(running.id, attempt, { status: 'succeeded', result: null }),
  );
  await refusedWithoutWrites(running.id, 'progress', () => h.store.progress(running.id, attempt, 'half way'));
  await refusedWithoutWrites(running.id, 'request input', () =>
    h.store.requestInput(running.id, attempt, { q: { type: 'text' } }),
  );
  await refusedWithoutWrites(running.id, 'cancel (running)', () => h.store.cancel(running.id, 'tenant-a'));
  await refusedWithoutWrites(asking.id, 'provide input', () =>
    h.store.provideInput(asking.id, 'tenant-a', { confirm: { action: 'accept' } }),
  );
});

test('an append onto a token snapshot of the wrong type writes nothing, and one without token ids goes through', async () => {
  const task = await h.store.create(newTask());
  const { attempt } = await h.store.claim(task.id, 'w1', 60_000, { start: true });
  await h.redis.hset(taskKeys(task.id).tokens, 'not', 'a string');
  await refusedWithoutWrites(task.id, 'append', () => h.store.append(task.id, attempt, [7], [delta('x')]));
  // Output with no token ids (a backend that cannot snapshot) writes no snapshot, so its key's type is no bar.
  const { seq } = (await h.store.get(task.id))!;
  assert.equal(await h.store.append(task.id, attempt, [], [delta('y')]), seq + 1);
});

test('a log ahead of its task (a record rewritten under a surviving log) refuses the write', async () => {
  const task = await h.store.create(newTask());
  await h.redis.hset(taskKeys(task.id).task, 'seq', 0);
  await refusedWithoutWrites(task.id, 'claim', () => h.store.claim(task.id, 'w1', 60_000));
});

test('an input deadline writes nothing when its event cannot be appended (log of the wrong type)', async () => {
  const short = await harness({ inputTimeoutMs: 1 });
  try {
    const task = await short.store.create(newTask({ kind: 'tool', model: 'tools' }));
    const { attempt } = await short.store.claim(task.id, 'w1', 60_000, { start: true });
    await short.store.requestInput(task.id, attempt, { confirm: { type: 'confirm' } });
    await short.redis.del(taskKeys(task.id).events);
    await short.redis.set(taskKeys(task.id).events, 'not a stream');
    await new Promise((r) => setTimeout(r, 5));
    const before = await snapshotOf(short, task.id);
    await assert.rejects(short.store.sweepInputDeadlines(), (err) => {
      assert.ok(err instanceof TasklineError, String(err));
      assert.equal(err.code, 'internal_error');
      return true;
    });
    assert.equal(await snapshotOf(short, task.id), before, 'the task is still parked, nothing written');
    assert.equal((await short.store.get(task.id))?.status, 'input_required');
  } finally {
    await short.close();
  }
});
