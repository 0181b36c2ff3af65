/** The one admission path, against a real Redis of the test's own: the cap, a create's place, a task's end and a caller's departure. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Redis } from 'ioredis';
import { CallHolds, connectRedis, EventHub, TaskStore, TasklineError, type NewTask } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import { Admission, TenantLimits } from '../src/index.js';

let server: RedisServer;
let redis: Redis;
let store: TaskStore;
let hub: EventHub;
let admission: Admission;
const ACTIVE_TTL_MS = 3_600_000;

before(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, 'admission-test');
  store = new TaskStore(redis, {
    taskRetentionMs: 60_000,
    eventRetentionMs: 60_000,
    idempotencyTtlS: 86_400,
    idempotencyPendingMs: 30_000,
  });
  hub = new EventHub(store);
  const limits = new TenantLimits(redis, {
    ratePerS: 100,
    burst: 100,
    maxUnfinishedTasks: 2,
    maxStreams: 2,
    // Long: a stream renewed in a test still counts at its next check however slow the host (a
    // lapsed lease is written into the set by the test itself).
    streamLeaseMs: 60_000,
    unfinishedTtlMs: ACTIVE_TTL_MS,
  });
  admission = new Admission({
    store,
    hub,
    holds: new CallHolds(redis, 60_000, (err) => assert.fail(String(err))),
    limits,
    logger: createLogger({ service: 'test' }, 'error', () => undefined),
  });
});
after(async () => {
  hub.close();
  redis.disconnect();
  await server.stop();
});

const input = (tenant: string): NewTask => ({
  tenant,
  kind: 'response',
  model: 'tiny-chat',
  onRestart: 'fail',
  request: { model: 'tiny-chat', input: 'hello' },
});
const write =
  (tenant: string, on = store) =>
  async (id: string, _trace: unknown, alongside: () => unknown) => ({
    task: await on.create({ ...input(tenant), id, fresh: true }, alongside),
    replayed: false,
  });

/** The commands `redis` sends while `fn` runs and for a moment after (writes not awaited included). */
async function sent(fn: () => Promise<unknown>): Promise<string[][]> {
  const seen: string[][] = [];
  const original = redis.sendCommand.bind(redis);
  redis.sendCommand = ((command: { name: string; args: unknown[] }) => {
    seen.push([command.name, ...command.args.map(String)]);
    return original(command as never);
  }) as typeof redis.sendCommand;
  try {
    await fn();
    await new Promise((resolve) => setTimeout(resolve, 50));
  } finally {
    redis.sendCommand = original;
  }
  return seen;
}

test('a create holds its place under the id it writes its task with, written to disk beside the task: nothing is swapped after it', async () => {
  const limits = admission.limits;
  const reservation = await limits.takeCreate('placed');
  let placedDuringWrite: string[] = [];
  const commands = await sent(async () => {
    const { task } = await admission.create('placed', reservation, async (id, trace, alongside) => {
      placedDuringWrite = await redis.zrange('tl:api:active:{placed}', 0, -1);
      return write('placed')(id, trace, alongside);
    });
    assert.equal(task.id, reservation.taskId);
  });
  assert.deepEqual(placedDuringWrite, [reservation.taskId]);
  assert.deepEqual(await redis.zrange('tl:api:active:{placed}', 0, -1), [reservation.taskId]);
  const touchingPlaces = commands.filter((c) => c.some((a) => a === 'tl:api:active:{placed}'));
  assert.deepEqual(
    touchingPlaces.map((c) => c[0]),
    ['zrange', 'evalsha'],
    "the read above and its persist (reservation_commit.lua, sent with the create's writes)",
  );
  assert.deepEqual(touchingPlaces[1]!.slice(3, 6), [
    'tl:api:active:{placed}',
    reservation.taskId,
    reservation.taskId,
  ]);
});

test("a create's place goes to disk in its record's round trip, after the store's read before it", async () => {
  // The webhook question (TaskStoreOptions.watchWebhooks) is a read the record's fields wait for:
  // a place sent before it would make that read wait for the place's fsync, a second durable
  // step before the create's own.
  const watching = new TaskStore(redis, {
    ...store.options,
    watchWebhooks: async ({ tenant }) => (await redis.sismember('tl:test:hooked', tenant)) === 1,
  });
  // A place the request's bucket held in memory (takeCreate), as the api's gate takes it.
  const reservation = await admission.limits.takeCreate('ordered');
  const commands = await sent(() => admission.create('ordered', reservation, write('ordered', watching)));
  const at = (match: (c: string[]) => boolean, what: string) => {
    const i = commands.findIndex(match);
    assert.ok(i >= 0, `${what} sent: ${JSON.stringify(commands)}`);
    return i;
  };
  const question = at((c) => c[0] === 'sismember', 'the webhook question');
  const place = at((c) => c[0] === 'evalsha' && c.includes('tl:api:active:{ordered}'), 'the place');
  const journal = at((c) => c[0] === 'zadd' && c[1] === 'tl:{sched}:intake', 'the journal entry');
  assert.ok(question < place, 'the place is sent after the read');
  assert.equal(journal, place + 1, "the place goes with the create's writes");
});

test("a create's place survives a Redis restart with its task; the request bucket is memory's alone", async () => {
  // A Redis of this test's own (a folder: one server even under a cluster run), restarted from its AOF.
  const own = await startRedis({ args: [] });
  const client = connectRedis(own.url, 'admission-restart-test');
  try {
    const ownStore = new TaskStore(client, {
      taskRetentionMs: 60_000,
      eventRetentionMs: 60_000,
      idempotencyTtlS: 86_400,
      idempotencyPendingMs: 30_000,
    });
    const limits = new TenantLimits(client, { ...admission.limits.settings });
    const ownAdmission = new Admission({
      store: ownStore,
      hub,
      holds: new CallHolds(client, 60_000, (err) => assert.fail(String(err))),
      limits,
      logger: createLogger({ service: 'test' }, 'error', () => undefined),
    });
    const { task } = await ownAdmission.create('durable', await limits.takeCreate('durable'), async (id) => ({
      task: await ownStore.create({ ...input('durable'), id, fresh: true }),
      replayed: false,
    }));
    assert.equal(await client.exists('tl:api:rate:{durable}'), 1);
    await own.kill();
    await own.restart();
    await until('Redis to answer after its restart', async () =>
      (await client.ping()) === 'PONG' ? true : undefined,
    );
    assert.deepEqual(
      await client.zrange('tl:api:active:{durable}', 0, -1),
      [task.id],
      'the place came back with its task',
    );
    assert.ok(await ownStore.get(task.id), 'the task came back');
    assert.equal(await client.exists('tl:api:rate:{durable}'), 0, 'the bucket starts full again');
  } finally {
    client.disconnect();
    await own.stop();
  }
});

test('a place given up while its task is still being written is taken again by the task', async () => {
  const reservation = await admission.limits.takeCreate('racing');
  await reservation.commit(null);
  assert.deepEqual(await redis.zrange('tl:api:active:{racing}', 0, -1), []);
  await reservation.commit(reservation.taskId);
  assert.deepEqual(await redis.zrange('tl:api:active:{racing}', 0, -1), [reservation.taskId]);
});

test('at the cap, a place whose task is still being written counts; one left by a create that died does not', async () => {
  const key = 'tl:api:active:{pruned}';
  const inFlight = await admission.limits.takeCreate('pruned');
  // A create that died a minute ago between its place and its record.
  await redis.zadd(key, Date.now() - 61_000, 'task_died');
  await admission.create('pruned', null, write('pruned'));
  await assert.rejects(
    admission.create('pruned', null, write('pruned')),
    (err) => err instanceof TasklineError && err.code === 'rate_limited',
  );
  const members = await redis.zrange(key, 0, -1);
  assert.ok(members.includes(inFlight.taskId), 'the create in flight keeps its place');
  assert.ok(!members.includes('task_died'), "!members.includes('task_died')");
  await inFlight.commit(null);
});

test('creates hold places up to the cap; past it a create is refused, or gets the task its earlier try made', async () => {
  const first = await admission.create('capped', null, write('capped'));
  await admission.create('capped', null, write('capped'));
  await assert.rejects(
    admission.create('capped', null, write('capped')),
    (err) => err instanceof TasklineError && err.code === 'rate_limited',
  );
  const replayed = await admission.create('capped', null, write('capped'), async () => first.task);
  assert.deepEqual([replayed.task.id, replayed.replayed], [first.task.id, true]);
  const members = await redis.zrange('tl:api:active:{capped}', 0, -1);
  assert.equal(members.length, 2, 'the two tasks, no reservation left behind');
  assert.ok(
    members.every((m) => m.startsWith('task_')),
    "members.every((m) => m.startsWith('task_'))",
  );
});

test('a create that fails frees its place at once', async () => {
  await assert.rejects(
    admission.create('failing', null, () => Promise.reject(new Error('write failed'))),
    /write failed/,
  );
  assert.deepEqual(await redis.zrange('tl:api:active:{failing}', 0, -1), []);
});

test('awaitEnd answers with the task as it ended, an end already written included', async () => {
  const { task } = await admission.create('ending', null, write('ending'));
  const waiting = admission.awaitEnd(task, new AbortController().signal);
  await store.cancel(task.id, task.tenant);
  assert.equal((await waiting)?.status, 'cancelled');
  assert.equal((await admission.awaitEnd(task, new AbortController().signal))?.status, 'cancelled');
});

test('a caller that leaves cancels its task (settled waits for the write); one that stopped listening does not', async () => {
  const { task } = await admission.create('leaving', null, write('leaving'));
  const left = new AbortController();
  admission.cancelOnLeave(task, left.signal);
  const waiting = admission.awaitEnd(task, left.signal);
  left.abort(new Error('caller left'));
  await assert.rejects(waiting, /caller left/);
  await admission.settled();
  assert.equal((await store.get(task.id))?.status, 'cancelled');

  const { task: kept } = await admission.create('staying', null, write('staying'));
  const gone = new AbortController();
  admission.cancelOnLeave(kept, gone.signal)();
  gone.abort();
  await admission.settled();
  assert.equal((await store.get(kept.id))?.status, 'queued');
});

const HELD = 'tl:{sched}:held';

test('a held call is leased in Redis until it ends or its caller leaves', async () => {
  const { task } = await admission.create('holding', null, write('holding'));
  const holding = new AbortController();
  const stop = admission.cancelOnLeave(task, holding.signal);
  const deadline = await until('the lease', async () => (await redis.zscore(HELD, task.id)) ?? undefined);
  assert.ok(Number(deadline) > Date.now() + 50_000, 'leased for the lease time');
  stop();
  await until('the lease to go', async () =>
    (await redis.zscore(HELD, task.id)) === null ? true : undefined,
  );
  assert.equal((await store.get(task.id))?.status, 'queued');

  const { task: left } = await admission.create('holding', null, write('holding'));
  const leaving = new AbortController();
  admission.cancelOnLeave(left, leaving.signal);
  await until('the lease', async () => (await redis.zscore(HELD, left.id)) ?? undefined);
  leaving.abort();
  await admission.settled();
  assert.equal((await store.get(left.id))?.status, 'cancelled');
  assert.equal(await redis.zscore(HELD, left.id), null);
});

test('the sweep cancels the tasks of lapsed leases only, and drops the entries of ended ones', async () => {
  const create = async (tenant: string) => (await admission.create(tenant, null, write(tenant))).task;
  const [lapsed, live, ended] = [await create('swept-1'), await create('swept-2'), await create('swept-3')];
  await store.cancel(ended.id, ended.tenant);
  // A replica gone (its lease in the past), one still renewing (in the future).
  await redis.zadd(HELD, Date.now() - 1, lapsed.id, Date.now() + 60_000, live.id, Date.now() - 1, ended.id);
  assert.deepEqual(await store.sweepHeldCalls(), [lapsed.id]);
  assert.equal((await store.get(lapsed.id))?.status, 'cancelled');
  assert.equal((await store.get(live.id))?.status, 'queued');
  assert.deepEqual(await redis.zrange(HELD, 0, -1), [live.id]);
  await redis.zrem(HELD, live.id);
});

test("an idempotent create writes its task under its place's id too; its retry gets that task, and frees its own place", async () => {
  const create = async (key: string) => {
    const place = await admission.limits.takeCreate('idem');
    const created = await admission.create(
      'idem',
      place,
      (id) => store.createIdempotent({ ...input('idem'), id, fresh: true }, key, 'print'),
      () => store.findIdempotent('idem', key, 'print'),
    );
    return { place: place.taskId, ...created };
  };
  const first = await create('k1');
  assert.equal(first.replayed, false);
  assert.equal(first.task.id, first.place, 'no swap of the place for another id');
  const retry = await create('k1');
  assert.deepEqual([retry.task.id, retry.replayed], [first.task.id, true]);
  assert.deepEqual(await redis.zrange('tl:api:active:{idem}', 0, -1), [first.task.id]);
});

test("usage counts what the cap would: a tenant's unfinished tasks and creates in flight, not tasks that ended", async () => {
  const ended = await admission.create('usage', null, write('usage'));
  await store.cancel(ended.task.id, 'usage');
  assert.equal((await store.get(ended.task.id))?.status, 'cancelled');
  const open = await admission.create('usage', null, write('usage'));
  const inFlight = await admission.limits.takeCreate('usage');
  await redis.zadd('tl:api:active:{usage}', Date.now() - 61_000, 'task_died');
  // A stream of a replica that died: its lease lapsed, so it no longer counts against the cap.
  await redis.zadd('tl:api:streams:{usage}', Date.now() - 1000, 'lapsed');
  const usage = (await admission.limits.usage(['usage'])).get('usage')!;
  assert.deepEqual(usage.unfinished.sort(), [open.task.id, inFlight.taskId].sort());
  assert.equal(usage.unfinishedTasks, 2);
  assert.equal(usage.streams, 0);
  await inFlight.commit(null);
});

test("a tenant's unfinished-task set expires unless its creates go on: no key is kept for every tenant that ever created", async () => {
  const tenants = Array.from({ length: 50 }, (_, i) => `gone-${i}`);
  for (const tenant of tenants) {
    const created = await admission.create(tenant, null, write(tenant));
    await store.cancel(created.task.id, tenant);
  }
  // A place taken without a request token, and one swapped for another task's id (a replayed create).
  const reserved = await admission.limits.reserveTask('gone-0');
  await reserved.commit(null);
  const swapped = await admission.limits.takeCreate('gone-1');
  await swapped.commit('task_replayed');
  await store.sweepActive(0, async () => true);
  for (const tenant of tenants) {
    const ttl = await redis.pttl(`tl:api:active:{${tenant}}`);
    assert.ok(ttl === -2 || (ttl > 0 && ttl <= ACTIVE_TTL_MS), `${tenant}: gone or expiring (${ttl})`);
  }
});

test('a stream still open after its slot lapsed (Redis away past the lease) counts against the cap again at its next renewal', async () => {
  const slot = await admission.limits.openStream('outage');
  // What an outage longer than the lease leaves: the set expired, or another open pruned the entry.
  await redis.del('tl:api:streams:{outage}');
  await slot.renew();
  assert.equal((await admission.limits.usage(['outage'])).get('outage')!.streams, 1);
  await admission.limits.openStream('outage');
  await assert.rejects(admission.limits.openStream('outage'), { code: 'rate_limited' });
});
