import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  McpTasksClient,
  MemoryTaskIdStore,
  systemClock,
  TasklineClientError,
  type Clock,
  type McpTask,
} from '../src/index.js';
import { KEY_A, startClientStack, until, type Stack } from '@taskline/test-support/client-stack';

const SERVER_POLL_MS = 300;
let stack: Stack;
before(async () => {
  stack = await startClientStack(
    '20',
    { TASKLINE_POLL_INTERVAL_MS: String(SERVER_POLL_MS) },
    { fixtures: true },
  );
});
after(async () => {
  await stack.stop();
});

const client = (extra: Partial<ConstructorParameters<typeof McpTasksClient>[0]> = {}) =>
  new McpTasksClient({ url: `${stack.base}/mcp`, apiKey: KEY_A, ...extra });
const text = (result: { content?: unknown[] }) => (result.content as { text: string }[])[0]!.text;

describe('MCP tasks client against the api process', () => {
  test('a tool call that becomes a task asks for input through onInput and completes (notifications)', async () => {
    const asked: string[][] = [];
    const statuses: string[] = [];
    const methods: string[] = [];
    const recording: typeof fetch = (input, init) => {
      methods.push(new Headers(init?.headers).get('mcp-method') ?? '');
      return fetch(input, init);
    };
    const result = await client({ fetch: recording }).callTool(
      'confirm_delete',
      { path: '/x' },
      {
        onStatus: (t) => statuses.push(t.status),
        onInput: async (requests, taskId) => {
          assert.match(taskId ?? '', /^task_/);
          asked.push(Object.keys(requests));
          return { confirm: { action: 'accept', content: { confirm: 'yes' } } };
        },
      },
    );
    assert.match(text(result), /Delete of \/x: .*yes/);
    assert.deepEqual(asked, [['confirm']], 'each input request is answered once');
    assert.ok(statuses.includes('input_required'), "statuses.includes('input_required')");
    assert.equal(statuses.at(-1), 'completed');
    assert.ok(methods.includes('subscriptions/listen'), 'followed through notifications');
    assert.equal(methods.filter((m) => m === 'tasks/get').length, 1, 'no polling while notified');
  });

  test('polling fallback: an inline input round, then a task polled never faster than the server asks', async () => {
    const sleeps: number[] = [];
    const clock: Clock = {
      now: systemClock.now,
      sleep: (ms, s) => (sleeps.push(ms), systemClock.sleep(ms, s)),
    };
    // The client's own interval is shorter: the server's pollIntervalMs must win.
    const c = client({
      notifications: false,
      clock,
      poll: { intervalMs: 10, backoff: 1.5, maxIntervalMs: 20 },
    });
    const seen: (string | null)[] = [];
    const result = await c.callTool(
      'test_tool_with_task',
      {},
      {
        onInput: async (requests, taskId) => {
          seen.push(taskId);
          assert.deepEqual(Object.keys(requests), ['user_name']);
          return { user_name: { action: 'accept', content: { name: 'Ada' } } };
        },
      },
    );
    assert.equal(text(result), 'Hello, Ada!');
    assert.deepEqual(seen, [null], 'asked inline (MRTR), before any task existed');
    const slow = await c.callTool('slow_compute', { seconds: 3 });
    assert.match(text(slow), /Computed after 3 seconds/);
    assert.ok(sleeps.length >= 2, `${sleeps.length} polls`);
    for (const ms of sleeps)
      assert.ok(ms >= SERVER_POLL_MS * 1.1 && ms <= SERVER_POLL_MS * 1.2 + 1, `wait ${ms}`);
  });

  test('cancel is only "cancellation requested" until the task ends cancelled', async () => {
    const c = client();
    let taskId = '';
    const following = c.callTool(
      'slow_compute',
      { seconds: 60 },
      { onStatus: (t: McpTask) => (taskId = t.taskId) },
    );
    const failure = following.then(
      () => null,
      (err: unknown) => err,
    );
    await until('the task id', () => taskId || undefined);
    assert.deepEqual(await c.cancelTask(taskId), { taskId, state: 'cancellation_requested' });
    const err = await failure;
    assert.ok(err instanceof TasklineClientError && err.code === 'task_cancelled', String(err));
    assert.equal((await c.getTask(taskId)).status, 'cancelled');
  });

  test('a tool error completes with isError; a protocol failure throws task_failed with its error', async () => {
    const toolError = await client().callTool('failing_job', {});
    assert.equal(toolError.isError, true);
    await assert.rejects(client().callTool('protocol_error_job', {}), (err: unknown) => {
      assert.ok(err instanceof TasklineClientError, 'err instanceof TasklineClientError');
      assert.equal(err.code, 'task_failed');
      assert.match(err.message, /protocol_error_job always fails/);
      return true;
    });
  });

  test('a restarted client resumes the MCP tasks in its store', async () => {
    const store = new MemoryTaskIdStore();
    const first = client({ store });
    let taskId = '';
    const controller = new AbortController();
    const abandoned = first
      .callTool(
        'slow_compute',
        { seconds: 1 },
        {
          signal: controller.signal,
          onStatus: (t) => (taskId = t.taskId),
        },
      )
      .catch((err: unknown) => err);
    await until('the task id', () => taskId || undefined);
    controller.abort(); // the "crash": this client stops following
    assert.equal(((await abandoned) as TasklineClientError).code, 'aborted');
    assert.equal(store.unfinished(first.scope).length, 1);
    // Another credential neither sees nor touches it (the task is not found under it).
    assert.deepEqual(await client({ store, apiKey: 'another-key-0123' }).resume(), []);
    const resumed = await client({ store }).resume();
    assert.equal(resumed.length, 1);
    assert.equal(resumed[0]!.taskId, taskId);
    assert.match(text(resumed[0]!.result!), /Computed after 1 seconds/);
    assert.deepEqual(store.unfinished(first.scope), []);
  });

  // Last: it spends the tenant's request budget (TASKLINE_RATE_LIMIT_*), which refills in seconds.
  test("a task method refused 429 -32005 is retried after the server's Retry-After", async () => {
    let taskId = '';
    await client().callTool('slow_compute', { seconds: 0.1 }, { onStatus: (t) => (taskId = t.taskId) });
    const sleeps: number[] = [];
    const clock: Clock = {
      now: systemClock.now,
      sleep: (ms, s) => (sleeps.push(ms), systemClock.sleep(ms, s)),
    };
    const seen: number[] = [];
    const recording: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      seen.push(res.status);
      return res;
    };
    // Other requests of the tenant keep its budget spent until the client's first try is refused.
    let spending = true;
    let refused = false;
    const spend = async () => {
      while (spending) {
        const res = await fetch(`${stack.base}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${KEY_A}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-method': 'tools/list',
            'mcp-protocol-version': '2026-07-28',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
        });
        await res.body?.cancel();
        refused ||= res.status === 429;
      }
    };
    // A token refilled between two of theirs may go to the client's first try: then again. On a
    // starved host (the parallel lane at the lowest CPU priority) five rounds all lost that race.
    for (let round = 1; seen[0] !== 429; round++) {
      assert.ok(round <= 20, `the client's first try was never refused: ${seen.join(', ')}`);
      seen.length = sleeps.length = 0;
      spending = true;
      refused = false;
      const spenders = Array.from({ length: 20 }, spend);
      await until('the budget to be spent', () => (refused ? true : undefined));
      const got = client({ clock, fetch: recording }).getTask(taskId);
      await until("the client's first try", () => (seen.length > 0 ? true : undefined));
      spending = false;
      await Promise.all(spenders);
      assert.equal((await got).status, 'completed');
    }
    assert.ok(sleeps[0]! >= 1000, `waits ${sleeps.join(', ')} honour Retry-After`);
  });
});
