/* eslint-disable @typescript-eslint/no-explicit-any -- raw JSON-RPC replies are checked field by field */
/**
 * Callers that do not hold tasks (desktop hosts: 2025-06-18, SDK v1 plain `callTool()`), callers
 * that cannot answer questions, clients polling many tasks at the advertised interval, tool errors
 * as results, and the MCP 2025-11-25 edges, against the real stack and the official SDK clients.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { toolTaskIndex, toolTaskOpen } from '@taskline/engine/keys';
import { startMcpStack, until, type Replica } from '@taskline/test-support/mcp-stack';
import { pollTask, rpc, TASKS } from '@taskline/test-support/mcp';

const KEY_A = 'key-a-secret';
/** The tenant of the polling test alone, so its request rate is its own. */
const KEY_P = 'key-p-secret';
/** The tenant of the listing test alone. */
const KEY_L = 'key-l-secret';
/** TASKLINE_OPERATOR_INDEX_MAX here (the least it takes): the bound of the tool-task index. */
const INDEX_MAX = 100;
const ended = (t: any) => ['completed', 'failed', 'cancelled'].includes(t.status);

/**
 * An official SDK v1 client (of tenant A by default) that opens its session at `version` (a
 * 2025-06-18 host is the v1 client with that revision in its `initialize`), declaring `capabilities`.
 */
async function v1Client(
  url: string,
  version: '2025-06-18' | '2025-11-25',
  capabilities: Record<string, unknown> = {},
  key = KEY_A,
): Promise<Client> {
  const client = new Client({ name: 'desktop-host', version: '1.0.0' }, { capabilities });
  const pinned = async (input: string | URL, init?: RequestInit) => {
    if (typeof init?.body === 'string' && init.body.includes('"initialize"')) {
      const body = JSON.parse(init.body);
      if (body.method === 'initialize') body.params.protocolVersion = version;
      init = { ...init, body: JSON.stringify(body) };
    }
    return fetch(input, init);
  };
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
      fetch: pinned,
    }),
  );
  // As hosts do: `callTool()` checks the listing's taskSupport before it sends anything.
  await client.listTools();
  return client;
}

describe('MCP hosts that do not hold tasks, questions, polling, tool errors and the 2025-11-25 edges', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let api: Replica;

  before(async () => {
    stack = await startMcpStack({
      fixtures: true,
      env: {
        TASKLINE_API_KEYS: `tenant-a:${KEY_A},tenant-p:${KEY_P},tenant-l:${KEY_L}`,
        TASKLINE_OPERATOR_INDEX_MAX: String(INDEX_MAX),
        TASKLINE_INDEX_SWEEP_MS: '200',
        // Every batch asks for confirmation first.
        TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '1',
      },
      // Generations last seconds, long enough to leave mid-call.
      workerEnv: { TASKLINE_WORKER_MIN_STEP_MS: '40' },
    });
    [api] = stack.replicas as [Replica];
  });
  after(async () => {
    await stack.stop();
  });

  /** The id of the tool task tenant A creates while `work` runs (read from its index). */
  const newTaskOf = async (known: Set<string>) =>
    until('the call creates its task', async () => {
      const members = await stack.cluster.store.redis.zrange(toolTaskIndex('tenant-a'), 0, -1);
      const fresh = members.find((m) => !known.has(m));
      return fresh && (await stack.cluster.store.get(fresh.slice(16))) ? fresh.slice(16) : undefined;
    });
  const indexed = async () =>
    new Set(await stack.cluster.store.redis.zrange(toolTaskIndex('tenant-a'), 0, -1));

  it("a plain callTool() of generate gets the tool's result, on a 2025-06-18 and on a 2025-11-25 session", async () => {
    for (const version of ['2025-06-18', '2025-11-25'] as const) {
      const client = await v1Client(api.url, version);
      const result = (await client.callTool({
        name: 'generate',
        arguments: { model: 'tiny-chat', input: 'Hello', max_output_tokens: 4 },
      })) as any;
      assert.notEqual(result.isError, true, `${version}: ${JSON.stringify(result)}`);
      assert.equal(result.content[0].type, 'text', version);
      // Cut at its 4 tokens: the generation's own outcome, not a refusal.
      assert.equal(result.structuredContent.status, 'incomplete', version);
      await client.close();
    }
  });

  it('a plain callTool() whose caller disconnects mid-call cancels its task', async () => {
    const client = await v1Client(api.url, '2025-11-25');
    const known = await indexed();
    const call = client.callTool({
      name: 'generate',
      arguments: { model: 'tiny-chat', input: 'Tell me a long story about the sea.', max_output_tokens: 200 },
    });
    call.catch(() => undefined);
    const id = await newTaskOf(known);
    await stack.cluster.waitFor(id, 'running', (t) => t.status === 'running');
    // The host goes away: its connection closes, no notifications/cancelled is sent.
    await client.close();
    const end = await stack.cluster.waitForEnd(id, 30_000);
    assert.equal(end.status, 'cancelled', JSON.stringify(end));
  });

  it('a caller without the elicitation capability is never asked: batch_generate is refused, not run', async () => {
    // MCP 2026-07-28, holding the task (Tasks extension declared), no elicitation declared.
    const created = await rpc(
      api.url,
      'tools/call',
      { name: 'batch_generate', arguments: { model: 'tiny-chat', prompts: ['a', 'b'] } },
      { token: KEY_A, capabilities: { extensions: { [TASKS]: {} } } },
    );
    const taskId = created.message.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(created.message));
    const statuses = new Set<string>();
    const task = await pollTask(api.url, taskId, ended, {
      token: KEY_A,
      seen: (t) => statuses.add(t.status),
    });
    assert.ok(!statuses.has('input_required'), `never input_required: ${[...statuses].join(', ')}`);
    assert.equal(task.status, 'completed', JSON.stringify(task));
    assert.equal(task.result.isError, true);
    assert.match(task.result.content[0].text, /cannot confirm/);
    // A 2025-11-25 host without elicitation, calling plainly: the same documented default.
    const client = await v1Client(api.url, '2025-11-25');
    const result = (await client.callTool({
      name: 'batch_generate',
      arguments: { model: 'tiny-chat', prompts: ['a', 'b'] },
    })) as any;
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.match(result.content[0].text, /cannot confirm/);
    await client.close();
  });

  it("a throwing tool's task completes with isError, exactly as the blocking call answers", async () => {
    const blocking = await rpc(
      api.url,
      'tools/call',
      { name: 'throwing_job', arguments: {} },
      {
        token: KEY_A,
        tasks: false,
      },
    );
    // The CallToolResult, without what the SDK stamps on every result.
    const { resultType: _type, _meta: _stamp, ...expected } = blocking.message.result ?? {};
    assert.equal(expected.isError, true, JSON.stringify(blocking.message));
    const created = await rpc(
      api.url,
      'tools/call',
      { name: 'throwing_job', arguments: {} },
      { token: KEY_A },
    );
    const task = await pollTask(api.url, created.message.result.taskId, ended, { token: KEY_A });
    assert.equal(task.status, 'completed', JSON.stringify(task));
    const { resultType, _meta: _meta2026, ...result } = task.result;
    assert.equal(resultType, 'complete');
    assert.deepEqual(result, expected);
    // MCP 2025-11-25: tasks/result hands the same result (with its related-task _meta).
    const client = await v1Client(api.url, '2025-11-25', { tasks: { list: {}, cancel: {} } });
    const seen: any[] = [];
    for await (const message of client.experimental.tasks.callToolStream(
      { name: 'throwing_job', arguments: {} },
      CallToolResultSchema,
    ))
      seen.push(message);
    const final = seen.find((m) => m.type === 'result');
    assert.ok(final, JSON.stringify(seen));
    const { _meta, ...legacy } = final.result;
    assert.ok(_meta, 'related-task _meta');
    assert.deepEqual(legacy, expected);
    await client.close();
  });

  it('2025-11-25: tasks/cancel answers cancelled; a refused task-augmented call is -32602', async () => {
    const client = await v1Client(api.url, '2025-11-25', { tasks: { list: {}, cancel: {} } });
    const created = (await client.request(
      { method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 300 }, task: {} } },
      CreateTaskResultSchema,
    )) as any;
    const taskId = created.task.taskId as string;
    await stack.cluster.waitFor(taskId, 'running', (t) => t.status === 'running');
    const cancelled = await client.experimental.tasks.cancelTask(taskId);
    assert.equal(cancelled.status, 'cancelled', JSON.stringify(cancelled));
    assert.equal((await client.experimental.tasks.getTask(taskId)).status, 'cancelled');
    await assert.rejects(client.experimental.tasks.cancelTask(taskId), /terminal status/);
    // Over the deployment's output cap: refused before any task, as an error the SDK can read.
    await assert.rejects(
      client.request(
        {
          method: 'tools/call',
          params: {
            name: 'generate',
            arguments: { model: 'tiny-chat', input: 'x', max_output_tokens: 1_000_000 },
            task: {},
          },
        },
        CreateTaskResultSchema,
      ),
      (err: any) => err.code === -32602 && /max_output_tokens/.test(err.message),
    );
    await client.close();
  });

  it('-32022 and server/discover list every revision served, the 2025 ones included, whatever the method', async () => {
    for (const method of ['tools/call', 'tasks/get', 'tools/list']) {
      const params = method === 'tools/call' ? { name: 'greet', arguments: {} } : { taskId: 'task_x' };
      const res = await fetch(api.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${KEY_A}`,
          'mcp-method': method,
          'mcp-protocol-version': '2027-01-01',
          ...(method !== 'tools/list' && { 'mcp-name': method === 'tools/call' ? 'greet' : 'task_x' }),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method,
          params: {
            ...(method !== 'tools/list' && params),
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2027-01-01',
              'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
              'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
            },
          },
        }),
      });
      const body = (await res.json()) as any;
      assert.equal(res.status, 400, method);
      assert.equal(body.error.code, -32022, `${method}: ${JSON.stringify(body)}`);
      assert.deepEqual(body.error.data.supported, ['2026-07-28', '2025-11-25', '2025-06-18'], method);
    }
    // server/discover lists the same revisions: a client learns one list, whichever it asks.
    const discovered = await rpc(api.url, 'server/discover', {}, { token: KEY_A });
    assert.deepEqual(
      (discovered.message as any).result.supportedVersions,
      ['2026-07-28', '2025-11-25', '2025-06-18'],
      JSON.stringify(discovered.message),
    );
  });

  it('2025-11-25: tasks/list lists every ended task tasks/get still serves, past the index bound', async () => {
    const ids: string[] = [];
    while (ids.length < INDEX_MAX + 5) {
      const created = await rpc(
        api.url,
        'tools/call',
        { name: 'slow_compute', arguments: { seconds: 0 } },
        { token: KEY_L },
      );
      // Past the request rate's burst: wait as told, then go on.
      if (created.status === 429) await sleep(Number(created.headers.get('retry-after')) * 1000);
      else ids.push(created.message.result.taskId as string);
    }
    const redis = stack.cluster.store.redis;
    for (const id of ids) await stack.cluster.waitForEnd(id, 60_000);
    // The sweep that saw them all ended took them out of the open set, and applied the bound.
    await until('a sweep after every task ended', async () =>
      (await redis.zcard(toolTaskOpen('tenant-l'))) === 0 ? true : undefined,
    );
    const client = await v1Client(api.url, '2025-11-25', { tasks: { list: {} } }, KEY_L);
    assert.equal((await client.experimental.tasks.getTask(ids[0]!)).status, 'completed');
    const listed = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await client.experimental.tasks.listTasks(cursor);
      for (const t of page.tasks) listed.add(t.taskId);
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(
      ids.filter((id) => !listed.has(id)),
      [],
      'every task tasks/get serves is listed',
    );
    await client.close();
  });

  // Last: its tasks take the worker's time to the end of the suite.
  it('polls that keep to pollIntervalMs are never 429, with more tasks than the rate allows; faster ones are', async () => {
    // 60 tasks polled once a second is three times the default 20 requests a second.
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const created = await rpc(
        api.url,
        'tools/call',
        { name: 'slow_compute', arguments: { seconds: 600 } },
        { token: KEY_P },
      );
      assert.equal(created.status, 200, JSON.stringify(created.message));
      ids.push(created.message.result.taskId as string);
    }
    const refused: string[] = [];
    await Promise.all(
      ids.map(async (taskId) => {
        for (let round = 0; round < 5; round++) {
          const reply = await rpc(api.url, 'tasks/get', { taskId }, { token: KEY_P });
          if (reply.status !== 200)
            refused.push(`${taskId}: ${reply.status} ${JSON.stringify(reply.message)}`);
          const interval = reply.message.result?.pollIntervalMs;
          assert.ok(Number.isInteger(interval), JSON.stringify(reply.message));
          await sleep(interval);
        }
      }),
    );
    assert.deepEqual(refused, []);
    // Polling one task as fast as it can still takes from the rate, until refused.
    let limited: Awaited<ReturnType<typeof rpc>> | undefined;
    for (let i = 0; i < 2000 && !limited; i++) {
      const reply = await rpc(api.url, 'tasks/get', { taskId: ids[0] }, { token: KEY_P });
      if (reply.status === 429) limited = reply;
    }
    assert.ok(limited, 'polling faster than the interval is rate-limited');
    assert.equal(limited.message.error.code, -32005);
    assert.ok(limited.headers.get('retry-after'), "limited.headers.get('retry-after')");
  });
});
