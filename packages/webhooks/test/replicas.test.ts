/**
 * The relay on a Redis with a replica: an outbox entry is deleted only once the replica has the
 * delivery jobs made of it, so a failover to that replica loses no message.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import {
  connectQueueRedis,
  connectRedis,
  readOutboxes,
  TaskStore,
  type TasklineError,
} from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { startRedis, startReplica, type RedisServer } from '@taskline/testing';
import {
  EndpointStore,
  endpointQueue,
  endpointQueuePrefix,
  Relay,
  retrySchedule,
  webhookWatch,
} from '../src/index.js';

let primary: RedisServer;
let replica: RedisServer;
let redis: Redis;
let queueRedis: Redis;
let onReplica: Redis;
let store: TaskStore;
let endpoints: EndpointStore;
/**
 * Its WAIT no starved host outlasts (the replica, a process at the test lane's priority, may take
 * more than a few hundred ms to acknowledge): for the writes and passes that must be acknowledged.
 */
let relay: Relay;
/** A 300 ms WAIT, on the same Redis: what a stopped replica runs out. */
let hasty: Relay;

before(async () => {
  // One Redis even under TASKLINE_TEST_REDIS=cluster (a start with arguments), and its replica.
  primary = await startRedis({ args: [] });
  replica = await startReplica(primary);
  redis = connectRedis(primary.url, 'test');
  queueRedis = connectQueueRedis(primary.url, 'relay');
  onReplica = connectRedis(replica.url, 'replica-reader');
  store = new TaskStore(redis, {
    taskRetentionMs: 60_000,
    eventRetentionMs: 60_000,
    idempotencyTtlS: 600,
    idempotencyPendingMs: 30_000,
    replicaAckTimeoutMs: 30_000,
    watchWebhooks: webhookWatch(redis),
  });
  endpoints = new EndpointStore(redis, { allowHttp: true, allowPrivate: true }, 60_000);
  const relayOf = (s: TaskStore) =>
    new Relay({
      redis,
      queueRedis,
      store: s,
      endpoints,
      schedule: retrySchedule(100, 10_000, 6),
      logger: createLogger({ test: 'webhook-replicas' }, 'warn', () => undefined),
      keepMs: 3_600_000,
    });
  relay = relayOf(store);
  hasty = relayOf(new TaskStore(redis, { ...store.options, replicaAckTimeoutMs: 300 }));
});

after(async () => {
  replica.resume();
  await relay.shutdown();
  await hasty.shutdown();
  for (const c of [redis, queueRedis, onReplica]) c.disconnect();
  await replica.stop();
  await primary.stop();
});

/** A hooked task that wrote two events (created, a delta): two outbox entries, two messages. */
async function hookedTask(tenant: string) {
  const ep = await endpoints.create(tenant, { url: 'http://127.0.0.1:9/hook' });
  const task = await store.create({ tenant, kind: 'response', model: 'm', onRestart: 'fail', request: {} });
  await store.claim(task.id, 'w1', 60_000, { start: true });
  await store.append(task.id, 1, [1], [{ type: 'response.output_text.delta', data: { delta: 'a' } }]);
  const queue = new Queue(endpointQueue(ep.id), {
    connection: queueRedis as never,
    prefix: endpointQueuePrefix(ep.id),
  });
  return { ep, task, queue };
}

const outbox = async (id: string) => (await readOutboxes(redis, [id])).get(id) ?? [];
const jobsOnReplica = async (queue: Queue, ids: string[]) =>
  (await Promise.all(ids.map((id) => onReplica.exists(`${queue.toKey(id)}`)))).filter((n) => n === 1).length;

test('with the replica stopped, a pass keeps the outbox entries it queued; once it is back, a pass deletes them and the replica has every job', async () => {
  const { task, queue } = await hookedTask('tenant-paused');
  const entries = await outbox(task.id);
  assert.ok(entries.length > 0, 'the task has outbox entries');
  const messages = entries.flatMap((e) => e.seqs).map((seq) => `msg_${task.id}_${seq}`);
  replica.pause();
  try {
    await assert.rejects(hasty.pass(), (e: unknown) => (e as TasklineError).code === 'replication_timeout');
    assert.deepEqual(await outbox(task.id), entries, 'no entry deleted while its jobs may be lost');
  } finally {
    replica.resume();
  }
  await relay.pass();
  assert.deepEqual(await outbox(task.id), [], 'deleted once replicated');
  assert.equal(await jobsOnReplica(queue, messages), messages.length, 'the replica has every job');
  await queue.close();
});

test('a job a failover lost after its pass stopped short is queued again by the next pass', async () => {
  const { task, queue } = await hookedTask('tenant-lost');
  const entries = await outbox(task.id);
  const messages = entries.flatMap((e) => e.seqs).map((seq) => `msg_${task.id}_${seq}`);
  replica.pause();
  try {
    await assert.rejects(hasty.pass(), (e: unknown) => (e as TasklineError).code === 'replication_timeout');
  } finally {
    replica.resume();
  }
  // The jobs that pass added are gone, as after a failover to a replica that never had them.
  for (const id of messages) await queue.remove(id);
  await relay.pass();
  assert.deepEqual(await outbox(task.id), []);
  const jobs = await Promise.all(messages.map((id) => queue.getJob(id)));
  assert.deepEqual(
    jobs.map((j) => j?.id),
    messages,
    'every message is queued again',
  );
  assert.deepEqual(
    jobs.map((j) => (j?.data as { after: string | null }).after),
    [null, ...messages.slice(0, -1)],
    'each behind the one before it, as first queued: no chain that waits on itself',
  );
  assert.equal(await jobsOnReplica(queue, messages), messages.length);
  await queue.close();
});
