// The 2025-era side of `/mcp`: sessions, `initialize` and each request of a session.
import type { Request, Response } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isJsonContentType, isLegacyRequest } from '@modelcontextprotocol/server';
import type { Logger } from '@taskline/log';
import { cancelUnlessEnded } from './cancel.js';
import { RELAY_ID_PREFIX, type LegacyRelay } from './relay.js';
import { buildLegacyServer, legacyCapabilities, SERVER_INFO } from './server.js';
import type { LegacySession, LegacySessions } from './session.js';
import { acceptInputAnswer, INPUT_ID_PREFIX, serveLegacyTaskMethod, type LegacyCall } from './tasks.js';
import { LEGACY_VERSIONS, negotiateVersion } from './wire.js';
import type { McpExtensions } from '../extensions.js';
import { rpcError } from '../rpc.js';

/** What every 2025-era request runs with: a call's engine and admission, and the sessions. */
export interface LegacyDeps extends Omit<
  LegacyCall,
  | 'tenant'
  | 'session'
  | 'clientCapabilities'
  | 'res'
  | 'id'
  | 'reservation'
  | 'stillAuthorized'
  | 'expiresAt'
  | 'trace'
> {
  sessions: LegacySessions;
  relay: LegacyRelay;
  extensions: McpExtensions;
  logger: Logger;
}

type Message = { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: Record<string, unknown> };

/**
 * Whether a request belongs to the 2025 era (stateful `initialize` handshake): the SDK's own
 * classification, so the two eras split exactly where the 2026 handler would answer -32022.
 */
export async function isLegacy(req: Request): Promise<boolean> {
  if (req.method !== 'POST') return typeof req.headers['mcp-session-id'] === 'string';
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === 'string') headers.set(name, value);
    else if (Array.isArray(value)) headers.set(name, value.join(', '));
  }
  return isLegacyRequest(new Request('http://localhost/mcp', { method: 'POST', headers }), req.body);
}

/**
 * Serves one 2025-era request (MCP 2025-11-25 and 2025-06-18, Streamable HTTP with sessions).
 * Nothing of a session lives in the replica: `initialize` stores it in Redis and each later
 * request, on whichever replica, finds it there (tenant-scoped). Tool calls that run as engine
 * tasks and the experimental `tasks/*` methods are served over the engine's tasks, the very
 * records the 2026-07-28 surface shows; everything else goes to an SDK v1 server built for the
 * request. Auth and limits were applied by the router before this.
 */
export async function serveLegacy(
  deps: LegacyDeps,
  req: Request,
  res: Response,
  tenant: string,
  request: Pick<LegacyCall, 'reservation' | 'stillAuthorized' | 'expiresAt' | 'trace'> = {},
): Promise<void> {
  const body = req.body as Message | Message[] | undefined;
  if (req.method === 'POST' && refusedMediaTypes(req, res)) return;
  if (req.method === 'POST' && !Array.isArray(body) && body?.method === 'initialize') {
    // A notification gets no response, and a session nobody learns the id of is only litter.
    if (body.id === undefined) {
      return void rpcError(
        res,
        400,
        null,
        -32600,
        'Invalid Request: initialize is a request and needs an id',
      );
    }
    return initialize(deps, res, tenant, body);
  }
  const session = await sessionOf(deps, req, res, tenant, Array.isArray(body) ? null : body?.id);
  if (!session) return;
  if (req.method === 'DELETE') {
    await deps.sessions.close(session.id);
    res.status(200).end();
    return;
  }
  if (req.method !== 'POST') {
    // No standalone GET stream: every server message travels on the stream of the POST it belongs to.
    res.set('Allow', 'POST, DELETE');
    rpcError(res, 405, null, -32000, 'Method not allowed');
    return;
  }
  if (Array.isArray(body) || typeof body !== 'object' || body === null) {
    rpcError(res, 400, null, -32600, 'Invalid Request: send one JSON-RPC message per POST');
    return;
  }
  if (body.method === undefined && body.id !== undefined) return answer(deps, res, session, body);
  if (typeof body.method === 'string' && body.id === undefined) {
    if (body.method === 'notifications/cancelled') await cancelled(deps, session, body.params?.requestId);
    res.status(202).end(); // Other notifications (initialized...) need nothing from this server.
    return;
  }
  const { reservation, stillAuthorized, expiresAt, trace } = request;
  const call = {
    ...deps,
    tenant,
    session: session.id,
    clientCapabilities: session.capabilities,
    res,
    id: body.id,
    reservation,
    stillAuthorized,
    expiresAt,
    trace,
  };
  if (typeof body.method === 'string' && (await serveLegacyTaskMethod(call, body.method, body.params ?? {})))
    return;
  await serveWithSdk(deps, req, res, session, tenant);
}

/**
 * MCP 2025-11-25 Streamable HTTP (Sending Messages to the Server): the client accepts both. The
 * SDK v1 transport answers 406 first on every POST, then 415 to a body not typed application/json
 * (the media type parsed, not searched); what is served here ahead of it does too. Says whether
 * it answered.
 */
function refusedMediaTypes(req: Request, res: Response): boolean {
  const accept = String(req.headers.accept ?? '');
  if (!(accept.includes('application/json') && accept.includes('text/event-stream'))) {
    const message = 'Not Acceptable: Client must accept both application/json and text/event-stream';
    rpcError(res, 406, null, -32000, message);
    return true;
  }
  if (!isJsonContentType(req.headers['content-type'])) {
    const message = 'Unsupported Media Type: Content-Type must be application/json';
    rpcError(res, 415, null, -32000, message);
    return true;
  }
  return false;
}

/** The request's session (its `Mcp-Session-Id`, the tenant's) at a revision it serves; or null, answered. */
async function sessionOf(
  deps: LegacyDeps,
  req: Request,
  res: Response,
  tenant: string,
  id: unknown,
): Promise<LegacySession | null> {
  const header = req.headers['mcp-session-id'];
  if (typeof header !== 'string' || header === '') {
    rpcError(res, 400, id, -32000, 'Bad Request: Mcp-Session-Id header is required');
    return null;
  }
  const session = await deps.sessions.find(header, tenant);
  if (!session) {
    rpcError(res, 404, id, -32001, 'Session not found');
    return null;
  }
  // MCP 2025-11-25, Streamable HTTP "Protocol Version Header": an unsupported one is 400. Absent, the
  // session's negotiated revision applies. Checked here, as the task methods never reach the SDK.
  const version = req.headers['mcp-protocol-version'];
  if (version !== undefined && !LEGACY_VERSIONS.includes(version as never)) {
    const supported = LEGACY_VERSIONS.join(', ');
    rpcError(
      res,
      400,
      id,
      -32000,
      `Bad Request: Unsupported protocol version: ${version} (supported versions: ${supported})`,
    );
    return null;
  }
  return session;
}

async function initialize(deps: LegacyDeps, res: Response, tenant: string, body: Message): Promise<void> {
  const params = body.params ?? {};
  const protocolVersion = negotiateVersion(params.protocolVersion);
  const session = await deps.sessions.open({
    tenant,
    protocolVersion,
    capabilities: withFormDefault((params.capabilities ?? {}) as Record<string, unknown>),
    clientInfo: (params.clientInfo ?? {}) as Record<string, unknown>,
  });
  res.setHeader('Mcp-Session-Id', session.id);
  res.json({
    jsonrpc: '2.0',
    id: body.id,
    result: { protocolVersion, capabilities: legacyCapabilities(deps.extensions), serverInfo: SERVER_INFO },
  });
}

/** 2025-11-25 elicitation: a client declaring `elicitation: {}` supports the form mode. */
function withFormDefault(capabilities: Record<string, unknown>): Record<string, unknown> {
  const elicitation = capabilities.elicitation as Record<string, unknown> | undefined;
  if (!elicitation || elicitation.form !== undefined || elicitation.url !== undefined) return capabilities;
  return { ...capabilities, elicitation: { ...elicitation, form: {} } };
}

/** A client's answer to a server request: a task's question, or a request relayed for a call. */
async function answer(deps: LegacyDeps, res: Response, session: LegacySession, body: Message): Promise<void> {
  const message = body as { id: string; result?: unknown; error?: unknown };
  if (typeof message.id === 'string' && message.id.startsWith(INPUT_ID_PREFIX)) {
    await acceptInputAnswer(deps.store, session.tenant, message);
  } else if (typeof message.id === 'string' && message.id.startsWith(RELAY_ID_PREFIX)) {
    await deps.relay.post(session.id, message);
  }
  res.status(202).end();
}

/**
 * MCP 2025-11-25 Cancellation, whichever replica holds the call (see LegacyCallCancels): a
 * cancelled plain `tools/call` served as an engine task has its task cancelled; a request the SDK
 * serves inside its POST (an inline tool call) has its handler's signal aborted.
 */
async function cancelled(deps: LegacyDeps, session: LegacySession, requestId: unknown): Promise<void> {
  if (typeof requestId !== 'string' && typeof requestId !== 'number') return;
  const taskId = await deps.cancels.cancel(session.id, requestId);
  if (taskId) await cancelUnlessEnded(deps.store, taskId, session.tenant);
}

async function serveWithSdk(
  deps: LegacyDeps,
  req: Request,
  res: Response,
  session: LegacySession,
  tenant: string,
): Promise<void> {
  const server = buildLegacyServer({ tools: deps.tools, tenant, session, extensions: deps.extensions });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  const done = new AbortController();
  deps.relay.relay(transport, session.id, done.signal);
  res.on('close', () => {
    done.abort();
    void transport.close().catch(() => undefined);
    void server.close().catch(() => undefined);
  });
  await server.connect(transport);
  const body = req.body as Message;
  if (typeof body.id === 'string' || typeof body.id === 'number') {
    const { id } = body;
    // MCP 2025-11-25 Cancellation, as the SDK does for a cancel it receives itself: the handler's
    // signal aborts and no response is sent. The POST's stream then ends: nothing more comes on it.
    const release = deps.cancels.hold(session.id, id, () => {
      transport.onmessage?.({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } });
      void transport.close().catch(() => undefined);
    });
    if (res.closed) release();
    else res.on('close', release);
  }
  await transport.handleRequest(req, res, req.body);
}
