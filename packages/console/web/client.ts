/** The operator's credential, for this tab only (sessionStorage): gone when the tab closes. */
export const KEY = 'taskline-console-key';

export class Refused extends Error {}

/**
 * GET or POST on the admin API with the operator's bearer; a problem becomes an Error with its
 * detail. A read that gets a "not now" answer is tried again as a stream is (`tryAgainLater`):
 * a view's first read must not show an error where its live part would have waited; `signal`
 * (the view's) stops it.
 */
export async function api<T>(
  path: string,
  { method = 'GET', signal }: { method?: string; signal?: AbortSignal } = {},
): Promise<T> {
  for (;;) {
    const res = await fetch(`/admin/v1${path}`, {
      method,
      headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY) ?? ''}` },
      cache: 'no-store',
      signal,
    });
    // Only reads: a cancel or requeue the api may have done is the operator's to send again.
    if (method === 'GET' && (await tryAgainLater(res, RETRY_MS))) continue;
    const body = (await res.json().catch(() => ({}))) as { detail?: string };
    if (res.status === 401 || res.status === 403) throw new Refused(body.detail ?? 'refused');
    if (!res.ok) throw new Error(body.detail ?? `HTTP ${res.status}`);
    return body as T;
  }
}

/** Answers that say "not now": the read or stream is tried again, never given up on. */
const TRY_AGAIN = new Set([429, 502, 503, 504]);
/** The wait before trying again when neither Retry-After nor a stream's `retry:` says one. */
const RETRY_MS = 1000;

/**
 * No replica answers now (a proxy's 502/503/504), or the api says when to come back (429, 503
 * with Retry-After): waits that long, or `retryMs`, and says true; false for any other answer.
 */
async function tryAgainLater(res: Response, retryMs: number): Promise<boolean> {
  if (!TRY_AGAIN.has(res.status)) return false;
  void res.body?.cancel().catch(() => undefined);
  const after = Number(res.headers.get('Retry-After'));
  await new Promise((r) => setTimeout(r, after > 0 ? after * 1000 : retryMs));
  return true;
}

/**
 * Follows an SSE stream of the admin API with the operator's bearer (EventSource cannot send
 * one), resuming after the last id seen (Last-Event-ID), as any LMSP client does, until `onEvent`
 * says the stream is over (true) or `signal` aborts. A cut stream, a replica gone (a proxy's
 * 502, 503 or 504) or a try-again answer (429, 503 after its Retry-After) is followed again; a
 * refusal (history expired, the task gone, the key refused) ends following: its reason is returned.
 */
export async function follow(
  path: string,
  onEvent: (type: string, id: number, data: Record<string, unknown>) => boolean | void,
  signal: AbortSignal,
): Promise<string | null> {
  let last: number | null = null;
  let ended = false;
  let retryMs = RETRY_MS;
  while (!ended && !signal.aborted) {
    try {
      const res = await fetch(`/admin/v1${path}`, {
        headers: {
          Authorization: `Bearer ${sessionStorage.getItem(KEY) ?? ''}`,
          ...(last === null ? {} : { 'Last-Event-ID': String(last) }),
        },
        signal,
      });
      if (await tryAgainLater(res, retryMs)) continue;
      // The resume point was the final event: nothing follows it.
      if (res.status === 204) return null;
      if (!res.ok || !res.body) {
        const problem = (await res.json().catch(() => ({}))) as { detail?: string };
        return problem.detail ?? `HTTP ${res.status}`;
      }
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let at: number;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, at);
          buf = buf.slice(at + 2);
          const fields = Object.fromEntries(
            frame
              .split('\n')
              .filter((l) => !l.startsWith(':') && l.includes(':'))
              .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
          );
          if (fields.retry !== undefined) retryMs = Number(fields.retry) || retryMs;
          if (fields.id === undefined || fields.data === undefined) continue;
          last = Number(fields.id);
          const type = fields.event ?? 'message';
          if (onEvent(type, last, JSON.parse(fields.data) as Record<string, unknown>) === true) ended = true;
        }
      }
    } catch {
      if (signal.aborted) return null;
    }
    if (!ended) await new Promise((r) => setTimeout(r, retryMs));
  }
  return null;
}
