// The gateway tests' upstreams: the npm MCP servers (server-everything, server-filesystem) and a misbehaving fixture.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  createTaskSessionFromClient,
  type ApplicationInputRequest,
  type JsonRpcResponse,
  type TaskEnabledSession,
} from '@modelcontextprotocol/ext-tasks/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { EngineStack } from '@taskline/test-support/engine-stack';
import { rpc, TASKS } from '@taskline/test-support/mcp';
import { freePort, ROOT, until } from '@taskline/testing';
import { FIXTURES, toolWorker } from './helpers.js';

const MODULES = join(ROOT, 'services/tool-worker/node_modules/@modelcontextprotocol');
export const EVERYTHING = join(MODULES, 'server-everything/dist/index.js');
export const FILESYSTEM = join(MODULES, 'server-filesystem/dist/index.js');
export const FLAKY = join(ROOT, FIXTURES, 'flaky-upstream.mjs');

/** A stdio upstream running `script` with node. */
export const stdioUpstream = (name: string, script: string, args: string[] = [], extra: object = {}) => ({
  name,
  transport: { type: 'stdio', command: process.execPath, args: [script, ...args] },
  ...extra,
});

/** server-everything over Streamable HTTP on a free port, up once it answers. */
export async function everythingOverHttp(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}/mcp`;
  await until(
    'server-everything listening',
    async () =>
      await fetch(url, { method: 'GET' })
        .then(() => true)
        .catch(() => undefined),
    10_000,
  );
  return { url, child };
}

/** A tool worker fronting `upstreams` (TASKLINE_UPSTREAMS), up once its tools are announced. */
export function gatewayWorker(cluster: EngineStack, upstreams: object[], env: Record<string, string> = {}) {
  return toolWorker(cluster, '', {
    TASKLINE_TOOL_MODULE: '',
    TASKLINE_UPSTREAMS: JSON.stringify({ upstreams }),
    ...env,
  });
}

const INFO = { name: 'gateway-test', version: '1.0.0' };

/** An official MCP 2026-07-28 client (SDK v2) of `key`. */
export async function client2026(url: string, key: string): Promise<Client> {
  const client = new Client(INFO, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

/**
 * The official 2026-07-28 requester of the Tasks extension (`@modelcontextprotocol/ext-tasks` on
 * SDK v2) of `key`: it polls, and answers a task's input requests with `onInput`. Its raw requests
 * go out through `rpc`, which frames them for the 2026-07-28 wire.
 */
export async function requester2026(
  url: string,
  key: string,
  onInput: (request: ApplicationInputRequest) => Promise<unknown>,
): Promise<TaskEnabledSession> {
  const client = await client2026(url, key);
  return createTaskSessionFromClient(client, {
    endpointId: url,
    rawDispatch: async (request, options) => {
      const { method, params } = request as { method: string; params?: Record<string, unknown> };
      // Lower-cased, so that rpc's own `mcp-name` replaces the requester's `Mcp-Name` instead of doubling it.
      const headers = Object.fromEntries(
        Object.entries(options?.context?.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
      );
      const { message } = await rpc(url, method, params, { token: key, headers });
      return (
        message.error ? { kind: 'error', error: message.error } : { kind: 'result', result: message.result }
      ) as JsonRpcResponse;
    },
    v2RequestFraming: {
      protocolVersion: '2026-07-28',
      clientInfo: INFO,
      clientCapabilities: { elicitation: { form: {} }, extensions: { [TASKS]: {} } },
    },
    onInputRequest: onInput as never,
  });
}

/** An official MCP 2025-11-25 client (SDK v1) of `key`. */
export async function client2025(url: string, key: string): Promise<V1Client> {
  const client = new V1Client(INFO, { capabilities: {} });
  await client.connect(
    new V1Transport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${key}` } } }),
  );
  return client;
}

/** The task once it shows `input_required` (2026-07-28 `tasks/get` of `key`), its questions in `inputRequests`. */
export const untilInputRequired = (url: string, key: string, taskId: string, timeoutMs: number) =>
  until(
    `task ${taskId} asking`,
    async () => {
      const seen = (await rpc(url, 'tasks/get', { taskId }, { token: key })).message.result;
      return seen?.status === 'input_required' ? seen : undefined;
    },
    timeoutMs,
  );

/** The text of a tool result's first block. */
export const textOf = (result: unknown) =>
  ((result as { content?: { text?: string }[] }).content?.[0]?.text ?? '') as string;
