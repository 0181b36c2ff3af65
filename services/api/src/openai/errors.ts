/**
 * The OpenAI error shape inside every problem+json body. OpenAI SDKs build their typed errors
 * (`BadRequestError`, `NotFoundError`, ...) from the body's `error` member (`message`, `type`,
 * `code`, `param`) whatever the media type, and show "400 status code (no body)" without it. So
 * every problem carries that member too, an RFC 9457 extension: LMSP clients read the problem,
 * OpenAI SDKs read `error`, one body and one media type for both (LMSP 1.0 section 9.3 stays whole).
 */

export interface OpenAiError {
  message: string;
  type: string;
  code: string;
  param: string | null;
}

/**
 * Codes whose request can never succeed as sent although their status is one OpenAI SDKs retry
 * by default (408, 409, 429, 5xx: a 409 is a lock timeout at OpenAI). Such a problem carries
 * `x-should-retry: false`, the header those SDKs obey, so a cancel of an ended response (or a
 * delete of one not ended) fails at once instead of after two backed-off retries. `idempotency_key_in_use` is not one: the retry
 * gets the first request's answer once it is accepted.
 */
export const NOT_RETRYABLE: ReadonlySet<string> = new Set(['task_not_cancelable', 'task_not_deletable']);

/** OpenAI's error `type` by HTTP status. */
function typeOf(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 409) return 'conflict_error';
  if (status === 422) return 'unprocessable_entity_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/**
 * A validation path as OpenAI writes one, list positions in brackets (`input[0].content`); the
 * problem's own `param` and `errors` keep LMSP's dotted form (`input.0.content`).
 */
export function openAiPath(path: readonly PropertyKey[]): string {
  return path
    .map((key, i) => (typeof key === 'number' ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`))
    .join('');
}

/** The parameter at fault: named by the validation (in OpenAI's form), or implied by the code. */
function paramOf(code: string, extra: Record<string, unknown>): string | null {
  if (typeof extra.openai_param === 'string') return extra.openai_param;
  if (typeof extra.param === 'string') return extra.param;
  if (code === 'model_not_found') return 'model';
  const errors = extra.errors as { path?: unknown }[] | undefined;
  const path = Array.isArray(errors) ? errors[0]?.path : undefined;
  return typeof path === 'string' && path !== '(body)' ? path : null;
}

export function openAiError(
  problem: { status: number; detail: string; code: string },
  extra: Record<string, unknown>,
): OpenAiError {
  return {
    message: problem.detail,
    type: typeOf(problem.status),
    code: problem.code,
    param: paramOf(problem.code, extra),
  };
}
