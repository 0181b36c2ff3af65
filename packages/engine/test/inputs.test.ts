/**
 * Tasks waiting for their caller's input (MCP tool tasks): only the current attempt's questions
 * count; a waiting task is parked (no lease, no place in the tenant's running set) and resumes
 * under a new attempt once answered; an unanswered one fails at its input deadline.
 */
import assert from 'node:assert/strict';
import { after, before, mock, test } from 'node:test';
import {
  connectRedis,
  defineDispatch,
  TaskStore,
  TasklineError,
  visibleStepViolation,
  type TaskRecord,
  type TaskStatus,
} from '../src/index.js';
import { schedulerKeys, taskKeys } from '../src/keys.js';
import type { Scripts } from '../src/scripts.js';
import { defaults, dispatchOne, harness, newTask, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness({ inputTimeoutMs: 60_000 })));
after(() => h.close());

const code = (c: string) => (err: unknown) => err instanceof TasklineError && err.code === c;
const CONFIRM = { method: 'elicitation/create', params: { message: 'Run it?' } };

/** A tool task claimed and running under attempt 1, and listed where dispatch would list it. */
async function runningTool(tenant = 'tenant-a') {
  const task = await h.store.create(newTask({ tenant, kind: 'tool', model: 'tools', onRestart: 'retry' }));
  // As dispatch.lua does: out of the ready index, into the tenant's running set under the
  // attempt its claim starts.
  await h.redis.zrem(schedulerKeys.ready(tenant, 'tools'), task.id);
  await h.redis.zadd(schedulerKeys.active(tenant), task.attempt + 1, task.id);
  const claimed = await h.store.claim(task.id, 'w1', 60_000, { start: true });
  return claimed;
}

test('only the current attempt’s questions count: a leftover question keeps no task waiting', async () => {
  const task = await runningTool();
  // A question an earlier, lost attempt asked; this attempt never asks it again.
  await h.redis.hset(taskKeys(task.id).inputs, 'q:old', JSON.stringify(CONFIRM));
  const asked = await h.store.requestInput(task.id, task.attempt, { confirm: CONFIRM });
  assert.equal(asked.waiting, true);
  assert.deepEqual(Object.keys(await h.store.openInputRequests(task.id)), ['confirm']);
  const { status } = await h.store.provideInput(task.id, 'tenant-a', { confirm: { action: 'accept' } });
  assert.equal(status, 'running');
});

test('a task waiting for input is parked: no lease, out of the running set, its old attempt fenced', async () => {
  const task = await runningTool();
  const { waiting } = await h.store.requestInput(task.id, task.attempt, { confirm: CONFIRM });
  assert.equal(waiting, true);
  const parked = await h.store.get(task.id);
  assert.equal(parked?.status, 'input_required');
  assert.equal(parked?.leaseUntil, null);
  assert.equal(parked?.leaseOwner, null);
  assert.equal(await h.redis.zscore(schedulerKeys.active('tenant-a'), task.id), null);
  assert.equal(await h.redis.zscore(schedulerKeys.leases, task.id), null);
  assert.ok(
    Number(await h.redis.zscore(schedulerKeys.parked, task.id)) > Date.now(),
    'Number(await h.redis.zscore(schedulerKeys.parked, task.id)) > Date.now()',
  );
  assert.equal(await h.store.parkedCount(), 1);
  // The attempt that asked holds the task no more: its renewals and writes are refused.
  await assert.rejects(h.store.renew(task.id, task.attempt, 60_000), code('stale_attempt'));
  await assert.rejects(h.store.progress(task.id, task.attempt, 'still here'), code('stale_attempt'));
  // No lease: the recovery sweep has nothing to apply its on_restart policy to.
  assert.equal(await h.store.recover(task.id, 3_600_000), null);

  // The answer resumes it: `running` to readers at once, offered again, claimed by a new attempt.
  const { status } = await h.store.provideInput(task.id, 'tenant-a', { confirm: { action: 'accept' } });
  assert.equal(status, 'running');
  assert.equal(await h.redis.zscore(schedulerKeys.parked, task.id), null);
  assert.notEqual(await h.redis.zscore(schedulerKeys.ready('tenant-a', 'tools'), task.id), null);
  // Queued for the next attempt: the one that asked may not write.
  await assert.rejects(
    h.store.append(task.id, task.attempt, [], [{ type: 'x', data: {} }]),
    (err) => code('stale_attempt')(err) || code('illegal_transition')(err),
  );
  assert.equal((await h.store.get(task.id))?.shownStatus, 'running');
  const resumed = await h.store.claim(task.id, 'w2', 60_000, { start: true });
  assert.equal(resumed.attempt, task.attempt + 1);
  assert.equal(resumed.status, 'running');
  assert.equal(resumed.leaseOwner, 'w2');
  // The new attempt replays the answer instead of asking again.
  const again = await h.store.requestInput(task.id, resumed.attempt, { confirm: CONFIRM });
  assert.deepEqual(again, { waiting: false, parked: false, answers: { confirm: { action: 'accept' } } });
  assert.equal(await h.redis.zscore(schedulerKeys.parked, task.id), null, 'nothing parked, nothing indexed');
  const statuses = (await h.store.events(task.id, 0)).events.map(
    (e) => (JSON.parse(e.data) as { task_status?: string }).task_status,
  );
  // The visible status never steps back: no `queued` or `loading` after the first claim, and the
  // new attempt's claim writes no status event (its clients see it running since the answer).
  assert.deepEqual(statuses, ['queued', 'loading', 'running', 'input_required', 'running']);
});

/** The script runners of `store`, to hold a step back or fail it where a test needs to. */
const scriptsOf = (store: TaskStore) => (store as unknown as { core: { scripts: Scripts } }).core.scripts;

test('a park frees only its own attempt’s entries even when the next attempt was dispatched and claimed in the same millisecond', async () => {
  // Every step at one instant: both dispatches score the running set alike, and both claims, with
  // the same lease, write the same deadline (Redis's clock stamps it: written below as it would be).
  const at = Date.now();
  const clock = mock.method(Date, 'now', () => at);
  const model = 'tools-same-ms';
  const active = schedulerKeys.active('tenant-m');
  const store = new TaskStore(h.redis, { ...defaults, inputTimeoutMs: 60_000, now: () => at });
  const scheduler = connectRedis(h.server.url, 'scheduler');
  defineDispatch(scheduler);
  await h.redis.set(schedulerKeys.leader, 'lead');
  const dispatch = (id: string) => dispatchOne(scheduler, model, id);
  const redis = connectRedis(h.server.url, 'stalled-worker');
  try {
    const task = await store.create(newTask({ tenant: 'tenant-m', kind: 'tool', model, onRestart: 'retry' }));
    await dispatch(task.id);
    const first = await store.claim(task.id, 'w1', 60_000, { start: true });
    // The asking worker stalls right after its park; the answer resumes the task, which is
    // dispatched and claimed for its next attempt before the worker frees what it held.
    const worker = new TaskStore(redis, { ...defaults, inputTimeoutMs: 60_000, now: () => at });
    const park = scriptsOf(worker).request_input;
    let next: TaskRecord | undefined;
    scriptsOf(worker).request_input = async (...args) => {
      const reply = await park(...args);
      await store.provideInput(task.id, 'tenant-m', { confirm: { action: 'accept' } });
      await dispatch(task.id);
      next = await store.claim(task.id, 'w2', 60_000, { start: true });
      // Claimed in the same millisecond of Redis's clock as the first: its deadline and entry.
      await h.redis.hset(taskKeys(task.id).task, 'lease_until', first.leaseUntil!);
      await h.redis.zadd(schedulerKeys.leases, first.leaseUntil!, task.id);
      next = (await store.get(task.id))!;
      return reply;
    };
    assert.equal((await worker.requestInput(task.id, first.attempt, { confirm: CONFIRM })).parked, true);
    assert.equal(next?.attempt, first.attempt + 1);
    assert.equal(next?.leaseUntil, first.leaseUntil, 'the same deadline');
    // The running attempt keeps its place under the tenant's cap and the lease the sweep recovers it by.
    assert.notEqual(await h.redis.zscore(active, task.id), null, 'running place');
    assert.equal(
      Number(await h.redis.zscore(schedulerKeys.leases, task.id)),
      next?.leaseUntil,
      'lease entry',
    );
  } finally {
    clock.mock.restore();
    redis.disconnect();
    scheduler.disconnect();
  }
});

test('an answer that resumes a task parked after the answer read it leaves a journal entry when the offer fails', async () => {
  const task = await runningTool('tenant-j');
  // The api read the task running; the attempt parks before the answer's script runs; the offer
  // after it is lost (a dropped connection).
  const api = new TaskStore(h.redis, { ...defaults, inputTimeoutMs: 60_000 });
  const answer = scriptsOf(api).provide_input;
  scriptsOf(api).provide_input = async (...args) => {
    assert.equal((await h.store.requestInput(task.id, task.attempt, { confirm: CONFIRM })).parked, true);
    return answer(...args);
  };
  scriptsOf(api).enqueue = () => Promise.reject(new Error('Connection is closed.'));
  await assert.rejects(api.provideInput(task.id, 'tenant-j', { confirm: { action: 'accept' } }), /closed/);
  assert.equal((await h.store.get(task.id))?.status, 'queued');
  assert.equal(await h.redis.zscore(schedulerKeys.ready('tenant-j', 'tools'), task.id), null);
  // The reconciler finds it in the journal and offers it.
  assert.deepEqual(await h.store.reconcileIntake(0), [task.id]);
  assert.notEqual(await h.redis.zscore(schedulerKeys.ready('tenant-j', 'tools'), task.id), null);
});

test('two answers at once, the resuming one’s offer lost: the other leaves the journal entry the reconciler offers from', async () => {
  // The answer that resumes nothing runs whole inside the resuming one's steps: before its script
  // (its partial answer, read parked), or between its script and its offer (read queued).
  for (const between of ['script', 'offer'] as const) {
    const tenant = `tenant-two-${between}`;
    const task = await runningTool(tenant);
    assert.equal(
      (await h.store.requestInput(task.id, task.attempt, { a: CONFIRM, b: CONFIRM })).parked,
      true,
    );
    const other = async () => {
      assert.equal(
        (await h.store.provideInput(task.id, tenant, { a: 1 })).accepted,
        between === 'script' ? 1 : 0,
      );
    };
    const api = new TaskStore(h.redis, { ...defaults, inputTimeoutMs: 60_000 });
    const answer = scriptsOf(api).provide_input;
    scriptsOf(api).provide_input = async (...args) => {
      if (between === 'script') await other();
      return answer(...args);
    };
    scriptsOf(api).enqueue = async () => {
      if (between === 'offer') await other();
      throw new Error('Connection is closed.');
    };
    await assert.rejects(api.provideInput(task.id, tenant, { a: 1, b: 2 }), /closed/);
    assert.equal((await h.store.get(task.id))?.status, 'queued');
    assert.equal(await h.redis.zscore(schedulerKeys.ready(tenant, 'tools'), task.id), null);
    // Nothing else offers a task parked out of every running set: without the entry it is stranded.
    assert.ok((await h.store.reconcileIntake(0)).includes(task.id), `answered ${between}: offered again`);
    assert.notEqual(await h.redis.zscore(schedulerKeys.ready(tenant, 'tools'), task.id), null);
  }
});

test('the reconciler keeps a journal entry that an answer wrote again after its read', async () => {
  const task = await runningTool('tenant-r');
  assert.equal((await h.store.requestInput(task.id, task.attempt, { confirm: CONFIRM })).parked, true);
  // Left over from an earlier answer (one whose drop was lost), so the reconciler visits the task.
  await h.redis.zadd(schedulerKeys.intake, 1, task.id);
  // Between the reconciler's read (parked, nothing to offer) and its drop, an answer resumes the
  // task, and the offer after it is lost (a dropped connection).
  const api = new TaskStore(h.redis, { ...defaults, inputTimeoutMs: 60_000 });
  scriptsOf(api).enqueue = () => Promise.reject(new Error('Connection is closed.'));
  const reconciler = new TaskStore(h.redis, defaults);
  const core = (reconciler as unknown as { core: { get: TaskStore['get'] } }).core;
  const read = core.get.bind(core);
  core.get = async (id, tenant) => {
    const seen = await read(id, tenant);
    await assert.rejects(api.provideInput(task.id, 'tenant-r', { confirm: { action: 'accept' } }), /closed/);
    return seen;
  };
  assert.deepEqual(await reconciler.reconcileIntake(1000), []);
  assert.equal((await h.store.get(task.id))?.status, 'queued');
  // Its next round finds the answer's entry and offers the task.
  assert.notEqual(await h.redis.zscore(schedulerKeys.intake, task.id), null);
  assert.deepEqual(await h.store.reconcileIntake(0), [task.id]);
});

test('an ask refused to an attempt that lost the task leaves the parked entry of the attempt that parked it', async () => {
  const task = await runningTool('tenant-s');
  // The first attempt's lease lapsed: restarted (on_restart retry), claimed and parked by the next.
  assert.equal(await h.store.recover(task.id, 3_600_000), 'queued');
  const next = await h.store.claim(task.id, 'w2', 60_000, { start: true });
  assert.equal((await h.store.requestInput(task.id, next.attempt, { confirm: CONFIRM })).parked, true);
  const deadline = await h.redis.zscore(schedulerKeys.parked, task.id);
  // The first attempt, back from its pause, asks too.
  await assert.rejects(
    h.store.requestInput(task.id, task.attempt, { other: CONFIRM }),
    code('stale_attempt'),
  );
  // The deadline sweep still finds the parked task, at its own deadline.
  assert.equal(await h.redis.zscore(schedulerKeys.parked, task.id), deadline);
});

test('a partial answer keeps the task parked; the last one resumes it', async () => {
  const task = await runningTool();
  await h.store.requestInput(task.id, task.attempt, { a: CONFIRM, b: CONFIRM });
  const partial = await h.store.provideInput(task.id, 'tenant-a', { a: 1 });
  assert.deepEqual(partial, { accepted: 1, status: 'input_required' });
  // Nothing to offer: the reconciler drops the answer's journal entry (another answer may need it).
  assert.ok(
    !(await h.store.reconcileIntake(0)).includes(task.id),
    '!(await h.store.reconcileIntake(0)).includes(task.id)',
  );
  assert.equal(await h.redis.zscore(schedulerKeys.intake, task.id), null);
  assert.deepEqual(Object.keys(await h.store.openInputRequests(task.id)), ['b']);
  assert.equal(await h.redis.zscore(schedulerKeys.ready('tenant-a', 'tools'), task.id), null);
  const last = await h.store.provideInput(task.id, 'tenant-a', { b: 2 });
  assert.deepEqual(last, { accepted: 1, status: 'running' });
  assert.notEqual(await h.redis.zscore(schedulerKeys.ready('tenant-a', 'tools'), task.id), null);
});

test('cancelling a parked task ends it at once: no worker holds it to acknowledge', async () => {
  const task = await runningTool();
  await h.store.requestInput(task.id, task.attempt, { confirm: CONFIRM });
  const { outcome, task: after } = await h.store.cancel(task.id, 'tenant-a');
  assert.equal(outcome, 'cancelled');
  assert.equal(after.status, 'cancelled');
  assert.equal(await h.redis.zscore(schedulerKeys.parked, task.id), null);
  assert.ok((await h.redis.pttl(taskKeys(task.id).inputs)) > 0, 'its questions expire with it');
  // Its clients saw it input_required: they see it go through cancelling (LMSP 7.2, the MCP view).
  const statuses = (await h.store.events(task.id, 0)).events
    .map((e) => (JSON.parse(e.data) as { task_status?: TaskStatus }).task_status)
    .filter((s): s is TaskStatus => s !== undefined);
  assert.deepEqual(statuses.slice(-3), ['input_required', 'cancelling', 'cancelled']);
  assert.equal(visibleStepViolation(statuses), null);
});

test('an unanswered task fails at its input deadline with input_timeout', async () => {
  // The store's clock, moved by the test: a loaded host's pauses cannot pass the deadline early.
  let at = Date.now();
  const short = await harness({ inputTimeoutMs: 150, now: () => at });
  try {
    const task = await short.store.create(newTask({ kind: 'tool', model: 'tools' }));
    const claimed = await short.store.claim(task.id, 'w1', 60_000, { start: true });
    await short.store.requestInput(task.id, claimed.attempt, { confirm: CONFIRM });
    at += 149;
    assert.deepEqual(await short.store.sweepInputDeadlines(), [], 'not before its deadline');
    at += 1;
    assert.deepEqual(await short.store.sweepInputDeadlines(), [task.id]);
    const ended = await short.store.get(task.id);
    assert.equal(ended?.status, 'failed');
    assert.equal(ended?.error?.code, 'input_timeout');
    assert.ok((await short.redis.pttl(taskKeys(task.id).inputs)) > 0, 'its questions expire with it');
    assert.equal(await short.store.parkedCount(), 0);
    // An answer after the deadline changes nothing.
    const late = await short.store.provideInput(task.id, 'tenant-a', { confirm: true });
    assert.deepEqual(late, { accepted: 0, status: 'failed' });
  } finally {
    await short.close();
  }
});

test('an answer that lands first wins over the input deadline', async () => {
  const short = await harness({ inputTimeoutMs: 1 });
  try {
    const task = await short.store.create(newTask({ kind: 'tool', model: 'tools' }));
    const claimed = await short.store.claim(task.id, 'w1', 60_000, { start: true });
    await short.store.requestInput(task.id, claimed.attempt, { confirm: CONFIRM });
    await short.store.provideInput(task.id, 'tenant-a', { confirm: true });
    assert.deepEqual(await short.store.sweepInputDeadlines(), []);
    assert.equal((await short.store.get(task.id))?.shownStatus, 'running');
  } finally {
    await short.close();
  }
});
