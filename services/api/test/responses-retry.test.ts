/**
 * A `/responses` request with an Idempotency-Key whose caller leaves is not cancelled: the key
 * says the caller will retry, and the retry gets the finished response (sync) or the whole
 * stream (stream: true). Without a key nobody could fetch the result, and a departure cancels.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { until } from '@taskline/testing';
import {
  call,
  KEY_A,
  nextQueued,
  openSse,
  runWorker,
  type InProcessApi,
  type RedisAndStore,
  useStackWithApi,
} from './helpers.js';

let stack: RedisAndStore;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

const body = { model: 'tiny-chat', input: 'Say hi.' };

/** The server has handled the departure (and written any cancel it causes). */
const departed = async () => {
  await until('the server to see the caller leave', () => (api.api.inFlight === 0 ? true : undefined));
  await api.api.settled();
};

test('a synchronous caller with an Idempotency-Key that leaves gets the finished response on its retry', async () => {
  const headers = { 'idempotency-key': 'sync-leaves-1' };
  const controller = new AbortController();
  const first = fetch(`${api.base}/lmsp/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal: controller.signal,
  }).catch((err: Error) => err);
  const id = await nextQueued(stack.redis);
  controller.abort();
  assert.equal(((await first) as Error).name, 'AbortError');
  await departed();
  assert.equal((await stack.worker.get(id))?.status, 'queued', 'not cancelled');

  const retry = call(api.base, 'POST', '/lmsp/v1/responses', { body, headers });
  await runWorker(stack.worker, id, ['Hi', '!']);
  const reply = await retry;
  assert.equal(reply.status, 200, reply.text);
  const response = reply.body as { status: string; output: { content: { text: string }[] }[] };
  assert.equal(response.status, 'completed');
  assert.equal(response.output[0]?.content[0]?.text, 'Hi!');
});

test('a stream: true caller with an Idempotency-Key that leaves gets the whole stream on its retry', async () => {
  const headers = { 'idempotency-key': 'stream-leaves-1' };
  const first = await openSse(api.base, '/lmsp/v1/responses', {
    method: 'POST',
    body: { ...body, stream: true },
    headers,
  });
  await first.waitFor(1);
  const id = await nextQueued(stack.redis);
  first.abort();
  await first.done;
  await departed();
  assert.equal((await stack.worker.get(id))?.status, 'queued', 'not cancelled');

  const retry = await openSse(api.base, '/lmsp/v1/responses', {
    method: 'POST',
    body: { ...body, stream: true },
    headers,
  });
  await runWorker(stack.worker, id, ['o', 'k']);
  await retry.done;
  assert.equal(retry.events[0]?.event, 'response.created');
  assert.equal(retry.events.at(-1)?.event, 'response.completed');
  assert.deepEqual(
    retry.events.map((e) => Number(e.id)),
    retry.events.map((_, i) => i + 1),
  );
});

test('without an Idempotency-Key a synchronous caller that leaves still cancels its response', async () => {
  const controller = new AbortController();
  const first = fetch(`${api.base}/lmsp/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: controller.signal,
  }).catch((err: Error) => err);
  const id = await nextQueued(stack.redis);
  controller.abort();
  await first;
  await until('the task to be cancelled', async () =>
    (await stack.worker.get(id))?.status === 'cancelled' ? true : undefined,
  );
});

test('a create whose caller leaves before its place is held frees the place at once, not after 60 s', async () => {
  const limits = api.api.limits;
  const takeCreate = limits.takeCreate.bind(limits);
  let asked!: () => void;
  const seen = new Promise<void>((r) => (asked = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  // The bucket answers only after the caller has gone (a slow Redis round trip).
  let taken!: (id: string) => void;
  const held = new Promise<string>((r) => (taken = r));
  limits.takeCreate = async (tenant) => {
    asked();
    await gate;
    const slot = await takeCreate(tenant);
    taken(slot.taskId);
    return slot;
  };
  try {
    // Half a body, then gone: no task can come of this request.
    const leaving = request(`${api.base}/lmsp/v1/tasks`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY_A}`,
        'content-type': 'application/json',
        'content-length': '1000',
      },
    });
    leaving.on('error', () => undefined);
    leaving.write('{"type":"response",');
    await seen;
    leaving.destroy();
    await until('the server to see the caller leave', () => (api.api.inFlight === 0 ? true : undefined));
    release();
    const place = await held;
    // Far sooner than the 60 s after which a crashed create's place is taken for abandoned.
    await until(
      'the place to be freed',
      async () => ((await stack.redis.zscore('tl:api:active:{tenant-a}', place)) === null ? true : undefined),
      10_000,
    );
  } finally {
    limits.takeCreate = takeCreate;
  }
});

test('a create whose caller leaves while the task is being written still counts the task under the cap', async () => {
  const limits = api.api.limits;
  const takeCreate = limits.takeCreate.bind(limits);
  const placed = (id: string) => stack.redis.zscore('tl:api:active:{tenant-a}', id);
  let admitted!: (id: string) => void;
  const inCreate = new Promise<string>((r) => (admitted = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  // The place is held and the create under way when the caller leaves.
  limits.takeCreate = async (tenant) => {
    const slot = await takeCreate(tenant);
    return {
      ...slot,
      admit: async () => {
        await slot.admit();
        admitted(slot.taskId);
        await gate;
      },
    };
  };
  try {
    const controller = new AbortController();
    const leaving = fetch(`${api.base}/lmsp/v1/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'response', input: body }),
      signal: controller.signal,
    }).catch((err: Error) => err);
    const id = await inCreate;
    controller.abort();
    await leaving;
    // The departure frees the place first...
    await until('the departure to free the place', async () =>
      (await placed(id)) === null ? true : undefined,
    );
    release();
    // ...and the task the create still wrote under its id takes a place all the same.
    await until('the created task to count under the cap', async () =>
      (await placed(id)) !== null ? true : undefined,
    );
    assert.equal((await stack.worker.get(id))?.tenant, 'tenant-a');
  } finally {
    limits.takeCreate = takeCreate;
  }
});
