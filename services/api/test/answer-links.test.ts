/**
 * An approval gate end to end: a tool task asks for approval, the `input_required` webhook (signed,
 * verified with the `standardwebhooks` package) carries answer links, the approve link answers it
 * without an API key and the task completes; the link works once; the reject link ends a task; a
 * link of a question no longer open is refused. The worker's side is played through TaskStore.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { connectQueueRedis, TaskStore } from '@taskline/engine';
import { createLogger } from '@taskline/log';
import { until } from '@taskline/testing';
import { EndpointStore, retrySchedule, WebhookRole, webhookWatch } from '@taskline/webhooks';
import { call, startApi, startRedisAndStore, type InProcessApi, type RedisAndStore } from './helpers.js';

const LINK_SECRET = 'link-secret-0123456789abcdef0123456789';
const PUBLIC_URL = 'https://taskline.test';
let stack: RedisAndStore;
let api: InProcessApi;
let role: WebhookRole;
let store: TaskStore;
let closeReceiver: () => Promise<void>;
type Links = Record<string, Record<'accept' | 'decline' | 'cancel', string>>;
const messages: { type: string; data: { task: { id: string }; answer_links?: Links } }[] = [];

before(async () => {
  stack = await startRedisAndStore();
  const env = {
    TASKLINE_WEBHOOK_ALLOW_HTTP: 'true',
    TASKLINE_WEBHOOK_ALLOW_PRIVATE: 'true',
    TASKLINE_WEBHOOK_LINK_SECRET: LINK_SECRET,
    TASKLINE_PUBLIC_URL: PUBLIC_URL,
  };
  api = await startApi(stack, env);
  let secret = '';
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      messages.push(
        new Webhook(secret).verify(
          Buffer.concat(chunks).toString(),
          req.headers as Record<string, string>,
        ) as never,
      );
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  closeReceiver = () => new Promise((resolve) => receiver.close(() => resolve()));
  const created = await call(api.base, 'POST', '/lmsp/v1/webhooks', {
    body: {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`,
      events: ['task.input_required', 'task.ended'],
    },
  });
  secret = (created.body as { secret: string }).secret;
  const redis = stack.redis;
  store = new TaskStore(redis, {
    taskRetentionMs: 600_000,
    eventRetentionMs: 600_000,
    idempotencyTtlS: 600,
    idempotencyPendingMs: 30_000,
    watchWebhooks: webhookWatch(redis),
  });
  const reach = { allowHttp: true, allowPrivate: true };
  const endpoints = new EndpointStore(redis, reach, 60_000);
  const schedule = retrySchedule(100, 1000, 5);
  const logger = createLogger({ test: 'answer-links' }, 'error', () => undefined);
  role = new WebhookRole({
    relay: {
      redis,
      queueRedis: connectQueueRedis(stack.redisServer.url, 'relay'),
      store,
      endpoints,
      schedule,
      logger,
      keepMs: 3_600_000,
      links: { secret: LINK_SECRET, baseUrl: PUBLIC_URL, ttlMs: 3_600_000 },
    },
    delivery: {
      redis,
      connect: () => connectQueueRedis(stack.redisServer.url, 'worker'),
      endpoints,
      schedule,
      limits: { reach, timeoutMs: 2000, maxResponseBytes: 1024 },
      logger,
      concurrency: 2,
      disableAfter: 50,
    },
    relayMs: 30,
    refreshMs: 100,
    logger,
  });
  role.start();
  await new Promise((r) => setTimeout(r, 1100)); // the create path's cached answer lapses
});

after(async () => {
  await role.stop();
  await closeReceiver();
  await api.close();
  await stack.close();
});

/** A tool task that asks for approval and is parked, and the links its webhook carried. */
async function askApproval(): Promise<{ id: string; links: Links['approve'] }> {
  const task = await store.create({
    tenant: 'tenant-a',
    kind: 'tool',
    model: 'tools',
    onRestart: 'fail',
    request: {},
  });
  await store.claim(task.id, 'w1', 60_000, { start: true });
  const asked = await store.requestInput(task.id, 1, {
    approve: {
      method: 'elicitation/create',
      params: { message: 'Deploy?', requestedSchema: { type: 'object', properties: {} } },
    },
  });
  assert.equal(asked.parked, true);
  const message = await until('the input_required webhook', () =>
    messages.find((m) => m.type === 'task.input_required' && m.data.task.id === task.id),
  );
  return { id: task.id, links: message.data.answer_links!.approve! };
}

/** The link as the api under test serves it (the test api is not at TASKLINE_PUBLIC_URL). */
const local = (link: string) => link.replace(PUBLIC_URL, '');
const post = (link: string) => call(api.base, 'POST', local(link), { key: null });

test('the approve link answers the question without an API key, once; the task completes', async () => {
  const { id, links } = await askApproval();
  const page = await call(api.base, 'GET', local(links.accept), { key: null });
  assert.equal(page.status, 200);
  assert.equal((await store.get(id))?.status, 'input_required', 'a GET changes nothing');
  const used = await post(links.accept);
  assert.equal(used.status, 200, used.text);
  assert.equal((used.body as { choice: string }).choice, 'accept');
  const again = await post(links.accept);
  assert.equal(again.status, 410);
  assert.equal((again.body as { code: string }).code, 'answer_link_used');
  const moved = await post(links.decline);
  assert.equal(moved.status, 403, 'the question is answered: the other links are refused');
  assert.equal((moved.body as { code: string }).code, 'answer_link_refused');
  // The tool's next attempt finds the approval and finishes.
  const claimed = await store.claim(id, 'w1', 60_000, { start: true });
  assert.deepEqual((await store.answers(id)).approve, { action: 'accept', content: {} });
  await store.finish(id, claimed.attempt, {
    status: 'succeeded',
    result: { content: [{ type: 'text', text: 'deployed' }] },
  });
  await until('the ended webhook', () =>
    messages.find((m) => m.type === 'task.ended' && m.data.task.id === id),
  );
});

test('the reject links end the task: decline is the tool’s to end, cancel ends it at once', async () => {
  const declined = await askApproval();
  assert.equal((await post(declined.links.decline)).status, 200);
  assert.deepEqual((await store.answers(declined.id)).approve, { action: 'decline' });
  const cancelled = await askApproval();
  const r = await post(cancelled.links.cancel);
  assert.equal(r.status, 200, r.text);
  assert.match((r.body as { task_status: string }).task_status, /^cancel/);
  await until('the cancelled end', async () =>
    (await store.get(cancelled.id))?.status === 'cancelled' ? true : undefined,
  );
});

test('a forged or tampered link is refused', async () => {
  const { links } = await askApproval();
  const [payload, sig] = local(links.accept).split('/').pop()!.split('.');
  const forged = await call(api.base, 'POST', `/lmsp/v1/answer-links/${payload}.${sig!.slice(1)}x`, {
    key: null,
  });
  assert.equal(forged.status, 403);
  const junk = await call(api.base, 'POST', '/lmsp/v1/answer-links/nonsense', { key: null });
  assert.equal(junk.status, 403);
});
