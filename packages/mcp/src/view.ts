// How an engine task looks on MCP: the Tasks extension's fields and capabilities.
import type { TaskRecord, TaskStatus, TaskStore } from '@taskline/engine';
import { traceIdOf } from '@taskline/tracing';

/** MCP Tasks extension statuses (SEP-2663). */
export type McpTaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** The MCP view of a task's status (the engine's state table has no MCP in it): a projection, never stored. */
export function toMcpStatus(status: TaskStatus): { status: McpTaskStatus; statusMessage?: string } {
  switch (status) {
    case 'queued':
      return { status: 'working', statusMessage: 'queued' };
    case 'loading':
      return { status: 'working', statusMessage: 'loading model' };
    case 'running':
      return { status: 'working', statusMessage: 'running' };
    case 'cancelling':
      return { status: 'working', statusMessage: 'cancelling' };
    case 'input_required':
      return { status: 'input_required' };
    case 'succeeded':
      return { status: 'completed' };
    case 'failed':
      return { status: 'failed' };
    case 'cancelled':
      return { status: 'cancelled' };
  }
}

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';

/** Whether one request's `_meta` envelope declares the Tasks extension (the server decides per request). */
export function declaresTasks(capabilities: unknown): boolean {
  const extensions = (capabilities as { extensions?: Record<string, unknown> } | undefined)?.extensions;
  return typeof extensions === 'object' && extensions !== null && TASKS_EXTENSION in extensions;
}

/**
 * `ttlMs` (SEP-2663: "time-to-live from creation in integer milliseconds, null for unlimited";
 * it MAY change over the task's life). Nothing discards an unfinished task, so it is null until
 * the task ends; then the engine sets `expiresAt` (end + TASKLINE_TASK_RETENTION_S) and the task
 * reads as missing from that instant, so this is that deadline, rounded up: never shorter than
 * the truth, or a client would give up on a task still readable.
 */
export function ttlMs(task: TaskRecord): number | null {
  return task.expiresAt === null ? null : Math.max(1, Math.ceil(task.expiresAt - task.createdAt));
}

/** The fields both MCP eras' `Task` share, projected from the engine's record. */
export function taskBase(task: TaskRecord): Record<string, unknown> {
  // What clients see: a new attempt of a running task stays `working (running)`.
  const { status, statusMessage } = toMcpStatus(task.shownStatus);
  // A failed task says why (SEP-2663 "Task Execution Errors"; MCP 2025-11-25's Task carries no
  // error, so this is all its tasks/get shows), not the last progress message of its run.
  const failure = status === 'failed' ? task.error?.detail : undefined;
  const message = failure ?? task.statusMessage ?? statusMessage;
  return {
    taskId: task.id,
    status,
    ...(message !== undefined && { statusMessage: message }),
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.updatedAt).toISOString(),
  };
}

/** A poll interval as the wire wants it: a positive integer of milliseconds. */
export const pollMs = (pollIntervalMs: number) => Math.max(1, Math.floor(pollIntervalMs));

/** The Task fields of SEP-2663, projected from the engine's record. */
export function taskFields(task: TaskRecord, pollIntervalMs: number): Record<string, unknown> {
  return { ...taskBase(task), ttlMs: ttlMs(task), pollIntervalMs: pollMs(pollIntervalMs) };
}

/** The `_meta` key of a created task's trace id. */
export const TRACE_ID_META = 'io.taskline/trace-id';

/** The `_meta` that names a created task's trace (when traced): `io.taskline/trace-id`. */
export function traceMeta(task: TaskRecord): Record<string, unknown> {
  const traceId = traceIdOf(task.traceparent);
  return traceId ? { _meta: { [TRACE_ID_META]: traceId } } : {};
}

/**
 * DetailedTask: open input requests while `input_required`, the inlined tool result once
 * `completed`, the JSON-RPC error once `failed`.
 */
export async function detailedTask(store: TaskStore, task: TaskRecord, pollIntervalMs: number) {
  const view = taskFields(task, pollIntervalMs);
  switch (view.status) {
    case 'input_required':
      view.inputRequests = await store.openInputRequests(task.id);
      break;
    case 'completed':
      view.result = { ...(task.result as object), resultType: 'complete' };
      break;
    case 'failed':
      view.error = {
        code: -32603,
        message: task.error?.detail ?? 'The task failed.',
        data: { code: task.error?.code ?? 'internal_error' },
      };
      break;
  }
  return view;
}
