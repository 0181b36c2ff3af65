import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  call,
  KEY_B,
  startApi,
  startRedisAndStore,
  TASK_BODY,
  type InProcessApi,
  type Reply,
  type RedisAndStore,
} from './helpers.js';

let stack: RedisAndStore;
let api: InProcessApi;
before(async () => {
  stack = await startRedisAndStore();
  api = await startApi(stack, { TASKLINE_MAX_BODY_BYTES: '4096' });
});
after(async () => {
  await api.close();
  await stack.close();
});

const code = (r: Reply) => (r.body as { code?: string }).code;
const isProblem = (r: Reply, status: number, expected: string) => {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(code(r), expected, r.text);
  assert.equal((r.body as { status: number }).status, status);
  assert.doesNotMatch(r.text, /<html|at .*\.ts:\d+/i, 'no HTML page, no stack trace');
};

/** Headers a client could tell two answers apart by; Date and the request id differ on every request. */
const comparable = (r: Reply) => [...r.headers].filter(([k]) => k !== 'date' && k !== 'x-request-id');

describe('cross-tenant probes', () => {
  test('another tenant’s task reads exactly like one that never existed, on every route', async () => {
    const created = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY });
    const id = (created.body as { id: string }).id;
    const never = 'task_' + '0'.repeat(26);
    const malformed = 'not-a-task';
    const probes: [string, (id: string) => string, Record<string, string>?][] = [
      ['GET', (i) => `/lmsp/v1/tasks/${i}`],
      ['POST', (i) => `/lmsp/v1/tasks/${i}/cancel`],
      ['GET', (i) => `/lmsp/v1/tasks/${i}/events`],
      ['GET', (i) => `/lmsp/v1/tasks/${i}/events`, { 'last-event-id': '1' }],
      ['GET', (i) => `/lmsp/v1/tasks/${i}/events?starting_after=0`],
      // HEAD answers a stream's headers without opening one (its own branch of the handler).
      ['HEAD', (i) => `/lmsp/v1/tasks/${i}`],
      ['HEAD', (i) => `/lmsp/v1/tasks/${i}/events`],
    ];
    for (const [method, path, headers] of probes) {
      // The OpenAPI document lists GET; Express answers HEAD with the GET handler.
      const opts = { key: KEY_B, headers, skipCheck: method === 'HEAD' };
      const foreign = await call(api.base, method, path(id), opts);
      const missing = await call(api.base, method, path(never), opts);
      const garbage = await call(api.base, method, path(malformed), opts);
      // HEAD has no body: its headers (Content-Length among them) are what could tell.
      if (method === 'HEAD') assert.equal(foreign.status, 404);
      else isProblem(foreign, 404, 'task_not_found');
      for (const other of [missing, garbage]) {
        assert.equal(foreign.status, other.status);
        assert.equal(foreign.text, other.text, `${method} ${path('{id}')}: byte-for-byte the same body`);
        assert.deepEqual(comparable(foreign), comparable(other), `${method} ${path('{id}')}: same headers`);
      }
    }
    // And the owner still sees it, untouched by the probes.
    const own = await call(api.base, 'GET', `/lmsp/v1/tasks/${id}`);
    assert.equal((own.body as { status: string }).status, 'queued');
  });
});

describe('bad requests get problem+json with stable codes', () => {
  const post = (opts: Parameters<typeof call>[3]) => call(api.base, 'POST', '/lmsp/v1/tasks', opts);

  test('malformed JSON', async () => {
    isProblem(
      await post({ raw: '{"type": "response",', headers: { 'content-type': 'application/json' } }),
      400,
      'invalid_request',
    );
    isProblem(
      await post({ raw: '"just a string"', headers: { 'content-type': 'application/json' } }),
      400,
      'invalid_request',
    );
  });

  test('wrong types, missing and unknown fields name the field', async () => {
    const wrongType = await post({
      body: { ...TASK_BODY, input: { ...TASK_BODY.input, max_output_tokens: 'many' } },
    });
    isProblem(wrongType, 400, 'invalid_request');
    assert.match((wrongType.body as { detail: string }).detail, /input\.max_output_tokens/);
    isProblem(await post({ body: { ...TASK_BODY, type: 'image' } }), 400, 'invalid_request');
    isProblem(await post({ body: { type: 'response' } }), 400, 'invalid_request');
    isProblem(await post({ body: [TASK_BODY] }), 400, 'invalid_request');
    isProblem(await post({ body: { ...TASK_BODY, on_restart: 'sometimes' } }), 400, 'invalid_request');
    const unknown = await post({ body: { ...TASK_BODY, priority: 'high' } });
    isProblem(unknown, 400, 'invalid_request');
    assert.match((unknown.body as { detail: string }).detail, /priority/);
    isProblem(
      await post({ body: { ...TASK_BODY, input: { ...TASK_BODY.input, temprature: 1 } } }),
      400,
      'invalid_request',
    );
    isProblem(
      await post({ body: { ...TASK_BODY, input: { ...TASK_BODY.input, max_output_tokens: 10 ** 6 } } }),
      400,
      'invalid_request',
    );
    isProblem(
      await call(api.base, 'POST', '/lmsp/v1/responses', {
        body: { model: 'tiny-chat', input: 'x', stream: 'yes' },
      }),
      400,
      'invalid_request',
    );
  });

  test('a metadata key named __proto__ is refused, not dropped unchecked', async () => {
    // An object literal cannot carry the key as data: the body is written out.
    const body = (metadata: string) =>
      `{"type":"response","input":{"model":"tiny-chat","input":"hi","metadata":${metadata}}}`;
    const headers = { 'content-type': 'application/json' };
    for (const metadata of ['{"__proto__":5}', '{"a":"b","__proto__":"x"}']) {
      const refused = await post({ raw: body(metadata), headers });
      isProblem(refused, 400, 'invalid_request');
      assert.equal((refused.body as { param?: string }).param, 'input.metadata.__proto__', refused.text);
    }
    // Other keys are kept as sent.
    const kept = await post({ raw: body('{"constructor":"c","a":"b"}'), headers });
    assert.equal(kept.status, 202, kept.text);
    const task = (await stack.worker.get((kept.body as { id: string }).id))!;
    assert.deepEqual((task.request as { metadata: unknown }).metadata, { constructor: 'c', a: 'b' });
  });

  test('oversized bodies are 413 payload_too_large', async () => {
    const big = { ...TASK_BODY, input: { ...TASK_BODY.input, input: 'x'.repeat(8192) } };
    isProblem(await post({ body: big }), 413, 'payload_too_large');
    isProblem(
      await call(api.base, 'POST', '/lmsp/v1/responses', {
        body: { model: 'tiny-chat', input: 'x'.repeat(8192) },
      }),
      413,
      'payload_too_large',
    );
  });

  test('bad headers: content type, Idempotency-Key, Last-Event-ID, Authorization', async () => {
    isProblem(
      await post({ raw: JSON.stringify(TASK_BODY), headers: { 'content-type': 'text/plain' } }),
      400,
      'invalid_request',
    );
    isProblem(await post({}), 400, 'invalid_request');
    isProblem(
      await post({ body: TASK_BODY, headers: { 'idempotency-key': 'x'.repeat(256) } }),
      400,
      'invalid_request',
    );
    isProblem(
      await post({ body: TASK_BODY, headers: { 'idempotency-key': 'has space' } }),
      400,
      'invalid_request',
    );
    isProblem(
      await post({
        raw: JSON.stringify(TASK_BODY),
        headers: { 'content-type': 'application/json', 'content-encoding': 'br' },
      }),
      400,
      'invalid_request',
    );
    const id = 'task_' + '0'.repeat(26);
    isProblem(
      await call(api.base, 'GET', `/lmsp/v1/tasks/${id}/events`, { headers: { 'last-event-id': '-1' } }),
      400,
      'invalid_request',
    );
    isProblem(
      await call(api.base, 'GET', `/lmsp/v1/tasks/${id}/events?starting_after=1.5`),
      400,
      'invalid_request',
    );
    const noAuth = await call(api.base, 'GET', '/lmsp/v1/models', { key: null });
    isProblem(noAuth, 401, 'unauthorized');
    assert.match(noAuth.headers.get('www-authenticate') ?? '', /^Bearer/);
    isProblem(
      await call(api.base, 'GET', '/lmsp/v1/models', { headers: { authorization: 'Basic dTpw' } }),
      401,
      'unauthorized',
    );
    isProblem(
      await call(api.base, 'GET', '/lmsp/v1/models', { key: 'wrong-key-123456' }),
      401,
      'unauthorized',
    );
  });

  test('unknown routes are 404 and wrong methods 405 with Allow, all problem+json', async () => {
    const unknown = await call(api.base, 'GET', '/nope');
    isProblem(unknown, 404, 'invalid_request');
    isProblem(await call(api.base, 'GET', '/lmsp/v1/nope'), 404, 'invalid_request');
    const wrong = await call(api.base, 'DELETE', '/lmsp/v1/tasks/task_x');
    isProblem(wrong, 405, 'invalid_request');
    assert.equal(wrong.headers.get('allow'), 'GET, HEAD, OPTIONS');
    const put = await call(api.base, 'PUT', '/lmsp/v1/tasks', { body: TASK_BODY });
    isProblem(put, 405, 'invalid_request');
    assert.equal(put.headers.get('allow'), 'POST, OPTIONS');
  });
});
