/** The official SDK's MCP 2026-07-28 handler, one server per request, with Redis outages answered as 503. */
import { createMcpHandler } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { TaskReservation } from '@taskline/admission';
import type { ToolRegistry } from '@taskline/tools';
import type { IncomingTrace } from '@taskline/tracing';
import type { RequestOutcome } from './observe.js';
import type { McpRouting } from './routing.js';
import { buildServer } from './server.js';
import { RETRY_UNAVAILABLE_S, unavailableError } from './unavailable.js';

export function sdkHandler(routing: Omit<McpRouting, 'sdk' | 'legacy' | 'polls'>): McpRouting['sdk'] {
  const { deps, env, tools, poll, served, extensions } = routing;
  const handler = createMcpHandler(
    (ctx) =>
      buildServer({
        store: deps.store,
        admission: deps.admission,
        // The tools this request's tenant sees, built-in and live, as its admission step read them.
        tools: (ctx.authInfo?.extra?.tools as ToolRegistry | undefined) ?? tools,
        poll,
        tenant: ctx.authInfo?.clientId ?? '',
        reservation: ctx.authInfo?.extra?.reservation as TaskReservation | undefined,
        outcome: ctx.authInfo?.extra?.outcome as RequestOutcome | undefined,
        trace: ctx.authInfo?.extra?.trace as IncomingTrace | undefined,
        served,
        extensions,
        observe: deps.observe,
      }),
    {
      legacy: 'reject',
      maxRequestBodySize: env.TASKLINE_MCP_MAX_BODY_BYTES,
      onerror: (err) => deps.logger.debug('mcp request rejected', { err: err.message }),
    },
  );
  return toNodeHandler(
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
}
