// The raw MCP client (JSON-RPC over HTTP, both wires) of the MCP, api, tools and deploy tests.
/* eslint-disable @typescript-eslint/no-explicit-any -- raw JSON-RPC replies are checked field by field */
export const TASKS = 'io.modelcontextprotocol/tasks';
let nextId = 1;

export interface RpcReply {
  status: number;
  headers: Headers;
  message: { result?: any; error?: any };
}

/** The `initialize` request an SDK v1 client opens a session with, at `protocolVersion`. */
export const initializeRequest = (protocolVersion: string, capabilities: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion, capabilities, clientInfo: { name: 't', version: '1' } },
});

/** A raw JSON-RPC POST of tenant key `token` at the 2025-11-25 wire, in `session` when given. */
export const post2025 = (
  url: string,
  token: string,
  body: object,
  session?: string | null,
  signal?: AbortSignal,
) =>
  fetch(url, {
    method: 'POST',
    signal,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
      ...(session && { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...body }),
  });

/** A 2025-11-25 POST of `body` in `session` as raw HTTP (`http`: `HTTP/1.0` or `HTTP/1.1`), for a socket of the test's own. */
export const rawPost2025 = (url: string, token: string, session: string, body: string, http = 'HTTP/1.1') =>
  [
    `POST ${new URL(url).pathname} ${http}`,
    `Host: ${new URL(url).host}`,
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    `Authorization: Bearer ${token}`,
    `Mcp-Session-Id: ${session}`,
    'Mcp-Protocol-Version: 2025-11-25',
    `Content-Length: ${Buffer.byteLength(body)}`,
    '',
    body,
  ].join('\r\n');

/** A raw 2026-07-28 `subscriptions/listen` on `taskIds` by tenant key `token`: the open stream's answer. */
export const listenTasks = (
  url: string,
  token: string,
  taskIds: unknown[],
  o: { id?: number; signal?: AbortSignal } = {},
) =>
  fetch(url, {
    method: 'POST',
    signal: o.signal,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-method': 'subscriptions/listen',
      'mcp-protocol-version': '2026-07-28',
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: o.id ?? 1,
      method: 'subscriptions/listen',
      params: {
        notifications: { taskIds },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'test', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
        },
      },
    }),
  });

/** One raw JSON-RPC call at the 2026-07-28 wire; SSE answers are read to their response. */
export async function rpc(
  url: string,
  method: string,
  params: Record<string, unknown> = {},
  opts: {
    tasks?: boolean;
    /** The client capabilities declared; by default elicitation and the Tasks extension (none with `tasks: false`). */
    capabilities?: Record<string, unknown>;
    name?: string;
    token?: string;
    headers?: Record<string, string>;
    /** More `_meta` entries (say `traceparent`). */
    meta?: Record<string, unknown>;
  } = {},
): Promise<RpcReply> {
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
          opts.capabilities ?? (opts.tasks === false ? {} : { elicitation: {}, extensions: { [TASKS]: {} } }),
        ...opts.meta,
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
  return { status: res.status, headers: res.headers, message };
}

/**
 * Polls tasks/get until `done` holds for the task; `seen` gets every snapshot. Bounded: fails after
 * `timeoutMs` with the last snapshot, so a broken test reports what it waited for instead of hanging.
 */
export async function pollTask(
  url: string,
  taskId: string,
  done: (task: any) => boolean,
  opts: Parameters<typeof rpc>[3] & { timeoutMs?: number; seen?: (task: any) => void } = {},
): Promise<any> {
  const { timeoutMs = 60_000, seen, ...rpcOpts } = opts;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const reply = await rpc(url, 'tasks/get', { taskId }, rpcOpts);
    const task = reply.message.result;
    if (!task) throw new Error(`tasks/get failed: ${JSON.stringify(reply.message)}`);
    seen?.(task);
    if (done(task)) return task;
    if (Date.now() > deadline)
      throw new Error(
        `task ${taskId}: condition not met after ${timeoutMs} ms; last ${JSON.stringify(task)}`,
      );
    await new Promise((r) => setTimeout(r, 25));
  }
}
