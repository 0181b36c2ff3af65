/**
 * Stable error codes (LMSP 1.0 section 9.3; docs/lmsp.md). Every layer throws TasklineError with one of these, as
 * data: what a code answers on a protocol lives with that protocol (the HTTP status of each in
 * `@taskline/lmsp`, the JSON-RPC error of each in `packages/mcp/src/errors.ts`).
 */
export const ERROR_CODES = [
  'invalid_request',
  'unauthorized',
  'forbidden',
  'task_not_found',
  'model_not_found',
  'task_not_cancelable',
  /** A delete (OpenAI's `DELETE /responses/{id}`) of a task that has not ended: cancel it first. */
  'task_not_deletable',
  'idempotency_key_in_use',
  'event_history_expired',
  'payload_too_large',
  'idempotency_key_reused',
  'unsupported_capability',
  'rate_limited',
  /**
   * Too many failed authentications from the client's address (TASKLINE_AUTH_FAILURE_*): every
   * request from it is refused, whatever its credential, until the window passes.
   */
  'too_many_auth_failures',
  'server_restarted',
  /** A task's caller never answered its input requests (TASKLINE_INPUT_TIMEOUT_S). */
  'input_timeout',
  /** No callback reached a tool's `ctx.awaitCallback` before its deadline (docs/webhooks.md). */
  'callback_timeout',
  'internal_error',
  'unavailable',
  /** Redis replicas did not confirm an acknowledged write in time (TASKLINE_REPLICA_ACK_TIMEOUT_MS). */
  'replication_timeout',
  'stale_attempt',
  'task_terminal',
  'illegal_transition',
  /** No webhook endpoint with this id for the tenant (docs/webhooks.md). */
  'webhook_not_found',
  /**
   * A webhook URL that may not be reached: not https (TASKLINE_WEBHOOK_ALLOW_HTTP), or on a
   * private, loopback or link-local address (TASKLINE_WEBHOOK_ALLOW_PRIVATE).
   */
  'webhook_url_refused',
  /** An answer link that is not well signed, has expired, or whose question is no longer open. */
  'answer_link_refused',
  /** An answer link already used: each works once. */
  'answer_link_used',
  /** A callback URL that is not well signed, or whose task ended or never waited for it. */
  'callback_refused',
  /** A callback URL already used: each takes one callback. */
  'callback_used',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** An engine refusal: a stable `code`, a detail for people, and `details` as data for the protocol layers. */
export class TasklineError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'TasklineError';
  }
}

/**
 * RFC 9457 problem details with the stable `code` of LMSP 1.0 section 9.3, and `message`: the
 * detail again, where OpenAI's Responses API has an error's text (a failed response's
 * `error.message`, which the OpenAI SDKs read and show). It stays here because a failed task keeps
 * one, status included, in its record and its final event: stored data every surface shows as is.
 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  message: string;
}

export function problem(code: string, detail: string, status = 500): Problem {
  return {
    type: `https://taskline.dev/problems/${code}`,
    title: code.replace(/_/g, ' '),
    status,
    detail,
    code,
    message: detail,
  };
}

export function notFound(): TasklineError {
  return new TasklineError('task_not_found', 'No task with this id exists.');
}

/** Part of the events a reader asked for is no longer kept (LMSP 7.4). */
export function historyExpired(): TasklineError {
  return new TasklineError('event_history_expired', 'Events before this point are no longer kept.');
}
