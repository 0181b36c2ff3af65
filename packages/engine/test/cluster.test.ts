/**
 * The engine on a real Redis Cluster (3 primaries, 3 replicas, AOF), whatever TASKLINE_TEST_REDIS
 * says: replica acknowledgement per node and reads across a failover.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { bounded, ipv6Loopback, scanKeys, startRedisCluster, type RedisCluster } from '@taskline/testing';
import type { Redis } from 'ioredis';
import {
  connectRedis,
  EventHub,
  isCluster,
  redisAnswers,
  redisTargetFromEnv,
  redisUnavailableReason,
  TaskStore,
  TasklineError,
  type TaskRecord,
} from '../src/index.js';
import { nodeOf } from '../src/redis.js';
import { keySlot } from '../src/slots.js';
import { schedulerKeys, taskKeys } from '../src/keys.js';
import { createBurst, defaults, newTask, until } from './helpers.js';

// Before any test is declared: the runner starts the first one while a later await is pending.
const noIPv6 = !(await ipv6Loopback()) && 'this host has no IPv6 loopback';

let cluster: RedisCluster;
let redis: Redis;
/**
 * Its writes wait for their replicas as long as no starved host outlasts (six redis-servers on the
 * test lane's CPU): a write a test needs acknowledged is, however slow the replica's turn.
 */
let store: TaskStore;
/** A 1 s WAIT, on the same connection: what a stalled replica runs out. */
let hasty: TaskStore;

before(async () => {
  cluster = await startRedisCluster();
  redis = connectRedis(cluster.url, 'cluster-test');
  redis.on('error', () => undefined);
  store = new TaskStore(redis, { ...defaults, replicaAckTimeoutMs: 30_000 });
  hasty = new TaskStore(redis, { ...defaults, replicaAckTimeoutMs: 1000 });
});

after(async () => {
  redis.disconnect();
  await cluster.stop();
});

test('the connection is a cluster client, and tasks spread over every primary', async () => {
  assert.ok(isCluster(redis), 'isCluster(redis)');
  // The operators' form: seed nodes, REDIS_URL unused.
  const seeded = connectRedis(
    redisTargetFromEnv({
      REDIS_URL: 'redis://127.0.0.1:1',
      TASKLINE_REDIS_CLUSTER_NODES: cluster.seeds,
      TASKLINE_REDIS_USERNAME: '',
      TASKLINE_REDIS_PASSWORD: '',
      TASKLINE_REDIS_TLS: false,
    }),
    'seeded',
  );
  assert.ok(isCluster(seeded), 'isCluster(seeded)');
  assert.equal(await seeded.set('tl:{probe}:x', '1'), 'OK');
  seeded.disconnect();
  const owners = new Set<number>();
  for (let i = 0; i < 30; i++)
    owners.add((await cluster.primaryOf(taskKeys((await store.create(newTask())).id).task)).port);
  assert.equal(owners.size, 3);
});

test('a key whose primary the client does not know yet (slot table unread, a failover) is a try-again, not an internal error', () => {
  const fresh = connectRedis(cluster.url, 'cluster-test-fresh');
  fresh.on('error', () => undefined);
  try {
    assert.throws(
      () => nodeOf(fresh, schedulerKeys.intake),
      (err: unknown) => redisUnavailableReason(err) === 'clusterdown',
    );
  } finally {
    fresh.disconnect();
  }
});

test('a MOVED reply that escapes the client (a slot changing owner mid-failover) is a try-again: the command did not run', async () => {
  const key = schedulerKeys.intake;
  await redis.exists(key); // the client has read the slot table
  const owner = nodeOf(redis, key);
  const other = (redis as unknown as { nodes(role: 'master'): Redis[] })
    .nodes('master')
    .find((n) => n !== owner)!;
  const err = await other.get(key).then(
    () => assert.fail('a node that does not own the slot answered'),
    (e: unknown) => e,
  );
  assert.match(String(err), /MOVED/);
  assert.equal(redisUnavailableReason(err), 'moved');
});

test('a command out of redirections (two nodes disagreeing mid-failover, or its node lost) is a try-again', () => {
  const spent = (last: string) => new Error(`Too many Cluster redirections. Last error: ${last}`);
  assert.equal(redisUnavailableReason(spent('ReplyError: MOVED 10903 127.0.0.1:33895')), 'moved');
  assert.equal(redisUnavailableReason(spent('Error: Connection is closed.')), 'connection');
});

test('a WAIT that reaches a primary a failover just made a replica is a try-again: the write is not acknowledged', async () => {
  await redis.exists(schedulerKeys.intake);
  const replica = await replicaOf(await cluster.primaryOf(schedulerKeys.intake));
  const direct = connectRedis(`redis://127.0.0.1:${replica.port}`, 'wait-on-replica');
  try {
    const err = await direct.wait(1, 100).then(
      () => assert.fail('a replica answered WAIT'),
      (e: unknown) => e,
    );
    assert.equal(redisUnavailableReason(err), 'readonly', String(err));
  } finally {
    direct.disconnect();
  }
});

test('a create waits for the replica of the primary that owns its task: a stalled replica there is replication_timeout', async () => {
  // A task whose slot is not the scheduler index's, so only its own primary's replica is stalled.
  const sched = await cluster.primaryOf(schedulerKeys.intake);
  let task: TaskRecord;
  let owner: Awaited<ReturnType<RedisCluster['primaryOf']>>;
  do {
    task = await store.create(newTask());
    owner = await cluster.primaryOf(taskKeys(task.id).task);
  } while (owner.port === sched.port);
  const replica = await replicaOf(owner);
  replica.pause();
  try {
    const refused = await hasty.cancel(task.id, task.tenant).catch((err: unknown) => err);
    assert.ok(refused instanceof TasklineError && refused.code === 'replication_timeout', String(refused));
  } finally {
    replica.resume();
  }
  // Once the replica is back, the same write is acknowledged.
  await until(
    'the replica to catch up',
    async () =>
      (await store.cancel(task.id, task.tenant).then(
        () => true,
        () => undefined,
      )) ?? undefined,
  );
});

test("a create the scheduler index's primary refuses leaves no task record on another primary", async () => {
  // The journal entry (in `{sched}`) and the record (in the task's slot) are on different nodes,
  // where the order they are sent in orders nothing: a record outliving a lost journal entry would
  // sit queued with nothing to offer it. The index's primary refuses every write here (it has one
  // replica, and asks for two); most ids land on the other primaries.
  await redis.exists(schedulerKeys.intake); // the client has read the slot table
  const index = nodeOf(redis, schedulerKeys.intake);
  const records = async () => (await scanKeys(redis, 'tl:{task_*}:task')).sort();
  const before = await records();
  await index.config('SET', 'min-replicas-to-write', '2');
  try {
    for (let i = 0; i < 12; i++) {
      const refused = await store.create(newTask()).catch((err: unknown) => err);
      assert.equal(redisUnavailableReason(refused), 'noreplicas', String(refused));
    }
  } finally {
    await index.config('SET', 'min-replicas-to-write', '0');
  }
  assert.deepEqual(await records(), before, 'no record was written without its journal entry');
});

test("a claim the scheduler index's primary refuses leaves its task queued, never leased without an index entry", async () => {
  // The lease index entry (in `{sched}`) is what the recovery sweep walks: a claim written without
  // it would leave a task `loading` that no sweep ever finds once its worker gives up or dies.
  await redis.exists(schedulerKeys.intake);
  const index = nodeOf(redis, schedulerKeys.intake);
  const tasks: TaskRecord[] = [];
  while (tasks.length < 6) {
    const task = await store.create(newTask());
    if (nodeOf(redis, taskKeys(task.id).task) !== index) tasks.push(task);
  }
  await index.config('SET', 'min-replicas-to-write', '2');
  try {
    for (const task of tasks) {
      const refused = await store.claim(task.id, 'w-refused', 60_000).catch((err: unknown) => err);
      assert.equal(redisUnavailableReason(refused), 'noreplicas', String(refused));
    }
  } finally {
    await index.config('SET', 'min-replicas-to-write', '0');
  }
  for (const task of tasks) assert.equal((await store.get(task.id))?.status, 'queued', task.id);
});

test("an answer the scheduler index's primary refuses leaves its parked task waiting, not queued with nothing to offer it", async () => {
  await redis.exists(schedulerKeys.intake);
  const index = nodeOf(redis, schedulerKeys.intake);
  let task: TaskRecord;
  do task = await store.create(newTask({ kind: 'tool', model: 'tools', onRestart: 'retry' }));
  while (nodeOf(redis, taskKeys(task.id).task) === index);
  const claimed = await store.claim(task.id, 'w1', 60_000, { start: true });
  const ask = { method: 'elicitation/create', params: { message: 'Run it?' } };
  assert.equal((await store.requestInput(task.id, claimed.attempt, { confirm: ask })).parked, true);
  await index.config('SET', 'min-replicas-to-write', '2');
  try {
    const refused = await store
      .provideInput(task.id, task.tenant, { confirm: { action: 'accept' } })
      .catch((err: unknown) => err);
    assert.equal(redisUnavailableReason(refused), 'noreplicas', String(refused));
  } finally {
    await index.config('SET', 'min-replicas-to-write', '0');
  }
  assert.equal((await store.get(task.id))?.status, 'input_required');
  // Answered again once the index takes writes: offered for its next attempt.
  assert.equal(
    (await store.provideInput(task.id, task.tenant, { confirm: { action: 'accept' } })).status,
    'running',
  );
});

test('commands sent together to a primary that just failed over are each followed to its successor, none refused', async () => {
  // A client learns of a failover from the MOVED replies of its next commands. Sent in one tick
  // for keys of many slots, they must each be redirected, not fail together (an auto-pipelined
  // batch with different MOVED replies fails every command in it, as the worker's renewals and
  // a task's end did in the cluster chaos run).
  const owner = await cluster.primaryOf(schedulerKeys.intake);
  await redis.exists(schedulerKeys.intake);
  const node = nodeOf(redis, schedulerKeys.intake);
  const keys: string[] = [];
  for (let i = 0; keys.length < 40; i++) {
    const key = `tl:{probe-${i}}:moved`;
    if (nodeOf(redis, key) === node) keys.push(key);
  }
  await cluster.failover(owner);
  const replies = await Promise.allSettled(keys.map((key) => redis.set(key, '1')));
  const refused = replies.filter((r) => r.status === 'rejected').map((r) => String(r.reason));
  assert.deepEqual(refused, []);
});

test('a slot table that names a replica the primary heals within seconds, though the replica answers READONLY, never MOVED', async () => {
  // After failovers a client can hold such a table (read from a node with a stale view) and a
  // READONLY-mode connection to that node (ioredis opens replicas so): a script sent there runs
  // on the replica and is refused READONLY, which ioredis does not follow, so only a periodic
  // re-read of the table corrects it (a worker's every claim failed so after a cluster's restarts).
  const key = 'tl:{stale-table}:x';
  const write = () => redis.eval("return redis.call('SET', KEYS[1], '1')", 1, key) as Promise<string>;
  await write();
  const view = redis as unknown as { slots: string[][]; refreshSlotsCache(done: () => void): void };
  const slot = keySlot(key);
  // A table read as the cluster formed may not list replicas yet: read it again until it does.
  const reread = () => new Promise<void>((resolve) => view.refreshSlotsCache(() => resolve()));
  await until("the slot's replica in the client's table", async () => {
    if (!view.slots[slot]?.[1]) await reread();
    return view.slots[slot]?.[1] ? true : undefined;
  });
  let refused = '';
  for (let tries = 0; tries < 5 && !refused; tries++) {
    const [primary, replica] = view.slots[slot]!;
    assert.ok(replica, 'the slot has a replica in the table');
    view.slots[slot] = [replica, primary!];
    refused = await write().then(
      () => '', // the periodic re-read came in between: stale it again
      (err: Error) => err.message,
    );
  }
  assert.match(refused, /^READONLY/);
  await until(
    'a write through the re-read table',
    () =>
      write().then(
        (reply) => (reply === 'OK' ? true : undefined),
        () => undefined,
      ),
    10_000,
  );
});

test('with one primary stalled, Redis still answers (readiness): a keyless PING to it would hang', async () => {
  // A keyless command goes to a node chosen at random; a readiness probe that waited on the one
  // stalled (or lost, mid-failover) would take every api replica out of its load balancer at once.
  await redis.exists(schedulerKeys.intake);
  const [stalled] = await cluster.primaries();
  stalled!.pause();
  try {
    const answers = Promise.all(Array.from({ length: 12 }, () => redisAnswers(redis)));
    assert.deepEqual(
      await bounded('readiness with one primary stalled', 10_000, answers),
      Array(12).fill(true),
    );
  } finally {
    stalled!.resume();
  }
});

test('SIGKILL of a primary during a burst of creations loses no acknowledged task; a reader there resumes after the failover', async () => {
  const hub = new EventHub(store);
  // A reader on a task owned by the primary that will be killed.
  const victim = await cluster.primaryOf(schedulerKeys.intake);
  let followed: TaskRecord;
  do followed = await store.create(newTask());
  while ((await cluster.primaryOf(taskKeys(followed.id).task)).port !== victim.port);
  const seen: number[] = [];
  const sub = await hub.subscribe(followed.id, 0, (e) => seen.push(e.seq));

  const burst = createBurst(store, 20);
  const { acknowledged } = burst;
  await until('100 acknowledged creates', () => acknowledged.length >= 100 || undefined);
  await cluster.killPrimary(victim);
  const atFailover = acknowledged.length;
  await until(
    'creates acknowledged after the failover',
    () => acknowledged.length >= atFailover + 100 || undefined,
  );
  await burst.stop();

  for (const task of acknowledged) {
    const found = await store.get(task.id);
    assert.ok(found, `acknowledged task ${task.id} survived the failover`);
    assert.equal(found.status, 'queued');
    const { events } = await store.events(task.id, 0);
    assert.equal(events[0]?.type, 'response.created');
    // Offered to the scheduler, or journalled for the reconciler: never stranded.
    const offered = await redis.zscore(schedulerKeys.ready(task.tenant, task.model), task.id);
    const journalled = await redis.zscore(schedulerKeys.intake, task.id);
    assert.ok(offered !== null || journalled !== null, `task ${task.id} is offered or journalled`);
  }

  // The followed task moves on after the failover: the reader gets every event, in order.
  await store.claim(followed.id, 'w1', 60_000, { start: true });
  await store.finish(followed.id, 1, { status: 'succeeded', result: null });
  const total = (await store.get(followed.id))!.seq;
  await until('the reader to get every event after the failover', () => seen.length >= total || undefined);
  assert.deepEqual(
    seen,
    Array.from({ length: total }, (_, i) => i + 1),
  );
  console.log(
    `cluster failover: ${acknowledged.length} acknowledged, all intact; ${burst.refused()} refused meanwhile`,
  );
  sub.close();
  hub.close();
});

/** The replica that follows `primary` now. */
async function replicaOf(primary: { port: number }) {
  for (const node of cluster.nodes) {
    if (node.port === primary.port) continue;
    const probe = connectRedis(`redis://127.0.0.1:${node.port}`, 'probe');
    const info = await probe.info('replication');
    probe.disconnect();
    if (info.includes('role:slave') && info.includes(`master_port:${primary.port}`)) return node;
  }
  throw new Error(`no replica of ${primary.port}`);
}

test(
  'cluster seeds may be IPv6 literals, bracketed in TASKLINE_REDIS_CLUSTER_NODES or in a URL',
  { skip: noIPv6 },
  async () => {
    const ports = cluster.seeds.split(',').map((s) => s.slice(s.lastIndexOf(':') + 1));
    const env = {
      REDIS_URL: 'redis://127.0.0.1:1',
      TASKLINE_REDIS_USERNAME: '',
      TASKLINE_REDIS_PASSWORD: '',
      TASKLINE_REDIS_TLS: false,
    };
    for (const target of [
      redisTargetFromEnv({ ...env, TASKLINE_REDIS_CLUSTER_NODES: ports.map((p) => `[::1]:${p}`).join(',') }),
      `redis-cluster://[::1]:${ports[0]}`,
    ]) {
      const seeded = connectRedis(target, 'seeded-ipv6');
      seeded.on('error', () => undefined);
      try {
        // A bound that catches a seed that is never reached, not a pace: a fresh cluster client
        // reads the slot table first, which a starved host may take seconds over.
        const answer = await Promise.race([
          seeded.set('tl:{probe}:v6', '1'),
          sleep(30_000, 'no answer', { ref: false }),
        ]);
        assert.equal(answer, 'OK', JSON.stringify(target));
      } finally {
        seeded.disconnect();
      }
    }
  },
);
