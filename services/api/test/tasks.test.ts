/** Task create and read, idempotency, cancel (LMSP 7) and discovery; event streams and responses have files of their own. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  call,
  checkSse,
  createTask,
  delta,
  KEY_B,
  openSse,
  runWorker,
  TASK_BODY,
  type InProcessApi,
  type RedisAndStore,
  type TaskReply as Task,
  useStackWithApi,
} from './helpers.js';

let stack: RedisAndStore;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

const create = (body?: unknown, headers?: Record<string, string>) => createTask(api.base, body, headers);

describe('tasks', () => {
  test('create persists the task before 202 and GET returns it', async () => {
    const r = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY });
    assert.equal(r.status, 202);
    const task = r.body as Task;
    assert.equal(task.status, 'queued');
    assert.equal(task.events_url, `/lmsp/v1/tasks/${task.id}/events`);
    assert.equal(r.headers.get('location'), `/lmsp/v1/tasks/${task.id}`);
    const stored = await stack.worker.get(task.id, 'tenant-a');
    assert.equal(stored?.status, 'queued', 'persisted in Redis when the 202 arrived');
    assert.equal(stored?.onRestart, 'fail');
    const got = await call(api.base, 'GET', `/lmsp/v1/tasks/${task.id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, task);
  });

  test('input.stream is ignored whatever its value; an optional field sent as null counts as absent (LMSP 7.1)', async () => {
    for (const stream of [true, false, 'yes', 1, null, { a: 1 }]) {
      const task = await create({ ...TASK_BODY, input: { ...TASK_BODY.input, stream } });
      const stored = await stack.worker.get(task.id);
      assert.equal(
        (stored?.request as { stream?: unknown }).stream,
        undefined,
        `stream ${JSON.stringify(stream)}`,
      );
    }
    const nulls = await create({
      ...TASK_BODY,
      on_restart: null,
      input: { ...TASK_BODY.input, instructions: null, temperature: null, seed: null, metadata: null },
    });
    assert.equal(nulls.on_restart, 'fail', 'on_restart: null is the default');
    const stored = (await stack.worker.get(nulls.id))!;
    assert.equal(stored.onRestart, 'fail');
    const request = stored.request as Record<string, unknown>;
    for (const field of ['instructions', 'temperature', 'seed', 'metadata'])
      assert.ok(!(field in request) || request[field] === undefined, `${field} stored as ${request[field]}`);
    // A required field is still required: null is no model.
    const refused = await call(api.base, 'POST', '/lmsp/v1/tasks', {
      body: { ...TASK_BODY, input: { ...TASK_BODY.input, model: null } },
    });
    assert.equal(refused.status, 400);
  });

  test('an Idempotency-Key retry may send null for an absent field, or another ignored input.stream', async () => {
    // Tenant B's own rate bucket: this file's other tests spend most of tenant A's burst.
    const headers = { 'idempotency-key': 'null-is-absent-1' };
    const { on_restart: _policy, ...unset } = TASK_BODY;
    const first = (await call(api.base, 'POST', '/lmsp/v1/tasks', { body: unset, headers, key: KEY_B }))
      .body as Task;
    for (const body of [
      { ...unset, on_restart: null },
      { ...unset, input: { ...TASK_BODY.input, instructions: null, stream: true } },
      { ...unset, input: { ...TASK_BODY.input, stream: { any: 'thing' } } },
    ]) {
      const again = await call(api.base, 'POST', '/lmsp/v1/tasks', { body, headers, key: KEY_B });
      assert.equal(again.status, 202, `${JSON.stringify(body)}: ${again.text}`);
      assert.equal((again.body as Task).id, first.id);
    }
    const changed = await call(api.base, 'POST', '/lmsp/v1/tasks', {
      body: { ...unset, input: { ...TASK_BODY.input, instructions: 'Be brief.' } },
      headers,
      key: KEY_B,
    });
    assert.equal(changed.status, 422, 'a field that counts still conflicts');
  });

  test('on_restart resume is accepted only on a model that can snapshot; unknown models are model_not_found', async () => {
    const ok = await create({ ...TASK_BODY, on_restart: 'resume' });
    assert.equal((await stack.worker.get(ok.id))?.onRestart, 'resume');
    const plain = { ...TASK_BODY, on_restart: 'resume', input: { ...TASK_BODY.input, model: 'plain-chat' } };
    const refused = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: plain });
    assert.equal(refused.status, 400);
    assert.equal((refused.body as { code: string }).code, 'unsupported_capability');
    const retry = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: { ...plain, on_restart: 'retry' } });
    assert.equal(retry.status, 202);
    const missing = await call(api.base, 'POST', '/lmsp/v1/tasks', {
      body: { ...TASK_BODY, input: { ...TASK_BODY.input, model: 'nope' } },
    });
    assert.equal(missing.status, 404);
    assert.equal((missing.body as { code: string }).code, 'model_not_found');
  });

  test('50 concurrent retries with one Idempotency-Key make one task; another body with that key is 422', async () => {
    const headers = { 'idempotency-key': 'idem-concurrent-1' };
    const before = await stack.redis.zcard('tl:{sched}:ready:tiny-chat:tenant-a');
    const replies = await Promise.all(
      Array.from({ length: 50 }, () =>
        call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY, headers }),
      ),
    );
    const accepted = replies.filter((r) => r.status === 202);
    const ids = new Set(accepted.map((r) => (r.body as Task).id));
    assert.equal(ids.size, 1, 'every accepted retry names the same task');
    for (const r of replies.filter((x) => x.status !== 202)) {
      assert.equal(r.status, 409, r.text);
      assert.equal((r.body as { code: string }).code, 'idempotency_key_in_use');
    }
    assert.equal(
      await stack.redis.zcard('tl:{sched}:ready:tiny-chat:tenant-a'),
      before + 1,
      'exactly one task was queued',
    );
    const again = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY, headers });
    assert.equal(again.status, 202);
    assert.equal((again.body as Task).id, [...ids][0]);
    // Key order does not change the canonical body.
    const reordered = {
      on_restart: 'fail',
      input: { input: TASK_BODY.input.input, model: 'tiny-chat' },
      type: 'response',
    };
    assert.equal(
      ((await call(api.base, 'POST', '/lmsp/v1/tasks', { body: reordered, headers })).body as Task).id,
      [...ids][0],
    );
    const other = await call(api.base, 'POST', '/lmsp/v1/tasks', {
      body: { ...TASK_BODY, on_restart: 'retry' },
      headers,
    });
    assert.equal(other.status, 422);
    assert.equal((other.body as { code: string }).code, 'idempotency_key_reused');
    // The same key of another tenant is another key.
    const b = await call(api.base, 'POST', '/lmsp/v1/tasks', { key: KEY_B, body: TASK_BODY, headers });
    assert.equal(b.status, 202);
    assert.notEqual((b.body as Task).id, [...ids][0]);
  });
});

/** The same JSON with every object's keys in reverse order, at every depth (arrays keep their order). */
function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .reverse()
      .map((k) => [k, reverseKeys((value as Record<string, unknown>)[k])]),
  );
}

describe('idempotency fingerprints', () => {
  const nested = () => ({
    type: 'response',
    on_restart: 'fail',
    input: {
      model: 'tiny-chat',
      max_output_tokens: 16,
      input: [
        {
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: 'Nested fingerprint.' }],
        },
      ],
    },
  });

  test('any change of a nested field conflicts; keys reordered at any depth still match', async () => {
    const headers = { 'idempotency-key': 'nested-fingerprint-1' };
    const first = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: nested(), headers });
    assert.equal(first.status, 202, first.text);
    const id = (first.body as Task).id;

    const reordered = reverseKeys(nested());
    assert.notEqual(JSON.stringify(reordered), JSON.stringify(nested()));
    const again = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: reordered, headers });
    assert.equal(again.status, 202, again.text);
    assert.equal((again.body as Task).id, id, 'reordered keys at every depth are the same request');

    const changes: [string, (b: ReturnType<typeof nested>) => void][] = [
      ['input.model', (b) => (b.input.model = 'plain-chat')],
      ['input.max_output_tokens', (b) => (b.input.max_output_tokens = 17)],
      ['a message text', (b) => (b.input.input[0]!.content[0]!.text = 'Nested fingerprint!')],
      ['a message role', (b) => (b.input.input[0]!.role = 'developer')],
    ];
    for (const [what, change] of changes) {
      const body = nested();
      change(body);
      for (const sent of [body, reverseKeys(body)]) {
        const r = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: sent, headers });
        assert.equal(r.status, 422, `${what} changed: ${r.text}`);
        assert.equal((r.body as { code: string }).code, 'idempotency_key_reused', what);
      }
    }
  });
});

describe('nesting', () => {
  test('a body nested deeper than 64 levels is 400 invalid_request, never a 500, with or without a key', async () => {
    // Deep enough that storing or fingerprinting it recursively overflows the stack.
    const deep = '['.repeat(20_000) + ']'.repeat(20_000);
    const parts = `[{"type":"input_text","text":"hi","annotations":${deep}}]`;
    const bodies: [string, string][] = [
      ['/lmsp/v1/responses', `{"model":"tiny-chat","input":[{"role":"user","content":${parts}}]}`],
      ['/lmsp/v1/tasks', `{"type":"response","input":{"model":"tiny-chat","input":"hi","stream":${deep}}}`],
    ];
    for (const [path, raw] of bodies)
      for (const key of [undefined, `deep-${path.length}`]) {
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (key) headers['idempotency-key'] = key;
        // Tenant B's own rate bucket, as above.
        const r = await call(api.base, 'POST', path, { raw, headers, key: KEY_B });
        assert.equal(r.status, 400, `${path} ${key ?? ''}: ${r.text}`);
        assert.equal((r.body as { code: string }).code, 'invalid_request');
        assert.match((r.body as { detail: string }).detail, /nested deeper than 64/);
      }
    // 64 levels are fine.
    const ok = '['.repeat(60) + ']'.repeat(60);
    const r = await call(api.base, 'POST', '/lmsp/v1/tasks', {
      raw: `{"type":"response","input":{"model":"tiny-chat","input":"hi","stream":${ok}}}`,
      headers: { 'content-type': 'application/json' },
      key: KEY_B,
    });
    assert.equal(r.status, 202, r.text);
  });
});

describe('cancel (LMSP 7.3)', () => {
  const cancel = (id: string) => call(api.base, 'POST', `/lmsp/v1/tasks/${id}/cancel`);

  test('queued -> cancelled at once, idempotent, with one final response.cancelled event', async () => {
    const task = await create();
    const first = await cancel(task.id);
    assert.equal(first.status, 200);
    assert.equal((first.body as Task).status, 'cancelled');
    const again = await cancel(task.id);
    assert.equal(again.status, 200);
    assert.equal((again.body as Task).status, 'cancelled');
    const read = await openSse(api.base, task.events_url);
    await read.done;
    checkSse(api.base, 'GET', task.events_url, read);
    assert.deepEqual(
      read.events.map((e) => e.event),
      ['response.created', 'response.cancelled'],
    );
  });

  for (const stage of ['loading', 'running'] as const) {
    test(`${stage} -> cancelling, repeat is a no-op, then cancelled when the worker stops`, async () => {
      const task = await create();
      const { attempt } = await stack.worker.claim(task.id, 'w', 60_000);
      if (stage === 'running') await stack.worker.start(task.id, attempt);
      const first = await cancel(task.id);
      assert.equal((first.body as Task).status, 'cancelling');
      const repeat = await cancel(task.id);
      assert.equal(repeat.status, 200);
      assert.equal((repeat.body as Task).status, 'cancelling');
      await stack.worker.finish(task.id, attempt, { status: 'cancelled' });
      const done = await call(api.base, 'GET', `/lmsp/v1/tasks/${task.id}`);
      assert.equal((done.body as Task).status, 'cancelled');
      assert.equal((await cancel(task.id)).status, 200);
    });
  }

  test('a restarted running task stays running in GET and its events; a cancel then goes through cancelling (LMSP 7.2)', async () => {
    const task = await create({ ...TASK_BODY, on_restart: 'retry' });
    const { attempt } = await stack.worker.claim(task.id, 'w', 60_000, { start: true });
    await stack.worker.append(task.id, attempt, [1], [delta('lost')]);
    // The worker is drained past its deadline: a new attempt is queued inside the engine.
    assert.equal((await stack.worker.restart(task.id, attempt))?.status, 'queued');
    const got = await call(api.base, 'GET', `/lmsp/v1/tasks/${task.id}`);
    assert.equal((got.body as Task).status, 'running');
    const cancelled = await cancel(task.id);
    assert.equal((cancelled.body as Task).status, 'cancelled');
    const read = await openSse(api.base, task.events_url);
    await read.done;
    checkSse(api.base, 'GET', task.events_url, read);
    assert.deepEqual(
      read.events.map((e) => [e.event, e.data.task_status]),
      [
        ['response.created', 'queued'],
        ['response.in_progress', 'loading'],
        ['response.in_progress', 'running'],
        ['response.output_text.delta', 'running'],
        ['response.restarted', 'running'],
        ['response.in_progress', 'cancelling'],
        ['response.cancelled', 'cancelled'],
      ],
    );
  });

  test('succeeded and failed tasks are 409 task_not_cancelable; unknown ids 404', async () => {
    const ok = await create();
    await runWorker(stack.worker, ok.id, ['hi']);
    const r1 = await cancel(ok.id);
    assert.equal(r1.status, 409);
    assert.equal((r1.body as { code: string }).code, 'task_not_cancelable');
    const bad = await create();
    const { attempt } = await stack.worker.claim(bad.id, 'w', 60_000);
    await stack.worker.finish(bad.id, attempt, {
      status: 'failed',
      error: {
        type: 'about:blank',
        title: 'model crashed',
        status: 500,
        detail: 'boom',
        code: 'internal_error',
        message: 'boom',
      },
    });
    const failed = await call(api.base, 'GET', `/lmsp/v1/tasks/${bad.id}`);
    assert.equal((failed.body as Task).error?.code, 'internal_error');
    assert.equal((await cancel(bad.id)).status, 409);
    const missing = await cancel('task_00000000000000000000000000');
    assert.equal(missing.status, 404);
    assert.equal((missing.body as { code: string }).code, 'task_not_found');
  });
});

describe('discovery', () => {
  test('capabilities and models come from configuration', async () => {
    const caps = await call(api.base, 'GET', '/lmsp/v1/capabilities');
    assert.equal(caps.status, 200);
    const c = caps.body as { event_resume: boolean; on_restart: string[]; resume_models: string[] };
    assert.equal(c.event_resume, true);
    assert.deepEqual(c.on_restart, ['fail', 'retry', 'resume']);
    assert.deepEqual(c.resume_models, ['tiny-chat']);
    const models = await call(api.base, 'GET', '/lmsp/v1/models');
    assert.deepEqual(
      (models.body as { data: { id: string; capabilities: { snapshot: boolean } }[] }).data.map((m) => [
        m.id,
        m.capabilities.snapshot,
      ]),
      [
        ['tiny-chat', true],
        ['plain-chat', false],
      ],
    );
  });

  test('health and readiness', async () => {
    assert.equal((await call(api.base, 'GET', '/healthz', { key: null })).status, 200);
    assert.equal((await call(api.base, 'GET', '/readyz', { key: null })).status, 200);
  });
});
