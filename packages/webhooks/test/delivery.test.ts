/**
 * Webhook deliveries end to end on a real Redis and real HTTP receivers that verify signatures
 * with the `standardwebhooks` package: order, retries on the documented schedule, redirects.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import type { Redis } from 'ioredis';
import { connectQueueRedis, connectRedis, readOutboxes, TaskStore } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { startRedis, until, type RedisServer } from '@taskline/testing';
import { Queue } from 'bullmq';
import {
  DeliveryWorkers,
  EndpointStore,
  endpointQueue,
  endpointQueuePrefix,
  hookKeys,
  Relay,
  retrySchedule,
  WebhookRole,
  webhookWatch,
} from '../src/index.js';
import { webhookHeaders } from '../src/sign.js';

interface Received {
  at: number;
  id: string;
  body: { type: string; data: { task: { id: string; status: string }; event: { sequence_number: number } } };
}

/** An HTTP receiver: `answer` decides each response; verified deliveries are kept. */
async function receiver(
  answer: (n: number, req: IncomingMessage, res: ServerResponse) => void = (_n, _r, res) => res.end('ok'),
) {
  const got: Received[] = [];
  let secret = '';
  let n = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = new Webhook(secret).verify(raw, req.headers as Record<string, string>) as Received['body'];
      got.push({ at: Date.now(), id: String(req.headers['webhook-id']), body });
      answer(++n, req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    got,
    useSecret: (s: string) => (secret = s),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let server: RedisServer;
let redis: Redis;
let store: TaskStore;
let endpoints: EndpointStore;
let role: WebhookRole;
const logger = createLogger({ test: 'webhooks' }, 'warn', () => undefined);
const schedule = retrySchedule(100, 10_000, 6);
/** Every wait the shared role's delivery workers took from the schedule, in order. */
const delays: number[] = [];
const scheduled = schedule.delay;
schedule.delay = (made) => {
  const ms = scheduled(made);
  delays.push(ms);
  return ms;
};
const reach = { allowHttp: true, allowPrivate: true };

before(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, 'test');
  store = new TaskStore(redis, {
    taskRetentionMs: 60_000,
    eventRetentionMs: 60_000,
    idempotencyTtlS: 600,
    idempotencyPendingMs: 30_000,
    watchWebhooks: webhookWatch(redis),
  });
  endpoints = new EndpointStore(redis, reach, 60_000);
  const queueRedis = connectQueueRedis(server.url, 'test-queue');
  role = new WebhookRole({
    relay: { redis, queueRedis, store, endpoints, schedule, logger, keepMs: 3_600_000 },
    delivery: {
      redis,
      connect: () => connectQueueRedis(server.url, 'test-worker'),
      endpoints,
      schedule,
      limits: { reach, timeoutMs: 2000, maxResponseBytes: 4096 },
      logger,
      concurrency: 4,
      disableAfter: 50,
    },
    relayMs: 30,
    refreshMs: 100,
    logger,
  });
  role.start();
});

after(async () => {
  await role.stop();
  redis.disconnect();
  await server.stop();
});

/** Runs a task through its whole life: queued, loading, running, a delta, succeeded. */
async function runTask(tenant: string, s: TaskStore = store) {
  const task = await s.create({
    tenant,
    kind: 'response',
    model: 'm',
    onRestart: 'fail',
    request: { input: 'hi' },
  });
  await s.claim(task.id, 'w1', 10_000);
  await s.start(task.id, 1);
  await s.append(task.id, 1, [1], [{ type: 'response.output_text.delta', data: { delta: 'a' } }]);
  await s.finish(task.id, 1, { status: 'succeeded', result: { status: 'completed' } });
  return task;
}

test('every status change of a task arrives once, signed, in order per task', async () => {
  const r = await receiver();
  const ep = await endpoints.create('tenant-order', { url: r.url });
  r.useSecret(ep.secret);
  await new Promise((res) => setTimeout(res, 1100)); // the create path's cached answer lapses
  const tasks = await Promise.all([
    runTask('tenant-order'),
    runTask('tenant-order'),
    runTask('tenant-order'),
  ]);
  await until('12 deliveries', () => (r.got.length >= 12 ? true : undefined), 10_000);
  await new Promise((res) => setTimeout(res, 300));
  assert.equal(r.got.length, 12, 'four status changes of three tasks, each once');
  for (const task of tasks) {
    const mine = r.got.filter((g) => g.body.data.task.id === task.id);
    assert.deepEqual(
      mine.map((g) => g.body.type),
      ['task.status', 'task.status', 'task.status', 'task.ended'],
    );
    const seqs = mine.map((g) => g.body.data.event.sequence_number);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      'in order',
    );
    assert.deepEqual(
      mine.map((g) => (g.body.data.event as unknown as { task_status: string }).task_status),
      ['queued', 'loading', 'running', 'succeeded'],
    );
    assert.equal(new Set(mine.map((g) => g.id)).size, 4, 'one webhook-id per event');
  }
  await r.close();
});

test('a receiver answering 500 three times then 200 gets the event on the fourth attempt, on schedule', async () => {
  const r = await receiver((n, _req, res) => {
    res.statusCode = n <= 3 ? 500 : 200;
    res.end();
  });
  const ep = await endpoints.create('tenant-retry', { url: r.url, events: ['task.ended'] });
  r.useSecret(ep.secret);
  await new Promise((res) => setTimeout(res, 1100));
  // The only failing delivery of the run so far: every wait taken from now on is this one's.
  delays.length = 0;
  await runTask('tenant-retry');
  await until('4 attempts', () => (r.got.length >= 4 ? true : undefined), 10_000);
  const gaps = r.got.slice(1).map((g, i) => g.at - r.got[i]!.at);
  // The schedule's waits: 100, 200, 400 ms (base 100, doubling), each within a fifth either way.
  // Each attempt came no sooner than its wait (less a timer's rounding); how much later depends
  // on the host (the attempt's own Redis and HTTP round trips), so that is bounded loosely.
  assert.equal(delays.length, 3, `waits ${delays.join(', ')}`);
  [100, 200, 400].forEach((want, i) => {
    const wait = delays[i]!;
    assert.ok(wait >= want * 0.8 && wait <= want * 1.2, `wait ${i + 1}: ${wait} ms, want ~${want}`);
    assert.ok(
      gaps[i]! >= wait - 20 && gaps[i]! <= wait + 5000,
      `gap ${i + 1}: ${gaps[i]} ms after a wait of ${wait} ms`,
    );
  });
  assert.equal(new Set(r.got.map((g) => g.id)).size, 1, 'the same webhook-id on every attempt');
  await new Promise((res) => setTimeout(res, 500));
  assert.equal(r.got.length, 4, 'delivered: no fifth attempt');
  await r.close();
});

test('a redirect is not followed: the attempt fails with its 3xx and the target hears nothing', async () => {
  const target = await receiver();
  const r = await receiver((_n, _req, res) => {
    res.writeHead(307, { location: target.url });
    res.end();
  });
  const ep = await endpoints.create('tenant-redirect', { url: r.url, events: ['task.ended'] });
  r.useSecret(ep.secret);
  target.useSecret(ep.secret);
  await new Promise((res) => setTimeout(res, 1100));
  await runTask('tenant-redirect');
  // The attempt log is written once the response is read: wait on it, not on the receiver.
  const log = await until(
    '2 logged attempts',
    async () => {
      const lines = await redis.lrange(hookKeys.attempts('tenant-redirect', ep.id), 0, -1);
      return lines.length >= 2
        ? lines.map((l) => JSON.parse(l) as { status: number; ok: boolean })
        : undefined;
    },
    10_000,
  );
  assert.ok(
    log.every((a) => a.status === 307 && !a.ok),
    'log.every((a) => a.status === 307 && !a.ok)',
  );
  assert.equal(target.got.length, 0, 'the redirect target heard nothing');
  await Promise.all([r.close(), target.close()]);
});

test('an endpoint that keeps failing is disabled, its tenant told on its other endpoints and its read; enabling resumes its deliveries', async () => {
  let failing = true;
  const r = await receiver((_n, _req, res) => {
    res.statusCode = failing ? 503 : 200;
    res.end();
  });
  // The tenant's other endpoint, healthy, subscribed to task ends only: it is told all the same.
  const watcher = await receiver();
  const disabling = new WebhookRole({
    relay: {
      redis,
      queueRedis: connectQueueRedis(server.url, 'relay-2'),
      store,
      endpoints,
      schedule,
      logger,
      keepMs: 3_600_000,
    },
    delivery: {
      redis,
      connect: () => connectQueueRedis(server.url, 'worker-2'),
      endpoints,
      schedule: retrySchedule(20, 20, 100),
      limits: { reach, timeoutMs: 2000, maxResponseBytes: 4096 },
      logger,
      concurrency: 1,
      disableAfter: 3,
    },
    relayMs: 30,
    refreshMs: 100,
    logger,
  });
  await role.stop(); // this test's own role, with its low threshold, takes over
  disabling.start();
  try {
    const ep = await endpoints.create('tenant-disable', { url: r.url, events: ['task.ended'] });
    r.useSecret(ep.secret);
    const other = await endpoints.create('tenant-disable', { url: watcher.url, events: ['task.ended'] });
    watcher.useSecret(other.secret);
    await new Promise((res) => setTimeout(res, 1100));
    await runTask('tenant-disable');
    const disabled = await until(
      'the endpoint disabled',
      async () => {
        const now = await endpoints.get('tenant-disable', ep.id);
        return now.enabled ? undefined : now;
      },
      10_000,
    );
    assert.equal(disabled.disabledReason, 'failing');
    assert.ok(
      typeof disabled.disabledAt === 'number' && disabled.disabledAt <= Date.now(),
      "typeof disabled.disabledAt === 'number' && disabled.disabledAt <= Date.now()",
    );
    const notice = await until(
      'the other endpoint told',
      async () => watcher.got.find((m) => (m.body.type as string) === 'webhook.endpoint_disabled'),
      10_000,
    );
    const told = (notice.body as unknown as { data: { endpoint: Record<string, unknown>; failures: number } })
      .data;
    assert.equal(told.endpoint.id, ep.id);
    assert.equal(told.endpoint.url, r.url);
    assert.equal(told.endpoint.enabled, false);
    assert.equal(told.endpoint.disabled_reason, 'failing');
    assert.equal(told.endpoint.disabled_at, Math.floor(disabled.disabledAt! / 1000));
    assert.ok(told.failures >= 3, 'told.failures >= 3');
    assert.equal(notice.id, `msg_${ep.id}_disabled_${disabled.disabledAt}`);
    const attempts = r.got.length;
    assert.ok(attempts >= 3, `${attempts} attempts before it was disabled`);
    await new Promise((res) => setTimeout(res, 400));
    assert.ok(r.got.length <= attempts + 1, 'no more attempts once disabled');
    failing = false;
    await endpoints.update('tenant-disable', ep.id, { enabled: true });
    await until(
      'delivered after re-enabling',
      () => (r.got.length > attempts && !failing ? true : undefined),
      10_000,
    );
    assert.equal((await endpoints.get('tenant-disable', ep.id)).disabledAt, null);
    // Told once: the disabled endpoint itself heard nothing of it, the other one a single message.
    const notices = (got: Received[]) =>
      got.filter((m) => (m.body.type as string) === 'webhook.endpoint_disabled');
    assert.equal(notices(watcher.got).length, 1);
    assert.equal(notices(r.got).length, 0);
  } finally {
    await disabling.stop();
    await r.close();
    await watcher.close();
  }
});

test('after a rotation both secrets verify during the overlap (two signatures), the new one alone after it', async () => {
  let now = Date.now();
  const clocked = new EndpointStore(redis, reach, 60_000, () => now);
  const created = await clocked.create('tenant-rotate', { url: 'https://hooks.example.com/r' });
  const rotated = await clocked.rotate('tenant-rotate', created.id);
  const body = JSON.stringify({ type: 'task.status' });
  const sign = async () => {
    const secrets = clocked.signing(await clocked.get('tenant-rotate', created.id));
    return webhookHeaders(secrets, 'msg_x', Math.floor(Date.now() / 1000), body);
  };
  const during = await sign();
  assert.equal(during['webhook-signature'].split(' ').length, 2);
  assert.doesNotThrow(() => new Webhook(created.secret).verify(body, during));
  assert.doesNotThrow(() => new Webhook(rotated.secret).verify(body, during));
  now += 60_001;
  const later = await sign();
  assert.throws(() => new Webhook(created.secret).verify(body, later));
  assert.doesNotThrow(() => new Webhook(rotated.secret).verify(body, later));
});

/**
 * A tenant's endpoint on a fresh receiver, and a relay and delivery workers of the test's own
 * (the shared role is stopped by now) with fast retries.
 */
async function ownRole(name: string) {
  const tenant = `tenant-${name}`;
  const r = await receiver();
  const ep = await endpoints.create(tenant, { url: r.url });
  r.useSecret(ep.secret);
  // Many quick attempts: the relay's job options bound them, the worker's schedule spaces them.
  const fast = retrySchedule(50, 200, 100);
  const relay = new Relay({
    redis,
    queueRedis: connectQueueRedis(server.url, `relay-${name}`),
    store,
    endpoints,
    schedule: fast,
    logger,
    keepMs: 3_600_000,
  });
  const delivery = new DeliveryWorkers({
    redis,
    connect: () => connectQueueRedis(server.url, `worker-${name}`),
    endpoints,
    schedule: fast,
    limits: { reach, timeoutMs: 2000, maxResponseBytes: 4096 },
    logger,
    concurrency: 1,
    disableAfter: 50,
  });
  const stop = async () => {
    await delivery.shutdown();
    await relay.shutdown();
    await r.close();
  };
  return { tenant, r, ep, relay, delivery, stop };
}

test('an attempt that cannot read its endpoint (a Redis error) is retried, never completed undelivered', async () => {
  const { tenant, r, ep, relay, delivery, stop } = await ownRole('unreadable');
  const queue = new Queue(endpointQueue(ep.id), {
    connection: connectQueueRedis(server.url, 'queue-unreadable') as never,
    prefix: endpointQueuePrefix(ep.id),
  });
  const key = hookKeys.endpoints(tenant);
  try {
    await queue.pause();
    await new Promise((res) => setTimeout(res, 1100)); // the create path's cached answer lapses
    const task = await runTask(tenant);
    const queued = await relay.pass();
    assert.ok(queued >= 3, `${queued} messages queued`);
    await delivery.refresh();
    // The endpoint cannot be read: its hash is moved aside and its key holds a string (WRONGTYPE).
    await redis.rename(key, `${key}:aside`);
    await redis.set(key, 'not a hash');
    await queue.resume();
    const first = `msg_${task.id}_1`;
    await until('the first message tried against the unreadable endpoint', async () => {
      const job = await queue.getJob(first);
      return job && (job.attemptsMade > 0 || job.finishedOn) ? true : undefined;
    });
    // One RENAME puts it back over the string: deleted first, an attempt in between would find
    // no endpoint and rightly complete its job undelivered.
    await redis.rename(`${key}:aside`, key);
    // In order per task: the final message arrives only after every one before it.
    const mine = () => r.got.filter((m) => m.body.data.task.id === task.id);
    await until('every message delivered once the endpoint reads again', () =>
      mine().some((m) => m.body.type === 'task.ended') ? true : undefined,
    );
    assert.ok(
      mine().some((m) => m.id === first),
      'mine().some((m) => m.id === first)',
    );
  } finally {
    await queue.close();
    await stop();
  }
});

test('a task the relay sees indexed before its record is written is relayed, not dropped as gone', async () => {
  const { tenant, r, relay, delivery, stop } = await ownRole('early');
  const watch = webhookWatch(redis);
  // The create path indexes the task, then writes its record: a relay pass runs in between.
  const racing = new TaskStore(redis, {
    taskRetentionMs: 60_000,
    eventRetentionMs: 60_000,
    idempotencyTtlS: 600,
    idempotencyPendingMs: 30_000,
    watchWebhooks: async (t) => {
      const hooked = await watch(t);
      await relay.pass();
      return hooked;
    },
  });
  try {
    await delivery.refresh();
    const task = await runTask(tenant, racing);
    await until(
      'the task ended delivered',
      async () => {
        await relay.pass();
        return r.got.some((m) => m.body.data.task.id === task.id && m.body.type === 'task.ended')
          ? true
          : undefined;
      },
      10_000,
    );
  } finally {
    await stop();
  }
});

test('a refresh in flight when the delivery workers shut down starts no worker after it', async () => {
  const { ep, delivery, stop } = await ownRole('late-refresh');
  const queue = new Queue(endpointQueue(ep.id), {
    connection: connectQueueRedis(server.url, 'queue-late-refresh') as never,
    prefix: endpointQueuePrefix(ep.id),
  });
  try {
    // The refresh reads the endpoints; the shutdown runs while it waits on them.
    const refreshing = delivery.refresh();
    await delivery.shutdown();
    await refreshing;
    await new Promise((res) => setTimeout(res, 300));
    assert.deepEqual(await queue.getWorkers(), [], 'no worker left running on the endpoint’s queue');
  } finally {
    await queue.close();
    await stop();
  }
});

test("a tenant whose pass fails holds up no other tenant's deliveries: the pass goes on, then reports the failure", async () => {
  const { tenant, r, relay, delivery, stop } = await ownRole('beside-broken');
  // Tenants whose endpoints cannot be read (a string where the hash is: WRONGTYPE), as a tenant
  // whose queue's replica does not confirm in time fails its part of a pass.
  const broken = ['tenant-broken-1', 'tenant-broken-2', 'tenant-broken-3'];
  for (const t of broken) {
    await endpoints.create(t, { url: 'https://hooks.example.com/broken' });
    await redis.del(hookKeys.endpoints(t));
    await redis.set(hookKeys.endpoints(t), 'not a hash');
  }
  try {
    // The delivery workers' refresh too: the healthy tenant's worker starts, then the failure.
    await assert.rejects(delivery.refresh(), /WRONGTYPE/);
    const task = await runTask(tenant);
    await assert.rejects(relay.pass(), /WRONGTYPE/);
    const outbox = (await readOutboxes(redis, [task.id])).get(task.id) ?? [];
    assert.deepEqual(outbox, [], 'the healthy tenant’s entries were queued in the same pass');
    await until('the task ended delivered', () =>
      r.got.some((m) => m.body.data.task.id === task.id && m.body.type === 'task.ended') ? true : undefined,
    );
  } finally {
    for (const t of broken) {
      await redis.del(hookKeys.endpoints(t));
      await redis.srem(hookKeys.tenants, t);
    }
    await stop();
  }
});
