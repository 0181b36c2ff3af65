/**
 * Stable error codes (LMSP 1.0 section 9.3; docs/lmsp.md). Every layer throws TasklineError with one of these; the
 * HTTP layer maps it to problem+json, the MCP layer to a JSON-RPC error.
 */
export const ERROR_CODES = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  task_not_found: 404,
  model_not_found: 404,
  task_not_cancelable: 409,
  /** A delete (OpenAI's `DELETE /responses/{id}`) of a task that has not ended: cancel it first. */
  task_not_deletable: 409,
  idempotency_key_in_use: 409,
  event_history_expired: 410,
  payload_too_large: 413,
  idempotency_key_reused: 422,
  unsupported_capability: 400,
  rate_limited: 429,
  /**
   * Too many failed authentications from the client's address (TASKLINE_AUTH_FAILURE_*): every
   * request from it is refused, whatever its credential, until the window passes.
   */
  too_many_auth_failures: 429,
  server_restarted: 500,
  /** A task's caller never answered its input requests (TASKLINE_INPUT_TIMEOUT_S). */
  input_timeout: 408,
  /** No callback reached a tool's `ctx.awaitCallback` before its deadline (docs/webhooks.md). */
  callback_timeout: 408,
  internal_error: 500,
  unavailable: 503,
  /** Redis replicas did not confirm an acknowledged write in time (TASKLINE_REPLICA_ACK_TIMEOUT_MS). */
  replication_timeout: 503,
  stale_attempt: 409,
  task_terminal: 409,
  illegal_transition: 409,
  /** No webhook endpoint with this id for the tenant (docs/webhooks.md). */
  webhook_not_found: 404,
  /**
   * A webhook URL that may not be reached: not https (TASKLINE_WEBHOOK_ALLOW_HTTP), or on a
   * private, loopback or link-local address (TASKLINE_WEBHOOK_ALLOW_PRIVATE).
   */
  webhook_url_refused: 422,
  /** An answer link that is not well signed, has expired, or whose question is no longer open. */
  answer_link_refused: 403,
  /** An answer link already used: each works once. */
  answer_link_used: 410,
  /** A callback URL that is not well signed, or whose task ended or never waited for it. */
  callback_refused: 403,
  /** A callback URL already used: each takes one callback. */
  callback_used: 410,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class TasklineError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'TasklineError';
  }

  get status(): number {
    return ERROR_CODES[this.code];
  }
}

/**
 * RFC 9457 problem details with the stable `code` of LMSP 1.0 section 9.3, and `message`: the
 * detail again, where OpenAI's Responses API has an error's text (a failed response's
 * `error.message`, which the OpenAI SDKs read and show).
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
