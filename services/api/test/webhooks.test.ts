/**
 * The tenant's webhook endpoints over REST: the secret shown once, problem+json for bad input,
 * a loopback or plain-http URL refused without the settings, and one tenant never sees another's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { taskKeys } from '@taskline/engine/keys';
import {
  call,
  KEY_B,
  TASK_BODY,
  useStackWithApi,
  type InProcessApi,
  type Reply,
  type RedisAndStore,
} from './helpers.js';

let api: InProcessApi;
let stack: RedisAndStore;
useStackWithApi((s, a) => {
  stack = s;
  api = a;
});

const code = (r: Reply) => (r.body as { code?: string }).code;
type Hook = { id: string; secret?: string; url: string; events: string[]; enabled: boolean };

test('an endpoint on a loopback or private address, or on plain http, is refused without the settings', async () => {
  for (const url of [
    'https://127.0.0.1/hook',
    'https://[::1]/hook',
    'https://localhost/x',
    'https://10.0.0.5/',
    'http://hooks.example.com/',
  ]) {
    const r = await call(api.base, 'POST', '/lmsp/v1/webhooks', { body: { url } });
    assert.equal(r.status, 422, `${url}: ${r.text}`);
    assert.equal(code(r), 'webhook_url_refused');
  }
  const list = await call(api.base, 'GET', '/lmsp/v1/webhooks');
  assert.deepEqual((list.body as { data: unknown[] }).data, []);
});

test('the signing secret is shown by the create alone; every read leaves it out', async () => {
  const created = await call(api.base, 'POST', '/lmsp/v1/webhooks', {
    body: { url: 'https://hooks.example.com/in', events: ['task.input_required', 'task.ended'] },
  });
  assert.equal(created.status, 201, created.text);
  const hook = created.body as Hook;
  assert.match(hook.secret!, /^whsec_[A-Za-z0-9+/=]{40,}$/);
  const read = await call(api.base, 'GET', `/lmsp/v1/webhooks/${hook.id}`);
  assert.equal((read.body as Hook).secret, undefined);
  assert.doesNotMatch(read.text, /whsec_/);
  const list = await call(api.base, 'GET', '/lmsp/v1/webhooks');
  assert.doesNotMatch(list.text, /whsec_/);
  const rotated = await call(api.base, 'POST', `/lmsp/v1/webhooks/${hook.id}/rotate`);
  assert.notEqual((rotated.body as Hook).secret, hook.secret);
  assert.doesNotMatch((await call(api.base, 'GET', `/lmsp/v1/webhooks/${hook.id}`)).text, /whsec_/);
});

test('bad bodies get problem+json, never a 500; another tenant reads the endpoint as missing', async () => {
  const bad = await call(api.base, 'POST', '/lmsp/v1/webhooks', {
    body: { url: 'https://a.example.com/', events: ['task.everything'] },
  });
  assert.equal(bad.status, 400);
  assert.equal(code(bad), 'invalid_request');
  const unknown = await call(api.base, 'POST', '/lmsp/v1/webhooks', {
    body: { url: 'https://a.example.com/', colour: 'red' },
  });
  assert.equal(unknown.status, 400);
  const created = (
    await call(api.base, 'POST', '/lmsp/v1/webhooks', { body: { url: 'https://a.example.com/' } })
  ).body as Hook;
  for (const [method, path] of [
    ['GET', `/lmsp/v1/webhooks/${created.id}`],
    ['DELETE', `/lmsp/v1/webhooks/${created.id}`],
    ['POST', `/lmsp/v1/webhooks/${created.id}/rotate`],
    ['GET', `/lmsp/v1/webhooks/${created.id}/attempts`],
  ] as const) {
    const r = await call(api.base, method, path, { key: KEY_B });
    assert.equal(r.status, 404, `${method} ${path}`);
    assert.equal(code(r), 'webhook_not_found');
  }
  const patched = await call(api.base, 'PATCH', `/lmsp/v1/webhooks/${created.id}`, {
    body: { enabled: false },
  });
  assert.equal((patched.body as Hook).enabled, false);
  const redeliver = await call(api.base, 'POST', `/lmsp/v1/webhooks/${created.id}/redeliver`, {
    body: { message_id: 'msg_none' },
  });
  assert.equal(redeliver.status, 202);
  assert.equal((redeliver.body as { queued: number }).queued, 0);
  assert.equal((await call(api.base, 'DELETE', `/lmsp/v1/webhooks/${created.id}`)).status, 204);
  assert.equal((await call(api.base, 'GET', `/lmsp/v1/webhooks/${created.id}`)).status, 404);
});

test('a task created once its tenant has an endpoint records its deliveries in its outbox', async () => {
  await call(api.base, 'POST', '/lmsp/v1/webhooks', { body: { url: 'https://hooks.example.com/tasks' } });
  await new Promise((r) => setTimeout(r, 1100)); // the create path's cached answer lapses
  const created = await call(api.base, 'POST', '/lmsp/v1/tasks', {
    body: TASK_BODY,
  });
  assert.equal(created.status, 202, created.text);
  const id = (created.body as { id: string }).id;
  assert.equal(await stack.redis.hget(taskKeys(id).task, 'hooks'), '1');
  assert.equal(await stack.redis.xlen(taskKeys(id).outbox), 1, 'response.created recorded with the create');
  const other = await call(api.base, 'POST', '/lmsp/v1/tasks', {
    key: KEY_B,
    body: TASK_BODY,
  });
  const otherId = (other.body as { id: string }).id;
  assert.equal(
    await stack.redis.exists(taskKeys(otherId).outbox),
    0,
    'a tenant without endpoints records none',
  );
});
