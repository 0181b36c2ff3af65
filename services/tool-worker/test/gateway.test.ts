/**
 * The gateway: a tool worker fronting MCP servers nobody here wrote, installed from npm
 * (server-everything over stdio and Streamable HTTP, server-filesystem over stdio). Their tools
 * are listed on both eras under their prefixes with the upstream's schemas, and each call is a
 * durable task whose upstream progress becomes the task's, called by the official SDK clients.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import type { Replica } from '@taskline/test-support/mcp-stack';
import { rpc } from '@taskline/test-support/mcp';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { until } from '@taskline/testing';
import { KEY_A, list2025, list2026, startOneApiToolStack } from './helpers.js';
import {
  client2025,
  client2026,
  EVERYTHING,
  everythingOverHttp,
  FILESYSTEM,
  gatewayWorker,
  stdioUpstream,
  textOf,
  untilInputRequired,
} from './upstreams.js';

const LONG = { duration: 1.5, steps: 3 };

describe('the gateway in front of server-everything and server-filesystem', () => {
  let cluster: EngineStack;
  let api: Replica;
  let http: { url: string; child: ChildProcess };
  let dir: string;
  before(async () => {
    ({ cluster, api } = await startOneApiToolStack());
    http = await everythingOverHttp();
    dir = await mkdtemp(join(tmpdir(), 'gateway-fs-'));
    await gatewayWorker(cluster, [
      stdioUpstream('ev', EVERYTHING, ['stdio']),
      {
        name: 'evh',
        transport: { type: 'http', url: http.url },
        tools: ['trigger-long-running-operation', 'echo', 'trigger-elicitation-request'],
      },
      stdioUpstream('fs', FILESYSTEM, [dir], { tools: ['write_file', 'read_text_file'] }),
    ]);
  });
  after(async () => {
    http?.child.kill('SIGKILL');
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lists the exposed upstream tools on both eras, prefixed, with the upstream input schema', async () => {
    const names = await until(
      'the upstream tools listed',
      async () => {
        const listed = await list2026(api.url, KEY_A);
        return listed.includes('fs_read_text_file') ? listed : undefined;
      },
      10_000,
    );
    for (const name of ['ev_echo', 'ev_trigger-long-running-operation', 'evh_echo', 'fs_write_file'])
      assert.ok(names.includes(name), `${name} in ${names.join()}`);
    assert.ok(!names.includes('evh_get-sum'), 'an upstream tool left out of `tools` is not listed');
    assert.deepEqual(await list2025(api.url, KEY_A), names);
    const client = await client2026(api.url, KEY_A);
    try {
      const tool = (await client.listTools()).tools.find((t) => t.name === 'ev_echo');
      const schema = tool?.inputSchema as {
        properties?: Record<string, { type?: string }>;
        required?: string[];
      };
      assert.equal(schema.properties?.message?.type, 'string');
      assert.deepEqual(schema.required, ['message']);
    } finally {
      await client.close();
    }
  });

  for (const upstream of ['ev', 'evh'])
    it(`runs ${upstream === 'ev' ? 'stdio' : 'Streamable HTTP'} server-everything's long-running operation as a task with its progress, 2026-07-28 client`, async () => {
      const call = await rpc(
        api.url,
        'tools/call',
        { name: `${upstream}_trigger-long-running-operation`, arguments: LONG },
        { token: KEY_A },
      );
      const id = call.message.result?.taskId as string;
      assert.ok(id, JSON.stringify(call.message));
      const task = await cluster.waitForEnd(id, 20_000);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.match(
        textOf(task.result),
        /Long running operation completed\. Duration: 1\.5 seconds, Steps: 3/,
      );
      const progress = (await cluster.events(id)).map((e) => e.status_message).filter(Boolean);
      assert.deepEqual(progress, ['1/3', '2/3', '3/3']);
      assert.equal((await cluster.store.get(id))?.model, `tool:${upstream}_trigger-long-running-operation`);
    });

  it('answers the official SDK clients of both eras through a durable task (v2 and v1 callTool)', async () => {
    const v2 = await client2026(api.url, KEY_A);
    const v1 = await client2025(api.url, KEY_A);
    try {
      const a = await v2.callTool({ name: 'evh_echo', arguments: { message: 'from v2' } });
      assert.equal(textOf(a), 'Echo: from v2');
      const b = await v1.callTool({ name: 'ev_echo', arguments: { message: 'from v1' } });
      assert.equal(textOf(b), 'Echo: from v1');
      const c = await v1.callTool(
        { name: 'evh_trigger-long-running-operation', arguments: { duration: 0.4, steps: 2 } },
        undefined,
        { timeout: 20_000 },
      );
      assert.match(textOf(c), /Steps: 2/);
    } finally {
      await v2.close();
      await v1.close();
    }
  });

  it('writes and reads a real file through server-filesystem', async () => {
    const v1 = await client2025(api.url, KEY_A);
    try {
      const path = join(dir, 'note.txt');
      const wrote = await v1.callTool({
        name: 'fs_write_file',
        arguments: { path, content: 'durable hello' },
      });
      assert.ok(!wrote.isError, JSON.stringify(wrote));
      assert.equal(await readFile(path, 'utf8'), 'durable hello');
      const read = await v1.callTool({ name: 'fs_read_text_file', arguments: { path } });
      assert.equal(textOf(read), 'durable hello');
      const outside = await v1.callTool({ name: 'fs_read_text_file', arguments: { path: '/etc/hostname' } });
      assert.equal(outside.isError, true, 'an upstream isError result is the call result');
    } finally {
      await v1.close();
    }
  });

  it("relays server-everything's elicitation to the caller as input_required, answered by tasks/update (2026-07-28)", async () => {
    const call = await rpc(
      api.url,
      'tools/call',
      { name: 'ev_trigger-elicitation-request', arguments: {} },
      { token: KEY_A },
    );
    const taskId = call.message.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(call.message));
    const asked = await untilInputRequired(api.url, KEY_A, taskId, 15_000);
    const request = asked.inputRequests['upstream-0'] as { method: string; params: { message: string } };
    assert.equal(request.method, 'elicitation/create');
    assert.equal(request.params.message, 'Please provide inputs for the following fields:');
    const ack = await rpc(
      api.url,
      'tasks/update',
      { taskId, inputResponses: { 'upstream-0': { action: 'accept', content: { name: 'Ada Lovelace' } } } },
      { token: KEY_A },
    );
    assert.ok(!ack.message.error, JSON.stringify(ack.message));
    const task = await cluster.waitForEnd(taskId, 20_000);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    const texts = (task.result as { content: { text: string }[] }).content.map((c) => c.text).join('\n');
    assert.match(texts, /User provided the requested information/);
    assert.match(texts, /Ada Lovelace/);
  });

  it('answers an upstream question with a clear error when the caller cannot answer it', async () => {
    const v1 = await client2025(api.url, KEY_A);
    try {
      const result = await v1.callTool({ name: 'ev_trigger-elicitation-request', arguments: {} });
      // server-everything reports the refused question as its tool error.
      assert.match(JSON.stringify(result), /cannot answer elicitation/);
    } finally {
      await v1.close();
    }
  });

  it("relays server-everything's elicitation through the 2025-11-25 flow (SDK v1 callToolStream, its elicitation handler)", async () => {
    const client = new V1Client(
      { name: 'gateway-test', version: '1.0.0' },
      { capabilities: { elicitation: {}, tasks: { list: {}, cancel: {} } } },
    );
    let asked: { params: { message: string } } | undefined;
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked = req as typeof asked;
      return { action: 'accept', content: { name: 'Grace Hopper' } };
    });
    await client.connect(
      new V1Transport(new URL(api.url), { requestInit: { headers: { authorization: `Bearer ${KEY_A}` } } }),
    );
    try {
      await client.listTools();
      const seen: { type: string; result?: unknown }[] = [];
      for await (const message of client.experimental.tasks.callToolStream(
        { name: 'evh_trigger-elicitation-request', arguments: {} },
        CallToolResultSchema,
      ))
        seen.push(message as { type: string; result?: unknown });
      assert.equal(asked?.params.message, 'Please provide inputs for the following fields:');
      const result = seen.find((m) => m.type === 'result');
      assert.ok(result, JSON.stringify(seen));
      assert.match(JSON.stringify(result.result), /Grace Hopper/);
    } finally {
      await client.close();
    }
  });
});
