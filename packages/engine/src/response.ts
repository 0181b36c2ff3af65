/**
 * The LMSP response object (LMSP 1.0 section 6; docs/lmsp.md) and the lifecycle events every transition writes.
 * Every event carries `task_status`, so any reader of the stream (SSE clients, MCP notifications)
 * learns each state change from the same log.
 */
import type { Problem } from './errors.js';
import type { TaskKind, TaskRecord } from './records.js';
import type { TaskStatus } from './states.js';

export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';

export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  model: string;
  output: unknown[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number } | null;
  error: Problem | null;
  incomplete_details: { reason: string } | null;
  instructions: string | null;
  metadata: Record<string, string>;
  temperature: number | null;
  top_p: number | null;
  max_output_tokens: number | null;
}

export interface EventInput {
  type: string;
  data: Record<string, unknown>;
}

export const FINAL_EVENT_TYPES = [
  'response.completed',
  'response.incomplete',
  'response.failed',
  'response.cancelled',
] as const;

export function isFinalEventType(type: string): boolean {
  return (FINAL_EVENT_TYPES as readonly string[]).includes(type);
}

/**
 * The response a task stands for, before any output: what `response.created` carries. Like
 * OpenAI's Responses API, it repeats the request's instructions, metadata and sampling settings
 * (null, or no metadata, where the request left them out).
 */
export function emptyResponse(
  task: Pick<TaskRecord, 'responseId' | 'createdAt' | 'model' | 'request'>,
  status: ResponseStatus,
): ResponseObject {
  const request = (typeof task.request === 'object' && task.request !== null ? task.request : {}) as {
    instructions?: string;
    metadata?: Record<string, string>;
    temperature?: number;
    top_p?: number;
    max_output_tokens?: number;
  };
  return {
    id: task.responseId,
    object: 'response',
    created_at: Math.floor(task.createdAt / 1000),
    status,
    model: task.model,
    output: [],
    usage: null,
    error: null,
    incomplete_details: null,
    instructions: request.instructions ?? null,
    metadata: request.metadata ?? {},
    temperature: request.temperature ?? null,
    top_p: request.top_p ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
  };
}

/** A progress event for a state change that has no response event of its own (LMSP 1.0 section 6.3). */
export function statusEvent(status: TaskStatus, extra: Record<string, unknown> = {}): EventInput {
  return { type: 'response.in_progress', data: { task_status: status, ...extra } };
}

/** The one final event of a task, matching how it ended. */
export function finalEvent(
  status: 'succeeded' | 'failed' | 'cancelled',
  result: unknown,
  kind: TaskKind,
  error: Problem | null = null,
): EventInput {
  const response = result as Partial<ResponseObject> | null;
  const type =
    status === 'failed'
      ? 'response.failed'
      : status === 'cancelled'
        ? 'response.cancelled'
        : response?.status === 'incomplete'
          ? 'response.incomplete'
          : 'response.completed';
  const body = kind === 'response' ? { response: result } : { result };
  return { type, data: { task_status: status, ...body, ...(error ? { error } : {}) } };
}
