/**
 * Lifecycle events as OpenAI SDK stream helpers read them. The SDKs' `responses.stream()`
 * rebuilds the response from `response.created`, `response.queued`, `response.in_progress` and
 * the final events, and refuses one that has no `response` object. The engine writes the task's
 * progress (`loading`, `running`, `cancelling`, a restart) as `response.in_progress` with only
 * `task_status`, and a failure a worker reports without output with `response: null`; this
 * projection adds the response such an event stands for when it is served. The stored events and
 * every field LMSP 1.0 sections 6.3 and 7.4 require are unchanged: the member is only added.
 */
import {
  emptyResponse,
  eventJson,
  isFinalEventType,
  type Problem,
  type ResponseStatus,
  type StoredEvent,
  type TaskRecord,
} from '@taskline/engine';

const isLifecycle = (type: string) =>
  type === 'response.created' || type === 'response.in_progress' || isFinalEventType(type);

/** The JSON of one event as served on LMSP event streams (`sse.ts`). */
export function servedEventJson(event: StoredEvent, task: TaskRecord): string {
  if (!isLifecycle(event.type)) return eventJson(event);
  const data = JSON.parse(event.data) as Record<string, unknown>;
  // Who acted stays with operators (the console's timeline reads the stored events); a stream
  // says what was done, and when.
  const action = data.operator_action as { action?: unknown; at?: unknown } | undefined;
  if (action) data.operator_action = { action: action.action, at: action.at };
  if (data.response != null && typeof data.response === 'object')
    return action
      ? JSON.stringify({ type: event.type, sequence_number: event.seq, ...data })
      : eventJson(event);
  const status: ResponseStatus =
    event.type === 'response.failed'
      ? 'failed'
      : event.type === 'response.cancelled'
        ? 'cancelled'
        : data.task_status === 'queued'
          ? 'queued'
          : 'in_progress';
  const response = emptyResponse(task, status);
  if (status === 'failed') response.error = (data.error as Problem | undefined) ?? null;
  return JSON.stringify({ type: event.type, sequence_number: event.seq, ...data, response });
}
