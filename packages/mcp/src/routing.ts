/** What the `/mcp` router's parts share: its dependencies, settings and the state built once per router. */
import type { Request, Response } from 'express';
import type { IncomingTrace } from '@taskline/tracing';
import type { Admission, TaskReservation } from '@taskline/admission';
import type { Env } from '@taskline/config';
import type { EventHub, ServedModels, TaskStore } from '@taskline/engine';
import type { Logger } from '@taskline/log';
import type { LiveTools, ToolRegistry } from '@taskline/tools';
import type { McpExtensions } from './extensions.js';
import type { LegacyDeps } from './legacy/router.js';
import type { McpObserver } from './observe.js';
import type { PollPacing } from './polls.js';
import type { StillAuthorized } from './stream.js';

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

/** The router's state, built once: what each middleware and handler of `/mcp` reads. */
export interface McpRouting {
  deps: McpRouterDeps;
  env: McpEnv;
  /** The built-in tools (and the extensions'): what every tenant sees. */
  tools: ToolRegistry;
  /** The tools `tenant` sees now: the built-in ones plus the live ones visible to it. */
  toolsFor: (tenant: string) => Promise<ToolRegistry>;
  extensions: McpExtensions;
  poll: number;
  served: ServedModels;
  /** 2025-11-25 and 2025-06-18 clients: sessions in Redis, the experimental tasks over the same engine tasks. */
  legacy: LegacyDeps;
  polls: PollPacing;
  /** The SDK's handler, for what the checks ahead of it let through. */
  sdk: (req: Request, res: Response, body: unknown) => Promise<void>;
}

/** What the admission step leaves on the request for the SDK and the handlers. */
export interface RequestAuth {
  clientId: string;
  extra?: {
    reservation?: TaskReservation;
    stillAuthorized?: StillAuthorized;
    expiresAt?: number;
    /** The tools this request's tenant sees (built-in and live), read once by the admission step. */
    tools?: ToolRegistry;
    /** The trace context a task this request creates continues (see callTrace). */
    trace?: IncomingTrace;
  };
}
