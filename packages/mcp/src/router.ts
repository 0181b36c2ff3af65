import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { createMcpHandler, MissingRequiredClientCapabilityError } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { MAX_NESTING, nestedDeeperThan, type Admission, type TaskReservation } from '@taskline/admission';
import type { Env } from '@taskline/config';
import {
  redisUnavailableReason,
  servedModelsFromEnv,
  TasklineError,
  type EventHub,
  type RedisUnavailableReason,
  type TaskStore,
} from '@taskline/engine';
import type { Logger } from '@taskline/log';
import { builtinTools, LiveTools, modelChoice, type ToolRegistry } from '@taskline/tools';
import { CLIENT_CAPABILITIES_KEY, declaresTasks } from './view.js';
import { serveTaskListen } from './listen.js';
import { modernRejection, UNSUPPORTED_VERSION } from './ladder.js';
import { PollPacing } from './polls.js';
import { rateLimited, rpcError, UNAVAILABLE_CODE } from './rpc.js';
import { isLegacy, serveLegacy, type LegacyDeps } from './legacy/router.js';
import { LegacyCallCancels } from './legacy/cancel.js';
import { LegacyRelay } from './legacy/relay.js';
import { LegacySessions } from './legacy/session.js';
import type { McpExtensions } from './extensions.js';
import type { McpObserver, RequestOutcome } from './observe.js';
import { buildServer, missingTasks } from './server.js';
import { streamSettings, type StillAuthorized } from './stream.js';

export type McpEnv = Pick<
  Env,
  | 'TASKLINE_POLL_INTERVAL_MS'
  | 'TASKLINE_MCP_LOCAL_NO_AUTH'
  | 'TASKLINE_MCP_MAX_BODY_BYTES'
  | 'TASKLINE_MCP_ALLOWED_HOSTS'
  | 'TASKLINE_MCP_SESSION_TTL_S'
  | 'TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS'
  | 'TASKLINE_MCP_LISTEN_MAX_TASKS'
  | 'TASKLINE_SSE_HEARTBEAT_MS'
  | 'TASKLINE_SSE_MAX_BUFFER_BYTES'
  | 'TASKLINE_SSE_RETRY_MS'
  | 'TASKLINE_MODELS'
  | 'TASKLINE_DEFAULT_MODEL'
  | 'TASKLINE_SNAPSHOT_MODELS'
  | 'TASKLINE_MAX_OUTPUT_TOKENS'
  | 'TASKLINE_TOOL_LIST_CACHE_MS'
>;

export interface McpRouterDeps {
  store: TaskStore;
  hub: EventHub;
  env: McpEnv;
  logger: Logger;
  /**
   * The LMSP authenticator (`@taskline/auth`): the tenant a request's bearer token proves, and what
   * a stream it opens asks on each heartbeat, when its key can be revoked meanwhile, and when its
   * JWT expires (ms since the epoch), which closes the streams it opened. Given the
   * request, not only its headers: the api counts failures by its client address, and refuses an
   * address with too many (`too_many_auth_failures`, answered as the limits' 429s below).
   */
  authenticate?: (
    req: Request,
  ) => Promise<{ id: string; stillAuthorized?: StillAuthorized; expiresAt?: number }>;
  /** The tools to offer; by default `builtinTools` as configured by `env` and `extensions` (the gpu-worker runs the same). */
  tools?: ToolRegistry;
  /**
   * The live registry of tool workers: each request lists and calls the built-in `tools` plus the
   * live tools its tenant may see (another tenant's private tool is as unknown as a missing one).
   * By default read from the store's Redis, cached TASKLINE_TOOL_LIST_CACHE_MS.
   */
  liveTools?: LiveTools;
  /** Metric hooks (the api passes its registry's); this package stays free of a metrics library. */
  observe?: McpObserver;
  /**
   * The one admission path (`@taskline/admission`), shared with LMSP: the tenant's request rate,
   * unfinished-task cap and open-stream cap, task creation, and waiting for a task's end.
   */
  admission: Admission;
  /** Tools, resources and prompts served beyond `tools` (none in production; see McpExtensions). */
  extensions?: McpExtensions;
}

/** The one tenant of the local no-auth mode. */
export const LOCAL_TENANT = 'local';

export { UNAVAILABLE_CODE };
const RETRY_UNAVAILABLE_S = 1;

const unavailableError = (id: unknown, reason: RedisUnavailableReason) => ({
  jsonrpc: '2.0',
  id: id ?? null,
  error: {
    code: UNAVAILABLE_CODE,
    message: 'Service unavailable, retry shortly',
    data: { code: 'unavailable', reason, retryAfter: RETRY_UNAVAILABLE_S },
  },
});

/**
 * MCP 2026-07-28 (stateless, Streamable HTTP) with the Tasks extension, mounted at `/mcp`. The
 * SDK serves the protocol; a thin layer in front of it adds what the SDK cannot do yet (SDK issue
 * #2569): -32021 for tools that need a task, and `notifications/tasks` on `subscriptions/listen`.
 *
 * Every authenticated request but a `tasks/get` that keeps to the advertised poll interval
 * (`PollPacing`) takes one from the tenant's request rate
 * (TASKLINE_RATE_LIMIT_*, the bucket LMSP uses), and a `tools/call` of a tool that runs as a task
 * also needs a place under the tenant's unfinished-task cap (TASKLINE_MAX_ACTIVE_TASKS, counted
 * with its LMSP tasks). Over either: HTTP 429 with `Retry-After`, JSON-RPC error -32005
 * (`RATE_LIMITED_CODE`) with `data: { code: 'rate_limited', retryAfter: <seconds> }`; a client
 * address over its failed authentications gets the same with `code: 'too_many_auth_failures'`.
 */
export function createMcpRouter(deps: McpRouterDeps): Router {
  const { store, hub, env, logger } = deps;
  if (!deps.authenticate && !env.TASKLINE_MCP_LOCAL_NO_AUTH) {
    throw new Error('createMcpRouter needs an authenticator unless TASKLINE_MCP_LOCAL_NO_AUTH is on');
  }
  const extensions = deps.extensions ?? {};
  const tools =
    deps.tools ??
    builtinTools({
      extend: extensions.tools,
      batchConfirmAboveTokens: env.TASKLINE_BATCH_CONFIRM_ABOVE_TOKENS,
      models: modelChoice(env),
    });
  const poll = env.TASKLINE_POLL_INTERVAL_MS;
  const served = servedModelsFromEnv(env);
  const allowedHosts = new Set(env.TASKLINE_MCP_ALLOWED_HOSTS.split(',').map((h) => h.trim().toLowerCase()));

  /** The tools `tenant` sees now: the built-in ones plus the live ones visible to it. */
  const liveTools =
    deps.liveTools ?? new LiveTools(store.redis, { cacheMs: env.TASKLINE_TOOL_LIST_CACHE_MS });
  const toolsFor = (tenant: string) => liveTools.registryFor(tenant, tools);

  /** The capability a tool needs that this request's client did not declare, as a -32021 error. */
  const missingCapability = (tools: ToolRegistry, name: string, capabilities: unknown) => {
    if (tools.get(name)?.taskSupport === 'required' && !declaresTasks(capabilities)) return missingTasks();
    const needs = extensions.requiredCapabilities?.[name];
    const declared = (capabilities ?? {}) as Record<string, unknown>;
    const lacking = Object.keys(needs ?? {}).filter((c) => declared[c] === undefined);
    if (lacking.length === 0) return null;
    return new MissingRequiredClientCapabilityError(
      { requiredCapabilities: Object.fromEntries(lacking.map((c) => [c, {}])) },
      `This tool needs the client capabilities: ${lacking.join(', ')}.`,
    );
  };

  const handler = createMcpHandler(
    (ctx) =>
      buildServer({
        store,
        admission: deps.admission,
        tools: (ctx.authInfo?.extra?.tools as ToolRegistry | undefined) ?? tools,
        poll,
        tenant: ctx.authInfo?.clientId ?? '',
        reservation: ctx.authInfo?.extra?.reservation as TaskReservation | undefined,
        outcome: ctx.authInfo?.extra?.outcome as RequestOutcome | undefined,
        served,
        extensions,
        observe: deps.observe,
      }),
    {
      legacy: 'reject',
      maxRequestBodySize: env.TASKLINE_MCP_MAX_BODY_BYTES,
      onerror: (err) => logger.debug('mcp request rejected', { err: err.message }),
    },
  );
  const node = toNodeHandler(
    {
      fetch: async (request, options) => {
        const response = await handler.fetch(request, options);
        const outcome = options?.authInfo?.extra?.outcome as RequestOutcome | undefined;
        if (!outcome?.unavailable) return response;
        await response.body?.cancel().catch(() => undefined);
        deps.observe?.unavailable?.(outcome.unavailable);
        return Response.json(unavailableError(outcome.id, outcome.unavailable), {
          status: 503,
          headers: { 'Retry-After': String(RETRY_UNAVAILABLE_S) },
        });
      },
    },
    { maxRequestBodySize: env.TASKLINE_MCP_MAX_BODY_BYTES },
  );

  // 2025-11-25 and 2025-06-18 clients: sessions in Redis, the experimental tasks over the same engine tasks.
  const legacy: LegacyDeps = {
    store,
    hub,
    admission: deps.admission,
    tools,
    poll,
    sse: streamSettings(env),
    served,
    sessions: new LegacySessions(store.redis, env.TASKLINE_MCP_SESSION_TTL_S),
    cancels: new LegacyCallCancels(store.redis, env.TASKLINE_MCP_SESSION_TTL_S),
    relay: new LegacyRelay(store.redis),
    extensions,
    logger,
    observe: deps.observe,
  };

  const polls = new PollPacing(store, poll);

  const router = express.Router({ caseSensitive: true });
  // DNS rebinding: a browser tricked into calling a local server sends a foreign Host or Origin.
  router.use((req, res, next) => {
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
  });
  // The body parser's refusals are answered here, so the error handler below never has to tell
  // them apart from another middleware's 4xx.
  // Not strict: `5` or `null` is JSON, so JSON-RPC 2.0 makes it -32600 Invalid Request, never -32700.
  const parseJson = express.json({ limit: env.TASKLINE_MCP_MAX_BODY_BYTES, type: () => true, strict: false });
  router.use((req, res, next) =>
    parseJson(req, res, (err?: unknown) => {
      if (!err) return next();
      const e = err as { type?: string; message?: string };
      if (e.type === 'entity.too.large') return rpcError(res, 413, null, -32600, 'Request body too large');
      if (e.type === 'entity.parse.failed') return rpcError(res, 400, null, -32700, 'Parse error');
      // A charset or an encoding it cannot read, a body that ended early or broke its gzip.
      rpcError(res, 400, null, -32700, `Parse error: ${e.message}`);
    }),
  );
  /** Whether this request is a call of a tool that runs as a task (the cap applies to those). */
  const createsTask = (req: Request, tools: ToolRegistry) => {
    const body = req.body as { method?: unknown; params?: { name?: unknown } } | undefined;
    if (req.method !== 'POST' || body?.method !== 'tools/call') return false;
    const name = body.params?.name;
    const support = typeof name === 'string' ? tools.get(name)?.taskSupport : undefined;
    return support !== undefined && support !== 'forbidden';
  };
  router.use(async (req, res, next) => {
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
      const visible = await toolsFor(tenant);
      const reservation = spared ? null : await deps.admission.admit(tenant, res, createsTask(req, visible));
      await reservation?.admit();
      const outcome: RequestOutcome = { id: (req.body as { id?: unknown } | undefined)?.id };
      (req as Request & { auth?: unknown }).auth = {
        token: '',
        clientId: tenant,
        scopes: [],
        extra: { outcome, stillAuthorized, expiresAt, tools: visible, ...(reservation && { reservation }) },
      };
      next();
    } catch (err) {
      if (err instanceof TasklineError && err.code === 'unauthorized') {
        res.setHeader('WWW-Authenticate', 'Bearer');
        return rpcError(res, 401, req.body?.id, -32001, 'Unauthorized');
      }
      if (
        err instanceof TasklineError &&
        (err.code === 'rate_limited' || err.code === 'too_many_auth_failures')
      )
        return rateLimited(res, req.body?.id, err);
      next(err);
    }
  });
  router.post('/', async (req, res, next) => {
    if (nestedDeeperThan(req.body))
      return rpcError(res, 400, null, -32600, `Request nested deeper than ${MAX_NESTING} levels`);
    const body = req.body as { id?: unknown; method?: unknown; params?: Record<string, unknown> } | undefined;
    const params = body?.params ?? {};
    const capabilities = (params._meta as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_KEY];
    const { auth } = req as Request & {
      auth: {
        clientId: string;
        extra?: {
          reservation?: TaskReservation;
          stillAuthorized?: StillAuthorized;
          expiresAt?: number;
          tools: ToolRegistry;
        };
      };
    };
    const tenant = auth.clientId;
    try {
      const ahead =
        body?.method === 'tools/call' || (body?.method === 'subscriptions/listen' && hasTaskFilter(params));
      // What is answered below, ahead of the SDK, first passes the checks the SDK makes of any
      // request; an unsupported revision is answered here for every method, so -32022 always lists
      // the 2025 revisions too (the SDK lists only its own).
      const checked = body?.method === undefined ? 'legacy' : modernRejection(req);
      const unsupported = typeof checked === 'object' && checked?.error.code === UNSUPPORTED_VERSION;
      const rejected = ahead || unsupported ? checked : 'legacy';
      if (rejected !== null && rejected !== 'legacy') {
        const { http, error } = rejected;
        return rpcError(res, http, body?.id, error.code, error.message, error.data);
      }
      const modern = rejected === null;
      // The SDK turns a tool's throw into an isError result, so -32021 is answered here. Only once
      // the Mcp-Name header matches (whitespace around it is allowed): a mismatch is the SDK's -32020.
      const header = String(req.headers['mcp-name'] ?? '').trim();
      if (modern && body?.method === 'tools/call' && header === params.name) {
        const err = missingCapability(auth.extra!.tools, String(params.name), capabilities);
        // HTTP 400, as for every MissingRequiredClientCapabilityError on the 2026 wire.
        if (err) return rpcError(res, 400, body.id, err.code, err.message, err.data);
      }
      if (modern && body?.method === 'subscriptions/listen') {
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
          store,
          hub,
          poll,
          sse: streamSettings(env),
          maxTaskIds: env.TASKLINE_MCP_LISTEN_MAX_TASKS,
          limits: deps.admission.limits,
          tenant,
          id: body.id,
          params,
          capabilities,
          observe: deps.observe,
          stillAuthorized: auth.extra?.stillAuthorized,
          expiresAt: auth.extra?.expiresAt,
        });
      }
      // Everything of the stateful 2025 era (initialize, sessions, answers) is served apart; the
      // branches above need 2026-only headers and methods (Mcp-Name, subscriptions/listen).
      if (await isLegacy(req))
        return await serveLegacy({ ...legacy, tools: auth.extra!.tools }, req, res, tenant, auth.extra);
      await node(req, res, req.body);
    } catch (err) {
      next(err);
    }
  });
  router.all('/', async (req, res, next) => {
    const { auth } = req as Request & { auth: { clientId: string; extra: { tools: ToolRegistry } } };
    if (await isLegacy(req))
      return serveLegacy({ ...legacy, tools: auth.extra.tools }, req, res, auth.clientId).catch(next);
    rpcError(res, 405, null, -32600, 'Method not allowed');
  });
  router.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
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
    rpcError(res, 500, req.body?.id, -32603, 'Internal error');
  });
  return router;
}

function hasTaskFilter(params: Record<string, unknown>): boolean {
  const notifications = params.notifications as { taskIds?: unknown } | undefined;
  return Array.isArray(notifications?.taskIds);
}
