/**
 * One webhook message per event: its type (what endpoints subscribe to), its id (the Standard
 * Webhooks `webhook-id`, the same on every redelivery) and its JSON body with the task's public
 * state, as an MCP `notifications/tasks` push carries it.
 */
import { isFinalEventType, type StoredEvent, type TaskRecord } from '@taskline/engine';
import type { DisabledNotice, EndpointRecord, HookEvent } from './endpoints.js';

/** The message of one event, before any endpoint's choices. */
export interface EventMessage {
  id: string;
  type: HookEvent;
  event: StoredEvent;
  /** When the script wrote it (Redis's clock: the outbox entry's id), ms. */
  at: number;
}

/** `msg_<task>_<seq>`: one per event, so a redelivery or a relay run twice keeps it. */
export const messageId = (taskId: string, seq: number) => `msg_${taskId}_${seq}`;
/** The event number a message id names (its last part). */
export const seqOf = (id: string) => Number(id.slice(id.lastIndexOf('_') + 1));

/** The most specific type of an event the outbox named. */
export function messageType(event: StoredEvent): HookEvent {
  if (isFinalEventType(event.type)) return 'task.ended';
  const data = JSON.parse(event.data) as { task_status?: string };
  return data.task_status === 'input_required' ? 'task.input_required' : 'task.status';
}

/** Whether an endpoint gets a message: `task.status` covers every status change. */
export function wants(endpoint: EndpointRecord, type: HookEvent): boolean {
  return endpoint.enabled && (endpoint.events.includes(type) || endpoint.events.includes('task.status'));
}

/** The task as a client of its tenant may see it; without result when the endpoint declines it. */
function publicTask(task: TaskRecord, withResult: boolean) {
  return {
    id: task.id,
    kind: task.kind,
    model: task.model,
    status: task.shownStatus,
    status_message: task.statusMessage,
    created_at: task.createdAt,
    updated_at: task.updatedAt,
    ended_at: task.endedAt,
    expires_at: task.expiresAt,
    input_deadline: task.inputDeadline,
    error: task.error,
    ...(withResult && { result: task.result }),
  };
}

/** The event itself as a reader of the task's stream sees it, less its payload when declined. */
function publicEvent(event: StoredEvent, withResult: boolean) {
  const data = JSON.parse(event.data) as Record<string, unknown>;
  if (!withResult) {
    delete data.response;
    delete data.result;
  }
  return { type: event.type, sequence_number: event.seq, ...data };
}

/** The JSON body one endpoint gets for one message. */
export function messageBody(
  message: EventMessage,
  task: TaskRecord,
  endpoint: EndpointRecord,
  extra: Record<string, unknown> = {},
): string {
  const withResult = endpoint.includeResult;
  return JSON.stringify({
    type: message.type,
    timestamp: new Date(message.at).toISOString(),
    data: { task: publicTask(task, withResult), event: publicEvent(message.event, withResult), ...extra },
  });
}

/** The type of the message telling a tenant's endpoints that another one was disabled for failing. */
export const ENDPOINT_DISABLED = 'webhook.endpoint_disabled';

/**
 * The message of a disabled endpoint's notice: its id names the endpoint and the time it was
 * disabled (one per disable, the same on every retry); its body the endpoint as its read shows it.
 */
export function noticeMessage(notice: DisabledNotice): { id: string; at: number; body: string } {
  const { endpoint } = notice;
  const at = endpoint.disabledAt ?? 0;
  return {
    id: `msg_${endpoint.id}_disabled_${at}`,
    at,
    body: JSON.stringify({
      type: ENDPOINT_DISABLED,
      timestamp: new Date(at).toISOString(),
      data: {
        endpoint: {
          id: endpoint.id,
          url: endpoint.url,
          events: endpoint.events,
          enabled: endpoint.enabled,
          disabled_reason: endpoint.disabledReason,
          disabled_at: Math.floor(at / 1000),
        },
        failures: notice.failures,
      },
    }),
  };
}
