/** What every `/admin/v1` handler works with: the console's dependencies, the operator view, who asks. */
import type { Request, RequestHandler, Response } from 'express';
import type { OperatorAuthenticator } from '@taskline/auth';
import type { OperatorView, TaskRecord } from '@taskline/engine';
import type { LiveTools } from '@taskline/tools';
import type { LiveStreams } from './live.js';
import type { OverviewDeps } from './overview.js';
import type { WebhookViewDeps } from './webhooks.js';

/** What the console reads besides the engine: the api's limits and its event streams. */
export interface ConsoleDeps extends OverviewDeps {
  operators: OperatorAuthenticator;
  /** The api's task event stream (LMSP resume rules); open streams count under `streamsOf`. */
  followTask(
    req: Request,
    res: Response,
    load: () => Promise<TaskRecord>,
    streamsOf: (task: TaskRecord) => string,
  ): Promise<void>;
  /** The overview's stream: the api's stream cap, shutdown and SSE settings. */
  live: LiveStreams;
  /** Each tenant's use of its limits now, with the entries of its unfinished-task cap. */
  usage(
    tenants: string[],
  ): Promise<
    Map<string, { unfinishedTasks: number; unfinished: string[]; streams: number; rateTokens: number }>
  >;
  limits: { maxUnfinishedTasks: number; maxStreams: number; requestBurst: number };
  /** Tenants with a create within this long are listed (the task retention). */
  retentionMs: number;
  /** The api's answer to a known path asked with another method: 405 with `Allow` (OPTIONS 204), as on LMSP. */
  methodNotAllowed(allowed: string[]): RequestHandler;
  /** Tenants' webhook endpoints (docs/webhooks.md). */
  webhooks: WebhookViewDeps;
}

export interface AdminContext {
  deps: ConsoleDeps;
  view: OperatorView;
  /** The live tool registry, read uncached: what tools each tool worker serves (docs/tools.md). */
  liveTools: LiveTools;
}

/** How often the overview, workers and task list streams send a snapshot. */
export const OVERVIEW_INTERVAL_MS = 2000;

export const operatorOf = (req: Request) => req.operator!.id;
// An operator's streams count under a name no tenant can have (":"), never a tenant's cap.
export const streamsOf = (req: Request) => `console:${operatorOf(req)}`;
