/** The `/mcp` router: builds its shared state once, then composes the guards and handlers in order. */
import express, { type Router } from 'express';
import { servedModelsFromEnv } from '@taskline/engine';
import { builtinTools, LiveTools, modelChoice } from '@taskline/tools';
import { admitRequest, errorHandler, hostGuard, jsonBody } from './guards.js';
import { LegacyCallCancels } from './legacy/cancel.js';
import { LegacyRelay } from './legacy/relay.js';
import { LegacySessions } from './legacy/session.js';
import { PollPacing } from './polls.js';
import { handleOther, handlePost } from './post.js';
import type { McpRouterDeps, McpRouting } from './routing.js';
import { sdkHandler } from './sdk.js';
import { streamSettings } from './stream.js';

export { UNAVAILABLE_CODE } from './errors.js';
export { LOCAL_TENANT, type McpEnv, type McpRouterDeps } from './routing.js';

/**
 * MCP 2026-07-28 (stateless, Streamable HTTP) with the Tasks extension, mounted at `/mcp`. The
 * SDK serves the protocol; a thin layer in front of it adds what the SDK cannot do yet (SDK issue
 * #2569): -32021 for tools that need a task, and `notifications/tasks` on `subscriptions/listen`.
 *
 * Every authenticated request but a `tasks/get` that keeps to the advertised poll interval
 * (`PollPacing`) takes one from the tenant's request rate
 * (TASKLINE_RATE_LIMIT_*, the bucket LMSP uses), and a `tools/call` of a tool that runs as a task
 * also needs a place under the tenant's unfinished-task cap (TASKLINE_MAX_UNFINISHED_TASKS, counted
 * with its LMSP tasks). Over either: HTTP 429 with `Retry-After`, JSON-RPC error -32005
 * (`RATE_LIMITED_CODE`) with `data: { code: 'rate_limited', retryAfter: <seconds> }`; a client
 * address over its failed authentications gets the same with `code: 'too_many_auth_failures'`.
 */
export function createMcpRouter(deps: McpRouterDeps): Router {
  const routing = mcpRouting(deps);
  const router = express.Router({ caseSensitive: true });
  router.use(hostGuard(routing));
  router.use(jsonBody(routing));
  router.use(admitRequest(routing));
  router.post('/', (req, res, next) => handlePost(routing, req, res, next));
  router.all('/', (req, res, next) => handleOther(routing, req, res, next));
  router.use(errorHandler(routing));
  return router;
}

function mcpRouting(deps: McpRouterDeps): McpRouting {
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
  const liveTools =
    deps.liveTools ?? new LiveTools(store.redis, { cacheMs: env.TASKLINE_TOOL_LIST_CACHE_MS });
  const toolsFor = (tenant: string) => liveTools.registryFor(tenant, tools);
  const shared = { deps, env, tools, toolsFor, extensions, poll, served };
  return {
    ...shared,
    sdk: sdkHandler(shared),
    // 2025-11-25 and 2025-06-18 clients: sessions in Redis, the experimental tasks over the same engine tasks.
    legacy: {
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
    },
    polls: new PollPacing(store, poll),
  };
}
