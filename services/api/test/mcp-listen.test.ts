/**
 * MCP `subscriptions/listen` is an open stream like any LMSP event stream: it counts under the
 * tenant's TASKLINE_MAX_STREAMS, sends heartbeats (which renew its slot), and takes at most
 * TASKLINE_MCP_LISTEN_MAX_TASKS task ids, a clear -32602 above that; however many tasks it
 * follows, it reads their records, and then their event logs, in one Redis round trip.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { taskKeys } from '@taskline/engine/keys';
import { until } from '@taskline/testing';
import { call, KEY_A, openSse, spawnApi, startStack, type ApiProcess, type Stack } from './helpers.js';
import { roundTripProxy } from './round-trips.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const MAX_STREAMS = 2;
const MAX_TASK_IDS = 5;

interface Listen {
  status: number;
  headers: Headers;
  /** JSON-RPC messages received so far (or the one error reply). */
  messages: Record<string, unknown>[];
  comments: number;
  close(): void;
  done: Promise<void>;
}

async function listen(base: string, taskIds: unknown[], id = 7): Promise<Listen> {
  const controller = new AbortController();
  const res = await fetch(`${base}/mcp`, {
    method: 'POST',
    signal: controller.signal,
    headers: {
      authorization: `Bearer ${KEY_A}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-method': 'subscriptions/listen',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'subscriptions/listen',
      params: {
        notifications: { taskIds },
        _meta: { 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } } },
      },
    }),
  });
  const out: Listen = {
    status: res.status,
    headers: res.headers,
    messages: [],
    comments: 0,
    close: () => controller.abort(),
    done: Promise.resolve(),
  };
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    out.messages.push((await res.json()) as Record<string, unknown>);
    return out;
  }
  out.done = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (frame.startsWith(':')) out.comments++;
          const data = frame.split('\n').find((l) => l.startsWith('data: '));
          if (data) out.messages.push(JSON.parse(data.slice(6)) as Record<string, unknown>);
        }
      }
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err;
    }
  })();
  return out;
}

/** A listen, once a slot is free (slots of closed streams are released as they end). */
const admitted = (taskIds: unknown[]) =>
  until('a listen to be admitted', async () => {
    const l = await listen(api.base, taskIds);
    return l.status === 200 ? l : undefined;
  });

let stack: Stack;
let api: ApiProcess;
const tasks: string[] = [];

/** `count` unfinished tool tasks of tenant-a (no worker runs them): a listen on them stays open. */
async function openTasks(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const task = await stack.worker.create({
      tenant: 'tenant-a',
      kind: 'tool',
      model: 'tools',
      onRestart: 'retry',
      request: { tool: 'slow_compute', arguments: { seconds: 60 } },
    });
    ids.push(task.id);
  }
  return ids;
}

before(async () => {
  stack = await startStack();
  api = await spawnApi(stack.redisServer.url, {
    TASKLINE_MAX_STREAMS: String(MAX_STREAMS),
    TASKLINE_MCP_LISTEN_MAX_TASKS: String(MAX_TASK_IDS),
    TASKLINE_SSE_HEARTBEAT_MS: '200',
  });
  tasks.push(...(await openTasks(MAX_TASK_IDS)));
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
      assert.ok(Number(third.headers.get('retry-after')) >= 1);
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

  test("reads its tasks' records in one Redis round trip, then their event logs in one", async (t) => {
    // The proxy fronts one node; a cluster client would follow the slot table past it. The
    // property holds per node there, which this count cannot see.
    if (stack.redisServer.url.startsWith('redis-cluster')) return t.skip('counts round trips to one Redis');
    // An api of its own behind the proxy (which slows it down; the cap tests above keep theirs
    // direct), and tasks no listen has read yet: the first read of each is this listen's.
    const proxy = await roundTripProxy(stack.redisServer.url);
    const routed = await spawnApi(proxy.url, { TASKLINE_MCP_LISTEN_MAX_TASKS: String(MAX_TASK_IDS) });
    const ids = await openTasks(MAX_TASK_IDS);
    try {
      const l = await listen(routed.base, ids);
      assert.equal(l.status, 200, JSON.stringify(l.messages));
      try {
        await until('a notification for every task', () =>
          l.messages.filter((m) => m.method === 'notifications/tasks').length >= ids.length
            ? true
            : undefined,
        );
      } finally {
        l.close();
        await l.done;
      }
    } finally {
      routed.child.kill('SIGKILL');
      await routed.exited;
      await proxy.close();
    }
    const reads: [string, (id: string) => string][] = [
      ['hgetall', (id) => taskKeys(id).task],
      ['xrange', (id) => taskKeys(id).events],
    ];
    for (const [command, key] of reads) {
      const first = ids.map((id) =>
        proxy.turns.find((turn) => turn.commands.some((c) => c[0] === command && c[1] === key(id))),
      );
      assert.ok(
        first.every((turn) => turn !== undefined),
        `some task was never read with ${command}`,
      );
      // One read per task in one round trip each would spread them over MAX_TASK_IDS turns.
      const trips = new Set(first.map((turn) => `${turn!.connection}:${turn!.index}`));
      assert.equal(trips.size, 1, `the ${ids.length} tasks' ${command} reads took ${trips.size} round trips`);
    }
  });
});
