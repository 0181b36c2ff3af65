import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  connectRedis,
  isFinalEventType,
  newId,
  problem,
  TASK_STATUSES,
  TaskStore,
  TasklineError,
} from '../src/index.js';
import { StoreCore } from '../src/core.js';
import { finalEvent } from '../src/response.js';
import { defaults, harness, newTask, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

/**
 * A second store on a connection of its own (another process's, in production): commands sent at
 * once on two connections reach Redis in either order, unlike two on one connection.
 */
async function otherConnection(name: string): Promise<{ store: TaskStore; core: StoreCore; close(): void }> {
  const redis = connectRedis(h.server.url, name);
  await redis.ping();
  // `core`: the engine's own transition step, which no caller of the store reaches.
  return {
    store: new TaskStore(redis, defaults),
    core: new StoreCore(redis, defaults),
    close: () => redis.disconnect(),
  };
}

async function runningTasks(n: number, tenant: string) {
  const tasks = [];
  for (let i = 0; i < n; i++) {
    const task = await h.store.create(newTask({ tenant }));
    await h.store.claim(task.id, 'w1', 60_000);
    await h.store.start(task.id, 1);
    tasks.push(task);
  }
  return tasks;
}

/** Exactly one final event, last, numbered without gaps, and of the kind the final state says. */
async function assertOneEnd(id: string, status: string, finalType: string) {
  const { events } = await h.store.events(id, 0);
  const finals = events.filter((e) => isFinalEventType(e.type));
  assert.equal(finals.length, 1, `one final event for ${id}`);
  assert.equal(events.at(-1), finals[0], 'the final event is the last');
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, j) => j + 1),
  );
  assert.equal(finals[0]!.type, finalType, `the final event matches the state ${status}`);
}

const refusal = (r: PromiseSettledResult<unknown>) => {
  if (r.status === 'fulfilled') return null;
  assert.ok(r.reason instanceof TasklineError, String(r.reason));
  return r.reason;
};

test('1,000 cancel-vs-complete races on separate connections: one end each, the loser gets its documented answer', async () => {
  const api = await otherConnection('racer-api');
  try {
    const tasks = await runningTasks(1000, 'tenant-a');
    const outcomes = await Promise.all(
      tasks.map(async (task, i) => {
        const complete = () =>
          // A head start of 0 to 4 round trips on the worker's own connection against the
          // cancel's read-then-write: each race is still decided by Redis, in either order. (With
          // 0 to 2 only, a starved host once sent every finish ahead of every cancel's write: the
          // thousand races go out together, a connection's commands in one batch each.)
          (async () => {
            for (let k = 0; k < i % 5; k++) await h.redis.ping();
            return h.store.finish(task.id, 1, { status: 'succeeded', result: { status: 'completed' } }, task);
          })();
        const cancel = () => api.store.cancel(task.id, 'tenant-a');
        // Alternate which is sent first; the two connections still reach Redis in either order.
        const done = i % 2 ? complete() : null;
        const cancelled = cancel();
        return Promise.allSettled([done ?? complete(), cancelled]);
      }),
    );
    const counts = { succeeded: 0, cancelled: 0 };
    for (const [i, task] of tasks.entries()) {
      const [done, cancelled] = outcomes[i]!;
      const lostCompletion = refusal(done);
      const lostCancel = refusal(cancelled);
      assert.equal([lostCompletion, lostCancel].filter(Boolean).length, 1, 'exactly one of them commits');
      if (lostCancel) {
        // LMSP 7.3: a cancel of a task that already ended is 409 task_not_cancelable.
        assert.equal(lostCancel.code, 'task_not_cancelable', lostCancel.message);
        assert.equal(lostCancel.details.status, 'succeeded');
      }
      if (lostCompletion) {
        // The cancel came first: the task is `cancelling`, so the worker ends it cancelled instead.
        assert.equal(lostCompletion.code, 'illegal_transition', lostCompletion.message);
        assert.equal(lostCompletion.details.status, 'cancelling');
        assert.equal((await h.store.get(task.id))?.status, 'cancelling');
        await h.store.finish(task.id, 1, { status: 'cancelled', result: null });
      }
      const final = (await h.store.get(task.id))!;
      assert.ok(final.status === 'succeeded' || final.status === 'cancelled', final.status);
      counts[final.status as 'succeeded' | 'cancelled']++;
      await assertOneEnd(
        task.id,
        final.status,
        final.status === 'succeeded' ? 'response.completed' : 'response.cancelled',
      );
    }
    console.log(`races: ${counts.succeeded} completed first, ${counts.cancelled} cancelled first`);
    assert.equal(counts.succeeded + counts.cancelled, 1000);
    assert.ok(counts.succeeded > 0 && counts.cancelled > 0, 'both orders of commit happened');
  } finally {
    api.close();
  }
});

test('500 races of two ends on separate connections, one allowing every state: first commit wins, the loser gets task_terminal', async () => {
  const other = await otherConnection('racer-sweep');
  try {
    const tasks = await runningTasks(500, 'tenant-t');
    const error = problem('server_restarted', 'lost');
    const outcomes = await Promise.all(
      tasks.map((task, i) => {
        const complete = () =>
          h.store.finish(task.id, 1, { status: 'succeeded', result: { status: 'completed' } }, task);
        // A writer whose allowed states are too broad (a stale read, a bug): terminal states must hold anyway.
        const fail = () =>
          other.core.transition(task.id, 'failed', {
            attempt: 1,
            from: [...TASK_STATUSES],
            fields: { error: JSON.stringify(error) },
            events: [finalEvent('failed', null, 'response', error)],
          });
        // The second end leaves a macrotask after the first: both are still in flight together,
        // but each order leads half the time (sent in one tick, one connection's whole batch can
        // reach a node first, as on a Redis Cluster, where every race went one way).
        const [first, second] = i % 2 ? [complete, fail] : [fail, complete];
        const led = first();
        const trailed = new Promise<unknown>((resolve) => setImmediate(() => resolve(second())));
        return Promise.allSettled([led, trailed]);
      }),
    );
    const counts = { succeeded: 0, failed: 0 };
    for (const [i, task] of tasks.entries()) {
      const losers = outcomes[i]!.map(refusal).filter((e) => e !== null);
      assert.equal(losers.length, 1, `exactly one end of ${task.id} committed`);
      assert.equal(losers[0]!.code, 'task_terminal', losers[0]!.message);
      const final = (await h.store.get(task.id))!;
      assert.ok(final.status === 'succeeded' || final.status === 'failed', final.status);
      assert.equal(losers[0]!.details.status, final.status, 'the loser is told the state that won');
      counts[final.status as 'succeeded' | 'failed']++;
      await assertOneEnd(
        task.id,
        final.status,
        final.status === 'succeeded' ? 'response.completed' : 'response.failed',
      );
    }
    console.log(`terminal races: ${counts.succeeded} completed first, ${counts.failed} failed first`);
    assert.ok(counts.succeeded > 0 && counts.failed > 0, 'both orders of commit happened');
  } finally {
    other.close();
  }
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
  assert.ok(ids.has(again.task.id), 'ids.has(again.task.id)');
  await assert.rejects(
    h.store.createIdempotent(input, 'key-1', 'fp-2'),
    (e: unknown) => (e as TasklineError).code === 'idempotency_key_reused',
  );
  // The key is scoped to the tenant: another tenant's same key is a different task.
  const other = await h.store.createIdempotent({ ...input, tenant: 'tenant-j' }, 'key-1', 'fp-1');
  assert.ok(!ids.has(other.task.id), '!ids.has(other.task.id)');
});

/**
 * A harness whose store reads a clock the test moves: a hold of 300 ms is "still held" or "past"
 * because the test says so, not because a starved host was quick enough between two calls.
 */
async function heldHarness() {
  const clock = { ms: Date.now() };
  const short = await harness({ idempotencyPendingMs: 300, now: () => clock.ms });
  return { short, pastTheHold: () => void (clock.ms += 350) };
}

test('an abandoned create is finished by a retry under the same task id', async () => {
  const { short, pastTheHold } = await heldHarness();
  try {
    const begun = await short.store.beginIdempotent('tenant-a', 'k', 'fp');
    // The first request dies here, before writing the task.
    await assert.rejects(
      short.store.createIdempotent(newTask(), 'k', 'fp'),
      (e: unknown) => (e as TasklineError).code === 'idempotency_key_in_use',
    );
    pastTheHold();
    const { task } = await short.store.createIdempotent(newTask(), 'k', 'fp');
    assert.equal(task.id, begun.taskId);
  } finally {
    await short.close();
  }
});

test('a create that stalls past its hold, and lands after the retry that took over, leaves that task alone', async () => {
  const { short, pastTheHold } = await heldHarness();
  try {
    // The first request reserves the key with the id it drew for its task, then stalls (a pause,
    // a failover) before its create lands.
    const first = await short.store.beginIdempotent('tenant-a', 'k', 'fp');
    pastTheHold();
    const retry = await short.store.createIdempotent(newTask({ id: newId('task'), fresh: true }), 'k', 'fp');
    assert.equal(retry.task.id, first.taskId, 'the retry took over the first id');
    const { attempt } = await short.store.claim(first.taskId, 'w1', 60_000, { start: true });
    await short.store.append(
      first.taskId,
      attempt,
      [1],
      [{ type: 'response.output_text.delta', data: { delta: 'hi' } }],
    );
    const before = await short.store.eventsAfter(first.taskId, 0);

    // The first request goes on as createIdempotent does: its drawn id, still taken for fresh.
    const late = await short.store.create({
      ...newTask(),
      id: first.taskId,
      fresh: true,
      idempotencyKey: 'k',
    });
    assert.equal(late.status, 'running', 'it answers with the task that is there');
    const task = await short.store.get(first.taskId);
    assert.equal(task?.status, 'running');
    assert.equal(task?.attempt, attempt);
    assert.deepEqual(await short.store.eventsAfter(first.taskId, 0), before, 'its history untouched');
    await short.store.finish(first.taskId, attempt, { status: 'succeeded', result: null });
  } finally {
    await short.close();
  }
});
