/**
 * The `/mcp` router's steps ahead of any method: the Host and Origin check, the JSON body, the
 * tenant and its admission; and the error handler behind them all.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { incomingTrace, type IncomingTrace } from '@taskline/tracing';
import { redisUnavailableReason, TasklineError } from '@taskline/engine';
import type { ToolRegistry } from '@taskline/tools';
import type { RequestOutcome } from './observe.js';
import { MCP_ERRORS } from './errors.js';
import { rateLimited, rpcError } from './rpc.js';
import { LOCAL_TENANT, type McpRouting } from './routing.js';
import { RETRY_UNAVAILABLE_S, unavailableError } from './unavailable.js';

type Middleware = (req: Request, res: Response, next: NextFunction) => void;

// DNS rebinding: a browser tricked into calling a local server sends a foreign Host or Origin.
export function hostGuard({ env }: McpRouting): Middleware {
  const allowedHosts = new Set(env.TASKLINE_MCP_ALLOWED_HOSTS.split(',').map((h) => h.trim().toLowerCase()));
  return (req, res, next) => {
    const host = (req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
    let originOk = true;
    if (req.headers.origin) {
      try {
        originOk = allowedHosts.has(new URL(req.headers.origin).hostname.toLowerCase());
      } catch {
        originOk = false;
      }
    }
    if (!allowedHosts.has(host) || !originOk)
      return rpcError(res, 403, null, -32600, 'Forbidden host or origin');
    next();
  };
}

// The body parser's refusals are answered here, so the error handler below never has to tell
// them apart from another middleware's 4xx.
export function jsonBody({ env }: McpRouting): Middleware {
  // Not strict: `5` or `null` is JSON, so JSON-RPC 2.0 makes it -32600 Invalid Request, never -32700.
  const parseJson = express.json({ limit: env.TASKLINE_MCP_MAX_BODY_BYTES, type: () => true, strict: false });
  return (req, res, next) =>
    parseJson(req, res, (err?: unknown) => {
      if (!err) return next();
      const e = err as { type?: string; message?: string };
      if (e.type === 'entity.too.large') return rpcError(res, 413, null, -32600, 'Request body too large');
      if (e.type === 'entity.parse.failed') return rpcError(res, 400, null, -32700, 'Parse error');
      // A charset or an encoding it cannot read, a body that ended early or broke its gzip.
      rpcError(res, 400, null, -32700, `Parse error: ${e.message}`);
    });
}

/** Whether this request is a call of a tool that runs as a task (the cap applies to those). */
function createsTask(tools: ToolRegistry, req: Request): boolean {
  const body = req.body as { method?: unknown; params?: { name?: unknown } } | undefined;
  if (req.method !== 'POST' || body?.method !== 'tools/call') return false;
  const name = body.params?.name;
  const support = typeof name === 'string' ? tools.get(name)?.taskSupport : undefined;
  return support !== undefined && support !== 'forbidden';
}

/** The tenant, then its admission; both left on `req.auth` for the SDK and the handlers. */
export function admitRequest(routing: McpRouting) {
  const { deps, env, polls, toolsFor } = routing;
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      const {
        id: tenant,
        stillAuthorized,
        expiresAt,
      } = env.TASKLINE_MCP_LOCAL_NO_AUTH
        ? { id: LOCAL_TENANT, stillAuthorized: undefined, expiresAt: undefined }
        : await deps.authenticate!(req);
      // The admission step: a `tools/call` that runs as a task needs its place under the cap now;
      // a poll that keeps to the advertised interval takes nothing (see PollPacing).
      const spared = await polls.spared(tenant, req.body);
      const tools = await toolsFor(tenant);
      const reservation = spared ? null : await deps.admission.admit(tenant, res, createsTask(tools, req));
      await reservation?.admit();
      const outcome: RequestOutcome = { id: (req.body as { id?: unknown } | undefined)?.id };
      (req as Request & { auth?: unknown }).auth = {
        token: '',
        clientId: tenant,
        scopes: [],
        extra: {
          outcome,
          stillAuthorized,
          expiresAt,
          tools,
          trace: callTrace(req),
          ...(reservation && { reservation }),
        },
      };
      next();
    } catch (err) {
      refuseAdmission(err, req, res, next);
    }
  };
}

/**
 * The trace context of a call: `params._meta.traceparent` where MCP carries it, else the W3C
 * `traceparent`/`tracestate` headers of the HTTP request.
 */
function callTrace(req: Request): IncomingTrace {
  const meta = (req.body as { params?: { _meta?: Record<string, unknown> } } | undefined)?.params?._meta;
  const fromMeta = incomingTrace(meta);
  return fromMeta.traceparent ? fromMeta : incomingTrace(req.headers);
}

function refuseAdmission(err: unknown, req: Request, res: Response, next: NextFunction) {
  if (err instanceof TasklineError && err.code === 'unauthorized') {
    const { http, rpc } = MCP_ERRORS.unauthorized;
    res.setHeader('WWW-Authenticate', 'Bearer');
    return rpcError(res, http, req.body?.id, rpc, 'Unauthorized');
  }
  if (err instanceof TasklineError && (err.code === 'rate_limited' || err.code === 'too_many_auth_failures'))
    return rateLimited(res, req.body?.id, err);
  next(err);
}

export function errorHandler({ deps }: McpRouting) {
  const { logger } = deps;
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const reason = redisUnavailableReason(err);
    const message = err instanceof Error ? err.message : String(err);
    if (reason) logger.warn('mcp request: task store unavailable', { reason, err: message });
    else logger.error('mcp request failed', { err: message });
    if (res.headersSent) return;
    if (reason) {
      // Redis cannot answer now (down, reloading, out of memory, a replica...): retryable, as on LMSP.
      deps.observe?.unavailable?.(reason);
      res.setHeader('Retry-After', String(RETRY_UNAVAILABLE_S));
      return res.status(503).json(unavailableError(req.body?.id, reason));
    }
    const { http, rpc } = MCP_ERRORS.internal_error;
    rpcError(res, http, req.body?.id, rpc, 'Internal error');
  };
}
