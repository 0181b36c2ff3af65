// LMSP 1.0 over HTTP (section 9.3): the one table of the HTTP status each engine error code answers.
import type { ErrorCode } from '@taskline/engine/core';

/**
 * The status of every engine error code on LMSP, the OpenAI routes and the console. A code added
 * to the engine without a row here fails the build (the type) and this package's test.
 */
export const HTTP_STATUS: Readonly<Record<ErrorCode, number>> = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  task_not_found: 404,
  model_not_found: 404,
  task_not_cancelable: 409,
  task_not_deletable: 409,
  idempotency_key_in_use: 409,
  event_history_expired: 410,
  payload_too_large: 413,
  idempotency_key_reused: 422,
  unsupported_capability: 400,
  rate_limited: 429,
  too_many_auth_failures: 429,
  server_restarted: 500,
  input_timeout: 408,
  callback_timeout: 408,
  internal_error: 500,
  unavailable: 503,
  replication_timeout: 503,
  stale_attempt: 409,
  task_terminal: 409,
  illegal_transition: 409,
  webhook_not_found: 404,
  webhook_url_refused: 422,
  answer_link_refused: 403,
  answer_link_used: 410,
  callback_refused: 403,
  callback_used: 410,
};

/** Whether a code is the caller's to fix (4xx) rather than the server's (5xx). */
export function isCallersFault(code: ErrorCode): boolean {
  return HTTP_STATUS[code] < 500;
}
