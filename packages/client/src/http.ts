// The client's HTTP transport: requests, problem+json errors, `Retry-After` waits.
import { systemClock, type Clock } from './clock.js';
import { abortError, TasklineClientError } from './errors.js';

export interface TransportOptions {
  /** Bearer token: a static key, an API key from `taskline keys create`, or a JWT. */
  apiKey?: string;
  /** The JWT claim naming the tenant, as the server's TASKLINE_JWT_TENANT_CLAIM (see `credentialId`). */
  jwtTenantClaim?: string;
  /** Injected for tests and proxies; defaults to the global fetch. */
  fetch?: typeof fetch;
  clock?: Clock;
  /** In [0, 1); injected so jitter is reproducible in tests. */
  random?: () => number;
  /** Tries for one request when the failure is retryable (network, 429, 503, in-use key). */
  maxAttempts?: number;
  /**
   * The longest `Retry-After` (seconds) the client waits out before another try (default
   * `DEFAULT_MAX_RETRY_AFTER_S`). A longer one fails the request at once, its error saying when
   * to try again: a server or proxy asking for hours would otherwise hold the caller that long.
   */
  maxRetryAfterS?: number;
}

/** Twice the longest `Retry-After` Taskline sends (its 60 s auth-failure window). */
export const DEFAULT_MAX_RETRY_AFTER_S = 120;

export interface Transport {
  readonly fetch: typeof fetch;
  readonly clock: Clock;
  readonly random: () => number;
  readonly maxAttempts: number;
  readonly maxRetryAfterS: number;
  headers(extra?: Record<string, string>): Record<string, string>;
  /**
   * The wait before retry number `attempt` (1-based) after `failure`: its `Retry-After` if the
   * server gave one, else jittered doubling. Throws `failure`, told when to retry, when its
   * `Retry-After` is longer than `maxRetryAfterS`.
   */
  retryDelay(attempt: number, failure?: unknown): number;
}

export function transport(o: TransportOptions): Transport {
  const random = o.random ?? Math.random;
  const clock = o.clock ?? systemClock;
  const maxRetryAfterS = o.maxRetryAfterS ?? DEFAULT_MAX_RETRY_AFTER_S;
  return {
    fetch: o.fetch ?? globalThis.fetch.bind(globalThis),
    clock,
    random,
    maxAttempts: o.maxAttempts ?? 6,
    maxRetryAfterS,
    headers: (extra = {}) => ({
      ...(o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {}),
      ...extra,
    }),
    retryDelay(attempt, failure) {
      const retryAfterS = (failure as { retryAfterS?: number } | undefined)?.retryAfterS;
      if (retryAfterS !== undefined && retryAfterS > maxRetryAfterS && failure instanceof TasklineClientError)
        throw tooLongToWait(failure, retryAfterS, maxRetryAfterS, clock.now());
      if (retryAfterS !== undefined) return Math.max(0, retryAfterS) * 1000;
      return Math.min(250 * 2 ** (attempt - 1), 5000) * (1 + 0.2 * random());
    },
  };
}

/** `failure`, its message saying when to try again instead of the client sleeping that long. */
function tooLongToWait(
  failure: TasklineClientError,
  retryAfterS: number,
  maxS: number,
  now: number,
): TasklineClientError {
  const at = new Date(now + retryAfterS * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  const err = new TasklineClientError(
    failure.code,
    `${failure.message} The server asks to retry after ${retryAfterS} s (at ${at}), longer than the ${maxS} s this client waits; try again then.`,
    failure.status,
    failure.details,
  );
  return Object.assign(err, { retryAfterS });
}

/** A fetch that reports unreachable servers and aborts as TasklineClientError. */
export async function send(t: Transport, url: string, init: RequestInit): Promise<Response> {
  try {
    return await t.fetch(url, init);
  } catch (err) {
    if (init.signal?.aborted) throw abortError();
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new TasklineClientError(
      'network_error',
      `Cannot reach ${new URL(url).origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`,
    );
  }
}

/** Turns a non-2xx reply into the server's problem+json code, or a generic one named by status. */
export async function problemOf(res: Response): Promise<TasklineClientError> {
  const text = await res.text().catch(() => '');
  const body = parseJson(text) as { code?: unknown; detail?: unknown; title?: unknown } | null;
  const code = typeof body?.code === 'string' ? body.code : `http_${res.status}`;
  const detail =
    typeof body?.detail === 'string'
      ? body.detail
      : typeof body?.title === 'string'
        ? body.title
        : `HTTP ${res.status} ${res.statusText}`.trim();
  return withRetryAfter(new TasklineClientError(code, detail, res.status, body ?? text), res);
}

/**
 * Notes the reply's `Retry-After` on `err`, in seconds, for the wait before another try: delta-
 * seconds, or an HTTP-date (RFC 9110 section 10.2.3) counted from the reply's own `Date`, so that
 * the server's clock and the client's never mix (from the client's clock only without one).
 */
export function withRetryAfter(err: TasklineClientError, res: Response): TasklineClientError {
  const value = res.headers.get('retry-after');
  if (value === null) return err;
  const delta = Number(value);
  const seconds =
    value.trim() !== '' && Number.isFinite(delta)
      ? delta
      : Math.ceil((Date.parse(value) - (Date.parse(res.headers.get('date') ?? '') || Date.now())) / 1000);
  if (Number.isFinite(seconds)) (err as { retryAfterS?: number }).retryAfterS = Math.max(0, seconds);
  return err;
}

/**
 * Sends a request, retrying what is safe to retry: every failure `retryable` says so, as long as
 * `idempotent` (a GET, a cancel, or a create carrying an Idempotency-Key).
 */
export async function requestJson<T>(
  t: Transport,
  url: string,
  init: RequestInit & { idempotent: boolean },
): Promise<{ body: T; response: Response }> {
  for (let attempt = 1; ; attempt++) {
    let failure: TasklineClientError;
    try {
      const res = await send(t, url, init);
      if (res.ok) {
        const text = await res.text();
        try {
          return { body: JSON.parse(text) as T, response: res };
        } catch {
          throw new TasklineClientError(
            'protocol_error',
            `${url} answered ${res.status} with a body that is not JSON.`,
          );
        }
      }
      failure = await problemOf(res);
    } catch (err) {
      if (!(err instanceof TasklineClientError)) throw err;
      failure = err;
    }
    if (!init.idempotent || !failure.retryable || attempt >= t.maxAttempts) throw failure;
    await t.clock.sleep(t.retryDelay(attempt, failure), init.signal ?? undefined);
  }
}

function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}
