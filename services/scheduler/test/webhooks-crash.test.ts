/**
 * Webhook deliveries survive crashes: a scheduler (relay and delivery workers) SIGKILLed and a
 * Redis SIGKILLed and restarted from its AOF, both mid-delivery and with outboxes not yet relayed,
 * lose no delivery; every event arrives (at least once) under one `webhook-id`, signed.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { connectRedis, TaskStore } from '@taskline/engine';
import { startServices, until, type Stack } from '@taskline/testing';
import { EndpointStore, webhookWatch } from '@taskline/webhooks';

let stack: Stack | undefined;
let closeReceiver = async () => undefined;
after(async () => {
  await closeReceiver();
  await stack?.stop();
});

test('a scheduler SIGKILL and a Redis restart mid-delivery lose no delivery; redeliveries keep their webhook-id', async () => {
  stack = await startServices({
    env: {
      TASKLINE_WEBHOOK_ALLOW_HTTP: 'true',
      TASKLINE_WEBHOOK_ALLOW_PRIVATE: 'true',
      TASKLINE_WEBHOOK_RETRY_BASE_MS: '100',
      TASKLINE_WEBHOOK_RETRY_CAP_MS: '500',
      TASKLINE_WEBHOOK_MAX_ATTEMPTS: '100',
      TASKLINE_WEBHOOK_RELAY_MS: '50',
    },
  });
  const scheduler = stack.schedulers[0]!;
  let failing = true;
  let secret = '';
  /** Bodies delivered (answered 200) per webhook-id. */
  const delivered = new Map<string, string[]>();
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      new Webhook(secret).verify(raw, req.headers as Record<string, string>);
      res.statusCode = failing ? 500 : 200;
      if (!failing)
        delivered.set(String(req.headers['webhook-id']), [
          ...(delivered.get(String(req.headers['webhook-id'])) ?? []),
          raw,
        ]);
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  closeReceiver = () => new Promise((resolve) => receiver.close(() => resolve(undefined)));
  const redis = connectRedis(stack.redis.url, 'test');
  redis.on('error', () => undefined); // Redis is killed on purpose below
  const store = new TaskStore(redis, {
    taskRetentionMs: 600_000,
    eventRetentionMs: 600_000,
    idempotencyTtlS: 600,
    idempotencyPendingMs: 30_000,
    watchWebhooks: webhookWatch(redis),
  });
  const endpoints = new EndpointStore(redis, { allowHttp: true, allowPrivate: true }, 60_000);
  const ep = await endpoints.create('tenant-a', {
    url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`,
  });
  secret = ep.secret;
  await new Promise((r) => setTimeout(r, 1100)); // the create path's cached answer lapses
  const runTask = async () => {
    const task = await store.create({
      tenant: 'tenant-a',
      kind: 'response',
      model: 'm',
      onRestart: 'fail',
      request: {},
    });
    await store.claim(task.id, 'w1', 60_000);
    await store.start(task.id, 1);
    await store.finish(task.id, 1, { status: 'succeeded', result: { status: 'completed' } });
    return task.id;
  };
  // Phase 1: queued and failing (retrying) when the scheduler and Redis die.
  const first = [await runTask(), await runTask(), await runTask()];
  await until(
    'jobs retrying',
    async () => ((await redis.keys('bull:*:delayed')).length > 0 ? true : undefined),
    10_000,
  );
  await scheduler.kill('SIGKILL');
  // Phase 2: written while no relay runs, so still in their outboxes when Redis dies.
  const second = [await runTask(), await runTask()];
  await stack.redis.kill();
  await stack.redis.restart();
  await scheduler.start();
  failing = false;
  const expected = [...first, ...second].flatMap((id) => [1, 2, 3, 4].map((seq) => `msg_${id}_${seq}`));
  await until(
    'every event delivered',
    () => (expected.every((id) => delivered.has(id)) ? true : undefined),
    // An attempt in flight at the kill waits for its lock to lapse (about 15 s).
    45_000,
  );
  for (const id of expected) {
    const bodies = delivered.get(id)!;
    assert.equal(new Set(bodies).size, 1, `${id}: one body under one webhook-id, however often delivered`);
  }
  assert.deepEqual(
    [...delivered.keys()].sort(),
    [...expected].sort(),
    'nothing delivered that was not written',
  );
  redis.disconnect();
});
