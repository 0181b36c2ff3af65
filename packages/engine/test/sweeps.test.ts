/**
 * The sweeps walk their index oldest first, and a task they cannot handle keeps its entry: it is
 * due first again next time. One such task (here, an event log of the wrong type, so its script
 * refuses) must not stop a sweep there, or no task after it is ever swept.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TasklineError } from '../src/index.js';
import { schedulerKeys, taskKeys } from '../src/keys.js';
import { harness, newTask, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness({ inputTimeoutMs: 1 })));
after(() => h.close());

const tick = () => new Promise((r) => setTimeout(r, 5));

async function breakLog(id: string): Promise<void> {
  await h.redis.del(taskKeys(id).events);
  await h.redis.set(taskKeys(id).events, 'not a stream');
}

/** Collects what a sweep reports it could not do. */
function reports() {
  const failed: string[] = [];
  return { failed, hook: (id: string, err: unknown) => failed.push(`${id} ${(err as TasklineError).code}`) };
}

const internal = (err: unknown) => err instanceof TasklineError && err.code === 'internal_error';

test('a lapsed lease the sweep cannot recover neither stops it nor hides the leases after it', async () => {
  const stuck = await h.store.create(newTask());
  await h.store.claim(stuck.id, 'dead', 1);
  await breakLog(stuck.id);
  await tick();
  const lost = await h.store.create(newTask());
  await h.store.claim(lost.id, 'dead', 1);
  await tick();

  const { failed, hook } = reports();
  const recovered = await h.store.sweepLeases(undefined, hook);
  assert.deepEqual(
    recovered.map((r) => [r.id, r.status]),
    [[lost.id, 'failed']],
  );
  assert.deepEqual(failed, [`${stuck.id} internal_error`]);
  assert.ok(await h.redis.zscore(schedulerKeys.leases, stuck.id), 'kept for the next sweep');
  // Nobody told: the sweep still says so, once the others had their turn.
  await assert.rejects(h.store.sweepLeases(), internal);
  await h.redis.zrem(schedulerKeys.leases, stuck.id);
});

test('a parked task the input deadline sweep cannot fail does not keep the others waiting', async () => {
  const parked = [];
  for (let i = 0; i < 2; i++) {
    const task = await h.store.create(newTask({ kind: 'tool', model: 'tools' }));
    const { attempt } = await h.store.claim(task.id, 'w1', 60_000, { start: true });
    await h.store.requestInput(task.id, attempt, { confirm: { type: 'confirm' } });
    parked.push(task.id);
    await tick();
  }
  await breakLog(parked[0]!);

  const { failed, hook } = reports();
  assert.deepEqual(await h.store.sweepInputDeadlines(undefined, hook), [parked[1]]);
  assert.deepEqual(failed, [`${parked[0]} internal_error`]);
  assert.equal((await h.store.get(parked[1]!))?.error?.code, 'input_timeout');
  await assert.rejects(h.store.sweepInputDeadlines(), internal);
  await h.redis.zrem(schedulerKeys.parked, parked[0]!);
});

test('a journalled create the reconciler cannot offer does not hold back the creates after it', async () => {
  const stuck = await h.store.create(newTask({ tenant: 'tenant-x' }));
  const lost = await h.store.create(newTask({ tenant: 'tenant-y' }));
  // Both never reached the ready index; tenant-x's index key holds something else.
  await h.redis.del(
    schedulerKeys.ready('tenant-x', 'tiny-chat'),
    schedulerKeys.ready('tenant-y', 'tiny-chat'),
  );
  await h.redis.set(schedulerKeys.ready('tenant-x', 'tiny-chat'), 'not a zset');
  await h.redis.zadd(schedulerKeys.intake, 1, stuck.id, 2, lost.id);

  const { failed, hook } = reports();
  assert.deepEqual(await h.store.reconcileIntake(0, undefined, hook), [lost.id]);
  assert.deepEqual(failed, [`${stuck.id} internal_error`]);
  assert.ok(
    await h.redis.zscore(schedulerKeys.ready('tenant-y', 'tiny-chat'), lost.id),
    "await h.redis.zscore(schedulerKeys.ready('tenant-y', 'tiny-chat'), lost.id)",
  );
  await assert.rejects(h.store.reconcileIntake(0), internal);

  // Picks whose dispatch died: the same.
  await h.redis.zadd(schedulerKeys.inflight, 1, stuck.id, 2, lost.id);
  await h.redis.zrem(schedulerKeys.ready('tenant-y', 'tiny-chat'), lost.id);
  const dispatches = reports();
  await h.store.reconcileDispatches(0, async () => false, undefined, dispatches.hook);
  assert.deepEqual(dispatches.failed, [`${stuck.id} internal_error`]);
  assert.ok(
    await h.redis.zscore(schedulerKeys.ready('tenant-y', 'tiny-chat'), lost.id),
    "await h.redis.zscore(schedulerKeys.ready('tenant-y', 'tiny-chat'), lost.id)",
  );
  assert.ok(await h.redis.zscore(schedulerKeys.inflight, stuck.id), 'kept for the next round');
  await h.redis.del(
    schedulerKeys.ready('tenant-x', 'tiny-chat'),
    schedulerKeys.inflight,
    schedulerKeys.intake,
  );
});

test('a running-set entry the repair cannot offer again does not keep the entries after it', async () => {
  const stuck = await h.store.create(newTask({ tenant: 'tenant-z' }));
  const ended = await h.store.create(newTask({ tenant: 'tenant-z' }));
  await h.store.cancel(ended.id, 'tenant-z');
  const running = schedulerKeys.active('tenant-z');
  // The queued task lost its job and its offer; its tenant's ready index holds something else.
  await h.redis.zadd(running, 1, stuck.id, 2, ended.id);
  await h.redis.del(schedulerKeys.ready('tenant-z', 'tiny-chat'));
  await h.redis.set(schedulerKeys.ready('tenant-z', 'tiny-chat'), 'not a zset');
  await tick();

  const { failed, hook } = reports();
  assert.equal(await h.store.sweepActive(0, async () => false, hook), 1);
  assert.deepEqual(failed, [`${stuck.id} undefined`], 'its ready index answers WRONGTYPE');
  assert.deepEqual(await h.redis.zrange(running, 0, -1), [stuck.id]);
  await assert.rejects(
    h.store.sweepActive(0, async () => false),
    /WRONGTYPE/,
  );
});
