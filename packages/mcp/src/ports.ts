/** What the MCP layer needs from its host (the api): tenant limits and an observer for metrics. */
import type { RedisUnavailableReason } from '@taskline/engine';

/**
 * Per-tenant limits, in the shape of the api's `TenantLimits`, so this package stays free of
 * `services/api`. Refusals throw a `TasklineError` `rate_limited` with `details.retryAfterS`.
 */
export interface McpLimits {
  /** Takes one request from the tenant's rate. */
  takeRequest(tenant: string): Promise<void>;
  /** A create's request: one from the rate and a place under the unfinished-task cap, checked by `admit`. */
  takeCreate(tenant: string): Promise<McpTaskReservation>;
  /** A slot under the tenant's open-stream cap (shared with LMSP event streams), for a listen. */
  openStream(tenant: string): Promise<McpStreamSlot>;
}

export interface McpStreamSlot {
  /** Extends the slot's lease; called on every heartbeat. */
  renew(): Promise<void>;
  release(): Promise<void>;
}

export interface McpTaskReservation {
  /** Refuses (and frees the place) when the tenant is over its cap. */
  admit(): Promise<void>;
  /** Swaps the place for the task id, or frees it (null); a later null does nothing, a task id still lands. */
  commit(taskId: string | null): Promise<void>;
}

export interface McpObserver {
  /** A tool call became a task of `tenant`. */
  taskCreated(tenant: string): void;
  /** A `notifications/tasks` listener stream opened (+1) or closed (-1). */
  listener(delta: 1 | -1): void;
  /** A request answered 503 because Redis said "try again" (or was unreachable). */
  unavailable?(reason: RedisUnavailableReason): void;
}
