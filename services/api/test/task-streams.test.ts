/** What a tenant's task stream shows (no internal worker ids) and what a reader of a finished task's long history costs the api. */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { until } from '@taskline/testing';
import {
  completedResponse,
  createTask,
  delta,
  KEY_A,
  openSse,
  startApi,
  startRedisAndStore,
  type InProcessApi,
  type RedisAndStore,
} from './helpers.js';

const MAX_BUFFER = 65_536;
const PAGE = 16;
const PIECE = 50_000;

let stack: RedisAndStore;
let api: InProcessApi;

before(async () => {
  stack = await startRedisAndStore();
  api = await startApi(stack, {
    TASKLINE_SSE_MAX_BUFFER_BYTES: String(MAX_BUFFER),
    TASKLINE_SSE_HISTORY_PAGE_EVENTS: String(PAGE),
  });
});
after(async () => {
  await api.close();
  await stack.close();
});

describe('task streams', () => {
  test("a tenant's stream does not name the gpu-worker that claimed the task", async () => {
    const task = await createTask(api.base);
    const { attempt } = await stack.worker.claim(task.id, 'worker-secret-host-7', 60_000);
    await stack.worker.start(task.id, attempt);
    const current = (await stack.worker.get(task.id))!;
    await stack.worker.finish(task.id, attempt, {
      status: 'succeeded',
      result: completedResponse(current, ''),
    });
    const read = await openSse(api.base, task.events_url);
    await read.done;
    assert.ok(
      read.events.some((e) => e.data.task_status === 'loading'),
      JSON.stringify(read.events),
    );
    for (const event of read.events) assert.equal(event.data.worker, undefined, JSON.stringify(event));
    assert.doesNotMatch(JSON.stringify(read.events), /worker-secret-host-7/);
  });

  test('a reader of a long finished task that stops reading holds a page of it, not the history', async () => {
    const task = await createTask(api.base);
    const { attempt } = await stack.worker.claim(task.id, 'w', 60_000);
    await stack.worker.start(task.id, attempt);
    const count = 400;
    for (let i = 0; i < count; i++)
      await stack.worker.append(task.id, attempt, [1], [delta('x'.repeat(PIECE))]);
    const current = (await stack.worker.get(task.id))!;
    await stack.worker.finish(task.id, attempt, {
      status: 'succeeded',
      result: completedResponse(current, ''),
    });
    const total = (await stack.worker.get(task.id))!.seq;

    const served: Socket[] = [];
    const onConnection = (s: Socket) => served.push(s);
    api.running.server.on('connection', onConnection);
    // HTTP/1.0 so the body is the raw stream; the client reads nothing until told to.
    const client = connect(Number(new URL(api.base).port), '127.0.0.1');
    client.pause();
    client.write(`GET ${task.events_url} HTTP/1.0\r\nAuthorization: Bearer ${KEY_A}\r\n\r\n`);
    try {
      const socket = await until('the server to take the connection', () => served[0]);
      // Writes stop once the reader is MAX_BUFFER behind: past that, at most the page being written.
      await until('the server to fill the socket', () =>
        socket.writableLength > MAX_BUFFER ? true : undefined,
      );
      const bound = MAX_BUFFER + PAGE * (PIECE + 1024);
      assert.ok(socket.writableLength <= bound, `${socket.writableLength} bytes held, over ${bound}`);
      // Read now, the whole history arrives, in order, to the final event.
      let raw = '';
      client.on('data', (chunk) => (raw += chunk.toString()));
      const closed = new Promise((r) => client.once('close', r));
      client.resume();
      await closed;
      const ids = [...raw.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      assert.deepEqual(
        ids,
        Array.from({ length: total }, (_, i) => i + 1),
      );
      assert.match(raw, /event: response\.completed/);
    } finally {
      api.running.server.off('connection', onConnection);
      client.destroy();
    }
  });
});
