import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { isFinalEventType, TasklineError } from '../src/index.js';
import { harness, newTask, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

test('1,000 cancel-vs-complete races each end in exactly one terminal state, its event last', async () => {
  const tasks = [];
  for (let i = 0; i < 1000; i++) {
    const task = await h.store.create(newTask());
    await h.store.claim(task.id, 'w1', 60_000);
    await h.store.start(task.id, 1);
    tasks.push(task);
  }
  const outcomes = await Promise.all(
    tasks.map(async (task, i) => {
      const complete = () =>
        h.store.finish(task.id, 1, { status: 'succeeded', result: { status: 'completed' } });
      const cancel = () => h.store.cancel(task.id, 'tenant-a');
      // Alternate who is sent first so both orders are exercised.
      const [a, b] = await Promise.allSettled(i % 2 ? [complete(), cancel()] : [cancel(), complete()]);
      return { a, b };
    }),
  );
  const counts = { succeeded: 0, cancelled: 0 };
  for (const [i, task] of tasks.entries()) {
    const { a, b } = outcomes[i]!;
    for (const r of [a, b]) {
      // The loser gets a clear answer: "already terminal", never a silent overwrite.
      if (r.status === 'rejected') {
        assert.ok(r.reason instanceof TasklineError, String(r.reason));
        assert.ok(
          ['task_terminal', 'task_not_cancelable', 'illegal_transition'].includes(r.reason.code),
          r.reason.code,
        );
      }
    }
    let final = (await h.store.get(task.id))!;
    if (final.status === 'cancelling') {
      // Cancel won the first commit: the worker's completion was refused, so it acknowledges the stop.
      await h.store.finish(task.id, 1, { status: 'cancelled', result: null });
      final = (await h.store.get(task.id))!;
    }
    assert.ok(final.status === 'succeeded' || final.status === 'cancelled', final.status);
    counts[final.status as 'succeeded' | 'cancelled']++;
    const { events } = await h.store.events(task.id, 0);
    const finals = events.filter((e) => isFinalEventType(e.type));
    assert.equal(finals.length, 1, `one final event for ${task.id}`);
    assert.equal(events.at(-1), finals[0], 'the final event is the last');
    assert.deepEqual(
      events.map((e) => e.seq),
      events.map((_, j) => j + 1),
    );
    assert.equal(
      finals[0]!.type,
      final.status === 'succeeded' ? 'response.completed' : 'response.cancelled',
      'the final event matches the state',
    );
  }
  console.log(`races: ${counts.succeeded} completed first, ${counts.cancelled} cancelled first`);
  assert.equal(counts.succeeded + counts.cancelled, 1000);
  assert.ok(counts.succeeded > 0 && counts.cancelled > 0, 'both orders of commit happened');
});

test('an idempotent create retried concurrently 50 times yields one task', async () => {
  const input = newTask({ tenant: 'tenant-i' });
  const results = await Promise.allSettled(
    Array.from({ length: 50 }, () => h.store.createIdempotent(input, 'key-1', 'fp-1')),
  );
  const ids = new Set<string>();
  for (const r of results) {
    if (r.status === 'fulfilled') ids.add(r.value.task.id);
    else assert.equal((r.reason as TasklineError).code, 'idempotency_key_in_use');
  }
  assert.equal(ids.size, 1);
  const readyCount = await h.redis.zcard('tl:{sched}:ready:tiny-chat:tenant-i');
  assert.equal(readyCount, 1, 'one task was created and queued');
  // Once accepted, every retry returns the same task.
  const again = await h.store.createIdempotent(input, 'key-1', 'fp-1');
  assert.equal(again.replayed, true);
  assert.ok(ids.has(again.task.id));
  await assert.rejects(
    h.store.createIdempotent(input, 'key-1', 'fp-2'),
    (e: unknown) => (e as TasklineError).code === 'idempotency_key_reused',
  );
  // The key is scoped to the tenant: another tenant's same key is a different task.
  const other = await h.store.createIdempotent({ ...input, tenant: 'tenant-j' }, 'key-1', 'fp-1');
  assert.ok(!ids.has(other.task.id));
});

test('an abandoned create is finished by a retry under the same task id', async () => {
  const short = await harness({ idempotencyPendingMs: 300 });
  try {
    const begun = await short.store.beginIdempotent('tenant-a', 'k', 'fp');
    // The first request dies here, before writing the task.
    await assert.rejects(
      short.store.createIdempotent(newTask(), 'k', 'fp'),
      (e: unknown) => (e as TasklineError).code === 'idempotency_key_in_use',
    );
    await new Promise((r) => setTimeout(r, 350));
    const { task } = await short.store.createIdempotent(newTask(), 'k', 'fp');
    assert.equal(task.id, begun.taskId);
  } finally {
    await short.close();
  }
});
