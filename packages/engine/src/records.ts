/**
 * Task records as Redis holds them: the record and event types, and how a hash, a stream entry
 * and a script's reply read back into them.
 */
import { notFound, TasklineError, type Problem } from './errors.js';
import type { ScriptReply } from './scripts.js';
import { isTaskStatus, visibleStatus, type OnRestart, type TaskStatus } from './states.js';

/** `response`: an LMSP response generation. `tool`: an MCP tool call run durably by a worker. */
export type TaskKind = 'response' | 'tool';

export interface TaskRecord {
  id: string;
  tenant: string;
  kind: TaskKind;
  /** The engine's state: what scripts and workers act on. */
  status: TaskStatus;
  /**
   * The state clients see (LMSP, MCP): `status`, except that a task whose new attempt is queued
   * or loading still shows what it showed when the last attempt was interrupted.
   */
  shownStatus: TaskStatus;
  /** Attempt of the worker that holds (or last held) the task; 0 before the first claim. */
  attempt: number;
  /**
   * Interruptions so far: restarts that queued a new attempt (the cap TASKLINE_MAX_ATTEMPTS
   * counts these, not attempts, which an answered input request also adds).
   */
  restarts: number;
  /** Sequence number of the task's last event. */
  seq: number;
  createdAt: number;
  updatedAt: number;
  endedAt: number | null;
  /** When a terminal task and its history disappear (ms since epoch); null while it runs. */
  expiresAt: number | null;
  onRestart: OnRestart;
  model: string;
  responseId: string;
  /** The request the task runs, as the protocol layer gave it (opaque to the engine). */
  request: unknown;
  /** The outcome: an LMSP response object or an MCP tool result. */
  result: unknown;
  error: Problem | null;
  statusMessage: string | null;
  leaseOwner: string | null;
  leaseUntil: number | null;
  /**
   * No attempt holds the task: it waits for its caller's input (`input_required`), or was answered
   * and waits for a worker (`running`). See request_input.lua.
   */
  parked: boolean;
  /** When a parked task still unanswered fails with `input_timeout` (ms since epoch). */
  inputDeadline: number | null;
  /** The tool task a child generation runs for: it is dispatched under its parent's place. */
  parent: string | null;
  /**
   * The Idempotency-Key its create carried, as the tenant sent it (at most 255 characters): shown
   * to operators only. The idempotency record itself keeps only the key's hash.
   */
  idempotencyKey: string | null;
  /** The W3C traceparent of the span that created the task: every process's spans join its trace. */
  traceparent: string | null;
  /** The W3C traceparent of its last attempt's span (claim.lua): the next attempt and a restart link to it. */
  attemptTraceparent: string | null;
}

/** A task's stored W3C trace contexts (TaskStore.traceContexts); null where not traced. */
export interface TraceContexts {
  /** The create's span: every process's spans of the task join its trace under it. */
  task: string | null;
  /** The last attempt's span (claim.lua keeps it): the next attempt and a restart link to it. */
  attempt: string | null;
}

export interface NewTask {
  tenant: string;
  kind: TaskKind;
  model: string;
  onRestart: OnRestart;
  request: unknown;
  /**
   * An id chosen before the create: the one a retry of an idempotent create reuses (its first
   * try chose it), or with `fresh` one drawn for this create alone (its place under the cap).
   */
  id?: string;
  /** `id` was drawn for this create: nothing can be under it yet (see persist). */
  fresh?: boolean;
  /** The tool task this generation runs for (see TaskRecord.parent). */
  parent?: string;
  /** Set by `createIdempotent`: the key is kept on the record for operators (TaskRecord.idempotencyKey). */
  idempotencyKey?: string;
  /** The W3C traceparent of the create's span, when traced (TaskRecord.traceparent). */
  traceparent?: string;
}

export interface StoredEvent {
  seq: number;
  type: string;
  /** The event's JSON without `sequence_number`, as written. */
  data: string;
  /** When the writer committed it (its clock, ms): set on live events, not on history reads. */
  writtenAt?: number;
}

/** A state change this store committed (for metrics: transitions by kind, end-to-end task time). */
export interface TransitionObserved {
  kind: TaskKind;
  /** The state entered. */
  state: TaskStatus;
  /** Whether `state` ends the task. */
  terminal: boolean;
  createdAt: number;
}

/** What a queued task is offered to the scheduler with (enqueue.lua). */
export type Offer = Pick<TaskRecord, 'id' | 'tenant' | 'createdAt' | 'model' | 'attempt' | 'seq' | 'parent'>;

/** Turns a refused script reply into the matching TasklineError. */
export function check(id: string, reply: ScriptReply): void {
  const [code, status] = reply;
  switch (code) {
    case 'ok':
      return;
    case 'missing':
      throw notFound();
    case 'terminal':
      throw new TasklineError('task_terminal', `task ${id} is already ${status}`, { status });
    case 'stale':
      throw new TasklineError('stale_attempt', `task ${id} belongs to a newer attempt`, { status });
    case 'lease_held':
      throw new TasklineError('illegal_transition', `task ${id} is still leased`, { status });
    case 'corrupt':
      // A script found that one of its writes would fail and wrote nothing (refuseUnwritable).
      throw new TasklineError('internal_error', `task ${id}: ${status}; nothing was written`);
    default:
      throw new TasklineError('illegal_transition', `task ${id} cannot move from ${status}`, { status });
  }
}

/**
 * The events of one stream entry: its fields are (`type`, t, `data`, d) per event, in order, and
 * its id is the last one's number (see _emit.lua), so they are numbered back from it.
 */
export function parseEntry([id, fields]: [string, string[]]): StoredEvent[] {
  const last = Number(id.slice(0, id.indexOf('-')));
  const events: StoredEvent[] = [];
  let type = '';
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] === 'type') type = fields[i + 1]!;
    else if (fields[i] === 'data') events.push({ seq: 0, type, data: fields[i + 1]! });
  }
  events.forEach((e, k) => (e.seq = last - events.length + 1 + k));
  return events;
}

/** The fields create.lua sets besides the caller's (keep in step with the script). */
export function createdFields(now: number, seq: number): Record<string, string> {
  const at = String(now);
  return { status: 'queued', attempt: '0', seq: String(seq), created_at: at, updated_at: at, side_keys: '' };
}

const json = (value: string | undefined) => (value === undefined ? null : JSON.parse(value));
const num = (value: string | undefined) => (value === undefined ? null : Number(value));

export function parseTask(raw: Record<string, string>): TaskRecord {
  const status = raw.status;
  if (!isTaskStatus(status))
    throw new TasklineError('internal_error', `task ${raw.id} has unknown status ${status}`);
  return {
    id: raw.id!,
    tenant: raw.tenant!,
    kind: raw.kind as TaskKind,
    status,
    shownStatus: visibleStatus(status, raw.shown),
    attempt: Number(raw.attempt ?? 0),
    restarts: Number(raw.restarts ?? 0),
    seq: Number(raw.seq ?? 0),
    createdAt: Number(raw.created_at),
    updatedAt: Number(raw.updated_at),
    endedAt: num(raw.ended_at),
    expiresAt: num(raw.expires_at),
    onRestart: raw.on_restart as OnRestart,
    model: raw.model ?? '',
    responseId: raw.response_id ?? '',
    request: json(raw.request),
    result: json(raw.result),
    error: json(raw.error),
    statusMessage: raw.status_message ?? null,
    leaseOwner: raw.lease_owner ?? null,
    leaseUntil: num(raw.lease_until),
    parked: raw.parked !== undefined,
    inputDeadline: num(raw.input_deadline),
    parent: raw.parent ?? null,
    idempotencyKey: raw.idempotency_key ?? null,
    traceparent: raw.traceparent ?? null,
    attemptTraceparent: raw.attempt_traceparent ?? null,
  };
}

/** Renders a stored event as the JSON object clients receive (LMSP 1.0 section 6.3). */
export function eventObject(event: StoredEvent): Record<string, unknown> {
  return { type: event.type, sequence_number: event.seq, ...(JSON.parse(event.data) as object) };
}

/**
 * `JSON.stringify(eventObject(event))` without parsing the stored JSON: the fields go in front of
 * the stored object's. Every SSE frame is rendered by this, so an api with thousands of streams
 * does not parse and re-serialize each event. Data that names either field itself takes the slow
 * path, so the stored value wins exactly as in eventObject.
 */
export function eventJson(event: StoredEvent): string {
  const { data } = event;
  if (data[0] !== '{' || data.includes('"type"') || data.includes('"sequence_number"'))
    return JSON.stringify(eventObject(event));
  const head = `{"type":${JSON.stringify(event.type)},"sequence_number":${event.seq}`;
  return data === '{}' ? `${head}}` : `${head},${data.slice(1)}`;
}
