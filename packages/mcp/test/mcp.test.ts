/* eslint-disable @typescript-eslint/no-explicit-any -- raw JSON-RPC replies are checked field by field */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, type RedisServer } from '@taskline/testing';
import { TasklineError } from '@taskline/engine';
import { registerConformanceTools, ToolRegistry } from '@taskline/tools';
import { startReplica, startToolWorker, type Replica } from '../../../test/conformance/stack.js';

const TASKS = 'io.modelcontextprotocol/tasks';
let nextId = 1;

/** One raw JSON-RPC call at the 2026-07-28 wire; SSE answers are read to their response. */
async function rpc(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  opts: { tasks?: boolean; name?: string; token?: string; headers?: Record<string, string> } = {},
) {
  const id = nextId++;
  const body = {
    jsonrpc: '2.0',
    id,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': { name: 'test', version: '1' },
        'io.modelcontextprotocol/clientCapabilities':
          opts.tasks === false ? {} : { extensions: { [TASKS]: {} } },
      },
    },
  };
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-method': method,
    'mcp-protocol-version': '2026-07-28',
    ...opts.headers,
  };
  const name = opts.name ?? (params.taskId as string | undefined) ?? (params.name as string | undefined);
  if (name) headers['mcp-name'] = name;
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await res.text();
  const message = res.headers.get('content-type')?.includes('text/event-stream')
    ? text
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => JSON.parse(l.slice(6)))
        .find((m) => m.id === id)
    : JSON.parse(text);
  return { status: res.status, message } as { status: number; message: { result?: any; error?: any } };
}

describe('MCP tasks over two replicas on one Redis', () => {
  let redis: RedisServer;
  let a: Replica;
  let b: Replica;
  let worker: { stop(): Promise<void> };

  before(async () => {
    redis = await startRedis();
    const authenticate = async (headers: Record<string, unknown>) => {
      const token = String(headers.authorization ?? '').replace(/^Bearer /, '');
      if (token === 'key-a' || token === 'key-b') return { id: `tenant-${token.slice(4)}` };
      throw new TasklineError('unauthorized', 'bad token');
    };
    const env = { TASKLINE_MCP_LOCAL_NO_AUTH: '0' };
    a = await startReplica(redis.url, { env, authenticate });
    b = await startReplica(redis.url, { env, authenticate });
    worker = startToolWorker(redis.url, registerConformanceTools(new ToolRegistry()));
  });
  after(async () => {
    await worker.stop();
    await a.close();
    await b.close();
    await redis.stop();
  });

  const call = (
    r: Replica,
    method: string,
    params: Record<string, unknown> = {},
    opts: Parameters<typeof rpc>[3] = {},
  ) => rpc(r.url, method, params, { token: 'key-a', ...opts });

  it('creates a task on one replica that the other resolves, answers input there, and completes', async () => {
    const created = await call(a, 'tools/call', { name: 'confirm_delete', arguments: { path: '/x' } });
    assert.equal(created.message.result.resultType, 'task');
    const taskId = created.message.result.taskId as string;
    assert.equal(
      (await rpc(b.url, 'tasks/get', { taskId })).status,
      401,
      'tasks/get without a token is refused',
    );
    let task;
    for (;;) {
      task = (await call(b, 'tasks/get', { taskId })).message.result;
      if (task.status === 'input_required') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(Object.keys(task.inputRequests), ['confirm']);
    const ack = await call(b, 'tasks/update', {
      taskId,
      inputResponses: { confirm: { action: 'accept', content: { confirm: 'yes' } } },
    });
    assert.equal(ack.message.result.resultType, 'complete');
    for (;;) {
      task = (await call(a, 'tasks/get', { taskId })).message.result;
      if (task.status === 'completed') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.match(task.result.content[0].text, /yes/);
    assert.equal(typeof task.ttlMs, 'number');
    assert.ok(Number.isInteger(task.pollIntervalMs));
  });

  it('gives unknown and other tenants\u2019 task ids the same -32602', async () => {
    const created = await call(a, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } });
    const taskId = created.message.result.taskId as string;
    const other = await call(a, 'tasks/get', { taskId }, { token: 'key-b' });
    const unknown = await call(a, 'tasks/get', { taskId: 'task_doesnotexist' });
    assert.equal(other.message.error.code, -32602);
    assert.equal(unknown.message.error.code, -32602);
    assert.equal(other.message.error.message, unknown.message.error.message);
    const cancel = await call(b, 'tasks/cancel', { taskId }, { token: 'key-b' });
    assert.equal(cancel.message.error.code, -32602);
  });

  it('answers -32021 with requiredCapabilities to a caller without the extension', async () => {
    const res = await call(a, 'tools/call', { name: 'failing_job', arguments: {} }, { tasks: false });
    assert.equal(res.message.error.code, -32021);
    assert.deepEqual(res.message.error.data.requiredCapabilities, { extensions: { [TASKS]: {} } });
    const get = await call(a, 'tasks/get', { taskId: 'task_x' }, { tasks: false });
    assert.equal(get.message.error.code, -32021);
  });

  it('refuses missing credentials, foreign hosts and oversized bodies', async () => {
    const anon = await rpc(a.url, 'tools/list');
    assert.equal(anon.status, 401);
    assert.equal(anon.message.error.code, -32001);
    const foreign = await call(a, 'tools/list', {}, { headers: { origin: 'http://evil.example' } });
    assert.equal(foreign.status, 403);
    const big = await call(a, 'tools/call', {
      name: 'greet',
      arguments: { name: 'x'.repeat(2 * 1024 * 1024) },
    });
    assert.equal(big.status, 413);
  });

  it('notifies a listener on replica B of changes made through replica A', async () => {
    const created = await call(a, 'tools/call', { name: 'slow_compute', arguments: { seconds: 30 } });
    const taskId = created.message.result.taskId as string;
    const controller = new AbortController();
    const res = await fetch(b.url, {
      method: 'POST',
      signal: controller.signal,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-method': 'subscriptions/listen',
        authorization: 'Bearer key-a',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 99,
        method: 'subscriptions/listen',
        params: {
          notifications: { taskIds: [taskId, 'task_unknown'] },
          _meta: { 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } } },
        },
      }),
    });
    const reader = res.body!.getReader();
    const seen: any[] = [];
    let buffer = '';
    let cancelled = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += new TextDecoder().decode(value);
      for (const line of buffer.split('\n').filter((l) => l.startsWith('data: ')))
        seen.push(JSON.parse(line.slice(6)));
      buffer = buffer.slice(buffer.lastIndexOf('\n') + 1);
      const statuses = seen.filter((m) => m.method === 'notifications/tasks').map((m) => m.params.status);
      if (!cancelled && statuses.includes('working')) {
        cancelled = true;
        assert.equal((await call(a, 'tasks/cancel', { taskId })).message.result.resultType, 'complete');
      }
      if (seen.some((m) => m.id === 99)) break;
    }
    const ack = seen.find((m) => m.method === 'notifications/subscriptions/acknowledged');
    assert.deepEqual(ack.params.notifications.taskIds, [taskId]);
    const last = seen.filter((m) => m.method === 'notifications/tasks').at(-1);
    assert.equal(last.params.taskId, taskId);
    assert.equal(last.params.status, 'cancelled');
  });
});
