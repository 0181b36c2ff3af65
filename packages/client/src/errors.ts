/**
 * Every failure the SDK reports is a `TasklineClientError` with a stable `code`: the server's
 * problem+json `code` (`task_not_found`, `rate_limited`, …) or JSON-RPC error, or one of the
 * client's own below. Callers branch on `code`, never on messages.
 */
export type ClientErrorCode =
  /** The server could not be reached (refused, reset, DNS) after the retries allowed. */
  | 'network_error'
  /** The server answered something that is not the protocol (not JSON, wrong shape). */
  | 'protocol_error'
  /** The caller's AbortSignal fired. */
  | 'aborted'
  /** A task ended `failed`; `details` holds the task's error. */
  | 'task_failed'
  /** An MCP task asked for input and no `onInput` callback was given. */
  | 'input_required'
  | (string & {});

export class TasklineClientError extends Error {
  override readonly name = 'TasklineClientError';
  constructor(
    readonly code: ClientErrorCode,
    message: string,
    /** HTTP status, when the server answered. */
    readonly status?: number,
    readonly details?: unknown,
  ) {
    super(message);
  }

  /** Worth another try with the same request (and the same Idempotency-Key). */
  get retryable(): boolean {
    // A JSON-RPC error names Taskline's code in `data.code` (MCP's -32005 is `rate_limited`).
    const code =
      this.code === 'rpc_error'
        ? (this.details as { data?: { code?: unknown } } | undefined)?.data?.code
        : this.code;
    if (code === 'network_error') return true;
    if (code === 'idempotency_key_in_use' || code === 'rate_limited') return true;
    return this.status === 502 || this.status === 503 || this.status === 504;
  }

  /**
   * The server refused this very request and will refuse it however often it is sent (its
   * Idempotency-Key reused for another body, an unknown model, …): a 4xx that is neither
   * retryable nor about the credential, which another key could fix.
   */
  get refusedForGood(): boolean {
    const status = this.status ?? 0;
    return status >= 400 && status < 500 && status !== 401 && status !== 403 && !this.retryable;
  }
}

export function abortError(): TasklineClientError {
  return new TasklineClientError('aborted', 'The operation was aborted.');
}
