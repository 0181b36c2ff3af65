/**
 * Callbacks of outside jobs (callbacks.ts, expect_callback.lua) on a real Redis: the key is a
 * question recorded before the URL leaves, so a callback that beats the park is kept; a callback
 * is taken once, refused once the task ended or for a key never expected; a wait on callbacks
 * alone fails at its own deadline with `callback_timeout`; tokens are checked.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { callbackKey, callbackUrl, signToken, TasklineError, verifyCallback } from '../src/index.js';
import { schedulerKeys } from '../src/keys.js';
import { harness, newTask, until, type Harness } from './helpers.js';

let h: Harness;
before(async () => (h = await harness({ inputTimeoutMs: 60_000 })));
after(() => h.close());

const SECRET = 'callback-secret-0123456789abcdef0123';
const REQUEST = { method: 'taskline/callback', params: { name: 'build' } };
const KEY = callbackKey('build');

async function runningTool() {
  const task = await h.store.create(newTask({ tenant: 'tenant-a', kind: 'tool', model: 'tools' }));
  await h.redis.zrem(schedulerKeys.ready('tenant-a', 'tools'), task.id);
  await h.redis.zadd(schedulerKeys.active('tenant-a'), task.attempt + 1, task.id);
  return h.store.claim(task.id, 'w1', 60_000, { start: true });
}

const claimsOf = (task: { id: string; tenant: string }) =>
  verifyCallback(
    SECRET,
    callbackUrl({ baseUrl: 'https://t.test/', secret: SECRET }, task, KEY).split('/').pop()!,
  )!;

test('a callback that arrives before the task parks is kept: the park finds it answered', async () => {
  const task = await runningTool();
  assert.equal(await h.store.expectCallback(task.id, task.attempt, KEY, REQUEST), false);
  // Sent twice (its reply lost): the same answer, nothing more written.
  assert.equal(await h.store.expectCallback(task.id, task.attempt, KEY, REQUEST), false);
  const taken = await h.store.deliverCallback(claimsOf(task), { ok: true });
  assert.deepEqual(taken, { taken: true, status: 'running' });
  const asked = await h.store.requestInput(task.id, task.attempt, { [KEY]: REQUEST }, 5_000);
  assert.equal(asked.parked, false);
  assert.deepEqual(asked.answers[KEY], { ok: true });
  // A later attempt is told the callback came: it does not start the job again.
  assert.equal(await h.store.expectCallback(task.id, task.attempt, KEY, REQUEST), true);
});

test('a callback is taken once; refused for a key never expected and once the task ended', async () => {
  const task = await runningTool();
  await assert.rejects(
    h.store.expectCallback(task.id, task.attempt + 1, KEY, REQUEST),
    (err: unknown) => err instanceof TasklineError && err.code === 'stale_attempt',
  );
  const never = verifyCallback(
    SECRET,
    signToken(SECRET, { cb: 1, t: task.id, tn: task.tenant, k: callbackKey('x') }),
  )!;
  assert.deepEqual(await h.store.deliverCallback(never, {}), { taken: false, reason: 'refused' });
  await h.store.expectCallback(task.id, task.attempt, KEY, REQUEST);
  const { parked } = await h.store.requestInput(task.id, task.attempt, { [KEY]: REQUEST }, 60_000);
  assert.equal(parked, true);
  // Its caller cannot see or answer it: only the signed URL can.
  assert.deepEqual(await h.store.openInputRequests(task.id), {});
  assert.equal((await h.store.provideInput(task.id, 'tenant-a', { [KEY]: { forged: true } })).accepted, 0);
  assert.equal((await h.store.deliverCallback(claimsOf(task), { n: 1 })).taken, true);
  assert.deepEqual(await h.store.deliverCallback(claimsOf(task), { n: 2 }), { taken: false, reason: 'used' });
  assert.deepEqual((await h.store.answers(task.id))[KEY], { n: 1 });

  const ended = await runningTool();
  await h.store.expectCallback(ended.id, ended.attempt, KEY, REQUEST);
  await h.store.finish(ended.id, ended.attempt, { status: 'succeeded', result: {} });
  assert.deepEqual(await h.store.deliverCallback(claimsOf(ended), {}), { taken: false, reason: 'refused' });
});

test('a wait on callbacks alone fails at its own deadline with callback_timeout; a question with input_timeout', async () => {
  const waiting = await runningTool();
  await h.store.expectCallback(waiting.id, waiting.attempt, KEY, REQUEST);
  await h.store.requestInput(waiting.id, waiting.attempt, { [KEY]: REQUEST }, 1);
  const asking = await runningTool();
  const question = { method: 'elicitation/create', params: { message: 'Go?' } };
  await h.store.requestInput(asking.id, asking.attempt, { go: question });
  // Only the callback's deadline (1 ms) passes; the question's (a minute) has not.
  const failed = await until('the callback deadline swept', async () => {
    const swept = await h.store.sweepInputDeadlines();
    return swept.length > 0 ? swept : undefined;
  });
  assert.deepEqual(failed, [waiting.id]);
  assert.equal((await h.store.get(waiting.id))?.error?.code, 'callback_timeout');
  assert.equal((await h.store.get(asking.id))?.status, 'input_required');
});

test('callback tokens: a tampered one, another secret, or an answer link token is no callback', () => {
  const task = { id: 'task_x', tenant: 'tenant-a' };
  const token = callbackUrl({ baseUrl: 'https://t.test', secret: SECRET }, task, KEY).split('/').pop()!;
  assert.deepEqual(verifyCallback(SECRET, token), { cb: 1, t: 'task_x', tn: 'tenant-a', k: KEY });
  assert.equal(verifyCallback(`${SECRET}-other`, token), null);
  assert.equal(verifyCallback(SECRET, `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`), null);
  const link = signToken(SECRET, {
    t: 'task_x',
    tn: 'tenant-a',
    k: 'confirm',
    c: 'accept',
    e: Date.now() + 1000,
    n: 'n',
  });
  assert.equal(verifyCallback(SECRET, link), null);
  // A callback token naming a key outside the reserved prefix is refused too.
  assert.equal(
    verifyCallback(SECRET, signToken(SECRET, { cb: 1, t: 'task_x', tn: 'tenant-a', k: 'confirm' })),
    null,
  );
});
