// The metric hooks `/mcp` calls, and one request's record of a Redis outage.
import type { RedisUnavailableReason } from '@taskline/engine';

/** Metric hooks (the api passes its registry's); this package stays free of a metrics library. */
export interface McpObserver {
  /** A tool call became a task of `tenant`. */
  taskCreated(tenant: string): void;
  /** A `notifications/tasks` listener stream opened (+1) or closed (-1). */
  listener(delta: 1 | -1): void;
  /** A request answered 503 because Redis said "try again" (or was unreachable). */
  unavailable?(reason: RedisUnavailableReason): void;
}

/**
 * One request's record of a Redis "try again" met inside the SDK, which would otherwise turn it
 * into a failed tool result (or -32603 with HTTP 200): the router answers 503 instead.
 */
export interface RequestOutcome {
  id: unknown;
  unavailable?: RedisUnavailableReason;
}
