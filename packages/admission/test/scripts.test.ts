/**
 * The admission package's limit scripts (`lua/`), run directly against a Redis of the test's own
 * (a Redis Cluster under `pnpm test:cluster`, where a script whose keys span slots would fail).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, beforeEach, test } from 'node:test';
import type { Redis } from 'ioredis';
import { connectRedis } from '@taskline/engine';
import { startRedis, type RedisServer } from '@taskline/testing';
import { TenantLimits } from '../src/index.js';

const source = (name: string) => readFileSync(new URL(`../lua/${name}.lua`, import.meta.url), 'utf8');
const active = 'tl:api:active:{t}';

let server: RedisServer;
let redis: Redis;
before(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, 'admission-scripts-test');
});
after(async () => {
  redis.disconnect();
  await server.stop();
});
// Every key the scripts touch here; FLUSHALL would reach one node of a cluster.
beforeEach(() => redis.del('tl:api:rate:{t}', active, 'tl:api:streams:{t}', 'tl:api:auth-failures:{t}'));

/** One token_bucket call at 10 tokens/s, a burst of 2, with a create's place when `reservation` names one. */
const take = (now: number, reservation?: string) =>
  redis.eval(
    source('token_bucket'),
    2,
    'tl:api:rate:{t}',
    active,
    10,
    2,
    now,
    ...(reservation ? [reservation, 60_000] : []),
  );

/** Bytes in the AOF of the Redis, or of every primary of a cluster (`INFO` reaches one node there). */
async function aofBytes(): Promise<number> {
  const client = redis as unknown as { nodes?(role: 'master'): Redis[] };
  const nodes = typeof client.nodes === 'function' ? client.nodes('master') : [redis];
  const infos = await Promise.all(nodes.map((node) => node.info('persistence')));
  return infos.reduce((sum, info) => sum + Number(/aof_current_size:(\d+)/.exec(info)![1]), 0);
}

test('token_bucket refuses past the burst with the wait, and holds a create place with its token', async () => {
  assert.deepEqual(await take(1000, 'r:1'), [0, 1]);
  assert.deepEqual(await take(1000), [0, 0]);
  // Burst spent: one token comes back after 100 ms at 10/s, and nothing is reserved meanwhile.
  assert.deepEqual(await take(1000, 'r:2'), [100, 0]);
  assert.deepEqual(await redis.zrange(active, 0, -1), ['r:1']);
  assert.deepEqual(await take(1100, 'r:3'), [0, 2]);
  const ttl = await redis.pttl(active);
  assert.ok(ttl > 0 && ttl <= 60_000, `the place set expires unless creates renew it (${ttl})`);
});

test('reservation_commit swaps a reservation for its task, or just frees it', async () => {
  const commit = source('reservation_commit');
  await redis.zadd(active, 1, 'r:1', 1, 'r:2');
  assert.equal(await redis.eval(commit, 1, active, 'r:1', 'task_a', 5, 60_000), 1);
  assert.equal(await redis.eval(commit, 1, active, 'r:2', '', 6, 60_000), 1);
  assert.deepEqual(await redis.zrange(active, 0, -1, 'WITHSCORES'), ['task_a', '5']);
  assert.ok((await redis.pttl(active)) > 0, 'a place taken renews the set expiry');
});

test('stream_slot takes slots up to the cap and lets lapsed leases go', async () => {
  const slot = source('stream_slot');
  const streams = 'tl:api:streams:{t}';
  // Leases of a minute: the script also sets the key's real expiry to the lease, and a lease of
  // 100 ms expired the whole set between two calls on a loaded host (the cap then read as free).
  const open = (now: number, id: string) => redis.eval(slot, 1, streams, now, id, now + 60_000, 2);
  assert.equal(await open(1000, 'a'), 1);
  assert.equal(await open(1000, 'b'), 1);
  assert.equal(await open(1050, 'c'), 0, 'at the cap');
  assert.equal(await open(61_001, 'c'), 1, 'a and b lapsed at 61000');
  assert.deepEqual(await redis.zrange(streams, 0, -1), ['c']);
});

test('token_bucket takes no token when the place cannot be held (a key of the wrong type)', async () => {
  await redis.set(active, 'x');
  await assert.rejects(
    redis.eval(source('token_bucket'), 2, 'tl:api:rate:{t}', active, 10, 2, 1000, 'r:1', 60_000),
    /WRONGTYPE/,
  );
  assert.equal(await redis.exists('tl:api:rate:{t}'), 0);
});

test('auth_failures counts in a window its first failure opens, later ones never move, and reads without counting', async () => {
  const failures = source('auth_failures');
  const key = 'tl:api:auth-failures:{t}';
  const count = (add: 0 | 1, windowMs = 5000) =>
    redis.eval(failures, 1, key, add, windowMs) as Promise<number[]>;
  assert.deepEqual(await count(0), [0, 0], 'no failure yet: nothing to read, nothing written');
  assert.equal(await redis.exists(key), 0);
  const [first, ttl] = await count(1);
  assert.equal(first, 1);
  assert.ok(ttl! > 4000 && ttl! <= 5000, `window ${ttl}`);
  await new Promise((r) => setTimeout(r, 50));
  const [second, left] = await count(1, 60_000);
  assert.equal(second, 2);
  assert.ok(left! <= ttl! - 40, 'a later failure does not move the window');
  assert.equal((await count(0))[0], 2);
  // A counter that lost its expiry gets the window back at its next failure.
  await redis.persist(key);
  assert.ok((await count(1))[1]! > 0, '(await count(1))[1]! > 0');
});

test('token_bucket writes nothing to the AOF: a request waits for no fsync of its own', async () => {
  await redis.ping();
  const before = await aofBytes();
  assert.deepEqual(await take(1000, 'r:1'), [0, 1]);
  assert.deepEqual(await take(1000), [0, 0]);
  assert.equal(await aofBytes(), before, 'the bucket and the place are in memory only');
  assert.deepEqual(await take(1000), [100, 0], 'the bucket holds in memory');
  assert.deepEqual(await redis.zrange(active, 0, -1), ['r:1']);
  // The place's task is what persists: its commit reaches the AOF (and shows that this test can see a write).
  await redis.eval(source('reservation_commit'), 1, active, 'r:1', 'task_a', 5, 60_000);
  assert.ok((await aofBytes()) > before, 'a committed place is in the AOF');
});

test('an event stream slot, its renewals and its release write nothing to the AOF: a heartbeat waits for no fsync', async () => {
  const limits = new TenantLimits(redis, {
    ratePerS: 10,
    burst: 2,
    maxUnfinishedTasks: 2,
    maxStreams: 1,
    streamLeaseMs: 60_000,
    unfinishedTtlMs: 60_000,
  });
  await redis.ping();
  const before = await aofBytes();
  const slot = await limits.openStream('t');
  await assert.rejects(limits.openStream('t'), { code: 'rate_limited' }, 'the cap holds in memory');
  await slot.renew();
  await slot.renew();
  assert.equal(await redis.zcard('tl:api:streams:{t}'), 1);
  await slot.release();
  assert.equal(await aofBytes(), before, 'the slots are in memory only');
  // Released: room again. A slot a restart or a failover lost comes back at its next renewal.
  const next = await limits.openStream('t');
  await redis.del('tl:api:streams:{t}');
  await next.renew();
  assert.equal(await redis.zcard('tl:api:streams:{t}'), 1, 'renewed back');
  const ttl = await redis.pttl('tl:api:streams:{t}');
  assert.ok(ttl > 0 && ttl <= 60_000, `the set expires unless streams renew it (${ttl})`);
});
