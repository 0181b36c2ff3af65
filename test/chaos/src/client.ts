import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { HTTP_STATUS } from '@taskline/lmsp';

export const TASKS_EXT = 'io.modelcontextprotocol/tasks';
export const TENANTS = { a: 'tenant-a', b: 'tenant-b' } as const;
export const KEYS = { a: 'chaos-key-a-0123456789', b: 'chaos-key-b-0123456789' } as const;
export const API_KEYS = `${TENANTS.a}:${KEYS.a},${TENANTS.b}:${KEYS.b}`;

export interface Reply {
  status: number;
  headers: Record<string, string>;
  text: string;
  body: unknown;
  ms: number;
}

/**
 * One HTTP exchange through node:http (not fetch: fetch refuses some hostile header values and
 * methods we want the server to see). Never throws for an HTTP answer; a network failure rejects.
 */
export function send(
  base: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: string | Buffer; timeoutMs?: number } = {},
): Promise<Reply> {
  const url = new URL(base);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: opts.headers,
        agent: false,
        insecureHTTPParser: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers))
            headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
          let body: unknown = text;
          if ((headers['content-type'] ?? '').includes('json') && text) {
            try {
              body = JSON.parse(text);
            } catch {
              body = text;
            }
          }
          resolve({ status: res.statusCode ?? 0, headers, text, body, ms: performance.now() - started });
        });
      },
    );
    req.setTimeout(opts.timeoutMs ?? 30_000, () => req.destroy(new Error(`timeout ${method} ${path}`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Bytes written as-is on a socket: for header injection and broken framing no client library sends. */
export function sendRaw(port: number, raw: string, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let out = '';
    socket.setTimeout(timeoutMs, () => socket.destroy());
    socket.on('data', (d) => (out += d.toString('latin1')));
    socket.on('error', () => resolve(out));
    socket.on('close', () => resolve(out));
    socket.write(raw, 'latin1');
  });
}

export const authz = (key: string) => ({ authorization: `Bearer ${key}` });
export const jsonHeaders = (key: string, extra: Record<string, string> = {}) => ({
  ...authz(key),
  'content-type': 'application/json',
  ...extra,
});

/** The MCP request envelope of the 2026-07-28 wire, with or without the Tasks extension. */
export function mcpBody(id: unknown, method: string, params: Record<string, unknown> = {}, tasks = true) {
  return {
    jsonrpc: '2.0',
    id,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': { name: 'chaos', version: '1' },
        // A client holding tasks answers their questions (the tasks of one that cannot are never asked).
        'io.modelcontextprotocol/clientCapabilities': tasks
          ? { elicitation: {}, extensions: { [TASKS_EXT]: {} } }
          : {},
      },
    },
  };
}

export function mcpHeaders(key: string, method: string, name?: string): Record<string, string> {
  return {
    ...authz(key),
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-method': method,
    'mcp-protocol-version': '2026-07-28',
    ...(name !== undefined ? { 'mcp-name': name } : {}),
  };
}

export interface RpcMessage {
  jsonrpc?: string;
  id?: unknown;
  method?: string;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
  params?: Record<string, unknown>;
}

/** The JSON-RPC messages of an MCP answer, whether JSON or an SSE stream. */
export function rpcMessages(reply: Reply): RpcMessage[] {
  if ((reply.headers['content-type'] ?? '').includes('text/event-stream')) {
    return reply.text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as RpcMessage);
  }
  return reply.body && typeof reply.body === 'object' ? [reply.body as RpcMessage] : [];
}

/** An MCP request of tenant A through `lb`, or null when the fault under way cut it. */
export const mcpOfA = (lb: string, method: string, params: Record<string, unknown>) =>
  mcp(lb, KEYS.a, method, params).catch(() => null);

export async function mcp(
  base: string,
  key: string,
  method: string,
  params: Record<string, unknown> = {},
  opts: { id?: unknown; tasks?: boolean; name?: string } = {},
): Promise<{ reply: Reply; message: RpcMessage | undefined }> {
  const id = opts.id ?? Math.floor(Math.random() * 1e9);
  const name = opts.name ?? (params.taskId as string | undefined) ?? (params.name as string | undefined);
  const reply = await send(base, 'POST', '/mcp', {
    headers: mcpHeaders(key, method, name),
    body: JSON.stringify(mcpBody(id, method, params, opts.tasks ?? true)),
  });
  return { reply, message: rpcMessages(reply).find((m) => m.id === id) };
}

/** A problem+json body with a stable code whose status matches the code's own (or 404/405 for routes). */
export function isDocumentedProblem(reply: Reply): boolean {
  const body = reply.body as { code?: unknown; status?: unknown } | null;
  if (!(reply.headers['content-type'] ?? '').startsWith('application/problem+json')) return false;
  if (!body || typeof body.code !== 'string' || !(body.code in HTTP_STATUS)) return false;
  const own = HTTP_STATUS[body.code as keyof typeof HTTP_STATUS];
  return body.status === reply.status && (own === reply.status || [404, 405].includes(reply.status));
}
