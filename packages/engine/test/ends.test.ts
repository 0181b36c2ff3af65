/** What a task's end leaves behind (the retention of its keys, its scheduler index entries), and what a delete takes. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { operatorKeys, schedulerKeys, taskKeys } from '../src/keys.js';
import { Releases } from '../src/sched/releases.js';
import { harness, newTask, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

test('an end gives its retention to the side keys the task wrote (inputs, token snapshot), and only to those', async () => {
  const ttl = (key: string) => h.redis.pttl(key);
  const end = async (id: string, attempt: number) =>
    h.store.finish(id, attempt, { status: 'succeeded', result: { ok: true } });

  // Neither written: a key under either name (no task's doing) is left as it is.
  const plain = await h.store.create(newTask());
  const ran = await h.store.claim(plain.id, 'w1', 60_000, { start: true });
  await h.redis.set(taskKeys(plain.id).tokens, 'x');
  await end(plain.id, ran.attempt);
  assert.ok((await ttl(taskKeys(plain.id).task)) > 0, '(await ttl(taskKeys(plain.id).task)) > 0');
  assert.equal(await ttl(taskKeys(plain.id).tokens), -1);

  // Tokens appended, questions asked and answered: both expire with the task.
  const both = await h.store.create(newTask({ kind: 'tool', model: 'tools', onRestart: 'retry' }));
  const first = await h.store.claim(both.id, 'w1', 60_000, { start: true });
  await h.store.append(both.id, first.attempt, [1, 2], [{ type: 'response.output_text.delta', data: {} }]);
  await h.store.requestInput(both.id, first.attempt, { q: { type: 'text' } });
  await h.store.provideInput(both.id, both.tenant, { q: 'yes' });
  const second = await h.store.claim(both.id, 'w1', 60_000, { start: true });
  await end(both.id, second.attempt);
  for (const key of [taskKeys(both.id).inputs, taskKeys(both.id).tokens])
    assert.ok((await ttl(key)) > 0, key);

  // A record from before the marker: every side key expires, as before.
  const old = await h.store.create(newTask());
  await h.redis.hdel(taskKeys(old.id).task, 'side_keys');
  const oldRun = await h.store.claim(old.id, 'w1', 60_000, { start: true });
  await h.redis.set(taskKeys(old.id).tokens, 'x');
  await h.redis.hset(taskKeys(old.id).inputs, 'q:x', '{}');
  await end(old.id, oldRun.attempt);
  for (const key of [taskKeys(old.id).inputs, taskKeys(old.id).tokens]) assert.ok((await ttl(key)) > 0, key);
});

test('releases asked for in one turn leave the lease index and their running sets in one command per key', async () => {
  const tasks = ['a1', 'a2', 'b1', 'b2'].map((n) => ({
    id: `task_rel${n}`,
    tenant: `rel-${n[0]}`,
    parent: null,
  }));
  for (const t of tasks) {
    await h.redis.zadd(schedulerKeys.leases, 1, t.id);
    await h.redis.zadd(schedulerKeys.active(t.tenant), 1, t.id);
  }
  const minute = `e:${Math.floor(Date.now() / 60_000)}`;
  const before = Number(await h.redis.hget(operatorKeys.throughput, minute));
  const releases = new Releases(h.redis, Date.now);
  const sent = await sentBy(() =>
    Promise.all([
      releases.add(tasks[0]!, {}),
      releases.add(tasks[1]!, { failure: 'model_error' }),
      releases.add(tasks[2]!, {}),
      releases.add(tasks[3]!, {}),
    ]),
  );
  const removals = sent.filter((c) => c[0] === 'zrem').map((c) => [c[1], ...c.slice(2).sort()]);
  assert.deepEqual(removals.sort(), [
    [schedulerKeys.active('rel-a'), 'task_rela1', 'task_rela2'],
    [schedulerKeys.active('rel-b'), 'task_relb1', 'task_relb2'],
    [schedulerKeys.leases, 'task_rela1', 'task_rela2', 'task_relb1', 'task_relb2'],
  ]);
  // Four ends, one of them failed, in one count each.
  assert.deepEqual(
    sent.filter((c) => c[0] === 'hincrby').map((c) => c.slice(2)),
    [
      [minute, '4'],
      ['model_error', '1'],
    ],
  );
  assert.equal(Number(await h.redis.hget(operatorKeys.throughput, minute)), before + 4);
  for (const t of tasks) assert.equal(await h.redis.zscore(schedulerKeys.leases, t.id), null);
  assert.equal(await h.redis.zcard(schedulerKeys.active('rel-a')), 0);
});

test('a finished task leaves the lease index and its running set', async () => {
  const task = await h.store.create(newTask({ tenant: 'ends' }));
  await h.redis.zadd(schedulerKeys.active(task.tenant), 1, task.id);
  const { attempt } = await h.store.claim(task.id, 'w1', 60_000, { start: true });
  assert.notEqual(await h.redis.zscore(schedulerKeys.leases, task.id), null);
  await h.store.finish(task.id, attempt, { status: 'succeeded', result: { ok: true } });
  assert.equal(await h.redis.zscore(schedulerKeys.leases, task.id), null);
  assert.equal(await h.redis.zscore(schedulerKeys.active(task.tenant), task.id), null);
});

test('a job for a task that ended before its offer landed frees its place under the running cap when refused', async () => {
  // An offer that follows its task's requeue (an answer, a restart, the reconciler) may land after
  // a cancel that ended the task meanwhile and cleaned the scheduler's index: dispatch then picks
  // the ended task into its tenant's running set and queues a job the claim refuses.
  const task = await h.store.create(newTask({ tenant: 'late-offer' }));
  await h.store.cancel(task.id, 'late-offer');
  await h.store.enqueue(task);
  const ready = schedulerKeys.ready('late-offer', task.model);
  assert.deepEqual(await h.redis.zrange(ready, 0, -1), [task.id]);
  // As dispatch.lua does: out of the ready index, into the tenant's running set.
  await h.redis.zrem(ready, task.id);
  await h.redis.zadd(schedulerKeys.active('late-offer'), 1, task.id);
  await assert.rejects(h.store.claim(task.id, 'w1', 60_000), /already cancelled/);
  assert.equal(await h.redis.zscore(schedulerKeys.active('late-offer'), task.id), null);
  assert.equal(await h.redis.zscore(schedulerKeys.leases, task.id), null);
});

/** The commands `h.redis` sends while `fn` runs. */
async function sentBy(fn: () => Promise<unknown>): Promise<string[][]> {
  const sent: string[][] = [];
  const original = h.redis.sendCommand.bind(h.redis);
  h.redis.sendCommand = ((command: { name: string; args: unknown[] }) => {
    sent.push([command.name, ...command.args.map(String)]);
    return original(command as never);
  }) as typeof h.redis.sendCommand;
  try {
    await fn();
  } finally {
    h.redis.sendCommand = original;
  }
  return sent;
}

test('a delete takes every key of an ended task of its tenant, side keys too; one not ended, or not its own, keeps all', async () => {
  const task = await h.store.create(newTask({ kind: 'tool', model: 'tools', onRestart: 'retry' }));
  // Not the channel (no key), nor an idempotent create's mark, which outlives its task (create.lua),
  // nor the webhook outbox: only a hooked task has one, and the relay empties it (docs/webhooks.md).
  const { channel: _channel, created: _created, outbox: _outbox, ...written } = taskKeys(task.id);
  const keys = Object.values(written);
  const run = await h.store.claim(task.id, 'w1', 60_000, { start: true });
  await h.store.append(task.id, run.attempt, [1, 2], [{ type: 'response.output_text.delta', data: {} }]);
  await h.store.requestInput(task.id, run.attempt, { q: { type: 'text' } });
  await h.store.provideInput(task.id, task.tenant, { q: 'yes' });
  assert.equal(await h.redis.exists(...keys), keys.length, 'record, events, inputs and tokens written');
  await assert.rejects(h.store.delete(task.id, task.tenant), { code: 'task_not_deletable' });
  await assert.rejects(h.store.delete(task.id, 'another-tenant'), { code: 'task_not_found' });
  const again = await h.store.claim(task.id, 'w1', 60_000, { start: true });
  await h.store.finish(task.id, again.attempt, { status: 'succeeded', result: { ok: true } });
  await assert.rejects(h.store.delete(task.id, 'another-tenant'), { code: 'task_not_found' });
  assert.equal(await h.redis.exists(...keys), keys.length, 'nothing deleted for another tenant');
  await h.store.delete(task.id, task.tenant);
  assert.equal(await h.redis.exists(...keys), 0);
  assert.equal(await h.store.get(task.id), null);
  await assert.rejects(h.store.delete(task.id, task.tenant), { code: 'task_not_found' });
});
