/** POST /lmsp/v1/responses, synchronous and streamed, and what a caller's disconnect does. */
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { scanKeys, until } from '@taskline/testing';
import {
  call,
  checkSse,
  nextQueued,
  openSse,
  runWorker,
  startApi,
  TASK_BODY,
  type InProcessApi,
  type RedisAndStore,
  useStackWithApi,
} from './helpers.js';

let stack: RedisAndStore;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

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

describe('responses: a refused create creates nothing', () => {
  const ready = 'tl:{sched}:ready:tiny-chat:tenant-a';
  beforeEach(() => stack.redis.del(ready));
  const body = { model: 'tiny-chat', input: 'Say hi.' };
  const post = (api: InProcessApi, extra: Record<string, unknown>, opts: Parameters<typeof call>[3] = {}) =>
    call(api.base, 'POST', '/lmsp/v1/responses', { ...opts, body: { ...body, ...extra } });

  test('a streamed create over the open-stream cap is 429 and leaves no task behind', async () => {
    // The OpenAI SDK retries a 429 after Retry-After: a task made by each refused try would multiply.
    const capped = await startApi(stack, { TASKLINE_MAX_STREAMS: '1' });
    const held = await openSse(capped.base, '/lmsp/v1/responses', {
      method: 'POST',
      body: { ...body, stream: true },
    });
    try {
      await held.waitFor(1);
      await stack.redis.del(ready);
      for (const extra of [{ stream: true }, { stream: true, background: true }]) {
        const refused = await post(capped, extra);
        assert.equal(refused.status, 429, refused.text);
        assert.equal(await stack.redis.zcard(ready), 0, `no task queued by ${JSON.stringify(extra)}`);
      }
    } finally {
      held.abort();
      await held.done;
      await capped.close();
    }
  });

  test('a background stream with a bad or impossible resume point is 400 and leaves no task behind', async () => {
    const cases: [Record<string, string>, Parameters<typeof call>[3]][] = [
      [{}, { headers: { 'last-event-id': 'abc' } }],
      [{}, { headers: { 'last-event-id': '7' } }],
    ];
    for (const [, opts] of cases) {
      const refused = await post(api, { stream: true, background: true }, opts);
      assert.equal(refused.status, 400, refused.text);
      assert.equal(await stack.redis.zcard(ready), 0, `no task queued with ${JSON.stringify(opts)}`);
    }
    const query = await call(api.base, 'POST', '/lmsp/v1/responses?starting_after=abc', {
      body: { ...body, stream: true, background: true },
    });
    assert.equal(query.status, 400, query.text);
    assert.equal(await stack.redis.zcard(ready), 0, 'no task queued with starting_after=abc');
  });

  test('a resume point past a new response is refused before its task exists, with or without an Idempotency-Key', async () => {
    // The ready queue alone does not tell: a task created and then cancelled has left it too.
    // Every node of a cluster (KEYS reads one).
    const tasks = async () => (await scanKeys(stack.redis, 'tl:{task_*}:task')).length;
    const before = await tasks();
    const cases: { headers: Record<string, string> }[] = [
      { headers: { 'last-event-id': '7' } },
      { headers: { 'last-event-id': '2', 'idempotency-key': 'resume-past-a-new-one' } },
    ];
    for (const opts of cases) {
      const refused = await post(api, { stream: true, background: true }, opts);
      assert.equal(refused.status, 400, refused.text);
      assert.equal((refused.body as { code: string }).code, 'invalid_request');
      assert.equal(await stack.redis.zcard(ready), 0, `no task queued with ${JSON.stringify(opts)}`);
      assert.equal(await tasks(), before, `no task written with ${JSON.stringify(opts)}`);
    }
    // The key was left free: its first real create is a new response, resumable as any other.
    const keyed = { 'idempotency-key': 'resume-past-a-new-one' };
    const first = await openSse(api.base, '/lmsp/v1/responses', {
      method: 'POST',
      headers: keyed,
      body: { ...body, stream: true, background: true },
    });
    assert.equal(first.status, 200);
    await first.waitFor(1);
    first.abort();
    await first.done;
    const id = await nextQueued(stack.redis);
    await runWorker(stack.worker, id, ['h', 'i']);
    // A retry of that create resumes it: a point inside its history is served, one past it is not.
    const resumed = await openSse(api.base, '/lmsp/v1/responses', {
      method: 'POST',
      headers: { ...keyed, 'last-event-id': '2' },
      body: { ...body, stream: true, background: true },
    });
    assert.equal(resumed.status, 200);
    await resumed.done;
    assert.equal(resumed.events[0]?.id, '3', 'resumed right after event 2');
    const seq = (await stack.worker.get(id))!.seq;
    const past = await post(
      api,
      { stream: true, background: true },
      {
        headers: { ...keyed, 'last-event-id': String(seq + 1) },
      },
    );
    assert.equal(past.status, 400, past.text);
    assert.equal(await tasks(), before + 1, 'one task in all');
  });
});
