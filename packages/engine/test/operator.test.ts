import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { indexToolTask, OperatorView, problem, TasklineError } from '../src/index.js';
import { operatorKeys, taskKeys, toolTaskIndex, toolTaskOpen, toolTaskTenants } from '../src/keys.js';
import { minuteOf } from '../src/operator-index.js';
import { defaults, harness, newTask, until, type Harness } from './helpers.js';

let h: Harness;
let clock = 1_000_000;
before(async () => (h = await harness({ now: () => clock, operatorIndexMax: 100 })));
after(() => h.close());

const view = () => new OperatorView(h.store, () => clock);

test('the operator index pages a tenant newest first, tasks of one ms neither skipped nor repeated', async () => {
  const ids: string[] = [];
  // Three tasks in each of four ms: pages of two cut through ties.
  for (let ms = 0; ms < 4; ms++) {
    clock = 2_000_000 + ms;
    for (let i = 0; i < 3; i++) ids.push((await h.store.create(newTask({ tenant: 'pager' }))).id);
  }
  await h.store.create(newTask({ tenant: 'other' }));
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 20; pages++) {
    const page = await view().tasks('pager', {}, 2, cursor);
    seen.push(...page.rows.map((r) => r.id));
    if (!page.next) break;
    cursor = page.next;
  }
  assert.equal(seen.length, ids.length);
  assert.deepEqual(new Set(seen), new Set(ids));
  const created = await Promise.all(seen.map(async (id) => (await h.store.get(id))!.createdAt));
  assert.deepEqual(
    created,
    [...created].sort((a, b) => b - a),
    'newest first',
  );
  assert.deepEqual((await view().recentTenants(60_000, 10)).map((t) => t.tenant).sort(), ['other', 'pager']);
});

test('filters by status; an expired task drops out of the index as it is read', async () => {
  clock = 3_000_000;
  const done = await h.store.create(newTask({ tenant: 'filters' }));
  const open = await h.store.create(newTask({ tenant: 'filters' }));
  await h.store.cancel(done.id, 'filters');
  const cancelled = await view().tasks('filters', { status: 'cancelled' }, 10);
  assert.deepEqual(
    cancelled.rows.map((r) => r.id),
    [done.id],
  );
  // Expired by Redis (its own clock): gone from Redis is what expired means to a reader.
  await h.redis.del(taskKeys(done.id).task);
  const all = await view().tasks('filters', {}, 10);
  assert.deepEqual(
    all.rows.map((r) => r.id),
    [open.id],
  );
  assert.equal(await h.redis.zscore(operatorKeys.tasks('filters'), done.id), null);
});

test("the listing keeps a task Redis still keeps, whatever the reader's clock says of its expires_at", async () => {
  clock = 3_500_000;
  const done = await h.store.create(newTask({ tenant: 'skewed' }));
  await h.store.cancel(done.id, 'skewed');
  // A console replica whose clock runs two retentions ahead of the writer's.
  const ahead = new OperatorView(h.store, () => clock + 2 * defaults.taskRetentionMs);
  const page = await ahead.tasks('skewed', {}, 10);
  assert.deepEqual(
    page.rows.map((r) => r.id),
    [done.id],
  );
  assert.notEqual(await h.redis.zscore(operatorKeys.tasks('skewed'), done.id), null, 'its index entry stays');
});

test('requeue is fenced: a live lease refuses, a lapsed one queues again and records the operator', async () => {
  clock = 4_000_000;
  const task = await h.store.create(newTask({ tenant: 'stuck' }));
  // A lease no starved host outlives before the refusal below, then cut short by its worker's
  // renewal: live or lapsed because the test says so, not because the host was quick.
  const { attempt } = await h.store.claim(task.id, 'w1', 60_000, { start: true });
  const leased = (e: unknown) => e instanceof TasklineError && e.code === 'illegal_transition';
  await assert.rejects(view().requeue(task.id, 'key:abc'), leased);
  await h.store.renew(task.id, attempt, 1);
  // The lease lapses by Redis's clock (it stamps and judges leases), whatever the view's says.
  const requeued = await until('the lease to lapse', () =>
    view()
      .requeue(task.id, 'key:abc')
      .catch((e: unknown) => {
        if (leased(e)) return undefined;
        throw e;
      }),
  );
  assert.equal(requeued.status, 'queued');
  const { events } = await h.store.events(task.id, 0);
  const last = JSON.parse(events.at(-1)!.data) as {
    reason: string;
    task_status: string;
    operator_action: { action: string; operator: string };
  };
  assert.equal(last.reason, 'operator_requeue');
  // Queued again inside, but what the client saw never steps back (LMSP 7.2), as after a restart.
  assert.equal(last.task_status, 'running');
  assert.equal(requeued.shownStatus, 'running');
  assert.deepEqual([last.operator_action.action, last.operator_action.operator], ['requeue', 'key:abc']);
  assert.notEqual(await h.redis.zscore('tl:{sched}:ready:tiny-chat:stuck', task.id), null);
  // The old worker's writes are refused: the task is no longer running.
  await assert.rejects(
    h.store.append(
      task.id,
      requeued.attempt,
      [1],
      [{ type: 'response.output_text.delta', data: { delta: 'x' } }],
    ),
  );
});

test('requeue offers a queued task again, recorded; an ended task refuses', async () => {
  const task = await h.store.create(newTask({ tenant: 'lost' }));
  // The offer was lost (say, the ready entry went with a failed write).
  await h.redis.zrem('tl:{sched}:ready:tiny-chat:lost', task.id);
  const requeued = await view().requeue(task.id, 'key:abc');
  assert.equal(requeued.status, 'queued');
  assert.notEqual(await h.redis.zscore('tl:{sched}:ready:tiny-chat:lost', task.id), null);
  const { events } = await h.store.events(task.id, 0);
  assert.equal((JSON.parse(events.at(-1)!.data) as { reason: string }).reason, 'operator_requeue');
  await h.store.cancel(task.id, 'lost');
  await assert.rejects(
    view().requeue(task.id, 'key:abc'),
    (e) => e instanceof TasklineError && e.code === 'illegal_transition',
  );
});

test("an operator's cancel is recorded in the task's events", async () => {
  const task = await h.store.create(newTask({ tenant: 'ops' }));
  const { outcome } = await h.store.cancel(task.id, null, 'jwt:alice');
  assert.equal(outcome, 'cancelled');
  const { events } = await h.store.events(task.id, 0);
  const final = JSON.parse(events.at(-1)!.data) as { operator_action: { operator: string } };
  assert.equal(final.operator_action.operator, 'jwt:alice');
  assert.equal(await h.redis.exists(taskKeys(task.id).task), 1);
});

test('an end is counted when a task ends, not when it parks for input; failures by tenant and code', async () => {
  clock = 5_000_000;
  const minute = Math.floor(clock / 60_000);
  const ended = async () => Number(await h.redis.hget(operatorKeys.throughput, `e:${minute}`));
  const tool = await h.store.create(
    newTask({ tenant: 'counts', kind: 'tool', model: 'tools', onRestart: 'retry' }),
  );
  const claimed = await h.store.claim(tool.id, 'w1', 60_000, { start: true });
  const confirm = { method: 'elicitation/create', params: { message: 'Run it?' } };
  await h.store.requestInput(tool.id, claimed.attempt, { confirm });
  assert.equal(await ended(), 0, 'a parked task has not ended');
  const failing = await h.store.create(newTask({ tenant: 'counts' }));
  const run = await h.store.claim(failing.id, 'w1', 60_000, { start: true });
  const error = problem('model_error', 'boom');
  await h.store.finish(failing.id, run.attempt, { status: 'failed', error });
  assert.equal(await ended(), 1);
  const counts = await view().tenantCounts('counts', [tool.id, failing.id, 'r:reservation']);
  assert.deepEqual(counts.statuses, { input_required: 1 });
  assert.deepEqual(counts.failures, { model_error: 1 });
  assert.deepEqual((await view().tenantCounts('other-tenant', [])).failures, {});
});

test("a task the recovery sweep fails counts under its tenant's failures by code", async () => {
  clock = 6_000_000;
  const task = await h.store.create(newTask({ tenant: 'recovered', onRestart: 'fail' }));
  await h.store.claim(task.id, 'w1', 1, { start: true });
  // The worker died: its lease lapses (by Redis's clock) and a sweep fails the task.
  await until('the sweep to fail the task', async () =>
    (await h.store.sweepLeases()).length > 0 ? true : undefined,
  );
  assert.equal((await h.store.get(task.id))?.status, 'failed');
  assert.deepEqual((await view().tenantCounts('recovered', [task.id])).failures, { server_restarted: 1 });
});

test('an idempotent create keeps its key on the record for operators; a key over 255 characters is refused', async () => {
  const { task } = await h.store.createIdempotent(newTask({ tenant: 'idem' }), 'order-42', 'fp');
  assert.equal((await h.store.get(task.id))?.idempotencyKey, 'order-42');
  assert.equal((await h.store.create(newTask({ tenant: 'idem' }))).idempotencyKey, null);
  await assert.rejects(
    h.store.createIdempotent(newTask({ tenant: 'idem' }), 'k'.repeat(256), 'fp'),
    (e) => e instanceof TasklineError && e.code === 'invalid_request',
  );
});

test('a create adds its index entry and its count; the sweep bounds and expires each index written since, and drops counts over an hour old', async () => {
  const small = await harness({ now: () => clock, operatorIndexMax: 3 });
  try {
    clock = 7_000_000;
    const key = operatorKeys.tasks('bounded');
    // The tenant index is scored by Redis's clock (tenant_index.lua), whatever the writer's says.
    const before = await small.store.operatorIndexClock();
    for (let i = 0; i < 5; i++) {
      clock += 1;
      await small.store.create(newTask({ tenant: 'bounded' }));
    }
    // A create neither trims nor expires the index: that is the sweep's.
    assert.equal(await small.redis.zcard(key), 5);
    assert.equal(await small.redis.pttl(key), -1);
    const hourAgo = `c:${minuteOf(clock) - 61}`;
    await small.redis.hset(operatorKeys.throughput, hourAgo, 9);
    await small.redis.zadd(
      operatorKeys.tenants,
      before - 1,
      'recent',
      before - 2 * defaults.taskRetentionMs,
      'quiet',
    );

    assert.equal(await small.store.sweepOperatorIndex(before), 1, 'only tenants that created since');
    assert.notEqual(await small.redis.zscore(operatorKeys.tenants, 'recent'), null);
    assert.equal(
      await small.redis.zscore(operatorKeys.tenants, 'quiet'),
      null,
      'quiet for a retention: dropped',
    );
    assert.equal(await small.redis.zcard(key), 3, 'the newest three');
    const ttl = await small.redis.pttl(key);
    assert.ok(ttl > 0 && ttl <= defaults.taskRetentionMs, `expires with the task retention (${ttl})`);
    assert.equal(await small.redis.hget(operatorKeys.throughput, hourAgo), null);
    const chart = await new OperatorView(small.store, () => clock).throughput(2);
    assert.deepEqual(
      chart.map((m) => m.created),
      [0, 5],
    );
  } finally {
    await small.close();
  }
});

test('the sweep drops past a tool-task index bound only tasks gone, keeps its unfinished tasks, and visits their tenant until they end', async () => {
  const small = await harness({ now: () => clock, operatorIndexMax: 3 });
  const entry = (at: number, id: string) => `${String(at).padStart(15, '0')}:${id}`;
  const tool = async () => {
    const task = await small.store.create(
      newTask({ tenant: 'tools', kind: 'tool', model: 'tools', request: { tool: 't', arguments: {} } }),
    );
    await indexToolTask(small.redis, 'tools', entry(task.createdAt, task.id));
    return task;
  };
  try {
    clock = 9_000_000;
    const [key, open] = [toolTaskIndex('tools'), toolTaskOpen('tools')];
    const waiting = await tool();
    const creating = entry(clock, 'task_creating'); // indexed, its task not written yet
    const failed = entry(clock - 61_000, 'task_failed'); // a create that never wrote its task
    for (const member of [creating, failed]) await indexToolTask(small.redis, 'tools', member);
    const ended: string[] = [];
    for (let i = 0; i < 4; i++) {
      clock += 1;
      const task = await tool();
      await small.store.cancel(task.id, 'tools');
      ended.push(entry(task.createdAt, task.id));
    }
    // The sweep picks the tenants that created since, by Redis's clock (tenant_index.lua).
    const afterCreates = (await small.store.operatorIndexClock()) + 1;
    assert.equal(await small.store.sweepOperatorIndex(0), 1);
    const kept = await small.redis.zrange(key, 0, -1);
    const unfinished = [creating, entry(waiting.createdAt, waiting.id)].sort();
    // Past the newest three, what tasks/get still serves stays listed (MCP 2025-11-25, Task Listing).
    assert.deepEqual(kept, [...unfinished, ...ended], 'every task that exists; the failed create dropped');
    assert.deepEqual(await small.redis.zrange(open, 0, -1), unfinished, 'the failed create is dropped');
    // No create since: the tenant is visited for its unfinished task, its index renewed.
    clock += 120_000;
    // Still there when the sweep reads it, however slow the host: the retention it renews to is 60 s.
    await small.redis.pexpire(key, 30_000);
    assert.equal(await small.store.sweepOperatorIndex(afterCreates), 1);
    assert.ok((await small.redis.pttl(key)) > 30_000, 'renewed');
    assert.deepEqual(await small.redis.zrange(open, 0, -1), [entry(waiting.createdAt, waiting.id)]);
    await small.store.cancel(waiting.id, 'tools');
    assert.equal(await small.store.sweepOperatorIndex(afterCreates), 1);
    assert.equal(await small.redis.sismember(toolTaskTenants, 'tools'), 0);
    assert.equal(await small.store.sweepOperatorIndex(afterCreates), 0, 'all ended: visited no more');
  } finally {
    await small.close();
  }
});
