/* eslint-disable @typescript-eslint/no-explicit-any -- raw JSON-RPC replies are checked field by field */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { toolTaskIndex } from '@taskline/engine/keys';
import { bounded, startHaproxy, type LoadBalancer } from '@taskline/testing';
import { startFixtureToolWorker, startMcpStack, until, type Replica } from '@taskline/test-support/mcp-stack';
import { initializeRequest, pollTask, rpc } from '@taskline/test-support/mcp';

const KEY_A = 'key-a-secret';
const KEY_B = 'key-b-secret';
const port = (r: Replica) => Number(new URL(r.url).port);

/** An official SDK v1 client (MCP 2025-11-25) of `tenant`'s key, through the load balancer. */
async function v1Client(url: string, key: string, onElicit?: (req: any) => Promise<any>): Promise<Client> {
  const client = new Client(
    { name: 'taskline-test', version: '1.0.0' },
    { capabilities: { elicitation: {}, tasks: { list: {}, cancel: {} } } },
  );
  if (onElicit) client.setRequestHandler(ElicitRequestSchema, (req) => onElicit(req));
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  // As hosts do: the listing tells `callToolStream` which tools run as tasks.
  await client.listTools();
  return client;
}

/**
 * An SDK v1 client of tenant A whose requests all go to `calls` but whose `notifications/cancelled`
 * go to `cancels` (what a load balancer may do). With `holdCall`, a tools/call POST calls it, then
 * leaves only once a cancel was delivered (a call that reaches its replica after its own cancel).
 * `seeCall` gets the whole body the server sends for each tools/call, by tool name.
 */
async function routedClient(
  calls: Replica,
  cancels: Replica,
  holdCall?: () => void,
  seeCall?: (tool: string, body: Promise<string>) => void,
): Promise<Client> {
  let delivered!: () => void;
  const cancelDelivered = new Promise<void>((resolve) => (delivered = resolve));
  const fetchRouted = async (_url: string | URL, init?: RequestInit) => {
    const method = typeof init?.body === 'string' ? (JSON.parse(init.body) as any).method : undefined;
    if (method === 'notifications/cancelled') {
      const res = await fetch(cancels.url, init);
      delivered();
      return res;
    }
    if (method === 'tools/call' && holdCall) {
      holdCall();
      await cancelDelivered;
    }
    const res = await fetch(calls.url, init);
    if (method !== 'tools/call' || !seeCall || !res.body) return res;
    const [theirs, ours] = res.body.tee();
    const body = new Response(ours).text();
    body.catch(() => undefined); // a stream cut by the client's close; the test reads it before
    seeCall((JSON.parse(init!.body as string) as any).params.name, body);
    return new Response(theirs, { status: res.status, headers: res.headers });
  };
  const client = new Client({ name: 'taskline-test', version: '1.0.0' }, { capabilities: {} });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(calls.url), {
      requestInit: { headers: { authorization: `Bearer ${KEY_A}` } },
      fetch: fetchRouted,
    }),
  );
  return client;
}

/** Drives `callToolStream` to its end; returns every message it yielded. */
async function drain(stream: AsyncIterable<any>): Promise<any[]> {
  const seen = [];
  for await (const message of stream) seen.push(message);
  return seen;
}

describe('MCP 2025-11-25 clients (SDK v1) beside 2026-07-28, two replicas behind HAProxy', () => {
  let stack: Awaited<ReturnType<typeof startMcpStack>>;
  let lb: LoadBalancer;
  let url: string;
  let a: Replica;
  let b: Replica;

  before(async () => {
    stack = await startMcpStack({
      replicas: 2,
      fixtures: true,
      env: {
        TASKLINE_API_KEYS: `tenant-a:${KEY_A},tenant-b:${KEY_B}`,
        // Every batch asks for confirmation first.
        TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS: '1',
      },
    });
    [a, b] = stack.replicas as [Replica, Replica];
    lb = await startHaproxy([port(a), port(b)]);
    url = `${lb.lb}/mcp`;
  });
  after(async () => {
    lb?.child.kill('SIGKILL');
    await stack.stop();
  });

  it('negotiates 2025-06-18 too, and the session works on either replica without stickiness', async () => {
    const init = await fetch(a.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${KEY_A}`,
      },
      body: JSON.stringify(initializeRequest('2025-06-18')),
    });
    const session = init.headers.get('mcp-session-id');
    assert.ok(session, 'initialize answers with Mcp-Session-Id');
    assert.equal(((await init.json()) as any).result.protocolVersion, '2025-06-18');
    const list = (replica: Replica, key: string) =>
      fetch(replica.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${key}`,
          'mcp-session-id': session,
          'mcp-protocol-version': '2025-06-18',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }),
      });
    for (const replica of [a, b]) assert.equal((await list(replica, KEY_A)).status, 200);
    const foreign = await list(b, KEY_B);
    assert.equal(foreign.status, 404, "another tenant's session id reads as unknown");
    assert.equal(((await foreign.json()) as any).error.code, -32001);
  });

  it('lists generate with described fields and the served models as an enum', async () => {
    const client = await v1Client(url, KEY_A);
    const { tools } = await client.listTools();
    const generate = tools.find((t) => t.name === 'generate')!;
    assert.equal(generate.execution?.taskSupport, 'optional');
    const props = generate.inputSchema.properties as Record<string, any>;
    for (const [field, schema] of Object.entries(props))
      assert.ok(schema.description, `${field} is described`);
    assert.deepEqual(props.model.enum, ['tiny-chat']);
    await client.close();
  });

  it('runs a generate task created by the SDK v1 client to completion', async () => {
    const client = await v1Client(url, KEY_A);
    const seen = await drain(
      client.experimental.tasks.callToolStream(
        { name: 'generate', arguments: { model: 'tiny-chat', input: 'Hello', max_output_tokens: 4 } },
        CallToolResultSchema,
      ),
    );
    const created = seen.find((m) => m.type === 'taskCreated');
    assert.ok(created, JSON.stringify(seen));
    assert.equal(typeof created.task.ttl === 'number' || created.task.ttl === null, true);
    const result = seen.find((m) => m.type === 'result');
    assert.ok(result, JSON.stringify(seen));
    assert.equal(result.result.content[0].type, 'text');
    const task = await client.experimental.tasks.getTask(created.task.taskId);
    assert.equal(task.status, 'completed');
    // The same task through the 2026-07-28 wire.
    const modern = await rpc(url, 'tasks/get', { taskId: created.task.taskId }, { token: KEY_A });
    assert.equal(modern.message.result.status, 'completed');
    await client.close();
  });

  it('calls a tool served by a separate tool worker, as a task and plainly, from either replica', async () => {
    const worker = await startFixtureToolWorker(stack.cluster);
    const client = await v1Client(url, KEY_A);
    // Live tools join a replica's list within its cache (TASKLINE_TOOL_LIST_CACHE_MS) of the announcement.
    await until('both replicas list worker_steps', async () => {
      const listed = await Promise.all([a, b].map((r) => rpc(r.url, 'tools/list', {}, { token: KEY_A })));
      return listed.every((l) => l.message.result?.tools.some((t: any) => t.name === 'worker_steps'))
        ? true
        : undefined;
    });
    await client.listTools(); // callToolStream needs the listing to know it runs as a task
    const seen = await drain(
      client.experimental.tasks.callToolStream(
        { name: 'worker_steps', arguments: { count: 3, step_ms: 20 } },
        CallToolResultSchema,
      ),
    );
    const created = seen.find((m) => m.type === 'taskCreated');
    assert.ok(created, JSON.stringify(seen));
    const result = seen.find((m) => m.type === 'result');
    assert.ok(result, JSON.stringify(seen));
    // Run by the tool-worker process, on its own queue: not by the api nor the gpu-worker.
    assert.deepEqual(result.result.structuredContent, { pid: worker.child!.pid, ran: [0, 1, 2] });
    const task = await stack.cluster.store.get(created.task.taskId);
    assert.equal(task?.model, 'tool:worker_steps');
    assert.equal((await client.experimental.tasks.getTask(created.task.taskId)).status, 'completed');
    // A plain call of the same tool (taskSupport optional) waits for its task and answers its result.
    const plain = (await client.callTool({ name: 'worker_steps', arguments: { count: 1 } })) as any;
    assert.equal(plain.structuredContent.pid, worker.child!.pid);
    await client.close();
    await worker.stop();
  });

  it('a task of either era is read, listed and cancelled from the other, never by another tenant', async () => {
    const client = await v1Client(url, KEY_A);
    // Created by the v1 client, parked on its question; read and cancelled at 2026-07-28.
    const created = (await client.request(
      { method: 'tools/call', params: { name: 'confirm_delete', arguments: {}, task: { ttl: 60_000 } } },
      (await import('@modelcontextprotocol/sdk/types.js')).CreateTaskResultSchema,
    )) as any;
    const oldId = created.task.taskId as string;
    await pollTask(url, oldId, (t) => t.status === 'input_required', { token: KEY_A });
    assert.equal(
      (await rpc(url, 'tasks/cancel', { taskId: oldId }, { token: KEY_A })).message.result.resultType,
      'complete',
    );
    await until('the cancel shows to the v1 client', async () =>
      (await client.experimental.tasks.getTask(oldId)).status === 'cancelled' ? true : undefined,
    );
    // Created at 2026-07-28; read and cancelled by the v1 client.
    const modern = await rpc(url, 'tools/call', { name: 'confirm_delete', arguments: {} }, { token: KEY_A });
    const newId = modern.message.result.taskId as string;
    assert.equal((await client.experimental.tasks.getTask(newId)).taskId, newId);
    await until('the task asks its question', async () =>
      (await client.experimental.tasks.getTask(newId)).status === 'input_required' ? true : undefined,
    );
    // Cancellation is cooperative: the worker running it stops, then the task reads cancelled.
    const cancelling = await client.experimental.tasks.cancelTask(newId);
    assert.equal(cancelling.taskId, newId);
    assert.ok(['working', 'cancelled'].includes(cancelling.status), cancelling.status);
    await pollTask(url, newId, (t) => t.status === 'cancelled', { token: KEY_A });
    // Both in tenant A's list, paged with the opaque cursor; none in tenant B's.
    const listed: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.experimental.tasks.listTasks(cursor);
      listed.push(...page.tasks.map((t) => t.taskId));
      cursor = page.nextCursor;
    } while (cursor);
    assert.ok(listed.includes(oldId) && listed.includes(newId), JSON.stringify(listed));
    const other = await v1Client(url, KEY_B);
    const theirs = await other.experimental.tasks.listTasks();
    assert.ok(
      !theirs.tasks.some((t) => t.taskId === oldId || t.taskId === newId),
      '!theirs.tasks.some((t) => t.taskId === oldId || t.taskId === newId)',
    );
    await assert.rejects(other.experimental.tasks.getTask(oldId), /Unknown or expired taskId/);
    await assert.rejects(other.experimental.tasks.cancelTask(newId), /Unknown or expired taskId/);
    await Promise.all([client.close(), other.close()]);
  });

  it('notifications/cancelled cancels the task of a plain tools/call, whichever replica it lands on', async () => {
    const redis = stack.cluster.store.redis;
    const indexed = async () => new Set(await redis.zrange(toolTaskIndex('tenant-a'), 0, -1));
    // The call's replica, another, and another that gets the cancel before the call arrives.
    for (const [cancels, holdCall] of [
      [a, false],
      [b, false],
      [b, true],
    ] as const) {
      const abort = new AbortController();
      const client = await routedClient(
        a,
        cancels,
        holdCall ? () => abort.abort('the user gave up') : undefined,
      );
      const before = await indexed();
      const call = client.callTool({ name: 'slow_compute', arguments: { seconds: 300 } }, undefined, {
        signal: abort.signal,
      });
      call.catch(() => undefined);
      const id = await until('the call creates its task', async () => {
        const fresh = [...(await indexed())].find((m) => !before.has(m));
        return fresh && (await stack.cluster.store.get(fresh.slice(16))) ? fresh.slice(16) : undefined;
      });
      if (!holdCall) {
        await stack.cluster.waitFor(id, 'running', (t) => t.status === 'running');
        abort.abort('the user gave up');
      }
      await assert.rejects(call, /the user gave up/);
      // Checked before the client closes: closing drops the call's connection, which cancels too.
      const ended = await stack.cluster.waitForEnd(id, 15_000);
      assert.equal(ended.status, 'cancelled', `cancel sent to ${cancels === a ? 'its' : 'another'} replica`);
      await client.close();
    }
  });

  it('notifications/cancelled stops an inline tools/call unanswered, whichever replica it lands on', async () => {
    for (const cancels of [a, b]) {
      const abort = new AbortController();
      const bodies = new Map<string, Promise<string>>();
      const client = await routedClient(a, cancels, undefined, (tool, body) => bodies.set(tool, body));
      // What the call's replica saw: `wait_inline` calls started there, and those stopped.
      const waits = async (): Promise<{ started: number; stopped: number }> => {
        const result = await client.callTool({ name: 'inline_waits', arguments: {} });
        return JSON.parse((result.content as any)[0].text);
      };
      const before = await waits();
      const call = client.callTool({ name: 'wait_inline', arguments: { seconds: 300 } }, undefined, {
        signal: abort.signal,
      });
      call.catch(() => undefined);
      await until('the inline call runs', async () => (await waits()).started > before.started || undefined);
      abort.abort('the user gave up');
      await assert.rejects(call, /the user gave up/);
      const where = `cancel sent to ${cancels === a ? 'its' : 'another'} replica`;
      // Checked before the client closes: closing drops the call's connection, which stops it too.
      await until(
        `the tool's signal aborted (${where})`,
        async () => (await waits()).stopped > before.stopped || undefined,
        10_000,
      );
      // MCP 2025-11-25 Cancellation: the receiver sends no response for a cancelled request; the
      // call's stream ends, as nothing more will come on it.
      const body = await bounded(`the call's stream ends (${where})`, 10_000, bodies.get('wait_inline')!);
      assert.doesNotMatch(body, /"result"|"error"/, where);
      await client.close();
    }
  });

  it('waits for many relayed elicitation answers on one Redis subscription per replica, answered on either', async () => {
    // Summed over a cluster's nodes, whose clients connect to a node lazily, at its first command.
    const redis = stack.cluster.store.redis as unknown as {
      nodes?(role: 'all'): (typeof stack.cluster.store.redis)[];
    };
    const clients = async () => {
      let n = 0;
      for (const node of redis.nodes ? redis.nodes('all') : [stack.cluster.store.redis])
        n += Number(/connected_clients:(\d+)/.exec(await node.info('clients'))![1]);
      return n;
    };
    const CALLS = 24;
    let gate = Promise.resolve();
    let asked = 0;
    const client = await v1Client(url, KEY_A, async (req) => {
      asked++;
      await gate;
      return { action: 'accept', content: { username: `u-${req.params.message}`, email: 'e@example.com' } };
    });
    // Answered at once: whatever a replica keeps for relayed answers, it has it after these.
    for (let i = 0; i < 4; i++)
      await client.callTool({ name: 'test_elicitation', arguments: { message: `warm-${i}` } });
    const before = await clients();
    let release!: () => void;
    gate = new Promise((resolve) => (release = resolve));
    asked = 0;
    const calls = Array.from({ length: CALLS }, (_, i) =>
      client.callTool({ name: 'test_elicitation', arguments: { message: `m${i}` } }),
    );
    await until('every call asked its question', async () => (asked === CALLS ? true : undefined));
    const during = await clients();
    release();
    // Each answer may land on either replica (HAProxy), and must reach the call that asked.
    const results = await Promise.all(calls);
    results.forEach((r: any, i) => assert.match(r.content[0].text, new RegExp(`"username":"u-m${i}"`)));
    // One waiting answer took a connection each before; now a replica takes one for them all.
    assert.ok(
      during - before < CALLS / 2,
      `${during - before} more Redis connections while ${CALLS} answers were awaited`,
    );
    await client.close();
  });

  it('resumes a task answered through the v1 elicitation flow after its worker is killed', async () => {
    let asked: any;
    const client = await v1Client(url, KEY_A, async (req) => {
      asked = req;
      // The question is parked in Redis: the worker that asked it dies before the answer comes.
      stack.worker.kill('SIGKILL');
      await until('the worker is gone', async () =>
        stack.worker.exitCode !== null || stack.worker.signalCode ? true : undefined,
      );
      stack.worker = stack.cluster.startWorker();
      return { action: 'accept', content: { proceed: true } };
    });
    const seen = await drain(
      client.experimental.tasks.callToolStream(
        { name: 'batch_generate', arguments: { model: 'tiny-chat', prompts: ['Hi'], max_output_tokens: 2 } },
        CallToolResultSchema,
      ),
    );
    assert.equal(asked.params._meta['io.modelcontextprotocol/related-task'].taskId, seen[0].task.taskId);
    const result = seen.find((m) => m.type === 'result');
    assert.ok(result, JSON.stringify(seen));
    assert.notEqual(result.result.isError, true, JSON.stringify(result.result));
    const task = await rpc(url, 'tasks/get', { taskId: seen[0].task.taskId }, { token: KEY_A });
    assert.equal(task.message.result.status, 'completed');
    await client.close();
  });
});
