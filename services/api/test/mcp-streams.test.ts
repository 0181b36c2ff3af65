/* eslint-disable @typescript-eslint/no-explicit-any -- raw JSON-RPC messages are checked field by field */
/**
 * MCP's open streams (2025-11-25 `tasks/result`, 2026-07-28 `subscriptions/listen`) against a real
 * api process: they end, and give their stream slot back, when Redis fails them; they are served
 * by the api's one SSE implementation (slow-reader cut-off, proxy headers); a listen is framed so
 * the official SDK v2 client's `listen()` follows it; server request ids never repeat in a session.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { isTerminal, type TaskRecord } from '@taskline/engine';
import { until } from '@taskline/testing';
import {
  KEY_A,
  openSse,
  spawnApi,
  startRedisAndStore,
  type ApiProcess,
  type RedisAndStore,
} from './helpers.js';
import { listen, openTasks } from './listen.js';
import { post2025, rawPost2025, TASKS } from '@taskline/test-support/mcp';

const SLOTS = 'tl:api:streams:{tenant-a}';
/** The api's own Redis user: the tests take commands away from it to make its reads fail. */
const API_USER = 'api';
const API_PASSWORD = 'api-password-0123';

let stack: RedisAndStore;
let api: ApiProcess;
let url: string;

/** Takes `command` away from the api's Redis user (`-`), or gives it back (`+`). */
const acl = (rule: string) => stack.redis.acl('SETUSER', API_USER, rule);

before(async () => {
  stack = await startRedisAndStore();
  await stack.redis.acl('SETUSER', API_USER, 'on', `>${API_PASSWORD}`, '~*', '&*', '+@all');
  api = await spawnApi(stack.redisServer.url.replace('://', `://${API_USER}:${API_PASSWORD}@`), {
    TASKLINE_MAX_STREAMS: '4',
    TASKLINE_SSE_HEARTBEAT_MS: '200',
    TASKLINE_SSE_MAX_BUFFER_BYTES: '65536',
  });
  url = `${api.base}/mcp`;
});
after(async () => {
  api.child.kill('SIGKILL');
  await api.exited;
  await stack.close();
});

/** A 2025-11-25 session of tenant-a. */
/** A 2025-11-25 session that declares elicitation: questions are put only to callers that can answer. */
async function session2025(): Promise<string> {
  const init = await post2025(url, KEY_A, {
    method: 'initialize',
    params: {
      protocolVersion: '2025-11-25',
      capabilities: { elicitation: {} },
      clientInfo: { name: 't', version: '1' },
    },
  });
  assert.equal(init.status, 200);
  return init.headers.get('mcp-session-id')!;
}

/** A `tasks/result` stream (JSON-RPC id `id`) in `session`, read as SSE. */
const taskResult = (session: string, taskId: string, id = 1) =>
  openSse(api.base, '/mcp', {
    method: 'POST',
    body: { jsonrpc: '2.0', id, method: 'tasks/result', params: { taskId } },
    headers: {
      accept: 'application/json, text/event-stream',
      'mcp-session-id': session,
      'mcp-protocol-version': '2025-11-25',
    },
  });

/** Waits for the stream to end by itself: one left open would never end, so the wait is bounded. */
const ended = (done: Promise<void>, what: string) =>
  until(what, async () => {
    let over = false;
    await Promise.race([done.then(() => (over = true)), new Promise((r) => setTimeout(r, 200))]);
    return over || undefined;
  });

const slotsFreed = () =>
  until('the tenant stream slots to be released', async () =>
    (await stack.redis.zcard(SLOTS)) === 0 ? true : undefined,
  );

/** A running tool task of tenant-a (the test plays its worker) and its attempt. */
async function runningTask(): Promise<{ task: TaskRecord; attempt: number }> {
  const [id] = await openTasks(stack, 1);
  const { attempt } = await stack.worker.claim(id!, 'test-worker', 600_000);
  await stack.worker.start(id!, attempt);
  return { task: (await stack.worker.get(id!))!, attempt };
}

describe('MCP streams', () => {
  test('a tasks/result stream whose subscription fails ends with an error reply and frees its slot', async () => {
    const session = await session2025();
    const { task } = await runningTask();
    // The hub reads the task's history with XRANGE as it subscribes: refused, the subscription fails
    // after the stream's headers went out.
    await acl('-xrange');
    const stream = await taskResult(session, task.id);
    try {
      assert.equal(stream.status, 200);
      await ended(stream.done, 'the tasks/result stream to end');
      const last = stream.events.at(-1)?.data as any;
      assert.equal(last?.id, 1, JSON.stringify(stream.events));
      assert.equal(last.error.data.code, 'unavailable', JSON.stringify(last));
    } finally {
      await acl('+xrange');
      stream.abort();
    }
    await slotsFreed();
  });

  test('a listen whose subscription fails ends with its closing result and frees its slot', async () => {
    const { task } = await runningTask();
    await acl('-xrange');
    const l = await listen(api.base, [task.id], 9);
    try {
      assert.equal(l.status, 200);
      await ended(l.done, 'the listen to end');
      const last = l.messages.at(-1) as any;
      assert.equal(last?.id, 9, JSON.stringify(l.messages));
      assert.equal(last.result.resultType, 'complete');
    } finally {
      await acl('+xrange');
      l.close();
    }
    await slotsFreed();
  });

  test("a failed read of a task's final status ends tasks/result and listen streams", async () => {
    const session = await session2025();
    // Queued: its cancel is final at once.
    const [taskId] = await openTasks(stack, 1);
    const task = { id: taskId! };
    const result = await taskResult(session, task.id);
    const l = await listen(api.base, [task.id]);
    await result.waitFor(1);
    await until('the listen to show the task', () => (l.messages.length >= 2 ? true : undefined));
    // Every status read is an HGETALL of the task: refused, the read after the final event fails.
    await acl('-hgetall');
    try {
      await stack.worker.cancel(task.id, 'tenant-a');
      await ended(result.done, 'the tasks/result stream to end');
      await ended(l.done, 'the listen to end');
    } finally {
      await acl('+hgetall');
      result.abort();
      l.close();
    }
    assert.equal((result.events.at(-1)?.data as any).id, 1);
    assert.equal((l.messages.at(-1) as any).result.resultType, 'complete');
    await slotsFreed();
  });

  test('MCP streams are sent unbuffered through proxies', async () => {
    const session = await session2025();
    const { task } = await runningTask();
    const result = await taskResult(session, task.id);
    const l = await listen(api.base, [task.id]);
    try {
      assert.equal(result.headers.get('x-accel-buffering'), 'no');
      assert.equal(l.headers.get('x-accel-buffering'), 'no');
    } finally {
      result.abort();
      l.close();
      await Promise.all([result.done, l.done]);
    }
    await slotsFreed();
  });

  test('a tasks/result reader that stops reading is cut off, and its slot freed', async () => {
    const session = await session2025();
    const { task, attempt } = await runningTask();
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tasks/result',
      params: { taskId: task.id },
    });
    // HTTP/1.0: the server closes the connection when it ends the stream.
    const socket = connect(Number(new URL(api.base).port), '127.0.0.1');
    socket.write(rawPost2025(url, KEY_A, session, body, 'HTTP/1.0'));
    let raw = '';
    socket.on('data', (chunk) => (raw += chunk.toString()));
    const closed = new Promise((r) => socket.once('close', r));
    await until('the stream to start', () =>
      raw.includes('notifications/tasks/status') ? true : undefined,
    ).catch((err: Error) => assert.fail(`${err.message}: ${raw}`));
    socket.pause();
    // Each progress message is a status notification of its own: far more than the socket holds.
    for (let i = 0; i < 400; i++) await stack.worker.progress(task.id, attempt, `${i} ${'x'.repeat(50_000)}`);
    socket.resume();
    try {
      await ended(closed as Promise<void>, 'the slow reader to be cut off');
    } finally {
      socket.destroy();
    }
    assert.equal(isTerminal((await stack.worker.get(task.id))!.status), false);
    assert.ok(raw.length < 400 * 50_000, `cut off before the end (${raw.length} bytes)`);
    await slotsFreed();
  });

  test("the SDK v2 client's listen() is acknowledged and receives the task's notifications", async () => {
    const [taskId] = await openTasks(stack, 1);
    const task = { id: taskId! };
    const client = new Client(
      { name: 'taskline-test', version: '1.0.0' },
      {
        capabilities: { extensions: { [TASKS]: {} } } as never,
        versionNegotiation: { mode: { pin: '2026-07-28' } },
      },
    );
    const seen: any[] = [];
    client.fallbackNotificationHandler = async (n) => void seen.push(n);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${KEY_A}` } },
      }),
    );
    try {
      // Resolves only once the SDK matched the acknowledgement to this listen by its subscription id.
      const sub = await client.listen({ taskIds: [task.id] } as never, { timeout: 60_000 });
      await stack.worker.cancel(task.id, 'tenant-a');
      const closed = await Promise.race([sub.closed, new Promise((r) => setTimeout(r, 60_000, 'open'))]);
      assert.equal(closed, 'graceful', JSON.stringify(seen));
      const notes = seen.filter((n) => n.method === 'notifications/tasks');
      assert.equal(notes.at(-1)?.params.status, 'cancelled', JSON.stringify(seen));
      for (const n of notes)
        assert.equal(typeof n.params._meta['io.modelcontextprotocol/subscriptionId'], 'string');
    } finally {
      await client.close();
    }
  });

  test('two tasks/result streams in one session never send the same server request id', async () => {
    const session = await session2025();
    const { task, attempt } = await runningTask();
    await stack.worker.requestInput(task.id, attempt, {
      confirm: {
        method: 'elicitation/create',
        params: { message: 'Go?', requestedSchema: { type: 'object' } },
      },
    });
    const question = async (id: number) => {
      const stream = await taskResult(session, task.id, id);
      try {
        await until('the question to be asked', () =>
          stream.events.some((e) => e.data.method === 'elicitation/create') ? true : undefined,
        );
      } finally {
        stream.abort();
        await stream.done;
      }
      return stream.events.find((e) => e.data.method === 'elicitation/create')!.data.id as string;
    };
    const first = await question(1);
    const second = await question(2);
    assert.notEqual(first, second);
    // The answer to the second is stored as the answer to the task's question.
    const answered = await post2025(
      url,
      KEY_A,
      { id: second, result: { action: 'accept', content: {} } },
      session,
    );
    assert.ok(answered.status < 300, String(answered.status));
    await until('the answer to be stored', async () =>
      Object.keys(await stack.worker.openInputRequests(task.id)).length === 0 ? true : undefined,
    );
    await slotsFreed();
  });
});
