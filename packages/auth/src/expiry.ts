// Timers that fire when a credential (a JWT's `exp`) stops being accepted.
import { problem } from '@taskline/engine/core';
import { HTTP_STATUS } from '@taskline/lmsp';

/** setTimeout's longest delay (2^31-1 ms, about 24.8 days): a longer one would fire at once. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * Calls `expired` once `expiresAt` (ms since the epoch) has passed, unless the returned function
 * is called first; nothing when there is no expiry. One timer at a time, unref'd (a stream it
 * watches holds the process up, not the timer), re-armed when the expiry lies beyond the longest
 * delay a timer takes.
 */
export function whenExpired(expiresAt: number | undefined, expired: () => void): () => void {
  if (expiresAt === undefined) return () => undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    const left = expiresAt - Date.now();
    timer = setTimeout(
      () => (expiresAt > Date.now() ? arm() : expired()),
      Math.min(Math.max(left, 0), MAX_DELAY_MS),
    );
    timer.unref();
  };
  arm();
  return () => clearTimeout(timer);
}

/**
 * The last event of an LMSP or console stream ended because the JWT that opened it expired: an
 * `error` event whose data is the problem (RFC 9457) a request with that token now gets. It has
 * no `id:`: the resume point stays the last event's, for a reconnect with a fresh token.
 */
export const EXPIRED_EVENT = `event: error\ndata: ${JSON.stringify(
  problem(
    'unauthorized',
    'The bearer token that opened this stream has expired; reconnect with a fresh one (Last-Event-ID resumes it).',
    HTTP_STATUS.unauthorized,
  ),
)}\n\n`;
