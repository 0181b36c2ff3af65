// The tool-worker tests' stack: real Redis, a scheduler, api replicas and tool workers, plus MCP clients of both eras.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import { EngineStack } from '@taskline/test-support/engine-stack';
import { startApi, type Replica } from '@taskline/test-support/mcp-stack';

export const KEY_A = 'key-a-tools-0123';
export const KEY_B = 'key-b-tools-0123';
export const FIXTURES = 'services/tool-worker/test/fixtures';
export const ADMIN_KEY = 'admin-key-tools-0123456789abcdef';

/** Two tenants with API keys, a quick registry and no api cache beyond 200 ms. */
export const TOOLS_ENV = {
  TASKLINE_API_KEYS: `tenant-a:${KEY_A},tenant-b:${KEY_B}`,
  TASKLINE_ADMIN_KEYS: ADMIN_KEY,
  TASKLINE_TOOL_REGISTRY_TTL_MS: '1500',
  TASKLINE_TOOL_LIST_CACHE_MS: '200',
};

/**
 * Env for a worker no test kills, such as the one that takes over after a kill. The stack's lease
 * is a second, so that a killed worker's attempt is found quickly; a loaded host that stalls a
 * worker past it starts another attempt, which tests that count attempts or calls read as a defect.
 */
export const LONG_LEASE = { TASKLINE_LEASE_MS: '10000' };

export async function startToolStack(replicas: number): Promise<{ cluster: EngineStack; apis: Replica[] }> {
  const cluster = await EngineStack.start({ env: TOOLS_ENV });
  const apis: Replica[] = [];
  try {
    for (let i = 0; i < replicas; i++) apis.push(await startApi(cluster));
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return { cluster, apis };
}

/** The stack with one api replica: what most tool-worker tests run against. */
export async function startOneApiToolStack(): Promise<{ cluster: EngineStack; api: Replica }> {
  const { cluster, apis } = await startToolStack(1);
  return { cluster, api: apis[0]! };
}

/** Starts a tool worker serving `fixture` (a file of FIXTURES) and waits until it is up. */
export async function toolWorker(cluster: EngineStack, fixture: string, env: Record<string, string> = {}) {
  const worker = cluster.stack.toolWorker(`${FIXTURES}/${fixture}`, {
    TASKLINE_SCHEDULER_ADDR: cluster.schedulerAddr,
    TASKLINE_DRAIN_DEADLINE_MS: '200',
    ...env,
  });
  await worker.up;
  return worker;
}

const INFO = { name: 'tool-worker-test', version: '1.0.0' };

/** The tool names an official MCP 2026-07-28 client of `key` lists. */
export async function list2026(url: string, key: string): Promise<string[]> {
  const client = new Client(INFO, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  try {
    return (await client.listTools()).tools.map((t) => t.name).sort();
  } finally {
    await client.close();
  }
}

/** An official SDK v1 client (MCP 2025-11-25) of `key`, connected, declaring `capabilities`. */
export async function v1Client(
  url: string,
  key: string,
  capabilities: ClientCapabilities = {},
): Promise<V1Client> {
  const client = new V1Client(INFO, { capabilities });
  await client.connect(
    new V1Transport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${key}` } } }),
  );
  return client;
}

/** The tool names an official SDK v1 client (MCP 2025-11-25) of `key` lists. */
export async function list2025(url: string, key: string): Promise<string[]> {
  const client = await v1Client(url, key);
  try {
    return (await client.listTools()).tools.map((t) => t.name).sort();
  } finally {
    await client.close();
  }
}
