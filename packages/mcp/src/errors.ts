// MCP's face of the engine's error codes: the one table of the JSON-RPC error each code answers.
import type { ErrorCode } from '@taskline/engine';

/** A JSON-RPC error code and the HTTP status of the reply that carries it. */
export interface McpFailure {
  rpc: number;
  http: number;
}

/** JSON-RPC error of a request over the tenant's limits (implementation-defined server range). */
export const RATE_LIMITED_CODE = -32005;

/**
 * JSON-RPC error of a request the task store cannot take now (Redis unreachable, or answering
 * OOM, READONLY, BUSY, MASTERDOWN, LOADING...): HTTP 503 with Retry-After, `data: { code:
 * 'unavailable', reason, retryAfter }`, as LMSP's `503 unavailable`.
 */
export const UNAVAILABLE_CODE = -32006;

/** What MCP does not tell apart is the server's: -32603 Internal error, HTTP 500 ahead of the SDK. */
const INTERNAL: McpFailure = { rpc: -32603, http: 500 };
/** The caller's own request is wrong; the reply is a JSON-RPC error in an HTTP 200. */
const INVALID_PARAMS: McpFailure = { rpc: -32602, http: 200 };
const UNAVAILABLE: McpFailure = { rpc: UNAVAILABLE_CODE, http: 503 };
const OVER_LIMITS: McpFailure = { rpc: RATE_LIMITED_CODE, http: 429 };

/**
 * Every engine error code on MCP. A code added to the engine without a row here fails the build
 * (the type) and `test/error-codes.test.ts`. Unknown, expired and other tenants' tasks read the same.
 */
export const MCP_ERRORS: Readonly<Record<ErrorCode, McpFailure>> = {
  invalid_request: INTERNAL,
  unauthorized: { rpc: -32001, http: 401 },
  forbidden: INTERNAL,
  task_not_found: INVALID_PARAMS,
  model_not_found: INTERNAL,
  task_not_cancelable: INVALID_PARAMS,
  task_not_deletable: INTERNAL,
  idempotency_key_in_use: INTERNAL,
  event_history_expired: INTERNAL,
  payload_too_large: INTERNAL,
  idempotency_key_reused: INTERNAL,
  unsupported_capability: INTERNAL,
  rate_limited: OVER_LIMITS,
  too_many_auth_failures: OVER_LIMITS,
  server_restarted: INTERNAL,
  input_timeout: INTERNAL,
  callback_timeout: INTERNAL,
  internal_error: INTERNAL,
  unavailable: UNAVAILABLE,
  replication_timeout: UNAVAILABLE,
  stale_attempt: INTERNAL,
  task_terminal: INTERNAL,
  illegal_transition: INTERNAL,
  webhook_not_found: INTERNAL,
  webhook_url_refused: INTERNAL,
  answer_link_refused: INTERNAL,
  answer_link_used: INTERNAL,
  callback_refused: INTERNAL,
  callback_used: INTERNAL,
};
