/**
 * Lifecycle events as OpenAI SDK stream helpers read them. The SDKs' `responses.stream()`
 * rebuilds the response from `response.created`, `response.queued`, `response.in_progress` and
 * the final events, and refuses one that has no `response` object. The engine writes the task's
 * progress (`loading`, `running`, `cancelling`, a restart) as `response.in_progress` with only
 * `task_status`, and a failure a worker reports without output with `response: null`; this
 * projection adds the response such an event stands for when it is served, and OpenAI's members
 * to every response (`response.ts`). The stored events and every field LMSP 1.0 sections 6.3 and
 * 7.4 require are unchanged: members are only added.
 */
import {
  emptyResponse,
  eventJson,
  isFinalEventType,
  RESTART_EVENT_TYPE,
  type Problem,
  type ResponseObject,
  type ResponseStatus,
  type StoredEvent,
  type TaskRecord,
} from '@taskline/engine';
import { withOpenAiMembers } from './response.js';

/** Events that stand for the whole response; `response.restarted` (Taskline's) always carries it. */
const carriesResponse = (type: string) =>
  type === 'response.created' ||
  type === 'response.in_progress' ||
  type === RESTART_EVENT_TYPE ||
  isFinalEventType(type);

/** The JSON of one event as served on LMSP event streams (`sse.ts`). */
export function servedEventJson(event: StoredEvent, task: TaskRecord): string {
  if (!carriesResponse(event.type)) return eventJson(event);
  const data = JSON.parse(event.data) as Record<string, unknown>;
  // Who acted stays with operators (the console's timeline reads the stored events); a stream
  // says what was done, and when.
  const action = data.operator_action as { action?: unknown; at?: unknown } | undefined;
  if (action) data.operator_action = { action: action.action, at: action.at };
  // Which gpu-worker claimed the task is the operators' (the console's timeline); LMSP 1.0
  // section 6.3 has no such member, and it names the deployment's hosts.
  delete data.worker;
  if (data.response != null && typeof data.response === 'object') {
    const stored = withOpenAiMembers(data.response as ResponseObject);
    return JSON.stringify({ type: event.type, sequence_number: event.seq, ...data, response: stored });
  }
  const status: ResponseStatus =
    event.type === 'response.failed'
      ? 'failed'
      : event.type === 'response.cancelled'
        ? 'cancelled'
        : data.task_status === 'queued'
          ? 'queued'
          : 'in_progress';
  const response = withOpenAiMembers({
    ...emptyResponse(task, status),
    error: status === 'failed' ? ((data.error as Problem | undefined) ?? null) : null,
  });
  return JSON.stringify({ type: event.type, sequence_number: event.seq, ...data, response });
}

/**
 * What a follower of a response gets when its stream is cut short (this replica shutting down,
 * or the reader too far behind) before LMSP's `retry:` hint: OpenAI's streaming `error` event,
 * which the SDKs raise as an `APIError` (code `unavailable`). They never reconnect, and without it
 * would see the stream just end, as a finished one does. It has no `id:`: the resume point stays
 * the last event's, which its message names.
 */
export function interruptedFrame(lastSeq: number): string {
  return errorFrame(
    'unavailable',
    `The stream was cut short (the server is restarting, or the reader fell behind); resume with starting_after=${lastSeq}.`,
    lastSeq,
  );
}

/**
 * What ends such a stream when the API key that opened it is revoked (`stillAuthorized`): the
 * code its next request's 401 carries, so the SDKs raise rather than return as if it ended.
 * There is nothing to resume with that key, so no `retry:` follows.
 */
export function revokedFrame(lastSeq: number): string {
  return errorFrame(
    'unauthorized',
    'The API key that opened this stream was revoked; the stream ends here.',
    lastSeq,
  );
}

/**
 * What ends such a stream when the JWT that opened it expires (`StreamOptions.expiresAt`): the
 * code a request with it now gets. No `retry:`: the token is spent, and the client resumes with a
 * fresh one from the event its message names.
 */
export function expiredFrame(lastSeq: number): string {
  return errorFrame(
    'unauthorized',
    `The token that opened this stream has expired; resume with a fresh one and starting_after=${lastSeq}.`,
    lastSeq,
  );
}

/** How the OpenAI surface's streams end early (`StreamOptions`): its `error` event, never a quiet end. */
export const OPENAI_STREAM_ENDS = {
  interrupted: interruptedFrame,
  revoked: revokedFrame,
  expired: expiredFrame,
};

/**
 * OpenAI's `error` stream event (`ResponseErrorEvent`: type, code, message, param,
 * sequence_number), numbered next after `lastSeq`, the last event the stream sent (its resume
 * point when it sent none), as every event of a Responses stream is: clients order by it.
 */
function errorFrame(code: string, message: string, lastSeq: number): string {
  const event = { type: 'error', code, message, param: null, sequence_number: lastSeq + 1 };
  return `event: error\ndata: ${JSON.stringify(event)}\n\n`;
}
