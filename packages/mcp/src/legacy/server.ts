// The 2025-era MCP server: tools, the experimental tasks and extensions.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ServerCapabilities } from '@modelcontextprotocol/sdk/types.js';
import type { ToolRegistry } from '@taskline/tools';
import { inlineContext } from '../inline.js';
import type { LegacySession } from './session.js';
import type { McpExtensions } from '../extensions.js';

export const SERVER_INFO = { name: 'taskline', version: '0.1.0' };

/**
 * What `/mcp` offers 2025-era clients: tools, and the 2025-11-25 experimental tasks for tool
 * calls (`tasks/list` and `tasks/cancel` included); and what extensions add (resources,
 * prompts...).
 */
export function legacyCapabilities(extensions: McpExtensions): ServerCapabilities {
  return {
    // No listChanged: the live tool registry is read again on each tools/list, never pushed
    // (docs/mcp.md, "The tool list changes").
    tools: {},
    tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    ...extensions.legacyCapabilities,
  };
}

/**
 * The SDK v1 server for one 2025-era request: every replica builds the same one, and the session's
 * state from `initialize` (kept in Redis) is given back to it. Tools that run as engine tasks are
 * listed here but called through `serveLegacyTaskMethod`; inline tools run here.
 */
export function buildLegacyServer(options: {
  tools: ToolRegistry;
  tenant: string;
  session: LegacySession | null;
  extensions: McpExtensions;
}): McpServer {
  const server = new McpServer(SERVER_INFO, { capabilities: legacyCapabilities(options.extensions) });
  for (const tool of options.tools.list()) {
    const registered = server.registerTool(
      tool.name,
      {
        ...(tool.title !== undefined && { title: tool.title }),
        description: tool.description,
        inputSchema: tool.inputSchema,
      },
      async (args: Record<string, unknown>, extra) =>
        tool.run(args, inlineContext(options.tenant, extra.signal)) as never,
    );
    registered.execution = { taskSupport: tool.taskSupport };
  }
  options.extensions.registerLegacy?.(server);
  if (options.session) {
    // A fresh server per request: it learns the client only from what `initialize` stored. The
    // SDK keeps this state private (it expects one long-lived server per session).
    Object.assign(server.server as unknown as Record<string, unknown>, {
      _clientCapabilities: options.session.capabilities,
      _clientVersion: options.session.clientInfo,
    });
  }
  return server;
}
