/** A task's event stream: history, resume, expiry, slow readers and heartbeats. */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { createParser } from 'eventsource-parser';
import { describe, test } from 'node:test';
import type { ResponseObject } from '@taskline/engine';
import { taskKeys } from '@taskline/engine/keys';
import { until } from '@taskline/testing';
import {
  call,
  checkSse,
  completedResponse,
  createTask,
  delta,
  KEY_A,
  openSse,
  runWorker,
  startApi,
  TASK_BODY,
  type InProcessApi,
  type RedisAndStore,
  type TaskReply as Task,
  useStackWithApi,
} from './helpers.js';
import { withOpenAiMembers } from '../src/openai/response.js';

let stack: RedisAndStore;
let api: InProcessApi;
useStackWithApi((s, a) => ([stack, api] = [s, a]));

const create = (body?: unknown, headers?: Record<string, string>) => createTask(api.base, body, headers);

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
    // The stored response, with the members OpenAI's Responses API adds.
    assert.deepEqual(
      (got.body as { response: unknown }).response,
      withOpenAiMembers(completedResponse(full, 'ab') as ResponseObject),
    );
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
    // Nothing after the final event: 204, the one answer that stops an EventSource reconnecting.
    const atEnd = await call(api.base, 'GET', task.events_url, { headers: { 'last-event-id': '7' } });
    assert.equal(atEnd.status, 204);
    assert.equal(atEnd.text, '');
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

  test('HEAD on a stream whose history expired is 410, as GET is', async () => {
    const task = await create();
    await runWorker(stack.worker, task.id, ['x']);
    await stack.redis.del(taskKeys(task.id).events);
    const r = await fetch(api.base + task.events_url, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${KEY_A}`, 'last-event-id': '2' },
    });
    assert.equal(r.status, 410);
  });

  test("a tenant's stream says what an operator did and when, not who did it", async () => {
    const task = await create();
    await stack.worker.cancel(task.id, null, 'jwt:alice');
    const read = await openSse(api.base, task.events_url);
    await read.done;
    const final = read.events.at(-1)!;
    assert.equal(final.event, 'response.cancelled');
    const action = final.data.operator_action as Record<string, unknown>;
    assert.equal(action.action, 'cancel');
    assert.equal(typeof action.at, 'number');
    assert.equal(action.operator, undefined, JSON.stringify(action));
    assert.doesNotMatch(JSON.stringify(read.events), /alice/);
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
  test('a client that leaves while its history is read frees its stream slot for good', async () => {
    const task = await create();
    const streams = 'tl:api:streams:{tenant-a}';
    // Sent whole, then the connection dropped at once: the server reads the request and opens the
    // stream's slot while the client is already gone.
    for (let i = 0; i < 5; i++) {
      const socket = connect(Number(new URL(api.base).port), '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.end(`GET ${task.events_url} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY_A}\r\n\r\n`);
      socket.destroy();
    }
    await until('the streams to end', () => (api.api.streams.size === 0 ? true : undefined));
    // Several heartbeats (200 ms) later, no stream of them is renewed back into the tenant's count.
    await new Promise((r) => setTimeout(r, 1500));
    assert.deepEqual(await stack.redis.zrange(streams, 0, -1), []);
  });
});
