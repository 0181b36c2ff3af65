/**
 * An upstream that runs tools as tasks itself (server-everything's `simulate-research-query`, MCP
 * 2025-11-25 Tasks, over Streamable HTTP): the gateway creates the upstream task once, follows it
 * with `tasks/get` at its pollInterval, relays its statusMessage and reads `tasks/result`. Its
 * clarification (`ambiguous: true`: an elicitation sent on `tasks/result` while the task is
 * `input_required`) reaches the official SDK clients of both eras and their answer goes back to
 * the same upstream task. After a SIGKILL of the tool worker the next attempt (`onRestart:
 * 'resume'`) re-attaches to the same upstream task: a counting proxy in front of the server sees
 * one `tools/call`. Over stdio the upstream task dies with the worker's child: `on_restart` holds.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { rpc } from '@taskline/test-support/mcp';
import { resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { OnRestart } from '@taskline/tool-sdk';
import { until } from '@taskline/testing';
import { KEY_A, LONG_LEASE, startOneApiToolStack } from './helpers.js';
import {
  EVERYTHING,
  everythingOverHttp,
  gatewayWorker,
  requester2026,
  stdioUpstream,
  textOf,
  untilInputRequired,
} from './upstreams.js';

const CLARIFY = /The research query "python" could have multiple interpretations/;

/** A proxy to `target` that counts the requests passing through, by method. */
async function countingProxy(
  target: string,
): Promise<{ url: string; calls: (method?: string) => number; server: Server }> {
  const calls = new Map<string, number>();
  const to = new URL(target);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const method =
        body.length > 0 ? (JSON.parse(body.toString()) as { method?: string }).method : undefined;
      if (method) calls.set(method, (calls.get(method) ?? 0) + 1);
      const out = request(
        { host: to.hostname, port: to.port, path: to.pathname, method: req.method, headers: req.headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      out.on('error', () => res.destroy());
      out.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls: (method = 'tools/call') => calls.get(method) ?? 0,
    server,
  };
}

/** Answers the research task's clarification (`upstream-0`) with 2026-07-28 `tasks/update`; the task once it succeeded. */
async function clarify(cluster: EngineStack, url: string, taskId: string, interpretation: string) {
  const answer = { action: 'accept', content: { interpretation } };
  const ack = await rpc(
    url,
    'tasks/update',
    { taskId, inputResponses: { 'upstream-0': answer } },
    { token: KEY_A },
  );
  assert.ok(!ack.message.error, JSON.stringify(ack.message));
  const task = await cluster.waitForEnd(taskId, 30_000);
  assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  return task;
}

describe('a task-capable upstream: followed, and re-attached after a crash', () => {
  let cluster: EngineStack;
  let api: Replica;
  let http: { url: string; child: ChildProcess };
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  const upstreams = () => [
    {
      name: 'res',
      transport: { type: 'http', url: proxy.url },
      tools: ['simulate-research-query'],
      onRestart: 'resume',
    },
  ];
  /** Every worker but the crash tests' first (to be lost) holds a long lease: these tests count calls. */
  const steadyWorker = (configs: object[] = upstreams()) => gatewayWorker(cluster, configs, LONG_LEASE);
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
    http = await everythingOverHttp();
    proxy = await countingProxy(http.url);
  });
  after(async () => {
    proxy?.server.close();
    http?.child.kill('SIGKILL');
    await cluster?.stop();
  });

  async function research(topic: string, ambiguous = false) {
    const call = await rpc(
      api.url,
      'tools/call',
      { name: 'res_simulate-research-query', arguments: { topic, ambiguous } },
      { token: KEY_A },
    );
    const id = call.message.result?.taskId as string;
    assert.ok(id, JSON.stringify(call.message));
    return id;
  }

  it('follows the upstream task to its result, relaying its status messages', async () => {
    const worker = await steadyWorker();
    try {
      const before = proxy.calls();
      const id = await research('tides');
      const task = await cluster.waitForEnd(id, 30_000);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.match(textOf(task.result), /# Research Report: tides/);
      const shown = (await cluster.events(id)).map((e) => e.status_message).filter(Boolean);
      assert.ok(
        shown.includes('Gathering sources...') && shown.includes('Generating report...'),
        shown.join(),
      );
      assert.equal(proxy.calls() - before, 1);
    } finally {
      await worker.kill('SIGTERM');
    }
  });

  /**
   * Starts research on a worker, SIGKILLs it once the task shows `shown`, and starts a second
   * worker; `before` is the proxy's count of upstream calls before.
   */
  async function researchThenCrash(topic: string, ambiguous: boolean, shown: string) {
    const first = await gatewayWorker(cluster, upstreams());
    const before = proxy.calls();
    const id = await research(topic, ambiguous);
    await cluster.waitFor(id, 'upstream task under way', (t) => t.statusMessage === shown, 15_000);
    await first.kill('SIGKILL');
    return { id, before, second: await steadyWorker() };
  }

  it('re-attaches after a SIGKILL instead of calling again (resume): one upstream tools/call', async () => {
    const { id, before, second } = await researchThenCrash('volcanoes', false, 'Analyzing content...');
    try {
      const task = await cluster.waitForEnd(id, 30_000);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.match(textOf(task.result), /# Research Report: volcanoes/);
      const reasons = (await cluster.events(id)).map((e) => e.reason).filter((r) => r !== undefined);
      assert.deepEqual(reasons, ['worker_lost']);
      assert.equal(proxy.calls() - before, 1, 'the upstream tool was called once');
      // Logged before the task ended; the worker's log lines go out once per turn of its loop.
      await until(
        'the worker to log the re-attach',
        async () => second.logs.some((l) => l.msg === 'upstream_task_reattached') || undefined,
        10_000,
      );
    } finally {
      await second.kill('SIGTERM');
    }
  });

  it('relays the clarification of an upstream task re-attached after a SIGKILL, through its rejoined session', async () => {
    // Killed before the question (the upstream asks two stages in): it waits in the upstream task's queue.
    const { id: taskId, before, second } = await researchThenCrash('tides', true, 'Gathering sources...');
    try {
      const asked = await untilInputRequired(api.url, KEY_A, taskId, 20_000);
      const request = asked.inputRequests['upstream-0'] as { params: { message: string; _meta?: object } };
      assert.match(request.params.message, /The research query "tides" could have multiple interpretations/);
      assert.equal(request.params._meta, undefined, 'the upstream task id stays upstream');
      const task = await clarify(cluster, api.url, taskId, 'historical');
      assert.match(textOf(task.result), /# Research Report: tides \(historical\)/);
      assert.equal(proxy.calls() - before, 1, 'the upstream tool was called once');
    } finally {
      await second.kill('SIGTERM');
    }
  });

  it('gives up a question nobody answers within timeoutMs: the upstream task is cancelled, not left behind', async () => {
    const worker = await steadyWorker([{ ...upstreams()[0], timeoutMs: 6000 }]);
    try {
      const before = proxy.calls('tasks/cancel');
      const taskId = await research('tides', true);
      await untilInputRequired(api.url, KEY_A, taskId, 20_000);
      // The worker gives it up on its own timer, 6 s after the park, then cancels upstream: a wait
      // of 20 s ran out once on a fully loaded CI host, so it gets the 60 s an SDK request gets here.
      await until(
        'the parked question given up upstream',
        async () => proxy.calls('tasks/cancel') > before || undefined,
        60_000,
      );
      // The Taskline task still waits for its caller: its own input deadline applies.
      assert.equal((await cluster.store.get(taskId))?.status, 'input_required');
    } finally {
      await worker.kill('SIGTERM');
    }
  });

  it('relays the research clarification to an SDK v1 client (2025-11-25 flow) and back upstream', async () => {
    const worker = await steadyWorker();
    const client = new V1Client(
      { name: 'gateway-test', version: '1.0.0' },
      { capabilities: { elicitation: {}, tasks: { list: {}, cancel: {} } } },
    );
    const asked: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      return { action: 'accept', content: { interpretation: 'snake' } };
    });
    await client.connect(
      new V1Transport(new URL(api.url), { requestInit: { headers: { authorization: `Bearer ${KEY_A}` } } }),
    );
    try {
      // The SDK calls task-augmented (the 2025-11-25 flow that can answer) only a tool it has listed as such.
      await client.listTools();
      const before = proxy.calls();
      let result: unknown;
      for await (const message of client.experimental.tasks.callToolStream(
        { name: 'res_simulate-research-query', arguments: { topic: 'python', ambiguous: true } },
        CallToolResultSchema,
        { timeout: 60_000 },
      ))
        if (message.type === 'result') result = message.result;
        else if (message.type === 'error') assert.fail(JSON.stringify(message.error));
      assert.equal(asked.length, 1, `${asked.join(' | ')} ${textOf(result).slice(0, 300)}`);
      assert.match(asked[0]!, CLARIFY);
      assert.match(textOf(result), /# Research Report: python \(snake\)/);
      assert.equal(proxy.calls() - before, 1, 'the answer went to the upstream task that asked');
    } finally {
      await client.close();
      await worker.kill('SIGTERM');
    }
  });

  it('relays the research clarification to the ext-tasks requester on SDK v2 (2026-07-28 tasks/update)', async () => {
    const worker = await steadyWorker();
    const asked: unknown[] = [];
    const session = await requester2026(api.url, KEY_A, async (request) => {
      asked.push(request.params?.message);
      return { action: 'accept', content: { interpretation: 'comedy' } };
    });
    try {
      const before = proxy.calls();
      const execution = await session.callTool('res_simulate-research-query', {
        topic: 'python',
        ambiguous: true,
      });
      assert.equal(execution.kind, 'task');
      const { outcome } = await execution.settle();
      assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
      assert.equal(asked.length, 1, JSON.stringify(asked));
      assert.match(String(asked[0]), CLARIFY);
      assert.match(textOf(resultFromTaskOutcome(outcome)), /# Research Report: python \(comedy\)/);
      assert.equal(proxy.calls() - before, 1, 'the answer went to the upstream task that asked');
    } finally {
      await session.close();
      await worker.kill('SIGTERM');
    }
  });
});

describe('a task-capable upstream over stdio: its task dies with the child, on_restart holds', () => {
  let cluster: EngineStack;
  let api: Replica;
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
  });
  after(async () => {
    await cluster?.stop();
  });

  /** One server-everything child per policy (`onRestart` unset for `fail`: the default). */
  const upstreams = () =>
    (['fail', 'retry', 'resume'] as const).map((policy) =>
      stdioUpstream(policy, EVERYTHING, ['stdio'], {
        tools: ['simulate-research-query'],
        ...(policy !== 'fail' && { onRestart: policy }),
      }),
    );

  it('after a SIGKILL: fail ends failed, retry and resume call the upstream again and succeed', async () => {
    const first = await gatewayWorker(cluster, upstreams());
    const ids = new Map<OnRestart, string>();
    for (const policy of ['fail', 'retry', 'resume'] as const) {
      const call = await rpc(
        api.url,
        'tools/call',
        { name: `${policy}_simulate-research-query`, arguments: { topic: policy } },
        { token: KEY_A },
      );
      const id = call.message.result?.taskId as string;
      assert.ok(id, JSON.stringify(call.message));
      ids.set(policy, id);
    }
    // Each one under way upstream, and a stage or more from its end: checked one after the other.
    for (const id of ids.values())
      await cluster.waitFor(
        id,
        'upstream task under way',
        (t) =>
          /^(Gathering sources|Analyzing content|Synthesizing findings)\.\.\.$/.test(t.statusMessage ?? ''),
        15_000,
      );
    await first.kill('SIGKILL');
    const second = await gatewayWorker(cluster, upstreams());
    try {
      const failed = await cluster.waitForEnd(ids.get('fail')!, 30_000);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error?.code, 'server_restarted');
      for (const policy of ['retry', 'resume'] as const) {
        const id = ids.get(policy)!;
        const task = await cluster.waitForEnd(id, 30_000);
        assert.equal(task.status, 'succeeded', `${policy}: ${JSON.stringify(task.error)}`);
        assert.match(textOf(task.result), new RegExp(`# Research Report: ${policy}`));
        const shown = (await cluster.events(id)).map((e) => e.status_message);
        assert.equal(
          shown.filter((m) => m === 'Gathering sources...').length,
          2,
          `${policy}: the upstream tool ran again from its start: ${shown.join(' | ')}`,
        );
      }
      // A worker writes its log lines once per turn of its event loop: one may reach this process
      // after the task's end did.
      const lost = () => second.logs.filter((l) => l.msg === 'upstream_task_lost');
      await until(
        'the worker to log its lost upstream task',
        async () => lost().length > 0 || undefined,
        10_000,
      );
      assert.equal(lost().length, 1, 'resume found its upstream task gone with the child');
    } finally {
      await second.kill('SIGTERM');
    }
  });

  it('a question whose stdio child died meanwhile: the answer starts the tool again, which gets it at once', async () => {
    const worker = await gatewayWorker(cluster, [
      stdioUpstream('ask', EVERYTHING, ['stdio'], { tools: ['simulate-research-query'] }),
    ]);
    try {
      const call = await rpc(
        api.url,
        'tools/call',
        { name: 'ask_simulate-research-query', arguments: { topic: 'python', ambiguous: true } },
        { token: KEY_A },
      );
      const taskId = call.message.result?.taskId as string;
      assert.ok(taskId, JSON.stringify(call.message));
      await untilInputRequired(api.url, KEY_A, taskId, 20_000);
      // The worker's one child: server-everything, which holds the upstream task.
      const [child] = execFileSync('ps', ['-o', 'pid=', '--ppid', String(worker.child!.pid)], {
        encoding: 'utf8',
      })
        .split('\n')
        .map(Number)
        .filter((pid) => pid > 0);
      assert.ok(child, 'the upstream child runs');
      process.kill(child, 'SIGKILL');
      await until(
        'the child seen gone',
        async () => worker.logs.some((l) => l.msg === 'upstream_closed') || undefined,
        10_000,
      );
      const task = await clarify(cluster, api.url, taskId, 'snake');
      assert.match(textOf(task.result), /# Research Report: python \(snake\)/);
      // Logged before the task ended, but a worker's log lines go out once per turn of its event
      // loop: the line may reach this process after the task's end did.
      await until(
        'the worker to log the upstream task lost with its child',
        async () => worker.logs.some((l) => l.msg === 'upstream_task_lost') || undefined,
        10_000,
      );
    } finally {
      await worker.kill('SIGTERM');
    }
  });
});
