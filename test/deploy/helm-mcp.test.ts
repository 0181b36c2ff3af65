import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  KEY_A,
  startApi,
  startRedisAndStore,
  type InProcessApi,
  type RedisAndStore,
} from '@taskline/api/test-helpers';
import { render } from './helm-tool.js';
import { env, pod } from './manifests.js';

// The api as the chart configures it (its TASKLINE_MCP_ALLOWED_HOSTS), reached the way NOTES.txt
// tells a user to try it: `kubectl port-forward svc/<release>-api 8080:80`, so the Host header is
// a loopback name and port.

let stack: RedisAndStore;
let api: InProcessApi;

before(async () => {
  const container = pod(render(), 'Deployment', 'taskline-api').containers[0]!;
  const hosts = env(container, 'TASKLINE_MCP_ALLOWED_HOSTS')?.value;
  assert.ok(hosts, 'the chart sets TASKLINE_MCP_ALLOWED_HOSTS');
  stack = await startRedisAndStore();
  api = await startApi(stack, { TASKLINE_MCP_ALLOWED_HOSTS: hosts });
});

after(async () => {
  await api?.close();
  await stack?.close();
});

test('MCP answers an SDK client through the port-forward NOTES.txt suggests, and still refuses a foreign Host', async () => {
  const port = new URL(api.base).port;
  for (const host of ['127.0.0.1', 'localhost']) {
    const client = new Client({ name: 'port-forward', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`http://${host}:${port}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${KEY_A}` } },
    });
    await client.connect(transport);
    const { tools } = await client.listTools();
    assert.ok(
      tools.some((t) => t.name === 'generate'),
      `${host}: ${JSON.stringify(tools.map((t) => t.name))}`,
    );
    await client.close();
  }
  // DNS rebinding protection stays: a name the chart was not given is refused.
  const status = await new Promise<number | undefined>((resolve, reject) => {
    const req = request(`${api.base}/mcp`, {
      method: 'POST',
      headers: { host: `rebind.example:${port}`, 'content-type': 'application/json' },
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', reject);
    req.end('{}');
  });
  assert.equal(status, 403);
});
