/**
 * The OpenAI Responses API projection over raw HTTP, with the test playing the worker: what is
 * stored, how lifecycle events are served, the response routes' errors and their OpenAI member.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  call,
  checkSse,
  KEY_B,
  openSse,
  type InProcessApi,
  type Reply,
  type RedisAndStore,
  useStackWithApi,
} from './helpers.js';

let stack: RedisAndStore;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

const taskIdOf = (responseId: string) => `task_${responseId.slice('resp_'.length)}`;
const background = async (extra: Record<string, unknown> = {}) => {
  const r = await call(api.base, 'POST', '/lmsp/v1/responses', {
    body: { model: 'tiny-chat', input: 'Hi', background: true, ...extra },
  });
  assert.equal(r.status, 202, r.text);
  return r.body as { id: string; status: string } & Record<string, unknown>;
};

describe('requests', () => {
  test('the OpenAI-only parameters are accepted, never stored for the worker; LMSP fields are', async () => {
    const r = await background({
      input: [{ role: 'user', content: 'Hello' }],
      instructions: 'Be brief.',
      store: true,
      user: 'u-1',
      parallel_tool_calls: true,
      truncation: 'disabled',
      service_tier: 'auto',
      tool_choice: 'none',
      tools: [],
      include: [],
      reasoning: null,
      metadata: { k: 'v' },
    });
    const task = (await stack.worker.get(taskIdOf(r.id)))!;
    assert.deepEqual(Object.keys(task.request as object).sort(), [
      'input',
      'instructions',
      'max_output_tokens',
      'metadata',
      'model',
    ]);
  });

  test("a response echoes the request's instructions, metadata and sampling, as OpenAI's does", async () => {
    const sent = {
      instructions: 'Be brief.',
      metadata: { order: 'A-17' },
      temperature: 0.5,
      top_p: 0.9,
      max_output_tokens: 16,
    };
    const echo = (r: Record<string, unknown>) => Object.fromEntries(Object.keys(sent).map((k) => [k, r[k]]));
    const created = await background(sent);
    assert.deepEqual(echo(created), sent);
    const read = await call(api.base, 'GET', `/lmsp/v1/responses/${created.id}`);
    assert.deepEqual(echo(read.body as Record<string, unknown>), sent);
    // Left out: null, and an empty metadata map, as OpenAI answers (max_output_tokens: the cap applied).
    const plain = await background();
    assert.deepEqual(echo(plain), {
      instructions: null,
      metadata: {},
      temperature: null,
      top_p: null,
      max_output_tokens: plain.max_output_tokens,
    });
    assert.equal(typeof plain.max_output_tokens, 'number');
    // OpenAI's bound on metadata: 16 pairs.
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
    const refused = await call(api.base, 'POST', '/lmsp/v1/responses', {
      body: { model: 'tiny-chat', input: 'Hi', background: true, metadata: many },
    });
    assert.equal(refused.status, 400, refused.text);
    assert.equal((refused.body as { param: string }).param, 'metadata');
  });

  test('a refused value is 400 naming the parameter, in the problem and in its OpenAI member (OpenAI’s path form)', async () => {
    const cases: [Record<string, unknown>, string, string?][] = [
      [{ truncation: 'auto' }, 'truncation'],
      [{ text: { format: { type: 'json_schema' } } }, 'text.format.type'],
      [{ conversation: 'conv_1' }, 'conversation'],
      [{ store: false, background: true }, 'store'],
      [{ input: [{ role: 'tool', content: 'x' }] }, 'input.0.role', 'input[0].role'],
      [
        { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] },
        'input.0.content.0.type',
        'input[0].content[0].type',
      ],
      [{ metadata: { k: 1 } }, 'metadata.k'],
    ];
    for (const [extra, param, openAiParam = param] of cases) {
      const r = await call(api.base, 'POST', '/lmsp/v1/responses', {
        body: { model: 'tiny-chat', input: 'Hi', ...extra },
      });
      assert.equal(r.status, 400, r.text);
      assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
      const body = r.body as { code: string; param: string; detail: string; error: Record<string, unknown> };
      assert.equal(body.code, 'invalid_request');
      assert.equal(body.param, param, r.text);
      assert.ok(body.detail.includes(param), body.detail);
      assert.deepEqual(body.error, {
        message: body.detail,
        type: 'invalid_request_error',
        code: 'invalid_request',
        param: openAiParam,
      });
      assert.equal((body as { errors?: { path: string }[] }).errors?.[0]?.path, param, 'LMSP keeps its form');
    }
  });
});

describe('lifecycle events', () => {
  test('progress events and a failure without output carry the response they stand for', async () => {
    const r = await background();
    const id = taskIdOf(r.id);
    const { attempt } = await stack.worker.claim(id, 'w', 60_000);
    await stack.worker.start(id, attempt);
    const problem = {
      type: 'about:blank',
      title: 'boom',
      status: 500,
      detail: 'boom',
      code: 'internal_error',
      message: 'boom',
    };
    await stack.worker.finish(id, attempt, { status: 'failed', error: problem });
    const path = `/lmsp/v1/responses/${r.id}?stream=true`;
    const read = await openSse(api.base, path);
    await read.done;
    checkSse(api.base, 'GET', path, read);
    assert.deepEqual(
      read.events.map((e) => [e.event, e.data.task_status, (e.data.response as { status: string }).status]),
      [
        ['response.created', 'queued', 'queued'],
        ['response.in_progress', 'loading', 'in_progress'],
        ['response.in_progress', 'running', 'in_progress'],
        ['response.failed', 'failed', 'failed'],
      ],
    );
    for (const e of read.events) assert.equal((e.data.response as { id: string }).id, r.id);
    assert.deepEqual((read.events.at(-1)!.data.response as { error: unknown }).error, problem);
    assert.deepEqual(read.events.at(-1)!.data.error, problem, 'LMSP’s own field stays');
    // The same events on the task's own stream.
    const task = await openSse(api.base, `/lmsp/v1/tasks/${id}/events`);
    await task.done;
    assert.deepEqual(
      task.events.map((e) => e.data),
      read.events.map((e) => e.data),
    );
  });
});

describe('response routes', () => {
  test('retrieve and cancel a queued background response; the task routes agree', async () => {
    const r = await background();
    assert.equal(r.status, 'queued');
    const got = await call(api.base, 'GET', `/lmsp/v1/responses/${r.id}`);
    assert.equal((got.body as { status: string }).status, 'queued');
    const cancelled = await call(api.base, 'POST', `/lmsp/v1/responses/${r.id}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal((cancelled.body as { status: string }).status, 'cancelled');
    const task = await call(api.base, 'GET', `/lmsp/v1/tasks/${taskIdOf(r.id)}`);
    assert.equal((task.body as { status: string }).status, 'cancelled');
    const again = await call(api.base, 'POST', `/lmsp/v1/responses/${r.id}/cancel`);
    assert.equal(again.status, 200, 'cancel is idempotent');
    const bad = await call(api.base, 'GET', `/lmsp/v1/responses/${r.id}?stream=yes`);
    assert.equal(bad.status, 400);
    assert.equal((bad.body as { param: string }).param, 'stream');
    // Input items as the document describes them (`call` checks every exchange against it).
    const items = await call(api.base, 'GET', `/lmsp/v1/responses/${r.id}/input_items?order=asc`);
    assert.equal(items.status, 200, items.text);
    assert.equal((items.body as { data: unknown[] }).data.length, 1);
    const included = await call(api.base, 'GET', `/lmsp/v1/responses/${r.id}/input_items?include[]=x`);
    assert.equal((included.body as { param: string }).param, 'include');
  });

  test('another tenant’s response reads exactly like one that never existed', async () => {
    const r = await background();
    const probes: [string, (id: string) => string][] = [
      ['GET', (i) => `/lmsp/v1/responses/${i}`],
      ['GET', (i) => `/lmsp/v1/responses/${i}?stream=true`],
      ['POST', (i) => `/lmsp/v1/responses/${i}/cancel`],
    ];
    for (const [method, path] of probes) {
      const replies: Reply[] = [];
      for (const id of [r.id, `resp_${'0'.repeat(26)}`, 'not-a-response', taskIdOf(r.id)])
        replies.push(await call(api.base, method, path(id), { key: KEY_B }));
      for (const reply of replies) {
        assert.equal(reply.status, 404, reply.text);
        assert.equal(reply.text, replies[0]!.text, `${method} ${path('{id}')}: the same body`);
      }
      const body = replies[0]!.body as { code: string; error: { type: string; code: string } };
      assert.equal(body.code, 'task_not_found');
      assert.deepEqual([body.error.type, body.error.code], ['not_found_error', 'task_not_found']);
    }
  });

  test('the OpenAPI document needs no credentials; other routes still do, with the OpenAI member', async () => {
    const doc = await call(api.base, 'GET', '/lmsp/v1/openapi.json', { key: null });
    assert.equal(doc.status, 200);
    const denied = await call(api.base, 'GET', '/lmsp/v1/models', { key: null });
    assert.equal(denied.status, 401);
    assert.deepEqual((denied.body as { error: unknown }).error, {
      message: (denied.body as { detail: string }).detail,
      type: 'authentication_error',
      code: 'unauthorized',
      param: null,
    });
  });
});
