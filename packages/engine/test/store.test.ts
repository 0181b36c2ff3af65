import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  connectRedis,
  defineDispatch,
  eventJson,
  isWellFormedId,
  problem,
  TasklineError,
  TaskStore,
} from '../src/index.js';
import { eventObject } from '../src/records.js';
import { schedulerKeys, taskKeys } from '../src/keys.js';
import { monitorRedis } from '@taskline/testing';
import { defaults, dispatchOne, harness, newTask, until, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness()));
after(() => h.close());

const code = (c: string) => (err: unknown) => err instanceof TasklineError && err.code === c;

test('create persists the task and its first event, and queues it', async () => {
  const task = await h.store.create(newTask());
  assert.ok(isWellFormedId(task.id, 'task'), "isWellFormedId(task.id, 'task')");
  assert.equal(task.status, 'queued');
  assert.equal(task.seq, 1);
  const { events } = await h.store.events(task.id, 0);
  assert.deepEqual(
    events.map((e) => [e.seq, e.type]),
    [[1, 'response.created']],
  );
  assert.equal(
    await h.redis.zscore(`tl:{sched}:ready:tiny-chat:${task.tenant}`, task.id),
    String(task.createdAt),
  );
  assert.equal(await h.redis.zscore('tl:{sched}:intake', task.id), null);
});

test('queueing a task wakes the scheduler on its channel, naming its model', async () => {
  const sub = h.redis.duplicate();
  try {
    await sub.subscribe(schedulerKeys.wake);
    const woken = new Promise<string>((resolve) => sub.once('message', (_channel, model) => resolve(model)));
    await h.store.create(newTask({ model: 'model-wake' }));
    assert.equal(await woken, 'model-wake');
  } finally {
    sub.disconnect();
  }
});

test('a task of another tenant reads as missing', async () => {
  const task = await h.store.create(newTask());
  assert.equal(await h.store.get(task.id, 'tenant-b'), null);
  await assert.rejects(h.store.cancel(task.id, 'tenant-b'), code('task_not_found'));
});

test('a worker lifecycle writes numbered events with no gap', async () => {
  const task = await h.store.create(newTask());
  const claimed = await h.store.claim(task.id, 'w1', 10_000);
  assert.equal(claimed.status, 'loading');
  assert.equal(claimed.attempt, 1);
  await h.store.start(task.id, 1);
  await h.store.append(task.id, 1, [5, 6], [{ type: 'response.output_text.delta', data: { delta: 'ab' } }]);
  await h.store.finish(task.id, 1, { status: 'succeeded', result: { status: 'completed' } });
  const { events } = await h.store.events(task.id, 0);
  assert.deepEqual(
    events.map((e) => e.seq),
    [1, 2, 3, 4, 5],
  );
  assert.equal(events.at(-1)!.type, 'response.completed');
  assert.deepEqual(eventObject(events[3]!), {
    type: 'response.output_text.delta',
    sequence_number: 4,
    delta: 'ab',
  });
  assert.deepEqual(await h.store.snapshot(task.id), [5, 6]);
  const done = (await h.store.get(task.id))!;
  assert.equal(done.status, 'succeeded');
  assert.ok(done.expiresAt! > Date.now(), 'done.expiresAt! > Date.now()');
  assert.ok((await h.redis.pttl(taskKeys(task.id).events)) > 0, 'history expires with retention');
});

test('a worker with the model loaded claims straight into running, both steps on record', async () => {
  const task = await h.store.create(newTask());
  const claimed = await h.store.claim(task.id, 'w1', 10_000, { start: true });
  assert.equal(claimed.status, 'running');
  assert.equal(claimed.attempt, 1);
  const { events } = await h.store.events(task.id, 0);
  assert.deepEqual(
    events.map((e) => JSON.parse(e.data).task_status),
    ['queued', 'loading', 'running'],
  );
  // The same attempt fences its writes as after a separate start; a second start is refused.
  await h.store.append(task.id, 1, [7], [{ type: 'response.output_text.delta', data: { delta: 'x' } }]);
  await assert.rejects(h.store.start(task.id, 1), code('illegal_transition'));
  await assert.rejects(h.store.claim(task.id, 'w2', 10_000, { start: true }), code('illegal_transition'));
});

test("a claim carries the attempt's first output: one step writes both, numbered in turn; a refused one writes neither", async () => {
  const task = await h.store.create(newTask({ onRestart: 'resume' }));
  const output = {
    tokens: [5, 6],
    events: [{ type: 'response.output_text.delta', data: { task_status: 'running', delta: 'hi' } }],
  };
  const claimed = await h.store.claim(task.id, 'w1', 10_000, { start: true, output });
  assert.deepEqual([claimed.status, claimed.attempt, claimed.seq], ['running', 1, 4]);
  const { events } = await h.store.events(task.id, 0);
  assert.deepEqual(
    events.map((e) => [e.seq, e.type, JSON.parse(e.data).task_status]),
    [
      [1, 'response.created', 'queued'],
      [2, 'response.in_progress', 'loading'],
      [3, 'response.in_progress', 'running'],
      [4, 'response.output_text.delta', 'running'],
    ],
  );
  assert.deepEqual(await h.store.snapshot(task.id), [5, 6], 'the tokens are the resume snapshot');
  // The next append goes on from there under the same attempt.
  assert.equal(
    await h.store.append(task.id, 1, [7], [{ type: 'response.output_text.delta', data: { delta: '!' } }]),
    5,
  );
  // A second claim of the same offer (another worker's job) writes nothing, its output included.
  await assert.rejects(
    h.store.claim(task.id, 'w2', 10_000, { start: true, output }),
    code('illegal_transition'),
  );
  assert.equal((await h.store.events(task.id, 0)).events.length, 5);
  assert.deepEqual(await h.store.snapshot(task.id), [5, 6, 7]);
});

test("an attempt's last output lands in the same step as its end, and not at all when refused", async () => {
  const task = await h.store.create(newTask({ onRestart: 'retry' }));
  await h.store.claim(task.id, 'w1', 10_000, { start: true });
  const last = [
    { type: 'response.output_text.delta', data: { delta: 'end' } },
    { type: 'response.output_text.done', data: { text: 'the end' } },
  ];
  // A stale attempt's end is refused whole: none of its events are written.
  await assert.rejects(
    h.store.finish(task.id, 2, { status: 'succeeded', result: null, events: last }, task),
    code('stale_attempt'),
  );
  assert.equal((await h.store.events(task.id, 0)).events.length, 3);
  const seq = await h.store.finish(task.id, 1, { status: 'succeeded', result: null, events: last }, task);
  const { events } = await h.store.events(task.id, 0);
  assert.deepEqual(
    events.map((e) => [e.seq, e.type]),
    [
      [1, 'response.created'],
      [2, 'response.in_progress'],
      [3, 'response.in_progress'],
      [4, 'response.output_text.delta'],
      [5, 'response.output_text.done'],
      [6, 'response.completed'],
    ],
  );
  assert.equal(seq, 6);
  assert.equal((await h.store.get(task.id))!.status, 'succeeded');
});

test('terminal states refuse every later transition', async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'w1', 10_000);
  await h.store.start(task.id, 1);
  await h.store.finish(task.id, 1, { status: 'succeeded', result: null });
  await assert.rejects(
    h.store.finish(task.id, 1, {
      status: 'failed',
      error: problem('x', 'x'),
    }),
    code('task_terminal'),
  );
  await assert.rejects(h.store.cancel(task.id, 'tenant-a'), code('task_not_cancelable'));
  assert.equal((await h.store.get(task.id))!.status, 'succeeded');
});

test('a stale attempt cannot write over a newer one', async () => {
  const task = await h.store.create(newTask({ onRestart: 'retry' }));
  await h.store.claim(task.id, 'w1', 1);
  await h.store.start(task.id, 1);
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(await h.store.recover(task.id), 'queued');
  await h.store.claim(task.id, 'w2', 10_000);
  await assert.rejects(h.store.append(task.id, 1, [1], []), code('stale_attempt'));
  await assert.rejects(h.store.renew(task.id, 1, 1000), code('stale_attempt'));
  await assert.rejects(
    h.store.finish(task.id, 1, { status: 'succeeded', result: null }),
    code('stale_attempt'),
  );
  assert.equal((await h.store.get(task.id))!.attempt, 2);
});

test('recovery does not take a task whose lease is alive', async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'w1', 60_000);
  assert.equal(await h.store.recover(task.id), null);
  assert.equal((await h.store.get(task.id))!.status, 'loading');
});

test('cancel: queued ends at once, running asks to stop, repeats are idempotent', async () => {
  const queued = await h.store.create(newTask());
  assert.equal((await h.store.cancel(queued.id, 'tenant-a')).outcome, 'cancelled');
  assert.equal((await h.store.cancel(queued.id, 'tenant-a')).outcome, 'noop');
  assert.equal(await h.redis.zscore(`tl:{sched}:ready:tiny-chat:tenant-a`, queued.id), null);

  const running = await h.store.create(newTask());
  await h.store.claim(running.id, 'w1', 10_000);
  await h.store.start(running.id, 1);
  assert.equal((await h.store.cancel(running.id, 'tenant-a')).outcome, 'cancelling');
  assert.equal((await h.store.cancel(running.id, 'tenant-a')).outcome, 'noop');
  await assert.rejects(h.store.append(running.id, 1, [], []), code('illegal_transition'));
  await h.store.finish(running.id, 1, { status: 'cancelled', result: null });
  const { events } = await h.store.events(running.id, 0);
  assert.deepEqual(events.map((e) => e.type).slice(-2), ['response.in_progress', 'response.cancelled']);
});

test('every ending leaves the tenant running set the scheduler caps on', async () => {
  const running = schedulerKeys.active('tenant-a');
  // What dispatch.lua does for each task it picks.
  const dispatched = async () => {
    const task = await h.store.create(newTask());
    await h.redis.zadd(running, Date.now(), task.id);
    return task;
  };
  const finished = await dispatched();
  await h.store.claim(finished.id, 'w1', 10_000);
  await h.store.start(finished.id, 1);
  await h.store.finish(finished.id, 1, { status: 'succeeded', result: null });
  const cancelledQueued = await dispatched();
  await h.store.cancel(cancelledQueued.id, 'tenant-a');
  const lost = await dispatched();
  await h.store.claim(lost.id, 'dead', 1);
  const still = await dispatched();
  await h.store.claim(still.id, 'w1', 10_000);
  await new Promise((r) => setTimeout(r, 5));
  await h.store.sweepLeases();
  assert.equal((await h.store.get(lost.id))!.status, 'failed');
  assert.deepEqual(await h.redis.zrange(running, 0, -1), [still.id]);
  assert.equal(await h.redis.zscore(schedulerKeys.leases, finished.id), null);
  await h.redis.del(running);
});

test('the sweep applies each on_restart policy to lapsed leases', async () => {
  const ids: Record<string, string> = {};
  for (const policy of ['fail', 'retry', 'resume'] as const) {
    const task = await h.store.create(newTask({ onRestart: policy }));
    await h.store.claim(task.id, 'dead', 1);
    await h.store.start(task.id, 1);
    await h.store.append(task.id, 1, [7, 8, 9], []);
    ids[policy] = task.id;
  }
  const cancelling = await h.store.create(newTask({ onRestart: 'retry' }));
  await h.store.claim(cancelling.id, 'dead', 1);
  await h.store.cancel(cancelling.id, 'tenant-a');
  await new Promise((r) => setTimeout(r, 5));
  const recovered = new Map((await h.store.sweepLeases()).map((r) => [r.id, r.status]));
  assert.equal(recovered.get(ids.fail!), 'failed');
  assert.equal((await h.store.get(ids.fail!))!.error?.code, 'server_restarted');
  assert.equal(recovered.get(ids.retry!), 'queued');
  assert.deepEqual(await h.store.snapshot(ids.retry!), [], 'retry starts from scratch');
  assert.equal(recovered.get(ids.resume!), 'queued');
  assert.deepEqual(await h.store.snapshot(ids.resume!), [7, 8, 9], 'resume keeps the snapshot');
  assert.equal(recovered.get(cancelling.id), 'cancelled');
  assert.deepEqual(await h.store.sweepLeases(), [], 'a second sweep finds nothing');
});

test('the reconciler queues a task persisted but never queued, and forgets failed creates', async () => {
  const task = await h.store.create(newTask({ tenant: 'tenant-r' }));
  // Simulate a crash between persisting and queueing.
  await h.redis.zrem('tl:{sched}:ready:tiny-chat:tenant-r', task.id);
  await h.redis.zadd('tl:{sched}:intake', 0, task.id, 0, 'task_never_written');
  assert.deepEqual(await h.store.reconcileIntake(0), [task.id]);
  assert.ok(
    await h.redis.zscore('tl:{sched}:ready:tiny-chat:tenant-r', task.id),
    "await h.redis.zscore('tl:{sched}:ready:tiny-chat:tenant-r', task.id)",
  );
  assert.equal(await h.redis.zcard('tl:{sched}:intake'), 0);
});

test('input requests: partial answers kept, unknown and repeated keys ignored, replayed on retry', async () => {
  const task = await h.store.create(newTask({ kind: 'tool', onRestart: 'retry' }));
  await h.store.claim(task.id, 'w1', 10_000);
  await h.store.start(task.id, 1);
  const asked = await h.store.requestInput(task.id, 1, { confirm: { q: 'go?' }, name: { q: 'who?' } });
  assert.equal(asked.waiting, true);
  assert.equal((await h.store.get(task.id))!.status, 'input_required');
  let r = await h.store.provideInput(task.id, 'tenant-a', { confirm: true, bogus: 1 });
  assert.deepEqual(r, { accepted: 1, status: 'input_required' });
  r = await h.store.provideInput(task.id, 'tenant-a', { confirm: false, name: 'ada' });
  assert.deepEqual(r, { accepted: 1, status: 'running' });
  assert.deepEqual(await h.store.answers(task.id), { confirm: true, name: 'ada' });
  assert.deepEqual(await h.store.openInputRequests(task.id), {});
  // The task was parked while it waited: the answers resume it under a new attempt, which replays them.
  const resumed = await h.store.claim(task.id, 'w2', 10_000, { start: true });
  assert.equal(resumed.attempt, 2);
  const again = await h.store.requestInput(task.id, 2, { confirm: { q: 'changed?' } });
  assert.deepEqual(again, { waiting: false, parked: false, answers: { confirm: true, name: 'ada' } });
});

test('expired tasks read exactly like missing ones', async () => {
  // The harness's minute of retention: cancel reads the ended record back after its script, and no
  // starved host outlasts it in between (on a loaded one, 50 ms ran out there, and so could a
  // second). The retention then runs out when the test says: every key the cancel set to expire
  // is set to expire now, and Redis expires them by its own clock.
  const task = await h.store.create(newTask());
  await h.store.cancel(task.id, 'tenant-a');
  const keys = Object.values(taskKeys(task.id));
  const expiring: string[] = [];
  for (const key of keys) if ((await h.redis.pttl(key)) > 0) expiring.push(key);
  assert.ok(expiring.includes(taskKeys(task.id).task), 'the ended task expires');
  for (const key of expiring) await h.redis.pexpire(key, 1);
  await until('Redis to expire the task', async () =>
    (await h.redis.exists(...expiring)) === 0 ? true : undefined,
  );
  assert.equal(await h.store.get(task.id), null);
  await assert.rejects(h.store.cancel(task.id, 'tenant-a'), code('task_not_found'));
});

test('history trimmed below a resume point is reported expired', async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'w1', 10_000);
  await h.store.start(task.id, 1);
  await h.redis.xtrim(taskKeys(task.id).events, 'MINID', '3-0');
  assert.equal((await h.store.events(task.id, 0)).expired, true);
  assert.equal((await h.store.events(task.id, 2)).expired, false);
  assert.deepEqual((await h.store.events(task.id, 3)).events, []);
});

test('a worker that lost its task to recovery cannot end it, even before the next claim', async () => {
  const task = await h.store.create(newTask({ onRestart: 'retry' }));
  await h.store.claim(task.id, 'paused', 1);
  await h.store.start(task.id, 1);
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(await h.store.recover(task.id), 'queued');
  await assert.rejects(h.store.finish(task.id, 1, { status: 'cancelled' }), code('stale_attempt'));
  await assert.rejects(h.store.start(task.id, 1), code('stale_attempt'));
  assert.equal((await h.store.get(task.id))!.status, 'queued');
});

test('a requeued task frees its place under the tenant running cap', async () => {
  const task = await h.store.create(newTask({ tenant: 'tenant-cap', onRestart: 'retry' }));
  // What dispatch does: the task leaves the ready queue and counts as running.
  await h.redis.zrem('tl:{sched}:ready:tiny-chat:tenant-cap', task.id);
  await h.redis.zadd('tl:{sched}:active:tenant-cap', 1, task.id);
  await h.store.claim(task.id, 'dead', 1);
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(await h.store.recover(task.id), 'queued');
  assert.equal(await h.redis.zscore('tl:{sched}:active:tenant-cap', task.id), null);
  assert.ok(
    await h.redis.zscore('tl:{sched}:ready:tiny-chat:tenant-cap', task.id),
    "await h.redis.zscore('tl:{sched}:ready:tiny-chat:tenant-cap', task.id)",
  );
});

test('a refused claim leaves the holder its lease index entry', async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'holder', 60_000);
  await assert.rejects(h.store.claim(task.id, 'late', 60_000), code('illegal_transition'));
  assert.ok(
    await h.redis.zscore('tl:{sched}:leases', task.id),
    "await h.redis.zscore('tl:{sched}:leases', task.id)",
  );
});

test('eventJson renders exactly what JSON.stringify(eventObject) does', () => {
  const cases = [
    { seq: 1, type: 'response.created', data: '{}' },
    {
      seq: 7,
      type: 'response.output_text.delta',
      data: JSON.stringify({ delta: 'h\u00e9 "x"\n', n: [1, { a: null }] }),
    },
    // Stored data naming a rendered field keeps its own value, as the object spread does.
    { seq: 3, type: 'response.in_progress', data: JSON.stringify({ type: 'other', task_status: 'running' }) },
    { seq: 4, type: 'x', data: JSON.stringify({ sequence_number: 99 }) },
  ];
  for (const event of cases) {
    assert.equal(eventJson(event), JSON.stringify(eventObject(event)));
    assert.deepEqual(JSON.parse(eventJson(event)), eventObject(event));
  }
});

test("a reader whose clock runs ahead of Redis's still reads a kept task: Redis's expiry is the truth", async () => {
  const task = await h.store.create(newTask());
  await h.store.cancel(task.id, 'tenant-a');
  // Ten minutes of skew, far past the 60 s retention: the key itself lives on by Redis's clock.
  const skewed = new TaskStore(h.redis, { ...defaults, now: () => Date.now() + 600_000 });
  assert.ok(
    (await h.redis.pttl(taskKeys(task.id).task)) > 0,
    '(await h.redis.pttl(taskKeys(task.id).task)) > 0',
  );
  assert.equal((await skewed.get(task.id))?.status, 'cancelled');
  // A retried create of the same id (an idempotent retry) finds it too, instead of a 500.
  const again = await skewed.create({ ...newTask(), id: task.id });
  assert.equal(again.status, 'cancelled');
});

test("a script's events are one stream entry, named by the last one's number, and read back one by one", async () => {
  const task = await h.store.create(newTask());
  const { attempt } = await h.store.claim(task.id, 'w1', 60_000, { start: true });
  const text = (delta: string) => ({ type: 'response.output_text.delta', data: { delta } });
  await h.store.append(task.id, attempt, [], [text('a'), text('b'), text('c')]);
  // created (1), loading and running (2-3), three deltas (4-6): one entry per script.
  const entries = await h.redis.xrange(taskKeys(task.id).events, '-', '+');
  assert.deepEqual(
    entries.map(([id, fields]) => [id, fields.length / 4]),
    [
      ['1-0', 1],
      ['3-0', 2],
      ['6-0', 3],
    ],
  );
  const all = (await h.store.events(task.id, 0)).events;
  assert.deepEqual(
    all.map((e) => e.seq),
    [1, 2, 3, 4, 5, 6],
  );
  assert.equal(all[4]!.type, 'response.output_text.delta');
  assert.equal(JSON.parse(all[4]!.data).delta, 'b');
  // A cursor inside an entry gets the rest of it; a count counts events.
  const after4 = await h.store.events(task.id, 4);
  assert.deepEqual(
    after4.events.map((e) => [e.seq, JSON.parse(e.data).delta]),
    [
      [5, 'b'],
      [6, 'c'],
    ],
  );
  assert.equal(after4.expired, false);
  assert.deepEqual(
    (await h.store.events(task.id, 1, 2)).events.map((e) => e.seq),
    [2, 3],
  );
  // An entry of an earlier release (one event each) reads the same way beside the new ones.
  await h.store.append(task.id, attempt, [], [text('d')]);
  assert.deepEqual(
    (await h.store.events(task.id, 5)).events.map((e) => e.seq),
    [6, 7],
  );
});

test(
  "a task's path from create to finish reads `hooks` nowhere and TYPE-checks only the keys dispatch writes unread; a hooked task's outbox names each status event",
  {
    // MONITOR sees one node's commands: on a cluster (test:cluster) the path spans several.
    skip: process.env.TASKLINE_TEST_REDIS === 'cluster' && 'MONITOR watches one node',
  },
  async () => {
    const hooked = await harness({ watchWebhooks: async () => true });
    const scheduler = connectRedis(hooked.server.url, 'scheduler');
    defineDispatch(scheduler);
    await hooked.redis.set(schedulerKeys.leader, 'lead');
    const seen: string[][] = [];
    const monitor = monitorRedis(hooked.server.url, (args) => seen.push(args));
    await monitor.ready;
    const run = async (store: TaskStore) => {
      const task = await store.create(newTask());
      await dispatchOne(scheduler, task.model, task.id);
      const { attempt } = await store.claim(task.id, 'w1', 60_000, { start: true });
      await store.finish(task.id, attempt, { status: 'succeeded', result: null });
      return task.id;
    };
    try {
      const unhooked = await run(new TaskStore(hooked.redis, defaults));
      await hooked.redis.echo('path-end');
      await until('the monitor to see the path end', () =>
        seen.some((a) => a[0] === 'echo' && a[1] === 'path-end') ? true : undefined,
      );
      // The create, claim and finish each had the record's `hooks` in hand; the offer's and the
      // round's checks ride on reads made anyway, but for three keys dispatch writes without a read.
      assert.deepEqual(
        seen.filter((a) => a[0] === 'HGET' && a[2] === 'hooks'),
        [],
      );
      assert.deepEqual(
        seen.filter((a) => a[0] === 'TYPE').map((a) => a[1]),
        [schedulerKeys.inflight, schedulerKeys.models, schedulerKeys.offered],
      );
      assert.equal(await hooked.redis.exists(taskKeys(unhooked).outbox), 0);

      const outboxTypes = async (id: string) => {
        const outbox = await hooked.redis.xrange(taskKeys(id).outbox, '-', '+');
        const events = await hooked.store.eventsAfter(id, 0);
        return outbox
          .flatMap(([, fields]) => fields[1]!.split(',').map(Number))
          .map((seq) => events.find((e) => e.seq === seq)?.type);
      };
      const id = await run(hooked.store);
      assert.deepEqual(await outboxTypes(id), [
        'response.created',
        'response.in_progress',
        'response.in_progress',
        'response.completed',
      ]);
      // The other scripts that emit status events: an ask, its answer, a cancel (and a delta, never named).
      const tool = await hooked.store.create(newTask({ kind: 'tool', model: 'tools' }));
      const { attempt } = await hooked.store.claim(tool.id, 'w1', 60_000, { start: true });
      const delta = { type: 'response.output_text.delta', data: { delta: 'x' } };
      await hooked.store.append(tool.id, attempt, [1], [delta]);
      await hooked.store.requestInput(tool.id, attempt, { confirm: { type: 'confirm' } });
      await hooked.store.provideInput(tool.id, 'tenant-a', { confirm: { action: 'accept' } });
      await hooked.store.cancel(tool.id, 'tenant-a');
      const hookedTypes = new Set([
        'response.created',
        'response.in_progress',
        'response.restarted',
        'response.completed',
        'response.incomplete',
        'response.failed',
        'response.cancelled',
      ]);
      const statusEvents = (await hooked.store.eventsAfter(tool.id, 0))
        .map((e) => e.type)
        .filter((type) => hookedTypes.has(type));
      assert.ok(
        statusEvents.length >= 5 && statusEvents.at(-1) === 'response.cancelled',
        String(statusEvents),
      );
      assert.deepEqual(await outboxTypes(tool.id), statusEvents);
      await hooked.redis.echo('hooked-end');
      await until('the monitor to see the hooked tasks end', () =>
        seen.some((a) => a[0] === 'echo' && a[1] === 'hooked-end') ? true : undefined,
      );
      assert.deepEqual(
        seen.filter((a) => a[0] === 'HGET' && a[2] === 'hooks'),
        [],
        'no script reads `hooks` of its own',
      );
    } finally {
      monitor.stop();
      scheduler.disconnect();
      await hooked.close();
    }
  },
);
