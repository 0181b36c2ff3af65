/** The operator's credential, for this tab only (sessionStorage): gone when the tab closes. */
export const KEY = 'taskline-console-key';

export class Refused extends Error {}

/** GET or POST on the admin API with the operator's bearer; a problem becomes an Error with its detail. */
export async function api<T>(path: string, method = 'GET'): Promise<T> {
  const res = await fetch(`/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY) ?? ''}` },
    cache: 'no-store',
  });
  const body = (await res.json().catch(() => ({}))) as { detail?: string };
  if (res.status === 401 || res.status === 403) throw new Refused(body.detail ?? 'refused');
  if (!res.ok) throw new Error(body.detail ?? `HTTP ${res.status}`);
  return body as T;
}

/**
 * Follows an SSE stream of the admin API with the operator's bearer (EventSource cannot send
 * one), resuming after the last id seen (Last-Event-ID), as any LMSP client does, until `onEvent`
 * says the stream is over (true) or `signal` aborts. A refusal (history expired, too many
 * streams, the task gone) ends following: its reason is returned.
 */
export async function follow(
  path: string,
  onEvent: (type: string, id: number, data: Record<string, unknown>) => boolean | void,
  signal: AbortSignal,
): Promise<string | null> {
  let last: number | null = null;
  let ended = false;
  let retryMs = 1000;
  while (!ended && !signal.aborted) {
    try {
      const res = await fetch(`/admin/v1${path}`, {
        headers: {
          Authorization: `Bearer ${sessionStorage.getItem(KEY) ?? ''}`,
          ...(last === null ? {} : { 'Last-Event-ID': String(last) }),
        },
        signal,
      });
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
