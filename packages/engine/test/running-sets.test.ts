/**
 * A tenant's running set (`active:<tenant>`, what its concurrency cap counts) holds one place per
 * dispatched task, scored by the attempt its claim starts. Whatever else writes there, or claims
 * in between, the place of an attempt that runs stays, so the tenant never runs over its cap.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { monitorRedis, until } from '@taskline/testing';
import {
  connectRedis,
  defineDispatch,
  handedOver,
  OperatorView,
  TaskStore,
  TasklineError,
  type TaskRecord,
  type TaskStatus,
} from '../src/index.js';
import { schedulerKeys } from '../src/keys.js';
import type { Scripts } from '../src/scripts.js';
import { defaults, dispatchOne, harness, newTask, primaries, type Harness } from './helpers.js';

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

const tick = () => new Promise((r) => setTimeout(r, 5));
const CONFIRM = { method: 'elicitation/create', params: { message: 'Run it?' } };

const dispatch = (model: string, id: string) => dispatchOne(scheduler, model, id);

/**
 * A store of its own (a sweep on another replica) whose first read of `id` (a whole record, or a
 * sweep's few fields) runs `between` right after it, before the caller acts on what it read.
 */
function interleaved(id: string, between: (seen: { status: TaskStatus } | null) => Promise<void>): TaskStore {
  const store = new TaskStore(h.redis, defaults);
  type Read = (id: string) => Promise<{ status: TaskStatus } | null>;
  const core = (store as unknown as { core: Record<'get' | 'peek', Read> }).core;
  let done = false;
  for (const method of ['get', 'peek'] as const) {
    const read = core[method].bind(core);
    core[method] = async (task) => {
      const seen = await read(task);
      if (task === id && !done) {
        done = true;
        await between(seen);
      }
      return seen;
    };
  }
  return store;
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
  let next: TaskRecord | undefined;
  const sweeper = interleaved(task.id, async (seen) => {
    assert.equal(seen?.status, 'input_required');
    await h.store.provideInput(task.id, tenant, { confirm: { action: 'accept' } });
    await dispatch(model, task.id);
    next = await h.store.claim(task.id, 'w2', 60_000, { start: true });
  });
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

/** Where `id` stands in its tenant's running set and ready index. */
async function indexed(tenant: string, model: string, id: string) {
  const [place, ready] = await Promise.all([
    h.redis.zscore(schedulerKeys.active(tenant), id),
    h.redis.zscore(schedulerKeys.ready(tenant, model), id),
  ]);
  return { place: place === null ? null : Number(place), ready: ready !== null };
}

test('a pick the reconciler read queued keeps the place of the attempt its job claimed meanwhile', async () => {
  const [tenant, model] = ['tenant-pick', 'tools-pick'];
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  // Dispatched, its job added, but `handedOver` lost: the pick stays in flight for the reconciler.
  const offered = await dispatch(model, task.id);
  let claimed: TaskRecord | undefined;
  const reconciler = interleaved(task.id, async (seen) => {
    assert.equal(seen?.status, 'queued');
    claimed = await h.store.claim(task.id, 'w1', 60_000, { start: true, offered });
  });
  // Its job is in the queue (it claimed the task).
  await reconciler.reconcileDispatches(0, async () => true);
  assert.equal(claimed?.attempt, task.attempt + 1);
  assert.deepEqual(
    await indexed(tenant, model, task.id),
    { place: claimed!.attempt, ready: false },
    'the running attempt keeps its place under the cap, and a running task is not offered',
  );
  assert.equal(await h.redis.zscore(schedulerKeys.inflight, task.id), null);
});

test('a create the reconciler read queued is not offered again once dispatched and claimed meanwhile', async () => {
  const [tenant, model] = ['tenant-intake', 'tools-intake'];
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  // Its journal entry was left behind (the create's drop of it is not awaited).
  await h.redis.zadd(schedulerKeys.intake, 1, task.id);
  let claimed: TaskRecord | undefined;
  const reconciler = interleaved(task.id, async (seen) => {
    assert.equal(seen?.status, 'queued');
    const offered = await dispatch(model, task.id);
    await handedOver(scheduler, [task.id]);
    claimed = await h.store.claim(task.id, 'w1', 60_000, { start: true, offered });
  });
  const requeued = await reconciler.reconcileIntake(0);
  assert.deepEqual(await indexed(tenant, model, task.id), { place: claimed!.attempt, ready: false });
  assert.deepEqual(requeued, [], 'nothing offered again');
  assert.equal(await h.redis.zscore(schedulerKeys.intake, task.id), null, 'its journal entry is done with');
});

test('the running-set repair does not offer again a task another offer dispatched and claimed after its read', async () => {
  const [tenant, model] = ['tenant-repair', 'tools-repair'];
  const ready = schedulerKeys.ready(tenant, model);
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  // Its offer was lost, and a place of no attempt (score 0) left behind.
  await h.redis.multi().zrem(ready, task.id).hdel(schedulerKeys.offered, task.id).exec();
  await h.redis.zadd(schedulerKeys.active(tenant), 0, task.id);
  await tick();
  // The repair found no job; before it offers the task, another replica's offers it, and it is
  // dispatched and claimed.
  let claimed: TaskRecord | undefined;
  const repaired = await h.store.sweepActive(0, async (seen) => {
    if (seen.id !== task.id) return true;
    await h.store.enqueue(seen);
    const offered = await dispatch(model, task.id);
    await handedOver(scheduler, [task.id]);
    claimed = await h.store.claim(task.id, 'w1', 60_000, { start: true, offered });
    return false;
  });
  assert.equal(repaired, 0);
  assert.deepEqual(await indexed(tenant, model, task.id), { place: claimed!.attempt, ready: false });
});

test('the dispatch reconciler offers again at once a pick whose job was never queued, and leaves one whose job waits', async () => {
  const [tenant, model] = ['tenant-lost', 'tools-lost'];
  const lost = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  const queued = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  // The dispatcher died after both picks, having queued the second one's job only.
  const offered = await dispatch(model, lost.id);
  assert.equal(await dispatch(model, queued.id), offered);
  await tick();
  // While a pick is in flight its job may be on its way: the repair leaves it to the reconciler.
  await h.store.sweepActive(0, async () => false);
  assert.deepEqual(await indexed(tenant, model, lost.id), { place: offered + 1, ready: false });
  await h.store.reconcileDispatches(0, async (task) => task.id === queued.id);
  for (const id of [lost.id, queued.id]) assert.equal(await h.redis.zscore(schedulerKeys.inflight, id), null);
  assert.deepEqual(await indexed(tenant, model, lost.id), { place: null, ready: true }, 'offered again');
  assert.deepEqual(
    await indexed(tenant, model, queued.id),
    { place: offered + 1, ready: false },
    'its job claims it',
  );
  // The lost one's next dispatch places it again, and its job claims it.
  assert.equal(await dispatch(model, lost.id), offered);
  const claimed = await h.store.claim(lost.id, 'w1', 60_000, { start: true, offered });
  assert.deepEqual(await indexed(tenant, model, lost.id), { place: claimed.attempt, ready: false });
});

test("an operator's requeue of a queued task keeps the place of a dispatch claimed after its read", async () => {
  const [tenant, model] = ['tenant-requeue', 'tools-requeue'];
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  // The operator took the task for stuck, but its offer was fine: after the requeue read it (and
  // recorded the requeue), before its offer, the task is dispatched and claimed.
  const store = new TaskStore(h.redis, defaults);
  const offer = store.enqueue.bind(store);
  let claimed: TaskRecord | undefined;
  store.enqueue = async (...args) => {
    const offered = await dispatch(model, task.id);
    await handedOver(scheduler, [task.id]);
    claimed = await h.store.claim(task.id, 'w1', 60_000, { start: true, offered });
    return offer(...args);
  };
  const requeued = await new OperatorView(store).requeue(task.id, 'key:ops');
  assert.equal(requeued.status, 'running');
  assert.deepEqual(
    await indexed(tenant, model, task.id),
    { place: claimed!.attempt, ready: false },
    'the running attempt keeps its place under the cap, and a running task is not offered',
  );
  // A task whose dispatch's job was lost: the requeue drops the place it read, and offers it again.
  const lost = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  await dispatch(model, lost.id);
  await handedOver(scheduler, [lost.id]);
  await new OperatorView(h.store).requeue(lost.id, 'key:ops');
  assert.deepEqual(await indexed(tenant, model, lost.id), { place: null, ready: true });
});

test('an offer from an older read does not replace the newer offer of the task', async () => {
  const [tenant, model] = ['tenant-older', 'tools-older'];
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  // Its journal entry was left behind (the create's drop of it is not awaited).
  await h.redis.zadd(schedulerKeys.intake, 1, task.id);
  let next: TaskRecord | undefined;
  const reconciler = interleaved(task.id, async (seen) => {
    assert.equal(seen?.status, 'queued');
    // Right after the read, the task is dispatched and claimed, and that attempt is lost: the
    // task is queued again and offered in its new state.
    const offered = await dispatch(model, task.id);
    await handedOver(scheduler, [task.id]);
    const first = await h.store.claim(task.id, 'w1', 60_000, { start: true, offered });
    assert.equal((await h.store.restart(task.id, first.attempt))?.status, 'queued');
    next = (await h.store.get(task.id))!;
  });
  assert.deepEqual(await reconciler.reconcileIntake(0), [], 'nothing offered from the older read');
  assert.equal(await h.redis.hget(schedulerKeys.offered, task.id), `${next!.attempt}:${next!.seq}`);
  assert.equal(await h.redis.zscore(schedulerKeys.intake, task.id), null, 'its journal entry is done with');
  // The newer offer's job claims the task.
  const current = await dispatch(model, task.id);
  assert.equal(current, next!.attempt);
  const claimed = await h.store.claim(task.id, 'w2', 60_000, { start: true, offered: current });
  assert.equal(claimed.attempt, next!.attempt + 1);
});

test('a refused claim leaves the lease index and the running sets as it found them', async () => {
  const [tenant, model] = ['tenant-refused', 'tools-refused'];
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  const offered = await dispatch(model, task.id);
  const first = await h.store.claim(task.id, 'w1', 1000, { start: true, offered });
  const state = () =>
    Promise.all([
      h.redis.zscore(schedulerKeys.leases, task.id),
      h.redis.zrange(schedulerKeys.active(tenant), 0, -1, 'WITHSCORES'),
    ]);
  const refused = async (code: string, job: { offered?: number } = { offered }) => {
    const before = await state();
    await assert.rejects(
      h.store.claim(task.id, 'w2', 60_000, { start: true, ...job }),
      (e) => e instanceof TasklineError && e.code === code,
    );
    assert.deepEqual(await state(), before, `a claim refused with ${code} moves nothing`);
  };
  // A second job of the offer w1 claimed is stale; one that names no offer finds the task taken.
  // Either way the lease entry stays w1's.
  await refused('stale_attempt');
  await refused('illegal_transition', {});
  // That attempt is lost and the task queued and offered again: a job of the older offer is
  // stale, whether the lease index still lists the task or the lease sweep dropped it.
  assert.equal((await h.store.restart(task.id, first.attempt))?.status, 'queued');
  await refused('stale_attempt');
  await h.redis.zrem(schedulerKeys.leases, task.id);
  await refused('stale_attempt');
  // So, too, once the current offer's attempt runs.
  const current = await dispatch(model, task.id);
  await h.store.claim(task.id, 'w3', 60_000, { start: true, offered: current });
  await refused('stale_attempt');
});

test('a refused claim takes back its lease entry only while no claim that went through since may hold it', async () => {
  const [tenant, model] = ['tenant-took', 'tools-took'];
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model, onRestart: 'retry' }));
  const offered = await dispatch(model, task.id);
  const first = await h.store.claim(task.id, 'w1', 60_000, { start: true, offered });
  assert.equal((await h.store.restart(task.id, first.attempt))?.status, 'queued');
  await h.redis.zrem(schedulerKeys.leases, task.id); // as the lease sweep drops it
  const [stale, current] = [0, 1].map(() => new TaskStore(h.redis, defaults));
  // Right after a job of the older offer is refused, the current offer's job claims the task.
  const scripts = (stale as unknown as { core: { scripts: Scripts } }).core.scripts;
  const claim = scripts.claim;
  let claimed: TaskRecord | undefined;
  let written: string | null = null;
  scripts.claim = async (...args) => {
    const reply = await claim(...args);
    written = await h.redis.zscore(schedulerKeys.leases, task.id);
    const job = await dispatch(model, task.id);
    claimed = await current!.claim(task.id, 'w3', 60_000, { start: true, offered: job });
    // Both claims in the same ms of Redis's clock (it stamps deadlines): their entries are alike.
    await h.redis.zadd(schedulerKeys.leases, written!, task.id);
    return reply;
  };
  await assert.rejects(
    stale!.claim(task.id, 'w2', 60_000, { start: true, offered }),
    (e) => e instanceof TasklineError && e.code === 'stale_attempt',
  );
  assert.equal(claimed?.attempt, first.attempt + 1);
  assert.equal(
    await h.redis.zscore(schedulerKeys.leases, task.id),
    written,
    'the running attempt has its lease entry, for the sweep should its worker die',
  );
});

test('the running-set repair reads the few fields it needs of each task, never a whole record', async () => {
  const [tenant, model] = ['tenant-fields', 'tools-fields'];
  const active = schedulerKeys.active(tenant);
  // A record as large as a create allows: the repair runs every sweep interval over every place.
  const big = { model, input: 'x'.repeat(200_000) };
  const ended = await h.store.create(newTask({ tenant, model, request: big }));
  const waiting = await h.store.create(newTask({ tenant, model, request: big }));
  await h.store.cancel(ended.id, tenant);
  await h.redis.zadd(active, 1, ended.id, 1, waiting.id);
  // Every primary, on a cluster (test:cluster): the two records may sit on any of them.
  const nodes = await primaries(h.redis);
  const commands: string[][] = [];
  const monitors = nodes.map((n) =>
    monitorRedis(`redis://${n.options.host}:${n.options.port}`, (args) => commands.push(args)),
  );
  try {
    await Promise.all(monitors.map((m) => m.ready));
    assert.equal(await h.store.sweepActive(60_000, async () => true), 1, "the ended task's place goes");
    // A marker through every node's own connection: each monitor has seen the sweep once it sees it.
    await Promise.all(nodes.map((n) => n.echo('marker:swept')));
    await until("the sweep's commands", () =>
      commands.filter((c) => c[1] === 'marker:swept').length === nodes.length ? true : undefined,
    );
  } finally {
    for (const m of monitors) m.stop();
  }
  const reads = commands.filter((c) => c[1]?.endsWith(`}:task`)).map((c) => c[0]!.toUpperCase());
  assert.ok(reads.length >= 2, `both tasks were read (${reads.join(' ')})`);
  assert.deepEqual(
    reads.filter((c) => c !== 'HMGET'),
    [],
    'field reads only',
  );
  assert.deepEqual(await h.redis.zrange(active, 0, -1), [waiting.id]);
});
