/**
 * A tenant's running set (`active:<tenant>`, what its concurrency cap counts) holds one place per
 * dispatched task, scored by the attempt its claim starts. Whatever else writes there, or claims
 * in between, the place of an attempt that runs stays, so the tenant never runs over its cap.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  connectRedis,
  defineDispatch,
  pickFair,
  TaskStore,
  TasklineError,
  type TaskRecord,
} from '../src/index.js';
import { schedulerKeys } from '../src/keys.js';
import { defaults, harness, newTask, type Harness } from './helpers.js';

let h: Harness;
let scheduler: ReturnType<typeof connectRedis>;
before(async () => {
  h = await harness({ inputTimeoutMs: 60_000 });
  scheduler = connectRedis(h.server.url, 'scheduler');
  defineDispatch(scheduler);
  await h.redis.set(schedulerKeys.leader, 'lead');
});
after(async () => {
  scheduler.disconnect();
  await h.close();
});

const CONFIRM = { method: 'elicitation/create', params: { message: 'Run it?' } };

/** One dispatch round of `model` (dispatch.lua) that picks `id`; returns the attempt its job was offered for. */
async function dispatch(model: string, id: string): Promise<number> {
  const picks = await pickFair(scheduler, 'lead', model, 1, {
    quantum: 1,
    maxRunning: 10,
    weights: new Map(),
  });
  assert.deepEqual(
    picks?.map((p) => p.id),
    [id],
  );
  return picks![0]!.state!.attempt;
}

test('the retention sweep keeps the place of an attempt claimed after it read the task parked', async () => {
  const [tenant, model] = ['tenant-sweep', 'tools-sweep'];
  const active = schedulerKeys.active(tenant);
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  await dispatch(model, task.id);
  const first = await h.store.claim(task.id, 'w1', 60_000, { start: true });
  assert.equal((await h.store.requestInput(task.id, first.attempt, { confirm: CONFIRM })).parked, true);
  // The asking worker died between its park and park_unindex: its place is left to the sweep.
  await h.redis.zadd(active, first.attempt, task.id);

  // Right after the sweep read the task parked, the answer queues it, and its next attempt is
  // dispatched and claimed under the same id.
  const sweeper = new TaskStore(h.redis, defaults);
  const core = (sweeper as unknown as { core: { get(id: string): Promise<TaskRecord | null> } }).core;
  const read = core.get.bind(core);
  let next: TaskRecord | undefined;
  core.get = async (id) => {
    const seen = await read(id);
    if (id === task.id && !next) {
      assert.equal(seen?.status, 'input_required');
      await h.store.provideInput(task.id, tenant, { confirm: { action: 'accept' } });
      await dispatch(model, task.id);
      next = await h.store.claim(task.id, 'w2', 60_000, { start: true });
    }
    return seen;
  };
  const dropped = await sweeper.sweepActive(60_000, async () => true);
  assert.equal(next?.attempt, first.attempt + 1);
  assert.equal(
    Number(await h.redis.zscore(active, task.id)),
    next?.attempt,
    'the running attempt keeps its place under the cap',
  );
  assert.equal(dropped, 0, 'nothing of its own to drop');
  // A place the sweep read is dropped as before.
  await h.store.finish(task.id, next!.attempt, { status: 'succeeded', result: null });
  await h.redis.zadd(active, next!.attempt, task.id);
  assert.equal(await h.store.sweepActive(60_000, async () => true), 1);
  assert.equal(await h.redis.zscore(active, task.id), null);
});

test('a job of an older offer claims nothing: the task waits for the job of its current one', async () => {
  const [tenant, model] = ['tenant-stale', 'tools-stale'];
  const active = schedulerKeys.active(tenant);
  const ready = schedulerKeys.ready(tenant, model);
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  // Two jobs of the first offer (a re-offer while the first job waited): one claims, the other waits on.
  const offered = await dispatch(model, task.id);
  const first = await h.store.claim(task.id, 'w1', 60_000, { start: true, offered });
  // That attempt is lost (its worker drained): the task is queued and offered again.
  assert.equal((await h.store.restart(task.id, first.attempt))?.status, 'queued');
  assert.notEqual(await h.redis.zscore(ready, task.id), null);

  const stale = await h.store.claim(task.id, 'w-stale', 60_000, { start: true, offered }).then(
    (claimed) => claimed,
    (err: unknown) => err,
  );
  const now = (await h.store.get(task.id))!;
  // An attempt that runs holds its place under its tenant's cap; a queued task waits in the ready index.
  if (now.status !== 'queued')
    assert.equal(
      await h.redis.zscore(active, task.id),
      String(now.attempt),
      'a running attempt has its place',
    );
  assert.ok(stale instanceof TasklineError && stale.code === 'stale_attempt', `refused: ${String(stale)}`);
  assert.equal(now.status, 'queued');
  assert.equal(now.attempt, first.attempt);
  assert.notEqual(await h.redis.zscore(ready, task.id), null, 'still offered');

  // The current offer's job claims it, and its place is its attempt's.
  const current = await dispatch(model, task.id);
  assert.equal(current, first.attempt);
  const next = await h.store.claim(task.id, 'w2', 60_000, { start: true, offered: current });
  assert.equal(next.attempt, first.attempt + 1);
  assert.equal(Number(await h.redis.zscore(active, task.id)), next.attempt);
});
