// What may be added to `/mcp` beyond the registry's tools (the conformance suite's fixtures).
import type { McpServer } from '@modelcontextprotocol/server';
import type { McpServer as LegacyMcpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ServerCapabilities } from '@modelcontextprotocol/sdk/types.js';
import type { BuiltinToolOptions } from '@taskline/tools';

/**
 * What whoever builds the router may add to `/mcp` beyond the registry's tools: inline tools,
 * resources and prompts registered on each request's server, for both protocol eras. Production
 * passes none; the conformance suite's entry (`test/conformance/serve-api.ts`) passes its fixtures.
 */
export interface McpExtensions {
  /** Tools beyond the built-in ones, run as the built-in ones are (workers must register the same). */
  tools?: BuiltinToolOptions['extend'];
  /** Registers more on the MCP 2026-07-28 server (SDK v2) of each request. */
  register?(server: McpServer): void;
  /** The SDK v2 server's `requestState` option, for extensions that answer with MRTR input requests. */
  requestState?: NonNullable<ConstructorParameters<typeof McpServer>[1]>['requestState'];
  /** Client capabilities an extension tool needs, by tool name: -32021 for a call without them. */
  requiredCapabilities?: Record<string, Record<string, object>>;
  /** Registers more on the 2025-era server (SDK v1) of each request. */
  registerLegacy?(server: LegacyMcpServer): void;
  /** Capabilities the 2025-era server declares on top of tools and tasks (what `registerLegacy` serves). */
  legacyCapabilities?: ServerCapabilities;
}
