/* eslint-disable @typescript-eslint/no-explicit-any -- raw JSON-RPC replies are checked field by field */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startMcpStack, until, type Replica } from '@taskline/test-support/mcp-stack';
import { listenTasks, pollTask, rpc, TASKS } from '@taskline/test-support/mcp';

describe('MCP tasks over two replicas on one Redis', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let a: Replica;
  let b: Replica;

  before(async () => {
    // Two api processes with the LMSP authenticator (static keys), one scheduler, one gpu-worker.
    stack = await startMcpStack({
      replicas: 2,
      fixtures: true,
      env: {
        TASKLINE_API_KEYS: 'tenant-a:key-a-secret,tenant-b:key-b-secret',
      },
    });
    [a, b] = stack.replicas as [Replica, Replica];
  });
  after(() => stack.stop());

  const call = (
    r: Replica,
    method: string,
    params: Record<string, unknown> = {},
    opts: Parameters<typeof rpc>[3] = {},
  ) => rpc(r.url, method, params, { token: 'key-a-secret', ...opts });

  it('creates a task on one replica that the other resolves, answers input there, and completes', async () => {
    const created = await call(a, 'tools/call', { name: 'confirm_delete', arguments: { path: '/x' } });
    assert.equal(created.message.result.resultType, 'task');
    const taskId = created.message.result.taskId as string;
    assert.equal(
      (await rpc(b.url, 'tasks/get', { taskId })).status,
      401,
      'tasks/get without a token is refused',
    );
    let task = await until('the task to ask for input, seen on replica B', async () => {
      const seen = (await call(b, 'tasks/get', { taskId })).message.result;
      return seen.status === 'input_required' ? seen : undefined;
    });
    assert.deepEqual(Object.keys(task.inputRequests), ['confirm']);
    assert.equal(task.ttlMs, null, 'an unfinished task is never discarded: unlimited');
    const ack = await call(b, 'tasks/update', {
      taskId,
      inputResponses: { confirm: { action: 'accept', content: { confirm: 'yes' } } },
    });
    assert.equal(ack.message.result.resultType, 'complete');
    task = await until('the task to complete, seen on replica A', async () => {
      const seen = (await call(a, 'tasks/get', { taskId })).message.result;
      return seen.status === 'completed' ? seen : undefined;
    });
    assert.match(task.result.content[0].text, /yes/);
    // Readable until end + retention (TASKLINE_TASK_RETENTION_S, 24 h by default), measured from createdAt.
    assert.ok(Number.isInteger(task.ttlMs), 'Number.isInteger(task.ttlMs)');
    assert.ok(
      Date.parse(task.createdAt) + task.ttlMs >= Date.parse(task.lastUpdatedAt) + 86_400_000,
      `ttlMs ${task.ttlMs} is shorter than the retention after the end`,
    );
    assert.ok(Number.isInteger(task.pollIntervalMs), 'Number.isInteger(task.pollIntervalMs)');
  });

  it('gives unknown and other tenants\u2019 task ids the same -32602', async () => {
    const created = await call(a, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } });
    const taskId = created.message.result.taskId as string;
    const other = await call(a, 'tasks/get', { taskId }, { token: 'key-b-secret' });
    const unknown = await call(a, 'tasks/get', { taskId: 'task_doesnotexist' });
    assert.equal(other.message.error.code, -32602);
    assert.equal(unknown.message.error.code, -32602);
    assert.equal(other.message.error.message, unknown.message.error.message);
    const cancel = await call(b, 'tasks/cancel', { taskId }, { token: 'key-b-secret' });
    assert.equal(cancel.message.error.code, -32602);
  });

  it('answers -32021 with requiredCapabilities to a caller without the extension', async () => {
    const res = await call(a, 'tools/call', { name: 'failing_job', arguments: {} }, { tasks: false });
    assert.equal(res.message.error.code, -32021);
    assert.equal(res.status, 400, 'MissingRequiredClientCapabilityError is HTTP 400 on the 2026 wire');
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
    // A deadline on the whole listen: a stream that never sends its end fails the test instead of hanging.
    const controller = new AbortController();
    const deadline = setTimeout(
      () => controller.abort(new Error('the listen did not end within 60 s')),
      60_000,
    );
    deadline.unref();
    const res = await listenTasks(b.url, 'key-a-secret', [taskId, 'task_unknown'], {
      id: 99,
      signal: controller.signal,
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
    clearTimeout(deadline);
    const ack = seen.find((m) => m.method === 'notifications/subscriptions/acknowledged');
    assert.deepEqual(ack.params.notifications.taskIds, [taskId]);
    const last = seen.filter((m) => m.method === 'notifications/tasks').at(-1);
    assert.equal(last.params.taskId, taskId);
    assert.equal(last.params.status, 'cancelled');
  });
});

describe('a cancel reaches the worker holding the task at once', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;

  before(async () => {
    // A one-minute lease: the worker's renewal (every third of it) cannot be what notices the cancel.
    stack = await startMcpStack({
      fixtures: true,
      env: {
        TASKLINE_API_KEYS: 'tenant-a:key-a-secret',
        TASKLINE_LEASE_MS: '60000',
      },
    });
  });
  after(() => stack.stop());

  it('a tool task that writes nothing is stopped by the announcement on its worker channel', async () => {
    const url = stack.replicas[0]!.url;
    const opts = { token: 'key-a-secret' };
    const created = await rpc(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60 } }, opts);
    const taskId = created.message.result.taskId as string;
    await until('the worker to run the tool', async () =>
      (await stack.cluster.store.get(taskId))?.status === 'running' ? true : undefined,
    );
    const ack = await rpc(url, 'tasks/cancel', { taskId }, opts);
    assert.equal(ack.message.result?.resultType, 'complete');
    const task = await pollTask(url, taskId, (t) => t.status !== 'working', { ...opts, timeoutMs: 5_000 });
    assert.equal(task.status, 'cancelled', JSON.stringify(task));
  });
});
