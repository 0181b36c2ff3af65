/**
 * An upstream that runs tools as tasks itself (server-everything's `simulate-research-query`, MCP
 * 2025-11-25 Tasks, over Streamable HTTP): the gateway creates the upstream task once, follows it
 * with `tasks/get` at its pollInterval, relays its statusMessage and reads `tasks/result`. After a
 * SIGKILL of the tool worker the next attempt (`onRestart: 'resume'`) re-attaches to the same
 * upstream task: a counting proxy in front of the server sees one `tools/call`.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { rpc } from '@taskline/test-support/mcp';
import { KEY_A, startOneApiToolStack } from './helpers.js';
import { everythingOverHttp, gatewayWorker, textOf } from './upstreams.js';

/** A proxy to `target` that counts the `tools/call` requests passing through. */
async function countingProxy(target: string): Promise<{ url: string; calls: () => number; server: Server }> {
  let calls = 0;
  const to = new URL(target);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (body.length > 0 && (JSON.parse(body.toString()) as { method?: string }).method === 'tools/call')
        calls++;
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
  return { url: `http://127.0.0.1:${port}/mcp`, calls: () => calls, server };
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

  async function research(topic: string) {
    const call = await rpc(
      api.url,
      'tools/call',
      { name: 'res_simulate-research-query', arguments: { topic } },
      { token: KEY_A },
    );
    const id = call.message.result?.taskId as string;
    assert.ok(id, JSON.stringify(call.message));
    return id;
  }

  it('follows the upstream task to its result, relaying its status messages', async () => {
    const worker = await gatewayWorker(cluster, upstreams());
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

  it('re-attaches after a SIGKILL instead of calling again (resume): one upstream tools/call', async () => {
    const first = await gatewayWorker(cluster, upstreams());
    const before = proxy.calls();
    const id = await research('volcanoes');
    await cluster.waitFor(
      id,
      'upstream task under way',
      (t) => t.statusMessage === 'Analyzing content...',
      15_000,
    );
    await first.kill('SIGKILL');
    const second = await gatewayWorker(cluster, upstreams());
    try {
      const task = await cluster.waitForEnd(id, 30_000);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.match(textOf(task.result), /# Research Report: volcanoes/);
      const reasons = (await cluster.events(id)).map((e) => e.reason).filter((r) => r !== undefined);
      assert.deepEqual(reasons, ['worker_lost']);
      assert.equal(proxy.calls() - before, 1, 'the upstream tool was called once');
      assert.ok(
        second.logs.some(
          (l) => l.msg === 'upstream_task_reattached' || l.event === 'upstream_task_reattached',
        ),
      );
    } finally {
      await second.kill('SIGTERM');
    }
  });
});
