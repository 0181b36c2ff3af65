/**
 * `POST /mcp` and the other methods on it: what is answered ahead of the SDK (revision checks,
 * -32021 for a missing client capability, `subscriptions/listen`), the 2025 era, then the SDK.
 */
import type { NextFunction, Request, Response } from 'express';
import { MissingRequiredClientCapabilityError } from '@modelcontextprotocol/server';
import { MAX_NESTING, nestedDeeperThan } from '@taskline/admission';
import { modernRejection, UNSUPPORTED_VERSION } from './ladder.js';
import type { ToolRegistry } from '@taskline/tools';
import { isLegacy, serveLegacy, type LegacyDeps } from './legacy/router.js';
import { serveTaskListen } from './listen.js';
import { rpcError } from './rpc.js';
import type { McpRouting, RequestAuth } from './routing.js';
import { missingTasks } from './server.js';
import { streamSettings } from './stream.js';
import { CLIENT_CAPABILITIES_KEY, declaresTasks } from './view.js';

type RpcBody = { id?: unknown; method?: unknown; params?: Record<string, unknown> } | undefined;

export async function handlePost(routing: McpRouting, req: Request, res: Response, next: NextFunction) {
  if (nestedDeeperThan(req.body))
    return rpcError(res, 400, null, -32600, `Request nested deeper than ${MAX_NESTING} levels`);
  const body = req.body as RpcBody;
  const params = body?.params ?? {};
  const capabilities = (params._meta as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_KEY];
  const { auth } = req as Request & { auth: RequestAuth };
  try {
    const modern = answeredAhead(req, res, body, params);
    if (modern === 'answered') return;
    // The SDK turns a tool's throw into an isError result, so -32021 is answered here. Only once
    // the Mcp-Name header matches (whitespace around it is allowed): a mismatch is the SDK's -32020.
    const header = String(req.headers['mcp-name'] ?? '').trim();
    if (modern && body?.method === 'tools/call' && header === params.name) {
      const err = missingCapability(
        routing,
        auth.extra?.tools ?? routing.tools,
        String(params.name),
        capabilities,
      );
      // HTTP 400, as for every MissingRequiredClientCapabilityError on the 2026 wire.
      if (err) return rpcError(res, 400, body.id, err.code, err.message, err.data);
    }
    if (modern && body?.method === 'subscriptions/listen')
      return await listen(routing, res, body, params, capabilities, auth);
    // Everything of the stateful 2025 era (initialize, sessions, answers) is served apart; the
    // branches above need 2026-only headers and methods (Mcp-Name, subscriptions/listen).
    if (await isLegacy(req))
      return await serveLegacy(legacyFor(routing, auth), req, res, auth.clientId, auth.extra);
    await routing.sdk(req, res, req.body);
  } catch (err) {
    next(err);
  }
}

/**
 * What is answered below, ahead of the SDK, first passes the checks the SDK makes of any
 * request; an unsupported revision is answered here for every method, so -32022 always lists
 * the 2025 revisions too (the SDK lists only its own). Says whether the request is of the 2026
 * era, or that it was refused.
 */
function answeredAhead(
  req: Request,
  res: Response,
  body: RpcBody,
  params: Record<string, unknown>,
): boolean | 'answered' {
  const ahead =
    body?.method === 'tools/call' || (body?.method === 'subscriptions/listen' && hasTaskFilter(params));
  const checked = body?.method === undefined ? 'legacy' : modernRejection(req);
  const unsupported = typeof checked === 'object' && checked?.error.code === UNSUPPORTED_VERSION;
  const rejected = ahead || unsupported ? checked : 'legacy';
  if (rejected !== null && rejected !== 'legacy') {
    const { http, error } = rejected;
    rpcError(res, http, body?.id, error.code, error.message, error.data);
    return 'answered';
  }
  return rejected === null;
}

/** The capability a tool needs that this request's client did not declare, as a -32021 error. */
function missingCapability(
  { extensions }: McpRouting,
  tools: ToolRegistry,
  name: string,
  capabilities: unknown,
) {
  if (tools.get(name)?.taskSupport === 'required' && !declaresTasks(capabilities)) return missingTasks();
  const needs = extensions.requiredCapabilities?.[name];
  const declared = (capabilities ?? {}) as Record<string, unknown>;
  const lacking = Object.keys(needs ?? {}).filter((c) => declared[c] === undefined);
  if (lacking.length === 0) return null;
  return new MissingRequiredClientCapabilityError(
    { requiredCapabilities: Object.fromEntries(lacking.map((c) => [c, {}])) },
    `This tool needs the client capabilities: ${lacking.join(', ')}.`,
  );
}

async function listen(
  { deps, env, poll }: McpRouting,
  res: Response,
  body: NonNullable<RpcBody>,
  params: Record<string, unknown>,
  capabilities: unknown,
  auth: RequestAuth,
) {
  // JSON-RPC 2.0 (section 4.1): a notification gets no response, so it cannot be a listen.
  if (body.id === undefined)
    return rpcError(
      res,
      400,
      null,
      -32600,
      'Invalid Request: subscriptions/listen is a request and needs an id',
    );
  return await serveTaskListen({
    res,
    store: deps.store,
    hub: deps.hub,
    poll,
    sse: streamSettings(env),
    maxTaskIds: env.TASKLINE_MCP_LISTEN_MAX_TASKS,
    limits: deps.admission.limits,
    tenant: auth.clientId,
    id: body.id,
    params,
    capabilities,
    observe: deps.observe,
    stillAuthorized: auth.extra?.stillAuthorized,
    expiresAt: auth.extra?.expiresAt,
  });
}

/** Any other method on `/mcp`: the 2025 era's (a GET stream, a DELETE of a session), else 405. */
export async function handleOther(routing: McpRouting, req: Request, res: Response, next: NextFunction) {
  const { auth } = req as Request & { auth: RequestAuth };
  if (await isLegacy(req)) return serveLegacy(legacyFor(routing, auth), req, res, auth.clientId).catch(next);
  rpcError(res, 405, null, -32600, 'Method not allowed');
}

function hasTaskFilter(params: Record<string, unknown>): boolean {
  const notifications = params.notifications as { taskIds?: unknown } | undefined;
  return Array.isArray(notifications?.taskIds);
}

/** The 2025 era's dependencies with the tools this request's tenant sees (built-in and live). */
function legacyFor(routing: McpRouting, auth: RequestAuth): LegacyDeps {
  return { ...routing.legacy, tools: auth.extra?.tools ?? routing.tools };
}
