/**
 * MCP `subscriptions/listen` is an open stream like any LMSP event stream: it counts under the
 * tenant's TASKLINE_MAX_STREAMS, sends heartbeats (which renew its slot), and takes at most
 * TASKLINE_MCP_LISTEN_MAX_TASKS task ids, a clear -32602 above that (its Redis round trips:
 * mcp-listen-round-trips.test.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { until } from '@taskline/testing';
import {
  call,
  openSse,
  spawnApi,
  startRedisAndStore,
  type ApiProcess,
  type RedisAndStore,
} from './helpers.js';
import { listen, openTasks } from './listen.js';

const MAX_STREAMS = 2;
const MAX_TASK_IDS = 5;

/** A listen, once a slot is free (slots of closed streams are released as they end). */
const admitted = (taskIds: unknown[]) =>
  until('a listen to be admitted', async () => {
    const l = await listen(api.base, taskIds);
    return l.status === 200 ? l : undefined;
  });

let stack: RedisAndStore;
let api: ApiProcess;
const tasks: string[] = [];

before(async () => {
  stack = await startRedisAndStore();
  api = await spawnApi(stack.redisServer.url, {
    TASKLINE_MAX_STREAMS: String(MAX_STREAMS),
    TASKLINE_MCP_LISTEN_MAX_TASKS: String(MAX_TASK_IDS),
    TASKLINE_SSE_HEARTBEAT_MS: '200',
  });
  tasks.push(...(await openTasks(stack, MAX_TASK_IDS)));
});
after(async () => {
  api.child.kill('SIGKILL');
  await api.exited;
  await stack.close();
});

describe('subscriptions/listen', () => {
  test('counts under TASKLINE_MAX_STREAMS with LMSP streams: over the cap it is 429 -32005', async () => {
    const first = await listen(api.base, [tasks[0]]);
    const second = await listen(api.base, [tasks[1]]);
    assert.equal(first.status, 200);
    assert.equal(second.status, 200);
    try {
      const third = await listen(api.base, [tasks[2]], 8);
      assert.equal(third.status, 429, JSON.stringify(third.messages));
      assert.ok(
        Number(third.headers.get('retry-after')) >= 1,
        "Number(third.headers.get('retry-after')) >= 1",
      );
      const error = third.messages[0]!.error as { code: number; data: { code: string } };
      assert.equal(third.messages[0]!.id, 8);
      assert.equal(error.code, -32005);
      assert.equal(error.data.code, 'rate_limited');
    } finally {
      first.close();
      await first.done;
    }
    // A closed listen frees its slot (released as the stream ends).
    const again = await admitted([tasks[3]]);
    again.close();
    second.close();
    await Promise.all([again.done, second.done]);
  });

  test('an LMSP event stream and a listen share the open-stream cap', async () => {
    const held = [await admitted([tasks[0]]), await admitted([tasks[1]])];
    try {
      const created = await call(api.base, 'POST', '/lmsp/v1/tasks', {
        body: { type: 'response', input: { model: 'tiny-chat', input: 'Hi' } },
      });
      const stream = await openSse(api.base, `/lmsp/v1/tasks/${(created.body as { id: string }).id}/events`);
      assert.equal(stream.status, 429);
      assert.equal((stream as unknown as { body: { code: string } }).body.code, 'rate_limited');
    } finally {
      for (const l of held) l.close();
      await Promise.all(held.map((l) => l.done));
    }
  });

  test('sends heartbeats while nothing changes', async () => {
    const l = await admitted([tasks[4]]);
    try {
      await until('two heartbeats', () => (l.comments >= 2 ? true : undefined));
      assert.equal(l.messages.filter((m) => m.method === 'notifications/tasks').length, 1);
    } finally {
      l.close();
      await l.done;
    }
  });

  test(`takes at most ${MAX_TASK_IDS} task ids: above, -32602 naming the limit, and no stream`, async () => {
    const tooMany = await listen(api.base, [...tasks, 'task_other'], 9);
    assert.equal(tooMany.status, 400);
    assert.equal(tooMany.messages[0]!.id, 9);
    const error = tooMany.messages[0]!.error as { code: number; message: string; data: unknown };
    assert.equal(error.code, -32602);
    assert.match(error.message, new RegExp(`at most ${MAX_TASK_IDS} taskIds`));
    assert.deepEqual(error.data, { maxTaskIds: MAX_TASK_IDS });
    // Duplicates count once: the limit is on distinct tasks.
    const l = await admitted([...tasks, tasks[0]]);
    try {
      await until('the acknowledgement', () =>
        l.messages.some((m) => m.method === 'notifications/subscriptions/acknowledged') ? true : undefined,
      );
      const ack = l.messages.find((m) => m.method === 'notifications/subscriptions/acknowledged')!;
      assert.deepEqual((ack.params as { notifications: { taskIds: string[] } }).notifications.taskIds, tasks);
    } finally {
      l.close();
      await l.done;
    }
  });
});
