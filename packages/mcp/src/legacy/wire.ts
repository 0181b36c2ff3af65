// The 2025-era revisions and the `_meta` keys of their wire format.
import type { TaskRecord } from '@taskline/engine';
import { pollMs, taskBase, ttlMs } from '../view.js';

/** The 2025-era revisions `/mcp` negotiates in `initialize`, newest first. */
export const LEGACY_VERSIONS = ['2025-11-25', '2025-06-18'] as const;

/** `_meta` key tying a message to a task (MCP 2025-11-25, "Tasks": related-task metadata). */
export const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/** The revision an `initialize` settles on: the client's if served, else the newest served. */
export function negotiateVersion(requested: unknown): string {
  return LEGACY_VERSIONS.find((v) => v === requested) ?? LEGACY_VERSIONS[0];
}

/**
 * The `Task` of MCP 2025-11-25 (schema `Task`): the same engine record the 2026-07-28 surface
 * projects, with that revision's field names. `ttl` is milliseconds from creation, null while the
 * task runs (nothing discards an unfinished task); once it ends, the engine's expiry, rounded up.
 */
export function legacyTask(task: TaskRecord, pollIntervalMs: number): Record<string, unknown> {
  const view = { ...taskBase(task), ttl: ttlMs(task), pollInterval: pollMs(pollIntervalMs) };
  // MCP 2025-11-25, Tasks, Task Cancellation: the task is `cancelled` before the cancel is
  // answered. The engine's `cancelling` (its worker still stopping) never steps back and always
  // ends `cancelled`, so this revision shows it so (2026-07-28 cancels cooperatively: `working`).
  if (task.status === 'cancelling') Object.assign(view, { status: 'cancelled', statusMessage: 'cancelled' });
  return view;
}
