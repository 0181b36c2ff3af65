import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startRedis } from '@taskline/testing';
import { checkDurability, connectRedis, TaskStore } from '../src/index.js';
import { ReplicaAck } from '../src/durability.js';
import { createBurst, defaults, restartLoadingSlowly, until } from './helpers.js';

test('SIGKILL of Redis during a burst of creations loses no acknowledged task', async (t) => {
  const server = await startRedis({ appendfsync: 'always' });
  const redis = connectRedis(server.url, 'burst');
  redis.on('error', () => undefined);
  t.after(() => {
    redis.disconnect();
    return server.stop();
  });
  // A SIGKILL leaves the page cache intact, so this run alone cannot tell `always` from `everysec`;
  // the promise also covers a power loss, which only an fsync before each reply keeps.
  assert.deepEqual(await redis.config('GET', 'appendfsync'), ['appendfsync', 'always']);
  // No warning but "no answer yet", which the check says after half a second without one (a
  // starved host's first connection may take that long): CONFIG is allowed, nothing is trusted.
  const warnings: unknown[] = [];
  const warn = (msg: string, fields?: Record<string, unknown>) =>
    void (fields?.reason !== 'no_answer_yet' && warnings.push({ msg, ...fields }));
  const report = await checkDurability(redis, { level: 'always', requireAof: true }, { warn });
  assert.deepEqual(warnings, []);
  assert.equal(report.appendfsync, 'always', 'the start-up check saw the policy the promise needs');
  const store = new TaskStore(redis, defaults);
  const burst = createBurst(store, 5);
  const { acknowledged } = burst;
  await until('300 acknowledged creates', () => acknowledged.length >= 300 || undefined);
  await server.kill();
  const before = acknowledged.length;
  await new Promise((r) => setTimeout(r, 200));
  await burst.stop();
  assert.equal(acknowledged.length, before, 'nothing is acknowledged while Redis is down');
  assert.ok(burst.refused() > 0, 'creations failed while Redis was down');

  await server.restart();
  const check = connectRedis(server.url, 'check');
  const after = new TaskStore(check, defaults);
  for (const task of acknowledged) {
    const found = await after.get(task.id);
    assert.ok(found, `acknowledged task ${task.id} survived`);
    assert.equal(found.status, 'queued');
    const { events } = await after.events(task.id, 0);
    assert.equal(events[0]?.type, 'response.created');
  }
  console.log(
    `durability: ${acknowledged.length} acknowledged, all intact; ${burst.refused()} refused while down`,
  );
  redis.disconnect();
  check.disconnect();
  await server.stop();
});

test('a service started while Redis loads its AOF waits for the load instead of refusing Redis as without AOF', async (t) => {
  // Redis 7 answers INFO while it loads and says aof_enabled:0 until the load is done, and ioredis
  // sends INFO before its own ready check has seen the load end: read so, a Redis restarted from
  // its AOF refused every service started meanwhile (a crash loop; the chaos run saw one).
  const server = await startRedis({ args: [] });
  const seed = connectRedis(server.url, 'seed');
  seed.on('error', () => undefined);
  t.after(() => server.stop());
  const { restarting } = await restartLoadingSlowly(server, seed, 20_000);
  seed.disconnect();
  const redis = connectRedis(server.url, 'starting');
  redis.on('error', () => undefined);
  t.after(() => redis.disconnect());
  await until('a connection to the loading Redis, its ready check under way', () =>
    redis.status === 'connect' ? true : undefined,
  );
  const reasons: unknown[] = [];
  const report = await checkDurability(
    redis,
    { level: 'always', requireAof: true },
    { warn: (_msg, fields) => void reasons.push(fields?.reason) },
  );
  await restarting;
  assert.equal(report.aofEnabled, true);
  assert.ok(reasons.includes('loading'), `it waited for the load (warned ${JSON.stringify(reasons)})`);
});

test('an acknowledgement never waits for a fresh replica count once it has one: it reads it again behind the write', async (t) => {
  const server = await startRedis();
  const redis = connectRedis(server.url, 'replica-count');
  t.after(async () => {
    redis.disconnect();
    await server.stop();
  });
  await redis.ping(); // past ioredis's own ready check, which reads INFO too
  const order: string[] = [];
  const info = redis.info.bind(redis);
  // An INFO that answers late, as on a busy Redis: the first acknowledgement has to wait for it.
  redis.info = (async (section: string) => {
    const reply = await info(section);
    await new Promise((r) => setTimeout(r, 300));
    order.push('count read');
    return reply;
  }) as typeof redis.info;
  const ack = new ReplicaAck(redis, 400);
  await ack.wait(['k']);
  order.push('first acknowledged');
  await new Promise((r) => setTimeout(r, 1100)); // the count is stale now
  await ack.wait(['k']);
  order.push('second acknowledged');
  await until('the count read again', () => (order.length === 4 ? true : undefined));
  assert.deepEqual(order, ['count read', 'first acknowledged', 'second acknowledged', 'count read']);
});
