import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { bounded, startRedis, startRedisProxy } from '@taskline/testing';
import {
  connectRedis,
  EventHub,
  isRedisUnavailable,
  TaskStore,
  TasklineError,
  type StoredEvent,
} from '../src/index.js';
import { taskKeys } from '../src/keys.js';
import { defaults, harness, newTask, restartLoadingSlowly, until, type Harness } from './helpers.js';

let h: Harness;
let hub: EventHub;
before(async () => {
  h = await harness();
  hub = new EventHub(h.store);
});
after(async () => {
  hub.close();
  await h.close();
});

test('2,000 readers on one connection each get every event once, in order', async () => {
  const task = await h.store.create(newTask());
  const seen: number[][] = Array.from({ length: 2000 }, () => []);
  const subs = await Promise.all(seen.map((list) => hub.subscribe(task.id, 0, (e) => list.push(e.seq))));
  await h.store.claim(task.id, 'w1', 60_000);
  await h.store.start(task.id, 1);
  for (let i = 0; i < 20; i++) {
    await h.store.append(
      task.id,
      1,
      [i],
      [{ type: 'response.output_text.delta', data: { delta: String(i) } }],
    );
  }
  await h.store.finish(task.id, 1, { status: 'succeeded', result: null });
  const total = (await h.store.get(task.id))!.seq;
  await until('the events to arrive', () => seen.every((l) => l.length === total) || undefined);
  for (const list of seen)
    assert.deepEqual(
      list,
      Array.from({ length: total }, (_, i) => i + 1),
    );
  assert.equal(hub.readers, 2000);
  subs.forEach((s) => s.close());
  assert.equal(hub.readers, 0);
});

test('readers attaching together all see an event written while they attach', async () => {
  for (let round = 0; round < 30; round++) {
    const task = await h.store.create(newTask());
    const seen: number[][] = [[], [], []];
    const attaching = seen.map((list) => hub.subscribe(task.id, 0, (e) => list.push(e.seq)));
    const claimed = h.store.claim(task.id, 'w1', 60_000);
    const subs = await Promise.all(attaching);
    await claimed;
    await until('the events to arrive', () => seen.every((l) => l.length === 2) || undefined);
    for (const list of seen) assert.deepEqual(list, [1, 2]);
    subs.forEach((s) => s.close());
  }
});

/**
 * The hub's subscriber connection for a task (the one Redis's, or the connection to the cluster
 * primary that owns the task's slot), to slow it down or cut it as a network fault would.
 */
async function subscriberOf(of: EventHub, id: string): Promise<import('ioredis').Redis> {
  const links = (
    of as unknown as {
      links: { ready(): Promise<void>; linkFor(channel: string): { conn: import('ioredis').Redis } };
    }
  ).links;
  await links.ready();
  return links.linkFor(taskKeys(id).channel).conn;
}

test('an event published after the history read, before the channel is live, still arrives', async () => {
  const task = await h.store.create(newTask());
  // The history read answers before the subscription does, and the task moves in between.
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let moved = false;
  const store = Object.create(h.store) as typeof h.store;
  store.events = async (id, after) => {
    const history = await h.store.events(id, after);
    if (!moved) {
      moved = true;
      await h.store.claim(task.id, 'w1', 60_000); // event 2, announced to no one
      open();
    }
    return history;
  };
  const slow = new EventHub(store);
  const subscriber = (await subscriberOf(slow, task.id)) as unknown as {
    ssubscribe(...a: string[]): Promise<unknown>;
  };
  const ssubscribe = subscriber.ssubscribe.bind(subscriber);
  subscriber.ssubscribe = async (...channels) => {
    await gate;
    return ssubscribe(...channels);
  };
  const got: number[] = [];
  const s = await slow.subscribe(task.id, 0, (e) => got.push(e.seq));
  await until('the event to arrive', () => got.length === 2 || undefined);
  assert.deepEqual(got, [1, 2]);
  s.close();
  slow.close();
});

test("one script's events reach a live reader whole and in order, whatever their text", async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'w1', 60_000);
  await h.store.start(task.id, 1);
  const at = (await h.store.get(task.id))!.seq;
  const got: StoredEvent[] = [];
  const s = await hub.subscribe(task.id, at, (e) => got.push(e));
  const texts = ['line one\nline two', '\u2028 \u00e9 "quoted" \\n', ''];
  await h.store.append(
    task.id,
    1,
    [],
    texts.map((delta) => ({ type: 'response.output_text.delta', data: { delta } })),
  );
  await until('the events to arrive', () => got.length === 3 || undefined);
  assert.deepEqual(
    got.map((e) => (JSON.parse(e.data) as { delta: string }).delta),
    texts,
  );
  assert.deepEqual(
    got.map((e) => e.seq),
    [at + 1, at + 2, at + 3],
  );
  assert.ok(
    got.every((e) => e.type === 'response.output_text.delta' && (e.writtenAt ?? 0) > 0),
    "got.every((e) => e.type === 'response.output_text.delta' && (e.writtenAt ?? 0) > 0)",
  );
  s.close();
});

test('a reader resuming mid-stream gets exactly the missing events, then live ones', async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'w1', 60_000);
  await h.store.start(task.id, 1);
  const got: StoredEvent[] = [];
  const s = await hub.subscribe(task.id, 2, (e) => got.push(e));
  assert.deepEqual(
    got.map((e) => e.seq),
    [3],
  );
  await h.store.append(task.id, 1, [], [{ type: 'response.output_text.delta', data: { delta: 'x' } }]);
  await until('the events to arrive', () => got.length === 2 || undefined);
  assert.deepEqual(
    got.map((e) => e.seq),
    [3, 4],
  );
  s.close();
});

test('a missed live message is filled from the stream', async () => {
  const task = await h.store.create(newTask());
  const got: number[] = [];
  const s = await hub.subscribe(task.id, 0, (e) => got.push(e.seq));
  // Write an event without announcing it, as if the announcement was lost in a reconnect.
  await h.redis.hincrby(taskKeys(task.id).task, 'seq', 1);
  await h.redis.xadd(taskKeys(task.id).events, '2-0', 'type', 'response.in_progress', 'data', '{}');
  await h.store.claim(task.id, 'w1', 60_000);
  await until('the events to arrive', () => got.length === 3 || undefined);
  assert.deepEqual(got, [1, 2, 3]);
  s.close();
});

test("a last event whose announcement was lost, nothing after it, reaches its readers by the hub's own read", async () => {
  // A failover can drop the final event's announcement with the subscriber connection: no later
  // event would show the gap, and a reader (a tasks/result stream) would wait for good.
  const checking = new EventHub(h.store, { verifyMs: 100 });
  try {
    const task = await h.store.create(newTask());
    const got: number[] = [];
    const s = await checking.subscribe(task.id, 0, (e) => got.push(e.seq));
    await h.redis.hincrby(taskKeys(task.id).task, 'seq', 1);
    await h.redis.xadd(taskKeys(task.id).events, '2-0', 'type', 'response.completed', 'data', '{}');
    await until('the unannounced event to arrive', () => got.length === 2 || undefined, 10_000);
    assert.deepEqual(got, [1, 2]);
    s.close();
  } finally {
    checking.close();
  }
});

test('resuming before the kept history is event_history_expired', async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'w1', 60_000);
  await h.redis.del(taskKeys(task.id).events);
  await assert.rejects(
    hub.subscribe(task.id, 0, () => undefined),
    (e: unknown) => e instanceof TasklineError && e.code === 'event_history_expired',
  );
  assert.equal(hub.readers, 0);
});

test('readers keep receiving, and new readers can attach, after Redis restarts from its AOF', async () => {
  h.redis.on('error', () => undefined);
  const task = await h.store.create(newTask());
  const got: number[] = [];
  const s = await hub.subscribe(task.id, 0, (e) => got.push(e.seq));
  await h.server.kill();
  await h.server.restart();
  // Writes and subscriptions right after the restart, while the hub's connection comes back.
  await until('Redis to take writes again', () =>
    h.store.claim(task.id, 'w1', 60_000).then(
      () => true,
      () => undefined,
    ),
  );
  const late: number[] = [];
  const s2 = await until('a new reader to attach after the restart', () =>
    hub.subscribe(task.id, 0, (e) => late.push(e.seq)).catch(() => undefined),
  );
  await h.store.start(task.id, 1);
  await until('the events to arrive', () => (got.length === 3 && late.length === 3) || undefined);
  assert.deepEqual(got, [1, 2, 3]);
  assert.deepEqual(late, [1, 2, 3]);
  s.close();
  s2.close();
});

/**
 * Readers attach, 50 ms apart, while a restarted Redis loads its AOF, through a hub whose link was
 * live before the restart (`fresh` false: it reconnects) or one opened while Redis loads (`fresh`:
 * a new link, as one to a node a failover made primary). Connected but not ready, ioredis repeats
 * its ready check (INFO) meanwhile: a subscription sent then puts the connection in subscriber mode
 * and the next check is refused. Each attach must succeed or fail as Redis unavailable (503), and
 * nothing may be left an unhandled rejection (it would end the process).
 */
async function attachWhileLoading(fresh: boolean): Promise<void> {
  // One Redis under `pnpm test:cluster` too (a start with arguments): the data to load is on it.
  const server = await startRedis({ args: [] });
  const redis = connectRedis(server.url, 'test');
  redis.on('error', () => undefined);
  const store = new TaskStore(redis, defaults);
  const hubs = [new EventHub(store)];
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown) => unhandled.push(err);
  process.on('unhandledRejection', onUnhandled);
  try {
    const tasks = await Promise.all(Array.from({ length: 40 }, () => store.create(newTask())));
    const first = await hubs[0]!.subscribe(tasks[0]!.id, 0, () => undefined);
    // Loading the AOF after the restart takes seconds (settles once the load is done).
    const { restarting } = await restartLoadingSlowly(server, redis, 30_000);
    await until('the store connected to the loading Redis', () =>
      redis.status === 'connect' ? true : undefined,
    );
    if (fresh) hubs.unshift(new EventHub(store));
    const link = await subscriberOf(hubs[0]!, tasks[0]!.id);
    // What makes the refusal: a subscription sent on a connection not ready yet (ioredis writes
    // SSUBSCRIBE at once while it checks, as a command allowed during loading).
    const sentWhile = new Set<string>();
    const ssubscribe = link.ssubscribe.bind(link) as (...channels: string[]) => Promise<unknown>;
    (link as unknown as { ssubscribe: typeof ssubscribe }).ssubscribe = (...channels) => {
      sentWhile.add(link.status);
      return ssubscribe(...channels);
    };
    await until('the subscriber connection connected to the loading Redis', () =>
      link.status === 'connect' ? true : undefined,
    );
    const attaching: Promise<{ s: { close(): void } | null; err: unknown }>[] = [];
    for (const task of tasks.slice(1)) {
      attaching.push(
        hubs[0]!
          .subscribe(task.id, 0, () => undefined)
          .then(
            (s) => ({ s, err: null }),
            (err: unknown) => ({ s: null, err }),
          ),
      );
      await new Promise((r) => setTimeout(r, 50));
    }
    const attached = await Promise.all(attaching);
    await restarting;
    // A moment for a rejection nobody awaited to be reported.
    await new Promise((r) => setTimeout(r, 200));
    for (const { s, err } of attached) {
      s?.close();
      assert.ok(
        err === null || isRedisUnavailable(err),
        `attaching failed with ${String(err)}, not as unavailable`,
      );
    }
    assert.deepEqual([...sentWhile], ['ready'], 'subscriptions are sent on a ready connection only');
    assert.deepEqual(unhandled.map(String), [], 'no unhandled rejection');
    first.close();
  } finally {
    process.off('unhandledRejection', onUnhandled);
    for (const each of hubs) each.close();
    redis.disconnect();
    await server.stop();
  }
}

test('readers attaching while a restarted Redis loads its AOF attach, or fail only as Redis unavailable (503)', () =>
  attachWhileLoading(false));

test('readers of a hub opened while Redis loads its AOF attach, or fail only as Redis unavailable (503)', () =>
  attachWhileLoading(true));

test('a reader attaching while the connection is down, its history read before the final event, still gets it', async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'w1', 60_000, { start: true });
  // The history read of the second reader answers, then waits: the final event is written while
  // the subscriber connection is down, and the connection is back before that reader attaches.
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let readDone!: () => void;
  const read = new Promise<void>((r) => (readDone = r));
  const store = Object.create(h.store) as typeof h.store;
  let hold = false;
  store.events = async (id, after) => {
    const history = await h.store.events(id, after);
    if (hold) {
      readDone();
      await held;
    }
    return history;
  };
  const gapHub = new EventHub(store);
  const first: number[] = [];
  const second: number[] = [];
  const a = await gapHub.subscribe(task.id, 0, (e) => first.push(e.seq));
  hold = true;
  const attaching = gapHub.subscribe(task.id, 0, (e) => second.push(e.seq));
  await read;
  // Cut the subscriber; the final event is published to no one.
  (await subscriberOf(gapHub, task.id)).stream.destroy();
  await h.store.finish(task.id, 1, { status: 'succeeded', result: null });
  const total = (await h.store.get(task.id))!.seq;
  await until('the first reader to catch up after the reconnect', () => first.length === total || undefined);
  release();
  const b = await attaching;
  await until('the second reader to get the final event', () => second.length === total || undefined);
  assert.deepEqual(
    second,
    Array.from({ length: total }, (_, i) => i + 1),
  );
  a.close();
  b.close();
  gapHub.close();
});

test('an event written after the catch-up read of a reconnect, before the channel is subscribed again, arrives', async () => {
  const task = await h.store.create(newTask());
  await h.store.claim(task.id, 'w1', 60_000, { start: true });
  const gapHub = new EventHub(h.store);
  const sub = await subscriberOf(gapHub, task.id);
  const got: number[] = [];
  const s = await gapHub.subscribe(task.id, 0, (e) => got.push(e.seq));
  assert.deepEqual(got, [1, 2, 3]);
  // The resubscription after the reconnect is slow to take effect; the final event lands meanwhile.
  const ssubscribe = sub.ssubscribe.bind(sub);
  let resubscribing!: () => void;
  const seen = new Promise<void>((r) => (resubscribing = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  (sub as unknown as { ssubscribe: (...c: string[]) => Promise<unknown> }).ssubscribe = async (
    ...channels
  ) => {
    resubscribing();
    await gate;
    return ssubscribe(...channels);
  };
  sub.stream.destroy();
  await seen;
  await h.store.finish(task.id, 1, { status: 'succeeded', result: null });
  release();
  const total = (await h.store.get(task.id))!.seq;
  await until('the final event to arrive', () => got.length === total || undefined);
  assert.deepEqual(
    got,
    Array.from({ length: total }, (_, i) => i + 1),
  );
  s.close();
  gapHub.close();
});

// The proxy fronts one Redis (a cluster client would learn the nodes' own addresses and go round
// it), so the test starts one of its own, on a cluster run too.
test('after short connection drops (every connection reset, connects refused a moment) new readers attach and get live events', async () => {
  const server = await startRedis({ args: [] });
  const direct = new TaskStore(connectRedis(server.url, 'test-direct'), defaults);
  const proxy = await startRedisProxy(server.url);
  // As the api connects: commands give up after the command timeout instead of waiting forever.
  const redis = connectRedis(proxy.url, 'test-drops', { commandTimeout: 5000 });
  redis.on('error', () => undefined);
  const dropped = new EventHub(new TaskStore(redis, defaults));
  try {
    const task = await direct.create(newTask());
    const got: number[] = [];
    const s = await dropped.subscribe(task.id, 0, (e) => got.push(e.seq));
    // Each refusal window outlasts the client's first reconnect delays, so some reconnects are
    // accepted and reset at once: the hub's connection must come back from every one of them.
    for (let i = 0; i < 10; i++) await proxy.outage(200);
    const late: number[] = [];
    // A stuck connection leaves a subscription waiting for good: each try is bounded.
    const attach = () => dropped.subscribe(task.id, 0, (e) => late.push(e.seq));
    const s2 = await until('a new reader to attach after the drops', () =>
      bounded('a subscription', 10_000, attach()).catch(() => undefined),
    );
    await direct.claim(task.id, 'w1', 60_000);
    await until('the live events to arrive', () => (got.length === 2 && late.length === 2) || undefined);
    assert.deepEqual(got, [1, 2]);
    assert.deepEqual(late, [1, 2]);
    s.close();
    s2.close();
  } finally {
    dropped.close();
    redis.disconnect();
    direct.redis.disconnect();
    await proxy.close();
    await server.stop();
  }
});
