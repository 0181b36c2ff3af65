import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { createParser } from 'eventsource-parser';
import { beforeEach, describe, test } from 'node:test';
import { taskKeys } from '@taskline/engine/keys';
import { until } from '@taskline/testing';
import {
  call,
  checkSse,
  completedResponse,
  delta,
  KEY_A,
  KEY_B,
  nextQueued,
  openSse,
  runWorker,
  startApi,
  TASK_BODY,
  type InProcessApi,
  type Stack,
  useStackWithApi,
} from './helpers.js';

let stack: Stack;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

type Task = {
  id: string;
  status: string;
  response: unknown;
  error: { code: string } | null;
  response_id: string;
  events_url: string;
};
const create = async (body: unknown = TASK_BODY, headers: Record<string, string> = {}) => {
  const r = await call(api.base, 'POST', '/lmsp/v1/tasks', { body, headers });
  assert.equal(r.status, 202, r.text);
  return r.body as Task;
};

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

describe('event streams', () => {
  test('a late client gets the whole history, then live events, one final event, then the end', async () => {
    const task = await create();
    const { attempt } = await stack.worker.claim(task.id, 'w', 60_000);
    await stack.worker.start(task.id, attempt);
    await stack.worker.append(
      task.id,
      attempt,
      [1],
      [{ type: 'response.output_text.delta', data: { task_status: 'running', delta: 'a' } }],
    );
    const read = await openSse(api.base, task.events_url);
    assert.equal(read.status, 200);
    await read.waitFor(4);
    await stack.worker.append(
      task.id,
      attempt,
      [2],
      [{ type: 'response.output_text.delta', data: { task_status: 'running', delta: 'b' } }],
    );
    const full = (await stack.worker.get(task.id))!;
    await stack.worker.finish(task.id, attempt, {
      status: 'succeeded',
      result: completedResponse(full, 'ab'),
    });
    await read.done;
    checkSse(api.base, 'GET', task.events_url, read);
    assert.deepEqual(
      read.events.map((e) => e.event),
      [
        'response.created',
        'response.in_progress',
        'response.in_progress',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.completed',
      ],
    );
    assert.deepEqual(
      read.events.map((e) => Number(e.id)),
      [1, 2, 3, 4, 5, 6],
    );
    const got = await call(api.base, 'GET', `/lmsp/v1/tasks/${task.id}`);
    assert.equal((got.body as Task).status, 'succeeded');
    assert.deepEqual((got.body as { response: unknown }).response, completedResponse(full, 'ab'));
  });

  test('Last-Event-ID and ?starting_after resume with exactly the missing events', async () => {
    const task = await create();
    await runWorker(stack.worker, task.id, ['x', 'y', 'z']);
    const byHeader = await openSse(api.base, task.events_url, { headers: { 'last-event-id': '3' } });
    await byHeader.done;
    assert.deepEqual(
      byHeader.events.map((e) => Number(e.id)),
      [4, 5, 6, 7],
    );
    const byQuery = await openSse(api.base, `${task.events_url}?starting_after=6`);
    await byQuery.done;
    assert.deepEqual(
      byQuery.events.map((e) => e.event),
      ['response.completed'],
    );
    const atEnd = await openSse(api.base, task.events_url, { headers: { 'last-event-id': '7' } });
    await atEnd.done;
    assert.equal(atEnd.status, 200);
    assert.deepEqual(atEnd.events, [], 'nothing after the final event; the stream just ends');
    const future = await call(api.base, 'GET', task.events_url, { headers: { 'last-event-id': '99' } });
    assert.equal(future.status, 400);
    const garbage = await call(api.base, 'GET', task.events_url, { headers: { 'last-event-id': 'abc' } });
    assert.equal(garbage.status, 400);
    assert.equal((garbage.body as { code: string }).code, 'invalid_request');
  });

  test('expired history is 410 event_history_expired', async () => {
    const task = await create();
    await runWorker(stack.worker, task.id, ['x']);
    // Event retention shorter than task retention: the log goes first (what PEXPIRE does later).
    await stack.redis.del(taskKeys(task.id).events);
    const r = await call(api.base, 'GET', task.events_url, { headers: { 'last-event-id': '2' } });
    assert.equal(r.status, 410);
    assert.equal((r.body as { code: string }).code, 'event_history_expired');
  });

  test('HEAD on an event stream answers its headers and opens no stream', async () => {
    const task = await create();
    const r = await fetch(api.base + task.events_url, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${KEY_A}` },
    });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(api.api.streams.size, 0);
  });

  test('a reader that stops reading is cut off with a retry hint and resumes without loss', async () => {
    // A tenant of its own without a request rate: following the retry hints reconnects once per
    // cut-off, as often as this client is slow to read (hundreds of times on a loaded machine),
    // which must not drain tenant-a's bucket for the tests after this one.
    const keyR = 'key-r-0123456789';
    const small = await startApi(stack, {
      TASKLINE_SSE_MAX_BUFFER_BYTES: '65536',
      TASKLINE_API_KEYS: `tenant-r:${keyR}`,
      TASKLINE_RATE_LIMIT_PER_S: '1000000',
      TASKLINE_RATE_LIMIT_BURST: '1000000',
    });
    try {
      const created = await call(small.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY, key: keyR });
      assert.equal(created.status, 202, created.text);
      const task = created.body as Task;
      const { port } = new URL(small.base);
      // HTTP/1.0 so the body is the raw stream, not chunked; the socket is paused after the headers.
      const socket = connect(Number(port), '127.0.0.1');
      socket.write(`GET ${task.events_url} HTTP/1.0\r\nAuthorization: Bearer ${keyR}\r\n\r\n`);
      let raw = '';
      socket.on('data', (chunk) => (raw += chunk.toString()));
      await until('the stream to start', () => (raw.includes('response.created') ? true : undefined));
      socket.pause();
      const { attempt } = await stack.worker.claim(task.id, 'test-worker', 60_000);
      await stack.worker.start(task.id, attempt);
      const piece = 'x'.repeat(50_000);
      for (let i = 0; i < 400; i++) await stack.worker.append(task.id, attempt, [1], [delta(piece)]);
      const current = (await stack.worker.get(task.id))!;
      await stack.worker.finish(task.id, attempt, {
        status: 'succeeded',
        result: completedResponse(current, ''),
      });
      const ended = new Promise((r) => socket.once('close', r));
      socket.resume();
      await ended;
      const ids: number[] = [];
      let retry: number | null = null;
      const parser = createParser({ onEvent: (e) => ids.push(Number(e.id)), onRetry: (ms) => (retry = ms) });
      parser.feed(raw.slice(raw.indexOf('\r\n\r\n') + 4));
      const total = (await stack.worker.get(task.id))!.seq;
      assert.notEqual(retry, null, 'the stream ended with a retry hint');
      assert.ok(ids.length < total, `cut off before the end (${ids.length} of ${total})`);
      assert.deepEqual(
        ids,
        ids.map((_, i) => i + 1),
      );
      // Like any SSE client, follow the retry hint until the final event.
      const all = [...ids];
      while (all.length < total) {
        const rest = await openSse(small.base, task.events_url, {
          key: keyR,
          headers: { 'last-event-id': String(all.at(-1)) },
        });
        await rest.done;
        all.push(...rest.events.map((e) => Number(e.id)));
      }
      assert.deepEqual(
        all,
        Array.from({ length: total }, (_, i) => i + 1),
      );
    } finally {
      await small.close();
    }
  });

  test('idle streams get heartbeat comments; a disconnect never cancels the task', async () => {
    const task = await create();
    const read = await openSse(api.base, task.events_url);
    await read.waitFor(1);
    await until('two heartbeat comments', () => (read.comments >= 2 ? true : undefined));
    read.abort();
    await read.done;
    // The server has handled the disconnect once the stream left its registry; a cancel would
    // have been sent by then.
    await until('the server to close the stream', () => (api.api.streams.size === 0 ? true : undefined));
    assert.equal((await stack.worker.get(task.id))?.status, 'queued');
  });
});

describe('responses', () => {
  const body = { model: 'tiny-chat', input: 'Say hi.', max_output_tokens: 16 };
  // Earlier tests leave queued tasks; here the next queued task must be the one just created.
  beforeEach(() => stack.redis.del('tl:{sched}:ready:tiny-chat:tenant-a'));

  test('synchronous JSON runs through the engine and a worker', async () => {
    const pending = call(api.base, 'POST', '/lmsp/v1/responses', { body });
    const id = await nextQueued(stack.redis);
    const stored = await stack.worker.get(id);
    assert.deepEqual(stored?.request, body, 'the request is what the worker runs');
    await runWorker(stack.worker, id, ['h', 'i']);
    const r = await pending;
    assert.equal(r.status, 200, r.text);
    assert.equal((r.body as { status: string }).status, 'completed');
    assert.equal((r.body as { id: string }).id, stored?.responseId);
  });

  test('stream: true is SSE from response.created to one final event', async () => {
    const reading = openSse(api.base, '/lmsp/v1/responses', {
      method: 'POST',
      body: { ...body, stream: true },
    });
    const id = await nextQueued(stack.redis);
    await runWorker(stack.worker, id, ['o', 'k']);
    const read = await reading;
    await read.done;
    checkSse(api.base, 'POST', '/lmsp/v1/responses', read);
    assert.equal(read.events[0]?.event, 'response.created');
    assert.equal(read.events.at(-1)?.event, 'response.completed');
  });

  test('an Idempotency-Key on a response replays the same response, never a second run', async () => {
    const headers = { 'idempotency-key': 'resp-idem-1' };
    const pending = call(api.base, 'POST', '/lmsp/v1/responses', { body, headers });
    const id = await nextQueued(stack.redis);
    await runWorker(stack.worker, id, ['once']);
    const first = await pending;
    const again = await call(api.base, 'POST', '/lmsp/v1/responses', { body, headers });
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, first.body);
    assert.equal(await stack.redis.zcard('tl:{sched}:ready:tiny-chat:tenant-a'), 0, 'nothing new was queued');
    const asTask = await call(api.base, 'POST', '/lmsp/v1/tasks', { body: TASK_BODY, headers });
    assert.equal(asTask.status, 422, 'the same key on another operation is another request');
  });

  test('a synchronous caller that disconnects cancels its response', async () => {
    const controller = new AbortController();
    const pending = fetch(`${api.base}/lmsp/v1/responses`, {
      method: 'POST',
      headers: { authorization: 'Bearer key-a-0123456789', 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: controller.signal,
    }).catch((err: Error) => err);
    const id = await nextQueued(stack.redis);
    const { attempt } = await stack.worker.claim(id, 'w', 60_000);
    await stack.worker.start(id, attempt);
    controller.abort();
    assert.equal(((await pending) as Error).name, 'AbortError');
    await until('the task to be cancelling', async () =>
      (await stack.worker.get(id))?.status === 'cancelling' ? true : undefined,
    );
    await stack.worker.finish(id, attempt, { status: 'cancelled' });
    assert.equal((await stack.worker.get(id))?.status, 'cancelled');
  });
});

describe('responses: disconnects', () => {
  beforeEach(() => stack.redis.del('tl:{sched}:ready:tiny-chat:tenant-a'));

  test('a stream: true caller that disconnects cancels its response', async () => {
    const read = await openSse(api.base, '/lmsp/v1/responses', {
      method: 'POST',
      body: { model: 'tiny-chat', input: 'Say hi.', stream: true },
    });
    await read.waitFor(1);
    const id = await nextQueued(stack.redis);
    read.abort();
    await read.done;
    await until('the task to be cancelled', async () =>
      (await stack.worker.get(id))?.status === 'cancelled' ? true : undefined,
    );
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
